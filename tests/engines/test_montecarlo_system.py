"""The Monte Carlo engine on any system: three actions, a baseline action, a System as
input; agreement with the exact engine on the example clinic (which has a tabular model)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines._mc_base import sample_actions

ROOT = Path(__file__).resolve().parents[2]
POLICY = np.tile([0.2, 0.5, 0.3], (2, 5, 1))


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    d = tmp_path_factory.mktemp("own")
    shutil.copy(ROOT / "docs" / "examples" / "clinic.py", d / "clinic.py")
    yield cf.systems.make("clinic:make_clinic", search_path=d)
    sys.modules.pop("clinic", None)


def test_inverse_cdf_sampling_hits_each_action_with_its_probability():
    probs = np.array([[0.2, 0.5, 0.3], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    u = np.array([0.1, 0.99, 0.999])
    assert sample_actions(probs, u).tolist() == [0, 2, 0]
    assert sample_actions(probs[:1], np.array([0.2]))[0] == 1  # boundary: [0.2, 0.7) -> 1
    rng = np.random.default_rng(0)
    d = sample_actions(np.tile(probs[0], (200_000, 1)), rng.random(200_000))
    assert np.bincount(d, minlength=3) / d.size == pytest.approx(probs[0], abs=0.005)


def test_three_actions_agree_with_the_exact_engine(clinic):
    pol = cf.TablePolicy(POLICY, n_actions=3)
    ex = cf.decompose(clinic.tabular, pol, clinic.horizon)
    mc = cf.decompose_mc(clinic, pol, n=50_000, seed=3)
    assert mc.horizon == clinic.horizon and mc.groups == ("urban", "rural")
    for k in ("C", "DPE", "IPE", "SPE"):
        assert abs(getattr(mc, k) - getattr(ex, k)) < 5 * mc.se[k], k


def test_the_baseline_policy_has_zero_direct_and_indirect_effect_exactly(clinic):
    """pi = pi0: the fork and pi0 take the same action as pi with the same noise, so the
    per-individual differences are exactly 0 (common random numbers)."""
    mc = cf.decompose_mc(clinic, cf.parse_policy("never", clinic), n=2_000, seed=0)
    assert mc.DPE == 0.0 and mc.IPE == 0.0 and mc.se["DPE"] == 0.0


def test_a_two_action_policy_on_three_actions_is_refused(clinic):
    with pytest.raises(cf.errors.PolicyError, match="the system has 3 actions"):
        cf.decompose_mc(clinic, cf.ConstantPolicy(0.5), n=100)


@pytest.mark.slow
def test_exact_inside_the_95_ci_in_90_to_99_percent_of_seeds(clinic):
    pol = cf.TablePolicy(POLICY, n_actions=3)
    ex = cf.decompose(clinic.tabular, pol, clinic.horizon)
    hits = {k: 0 for k in ("C", "DPE", "IPE", "SPE")}
    seeds = range(200)
    for seed in seeds:
        ci = cf.decompose_mc(clinic, pol, n=4_000, seed=seed, check=False).conf_int(0.05)
        for k in hits:
            hits[k] += ci.loc[k, "lower"] <= getattr(ex, k) <= ci.loc[k, "upper"]
    for k, h in hits.items():
        assert 0.90 <= h / len(seeds) <= 0.99, (k, h)


def test_benefit_by_forks_agrees_with_the_exact_lambda(clinic):
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    pol = cf.TablePolicy(np.array([[[0.2, 0.5, 0.3]] * 5, [[0.5, 0.3, 0.2]] * 5]), n_actions=3)
    ex = cf.benefit_fairness(clinic.tabular, pol, clinic.horizon)
    b = benefit_fairness_mc(clinic, pol, n=5_000, seed=1, n_boot=100)
    assert b.method == "mc" and b.cells == "levels" and b.ci[0] <= b.Lambda <= b.ci[1]
    assert abs(b.Lambda - ex.Lambda) < 4 * b.se
    # the benefit table is the exact one up to Monte Carlo error
    assert np.abs(b.delta - ex.delta).max() < 0.03
    again = benefit_fairness_mc(clinic, pol, n=5_000, seed=1, n_boot=100)
    assert again.Lambda == b.Lambda and again.ci == b.ci  # same seed, same numbers


def test_benefit_by_forks_pairs_feature_bins_without_levels():
    """A simulator that observes only a continuous feature: cells are its quantile bins."""
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    class Drift:
        n_groups = 2
        feature_names = ("score",)

        def reset(self, n, group, rng):
            g = np.broadcast_to(np.asarray(group), (n,)).copy()
            return (rng.normal(size=n) + 0.5 * g, g)

        def observe(self, state):
            return cf.Observation(group=state[1], features=state[0][:, None])

        def draw_noise(self, n, rng):
            return rng.normal(size=n)

        def step(self, state, d, noise):
            x, g = state
            gain = 0.1 * noise + np.asarray(d, dtype=float) * (0.5 - 0.2 * g)
            return cf.StepResult(state=(x + gain, g), reward=np.zeros(x.shape[0]), gain=gain)

    sys_ = cf.as_system(Drift(), id="drift")
    b = benefit_fairness_mc(sys_, cf.ConstantPolicy(0.7), 5, n=3_000, bins=3, n_boot=50)
    assert b.cells.startswith("joint quantile bins of score (3 cells)")
    # benefit 0.5 for s+ and 0.3 for s- everywhere; same policy: Lambda = 0
    assert np.allclose(b.delta[0], 0.5) and np.allclose(b.delta[1], 0.3)
    assert b.Lambda == pytest.approx(0.0, abs=1e-12)


@pytest.mark.slow
def test_benefit_by_forks_covers_the_exact_lambda(clinic):
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    pol = cf.TablePolicy(np.array([[[0.2, 0.5, 0.3]] * 5, [[0.5, 0.3, 0.2]] * 5]), n_actions=3)
    ex = cf.benefit_fairness(clinic.tabular, pol, clinic.horizon).Lambda
    hits = sum(b.ci[0] <= ex <= b.ci[1] for b in (
        benefit_fairness_mc(clinic, pol, n=4_000, seed=s, n_boot=100) for s in range(50)))
    assert 0.85 <= hits / 50 <= 1.0, hits


class _Pair:
    """Two coupled units per world (unit 0 in group 0, unit 1 in group 1): each unit's
    gain is its own action + half its neighbour's + 0.1 of its state + noise."""

    n_groups = 2
    feature_names = ("x",)
    units_per_replica = 2

    def reset(self, n, group, rng):
        return (np.zeros(2 * n), 0)

    def observe(self, s):
        x, t = s
        return cf.Observation(group=np.tile([0, 1], x.shape[0] // 2), features=x[:, None], t=t)

    def draw_noise(self, n, rng):
        return rng.standard_normal(n)

    def step(self, s, d, noise):
        x, t = s
        d = np.asarray(d, dtype=float)
        other = d.reshape(-1, 2)[:, ::-1].reshape(-1)
        gain = d + 0.5 * other + 0.1 * x + noise
        return cf.StepResult(state=(x + gain, t + 1), reward=d.copy(), gain=gain)


class _ByGroup:
    name = "by-group"

    def __init__(self, p):
        self.p = np.asarray(p)

    def action_probs(self, obs):
        p1 = self.p[obs.group]
        return np.stack([1 - p1, p1], axis=1)


def test_coupled_units_against_a_hand_computation():
    """T = 2, P(act) = 0.8 (group 0) and 0.2 (group 1): q_g = p_g + p_other / 2, so
    V = 2.1 q, V^PS = 0.1 q, V^pi0 = 0; C = 2.1 (q0 - q1) = 0.63, DPE = 0.6, IPE = 0.03,
    SPE = 0 (derivation in the docstring of _Pair)."""
    system = cf.System(id="pair", groups=("a", "b"), simulator=_Pair, features=("x",),
                       units_per_replica=2, horizon=2)
    res = cf.decompose_mc(system, _ByGroup([0.8, 0.2]), n=40_000, seed=0)
    want = {"C": 0.63, "DPE": 0.6, "IPE": 0.03, "SPE": 0.0}
    for k, v in want.items():
        assert abs(getattr(res, k) - v) < 4 * res.se[k], (k, getattr(res, k), res.se[k])
    assert res.V == pytest.approx([2.1 * 0.9, 2.1 * 0.6], abs=0.05)
    # C = DPE + IPE + SPE holds exactly for the estimates, and the pi0 world has no policy
    assert res.C == pytest.approx(res.DPE + res.IPE + res.SPE, abs=1e-12)
    again = cf.decompose_mc(system, _ByGroup([0.8, 0.2]), n=40_000, seed=0)
    assert again.C == res.C and again.se == res.se


@pytest.mark.slow
def test_coupled_units_ci_covers_the_hand_computed_values():
    system = cf.System(id="pair", groups=("a", "b"), simulator=_Pair, features=("x",),
                       units_per_replica=2, horizon=2)
    hits = {"C": 0, "DPE": 0, "IPE": 0}
    want = {"C": 0.63, "DPE": 0.6, "IPE": 0.03}
    for seed in range(100):
        ci = cf.decompose_mc(system, _ByGroup([0.8, 0.2]), n=2_000, seed=seed).conf_int(0.05)
        for k in hits:
            hits[k] += ci.loc[k, "lower"] <= want[k] <= ci.loc[k, "upper"]
    assert all(88 <= h <= 99 for h in hits.values()), hits


def test_an_audit_spec_runs_on_coupled_units(tmp_path):
    system = cf.System(id="pair", groups=("a", "b"), simulator=_Pair, features=("x",),
                       units_per_replica=2, horizon=2)
    res = cf.audit({"name": "pair", "thresholds": {"abs_C": 1.0}, "engine": {"n": 4000}},
                   system=system, policy=_ByGroup([0.8, 0.2]))
    assert res.decomposition.engine == "mc"
    # benefit by unit-alone forks: a unit acting alone gains exactly 1 more than when nobody
    # acts (its own action; the neighbour's half is not there), in every state, so
    # Lambda = eps |0.8 - 0.2| / (eps + 0) summed over the visitation weights = 0.6
    assert np.allclose(res.benefit.delta, 1.0, atol=1e-12)
    assert res.benefit.Lambda == pytest.approx(0.6, abs=1e-12)
    assert res.passed  # |C| = 0.63 (+- 0.04) <= 1
    out = res.write_report(tmp_path / "rep")
    assert "benefit" in (out / "report.md").read_text()

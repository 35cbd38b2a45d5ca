"""The attention-allocation systems: ml-fairness-gym's dynamics with the
published parameters, the greedy placement of the RL wrappers, IPE = 0 exactly (a site's
gain without attention does not depend on its state), and the Gymnasium environments."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import poisson

import causalfair as cf
from causalfair.systems.attention import (
    ATTENTION_DEFAULTS,
    AttentionSimulator,
    AttentionState,
    allocate,
)
from tests.conftest import check_gym_env, gym_episode


def test_the_sites_are_the_groups_and_no_attention_is_not_allowed():
    # the published parameters: tests/systems/test_published_params.py (against the source)
    s = cf.systems.make("attention-1")
    assert s.units_per_replica == 5 and len(s.groups) == 5 and s.decisions.baseline == 0
    assert 0 not in s.decisions.allowed  # "no attention anywhere" breaks the budget


def _greedy(w, units):
    """The wrappers' placement, one row at a time in plain Python."""
    total = sum(w)
    if total <= 0:
        return [0] * len(w)
    share = [x / total for x in w]
    out = [0] * len(w)
    for _ in range(units):
        k = max(range(len(w)), key=lambda i: (share[i], -i))
        out[k] += 1
        share[k] -= 1.0 / units
    return out


def test_greedy_placement():
    assert allocate(np.ones((1, 5)), 6).tolist() == [[2, 1, 1, 1, 1]]
    assert allocate(np.array([[1.0, 0, 0, 0, 0]]), 6).tolist() == [[6, 0, 0, 0, 0]]
    assert allocate(np.zeros((1, 5)), 6).tolist() == [[0] * 5]
    w = np.random.default_rng(0).integers(0, 5, (300, 5)).astype(float)
    got = allocate(w, 30)
    assert got.tolist() == [_greedy(list(r), 30) for r in w]
    assert (got.sum(1)[w.sum(1) > 0] == 30).all()


def test_poisson_incidents_by_inverse_cdf():
    from causalfair.systems.attention import poisson_inverse

    rng = np.random.default_rng(5)
    lam = np.concatenate([rng.uniform(0, 60, 20000), [0.0, 600.0, 1e-9]])
    u = rng.random(lam.shape[0])
    y = poisson_inverse(u, lam)
    ref = np.where(lam > 0, poisson.ppf(u, lam), 0.0)
    assert (y != ref).mean() < 1e-3  # equal but for rounding at a step of the CDF
    assert np.abs(y - ref).max() <= 1
    # monotone in u: the same uniform is the same luck
    v = np.sort(rng.random(1000))
    assert (np.diff(poisson_inverse(v, np.full(1000, 7.5))) >= 0).all()


def test_one_step_equals_a_hand_computation():
    p = ATTENTION_DEFAULTS["attention-harder"]
    sim = AttentionSimulator(p["units"], p["rates"], p["increase"], p["decrease"],
                             p["reward_seen"], p["reward_missed"])
    rng = np.random.default_rng(3)
    for _ in range(20):
        rate = rng.uniform(0, 40, 5)
        rate[rng.integers(5)] = 0.0
        w = rng.integers(0, 4, 5)
        u = rng.random(5)
        s = AttentionState(rate=rate, seen=np.zeros(5), attention=np.zeros(5),
                           group=np.arange(5), t=0)
        res = sim.step(s, w, u)
        a = _greedy(list(w.astype(float)), 30)
        for k in range(5):
            y = poisson.ppf(u[k], rate[k]) if rate[k] > 0 else 0.0  # scipy's quantile
            want = rate[k] + p["increase"][k] if a[k] == 0 else max(
                0.0, rate[k] - p["decrease"][k] * a[k])
            assert res.state.rate[k] == pytest.approx(want, abs=1e-12)
            # ELBERT's harder reward: minus a quarter of the incidents missed
            assert res.reward[k] == pytest.approx(-0.25 * (y - min(a[k], y)), abs=1e-12)
            assert res.gain[k] == pytest.approx(rate[k] - want)


class Random:
    """Random priorities, from what the sites showed (a stochastic policy)."""

    name = "random"

    def action_probs(self, obs):
        n = obs.group.shape[0]
        p = np.full((n, 5), 0.25)
        p[:, 0] = 0.0
        return p


@pytest.mark.parametrize("sid", ["attention-1", "attention-harder"])
def test_ipe_is_exactly_zero_and_spe_is_the_drift_gap(sid):
    system = cf.systems.make(sid)
    T = system.horizon
    up = ATTENTION_DEFAULTS[sid]["increase"]
    for pol in (Random(), cf.parse_policy("action:4", system)):
        d = cf.decompose_mc(system, pol, n=300, seed=1)
        a, b = d.pair
        # zero up to rounding: lambda - (lambda + up) is up only to the last bit of lambda
        assert abs(d.IPE) < 1e-12 and d.se["IPE"] < 1e-12
        if isinstance(pol, Random):  # a random policy's C varies; its IPE still does not
            assert d.se["C"] > 1e-3
        assert d.SPE == pytest.approx(-T * (up[a] - up[b]), abs=1e-9)
        assert d.C == pytest.approx(d.DPE + d.SPE, abs=1e-12)
        assert d.V_0 == pytest.approx(-T * np.array(up), abs=1e-9)  # pi0: no attention
        again = cf.decompose_mc(system, pol, n=300, seed=1)
        assert again.estimates() == d.estimates()


def test_gymnasium_environments_pass_both_checkers_and_are_seeded():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the published Box(-3, 3) actions
        for env_id in ("causalfair/Attention-v0", "causalfair/AttentionHarder-v0"):
            check_gym_env(env_id)
    runs = [gym_episode("causalfair/Attention-v0", seed, 30,
                        lambda env, t: np.linspace(-1, 1, 5) * (t % 3 - 1),
                        lambda r, info: info["rates"].tolist())[0] for seed in (2, 2, 3)]
    assert runs[0] == runs[1] and runs[0] != runs[2]


class _Coin:
    """A toy world of two units (one per group) whose supply is the action taken and
    whose demand is 1 each step: its benefit rate is the group's approval probability."""

    n_groups = 2

    def reset(self, n, group, rng):
        return np.zeros(2 * n)

    def observe(self, s):
        return cf.Observation(group=np.tile([0, 1], s.shape[0] // 2), level=np.zeros(
            s.shape[0], dtype=int))

    def draw_noise(self, n, rng):
        return np.zeros(n)

    def step(self, s, d, noise):
        d = np.asarray(d, dtype=np.float64)
        return cf.StepResult(state=s, reward=d, gain=d,
                             info={"supply": d, "demand": np.ones_like(d)})


class _Half:
    name = "p"

    def action_probs(self, obs):
        p1 = np.where(obs.group == 0, 0.3, 0.8)
        return np.stack([1 - p1, p1], axis=1)


def test_elbert_benefit_rate_bias_and_its_standard_error_by_hand():
    system = cf.System(id="coin", groups=("a", "b"), simulator=_Coin, units_per_replica=2,
                       features=None, levels=("0",), horizon=4)
    n, T = 20000, 4
    d = cf.decompose_mc(system, _Half(), T, n=n, seed=0)
    nt = d.notions
    assert abs(nt["benefit_rate[a]"] - 0.3) < 4 * math.sqrt(0.21 / (n * T))
    assert abs(nt["benefit_rate[b]"] - 0.8) < 4 * math.sqrt(0.16 / (n * T))
    se = math.sqrt((0.3 * 0.7 + 0.8 * 0.2) / T / n)
    assert nt["elbert_bias"] == pytest.approx(nt["benefit_rate[b]"] - nt["benefit_rate[a]"])
    assert nt["elbert_bias_se"] == pytest.approx(se, rel=0.05)
    # here the gain is the action too: the group gap in gains is the same contrast
    assert nt["elbert_bias"] == pytest.approx(-d.C / T, abs=1e-12)


def test_an_audit_gates_elbert_bias_with_its_interval(tmp_path):
    spec = tmp_path / "a.toml"
    spec.write_text('name = "a"\n[system]\nid = "attention-1"\n[policy]\nbuiltin = "action:4"\n'
                    '[engine]\nkind = "mc"\nn = 400\n[thresholds]\nelbert_bias = 0.1\n')
    res = cf.audit(spec)
    v = res.verdicts[0]
    assert v.key == "elbert_bias" and v.lower < v.estimate < v.upper and v.status == "FAIL"
    assert v.estimate == res.decomposition.notions["elbert_bias"]

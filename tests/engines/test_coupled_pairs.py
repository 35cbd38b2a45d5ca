"""Coupled units with more than two groups: every pair's standard error is paired (the
per-world difference's, which the engine keeps for every pair, ``Decomposition.paired_var``,
made as the compared pair's own se), so the pairs table's row of the compared pair has the decomposition's
own interval bit for bit, and ``abs_C`` and ``max_abs_C`` judge that pair alike
(docs/decomposition.md, "More than two groups")."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines import groups as groups_mod
from causalfair.engines._mc_base import Moments, PairMoments, paired_cov
from causalfair.engines.groups import compare
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import InputError, ResourceLimitError
from tests.engines.test_groups import P, tri_model


class _World:
    """K coupled units per world, unit g in group g: each unit's gain is its own action +
    half the mean of the others' + 0.1 of its state + a shock the world shares + 0.3 of its
    own noise. With P(act) = p_g, q_g = p_g + mean of the others' p / 2 and T = 2:
    V_g = 2.1 q_g, V^PS_g = 0.1 q_g, V^pi0_g = 0, so C(a-b) = 2.1 (q_a - q_b),
    DPE = 2 (q_a - q_b), IPE = 0.1 (q_a - q_b), SPE = 0."""

    def __init__(self, K: int = 3) -> None:
        self.K = self.n_groups = self.units_per_replica = K

    def reset(self, n, group, rng):
        return (np.zeros(self.K * n), 0)

    def observe(self, s):
        x, t = s
        return cf.Observation(group=np.tile(np.arange(self.K), x.shape[0] // self.K), t=t)

    def draw_noise(self, n, rng):
        return 0.3 * rng.standard_normal(n) + np.repeat(rng.standard_normal(n // self.K), self.K)

    def step(self, s, d, noise):
        x, t = s
        d = np.asarray(d, dtype=float)
        w = d.reshape(-1, self.K)
        others = ((w.sum(axis=1, keepdims=True) - w) / (self.K - 1)).reshape(-1)
        gain = d + 0.5 * others + 0.1 * x + noise
        return cf.StepResult(state=(x + gain, t + 1), reward=d.copy(), gain=gain)


class _ByGroup:
    name = "by-group"

    def __init__(self, p):
        self.p = np.asarray(p)

    def action_probs(self, obs):
        p1 = self.p[obs.group]
        return np.stack([1 - p1, p1], axis=1)


P3 = (0.8, 0.5, 0.2)


def _trio() -> cf.System:
    return cf.System(id="trio", groups=("a", "b", "c"), simulator=_World,
                     units_per_replica=3, horizon=2)


def test_the_compared_pairs_row_has_its_interval_and_both_thresholds_agree():
    """The compared pair (a-c, the largest and smallest V^pi) is judged by abs_C on the
    decomposition and by max_abs_C on the pairs table: one number, one interval, one
    verdict (before: the table's se_a + se_b, 3.6 times the paired se, so abs_C PASSED and
    max_abs_C was INCONCLUSIVE at 1.2)."""
    res = cf.audit({"name": "trio", "thresholds": {"abs_C": 1.2, "max_abs_C": 1.2},
                    "engine": {"kind": "mc", "n": 400, "seed": 1}},
                   system=_trio(), policy=_ByGroup(P3))
    dec, g = res.decomposition, res.group_comparison
    assert dec.pair == (0, 2) and g.chosen == "c-a" and g.coupled and g.paired
    lo, hi = dec.intervals(dec.alpha)["C"]
    row = g.pairs["c-a"]["C"]  # the same pair as c - a: the interval flipped, bit for bit
    assert (row[0], row[1], row[2], row[3]) == (-dec.C, -hi, -lo, dec.se["C"])
    for key in ("DPE", "IPE", "SPE"):
        assert g.pairs["c-a"][key][3] == dec.se[key], key
    by = {v.key: v for v in res.verdicts}
    assert by["abs_C"].status == by["max_abs_C"].status == "PASS"
    assert (by["abs_C"].lower, by["abs_C"].upper) == (by["max_abs_C"].lower,
                                                      by["max_abs_C"].upper)
    # every threshold judges the pair alike: just above, between and below its interval
    for t in (hi + 1e-9, (lo + hi) / 2, lo - 1e-9):
        r = cf.audit({"name": "trio", "thresholds": {"abs_C": t, "max_abs_C": t},
                      "engine": {"kind": "mc", "n": 400, "seed": 1}},
                     system=_trio(), policy=_ByGroup(P3))
        st = {v.key: v.status for v in r.verdicts}
        assert st["abs_C"] == st["max_abs_C"], (t, st)


def test_every_pair_gets_the_se_it_would_have_as_the_compared_pair():
    """The row of a pair the decomposition does not compare has the se that pair gets when
    it is named (the same worlds: the same covariance, the same formula), far below the
    se_a + se_b bound here (the world's shock cancels within a world)."""
    sy, pol = _trio(), _ByGroup(P3)
    g = compare(decompose_mc(sy, pol, n=400, seed=1), coupled=True)
    for (a, b), name in (((1, 0), "b-a"), ((1, 2), "b-c"), ((2, 0), "c-a")):
        named = decompose_mc(sy, pol, n=400, seed=1, pair=(a, b))
        assert g.pairs[name]["C"][3] == named.se["C"], name
        assert g.pairs[name]["DPE"][3] == named.se["DPE"], name
        bound = g.per_group[sy.groups[a]]["V"][3] + g.per_group[sy.groups[b]]["V"][3]
        assert g.pairs[name]["C"][3] < bound / 2, name
    # a decomposition of coupled units made without the covariances keeps the bound
    dec = decompose_mc(sy, pol, n=400, seed=1)
    bare = compare(replace(dec, paired_var=None), coupled=True)
    assert not bare.paired
    assert bare.pairs["b-a"]["C"][3] == pytest.approx(
        bare.per_group["b"]["V"][3] + bare.per_group["a"]["V"][3])
    assert "per-world difference" in "\n".join(g.table_lines())
    assert "se_X + se_Y" in "\n".join(bare.table_lines())


def test_independent_groups_keep_the_root_of_the_sum_of_squares():
    dec = decompose_mc(tri_model(), cf.TablePolicy(P), 2, n=2000, seed=0)
    assert dec.paired_var is None  # groups simulated apart: nothing paired
    g = compare(dec)
    for name in ("B-A", "C-A", "B-C"):
        a, b = name.split("-")
        sa, sb = g.per_group[a]["V"][3], g.per_group[b]["V"][3]
        assert g.pairs[name]["C"][3] == math.sqrt(sa * sa + sb * sb)


def test_pair_moments_have_the_bits_of_one_moments_per_pair():
    """Every pair's variance has the bits one :class:`Moments` of its differences gives (the
    arithmetic the compared pair's se always had), and the covariance made from them is
    numpy's."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 4)) @ rng.standard_normal((4, 4)) + 3.0
    pm, own = PairMoments(4), [Moments() for _ in range(4)]
    diff = {(a, b): Moments() for a in range(4) for b in range(4) if a != b}
    for lo in range(0, 1000, 137):  # uneven batches, folded in order
        pm.add(x[lo:lo + 137])
        for g in range(4):
            own[g].add(x[lo:lo + 137, g])
        for (a, b), m in diff.items():
            m.add(x[lo:lo + 137, a] - x[lo:lo + 137, b])
    pv = pm.paired_var(own)
    assert np.array_equal(pv, pv.T)
    for (a, b), m in diff.items():
        assert pv[a, b] == m.var / m.n, (a, b)
    assert [pv[g, g] for g in range(4)] == [o.var / o.n for o in own]
    assert paired_cov(pv) == pytest.approx(np.cov(x, rowvar=False) / 1000, rel=1e-9)


def test_same_numbers_on_one_and_two_threads():
    sy, pol = _trio(), _ByGroup(P3)
    one = decompose_mc(sy, pol, n=300, seed=2, batch_size=40, jobs=1)
    two = decompose_mc(sy, pol, n=300, seed=2, batch_size=40, jobs=2)
    assert one.se == two.se and np.array_equal(one.V, two.V)
    for k in one.paired_var:
        assert np.array_equal(one.paired_var[k], two.paired_var[k]), k
    assert compare(one, coupled=True).pairs == compare(two, coupled=True).pairs


def test_intersections_of_coupled_groups_are_paired():
    """Groups that are the product of two attributes: a marginal value pools groups of the
    same worlds, so its se and its pairs' come from their covariance (w' cov w)."""
    sy = cf.System(id="quad", groups=("A/F", "A/M", "B/F", "B/M"),
                   simulator=lambda: _World(4), units_per_replica=4, horizon=2,
                   group_attributes={"race": ("A", "B"), "sex": ("F", "M")})
    dec = decompose_mc(sy, _ByGroup([0.8, 0.6, 0.4, 0.2]), n=300, seed=0)
    g = compare(dec, coupled=True, attributes=sy.group_attributes)
    race = g.attributes["race"]
    w = np.asarray(dec.group_weights)
    wa, wb = np.r_[w[:2] / w[:2].sum(), 0, 0], np.r_[0, 0, w[2:] / w[2:].sum()]
    c, cov = wa - wb, paired_cov(dec.paired_var["V"])
    assert race["pairs"]["B-A"]["C"][3] == pytest.approx(math.sqrt(c @ cov @ c), rel=1e-12)
    assert race["per_value"]["A"]["V"][3] == pytest.approx(math.sqrt(wa @ cov @ wa), rel=1e-12)
    bound = race["per_value"]["A"]["V"][3] + race["per_value"]["B"]["V"][3]
    assert race["pairs"]["B-A"]["C"][3] < bound / 2


def test_the_covariances_count_in_the_memory_check(monkeypatch):
    """45 groups: 990 pairs of 4096 bytes (3.9 MiB) fit 4 MiB; groups that share worlds also
    keep 8 * 14 G^2 bytes of paired variances (0.2 MiB) and are refused, naming them."""
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "4M")
    groups_mod.check_pairs(45)
    with pytest.raises(ResourceLimitError, match=r"45 groups .* 990 pairs \(groups that "
                       r"share worlds: G x G paired variances\).*merge groups"):
        groups_mod.check_pairs(45, coupled=True)
    # every door counts them before its engines run: compare_groups, an audit spec
    many = cf.System(id="many", groups=tuple(f"g{i}" for i in range(45)),
                     simulator=lambda: _World(45), units_per_replica=45, horizon=2)
    ran = []
    monkeypatch.setattr("causalfair.engines.choice._decompose", lambda *a, **k: ran.append(1))
    with pytest.raises(ResourceLimitError, match="compare_groups: 45 groups .* paired"):
        cf.compare_groups(many, _ByGroup(np.full(45, 0.5)), n=10)
    monkeypatch.setattr("causalfair.audit.run.decompose_mc", lambda *a, **k: ran.append(1))
    with pytest.raises(ResourceLimitError, match="45 groups .* paired variances"):
        cf.audit({"name": "many", "engine": {"kind": "mc", "n": 10}}, system=many,
                 policy=_ByGroup(np.full(45, 0.5)))
    assert not ran


def test_the_default_pair_is_picked_from_every_world():
    """With more than two groups the compared pair is the largest and smallest V^pi of the
    run, the worst pair of its table (before: picked from the first batch's worlds, here
    a-c while the run's V put b on top: the decomposition compared a pair that was not the
    worst while saying it was the largest |C|)."""
    dec = decompose_mc(_trio(), _ByGroup([0.5, 0.52, 0.2]), n=400, seed=0, batch_size=20)
    assert tuple(dec.pair) == (int(np.argmax(dec.V)), int(np.argmin(dec.V))) == (1, 2)
    g = compare(dec, coupled=True)
    assert g.worst == g.chosen == "b-c" and g.pairs["b-c"]["C"][3] == dec.se["C"]
    with pytest.raises(InputError, match="pair"):  # a named pair: refused before the run
        decompose_mc(_trio(), _ByGroup(P3), n=400, seed=0, pair=(0, 3))


class _SharedReward(_World):
    """_World whose reward is the unit's gain (with the world's shock), recording every
    step's rewards of a batch of ``n`` worlds."""

    seen: list = []

    def step(self, s, d, noise):
        r = super().step(s, d, noise)
        type(self).seen.append(r.gain)
        return cf.StepResult(state=r.state, reward=r.gain, gain=r.gain)


def test_the_utility_total_of_coupled_groups_has_the_per_world_se():
    """utility = sum_g w_g U_g over groups that share worlds: its se is the per-world
    weighted total's sd / sqrt(n) (before: sqrt(sum_g w_g^2 se_g^2), as if the groups were
    independent, 0.070 where the spread over 100 seeds is 0.113: 76% coverage)."""
    _SharedReward.seen = []
    sy = cf.System(id="trio-r", groups=("a", "b", "c"), simulator=_SharedReward,
                   units_per_replica=3, horizon=2)
    dec = decompose_mc(sy, _ByGroup(P3), n=300, seed=4, check=False)
    steps = [r for r in _SharedReward.seen if r.shape == (900,)]  # pi, fork, pi0 per step
    per_unit = steps[0] + steps[3]  # pi's rewards over the two steps
    per_world = per_unit.reshape(300, 3) @ np.asarray(dec.group_weights)
    assert dec.total_utility == pytest.approx(per_world.mean(), rel=1e-12)
    assert dec.se["utility"] == pytest.approx(per_world.std(ddof=1) / math.sqrt(300), rel=1e-9)
    w, own = np.asarray(dec.group_weights), [dec.se[f"utility[{g}]"] for g in "abc"]
    assert dec.se["utility"] > 1.3 * math.sqrt(float(w ** 2 @ np.square(own)))

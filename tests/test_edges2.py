"""The math at its edges: degenerate and extreme inputs through every engine (exact,
Monte Carlo, benefit fairness exact and by forks, compare_groups, the frontier), each
checked against a value computed here by hand from method.md's definitions, or refused in
one line naming the field, the value and the fix."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.frontier import frontier
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import CausalfairError, SimulatorContractError
from causalfair.model import ModelError, TabularModel
from causalfair.policies.core import TablePolicy
from causalfair.stats import welch
from causalfair.systems import DecisionSet, System
from tests.one_level import OneLevel

ULP = np.finfo(float).eps


def _climb(m0, q, r=(0.0, 0.0), groups=("s+", "s-")):
    """Two levels, 1 absorbing; from level 0, d0 climbs with probability r[s], d1 with
    q[s]; P(x_0 = 0 | s) = m0[s]; potential (0, 1)."""
    k = np.zeros((2, 2, 2, 2))
    for s in range(2):
        k[s, 0, 0] = [1 - r[s], r[s]]
        k[s, 1, 0] = [1 - q[s], q[s]]
        k[s, :, 1] = [0.0, 1.0]
    return TabularModel(kernel=k, initial=[[m0[0], 1 - m0[0]], [m0[1], 1 - m0[1]]],
                        potential=[0.0, 1.0], group_names=list(groups))


def _system(m, T, decisions=None):
    kw = {} if decisions is None else {"decisions": decisions}
    return System(id="edge", groups=tuple(m.group_names), tabular=m, horizon=T,
                  levels=tuple(m.level_labels), **kw)


def _hand_climb(m0, q, r, p, T):
    """V^pi, V^PS, V^pi0 of :func:`_climb` under pi(d1 | level 0) = p (method.md 2-3):
    the mass at level 0 decays by the climbing probability each epoch."""
    up = r * (1 - p) + q * p
    V = m0 * (1 - (1 - up) ** T)
    V_ps = sum(m0 * (1 - up) ** t * r for t in range(T))
    V_0 = m0 * (1 - (1 - r) ** T)
    return V, V_ps, V_0


def _hand_lambda(p, delta, w, eps):
    """Lambda of method.md section 4 for the pair (0, 1), by the double sum."""
    K = len(w[0])
    return sum(eps * abs(p[0][x] - p[1][y]) / (eps + abs(delta[0][x] - delta[1][y]))
               * w[0][x] * w[1][y] for x in range(K) for y in range(K))


def _identity_ok(d):
    scale = max(1.0, *np.abs(np.concatenate([d.V, d.V_ps, d.V_0])))
    return abs(d.C - (d.DPE + d.IPE + d.SPE)) <= 8 * ULP * scale


# ------------------------------------------------------------------ 1. the horizon
def test_one_epoch_every_engine_gives_the_hand_values():
    m0, q, r = np.array([0.4, 0.7]), np.array([0.5, 0.3]), np.array([0.0, 0.0])
    m = _climb(m0, q, r)
    p = np.array([[0.8, 0.2], [0.5, 0.9]])
    V, V_ps, V_0 = _hand_climb(m0, q, r, p[:, 0], 1)
    d = cf.decompose(m, p, 1)
    assert np.allclose(d.V, V, atol=1e-15) and np.allclose(d.V_ps, V_ps) and not d.V_0.any()
    assert d.IPE == 0.0 and d.SPE == 0.0 and abs(d.DPE - (V[0] - V[1])) < 1e-15
    # T = 1: P(x | s) is the initial distribution, Delta = (q_s, 0)
    w = [[m0[0], 1 - m0[0]], [m0[1], 1 - m0[1]]]
    lam = _hand_lambda(p, [[q[0], 0.0], [q[1], 0.0]], w, 0.1)
    assert cf.benefit_fairness(m, p, 1, eps=0.1).Lambda == pytest.approx(lam, abs=1e-15)
    mc = cf.decompose(_system(m, 1), p, 1, engine="mc", n=4000, seed=3, eps=0.1)
    lo, hi = mc.intervals()["C"]
    assert lo <= V[0] - V[1] <= hi and mc.IPE == 0.0 and mc.SPE == 0.0
    assert mc.Lambda == pytest.approx(lam, abs=1e-15)  # a table: Lambda exact from the model
    g = cf.compare_groups(m, p, 1)
    assert g.pairs["s--s+"]["C"][0] == pytest.approx(V[1] - V[0], abs=1e-15)


@pytest.mark.parametrize("T", [0, -1])
def test_a_horizon_below_one_is_refused_by_every_door(T):
    m = _climb([0.5, 0.5], [0.5, 0.5])
    p = np.full((2, 2), 0.5)
    doors = [lambda: cf.decompose(m, p, T), lambda: cf.benefit_fairness(m, p, T),
             lambda: cf.compare_groups(m, p, T), lambda: frontier(m, T, points=2),
             lambda: cf.decompose(_system(m, 2), p, T, engine="mc", n=10),
             lambda: cf.benefit_fairness(_system(m, 2), p, T, engine="mc", n=10)]
    for door in doors:
        with pytest.raises(CausalfairError, match=rf"horizon: must be an integer >= 1, got {T}"):
            door()


# ------------------------------------------------------------------ 2. levels
def test_one_level_is_refused_by_the_model_and_an_absorbing_level_matches_the_hand():
    with pytest.raises(ModelError, match="kernel: needs at least 2 levels, got 1"):
        TabularModel(kernel=np.ones((2, 2, 1, 1)), initial=np.ones((2, 1)), potential=[0.0])
    m0, q, r = np.array([0.5, 0.8]), np.array([0.7, 0.7]), np.array([0.1, 0.1])
    m = _climb(m0, q, r)
    p = np.array([[0.5, 0.5], [0.2, 0.2]])
    V, V_ps, V_0 = _hand_climb(m0, q, r, p[:, 0], 3)
    d = cf.decompose(m, p, 3)
    assert np.allclose([d.V, d.V_ps, d.V_0], [V, V_ps, V_0], atol=1e-15, rtol=0)
    assert _identity_ok(d) and d.diagnostics_ok


def test_a_simulator_with_one_level_gives_zero_effects_and_lambda_the_policy_gap():
    # every gain 0, so Delta = 0 and Lambda = |pi(d1 | s+) - pi(d1 | s-)| (method.md 4)
    d = decompose_mc(OneLevel(), TablePolicy(np.array([[0.25], [0.75]])), 3, n=20, seed=1)
    assert (d.C, d.DPE, d.IPE, d.SPE) == (0.0, 0.0, 0.0, 0.0)
    assert all(v == 0.0 for v in d.se.values())
    assert d.Lambda == pytest.approx(0.5, abs=1e-12)


# ------------------------------------------------------------------ 3. pi = pi0
@pytest.mark.parametrize("policy", ["never", np.zeros((2, 2)), np.zeros((3, 2, 2))],
                         ids=["never", "table", "time-table"])
def test_the_baseline_policy_has_no_direct_or_indirect_effect(policy):
    m = _climb([0.5, 0.8], [0.7, 0.4], [0.1, 0.2])
    d = cf.decompose(m, policy, 3)
    # pi = pi0: pi^PS is pi0 too (its trajectory is pi's, its gains d0's)
    assert np.array_equal(d.V, d.V_ps) and np.array_equal(d.V_ps, d.V_0)
    assert (d.DPE, d.IPE, d.Lambda) == (0.0, 0.0, 0.0) and d.C == d.SPE
    mc = cf.decompose(_system(m, 3), policy, 3, engine="mc", n=50, seed=2)
    assert (mc.DPE, mc.IPE, mc.se["DPE"], mc.se["IPE"]) == (0.0, 0.0, 0.0, 0.0)
    assert mc.Lambda == 0.0 and mc.Lambda_ci == (0.0, 0.0)


# ------------------------------------------------------------------ 4. identical groups
def test_identical_groups_have_no_spurious_effect_and_the_identity_holds():
    k = np.zeros((2, 2, 3, 3))
    k[:, 0] = [[.8, .2, 0], [.1, .8, .1], [0, .3, .7]]
    k[:, 1] = [[.2, .6, .2], [0, .4, .6], [0, .1, .9]]
    m = TabularModel(kernel=k, initial=[[.2, .5, .3]] * 2, potential=[0.0, 0.7, 1.3])
    blind = np.array([[.1, .5, .9]] * 2)
    d = cf.decompose(m, blind, 5)
    assert (d.C, d.DPE, d.IPE, d.SPE) == (0.0, 0.0, 0.0, 0.0)
    d = cf.decompose(m, np.array([[.1, .5, .9], [.3, .2, .8]]), 5)
    assert d.SPE == 0.0 and _identity_ok(d)
    mc = cf.decompose(_system(m, 5), np.array([[.1, .5, .9], [.3, .2, .8]]), 5, engine="mc",
                      n=500, seed=0)
    assert _identity_ok(mc) and mc.intervals()["SPE"][0] <= 0.0 <= mc.intervals()["SPE"][1]


# ------------------------------------------------------------------ 5. unvisited cells
def test_an_unreachable_level_weighs_nothing_and_keeps_its_model_values():
    k = np.zeros((2, 2, 3, 3))
    k[:, 0] = [[.9, .1, 0], [.1, .9, 0], [0, 0, 1]]
    k[:, 1] = [[.5, .5, 0], [0, 1, 0], [0, 0, 1]]
    m = TabularModel(kernel=k, initial=[[.5, .5, 0], [1, 0, 0]], potential=[0.0, 1.0, 5.0])
    p = np.array([[.5, .5, .5], [.7, .2, .9]])
    b = cf.benefit_fairness(m, p, 3, eps=0.1)
    assert not b.state_weights[:, 2].any()  # level 3 is never reached
    assert np.array_equal(b.delta, m.benefit()) and np.array_equal(b.p_d1, p)
    # the hand value: visitation by propagating the two groups, then the double sum
    mu = [np.array(m.initial[s]) for s in range(2)]
    w = [np.zeros(3), np.zeros(3)]
    for _t in range(3):
        for s in range(2):
            w[s] += mu[s] / 3
            kern = k[s, 0] * (1 - p[s])[:, None] + k[s, 1] * p[s][:, None]
            mu[s] = mu[s] @ kern
    assert b.Lambda == pytest.approx(_hand_lambda(p, m.benefit(), w, 0.1), abs=1e-15)


def test_an_action_nobody_takes_changes_nothing():
    k = np.zeros((2, 3, 2, 2))
    k[:, 0] = [[1, 0], [0, 1]]
    k[:, 1] = [[.5, .5], [0, 1]]
    k[:, 2] = [[.2, .8], [.1, .9]]
    m = TabularModel(kernel=k, initial=[[.5, .5], [.8, .2]], potential=[0.0, 1.0])
    p = np.zeros((2, 2, 3))
    p[..., 0], p[..., 1] = 0.4, 0.6
    two = TabularModel(kernel=k[:, :2], initial=m.initial, potential=[0.0, 1.0])
    d3, d2 = cf.decompose(m, p, 2), cf.decompose(two, np.full((2, 2), 0.6), 2)
    assert np.allclose([d3.V, d3.V_ps, d3.V_0], [d2.V, d2.V_ps, d2.V_0], atol=1e-15, rtol=0)


# ------------------------------------------------------------------ 6, 7. Monte Carlo
class Climb:
    """Three levels; d1 climbs one level with probability 0.5 - 0.1 s. ``dtype``: the
    gain's type; ``small``: observations in int8 and float32."""

    n_groups, n_levels, horizon = 2, 3, 3

    def __init__(self, dtype=float, small=False):
        self.dtype, self.small = dtype, small

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(np.int64)
        return {"x": rng.integers(0, 3, n), "g": g.copy()}

    def observe(self, s):
        t = np.int8 if self.small else np.int64
        f = np.stack([s["x"], s["g"]], 1).astype(np.float32 if self.small else np.float64)
        return cf.Observation(group=s["g"].astype(t), level=s["x"].astype(t), features=f)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, u):
        x2 = np.minimum(s["x"] + ((d > 0) & (u < 0.5 - 0.1 * s["g"])), 2)
        gain = (x2 - s["x"]).astype(self.dtype)
        return cf.StepResult(state={"x": x2, "g": s["g"]}, reward=np.zeros(len(d)),
                             gain=gain if self.dtype is not list else gain.tolist())


TABLE = TablePolicy(np.array([[.2, .5, .9], [.4, .4, .4]]))


def _numbers(d):
    return (d.V.tolist(), d.V_ps.tolist(), d.V_0.tolist(), sorted(d.se.items()), d.Lambda,
            d.Lambda_ci)


def test_the_smallest_monte_carlo_runs_and_their_batches():
    with pytest.raises(CausalfairError, match="n: must be an integer >= 2, got 1"):
        decompose_mc(Climb(), TABLE, 3, n=1)
    two = decompose_mc(Climb(), TABLE, 3, n=2, seed=3, jobs=1)
    assert all(np.isfinite(v) for v in two.se.values()) and _identity_ok(two)
    # batch_size over n, and not dividing n: the same numbers on one thread or two
    for batch in (3, 100):
        one = decompose_mc(Climb(), TABLE, 3, n=7, seed=3, jobs=1, batch_size=batch)
        assert _numbers(one) == _numbers(decompose_mc(Climb(), TABLE, 3, n=7, seed=3, jobs=2,
                                                      batch_size=batch))
    with pytest.raises(CausalfairError, match="n: must be an integer >= 2, got 1"):
        cf.benefit_fairness(cf.systems.as_system(Climb()), TABLE, 3, engine="mc", n=1)


def test_constant_samples_give_a_zero_width_welch_interval_and_no_effect():
    # 0.1 * 3 / 3 is not 0.1 in floating point: the two constant samples used to "differ"
    # by 1e-17 with Hedges' g 4.5 and an interval of width 8e-17
    w = welch([0.1] * 3, [0.1] * 60)
    assert (w.diff, w.t, w.p, w.ci, w.hedges_g) == (0.0, 0.0, 1.0, (0.0, 0.0), 0.0)
    assert w.mean_a == w.mean_b == 0.1
    two = welch([1.0, 2.0], [0.5, 0.5])  # n = 2: df from the one varying sample
    assert two.df == pytest.approx(1.0) and two.ci[0] < two.diff < two.ci[1]


def test_constant_monte_carlo_gains_give_intervals_of_width_zero():
    class Always(Climb):
        def step(self, s, d, u):
            res = super().step(s, d, u)
            return cf.StepResult(state=res.state, reward=res.reward, gain=np.ones(len(d)))
    d = decompose_mc(Always(), TABLE, 3, n=9, seed=0, jobs=1)
    for key, (lo, hi) in d.intervals().items():
        assert lo == hi, key
    assert d.V.tolist() == [3.0, 3.0] and (d.C, d.DPE, d.IPE, d.SPE) == (0.0, 0.0, 0.0, 0.0)


# ------------------------------------------------------------------ 8. probabilities
def test_probabilities_at_the_edge():
    m = _climb([0.5, 0.8], [0.7, 0.4], [0.1, 0.2])
    assert cf.decompose(m, np.full((2, 2), 1 - 1e-17), 2).C == cf.decompose(m, "always", 2).C
    bad = np.full((2, 2), 0.5)
    bad[1, 1] = np.nan
    with pytest.raises(CausalfairError, match=r"NaN or inf .*\(nan at index \(1, 1\)\)"):
        cf.decompose(m, bad, 2)
    bad[1, 1] = np.inf
    with pytest.raises(CausalfairError, match=r"\(inf at index \(1, 1\)\)"):
        cf.decompose(_system(m, 2), bad, 2, engine="mc", n=10)

    class Hole:
        name = "hole"

        def prob_d1(self, obs):
            return np.where((obs.group == 1) & (obs.level == 1), np.nan, 0.5)
    for door in (lambda: cf.decompose(m, Hole(), 2),
                 lambda: decompose_mc(_system(m, 2), Hole(), 2, n=50, seed=0),
                 lambda: decompose_mc(_system(m, 2), Hole(), 2, n=50, seed=0, check=False,
                                      tabulate=False)):
        with pytest.raises(CausalfairError, match=r"\(nan at group 1, level 1"):
            door()


def _three_actions():
    k = np.zeros((2, 3, 2, 2))
    k[:, 0] = [[1, 0], [0, 1]]
    k[:, 1] = [[.5, .5], [0, 1]]
    k[:, 2] = [[.2, .8], [.1, .9]]
    m = TabularModel(kernel=k, initial=[[.5, .5], [.8, .2]], potential=[0.0, 1.0])
    return m, _system(m, 2, DecisionSet(labels=("a", "b", "c")))


def test_action_tables_follow_the_documented_float32_tolerance():
    m, system = _three_actions()
    p = np.zeros((2, 2, 3))
    p[..., 0], p[..., 1] = 0.4, 0.6
    exact = cf.decompose(m, p, 2)
    # rows within 1e-6 of 1 (a float32 softmax) are renormalised, as a policy's rows are
    for off in (1e-9, 1e-7):
        assert cf.decompose(m, p * (1 + off), 2).C == pytest.approx(exact.C, abs=1e-15)
        assert TablePolicy(p * (1 + off), n_actions=3).table.sum(-1) == pytest.approx(1, abs=1e-15)
        mc = cf.decompose(system, p * (1 + off), 2, engine="mc", n=40, seed=1)
        assert _numbers(mc) == _numbers(cf.decompose(system, p, 2, engine="mc", n=40, seed=1))
    far = p.copy()
    far[1, 0] *= 1 + 2e-6
    with pytest.raises(CausalfairError, match=r"row \(1, 0\) sums to 1.000002 \(more than 1e-06"):
        cf.decompose(m, far, 2)
    with pytest.raises(CausalfairError, match=r"row \(1, 0\) sums to 1.000002 \(more than 1e-06"):
        TablePolicy(far, n_actions=3)
    far[1, 0, 2] = np.nan
    with pytest.raises(CausalfairError, match=r"\(nan at index \(1, 0, 2\)\)"):
        cf.decompose(m, far, 2)


# ------------------------------------------------------------------ 9. many groups
def _many(init):
    G, A = 8, 6
    k = np.zeros((G, A, 2, 2))
    for a in range(A):
        k[:, a, 0] = [1 - 0.16 * a, 0.16 * a]
        k[:, a, 1] = [0.1, 0.9]
    m = TabularModel(kernel=k, initial=init, potential=[0.0, 1.0])
    return m, np.full((G, 2, A), 1 / A)


def test_eight_groups_six_actions_ties_and_identical_groups():
    m, p = _many(np.tile([0.5, 0.5], (8, 1)))
    d = cf.decompose(m, p, 3)
    assert d.pair == (0, 1) and (d.C, d.SPE, d.Lambda) == (0.0, 0.0, 0.0)
    init = np.tile([0.5, 0.5], (8, 1))
    init[[2, 3]] = [0.2, 0.8]  # the lowest V, tied
    init[[5, 6]] = [0.9, 0.1]  # the highest V, tied
    m, p = _many(init)
    d = cf.decompose(m, p, 3)
    # ties: the first group (declared order) with the largest V, the first with the smallest
    assert d.pair == (5, 2) and _identity_ok(d)
    g = cf.compare_groups(m, p, 3)
    assert g.worst == "s2-s5" and g.pairs[g.worst]["C"][0] == -d.C
    system = _system(m, 3, DecisionSet(labels=tuple("abcdef")))
    one = cf.decompose(system, p, 3, engine="mc", n=60, seed=0, jobs=1)
    assert _numbers(one) == _numbers(cf.decompose(system, p, 3, engine="mc", n=60, seed=0,
                                                  jobs=2))


# ------------------------------------------------------------------ 10. dtypes
def test_a_simulator_s_dtypes_do_not_change_the_numbers():
    ref = _numbers(decompose_mc(Climb(), TABLE, 3, n=50, seed=1, jobs=1))
    for sim in (Climb(np.int64), Climb(np.float32), Climb(small=True)):
        assert _numbers(decompose_mc(sim, TABLE, 3, n=50, seed=1, jobs=1)) == ref
    with pytest.raises(SimulatorContractError, match=r"StepResult.gain is a list; return a "
                                                     r"numpy array"):
        decompose_mc(Climb(list), TABLE, 3, n=50, seed=1)


# ------------------------------------------------------------------ the frontier
def test_the_frontier_of_identical_groups_has_a_sorted_grid():
    k = np.zeros((2, 2, 2, 2))
    k[:, 0, 0], k[:, 1, 0], k[:, :, 1] = [0.9, 0.1], [0.3, 0.7], [0.0, 1.0]
    reward = np.zeros((2, 2, 2))
    reward[:, 1] = [-0.2, 1.0]
    m = TabularModel(kernel=k, initial=[[0.5, 0.5]] * 2, potential=[0.0, 1.0], reward=reward)
    f = frontier(m, 2, points=3)
    assert np.all(np.diff(f.eps) >= 0), f.eps  # was 1e-10, 0, 1e-10
    assert f.eps_min == 0.0 and all(pt.status == "optimal" for pt in f.points)


def test_a_horizon_written_as_a_float_says_to_write_the_integer():
    """``horizon=5.0`` (a notebook's arithmetic, a YAML float): refused, as every count is,
    with the integer to write (it said only "got 5.0")."""
    m = _climb([0.5, 0.5], [0.5, 0.5])
    p = np.full((2, 2), 0.5)
    for door in (lambda: cf.decompose(m, p, 5.0), lambda: cf.benefit_fairness(m, p, 5.0)):
        with pytest.raises(CausalfairError, match=r"^horizon: must be an integer >= 1, got 5\.0; "
                                                  r"write 5\.$"):
            door()
    with pytest.raises(CausalfairError, match=r"got 0\.5\.$"):
        cf.decompose(m, p, 0.5)

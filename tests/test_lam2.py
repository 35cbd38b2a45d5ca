"""Lambda by forks (causalfair.engines.benefit_mc) at its edges: the pairs of a multi-group
audit share one set of cell means, unvisited cells show as unvisited, and the interval
covers the rounding of the cell means. Tiny systems, in-process."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines import benefit_mc
from causalfair.engines.benefit import auto_eps
from causalfair.engines.benefit_mc import benefit_fairness_mc, lambda_hull
from causalfair.engines.groups import lambda_by_forks
from causalfair.policies.core import TablePolicy
from tests.one_level import OneLevel


class Groups3:
    """Three groups, features (x, group): each group visits only cells of its own group
    value; an action other than 0 moves x up with probability 0.3 + 0.1 g, gain the move.
    Two actions, or three with ``actions=3``."""

    n_groups, horizon = 3, 3
    feature_names = ["x", "group"]

    def __init__(self, actions=2):
        self.n_actions = actions
        if actions == 3:
            self.action_labels, self.baseline = ("a", "b", "c"), 0

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(np.int64).copy()
        return {"x": rng.normal(size=n), "g": g}

    def observe(self, s):
        return cf.Observation(group=s["g"], features=np.stack([s["x"], s["g"] * 1.0], 1))

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, u):
        up = (np.asarray(d) > 0) & (u < 0.3 + 0.1 * s["g"])
        x2 = s["x"] + up + 0.1 * (u - 0.5)
        return cf.StepResult(state={"x": x2, "g": s["g"]}, reward=np.zeros(len(d)),
                             gain=x2 - s["x"])


POLICY = cf.CallablePolicy(lambda obs: 1.0 / (1.0 + np.exp(-obs.features[:, 0])))


class Three:
    """A policy of three actions: softmax of (0, x, x / 2)."""

    def action_probs(self, obs):
        x = obs.features[:, 0]
        e = np.exp(np.stack([np.zeros_like(x), x, x / 2], 1))
        return e / e.sum(1, keepdims=True)


def _same(a, b):
    assert (a.Lambda, a.se, a.ci, a.eps, a.cells) == (b.Lambda, b.se, b.ci, b.eps, b.cells)
    for f in ("delta", "p_d1", "state_weights", "contributions"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


def test_the_pairs_share_one_set_of_cell_means_with_the_numbers_of_separate_runs(monkeypatch):
    made = []
    real = benefit_mc._cell_stats
    monkeypatch.setattr(benefit_mc, "_cell_stats", lambda *a, **k: made.append(1) or real(*a, **k))
    lam = lambda_by_forks(Groups3(), POLICY, 3, n=300, seed=4, eps=0.2, alpha=0.05, jobs=1)
    pairs = [(0, 1), (0, 2), (1, 2)]
    shared = [lam(ab) for ab in pairs]
    assert len(made) == 1  # one rollout, one set of cell means and replicates for 3 pairs
    for ab, res in zip(pairs, shared, strict=True):
        _same(res, benefit_fairness_mc(Groups3(), POLICY, 3, n=300, seed=4, eps=0.2,
                                       pair=ab, jobs=1))
    assert all(r.Lambda > 0 for r in shared)


def test_pair_terms_over_the_visited_cells_are_the_terms_over_every_cell():
    # n_boot = 0: no mask, so the contributions are the formula over all K x K cell pairs
    res = benefit_fairness_mc(Groups3(actions=3), Three(), 3, n=200, seed=1, eps=0.2,
                              pair=(0, 2), n_boot=0, jobs=1)
    w, p, d = res.state_weights, res.p_d1, res.delta
    assert not (w[0] * w[2]).any()  # the groups visit different cells (group feature)
    tv = 0.5 * np.abs(p[0][:, None, :] - p[2][None, :, :]).sum(-1)
    top = np.abs(d[0][:, None, :] - d[2][None, :, :]).max(-1)
    ref = 0.2 * tv / (0.2 + top) * w[0][:, None] * w[2][None, :]
    assert res.contributions.shape == ref.shape and np.array_equal(res.contributions, ref)
    assert res.Lambda == float(ref.sum())


class Reach:
    """Three levels; group g starts at level 0 or 1 (level 2 nobody reaches); d1 gains
    1 + level + g (the state does not move). Two actions, or three (the third gains
    nothing) with ``actions=3``."""

    n_groups, n_levels, horizon = 2, 3, 2

    def __init__(self, actions=2, share=(0.5, 0.8)):
        self.n_actions, self.share = actions, share
        if actions == 3:
            self.action_labels, self.baseline = ("a", "b", "c"), 0

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(np.int64).copy()
        return {"x": (rng.random(n) < np.take(self.share, g)).astype(np.int64), "g": g}

    def observe(self, s):
        return cf.Observation(group=s["g"], level=s["x"])

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, u):
        gain = (np.asarray(d) == 1) * (1.0 + s["x"] + s["g"])
        return cf.StepResult(state=s, reward=np.zeros(len(d)), gain=gain)


TABLE = TablePolicy(np.array([[0.2, 0.6, 0.5], [0.4, 0.9, 0.5]]))


def test_an_unvisited_cell_shows_as_unvisited_and_poisons_nothing():
    res = benefit_fairness_mc(Reach(), TABLE, 2, n=200, seed=0, eps=0.5, jobs=1)
    assert res.visited is not None and res.visited.tolist() == [[True, True, False]] * 2
    t = res.table()
    gone = t[~t["visited"]]
    assert len(gone) == 2 and gone["Delta"].isna().all() and gone["p_d1"].isna().all()
    assert t[t["visited"]][["Delta", "p_d1"]].notna().all().all()
    assert (gone["P_x"] == 0).all()
    assert np.isfinite(res.contributions).all() and np.isfinite(res.Lambda)
    assert np.isfinite(res.ci).all() and not res.contributions[2].any()
    assert res.Lambda > 0


def test_auto_eps_is_taken_over_the_visited_cells():
    res = benefit_fairness_mc(Reach(), TABLE, 2, n=200, seed=0, eps="auto", jobs=1)
    seen = res.delta[res.visited]
    assert (res.eps, res.eps_source) == auto_eps(seen)
    assert res.eps != auto_eps(res.delta)[0]  # the zeros of level 3 would move it


@pytest.mark.parametrize("pa, pb", [(0.3, 0.7), (0.1, 0.7)])
def test_the_interval_covers_the_exact_lambda_of_a_constant_cell(pa, pb):
    res = benefit_fairness_mc(OneLevel(), TablePolicy(np.array([[pa], [pb]])), 3, n=50,
                              seed=0, eps=0.1, jobs=1)
    exact = 0.5 * (abs((1 - pa) - (1 - pb)) + abs(pa - pb))  # method.md 4, by hand
    assert res.Lambda != exact  # sum(w x) / sum(w) rounds: the defect's premise
    assert abs(res.Lambda - exact) < 1e-12
    assert res.ci[0] <= exact <= res.ci[1], (res.Lambda, res.ci)
    assert res.ci[1] - res.ci[0] < 1e-9  # rounding, not a statistical width


def test_identical_decision_rows_get_an_interval_reaching_zero():
    # the same distribution in both groups (exact Lambda 0); the levels' visits differ by
    # group, so the cell means of 1/3 round differently: a Lambda of ~1e-16 order
    sim = Reach(actions=3, share=(0.3, 0.6))
    res = benefit_fairness_mc(sim, cf.policies.resolve("uniform", cf.as_system(sim)).policy,
                              2, n=400, seed=2, eps=0.5, jobs=1)
    assert 0.0 < res.Lambda < 1e-12, res.Lambda
    assert res.ci[0] == 0.0 and res.ci[1] < 1e-9, res.ci


def test_the_rounding_floor_leaves_a_statistical_interval_alone():
    est = [(0.10, 0.01), (0.07, 0.02)]
    assert lambda_hull(est, 0.05, 1e-12) == lambda_hull(est, 0.05)
    assert lambda_hull([(0.0, 0.0)], 0.05, 1e-9) == (0.0, 0.0)  # every term exactly 0
    lo, hi = lambda_hull([(0.5, 1e-17)], 0.05, 1e-12)
    assert lo == 0.5 - 1e-12 and hi == 0.5 + 1e-12

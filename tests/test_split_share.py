"""Lambda's forks (rollout, cells, cell means, bootstrap replicates') are made once per call
of ``cf.compare_groups`` and of ``causalfair.train.lagrangian.measure_groups`` (the
trainer's audit of a constrained run), by the decomposition's own Lambda, and shared by
every pair, as an audit does (tests/test_share.py). Before, each made them twice: once for
the decomposition's pair, once more for the other pairs. The numbers are those of the old
path (the decomposition, then the pairs' forks made again) bit for bit, and each pair's
Lambda is the one its own forks give."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines import benefit_mc, groups
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.engines.montecarlo import decompose_mc
from causalfair.train import TrainConfig, lagrangian
from causalfair.train.generic import SystemTrainer
from causalfair.train.lagrangian import measure_groups
from tests.train.test_repair_thresholds import MODULE


class Quad:
    """Four groups, a score and the group as features, two actions; the benefit of acting
    depends on the group and the score."""

    n_groups = 4
    group_names = ("a", "b", "c", "d")
    n_actions = 2
    feature_names = ("x", "group")
    horizon = 2

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=int), (n,)).copy()
        return {"x": rng.normal(np.array([-0.6, -0.2, 0.2, 0.6])[g], 1.0), "g": g, "t": 0}

    def observe(self, s):
        return cf.Observation(group=s["g"], features=np.column_stack([s["x"], s["g"] * 1.0]),
                              t=s["t"])

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        gain = np.where(np.asarray(d) == 1,
                        np.array([0.5, 0.35, 0.2, 0.1])[s["g"]] + 0.1 * s["x"], 0.0) + 0.1 * noise
        return cf.StepResult(state={"x": s["x"] + gain, "g": s["g"], "t": s["t"] + 1},
                             reward=gain, gain=gain)


def _quad() -> cf.System:
    return cf.System(id="quad-features", groups=Quad.group_names, features=Quad.feature_names,
                     horizon=2, simulator=Quad, roles={"group": "group"})


_logistic = cf.CallablePolicy(lambda obs: 1.0 / (1.0 + np.exp(-2.0 * obs.features[:, 0])),
                              name="logistic")


class Soft:
    """attention-1 (five sites of coupled units): priorities 1-4 by the seen rate."""

    name = "soft"

    def action_probs(self, obs):
        x = np.asarray(obs.features, dtype=float)
        logits = np.stack([x[:, 0] * k - 0.5 * k for k in range(1, 5)], axis=1)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return np.concatenate([np.zeros((len(p), 1)), p], axis=1)


@pytest.fixture
def builds(monkeypatch):
    """The calls of the forks' statistics builder (benefit_mc._cell_stats)."""
    calls = []
    real = benefit_mc._cell_stats

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(benefit_mc, "_cell_stats", counted)
    return calls


def _numbers(gc) -> tuple:
    return gc.groups, gc.reference, gc.worst, gc.pairs, gc.per_group


CASES = [(_quad, _logistic, 300), (lambda: cf.systems.make("attention-1"), Soft(), 60)]


@pytest.mark.parametrize(("make", "policy", "n"), CASES, ids=["4-groups", "coupled-5-sites"])
def test_compare_groups_makes_the_forks_once_with_the_old_numbers(builds, make, policy, n):
    system = make()
    gc = cf.compare_groups(system, policy, n=n, seed=3, jobs=1)
    assert len(builds) == 1, f"the forks' statistics were made {len(builds)} times"
    pairs = len(system.groups) * (len(system.groups) - 1) // 2
    assert len(gc.pairs) == pairs and all(q["Lambda"] is not None for q in gc.pairs.values())
    # the old path: the decomposition, then the other pairs' forks made again
    builds.clear()
    dec = cf.decompose(system, policy, n=n, seed=3, jobs=1)
    lambda_of = groups.lambda_by_forks(system, policy, dec.horizon, n=n, seed=3,
                                       eps=dec.benefit.eps, alpha=0.05, jobs=1)
    old = groups.compare(dec, benefit=dec.benefit, lambda_of=lambda_of,
                         coupled=system.units_per_replica != 1)
    assert len(builds) == 2
    assert _numbers(gc) == _numbers(old)
    # and every pair's Lambda is the one of forks made for that pair alone (the
    # decomposition's own pair in its orientation: Lambda of (b, a) sums the transposed
    # terms, a few units of the last place off)
    for name, q in gc.pairs.items():
        ab = tuple(system.groups.index(x) for x in name.split("-"))
        ab = dec.pair if set(ab) == set(dec.pair) else ab
        own = benefit_fairness_mc(system, policy, dec.horizon, n=n, seed=3,
                                  eps=dec.benefit.eps, pair=ab, jobs=1)
        assert q["Lambda"][:3] == (own.Lambda, *own.ci), name


@pytest.mark.parametrize(("make", "policy", "n"), CASES, ids=["4-groups", "coupled-5-sites"])
def test_measure_groups_shares_the_decompositions_forks(builds, make, policy, n):
    system = make()
    coupled = system.units_per_replica != 1

    def measured(shared):
        dec = decompose_mc(system, policy, system.horizon, n=n, seed=5, check=False,
                           eps="auto", benefit_n=n, benefit_shared=shared)
        return dec, measure_groups(system, policy, system.horizon, dec, tabular=None, n=n,
                                   seed=5, eps="auto", lambda_pairs=True, coupled=coupled,
                                   shared=shared)

    dec, gc = measured({})
    assert len(builds) == 1
    builds.clear()
    old_dec, old = measured(None)  # the old path: the pairs' forks made again
    assert len(builds) == 2
    assert _numbers(gc) == _numbers(old)
    assert (dec.Lambda, dec.Lambda_ci) == (old_dec.Lambda, old_dec.Lambda_ci)
    own = "-".join(system.groups[g] for g in dec.pair)
    key = own if own in gc.pairs else "-".join(system.groups[g] for g in dec.pair[::-1])
    assert gc.pairs[key]["Lambda"][0] == dec.Lambda


@pytest.fixture
def tri(tmp_path, monkeypatch):
    """Three groups, Monte Carlo only, the level observed as a feature
    (tests/train/test_repair_thresholds.py's ``make_sim``)."""
    (tmp_path / "tri_split.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import tri_split

    yield tri_split
    sys.modules.pop("tri_split", None)


def test_a_constrained_runs_audit_makes_the_forks_once(tri, builds, monkeypatch):
    """The trainer's audit of a run with a constraint on another pair's Lambda: one build
    for the decomposition's pair and the group comparison's, the numbers of the old path."""
    config = TrainConfig(algo="ppo", iterations=1, n_individuals=48, audit_n=200, horizon=1,
                         constraints=("max_Lambda<=0.5",))
    tr = SystemTrainer(tri.make_sim(1), config)
    row = tr.audit()
    assert len(builds) == 1
    new = _numbers(tr._groups)
    real = lagrangian.measure_groups
    monkeypatch.setattr("causalfair.train.generic.measure_groups",
                        lambda *a, **kw: real(*a, **{**kw, "shared": None}))  # the old path
    builds.clear()
    assert tr.audit() == row
    assert len(builds) == 2
    assert _numbers(tr._groups) == new

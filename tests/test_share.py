"""A Monte Carlo audit of three or more groups makes Lambda's forks (rollout, cells, cell
means, bootstrap replicates') once for the decomposition's own pair and every pair of the
group comparison; the worst benefit pairs of a feature system name the group feature's
values by the group names."""

from __future__ import annotations

import numpy as np

import causalfair as cf
from causalfair.engines import benefit_mc
from causalfair.engines.benefit_cells import bin_labels
from causalfair.engines.benefit_mc import benefit_fairness_mc


class Tri:
    """Three groups, a score and the group as features, two actions."""

    n_groups = 3
    group_names = ("lo", "mid", "hi")
    n_actions = 2
    feature_names = ("x", "group")
    horizon = 2

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=int), (n,)).copy()
        return {"x": rng.normal(np.array([-0.5, 0.0, 0.5])[g], 1.0), "g": g, "t": 0}

    def observe(self, s):
        return cf.Observation(group=s["g"], features=np.column_stack([s["x"], s["g"] * 1.0]),
                              t=s["t"])

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        gain = np.where(np.asarray(d) == 1, np.array([0.5, 0.3, 0.1])[s["g"]], 0.0) + 0.1 * noise
        return cf.StepResult(state={"x": s["x"] + gain, "g": s["g"], "t": s["t"] + 1},
                             reward=gain, gain=gain)


def _system() -> cf.System:
    return cf.System(id="tri-features", groups=Tri.group_names, features=Tri.feature_names,
                     horizon=2, simulator=Tri, roles={"group": "group"})


_policy = cf.CallablePolicy(lambda obs: (obs.features[:, 0] > 0).astype(float), name="x>0")


SPEC = {"name": "share", "system": {"factory": "unused:make"},
        "engine": {"kind": "mc", "n": 400, "seed": 3}, "thresholds": {"max_Lambda": 1.0}}


def test_an_audit_makes_lambdas_forks_once_for_every_pair(monkeypatch):
    calls = []
    real = benefit_mc._cell_stats

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(benefit_mc, "_cell_stats", counted)
    system = _system()
    res = cf.audit(SPEC, system=system, policy=_policy)
    assert len(calls) == 1, f"the forks' statistics were made {len(calls)} times"
    monkeypatch.setattr(benefit_mc, "_cell_stats", real)
    # the same numbers as each pair's Lambda by forks made on its own
    gc, dec = res.group_comparison, res.decomposition
    assert len(gc.pairs) == 3
    for name, q in gc.pairs.items():
        a, b = (system.groups.index(x) for x in name.split("-"))
        own = benefit_fairness_mc(system, _policy, 2, n=400, seed=3, eps=res.benefit.eps,
                                  pair=(a, b), alpha=0.05)
        assert q["Lambda"][:3] == (own.Lambda, *own.ci), name
        if {a, b} == set(dec.pair):
            assert dec.Lambda == own.Lambda and tuple(dec.Lambda_ci) == own.ci


def test_the_group_feature_is_labelled_by_the_group_names():
    ben = benefit_fairness_mc(_system(), _policy, 2, n=200, seed=0, pair=(0, 2), n_boot=0)
    assert any(lab.endswith("group=lo") for lab in ben.levels), ben.levels
    assert any(lab.endswith("group=hi") for lab in ben.levels), ben.levels
    assert not any("group=0" in lab or "group=2" in lab for lab in ben.levels), ben.levels


def test_only_a_feature_of_group_indices_is_named():
    edges = [np.array([1.0, 2.0]), np.array([1.0])]
    values = [np.array([0.0, 1.0, 2.0]), np.array([0.5, 1.0])]
    labels, _ = bin_labels(edges, ("group", "flag"), values=values,
                           named={"group": ("A", "B", "C"), "flag": ("no", "yes")})
    assert labels[0] == "group=A flag=0.5" and labels[-1] == "group=C flag=1"
    assert bin_labels(edges, ("group", "flag"), values=values)[0][0] == "group=0 flag=0.5"

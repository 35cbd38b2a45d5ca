"""A Monte Carlo audit's selection rates over those present (docs/own-system.md,
"Individuals who leave"): with departed levels declared, the decision counts of the run
(``Decomposition.decisions``, audit.json's ``selection``, the LL 144 table) count only the
units whose observed level at that step is present, as the exact model audit's rates do.

The tiny triage case of tests/tri_tiny.py, by hand (T = 2, PI admits sick / well / left
with 0.8 / 0.3 / 0.9 for the insured, 0.5 / 0.1 / 0.1 for the uninsured):
  insured:   t0 0.3 * 0.8 + 0.7 * 0.3 = 0.45 of 1 present; t1 x1 = (0.127, 0.737, 0.136):
             0.127 * 0.8 + 0.737 * 0.3 = 0.3227 of 0.864 present; overall 0.7727 / 1.864;
  uninsured: t0 0.7 * 0.5 + 0.3 * 0.1 = 0.38 of 1; t1 x1 = (0.272, 0.523, 0.205):
             0.272 * 0.5 + 0.523 * 0.1 = 0.1883 of 0.795; overall 0.5683 / 1.795.
Undeclared, everyone counts: insured t1 (0.3227 + 0.136 * 0.9) of 1.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.selection import counted_selection, selection_rates
from causalfair.report.export import ll144_rows
from tests.tri_tiny import PI, PI_BASELINE_AT_LEFT, tiny_module  # noqa: F401

HAND_RATE = {"insured": [0.45, 0.3227 / 0.864], "uninsured": [0.38, 0.1883 / 0.795]}
HAND_OVERALL = {"insured": 0.7727 / 1.864, "uninsured": 0.5683 / 1.795}
HAND_PRESENT = {"insured": [1.0, 0.864], "uninsured": [1.0, 0.795]}
N = 20_000


def _selection(dec, system):
    return counted_selection(dec.decisions, dec.groups, system.decisions.labels,
                             system.decisions.baseline)


def _within(sel, rate, overall, z=4.0):
    """Each counted rate within z standard errors (binomial, from its own n) of the hand
    value."""
    for g in rate:
        for t, (p, m) in enumerate(zip(rate[g], sel["n"][g], strict=True)):
            got = sel["rate"][g]["admit"][t]
            assert abs(got - p) < z * math.sqrt(p * (1 - p) / m), (g, t, got, p)
        m = sum(sel["n"][g])
        got = sel["rate_overall"][g]["admit"]
        assert abs(got - overall[g]) < z * math.sqrt(overall[g] * (1 - overall[g]) / m), g


def test_monte_carlo_rates_count_only_those_present(tiny):
    system = tiny.make_bare(departed=(2,))
    assert system.engines == {"mc"}
    decs = [cf.decompose(system, tiny.TablePolicy(p), n=N, seed=3)
            for p in (PI, PI_BASELINE_AT_LEFT)]
    sel = _selection(decs[0], system)
    # the present units per step: all at t0, about 0.864 / 0.795 of them at t1
    for g, share in HAND_PRESENT.items():
        assert sel["n"][g][0] == N
        p = share[1]
        assert abs(sel["n"][g][1] / N - p) < 4 * math.sqrt(p * (1 - p) / N), g
    _within(sel, HAND_RATE, HAND_OVERALL)
    # what the policy does to those who left is not counted: the same counts bit for bit
    # (the same random numbers; before, PI's admits of 0.9 of them were counted)
    np.testing.assert_array_equal(decs[0].decisions, decs[1].decisions)
    # the exact rates of the declared model, the same definition: within MC error
    model = tiny.make(horizon=2).with_(departed=(2,)).tabular
    exact = selection_rates(model, PI, model.propagate(PI, 2), 2, source="exact")
    for g in HAND_RATE:
        assert exact["rate"][g]["admit"] == pytest.approx(HAND_RATE[g], abs=1e-12)
        assert exact["rate_overall"][g]["admit"] == pytest.approx(HAND_OVERALL[g], abs=1e-12)
    _within(sel, {g: exact["rate"][g]["admit"] for g in HAND_RATE},
            {g: exact["rate_overall"][g]["admit"] for g in HAND_RATE})


def test_undeclared_monte_carlo_rates_count_everyone_as_before(tiny):
    """Without the declaration every unit counts (n = N at every step) and the counts are
    the same whichever way the tabular model is there or not (the same streams)."""
    plain = tiny.make_bare()
    dec = cf.decompose(plain, tiny.TablePolicy(PI), n=N, seed=3)
    sel = _selection(dec, plain)
    assert sel["n"] == {"insured": [N, N], "uninsured": [N, N]}
    p = 0.3227 + 0.136 * 0.9
    got = sel["rate"]["insured"]["admit"][1]
    assert abs(got - p) < 4 * math.sqrt(p * (1 - p) / N), got
    # the declared run draws the same decisions: its counts are these minus the departed's
    declared = cf.decompose(tiny.make_bare(departed=(2,)), tiny.TablePolicy(PI), n=N, seed=3)
    assert np.all(declared.decisions <= dec.decisions)
    np.testing.assert_array_equal(declared.decisions[:, :, 0], dec.decisions[:, :, 0])
    assert (declared.C, declared.DPE, declared.IPE, declared.SPE) == \
        (dec.C, dec.DPE, dec.IPE, dec.SPE)


def test_monte_carlo_audit_selection_and_ll144_over_those_present(tiny):
    """A Monte Carlo audit (no tabular model): audit.json's selection and the LL 144 rows
    count the units present; what PI does at 'left' changes neither."""
    system = tiny.make_bare(departed=(2,))
    docs = [cf.audit({"name": "tri-mc", "engine": {"n": N, "seed": 3}},
                     system=system, policy=tiny.TablePolicy(p)).to_dict()
            for p in (PI, PI_BASELINE_AT_LEFT)]
    sel = docs[0]["selection"]
    assert sel["source"] == "mc" and sel == docs[1]["selection"]
    _within(sel, HAND_RATE, HAND_OVERALL)
    rows = {(r["step"], r["group"]): r for r in ll144_rows(docs[0])}
    for g in HAND_RATE:
        assert rows[(1, g)]["n"] == sel["n"][g][1] < N
        assert rows[("all", g)]["n"] == sum(sel["n"][g])
        assert rows[("all", g)]["selection_rate"] == sel["rate_overall"][g]["admit"]


class _Pairs:
    """The tiny triage case as coupled units: each world holds one insured and one
    uninsured patient (U = 2), stepped as tinytri.TinySim steps them."""

    n_groups, n_levels = 2, 3

    def __init__(self, tiny):
        self.tiny, self.inner = tiny, tiny.TinySim()
        self.group_names = tiny.GROUPS

    def reset(self, n, group, rng):
        g = np.tile([0, 1], n)
        x = np.minimum((rng.random(2 * n)[:, None] >= np.cumsum(self.tiny.INITIAL[g], 1)
                        ).sum(1), 2)
        return (x, g, 0)

    def observe(self, st):
        return self.inner.observe(st)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, st, d, u):
        return self.inner.step(st, d, u)


def test_coupled_monte_carlo_rates_count_only_those_present(tiny):
    """The engine of coupled units counts the decisions of those present too."""
    def make(departed):
        return cf.System(id="pairs", groups=tiny.GROUPS, levels=tiny.LEVELS, horizon=2,
                         decisions=cf.DecisionSet(labels=("monitor", "admit"), baseline=0),
                         simulator=lambda: _Pairs(tiny), units_per_replica=2,
                         departed=departed)
    system = make((2,))
    decs = [cf.decompose(system, tiny.TablePolicy(p), n=N, seed=3)
            for p in (PI, PI_BASELINE_AT_LEFT)]
    np.testing.assert_array_equal(decs[0].decisions, decs[1].decisions)
    sel = _selection(decs[0], system)
    _within(sel, HAND_RATE, HAND_OVERALL)
    plain = cf.decompose(make(None), tiny.TablePolicy(PI), n=N, seed=3)
    assert _selection(plain, system)["n"] == {"insured": [N, N], "uninsured": [N, N]}


def test_a_declared_model_run_by_monte_carlo_counts_those_present(tiny):
    """decompose_mc on a bare TabularModel (its simulator) takes the model's
    departed_levels; the same through cf.decompose(engine="mc") on the declared system."""
    model = tiny.make().with_(departed=(2,)).tabular
    for dec in (cf.decompose_mc(model, tiny.TablePolicy(PI), 2, n=N, seed=3),
                cf.decompose(tiny.make().with_(departed=(2,)), tiny.TablePolicy(PI),
                             engine="mc", n=N, seed=3)):
        _within(_selection(dec, tiny.make()), HAND_RATE, HAND_OVERALL)


def test_observations_without_levels_are_refused_when_departed_is_declared(tiny):
    class NoLevel(tiny.TinySim):
        def observe(self, st):
            return cf.Observation(group=st[1], features=np.asarray(st[0], float)[:, None],
                                  t=st[2])

    system = cf.System(id="nolevel", groups=tiny.GROUPS, levels=tiny.LEVELS, horizon=2,
                       features=("x",), simulator=NoLevel, departed=(2,),
                       decisions=cf.DecisionSet(labels=("monitor", "admit"), baseline=0))
    with pytest.raises(cf.errors.SimulatorContractError,
                       match=r"NoLevel.observe: the system declares departed levels \(2,\) but "
                             r"the observations carry no level; give Observation.level"):
        cf.decompose(system, lambda obs: np.full(len(obs.group), 0.5), n=100, seed=0)

"""Selection rates of Monte Carlo audits (the LL144 table on systems without a tabular
model): the engine counts the decisions it draws, audit.json's ``selection`` carries those
counts and rates, and ``causalfair export ll144`` works on a simulator-only system."""

from __future__ import annotations

import csv
import io
import json
import sys

import numpy as np
import pytest

import causalfair as cf
from causalfair._io import to_jsonable
from causalfair.audit import audit
from causalfair.audit.run import counted_selection
from causalfair.engines.montecarlo import paired_jobs, simulate_batch
from causalfair.report.export import read_audit, write_exports
from tests.conftest import schema_errors

SIM = '''
import numpy as np
from causalfair.policies.core import Observation
from causalfair.systems.simulator import StepResult


class State:
    def __init__(self, x, g, t):
        self.x, self.g, self.t = x, g, t


class Sim:
    n_groups = 2
    feature_names = ("x",)
    horizon = 5

    def reset(self, n, group, rng):
        return State(rng.random(n) + 0.2 * np.asarray(group), np.full(n, group), 0)

    def observe(self, s):
        return Observation(group=s.g, features=s.x[:, None].copy(), t=s.t)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, noise):
        gain = 0.1 * d + 0.05 * (noise - 0.5)
        return StepResult(state=State(s.x + gain, s.g, s.t + 1), gain=gain, reward=d * 1.0)


def make():
    return Sim()


class Above:
    name = "above"

    def prob_d1(self, obs):
        return (obs.features[:, 0] > 0.5).astype(float)


def policy():
    return Above()
'''

SPEC = '''name = "tiny-sim"
[system]
factory = "{module}:make"
[policy]
factory = "{module}:policy"
[engine]
kind = "mc"
n = 50
seed = 3
[thresholds]
abs_C = 5.0
'''


@pytest.fixture
def tiny(tmp_path):
    module = f"tiny_sel_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{module}.py").write_text(SIM)
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC.format(module=module))
    yield spec
    sys.modules.pop(module, None)


def test_a_simulator_only_audit_records_the_decisions_it_drew_and_exports_ll144(tiny, tmp_path):
    res = audit(tiny)
    sel = res.selection
    assert sel is not None and sel["source"] == "mc", "no selection on a Monte Carlo audit"
    groups = sel["groups"]
    assert groups == list(res.system.groups) and sel["actions"] == ["d1"] and sel["steps"] == 5
    # the counts are the units whose observation the policy selects, step by step, on the
    # engine's own streams (recounted here from the observations, not from the decisions)
    system = res.system
    job = paired_jobs(system, res.policy, res.policy, 5, n=50, seed=3)[0][0]
    for g in (0, 1):
        seen = np.zeros(5, dtype=int)

        def rec(t, obs, gain, fork, seen=seen):
            seen[t] = int((obs.features[:, 0] > 0.5).sum())

        simulate_batch(job, g, 0, 50, rec)
        name = groups[g]
        assert sel["n"][name] == [50] * 5
        assert sel["count"][name]["d1"] == seen.tolist(), g
        assert sel["rate"][name]["d1"] == (seen / 50).tolist()
        assert sel["rate_overall"][name]["d1"] == pytest.approx(seen.sum() / 250, abs=1e-15)
    assert sel["count"][groups[0]]["d1"] != sel["count"][groups[1]]["d1"]  # group 1 starts higher
    # audit.json carries it (and validates); the LL144 export works from it alone
    folder = tmp_path / "report"
    folder.mkdir()
    doc = json.dumps(to_jsonable(res.to_dict()), allow_nan=False)
    (folder / "audit.json").write_text(doc, encoding="utf-8")
    assert schema_errors(folder / "audit.json", "audit") == []
    assert read_audit(folder)["selection"]["source"] == "mc"
    written = write_exports("ll144", folder)
    assert all(written.values()) and len(written) == 2
    rows = list(csv.DictReader(io.StringIO((folder / "ll144.csv").read_text())))
    step0 = {r["group"]: r for r in rows if r["step"] == "0"}
    lo, hi = groups
    assert step0[hi]["n"] == "50" and step0[hi]["selected"] == str(sel["count"][hi]["d1"][0])
    top = max(sel["rate"][g]["d1"][0] for g in groups)
    assert float(step0[lo]["impact_ratio"]) == pytest.approx(sel["rate"][lo]["d1"][0] / top)
    md = (folder / "ll144.md").read_text()
    assert "drawn by the Monte Carlo run (counts: simulated units)" in md


def test_coupled_units_count_every_unit_of_every_group():
    """replicator-1 (two coupled units per world, six actions): "action:2" gives every unit
    action 2 at every step; the counts cover n worlds x one unit per group."""
    system = cf.systems.make("replicator-1")
    dec = cf.decompose_mc(system, "action:2", n=2, seed=0)
    T = system.horizon
    assert dec.decisions.shape == (2, system.n_actions, T)
    assert (dec.decisions[:, 2, :] == 2).all() and dec.decisions.sum() == 2 * 2 * T
    sel = counted_selection(dec.decisions, dec.groups, system.decisions.labels,
                            system.decisions.baseline)
    assert sel["baseline_action"] == "reject all" and len(sel["actions"]) == 5
    assert sel["rate_overall"]["g1"] == {"a=0.1": 0.0, "a=0.3": 0.0, "a=0.5": 1.0,
                                         "a=0.7": 0.0, "a=0.9": 0.0}


def test_monte_carlo_selection_rates_agree_with_the_exact_ones():
    """On lending-1 (a tabular model): the rates counted from the decisions the Monte Carlo
    run drew are within sampling error of sum_x mu_t(x | s) pi_t(d1 | x, s), step by step."""
    from causalfair.audit.run import selection_rates
    from causalfair.policies.grid import policy_table

    system, T, n = cf.systems.make("lending-1"), 6, 4000
    dec = cf.decompose_mc(system, "threshold:0.5", T, n=n, seed=1)
    assert dec.steps.shape == (3, 2, T) and (dec.decisions.sum(1) == n).all()
    mc = counted_selection(dec.decisions, dec.groups, system.decisions.labels, 0)
    model = system.tabular
    table = policy_table(cf.parse_policy("threshold:0.5", system), model, T)
    ex = selection_rates(model, table, model.propagate(table, T), T, source="exact",
                         labels=system.decisions.labels)
    act = ex["actions"][0]
    assert mc["actions"] == ex["actions"] and mc["groups"] == ex["groups"]
    for g in ex["groups"]:
        p, q = np.array(ex["rate"][g][act]), np.array(mc["rate"][g][act])
        se = np.sqrt(np.maximum(p * (1 - p), 1e-4) / n)
        assert (np.abs(q - p) < 5 * se).all(), (g, p, q)


def test_the_standard_error_of_a_counted_selection_share_by_hand():
    """se_selected = sum_t (n_t / N) sqrt(p_t (1 - p_t) / m_t), p_t = (x_t + 1/2) / (n_t + 1)
    with x_t the units given any non-baseline action (two here: 3 actions, baseline 0),
    m_t the units (or the worlds)."""

    def sd(x, m, per=None):
        p = (x + 0.5) / (m + 1)
        return np.sqrt(p * (1 - p) / (per or m))

    cnt = np.zeros((2, 3, 2), dtype=np.int64)
    cnt[0, :, 0] = (5, 3, 2)  # group A, step 0: 10 units, 5 selected
    cnt[0, :, 1] = (8, 1, 1)  # step 1: 10 units, 2 selected
    cnt[1, :, 0] = (0, 4, 0)  # group B: everyone selected at step 0 (p = 1: se 0)
    cnt[1, :, 1] = (6, 1, 1)  # 8 units, 2 selected
    dec = cf.decompose_mc(cf.systems.make("lending-1"), "threshold:0.5", 2, n=50, seed=0)
    A, B = dec.groups
    sel = counted_selection(cnt, [A, B], ["d0", "d1", "d2"], 0)
    assert sel["se_selected"][A] == pytest.approx(0.5 * sd(5, 10) + 0.5 * sd(2, 10), rel=1e-12)
    # everyone selected at step 0: an error all the same (4.5 / 5 read as the share)
    assert sel["se_selected"][B] == pytest.approx(4 / 12 * sd(4, 4) + 8 / 12 * sd(2, 8),
                                                  rel=1e-12)
    assert sd(4, 4) > 0
    worlds = counted_selection(cnt, [A, B], ["d0", "d1", "d2"], 0, worlds=4)
    assert worlds["se_selected"][A] == pytest.approx(0.5 * sd(5, 10, 4) + 0.5 * sd(2, 10, 4),
                                                     rel=1e-12)
    # the pair's ratio: min / max of the shares (0.35 and 0.5), delta method on its log
    from causalfair.engines.groups import compare

    g = compare(dec, selection=sel)
    r, lo, hi, se = g.pairs[f"{B}-{A}"]["ratio_selection"]
    s_log = np.hypot(sel["se_selected"][A] / 0.35, sel["se_selected"][B] / 0.5)
    assert (r, se) == pytest.approx((0.7, 0.7 * s_log), rel=1e-12)
    assert (lo, hi) == pytest.approx((0.7 * np.exp(-1.959963984540054 * s_log), 1.0), rel=1e-9)


def test_the_selection_bound_covers_the_spread_over_seeds():
    """The bound is at least the standard deviation of the share over independent runs
    (lending-1, whose credit levels make a unit's decisions correlated over the steps,
    where the steps' binomial errors added as if independent would be too small)."""
    system = cf.systems.make("lending-1")
    shares, bounds = [], []
    for seed in range(40):
        dec = cf.decompose_mc(system, "threshold:0.5", 6, n=300, seed=seed, jobs=1)
        sel = counted_selection(dec.decisions, dec.groups, system.decisions.labels, 0)
        shares.append(sel["rate_overall"]["s+"]["approve"])
        bounds.append(sel["se_selected"]["s+"])
    spread = float(np.std(shares, ddof=1))
    naive = float(np.mean(bounds)) / np.sqrt(6)  # about what independent steps would give
    # equal here (the steps nearly perfectly correlated); 0.8: the spread of 40 runs is
    # itself known to about 11%
    assert np.mean(bounds) >= 0.8 * spread > naive, (np.mean(bounds), spread, naive)


def test_a_noisy_selection_ratio_is_inconclusive_not_a_certain_fail(tiny):
    """A simulator without a tabular model, 50 units per group: the Monte Carlo selection
    rates carry an interval, so min_ratio_selection at its middle is INCONCLUSIVE (old
    code: a zero-width interval at the estimate, a definite verdict from sampling noise)."""
    base = tiny.read_text()
    tiny.write_text(base.replace("abs_C = 5.0", "min_ratio_selection = 0.5"))
    res = audit(tiny)
    v = next(v for v in res.verdicts if v.key == "min_ratio_selection")
    pair = res.group_comparison.pairs[v.pair]["ratio_selection"]
    assert pair[3] is not None and v.lower < v.estimate < v.upper, v
    assert (v.lower, v.upper) == pytest.approx(pair[1:3], abs=0)
    tiny.write_text(base.replace("abs_C = 5.0", f"min_ratio_selection = {(v.lower + v.upper) / 2}"))
    again = next(x for x in audit(tiny).verdicts if x.key == "min_ratio_selection")
    assert again.status == "INCONCLUSIVE" and again.estimate == v.estimate


def test_a_groups_selection_interval_stays_within_0_and_1():
    """Everyone selected in a small sample: the share 1 has an error (p read as
    (x + 1/2) / (n + 1)), and its interval is cut at 1, as a share's must be."""
    from causalfair.engines.groups import compare

    dec = cf.decompose_mc(cf.systems.make("lending-1"), "threshold:0.5", 2, n=50, seed=0)
    cnt = np.zeros((2, 2, 2), dtype=np.int64)
    cnt[:, 1, :] = 5  # 5 units, all given d1, at both steps, in both groups
    sel = counted_selection(cnt, list(dec.groups), ["d0", "d1"], 0)
    v, lo, hi, se = compare(dec, selection=sel).per_group[dec.groups[0]]["selection"]
    assert (v, hi) == (1.0, 1.0) and se > 0 and lo == pytest.approx(1.0 - 1.959963984540054 * se)

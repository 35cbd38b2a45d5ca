"""An honest interval for the data-chosen pair (docs/decomposition.md, "More than two
groups"): with more than two groups and no pair named, the compared pair (the largest and
smallest V^pi) is picked from the same estimates, so its intervals (C, DPE, IPE, SPE and
the pairs table's row, ratio_V included) are simultaneous over the m = G(G-1)/2 pairs by
Bonferroni: z_{1 - alpha/(2m)} (causalfair._simultaneous, the one function every door
calls). A named pair, two groups and the exact engine are untouched."""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np
import pytest

import causalfair as cf
from causalfair._simultaneous import (
    pair_alpha,
    pair_z,
    pairs_chosen_from,
    simultaneous_dict,
    simultaneous_sentence,
)
from causalfair._validation import z_quantile
from causalfair.engines.montecarlo import decompose_mc
from causalfair.model import TabularModel
from causalfair.policies.core import TablePolicy
from tests.conftest import run_cmd

EFFECTS = ("C", "DPE", "IPE", "SPE")


def _same_groups(G: int) -> tuple[TabularModel, TablePolicy]:
    """G groups with the same start, kernel and policy: every true effect of every pair is
    0 (benchmarks/coverage_study.py's model)."""
    k = np.zeros((G, 2, 2, 2))
    k[:, 0, 0], k[:, 1, 0], k[:, 0, 1], k[:, 1, 1] = [0.8, 0.2], [0.4, 0.6], [0.3, 0.7], [0.1, 0.9]
    reward = np.zeros((G, 2, 2))
    reward[:, 1, 0] = 1.0
    m = TabularModel(kernel=k, initial=np.tile([0.5, 0.5], (G, 1)),
                     potential=np.array([0.0, 1.0]), reward=reward,
                     group_names=[f"g{i}" for i in range(G)], name="same")
    return m, TablePolicy(np.tile([0.5, 0.5], (G, 1)))


def _mc(m, pol, seed, pair=None, n=200):
    return decompose_mc(m, pol, 3, n=n, seed=seed, check=False, jobs=1, pair=pair)


# ------------------------------------------------------------------ the quantile, by hand
@pytest.mark.parametrize(("m", "z_by_hand"), [(3, 2.393979799818510), (10, 2.807033768343804)])
def test_quantile_is_bonferronis_by_hand(m, z_by_hand):
    """z_{1 - alpha/(2m)} at alpha = 0.05: 1 - 0.05/6 = 0.991667 (m = 3) and 1 - 0.05/20 =
    0.9975 (m = 10), the values of statistics.NormalDist and scipy."""
    from scipy.stats import norm

    assert pair_z(0.05, m) == pytest.approx(statistics.NormalDist().inv_cdf(1 - 0.05 / (2 * m)),
                                            abs=1e-12)
    assert pair_z(0.05, m) == pytest.approx(norm.ppf(1 - 0.05 / (2 * m)), abs=1e-9)
    assert pair_z(0.05, m) == pytest.approx(z_by_hand, abs=1e-9)
    assert pair_z(0.05, 1) == pytest.approx(1.959963984540054, abs=1e-12) == z_quantile(0.05)
    assert pair_alpha(0.05, m) == pytest.approx(0.05 / m)
    d = simultaneous_dict(m, 0.05)
    assert d["pairs"] == m and d["method"] == "bonferroni" and d["family_level"] == 0.95
    assert d["level"] == pytest.approx(1 - 0.05 / m) and d["z"] == pair_z(0.05, m)


def test_pairs_chosen_from():
    """m = G(G-1)/2 for the default of more than two groups; 1 when named or two groups."""
    assert [pairs_chosen_from(G, False) for G in (2, 3, 4, 5)] == [1, 3, 6, 10]
    assert [pairs_chosen_from(G, True) for G in (2, 3, 5)] == [1, 1, 1]
    with pytest.raises(ValueError, match="m: bad value 0"):
        pair_alpha(0.05, 0)


def test_the_hallway_imports_no_numpy():
    """The sentence is said by the report's text too: its module stays numpy-free."""
    probe = ("import sys, causalfair._simultaneous, causalfair.report.compared\n"
             "print([m for m in ('numpy', 'pandas') if m in sys.modules])")
    out = run_cmd([sys.executable, "-c", probe], expect=0, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# ------------------------------------------------------------------ Monte Carlo door
def test_mc_default_pair_intervals_are_z_over_m_times_se():
    """Three groups, no pair: C, DPE, IPE, SPE are estimate +- z_{1-0.05/6} se; the per-group
    values and utility keep z_{0.975}; the point estimates are those of the named run."""
    m, pol = _same_groups(3)
    dec = _mc(m, pol, 0)
    assert dec.simultaneous == 3
    named = _mc(m, pol, 0, pair=dec.pair)
    assert named.simultaneous == 1
    z3, z = pair_z(0.05, 3), z_quantile(0.05)
    ci, ci_named = dec.intervals(0.05), named.intervals(0.05)
    for k in EFFECTS:
        e, s = dec.estimates()[k], dec.se[k]
        assert e == named.estimates()[k]
        assert ci[k] == pytest.approx((e - z3 * s, e + z3 * s), abs=1e-15)
        assert ci_named[k] == pytest.approx((e - z * s, e + z * s), abs=1e-15)
    for k in ("V[g0]", "direct[g2]", "utility"):
        assert ci[k] == ci_named[k]
    d = dec.to_dict()
    assert d["simultaneous"]["pairs"] == 3 and d["simultaneous"]["z"] == pair_z(0.05, 3)
    assert d["ci95"]["C"] == list(ci["C"])
    assert "simultaneous" not in named.to_dict()
    assert dec.simultaneous_note() in str(dec) and "simultaneous" not in str(named)
    frame = dec.to_frame()
    assert frame.loc["C", "ci_lower"] == ci["C"][0]


def test_compare_groups_widens_the_chosen_row_only():
    """cf.compare_groups on three groups (Monte Carlo, independent units): the row of the
    default pair (the worst pair) has the decomposition's simultaneous intervals, ratio_V's
    by the same z; every other row keeps z_{0.975}; the JSON says which row and how."""
    m, pol = _same_groups(3)
    gc = cf.compare_groups(m, pol, 3, engine="mc", n=200, seed=1, jobs=1)
    dec = _mc(m, pol, 1)
    assert gc.chosen is not None and gc.simultaneous == 3
    a, b = (dec.groups[i] for i in dec.pair)
    assert gc.chosen in (f"{a}-{b}", f"{b}-{a}") and gc.chosen == gc.worst
    z3, z = pair_z(0.05, 3), z_quantile(0.05)
    for p, q in gc.pairs.items():
        zz = z3 if p == gc.chosen else z
        e, lo, hi, s = q["C"]
        assert (lo, hi) == pytest.approx((e - zz * s, e + zz * s), abs=1e-12)
        r, rlo, rhi, rse = q["ratio_V"]
        s_log = rse / r
        assert rlo == pytest.approx(r * math.exp(-zz * s_log), abs=1e-12)
    lo, hi = gc.quantity(f"{a}-{b}", "C")[1:3]
    assert (lo, hi) == pytest.approx(dec.intervals(0.05)["C"], abs=1e-12)
    sim = gc.to_dict()["pairs"]["simultaneous"]
    assert sim["pair"] == gc.chosen and sim["pairs"] == 3
    assert gc.simultaneous_note() in str(gc)


def test_named_pair_and_two_groups_are_untouched():
    """A named pair of three groups, and the default of two groups: every interval at
    z_{0.975}, no simultaneous key, no sentence (the outputs as before)."""
    m, pol = _same_groups(3)
    for dec in (_mc(m, pol, 2, pair=(0, 2)), _mc(*_same_groups(2), 2)):
        assert dec.simultaneous == 1
        z = z_quantile(0.05)
        for k in EFFECTS:
            e, s = dec.estimates()[k], dec.se[k]
            assert dec.intervals(0.05)[k] == (e - z * s, e + z * s)
        assert "simultaneous" not in dec.to_dict() and dec.simultaneous_note() == ""
    gc = cf.compare_groups(*_same_groups(2), 3, engine="mc", n=200, seed=2, jobs=1)
    assert gc.chosen is None and "simultaneous" not in gc.to_dict()["pairs"]


def test_exact_engine_is_untouched():
    m, pol = _same_groups(3)
    dec = cf.decompose(m, pol, 3)
    assert dec.simultaneous == 1 and "simultaneous" not in dec.to_dict()
    gc = cf.compare_groups(m, pol, 3)
    assert gc.chosen is None
    assert "--pair A-B (pair= in Python) compares another." in gc.table_lines(dec.pair)[-1]


# ------------------------------------------------------------------ coverage
def _coverage_mc(G: int, seeds: range) -> float:
    m, pol = _same_groups(G)
    hits = 0
    for s in seeds:
        lo, hi = _mc(m, pol, s).intervals(0.05)["C"]
        hits += lo <= 0.0 <= hi
    return hits / len(seeds)


def _coverage_logs(G: int, seeds: range, per_group: int = 200) -> float:
    from causalfair.logs import audit_logs, simulate_logs

    m, pol = _same_groups(G)
    hits = 0
    for s in seeds:
        df = simulate_logs(m, pol, per_group * G, 3, seed=s)
        lo, hi = audit_logs(df, n_boot=100, seed=s, horizon=3,
                            policy=pol).decomposition.intervals(0.05)["C"]
        hits += lo <= 0.0 <= hi
    return hits / len(seeds)


@pytest.mark.parametrize("G", [3, 5])
def test_chosen_pair_covers_mc_fast(G):
    """120 seeds (SE 0.02 at 0.95): the marginal interval covered 0.877 / 0.737."""
    assert _coverage_mc(G, range(120)) >= 0.90


@pytest.mark.parametrize("G", [3, 5])
def test_chosen_pair_covers_logs_fast(G):
    """20 log audits: the marginal interval covered 0.820 with 3 groups."""
    assert _coverage_logs(G, range(20)) >= 0.85


@pytest.mark.slow
@pytest.mark.parametrize("G", [3, 5])
def test_chosen_pair_covers_mc_many_seeds(G):
    """1000 seeds (SE 0.007): at least 0.93, as a named pair."""
    assert _coverage_mc(G, range(1000)) >= 0.93


@pytest.mark.slow
@pytest.mark.parametrize("G", [3, 5])
def test_chosen_pair_covers_logs_many_seeds(G):
    """200 log audits of 500 individuals per group (SE 0.015; at 200 per group the log
    audit's own interval of a named pair covers about 0.92 with three groups, docs/logs.md)."""
    assert _coverage_logs(G, range(200), per_group=500) >= 0.93


# ------------------------------------------------------------------ logs door
def test_logs_door_states_it_and_a_named_pair_does_not():
    from causalfair.logs import audit_logs, simulate_logs

    m, pol = _same_groups(3)
    df = simulate_logs(m, pol, 600, 3, seed=0)
    a = audit_logs(df, n_boot=60, seed=0, horizon=3, policy=pol)
    named = audit_logs(df, n_boot=60, seed=0, horizon=3, policy=pol, pair=a.pair_name)
    assert a.decomposition.simultaneous == 3 and named.decomposition.simultaneous == 1
    # percentile intervals: C's at 0.05/6, the named pair's at 0.025 of the same replicates
    boot = a.bootstrap["C"]
    assert a.conf_int(0.05).loc["C"].tolist() == pytest.approx(
        boot.quantile([0.05 / 6, 1 - 0.05 / 6]).tolist(), abs=1e-15)
    assert named.conf_int(0.05).loc["C"].tolist() == pytest.approx(
        named.bootstrap["C"].quantile([0.025, 0.975]).tolist(), abs=1e-15)
    e, s = a.decomposition.C, a.decomposition.se["C"]
    assert a.decomposition.intervals(0.05)["C"] == pytest.approx(
        (e - pair_z(0.05, 3) * s, e + pair_z(0.05, 3) * s), abs=1e-15)
    d = a.to_dict()
    assert d["ci"]["simultaneous"]["pairs"] == 3
    assert d["pairs"]["simultaneous"]["pair"] == a.groups.chosen
    assert d["pairs"]["compared_by"] == "largest_abs_C"
    assert "simultaneous" not in json.dumps(named.to_dict())
    text = a.summary()
    note = simultaneous_sentence(a.pair_name, 3, 0.05)
    assert text.count(note) == 1, text  # said once, under the table of every pair
    assert "simultaneous" not in named.summary()


# ------------------------------------------------------------------ command and audit doors
@pytest.mark.parametrize("pair", [None, "site 2-site 1"])
def test_decompose_command_json_states_it(pair):
    args = [sys.executable, "-m", "causalfair", "decompose", "--system", "attention-1",
            "--policy", "uniform", "--n", "60", "--jobs", "1", "--json"]
    out = json.loads(run_cmd(args + (["--pair", pair] if pair else []), expect=0,
                             timeout=300).stdout)
    if pair is None:
        assert out["pairs"]["compared_by"] == "largest_abs_C"
        assert out["simultaneous"] == simultaneous_dict(10, 0.05)
        assert out["pairs"]["simultaneous"]["pairs"] == 10
        e, s = out["C"], out["se"]["C"]
        assert out["ci"]["C"] == pytest.approx([e - pair_z(0.05, 10) * s,
                                                e + pair_z(0.05, 10) * s], abs=1e-12)
    else:
        assert out["pairs"]["compared_by"] == "named"
        assert "simultaneous" not in out and "simultaneous" not in out["pairs"]
        e, s = out["C"], out["se"]["C"]
        assert out["ci"]["C"] == pytest.approx([e - z_quantile(0.05) * s,
                                                e + z_quantile(0.05) * s], abs=1e-12)


def test_report_sentence_is_the_command_lines():
    """report/compared.py says the one sentence, from audit.json's pairs section."""
    from causalfair.report.compared import compared_sentence

    pairs = {"compared": "g1-g2", "compared_by": "largest_abs_C",
             "simultaneous": simultaneous_dict(3, 0.05)}
    text = compared_sentence(pairs, "mc")
    assert simultaneous_sentence("g1-g2", 3, 0.05) in text
    assert "leans away" not in text
    assert "simultaneous" not in compared_sentence({**pairs, "compared_by": "named"}, "mc")
    assert "simultaneous" not in compared_sentence(pairs, "exact")


def test_gate_judges_the_widened_interval():
    """The audit's quantities (what the gate's thresholds judge) of a data-chosen pair are
    the decomposition's simultaneous intervals."""
    from types import SimpleNamespace

    from causalfair.audit.run import _quantities

    m, pol = _same_groups(3)
    dec = _mc(m, pol, 3)
    q = _quantities(SimpleNamespace(alpha=0.05), dec, {})
    for k in EFFECTS:
        e, s = dec.estimates()[k], dec.se[k]
        assert q[k][1:3] == pytest.approx((e - pair_z(0.05, 3) * s, e + pair_z(0.05, 3) * s),
                                          abs=1e-15)
    e, s = dec.utility, dec.se["utility"]
    assert q["utility"][1:3] == pytest.approx((e - z_quantile(0.05) * s,
                                               e + z_quantile(0.05) * s), abs=1e-15)

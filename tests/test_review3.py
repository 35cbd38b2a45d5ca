"""Defects found reviewing the pair, baseline, log-bounds and training-worker changes: the
pair a log audit's bounds and a baseline threshold compare, a verdict over every pair with
an unknown (NaN) pair, and a Monte Carlo-audited training run without pandas. Each test
fails on the code before its fix."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from causalfair.errors import InputError
from causalfair.logs import audit_logs, simulate_logs
from causalfair.systems.lending.settings import lending_setting

LM = lending_setting("lending-1")


@pytest.fixture(scope="module")
def deterministic_log():
    """A threshold policy's log: d0 never logged above the threshold, d1 never below
    (positivity fails, so the audit gives bounds)."""
    return simulate_logs(LM, "threshold:0.5", 2_000, 6, seed=8)


def test_log_bounds_are_of_the_pair_asked(deterministic_log):
    """audit_logs(pair=) also on the bounds path (on_positivity="bounds"): C's bounds of
    "s--s+" are those of "s+-s-" negated, and a pair naming no group is refused."""
    ab = audit_logs(deterministic_log, n_boot=0, on_positivity="bounds").bounds
    ba = audit_logs(deterministic_log, n_boot=0, on_positivity="bounds", pair="s--s+").bounds
    assert ba.loc["C", "lower"] == pytest.approx(-ab.loc["C", "upper"], abs=1e-12)
    assert ba.loc["C", "upper"] == pytest.approx(-ab.loc["C", "lower"], abs=1e-12)
    assert abs(ab.loc["C", "lower"]) > 1e-3  # a sign to flip
    with pytest.raises(InputError, match=r"pair: 'Z-Q' names no two groups"):
        audit_logs(deterministic_log, n_boot=0, on_positivity="bounds", pair="Z-Q")


def test_a_baseline_threshold_compares_the_same_pair_of_groups(tmp_path):
    """[baseline.thresholds] on the exact engine with three groups: the baseline's C is of
    the audited policy's pair (as the paired Monte Carlo run and the attribution take it),
    not of the baseline's own largest and smallest V^pi."""
    import causalfair as cf
    from causalfair.engines.exact import exact_numbers
    from tests.tri_system import tri_source

    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    spec = tmp_path / "s.toml"
    spec.write_text('name = "tri"\n[system]\nfactory = "tri:make"\n[policy]\n'
                    'factory = "tri:mixed"\n[baseline]\nbuiltin = "always"\n'
                    '[baseline.thresholds]\nC = 1\n', encoding="utf-8")
    res = cf.audit(spec)
    pair = res.decomposition.pair
    assert pair == (1, 2)  # B-C; "always" alone would compare C-A
    model = res.system.tabular
    want = exact_numbers(model, np.ones((3, 2)), 3, pair=pair).decomposition.C
    got = res.extra["baseline"]["quantities"]["C"]
    assert got["baseline"] == pytest.approx(want, abs=1e-12)
    assert got["difference"] == pytest.approx(res.decomposition.C - want, abs=1e-12)


class _Comparison:
    """A GroupComparison's view group_verdicts reads: pair -> (estimate, lower, upper, se)."""

    def __init__(self, key, by):
        self.pairs = {p: {key: q} for p, q in by.items()}

    def by_pair(self, key):
        return {p: q[key] for p, q in self.pairs.items() if q.get(key) is not None}


@pytest.mark.parametrize("key, ok, unknown", [
    ("max_abs_C", (0.05, 0.0, 0.08, None), 0.1),
    ("min_ratio_V", (0.9, 0.85, 0.95, None), 0.8),
])
def test_a_pair_without_a_value_makes_the_verdict_inconclusive_in_any_order(key, ok, unknown):
    """A verdict over every pair keeps the worst of the pairs' own verdicts whatever their
    order: a pair whose value is NaN (unknown) is INCONCLUSIVE, so the verdict is not a PASS
    that names that pair."""
    from causalfair.thresholds import FAIL, INCONCLUSIVE, group_verdicts

    nan = float("nan")
    metric = key.split("_", 1)[1].removeprefix("abs_")
    for by in ({"A-B": (nan, nan, nan, None), "A-C": ok}, {"A-C": ok, "A-B": (nan, nan, nan, None)}):
        (v,) = group_verdicts({key: unknown}, _Comparison(metric, by))
        assert (v.status, v.pair) == (INCONCLUSIVE, "A-B"), (list(by), v)
        assert v.estimate == ok[0]
    bad = (0.3, 0.2, 0.4, None) if key.startswith("max_") else (0.5, 0.4, 0.6, None)
    for by in ({"A-B": (nan, nan, nan, None), "B-C": bad}, {"B-C": bad, "A-B": (nan, nan, nan, None)}):
        (v,) = group_verdicts({key: unknown}, _Comparison(metric, by))
        assert (v.status, v.pair, v.estimate) == (FAIL, "B-C", bad[0]), (list(by), v)


def test_a_monte_carlo_audited_training_run_imports_no_pandas(tmp_path):
    """A training worker imports no pandas (docs/scale.md), also on a system audited by
    Monte Carlo: its audits' intervals come from Decomposition.intervals, not the
    DataFrame of conf_int; the numbers are conf_int's."""
    from tests.conftest import run_cmd

    code = ("import sys; from causalfair.train import TrainConfig, train\n"
            "cfg = TrainConfig(algo='ppo', iterations=1, seed=0, system='attention-1', "
            "audit_n=50, n_individuals=20)\n"
            f"r = train(cfg, out={str(tmp_path / 'run')!r})\n"
            "print(r.metrics['C_ci'][0] < r.metrics['C'] < r.metrics['C_ci'][1])\n"
            "print(sorted(m for m in ('pandas', 'scipy') if m in sys.modules))\n")
    proc = run_cmd([sys.executable, "-c", code], expect=0,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.stdout.split("\n")[-3:] == ["True", "[]", ""], proc.stderr


def test_decomposition_intervals_are_conf_int():
    from causalfair.engines.montecarlo import decompose_mc
    from causalfair.policies.resolver import resolve
    from causalfair.systems import make

    s = make("lending-1")
    d = decompose_mc(s, resolve("threshold:0.5", s).policy, 4, n=200, seed=1)
    ci = d.conf_int(0.1)
    assert d.se and {k: (ci.loc[k, "lower"], ci.loc[k, "upper"]) for k in ci.index} \
        == d.intervals(0.1)


@pytest.mark.parametrize("bad", ["01", (0.7, 1), (True, 0), (0, 1, 2), 3])
def test_a_pair_of_indices_must_be_two_integers(bad):
    """check_pair read "01" as (0, 1) and (0.7, 1) as (0, 1): a wrong input taken quietly."""
    from causalfair.errors import ModelError
    from causalfair.results import check_pair

    with pytest.raises(ModelError, match="expected two group indices"):
        check_pair(bad, 3, None)
    assert check_pair((2, 0), 3, None) == (2, 0)

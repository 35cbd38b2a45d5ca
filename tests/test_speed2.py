"""What a user waits for (Speed2): `causalfair decompose`, the README's first command, prints
its numbers without importing pandas (two thirds of the command's CPU time), and
prints and writes exactly what it did with pandas: the worst-pairs table is pandas'
``to_string(index=False)`` character for character (causalfair._texttable, compared here with
pandas on random tables), ``--json``'s worst pairs are ``DataFrame.to_dict("records")`` and
a Monte Carlo result's intervals are :meth:`Decomposition.conf_int`'s."""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import pandas as pd
import pytest

import causalfair as cf
from causalfair._texttable import frame_text
from causalfair.results import BenefitResult
from tests.conftest import run_cmd


def _imported_after(argv: list[str]) -> tuple[bool, str]:
    """(whether pandas was imported, stdout) of ``causalfair ARGV`` in a fresh interpreter."""
    code = ("import sys, io, contextlib\nfrom causalfair.cli import main\nbuf = io.StringIO()\n"
            f"with contextlib.redirect_stdout(buf):\n    rc = main({argv!r})\n"
            "sys.stdout.write(buf.getvalue())\nprint('PANDAS', 'pandas' in sys.modules)")
    out = run_cmd([sys.executable, "-c", code], expect=0, timeout=120,
                  env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    body, _, last = out.rstrip("\n").rpartition("\n")
    return last == "PANDAS True", body


@pytest.mark.parametrize("json_out", [False, True])
def test_exact_decompose_prints_without_pandas(json_out):
    """The README's first command (and its --json) never imports pandas; the text is the one
    pandas' table gives (rebuilt here from the same result)."""
    argv = ["decompose", "--setting", "lending-1", "--policy", "threshold:0.5"]
    used, out = _imported_after(argv + (["--json"] if json_out else []))
    assert not used
    model = cf.lending_setting("lending-1").tabular
    ben = cf.benefit_fairness(model, cf.parse_policy("threshold:0.5", model), horizon=20)
    if json_out:
        doc = json.loads(out)
        assert doc["benefit"]["worst_pairs"] == ben.worst_pairs(5).to_dict(orient="records")
        assert len(doc["benefit"]["worst_pairs"]) == 5  # --worst 5
    else:
        table = ben.worst_pairs_table(5).to_string(index=False)
        assert "Worst pairs:\n" + table + "\n" in out
        assert table.splitlines()[0].split() == [
            "level[s+]", "level[s-]", "Delta[s+]", "Delta[s-]", "p_d1[s+]", "p_d1[s-]",
            "weight", "contribution", "share"]


def _random_columns(rng: np.random.Generator, trial: int) -> dict[str, object]:
    n = int(rng.integers(1, 8))
    names = ["a", "level[s+]", "Delta[s-]", "weight", "contribution", "share", "x y",
             "p_d1[women 18-25]", "z" * 45]
    cols: dict[str, object] = {}
    for j in range(int(rng.integers(1, 7))):
        name = f"{names[int(rng.integers(len(names)))]}{j}"
        kind = int(rng.integers(0, 6))
        if kind == 0:  # magnitudes from 1e-3 to 1e4, rounded as the table rounds
            v = np.round(rng.normal(0, 10.0 ** int(rng.integers(-3, 5)), n), 4)
        elif kind == 1:  # NaN holes, shared trailing zeros
            v = np.round(rng.uniform(-1, 1, n), int(rng.integers(0, 5)))
            v[rng.uniform(size=n) < 0.3] = np.nan
        elif kind == 2:
            v = rng.integers(-20, 2000, n).astype(np.int64)
        elif kind == 3:  # level labels (one longer than pandas' column width)
            v = [["1", "7", "high", "s+", "level 3", "x" * 45][int(i)]
                 for i in rng.integers(0, 6, n)]
        elif kind == 4:  # zeros of both signs, scientific notation, inf
            v = rng.choice([0.0, -0.0, 1.0, 0.5, 1e-7, 2e6, np.inf], n)
        else:
            v = np.full(n, np.nan)
        cols[name] = v
    return cols


def test_frame_text_is_pandas_to_string():
    """frame_text gives pandas' text on every table it covers, and None (pandas decides)
    on the others: scientific notation, inf, long labels, empty tables."""
    rng = np.random.default_rng(0)
    covered = 0
    for trial in range(600):
        cols = _random_columns(rng, trial)
        got = frame_text(cols)
        if got is not None:
            covered += 1
            assert got == pd.DataFrame(cols).to_string(index=False), cols
    assert covered > 150  # the plain tables are covered, not all sent back to pandas
    assert frame_text({"a": np.array([1e-7, 1.0])}) is None  # pandas: 1.000000e-07
    assert frame_text({"a": np.array([np.inf])}) is None
    assert frame_text({"a": np.array([], dtype=float)}) is None  # "Empty DataFrame"
    assert frame_text({"a": np.array([True])}) is None
    assert frame_text({"é": [1.5]}) is None
    hand = frame_text({"level": ["7", "10"], "Delta": np.array([-0.25, 0.5]),
                       "n": np.array([3, 12], dtype=np.int64)})
    assert hand == "level  Delta  n\n    7  -0.25  3\n   10   0.50 12"  # pandas: the same


def _benefit(multi: bool, Lambda: float, levels=("1", "2", "3")) -> BenefitResult:
    rng = np.random.default_rng(1)
    K = len(levels)
    shape = (2, K, 3) if multi else (2, K)
    contrib = rng.uniform(0, 0.05, (K, K))
    return BenefitResult(Lambda=Lambda, eps=0.1, weights="visitation",
                         delta=rng.normal(size=shape), p_d1=rng.uniform(size=shape),
                         state_weights=rng.dirichlet(np.ones(K), 2), contributions=contrib,
                         pair=(0, 1), groups=("A", "B"), levels=levels, dpe_prop1=0.01,
                         actions=("a0", "a1", "a2") if multi else ("d0", "d1"))


@pytest.mark.parametrize("multi", [False, True])
@pytest.mark.parametrize("Lambda", [0.3, 0.0])
def test_benefit_to_dict_and_summary_match_pandas(multi, Lambda):
    """BenefitResult.to_dict's worst pairs are DataFrame.to_dict("records") (native floats,
    the same values), and summary() prints worst_pairs_table's to_string, for two and for
    three actions, with and without shares."""
    ben = _benefit(multi, Lambda)
    for n in (0, 1, 4, 9):
        want = ben.worst_pairs(n).to_dict(orient="records")
        got = ben.to_dict(n_worst=n)["worst_pairs"]
        assert got == want
        assert json.dumps(got) == json.dumps(want)  # the same types, the same text
    text = ben.summary(4)
    if ben.shares_meaningful:
        assert text.endswith("Worst pairs:\n" + ben.worst_pairs_table(4).to_string(index=False))
    else:
        assert "Worst pairs: not shown" in text


def test_monte_carlo_intervals_without_pandas():
    """A Monte Carlo result's summary and to_dict give conf_int's numbers (ci95)."""
    sim = cf.LendingSimulator(cf.lending_setting("lending-1"))
    model = cf.lending_setting("lending-1").tabular
    mc = cf.decompose_mc(sim, cf.parse_policy("threshold:0.5", model), 5, n=400, seed=0)
    ci = mc.conf_int(0.05)
    doc = mc.to_dict()
    assert doc["ci95"] == {k: [float(r.lower), float(r.upper)] for k, r in ci.iterrows()}
    assert all(not math.isnan(v) for pair in doc["ci95"].values() for v in pair)
    for k in ("C", "DPE", "IPE", "SPE"):
        assert (f"95% CI [{ci.loc[k, 'lower']:+.6f}, {ci.loc[k, 'upper']:+.6f}]"
                in mc.summary())


@pytest.mark.parametrize("json_out", [False, True])
def test_monte_carlo_decompose_prints_without_pandas(json_out):
    """`decompose --engine mc` (text and --json) imports no pandas either (its intervals
    are intervals(), which test_monte_carlo_intervals_without_pandas checks against
    conf_int); every quantity keeps its interval."""
    argv = ["decompose", "--setting", "lending-1", "--engine", "mc", "--n", "2000",
            "--horizon", "5"]
    used, out = _imported_after(argv + (["--json"] if json_out else []))
    assert not used
    if json_out:
        doc = json.loads(out)
        assert {"C", "DPE", "IPE", "SPE", "utility"} <= set(doc["ci"])
        for k in ("C", "DPE", "IPE", "SPE"):
            lo, hi = doc["ci"][k]
            assert lo <= doc[k] <= hi and hi - lo > 0, (k, doc["ci"][k], doc[k])
    else:
        assert "95% CI" in out and "DPE" in out

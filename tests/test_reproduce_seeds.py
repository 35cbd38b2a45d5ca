"""reports/reproduce_seeds.py: the verdict rule on a table made by hand, and a
quick run end to end (every trained policy evaluated, the identities hold in runs.csv)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "reports" / "reproduce_seeds.py"


def _script():
    spec = importlib.util.spec_from_file_location("reproduce_seeds", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tab(cells):
    return pd.DataFrame([{"system": "s", "algo": a, "bias": m, "bias_lo": lo, "bias_hi": hi}
                         for a, (m, lo, hi) in cells.items()])


def test_the_verdict_rule_by_hand():
    best = _script().best
    # lowest mean, and its upper end (0.15) below the runner-up's mean (0.2): supported
    v, d = best(_tab({"x": (0.1, 0.05, 0.15), "y": (0.2, 0.1, 0.3), "z": (0.5, 0.4, 0.6)}),
                "s", "x", "bias", True, ("x", "y", "z"))
    assert v == "supported" and "best other y" in d
    # lowest mean but its interval reaches past y's mean: inconclusive
    v, _ = best(_tab({"x": (0.1, 0.0, 0.25), "y": (0.2, 0.1, 0.3)}), "s", "x", "bias", True, "xy")
    assert v.startswith("inconclusive (best mean")
    # y's whole interval lies below x's mean: refuted
    v, d = best(_tab({"x": (0.5, 0.4, 0.6), "y": (0.2, 0.1, 0.3)}), "s", "x", "bias", True, "xy")
    assert v == "refuted" and "clearly better: y" in d
    # higher is better (reward): x's lower end 0.45 above y's mean 0.4
    v, _ = best(_tab({"x": (0.5, 0.45, 0.55), "y": (0.4, 0.3, 0.5)}), "s", "x", "bias", False, "xy")
    assert v == "supported"
    assert best(_tab({"y": (0.4, 0.3, 0.5)}), "s", "x", "bias", True, "xy")[0] == "not tested"


@pytest.mark.slow
def test_quick_run_writes_every_file(tmp_path):
    run_cmd([sys.executable, SCRIPT, "--quick", "--out", tmp_path / "o"], timeout=600,
            env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT, expect=0)
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    assert set(runs.algo) == {"ppo", "ppo-c", "ppo-cb", "a-ppo", "f-ppo-l", "elbert-po"}
    assert (runs.Lambda >= 0).all()
    np.testing.assert_allclose(runs.C, runs.DPE + runs.IPE + runs.SPE, atol=1e-9)
    assert runs.elbert_bias.notna().all() and runs.long_term_gap.notna().all()
    readme = (tmp_path / "o" / "README.md").read_text()
    assert "| seed | claim | verdict |" in readme and "Machine:" in readme

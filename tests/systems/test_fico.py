"""Tests for the FICO-based ``lending-2`` inputs (causalfair.systems.lending.fico)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalfair.systems.lending import fico
from causalfair.systems.lending import regenerate_fico as regen
from tests.conftest import run_cmd

REPO_ROOT = Path(__file__).resolve().parents[2]
WHITE, BLACK = fico.GROUP_COLUMNS


@pytest.fixture(scope="module")
def refit() -> dict:
    return fico.fit_fico_logit()


@pytest.fixture(scope="module")
def shipped_table() -> pd.DataFrame:
    return pd.read_csv(fico.DATA_DIR / fico.TABLE_FILE)


def test_refit_matches_shipped_json(refit):
    shipped = json.loads((fico.DATA_DIR / fico.LOGIT_FILE).read_text(encoding="utf-8"))
    assert list(shipped["coefficients"]) == list(fico.COEF_NAMES)
    for name in fico.COEF_NAMES:
        assert math.isclose(
            refit["coefficients"][name], shipped["coefficients"][name], rel_tol=1e-8, abs_tol=0
        ), name
        assert math.isclose(
            refit["std_errors"][name], shipped["std_errors"][name], rel_tol=1e-6, abs_tol=0
        ), name
    assert refit["sha256"] == shipped["sha256"]
    assert refit["data_files"] == shipped["data_files"]
    assert isinstance(shipped["statsmodels_version"], str)


def test_refit_table_matches_shipped_csv(refit, shipped_table):
    table = fico.fico_table(7, refit["coefficients"])
    assert tuple(shipped_table.columns) == fico.TABLE_COLUMNS
    np.testing.assert_array_equal(shipped_table["level"].to_numpy(), table["level"])
    for col in fico.TABLE_COLUMNS[1:]:
        np.testing.assert_allclose(shipped_table[col].to_numpy(), table[col], rtol=0, atol=1e-10)


def test_check_outputs_in_process():
    diffs, _notes = regen.check_outputs()
    assert diffs == []


def test_write_outputs_roundtrip(tmp_path):
    regen.write_outputs(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([fico.LOGIT_FILE, fico.TABLE_FILE])
    diffs, _ = regen.check_outputs(tmp_path)
    assert diffs == []
    # a corrupted coefficient is reported
    data = json.loads((tmp_path / fico.LOGIT_FILE).read_text())
    data["coefficients"]["score"] *= 1 + 1e-6
    (tmp_path / fico.LOGIT_FILE).write_text(json.dumps(data))
    diffs, _ = regen.check_outputs(tmp_path)
    assert any("score" in d for d in diffs)


def test_check_cli_exits_zero():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    run_cmd([sys.executable, "-m", "causalfair.systems.lending.regenerate_fico", "--check"],
            cwd=REPO_ROOT, env=env, timeout=120, expect=0)


@pytest.mark.parametrize("K", [3, 7, 20])
def test_initial_rows_sum_to_one(K):
    p0 = fico.fico_initial(K)
    assert p0.shape == (2, K)
    assert np.all(p0 >= 0)
    np.testing.assert_allclose(p0.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def _hand_bin_mass(column: str, lo: float, hi: float, last: bool) -> float:
    """Mass of [lo, hi) (or [lo, 100] for the last bin) straight from the CDF table."""
    cdf = pd.read_csv(fico.FICO_DIR / fico.CDF_FILE)
    below_lo = cdf.loc[cdf["Score"] < lo, column]
    below_hi = cdf.loc[cdf["Score"] <= hi if last else cdf["Score"] < hi, column]
    lower = below_lo.iloc[-1] if len(below_lo) else 0.0
    return (below_hi.iloc[-1] - lower) / cdf[column].iloc[-1]


@pytest.mark.parametrize(
    ("K", "k"),
    [(7, 2), (4, 1), (4, 3), (8, 0)],  # K=4 and K=8 have edges (25, 50, 12.5) on scores
)
def test_initial_matches_hand_computation(K, k):
    p0 = fico.fico_initial(K)
    edges = fico.bin_edges(K)
    for g, column in enumerate(fico.GROUP_COLUMNS):
        expected = _hand_bin_mass(column, edges[k], edges[k + 1], last=(k == K - 1))
        assert p0[g, k] == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_edge_point_goes_to_upper_bin():
    # K=4: score 25 sits on an inner edge and belongs to bin 1, not bin 0.
    cdf = pd.read_csv(fico.FICO_DIR / fico.CDF_FILE)
    col = cdf[WHITE]
    expected_bin0 = col[cdf["Score"] == 24.5].item() / col.iloc[-1]
    assert fico.fico_initial(4)[0, 0] == pytest.approx(expected_bin0, rel=1e-12)


@pytest.mark.parametrize("K", [3, 7, 20])
def test_black_initial_mean_level_is_lower(K):
    p0 = fico.fico_initial(K)
    levels = np.arange(1, K + 1)
    assert p0[1] @ levels < p0[0] @ levels


@pytest.mark.parametrize("K", [3, 7, 20])
def test_repay_increasing_in_level(K):
    pr = fico.fico_repay(K)
    assert pr.shape == (2, K)
    assert np.all((pr > 0) & (pr < 1))
    assert np.all(np.diff(pr, axis=1) > 0)


def test_fico_repay_equals_shipped_table(shipped_table):
    pr = fico.fico_repay(7)
    # same coefficients, same formula: equal up to last-ulp libm differences at most
    np.testing.assert_allclose(pr[0], shipped_table["p_repay_white"], rtol=1e-14, atol=0)
    np.testing.assert_allclose(pr[1], shipped_table["p_repay_black"], rtol=1e-14, atol=0)
    p0 = fico.fico_initial(7)
    np.testing.assert_allclose(p0[0], shipped_table["p_x0_white"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(p0[1], shipped_table["p_x0_black"], rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    "func", [fico.fico_initial, fico.fico_repay, fico.bin_edges, fico.bin_midpoints]
)
def test_too_few_levels_raises(func):
    with pytest.raises(ValueError, match=r"K.*K=2"):
        func(2)


def test_non_integer_levels_raises():
    with pytest.raises(TypeError, match="K"):
        fico.fico_initial(7.0)


def test_bin_edges_and_midpoints():
    np.testing.assert_array_equal(fico.bin_edges(4), [0.0, 25.0, 50.0, 75.0, 100.0])
    np.testing.assert_array_equal(fico.bin_midpoints(4), [12.5, 37.5, 62.5, 87.5])


def test_load_fico_shapes_and_readonly():
    data = fico.load_fico()
    n = data.scores.size
    assert data.pmf.shape == (2, n) and data.repay.shape == (2, n)
    np.testing.assert_allclose(data.pmf.sum(axis=1), 1.0, atol=1e-12)
    assert not data.pmf.flags.writeable
    perf = pd.read_csv(fico.FICO_DIR / fico.PERFORMANCE_FILE)
    np.testing.assert_allclose(data.repay[1], 1 - perf[BLACK] / 100, rtol=0, atol=1e-15)

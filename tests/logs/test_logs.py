"""Tests for the audit from decision logs (causalfair.logs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.engines.effects import decompose
from causalfair.logs import (
    LogError,
    PositivityError,
    audit_logs,
    bootstrap_logs,
    fit_logs,
    log_stats,
    positivity_bounds,
    simulate_logs,
    threshold_lambda,
    validate_logs,
)
from causalfair.logs import schema as S
from causalfair.policies.core import TablePolicy
from causalfair.systems.lending.settings import lending_potential, lending_setting

LM = lending_setting("lending-1")


def soft_policy() -> TablePolicy:
    thr = np.array([[0.5], [0.6]])
    return TablePolicy(0.15 + 0.7 / (1.0 + np.exp(-(LM.p_repay - thr) / 0.08)), name="soft")


@pytest.fixture(scope="module")
def big_log() -> pd.DataFrame:
    return simulate_logs(LM, "random:0.5", 20_000, 20, seed=11)


def tiny_log() -> pd.DataFrame:
    """Two individuals per group, 3 levels, hand-checkable counts."""
    rows = [
        # id, t, group, level, decision, next_level, reward
        ("a", 0, "g0", 0, 1, 1, 1.0),
        ("a", 1, "g0", 1, 0, 1, 0.0),
        ("b", 0, "g0", 1, 1, 2, 1.0),
        ("b", 1, "g0", 2, 1, 1, -1.0),
        ("c", 0, "g1", 0, 0, 0, 0.0),
        ("c", 1, "g1", 0, 1, 1, 1.0),
        ("d", 0, "g1", 0, 1, 0, -1.0),
    ]
    return pd.DataFrame(rows, columns=["id", "t", "group", "level", "decision", "next_level", "reward"])


# ------------------------------------------------------------------- validation errors
def test_valid_log_roundtrip_sorted_arrays():
    df = tiny_log().sample(frac=1.0, random_state=0)  # row order must not matter
    data = validate_logs(df)
    assert data.groups == ("g0", "g1") and data.n_levels == 3 and data.horizon == 2
    assert data.n_individuals == 4 and data.n_rows == 7
    assert data.first.sum() == 4
    # rows sorted by (individual, t): next_level of a row equals level of the next row
    same = data.ind[1:] == data.ind[:-1]
    assert (data.xn[:-1][same] == data.x[1:][same]).all()


def _err(df, **kw) -> str:
    with pytest.raises(LogError) as ei:
        validate_logs(df, **kw)
    return str(ei.value)


def test_error_not_a_frame():
    assert _err([1, 2]) == S.MSG_NOT_FRAME.format(kind="list")


def test_error_missing_columns():
    df = tiny_log().drop(columns=["reward", "next_level"])
    assert _err(df) == S.MSG_MISSING_COLUMNS.format(
        missing="'next_level', 'reward'", found="'id', 't', 'group', 'level', 'decision'",
        close="", required=", ".join(S.REQUIRED_COLUMNS),
        rename="{'period': 't', 'action': 'decision'}")


def test_error_empty():
    assert _err(tiny_log().iloc[:0]) == S.MSG_EMPTY


def test_error_missing_values():
    df = tiny_log()
    df["reward"] = df["reward"].astype(float)
    df.loc[3, "reward"] = np.nan
    df.loc[5, "reward"] = np.nan
    assert _err(df) == S.MSG_MISSING_VALUES.format(column="reward", count=2, row=3)


def test_outcome_may_be_missing():
    df = tiny_log()
    df["outcome"] = [1.0, np.nan, 1.0, 0.0, np.nan, 1.0, 0.0]
    assert validate_logs(df).outcome is not None


def test_error_not_integer_and_not_numeric():
    df = tiny_log()
    df["level"] = df["level"].astype(float)
    df.loc[2, "level"] = 1.5
    assert _err(df) == S.MSG_NOT_INTEGER.format(column="level", value=1.5, row=2, dtype="float64")
    df = tiny_log()
    df["t"] = df["t"].astype(str)
    assert _err(df) == S.MSG_INT_TEXT.format(column="t", value="0", row=0, dtype=df["t"].dtype)
    df.loc[3, "t"] = "2024-01"  # the first value that is not an integer is named
    assert _err(df) == S.MSG_NOT_INTEGER.format(column="t", value="2024-01", row=3,
                                                dtype=df["t"].dtype)
    df = tiny_log()
    df["reward"] = "x"
    assert _err(df) == S.MSG_NOT_NUMERIC.format(column="reward", value="x", row=0,
                                                dtype=df["reward"].dtype, fix=S.FIX_NUMBER)


@pytest.mark.parametrize("col", ["t", "level", "next_level", "decision"])
@pytest.mark.parametrize("value", [np.inf, -np.inf, 1e30])
def test_error_integer_column_inf_or_past_int64_names_the_value(col, value):
    """inf (a CSV's 'inf') or a number past int64 in an integer column is named as written,
    not as the -9223372036854775808 a cast to int64 makes of it."""
    df = tiny_log()
    df[col] = df[col].astype(float)
    df.loc[3, col] = value
    with np.errstate(all="raise"):  # no "invalid value encountered in cast" either
        assert _err(df) == S.MSG_NOT_INTEGER.format(column=col, value=value, row=3,
                                                    dtype="float64")


def test_error_decision_not_binary():
    df = tiny_log()
    df.loc[4, "decision"] = 2
    assert _err(df) == S.MSG_DECISION.format(value=2, row=4)


def test_error_level_out_of_range():
    df = tiny_log()
    df.loc[1, "next_level"] = -1
    assert _err(df) == S.MSG_LEVEL_RANGE.format(column="next_level", kmax=2, value=-1, row=1)
    assert _err(tiny_log(), n_levels=2) == S.MSG_LEVEL_RANGE.format(
        column="level", kmax=1, value=2, row=3)


def test_error_groups():
    df = tiny_log()
    df["group"] = "g0"
    assert _err(df) == S.MSG_GROUPS.format(
        found=1, values=["g0"], need="a log needs at least 2 groups to compare")
    assert _err(tiny_log(), groups=["g0", "zz"]) == S.MSG_GROUPS.format(
        found=2, values=["g0", "g1"], need="expected only the groups ['g0', 'zz']")


def test_error_duplicate_time():
    df = tiny_log()
    df.loc[1, "t"] = 0
    assert _err(df) == S.MSG_DUPLICATE_T.format(
        id="a", t=0, row0=0, row1=1, how="differ in column(s) level, decision, reward",
        fix="two different records of one epoch must be fixed at the source (which one holds?)")


def test_error_time_gap():
    df = tiny_log()
    df.loc[5, "t"] = 2  # c: t = 0, 2
    assert _err(df) == S.MSG_TIME_GAP.format(id="c", t0=0, t1=2, row0=4, row1=5)


def test_error_late_start():
    df = tiny_log()
    df.loc[6, "t"] = 1  # d starts at t = 1
    assert _err(df) == S.MSG_LATE_START.format(id="d", t=1, t0=0, row=6)


def test_error_group_change():
    df = tiny_log()
    df.loc[3, "group"] = "g1"
    assert _err(df) == S.MSG_GROUP_CHANGE.format(id="b", g0="g0", g1="g1", t=1, row=3)


def test_error_next_level_mismatch():
    df = tiny_log()
    df.loc[4, "next_level"] = 2  # c: next_level 2 at t = 0, but level 0 at t = 1
    assert _err(df) == S.MSG_NEXT_LEVEL.format(id="c", nxt=2, t0=0, t1=1, lvl=0, row0=4, row1=5)


def test_read_logs_file_type(tmp_path):
    p = tmp_path / "log.xlsx"
    p.write_text("x")
    with pytest.raises(LogError) as ei:
        S.read_logs(p)
    assert str(ei.value) == S.MSG_FILE_TYPE.format(path=p, suffix=".xlsx")


# ------------------------------------------------------------------------------ fitting
def test_fit_tiny_log_by_hand():
    model, p_log, data = fit_logs(tiny_log(), alpha=0.0, potential=np.array([0.0, 1.0, 3.0]))
    # g0, d1, x0 -> x1 once; g0, d0, x1 -> x1 once; g0, d1, x1 -> x2; g0, d1, x2 -> x1
    assert model.kernel[0, 1, 0].tolist() == [0.0, 1.0, 0.0]
    assert model.kernel[0, 0, 1].tolist() == [0.0, 1.0, 0.0]
    assert model.kernel[0, 1, 2].tolist() == [0.0, 1.0, 0.0]
    # g1, d1, x0: -> x1 (c) and -> x0 (d); g1, d0, x0 -> x0
    assert model.kernel[1, 1, 0].tolist() == [0.5, 0.5, 0.0]
    assert model.kernel[1, 0, 0].tolist() == [1.0, 0.0, 0.0]
    # unobserved rows with alpha = 0: self-loop
    assert model.kernel[1, 0, 2].tolist() == [0.0, 0.0, 1.0]
    assert np.allclose(model.initial, [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    # pi(d1 | x, s): g0 x0 1/1, x1 1/2, x2 1/1; g1 x0 2/3; g1 x1, x2 unvisited: pooled 2/3
    assert np.allclose(p_log, [[1.0, 0.5, 1.0], [2 / 3, 2 / 3, 2 / 3]])
    assert np.allclose(model.reward[1, 1, 0], 0.0)  # (+1 - 1) / 2
    assert np.allclose(model.reward[0, 1, 2], -1.0)
    assert np.allclose(model.group_weights, [0.5, 0.5])
    # Dirichlet smoothing, alpha = 1: (n + 1) / (n_row + 3)
    model1, _, _ = fit_logs(tiny_log(), alpha=1.0)
    assert np.allclose(model1.kernel[1, 1, 0], [2 / 5, 2 / 5, 1 / 5])
    assert np.allclose(model1.kernel[1, 0, 2], [1 / 3, 1 / 3, 1 / 3])


def test_fitting_recovers_known_kernel(big_log):
    model, p_log, data = fit_logs(big_log, alpha=0.0)
    true = LM.tabular
    n = log_stats(data).unpack(log_stats(data).total())["trans"].sum(-1)  # (G, 2, K)
    ok = n >= 500
    assert ok.sum() >= 20
    sd = np.sqrt(true.kernel * (1 - true.kernel) / np.maximum(n, 1)[..., None])
    err = np.abs(model.kernel - true.kernel)
    assert (err[ok] <= 4.5 * sd[ok] + 1e-12).all()
    # structural zeros stay zero with alpha = 0
    assert (model.kernel[ok][true.kernel[ok] == 0] == 0).all()
    assert np.allclose(p_log, 0.5, atol=0.03)
    assert np.abs(model.initial - true.initial).max() < 0.02
    assert np.abs(model.aux["p_repay"] - LM.p_repay).max() < 0.03
    assert np.allclose(model.reward, true.reward, atol=0.06)


def test_ordinal_fit_recovers_drift_rows(big_log):
    # Under d0 the level change is the drift (-1, 0, +1 w.p. 0.1, 0.8, 0.1) at every
    # interior level: an ordinal model with no covariate effect fits it exactly.
    model, _, _ = fit_logs(big_log, method="ordinal")
    assert np.allclose(model.kernel.sum(-1), 1.0)
    for x in range(1, 6):
        assert np.allclose(model.kernel[:, 0, x, x - 1:x + 2], [0.1, 0.8, 0.1], atol=0.03)


def test_audit_is_exact_engine_on_fitted_model():
    df = simulate_logs(LM, soft_policy(), 800, 10, seed=5)
    a = audit_logs(df, n_boot=0)
    model, p_log, _ = fit_logs(df)
    ref = decompose(model, p_log, 10, eps=0.1)  # the log audit's eps
    for k in ("C", "DPE", "IPE", "SPE"):
        assert getattr(a.decomposition, k) == pytest.approx(getattr(ref, k), abs=1e-12)
    assert a.decomposition.Lambda == pytest.approx(ref.Lambda, abs=1e-12)
    assert a.decomposition.diagnostics_ok
    assert np.allclose(a.benefit.delta, model.benefit())


def test_large_log_estimates_near_exact():
    pol = soft_policy()
    df = simulate_logs(LM, pol, 50_000, 20, seed=7)
    a = audit_logs(df, n_boot=60, seed=1)
    exact = decompose(LM.tabular, pol, 20)
    se = a.decomposition.se
    for k in ("C", "DPE", "IPE", "SPE"):
        assert abs(getattr(a.decomposition, k) - getattr(exact, k)) < 4 * se[k] + 1e-3
    assert abs(a.decomposition.Lambda - exact.Lambda) < 4 * se["Lambda"] + 1e-3


# ---------------------------------------------------------------------------- bootstrap
def test_bootstrap_seeded_and_matches_naive_refit():
    df = simulate_logs(LM, "random:0.5", 60, 6, seed=2)
    data = validate_logs(df)
    stats = log_stats(data)
    B, seed = 4, 9
    boot = bootstrap_logs(stats, n_boot=B, seed=seed, horizon=6, policy=None, groups=data.groups)
    again = bootstrap_logs(stats, n_boot=B, seed=seed, horizon=6, policy=None, groups=data.groups)
    pd.testing.assert_frame_equal(boot, again)
    other = bootstrap_logs(stats, n_boot=B, seed=seed + 1, horizon=6, policy=None, groups=data.groups)
    assert not np.allclose(boot["C"], other["C"])
    # each replicate's own plug-in Lambda (the Lambda[plugin] column holds the plug-in's
    # tangent replicates, tests/test_logs_lambda_honest.py): before the estimator's columns
    from causalfair.logs.bootstrap import bootstrap_replicates

    own, _ = bootstrap_replicates(stats, n_boot=B, seed=seed, horizon=6, policy=None,
                                  method="counts", alpha=0.1, potential=None,
                                  groups=data.groups, eps=0.1, weights="visitation", chunk=50,
                                  start=None, pair=None)
    # naive: resample individuals with the same draws, rebuild the log with pandas, refit
    idx = np.random.default_rng(seed).integers(0, data.n_individuals, size=(B, data.n_individuals))
    for b in range(B):
        parts = [df[df["id"] == data.ids[i]].assign(id=j) for j, i in enumerate(idx[b])]
        model, p_log, _ = fit_logs(pd.concat(parts, ignore_index=True), n_levels=7,
                                   groups=data.groups)
        ref = decompose(model, p_log, 6, eps=0.1)  # the log audit's eps
        for k in ("C", "DPE", "IPE", "SPE"):
            assert boot.loc[b, k] == pytest.approx(getattr(ref, k), abs=1e-10)
        assert own.loc[b, "Lambda"] == pytest.approx(ref.Lambda, abs=1e-10)
        assert own.loc[b, "C"] == boot.loc[b, "C"]


def test_conf_int_percentiles_and_json():
    df = simulate_logs(LM, "random:0.5", 300, 8, seed=3)
    a = audit_logs(df, n_boot=40, seed=4)
    ci = a.conf_int(0.1)
    assert ci.loc["C", "lower"] == pytest.approx(a.bootstrap["C"].quantile(0.05))
    assert ci.loc["C", "upper"] == pytest.approx(a.bootstrap["C"].quantile(0.95))
    assert {"Lambda", "Delta[s+,1]", "V[s-]"} <= set(ci.index)
    assert a.decomposition.se["C"] == pytest.approx(a.bootstrap["C"].std(ddof=1))
    out = a.to_dict()
    json.dumps(out, allow_nan=False)
    assert out["identified"] and out["source"] == "logs"
    assert "C" in out["ci"]["intervals"]


# --------------------------------------------------------------------------- positivity
@pytest.fixture(scope="module")
def threshold_log() -> pd.DataFrame:
    return simulate_logs(LM, "threshold:0.5", 20_000, 20, seed=8)


def test_positivity_fires_on_deterministic_policy(threshold_log):
    with pytest.raises(PositivityError) as ei:
        audit_logs(threshold_log, n_boot=0)
    msg = str(ei.value)
    # threshold:0.5 approves exactly at levels 3..6 (0-based; p_repay > 0.5): d0 is never
    # logged there, and d1 never below
    assert "(group s+, level 4, d0)" in msg and "(group s-, level 0, d1)" in msg
    assert "on_positivity='bounds'" in msg


def test_positivity_report_cells(threshold_log):
    a = audit_logs(threshold_log, n_boot=0, on_positivity="bounds")
    cells = a.positivity.cells
    approve = LM.p_repay > 0.5
    got = {(r.group, r.level, r.decision) for r in cells.itertuples()}
    for s, g in enumerate(("s+", "s-")):
        for x in range(7):
            visited = a.model.initial[s, x] > 0 or x in set(threshold_log.loc[
                threshold_log["group"] == g, "level"])
            if visited:
                missing = 0 if approve[s, x] else 1
                assert (g, x, missing) in got
                assert (g, x, 1 - missing) not in got


def test_bounds_cover_truth_and_c_is_identified(threshold_log):
    a = audit_logs(threshold_log, n_boot=0, on_positivity="bounds")
    assert a.decomposition is None and not a.identified
    b = a.bounds
    assert (b["lower"] <= b["upper"] + 1e-12).all()
    exact = decompose(LM.tabular, (LM.p_repay > 0.5).astype(float), 20)
    # C uses only the decisions taken: identified (zero-width bounds), near the truth
    assert b.loc["C", "identified"]
    # (0.06 is about 4 standard errors of C with 20000 individuals)
    assert abs(b.loc["C", "lower"] - exact.C) < 0.06
    for k in ("DPE", "IPE", "SPE", "Lambda"):
        assert not b.loc[k, "identified"]
        assert b.loc[k, "lower"] - 0.06 <= getattr(exact, k) <= b.loc[k, "upper"] + 0.06
    with pytest.raises(LogError):
        a.estimates()
    json.dumps(a.to_dict(), allow_nan=False)
    assert "NOT IDENTIFIED" in a.summary()


def test_bounds_collapse_without_unknown_rows():
    df = simulate_logs(LM, soft_policy(), 500, 8, seed=6)
    model, p_log, _ = fit_logs(df)
    b = positivity_bounds(model, p_log, np.zeros((2, 2, 7), dtype=bool), 8)
    ref = decompose(model, p_log, 8, eps=0.1)  # the log audit's eps
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert b.loc[k, "lower"] == pytest.approx(getattr(ref, k), abs=1e-10)
        assert b.loc[k, "upper"] == pytest.approx(getattr(ref, k), abs=1e-10)
    assert b["identified"].all()


def test_bounds_hand_example_one_unknown_row():
    # One step (T = 1), pi0-only quantity: V_0[s] = sum_x mu0(x) h0(x). If the d0 row at
    # the only initial level is unknown, V_0 ranges over [min f - f(x0), max f - f(x0)].
    df = simulate_logs(LM, soft_policy(), 400, 4, seed=1)
    model, p_log, _ = fit_logs(df)
    init = np.zeros((2, 7))
    init[:, 3] = 1.0
    m = model.with_(initial=init)
    unknown = np.zeros((2, 2, 7), dtype=bool)
    unknown[0, 0, 3] = True
    b = positivity_bounds(m, p_log, unknown, 1)
    f = m.potential[0]
    assert b.loc["V_0[s+]", "lower"] == pytest.approx(f.min() - f[3])
    assert b.loc["V_0[s+]", "upper"] == pytest.approx(f.max() - f[3])
    h = m.expected_gain()
    assert b.loc["V_0[s-]", "lower"] == pytest.approx(h[1, 0, 3])


# ----------------------------------------------------------------------------------- CLI
def test_cli_decompose_logs(tmp_path, capsys):
    path = tmp_path / "log.csv"
    simulate_logs(LM, "random:0.5", 200, 6, seed=1).to_csv(path, index=False)
    rc = main(["decompose", "--logs", str(path), "--boot", "10", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert {"C", "DPE", "IPE", "SPE", "Lambda", "ci", "positivity", "decomposition",
            "benefit"} <= set(out)
    assert out["horizon"] == 6 and out["n_individuals"] == 200
    assert out["C"] == pytest.approx(out["DPE"] + out["IPE"] + out["SPE"])


def test_parquet_and_csv_give_the_same_audit(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    df = simulate_logs(LM, "random:0.5", 150, 5, seed=2)
    df.to_csv(tmp_path / "log.csv", index=False)
    df.to_parquet(tmp_path / "log.parquet", index=False)
    outs = []
    for name in ("log.csv", "log.parquet"):
        assert main(["decompose", "--logs", str(tmp_path / name), "--boot", "5", "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    for key in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert outs[0][key] == outs[1][key]


def test_cli_malformed_log_exits_2(tmp_path, capsys):
    df = tiny_log()
    df.loc[4, "next_level"] = 2
    path = tmp_path / "bad.csv"
    df.to_csv(path, index=False)
    rc = main(["decompose", "--logs", str(path), "--boot", "0"])
    assert rc == 2
    err = capsys.readouterr().err
    assert S.MSG_NEXT_LEVEL.format(id="c", nxt=2, t0=0, t1=1, lvl=0, row0=4, row1=5) in err


def test_cli_positivity_exits_2(tmp_path, capsys):
    path = tmp_path / "det.csv"
    simulate_logs(LM, "threshold:0.5", 300, 5, seed=1).to_csv(path, index=False)
    assert main(["decompose", "--logs", str(path), "--boot", "0"]) == 2
    assert "positivity violated" in capsys.readouterr().err
    assert main(["decompose", "--logs", str(path), "--on-positivity", "bounds", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["identified"] is False and "bounds" in out


def test_simulate_logs_seeded_and_valid():
    a = simulate_logs(LM, "random:0.3", 50, 5, seed=4)
    b = simulate_logs(LM, "random:0.3", 50, 5, seed=4)
    pd.testing.assert_frame_equal(a, b)
    data = validate_logs(a)
    assert data.n_rows == 250 and data.horizon == 5
    f = lending_potential(7)
    assert np.isnan(a.loc[a["decision"] == 0, "outcome"]).all()
    assert set(a.loc[a["decision"] == 1, "reward"]) <= {1.0, -1.0}
    assert f.shape == (7,)


@pytest.mark.parametrize("method", ["ordinal", "multinomial"])
def test_parametric_audit_runs_with_bootstrap(method):
    df = simulate_logs(LM, "random:0.5", 400, 6, seed=12)
    a = audit_logs(df, method=method, n_boot=3, seed=0)
    assert a.method == method and len(a.bootstrap) == 3
    assert np.allclose(a.model.kernel.sum(-1), 1.0)
    assert a.decomposition.C == pytest.approx(
        a.decomposition.DPE + a.decomposition.IPE + a.decomposition.SPE)
    again = audit_logs(df, method=method, n_boot=3, seed=0)
    pd.testing.assert_frame_equal(a.bootstrap, again.bootstrap, check_exact=True)


# ------------------------------------------------------- Lambda: thresholded estimator
def test_threshold_lambda_hand_example():
    # G = 2, K = 2, eps = 0.1, c = 2, two replicates. With two replicates the bootstrap se
    # (ddof = 1) of a quantity that is v + h and v - h is h * sqrt(2).
    p = np.array([[0.51, 0.8], [0.5, 0.2]])
    delta = np.array([[0.105, 0.3], [0.1, 0.0]])
    w = np.array([[0.5, 0.5], [0.25, 0.75]])
    bd = np.stack([delta, delta])
    bd[0, 0, 0], bd[1, 0, 0] = 0.115, 0.095  # Delta(x0, s+) +- 0.01
    bp = np.stack([p, p])
    bp[0, 1, 0], bp[1, 1, 0] = 0.52, 0.48  # pi(d1 | x0, s-) +- 0.02
    bw = np.stack([w, w])
    res = threshold_lambda(p, delta, w, bp, bd, bw, pair=(0, 1), eps=0.1, c=2.0)
    s2 = np.sqrt(2.0)
    # se(gap): 0.01 sqrt 2 on the row x = x0 of s+, 0 elsewhere; se(dp): 0.02 sqrt 2 on
    # the column x' = x0 of s-, 0 elsewhere.
    assert np.allclose(res["se_gap"], [[0.01 * s2, 0.01 * s2], [0.0, 0.0]])
    assert np.allclose(res["se_dp"], [[0.02 * s2, 0.0], [0.02 * s2, 0.0]])
    # gaps: (0,0) 0.005 <= 2 * 0.0141 -> 0; (0,1) 0.105 kept; (1,*) se 0 -> kept
    # dps:  (0,0) 0.01 <= 2 * 0.0283 -> 0; (1,0) 0.3 kept; (*,1) se 0 -> kept
    assert res["zero_gap"].tolist() == [[True, False], [False, False]]
    assert res["zero_dp"].tolist() == [[True, False], [False, False]]
    thr = (0.0                                      # (0,0): dp set to 0
           + 0.1 * 0.31 / (0.1 + 0.105) * 0.5 * 0.75  # (0,1)
           + 0.1 * 0.30 / (0.1 + 0.2) * 0.5 * 0.25    # (1,0)
           + 0.1 * 0.60 / (0.1 + 0.3) * 0.5 * 0.75)   # (1,1)
    plug = thr + 0.1 * 0.01 / (0.1 + 0.005) * 0.5 * 0.25
    assert res["value"] == pytest.approx(thr, abs=1e-15)
    assert res["value"] == pytest.approx(0.1254573170731707, abs=1e-15)
    assert res["plugin"] == pytest.approx(plug, abs=1e-15)
    assert res["contributions"].sum() == pytest.approx(thr, abs=1e-15)
    # replicates: each runs the pre-test on its own gaps against the same cuts (here it
    # zeroes the same pairs: gaps 0.015, 0.005 <= 0.028, dps 0.01, 0.03 <= 0.057; a replicate
    # whose gap crosses the cut: tests/test_logs_lambda_honest.py); replicate 1 has
    # Delta(x0,s+) = 0.115, pi(x0,s-) = 0.52
    rep1 = (0.1 * 0.31 / (0.1 + 0.115) * 0.375 + 0.1 * 0.28 / 0.3 * 0.125 + 0.05625)
    rep2 = (0.1 * 0.31 / (0.1 + 0.095) * 0.375 + 0.1 * 0.32 / 0.3 * 0.125 + 0.05625)
    assert res["replicates"] == pytest.approx([rep1, rep2], abs=1e-15)

    def tangent(at, g):  # eps / (eps + |gap|) by its tangent at the estimate's |gap| = at
        return 0.1 / (0.1 + at) - 0.1 / (0.1 + at) ** 2 * (g - at)

    plug1 = (tangent(0.005, 0.015) * 0.01 * 0.125 + tangent(0.105, 0.115) * 0.31 * 0.375
             + tangent(0.2, 0.2) * 0.28 * 0.125 + tangent(0.3, 0.3) * 0.6 * 0.375)
    assert res["plugin_replicates"][0] == pytest.approx(plug1, abs=1e-15)
    with pytest.raises(LogError):
        threshold_lambda(p, delta, w, bp[:1], bd[:1], bw[:1], pair=(0, 1), eps=0.1, c=2.0)


def test_threshold_lambda_equals_plugin_when_gaps_are_far():
    rng = np.random.default_rng(0)
    p = np.array([[0.9, 0.8, 0.7], [0.1, 0.2, 0.3]])
    delta = np.array([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]])
    w = np.array([[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]])
    B = 50
    bp = p + 0.01 * rng.standard_normal((B, 2, 3))
    bd = delta + 0.01 * rng.standard_normal((B, 2, 3))
    bw = np.broadcast_to(w, (B, 2, 3))
    res = threshold_lambda(p, delta, w, bp, bd, bw, pair=(0, 1), eps=0.1, c=10.0)
    assert not res["zero_gap"].any() and not res["zero_dp"].any()
    assert res["value"] == res["plugin"]
    # nor in any replicate: the thresholded replicates are the replicates' plug-in Lambda;
    # the plug-in's tangent replicates agree with them to second order in the gaps' moves
    bdp, bgap = bp[:, 0, :, None] - bp[:, 1, None, :], bd[:, 0, :, None] - bd[:, 1, None, :]
    raw = (0.1 * np.abs(bdp) / (0.1 + np.abs(bgap)) * bw[:, 0, :, None] * bw[:, 1, None, :])
    assert res["replicates"] == pytest.approx(raw.sum((1, 2)), rel=1e-14)
    assert np.allclose(res["plugin_replicates"], res["replicates"], rtol=1e-3, atol=0)


def _opposite_effects_model():
    """K = 3: d0 drifts (-1, 0, +1 w.p. 0.1, 0.8, 0.1, clipped); d1 moves s+ up and s-
    down w.p. 0.7. With f(x) = x every Delta(x, s+) >= 0.1 and every Delta(x', s-) <=
    -0.1, so every benefit gap is >= 0.2, far from 0 at thousands of individuals."""
    from causalfair.model import TabularModel

    d0 = np.array([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]])
    up = np.array([[0.3, 0.7, 0.0], [0.0, 0.3, 0.7], [0.0, 0.0, 1.0]])
    down = np.array([[1.0, 0.0, 0.0], [0.7, 0.3, 0.0], [0.0, 0.7, 0.3]])
    kernel = np.stack([np.stack([d0, up]), np.stack([d0, down])])
    return TabularModel(kernel=kernel, initial=np.full((2, 3), 1 / 3),
                        potential=np.arange(3.0), group_weights=np.array([0.5, 0.5]))


def test_audit_thresholded_equals_plugin_when_every_gap_is_far():
    model = _opposite_effects_model()
    df = simulate_logs(model, "random:0.5", 4000, 8, seed=31)
    pol = np.array([[0.2, 0.4, 0.6], [0.3, 0.5, 0.7]])
    kw = dict(n_boot=60, seed=2, policy=pol, potential=np.arange(3.0))
    a = audit_logs(df, **kw)
    b = audit_logs(df, lambda_estimator="plugin", **kw)
    lam = a.lambda_estimate
    gap = np.abs(lam.gap)
    assert gap.min() > 0.15 and (gap > 10 * lam.se_gap).all()
    assert not lam.zero_gap.any() and not lam.zero_dp.any()
    assert (lam.se_dp == 0).all()  # a supplied policy table has no sampling error
    assert lam.estimator == "thresholded" and b.lambda_estimate.estimator == "plugin"
    assert a.decomposition.Lambda == b.decomposition.Lambda == lam.plugin
    for k in ("Lambda[thresholded]", "Lambda[plugin]"):  # the same replicates
        assert np.array_equal(a.bootstrap[k], b.bootstrap[k])
    assert np.array_equal(b.bootstrap["Lambda"], b.bootstrap["Lambda[plugin]"])
    # nothing zeroed in a replicate either: the thresholded replicates are the replicates'
    # plug-in Lambda, the plug-in's are its tangent (first order in the gaps): close
    assert np.allclose(a.bootstrap["Lambda"], b.bootstrap["Lambda"], rtol=1e-2, atol=0)


@pytest.fixture(scope="module")
def soft_audit():
    df = simulate_logs(LM, soft_policy(), 20_000, 20, seed=41)
    return audit_logs(df, n_boot=100, seed=5)


def test_thresholded_lambda_zeroes_the_true_zero_gaps(soft_audit):
    from causalfair.engines.benefit import benefit_fairness

    a = soft_audit
    lam = a.lambda_estimate
    true = benefit_fairness(LM.tabular, soft_policy(), 20)
    true_gap = true.delta[0][:, None] - true.delta[1][None, :]
    true_dp = true.p_d1[0][:, None] - true.p_d1[1][None, :]
    # lending-1: both groups share p_repay and drift, so Delta(x,s+) = Delta(x,s-)
    assert np.array_equal(np.abs(true_gap) < 1e-12, np.eye(7, dtype=bool))
    assert lam.zero_gap[np.eye(7, dtype=bool)].all()
    assert not lam.zero_gap[np.abs(true_gap) > 0.05].any()
    # pi(d1|x,s+) = pi(d1|x',s-) where p_repay(x') = p_repay(x) + 0.1
    zero_dp = np.abs(true_dp) < 1e-12
    assert {tuple(map(int, v)) for v in np.argwhere(zero_dp)} == {(0, 1), (3, 5), (3, 6)}
    assert lam.zero_dp[zero_dp].all()
    assert not lam.zero_dp[np.abs(true_dp) > 0.05].any()
    assert lam.c_n == pytest.approx(np.sqrt(np.log(20_000)))
    # the reported figures are the thresholded ones, consistently
    assert a.decomposition.Lambda == lam.value == a.benefit.Lambda
    assert a.benefit.contributions.sum() == pytest.approx(lam.value, rel=1e-12)
    assert np.array_equal(a.bootstrap["Lambda"], a.bootstrap["Lambda[thresholded]"])
    assert a.decomposition.se["Lambda"] == pytest.approx(a.bootstrap["Lambda"].std(ddof=1))
    assert lam.plugin != lam.value
    zp = lam.zeroed_pairs()
    assert len(zp) == int(lam.zero_gap.sum() + lam.zero_dp.sum())
    assert set(zp["gap"]) == {"benefit", "policy"}
    out = a.to_dict()
    json.dumps(out, allow_nan=False)
    assert out["lambda_estimator"]["estimator"] == "thresholded"
    assert out["lambda_estimator"]["zeroed_benefit_gaps"] == int(lam.zero_gap.sum())
    assert "thresholded" in a.summary()


def test_thresholded_lambda_seed_determinism():
    df = simulate_logs(LM, soft_policy(), 3000, 10, seed=8)
    a = audit_logs(df, n_boot=40, seed=13)
    b = audit_logs(df, n_boot=40, seed=13)
    pd.testing.assert_frame_equal(a.bootstrap, b.bootstrap, check_exact=True)
    la, lb = a.lambda_estimate, b.lambda_estimate
    assert la.value == lb.value and la.plugin == lb.plugin
    assert np.array_equal(la.zero_gap, lb.zero_gap) and np.array_equal(la.zero_dp, lb.zero_dp)
    assert np.array_equal(la.se_gap, lb.se_gap)
    c = audit_logs(df, n_boot=40, seed=14)
    assert not np.array_equal(a.bootstrap["Lambda"], c.bootstrap["Lambda"])


def test_lambda_estimator_fallback_and_errors():
    df = simulate_logs(LM, soft_policy(), 300, 5, seed=3)
    a = audit_logs(df, n_boot=0)
    assert a.lambda_estimate.estimator == "plugin" and a.lambda_estimate.requested == "thresholded"
    assert "n_boot >= 2" in a.lambda_estimate.note
    assert a.decomposition.Lambda == a.lambda_estimate.plugin == a.benefit.Lambda
    b = audit_logs(df, n_boot=1, seed=0)
    assert b.lambda_estimate.estimator == "plugin"
    with pytest.raises(LogError, match="lambda_estimator: unknown value 'hard'"):
        audit_logs(df, n_boot=0, lambda_estimator="hard")


def test_cli_lambda_estimator_recorded(tmp_path, capsys):
    path = tmp_path / "log.csv"
    simulate_logs(LM, soft_policy(), 400, 6, seed=1).to_csv(path, index=False)
    outs = {}
    for est in ("thresholded", "plugin"):
        assert main(["decompose", "--logs", str(path), "--boot", "20", "--json",
                     "--lambda-estimator", est]) == 0
        outs[est] = json.loads(capsys.readouterr().out)
        assert outs[est]["lambda_estimator"]["estimator"] == est
    assert outs["plugin"]["Lambda"] == outs["thresholded"]["lambda_estimator"]["plugin"]
    assert outs["thresholded"]["Lambda"] == outs["thresholded"]["lambda_estimator"]["thresholded"]
    with pytest.raises(SystemExit) as ei:  # argparse rejects an unknown choice
        main(["decompose", "--logs", str(path), "--lambda-estimator", "x"])
    assert ei.value.code == 2


# ------------------------------------------------------------ feature-vector states
@pytest.fixture(scope="module")
def level_log() -> pd.DataFrame:
    return simulate_logs(LM, soft_policy(), 3000, 10, seed=17)


def _features(df: pd.DataFrame, **funcs) -> pd.DataFrame:
    """Replace level / next_level by feature columns f(level) / next_f(next_level)."""
    out = df.drop(columns=["level", "next_level"])
    for name, fn in funcs.items():
        out[name] = fn(df["level"].to_numpy())
        out[f"next_{name}"] = fn(df["next_level"].to_numpy())
    return out


def test_monotone_feature_recovers_the_level_fit(level_log):
    # income = 1000 * 1.5^level is a deterministic increasing function of the level: with
    # 7 quantile bins (7 distinct values: one bin per value) or cut points between the
    # values, the joint bin is the level and the fit is the level fit, exactly
    feat = _features(level_log, income=lambda x: 1000.0 * 1.5 ** x)
    m0, p0, _ = fit_logs(level_log)
    cuts = list(1000.0 * 1.5 ** (np.arange(6) + 0.5))
    for bins in (7, {"income": cuts}):
        m1, p1, d1 = fit_logs(feat, state="income", bins=bins)
        assert d1.binning.n_levels == 7 and d1.n_levels == 7
        assert np.array_equal(m1.kernel, m0.kernel) and np.array_equal(p1, p0)
        assert np.array_equal(m1.initial, m0.initial) and np.array_equal(m1.reward, m0.reward)
        assert m1.level_labels == tuple(f"income:{i}" for i in range(7))
    a0 = audit_logs(level_log, n_boot=20, seed=3)
    a1 = audit_logs(feat, state=["income"], bins=7, n_boot=20, seed=3)
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert a1.estimates()[k] == a0.estimates()[k]
    assert np.array_equal(a1.bootstrap["C"], a0.bootstrap["C"])
    assert a1.to_dict()["state_binning"]["n_bins"] == [7]
    lv = a1.binning.levels()
    assert np.allclose(lv["income_mean"], 1000.0 * 1.5 ** np.arange(7))


def test_two_features_joint_bins_and_potential(level_log):
    # a = level // 2 (4 values), b = level % 2 (2 values): the row-major joint bin
    # a * 2 + b is the level again (K = 8; joint bin 7 = (3, 1) never occurs)
    feat = _features(level_log, a=lambda x: x // 2, b=lambda x: x % 2)
    with pytest.raises(LogError) as ei:
        fit_logs(feat, state=["a", "b"], bins={"a": 4, "b": 2})
    assert str(ei.value) == S.MSG_FEATURE_POTENTIAL.format(n=2, k=8)
    pot = S.linear_potential({"a": 2.0, "b": 1.0})  # f = 2a + b = the level index
    m, p, d = fit_logs(feat, state=["a", "b"], bins={"a": 4, "b": 2}, alpha=0.0, potential=pot)
    m0, p0, _ = fit_logs(level_log, alpha=0.0)
    assert d.n_levels == 8 and d.binning.n_bins == (4, 2)
    assert np.array_equal(m.kernel[:, :, :7, :7], m0.kernel)
    assert np.array_equal(m.potential[0], np.arange(8.0))
    assert np.array_equal(p[:, :7], p0)
    assert d.binning.labels()[5] == "a:2/b:1"
    # explicit potential array of K values is accepted too
    fit_logs(feat, state=["a", "b"], bins={"a": 4, "b": 2}, potential=np.arange(8.0))


def test_quantile_bins_of_a_continuous_feature():
    rng = np.random.default_rng(0)
    n, T = 400, 3
    v = rng.normal(size=(n, T + 1)).cumsum(1)
    df = pd.DataFrame({
        "id": np.repeat(np.arange(n), T), "t": np.tile(np.arange(T), n),
        "group": np.repeat(rng.integers(0, 2, n), T), "decision": rng.integers(0, 2, n * T),
        "reward": 0.0, "score": v[:, :T].reshape(-1), "next_score": v[:, 1:].reshape(-1),
    })
    data = validate_logs(df, state="score", bins=4)
    b = data.binning
    assert b.n_levels == 4
    assert np.allclose(b.cuts[0], np.quantile(df["score"], [0.25, 0.5, 0.75]))
    assert np.array_equal(np.bincount(data.x), [n * T // 4] * 4)  # quantile bins over all rows
    # next states use the same cut points (values beyond the range go to the outer bins)
    assert np.array_equal(np.sort(data.xn), np.sort(b.digitize(df["next_score"].to_numpy())))


def _ferr(df, **kw) -> str:
    with pytest.raises(LogError) as ei:
        validate_logs(df, **kw)
    return str(ei.value)


def test_feature_state_errors(level_log):
    small = level_log[level_log["id"] < 30].reset_index(drop=True)
    feat = _features(small, income=lambda x: 10.0 * x, debt=lambda x: 5.0 - x)
    cols = ["income", "debt"]
    assert _ferr(feat, state=["income", "wealth"], bins=3) == S.MSG_STATE_COLUMNS.format(
        missing="wealth", found=", ".join(feat.columns))
    assert _ferr(feat.drop(columns=["next_debt"]), state=cols, bins=3) == (
        S.MSG_NEXT_STATE_COLUMNS.format(missing="next_debt", state=cols))
    assert _ferr(small.assign(income=1.0, next_income=1.0), state="income", bins=1) == (
        S.MSG_STATE_AND_LEVEL.format(column="level"))
    assert _ferr(feat, state=cols) == S.MSG_BINS_MISSING.format(state=cols, missing="income, debt")
    assert _ferr(feat, state=cols, bins={"income": 3}) == S.MSG_BINS_MISSING.format(
        state=cols, missing="debt")
    nan = feat.copy()
    nan.loc[[4, 9], "next_income"] = np.nan
    assert _ferr(nan, state=cols, bins=3) == S.MSG_MISSING_VALUES.format(
        column="next_income", count=2, row=4)
    inf = feat.copy()
    inf.loc[2, "debt"] = np.inf
    assert _ferr(inf, state=cols, bins=3) == S.MSG_NOT_FINITE.format(column="debt", value=np.inf, row=2)
    txt = feat.assign(debt=feat["debt"].astype(str))
    assert _ferr(txt, state=cols, bins=3) == S.MSG_NOT_NUMERIC.format(  # numbers as text
        column="debt", value=txt["debt"].iloc[0], row=0, dtype=txt["debt"].dtype,
        fix=f"its values are numbers stored as dtype {txt['debt'].dtype}: convert the column, "
            "df['debt'] = pd.to_numeric(df['debt'])")
    found = feat["income"].nunique()
    assert _ferr(feat, state=cols, bins=found + 1) == S.MSG_BINS_DISTINCT.format(
        column="income", found=found, bins=found + 1)
    ties = feat.assign(income=np.where(np.arange(len(feat)) % 10 == 0, feat["income"], 7.0))
    ties["next_income"] = ties.groupby("id")["income"].shift(-1).fillna(7.0)
    msg = _ferr(ties, state=cols, bins={"income": 3, "debt": 2})
    assert msg.startswith("logs: state column 'income': 3 quantile bins leave bin(s)")
    assert "the value 7.0 holds" in msg
    assert _ferr(feat, state=cols, bins={"income": [5.0, 1.0], "debt": 2}) == (
        S.MSG_BINS_CUTS.format(column="income", value=[5.0, 1.0]))
    assert _ferr(feat, state=cols, bins={"income": 0, "debt": 2}) == S.MSG_BINS_VALUE.format(
        column="income", value=0)
    bad = feat.copy()
    row = int(np.flatnonzero((bad["id"] == 3) & (bad["t"] == 0))[0])
    bad.loc[row, "next_debt"] = 99.0
    nxt_t1 = bad.loc[(bad["id"] == 3) & (bad["t"] == 1), "debt"].iloc[0]
    assert _ferr(bad, state=cols, bins=2) == S.MSG_NEXT_STATE.format(
        id=3, next_col="next_debt", nxt=99.0, t0=0, t1=1, col="debt", val=float(nxt_t1),
        row0=row, row1=int(np.flatnonzero((bad["id"] == 3) & (bad["t"] == 1))[0]))
    with pytest.raises(LogError, match="n_levels = 5 but the state binning has 4"):
        validate_logs(feat, state=cols, bins=2, n_levels=5)
    with pytest.raises(LogError, match="need state="):
        validate_logs(small, bins=3)


def test_cli_feature_states(tmp_path, capsys, level_log):
    small = level_log[level_log["id"] < 500]
    path = tmp_path / "feat.csv"
    _features(small, a=lambda x: x // 2, b=lambda x: x % 2).to_csv(path, index=False)
    base = ["decompose", "--logs", str(path), "--boot", "5", "--json", "--state-cols", "a,b"]
    assert main(base + ["--bins", "2"]) == 2  # two features need --potential-weights
    assert "potential" in capsys.readouterr().err
    assert main(base + ["--bin-cuts", "a=0.5,1.5,2.5", "--bin-cuts", "b=0.5",
                        "--potential-weights", "a=2,b=1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["state_binning"]["n_bins"] == [4, 2]
    assert out["state_binning"]["cuts"] == {"a": [0.5, 1.5, 2.5], "b": [0.5]}
    assert main(["decompose", "--logs", str(path), "--bins", "3"]) == 2
    assert "--bins: only with --state-cols" in capsys.readouterr().err


# ---------------------------------------------------------------- multinomial logit
def _mnl_model(K: int = 5):
    """A kernel that is exactly a censored multinomial logit of the change (-1, 0, +1)
    on (1, x / (K-1), s, s * x / (K-1)), per decision."""
    from causalfair.model import TabularModel

    G = 2
    s, x = np.meshgrid(np.arange(G), np.arange(K), indexing="ij")
    Z = np.stack([np.ones_like(x, float), x / (K - 1), s.astype(float), s * x / (K - 1)], -1)
    # coefficients (4 regressors) of changes 0 and +1 against -1, per decision
    beta = {0: np.array([[2.0, 0.5, 0.0, 0.0], [0.0, -0.5, 0.3, 0.0]]),
            1: np.array([[1.0, -1.0, -0.5, 0.5], [0.5, 1.0, -1.0, 0.8]])}
    kernel = np.zeros((G, 2, K, K))
    for d in (0, 1):
        eta = np.concatenate([np.zeros((G, K, 1)), Z @ beta[d].T], -1)
        prob = np.exp(eta) / np.exp(eta).sum(-1, keepdims=True)
        for j, ch in enumerate((-1, 0, 1)):
            tgt = np.clip(x + ch, 0, K - 1)
            np.add.at(kernel[:, d], (s, x, tgt), prob[..., j])
    return TabularModel(kernel=kernel, initial=np.full((G, K), 1 / K),
                        potential=np.arange(K, dtype=float), group_weights=np.array([0.5, 0.5]))


def test_multinomial_fit_recovers_known_kernel():
    model = _mnl_model()
    df = simulate_logs(model, "random:0.5", 20_000, 10, seed=23)
    fitted, _, data = fit_logs(df, method="multinomial", potential=np.arange(5.0))
    n = log_stats(data).unpack(log_stats(data).total())["trans"].sum(-1)
    assert (n > 1000).all()
    err = np.abs(fitted.kernel - model.kernel)
    assert err.max() < 0.015
    assert np.allclose(fitted.kernel.sum(-1), 1.0)
    # the count fit of the same log is worse or equal on average: the parametric family is right
    counts, _, _ = fit_logs(df, potential=np.arange(5.0))
    assert err.mean() <= np.abs(counts.kernel - model.kernel).mean()
    # a misspecified-family check: the ordinal logit cannot represent this kernel as well
    ordinal, _, _ = fit_logs(df, method="ordinal", potential=np.arange(5.0))
    assert err.max() < np.abs(ordinal.kernel - model.kernel).max()


def test_multinomial_fit_recovers_lending_drift_rows(big_log):
    model, _, _ = fit_logs(big_log, method="multinomial")
    true = LM.tabular.kernel
    assert np.abs(model.kernel[:, 0] - true[:, 0]).max() < 0.02  # every d0 row, ends included




# ------------------------------------------------------------ Lambda's reported interval
def test_lambda_interval_is_the_hull_of_both_intervals(soft_audit):
    a = soft_audit
    boot, lam = a.bootstrap, a.lambda_estimate
    qt = boot["Lambda[thresholded]"].quantile([0.025, 0.975]).to_numpy()
    qp = boot["Lambda[plugin]"].quantile([0.025, 0.975]).to_numpy()
    lo, hi = a.lambda_interval(0.05)
    assert (lo, hi) == (max(0.0, min(qt[0], qp[0])), max(qt[1], qp[1]))
    assert lo <= min(qt[0], qp[0]) + 1e-15 and hi >= max(qt[1], qp[1])
    ci = a.conf_int(0.05)
    assert (ci.loc["Lambda", "lower"], ci.loc["Lambda", "upper"]) == (lo, hi)
    # the other rows are still plain percentile intervals
    assert ci.loc["C", "lower"] == boot["C"].quantile(0.025)
    # normal method: each estimator +- z sd around its own estimate
    z = 1.959963984540054
    st, sp = boot["Lambda[thresholded]"].std(ddof=1), boot["Lambda[plugin]"].std(ddof=1)
    nlo, nhi = a.lambda_interval(0.05, method="normal")
    assert nlo == pytest.approx(max(0.0, min(lam.thresholded - z * st, lam.plugin - z * sp)), abs=1e-15)
    assert nhi == pytest.approx(max(lam.thresholded + z * st, lam.plugin + z * sp), abs=1e-15)
    # a wider level gives a wider interval
    lo90, hi90 = a.lambda_interval(0.10)
    assert lo <= lo90 and hi90 <= hi
    with pytest.raises(ValueError, match="method"):
        a.lambda_interval(0.05, method="bca")


def test_plugin_estimator_reports_its_own_interval():
    df = simulate_logs(LM, soft_policy(), 2000, 8, seed=21)
    a = audit_logs(df, n_boot=30, seed=2, lambda_estimator="plugin")
    q = a.bootstrap["Lambda[plugin]"].quantile([0.025, 0.975])
    assert a.lambda_interval(0.05) == (max(0.0, float(q.iloc[0])), float(q.iloc[1]))


# ------------------------------------------------------------ [logs] options in audit specs
def _logs_spec(tmp_path, extra: str) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text('name = "l"\n[logs]\npath = "log.csv"\nn_boot = 20\nseed = 4\n' + extra,
                 encoding="utf-8")
    return p


def test_spec_logs_options_reach_audit_logs(tmp_path, level_log):
    from causalfair.audit import audit, load_spec

    feat = _features(level_log, a=lambda x: x // 2, b=lambda x: x % 2)
    feat.to_csv(tmp_path / "log.csv", index=False)
    spec = load_spec(_logs_spec(tmp_path, 'fit = "counts"\nlambda_estimator = "plugin"\n'
                                'state = ["a", "b"]\nbins = { a = 4, b = 2 }\n'
                                'potential_weights = { a = 2.0, b = 1.0 }\n'
                                '[thresholds]\nLambda = 1.0\n'))
    r = audit(spec)
    direct = audit_logs(feat, state=["a", "b"], bins={"a": 4, "b": 2}, n_boot=20, seed=4,
                        lambda_estimator="plugin",
                        potential=S.linear_potential({"a": 2.0, "b": 1.0}))
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert r.quantities[k][0] == direct.estimates()[k]
    assert r.extra["logs"]["lambda_estimator"]["estimator"] == "plugin"
    assert r.extra["logs"]["state_binning"]["n_bins"] == [4, 2]
    # Lambda's interval in the audit is the normal-method interval of the log audit
    e, lo, hi, _ = r.quantities["Lambda"]
    assert (lo, hi) == direct.lambda_interval(spec.alpha, method="normal")


def test_spec_lambda_interval_is_the_hull(tmp_path):
    from causalfair.audit import audit

    df = simulate_logs(LM, soft_policy(), 2000, 8, seed=5)
    df.to_csv(tmp_path / "log.csv", index=False)
    r = audit(_logs_spec(tmp_path, ""))
    direct = audit_logs(df, n_boot=20, seed=4)
    assert direct.lambda_estimate.estimator == "thresholded"
    _, lo, hi, _ = r.quantities["Lambda"]
    assert (lo, hi) == direct.lambda_interval(0.05, method="normal")
    assert r.extra["logs"]["fit"] == "counts"


@pytest.mark.parametrize("extra,needles", [
    ('fit = "probit"\n', ["[logs] fit", "'probit'", "counts, ordinal, multinomial"]),
    ('lambda_estimator = "smooth"\n', ["[logs] lambda_estimator", "thresholded, plugin"]),
    ('bins = 4\n', ["[logs] bins", "only used with feature states"]),
    ('state = ["a"]\n', ["[logs] bins", "missing"]),
    ('state = ["a"]\nbins = 1\n', ["[logs] bins", "bad value 1", "integer >= 2"]),
    ('state = ["a"]\nbins = { z = 3 }\n', ["[logs] bins", "state features ['a']"]),
    ('state = ["a", "b"]\nbins = 3\n', ["[logs] potential_weights", "missing"]),
    ('state = ["a"]\nbins = 3\nnext_state = ["x", "y"]\n', ["[logs] next_state", "one column per state feature"]),
    ('state = []\n', ["[logs] state", "column name"]),
    ('state = ["a"]\nbins = 3\npotential_weights = { a = "x" }\n', ["[logs] potential_weights"]),
])
def test_spec_logs_option_errors(tmp_path, extra, needles):
    from causalfair.audit import SpecError, load_spec

    (tmp_path / "log.csv").write_text("x\n", encoding="utf-8")
    with pytest.raises(SpecError) as ei:
        load_spec(_logs_spec(tmp_path, extra))
    for n in needles:
        assert n in str(ei.value), (n, str(ei.value))


def test_log_audit_labels_its_two_kinds_of_interval(tmp_path):
    from causalfair.logs import audit_logs
    from causalfair.logs.schema import simulate_logs

    la = audit_logs(simulate_logs("lending-1", "random:0.5", 300, 5, 0), n_boot=20, seed=0)
    text = la.summary()
    assert "percentile CI" in text and "normal intervals" in text
    assert "Dirichlet smoothing" in text and "alpha =" not in text

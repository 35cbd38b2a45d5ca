"""Tests for the audit from decision logs (causalfair.logs)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.effects import decompose
from causalfair.logs import (
    LogError,
    PositivityError,
    audit_logs,
    bootstrap_logs,
    fit_logs,
    log_stats,
    positivity_bounds,
    simulate_logs,
    validate_logs,
)
from causalfair.logs import schema as S
from causalfair.policy import TablePolicy
from causalfair.sim.lending import lending_potential, lending_setting

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
        missing="next_level, reward", required=", ".join(S.REQUIRED_COLUMNS))


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
    assert _err(df) == S.MSG_NOT_INTEGER.format(column="t", value="0", row=0, dtype=df["t"].dtype)
    df = tiny_log()
    df["reward"] = "x"
    assert _err(df) == S.MSG_NOT_NUMERIC.format(column="reward", dtype=df["reward"].dtype)


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
    assert _err(df) == S.MSG_DUPLICATE_T.format(id="a", t=0)


def test_error_time_gap():
    df = tiny_log()
    df.loc[5, "t"] = 2  # c: t = 0, 2
    assert _err(df) == S.MSG_TIME_GAP.format(id="c", t0=0, t1=2)


def test_error_late_start():
    df = tiny_log()
    df.loc[6, "t"] = 1  # d starts at t = 1
    assert _err(df) == S.MSG_LATE_START.format(id="d", t=1, t0=0)


def test_error_group_change():
    df = tiny_log()
    df.loc[3, "group"] = "g1"
    assert _err(df) == S.MSG_GROUP_CHANGE.format(id="b", g0="g0", g1="g1", t=1)


def test_error_next_level_mismatch():
    df = tiny_log()
    df.loc[4, "next_level"] = 2  # c: next_level 2 at t = 0, but level 0 at t = 1
    assert _err(df) == S.MSG_NEXT_LEVEL.format(id="c", nxt=2, t0=0, t1=1, lvl=0)


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
    ref = decompose(model, p_log, 10)
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
    # naive: resample individuals with the same draws, rebuild the log with pandas, refit
    idx = np.random.default_rng(seed).integers(0, data.n_individuals, size=(B, data.n_individuals))
    for b in range(B):
        parts = [df[df["id"] == data.ids[i]].assign(id=j) for j, i in enumerate(idx[b])]
        model, p_log, _ = fit_logs(pd.concat(parts, ignore_index=True), n_levels=7,
                                   groups=data.groups)
        ref = decompose(model, p_log, 6)
        for k in ("C", "DPE", "IPE", "SPE"):
            assert boot.loc[b, k] == pytest.approx(getattr(ref, k), abs=1e-10)
        assert boot.loc[b, "Lambda"] == pytest.approx(ref.Lambda, abs=1e-10)


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
    ref = decompose(model, p_log, 8)
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
    assert S.MSG_NEXT_LEVEL.format(id="c", nxt=2, t0=0, t1=1, lvl=0) in err


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


def test_ordinal_audit_runs_with_bootstrap():
    df = simulate_logs(LM, "random:0.5", 400, 6, seed=12)
    a = audit_logs(df, method="ordinal", n_boot=2, seed=0)
    assert a.method == "ordinal" and len(a.bootstrap) == 2
    assert np.allclose(a.model.kernel.sum(-1), 1.0)
    assert a.decomposition.C == pytest.approx(
        a.decomposition.DPE + a.decomposition.IPE + a.decomposition.SPE)

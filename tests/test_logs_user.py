"""An auditor with only a bank's decision logs: the messes a real export has (bad values,
`;` separators, negative epochs, 1-based levels, early leavers, a typo group, a large
file) are refused with a one-line fix or reported, never turned into wrong numbers."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.errors import ResourceLimitError
from causalfair.logs import LogError, PositivityError, audit_logs, read_logs, simulate_logs
from causalfair.logs.schema import MSG_LATE_START, MSG_NOT_INTEGER
from tests.conftest import schema_errors


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    """A small lending-1 log: 200 individuals x 4 epochs, random approvals."""
    df = simulate_logs("lending-1", "random:0.5", 200, 4, seed=1)
    df["group"] = df["group"].astype(str)  # as read from a CSV
    return df


def _err(df, **kw) -> str:
    with pytest.raises(LogError) as ei:
        audit_logs(df, n_boot=0, **kw)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


def test_an_infinite_reward_names_the_column_and_row(log):
    """It was refused by the model check as "reward: contains NaN or inf at index (1, 0,
    2)", an index into the fitted table that names no row of the log."""
    df = log.copy()
    df.loc[10, "reward"] = np.inf
    msg = _err(df)
    assert "column 'reward'" in msg and "inf at row 10" in msg and "finite" in msg, msg


def test_an_outcome_outside_0_1_is_refused_not_turned_into_a_repay_rate_over_1(log):
    """An outcome of 5 (an amount, not a 0/1 repayment) made p_repay > 1, and with it the
    audited threshold policy: `threshold:0.5` approved every level of one group."""
    df = log.copy()
    i = int(np.flatnonzero(df["outcome"].notna().to_numpy())[0])
    df.loc[df["outcome"].notna(), "outcome"] *= 5
    msg = _err(df, policy="threshold:0.5", on_positivity="bounds")
    assert "column 'outcome'" in msg and f"5.0 at row {i}" in msg and "[0, 1]" in msg, msg
    df.loc[i, "outcome"] = np.inf
    assert "got inf" in _err(df)


def test_semicolon_and_tab_separated_logs_with_a_bom_read_as_the_comma_csv(log, tmp_path):
    """A ';'-separated export (with Excel's byte-order mark) was read as one column and
    refused as missing every column."""
    log.to_csv(tmp_path / "log.csv", index=False)
    log.to_csv(tmp_path / "semi.csv", index=False, sep=";", encoding="utf-8-sig")
    log.to_csv(tmp_path / "tab.tsv", index=False, sep="\t")
    ref = read_logs(tmp_path / "log.csv")
    for name in ("semi.csv", "tab.tsv"):
        pd.testing.assert_frame_equal(read_logs(tmp_path / name), ref)


def test_negative_epochs_give_selection_epochs_from_0_and_a_valid_audit_json(log, tmp_path,
                                                                            capsys):
    """Selection rates were keyed by the log's own t, so a log starting at t = -3 wrote an
    audit.json with t = -3 (its schema needs epochs >= 0)."""
    df = log.assign(t=log["t"] - 3)
    assert audit_logs(df, n_boot=0).selection["t"] == [0, 1, 2, 3]
    df.to_csv(tmp_path / "neg.csv", index=False)
    (tmp_path / "neg.toml").write_text('name = "neg"\n[logs]\npath = "neg.csv"\nn_boot = 2\n'
                                       '[thresholds]\nabs_C = 1.0\n')
    assert main(["audit", str(tmp_path / "neg.toml"), "--json", "--no-report"]) == 0
    (tmp_path / "audit.out").write_text(capsys.readouterr().out)
    assert schema_errors(tmp_path / "audit.out", "audit") == []
    doc = json.loads((tmp_path / "audit.out").read_text())
    assert doc["selection"]["t"] == [0, 1, 2, 3]


def test_early_leavers_one_based_levels_and_group_sizes_are_reported(log):
    """Early leavers and a level 0 that never appears (1-based levels: K and the default
    potential shift, and C with them) passed without a word."""
    short = log[~((log["id"] < 7) & (log["t"] == 3))]
    a = audit_logs(short, n_boot=0)
    assert any(n.startswith("7 of 200 individuals leave before") for n in a.notes), a.notes
    sizes = log.drop_duplicates("id")["group"].value_counts().to_dict()
    assert a.group_sizes == sizes and a.to_dict()["group_sizes"] == sizes
    assert "individuals per group: s+ " in a.summary() and "note: 7 of 200" in a.summary()
    assert "levels: the log's 0..6 are labelled 1, 2, 3, 4, 5, 6, 7 below" in a.summary()
    one = audit_logs(log.assign(level=log["level"] + 1, next_level=log["next_level"] + 1),
                     n_boot=0)
    assert one.model.n_levels == 8
    assert any("level(s) 0 of 0..7 never appear" in n for n in one.notes), one.notes
    assert audit_logs(log, n_boot=0).notes == ()


def test_a_typo_group_shows_its_size_in_the_positivity_error(log):
    df = log.copy()
    df.loc[df["id"] == 10, ["group", "decision"]] = ["s +", 0]  # one individual's rows
    with pytest.raises(PositivityError) as ei:
        audit_logs(df, n_boot=0)
    assert "Individuals per group: 's +' 1, " in str(ei.value), str(ei.value)


def test_feature_bins_and_the_default_potential_are_in_the_summary(log):
    feat = log.drop(columns=["level", "next_level"]).assign(
        score=600.0 + 10 * log["level"], next_score=600.0 + 10 * log["next_level"])
    a = audit_logs(feat, state="score", bins=7, n_boot=0)
    text = a.summary()
    assert "score (next: next_score): 7 bins 0: (-inf, 605], 1: (605, 615]" in text, text
    assert "6: (655, inf)" in text
    assert any(n.startswith("gain potential f: the lending default") for n in a.notes)


def test_messages_give_the_fix_for_dates_and_late_entrants(log):
    df = log.assign(t=log["t"].map(lambda t: f"2024-{t + 1:02d}"))
    msg = _err(df)
    assert msg.startswith("logs: column 't' must hold integers, got '2024-01' at row 0")
    assert "months since the first" in msg and msg == MSG_NOT_INTEGER.format(
        column="t", value="2024-01", row=0, dtype=df["t"].dtype)
    late = log[~((log["id"] == 7) & (log["t"] == 0))]
    msg = _err(late)
    assert msg == MSG_LATE_START.format(id=7, t=1, t0=0)
    assert "groupby('id')['t'].transform('min')" in msg


def test_parquet_is_bounded_by_its_decoded_size(tmp_path, monkeypatch):
    """The bound used the Parquet file's declared (encoded) size x 2; dictionary encoding
    makes that many times smaller than the table, so a log far over the limit was read."""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    n = 200_000
    df = pd.DataFrame({"id": np.arange(n), "t": 0, "group": np.where(np.arange(n) % 2, "a" * 40,
                                                                     "b" * 40),
                       "level": 0, "decision": 0, "next_level": 0, "reward": 0.0})
    path = tmp_path / "big.parquet"
    df.to_parquet(path)
    meta = pq.ParquetFile(path).metadata
    declared = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "16M")
    assert 2 * declared < 16 << 20  # the old bound let it through
    with pytest.raises(ResourceLimitError, match=r"big.parquet \(200000 rows; .* over the "
                                                 r"limit of 16\.0 MiB"):
        read_logs(path)


def test_validation_and_bootstrap_stay_inside_the_memory_limit(monkeypatch):
    """Auditing needs about 300 bytes per row beyond the table, and the bootstrap drew
    all 50 replicates of a chunk as one (50, n) int64 array next to (50, n) weights: 16 MB
    at 20,000 individuals, over a 12 MB limit the read and validation had passed."""
    n = 20_000
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"id": np.arange(n), "t": 0, "group": np.arange(n) % 2,
                       "level": rng.integers(0, 3, n), "decision": rng.integers(0, 2, n),
                       "next_level": rng.integers(0, 3, n), "reward": rng.random(n)})
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "2M")
    with pytest.raises(ResourceLimitError, match=r"auditing a log of 20000 rows"):
        audit_logs(df, n_boot=0)
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "12M")
    audit_logs(df, n_boot=2)  # the lazy imports, outside the measurement
    tracemalloc.start()
    try:
        a = audit_logs(df, n_boot=50, seed=3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 << 20, peak
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "4G")  # chunks of 50: the same numbers
    ref = audit_logs(df, n_boot=50, seed=3)
    pd.testing.assert_frame_equal(a.bootstrap, ref.bootstrap)


def test_cli_input_error_is_one_line_exit_2(log, tmp_path, capsys):
    df = log.copy()
    df.loc[3, "reward"] = -np.inf
    df.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["decompose", "--logs", str(tmp_path / "bad.csv"), "--boot", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("causalfair decompose: error: logs: column 'reward' has a non-finite value "
                   "-inf at row 3; every value must be a finite number (fix or drop that "
                   "individual's rows)."), err


def test_threshold_policies_need_every_groups_outcomes(log):
    """A log without outcomes for one group gave that group p_repay = 0, so
    `threshold:0.5` was audited as "never approve" for it, silently."""
    no_minus = log.assign(outcome=np.where(log["group"] == "s-", np.nan, log["outcome"]))
    msg = _err(no_minus, policy="threshold:0.5", on_positivity="bounds")
    assert "group(s) 's-' have no approved row with an outcome" in msg, msg
    assert "no 'outcome' column" in _err(log.drop(columns="outcome"), policy="blind:0.5")
    a = audit_logs(log, n_boot=0, policy="threshold:0.5", on_positivity="bounds")
    assert a.policy_table.sum(1).min() > 0  # with outcomes: each group approves somewhere

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
    row = int(np.flatnonzero(((late["id"] == 7) & (late["t"] == 1)).to_numpy())[0])
    assert msg == MSG_LATE_START.format(id=7, t=1, t0=0, row=row)
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


# --------------------------------------------------------------- a public housing agency
# Five years of yearly decisions (0 waitlist / 1 place), three recorded ethnicities (one of
# them 8% of households), a need level 0..4 written as the audit's level (higher better:
# level = 4 - need), exported by a case-management system with the usual mess.
HOUSING_GROUPS = ["Group A", "Group B", "Group C"]


def housing_model():
    """The true model the housing logs are drawn from: waitlisting drifts down, placing
    moves up, both group-dependent; a logged placement policy favouring high need."""
    from causalfair.model import TabularModel
    from causalfair.systems.lending.settings import lending_potential

    k = np.zeros((3, 2, 5, 5))
    for s, (down0, up1) in enumerate([(0.30, 0.55), (0.38, 0.45), (0.45, 0.40)]):
        for w in range(5):
            k[s, 0, w, max(w - 1, 0)] += down0
            k[s, 0, w, min(w + 1, 4)] += 0.10
            k[s, 0, w, w] += 0.90 - down0
            k[s, 1, w, min(w + 1, 4)] += up1
            k[s, 1, w, max(w - 1, 0)] += 0.05
            k[s, 1, w, w] += 0.95 - up1
    initial = np.array([[0.10, 0.20, 0.30, 0.25, 0.15], [0.20, 0.25, 0.25, 0.20, 0.10],
                        [0.25, 0.30, 0.20, 0.15, 0.10]])
    base = np.array([0.80, 0.65, 0.45, 0.30, 0.15])
    policy = np.stack([base, base - 0.08, base - 0.10])
    model = TabularModel(kernel=k, initial=initial, potential=lending_potential(5),
                         reward=np.zeros((3, 2, 5)), group_names=HOUSING_GROUPS,
                         group_weights=[0.60, 0.32, 0.08], lambda_eps=0.1)
    return model, policy


@pytest.fixture(scope="module")
def housing() -> pd.DataFrame:
    """A clean housing log: 1,500 households x 5 years, groups as strings (as read)."""
    from causalfair.policies.core import TablePolicy

    model, policy = housing_model()
    df = simulate_logs(model, TablePolicy(policy), 1_500, 5, seed=7)
    df["group"] = df["group"].astype(str)
    return df


def test_group_names_differing_only_by_a_trailing_space_are_refused_not_split(housing):
    """An office that exports "Group A " (trailing space) for its households made the
    audit of the agency's 20,000 households run on six groups ("Group A" and "Group A "
    apart), exit 0, with numbers for pairs of groups that do not exist (a smaller log met
    it only as a positivity failure of the small spellings)."""
    df = housing.copy()
    office = df["id"] % 10 == 3                  # every row of a tenth of the households
    df.loc[office, "group"] = df.loc[office, "group"] + " "
    row = int(np.flatnonzero(office.to_numpy())[0])
    msg = _err(df)
    assert msg.startswith("logs: column 'group' has the values "), msg
    assert f"at row {row}" in msg and "differ only in spaces or case" in msg, msg
    assert "df['group'] = df['group'].str.strip()" in msg, msg
    # the same values in another case: one spelling too
    assert "differ only in spaces or case" in _err(housing.assign(
        group=np.where(housing["id"] == 5, housing["group"].str.upper(), housing["group"])))
    # the fix the message gives audits the three groups
    fixed = df.assign(group=df["group"].str.strip())
    assert audit_logs(fixed, n_boot=0).group_sizes == audit_logs(housing, n_boot=0).group_sizes
    # groups named explicitly are the user's word: both spellings are then two groups
    two = housing.assign(group=np.where(housing["group"] == "Group C", "Group A ", housing["group"]))
    assert audit_logs(two, n_boot=0, groups=["Group A", "Group B", "Group A "]).model.n_groups == 3


def test_a_decimal_comma_export_names_the_value_the_row_and_the_fix(housing, tmp_path, capsys):
    """A ';'-separated export from a European office writes -1,0: the reward column was
    refused as "must be numeric, got dtype str", naming no value, no row and no way out."""
    df = housing.assign(reward=housing["decision"] * -1.0 + 0.5)
    path = tmp_path / "eu.csv"
    df.to_csv(path, index=False, sep=";", decimal=",", lineterminator="\r\n")
    with pytest.raises(LogError) as ei:
        audit_logs(path, n_boot=0)
    msg = str(ei.value)
    assert msg.startswith(f"logs: column 'reward' must be numeric, got {df['reward'].iloc[0]!s}"
                          .replace(".", ",").replace("got ", "got '") + "' at row 0"), msg
    assert "decimal comma" in msg and "decimal=','" in msg, msg
    assert main(["decompose", "--logs", str(path), "--boot", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "at row 0" in err, err
    # read as the message says, the log audits like the comma file
    back = pd.read_csv(path, sep=";", decimal=",")
    a, b = audit_logs(back, n_boot=0), audit_logs(df, n_boot=0)
    assert a.decomposition.C == b.decomposition.C
    # a label in a numeric column: the value and its row
    lab = housing.assign(reward=housing["reward"].astype(object))
    lab.loc[4, "reward"] = "n/a"
    msg = _err(lab)
    assert "got 'n/a' at row 4" in msg and "'.' decimal point" in msg, msg


def test_duplicate_rows_name_both_rows_and_say_whether_they_are_copies(housing):
    """An export that repeats a row was refused with "individual 3 has more than one row
    at t = 2; ... drop exact copies", naming neither row nor whether they were copies."""
    df = housing.reset_index(drop=True)
    i = int(np.flatnonzero(((df["id"] == 3) & (df["t"] == 2)).to_numpy())[0])
    dup = pd.concat([df, df.iloc[[i]]], ignore_index=True)
    msg = _err(dup)
    assert f"rows {i} and {len(df)} are exact copies" in msg, msg
    assert "df = df.drop_duplicates()" in msg, msg
    assert audit_logs(dup.drop_duplicates(), n_boot=0).n_rows == len(df)
    other = dup.copy()
    other.loc[len(df), "decision"] = 1 - other.loc[len(df), "decision"]
    msg = _err(other)
    assert f"rows {i} and {len(df)} differ in column(s) decision" in msg, msg
    assert "drop_duplicates" not in msg


def test_housing_numbers_agree_between_cli_python_and_spec_and_cover_the_true_model(
        housing, tmp_path, capsys):
    """The clean log's numbers: the same seed gives the same bits from `decompose --logs`,
    `audit_logs` and a `[logs]` spec, and the 95% intervals cover the C, DPE, IPE, SPE and
    Lambda that the exact engine gives on the model that generated the log (every pair)."""
    import causalfair as cf
    from causalfair.policies.core import TablePolicy

    path = tmp_path / "housing.csv"
    housing.to_csv(path, index=False)
    a = audit_logs(path, n_boot=40, seed=2)
    assert main(["decompose", "--logs", str(path), "--boot", "40", "--seed", "2", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    (tmp_path / "h.toml").write_text('name = "h"\n[logs]\npath = "housing.csv"\nn_boot = 40\n'
                                     'seed = 2\n[thresholds]\nabs_C = 1.0\n')
    assert main(["audit", str(tmp_path / "h.toml"), "--json", "--no-report"]) == 0
    spec = json.loads(capsys.readouterr().out)
    for q in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert cli[q] == getattr(a.decomposition, q) == spec["decomposition"][q], q
    model, policy = housing_model()
    ci = a.compare_groups(0.05).pairs
    for pair in ci:
        i, j = (HOUSING_GROUPS.index(g) for g in pair.split("-"))
        true = cf.decompose(model, TablePolicy(policy), horizon=5, pair=(i, j))
        for q in ("C", "DPE", "IPE", "SPE", "Lambda"):
            est, lo, hi, _ = ci[pair][q]
            assert lo <= getattr(true, q) <= hi, (pair, q, getattr(true, q), lo, hi)


def test_per_household_errors_name_the_rows_as_read(housing):
    """A gap, a late entry, a group change and a next_level that does not follow named the
    household and its years but no row, so the analyst searched the export for them (the
    log is in export order: by year, then household)."""
    df = housing.sample(frac=1.0, random_state=5).reset_index(drop=True)
    pos = {(int(r.id), int(r.t)): i for i, r in enumerate(df[["id", "t"]].itertuples())}
    gap = df.drop(index=pos[(4, 2)]).reset_index(drop=True)
    gpos = {(int(r.id), int(r.t)): i for i, r in enumerate(gap[["id", "t"]].itertuples())}
    assert f"jumps from t = 1 to t = 3 (rows {gpos[(4, 1)]} and {gpos[(4, 3)]})" in _err(gap)
    late = df.drop(index=[pos[(0, 0)]]).reset_index(drop=True)
    lpos = {(int(r.id), int(r.t)): i for i, r in enumerate(late[["id", "t"]].itertuples())}
    assert f"individual 0 starts at t = 1 (row {lpos[(0, 1)]})" in _err(late)
    chg = df.copy()
    other = next(g for g in HOUSING_GROUPS if g != chg.loc[pos[(9, 3)], "group"])
    chg.loc[[pos[(9, 3)], pos[(9, 4)]], "group"] = other
    assert f"at t = 3 (row {pos[(9, 3)]})" in _err(chg)
    nxt = df.copy()
    nxt.loc[pos[(2, 0)], "next_level"] = (nxt.loc[pos[(2, 0)], "next_level"] + 1) % 5
    msg = _err(nxt)
    assert f"at t = 0 (row {pos[(2, 0)]}), but its row at t = 1 (row {pos[(2, 1)]})" in msg, msg


def test_a_failing_log_audit_offers_repairs_a_log_audit_has(housing, tmp_path, capsys):
    """The board report of a failing [logs] spec offered `[retrain] init = "scratch"` (gate
    --retrain on a log spec stops on "the lending settings are tabular", or a traceback
    with algo = "exact") and [baseline] (refused with [logs])."""
    from causalfair.report.explain import failure_drivers

    housing.to_csv(tmp_path / "housing.csv", index=False)
    (tmp_path / "h.toml").write_text('name = "h"\n[logs]\npath = "housing.csv"\nn_boot = 2\n'
                                     '[thresholds]\nabs_C = 0.01\n')
    assert main(["audit", str(tmp_path / "h.toml"), "--json", "--no-report"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["overall"] == "FAIL"
    repair = next(line for line in failure_drivers(doc, None) if line.startswith("Repair"))
    assert 'init = "scratch"' not in repair and "compare candidates with" not in repair, repair
    assert "--audit-policy" in repair, repair


def test_decisions_exported_as_words_get_a_message_about_the_baseline(housing):
    """An export that writes 'waitlist' / 'place' was refused as "column 'decision' must
    hold integers, got 'place' at row 0": no word on which of the two must be 0 (the
    baseline pi0 takes, on which SPE and IPE rest) or that reports call them d0 and d1."""
    words = housing.assign(decision=np.where(housing["decision"] == 1, "place", "waitlist"))
    msg = _err(words)
    first = words["decision"].iloc[0]
    assert msg.startswith("logs: column 'decision' holds the labels 'place', 'waitlist' "
                          f"(first {first!r} at row 0), not 0 and 1"), msg
    assert "baseline" in msg and "name them, the baseline first, e.g. decisions=['place', " \
        "'waitlist'] if 'place' is the baseline (CLI --decisions place,waitlist" in msg, msg
    fixed = words.assign(decision=(words["decision"] == "place").astype(int))
    assert audit_logs(fixed, n_boot=0).decomposition.C == audit_logs(housing, n_boot=0).decomposition.C
    three = words.assign(decision=np.where(words["id"] == 2, "refer", words["decision"]))
    assert "collapse" in _err(three)


def test_named_decisions_label_the_results_and_read_a_column_of_words(housing, tmp_path, capsys):
    """``decisions=["waitlist", "place"]`` (Python, CLI --decisions, spec [logs] decisions):
    the fitted model's action labels, so the report says place_rate and the selection
    rates "place"; a column of those words reads as 0 / 1 with the numbers of the 0 / 1
    log, bit for bit; another word, or a bad declaration, is one line naming it (before,
    a log could not name its decisions: reports said d1_rate)."""
    names = ["waitlist", "place"]
    words = housing.assign(decision=np.where(housing["decision"] == 1, "place", "waitlist"))
    plain = audit_logs(housing, n_boot=3, seed=1)
    named = audit_logs(words, n_boot=3, seed=1, decisions=names)
    assert named.model.action_labels == ("waitlist", "place")
    assert named.benefit.actions == ("waitlist", "place")
    for k in ("C", "DPE", "IPE", "SPE"):
        assert getattr(named.decomposition, k) == getattr(plain.decomposition, k)
    assert named.benefit.Lambda == plain.benefit.Lambda
    assert audit_logs(housing, n_boot=0, decisions=names).decomposition.C == plain.decomposition.C
    odd = words.assign(decision=np.where(words["id"] == 3, "refer", words["decision"]))
    row = int(np.flatnonzero(odd["decision"].to_numpy() == "refer")[0])
    assert _err(odd, decisions=names) == (
        f"logs: column 'decision' holds 'refer' at row {row}, which is neither of the decisions "
        "'waitlist' (0, the baseline) and 'place' (1); fix the row, or name the log's own "
        "words in decisions=.")
    assert _err(housing, decisions=["place"]).startswith("decisions: expected the names of "
                                                          "decision 0 (the baseline) and decision 1")
    # the spec and the CLI
    words.to_csv(tmp_path / "h.csv", index=False)
    (tmp_path / "h.toml").write_text('name = "h"\n[logs]\npath = "h.csv"\nn_boot = 3\nseed = 1\n'
                                     'decisions = ["waitlist", "place"]\n[thresholds]\nabs_C = 1\n')
    assert main(["audit", str(tmp_path / "h.toml"), "--out", str(tmp_path / "rep")]) == 0
    doc = json.loads((tmp_path / "rep" / "audit.json").read_text())
    assert doc["quantities"]["C"]["estimate"] == plain.decomposition.C
    assert doc["selection"]["actions"] == ["place"]
    assert "| place_rate\\[" in (tmp_path / "rep" / "report.md").read_text()
    capsys.readouterr()
    assert main(["decompose", "--logs", str(tmp_path / "h.csv"), "--boot", "3", "--seed", "1",
                 "--decisions", "waitlist,place", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["C"] == plain.decomposition.C
    (tmp_path / "bad.toml").write_text('name = "b"\n[logs]\npath = "h.csv"\n'
                                       'decisions = ["place", "place"]\n')
    assert main(["audit", str(tmp_path / "bad.toml"), "--no-report"]) == 2
    assert "[logs] decisions: bad value ['place', 'place']" in capsys.readouterr().err

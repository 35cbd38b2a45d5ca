"""Decision logs' loose ends (a housing agency's walkthrough): the missing-columns message
names the log's own columns and a close match, level logs take a potential of their own at
every door, a [logs] spec audits a candidate [policy] on the fitted model, and a messy
export is refused with one line naming row, column, value and fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from causalfair.logs import LogError, audit_logs, simulate_logs, validate_logs


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    df = simulate_logs("lending-1", "random:0.5", 300, 4, seed=1)
    df["group"] = df["group"].astype(str)  # as read from a CSV
    return df


def _err(df, **kw) -> str:
    with pytest.raises(LogError) as ei:
        validate_logs(df, **kw)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


def _cli_err(path, capsys) -> str:
    from causalfair.cli import main

    capsys.readouterr()
    assert main(["decompose", "--logs", str(path), "--boot", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


# ------------------------------------------------------------------ 3. missing columns
def test_missing_column_lists_the_log_columns_and_a_close_match(log):
    """It named only the missing column and the required list, not what the file has."""
    df = log.rename(columns={"next_level": "next_lvl", "reward": "Reward"})
    msg = _err(df)
    assert "missing column(s) 'next_level', 'reward'" in msg
    assert "the log has the columns 'id', 't', 'group', 'level', 'decision', 'next_lvl', " \
           "'Reward'" in msg
    assert "Did you mean 'next_lvl' for 'next_level', 'Reward' for 'reward'?" in msg
    assert "df.rename(columns={'next_lvl': 'next_level', 'Reward': 'reward'})" in msg


def test_missing_column_without_a_close_match_says_none(log):
    msg = _err(log.drop(columns=["reward"]))
    assert "missing column(s) 'reward'" in msg
    assert "Did you mean" not in msg
    assert "'next_level'" in msg  # the log's columns are listed


def test_missing_column_of_a_feature_log_lists_what_it_needs(log):
    """With state= the required list is the feature log's (no level / next_level)."""
    df = log.drop(columns=["level", "next_level", "decision"]).assign(
        income=1.0, next_income=1.0, action=0)
    msg = _err(df, state=["income"], bins=2)
    assert "missing column(s) 'decision'" in msg
    assert "needs the columns id, t, group, decision, reward" in msg


# ------------------------------------------------------------ 2. a potential of one's own
F = [0.0, 0.0, 1.0, 1.0, 3.0, 3.0, 10.0]  # a housing agency's own gain per level


def _write(tmp_path, df, body: str):
    df.to_csv(tmp_path / "log.csv", index=False)
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "t"\n[logs]\npath = "log.csv"\nn_boot = 2\n{body}\n')
    return spec


def test_level_potential_reaches_the_model_at_every_door(log, tmp_path, capsys):
    """The command line and a spec had no way to give a level log's potential."""
    import json

    import causalfair as cf
    from causalfair.cli import main

    py = audit_logs(log, n_boot=2, seed=0, potential=np.array(F))
    assert np.array_equal(py.model.potential, np.broadcast_to(F, (2, 7)))
    default = audit_logs(log, n_boot=2, seed=0)
    assert py.decomposition.C != default.decomposition.C  # the potential is used
    spec = _write(tmp_path, log, "potential = " + json.dumps(F))
    res = cf.audit(str(spec))
    assert res.decomposition.C == py.decomposition.C
    assert np.array_equal(res.model.potential, py.model.potential)
    capsys.readouterr()
    assert main(["decompose", "--logs", str(tmp_path / "log.csv"), "--boot", "2", "--json",
                 "--potential", ",".join(map(str, F))]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["C"] == py.decomposition.C


def test_per_group_potential_at_the_spec_and_cli(log, tmp_path, capsys):
    import json

    import causalfair as cf
    from causalfair.cli import main

    f2 = [F, [v + 1.0 for v in F[:-1]] + [12.0]]
    py = audit_logs(log, n_boot=2, seed=0, potential=np.array(f2))
    res = cf.audit(str(_write(tmp_path, log, "potential = " + json.dumps(f2))))
    assert res.decomposition.C == py.decomposition.C
    capsys.readouterr()
    assert main(["decompose", "--logs", str(tmp_path / "log.csv"), "--boot", "2", "--json",
                 "--potential", ";".join(",".join(map(str, r)) for r in f2)]) == 0
    assert json.loads(capsys.readouterr().out)["C"] == py.decomposition.C


@pytest.mark.parametrize("bad, words", [
    (["0", "1", "x", 3, 4, 5, 6], "write each value as a number"),
    ([0, 1, float("nan"), 3, 4, 5, 6], "level 2 is nan"),
    ([0, 1, 2], "one value per level 0..6"),
])
def test_a_bad_potential_names_itself(log, bad, words):
    with pytest.raises(LogError, match="^potential: ") as ei:
        audit_logs(log, n_boot=0, potential=bad)
    assert words in str(ei.value)


def test_cli_and_spec_refuse_a_bad_potential(log, tmp_path, capsys):
    import causalfair as cf
    from causalfair.cli import main
    from causalfair.errors import SpecError

    spec = _write(tmp_path, log, 'potential = [0, 1, "x"]')
    with pytest.raises(SpecError, match=r"\[logs\] potential: bad value"):
        cf.audit(str(spec))
    spec = _write(tmp_path, log, "potential = [0, 1]\npotential_weights = { level = 1.0 }")
    with pytest.raises(SpecError, match=r"\[logs\] potential"):
        cf.audit(str(spec))
    capsys.readouterr()
    assert main(["decompose", "--logs", str(tmp_path / "log.csv"), "--boot", "0",
                 "--potential", "0,1,x"]) == 2
    assert "--potential: expected" in capsys.readouterr().err
    assert main(["decompose", "--logs", str(tmp_path / "log.csv"), "--boot", "0",
                 "--potential", "0,1,2"]) == 2
    err = capsys.readouterr().err
    assert "--potential: expected shape (7,)" in err and err.count("\n") == 1


# ------------------------------------------------- 1. a candidate policy on the fitted model
def test_a_candidates_selection_rates_are_the_candidates(log):
    """audit_logs(policy=candidate) reported the selection rates of the decisions in the
    log (the logged policy's, about 0.5 here), not the candidate's: the report's
    selection rates and ratio_selection described another policy."""
    a = audit_logs(log, n_boot=0, policy="always")
    sel = a.selection
    assert sel["source"] == "exact"  # from the fitted model under the candidate
    assert all(sel["rate_overall"][g]["d1"] == pytest.approx(1.0) for g in sel["groups"])
    logged = audit_logs(log, n_boot=0).selection
    assert logged["source"] == "logs"
    assert all(0.3 < logged["rate_overall"][g]["d1"] < 0.7 for g in logged["groups"])


def test_a_logs_spec_audits_a_candidate_policy_on_the_fitted_model(log, tmp_path):
    """[logs] + [policy] was refused ("a log audit reads the deployed policy"): an agency
    could not ask what policy X would do on the model fitted from its logs in one run."""
    import causalfair as cf
    from causalfair.systems.tabular_io import save_tabular

    spec = _write(tmp_path, log, '[policy]\nbuiltin = "threshold:0.6"')
    spec.write_text(spec.read_text().replace("n_boot = 2", "n_boot = 6"))
    res = cf.audit(str(spec))
    py = audit_logs(log, n_boot=6, seed=0, policy="threshold:0.6")
    # the same numbers as the Python door, intervals from the same bootstrap of the fit
    assert res.decomposition.C == py.decomposition.C
    assert res.quantities["C"][3] == py.decomposition.se["C"] > 0
    assert res.extra["logs"]["policy_source"] == "supplied: threshold:0.6"
    assert any("fixed" in n and "threshold:0.6" in n for n in res.extra["logs"]["notes"])
    # the same point estimate as the two-step tabular route ([system] tabular + [policy])
    save_tabular(tmp_path / "fitted.npz", audit_logs(log, n_boot=0).model)
    two = tmp_path / "two.toml"
    two.write_text('name = "t2"\nhorizon = 4\n[system]\ntabular = "fitted.npz"\n'
                   '[policy]\nbuiltin = "threshold:0.6"\n')
    assert cf.audit(str(two)).decomposition.C == pytest.approx(res.decomposition.C, abs=1e-12)


def test_a_logs_spec_refuses_what_it_cannot_audit_honestly(log, tmp_path):
    import causalfair as cf
    from causalfair.errors import SpecError

    # (a candidate checkpoint or factory is audited: tests/test_followups_audit.py)
    for body, words in (("[policy]", "[policy] builtin: missing"),
                        ('[model]\nsetting = "lending-1"', "[logs]: cannot be combined with [model]")):
        with pytest.raises(SpecError) as ei:
            cf.audit(str(_write(tmp_path, log, body)))
        assert words in str(ei.value), str(ei.value)


# ------------------------------------------------ 4. an agency analyst's messy export
def test_a_windows_encoded_export_names_its_line_and_the_fix(log, tmp_path, capsys):
    """It said "not a readable CSV file (UnicodeDecodeError: 'utf-8' codec can't decode
    byte 0xe9 in position 57 ...)": no line of the file, no fix."""
    df = log.assign(group=log["group"].map({"s+": "Residents", "s-": "Non-résidents"}))
    df.to_csv(tmp_path / "x.csv", index=False, encoding="cp1252")
    line = 2 + int(np.flatnonzero(df["group"] == "Non-résidents")[0])
    err = _cli_err(tmp_path / "x.csv", capsys)
    assert f"is not UTF-8 text: line {line} (row {line - 2})" in err
    assert "b'\\xe9'" in err or "0xe9" in err
    assert "encoding='cp1252'" in err and "CSV UTF-8" in err


def test_a_thousands_separator_is_not_called_a_decimal_comma(log, tmp_path, capsys):
    """'1,000' was diagnosed as a decimal comma ("read it with decimal=','"), which would
    read 1,000 as 1.0: the fix named both readings and how to read each."""
    df = log.assign(reward=log["reward"].map(lambda v: f"{v * 1000:,.0f}"))
    df.to_csv(tmp_path / "x.csv", index=False)
    err = _cli_err(tmp_path / "x.csv", capsys)
    i = int(np.flatnonzero(df["reward"].str.contains(","))[0])
    assert f"column 'reward' must be numeric, got '{df['reward'].iloc[i]}' at row {i}" in err
    assert "thousands=','" in err and "decimal=','" in err


def test_a_repeated_header_line_is_named(log, tmp_path, capsys):
    """Two exports joined with their headers: it said "column 't' must hold integers, got
    '0' at row 0", a value that is an integer, on a row that is fine."""
    with open(tmp_path / "x.csv", "w") as fh:
        fh.write(log.iloc[:400].to_csv(index=False) + log.iloc[400:].to_csv(index=False))
    err = _cli_err(tmp_path / "x.csv", capsys)
    assert "row 400 (file line 402) repeats the header" in err
    assert "df = df[df['id'] != 'id']" in err


def test_a_not_integer_text_column_names_its_first_bad_value(log):
    df = log.assign(t=log["t"].astype(str))
    df.loc[7, "t"] = "2024-03"
    msg = _err(df)
    assert "column 't' must hold integers, got '2024-03' at row 7" in msg


def test_blank_trailing_rows_are_named_with_the_fix(log, tmp_path, capsys):
    with open(tmp_path / "x.csv", "w") as fh:
        fh.write(log.to_csv(index=False) + ",,,,,,,\n,,,,,,,\n")
    err = _cli_err(tmp_path / "x.csv", capsys)
    assert f"2 row(s) empty in every column (first at row {len(log)}, file line {len(log) + 2})" in err
    assert "df.dropna(how='all')" in err


def test_next_level_not_yet_known_at_the_last_epoch(log):
    """The latest decisions' outcome is not known yet: it said only "only 'outcome' may
    be missing"."""
    df = log.assign(next_level=log["next_level"].astype(float))
    df.loc[df["t"] == df["t"].max(), "next_level"] = np.nan
    msg = _err(df)
    n = int((df["t"] == df["t"].max()).sum())
    assert f"column 'next_level' has {n} missing value(s)" in msg
    assert "each at its individual's last row" in msg
    assert "df = df[df['next_level'].notna()]" in msg
    # the fix works: the audit runs one epoch shorter
    assert audit_logs(df[df["next_level"].notna()], n_boot=0).log_horizon == 3


def test_an_unused_group_category_is_named_with_the_fix(log):
    """It said "group 'other' has no individuals; every group needs data" from the fit,
    without saying where the group came from or how to drop it."""
    df = log.assign(group=pd.Categorical(log["group"], categories=["s+", "s-", "other"]))
    msg = _err(df)
    assert "group 'other' has no row in the log" in msg
    assert "df['group'] = df['group'].cat.remove_unused_categories()" in msg
    msg = _err(log, groups=["s+", "s-", "other"])
    assert "group 'other' has no row in the log" in msg and "groups=" in msg


def test_numbers_in_an_object_column_get_the_conversion(log):
    """It said "'reward' must be numeric, got 1.0": a number, refused as not a number."""
    msg = _err(log.assign(reward=log["reward"].astype(object)))
    assert "column 'reward' must be numeric, got" in msg
    assert "df['reward'] = pd.to_numeric(df['reward'])" in msg


def test_decisions_coded_minus_one_and_one(log):
    msg = _err(log.assign(decision=log["decision"] * 2 - 1))
    assert "coded -1 and 1" in msg
    assert "df['decision'] = (df['decision'] == 1).astype(int)" in msg


def test_integer_text_and_dates_get_their_own_fix(log):
    msg = _err(log.assign(t=log["t"].astype(str)))
    assert "column 't' holds integers stored as dtype" in msg and ".astype(int)" in msg
    msg = _err(log.assign(level=log["level"].astype("category")))
    assert "column 'level' holds integers stored as dtype category" in msg
    dates = log.assign(t=pd.to_datetime("2024-01-01") + pd.to_timedelta(log["t"], unit="D"))
    msg = _err(dates)  # not "integers": dates get the epochs fix
    assert "column 't' must hold integers" in msg and "months since the first" in msg

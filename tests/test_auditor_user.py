"""An external auditor at a regulator reproduces a bank's audit folder with
`causalfair audit --reproduce` and must find every kind of tampering: a spec file
edited after the audit (or audit.json's own record of the spec loosened to turn FAIL
into PASS), a block of audit.json the comparison skipped (the system's units and group
names, the figures' numbers, the resolved n), a number edited in report.md or
report.html; and an honest folder is reproduced file for file, its output saying what
was checked."""

from __future__ import annotations

import json
import os
import shutil

import pytest

import causalfair as cf
from causalfair.audit.reproduce import reproduce
from causalfair.errors import InputError
from tests.conftest import one_line_error

SPEC = """name = "bank"
horizon = 5
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 0.05
Lambda = 0.1
"""


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    """The bank's folder: its spec and the report folder its audit wrote (a FAIL)."""
    folder = tmp_path_factory.mktemp("bank")
    (folder / "bank.toml").write_text(SPEC, encoding="utf-8")
    here = os.getcwd()
    os.chdir(folder)  # where the bank ran `causalfair audit bank.toml --out rep`
    try:
        cf.audit("bank.toml").write_report("rep")
    finally:
        os.chdir(here)
    return folder


@pytest.fixture
def sent(bank, tmp_path, monkeypatch):
    """A copy of what the bank sent, the working directory where the audit ran."""
    shutil.copy(bank / "bank.toml", tmp_path / "bank.toml")
    shutil.copytree(bank / "rep", tmp_path / "rep")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _edit(path, fn):
    doc = json.loads(path.read_text(encoding="utf-8"))
    fn(doc)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def test_a_spec_file_edited_after_the_audit_is_refused_naming_the_key(sent):
    text = (sent / "bank.toml").read_text(encoding="utf-8")
    (sent / "bank.toml").write_text(text.replace("abs_C = 0.05", "abs_C = 0.5"),
                                    encoding="utf-8")
    with pytest.raises(InputError, match=r"bank\.toml: spec\.parsed\.thresholds\.abs_C: "
                                         r"recorded 0\.05, the file gives 0\.5"):
        reproduce("rep")


def test_thresholds_loosened_in_audit_json_to_turn_fail_into_pass_are_found(sent):
    """The bank loosens the thresholds in audit.json's own record of the spec (parsed and
    resolved), sets every verdict to PASS: re-run from that record the audit passes too,
    so only the spec file shows it."""
    def loosen(doc):
        for block in (doc["spec"]["parsed"], doc["spec"]["resolved"]):
            block["thresholds"] = {"abs_C": 5.0, "Lambda": 5.0}
        for v in doc["verdicts"]:
            v["threshold"], v["status"] = 5.0, "PASS"
        doc["overall"] = "PASS"

    assert json.loads((sent / "rep" / "audit.json").read_text())["overall"] == "FAIL"
    _edit(sent / "rep" / "audit.json", loosen)
    with pytest.raises(InputError, match=r"spec\.parsed\.thresholds\.abs_C: recorded 5\.0, "
                                         r"the file gives 0\.05"):
        reproduce("rep")


@pytest.mark.parametrize("where, edit", [
    ("system.gain.unit", lambda d: d["system"]["gain"].update(unit="percentage points")),
    ("system.groups[0]", lambda d: d["system"]["groups"].__setitem__(0, "B")),
    ("spec.resolved.n", lambda d: d["spec"]["resolved"].update(n=100000)),
    ("figures.waterfall.data.effects.SPE.estimate",
     lambda d: d["figures"]["waterfall"]["data"]["effects"]["SPE"].update(estimate=0.0)),
    ("policy.label", lambda d: d["policy"].update(label="checkpoint approved.pt")),
])
def test_every_block_of_audit_json_is_compared(sent, where, edit):
    _edit(sent / "rep" / "audit.json", edit)
    rep = reproduce("rep")
    assert not rep.identical and any(d.startswith(where + ":") for d in rep.differences), \
        rep.differences


@pytest.mark.parametrize("name", ["report.md", "report.html", "annex-iv.md", "card.md"])
def test_a_number_edited_in_the_report_is_found(sent, name):
    path = sent / "rep" / name
    text = path.read_text(encoding="utf-8")
    est = json.loads((sent / "rep" / "audit.json").read_text())["quantities"]["C"]["estimate"]
    shown = f"{est:.4f}"
    assert shown in text, (shown, name)
    path.write_text(text.replace(shown, "0.0100"), encoding="utf-8")
    rep = reproduce("rep")
    assert not rep.identical and any(d.startswith(f"{name}: ") for d in rep.differences), \
        rep.differences


def test_an_honest_folder_is_reproduced_file_for_file_and_says_what_was_checked(sent, capsys):
    from causalfair.cli import main

    assert main(["audit", "--reproduce", "rep"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("reproduced rep/audit.json: every number identical (bit for bit)")
    assert "checked: spec file bank.toml (the recorded spec.parsed)" in out, out
    assert "report files identical to the report rendered from the reproduction" in out, out
    for block in ("verdicts", "quantities", "system", "figures"):
        assert block in out, out


def test_an_unparsable_spec_file_is_one_line(sent, cli_here):
    (sent / "bank.toml").write_text("name = \n", encoding="utf-8")
    err = one_line_error(cli_here("audit", "--reproduce", "rep", cwd=sent))
    assert "bank.toml" in err, err


def test_out_with_no_report_is_refused_instead_of_writing_nothing(sent, cli_here):
    """`--out DIR --no-report` wrote no folder and said nothing: the auditor then had no
    audit.json to reproduce."""
    err = one_line_error(cli_here("audit", "bank.toml", "--out", "mine", "--no-report",
                                  cwd=sent))
    assert "--out" in err and "--no-report" in err, err
    assert not (sent / "mine").exists()


def test_a_monte_carlo_report_states_that_its_simulator_is_taken_as_the_truth():
    """The exact engine's assumptions said the model is taken as the truth; the Monte
    Carlo engine's, which rest on the simulator just as much, did not, nor that their
    intervals are the Monte Carlo error only (not an error of the model)."""
    from causalfair.report.explain import assumptions

    spec = {"name": "mc", "horizon": 3, "system": {"id": "lending-2"},
            "policy": {"builtin": "blind:0.5"},
            "engine": {"kind": "mc", "n": 200, "seed": 0}}
    doc = json.loads(json.dumps(cf.audit(spec).to_dict()))
    text = " ".join(assumptions(doc))
    assert "Monte Carlo engine: 200 simulated units" in text, text
    assert ("The system lending-2 (lending, FICO TransRisk data (white / black applicants)) "
            "is taken as the truth") in text, text
    assert "the Monte Carlo error only" in text and "not an error of the system's model" in text


def test_audit_json_records_when_the_audit_ran_and_a_reproduction_keeps_it(sent):
    """A regulator files an audit by its date: audit.json's provenance had versions and
    kernels but no date. It is the date the audit ran (UTC), the same in every
    to_dict() of one result, and a reproduction renders the report with the recorded
    one (so the folder still compares file for file)."""
    import datetime as dt

    doc = json.loads((sent / "rep" / "audit.json").read_text(encoding="utf-8"))
    when = doc["provenance"]["date"]
    ran = dt.datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert abs((dt.datetime.now(dt.UTC) - ran).total_seconds()) < 3600
    rep = reproduce("rep")
    assert rep.identical, rep.differences
    assert rep.result.to_dict()["provenance"]["date"] == rep.result.to_dict()["provenance"]["date"]


def test_an_edited_causalfair_version_does_not_hide_an_edited_report(sent):
    """A report written by another causalfair may be worded otherwise; the difference
    says so, but stays a difference: editing provenance.causalfair in audit.json does
    not turn an edited report.md into a note (and the version the report states no
    longer matches audit.json's, which is a difference too)."""
    _edit(sent / "rep" / "audit.json", lambda d: d["provenance"].update(causalfair="0.0.9"))
    path = sent / "rep" / "report.md"
    path.write_text(path.read_text(encoding="utf-8").replace("FAIL", "PASS"), encoding="utf-8")
    rep = reproduce("rep")
    assert [d for d in rep.differences if d.startswith("report.md: line 1: recorded")
            and "written by causalfair 0.0.9" in d], rep.differences
    assert any("recorded with causalfair 0.0.9" in n for n in rep.notes), rep.notes


def test_an_input_deleted_from_audit_json_is_found(tmp_path, monkeypatch):
    """audit.json's inputs were checked one by one as recorded: an entry deleted (so that
    a changed factory module or data file would go unchecked) went unnoticed."""
    from tests.tri_system import tri_source

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    (tmp_path / "tri.toml").write_text(
        'name = "tri"\n[system]\nfactory = "tri:make"\n[policy]\nfactory = "tri:mixed"\n',
        encoding="utf-8")
    doc = json.loads(json.dumps(cf.audit(tmp_path / "tri.toml").to_dict()))
    assert [e["role"] for e in doc["inputs"]] == ["system.factory", "policy.factory"]
    doc["inputs"] = doc["inputs"][1:]
    (tmp_path / "a.audit").write_text(json.dumps(doc), encoding="utf-8")
    rep = reproduce(tmp_path / "a.audit")
    assert rep.differences == ["inputs: the audit read tri.py (system.factory, module tri), "
                               "which audit.json does not record"], rep.differences


def test_a_recorded_spec_that_does_not_load_names_audit_json_and_the_fix(sent, cli_here):
    """audit.json's spec.parsed edited to a bad value is named as the tampering it is
    (against the spec file), not as an error of 'audit spec'; a checkpoint that is not
    here names audit.json and --base-dir."""
    _edit(sent / "rep" / "audit.json",
          lambda d: d["spec"]["parsed"].update(policy={"builtin": "always"}))
    err = one_line_error(cli_here("audit", "--reproduce", "rep", cwd=sent))
    assert err.startswith("causalfair audit: error: bank.toml: spec.parsed.policy.builtin: "
                          "recorded 'always', the file gives 'threshold:0.5'"), err
    (sent / "bank.toml").unlink()
    err = one_line_error(cli_here("audit", "--reproduce", "rep", "--base-dir", ".",
                                  cwd=sent))
    assert "rep/audit.json: spec.parsed" not in err  # loads: a builtin needs no file
    _edit(sent / "rep" / "audit.json",
          lambda d: d["spec"]["parsed"].update(policy={"checkpoint": "gone.pt"}))
    err = one_line_error(cli_here("audit", "--reproduce", "rep", "--base-dir", ".",
                                  cwd=sent))
    assert err.startswith("causalfair audit: error: rep/audit.json: spec.parsed: the "
                          "recorded spec does not load here"), err
    assert "gone.pt" in err and "--base-dir" in err, err


def test_a_gate_error_folder_is_named_as_such(tmp_path, cli_here):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "error.json").write_text(json.dumps(
        {"name": "x", "spec": "x.toml", "overall": "ERROR", "error": "boom"}), encoding="utf-8")
    err = one_line_error(cli_here("audit", "--reproduce", "e", cwd=tmp_path))
    assert "e/error.json: the gate could not audit spec x.toml (boom)" in err, err
    assert "nothing to reproduce" in err, err


def test_a_folder_written_on_another_machine_compares_file_for_file(tmp_path, monkeypatch):
    """The auditor's machine is not the bank's: another platform and other dependency
    versions (same numbers) are the recorded environment, which the report's provenance
    states; the report rendered again states the recorded one, so only a note says
    what differs, not a difference per report file (the shipped example, audited on
    another machine, differed in report.md, report.html and annex-iv.md)."""
    import platform

    import causalfair.audit.result as result_mod

    mine = result_mod.provenance

    def banks():
        prov = mine()
        return {**prov, "platform": "Bank-OS-1.0",
                "dependencies": {**prov["dependencies"], "pandas": "0.0.1"}}

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bank.toml").write_text(SPEC, encoding="utf-8")
    monkeypatch.setattr(result_mod, "provenance", banks)
    cf.audit("bank.toml").write_report("rep")
    monkeypatch.setattr(result_mod, "provenance", mine)
    assert "Bank-OS-1.0" in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    rep = reproduce("rep")
    assert rep.identical, rep.differences
    notes = " ".join(rep.notes)
    assert f"platform: recorded 'Bank-OS-1.0', here {platform.platform()!r}" in notes, notes
    assert "pandas: recorded '0.0.1'" in notes, notes

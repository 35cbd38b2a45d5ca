"""A security reviewer's hostile files, one door each (docs/limits.md, "Security"): what
the earlier corpora (tests/test_hostile_corpus.py, tests/test_hostile_files.py) did not
reach. Every file is built in tmp_path; every case would pass on the code before its fix
only if the defect were absent."""

from __future__ import annotations

import csv
import io
import json
import os
import struct
import zipfile
from pathlib import Path

import pytest

from causalfair.cli import main
from causalfair.errors import CheckpointError, ResourceLimitError


def _lying_zip(path: Path, members: int, suffix: str = ".npy") -> Path:
    """A stored zip of ``members`` empty entries whose end record declares one entry."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for i in range(members):
            zf.writestr(f"{i}{suffix}", b"")
    data = bytearray(path.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 1, 1)  # entries on this disk, entries in all
    path.write_bytes(bytes(data))
    return path


# ------------------------------------------------------------------ zip entry count
@pytest.mark.parametrize("suffix", [".npz", ".pt", ".zip"])
def test_zip_whose_end_record_understates_its_entries_is_refused(tmp_path, suffix):
    """The entry limit held only for the count the end record declares: a directory of
    6,000 entries behind a record declaring 1 was parsed in full (zipfile ignores the
    count), for every checkpoint format."""
    from causalfair.policies.checkpoint import load_checkpoint

    path = _lying_zip(tmp_path / f"c{suffix}", 6000)
    with pytest.raises(ResourceLimitError, match="4096"):
        load_checkpoint(path)


def test_zip_directory_larger_than_the_entry_limit_allows_is_refused_before_parsing(
        tmp_path, monkeypatch):
    """The directory's size (from the end record) bounds what is parsed: 60,000 entries
    are refused without building one ZipInfo."""
    from causalfair import _safe_read

    path = _lying_zip(tmp_path / "big.npz", 60_000)
    built = []
    real = zipfile.ZipInfo.__init__

    def counting(self, *a, **k):
        built.append(1)
        real(self, *a, **k)

    monkeypatch.setattr(zipfile.ZipInfo, "__init__", counting)
    with pytest.raises(ResourceLimitError, match="directory"):
        _safe_read.open_zip(path, "x", CheckpointError)
    assert not built


def test_ordinary_archives_still_open(tmp_path):
    from causalfair._safe_read import MAX_ZIP_MEMBERS, open_zip

    path = tmp_path / "ok.npz"
    with zipfile.ZipFile(path, "w") as zf:
        for i in range(MAX_ZIP_MEMBERS):
            zf.writestr(f"{'x' * 200}{i}.npy", b"")
    with open_zip(path, "x", CheckpointError) as zf:
        assert len(zf.infolist()) == MAX_ZIP_MEMBERS


# ------------------------------------------------------------- unreadable checkpoints
def test_checkpoint_that_cannot_be_read_is_one_line_exit_2(tmp_path, capsys):
    """A .pt whose read fails (EIO from /proc/self/mem through a link; a permission
    error for a non-root user) was an OSError traceback, exit 1."""
    link = tmp_path / "mem.pt"
    link.symlink_to("/proc/self/mem")
    code = main(["decompose", "--checkpoint", str(link), "--horizon", "3"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert err.startswith("causalfair decompose: error: checkpoint ") and "cannot be read" in err


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_checkpoint_that_is_not_a_regular_file_says_so(tmp_path, kind):
    """A FIFO (whose read would block) or a device is refused without being opened, in
    words that say what it is, not "no such file"."""
    from causalfair.policies.checkpoint import load_checkpoint

    if kind == "fifo":
        path = tmp_path / "c.pt"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    with pytest.raises(CheckpointError, match="not a regular file") as info:
        load_checkpoint(path)
    assert "no such file" not in str(info.value)


# ------------------------------------------------------------------ CSV formulas
FORMULA = "=cmd|' /C calc'!A0"


def _doc_with_groups(a: str, b: str) -> dict:
    sel = {"groups": [a, b], "actions": ["d1"], "steps": 1, "t": [0], "source": "logs",
           "rate_overall": {a: {"d1": 0.25}, b: {"d1": 0.5}},
           "rate": {a: {"d1": [0.25]}, b: {"d1": [0.5]}},
           "n": {a: [4], b: [4]}, "count": {a: {"d1": [1]}, b: {"d1": [2]}}}
    return {"selection": sel, "decomposition": {"groups": {a: {"weight": 0.5},
                                                           b: {"weight": 0.5}}}}


@pytest.mark.parametrize("name", [FORMULA, "+1+cmd", "-2+3", "@SUM(A1)", "\tx", "-inf", "-1_0"])
def test_ll144_csv_neutralises_cells_a_spreadsheet_would_run(name):
    """A group named like a formula (from a decision log's group column, or a hostile
    audit.json given to `causalfair export`) is written with a leading apostrophe, as
    OWASP advises, so a spreadsheet shows it as text instead of evaluating it."""
    from causalfair.report.export import ll144_csv

    rows = list(csv.DictReader(io.StringIO(ll144_csv(_doc_with_groups(name, "B")))))
    cells = [r["group"] for r in rows] + [r["highest_rate_group"] for r in rows]
    assert "'" + name in cells
    assert all(c[:1] not in "=+-@\t\r" for c in cells)


@pytest.mark.parametrize("name", ["s-", "s+", "-1", "+2.5", "A", "1e3", "-.5E-3"])
def test_ll144_csv_keeps_plain_names_and_numbers(name):
    from causalfair.report.export import ll144_csv

    rows = list(csv.DictReader(io.StringIO(ll144_csv(_doc_with_groups(name, "B")))))
    assert {r["group"] for r in rows} == {name, "B"}
    assert rows[0]["selection_rate"] == "0.25"


def test_export_of_a_hostile_audit_json_writes_no_formula(tmp_path, capsys):
    """`causalfair export ll144` on an audit.json from a pull request: the group cells
    of ll144.csv start with an apostrophe."""
    src = Path("reports/examples")
    folders = sorted(p for p in src.iterdir() if (p / "audit.json").is_file()) \
        if src.is_dir() else []
    if not folders:
        pytest.skip("no example audit in reports/examples")
    doc = json.loads((folders[0] / "audit.json").read_text(encoding="utf-8"))
    text = json.dumps(doc).replace('"s+"', json.dumps(FORMULA))
    assert FORMULA in text
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "audit.json").write_text(text, encoding="utf-8")
    code = main(["export", "ll144", str(tmp_path / "a"), "--out", str(tmp_path / "x")])
    assert code == 0, capsys.readouterr().err
    body = (tmp_path / "x" / "ll144.csv").read_text(encoding="utf-8")
    assert "'" + FORMULA in body
    assert ",=" not in body and not any(line.startswith("=") for line in body.splitlines())


# ------------------------------------------------- special files given as inputs
def _limited() -> None:  # the child's address space: 1.5 GiB (an unbounded read dies)
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


def _special(tmp_path: Path, kind: str) -> str:
    if kind == "fifo":
        path = tmp_path / f"in-{kind}"
        os.mkfifo(path)
        return str(path)
    return "/dev/zero"


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("door", ["json", "junit"])
def test_gate_merge_of_a_fifo_or_device_is_refused_without_reading(tmp_path, kind, door):
    """gate-merge read its inputs with stat() then read_bytes(): /dev/zero (size 0) was
    read without end (memory grew to the machine's), a FIFO was waited on for ever."""
    from tests.conftest import run_cli

    special = _special(tmp_path, kind)
    if door == "json":
        argv = ["gate-merge", special]
    else:  # a valid JSON summary, then the special file as its JUnit
        (tmp_path / "s.toml").write_text(SPEC, encoding="utf-8")
        run_cli("gate", tmp_path / "s.toml", "--json", tmp_path / "g.json", expect=0,
                cwd=tmp_path)
        argv = ["gate-merge", str(tmp_path / "g.json"), "--junit-in", special]
    proc = run_cli(*argv, timeout=60, cwd=tmp_path, preexec_fn=_limited)
    assert proc.returncode == 2, proc.stderr
    assert "is not a regular file" in proc.stderr and special in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


SPEC = """name = "t"
horizon = 3
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 0.5
"""


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_read_json_file_refuses_what_is_not_a_regular_file(tmp_path, kind):
    from causalfair._safe_read import read_json_file
    from causalfair.errors import InputError

    if kind == "folder":
        path = str(tmp_path)
    else:
        path = _special(tmp_path, kind)
    with pytest.raises(InputError, match="is not a regular file"):
        read_json_file(path, path, InputError)


def test_read_file_reads_no_more_than_the_size_it_checked(tmp_path):
    """The size handed to the check is the size read: a /proc file (size 0) reads as
    empty, never as its unchecked contents."""
    from causalfair._safe_read import read_file
    from causalfair.errors import InputError

    seen = []
    assert read_file("/proc/self/environ", "env", InputError, check=seen.append) == b""
    assert seen == [0]
    (tmp_path / "f").write_bytes(b"abc")
    assert read_file(tmp_path / "f", "f", InputError, check=seen.append) == b"abc"
    assert seen == [0, 3]


# ---------------------------------------------------------------- train --resume
def test_resume_state_bomb_is_refused_before_torch_inflates_it(tmp_path, monkeypatch):
    """`train --resume` handed state.pt to torch.load with no bound: a 1 MB deflated
    archive inflated to 1 GB (torch reads deflated members). Its declared sizes are now
    checked against CAUSALFAIR_MAX_MEMORY first."""
    import torch

    from causalfair.train.checkpoint import read_state

    with zipfile.ZipFile(tmp_path / "state.pt", "w", zipfile.ZIP_DEFLATED,
                         compresslevel=1) as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        zf.writestr("archive/data/0", bytes(64 << 20))
    assert (tmp_path / "state.pt").stat().st_size < 1 << 20
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "16M")
    called = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: called.append(a))
    with pytest.raises(ResourceLimitError, match="resume: .*state.pt: 64.0 MiB uncompressed"):
        read_state(tmp_path)
    assert not called


def test_resume_state_that_is_not_a_zip_archive_is_refused(tmp_path):
    """torch's legacy (non-zip) format is read by a pickle that allocates what it
    declares; `causalfair train` writes zip archives only."""
    from causalfair.train.checkpoint import read_state

    (tmp_path / "state.pt").write_bytes(b"\x80\x02}q\x00.")
    with pytest.raises(CheckpointError, match="not a zip archive"):
        read_state(tmp_path)


# ------------------------------------------------- huge (sparse) files in a report folder
def test_export_of_a_folder_with_a_huge_error_json_reads_its_head_only(tmp_path):
    """A gate's ERROR folder whose error.json is an 8 GB sparse file (no disk used): it
    was read in full (MemoryError traceback, or the machine's memory)."""
    from causalfair.errors import InputError
    from causalfair.report.export import read_audit

    with open(tmp_path / "error.json", "wb") as fh:
        fh.truncate(8 << 30)
    with pytest.raises(InputError, match="error.json: a gate's error report"):
        read_audit(tmp_path)


def test_reproduce_does_not_read_a_huge_report_file_in_full(tmp_path):
    """`audit --reproduce` compared every report file by reading it whole: a report.md
    (or ll144.md) turned into an 8 GB sparse file was a MemoryError (checked through the
    CLI on the old code). It is read only as far as the comparison needs, and named as a
    difference."""
    from causalfair.audit.reproduce import _compare_report

    for name in ("report.md", "ll144.md"):
        with open(tmp_path / name, "wb") as fh:
            fh.write(b"# line\n")
            fh.truncate(8 << 30)
    doc = {"spec": {"file": "s.toml"}, "provenance": {}}
    files = {"audit.json": b"{}", "report.md": b"# line\nsame\n", "ll144.md": b"# line\n"}
    differences: list[str] = []
    _compare_report(tmp_path, files, doc, doc, differences, [], [])
    assert [d.split(":")[0] for d in differences] == ["report.md", "ll144.md"], differences


# ------------------------------------------------------------ decision logs
def test_positivity_error_of_a_log_with_many_groups_stays_short(tmp_path, capsys,
                                                                monkeypatch):
    """A log of 2,000 one-person groups (a column of ids given as the group): the
    positivity error listed every group's size, a line of 12 MB for 10^6 groups (in the
    job log, the JUnit file and the annotation). It names the first 20 and counts the
    rest."""
    rows = ["id,t,group,level,decision,next_level,reward,outcome"]
    rows += [f"{i},0,g{i},1,{i % 2},2,1.0,1.0" for i in range(2000)]
    (tmp_path / "l.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    code = main(["decompose", "--logs", str(tmp_path / "l.csv")])
    err = capsys.readouterr().err  # 1,999,000 pairs' replicates: refused first, for memory
    assert code == 2 and "1999000 pairs" in err and len(err) < 1000, err
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "1T")  # (a limit only: nothing is allocated)
    code = main(["decompose", "--logs", str(tmp_path / "l.csv")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "positivity" in err and "and 1980 more groups" in err, err[-300:]
    assert len(err) < 3000, len(err)


# ------------------------------------------------------------------ spec files
@pytest.mark.parametrize("argv", [["audit", "big.toml", "--no-report"],
                                  ["gate", "big.toml", "--shard", "1/1"]])
def test_spec_file_over_the_memory_limit_is_refused_before_reading(tmp_path, argv):
    """A spec that is an 8 GB sparse file (or a link to /proc/kcore, 128 TB, as root)
    was read whole (`audit`: a MemoryError traceback) or hashed for ever (`gate --shard`
    hashes every listed spec first). Its size is checked first: one line, exit 2."""
    from tests.conftest import run_cli

    with open(tmp_path / "big.toml", "wb") as fh:
        fh.truncate(8 << 30)
    proc = run_cli(*argv, timeout=60, cwd=tmp_path, preexec_fn=_limited)
    assert proc.returncode == 2, proc.stderr
    assert "big.toml: 8.0 GiB of TOML" in proc.stderr and "Traceback" not in proc.stderr, \
        proc.stderr


# ---------------------------------------------------- names that are not XML or UTF-8
def _broken_spec(folder: Path, name: bytes) -> None:
    text = SPEC.replace('name = "t"', 'name = "bad"') + "bogus = 1\n"
    with open(os.path.join(os.fsencode(folder), name), "wb") as fh:
        fh.write(text.encode("utf-8"))


@pytest.mark.parametrize("name", [b"a\x1bb.toml", b"a\xffb.toml"], ids=["ESC", "not-UTF-8"])
def test_gate_junit_of_a_spec_file_name_xml_cannot_hold(tmp_path, name):
    """A pull request can add a spec whose file name holds an ESC (the JUnit file was
    not XML: every CI reader refused it) or bytes that are not UTF-8 (a UnicodeEncodeError
    traceback, exit 1, and no JUnit or JSON written). Such characters are written as
    escapes; the annotation holds none of them (a strict UTF-8 stdout, as under
    en_US.UTF-8, prints it)."""
    import xml.etree.ElementTree as ET

    from tests.conftest import run_cli

    (tmp_path / "s").mkdir()
    _broken_spec(tmp_path / "s", name)
    spec = os.fsdecode(os.path.join(b"s", name))
    proc = run_cli("gate", spec, "--junit", "g.xml", "--json", "g.json", "--annotations",
                   cwd=tmp_path, text=False, timeout=120,
                   env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    root = ET.fromstring((tmp_path / "g.xml").read_bytes())
    assert "bogus" in ET.tostring(root, encoding="unicode")
    assert json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))["exit_code"] == 2
    notes = [line for line in proc.stdout.splitlines() if line.startswith(b"::error")]
    assert notes and not any(c in notes[0] for c in (b"\x1b", b"\xff", b"\x00"))
    notes[0].decode("utf-8")  # strict: no byte a UTF-8 reader refuses


def test_gate_merge_junit_escapes_what_xml_cannot_hold():
    import xml.etree.ElementTree as ET

    from causalfair.audit.shards import merge_junit

    suite = ET.Element("testsuite", name="s\x1b", tests="0", failures="0", errors="0",
                       skipped="0")
    text = merge_junit([suite])
    assert ET.fromstring(text.encode("utf-8")).find("testsuite").get("name") == "s\\x1b"


def test_export_beside_a_huge_file_of_the_same_name_does_not_read_it(tmp_path, capsys):
    """`causalfair export` compared an existing ll144.md with its text by reading it whole
    (an 8 GB sparse file: MemoryError). Its size is compared first; it is refused as a
    file with other content."""
    src = Path("reports/examples")
    folders = sorted(p for p in src.iterdir() if (p / "audit.json").is_file()) \
        if src.is_dir() else []
    if not folders:
        pytest.skip("no example audit in reports/examples")
    (tmp_path / "out").mkdir()
    with open(tmp_path / "out" / "ll144.md", "wb") as fh:
        fh.truncate(8 << 30)
    code = main(["export", "ll144", str(folders[0]), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "ll144.md: exists with other content" in err


# ------------------------------------ a byte that is not UTF-8 in a file name, in outputs
def test_user_code_error_naming_a_file_not_utf8_is_one_line_exit_2(tmp_path, cli_here):
    """A factory whose error names a file whose name is not UTF-8 (Python decodes its byte
    to a lone surrogate) crashed `gate` and `audit` with a UnicodeEncodeError traceback,
    exit 1, while writing the traceback log; and gate-merge refused the gate's own JSON.
    The error is one line, exit 2, the byte written as its escape everywhere."""
    (tmp_path / "surrogatefac.py").write_text(
        'def make(system=None):\n    raise ValueError("cannot read data\\udcff.csv")\n')
    (tmp_path / "s.toml").write_text(SPEC.replace('builtin = "threshold:0.5"',
                                                  'factory = "surrogatefac:make"'))
    for cmd in (("gate", "s.toml", "--json", "g.json", "--junit", "g.xml"),
                ("audit", "s.toml", "--no-report")):
        proc = cli_here(*cmd, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and "data\\udcff.csv" in proc.stderr
    logs = list((tmp_path / ".causalfair" / "logs").glob("*.log"))
    assert len(logs) == 2
    assert all("data\\udcff.csv" in p.read_text(encoding="utf-8") for p in logs)
    proc = cli_here("gate-merge", "g.json", "--markdown", cwd=tmp_path)
    assert proc.returncode == 2 and "valid Unicode" not in proc.stderr, proc.stderr
    assert "data\\\\udcff.csv" in proc.stdout  # its Markdown escape of the backslash


def test_spec_file_name_not_utf8_audits_reports_and_merges(tmp_path, cli_here):
    """A spec file whose name is not UTF-8 was gated (its JUnit escaped), but `audit`
    (report) and `gate --reports` crashed writing it (UnicodeEncodeError, exit 1), and
    gate-merge refused the gate's JSON ("not valid Unicode text"). Each names it
    with the byte's escape, as JUnit does."""
    from causalfair.report.render import write_error_report

    name = os.fsdecode(b"ok\xffb.toml")
    (tmp_path / name).write_text(SPEC)
    proc = cli_here("audit", name, "--out", "rep", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ok\\udcffb.toml" in (tmp_path / "rep" / "annex-iv.md").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "rep" / "audit.json").read_text(encoding="utf-8"))[
        "spec"]["file"] == "ok\\udcffb.toml"
    proc = cli_here("gate", name, "--json", "g.json", "--reports", "reps", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))["specs"][0][
        "spec"] == "ok\\udcffb.toml"
    proc = cli_here("gate-merge", "g.json", "--markdown", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the page of a spec the gate could not audit (the gate's one writer of it)
    out = write_error_report(tmp_path / "err", name="t", spec=name, error=f"audit spec {name}")
    assert json.loads((out / "error.json").read_text(encoding="utf-8"))["spec"] == "ok\\udcffb.toml"
    assert "ok\\udcffb.toml" in (out / "report.html").read_text(encoding="utf-8")

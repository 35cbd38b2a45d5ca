"""hunt_a F6, F7: `gate --reports DIR` leaves nothing behind when interrupted with
`--jobs 2` (as with `--jobs 1`: docs/limits.md, "Interrupts"), and a refused `--reports`
writes nothing into the user's folder (no record listing a folder it does not own), with
a message naming --reports, before any audit runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OK = 'name = "{name}"\nhorizon = 3\n[system]\nid = "lending-1"\n[thresholds]\nabs_C = 1\n'
SLOW = """import time
import numpy as np

class P:
    def prob_d1(self, obs):
        time.sleep(60)
        return np.full(len(obs.level), .5)

def slow(**kw):
    return P()
"""


def test_a_refused_reports_folder_gets_nothing(tmp_path, cli_here):
    (tmp_path / "ok.toml").write_text(OK.format(name="ok"))
    (tmp_path / "userdir" / "ok").mkdir(parents=True)
    (tmp_path / "userdir" / "ok" / "keep.txt").write_text("precious")
    proc = cli_here("gate", "ok.toml", "--reports", "userdir", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert "Choose another --reports or remove it yourself." in proc.stderr
    assert sorted(p.name for p in (tmp_path / "userdir").iterdir()) == ["ok"]
    assert [p.name for p in (tmp_path / "userdir" / "ok").iterdir()] == ["keep.txt"]
    assert proc.stdout == ""  # refused before any audit
    (tmp_path / "file.txt").write_text("x")
    proc = cli_here("gate", "ok.toml", "--reports", "file.txt", cwd=tmp_path)
    assert proc.returncode == 2 and "--reports: file.txt is a file" in proc.stderr, proc


@pytest.mark.parametrize("opt", [["--json", "R/ok/audit.json"], ["--junit", "R/ok/card.md"],
                                 ["--json", "R"], ["--junit", "R/ok"],
                                 ["--json", "R/.causalfair-gate-reports.json"]])
def test_json_or_junit_in_a_report_folder_is_refused_first(tmp_path, cli_here, monkeypatch, opt):
    """`gate --reports R --json R/ok/audit.json` overwrote the report's own audit.json
    with the gate summary (and --junit R/ok/card.md its card with JUnit XML); `--json R`
    or `--junit R/ok` failed only after every audit ("is a folder"), leaving CI no JSON
    or JUnit. Refused before any audit, exit 2, naming the option; a file beside the
    report folders is fine."""
    import causalfair.commands.gate

    def never(*a, **k):
        raise AssertionError("the gate ran")

    monkeypatch.setattr(causalfair.commands.gate, "_gate", never)
    (tmp_path / "ok.toml").write_text(OK.format(name="ok"))
    proc = cli_here("gate", "ok.toml", "--reports", "R", *opt, cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith(f"causalfair gate: error: {opt[0]}: {opt[1]} is "), proc.stderr
    assert not (tmp_path / "R").exists()
    if opt != ["--json", "R"]:
        return
    monkeypatch.undo()
    proc = cli_here("gate", "ok.toml", "--reports", "R", opt[0], "R/gate.out", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert (tmp_path / "R" / "gate.out").is_file() and (tmp_path / "R" / "ok").is_dir()


def test_an_empty_record_is_not_written_but_a_report_is_recorded(tmp_path, cli_here):
    (tmp_path / "ok.toml").write_text(OK.format(name="ok"))
    proc = cli_here("gate", "ok.toml", "--reports", "R", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert "ok" in (tmp_path / "R" / ".causalfair-gate-reports.json").read_text()


@pytest.mark.slow  # two gates with reports: about 10 s
def test_a_file_added_to_a_report_folder_is_never_removed(tmp_path, cli_here):
    # before: notes a user added to a gate's report folder went with it, when the gate
    # rewrote the folder (the spec still gated) or swept it (the spec left the gate); and
    # `audit --out` over a report folder holding a user's file replaced it as well
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(OK.format(name=name))
    assert cli_here("gate", "a.toml", "b.toml", "--reports", "R", cwd=tmp_path).returncode == 0
    (tmp_path / "R" / "a" / "notes.txt").write_text("mine")
    (tmp_path / "R" / "b" / "notes.txt").write_text("mine too")
    proc = cli_here("gate", "a.toml", "--reports", "R", cwd=tmp_path)  # rewrites R/a
    assert proc.returncode == 2, proc
    assert "R/a: holds 'notes.txt', which causalfair did not write there" in proc.stderr
    assert proc.stdout == ""  # refused before any audit
    (tmp_path / "R" / "a" / "notes.txt").unlink()
    proc = cli_here("gate", "a.toml", "--reports", "R", cwd=tmp_path)  # sweeps R/b
    assert proc.returncode == 0, proc
    assert (tmp_path / "R" / "b" / "notes.txt").read_text() == "mine too"
    (tmp_path / "R" / "a" / "mine.csv").write_text("x")
    proc = cli_here("audit", "a.toml", "--out", "R/a", cwd=tmp_path)
    assert proc.returncode == 2 and "holds 'mine.csv'" in proc.stderr, proc
    assert (tmp_path / "R" / "a" / "mine.csv").read_text() == "x"


def test_an_interrupted_parallel_gate_leaves_no_report(tmp_path):
    (tmp_path / "ok.toml").write_text(OK.format(name="ok"))
    (tmp_path / "slow2.toml").write_text(OK.format(name="slow2")
                                         + '[policy]\nfactory = "slow:slow"\n')
    (tmp_path / "slow.py").write_text(SLOW)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "causalfair", "gate", "ok.toml", "slow2.toml", "--jobs", "2",
         "--json", "k.json", "--junit", "k.xml", "--reports", "KR"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 120
        while not (tmp_path / "KR" / "ok").exists() and time.monotonic() < end:
            time.sleep(0.2)
        assert (tmp_path / "KR" / "ok").exists()  # ok's report written while slow2 runs
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert b"interrupted" in err
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["ok.toml", "slow.py", "slow2.toml"] or left == [
        "__pycache__", "ok.toml", "slow.py", "slow2.toml"], left


@pytest.mark.slow  # two gates writing reports: 10 s
def test_an_interrupted_gate_leaves_no_earlier_report_of_its_specs(tmp_path, monkeypatch):
    """docs/ci-gate.md: "An interrupted gate leaves no report folder". A second gate
    interrupted before writing its reports left the reports of the run before, which a CI
    artifact then showed as this run's (the JSON and JUnit of an earlier run are removed
    for that reason). None is left; a report folder holding a file the user added is
    kept."""
    from causalfair.audit import run_gate
    from causalfair.audit.result import AuditResult

    for n in ("a", "b"):
        (tmp_path / f"{n}.toml").write_text(OK.format(name=n))
    monkeypatch.chdir(tmp_path)
    run_gate(["a.toml", "b.toml"], reports="R")
    assert sorted(p.name for p in (tmp_path / "R").iterdir() if p.is_dir()) == ["a", "b"]

    def interrupted(self, out, *a, **k):
        (tmp_path / "R" / "b" / "notes.txt").write_text("mine")  # added meanwhile
        raise KeyboardInterrupt

    monkeypatch.setattr(AuditResult, "write_report", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_gate(["a.toml", "b.toml"], reports="R")
    assert sorted(p.name for p in (tmp_path / "R").iterdir() if p.is_dir()) == ["b"]
    assert (tmp_path / "R" / "b" / "notes.txt").read_text() == "mine"

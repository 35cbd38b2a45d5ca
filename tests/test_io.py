"""Writing files (causalfair._io): a user's file or folder is never replaced, an unusable
output path is a one-line error, a report folder is swapped into place whole (a failed
swap, a killed writer or SIGTERM leaves no temporary folder), and two writers of the same
folder both end cleanly. The path cases drive the command line in a temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from causalfair._io import MANIFEST, write_folder
from causalfair.errors import OutputError
from tests.conftest import SMALL_SPEC, one_line_error, run_cli, run_cmd


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "rel.toml"
    p.write_text(SMALL_SPEC)
    return p


# ------------------------------------------------------------------- 1. data loss
def test_audit_never_replaces_a_users_folder_or_file(tmp_path, spec, cli_here):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    err = one_line_error(cli_here("audit", spec, "--out", mine, cwd=tmp_path))
    assert "causalfair did not write" in err and "never replaces it" in err
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    afile = tmp_path / "notes.txt"
    afile.write_text("keep")
    err = one_line_error(cli_here("audit", spec, "--out", afile, cwd=tmp_path))
    assert "is not a folder causalfair wrote" in err and afile.read_text() == "keep"
    # a folder causalfair wrote is replaced (a rerun), and only the parent's own temp
    # folders are ever created
    assert cli_here("audit", spec, "--out", "rep", cwd=tmp_path).returncode == 0
    assert (tmp_path / "rep" / MANIFEST).is_file()
    assert cli_here("audit", spec, "--out", "rep", cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "notes.txt", "rel.toml", "rep"]


def test_gate_reports_never_replace_a_users_folder(tmp_path, spec):
    (tmp_path / "reps" / "rel").mkdir(parents=True)
    (tmp_path / "reps" / "rel" / "data.csv").write_text("1,2")
    err = one_line_error(run_cli("gate", spec, "--reports", "reps", cwd=tmp_path))
    assert "causalfair did not write" in err
    assert (tmp_path / "reps" / "rel" / "data.csv").read_text() == "1,2"


# ------------------------------------------------------------------- 2. output paths
@pytest.mark.parametrize("cmd", [
    ["audit", "{spec}", "--out", "{file}/sub"],
    ["frontier", "--out", "{file}/sub", "--points", "2", "--no-plot"],
    ["graph", "--out", "{file}/g.svg"],
    ["gate", "{spec}", "--junit", "{dir}"],
    ["gate", "{spec}", "--json", "{file}/x.json"],
    ["train", "--iterations", "1", "--out", "{file}/run"],
])
def test_unusable_output_paths_are_one_line_errors(tmp_path, spec, cmd, cli_here):
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "adir").mkdir()
    args = [a.format(spec=spec, file=afile, dir=tmp_path / "adir") for a in cmd]
    # train in this process: a second interpreter would spend seconds importing torch
    run = cli_here if cmd[0] == "train" else run_cli
    err = one_line_error(run(*args, cwd=tmp_path))
    assert "afile" in err or "adir" in err
    assert afile.read_text() == "x"


@pytest.mark.parametrize("cmd", [
    ["audit", "{spec}", "--out", "{out}"],
    ["frontier", "--out", "{out}", "--points", "2", "--no-plot"],
])
@pytest.mark.parametrize("where", ["mine", "afile/sub"])
def test_an_unusable_out_is_refused_before_the_work(tmp_path, spec, cmd, where, cli_here,
                                                     monkeypatch):
    """`audit --out` and `frontier --out` were checked only when the report was written:
    a folder of the user's (or a path below a file) was refused after the whole audit or
    LP, which for a Monte Carlo or log audit can be hours. They are refused first, as
    `gate --reports` is."""
    import causalfair.audit.gate
    import causalfair.engines.frontier

    def never(*a, **k):
        raise AssertionError("the work ran before --out was checked")

    monkeypatch.setattr(causalfair.audit.gate, "audit_within", never)
    monkeypatch.setattr(causalfair.engines.frontier, "frontier", never)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    args = [a.format(spec=spec, out=tmp_path / where) for a in cmd]
    err = one_line_error(cli_here(*args, cwd=tmp_path))
    assert "--out" in err and ("mine" in err or "afile" in err), err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"


def test_a_failed_swap_leaves_no_old_or_temp_folder(tmp_path, monkeypatch):
    """A read-only existing report (simulated: the rename into place fails) is kept and
    nothing is left beside it."""
    write_folder(tmp_path / "rep", lambda d: (d / "a.txt").write_text("old"))
    real = os.rename

    def failing(src, dst):
        if Path(dst) == tmp_path / "rep" and ".tmp-" in str(src):
            raise PermissionError(13, "Permission denied")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OutputError, match="cannot write here \\(Permission denied\\)"):
        write_folder(tmp_path / "rep", lambda d: (d / "a.txt").write_text("new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
    assert (tmp_path / "rep" / "a.txt").read_text() == "old"


def test_temp_folders_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    dead = run_cmd([sys.executable, "-c", "import os; print(os.getpid())"],
                   expect=0).stdout.strip()
    stale = tmp_path / f".rep.tmp-{dead}-abcd1234"
    stale.mkdir()
    (stale / "half.png").write_bytes(b"\x89PNG")
    alive = tmp_path / f".rep.tmp-{os.getpid()}-live0000"  # a writer still running
    alive.mkdir()
    write_folder(tmp_path / "rep", lambda d: (d / "a.txt").write_text("ok"))
    assert not stale.exists() and alive.exists()


def test_sigterm_during_an_audit_leaves_no_temp_folder(tmp_path, spec):
    errfile = tmp_path / "stderr.txt"
    with open(errfile, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "causalfair", "audit", str(spec),
                                 "--out", "rep"], cwd=tmp_path, stderr=fh,
                                stdout=subprocess.DEVNULL,
                                env={**os.environ, "OMP_NUM_THREADS": "1",
                                     "MPLBACKEND": "Agg"})
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.startswith(".rep.tmp-")
                                             for p in tmp_path.iterdir()):
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.terminate()
    proc.wait(60)
    err = f"exit code {proc.returncode}\n--- stderr ---\n{errfile.read_text()}"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".rep.")]
    assert leftovers == [], (leftovers, err)
    assert not (tmp_path / "rep").exists() or (tmp_path / "rep" / MANIFEST).is_file(), err


# ------------------------------------------------------------ 3. concurrent writers
def test_two_writers_of_the_same_folder_both_end_cleanly(tmp_path):
    started = threading.Barrier(2)
    errors = []

    def writer(tag):
        def fill(d):
            started.wait()  # both are inside write_folder, about to swap
            time.sleep(0.2)
            (d / "who.txt").write_text(tag)
        try:
            write_folder(tmp_path / "rep", fill)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (tmp_path / "rep" / "who.txt").read_text() in ("a", "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


# ------------------------------------------------------------ interrupts at the edges
def test_an_interrupt_as_the_temporary_folder_is_made_leaves_nothing(tmp_path, monkeypatch):
    """An interrupt landing after mkdtemp made its folder, before its name is bound."""
    import causalfair._io as cio

    real = cio.tempfile.mkdtemp

    def made_then_interrupted(**kw):
        real(**kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(cio.tempfile, "mkdtemp", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_folder(tmp_path / "rep", lambda d: (d / "a.txt").write_text("new"))
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_between_the_renames_puts_the_old_folder_back(tmp_path, monkeypatch):
    """The old report moved aside, the new one not yet in place: the old one goes back."""
    write_folder(tmp_path / "rep", lambda d: (d / "a.txt").write_text("old"))
    real, calls = os.rename, []

    def second_interrupted(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the new folder into place
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(os, "rename", second_interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_folder(tmp_path / "rep", lambda d: (d / "a.txt").write_text("new"))
    monkeypatch.undo()
    assert (tmp_path / "rep" / "a.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_simulate_logs_checks_its_out_first_and_never_replaces_a_new_file(tmp_path, cli_here,
                                                                       monkeypatch):
    """`simulate-logs --out afile/x.csv` simulated the whole log before "cannot write below
    afile"; a file that appeared at --out while the log was simulated was replaced (the
    existence check ran before, the write used a plain rename), and a dangling symlink
    there was replaced too. Refused before the work, and a file there at the end is never
    replaced (exit 2, the file as it was)."""
    import pandas as pd

    import causalfair.logs.simulate as sim

    (tmp_path / "afile").write_text("x")

    def never(*a, **k):
        raise AssertionError("simulated before --out was checked")

    monkeypatch.setattr(sim, "simulate_logs", never)
    err = one_line_error(cli_here("simulate-logs", "--out", "afile/x.csv", cwd=tmp_path))
    assert "afile" in err
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "nowhere")
    err = one_line_error(cli_here("simulate-logs", "--out", "dangling.csv", cwd=tmp_path))
    assert "exists" in err and (tmp_path / "dangling.csv").is_symlink()

    def meanwhile(*a, **k):
        (tmp_path / "log.csv").write_text("the user's log")
        return pd.DataFrame({"t": [0], "id": [0]})

    monkeypatch.setattr(sim, "simulate_logs", meanwhile)
    err = one_line_error(cli_here("simulate-logs", "--out", "log.csv", cwd=tmp_path))
    assert "log.csv exists" in err
    assert (tmp_path / "log.csv").read_text() == "the user's log"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "dangling.csv", "log.csv"]


def test_an_unwritable_report_folder_says_why(tmp_path, monkeypatch):
    """An --out whose temporary folder cannot be made (a read-only or missing parent, as
    /proc/rep) read "cannot write here (OutputError)": the OutputError saying why was
    wrapped again. The reason (the OS's) is kept."""
    import causalfair._io as cio

    def denied(**kw):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cio.tempfile, "mkdtemp", denied)
    with pytest.raises(OutputError) as err:
        write_folder(tmp_path / "rep", lambda tmp: None)
    assert str(err.value) == (f"{tmp_path / 'rep'}: cannot write here (Permission denied); "
                              "choose another output path.")


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    """A writer killed outright (SIGKILL, the OOM killer) while writing gate.json or a
    checkpoint left its half-written `.gate.json.XXXX.tmp` beside it for ever (no handler
    runs; only temporary folders were cleaned up). Its name now carries the pid, and the
    next write beside it removes it once that process is gone; a live writer's and any
    other file stay."""
    from causalfair._io import atomic_write_text

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(done.stdout)
    stale = tmp_path / f".gate.json.{dead}_k3j9x0ab.tmp"
    stale.write_text('{"half')
    live = tmp_path / f".gate.json.{os.getpid()}_a1b2c3d4.tmp"
    live.write_text("being written")
    mine = tmp_path / ".gate.json.notes.tmp"
    mine.write_text("mine")
    atomic_write_text(tmp_path / "gate.json", "{}")
    assert not stale.exists() and live.exists() and mine.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, mine.name, "gate.json"])


@pytest.mark.parametrize("bad", [5, None, b"out.png", ["out.png"]])
def test_a_path_that_is_not_a_path_is_an_input_error_naming_it_at_every_writer(bad, tmp_path):
    """TemporalGraph.draw(5) and to_dot(5) raised Python's TypeError from pathlib; every
    writer reads its path through one function (causalfair._io.output_path)."""
    import causalfair as cf
    from causalfair._io import atomic_write_text, output_path, write_folder
    from causalfair.errors import InputError

    graph = cf.temporal_graph(cf.lending_setting("lending-1").tabular, 1)
    calls = [lambda: output_path(bad), lambda: atomic_write_text(bad, "x"),
             lambda: write_folder(bad, lambda tmp: None), lambda: graph.to_graphml(bad)]
    if bad is not None:  # (None: draw, to_dot and to_json write nothing, as documented)
        calls += [lambda: graph.draw(bad), lambda: graph.to_dot(bad), lambda: graph.to_json(bad)]
    for call in calls:
        with pytest.raises(InputError, match=r"^path: expected a file or folder path"):
            call()
    assert list(tmp_path.iterdir()) == []

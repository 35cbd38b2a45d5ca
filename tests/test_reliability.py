"""Reliability (issue 12): never lose a user's files, no tracebacks on bad paths or sizes,
bounded resources, the gate checks every spec first, concurrent writers, small defects.
The path cases drive the command line in a temporary folder."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import describe, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from causalfair._io import MANIFEST, write_folder
from causalfair.audit import load_spec
from causalfair.cli import main
from causalfair.errors import CausalfairError, OutputError

ROOT = Path(__file__).resolve().parents[1]
SPEC = """name = "rel"
horizon = 5
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 1.0
"""


def cli(*args, cwd, limit_mb=None, env=None):
    def cap():  # pragma: no cover - runs in the child
        if limit_mb:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    e = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", **(env or {})}
    return run_cli(*args, cwd=cwd, preexec_fn=cap, env=e, timeout=300)


def one_line_error(proc):
    assert proc.returncode == 2, describe(proc, 2)
    err = proc.stderr.strip()
    assert "Traceback" not in err and "\n" not in err, err
    return err


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "rel.toml"
    p.write_text(SPEC)
    return p


# ------------------------------------------------------------------- 1. data loss
def test_audit_never_replaces_a_users_folder_or_file(tmp_path, spec):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    err = one_line_error(cli("audit", spec, "--out", mine, cwd=tmp_path))
    assert "causalfair did not write" in err and "never replaces it" in err
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    afile = tmp_path / "notes.txt"
    afile.write_text("keep")
    err = one_line_error(cli("audit", spec, "--out", afile, cwd=tmp_path))
    assert "is not a folder causalfair wrote" in err and afile.read_text() == "keep"
    # a folder causalfair wrote is replaced (a rerun), and only the parent's own temp
    # folders are ever created
    assert cli("audit", spec, "--out", "rep", cwd=tmp_path).returncode == 0
    assert (tmp_path / "rep" / MANIFEST).is_file()
    assert cli("audit", spec, "--out", "rep", cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "notes.txt", "rel.toml", "rep"]


def test_gate_reports_never_replace_a_users_folder(tmp_path, spec):
    (tmp_path / "reps" / "rel").mkdir(parents=True)
    (tmp_path / "reps" / "rel" / "data.csv").write_text("1,2")
    err = one_line_error(cli("gate", spec, "--reports", "reps", cwd=tmp_path))
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
def test_unusable_output_paths_are_one_line_errors(tmp_path, spec, cmd):
    afile = tmp_path / "afile"
    afile.write_text("x")
    (tmp_path / "adir").mkdir()
    args = [a.format(spec=spec, file=afile, dir=tmp_path / "adir") for a in cmd]
    err = one_line_error(cli(*args, cwd=tmp_path))
    assert "afile" in err or "adir" in err
    assert afile.read_text() == "x"


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
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".rep.tmp-{dead}-abcd1234"
    stale.mkdir()
    (stale / "half.png").write_bytes(b"\x89PNG")
    alive = tmp_path / f".rep.tmp-{os.getpid()}-live0000"  # a writer still running
    alive.mkdir()
    write_folder(tmp_path / "rep", lambda d: (d / "a.txt").write_text("ok"))
    assert not stale.exists() and alive.exists()


def test_sigterm_during_an_audit_leaves_no_temp_folder(tmp_path, spec):
    proc = subprocess.Popen([sys.executable, "-m", "causalfair", "audit", str(spec), "--out",
                             "rep"], cwd=tmp_path, stderr=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.startswith(".rep.tmp-")
                                             for p in tmp_path.iterdir()):
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.terminate()
    proc.wait(60)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".rep.")]
    assert leftovers == [], leftovers
    assert not (tmp_path / "rep").exists() or (tmp_path / "rep" / MANIFEST).is_file()


# -------------------------------------------------------------- 4. resource bounds
@pytest.mark.parametrize("args", [
    ["decompose", "--horizon", "1000000000"],
    ["decompose", "--levels", "1000000"],
    ["decompose", "--engine", "mc", "--horizon", "1000000000", "--n", "100"],
    ["graph", "--horizon", "100000000"],
    ["frontier", "--horizon", "100000000", "--out", "f"],
])
def test_huge_requests_are_refused_before_allocating(tmp_path, args):
    t0 = time.time()
    err = one_line_error(cli(*args, cwd=tmp_path, limit_mb=1500))
    assert "over the limit of" in err and "CAUSALFAIR_MAX_MEMORY" in err
    assert time.time() - t0 < 30


def test_huge_horizon_in_a_spec_is_refused(tmp_path):
    p = tmp_path / "big.toml"
    p.write_text(SPEC.replace("horizon = 5", "horizon = 1000000000"))
    err = one_line_error(cli("audit", p, "--no-report", cwd=tmp_path, limit_mb=1500))
    assert "exact engine over 1000000000 epochs" in err


def test_the_memory_limit_can_be_raised(tmp_path):
    err = one_line_error(cli("decompose", "--horizon", "5000000", cwd=tmp_path,
                             env={"CAUSALFAIR_MAX_MEMORY": "1M"}))
    assert "limit of 1.0 MiB" in err
    assert cli("decompose", "--horizon", "50", cwd=tmp_path,
               env={"CAUSALFAIR_MAX_MEMORY": "1G"}).returncode == 0


# -------------------------------------------------- 5. the gate checks every spec first
def test_gate_checks_every_spec_before_auditing_any(tmp_path):
    for i, builtin in enumerate(["never", "always", "threshold:abc"]):
        (tmp_path / f"s{i}.toml").write_text(SPEC.replace('name = "rel"', f'name = "s{i}"')
                                             .replace("threshold:0.5", builtin))
    err = one_line_error(cli("gate", "s0.toml", "s1.toml", "s2.toml", "--reports", "reps",
                             cwd=tmp_path))
    assert "s2.toml" in err and "[policy] builtin" in err and "'abc'" in err
    assert not (tmp_path / "reps").exists()  # nothing was audited or written


# ------------------------------------------------------------ 6. concurrent writers
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


# ------------------------------------------------------------------- 7. smaller
def test_a_mathtext_group_label_does_not_crash_the_report(tmp_path):
    import causalfair as cf
    from causalfair.systems import as_system

    tab = cf.lending_setting("lending-1").tabular.with_(group_names=("$\\foo{$", "b_$x$"))
    res = cf.audit({"name": "m", "horizon": 3}, system=as_system(tab, id="m"),
                   policy="always")
    out = res.write_report(tmp_path / "rep")
    assert (out / "benefit.png").stat().st_size > 0
    md = (out / "report.md").read_text()
    assert "| \\$\\\\foo{\\$ |" in md  # escaped in Markdown (the backslash too)


def test_echoed_values_are_capped_and_names_cannot_end_in_a_newline(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('name = "' + "x" * 50_000_000 + '!"\n')
    err = one_line_error(cli("audit", p, cwd=tmp_path))
    assert len(err) < 600
    p.write_text('name = "rep\\n"\n')
    err = one_line_error(cli("audit", p, cwd=tmp_path))
    assert "name: bad value 'rep\\n'" in err


def test_markdown_escapes_injected_markup(tmp_path):
    import causalfair as cf
    from causalfair.systems import as_system

    tab = cf.lending_setting("lending-1").tabular.with_(
        group_names=("<script>alert(1)</script>", "[x](http://e.vil)"))
    res = cf.audit({"name": "inj", "horizon": 3}, system=as_system(tab, id="inj"), policy="always")
    md = (res.write_report(tmp_path / "rep") / "report.md").read_text()
    table = md[: md.index("## Spec")]  # the spec itself is shown verbatim in a code fence
    assert "<script>" not in table and "[x](http" not in table
    assert "\\<script\\>" in table and "\\[x\\](http://e.vil)" in table


def test_negative_worst_is_refused(capsys):
    assert main(["decompose", "--worst", "-3"]) == 2
    assert "--worst: must be an integer >= 1, got -3." in capsys.readouterr().err


# ----------------------------------------------------------------- the fuzz test
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
                     st.binary(max_size=10).map(lambda b: b.decode("latin-1")))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)
_KEYS = st.sampled_from(["name", "horizon", "metrics", "system", "model", "logs", "policy",
                         "engine", "benefit", "thresholds", "retrain", "zzz"])
_SECTION_KEYS = st.sampled_from(["id", "factory", "tabular", "params", "setting", "levels",
                                 "interest", "builtin", "checkpoint", "kind", "n", "seed",
                                 "alpha", "eps", "weights", "worst", "abs_C", "Lambda", "algo",
                                 "iterations", "betas", "path", "n_boot", "bins"])
_SPECS = st.dictionaries(_KEYS, st.one_of(_VALUES, st.dictionaries(_SECTION_KEYS, _VALUES,
                                                                     max_size=5)), max_size=8)


def _mutations():
    import tomllib

    base = tomllib.loads(SPEC)
    return st.builds(lambda k, v: {**base, k: v}, _KEYS, _VALUES)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_SPECS, _mutations()))
def test_fuzzed_specs_raise_only_causalfair_errors(tmp_path_factory, raw):
    try:
        spec = load_spec(raw, base_dir=tmp_path_factory.getbasetemp())
    except CausalfairError:
        return
    from causalfair.audit.run import prepare

    try:
        prepare(spec)
    except CausalfairError:
        pass

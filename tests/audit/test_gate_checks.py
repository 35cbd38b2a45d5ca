"""The gate checks every spec (its system built, its policy resolved) before it audits any,
where the spec's audit will run: with workers (``--jobs N``, Ray) on the workers, under
each spec's time limit, so a factory that kills its process or hangs while its spec is
built is that spec's error (exit 2, nothing audited) and never ends or hangs the gate;
serially, a spec with a time limit is checked in a worker under it. The driver then
builds no spec itself, and the verdicts are the serial gate's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import causalfair.audit.gate as gate_mod
from causalfair.audit.gate import GateSpecErrors, run_gate
from tests.conftest import run_cli
from tests.test_user_code_errors import write

LENDING = 'name = "{name}"\nhorizon = 5\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "{policy}"\n' \
          '[engine]\nkind = "mc"\nn = 400\n[thresholds]\nabs_C = 0.5\n'


def _specs(folder: Path) -> list[str]:
    out = []
    for name, policy in (("a", "threshold:0.5"), ("b", "threshold:0.7"), ("c", "always")):
        (folder / f"{name}.toml").write_text(LENDING.format(name=name, policy=policy))
        out.append(str(folder / f"{name}.toml"))
    return out


def test_with_workers_the_driver_builds_no_spec_and_the_verdicts_are_the_serial_gates(
        tmp_path, monkeypatch):
    specs = _specs(tmp_path)
    serial = run_gate(specs)
    calls = []
    real = gate_mod.check_spec
    monkeypatch.setattr(gate_mod, "check_spec", lambda sp: calls.append(sp.name) or real(sp))
    parallel = run_gate(specs, jobs=2)
    assert calls == []  # every check (and audit) ran on a worker
    assert [e.to_dict() for e in parallel.entries] == [e.to_dict() for e in serial.entries]
    run_gate(specs[:1])  # serially the driver builds its spec, once, for its audit
    assert calls == ["a"]


def test_with_jobs_a_factory_that_kills_its_process_is_its_specs_error(tmp_path):
    (tmp_path / "specs").mkdir()
    ok = write(tmp_path / "specs", "ok")
    kill = write(tmp_path / "specs", "kk", "factory_kills")
    proc = run_cli("gate", ok, kill, "--jobs", "2", "--json", "g.json", cwd=tmp_path,
                   timeout=120)
    assert proc.returncode == 2, proc.stderr  # the gate itself was not killed (137)
    assert proc.stdout == ""  # nothing was audited
    line = proc.stderr.strip().splitlines()[0]
    assert "audit spec specs/kk.toml: the check failed: WorkerError" in line, proc.stderr
    assert "killed by SIGKILL" in line, proc.stderr
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["exit_code"] == 2
    # named by its name, as when it runs (CI keys a test's history on it; before: its file)
    assert [(s["name"], s["overall"]) for s in doc["specs"]] == [("kk", "ERROR")]
    assert "killed by SIGKILL" in doc["specs"][0]["error"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_with_a_time_limit_a_factory_that_hangs_is_its_specs_error(tmp_path, jobs):
    (tmp_path / "specs").mkdir()
    ok = write(tmp_path / "specs", "ok")
    hang = write(tmp_path / "specs", "hh", "factory_hangs")  # sleeps 120 s
    t0 = time.monotonic()
    proc = run_cli("gate", ok, hang, "--jobs", jobs, "--timeout", "4", cwd=tmp_path,
                   timeout=90)
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert "audit spec specs/hh.toml: the check failed: TimeoutError" in line, proc.stderr
    assert "time limit of 4 s" in line, proc.stderr


def test_a_spec_that_cannot_be_read_keeps_the_others_checked_here(tmp_path, monkeypatch):
    specs = _specs(tmp_path)
    (tmp_path / "bad.toml").write_text('name = "bad"\n[engine]\nkind = "exactly"\n')
    maps = []

    class Recording:
        def map(self, fn, items, timeouts=None, done=None):
            maps.append(fn.__name__)
            raise AssertionError("no map: the gate refuses before anything runs")

    monkeypatch.setattr(gate_mod, "make_backend", lambda *a, **k: Recording())
    with pytest.raises(GateSpecErrors) as err:
        run_gate([*specs, str(tmp_path / "bad.toml")], jobs=2)
    assert maps == [] and len(err.value.errors) == 1 and "'exactly'" in err.value.errors[0][1]


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_a_logs_spec_is_checked_with_the_others_before_any_audit(tmp_path, jobs):
    """A [logs] spec's log is read and the groups it names checked in the gate's check
    stage, as a system spec's: a typo in it fails the gate before anything is audited,
    naming the spec (and a broken log names its spec's file)."""
    from causalfair.logs import simulate_logs
    from causalfair.systems import make

    simulate_logs(make("lending-1"), "random:0.5", 200, 3, seed=0).to_csv(
        tmp_path / "log.csv", index=False)
    (tmp_path / "cols.csv").write_text("id,t,group,level,decision\n0,0,a,1,1\n")
    (tmp_path / "specs").mkdir()
    ok = write(tmp_path / "specs", "ok")
    (tmp_path / "specs" / "lg.toml").write_text(
        'name = "lg"\n[logs]\npath = "../log.csv"\n[thresholds]\n"abs_C[s+-sX]" = 0.5\n')
    (tmp_path / "specs" / "cols.toml").write_text(
        'name = "cols"\n[logs]\npath = "../cols.csv"\n[thresholds]\nabs_C = 0.5\n')
    proc = run_cli("gate", ok, "specs/lg.toml", "specs/cols.toml", *jobs, "--json", "g.json",
                   cwd=tmp_path, timeout=180)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""  # nothing was audited
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("causalfair gate: error: 2 of 3 specs are invalid; the first: "
                               "audit spec specs/lg.toml: [thresholds] abs_C[s+-sX]: 's+-sX' "
                               "names no two groups"), proc.stderr
    assert lines[1].startswith("causalfair gate: error: audit spec specs/cols.toml: [logs] path "
                               "cols.csv: logs: missing column(s) 'next_level'"), proc.stderr

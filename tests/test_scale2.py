"""What stays serial in the driver when work fans out (docs/scale.md): a gate's reports
are rendered by the tasks that audited (or retrained) their specs and written by the
driver, the same bytes as a serial gate's."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

import causalfair.audit.gate as gate_mod
import causalfair.report.render as render_mod
from causalfair.audit import run_gate
from causalfair.backends import SerialBackend
from tests.conftest import retrain_spec

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"


def _spec(folder: Path, name: str, abs_c: float) -> Path:
    p = folder / f"{name}.toml"
    p.write_text(f'name = "{name}"\nhorizon = 4\n[system]\nid = "lending-1"\n[policy]\n'
                 f'checkpoint = "m.pt"\n[engine]\nkind = "exact"\n[thresholds]\n'
                 f"abs_C = {abs_c}\n", encoding="utf-8")
    return p


def _folder(root: Path) -> dict[str, bytes]:
    """Every file of a gate's report folders, name -> bytes, but for the bytes that differ
    from run to run (audit.json's ``seconds``, the audit's wall time, its
    ``torch_cpu_capability``, present where the process had loaded torch, and the digest
    of audit.json that annex-iv.md quotes): benchmarks/bench_gate.py's comparison."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_gate", ROOT / "benchmarks" /
                                                  "bench_gate.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench._folders(root)


def _no_figures(monkeypatch) -> None:
    """Reports without figures (their PNG bytes are test_worker_processes_...'s): the
    tests of where a report is rendered need not draw."""
    monkeypatch.setattr(render_mod, "build_figures", lambda *a, **k: {})


@pytest.mark.slow
def test_worker_processes_render_the_reports_the_serial_gate_writes(tmp_path, monkeypatch):
    """``jobs=2``: the driver renders nothing (its renderer raises here; the workers are
    fresh processes), and the folders equal the serial gate's byte for byte."""
    shutil.copy(CKPT, tmp_path / "m.pt")
    specs = [_spec(tmp_path, "a", 0.001)]
    serial = run_gate(specs, reports=tmp_path / "serial")
    expected = _folder(tmp_path / "serial")
    assert "a/report.html" in expected and "a/waterfall.png" in expected

    def refuse(*a, **k):
        raise AssertionError("the driver rendered a report")

    monkeypatch.setattr(render_mod, "build_figures", refuse)
    monkeypatch.setattr(gate_mod, "write_report", refuse)
    parallel = run_gate(specs, reports=tmp_path / "jobs2", jobs=2)
    assert _folder(tmp_path / "jobs2") == expected
    assert [e.report.name for e in parallel.entries] == ["a"]
    assert [e.overall for e in parallel.entries] == [e.overall for e in serial.entries]
    # the results came back without the matplotlib figures that rendered them
    assert all(e.before._figures is None for e in parallel.entries)


class _Pickling:
    """A backend double (not the serial backend): runs every task here after a
    cloudpickle round trip of the function and items, as a worker receives them, and
    records each map's function."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def map(self, fn, items, timeouts=None, done=None):
        import cloudpickle

        self.names.append(fn.__name__)
        fn = cloudpickle.loads(cloudpickle.dumps(fn))
        out = [fn(cloudpickle.loads(cloudpickle.dumps(x))) for x in items]
        return out if done is None else [done(i, r) for i, r in enumerate(out)]


def test_retrained_specs_report_after_the_retrain_from_its_task(tmp_path, monkeypatch):
    """With --retrain, a failing spec's report is rendered by its retrain's task (before
    and after), not by its audit's, and equals the serial gate's."""
    shutil.copy(CKPT, tmp_path / "m.pt")
    _no_figures(monkeypatch)
    p = tmp_path / "a.toml"
    p.write_text(retrain_spec("a", "m.pt", seed=0), encoding="utf-8")
    q = tmp_path / "b.toml"
    q.write_text(retrain_spec("b", "m.pt", abs_C=1.0), encoding="utf-8")
    run_gate([p, q], retrain=True, reports=tmp_path / "serial")
    expected = _folder(tmp_path / "serial")
    (tmp_path / "m.retrained-ppo-1.pt").unlink()
    calls = []
    real = gate_mod.render_report

    def spy(r, **kw):
        calls.append((r.spec.name, kw.get("before") is not None))
        return real(r, **kw)

    monkeypatch.setattr(gate_mod, "render_report", spy)
    rec = _Pickling()
    monkeypatch.setattr(gate_mod, "make_backend", lambda *a, **k: rec)
    res = run_gate([p, q], retrain=True, reports=tmp_path / "workers")
    assert rec.names == ["_check_one", "_audit_one", "_retrain_one"]
    assert sorted(calls) == [("a", True), ("b", False)]  # a's audit was not rendered
    assert _folder(tmp_path / "workers") == expected
    assert res.entries[0].after is not None
    assert json.loads((tmp_path / "workers" / "a" / "audit.json").read_text())["before"]


def test_a_worker_elsewhere_leaves_the_report_to_the_driver(tmp_path, monkeypatch):
    """A worker in another working directory (or on another host) would name other
    paths and record its own platform: it sends no files, and the driver renders."""
    shutil.copy(CKPT, tmp_path / "m.pt")
    _no_figures(monkeypatch)
    res = gate_mod.audit(_spec(tmp_path, "a", 1.0))
    here = gate_mod._rendered(res, gate_mod._RenderPlan(gate_mod._place(), frozenset()))
    assert here.files is not None and "report.html" in here.files
    away = gate_mod._RenderPlan(("/elsewhere", gate_mod._place()[1]), frozenset())
    assert gate_mod._rendered(res, away).files is None
    retrained = gate_mod._RenderPlan(gate_mod._place(), frozenset({res.overall}))
    with_retrain = dataclasses.replace(res, spec=dataclasses.replace(
        res.spec, retrain={"algo": "ppo-cb"}))
    assert gate_mod._rendered(with_retrain, retrained).files is None  # its retrain renders it
    # a spec without [retrain] is not retrained (gate --retrain gates it as it is): rendered
    assert gate_mod._rendered(res, retrained).files is not None
    assert gate_mod._rendered(res, None) is res
    # the driver writes what the worker rendered: the serial writer's bytes
    render_mod.write_rendered(tmp_path / "w", here.files)
    render_mod.write_report(res, tmp_path / "d")
    assert _folder(tmp_path / "w") == _folder(tmp_path / "d")


def test_the_serial_gate_renders_in_the_driver(tmp_path, monkeypatch):
    """The serial backend keeps rendering each report in the driver (nothing is held)."""
    shutil.copy(CKPT, tmp_path / "m.pt")
    _no_figures(monkeypatch)
    seen = []
    monkeypatch.setattr(gate_mod, "_rendered", lambda out, plan, **k: seen.append(plan) or out)
    run_gate([_spec(tmp_path, "a", 1.0)], reports=tmp_path / "r")
    assert seen == [None] and (tmp_path / "r" / "a" / "report.html").is_file()
    assert isinstance(gate_mod.make_backend(1, None, None), SerialBackend)


def test_each_report_is_written_as_its_audit_comes_back(tmp_path, monkeypatch):
    """The driver holds no rendered report until the end: each is written as its audit
    comes back (the backend's ``done``), before the next task's result."""
    shutil.copy(CKPT, tmp_path / "m.pt")
    _no_figures(monkeypatch)
    out = tmp_path / "r"
    seen = []

    class Streaming(_Pickling):
        def map(self, fn, items, timeouts=None, done=None):
            results = super().map(fn, items, timeouts)
            if fn is gate_mod._check_one:  # the checks before the audits
                return [r if done is None else done(i, r) for i, r in enumerate(results)]
            kept = []
            for i, r in enumerate(results):
                seen.append(sorted(p.name for p in out.iterdir()) if out.exists() else [])
                kept.append(done(i, r))
            return kept

    monkeypatch.setattr(gate_mod, "make_backend", lambda *a, **k: Streaming())
    res = run_gate([_spec(tmp_path, "a", 1.0), _spec(tmp_path, "b", 1.0)], reports=out)
    assert seen == [[], ["a"]]
    assert [e.report for e in res.entries] == [out / "a", out / "b"]
    assert (out / "b" / "report.html").is_file()
    assert all(isinstance(e.before, gate_mod.AuditResult) for e in res.entries)


#: Calls of :func:`counted_student` in this process.
CALLS = [0]


def counted_student(kind: str = "plain"):
    """A factory of the fork tests' student (with a state API when ``kind`` is "state")
    that counts its calls; a module's function, pickled by reference."""
    from tests.systems.gym_students import Student, WithState

    CALLS[0] += 1
    return WithState() if kind == "state" else Student()


def test_a_gym_worker_makes_its_env_once_with_the_same_numbers():
    """Each task of a worker unpickles the simulator: its env factory runs once per
    worker thread for a (factory, params), not once per task, and every number is the
    serial run's (an env reset and stepped in place, and one only copied)."""
    import numpy as np

    import causalfair as cf
    from causalfair.engines.montecarlo import decompose_mc
    from causalfair.policies.adapters import callable_policy

    policy = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                             name="logistic")
    for kind in ("state", "plain"):
        system = cf.systems.from_gym(counted_student, groups=["a", "b"], horizon=3,
                                     params={"kind": kind}, batch_size=100)
        serial = decompose_mc(system, policy, n=300, seed=0, benefit_n=200, jobs=1)
        rec, before = _Pickling(), CALLS[0]
        workers = decompose_mc(system, policy, n=300, seed=0, benefit_n=200, backend=rec)
        assert len(rec.names) >= 2  # the decomposition's tasks, then Lambda's
        assert CALLS[0] - before == 1, (kind, CALLS[0] - before)
        assert workers.estimates() == serial.estimates(), kind
        assert workers.se == serial.se and workers.benefit.ci == serial.benefit.ci, kind


def test_lambdas_poisson_weights_are_drawn_beside_the_driver(monkeypatch):
    """With threads, the bootstrap's Poisson weights (one stream) are drawn on a thread of
    their own while the driver goes on; with ``jobs=1``, in line. Lambda, its standard
    error and interval are the same bit for bit."""
    import threading

    import causalfair as cf
    import causalfair.engines.benefit_mc as bmc
    from causalfair.policies.resolver import resolve

    threads = []
    real = bmc.seeded_rng

    def spy(*key):
        if key[1:] == (bmc.STREAM, 99):  # the bootstrap's stream
            threads.append(threading.current_thread().name)
        return real(*key)

    monkeypatch.setattr(bmc, "seeded_rng", spy)
    system = cf.systems.make("lending-1")
    pol = resolve("threshold:0.5", system).policy
    one = bmc.benefit_fairness_mc(system, pol, 5, n=400, seed=3, jobs=1)
    two = bmc.benefit_fairness_mc(system, pol, 5, n=400, seed=3, jobs=2)
    assert threads == ["MainThread", "causalfair-benefit-weights"]
    assert (one.Lambda, one.se, one.ci) == (two.Lambda, two.se, two.ci)
    assert one.se is not None and one.se > 0

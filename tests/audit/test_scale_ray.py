"""The gate on a Ray cluster: a local cluster of the test session's own (started and
stopped alone, tests/ray_head.py) gives the same JSON and JUnit bytes as this process and
as local worker processes, even when injected delays make the tasks finish out of order; a
crashing task is named."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from causalfair.cli import main
from tests.conftest import failing_simulator
from tests.ray_head import RAY_ENV

# not imported here: Ray reads RAY_AUTH_MODE when it is first imported (the fixture sets it)
if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray comes with the dev extra (pip install -e '.[dev]')", allow_module_level=True)

pytestmark = pytest.mark.ray

SLOW = '''
import time
import causalfair as cf

def make(delay=0.0):
    time.sleep(delay)  # the first spec's task finishes last
    return cf.systems.make("lending-1")
'''

BROKEN = failing_simulator('raise RuntimeError("the simulator broke")')

SPEC = ('name = "{name}"\nhorizon = 4\n[system]\nfactory = "slowsys:make"\n'
        'params = {{ delay = {delay} }}\n[policy]\nbuiltin = "threshold:0.5"\n'
        '[engine]\nkind = "mc"\nn = 2000\nseed = {seed}\n[thresholds]\nabs_C = {thr}\n')


@pytest.fixture(scope="module")
def ray_cluster(ray_session_head):
    """The address of the session's Ray head (tests/conftest.py), with its token in this
    process's environment for the module's drivers."""
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)
    try:
        yield ray_session_head.address
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _specs(tmp_path: Path) -> list[str]:
    (tmp_path / "slowsys.py").write_text(SLOW)
    out = []
    for i, (delay, thr) in enumerate([(1.0, 0.001), (0.0, 0.5), (0.3, 0.02), (0.0, 1.0)]):
        p = tmp_path / f"s{i}.toml"
        p.write_text(SPEC.format(name=f"s{i}", delay=delay, seed=i, thr=thr))
        out.append(str(p))
    return out


def _run_gate(specs: list[str], out: Path, *extra: str) -> tuple[int, bytes, bytes]:
    code = main(["gate", *specs, *extra, "--json", str(out / "g.json"),
                 "--junit", str(out / "g.xml")])
    xml = re.sub(rb'time="[0-9.]+"', b"", (out / "g.xml").read_bytes())
    return code, (out / "g.json").read_bytes(), xml


def _ray_env(monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def test_serial_processes_and_ray_give_identical_bytes(tmp_path, ray_cluster, monkeypatch):
    """The Ray run finds the cluster through RAY_ADDRESS (honoured when --address is not
    given; the other tests here pass --address)."""
    _ray_env(monkeypatch)
    specs = _specs(tmp_path)
    runs = {}
    for label, extra in (("serial", ()), ("jobs2", ("--jobs", "2")), ("ray", ("--backend", "ray"))):
        out = tmp_path / label
        out.mkdir()
        if label == "ray":
            monkeypatch.setenv("RAY_ADDRESS", ray_cluster)
        runs[label] = _run_gate(specs, out, *extra)
    assert runs["serial"] == runs["jobs2"] == runs["ray"]
    code, doc, _ = runs["serial"]
    verdicts = [e["overall"] for e in json.loads(doc)["specs"]]
    # the thresholds straddle the audits' numbers: some specs pass, some do not
    assert code == 1 and "PASS" in verdicts and len(set(verdicts)) > 1


def test_a_task_that_crashes_on_a_ray_worker_is_named(tmp_path, ray_cluster, monkeypatch, capsys):
    _ray_env(monkeypatch)
    specs = _specs(tmp_path)
    (tmp_path / "brokensys.py").write_text(BROKEN)
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[system]\nfactory = "brokensys:make"\n[policy]\n'
                   'builtin = "always"\n[engine]\nkind = "mc"\nn = 100\n[thresholds]\nabs_C = 1\n')
    capsys.readouterr()
    code = main(["gate", specs[1], str(bad), "--backend", "ray", "--address", ray_cluster,
                 "--junit", str(tmp_path / "b.xml")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert ("bad.toml: the audit failed: simulator Broken.step raised RuntimeError: the "
            "simulator broke (traceback: ") in err, err
    root = ET.parse(tmp_path / "b.xml").getroot()
    assert root.get("errors") == "1"


def test_ray_backend_errors_are_input_errors(tmp_path, capsys):
    (tmp_path / "s.toml").write_text(SPEC.format(name="s", delay=0.0, seed=0, thr=1.0)
                                     .replace("slowsys:make", "x:y"))
    assert main(["gate", str(tmp_path / "s.toml"), "--address", "auto"]) == 2
    assert "--address: only with --backend ray." in capsys.readouterr().err


def _same(a, b) -> bool:
    """Two decompositions carry the same numbers, bit for bit."""
    import numpy as np

    return (a.estimates() == b.estimates() and a.se == b.se
            and all(np.array_equal(getattr(a, k), getattr(b, k))
                    for k in ("V", "V_ps", "V_0", "steps", "utility")))


def test_monte_carlo_batches_give_the_same_numbers_on_every_backend(ray_cluster, monkeypatch):
    import causalfair as cf
    from causalfair.backends import ProcessBackend, RayBackend
    from causalfair.policies.checkpoint import load_checkpoint

    _ray_env(monkeypatch)
    root = Path(__file__).resolve().parents[2]
    system = cf.systems.make("lending-1")
    policy = load_checkpoint(root / "reports/examples/checkpoints/lending-1-ppo.pt")[0]
    ray = RayBackend(ray_cluster)
    # 7 batches of unequal size per group; the network on every observation (no table)
    kw = dict(n=6500, batch_size=1000, seed=11, tabulate=False)
    serial = cf.decompose_mc(system, policy, 6, **kw)
    assert _same(serial, cf.decompose_mc(system, policy, 6, backend=ProcessBackend(2), **kw))
    assert _same(serial, cf.decompose_mc(system, policy, 6, backend=ray, **kw))
    # without common random numbers, and on coupled units (replicator-1: worlds of 2)
    kw["crn"] = False
    assert _same(cf.decompose_mc(system, policy, 6, **kw),
                 cf.decompose_mc(system, policy, 6, backend=ray, **kw))
    rep = cf.systems.make("replicator-1")
    pol = cf.parse_policy("action:2", rep)
    a = cf.decompose_mc(rep, pol, 8, n=300, batch_size=64, seed=2)
    assert _same(a, cf.decompose_mc(rep, pol, 8, n=300, batch_size=64, seed=2,
                                    backend=ProcessBackend(2)))
    assert _same(a, cf.decompose_mc(rep, pol, 8, n=300, batch_size=64, seed=2, backend=ray))
    # a simulator that breaks its contract on a worker: the same error class and message
    # (a class defined here travels by value to the workers)
    import numpy as np

    from causalfair.errors import SimulatorContractError

    class Short:
        n_groups = 2

        def reset(self, n, group, rng):
            return np.zeros(n)

        def observe(self, s):
            return cf.Observation(group=np.zeros(s.shape[0], dtype=int), level=np.zeros(
                s.shape[0], dtype=int))

        def draw_noise(self, n, rng):
            return rng.random(n)

        def step(self, s, d, noise):
            return cf.StepResult(state=s, gain=np.zeros(1), reward=np.zeros(s.shape[0]))

    for backend in (ProcessBackend(2), ray):
        with pytest.raises(SimulatorContractError, match=r"Short.step: wrong shape: StepResult.gain has shape \(1,\)"):
            cf.decompose_mc(Short(), cf.ConstantPolicy(0.5), 3, n=10, check=False,
                            backend=backend)


def test_decompose_cli_backends_print_the_same_json(ray_cluster, monkeypatch, capsys):
    _ray_env(monkeypatch)
    args = ["decompose", "--system", "lending-2", "--engine", "mc", "--n", "30000",
            "--checkpoint", str(Path(__file__).resolve().parents[2]
                                / "reports/examples/checkpoints/lending-2-ppo.pt"), "--json"]
    outs = []
    for extra in ((), ("--backend", "process", "--jobs", "2"),
                  ("--backend", "ray", "--address", ray_cluster)):
        assert main([*args, *extra]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2] and '"engine": "mc"' in outs[0]
    assert main(["decompose", "--system", "lending-1", "--backend", "process"]) == 2
    assert "only with the Monte Carlo engine" in capsys.readouterr().err


def test_a_sweep_on_ray_equals_the_sweep_here(ray_cluster, monkeypatch, tmp_path):
    from causalfair.backends import RayBackend
    from causalfair.train.sweep import sweep

    _ray_env(monkeypatch)
    small = {"iterations": 2, "n_epochs": 2}  # the runs need only be the same, not good
    here = sweep(["ppo", "ppo-cb"], [0, 1], overrides=small)
    there = sweep(["ppo", "ppo-cb"], [0, 1], overrides=small, backend=RayBackend(ray_cluster),
                  out=tmp_path / "sw")
    cols = [c for c in here.runs.columns if c != "wall_s"]
    assert here.runs[cols].equals(there.runs[cols]) and here.table.equals(there.table)
    assert (tmp_path / "sw" / "runs" / "lending-1" / "ppo-cb" / "seed-1" / "checkpoint.pt").is_file()


DIES = failing_simulator('''
if str(os.getpid()) != os.environ.get("CF_TEST_DRIVER_PID"):
    os._exit(3)  # the worker process dies, as if killed
raise RuntimeError("not on a worker")
''', cls="Dies")


def test_a_worker_that_dies_is_reported_for_its_spec(tmp_path, ray_cluster, monkeypatch, capsys):
    _ray_env(monkeypatch)
    monkeypatch.setenv("CF_TEST_DRIVER_PID", str(os.getpid()))
    specs = _specs(tmp_path)
    (tmp_path / "dies.py").write_text(DIES)
    bad = tmp_path / "dies.toml"
    bad.write_text('name = "dies"\n[system]\nfactory = "dies:make"\n[policy]\n'
                   'builtin = "always"\n[engine]\nkind = "mc"\nn = 100\n[thresholds]\nabs_C = 1\n')
    for extra in (("--jobs", "2"), ("--backend", "ray", "--address", ray_cluster)):
        capsys.readouterr()
        code = main(["gate", specs[1], str(bad), specs[3], *extra,
                     "--junit", str(tmp_path / "d.xml")])
        err = capsys.readouterr().err
        assert code == 2, extra
        assert "dies.toml: the audit failed: " in err and "worker" in err.lower(), (extra, err)
        root = ET.parse(tmp_path / "d.xml").getroot()
        assert root.get("errors") == "1", extra


def _device_seen(_: object) -> str | None:
    return os.environ.get("CAUSALFAIR_DEVICE")


def test_the_device_choice_reaches_ray_workers(ray_cluster, monkeypatch):
    """`--device` travels to Ray workers as it does to local worker processes (through
    CAUSALFAIR_DEVICE), so a gate on a cluster evaluates policies where the driver said."""
    from causalfair.backends import DEVICE_ENV, ProcessBackend, RayBackend

    _ray_env(monkeypatch)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert ProcessBackend(1).map(_device_seen, [0]) == ["cpu"]
    assert RayBackend(ray_cluster).map(_device_seen, [0, 1]) == ["cpu", "cpu"]

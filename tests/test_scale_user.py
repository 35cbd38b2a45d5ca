"""A platform team's gates at scale: warnings raised on workers (local and Ray) follow the
driver's filters as the same task run in the driver; merged shards give the unsharded
gate's summary and JUnit file, in its order; `--backend ray` without an address starts a
Ray of its own; Ray workers import modules from users' folders; the GitHub Action writes
a shard's JSON where its `json` input says; MLflow refuses a bad experiment name or a dead
server at once, and a store failing mid-gate is one line, exit 2, its run not FINISHED."""

from __future__ import annotations

import importlib.util
import json
import os
import warnings

import pytest

from causalfair.backends import ProcessBackend, SerialBackend
from causalfair.workers import TaskError


def _warns(x: int) -> int:
    """A task raising a warning Python ignores by default, twice (shown once)."""
    for _ in range(2):
        warnings.warn("an old API", DeprecationWarning, stacklevel=1)
    return x + 1


def _library_noise(x: int) -> int:
    """A task whose first call installs an ``ignore`` filter, as a library does when it is
    imported, and which raises the warning that filter hides."""
    if x == 1:
        warnings.filterwarnings("ignore", message="library noise")
    warnings.warn("library noise", UserWarning, stacklevel=1)
    return x


def _seen(backend, action: str, fn=_warns) -> tuple[list[str], list[object]]:
    """(the warnings shown, the results) of ``fn`` on ``backend`` under the driver's
    filter ``action`` for DeprecationWarning and UserWarning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter(action, DeprecationWarning)
        warnings.simplefilter(action, UserWarning)
        out = backend.map(fn, [1, 2])
    shown = [f"{w.category.__name__}: {w.message}" for w in caught
             if issubclass(w.category, (DeprecationWarning, UserWarning))]
    return shown, [r.kind if isinstance(r, TaskError) else r for r in out]


def test_worker_warnings_follow_the_driver_s_filters_as_in_process():
    """A DeprecationWarning raised in a worker process was dropped there (the worker's
    default filters ignore it) even when the driver's filters show it, as they do when the
    same task runs in the driver; and an `error` filter of the driver failed the task in
    the driver but not in a worker. Now the driver's filters decide, both ways alike."""
    pool = ProcessBackend(1)
    try:
        for action in ("default", "ignore", "error"):
            here, there = _seen(SerialBackend(), action), _seen(pool, action)
            assert here == there, (action, here, there)
        # the filters a task's libraries install still apply in the worker, for later
        # tasks too, as in the driver
        quiet = _seen(SerialBackend(), "default", _library_noise)
        assert quiet == _seen(pool, "default", _library_noise) == ([], [1, 2])
    finally:
        pool.close()
    assert here[1] == ["DeprecationWarning", "DeprecationWarning"]  # the error filter
    assert _seen(SerialBackend(), "default")[0] == ["DeprecationWarning: an old API"]


EXACT = ('name = "{n}"\nhorizon = 5\n[system]\nid = "lending-1"\n[policy]\nbuiltin = '
         '"threshold:0.{i}"\n[engine]\nkind = "exact"\n[thresholds]\nabs_C = {t}\n')


def _exact_specs(tmp_path, count: int = 5) -> list[str]:
    out = []
    for i in range(count):
        p = tmp_path / f"s{i}.toml"
        p.write_text(EXACT.format(n=f"s{i}", i=i + 3, t=0.0001 if i % 2 else 1.0))
        out.append(str(p))
    return out


def test_merged_shards_are_the_unsharded_gate_s_json_and_junit(tmp_path, capsys):
    """gate-merge listed the specs shard after shard (s0, s2, s4, s1, s3 for 2 shards of
    5), so gate.json and gate.xml of a sharded gate differed from the same gate unsharded;
    now the merge restores the gate's order and both files are the unsharded ones."""
    import re

    from causalfair.cli import main

    specs = _exact_specs(tmp_path)
    whole = main(["gate", *specs, "--json", str(tmp_path / "g.json"),
                  "--junit", str(tmp_path / "g.xml")])
    for k in (1, 2):
        main(["gate", *specs, "--shard", f"{k}/2", "--json", str(tmp_path / f"sh{k}.json"),
              "--junit", str(tmp_path / f"sh{k}.xml")])
    merged = main(["gate-merge", str(tmp_path / "sh2.json"), str(tmp_path / "sh1.json"),
                   "--junit-in", str(tmp_path / "sh2.xml"), str(tmp_path / "sh1.xml"),
                   "--json", str(tmp_path / "m.json"), "--junit", str(tmp_path / "m.xml")])
    capsys.readouterr()
    assert whole == merged == 1
    assert (tmp_path / "m.json").read_bytes() == (tmp_path / "g.json").read_bytes()

    def untimed(name: str) -> bytes:
        return re.sub(rb' time="[0-9.]+"', b"", (tmp_path / name).read_bytes())

    assert untimed("m.xml") == untimed("g.xml")


class _FakeRay:
    """Stands in for the ``ray`` module: records how ``ray.init`` was called."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs) -> None:
        self.calls.append(kwargs)
        raise KeyboardInterrupt  # stop here: nothing else is needed

    def shutdown(self) -> None:  # pragma: no cover - never reached
        pass


def test_ray_without_an_address_starts_a_ray_of_its_own(monkeypatch):
    """With no --address and no RAY_ADDRESS, `ray.init()` joined whatever cluster Ray
    finds on the machine (the latest `ray start`), not the local Ray the docs promise, and
    with --jobs it crashed there ("When connecting to an existing cluster, num_cpus ...
    must not be provided", a traceback). Now it asks Ray for a local instance."""
    import sys

    from causalfair.backends import RayBackend

    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(KeyboardInterrupt):
        RayBackend(None, 2).map(str, [1])
    assert fake.calls[0]["address"] == "local" and fake.calls[0]["num_cpus"] == 2


def _action_step() -> dict:
    from pathlib import Path

    import yaml

    action = yaml.safe_load((Path(__file__).resolve().parents[1] / "action.yml").read_text())
    return next(s for s in action["runs"]["steps"] if s.get("id") == "gate")


def test_the_action_writes_a_shard_s_json_where_its_json_input_says(tmp_path):
    """`args: --shard 1/2 --json shard-1.json`, as a matrix job of a sharded gate would
    write it for gate-merge, was silently overridden by the action's own --json: no
    shard-1.json, and the merge job failed on a missing file. Now --json in args is
    refused (exit 2, one line) and the `json` input says where the summary goes."""
    import sys
    from pathlib import Path

    from tests.conftest import run_cmd

    step = _action_step()
    (tmp_path / "audits").mkdir()
    for i in range(2):
        (tmp_path / "audits" / f"a{i}.toml").write_text(EXACT.format(n=f"a{i}", i=5, t=1.0))
    bindir = tmp_path / "bin"  # `causalfair` as the runner has it: this Python's
    bindir.mkdir()
    (bindir / "causalfair").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m causalfair "$@"\n')
    (bindir / "causalfair").chmod(0o755)
    root = str(Path(__file__).resolve().parents[1])

    def step_env(args: str, json_in: str) -> dict:
        (tmp_path / "out.txt").write_text("")
        return dict(os.environ, CF_SPECS="audits/*.toml", CF_ARGS=args, CF_JUNIT="shard-1.xml",
                    CF_JSON=json_in, GITHUB_OUTPUT=str(tmp_path / "out.txt"),
                    GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"), RUNNER_TEMP=str(tmp_path),
                    OMP_NUM_THREADS="1", PATH=f"{bindir}:{os.environ['PATH']}",
                    PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))

    refused = run_cmd(["bash", "-e", "-c", step["run"]], cwd=tmp_path,
                      env=step_env("--shard 1/2 --json shard-1.json", ""))
    assert refused.returncode == 2, refused.stderr
    assert "give the path as the 'json' input" in refused.stderr, refused.stderr
    assert (tmp_path / "out.txt").read_text() == "exit-code=2\n"
    refused = run_cmd(["bash", "-e", "-c", step["run"]], cwd=tmp_path,
                      env=step_env("--junit=x.xml", ""))
    assert refused.returncode == 2 and "the 'junit' input" in refused.stderr, refused.stderr
    done = run_cmd(["bash", "-e", "-c", step["run"]], cwd=tmp_path,
                   env=step_env("--shard 1/2", "shard-1.json"))
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "shard-1.json").read_text())
    assert doc["shard"]["k"] == 1 and [e["name"] for e in doc["specs"]] == ["a0"], done.stderr


needs_mlflow = pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                                  reason="MLflow comes with the mlflow extra")


@pytest.mark.mlflow
@needs_mlflow
def test_mlflow_store_errors_are_one_line_and_name_what_is_wrong(tmp_path, monkeypatch, capsys):
    """An experiment name MLflow refuses ("" or over 500 characters) was reported as a
    store that cannot be used, with the advice to set MLFLOW_ALLOW_FILE_STORE=true that was
    already set; a tracking server where nothing answers kept the gate waiting for
    minutes (MLflow's retries). Both are one line naming the fix now, at once."""
    import socket
    import time

    from causalfair.cli import main

    spec = _exact_specs(tmp_path, 1)[0]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    for name, says in (("", "empty value"), ("e" * 501, "bad value")):
        assert main(["gate", spec, "--mlflow", "--mlflow-experiment", name]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"--mlflow-experiment: {says}" in err and "MLFLOW_ALLOW_FILE_STORE" not in err
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    assert main(["gate", spec, "--mlflow"]) == 2
    assert time.monotonic() - start < 30
    assert "nothing answers at the tracking server" in capsys.readouterr().err


@pytest.mark.mlflow
@needs_mlflow
def test_a_store_failing_mid_gate_is_exit_2_and_its_run_is_not_finished(tmp_path, monkeypatch,
                                                                           capsys):
    """A store that failed while the gate logged its second audit ended the command with a
    traceback; now it is one line, exit 2, naming the spec; that run is FAILED (never
    FINISHED with half its record), the first stays FINISHED."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from causalfair.cli import main

    specs = _exact_specs(tmp_path, 2)
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    calls, real = [], mlflow.log_artifact

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise mlflow.exceptions.MlflowException("the store went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(mlflow, "log_artifact", failing)
    assert main(["gate", *specs, "--mlflow", "--json", str(tmp_path / "g.json")]) == 2
    err = capsys.readouterr().err
    assert "logging the audit of 's1' (audit)" in err and "the store went away" in err, err
    assert "Traceback" not in err, err
    assert json.loads((tmp_path / "g.json").read_text())["exit_code"] == 1  # verdicts kept
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("causalfair")
    runs = {r.data.params["spec"]: r.info.status for r in client.search_runs([exp.experiment_id])}
    assert runs == {"s0": "FINISHED", "s1": "FAILED"}


@pytest.mark.ray
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray comes with the dev extra")
def test_ray_workers_import_search_path_modules_and_send_warnings_back(ray_session_head,
                                                                        tmp_path, monkeypatch):
    """`decompose --system mod:make --search-path lib --backend ray`: the module loaded
    from `lib` (not the working directory) could not be unpickled on a Ray worker, and the
    command ended in a traceback ("RaySystemError"); local workers are told where such
    modules are, and now Ray workers are too. And warnings raised in tasks on Ray workers
    were dropped; they now come back with the results and follow the driver's filters, as
    local workers' do (shown once here: Python's "default" action)."""
    from causalfair._usercode import load_callable
    from causalfair.backends import RayBackend
    from tests.ray_head import RAY_ENV

    for k, v in RAY_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "scale_user_lib.py").write_text(
        "import warnings\n\nclass Doubled:\n    def __init__(self, x):\n"
        "        self.x = 2 * x\n\ndef work(x):\n"
        "    warnings.warn('an old API', DeprecationWarning)\n    return Doubled(x)\n")
    work = load_callable("scale_user_lib:work", search_path=tmp_path / "lib")
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("default", DeprecationWarning)
        out = RayBackend(ray_session_head.address).map(work, [1, 2], [None, 60])
    assert [getattr(r, "x", r) for r in out] == [2, 4]  # one without, one with a time limit
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == [
        "DeprecationWarning: an old API"]

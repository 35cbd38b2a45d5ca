"""Shared test setup: one thread per process, the Agg backend, and the one way the suite
runs a command (:func:`run_cmd`, :func:`run_cli`; the fixture :func:`cli_here` runs one in
this process).

Every command run through :func:`run_cmd` is recorded for the running test; when the test
fails, its report gets a section with each command, its exit code and its whole stdout and
stderr, whatever the failing assertion printed. ``expect=`` checks the exit code with the
same full message, and a command that runs past its ``timeout`` fails the test with the
output it had written so far.

The test folders mirror the packages of ``causalfair`` (``tests/engines/`` tests
``causalfair/engines/``, ...); each folder is a package, so test files of the same name may
live in two folders. Import the helpers with ``from tests.conftest import run_cli, run_cmd``
(pytest puts the checkout's root on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

_RUNS: list[subprocess.CompletedProcess] = []


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def describe(proc: subprocess.CompletedProcess, expect: int | None = None) -> str:
    """The command, its exit code and its whole stdout and stderr, as one message."""
    args = proc.args if isinstance(proc.args, (list, tuple)) else [proc.args]
    want = "" if expect is None else f" (expected {expect})"
    return (f"$ {shlex.join(map(str, args))}\nexit code {proc.returncode}{want}\n"
            f"--- stdout ---\n{_text(proc.stdout)}\n--- stderr ---\n{_text(proc.stderr)}")


def run_cmd(cmd: Sequence[Any], *, expect: int | None = None, timeout: float = 300,
            text: bool = True, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd)`` with its output captured and recorded for the test report.

    ``expect``: the exit code the test needs (checked here, with :func:`describe` as the
    message). ``timeout``: seconds; running past it fails the test with the output so far.
    Other keyword arguments go to :func:`subprocess.run`.
    """
    cmd = [str(c) for c in cmd]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=text, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as exc:
        late = subprocess.CompletedProcess(cmd, "timeout", exc.stdout, exc.stderr)
        pytest.fail(f"command ran past its {timeout} s timeout\n" + describe(late),
                    pytrace=False)
    if expect is not None and proc.returncode != expect:
        pytest.fail(describe(proc, expect), pytrace=False)
    _RUNS.append(proc)
    return proc


def run_cli(*args: Any, expect: int | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """``python -m causalfair ARGS`` through :func:`run_cmd` (same keyword arguments)."""
    return run_cmd([sys.executable, "-m", "causalfair", *args], expect=expect, **kwargs)


@pytest.fixture
def cli_here(monkeypatch, capsys):
    """A function ``run(*args, cwd)``: ``causalfair ARGS`` run in this process
    (``causalfair.cli.main``, what ``python -m causalfair`` calls) in the folder ``cwd``,
    its stdout and stderr captured, as a ``CompletedProcess`` recorded like
    :func:`run_cmd`'s. For commands that train: a second interpreter would spend seconds
    importing torch again."""
    import importlib

    from causalfair.cli import main

    def run(*args: Any, cwd: Any) -> subprocess.CompletedProcess:
        monkeypatch.chdir(cwd)
        # as in a fresh interpreter: the import system's cached listing of "." (a search
        # path of ".") is of the folder an earlier command ran in
        importlib.invalidate_caches()
        capsys.readouterr()
        argv = [str(a) for a in args]
        code = main(argv)
        out, err = capsys.readouterr()
        proc = subprocess.CompletedProcess(["causalfair", *argv], code, out, err)
        _RUNS.append(proc)
        return proc

    return run


@contextlib.contextmanager
def clinic_module(name: str):
    """docs/examples/clinic.py imported as module ``name`` (registered in ``sys.modules``
    while in use: its dataclasses look their module up)."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(name, root / "docs/examples/clinic.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(name, None)


def retrain_spec(name: str, ckpt: Any, *, abs_C: float = 0.001, horizon: int = 4,
                 seed: int | None = None) -> str:
    """An audit spec of a lending-1 checkpoint on the exact engine whose ``abs_C`` bound the
    example checkpoint fails (|C| = 0.0044 over 4 steps > 0.001), with a [retrain] of one
    PPO iteration: the cheapest gate that retrains."""
    return (f'name = "{name}"\nhorizon = {horizon}\n[model]\nsetting = "lending-1"\n'
            f'[policy]\ncheckpoint = "{ckpt}"\n[engine]\nkind = "exact"\n'
            f'[thresholds]\nabs_C = {abs_C}\n[retrain]\nalgo = "ppo"\niterations = 1\n'
            + (f"seed = {seed}\n" if seed is not None else ""))


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The stderr of a command that must end as an input error: exit code 2 and one line,
    no traceback (the ground rule of the command line)."""
    assert proc.returncode == 2, describe(proc, 2)
    err = proc.stderr.strip()
    assert "Traceback" not in err and "\n" not in err, err
    return err


#: A small spec that passes: lending-1, horizon 5, threshold:0.5, |C| <= 1.
SMALL_SPEC = """name = "rel"
horizon = 5
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 1.0
"""


def skill_simulator(group_names: Sequence[str], horizon: int = 3) -> str:
    """Source of a module whose ``make()`` returns a user simulator of one feature
    ("skill") whose groups are named ``group_names`` (strings to test how outputs quote
    them) and whose gain per decision falls with the group's index."""
    return f'''
import numpy as np
import causalfair as cf

class Sim:
    n_groups = {len(group_names)}
    group_names = {tuple(group_names)!r}
    feature_names = ("skill",)
    horizon = {horizon}
    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(float)
        return np.stack([g, rng.normal(1.0 - 0.3 * g, 0.3)], axis=1)
    def observe(self, state):
        return cf.Observation(group=state[:, 0].astype(int), features=state[:, 1:2])
    def draw_noise(self, n, rng):
        return rng.normal(0, 0.1, size=n)
    def step(self, state, decisions, noise):
        gain = 0.1 * np.asarray(decisions) * (1.2 - 0.4 * state[:, 0]) + noise
        new = state.copy()
        new[:, 1] += gain
        return cf.StepResult(state=new, reward=0.1 * gain, gain=gain, info={{}})

def make():
    return Sim()
'''


def failing_simulator(step: str, *, cls: str = "Broken", head: str = "") -> str:
    """Source of a module whose ``make()`` returns a user simulator of 2 groups and 3
    levels (state: level, group) that resets, observes and draws noise as usual and whose
    ``step`` runs STEP (its body, e.g. ``raise RuntimeError("...")``; ``os`` is imported).
    CLS: the class name (errors name ``CLS.step``); HEAD: more lines at the top."""
    body = textwrap.indent(textwrap.dedent(step).strip(), " " * 8)
    return f'''
import os
import numpy as np
import causalfair as cf
{head}

class {cls}:
    n_groups = 2
    n_levels = 3
    group_names = ("a", "b")
    def reset(self, n, group, rng):
        return np.zeros(n, dtype=int), np.broadcast_to(np.asarray(group), (n,)).copy()
    def observe(self, s):
        return cf.Observation(group=s[1], level=s[0])
    def draw_noise(self, n, rng):
        return rng.random(n)
    def step(self, s, d, noise):
{body}

def make():
    return {cls}()
'''


def check_gym_env(env_id: str, **kw: Any) -> None:
    """Gymnasium's and Stable-Baselines3's environment checkers, each on a fresh unwrapped
    ``gym.make(env_id, **kw)``."""
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    check_env(gym.make(env_id, **kw).unwrapped, skip_render_check=True)
    sb3_check_env(gym.make(env_id, **kw).unwrapped, warn=True)


def gym_episode(env_id: str, seed: int, steps: int | None, act: Any,
                record: Any = lambda r, info: [], **kw: Any) -> tuple[list, bool, bool, Any]:
    """One episode of ``gym.make(env_id, **kw)`` reset with SEED (action space seeded with 0):
    STEPS steps (None: the system's horizon) of action ``act(env, t)``. Returns (the
    observations as lists, each after the first extended by ``record(reward, info)``,
    terminated and truncated at the last step, the environment)."""
    import gymnasium as gym

    env = gym.make(env_id, **kw)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=seed)
    traj, term, trunc = [obs.tolist()], False, False
    for t in range(env.unwrapped.horizon if steps is None else steps):
        obs, r, term, trunc, info = env.step(act(env, t))
        traj.append(obs.tolist() + list(record(r, info)))
    return traj, term, trunc, env


@pytest.fixture(autouse=True)
def _forget_commands():
    yield
    _RUNS.clear()  # after the call's report; a module fixture's commands go to its first test


@pytest.fixture(scope="session")
def ray_session_head():
    """A Ray head shared by the session's ray tier (:func:`tests.ray_head.ray_head`: its
    own port and temp dir, stopped alone, never by `ray stop`), with the token of
    ``RAY_ENV``; a driver in this process needs ``RAY_ENV`` in ``os.environ``."""
    # imported here: this conftest also runs copied into a folder of its own
    # (tests/test_suite_install.py), where the tests package is not importable
    from tests.ray_head import RAY_ENV, ray_head

    with ray_head({**os.environ, **RAY_ENV}) as head:
        yield head


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _RUNS:
        report.sections.append(
            (f"commands run by the test ({report.when}): whole output",
             "\n\n".join(describe(p) for p in _RUNS)))


# ------------------------------------------------------------------ published schemas
def written_documents(root: Any) -> list[tuple[Any, str]]:
    """(path, schema name) of every document causalfair wrote under ``root``: each
    audit.json of a report folder causalfair made (it holds ``.causalfair-report.json``)
    and each ``*.json`` file holding a gate summary (an object with ``schema_version``,
    ``exit_code`` and ``specs``) or the output of ``causalfair decompose --json`` (an object
    with ``schema_version``, ``C``, ``DPE``, ``IPE``, ``SPE`` and ``benefit``) or a
    ``frontier.json`` (``schema_version``, ``constraint``, ``eps_min``, ``points``). A test that
    writes an invalid document on purpose gives it another suffix (``shard.bad``) or no
    ``schema_version``."""
    import json
    import stat
    from pathlib import Path

    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if name == "audit.json" and ".causalfair-report.json" in files:
                found.append((path, "audit"))
            elif name.endswith(".json") and name != "audit.json":
                try:
                    st = path.stat()  # a test's FIFO or device is not a document
                    if not stat.S_ISREG(st.st_mode) or st.st_size > 5_000_000 or \
                            b'"schema_version"' not in path.read_bytes():
                        continue
                    doc = json.loads(path.read_bytes())
                except (OSError, ValueError):
                    continue
                if isinstance(doc, dict) and {"schema_version", "exit_code", "specs"} <= set(doc):
                    found.append((path, "gate"))
                elif isinstance(doc, dict) and {"schema_version", "C", "DPE", "IPE", "SPE",
                                                "benefit"} <= set(doc) and "verdicts" not in doc:
                    found.append((path, "decompose"))  # causalfair decompose --json
                elif isinstance(doc, dict) and {"schema_version", "constraint", "eps_min",
                                                "points"} <= set(doc):
                    found.append((path, "frontier"))  # frontier.json of causalfair frontier
    return found


def schema_errors(path: Any, schema: str) -> list[str]:
    """The messages of ``path`` failing ``docs/schema/SCHEMA.schema.json`` (none: valid)."""
    import json
    from pathlib import Path

    import jsonschema

    root = Path(__file__).resolve().parents[1] / "docs" / "schema"
    validator = jsonschema.Draft202012Validator(
        json.loads((root / f"{schema}.schema.json").read_text(encoding="utf-8")))
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}"
            for e in validator.iter_errors(doc)]


@pytest.fixture(scope="session", autouse=True)
def _written_documents_match_their_schemas(tmp_path_factory):
    """At the end of the session, every audit.json and gate summary the tests wrote under
    their temporary folders validates against docs/schema/ (:func:`written_documents`);
    one that does not is an error of the session, naming the file and the field."""
    yield
    bad = []
    for path, schema in written_documents(tmp_path_factory.getbasetemp()):
        errs = schema_errors(path, schema)
        if errs:
            bad.append(f"{path} ({schema}.schema.json): {errs[0]}")
    assert not bad, (f"{len(bad)} written documents fail their schema:\n" + "\n".join(bad[:20]))

"""A crash never passes a gate: user code that prints to descriptor 1, exits (``os._exit``,
``sys.exit``), kills itself (SIGKILL, SIGSEGV), returns NaN or negative probabilities on a
late step, closes or swaps the standard streams, raises KeyboardInterrupt or another
BaseException, or leaves a thread or a forked child running, in this process (serial),
in worker processes (``--jobs``, ``--timeout``), in a shard, and in a ``--retrain``: the
gate never exits 0 for a spec whose audit did not complete, reports it with one line, its
JSON and JUnit say ERROR, and the other spec keeps its verdict. Also: an interrupted
``gate --retrain`` keeps the retrained checkpoints that finished, and two sweeps on one
folder cannot interleave."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from causalfair.cli import main
from tests.conftest import describe, run_cli, run_cmd

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"
MOD = "r4faults"

#: The user's module: ``pol_<mode>`` is a policy factory whose policy does MODE when first
#: asked at t >= 2 (a late step); ``sys_<mode>`` is a system factory (lending-1) doing MODE
#: when called inside a retrain; ``ok`` is lending-1 as is.
FAULTS = '''
import dataclasses, os, signal, sys, threading, time, traceback
from pathlib import Path
import numpy as np
import causalfair as cf


KEPT = []


class Boom(BaseException):
    pass


def fault(mode):
    if mode == "print":  # a fake frame and a fake JSON summary, on descriptor 1 and stdout
        os.write(1, b"\\0\\0\\0\\0\\0\\0\\0\\x05junk")
        print('{"exit_code": 0, "specs": []}', flush=True)
    elif mode == "os_exit":
        os._exit(0)
    elif mode == "sys_exit":
        sys.exit(0)
    elif mode in ("sigkill", "sigsegv"):
        os.kill(os.getpid(), getattr(signal, mode.upper()))
    elif mode == "close_std":
        sys.stdout.close()
        sys.stdin.close()
    elif mode == "swap_std":
        sys.stdout = open(os.devnull, "w")
        KEPT.append(sys.stdout)  # (open for the rest of the session: no ResourceWarning)
        sys.stdin = None
    elif mode == "kbint":
        raise KeyboardInterrupt
    elif mode == "base":
        raise Boom("a BaseException of the user's")
    elif mode == "thread":
        threading.Thread(target=time.sleep, args=(30,), name="r4_sleeper").start()
    elif mode in ("fork", "fork_kill"):  # an orphan; fork_kill: then the worker dies
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        Path(f"orphan_{mode}.pid").write_text(str(pid))
        if mode == "fork_kill":
            os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "sigint":  # a real Ctrl-C, while this retrain runs
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)


class Pol:
    def __init__(self, mode):
        self.mode, self.done = mode, False

    def prob_d1(self, obs):
        p = np.full(np.shape(obs.group), 0.5)
        if (obs.t or 0) >= 2 and not self.done:
            self.done = True
            if self.mode in ("nan", "inf", "neg"):
                p[0] = {"nan": np.nan, "inf": np.inf, "neg": -0.5}[self.mode]
            else:
                fault(self.mode)
        return p


def ok():
    return cf.systems.make("lending-1")


class NaNLate:
    """lending-1's simulator whose gains are NaN from its third step after a reset on."""

    def __init__(self, base):
        self.base, self.k = base, 0

    def reset(self, *args, **kwargs):
        self.k = 0
        return self.base.reset(*args, **kwargs)

    def step(self, s, d, noise):
        self.k += 1
        r = self.base.step(s, d, noise)
        if self.k < 3:
            return r
        return dataclasses.replace(r, gain=np.full(np.shape(r.gain), np.nan))

    def __getattr__(self, name):
        return getattr(self.base, name)


def nangain():
    system = ok()
    make_sim = system.simulator
    return dataclasses.replace(system, simulator=lambda: NaNLate(make_sim()))


def __getattr__(name):
    if name == "pol_factory_kbint":
        def make():
            raise KeyboardInterrupt
        return make
    if name.startswith("pol_"):
        return lambda: Pol(name[4:])
    if name.startswith("sys_"):
        def make():
            if any(f.name == "run_retrain" for f in traceback.extract_stack()):
                if name == "sys_nangain":
                    return nangain()
                fault(name[4:])
            return ok()
        return make
    raise AttributeError(name)
'''

POLICY_SPEC = '''name = "{name}"
horizon = 3
[system]
id = "lending-1"
[policy]
{policy}
[thresholds]
abs_C = 1.0
'''

RETRAIN_SPEC = '''name = "{name}"
horizon = 3
[system]
factory = "{mod}:{factory}"
[policy]
checkpoint = "m.pt"
[engine]
kind = "exact"
[thresholds]
abs_C = {thr}
[retrain]
algo = "ppo"
iterations = 1
'''


@pytest.fixture
def here(tmp_path, monkeypatch):
    """tmp_path holding the user's module and the passing spec ``ok.toml``, as the working
    directory; the module is forgotten afterwards."""
    (tmp_path / f"{MOD}.py").write_text(FAULTS)
    (tmp_path / "ok.toml").write_text(POLICY_SPEC.format(name="ok",
                                                         policy='builtin = "threshold:0.5"'))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop(MOD, None)


def _bad(folder: Path, mode: str) -> str:
    """A spec whose policy does MODE on a late step."""
    path = folder / f"bad_{mode}.toml"
    path.write_text(POLICY_SPEC.format(name=f"bad_{mode}",
                                       policy=f'factory = "{MOD}:pol_{mode}"'))
    return path.name


def _verdicts(doc: dict) -> dict[str, tuple[str, str]]:
    return {s["name"]: (s["overall"], s.get("error") or "") for s in doc["specs"]}


def _junit(path: Path) -> dict[str, str]:
    """Each test suite's outcome in the JUnit file: error, failure or pass."""
    out = {}
    for suite in ET.parse(path).getroot().iter("testsuite"):
        out[suite.get("name").removeprefix("spec ")] = (
            "error" if suite.find(".//error") is not None else
            "failure" if suite.find(".//failure") is not None else "pass")
    return out


def _check_errors(code, err, folder, bad: dict[str, str], what: str = "",
                  ok: str = "ok") -> None:
    """Exit 2; each spec of ``bad`` (name -> a piece of its reason) ERROR in the JSON and
    the JUnit with a one-line reason naming its file on stderr (and ``what``); the spec
    ``ok`` PASS."""
    doc = json.loads((folder / "g.json").read_text())
    got, junit = _verdicts(doc), _junit(folder / "g.xml")
    assert code == 2 and doc["exit_code"] == 2, (code, err)
    assert got[ok] == ("PASS", "") and junit[ok] == "pass", (got, junit, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("causalfair gate: error: ")]
    for name, reason in bad.items():
        assert got[name][0] == "ERROR" and reason in got[name][1], (name, got, err)
        assert junit[name] == "error", (junit, err)
        line = [ln for ln in lines if f"{name}.toml" in ln]
        assert len(line) == 1 and reason in line[0] and what in line[0], (name, err)


# ------------------------------------------------------------- serial: the gate's own process

SERIAL = {"os_exit": "os._exit(0) called", "sys_exit": "called sys.exit(0)",
          "kbint": "raised KeyboardInterrupt itself", "base": "raised Boom",
          "nan": "NaN or inf", "inf": "NaN or inf", "neg": "outside [0, 1]"}


@pytest.mark.parametrize("mode", sorted(SERIAL))
def test_serial_user_code_that_exits_or_raises_is_its_specs_error(here, capsys, mode):
    # kbint, before: the KeyboardInterrupt of a policy ended the whole gate (exit 130,
    # nothing written, no verdict for the other spec)
    code = main(["gate", _bad(here, mode), "ok.toml", "--json", "g.json", "--junit", "g.xml"])
    _check_errors(code, capsys.readouterr().err, here, {f"bad_{mode}": SERIAL[mode]})


def test_a_factory_raising_keyboard_interrupt_is_its_specs_error(here, capsys):
    # before: exit 130, as if Ctrl-C had come (a bad spec stops the gate before any audit)
    code = main(["gate", _bad(here, "factory_kbint"), "ok.toml", "--json", "g.json"])
    err = capsys.readouterr().err
    doc = json.loads((here / "g.json").read_text())
    assert code == 2 and doc["exit_code"] == 2, err
    assert [s["overall"] for s in doc["specs"]] == ["ERROR"], doc
    line = err.strip().splitlines()[-1]
    assert "bad_factory_kbint.toml" in line and "raised KeyboardInterrupt itself" in line, err


@pytest.mark.parametrize("mode", ["print", "close_std", "swap_std"])
def test_serial_user_prints_and_stream_changes_leave_the_outputs_whole(here, capfd, mode):
    # before: print wrote its junk into `--json -` (jq read a second document, or none),
    # close_std ended the gate with a traceback and exit 1 (read as a FAIL), swap_std
    # sent the JSON to the user's null device: stdout empty, exit 0
    code = main(["gate", _bad(here, mode), "ok.toml", "--json", "-"])
    out, err = capfd.readouterr()
    assert code == 0, (out, err)
    doc = json.loads(out)  # the whole of stdout is the JSON summary
    assert _verdicts(doc) == {f"bad_{mode}": ("PASS", ""), "ok": ("PASS", "")}, out
    assert ("junk" in err) == (mode == "print") and "ok: PASS" in err, err
    print("stdout still works")  # the streams are the command's again
    assert capfd.readouterr().out == "stdout still works\n"


@pytest.mark.parametrize("sig", ["sigkill", "sigsegv"])
def test_serial_user_code_killing_the_gate_never_exits_0(here, sig):
    # the gate's own process dies: its exit code says so (128 + N), and no verdict is written
    proc = run_cli("gate", _bad(here, sig), "ok.toml", "--json", "g.json", cwd=here, timeout=60)
    want = -getattr(signal, sig.upper())
    assert proc.returncode in (want, 128 - want), describe(proc)
    assert not (here / "g.json").exists(), describe(proc)


def test_serial_user_thread_left_running_does_not_keep_the_gate_from_exiting(here):
    # before: Python waited at exit for the user's (non-daemon) sleeping thread: the gate
    # printed its verdicts and then hung for as long as the thread ran
    code = ("import sys; import causalfair.cli as c; c.THREAD_GRACE_S = 0.5; "
            "sys.argv = ['causalfair', 'gate', sys.argv[1], 'ok.toml']; sys.exit(c.entry())")
    t0 = time.monotonic()
    proc = run_cmd([sys.executable, "-c", code, _bad(here, "thread")], cwd=here, timeout=25)
    assert proc.returncode == 0 and "r4_sleeper" in proc.stderr, describe(proc)
    assert time.monotonic() - t0 < 20, describe(proc)


# ------------------------------------------------------------------------ worker processes

WORKER = {"os_exit": "its process ended (exit code 0)", "sys_exit": "called sys.exit(0)",
          "sigkill": "killed by SIGKILL", "sigsegv": "killed by SIGSEGV",
          "fork_kill": "killed by SIGKILL",
          "kbint": "raised KeyboardInterrupt itself", "base": "raised Boom",
          "nan": "NaN or inf"}


def test_workers_report_each_crash_for_its_spec(here, capsys):
    # one gate, every fault in its own spec; the prints, the closed streams, the thread
    # and the orphan must not disturb the results of the others. kbint, before: the
    # worker died with a traceback on stderr, reported as a kill; fork, before: the
    # orphan outlived the gate (holding its stderr open: a CI step reading it waited);
    # fork_kill, before: the gate waited for the orphan holding the dead worker's pipe
    quiet = ["print", "close_std", "thread", "fork"]
    specs = [_bad(here, m) for m in [*WORKER, *quiet]]
    t0 = time.monotonic()
    code = main(["gate", *specs, "ok.toml", "--jobs", "2", "--json", "g.json",
                 "--junit", "g.xml"])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    _check_errors(code, err, here, {f"bad_{m}": r for m, r in WORKER.items()})
    got = _verdicts(json.loads((here / "g.json").read_text()))
    assert all(got[f"bad_{m}"] == ("PASS", "") for m in quiet), {m: got[f"bad_{m}"] for m in quiet}
    assert "Traceback" not in err, err
    assert took < 25, f"{took:.1f} s: the gate waited for an orphan (it sleeps 30 s)\n{err}"
    for mode in ("fork", "fork_kill"):
        orphan = int((here / f"orphan_{mode}.pid").read_text())
        for _ in range(50):  # (killed with its worker's process group)
            if not _alive(orphan):
                break
            time.sleep(0.1)
        else:
            os.kill(orphan, signal.SIGKILL)
            pytest.fail(f"the process {orphan} a task forked outlived the gate\n{err}")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_nan_gains_on_a_late_step_are_an_error(here, capsys, jobs):
    (here / "nan_gain.toml").write_text(
        POLICY_SPEC.format(name="nan_gain", policy='builtin = "threshold:0.5"').replace(
            'id = "lending-1"', f'factory = "{MOD}:nangain"')
        + '[engine]\nkind = "mc"\nn = 200\n')
    code = main(["gate", "nan_gain.toml", "ok.toml", "--jobs", jobs, "--json", "g.json",
                 "--junit", "g.xml"])
    _check_errors(code, capsys.readouterr().err, here,
                  {"nan_gain": "StepResult.gain contains NaN"})


def _alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (a zombie, killed but not yet reaped by init, does
    not)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except ProcessLookupError:
        return False
    except OSError:  # no /proc: alive as far as we can tell
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_time_limit_runs_the_spec_in_a_worker_that_may_die(here, capsys):
    code = main(["gate", _bad(here, "sigsegv"), "ok.toml", "--timeout", "120",
                 "--json", "g.json", "--junit", "g.xml"])
    _check_errors(code, capsys.readouterr().err, here, {"bad_sigsegv": "killed by SIGSEGV"})


def test_a_shard_with_a_crash_merges_to_an_error(here, capsys):
    specs = [_bad(here, "sys_exit"), "ok.toml"]
    for k in (1, 2):
        assert main(["gate", *specs, "--shard", f"{k}/2", "--jobs", "1",
                     "--json", f"s{k}.json"]) == (2 if k == 1 else 0)
    code = main(["gate-merge", "s1.json", "s2.json", "--json", "g.json"])
    err = capsys.readouterr().err
    doc = json.loads((here / "g.json").read_text())
    assert code == 2 and doc["exit_code"] == 2, err
    assert _verdicts(doc)["ok"] == ("PASS", "") and _verdicts(doc)["bad_sys_exit"][0] == "ERROR"


# ---------------------------------------------------------------------------------- --retrain


def _retrain_specs(folder: Path, modes: list[str]) -> list[str]:
    """A failing spec per mode, whose retrain's system factory does MODE, and okrt, which
    passes (no retrain)."""
    import shutil

    shutil.copy(CKPT, folder / "m.pt")
    out = []
    for mode in modes:
        (folder / f"r_{mode}.toml").write_text(RETRAIN_SPEC.format(
            name=f"r_{mode}", mod=MOD, factory=f"sys_{mode}", thr=0.001))
        out.append(f"r_{mode}.toml")
    (folder / "okrt.toml").write_text(RETRAIN_SPEC.format(name="okrt", mod=MOD, factory="ok",
                                                          thr=1.0).replace("r_", ""))
    return out + ["okrt.toml"]


RETRAIN = {"sys_exit": "called sys.exit(0)", "kbint": "raised KeyboardInterrupt itself",
           "base": "raised Boom", "nangain": "StepResult.gain contains NaN"}
RETRAIN_WORKER = {"os_exit": "its process ended (exit code 0)", "sigkill": "killed by SIGKILL",
                  "sigsegv": "killed by SIGSEGV", "kbint": "raised KeyboardInterrupt itself"}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_crashing_retrain_is_its_specs_error(here, capsys, jobs):
    # jobs 1, kbint, before: exit 130, nothing written
    table = RETRAIN if jobs == "1" else RETRAIN_WORKER
    specs = _retrain_specs(here, list(table))
    code = main(["gate", *specs, "--retrain", "--jobs", jobs, "--json", "g.json",
                 "--junit", "g.xml"])
    err = capsys.readouterr().err
    _check_errors(code, err, here, {f"r_{m}": r for m, r in table.items()}, "retrain",
                  ok="okrt")
    assert not list(here.glob("m.retrained-*")), err  # no retrain finished


def test_ctrl_c_during_retrain_keeps_the_retrains_that_finished(here, capsys):
    # the first retrain finishes, the second is interrupted by a real SIGINT. Before:
    # exit 130 and no checkpoint, the finished retrain's work lost
    specs = _retrain_specs(here, ["none", "sigint"])[:2]
    code = main(["gate", *specs, "--retrain", "--json", "g.json"])
    err = capsys.readouterr().err
    assert code == 130, err
    assert [p.name for p in here.glob("m.retrained-*")] == ["m.retrained-ppo-1.pt"], err
    assert ("interrupted; the retrained checkpoints of the retrains that finished are "
            "written: m.retrained-ppo-1.pt") in err, err
    assert not (here / "g.json").exists()  # an interrupted gate writes no verdicts
    assert not list(here.glob("*.tmp*")) and not list(here.glob(".*tmp*")), list(here.iterdir())


# ----------------------------------------------------------------------- two sweeps, one folder

SLOW = '''
import causalfair as cf
_calls = []

def make():  # the second call (the run's training, after the sweep took its folder) waits
    _calls.append(1)
    if len(_calls) > 1:
        import time
        time.sleep(60)
    return cf.systems.make("lending-1")
'''


def test_a_second_sweep_on_a_folder_being_written_is_refused(tmp_path, capsys, monkeypatch):
    # before: both ran; the second's --force removed the first's runs while it trained
    (tmp_path / "r4slow.py").write_text(SLOW)
    monkeypatch.chdir(tmp_path)
    args = ["sweep", "--system", "r4slow:make", "--algo", "ppo", "--seeds", "0",
            "--iterations", "1", "--out", "sw", "--force"]
    first = subprocess.Popen([sys.executable, "-m", "causalfair", *args], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = tmp_path / "sw" / ".causalfair-sweep.lock"
        for _ in range(300):  # until the first sweep holds the folder
            if lock.exists() and lock.read_text().strip():
                break
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        code = main(args)
        err = capsys.readouterr().err.strip()
        assert code == 2 and f"another sweep (pid {first.pid}) is writing" in err, err
        assert "\n" not in err, err
        assert lock.read_text().strip() == str(first.pid)  # the first's lock is untouched
    finally:
        first.send_signal(signal.SIGTERM)
        out, errs = first.communicate(timeout=60)
    assert first.returncode == 130, (out, errs)
    sys.modules.pop("r4slow", None)

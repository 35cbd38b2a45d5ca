"""The failure paths of the worker pools (causalfair.backends) and of the command line's
interrupt: a command started with SIGINT ignored (``nohup causalfair ... &`` in a script)
still stops on SIGINT; a thread stuck in user code does not keep an interrupted command
from exiting; an interrupt at any point of a worker's start or stop leaves no worker
running; killing a worker never blocks on a pipe."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from causalfair import backends, workers
from causalfair.workers import Worker, stop_workers
from tests.audit.test_gate_hangs import _env, _marked, _specs

LINUX = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc (Linux)")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal_when(proc: subprocess.Popen, ready: Any, sig: int, errfile: Path,
                 limit: float = 30) -> tuple[float, str]:
    """Wait until ``ready()`` (the command is stuck where the test wants it), send ``sig``,
    and wait for the command to end; returns (seconds it took to end, its stderr)."""
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, errfile.read_text()
        assert time.monotonic() < deadline, "never got stuck\n" + errfile.read_text()
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        pass
    return time.monotonic() - t0, errfile.read_text()


def _kill_all(proc: subprocess.Popen, mark: str) -> None:
    for pid in _marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a script's `cmd &` does to cmd


@LINUX
def test_a_gate_started_with_sigint_ignored_still_stops_on_sigint(tmp_path):
    # a non-interactive shell starts a background job (`nohup causalfair gate ... &`)
    # with SIGINT ignored, and Python then leaves it ignored: `kill -INT` did nothing and
    # the gate went on waiting for its stuck worker
    a, b = _specs(tmp_path)
    mark = f"cf-int-{uuid.uuid4().hex}"
    errfile = tmp_path / "stderr.txt"
    cmd = [sys.executable, "-m", "causalfair", "gate", str(a), str(b), "--jobs", "2",
           "--json", str(tmp_path / "g.json")]
    with open(errfile, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(mark), stdout=subprocess.DEVNULL,
                                stderr=fh, preexec_fn=_ignore_sigint)
    try:
        took, err = _signal_when(proc, lambda: list(tmp_path.glob("stuck-*")), signal.SIGINT,
                                 errfile)
        survivors = _marked(mark)
    finally:
        _kill_all(proc, mark)
    assert proc.returncode == 130 and took < 30, f"exit {proc.returncode} after {took:.1f} s\n{err}"
    assert err.strip().splitlines()[-1] == "causalfair gate: interrupted", err
    assert survivors == [] and not (tmp_path / "g.json").exists(), err


THREADED = textwrap.dedent('''
    import os, sys, time
    from causalfair.backends import ThreadBackend

    def task(x):
        if x == 1:
            open(sys.argv[1], "w").close()
            time.sleep(1000)  # a thread stuck in user code
        return x

    try:
        ThreadBackend(2).map(task, range(8))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
''')


def test_a_thread_stuck_in_user_code_does_not_keep_an_interrupted_run_from_exiting(tmp_path):
    # ThreadBackend ran its tasks in a ThreadPoolExecutor, whose threads Python joins at
    # exit: `causalfair decompose` (threads by default) printed "interrupted" and never
    # exited while a simulator step slept
    stuck, errfile = tmp_path / "stuck", tmp_path / "stderr.txt"
    with open(errfile, "w") as fh:  # (Python's own SIGINT handler, whatever this process has)
        proc = subprocess.Popen([sys.executable, "-c", THREADED, str(stuck)], stderr=fh,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        took, err = _signal_when(proc, stuck.exists, signal.SIGINT, errfile, limit=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and took < 20, f"exit {proc.returncode} after {took:.1f} s\n{err}"
    assert err.strip() == "interrupted", err


def test_threads_give_results_in_order_and_raise_a_task_error():
    from causalfair.backends import ThreadBackend

    def task(x):
        time.sleep(0.002 * (x % 3))
        if x == 5:
            raise ValueError("five")
        return x * x

    assert list(ThreadBackend(3).imap(task, range(5))) == [0, 1, 4, 9, 16]
    with pytest.raises(ValueError, match="five"):
        list(ThreadBackend(3).imap(task, range(9)))
    gen = ThreadBackend(2).imap(task, range(50))  # a consumer that stops early: the
    assert next(gen) == 0  # threads end, none is left waiting for work
    gen.close()
    deadline = time.monotonic() + 10
    while any(t.name.startswith("causalfair_") for t in threading.enumerate()):
        assert time.monotonic() < deadline, [t.name for t in threading.enumerate()]
        time.sleep(0.01)


def _busy_worker() -> Worker:
    """A worker running a task that sleeps (it reads no input meanwhile)."""
    w = Worker()
    assert w.send(backends.pickler().dumps((time.sleep, 1000)))
    return w


@pytest.mark.parametrize("graceful", [False, True], ids=["kill", "graceful"])
def test_an_interrupt_raised_inside_the_stop_still_stops_every_worker(monkeypatch, graceful):
    # a second Ctrl-C that arrives before stop_workers blocks the signals is raised by Python
    # inside it (at its next function call): the workers after that point were left running
    workers = [_busy_worker() for _ in range(3)]
    kill, calls = Worker.kill, []

    def interrupted_once(self):
        calls.append(self)
        if len(calls) == 1:
            raise KeyboardInterrupt
        kill(self)

    monkeypatch.setattr(Worker, "kill", interrupted_once)
    monkeypatch.setattr(Worker, "close", interrupted_once)
    try:
        with pytest.raises(KeyboardInterrupt):
            stop_workers(workers, graceful=graceful)
        alive = [w.proc.pid for w in workers if w.proc.poll() is None]
    finally:
        for w in workers:
            kill(w)
    assert alive == []


def test_an_interrupt_while_a_worker_starts_leaves_no_worker(monkeypatch):
    started: list[subprocess.Popen] = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    def interrupted(self, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    monkeypatch.setattr(Worker, "send", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            Worker()
        alive = [p.pid for p in started if p.poll() is None]
    finally:
        for p in started:
            p.kill()
            p.wait()
    assert len(started) == 1 and alive == []


@LINUX
def test_a_worker_nobody_holds_is_killed():
    w = _busy_worker()
    pid = w.proc.pid
    del w
    gc.collect()
    try:
        assert not _alive(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


FORKS = '''
import os, time

def fork_and_sleep(path):
    if os.fork() == 0:  # a process of the task, in a session of its own, that keeps the
        os.setsid()  # worker's pipes (inherited) and outlives the worker
        with open(path, "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(60)
        os._exit(0)
    time.sleep(1000)
'''


@LINUX
def test_killing_a_worker_never_blocks_on_its_input_pipe(tmp_path, monkeypatch):
    # an interrupt during a frame's write leaves bytes in the driver's buffer; closing the
    # pipe wrote them first, which blocked forever (signals blocked: not even a second
    # Ctrl-C) where a process the task forked into its own session still held the pipe
    from causalfair._usercode import load_callable

    (tmp_path / "cf_forks.py").write_text(FORKS)
    fn = load_callable("cf_forks:fork_and_sleep", search_path=tmp_path)
    pidfile = tmp_path / "child.pid"
    w = Worker()
    assert w.send(backends.pickler().dumps((fn, str(pidfile))))
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and w.proc.poll() is None
        time.sleep(0.05)
    child = int(pidfile.read_text())
    fd = w.proc.stdin.fileno()
    os.set_blocking(fd, False)
    try:
        while True:  # the pipe full: nobody reads it
            os.write(fd, b"\0" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(fd, True)
    w.proc.stdin.write(b"\0" * 100)  # what a cut frame leaves in the buffer
    done = threading.Thread(target=w.kill, daemon=True)
    try:
        done.start()
        done.join(10)
        blocked = done.is_alive()
    finally:
        os.kill(child, signal.SIGKILL)  # (which also frees a blocked kill)
        done.join(10)
    assert not blocked, "killing the worker blocked on its full input pipe"
    assert w.proc.poll() is not None


def test_an_interrupt_while_the_commands_load_is_one_line_and_130(monkeypatch, capsys):
    from causalfair import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    try:
        code = cli.main(["systems"])
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped main() as a traceback")
    assert code == 130
    assert capsys.readouterr().err == "causalfair: interrupted\n"


def test_main_called_from_python_gives_the_callers_signal_handlers_back(capsys):
    from causalfair.cli import main

    def mine(signum, frame):
        pass

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, mine)
        assert main(["systems"]) == 0
        after = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
    assert after == (signal.SIG_IGN, mine)


def test_a_time_limit_holds_while_a_worker_does_not_read_its_task(monkeypatch):
    # a task larger than the pipe's buffer was written with a blocking write before its
    # time limit started: a worker that never read its input (stuck in its start-up, e.g.
    # importing a user's module) held the driver in that write, past any limit
    started: list[subprocess.Popen] = []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    monkeypatch.setattr(workers, "_WORKER", "import time; time.sleep(60)")
    out: list = []
    mapping = threading.Thread(target=lambda: out.extend(backends.ProcessBackend(1).map(
        len, [b"\0" * 4_000_000], [1.0])), daemon=True)
    t0 = time.monotonic()
    try:
        mapping.start()
        mapping.join(20)
        took = time.monotonic() - t0
    finally:
        for p in started:  # (which also frees a driver blocked in its write)
            p.kill()
        mapping.join(10)
    assert took < 20 and len(out) == 1, f"the map did not return within {took:.0f} s"
    assert out[0].kind == "TimeoutError" and "time limit of 1 s" in out[0].message, out


def test_a_second_interrupt_while_the_first_is_reported_is_no_traceback(monkeypatch):
    # Ctrl-C twice: the second KeyboardInterrupt, raised while the command printed
    # "interrupted", escaped as a traceback
    import io

    from causalfair import cli
    from causalfair.commands import systems

    class Stderr(io.StringIO):
        hits = 0

        def write(self, text):
            Stderr.hits += 1
            if Stderr.hits == 1:
                raise KeyboardInterrupt
            return super().write(text)

    def interrupted(args):
        raise KeyboardInterrupt

    err = Stderr()
    monkeypatch.setattr(systems, "run", interrupted)
    monkeypatch.setattr(sys, "stderr", err)
    try:
        code = cli.main(["systems"])
    except KeyboardInterrupt:
        pytest.fail("the second interrupt escaped main() as a traceback")
    assert code == 130 and err.getvalue().strip().endswith("interrupted"), err.getvalue()

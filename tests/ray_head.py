"""A Ray cluster of the test's own on this machine, stopped without touching any other.

``ray stop`` stops every Ray cluster of the user on the machine (it signals Ray's
processes by name), so the tests never run it. :func:`ray_head` runs ``ray start --head
--block`` in a process session of its own, on a free port, with a temp dir of its own
(Ray's default temp dir, /tmp/ray, holds the address file that a plain ``ray.init()`` or
``ray status`` reads: a test must not rewrite it). Terminating that one process shuts down
the processes it started (Ray drains the node, then stops its raylet, GCS and the rest);
whatever of its session is left after that is killed by session id, so only processes this
test started are ever signalled. :func:`session_pids` and :func:`end_session` do the same
for a shell script run in a session of its own (tests/test_docs.py runs docs/scale.md's
example that way).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: The environment of a test's Ray head and of the drivers that connect to it: token
#: authentication, as `ray start` sets it up by default since Ray 2.59, with a token of
#: the test's own (`ray start` refuses token mode without one, and ~/.ray/auth_token
#: exists only where some Ray run has made it).
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32)}

#: What `ray start` prints once the head is up (`--block` prints it before it blocks).
STARTED = b"Ray runtime started"


def ray_cli() -> str:
    """The `ray` command of this Python."""
    cand = Path(sys.executable).parent / "ray"
    return str(cand) if cand.exists() else "ray"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int, timeout: float = 5.0) -> bool:
    """Whether something accepts a TCP connection at 127.0.0.1:PORT."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def short_temp_dir() -> str:
    """A new private folder under /tmp with a short path: Ray puts Unix sockets in
    it, whose paths must stay under 108 bytes (pytest's tmp_path is too deep)."""
    return tempfile.mkdtemp(prefix="cf-ray-", dir="/tmp")


def session_pids(sid: int) -> list[int]:
    """The processes of session SID (read from /proc), but this one."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # it exited meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            out.append(int(entry))
    return out


def end_session(sid: int, grace: float) -> list[int]:
    """Wait up to GRACE seconds for the processes of session SID to exit, then kill
    those left; returns the pids that had to be killed (none where all exited)."""
    deadline = time.monotonic() + grace
    while (left := session_pids(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def run_in_session(cmd: list[str], *, timeout: float, grace: float = 60.0,
                   **kwargs) -> tuple[subprocess.CompletedProcess, list[int]]:
    """Run CMD (output captured as text) as the leader of a new process session, then wait
    up to GRACE seconds (none where it failed) for what it left running in that session
    (a Ray head it started and stopped, still shutting down) to exit, and kill what is
    left: returns the finished command (exit code "timeout" past TIMEOUT) and the pids
    that had to be killed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True, **kwargs)
    code: int | str = "interrupted"
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        end_session(proc.pid, 0.0)  # all of it: a child may hold the output pipes
        out, err = proc.communicate()
        code = "timeout"
    finally:
        left = end_session(proc.pid, grace if code == 0 else 0.0)
    return subprocess.CompletedProcess(cmd, code, out, err), left


class RayHead:
    """A running ``ray start --head --block`` of this test: its ``address``, ``port``,
    ``temp_dir``, its process ``proc`` (the leader of its own session), ``log`` (the path
    of its output)."""

    def __init__(self, proc: subprocess.Popen, port: int, temp_dir: str):
        self.proc, self.port, self.temp_dir = proc, port, temp_dir
        self.address = f"127.0.0.1:{port}"
        self.log = Path(temp_dir) / "head.log"
        self.left: list[int] = []
        self.final_output = ""

    def alive(self) -> bool:
        """Its process runs and its GCS port accepts connections (`ray start --block`
        exits as soon as one of the processes it started dies)."""
        return self.proc.poll() is None and answers(self.port)

    def output(self) -> str:
        """What `ray start` printed (kept after :meth:`stop` removes the temp dir)."""
        return self.log.read_text(errors="replace") if self.log.exists() else self.final_output

    def stop(self, grace: float = 60.0) -> None:
        """Terminate its process (Ray drains the node and stops what it started), wait,
        and kill what is left of its session; ``left`` lists the pids that were."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.left = end_session(self.proc.pid, 10.0)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.final_output = self.output()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


@contextmanager
def ray_head(env: Mapping[str, str] | None = None, *, num_cpus: int = 2,
             timeout: float = 180.0) -> Iterator[RayHead]:
    """A Ray head of this test at 127.0.0.1:<a free port>, stopped on exit (only it).
    ENV: the environment of `ray start` (default: this process's)."""
    port, temp_dir = free_port(), short_temp_dir()
    cmd = [ray_cli(), "start", "--head", "--block", "--port", str(port), "--temp-dir",
           temp_dir, "--num-cpus", str(num_cpus), "--include-dashboard", "false",
           "--disable-usage-stats"]
    with open(Path(temp_dir) / "head.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ if env is None else env))
    head = RayHead(proc, port, temp_dir)
    try:
        deadline = time.monotonic() + timeout
        while STARTED not in head.log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited with {proc.returncode}" if proc.poll() is not None
                       else f"not started after {timeout} s")
                raise RuntimeError(f"$ {' '.join(cmd)}\n{why}; its output:\n{head.output()}")
            time.sleep(0.2)
        yield head
    finally:
        head.stop()

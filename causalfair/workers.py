"""Local worker processes: ``python -c`` children of this process that run pickled
tasks and send back their results, in order, over length-prefixed frames on their
stdin/stdout (:func:`in_workers`); the pool that :class:`causalfair.backends.ProcessBackend`
keeps, the time limits of :class:`causalfair.backends.SerialBackend`, and how every worker
is stopped (:func:`stop_workers`). A task's failure comes back as a :class:`TaskError`;
every warning a task raised, whatever the worker's filters (:class:`recording`), comes
back with its result and is raised again in the driver (:func:`reissue`), so the driver's
filters decide what shows, as for the same task run there. A worker's prints, and the
command's own (:func:`reader_may_leave`), are dropped once their reader has gone
(:class:`LeavingReader`).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from causalfair._limits import set_threads
from causalfair._usercode import find_user_modules, user_modules
from causalfair.errors import (
    INTERRUPT_SIGNAL,
    CausalfairError,
    first_line,
    terminal_text,
    user_interrupt,
)

__all__ = ["MAX_WARNINGS", "PYTHON_DEFAULT_FILTERS", "LeavingReader", "TaskError", "Timeouts", "Worker", "in_workers", "pickler", "reader_may_leave", "recording",
           "reissue", "reissued", "run_pickled", "run_task", "signal_interrupt", "stop_workers",
           "unsendable", "use_user_modules", "user_prints_to_stderr", "watch_interrupts",
           "worker_main"]


@dataclass(frozen=True)
class TaskError:
    """A task's failure: its exception type, one-line message, and traceback text (for
    an error that is not an input error)."""

    kind: str
    message: str
    traceback: str = ""
    input_error: bool = False


Timeouts = Sequence[float | None] | None
#: A map's ``done(i, result)``: called in the driver as the result of item ``i`` comes back;
#: what it returns is the result kept (:mod:`causalfair.backends`).
Done = Callable[[int, Any], Any] | None


def signal_interrupt(signum: int, frame: Any) -> None:
    """The command line's handler of SIGINT and SIGTERM: notes that an interrupt signal
    came (:data:`causalfair.errors.INTERRUPT_SIGNAL`), then raises KeyboardInterrupt (what
    Python's own handler does)."""
    INTERRUPT_SIGNAL[0] = True
    raise KeyboardInterrupt


def watch_interrupts(on: bool) -> None:
    """Start (``on``) or stop telling a real interrupt (:func:`signal_interrupt`) from a
    KeyboardInterrupt that user code raised itself
    (:func:`causalfair.errors.user_interrupt`: an error of that code, from
    :func:`~causalfair.errors.call_user` or :func:`run_task`)."""
    INTERRUPT_SIGNAL[0] = False if on else None


def run_task(fn: Callable[[Any], Any], item: Any, threads: int | None, *,
             interrupts: bool = True) -> Any:
    """``fn(item)``, or the :class:`TaskError` it raised, on ``threads`` torch/BLAS threads
    where given. An interrupt propagates (``interrupts``, outside a worker); a
    KeyboardInterrupt raised by the task's own code, which no interrupt signal caused
    (:func:`watch_interrupts`; in a worker, which ignores SIGINT, every one), is the
    task's error, so a policy raising it can neither stop a gate nor pass it."""
    if threads is not None:
        set_threads(threads)
    try:
        return fn(item)
    except CausalfairError as exc:
        return TaskError(type(exc).__name__, first_line(str(exc)) if str(exc) else "",
                         input_error=True)
    except (KeyboardInterrupt, GeneratorExit) as exc:
        if interrupts and not user_interrupt(exc):
            raise
        return TaskError(type(exc).__name__, f"user code raised {type(exc).__name__} itself "
                         "(no Ctrl-C or SIGTERM came); user code must return, not raise it",
                         input_error=True)
    except BaseException as exc:  # noqa: BLE001 - a crash (or sys.exit) is reported for its item
        return TaskError(type(exc).__name__, first_line(str(exc)) if str(exc) else "",
                         traceback.format_exc())


def pickler() -> Any:
    """cloudpickle (functions and classes of scripts and notebooks travel by value), or
    joblib's copy of it."""
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - joblib's copy (joblib comes with the stack)
        from joblib.externals import cloudpickle
    return cloudpickle


def _write_frame(fh: Any, data: bytes, deadline: float | None = None) -> bool:
    """Write one frame (8-byte length, then the bytes) to the pipe ``fh``. With a
    ``deadline`` (``time.monotonic()``), never blocks past it: False when it passes first
    (a reader that does not read; the frame is then cut, so the reader must be stopped)."""
    frame = len(data).to_bytes(8, "big") + data
    if deadline is None:
        fh.write(frame)
        fh.flush()
        return True
    import select
    import time

    fh.flush()
    fd, view = fh.fileno(), memoryview(frame)
    os.set_blocking(fd, False)
    try:
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                if select.select([], [fd], [], left)[1]:
                    view = view[os.write(fd, view):]
            except BlockingIOError:
                pass
    finally:
        os.set_blocking(fd, True)
    return True


def _read_frame(fh: Any) -> bytes | None:
    """One frame (8-byte length, then the bytes), or None at the end of the stream (the
    other side closed it or died)."""
    head = fh.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "big")
    data = fh.read(size)
    return data if len(data) == size else None


#: A worker's program: everything else arrives on its stdin.
class LeavingReader:
    """``sys.stdout`` / ``sys.stderr`` of a command (:func:`reader_may_leave`) and of a
    worker process (:func:`worker_main`): once the reader of the pipe has gone
    (``causalfair gate ... 2>&1 | head -1``), what is printed is dropped instead of raising
    :class:`BrokenPipeError`, so the command still writes its files (``--json``,
    ``--junit``) and exits with its own code, and a task that prints still gives its result.
    The stream's descriptor is pointed at the null device, so a last flush does not fail
    either. ``shown``: what is written is ``shown(text)`` (a command's stdout:
    :func:`causalfair.errors.terminal_text`)."""

    def __init__(self, stream: Any, shown: Callable[[str], str] | None = None) -> None:
        self._stream, self._gone, self._shown = stream, False, shown

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                self._stream.write(self._shown(text) if self._shown else text)
                return len(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self._gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass  # a stream without a descriptor (a test's capture): nothing is flushed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def reader_may_leave() -> Any:
    """Run a command with :class:`LeavingReader` as ``sys.stdout`` and ``sys.stderr``,
    flushed through them at the end: output still buffered when the reader has gone is
    dropped there, not at the interpreter's exit (whose failing flush exits 120). What
    every command prints on stdout (a summary, a table: a group name, a file name) goes
    through :func:`causalfair.errors.terminal_text`, as its one-line errors on stderr do
    (its JSON is ASCII, which it leaves as it is)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = LeavingReader(sys.stdout, terminal_text), LeavingReader(sys.stderr)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a stream the command closed
                pass
        sys.stdout, sys.stderr = saved


_WORKER = "from causalfair.workers import worker_main; worker_main()"


class _Kept:
    """A standard stream lent to user code: ``close`` does nothing (a task that closes
    ``sys.stdout`` closes it for itself only); everything else is the stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def user_prints_to_stderr() -> Any:
    """Run user code with its prints on stderr: ``sys.stdout`` and file descriptor 1 (a
    ``print``, an ``os.write(1, ...)``, a C library's output) point to stderr in the block,
    so nothing user code writes mixes into a command's stdout (the gate's table, ``--json
    -``) or a worker's result stream. After it, ``sys.stdin``, ``sys.stdout``,
    ``sys.stderr`` and descriptor 1 are what they were, whatever user code closed or
    replaced (a closed stream is a :class:`_Kept` one: its close did nothing)."""
    saved = sys.stdin, sys.stdout, sys.stderr
    for stream in saved[1:]:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    try:
        fd: int | None = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no descriptor 1 or 2 (a daemon's): only the streams are lent
        fd = None
    if saved[2] is not None:  # (None: no stderr at all, as under pythonw)
        sys.stdout = sys.stderr = _Kept(saved[2])
    if saved[0] is not None:
        sys.stdin = _Kept(saved[0])
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            saved[2].flush()
        if fd is not None:
            os.dup2(fd, 1)
            os.close(fd)
        sys.stdin, sys.stdout, sys.stderr = saved


def worker_main() -> None:
    """A worker process: reads (fn, item) frames on stdin, answers each with the pickled
    result of :func:`run_task` and the warnings the task raised (the driver shows them,
    :func:`reissue`) on the original stdout (a task runs in :func:`user_prints_to_stderr`,
    so its prints cannot corrupt the stream; they are dropped once its reader has gone,
    :class:`LeavingReader`), and exits when stdin closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides when a worker stops
    watch_interrupts(True)  # (so a KeyboardInterrupt here is user code's own)
    try:  # Linux: die with the driver even if it is killed outright
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - other systems
        pass
    inp, out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    sys.stdout, sys.stderr = LeavingReader(sys.stdout), LeavingReader(sys.stderr)
    pickle = pickler()
    setup = _read_frame(inp)
    if setup is None:
        return
    sys.path[:], modules = pickle.loads(setup)
    find_user_modules(modules)  # the driver's modules from users' folders
    while (frame := _read_frame(inp)) is not None:
        with user_prints_to_stderr():  # (each task gets the streams as they were)
            result, shown = run_pickled([frame])  # the warnings travel back with the result
        try:
            data = pickle.dumps((result, shown))
        except Exception as exc:  # noqa: BLE001 - the result cannot travel back
            data = pickle.dumps((TaskError(type(exc).__name__, "the result cannot be sent "
                                           "back: "
                                           f"{first_line(str(exc))[:200] if str(exc) else ''}",
                                           traceback.format_exc()), shown))
        _write_frame(out, data)
    # the end of the input: every result is written (frames are flushed), so skip the
    # interpreter's teardown (seconds with torch loaded, paid by the driver waiting)
    for fh in (sys.stdout, sys.stderr):
        try:
            fh.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


#: A warning as it travels from a worker: (message, category, file, line, module).
Shown = tuple[str, type[Warning], str, int, str | None]
#: The most distinct warnings one task sends back (a message that varies by call, raised
#: in a loop, would otherwise grow without bound); the rest are dropped.
MAX_WARNINGS = 100


#: Python's own default warning filters (none of -W, PYTHONWARNINGS, -X dev): they hide
#: DeprecationWarning and a few others, so a worker sets them aside (:class:`recording`).
PYTHON_DEFAULT_FILTERS = [("default", None, DeprecationWarning, "__main__", 0),
                          ("ignore", None, DeprecationWarning, None, 0),
                          ("ignore", None, PendingDeprecationWarning, None, 0),
                          ("ignore", None, ImportWarning, None, 0),
                          ("ignore", None, ResourceWarning, None, 0)]
_ALWAYS = ("always", None, Warning, None, 0)


class recording:  # noqa: N801 - used as a context manager, like warnings.catch_warnings
    """Record the warnings raised inside that Python's default filters would hide or show
    (:data:`PYTHON_DEFAULT_FILTERS` give way to ``always``), while every other filter of
    this process still applies first (those that imported libraries install, e.g. numpy's
    and torch's ``ignore`` filters, or an ``error`` of ``PYTHONWARNINGS``), as they would
    in the driver, which loads the same; filters the task installs are kept after it.
    Each distinct (message, category, file, line) once, in order, at most
    :data:`MAX_WARNINGS`, as :data:`Shown` tuples in the list ``with`` gives. The driver's
    filters then decide what shows (:func:`reissue`), as for the same task run there."""

    def __enter__(self) -> list[Shown]:
        self._saved, self._show = warnings.filters[:], warnings.showwarning
        self._mine = [f for f in self._saved if f not in PYTHON_DEFAULT_FILTERS] + [_ALWAYS]
        _set_filters(self._mine)
        shown: list[Shown] = []
        seen: set[tuple[str, type[Warning], str, int]] = set()

        def keep(message: Any, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: Any = None) -> None:
            cat = next((c for c in category.__mro__ if c.__module__ == "builtins"),
                       UserWarning)  # a category of the user's: its nearest built-in base
            key = (str(message), cat, str(filename), int(lineno or 0))
            if key not in seen and len(shown) < MAX_WARNINGS:
                seen.add(key)
                shown.append((*key, _module_of(key[2])))

        warnings.showwarning = keep
        return shown

    def __exit__(self, *exc: Any) -> None:
        added = [f for f in warnings.filters if f not in self._mine]  # by the task: kept
        _set_filters(added + self._saved)
        warnings.showwarning = self._show


def _set_filters(filters: list[Any]) -> None:
    """Make ``filters`` this process's warning filters (``resetwarnings`` first: it tells
    the warnings machinery that they changed, so no warning is skipped by an earlier
    decision)."""
    warnings.resetwarnings()
    warnings.filters[:] = filters


def _module_of(filename: str) -> str | None:
    """The name of the loaded module whose file is ``filename`` (what a filter's module
    pattern is matched against, and whose registry remembers what was shown), or None."""
    import sys

    for name, mod in list(sys.modules.items()):
        if getattr(mod, "__file__", None) == filename:
            return name
    return None


#: The driver's record of the workers' warnings already shown, for those raised in a
#: module the driver has not loaded (Python's "default" action: once per message and
#: line, as the same warnings raised in this process would be).
_SHOWN: dict[Any, Any] = {}


def reissue(shown: Sequence[Shown]) -> None:
    """Raise again, in the driver, the warnings a worker's task raised: the driver's filters
    (``-W``, ``PYTHONWARNINGS``, ``warnings.simplefilter``) and ``warnings.showwarning``
    (the command line's one-line format) then apply, with the module's own registry of
    warnings shown when the driver has loaded it, as for the same task run here."""
    import sys

    for message, category, filename, lineno, *rest in shown:
        module = rest[0] if rest else None
        mod = sys.modules.get(module) if module else None
        registry = (mod.__dict__.setdefault("__warningregistry__", {})
                    if mod is not None and getattr(mod, "__file__", None) == filename
                    else _SHOWN)
        warnings.warn_explicit(message, category, filename, lineno, module=module,
                               registry=registry)


def reissued(result: Any, shown: Sequence[Shown]) -> Any:
    """``result``, after :func:`reissue` of ``shown``; a :class:`TaskError` instead when
    the driver's filters turn one of them into an error (the task fails, as it would have
    in the driver)."""
    try:
        reissue(shown)
    except Warning as exc:
        return TaskError(type(exc).__name__, first_line(str(exc)) if str(exc) else "",
                         traceback.format_exc())
    return result


def run_pickled(payloads: Sequence[bytes], run: Callable[[Any, Any], Any] | None = None
                ) -> tuple[Any, list[Shown]]:
    """A worker's task: ``(fn, item)`` unpickled from ``payloads`` (one pickle of the
    pair, or one of each), then ``run(fn, item)`` (default :func:`run_task` on one
    thread); the result (a :class:`TaskError` for a task that cannot be unpickled here,
    e.g. a module the worker cannot import) and the warnings raised (:class:`recording`),
    which the worker sends back for the driver's :func:`reissued`."""
    pickle = pickler()
    with recording() as shown:
        try:
            fn, item = (pickle.loads(payloads[0]) if len(payloads) == 1
                        else (pickle.loads(payloads[0]), pickle.loads(payloads[1])))
        except BaseException as exc:  # noqa: BLE001 - e.g. a module the worker cannot import
            result: Any = TaskError(type(exc).__name__, "the task cannot be unpickled in the "
                                    f"worker: {first_line(str(exc))[:200] if str(exc) else ''}",
                                    traceback.format_exc())
        else:
            result = run_task(fn, item, 1, interrupts=False) if run is None else run(fn, item)
    return result, shown


#: The sets of users' modules already made importable in this process (a Ray worker runs
#: many tasks, each given the driver's list).
_FOUND: set[tuple[tuple[str, str], ...]] = set()


def use_user_modules(modules: Sequence[tuple[str, str]]) -> None:
    """:func:`causalfair._usercode.find_user_modules` of ``modules`` (the driver's users'
    modules, with absolute folders), once per process for each list."""
    key = tuple((str(name), str(folder)) for name, folder in modules)
    if key not in _FOUND:
        find_user_modules(list(key))
        _FOUND.add(key)


def driver_setup() -> tuple[list[str], list[tuple[str, str]]]:
    """What a worker is given at start: this process's search path and the modules it
    loaded from users' folders (:func:`causalfair._usercode.user_modules`)."""
    import sys

    return list(sys.path), user_modules()


class Worker:
    """One worker process (its own session, so a kill takes its children too)."""

    def __init__(self, setup: tuple[list[str], list[tuple[str, str]]] | None = None) -> None:
        import subprocess
        import sys

        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1"}
        self._group_killed = False
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, start_new_session=True)
        # the search path and the modules loaded from users' folders (a worker dead at
        # start: its task says so)
        try:
            self.setup = driver_setup() if setup is None else setup
            self.send(pickler().dumps(self.setup))
        except BaseException:  # e.g. an interrupt: no worker is left behind
            self.kill()
            raise

    def __del__(self) -> None:
        # the last guard: a worker nobody holds (a stop cut short) is killed when collected
        try:
            if getattr(self, "proc", None) is not None and self.proc.poll() is None:
                self.kill()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit; it dies with the driver
            pass

    def fileno(self) -> int:
        return self.proc.stdout.fileno()

    def send(self, data: bytes, deadline: float | None = None) -> bool | None:
        """True: sent; False: the worker is dead; None: ``deadline`` passed first."""
        try:
            return _write_frame(self.proc.stdin, data, deadline) or None
        except OSError:  # (a broken pipe)
            return False

    def receive(self) -> Any:
        data = _read_frame(self.proc.stdout)
        if data is None:
            return self.died()
        try:
            result, shown = pickler().loads(data)
        except Exception as exc:  # noqa: BLE001 - e.g. a result class the driver cannot import
            return TaskError(type(exc).__name__, "the result cannot be unpickled: "
                             f"{first_line(str(exc))[:200] if str(exc) else ''}",
                             traceback.format_exc())
        return reissued(result, shown)

    def died(self) -> TaskError:
        import signal

        self.kill()
        code = self.proc.returncode
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               and -code in signal.Signals._value2member_map_ else f"exit code {code}")
        return TaskError("WorkerError", f"worker failed: its process ended ({how})")

    def kill_group(self) -> None:
        """Kill the worker and everything it started (its process group): a process a
        task forked and left running too, even once the worker itself has ended (it would
        hold the command's stderr, and the worker's result pipe, open). Once: the group's
        id is the worker's pid."""
        import signal

        if not self._group_killed:
            self._group_killed = True
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                if self.proc.poll() is None:
                    self.proc.kill()

    def kill(self) -> None:
        """Kill the worker and everything it started (:meth:`kill_group`), now, and close
        its pipes."""
        self.kill_group()
        self.proc.wait()
        for fh in (self.proc.stdin, self.proc.stdout):
            try:  # the descriptor first: what a cut frame left in the buffer is dropped, not
                # written (a write that would block where a process the worker forked into
                # a session of its own still holds the pipe)
                getattr(fh, "raw", fh).close()
                fh.close()
            except (OSError, ValueError):
                pass

    def end_input(self) -> None:
        """Close the worker's stdin: an idle worker then exits."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def close(self) -> None:
        """Let an idle worker exit (end of its stdin); kill it if it lingers."""
        import subprocess

        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


def in_workers(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int,
                timeouts: Timeouts, pool: list[Worker] | None = None,
                setup: tuple[list[str], list[tuple[str, str]]] | None = None,
                done: Done = None) -> list[Any]:
    """``fn`` over ``items`` in at most ``jobs`` worker processes, results in item order.
    A task with a time limit (``timeouts[i]`` seconds, counted from when the driver starts
    sending it to its worker) that is still running, or unsent, then has its worker killed
    and becomes a ``TimeoutError``.
    On any exception here (an interrupt included) every worker is killed before it
    propagates. ``pool``: idle workers of earlier maps, used first where they started
    with this driver's search path and users' modules (the others exit); the idle
    workers are put back in it after the map. ``setup``: the search path and users' modules
    the workers get (default :func:`driver_setup`). ``done(i, result)``: called here as
    each result comes back; what it returns is the result kept."""
    import select
    import time

    pickle = pickler()
    finish = (lambda i, r: r) if done is None else done
    pending = enumerate(items)
    out: list[Any] = []
    setup = driver_setup() if setup is None else setup
    kept = [w for w in pool or () if w.setup == setup and w.proc.poll() is None]
    stop_workers([w for w in pool or () if w not in kept], graceful=True)
    idle: list[Worker] = kept
    busy: dict[Worker, tuple[int, float | None]] = {}
    started: list[Worker] = list(kept)
    ok = False
    try:
        more = True
        while more or busy:
            while more and len(busy) < jobs:
                nxt = next(pending, None)
                if nxt is None:
                    more = False
                    break
                i, item = nxt
                out.append(None)
                limit = timeouts[i] if timeouts else None
                try:
                    data = pickle.dumps((fn, item))
                except Exception as exc:  # noqa: BLE001 - reported for its item
                    out[i] = finish(i, unsendable(exc))
                    continue
                w = idle.pop() if idle else Worker(setup)
                if w not in started:
                    started.append(w)
                end = None if limit is None else time.monotonic() + limit
                sent = w.send(data, end)
                if not sent:  # dead, or not reading its input within the limit
                    out[i] = finish(i, w.died() if sent is False else _over(w, limit))
                    continue
                busy[w] = (i, end)
            if not busy:
                continue
            ends = [d for _, d in busy.values() if d is not None]
            wait = POLL_S if not ends else min(POLL_S, max(0.0, min(ends) - time.monotonic()))
            ready, _, _ = select.select(list(busy), [], [], wait)
            for w in ready:
                i, _ = busy.pop(w)
                out[i] = finish(i, w.receive())
                if w.proc.poll() is None:  # (a worker that died was reaped by receive)
                    idle.append(w)
            for w, (i, _) in list(busy.items()):  # dead, with no end of its stream: a
                # process it forked holds its pipe; killed, so the pipe reads to its end
                if w.proc.poll() is not None:
                    del busy[w]
                    w.kill_group()
                    out[i] = finish(i, w.receive())
            now = time.monotonic()
            for w, (i, end) in list(busy.items()):
                if end is not None and now >= end:
                    del busy[w]
                    out[i] = finish(i, _over(w, timeouts[i]))
        ok = True
        return out
    finally:
        if ok and pool is not None:  # every live worker is idle now: kept for the next map
            pool[:] = [w for w in started if w.proc.poll() is None]
            stop_workers([w for w in started if w not in pool], graceful=True)
        else:
            if pool is not None:
                pool.clear()
            stop_workers(started, graceful=ok)


#: Seconds between checks that the busy workers are alive (one that died while a process it
#: forked still holds its result pipe gives no end of stream).
POLL_S = 1.0


def unsendable(exc: Exception) -> TaskError:
    """The error of a task that cannot be pickled for a worker (``exc``: why)."""
    return TaskError(type(exc).__name__, "the task cannot be sent to a worker: "
                     f"{first_line(str(exc))[:200] if str(exc) else ''}",
                     traceback.format_exc())


def _over(w: Worker, limit: float) -> TaskError:
    """Kill ``w``, whose task passed its time limit of ``limit`` seconds; the task's error."""
    w.kill()
    return TaskError("TimeoutError", f"stopped after its time limit of {limit:g} s (raise the "
                     "limit with the spec's timeout or --timeout)", input_error=True)


def stop_workers(workers: list[Worker], *, graceful: bool) -> None:
    """Stop every worker: idle ones exit at the end of their input (``graceful``), else
    all are killed at once. Interrupts wait until every worker is gone: SIGINT and SIGTERM
    are blocked meanwhile, and one that Python raises here all the same (it came before
    the block) kills the workers left, then propagates."""
    import signal

    stops = (signal.SIGINT, signal.SIGTERM)
    interrupt: BaseException | None = None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        todo = list(workers)
        try:
            for w in todo if graceful else ():  # every worker sees the end of its input
                w.end_input()  # first: they exit together
        except KeyboardInterrupt as exc:
            interrupt = exc
        while todo:
            try:
                todo[0].close() if graceful and interrupt is None else todo[0].kill()
            except KeyboardInterrupt as exc:
                interrupt = exc
                continue  # (kill again: it is safe to repeat)
            todo.pop(0)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if interrupt is not None:
        raise interrupt

"""Where independent work units run: in this process, in a pool of local worker
processes (:mod:`causalfair.workers`), or on a Ray cluster. A backend maps a function over items and returns the
results in the items' order (never completion order). Workers use one torch/BLAS thread
each, receive everything they need (seeds included) in their item, and write no files:
the driver writes every output.

A task that raises is reported as a :class:`TaskError` in its slot (the other tasks
still run); the caller decides what a failure means (the gate reports it for its spec,
exit code 2). A map's ``done(i, result)``, where given, is called in the driver as each
result comes back (what it returns is the result kept), so what it writes (the gate's
retrained checkpoints) is written even when an interrupt stops the map later. A task may
get a time limit (``timeouts``): it then runs in a worker process that is killed when the
limit passes, so user code stuck in a C call or a sleep is stopped too, and the task is
reported as a ``TimeoutError``. An interrupt (Ctrl-C,
or SIGTERM under the command line) kills every worker process before it propagates.
"""

from __future__ import annotations

import contextlib
import numbers
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from causalfair._limits import (
    THREAD_CAPS,
    THREAD_CAPS_AT_START,
    check_timeout,  # the one check, re-exported
)
from causalfair._usercode import user_modules
from causalfair.errors import InputError, first_line, short
from causalfair.workers import (
    Done,
    TaskError,
    Timeouts,
    Worker,
    in_workers,
    pickler,
    reissued,
    run_pickled,
    run_task,
    stop_workers,
    unsendable,
    use_user_modules,
)

__all__ = ["BACKENDS", "DEVICES", "Backend", "ProcessBackend", "RayBackend", "SerialBackend", "TaskError",
           "check_address", "check_timeout", "make_backend", "resolve_device", "ThreadBackend",
           "holding",
           "available_cores", "resolve_jobs", "engine_device", "DEVICE_ENV", "pickler", "reachable",
           "MAX_JOBS"]


class Backend(Protocol):
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            timeouts: Timeouts = None, done: Done = None) -> list[Any]: ...


class SerialBackend:
    """Run every task here, one after the other (the default). A task with a time limit
    runs in one worker process instead (killed when the limit passes)."""

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            timeouts: Timeouts = None, done: Done = None) -> list[Any]:
        finish = (lambda i, r: r) if done is None else done
        if not timeouts or all(t is None for t in timeouts):
            return [finish(i, run_task(fn, item, None)) for i, item in enumerate(items)]
        items = list(items)
        timed = [i for i, t in enumerate(timeouts) if t is not None]
        out: list[Any] = [None] * len(items)
        for i, r in zip(timed, in_workers(fn, [items[i] for i in timed], 1,
                                           [timeouts[i] for i in timed],
                                           done=lambda j, r: finish(timed[j], r)), strict=True):
            out[i] = r
        for i, item in enumerate(items):
            if timeouts[i] is None:
                out[i] = finish(i, run_task(fn, item, None))
        return out


class ProcessBackend:
    """A pool of ``jobs`` local worker processes (``python -c ...`` children that receive
    their tasks pickled with cloudpickle, so functions and classes defined in scripts and
    notebooks travel too). A worker that dies, or whose task passes its time limit, is
    reported for its task (and replaced); an interrupt kills every worker. POSIX only.

    Workers outlive a map: the next map of the same backend (an audit's decomposition,
    then its Lambda rollout) reuses them, so a run pays their start-up and imports once,
    while the driver's search path and users' modules are those they started with. They
    exit when the backend is closed or collected, or the driver ends."""

    def __init__(self, jobs: int):
        self.jobs = resolve_jobs(jobs)
        self._pool: list[Worker] = []

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            timeouts: Timeouts = None, done: Done = None) -> list[Any]:
        return in_workers(fn, items, self.jobs, timeouts, self._pool, done=done)

    def close(self) -> None:
        """Let the idle workers exit."""
        pool, self._pool = self._pool, []
        stop_workers(pool, graceful=True)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit; workers end with the driver
            pass


_ADDRESS_FORMS = "'auto', HOST:PORT or ray://HOST:PORT"


def check_address(address: Any, field: str = "--address") -> tuple[str, int] | None:
    """Check a Ray address ("auto", "HOST:PORT" or "ray://HOST:PORT"; ``field`` names
    where it came from); returns (host, port), or None for "auto"."""
    import re

    text = address.strip() if isinstance(address, str) else None
    if text == "auto":
        return None
    m = re.fullmatch(r"(?:ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})", text or "")
    if m is None or not 1 <= int(m.group(2)) <= 65535:
        raise InputError(f"{field}: bad value {short(address)}; expected {_ADDRESS_FORMS} "
                         "(e.g. 127.0.0.1:6379, the address `ray start --head` prints).")
    return m.group(1).strip("[]"), int(m.group(2))


def reachable(host: str, port: int, seconds: float = 5.0) -> str | None:
    """None when a TCP connection to ``host:port`` opens within ``seconds``, else why not
    (one line): the check made before a client (Ray, MLflow) that would retry for minutes."""
    import socket

    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as exc:
        return "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
    return None


def _probe(address: str, field: str, seconds: float = 5.0) -> None:
    """Refuse an address where nothing answers, before Ray would retry it for minutes."""
    where = check_address(address, field)
    if where is None:
        return
    why = reachable(*where, seconds=seconds)
    if why is not None:
        raise InputError(f"{field}: nothing answers at {address.strip()!r} ({why}); start the "
                         f"cluster there (`ray start --head --port {where[1]}`), or check the "
                         "address.") from None


class RayBackend:
    """Tasks on a Ray cluster: ``address`` ("auto", "host:port" or "ray://host:port"), else
    the ``RAY_ADDRESS`` environment variable, else a local Ray instance started for the
    call with ``jobs`` CPUs (all CPUs when None) and shut down after it. The address is
    checked first (its form, then a TCP connection with a 5 s limit), so a wrong one is an
    :class:`~causalfair.errors.InputError` within seconds. Each task asks for one CPU and
    is not retried (a retried task would hide a crash). A task whose worker dies is
    reported as a :class:`TaskError`; a task with a time limit runs in a worker process of
    its Ray worker, killed when the limit passes. Workers read specs, checkpoints and user
    modules at the paths the driver gives them (a module the driver loaded from a user's
    folder, e.g. ``--search-path``, is found in that folder, as local workers find it): on a
    multi-node cluster those paths must exist on every node (a shared filesystem;
    docs/scale.md). The warnings a task raises come back with its result and are raised
    again here (:func:`causalfair.workers.reissued`). Inside :meth:`held` (a command's
    several maps, :func:`holding`) the Ray a map starts or connects to is kept for the
    next map and let go when the block ends: one connection per command."""

    def __init__(self, address: str | None = None, jobs: int | None = None):
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise InputError(f"jobs: must be an integer >= 1, got {jobs!r}.")
        if address is not None:
            check_address(address, "--address")
            self.field = "--address"
        else:
            address = os.environ.get("RAY_ADDRESS") or None
            self.field = "RAY_ADDRESS"
            if address is not None:
                check_address(address, self.field)
        self.address = address.strip() if address else None
        self.jobs = jobs
        self._hold = False  # inside held(): keep the Ray a map started for the next map
        self._started = False  # a map started (or connected to) the Ray held now

    @contextlib.contextmanager
    def held(self) -> Iterator[RayBackend]:
        """Within the block, every map uses the one Ray the first map starts or connects
        to; it is let go (``ray.shutdown``) when the block ends, as one map alone lets go
        of it."""
        self._hold = True
        try:
            yield self
        finally:
            self._hold = False
            if self._started:
                self._started = False
                import ray

                ray.shutdown()

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            timeouts: Timeouts = None, done: Done = None) -> list[Any]:
        try:
            import ray
        except ImportError:
            raise InputError("backend 'ray': Ray is not installed; install the extra with "
                             "pip install 'causalfair[ray]'.") from None
        started = not ray.is_initialized()
        if started:
            if self.address is not None:
                _probe(self.address, self.field)
            kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                          configure_logging=False)
            if self.address is None and self.jobs is not None:
                kwargs["num_cpus"] = self.jobs
            try:  # no address: a Ray of this command's own ("local"), never a cluster
                # that Ray would otherwise find on this machine (the latest `ray start`)
                ray.init(address=self.address or "local", **kwargs)
            except ConnectionError as exc:
                if "InvalidAuthToken" in str(exc.__cause__ or ""):
                    raise InputError(
                        f"backend 'ray': the cluster at {self.address!r} wants its "
                        "authentication token (clusters from `ray start` use token "
                        "authentication by default since Ray 2.59); set RAY_AUTH_MODE=token "
                        "here, with the token in ~/.ray/auth_token or RAY_AUTH_TOKEN.") from None
                raise InputError(f"backend 'ray': cannot reach the cluster at {self.address!r} "
                                 f"({first_line(str(exc))[:200]}); start it with "
                                 "`ray start --head`, or check --address / RAY_ADDRESS.") from None
        refs: list[Any] = []
        try:
            opts: dict[str, Any] = dict(num_cpus=1, max_retries=0)
            if os.environ.get(DEVICE_ENV):  # --device reaches the workers, as in local ones
                env = {DEVICE_ENV: os.environ[DEVICE_ENV]}
                if env[DEVICE_ENV].startswith("cuda"):  # the tasks ask Ray for no GPU: keep
                    # Ray (older versions, by default) from hiding the machine's GPUs
                    env["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
                opts["runtime_env"] = {"env_vars": env}
            task = ray.remote(**opts)(_remote)
            pickle = pickler()
            # the users' modules, found by the workers in their folders (as local workers
            # find them), and the function, pickled once: a task's arguments are bytes, so
            # Ray unpickles nothing before the task can make those modules importable
            modules = [(name, os.path.abspath(folder)) for name, folder in user_modules()]
            try:
                fn_data: Any = pickle.dumps(fn)
            except Exception as exc:  # noqa: BLE001 - reported for every item
                fn_data = unsendable(exc)
            fn_ref = fn_data if isinstance(fn_data, TaskError) else ray.put(fn_data)
            for i, item in enumerate(items):
                limit = timeouts[i] if timeouts else None
                try:
                    data = pickle.dumps(item)
                except Exception as exc:  # noqa: BLE001 - reported for its item
                    refs.append(unsendable(exc))
                    continue
                refs.append(fn_ref if isinstance(fn_ref, TaskError)
                            else task.remote(modules, fn_ref, data, limit))
            out: list[Any] = []
            for i, ref in enumerate(refs):  # in item order, whatever order they finish in
                if isinstance(ref, TaskError):
                    r = ref
                else:
                    try:  # the task's warnings are shown here, as local workers' are
                        r = reissued(*ray.get(ref))
                    except ray.exceptions.RayError as exc:
                        first = (first_line(str(exc).strip())[:200] if str(exc).strip()
                                 else "")
                        r = TaskError(type(exc).__name__, f"worker failed: {first}", "")
                out.append(r if done is None else done(i, r))
            return out
        except BaseException:  # an interrupt: stop the tasks still running on the cluster
            for ref in refs:
                try:
                    if not isinstance(ref, TaskError):
                        ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001, S110 - finished or already gone
                    pass
            raise
        finally:
            if started and self._hold:  # the next map of the block uses it
                self._started = True
            elif started:
                ray.shutdown()


def _remote(modules: list[tuple[str, str]], fn_data: bytes, item_data: bytes,
            limit: float | None) -> tuple[Any, list[Any]]:
    """A task on a Ray worker: the driver's users' ``modules`` made importable, then
    ``fn(item)`` (:func:`~causalfair.workers.run_pickled`: its result and warnings), in a
    worker process of this one killed after ``limit`` seconds when there is a limit."""
    import sys

    use_user_modules(modules)
    run = None if limit is None else (
        lambda fn, item: in_workers(fn, [item], 1, [limit],
                                    setup=(list(sys.path), list(modules)))[0])
    return run_pickled([fn_data, item_data], run)


#: Environment variables that cap the threads a process may use, read as they were when
#: causalfair started (the command line sets OMP_NUM_THREADS itself for ``--threads``).
JOB_CAPS = THREAD_CAPS


def _cgroup_cpus() -> float | None:
    """The CPU quota of this process's cgroup (v2 ``cpu.max``, else v1 ``cfs_quota_us`` /
    ``cfs_period_us``) in CPUs, or None without one."""
    for path, split in (("/sys/fs/cgroup/cpu.max", True),
                        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", False)):
        try:
            with open(path, encoding="ascii") as fh:
                text = fh.read().split()
            if not split:
                with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii") as fh:
                    text.append(fh.read().strip())
            quota, period = text[0], text[1]
            if quota in ("max", "-1"):
                return None
            return max(float(quota) / float(period), 1.0)
        except (OSError, IndexError, ValueError, ZeroDivisionError):
            continue
    return None


def available_cores() -> int:
    """The cores this process may use (what ``jobs="auto"`` means, the default): the
    CPUs of its affinity mask (``os.sched_getaffinity``), capped by its cgroup's CPU quota
    (rounded up) and by the first of :data:`JOB_CAPS` set to a whole number when causalfair
    started (``causalfair._limits.THREAD_CAPS_AT_START``; e.g. ``OMP_NUM_THREADS=1``)."""
    import math

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_cpus()
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    for var in JOB_CAPS:
        text = _CAPS_AT_IMPORT.get(var)
        if text is not None and text.strip().isdigit() and int(text) >= 1:
            cores = min(cores, int(text))
            break
    return max(1, cores)


_CAPS_AT_IMPORT = THREAD_CAPS_AT_START


#: Most workers (threads or processes) ``jobs`` / ``--jobs`` may ask for: more than any
#: machine runs usefully at once, and far fewer than the threads a process may start.
MAX_JOBS = 1024


def resolve_jobs(value: Any = "auto", field: str = "jobs") -> int:
    """Workers for ``value``: a whole number from 1 to :data:`MAX_JOBS` (numpy integers
    too), or ``"auto"`` / None (:func:`available_cores`); anything else is an
    :class:`InputError` naming ``field``. A backend starts no more workers than it has
    tasks, whatever ``jobs``."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return available_cores()
    given = value  # echoed as given: 0, or '0' typed on the command line
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"{field}: bad value {short(given, 40)}; give a whole number >= 1 or "
                         "'auto' (the cores this process may use).")
    if value > MAX_JOBS:
        raise InputError(f"{field}: {int(value)} workers asked for, more than the {MAX_JOBS} "
                         f"allowed; give a whole number from 1 to {MAX_JOBS}, or 'auto' (the "
                         f"cores this process may use, here {available_cores()}).")
    return int(value)


class ThreadBackend:
    """``jobs`` threads of this process (numpy, BLAS and torch release the GIL in their
    array work; one job runs each task here, in the calling thread). ``imap`` yields
    results in item order with at most ``2 * jobs`` tasks in flight, so memory stays
    O(jobs) tasks; BLAS runs one thread per task meanwhile, so a product rounds the same
    whatever ``jobs``. Tasks must not share mutable state (the Monte Carlo
    engine runs a policy with ``start_batch`` or ``thread_safe = False``, or a simulator
    with ``thread_safe = False``, serially)."""

    def __init__(self, jobs: int):
        self.jobs = resolve_jobs(jobs)

    def imap(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Any:
        from collections import deque

        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, user_api="blas"):
            if self.jobs == 1 or (isinstance(items, (list, tuple)) and len(items) <= 1):
                for item in items:
                    yield fn(item)
                return
            pool = _Threads(self.jobs)
            window: Any = deque()
            try:
                for item in items:
                    window.append(pool.submit(fn, item))
                    if len(window) >= 2 * self.jobs:
                        yield window.popleft().result()
                while window:
                    yield window.popleft().result()
            finally:  # on an error or an interrupt: drop what has not started, wait for nothing
                pool.shutdown()

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            timeouts: Timeouts = None, done: Done = None) -> list[Any]:
        if timeouts and any(t is not None for t in timeouts):
            return SerialBackend().map(fn, items, timeouts, done)
        results = self.imap(lambda item: run_task(fn, item, None), items)
        return [r if done is None else done(i, r) for i, r in enumerate(results)]


class _Threads:
    """At most ``jobs`` daemon threads (one started per call until there are ``jobs``)
    running submitted calls, each answered by a
    ``concurrent.futures.Future``. Not a ``ThreadPoolExecutor``, whose threads Python joins
    at exit: one stuck in user code kept an interrupted command from ever exiting."""

    def __init__(self, jobs: int) -> None:
        import queue

        self._tasks: Any = queue.SimpleQueue()
        self._open, self._jobs, self._started = True, jobs, 0

    def submit(self, fn: Callable[[Any], Any], item: Any) -> Any:
        """Queue a call; a thread is started with each of the first ``jobs`` calls, so
        that no more threads run than there are tasks."""
        import threading
        from concurrent.futures import Future

        fut: Any = Future()
        self._tasks.put((fut, fn, item))
        if self._started < self._jobs:
            threading.Thread(target=self._work, name=f"causalfair_{self._started}",
                             daemon=True).start()
            self._started += 1
        return fut

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            fut, fn, item = task
            if self._open and fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(item))
                except BaseException as exc:  # noqa: BLE001 - raised where its result is read
                    fut.set_exception(exc)
            del task, fut, fn, item  # (held no longer than its call)

    def shutdown(self) -> None:
        """Calls not started are dropped; each thread ends after its current call."""
        self._open = False
        for _ in range(self._started):
            self._tasks.put(None)


BACKENDS = ("serial", "process", "ray")
#: What ``--device`` / ``device=`` accept (``cuda:N`` too): where torch computes.
DEVICES = ("cpu", "cuda", "auto")


def resolve_device(value: Any = "cpu", field: str = "--device", *, grid: bool = False) -> str:
    """The torch device ``value`` names: ``"cpu"`` (the default; torch is not imported),
    ``"cuda"`` / ``"cuda:N"``, or ``"auto"``: ``"cuda"`` when torch sees a GPU, else
    ``"cpu"``; and always ``"cpu"`` with ``grid``, a network evaluated only on the (group,
    level) grid (the lending trainer: a few dozen rows, where a GPU adds transfers and
    nothing else; 0.39x the CPU's iterations per second on an H100, docs/training.md). A
    GPU asked for where torch sees none (or a ``cuda:N`` past the last) is an
    :class:`InputError` naming ``field``. Resolving a GPU sets ``CUBLAS_WORKSPACE_CONFIG``
    (``:4096:8``) unless set, so that cuBLAS products repeat run to run."""
    import re

    text = "cpu" if value is None else str(value).strip().lower()
    if text == "cpu":
        return "cpu"
    if text not in DEVICES and not re.fullmatch(r"cuda:\d{1,3}", text):
        raise InputError(f"{field}: bad value {short(value, 40)}; allowed values: cpu, cuda, "
                         "cuda:N, auto.")
    if text == "auto" and grid:
        return "cpu"
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if text == "auto" and not n:
        return "cpu"
    text = "cuda" if text == "auto" else text
    if int(text.partition(":")[2] or 0) >= n:
        seen = "no GPU" if n == 0 else f"{n} GPU(s) (cuda:0 to cuda:{n - 1})"
        build = (f" (torch {torch.__version__} is a CPU-only build: install a CUDA build of "
                 "torch to use a GPU)" if getattr(torch.version, "cuda", None) is None else "")
        raise InputError(f"{field}: {text!r} asked for, but torch sees {seen} on this machine"
                         f"{build}; use cpu, or auto (the GPU when there is one).")
    # cuBLAS takes its workspace setting at the process's first product on a GPU: a fixed
    # workspace, set before any work there, lets products repeat bit for bit
    # (torch.use_deterministic_algorithms; causalfair.train.device.device_determinism)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return text


#: Environment variable giving the engines' default device (the command line's
#: ``--device`` sets it, so that gate workers inherit it).
DEVICE_ENV = "CAUSALFAIR_DEVICE"


def engine_device(device: Any = None) -> str:
    """The device a simulation engine evaluates network policies on: ``device`` when
    given, else ``CAUSALFAIR_DEVICE``, else ``"cpu"``; resolved by :func:`resolve_device`
    (torch is imported only for a value other than cpu)."""
    if device is None:
        device = os.environ.get(DEVICE_ENV) or "cpu"
        return resolve_device(device, DEVICE_ENV)
    return resolve_device(device, "device")


def holding(backend: Any) -> contextlib.AbstractContextManager[Any]:
    """A block in which ``backend`` keeps what its maps start for the next map (Ray:
    :meth:`RayBackend.held`, one connection for a command's maps); for the others a block
    that does nothing (a :class:`ProcessBackend`'s workers serve its maps until it is
    closed)."""
    held = getattr(backend, "held", None)
    return held() if callable(held) else contextlib.nullcontext(backend)


def make_backend(jobs: int = 1, backend: str | None = None, address: str | None = None) -> Backend:
    """The backend named ``backend`` ("serial", "process" with ``jobs`` workers, or "ray"
    at ``address``). Without a name: "serial" for one job, else "process"."""
    if backend is None:
        backend = "serial" if jobs == 1 else "process"
    if backend not in BACKENDS:
        raise InputError(f"backend: bad value {backend!r}; allowed values: {', '.join(BACKENDS)}.")
    if address is not None and backend != "ray":
        raise InputError(f"address: only with backend 'ray' (got backend {backend!r}).")
    if backend == "serial":
        return SerialBackend()
    if backend == "process":
        return ProcessBackend(jobs)
    return RayBackend(address, None if jobs == 1 else jobs)

"""Where independent work units run (issue 16): in this process, in a pool of local
worker processes, or on a Ray cluster. A backend maps a function over items and returns the results in the
items' order (never completion order). Workers use one torch/BLAS thread each, receive
everything they need (seeds included) in their item, and write no files: the driver
writes every output.

A task that raises is reported as a :class:`TaskError` in its slot (the other tasks
still run); the caller decides what a failure means (the gate reports it for its spec,
exit code 2).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from causalfair._limits import set_threads
from causalfair.errors import CausalfairError, InputError

__all__ = ["BACKENDS", "Backend", "ProcessBackend", "RayBackend", "SerialBackend", "TaskError",
           "make_backend"]


@dataclass(frozen=True)
class TaskError:
    """A task's failure: its exception type, one-line message, and traceback text (for
    an error that is not an input error)."""

    kind: str
    message: str
    traceback: str = ""
    input_error: bool = False


class Backend(Protocol):
    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]: ...


def _run(fn: Callable[[Any], Any], item: Any, threads: int | None) -> Any:
    if threads is not None:
        set_threads(threads)
    try:
        return fn(item)
    except CausalfairError as exc:
        return TaskError(type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "",
                         input_error=True)
    except Exception as exc:  # noqa: BLE001 - a crash in a task is reported for its item
        return TaskError(type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "",
                         traceback.format_exc())


class SerialBackend:
    """Run every task here, one after the other (the default)."""

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return [_run(fn, item, None) for item in items]


class ProcessBackend:
    """A pool of ``jobs`` local worker processes (loky, which pickles functions and classes
    defined in scripts and notebooks too). Each ``map`` starts its own pool and shuts it
    down (joblib's reusable pool can hang when its idle workers time out while a new
    call arrives). A worker that dies is reported as a failed task."""

    def __init__(self, jobs: int):
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise InputError(f"jobs: must be an integer >= 1, got {jobs!r}.")
        self.jobs = jobs

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        from joblib.externals.loky import ProcessPoolExecutor

        out: list[Any] = [None] * len(items)
        pending = list(range(len(items)))
        with ProcessPoolExecutor(max_workers=min(self.jobs, max(1, len(items)))) as pool:
            futures = {i: pool.submit(_run, fn, items[i], 1) for i in pending}
            for i in pending:
                try:
                    out[i] = futures[i].result()
                except Exception:  # noqa: BLE001 - the pool broke (a worker died)
                    out[i] = _LOST
        for i, r in enumerate(out):  # tasks lost with a dead worker: each in its own pool
            if r is _LOST:
                out[i] = _alone(fn, items[i])
        return out


_LOST = object()


def _alone(fn: Callable[[Any], Any], item: Any) -> Any:
    from joblib.externals.loky import ProcessPoolExecutor

    try:
        with ProcessPoolExecutor(max_workers=1) as pool:
            return pool.submit(_run, fn, item, 1).result()
    except Exception as exc:  # noqa: BLE001 - this task's own worker died
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        return TaskError(type(exc).__name__, f"worker failed: {first}" if first else "worker failed")


class RayBackend:
    """Tasks on a Ray cluster: ``address`` ("auto", "host:port" or "ray://host:port"), else
    the ``RAY_ADDRESS`` environment variable, else a local Ray instance started for the
    call with ``jobs`` CPUs (all CPUs when None) and shut down after it. Each task asks for
    one CPU and is not retried (a retried task would hide a crash). A task whose worker
    dies is reported as a :class:`TaskError`. Workers read specs, checkpoints and user
    modules at the paths the driver gives them: on a multi-node cluster those paths must
    exist on every node (a shared filesystem; docs/scale.md)."""

    def __init__(self, address: str | None = None, jobs: int | None = None):
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise InputError(f"address: bad value {address!r}; expected 'auto', 'host:port' "
                             "or 'ray://host:port'.")
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise InputError(f"jobs: must be an integer >= 1, got {jobs!r}.")
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.jobs = jobs

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        try:
            import ray
        except ImportError:
            raise InputError("backend 'ray': Ray is not installed; install the extra with "
                             "pip install 'causalfair[ray]'.") from None
        started = not ray.is_initialized()
        if started:
            kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                          configure_logging=False)
            if self.address is None and self.jobs is not None:
                kwargs["num_cpus"] = self.jobs
            try:
                ray.init(address=self.address, **kwargs)
            except ConnectionError as exc:
                if "InvalidAuthToken" in str(exc.__cause__ or ""):
                    raise InputError(
                        f"backend 'ray': the cluster at {self.address!r} wants its "
                        "authentication token (clusters from `ray start` use token "
                        "authentication by default since Ray 2.59); set RAY_AUTH_MODE=token "
                        "here, with the token in ~/.ray/auth_token or RAY_AUTH_TOKEN.") from None
                raise InputError(f"backend 'ray': cannot reach the cluster at {self.address!r} "
                                 f"({str(exc).splitlines()[0][:200]}); start it with "
                                 "`ray start --head`, or check --address / RAY_ADDRESS.") from None
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(_run)
            refs = [task.remote(fn, item, 1) for item in items]
            out: list[Any] = []
            for ref in refs:  # in item order, whatever order the tasks finish in
                try:
                    out.append(ray.get(ref))
                except ray.exceptions.RayError as exc:
                    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                    out.append(TaskError(type(exc).__name__, f"worker failed: {first}", ""))
            return out
        finally:
            if started:
                ray.shutdown()


BACKENDS = ("serial", "process", "ray")


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

"""Where independent work units run (issue 16): in this process, or in a pool of local
worker processes. A backend maps a function over items and returns the results in the
items' order (never completion order). Workers use one torch/BLAS thread each, receive
everything they need (seeds included) in their item, and write no files: the driver
writes every output.

A task that raises is reported as a :class:`TaskError` in its slot (the other tasks
still run); the caller decides what a failure means (the gate reports it for its spec,
exit code 2).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from causalfair.errors import InputError

__all__ = ["Backend", "SerialBackend", "ProcessBackend", "TaskError", "make_backend"]


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
    from causalfair.errors import CausalfairError

    if threads is not None:
        from causalfair.cli import set_threads

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
    """A pool of ``jobs`` local worker processes (joblib's loky: workers are reused, and
    a worker that dies is reported as a failed task)."""

    def __init__(self, jobs: int):
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise InputError(f"jobs: must be an integer >= 1, got {jobs!r}.")
        self.jobs = jobs

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        from joblib import Parallel, delayed

        try:
            return list(Parallel(n_jobs=self.jobs, backend="loky")(
                delayed(_run)(fn, item, 1) for item in items))
        except Exception as exc:  # noqa: BLE001 - e.g. a worker killed: retry one by one
            out = []
            for item in items:
                try:
                    out.extend(Parallel(n_jobs=1, backend="loky")([delayed(_run)(fn, item, 1)]))
                except Exception as inner:  # noqa: BLE001
                    out.append(TaskError(type(inner).__name__,
                                         f"worker failed: {str(inner).splitlines()[0][:200]}"
                                         if str(inner) else "worker failed", ""))
            del exc
            return out


def make_backend(jobs: int = 1) -> Backend:
    """``SerialBackend`` for one job, else a ``ProcessBackend``."""
    return SerialBackend() if jobs == 1 else ProcessBackend(jobs)

"""What every Monte Carlo engine shares: the random streams (one generator per (seed,
group, batch, stream)), the batch moments folded by Chan's update, the task description of
one batch and the mapping of tasks onto a backend (:mod:`causalfair.backends`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from causalfair import errors
from causalfair.backends import SerialBackend, TaskError, make_backend
from causalfair.errors import InputError

#: Individuals simulated at once when ``batch_size`` is None: small enough to keep
#: temporaries in cache and memory bounded, large enough that numpy's per-call
#: overhead is negligible.
DEFAULT_BATCH_SIZE = 65_536

#: Stream keys k of (seed, group, batch, k): initial states, decisions, noise, and the
#: pi^PS fork and pi0 when common random numbers are off.
_STREAM_INIT, _STREAM_DECISION, _STREAM_NOISE = 0, 1, 2
_STREAM_INIT0, _STREAM_FORK, _STREAM_NOISE0 = 3, 4, 5


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _name(sim: Any) -> str:
    return type(sim).__name__


def _batch_moments(x: np.ndarray) -> tuple[int, float, float]:
    mb = float(x.mean())
    dev = x - mb
    return x.shape[0], mb, float((dev * dev).sum())  # not np.dot: BLAS threads would spin


class _Moments:
    """Count, mean and centred second moment of a stream of batches (Chan et al.)."""

    __slots__ = ("n", "mean", "m2")

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, x: np.ndarray) -> None:
        self.merge(*_batch_moments(x))

    def merge(self, m: int, mb: float, m2b: float) -> None:
        """Fold in a batch of ``m`` values with mean ``mb`` and centred second moment
        ``m2b`` (the same arithmetic wherever the batch was simulated)."""
        tot = self.n + m
        delta = mb - self.mean
        self.mean += delta * m / tot
        self.m2 += m2b + delta * delta * self.n * m / tot
        self.n = tot

    @property
    def var(self) -> float:
        return self.m2 / (self.n - 1) if self.n > 1 else math.nan


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name}: must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _sample_actions(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One action per row of ``probs`` (n, A) by inverse CDF with the uniforms ``u``."""
    cdf = np.cumsum(probs[:, :-1], axis=1)
    return (u[:, None] >= cdf).sum(axis=1)


_KEYS = ("A", "B", "Z", "AB", "BZ", "R")


@dataclasses.dataclass(frozen=True)
class _Job:
    """What every (group, batch) task of one Monte Carlo run shares."""

    sim: Any
    policy: Any
    T: int
    seed: int
    crn: bool
    A: int
    base: int
    name: str
    sim_name: str
    budget: int | None = None


def _is_serial(backend: Any) -> bool:
    return backend is None or backend == "serial" or isinstance(backend, SerialBackend)


def _run_tasks(backend: Any, fn: Any, tasks: list[Any]) -> list[Any]:
    """Map ``fn`` over ``tasks`` on ``backend`` (a Backend, or a name: "process" uses one
    worker per CPU, "ray" the cluster at RAY_ADDRESS or a local one); a failed task is
    raised here, an input error (e.g. a simulator breaking its contract) as an input
    error with its message."""
    import os

    if isinstance(backend, str):
        backend = make_backend(os.cpu_count() or 1 if backend == "process" else 1, backend)
    results = backend.map(fn, tasks)
    for r in results:
        if isinstance(r, TaskError):
            if r.input_error:  # the worker's error class, e.g. SimulatorContractError
                cls = getattr(errors, r.kind, None)
                ok = isinstance(cls, type) and issubclass(cls, errors.CausalfairError)
                raise (cls if ok else errors.InputError)(r.message)
            raise RuntimeError(f"a Monte Carlo task failed: {r.kind}: {r.message}\n{r.traceback}")
    return results

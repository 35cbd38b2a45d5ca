"""What every Monte Carlo engine shares: the random streams (one generator per (seed,
group, batch, stream)), the batch moments folded by Chan's update, the task description of
one batch and the mapping of tasks onto a backend (:mod:`causalfair.backends`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from causalfair import _malloc, _progress, errors
from causalfair._limits import check_memory, env_count
from causalfair._validation import check_int
from causalfair.backends import (
    ProcessBackend,
    SerialBackend,
    TaskError,
    ThreadBackend,
    engine_device,
    make_backend,
    pickler,
    resolve_jobs,
)
from causalfair.errors import ResourceLimitError
from causalfair.policies.core import Observation, action_probs
from causalfair.policies.grid import check_row_wise
from causalfair.systems.contract import attribute_prints, check_shared_state, seeded_rng

# glibc's malloc thresholds fixed at 32 MiB (causalfair/_malloc.py), once per process that
# runs Monte Carlo work (this module is imported by every engine and by every worker
# unpickling their tasks): the first audit of a process no longer faults in every temporary
_malloc.tune()

#: Individuals simulated at once when ``batch_size`` is None: small enough to keep
#: temporaries in cache and memory bounded, large enough that numpy's per-call
#: overhead is negligible.
DEFAULT_BATCH_SIZE = 65_536

#: Stream keys k of (seed, group, batch, k): initial states, decisions, noise, and the
#: pi^PS fork and pi0 when common random numbers are off.
STREAM_INIT, STREAM_DECISION, STREAM_NOISE = 0, 1, 2
STREAM_INIT0, STREAM_FORK, STREAM_NOISE0 = 3, 4, 5


#: Most unit-steps (simulated individuals x epochs, summed over the groups; for coupled
#: units: worlds x units x epochs) one Monte Carlo request may ask for: 10^12, about a
#: day of one core's work at ten million unit-steps a second. A request over it is
#: refused before anything runs; ``CAUSALFAIR_MAX_UNIT_STEPS`` raises it.
DEFAULT_MAX_UNIT_STEPS = 10**12
#: Environment variable overriding :data:`DEFAULT_MAX_UNIT_STEPS`.
UNIT_STEPS_ENV = "CAUSALFAIR_MAX_UNIT_STEPS"


def max_unit_steps() -> int:
    """The ceiling on unit-steps (``CAUSALFAIR_MAX_UNIT_STEPS`` or the default)."""
    return env_count(UNIT_STEPS_ENV, DEFAULT_MAX_UNIT_STEPS, "unit-steps", "1e13")


def check_work(unit_steps: int, what: str, fix: str) -> None:
    """Refuse, before anything runs, a Monte Carlo request of more than
    :func:`max_unit_steps` unit-steps (one unit simulated for one epoch)."""
    limit = max_unit_steps()
    if unit_steps > limit:
        raise ResourceLimitError(
            f"{what}: {unit_steps:.3g} unit-steps (units x epochs) is over the limit of "
            f"{limit:.3g}; {fix}, or raise the limit with {UNIT_STEPS_ENV} (docs/limits.md).")


def mc_options(n: Any = 2, seed: Any = 0, jobs: Any = "auto", device: Any = None,
               benefit_bins: Any = 4) -> tuple[int, int, int]:
    """``n`` (units per group or worlds, >= 2), ``seed`` (>= 0) and ``benefit_bins`` (>= 1)
    as ints, ``jobs``
    (:func:`~causalfair.backends.resolve_jobs`), ``device`` when given
    (:func:`~causalfair.backends.engine_device`) checked, else
    an InputError naming the argument: the one check of the Monte Carlo options, made by
    every engine (:func:`~causalfair.engines.montecarlo.decompose_mc`, the coupled engine,
    and the exact engine of :func:`causalfair.decompose`, :func:`causalfair.benefit_fairness`
    and :func:`causalfair.compare_groups`, which ignores valid values: a bad one is refused
    whatever the engine)."""
    n = check_int("n", n, 2)
    seed = check_int("seed", seed, 0)
    resolve_jobs(jobs, "jobs")
    if device is not None:
        engine_device(device)
    return n, seed, check_int("benefit_bins", benefit_bins, 1)


def batch_for(sim: Any, batch_size: Any) -> int:
    """The individuals a batch holds: ``batch_size`` when the caller gives one, else the
    simulator's own ``batch_size`` attribute when it declares one (a simulator that holds
    a Python object per individual, such as a Gymnasium env per individual, declares a
    small one: its objects stay in cache and its batches are tasks for ``--jobs``), else
    :data:`DEFAULT_BATCH_SIZE`. The batches key the random streams, so the batch size is
    part of what fixes the numbers."""
    if batch_size is not None:
        return check_int("batch_size", batch_size, 1)
    own = getattr(sim, "batch_size", None)
    if own is None:
        return DEFAULT_BATCH_SIZE
    if isinstance(own, bool) or not isinstance(own, (int, np.integer)) or own < 1:
        raise errors.SimulatorContractError(
            f"simulator {type(sim).__name__}: batch_size must be an integer >= 1 (the "
            f"individuals per batch when the caller gives none), got {own!r}.")
    return int(own)


def batches(n: int, batch: int) -> Iterator[tuple[int, int]]:
    """(index, size) of the batches of ``batch`` that cover ``n`` units, generated lazily."""
    for b, start in enumerate(range(0, n, batch)):
        yield b, min(batch, n - start)


def fold_tasks(backend: Any, fn: Any, tasks: Iterable[Any], n_tasks: int,
                fold: Callable[[Any, Any], None], label: str | None = None,
                result_bytes: float = 0.0) -> None:
    """Run ``fn`` on every task and ``fold(task, result)`` in task order. In this process
    the tasks are generated and folded one at a time (memory O(one task); with a
    :class:`~causalfair.backends.ThreadBackend`, O(its jobs) tasks at once); on another
    backend the task list and its results are held at once, so their size
    (``result_bytes`` each, plus the task itself) is checked against the memory limit
    first."""
    if is_serial(backend) or isinstance(backend, ThreadBackend):
        prog = _progress.start(label, n_tasks, "batches") if label else None
        done = (backend.imap(lambda task: (task, fn(task)), tasks)  # in order, O(jobs) held
                if isinstance(backend, ThreadBackend) else ((task, fn(task)) for task in tasks))
        for task, result in done:
            fold(task, result)
            if prog is not None:
                prog.update()
        if prog is not None:
            prog.close()
        return

    check_memory(n_tasks * (200.0 + result_bytes), f"{n_tasks} Monte Carlo tasks on another "
                 "backend", "use a larger batch_size or a smaller n")
    listed = list(tasks)
    for task, result in zip(listed, _run_tasks(backend, fn, listed), strict=True):
        fold(task, result)


def type_name(sim: Any) -> str:
    """The class name of ``sim``, for messages."""
    return type(sim).__name__


def _observed(sim: Any, n: int, g: int, k: int, units: int) -> Observation:
    """The observations of a batch: ``n`` units of group ``g``, or, for coupled units
    (``units`` per world), ``max(2, n // units) + k`` worlds (``reset(worlds, None, rng)``)."""
    if units == 1:
        return sim.observe(sim.reset(n, g, seeded_rng(0, g, 7, k)))
    return sim.observe(sim.reset(max(2, n // units) + k, None, seeded_rng(0, 0, 7, k)))


def check_rows(policy: Any, sim: Any, A: int, name: str, n: int = 64,
               units: int = 1) -> Observation:
    """:func:`~causalfair.policies.grid.check_row_wise` on a batch of ``n`` of the
    simulator's observations of group 0 (returned); of coupled units (``units`` per
    world), on a batch of worlds, whose units the policy may compare."""
    where = f"policy {name!r}"
    obs = _observed(sim, n, 0, 0, units)
    batch = (f"a batch of {type_name(sim)}'s observations of group 0" if units == 1 else
             f"a batch of {len(obs) // units} of {type_name(sim)}'s worlds of {units} units")
    check_row_wise(policy, lambda o: action_probs(policy, o, A, where), obs, where, batch,
                   block=units)
    return obs


def check_policy_state(policy: Any, sim: Any, A: int, name: str, n: int = 64,
                       units: int = 1) -> None:
    """Refuse a user's policy object whose calls change its own attributes after its first
    one (:func:`~causalfair.systems.contract.check_shared_state`: batches evaluated at
    once on threads would overwrite each other's), over a few batches of the simulator's
    observations of different sizes. Policies declaring ``thread_safe = False`` pass.
    First, on one batch, refuse a policy whose output for an individual depends on the
    others in its batch, or that changes its observation in place
    (:func:`~causalfair.policies.grid.check_row_wise`, as the exact engine's grid).
    ``units``: coupled units per world (batches of worlds)."""
    obs, where = check_rows(policy, sim, A, name, n, units), f"policy {name!r}"
    if attribute_prints(policy) is None:  # causalfair's own, or declared (one thread)
        return
    prints = None
    for k in range(3):
        g = k % int(sim.n_groups)
        obs = obs if k == 0 else _observed(sim, n + k, g, k, units)
        action_probs(policy, obs, A, where)
        if k == 0:  # what the first call sets up (a cache) may stay
            prints = attribute_prints(policy)
    check_shared_state(where, policy, prints)


def batch_moments(x: np.ndarray) -> tuple[int, float, float]:
    """Count, mean and centred second moment of one batch ``x`` (folded by :class:`Moments`)."""
    mb = float(x.mean())
    dev = x - mb
    return x.shape[0], mb, float((dev * dev).sum())  # not np.dot: BLAS threads would spin


class Moments:
    """Count, mean and centred second moment of a stream of batches (Chan et al.)."""

    __slots__ = ("n", "mean", "m2")

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, x: np.ndarray) -> None:
        self.merge(*batch_moments(x))

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


class PairMoments:
    """:class:`Moments` of the difference of every pair of columns a < b (column a minus
    column b) of a stream of (m, G) batches, with :class:`Moments`' arithmetic, so each pair
    has the bits one :class:`Moments` of its per-row differences would have (coupled units:
    a world's per-group means, whose groups share the world; the paired standard error of
    every pair, the compared pair's as before). Folded in task order."""

    __slots__ = ("G", "n", "mean", "m2")

    def __init__(self, G: int) -> None:
        P = G * (G - 1) // 2
        self.G, self.n, self.mean, self.m2 = G, 0, np.zeros(P), np.zeros(P)

    def add(self, x: np.ndarray) -> None:
        m, G = x.shape[0], self.G
        xt = np.ascontiguousarray(x.T)  # (G, m): each pair's differences a contiguous row
        mb, m2b = np.empty_like(self.mean), np.empty_like(self.m2)
        k = 0
        for a in range(G - 1):  # rows a - b, b > a: batch_moments of each row
            d = xt[a] - xt[a + 1:]
            mu = d.mean(axis=1)
            np.subtract(d, mu[:, None], out=d)  # the deviations, squared, in place
            np.multiply(d, d, out=d)
            mb[k:k + G - a - 1], m2b[k:k + G - a - 1] = mu, d.sum(axis=1)
            k += G - a - 1
        tot = self.n + m
        delta = mb - self.mean
        self.mean = self.mean + delta * m / tot
        self.m2 = self.m2 + (m2b + delta * delta * self.n * m / tot)
        self.n = tot

    def paired_var(self, own: Sequence[Moments]) -> np.ndarray:
        """(G, G), symmetric: off the diagonal the variance of the mean of column a minus
        column b (the per-row differences' var / n, as :class:`Moments`'), on it each
        column's own, from ``own`` (its :class:`Moments`)."""
        G = self.G
        out = np.zeros((G, G))
        iu = np.triu_indices(G, 1)
        v = self.m2 / (self.n - 1) / self.n if self.n > 1 else np.full_like(self.m2, math.nan)
        out[iu] = v
        out[iu[1], iu[0]] = v
        out[np.arange(G), np.arange(G)] = [o.var / o.n for o in own]
        return out


def paired_bytes(n_groups: int) -> float:
    """Memory of the paired variances a coupled Monte Carlo run keeps
    (:class:`PairMoments` of the six totals of ``MOMENT_KEYS`` and the (G, G) matrices the
    decomposition keeps, with one covariance made from them at a time): 8 (2 * 6 + 2) G^2
    bytes, an upper bound."""
    return 8.0 * (2 * 6 + 2) * float(n_groups) ** 2


def paired_cov(pv: np.ndarray) -> np.ndarray:
    """The covariance of the columns' means from :meth:`PairMoments.paired_var`'s matrix:
    (var_a + var_b - var_{a-b}) / 2 off the diagonal, each column's variance on it."""
    d = np.diag(pv)
    out = (d[:, None] + d[None, :] - pv) / 2
    out[np.arange(len(d)), np.arange(len(d))] = d
    return out


def sample_actions(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One action per row of ``probs`` (n, A) by inverse CDF with the uniforms ``u``."""
    cdf = np.cumsum(probs[:, :-1], axis=1)
    return (u[:, None] >= cdf).sum(axis=1)


#: The per-individual totals whose moments a Monte Carlo batch returns, in order.
MOMENT_KEYS = ("A", "B", "Z", "AB", "BZ", "R")


@dataclasses.dataclass(frozen=True)
class Job:
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
    #: the system's departed levels (``System.departed``): the decision counts then count
    #: only the units present (:func:`present_units`)
    departed: tuple[int, ...] | None = None


def present_units(obs: Any, departed: tuple[int, ...] | None, sim_name: str
                  ) -> np.ndarray | None:
    """Which units of the observations ``obs`` are present (their level is not one of
    ``departed``), or None when nothing is declared (every unit counts)."""
    if not departed:
        return None
    level = getattr(obs, "level", None)
    if level is None:
        raise errors.SimulatorContractError(
            f"simulator {sim_name}.observe: the system declares departed levels "
            f"{tuple(departed)!r} but the observations carry no level; give Observation.level "
            "(docs/own-system.md, \"Individuals who leave\"), or leave departed out.")
    return ~np.isin(np.asarray(level), departed)


def is_serial(backend: Any) -> bool:
    """Whether ``backend`` runs its tasks in this process (None, "serial" or a SerialBackend)."""
    return backend is None or backend == "serial" or isinstance(backend, SerialBackend)


#: Unit-steps from which a run whose simulator or policy cannot share this process's
#: threads goes to worker processes by default (:func:`engine_backend`): about 10 s of a
#: cheap Python env (benchmarks/bench_gym.py: about 9 us an individual-step), where
#: starting the workers takes a fraction of a second.
PROCESS_WORK = 1_000_000


def engine_backend(backend: Any, jobs: Any, *shared: Any, work: float = 0) -> Any:
    """Where a Monte Carlo run's tasks go: ``backend`` when one is named (``"serial"``
    included: this thread); else (None) a :class:`~causalfair.backends.ThreadBackend` of
    ``jobs`` threads of this process (``"auto"``:
    :func:`causalfair.backends.available_cores`). When a ``shared`` object (the
    simulator, the policies) keeps state between calls (a policy with ``start_batch``) or
    declares ``thread_safe = False`` (a Gymnasium env's): ``jobs`` worker processes
    (:class:`~causalfair.backends.ProcessBackend`) for a run of at least
    :data:`PROCESS_WORK` unit-steps (``work``) whose objects can be pickled, else this
    thread. Each task draws from its own streams, results are folded in task order and
    BLAS runs one thread per task, so every choice gives the same numbers bit for bit."""
    if backend is not None:
        return backend
    n = resolve_jobs(jobs, "jobs")
    if any(getattr(o, "thread_safe", True) is False
           or callable(getattr(o, "start_batch", None)) for o in shared):
        if n > 1 and work >= PROCESS_WORK and _travels(shared):
            return ProcessBackend(n)
        n = 1
    return ThreadBackend(n)


def _travels(objs: Sequence[Any]) -> bool:
    """Whether ``objs`` can be sent to worker processes (cloudpickle)."""
    try:
        pickler().dumps(tuple(objs))
    except Exception:  # noqa: BLE001 - anything pickling refuses: the run stays here
        return False
    return True


#: How :func:`causalfair.workers.run_pickled` begins the error of a task its worker cannot
#: unpickle (a module the worker cannot import).
_UNPICKLED = "the task cannot be unpickled in the worker"


def _unpickled_error(r: TaskError) -> errors.UserCodeError:
    """The one-line error of a task a worker cannot unpickle (the worker's traceback kept
    as ``traceback_text``): it names the module the worker lacks and the fix."""
    import re

    found = re.search(r"No module named '([^']+)'", r.message)
    module = f"module {found.group(1)!r}" if found else "the modules of your system and policy"
    return errors.UserCodeError(
        f"a Monte Carlo task cannot be unpickled in its worker ({r.kind}: "
        f"{r.message[len(_UNPICKLED):].lstrip(': ')}); make {module} importable by every "
        "worker: install it there, or keep its folder at the same path on every node (a "
        "shared filesystem, docs/scale.md), or run on this machine (--backend serial).",
        callable_name="worker", traceback_text=r.traceback)


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
            if r.message.startswith(_UNPICKLED):
                raise _unpickled_error(r)
            if r.input_error:  # the worker's error class, e.g. SimulatorContractError
                cls = getattr(errors, r.kind, None)
                ok = isinstance(cls, type) and issubclass(cls, errors.CausalfairError)
                raise (cls if ok else errors.InputError)(r.message)
            raise RuntimeError(f"a Monte Carlo task failed: {r.kind}: {r.message}\n{r.traceback}")
    return results

"""Monte Carlo decomposition for black-box simulators (method.md section 3, engine 2).

For each group s, ``n`` individuals are rolled forward ``horizon`` steps under the policy
pi. At every step the simulator is also *forked*: the same states and the same random
numbers, decision d0 for everyone; the fork's gain is the gain of pi^PS at that step
(its expectation is h0(x_t, s)). The baseline pi0 (always d0) is rolled separately from
the same initial states with the same noise stream (common random numbers, CRN).

Per individual i the engine keeps only running sums over t: ``A_i`` (gain under pi),
``B_i`` (fork gain, pi^PS), ``Z_i`` (gain under pi0) and ``R_i`` (reward under pi); per
batch it folds their means and centred second moments into running totals (Chan et
al.'s parallel update), so memory is O(batch) whatever n and T are. Estimates:

    V^pi_s = mean A,  V^PS_s = mean B,  V^pi0_s = mean Z,  utility_s = mean R,
    direct_s = mean (A - B),  indirect_s = mean (B - Z),

with CLT standard errors sd / sqrt(n). C, DPE, IPE and SPE are differences between two
groups, which are simulated independently, so their variances add. With CRN the
per-individual differences A - B and B - Z share noise and have a much smaller variance
than with ``crn=False``, which draws independent initial states and noise for pi, for
the fork and for pi0.

Random numbers: stream ``k`` of batch ``b`` of group ``s`` is
``PCG64(SeedSequence(seed, spawn_key=(s, b, k)))``; the same (seed, n, batch_size)
gives the same numbers bit for bit. Results depend on ``batch_size`` (the batches
use different streams), not on anything else.

History-dependent policies work: the policy sees the simulator's full
:class:`~causalfair.policies.core.Observation` (with ``t`` and any ``extras``) every step,
always for the same individuals in the same order within a batch; a policy with a
``start_batch(n, group)`` method has it called before each batch so that it can keep its own
per-individual memory.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._names import BENEFIT_N  # defined there: `decompose --help` states it
from causalfair._simultaneous import pairs_chosen_from
from causalfair._validation import (
    check_alpha,
    check_horizon,
    check_keywords,
    check_policy_name,
    check_weights,
)
from causalfair.backends import engine_device, resolve_jobs
from causalfair.engines._mc_base import (
    DEFAULT_BATCH_SIZE,
    MOMENT_KEYS,
    STREAM_DECISION,
    STREAM_FORK,
    STREAM_INIT,
    STREAM_INIT0,
    STREAM_NOISE,
    STREAM_NOISE0,
    Job,
    Moments,
    batch_for,
    batch_moments,
    batches,
    check_int,
    check_policy_state,
    check_rows,
    check_work,
    engine_backend,
    fold_tasks,
    mc_options,
    present_units,
    sample_actions,
    type_name,
)
from causalfair.engines.benefit_forks import forks_bytes
from causalfair.engines.benefit_mc import N_BOOT, system_benefit
from causalfair.engines.montecarlo_coupled import decompose_coupled
from causalfair.engines.paired import PairedComparison
from causalfair.errors import InputError, SimulatorContractError
from causalfair.model import TabularModel
from causalfair.policies.core import Observation, Policy, PolicyError, action_probs
from causalfair.policies.grid import (
    engine_policy,
    reads_only_level_group,
    reads_prob_d1,
    untabulated,
)
from causalfair.policies.resolver import resolve
from causalfair.results import Decomposition, check_pair
from causalfair.systems import as_system
from causalfair.systems.contract import (
    MAX_ABS_GAIN,
    check_protocol,
    guard_simulator,
    seeded_rng,
)
from causalfair.systems.lending.settings import LendingModel, LendingSimulator
from causalfair.systems.system import System
from causalfair.systems.tabular_sim import TabularSimulator
from causalfair.types import check_batch_size, check_probs

__all__ = [
    "decompose_mc",
    "check_simulator",
    "SimulatorContractError",
    "DEFAULT_BATCH_SIZE",
    "as_simulator",
    "compare_mc",
    "paired_jobs",
    "paired_numbers",
    "paired_trios",
    "simulate_batch",
    "benefit_size",
]


def benefit_size(n: int, benefit_n: int | None = None) -> int:
    """Units per group (worlds for coupled units) of Lambda's forks beside a Monte Carlo
    decomposition of ``n``: ``benefit_n`` when given, else ``min(n, BENEFIT_N)``; the one
    default of :func:`decompose_mc`, ``cf.decompose``, ``cf.compare_groups`` and
    ``causalfair decompose``."""
    return min(int(n or 2), BENEFIT_N) if benefit_n is None else check_int("benefit_n",
                                                                          benefit_n, 2)


def as_simulator(obj: Any) -> Any:
    """A simulator from ``obj``: a LendingModel becomes a LendingSimulator, a
    TabularModel a TabularSimulator; anything with the four protocol methods is
    returned as is."""
    if isinstance(obj, LendingModel):
        return LendingSimulator(obj)
    if isinstance(obj, TabularModel):
        return TabularSimulator(obj)
    missing = [m for m in ("reset", "observe", "draw_noise", "step") if not callable(getattr(obj, m, None))]
    if missing or not isinstance(getattr(obj, "n_groups", None), (int, np.integer)):
        what = f"methods {', '.join(missing)}" if missing else "an integer attribute n_groups"
        raise SimulatorContractError(
            f"simulator: {type(obj).__name__} lacks {what}; a simulator needs n_groups and "
            "reset(n, group, rng), observe(state), draw_noise(n, rng), step(state, decisions, "
            "noise) (see causalfair.systems.simulator and docs/simulators.md)."
        )
    return guard_simulator(obj)




# ------------------------------------------------------------------ contract checks
def check_simulator(simulator: Any, *, n: int = 64, horizon: int = 3, seed: int = 0,
                    n_actions: int | None = None) -> None:
    """Check that ``simulator`` (anything :func:`as_simulator` accepts) honours the
    protocol; raise SimulatorContractError naming the method that broke it. The checks:
    :func:`causalfair.systems.contract.check_protocol`. A :class:`System` (what a factory
    returns) is checked as every door checks it, against what it declares (its actions,
    features, levels, tabular model, coupled units): :meth:`System.check_contract`."""
    if isinstance(simulator, System):
        simulator.check_contract()
        return
    check_protocol(as_simulator(simulator), n=n, horizon=horizon, seed=seed,
                   n_actions=n_actions)


# ----------------------------------------------------------------------- the engine
def _policy_probs(policy: Policy, obs: Observation, m: int, name: str, own: bool) -> np.ndarray:
    """P(d1) of a two-action policy on ``obs``; ``own``: read from its own ``prob_d1``
    (``callable(policy.prob_d1) and reads_prob_d1(policy)``, decided once per batch)."""
    if not own:  # as grid.d1_probs
        return action_probs(policy, obs, 2, f"policy {name!r}", units=m)[:, 1]
    check_batch_size(obs, m, f"policy {name!r}")
    p = np.asarray(policy.prob_d1(obs), dtype=np.float64)
    if p.shape != (m,):
        p = p.reshape(-1)
        if p.shape != (m,):
            raise PolicyError(f"policy {name!r}: returned {p.shape[0]} probabilities for {m} observations.")
    lo, hi = float(p.min()), float(p.max())
    if not (lo >= 0.0 and hi <= 1.0):  # also catches NaN; refused naming the first
        check_probs(p, m, f"policy {name!r}", obs)
    return p


def _mc_batch(task: tuple[Job, int, int, int]) -> tuple[np.ndarray, list[tuple[int, float, float]]]:
    """Batch ``b`` of group ``g`` (``m`` individuals): its per-step gain sums and decision
    counts (3 + A, T; :func:`_simulate`) and the moments of its per-individual totals, keyed like ``MOMENT_KEYS``. Its random numbers
    come from the streams (seed, g, b, k) only, so it gives the same numbers wherever it
    runs."""
    sums, totals = _simulate(*task)
    return sums, [batch_moments(x) for x in totals]


def _paired_batch(task: tuple[Job, Job, int, int, int]) -> list[tuple[tuple[int, float, float], ...]]:
    """Batch ``b`` of group ``g`` under two policies with the same random numbers (the
    same individuals, noise and decision draws): per key of ``MOMENT_KEYS``, the moments of the
    first policy's totals, the second's, and their per-individual differences."""
    job, job_b, g, b, m = task
    return paired_trios(_simulate(job, g, b, m)[1], _simulate(job_b, g, b, m)[1])


def _simulate(job: Job, g: int, b: int, m: int, trace: Any = None
              ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Per-step gain sums (rows 0-2: pi, pi^PS, pi0) and counts of the units given each
    action under pi (rows 3 to 3 + A - 1), (3 + A, T), and per-individual totals (A, B, Z,
    A-B, B-Z, R) of batch ``b`` of group ``g``; ``trace(t, obs, gain, fork_gain)``, when given, sees every
    step's observations and per-individual gains under pi and the pi^PS fork."""
    sim, policy, T, seed, crn, name = job.sim, job.policy, job.T, job.seed, job.crn, job.name
    binary = job.A == 2 and job.base == 0
    rng_noise = seeded_rng(seed, g, b, STREAM_NOISE)
    rng_dec = seeded_rng(seed, g, b, STREAM_DECISION)
    state = sim.reset(m, g, seeded_rng(seed, g, b, STREAM_INIT))
    if crn:
        state0, rng_fork, rng_0 = state, None, None
    else:
        state0 = sim.reset(m, g, seeded_rng(seed, g, b, STREAM_INIT0))
        rng_fork = seeded_rng(seed, g, b, STREAM_FORK)
        rng_0 = seeded_rng(seed, g, b, STREAM_NOISE0)
    if callable(getattr(policy, "start_batch", None)):
        policy.start_batch(m, g)
    sums = np.zeros((3 + job.A, T))
    A_, B, Z, R = (np.zeros(m) for _ in range(4))
    d0 = np.zeros(m, dtype=bool) if binary else np.full(m, job.base, dtype=np.intp)
    # a simulator class may step pi, the pi^PS fork and pi0 of an epoch in one call, the
    # same numbers as the three steps, consuming both states (GymSimulator.step_paths)
    paths = getattr(type(sim), "step_paths", None) if crn else None
    own = binary and callable(getattr(policy, "prob_d1", None)) and reads_prob_d1(policy)
    for t in range(T):
        obs = sim.observe(state)
        if binary:
            p = _policy_probs(policy, obs, m, name, own)
            d = rng_dec.random(m) < p
        else:
            probs = action_probs(policy, obs, job.A, f"policy {name!r}", units=m)
            d = sample_actions(probs, rng_dec.random(m))
        noise = sim.draw_noise(m, rng_noise)
        if paths is not None:  # the same three steps; the states are not stepped again
            res, fork, res0 = paths(sim, state, d, state0, d0, noise)
        else:
            res = sim.step(state, d, noise)
            fork = sim.step(state, d0, noise if crn else sim.draw_noise(m, rng_fork))
            res0 = sim.step(state0, d0, noise if crn else sim.draw_noise(m, rng_0))
        for r in (res, fork, res0):
            if r.gain.shape != (m,) or r.reward.shape != (m,):
                raise SimulatorContractError(
                    f"simulator {job.sim_name}.step: wrong shape: gain {r.gain.shape}, reward "
                    f"{r.reward.shape}, expected ({m},) for a batch of {m}.")
        if trace is not None:
            trace(t, obs, res.gain, fork.gain)
        A_ += res.gain
        B += fork.gain
        Z += res0.gain
        R += res.reward
        sums[0, t] += res.gain.sum()
        sums[1, t] += fork.gain.sum()
        sums[2, t] += res0.gain.sum()
        here = present_units(obs, job.departed, job.sim_name)  # None: every unit counts
        d_here = d if here is None else d[here]
        if binary:  # d is boolean: the count of d1 (np.bincount would cast it to integers)
            ones = np.count_nonzero(d_here)
            sums[3:, t] += (len(d_here) - ones, ones)
        else:
            sums[3:, t] += np.bincount(d_here, minlength=job.A)[:job.A]
        state, state0 = res.state, res0.state
    if not (np.isfinite(A_.sum() + B.sum() + Z.sum()) and np.isfinite(R.sum())):
        raise SimulatorContractError(
            f"simulator {job.sim_name}.step: returned NaN or inf gains or rewards (group {g}).")
    big = max(float(np.abs(a).max()) if a.size else 0.0 for a in (A_, B, Z, R))
    if big > MAX_ABS_GAIN:  # (a user simulator's steps are refused one by one already)
        raise SimulatorContractError(
            f"simulator {job.sim_name}.step: gains or rewards summed over the epochs reach "
            f"{big:.3g}, beyond {MAX_ABS_GAIN:.0e} in absolute value: their squares "
            "(standard errors, intervals) would overflow to inf; give them in larger units.")
    return sums, (A_, B, Z, A_ - B, B - Z, R)






def _setup(system: Any, simulator: Any, horizon: int | None, n: int, seed: int,
           batch_size: int | None, runs: int = 1, jobs: Any = 1
           ) -> tuple[Any, int, int, int, int, int, int]:
    """The simulator, actions, baseline action, horizon, n, seed and batch size of a run
    of ``runs`` policies (validated; memory and work checked before anything runs).
    ``jobs``: the threads that run batches at once, each holding one (counted)."""
    if system is not None:
        sim = system.make_simulator()
        A, base = system.n_actions, system.decisions.baseline
        horizon = system.horizon if horizon is None else horizon
    else:
        sim = as_simulator(simulator)
        A, base = int(getattr(sim, "n_actions", 2)), int(getattr(sim, "baseline", 0))
        if horizon is None:  # the horizon it declares, as a System made from it has
            horizon = getattr(sim, "horizon", None)
    T = check_horizon(20 if horizon is None else horizon)
    n, seed, _ = mc_options(n, seed, jobs)
    batch = batch_for(sim, batch_size)
    check_work(runs * n * int(sim.n_groups) * T, f"Monte Carlo of {n} individuals per group "
               f"over {T} epochs", "lower n or the horizon")

    # per-step sums (3, G, T) and, per batch, a few dozen float64 arrays of the batch size,
    # one batch on each of the threads that run them at once (no more than there are)
    held = min(resolve_jobs(jobs, "jobs"), int(sim.n_groups) * -(-n // batch))
    threads = f" with {held} threads (--jobs)" if held > 1 else ""
    check_memory(8.0 * (3 * 8 * T + 40 * min(batch, n) * held), f"Monte Carlo over {T} epochs "
                 f"with batches of {min(batch, n)}{threads}",
                 "use a shorter horizon, fewer threads (--jobs) or a smaller batch_size")
    return sim, A, base, T, n, seed, batch


def _departed(system: Any, sim: Any) -> tuple[int, ...] | None:
    """The departed levels whose units the decision counts leave out: the system's, else
    those of the tabular model a bare model's simulator wraps; None: every unit counts."""
    if system is not None:
        return system.departed
    return getattr(getattr(sim, "model", None), "departed_levels", None)


def _ready_policy(policy: Any, sim: Any, A: int, tabulate: bool, policy_name: str | None,
                  system: Any = None, horizon: int | None = None, device: str | None = None,
                  check: bool = False, where: str | None = None,
                  rows: bool = False) -> tuple[Any, str]:
    """The policy as the batches use it (resolved for ``system``, or the simulator's
    tabular model, by :func:`causalfair.policies.resolve`; tabulated on the (group,
    level) grid when it reads only those, :func:`causalfair.policies.grid.engine_policy`)
    and its name. ``check``: refuse a user's policy object that keeps state between
    calls (:func:`~causalfair.engines._mc_base.check_policy_state`). ``rows``: only refuse a policy whose rows depend
    on its batch or that changes its observation (:func:`~causalfair.engines._mc_base.check_rows`, part of ``check``).
    ``where``: what holds it, named by its errors (``"baseline"`` for a paired run's other
    policy)."""
    model = getattr(sim, "model", None)
    res = resolve(policy, system if system is not None else
                  model if isinstance(model, TabularModel) else None, where=where)
    policy = res.policy
    name = res.label if policy_name is None else policy_name
    if check:
        check_policy_state(policy, sim, A, name)
    elif rows:
        check_rows(policy, sim, A, name)
    G = int(sim.n_groups)
    K = getattr(sim, "n_levels", None)
    enc = getattr(policy, "encoding", None)
    if (isinstance(K, (int, np.integer)) and getattr(enc, "name", None) == "onehot"
            and getattr(policy, "obs_fn", None) is None
            and (enc.n_levels, enc.n_groups) != (int(K), G)):
        raise PolicyError(
            f"policy {name!r}: its one-hot encoding has {enc.n_levels} levels x {enc.n_groups} "
            f"groups, the simulator {type_name(sim)} has {int(K)} levels x {G} groups.")
    return engine_policy(policy, sim, A, tabulate=tabulate, horizon=horizon,
                         device=engine_device(device),
                         decisions=getattr(system, "decisions", None)), name


@check_keywords
def decompose_mc(
    simulator: Any,
    policy: Policy,
    horizon: int | None = None,
    *,
    n: int = 100_000,
    seed: int = 0,
    crn: bool = True,
    batch_size: int | None = None,
    pair: tuple[int, int] | None = None,
    check: bool = True,
    policy_name: str | None = None,
    tabulate: bool = True,
    backend: Any = None,
    jobs: int | str | None = "auto",
    device: str | None = None,
    eps: float | str | None = None,
    alpha: float = 0.05,
    benefit_n: int | None = None,
    benefit_bins: int = 4,
    benefit_shared: dict | None = None,
    weights: str = "visitation",
) -> Decomposition:
    """Monte Carlo decomposition C = DPE + IPE + SPE with standard errors, on any system.

    ``simulator``: a :class:`~causalfair.systems.System` (its simulator, actions,
    baseline action, groups and default horizon are used), or anything implementing
    :class:`~causalfair.systems.simulator.Simulator` (or a LendingModel / TabularModel, wrapped by
    :func:`as_simulator`; actions and baseline from its ``n_actions`` and ``baseline``
    attributes, default two actions and baseline 0). With A actions each unit's action
    is drawn from the policy's ``action_probs`` (two actions: ``u < prob_d1``); the
    pi^PS fork and pi0 take the baseline action. ``policy``: anything
    with ``prob_d1(obs)`` (see :mod:`causalfair.policies.adapters` for SB3 models and callables).
    ``n``: individuals per group. ``crn``: common random numbers between pi, the pi^PS
    fork and pi0 (False: independent numbers for each, to measure what CRN buys).
    ``batch_size``: individuals simulated at once (default: the simulator's own
    ``batch_size`` when it declares one, else :data:`DEFAULT_BATCH_SIZE`);
    memory is O(batch_size), independent of n and horizon. ``check``: run
    :func:`check_simulator` on a small batch first. ``tabulate``: a policy known to read
    only (group, level) - TablePolicy, ConstantPolicy, networks over the one-hot
    encoding (torch modules, checkpoints of every format, SB3 models), or any policy with
    ``reads_only_level_group = True`` - is evaluated once per (group, level) cell (per
    epoch when time-dependent) and looked up per individual
    (:func:`causalfair.policies.grid.engine_policy`; the same decisions; an MLP then
    costs nothing per individual); False evaluates it on every individual's
    observation. ``backend``: where the (group, batch) tasks run - None (this process,
    on ``jobs`` threads), "serial" (this process, one thread), "process" (one local
    worker per CPU), "ray", or a :mod:`causalfair.backends` object such as
    ``ProcessBackend(2)``; worker processes and Ray also run Lambda's rollouts by forks
    (independent units), one task per group. Every task draws from its own streams and the driver merges
    results in task order, so the numbers are the same bit for bit whichever backend
    runs them (docs/scale.md); on worker processes the simulator and policy must
    pickle. ``jobs``: with ``backend`` None, the tasks run on that many threads of this
    process (``"auto"``, the default: the cores it may use,
    :func:`causalfair.backends.available_cores`; serially for a policy with
    ``start_batch`` or an object declaring ``thread_safe = False``), the same numbers bit
    for bit. ``device``: where a network policy that is not tabulated runs its forward
    pass (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"auto"``; default ``CAUSALFAIR_DEVICE``,
    else the CPU; :func:`causalfair.policies.nets.on_device`); simulators stay on the CPU.

    Returns a :class:`~causalfair.results.Decomposition` with ``engine="mc"``, ``se``
    (standard errors keyed like ``estimates()``), ``n``, ``seed`` and ``decisions`` (the
    units of each group given each action at each step, counted as the run draws them; of
    a system that declares departed levels, only the units present at that step); use
    ``result.conf_int(alpha)`` for confidence intervals (by default, as its print and
    ``to_frame()``, at this call's level 1 - ``alpha``: ``result.alpha``). ``Lambda`` (benefit fairness
    with ``eps``, method.md section 4) comes with ``Lambda_ci``, ``se["Lambda"]`` and
    ``benefit`` from :func:`causalfair.engines.benefit_mc.system_benefit`: exact when the system
    has a tabular model of independent units and the policy is known to read only
    (group, level) (as for ``tabulate``), else by forks over ``benefit_n`` units per group (worlds for coupled units; default
    ``min(n, 20000)``) with a bootstrap interval at level 1 - ``alpha``, pairing
    individuals observed through features in the joint cells of ``benefit_bins`` quantile
    bins per feature. Lambda is None only when the observations carry neither levels nor
    features. ``benefit_shared``: the dict :func:`causalfair.engines.benefit_mc.benefit_fairness_mc`
    keeps the forks' rollout, cells, cell means and bootstrap replicates in, for the caller to
    pass on to the other pairs' Lambda (:func:`causalfair.engines.groups.lambda_by_forks`).
    ``weights``: Lambda's P(x | s) (method.md section 4), "visitation" or, where Lambda is
    exact from the tabular model, "initial"; by forks "initial" is refused before any run
    (:func:`causalfair._validation.check_weights`), never left unused.
    """
    n, seed, benefit_bins = mc_options(n, seed, jobs, device, benefit_bins)  # before any run
    lam_weights = check_weights(weights)  # (``weights`` is the groups' below)
    if policy_name is not None:  # (the result's check, before any run)
        check_policy_name(policy_name)
    system = simulator if isinstance(simulator, System) else None
    if system is not None:
        if system.units_per_replica != 1:
            res = resolve(policy, system)
            _check_lambda_memory(system, res.policy, system.horizon if horizon is None else
                                 horizon, n, benefit_n)
            _check_lambda_weights(system, res.policy, lam_weights)
            dec = decompose_coupled(system, res.policy, system.horizon if horizon is None else
                                     horizon, n=n, seed=seed, crn=crn, batch_size=batch_size,
                                     pair=pair, policy_name=res.label if policy_name is None
                                     else policy_name,
                                     backend=backend, jobs=jobs,
                                     device=engine_device(device), check=check)
            dec = _chosen(dec, pair)
            return _with_lambda(dec, system, res.policy, eps, alpha, benefit_n, jobs, device,
                                benefit_bins, shared=benefit_shared,  # coupled: no tasks
                                weights=lam_weights)
    sim, A, base, T, n, seed, batch = _setup(system, simulator, horizon, n, seed, batch_size,
                                             jobs=jobs)
    if check:
        check_simulator(sim, n=min(n, 64), horizon=min(T, 3), seed=seed, n_actions=A)
        if callable(getattr(sim, "warn_horizon", None)):  # a Gymnasium env's own truncation
            sim.warn_horizon(T, base)
    G = int(sim.n_groups)
    sim_name = type_name(sim)
    # a bare simulator as the System cf.decompose makes of it: refused with its words where
    # it has fewer than two groups (a decomposition compares two; after the contract check,
    # so that a broken method is named first)
    lam_system = system if system is not None else as_system(simulator)
    policy, name = _ready_policy(policy, sim, A, tabulate, policy_name, system, T, device,
                                 check=check)
    _check_lambda_memory(lam_system, policy, T, n, benefit_n)  # Lambda's stage, before the run
    _check_lambda_weights(lam_system, policy, lam_weights)
    backend = engine_backend(backend, jobs, sim, policy, work=G * n * T)
    sums = np.zeros((3 + A, G, T))  # gain sums and decision counts (_simulate)
    stats = {k: [Moments() for _ in range(G)] for k in MOMENT_KEYS}
    job = Job(sim=sim, policy=policy, T=T, seed=seed, crn=crn, A=A, base=base, name=name,
               sim_name=sim_name, departed=_departed(system, sim))
    tasks = ((job, g, b, m) for g in range(G) for b, m in batches(n, batch))

    def fold(task: tuple[Job, int, int, int], result: tuple[np.ndarray, list[Any]]) -> None:
        g = task[1]  # folded in task order wherever the tasks ran: the same numbers
        sums[:, g, :] += result[0]
        for key, mom in zip(MOMENT_KEYS, result[1], strict=True):
            stats[key][g].merge(*mom)

    fold_tasks(backend, _mc_batch, tasks, G * -(-n // batch), fold, f"monte carlo {name}",
                result_bytes=8.0 * (3 + A) * T + 400.0)

    def mean(key: str) -> np.ndarray:
        return np.array([s.mean for s in stats[key]])

    def var_of_mean(key: str) -> np.ndarray:
        return np.array([s.var / s.n for s in stats[key]])

    V, V_ps, V_0, U = mean("A"), mean("B"), mean("Z"), mean("R")

    a, c = check_pair(pair, G, V)
    groups = system.groups if system is not None else tuple(
        getattr(sim, "group_names", None) or (str(i) for i in range(G)))
    weights = system.group_weights if system is not None else getattr(sim, "group_weights", None)
    weights = np.full(G, 1.0 / G) if weights is None else np.asarray(weights, dtype=np.float64)
    se: dict[str, float] = {}
    for key, stat in (("C", "A"), ("DPE", "AB"), ("IPE", "BZ"), ("SPE", "Z")):
        v = var_of_mean(stat)
        se[key] = float(math.sqrt(v[a] + v[c]))
    for i, gname in enumerate(groups):
        for key, stat in (("V", "A"), ("V_ps", "B"), ("V_0", "Z"), ("direct", "AB"),
                          ("indirect", "BZ"), ("utility", "R")):
            se[f"{key}[{gname}]"] = float(math.sqrt(var_of_mean(stat)[i]))
    se["utility"] = float(math.sqrt(float(weights**2 @ var_of_mean("R"))))
    dec = _chosen(Decomposition(
        engine="mc",
        groups=groups,
        pair=(a, c),
        horizon=T,
        V=V,
        V_ps=V_ps,
        V_0=V_0,
        steps=sums[:3] / n,
        decisions=sums[3:].transpose(1, 0, 2).astype(np.int64),
        utility_by_group=U,
        group_weights=weights,
        Lambda=None,
        se=se,
        n=n,
        seed=seed,
        diagnostics={},
        policy_name=name,
        model_name=system.id if system is not None else (
            getattr(sim, "name", None) or getattr(getattr(sim, "model", None), "name", sim_name)),
    ), pair)
    return _with_lambda(dec, lam_system, policy, eps, alpha, benefit_n, jobs, device,
                        benefit_bins, backend, benefit_shared, lam_weights)


def _chosen(dec: Decomposition, pair: Any) -> Decomposition:
    """``dec`` with ``simultaneous`` m, the pairs its pair was chosen from: G(G-1)/2 for the
    default pair of more than two groups (``pair`` None: picked from these estimates), so
    that its intervals are simultaneous (:mod:`causalfair._simultaneous`); else 1."""
    from dataclasses import replace

    m = pairs_chosen_from(len(dec.groups), pair is not None)
    return dec if m == dec.simultaneous else replace(dec, simultaneous=m)


def _lambda_exact(system: Any, policy: Any) -> bool:
    """Whether :func:`_with_lambda` takes Lambda from the system's tabular model: only for a
    policy known to read (group, level) alone (evaluating any other policy on the model's
    grid could read a history it does not have)."""
    return "exact" in system.engines and reads_only_level_group(untabulated(policy))


def _check_lambda_memory(system: Any, policy: Any, T: int, n: int, benefit_n: int | None
                         ) -> None:
    """Refuse, before the decomposition runs, an audit whose Lambda by forks
    (:func:`_with_lambda`) would need more memory than the limit: the peak of its rollout and
    bootstrap (:func:`causalfair.engines.benefit_forks.forks_bytes`, at the bootstrap
    replicates :func:`~causalfair.engines.benefit_mc.benefit_fairness_mc` draws), often
    more than the decomposition's own batches. A system that declares neither levels nor
    features has no Lambda here (:func:`~causalfair.engines.benefit_mc.system_benefit`
    returns None), so nothing to count; one that declares levels alone is counted with the
    features its observations carry (:func:`~causalfair.engines.benefit_forks.visit_columns`)."""
    if _lambda_exact(system, policy) or (system.n_levels is None and system.features is None):
        return
    m = benefit_size(n, benefit_n)
    units = "worlds" if system.units_per_replica > 1 else "units per group"
    check_memory(forks_bytes(system, m, T, N_BOOT),
                 f"Lambda by forks of {m} {units} over {T} epochs ({N_BOOT} bootstrap "
                 "replicates)", "lower n or benefit_n, or the horizon")


def _check_lambda_weights(system: Any, policy: Any, weights: str) -> None:
    """Refuse, before the run, Lambda ``weights`` the Lambda of :func:`_with_lambda` cannot
    honour: any but "visitation" by forks (exact from the tabular model: both)."""
    check_weights(weights, "exact" if _lambda_exact(system, policy) else "mc")


def _with_lambda(dec: Decomposition, system: Any, policy: Any, eps: float, alpha: float,
                 benefit_n: int | None, jobs: Any = "auto", device: str | None = None,
                 bins: int = 4, backend: Any = None, shared: dict | None = None,
                 weights: str = "visitation") -> Decomposition:
    """``dec`` with Lambda of its pair, its interval and its benefit table
    (:func:`causalfair.engines.benefit_mc.system_benefit`; ``shared``: its forks' statistics
    kept for other pairs; ``weights``: Lambda's P(x | s))."""
    from dataclasses import replace

    dec = replace(dec, alpha=check_alpha(alpha))  # the level its views' intervals take
    m = benefit_size(int(dec.n or 2), benefit_n)
    exact = _lambda_exact(system, policy)
    policy = untabulated(policy) if exact else policy
    ben = system_benefit(system, policy, dec.horizon, engine="exact" if exact else "mc", n=m,
                         seed=int(dec.seed or 0), eps=eps, alpha=alpha, pair=dec.pair, jobs=jobs,
                         device=device, bins=bins, backend=backend, shared=shared,
                         check=False, weights=weights)  # the run settled the contract
    if ben is None:
        return dec
    ci = ben.ci if ben.ci is not None else (ben.Lambda, ben.Lambda)
    return replace(dec, Lambda=float(ben.Lambda), Lambda_ci=(float(ci[0]), float(ci[1])),
                   Lambda_ci_level=ben.ci_level, benefit=ben)


def compare_mc(
    simulator: Any,
    policy: Any,
    baseline: Any,
    horizon: int | None = None,
    *,
    n: int = 100_000,
    seed: int = 0,
    batch_size: int | None = None,
    pair: tuple[int, int] | None = None,
    tabulate: bool = True,
    backend: Any = None,
    jobs: int | str | None = "auto",
    device: str | None = None,
    alpha: float = 0.05,
) -> PairedComparison:
    """Paired Monte Carlo comparison of ``policy`` with ``baseline``: both run on the same
    individuals with the same random numbers (common random numbers; the same streams
    as :func:`decompose_mc` with this ``seed``), so the standard error of a difference
    comes from the per-individual differences, far smaller than two independent runs'.

    Returns, for ``C``, ``DPE``, ``IPE``, ``SPE`` (between the groups of ``pair``;
    default: the pair :func:`decompose_mc` picks for ``policy``) and ``utility``:
    ``{"policy", "baseline", "diff", "se", "abs_diff", "abs_se"}`` where ``diff`` is
    policy minus baseline and ``abs_diff`` = |policy| - |baseline| (its standard error by
    the delta method with the signs of the two estimates, valid when neither is near 0),
    and ``lower``/``upper``, ``abs_lower``/``abs_upper``: their intervals at level
    1 - ``alpha``. A :class:`~causalfair.engines.paired.PairedComparison` (that dict, with
    ``pair``, ``simultaneous``, ``to_dict()`` and ``str()``): with more than two groups and
    no ``pair``, the pair is picked from this run's estimates, so the intervals of C, DPE,
    IPE and SPE are simultaneous over the G(G-1)/2 pairs (Bonferroni, as
    :func:`decompose_mc`'s; :mod:`causalfair._simultaneous`).
    Systems with coupled units are not supported (use the exact engine or two audits).
    """
    alpha = check_alpha(alpha)
    pair_jobs, n, batch, weights = paired_jobs(simulator, policy, baseline, horizon, n=n, seed=seed,
                                          batch_size=batch_size, tabulate=tabulate, device=device,
                                          jobs=jobs)
    G = int(pair_jobs[0].sim.n_groups)
    # a named pair is checked once, before the run (V only picks the default pair)
    ab = None if pair is None else check_pair(pair, G, None)
    backend = engine_backend(backend, jobs, pair_jobs[0].sim, pair_jobs[0].policy,
                             pair_jobs[1].policy, work=2 * G * n * pair_jobs[0].T)
    tasks = ((pair_jobs[0], pair_jobs[1], g, b, m) for g in range(G)
             for b, m in batches(n, batch))
    mom = {k: [[Moments() for _ in range(G)] for _ in range(3)] for k in MOMENT_KEYS}

    def fold(task: tuple[Any, ...], res: list[Any]) -> None:
        for key, trio in zip(MOMENT_KEYS, res, strict=True):
            for i in range(3):
                mom[key][i][task[2]].merge(*trio[i])

    fold_tasks(backend, _paired_batch, tasks, G * -(-n // batch), fold, result_bytes=1200.0)
    # else the default pair, from the policy's V in this run (as paired_numbers picks it)
    a, c = ab or check_pair(None, G, np.array([m_.mean for m_ in mom["A"][0]]))
    sim = pair_jobs[0].sim
    groups = simulator.groups if isinstance(simulator, System) else tuple(
        getattr(sim, "group_names", None) or (str(i) for i in range(G)))
    return PairedComparison(_paired_numbers(mom, a, c, n, weights), pair=(groups[a], groups[c]),
                            simultaneous=pairs_chosen_from(G, pair is not None), alpha=alpha)


def paired_trios(x: tuple[np.ndarray, ...], y: tuple[np.ndarray, ...]
                 ) -> list[tuple[tuple[int, float, float], ...]]:
    """Per key of ``MOMENT_KEYS``: the moments of one batch's totals ``x`` under the policy
    (:func:`simulate_batch`), ``y`` under the baseline, and of their per-unit differences."""
    return [(batch_moments(u), batch_moments(v), batch_moments(u - v))
            for u, v in zip(x, y, strict=True)]


def paired_numbers(mom: dict[str, list[list[Moments]]], pair: tuple[int, int] | None, n: int,
                   weights: np.ndarray) -> dict[str, dict[str, float]]:
    """What :func:`compare_mc` returns, from the folded moments ``mom`` (per key of
    ``MOMENT_KEYS``: [policy, baseline, difference] x group) of a paired run of ``n``
    units per group."""
    G = len(mom["A"][0])
    a, c = check_pair(pair, G, np.array([m_.mean for m_ in mom["A"][0]]))
    return _paired_numbers(mom, a, c, n, weights)


def _paired_numbers(mom: dict[str, list[list[Moments]]], a: int, c: int, n: int,
                    weights: np.ndarray) -> dict[str, dict[str, float]]:
    """:func:`paired_numbers` of the checked pair (``a``, ``c``)."""
    out: dict[str, dict[str, float]] = {}
    for key, stat in (("C", "A"), ("DPE", "AB"), ("IPE", "BZ"), ("SPE", "Z")):
        x, y, d = mom[stat]
        e_p = x[a].mean - x[c].mean
        e_b = y[a].mean - y[c].mean
        sp, sb = (1.0 if e_p >= 0 else -1.0), (1.0 if e_b >= 0 else -1.0)
        var_d = var_abs = 0.0
        for g in (a, c):
            cov = (x[g].var + y[g].var - d[g].var) / 2.0
            var_d += d[g].var / n
            var_abs += max(0.0, x[g].var + y[g].var - 2.0 * sp * sb * cov) / n
        out[key] = {"policy": e_p, "baseline": e_b, "diff": e_p - e_b,
                    "se": math.sqrt(var_d), "abs_diff": abs(e_p) - abs(e_b),
                    "abs_se": math.sqrt(var_abs)}
    x, y, d = mom["R"]
    u_p = float(weights @ np.array([m_.mean for m_ in x]))
    u_b = float(weights @ np.array([m_.mean for m_ in y]))
    se_u = math.sqrt(float(weights**2 @ np.array([m_.var / n for m_ in d])))
    out["utility"] = {"policy": u_p, "baseline": u_b, "diff": u_p - u_b, "se": se_u,
                      "abs_diff": abs(u_p) - abs(u_b), "abs_se": se_u}
    return out


def paired_jobs(simulator: Any, policy: Any, baseline: Any, horizon: int | None = None, *,
                n: int = 100_000, seed: int = 0, batch_size: int | None = None,
                tabulate: bool = True, device: str | None = None, jobs: Any = 1
                ) -> tuple[tuple[Job, Job], int, int, np.ndarray]:
    """The two :class:`Job` s of a paired run of ``policy`` and ``baseline`` with common
    random numbers (same simulator, seed and streams), with ``n``, the batch size and the
    group weights, validated. Systems with coupled units are refused. ``jobs``: the threads
    that run its batches at once, one batch held on each (counted by :func:`_setup`, as for
    :func:`decompose_mc`)."""
    system = simulator if isinstance(simulator, System) else None
    if system is not None and system.units_per_replica != 1:
        raise InputError(f"system {system.id!r}: a paired comparison needs independent units; "
                         "this system couples units within replicas.")
    sim, A, base, T, n, seed, batch = _setup(system, simulator, horizon, n, seed, batch_size,
                                             runs=2, jobs=jobs)
    made = []  # the two Jobs (``jobs`` is the threads)
    for pol, where in ((policy, None), (baseline, "baseline")):
        pol, name = _ready_policy(pol, sim, A, tabulate, None, system, T, device, where=where,
                                  rows=True)
        made.append(Job(sim=sim, policy=pol, T=T, seed=seed, crn=True, A=A, base=base,
                        name=name, sim_name=type_name(sim)))
    G = int(sim.n_groups)
    weights = system.group_weights if system is not None else getattr(sim, "group_weights", None)
    weights = np.full(G, 1.0 / G) if weights is None else np.asarray(weights, dtype=np.float64)
    return (made[0], made[1]), n, batch, weights


def simulate_batch(job: Job, g: int, b: int, m: int, trace: Any = None
                   ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Batch ``b`` of group ``g`` (``m`` units) of ``job``: per-step gain sums and decision
    counts (3 + A, T) and
    per-unit totals (A, B, Z, A-B, B-Z, R), from the streams (seed, g, b, k) that
    :func:`decompose_mc` and :func:`compare_mc` use; ``trace(t, obs, gain, fork_gain)`` sees
    every step (observations, per-unit gains under pi and under the pi^PS fork)."""
    return _simulate(job, g, b, m, trace)

"""The rollouts of Lambda by forks (:mod:`causalfair.engines.benefit_mc`, module docstring,
point 1 and coupled units): units rolled forward under the policy, the simulator forked
once per action at every visited state with the step's own random numbers, each visit
kept with what it saw (levels, features), its benefits Delta against the baseline action
and the policy's action distribution. Independent units: :func:`rollout_units` (one task
per group, or per batch of a simulator's ``batch_size``); coupled units:
:func:`rollout_coupled` (each unit's benefit on its own, :func:`unit_benefits`). The
cells (:mod:`causalfair.engines.benefit_cells`) and Lambda with its interval
(:mod:`causalfair.engines.benefit_mc`) are made from these visits."""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.backends import ThreadBackend
from causalfair.engines._mc_base import batch_for, batches, engine_backend, fold_tasks, is_serial
from causalfair.engines.montecarlo_coupled import joint_actions
from causalfair.policies.core import action_probs
from causalfair.systems.contract import seeded_rng

__all__ = ["STREAM", "decide", "Visits", "rollout_units", "rollout_tasks", "join_rollouts",
           "unit_benefits", "rollout_coupled", "forks_bytes", "visit_columns"]

#: Streams of the benefit estimator: the rollouts' (seed, STREAM, g[, b], k) and the
#: bootstrap's (seed, STREAM, 99). Disjoint from the decomposition's (seed, g, b, k) for
#: systems of at most 11 groups; with 12 or more, group 11's decomposition batch g shares
#: the unbatched forks' streams of group g (each estimate stays valid on its own; C and
#: Lambda of such a system are then correlated). Kept: re-keying changes every fork number.
STREAM = 11

def forks_bytes(system: Any, n: int, T: int, n_boot: int) -> float:
    """Bytes Lambda by forks of ``n`` units per group (worlds for coupled units) over ``T``
    epochs holds at its peak (docs/limits.md, "benefit by forks"; measured in
    docs/scale.md): the bootstrap's Poisson weights (one byte each: n_boot n per group, one
    set for coupled units), the rollout's visits twice (8 bytes per visit for each feature,
    each action's benefit and probability, the unit and the level: a task joins its steps
    into new arrays, and the cells pool the features), a cell index per visit when the
    cells are feature bins, one group's visits again as (1 + 2A) columns (the sums of its
    (cell, unit) pairs), and, with a bootstrap, one group's weights again (transposed) and
    its pairs' keys, their inverse and the pairs (8 bytes a visit each, at most; beside
    them each thread's products take at most 2.3 MiB). The features and levels are those
    the observations carry (:func:`visit_columns`: declared, else seen on a probe). With
    ``n_boot`` 0 no weights and no pairs."""
    A, G, U = system.n_actions, system.n_groups, system.units_per_replica
    F, levels = visit_columns(system)
    visits = (n * U if U > 1 else G * n) * T
    rollout = 8.0 * visits * (F + 2 * A + 1 + levels)
    cells = 0.0 if levels else 8.0 * visits
    C = 1 + 2 * A
    group_visits = visits if U > 1 else n * T
    out = 2 * rollout + cells + 8.0 * group_visits * C
    if n_boot:
        out += (1.0 + (1 if U > 1 else G)) * n_boot * n + 24.0 * group_visits
    return out


def visit_columns(system: Any) -> tuple[int, bool]:
    """(F, levels): the feature columns and whether a level, of what each visit of a
    rollout keeps (:class:`Visits`: whatever the observations carry, declared or not). A
    system that declares its features is read (the contract holds its observations to
    them; a Gymnasium system always declares them). One that does not (a user's simulator
    without ``feature_names``) still carries whatever features its observations have,
    which the rollout keeps and the cells bin: its features and whether its observations
    carry levels are learnt from a probe, two individuals of group 0 (one world of coupled
    units) reset from their own stream, ``Observation.features.shape[1]`` and
    ``Observation.level``. An object without a simulator (a description) is read as
    declared."""
    F = None if system.features is None else len(system.features)
    levels = system.n_levels is not None
    make = getattr(system, "make_simulator", None)
    if F is not None or make is None:
        return F or 0, levels
    sim = make()
    coupled = system.units_per_replica > 1
    obs = sim.observe(sim.reset(1 if coupled else 2, None if coupled else 0,
                                seeded_rng(0, STREAM, 98)))
    feats = obs.features
    return 0 if feats is None else int(np.shape(feats)[1]), levels or obs.level is not None


def decide(p: np.ndarray, u: np.ndarray, A: int, base: int) -> np.ndarray:
    """One action per row of ``p`` from the uniforms ``u`` (booleans for d0/d1 systems)."""
    if A == 2 and base == 0:
        return u < p[:, 1]
    return (u[:, None] >= np.cumsum(p[:, :-1], axis=1)).sum(axis=1)


class Visits:
    """One group's visits of a rollout of ``n`` individuals over ``T`` steps, step by step:
    what each saw (levels, features), the benefits Delta of each action against the
    baseline, the policy's action probabilities; :meth:`arrays` stacks them (individual
    ``i`` of every step is row ``i`` of ``np.tile(np.arange(n), T)``)."""

    def __init__(self) -> None:
        self.levs: list[np.ndarray] = []
        self.feats: list[np.ndarray] = []
        self.deltas: list[np.ndarray] = []
        self.probs: list[np.ndarray] = []

    def add(self, obs: Any, deltas: np.ndarray, probs: np.ndarray) -> None:
        self.deltas.append(deltas)
        self.probs.append(probs)
        if obs.level is not None:
            self.levs.append(np.asarray(obs.level, dtype=np.intp))
        if obs.features is not None:
            self.feats.append(np.asarray(obs.features, dtype=np.float64))

    def arrays(self, n: int, T: int, start: int = 0) -> tuple[Any, ...]:
        """(levels or None, features or None, deltas, probs, individual index), the
        individuals numbered from ``start``."""
        return (np.concatenate(self.levs) if len(self.levs) == T else None,
                np.concatenate(self.feats) if len(self.feats) == T else None,
                np.concatenate(self.deltas), np.concatenate(self.probs),
                np.tile(np.arange(start, start + n), T))


def rollout_units(system: Any, policy: Any, T: int, n: int, seed: int, pname: str,
                  jobs: Any = "auto", backend: Any = None) -> tuple:
    """Independent units: n per group, one fork per action at every visited state.
    (levels per group or None, features per group or None, benefits (visits, A),
    action distributions (visits, A), the individual of each visit), per group. Each
    group draws from its own streams (seed, STREAM, g, k), so the groups may run on ``jobs``
    threads (:func:`~causalfair.engines._mc_base.engine_backend`), or as tasks of
    ``backend`` (worker processes, Ray: also for a simulator that is not thread-safe),
    with the same numbers. A simulator that declares its own ``batch_size``
    (:func:`~causalfair.engines._mc_base.batch_for`) is rolled out in batches of that
    many units, batch b of group g from the streams (seed, STREAM, g, b, k), each batch a
    task."""
    sim = system.make_simulator()
    A, base, G = system.n_actions, system.decisions.baseline, system.n_groups
    acts = [a if A > 2 or base != 0 else bool(a) for a in range(A)]
    # a simulator class may step the A forks and the decisions of an epoch in one call, the
    # same numbers as the A + 1 steps, consuming the state (GymSimulator.step_forks)
    forks = getattr(type(sim), "step_forks", None)
    tasks = rollout_tasks(sim, G, n)

    def rollout(task: tuple[int, int | None, int, int]) -> tuple:
        g, b, start, m = task
        key = (g,) if b is None else (g, b)
        state = sim.reset(m, g, seeded_rng(seed, STREAM, *key, 0))
        rng_noise, rng_dec = seeded_rng(seed, STREAM, *key, 1), seeded_rng(seed, STREAM, *key, 2)
        visits = Visits()
        for _ in range(T):
            obs = sim.observe(state)
            p = action_probs(policy, obs, A, f"policy {pname!r}", units=m)
            noise = sim.draw_noise(m, rng_noise)
            d = decide(p, rng_dec.random(m), A, base)
            if forks is not None:
                gains, res = forks(sim, state, acts, d, noise)
            else:
                gains = np.stack([sim.step(state, np.full(m, a), noise).gain for a in acts], axis=1)
                res = sim.step(state, d, noise)
            visits.add(obs, gains - gains[:, base:base + 1], p)
            state = res.state
        return visits.arrays(m, T, start)

    away = backend is not None and not is_serial(backend) and not isinstance(backend,
                                                                             ThreadBackend)
    where = backend if away else engine_backend(None, jobs, sim, policy, work=G * n * T)
    # a visit's row: features (those carried, declared or not), benefits, ...; counted where
    # the tasks' results are held at once (another backend)
    width = (visit_columns(system)[0] if away else 0) + 2 * A + 2
    parts: list[list[tuple]] = [[] for _ in range(G)]
    fold_tasks(where, rollout, tasks, len(tasks), lambda task, r: parts[task[0]].append(r),
               result_bytes=8.0 * max(m for *_, m in tasks) * T * width)
    return join_rollouts(parts)


def rollout_tasks(sim: Any, G: int, n: int) -> list[tuple[int, int | None, int, int]]:
    """The tasks of a rollout of ``n`` independent units per group: (group, batch, first
    unit, units). One per group (batch None: streams (seed, stream, g, k)), or, for a
    simulator that declares its own ``batch_size``
    (:func:`~causalfair.engines._mc_base.batch_for`), one per batch of that many units
    (streams (seed, stream, g, b, k))."""
    if getattr(sim, "batch_size", None) is None:
        return [(g, None, 0, n) for g in range(G)]
    size = batch_for(sim, None)
    return [(g, b, b * size, m) for g in range(G) for b, m in batches(n, size)]


def join_rollouts(parts: list[list[tuple]]) -> tuple:
    """Per group, its tasks' :meth:`Visits.arrays` in task order, joined: (levels per group
    or None, features per group or None, benefits, action distributions, the unit of each
    visit)."""
    out = [p[0] if len(p) == 1 else tuple(
        None if p[0][k] is None else np.concatenate([q[k] for q in p]) for k in range(5))
        for p in parts]
    lev_g = None if any(o[0] is None for o in out) else [o[0] for o in out]
    feat_g = None if any(o[1] is None for o in out) else [o[1] for o in out]
    return lev_g, feat_g, [o[2] for o in out], [o[3] for o in out], [o[4] for o in out]


def unit_benefits(sim: Any, state: Any, noise: Any, n: int, U: int, A: int, base: int
                  ) -> np.ndarray:
    """Each unit's benefit on its own at this step (:mod:`causalfair.engines.benefit_mc`'s
    docstring, coupled units): (n * U, A), row v of world i the gain of unit v when it
    alone takes action a (every other unit the baseline) minus its gain when nobody acts,
    from ``state`` with ``noise``; column ``base`` is 0. One fork per unit position and
    action, each over all n worlds."""
    binary = A == 2 and base == 0
    d0 = np.zeros(n * U, dtype=bool) if binary else np.full(n * U, base)
    g0 = np.asarray(sim.step(state, d0, noise).gain, dtype=np.float64)
    delta = np.zeros((n * U, A))
    for v in range(U):
        rows = np.arange(n) * U + v
        for a in range(A):
            if a != base:
                d = d0.copy()
                d[rows] = True if binary else a
                gain = np.asarray(sim.step(state, d, noise).gain, dtype=np.float64)
                delta[rows, a] = gain[rows] - g0[rows]
    return delta


def rollout_coupled(system: Any, policy: Any, T: int, n: int, seed: int, pname: str) -> tuple:
    """Coupled units: n worlds under the policy; at every visited world state one fork per
    unit and action (that unit acts, every other unit takes the baseline) against the
    all-baseline fork, with the step's noise (:mod:`causalfair.engines.benefit_mc`'s
    docstring, coupled units). Same return as :func:`rollout_units`, the visits split by
    the units' groups; a visit's "individual" is its world."""
    sim = system.make_simulator()
    A, base, G = system.n_actions, system.decisions.baseline, system.n_groups
    U, M = system.units_per_replica, n * system.units_per_replica
    binary = A == 2 and base == 0
    state = sim.reset(n, None, seeded_rng(seed, STREAM, 0, 0))
    rng_noise, rng_dec = seeded_rng(seed, STREAM, 0, 1), seeded_rng(seed, STREAM, 0, 2)
    world = np.arange(M) // U
    groups, levs, feats, deltas, probs = [], [], [], [], []
    for _ in range(T):
        obs = sim.observe(state)
        p = action_probs(policy, obs, A, f"policy {pname!r}", units=M)
        noise = sim.draw_noise(M, rng_noise)
        delta = unit_benefits(sim, state, noise, n, U, A, base)
        groups.append(np.asarray(obs.group, dtype=np.intp).reshape(-1))
        deltas.append(delta)
        probs.append(p)
        if obs.level is not None:
            levs.append(np.asarray(obs.level, dtype=np.intp))
        if obs.features is not None:
            feats.append(np.asarray(obs.features, dtype=np.float64))
        if system.decisions.budget == 1:
            d = joint_actions(p, rng_dec.random(n), n, U, base, pname)
            d = d.astype(bool) if binary else d
        else:
            d = decide(p, rng_dec.random(M), A, base)
        state = sim.step(state, d, noise).state
    grp, wld = np.concatenate(groups), np.tile(world, T)
    split = [grp == g for g in range(G)]

    def cat(xs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.concatenate(xs)[m] for m in split]

    return (cat(levs) if len(levs) == T else None, cat(feats) if len(feats) == T else None,
            cat(deltas), cat(probs), [wld[m] for m in split])

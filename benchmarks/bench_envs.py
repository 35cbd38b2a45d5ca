"""Benchmark (issue "The seeds' other environments"): environment steps per second of the
vectorised simulators against a plain one-environment Python loop of the same dynamics,
measured in the same run (target: at least 100x).

The target's baseline is the one-environment Gymnasium env in a Python loop: the same
dynamics, one graph (or one set of sites) per ``step`` call, as an RL library steps a
single environment. Two more figures put it in context:

- a tight pure-Python loop over one graph's members (networkx neighbour lists,
  ``random.random()`` per member) or one set of sites (Knuth's Poisson sampler): the
  fastest way to step one environment without numpy;
- a ceiling: the random numbers a step cannot do without (one float32 uniform per member;
  numpy's compiled Poisson sampler per site), drawn as arrays and nothing else. Its ratio
  to the pure loop bounds what any vectorised implementation can reach against that loop
  on this machine (below 100x for both systems: the pure loops are fast because an
  epidemic saturates within a few steps and five sites are little work).

Infectious disease (karate club, 34 members): ``VecInfectiousEnv`` stepping ``--envs``
graphs at once (member-level int8 arrays, one uniform per member; while many members are
susceptible, one float32 matrix product for the infected neighbours and a float32
probability table, in blocks of 512 graphs so that the temporaries stay in the cache;
once few are, the sparse path below). Its figure is the whole environment step (drawing
the uniforms included) and the episode's resets, against drawing the uniforms alone.
Attention allocation (attention-1): ``VecAttentionEnv`` (greedy placement as a loop over
the N units on arrays, Poisson incidents by inverse CDF). The systems' own simulators (the Monte Carlo engine's and the trainer's step):
lending-1 (``LendingSimulator``), lending-harder (the tabular simulator) and
replicator-1 stepping ``--individuals`` units of one group, decisions and noise drawn
beforehand, against their ``draw_noise`` alone (replicator-1 is deterministic: no
ceiling), with the page faults a step (:func:`_page_faults`).

Every figure is CPU time (``time.process_time``); each vectorised figure and each
ceiling is the best of ``--repeats`` rounds (the machine is shared: the best round is the
least disturbed one).

Issue 28 (item 4) made the lending, tabular, attention and infectious steps faster with
the same arrays bit for bit; the steps they replaced are kept here (``old_*``, the
baselines, which tests/test_envs_speed.py also checks the new steps against), and each such
figure is printed with the old step's, measured in the same run, rounds of the two
alternating (the ratio is new / old, both best of ``--repeats``). The infectious step
gained a sparse path (once at most 1 member in 32 is susceptible: recovery by one
comparison, infection only for the susceptible members, by their neighbours one by one; no
matrix product, no per-member lookup; blocks of 2048 graphs); ``old_infectious_step`` is
the step before it.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_envs.py [--envs 4096] [--steps 42]``.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import numpy as np

#: CPU time of this process: the machine is shared, and with ``OMP_NUM_THREADS=1`` the CPU
#: time a figure took is what its work cost, whatever else the machine was running.
_clock = time.process_time


# ------------------------------------------------ the steps before issue 28 (baselines)
def old_lending_step(sim: Any, state: Any, decisions: Any, noise: Any) -> Any:
    """``LendingSimulator.step`` before issue 28 (tables by x * 5 + code; the reward in
    arithmetic; the thresholds' gathered copy, the index and a float intermediate of n
    each)."""
    from causalfair.systems.lending.settings import LendingState
    from causalfair.systems.tabular_sim import LazyArrays
    from causalfair.types import StepResult

    x, g, gid = state.level, state.group, state.group_id
    K = sim.n_levels
    if "_old_tables" not in sim.__dict__:  # the old simulator's tables
        nxt = np.clip(np.arange(K)[:, None] + np.arange(-2, 3), 0, K - 1)  # (K, 5)
        sim._old_tables = (np.round(sim.model.p_repay * float(2**32)).astype(np.uint64),
                           nxt.reshape(-1).astype(np.intp),
                           (sim._f[nxt] - sim._f[:, None]).reshape(-1))
    thr_all, next_table, gain_table = sim._old_tables
    d = np.asarray(decisions)
    if d.dtype != np.bool_:
        d = d.astype(bool)
    integer = noise.repay.dtype.kind == "u"
    if gid is not None:
        thr = thr_all[gid]

        def repay_fn() -> np.ndarray:
            if integer:
                return noise.repay < thr.take(x)
            return noise.repay < sim.model.p_repay[gid][x]

        drift = noise.cache.get(gid)
        if drift is None:
            c0, c1 = sim._drift_thr[gid] if integer else sim._drift_cdf[gid, :2]
            drift = (noise.drift >= c0).view(np.int8) + (noise.drift >= c1).view(np.int8)
            noise.cache[gid] = drift
    else:
        flat = g * K + x

        def repay_fn() -> np.ndarray:
            if integer:
                return noise.repay < thr_all.reshape(-1).take(flat)
            return noise.repay < sim.model.p_repay.reshape(-1)[flat]

        cdf = sim._drift_thr if integer else sim._drift_cdf[:, :2]
        drift = ((noise.drift >= cdf[g, 0]).view(np.int8)
                 + (noise.drift >= cdf[g, 1]).view(np.int8))
    j = x * 5
    if d.any():
        repay = repay_fn()
        j += drift + (d.view(np.int8) * (2 * repay.view(np.int8) - 1) + 1)
        nxt = next_table.take(j)
        reward = (d & repay) * (sim._interest + 1.0) - d
        info = LazyArrays({"repay": lambda: repay, "drift": lambda: drift.astype(np.intp) - 1})
    else:
        j += drift + np.int8(1)
        nxt = next_table.take(j)
        reward = np.zeros(x.shape[0])
        info = LazyArrays({"repay": repay_fn, "drift": lambda: drift.astype(np.intp) - 1})
    gain = gain_table.take(j)
    return StepResult(state=LendingState(level=nxt, group=g, t=state.t + 1, group_id=gid),
                      reward=reward, gain=gain, info=info)


def old_tabular_step(sim: Any, state: Any, decisions: Any, noise: Any) -> Any:
    """``TabularSimulator.step`` before issue 28 (the gain as two lookups in the potential
    and their difference)."""
    from causalfair.systems.tabular_sim import TabularState
    from causalfair.types import StepResult

    x, g = state.level, state.group
    A, K, B = sim.model.n_actions, sim.n_levels, sim._buckets
    d = np.asarray(decisions)
    if d.dtype != np.bool_:
        d = d.astype(np.intp, copy=False)
    s = g if state.group_id is None else state.group_id
    cell = x + s * (A * K)
    cell += d * K
    u = np.asarray(noise, dtype=np.float64)
    scaled = u * B
    np.clip(scaled, 0, B, out=scaled)
    bucket = scaled.astype(np.intp)
    bucket += cell * (B + 1)
    nxt = sim._guide.take(bucket)
    todo = np.flatnonzero(nxt < 0)
    if todo.size:
        nxt[todo] = (u[todo, None] >= sim._cdf[cell[todo]]).sum(axis=1)
    if state.group_id is None:
        f, x_row, nxt_row = sim._f.reshape(-1), g * K + x, g * K + nxt
    else:
        f, x_row, nxt_row = sim._f[state.group_id], x, nxt
    gain = f.take(nxt_row) - f.take(x_row)
    return StepResult(state=TabularState(level=nxt, group=g, t=state.t + 1,
                                         group_id=state.group_id),
                      reward=sim._reward.take(cell), gain=gain)


def old_allocate(weights: np.ndarray, units: int) -> np.ndarray:
    """``attention.allocate`` before issue 28 (each unit gathers and scatters by row)."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum(axis=1, keepdims=True)
    share = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    alloc = np.zeros(w.shape, dtype=np.int64)
    rows = np.nonzero(total[:, 0] > 0)[0]
    for _ in range(units):
        k = share[rows].argmax(axis=1)
        alloc[rows, k] += 1
        share[rows, k] -= 1.0 / units
    return alloc


def old_poisson_inverse(u: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``attention.poisson_inverse`` before issue 28 (every entry summed until the last
    one is done)."""
    lam = np.asarray(lam, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    k = np.zeros_like(lam)
    big = lam > 500.0
    pmf = np.exp(-np.where(big, 0.0, lam))
    cdf = pmf.copy()
    active = (u >= cdf) & ~big & (lam > 0)
    i = 0
    with np.errstate(over="ignore"):
        while active.any():
            i += 1
            pmf = pmf * lam / i
            cdf = cdf + pmf
            k += active
            active &= (u >= cdf) & (pmf > 0)
    if big.any():
        from scipy.stats import poisson

        k[big] = poisson.ppf(u[big], lam[big])
    return k


class old_attention:  # noqa: N801 - used as ``with old_attention():``
    """The attention simulator with its placement and sampler before issue 28 (the step
    looks both up in its module when it runs)."""

    def __enter__(self) -> None:
        from causalfair.systems import attention

        self.saved = attention.allocate, attention.poisson_inverse
        attention.allocate, attention.poisson_inverse = old_allocate, old_poisson_inverse

    def __exit__(self, *exc: Any) -> None:
        from causalfair.systems import attention

        attention.allocate, attention.poisson_inverse = self.saved


def old_infectious_step(sim: Any, s: Any, d: Any, noise: Any) -> Any:
    """``InfectiousSimulator.step`` before its sparse path (blocks of 512 graphs, each one
    matrix product for every member's infected neighbours and one table lookup per
    member)."""
    from causalfair.systems.infectious import INF, REC, SUS, InfectiousState
    from causalfair.types import StepResult

    U = sim.units
    d = np.asarray(d, dtype=bool).reshape(-1)
    noise = np.asarray(noise).reshape(-1)
    health = s.health
    nxt = np.empty_like(health)
    demand = np.empty(health.shape, dtype=np.int8)
    block = U * 512
    for lo in range(0, health.shape[0], block):
        sl = slice(lo, lo + block)
        treated = (d[sl] & (health[sl] == SUS)).view(np.int8)
        h = health[sl] + REC * treated
        k = ((h == INF).reshape(-1, U).astype(np.float32) @ sim._adj32).reshape(-1)
        idx = h.astype(np.int16) * np.int16(U + 1) + k.astype(np.int16)
        move = noise[sl] < sim._p_move.take(idx)
        np.add(h, move.view(np.int8), out=nxt[sl])
        if sim.loss:
            nxt[sl][nxt[sl] == 3] = SUS
        np.logical_and(move, h == SUS, out=demand[sl].view(bool))
    after = (nxt != INF).view(np.int8)
    info = {"supply": d.astype(np.int8), "demand": demand}
    return StepResult(state=InfectiousState(health=nxt, group=s.group, t=s.t + 1),
                      reward=after, gain=after - (health != INF).view(np.int8), info=info)


class old_infectious:  # noqa: N801 - used as ``with old_infectious():``
    """The infectious simulator with its step before the sparse path."""

    def __enter__(self) -> None:
        from causalfair.systems.infectious import InfectiousSimulator

        self.saved = InfectiousSimulator.step
        InfectiousSimulator.step = old_infectious_step

    def __exit__(self, *exc: Any) -> None:
        from causalfair.systems.infectious import InfectiousSimulator

        InfectiousSimulator.step = self.saved


def loop_infectious(steps: int, seed: int = 0) -> float:
    """Graph-steps per second of a per-member Python loop (one graph)."""
    import networkx as nx

    g = nx.karate_club_graph()
    nbrs = [list(g.neighbors(v)) for v in range(34)]
    rnd = random.Random(seed)
    tau, rho = 0.5, 0.005
    t0 = _clock()
    done = 0
    while done < steps:
        health = [0] * 34
        health[0] = 1
        for t in range(21):  # burn-in + 20 steps
            vacc = rnd.randrange(35) if t else 34
            if vacc < 34 and health[vacc] == 0:
                health[vacc] = 2
            nxt = list(health)
            for v in range(34):
                if health[v] == 0:
                    k = sum(1 for w in nbrs[v] if health[w] == 1)
                    if rnd.random() < 1 - (1 - tau) ** k:
                        nxt[v] = 1
                elif health[v] == 1 and rnd.random() < rho:
                    nxt[v] = 2
            health = nxt
            done += 1
    return done / (_clock() - t0)


def gym_infectious(steps: int, seed: int = 0) -> float:
    """Graph-steps per second of the Gymnasium environment (one graph, numpy over members)."""
    import gymnasium as gym

    import causalfair  # noqa: F401 - registers the environments

    env = gym.make("causalfair/Infectious-v0")
    rng = np.random.default_rng(seed)
    t0 = _clock()
    done = 0
    while done < steps:
        env.reset(seed=int(rng.integers(1 << 30)))
        done += 1
        for _ in range(20):
            env.step(int(rng.integers(0, 35)))
            done += 1
    return done / (_clock() - t0)


def vec_infectious(n_envs: int, steps: int, seed: int = 0, old: bool = False) -> float:
    """Graph-steps per second of ``VecInfectiousEnv`` (the burn-in step at reset counts;
    ``old``: with the block step before its sparse path)."""
    if old:
        with old_infectious():
            return vec_infectious(n_envs, steps, seed)
    from causalfair.systems.gym.infectious import VecInfectiousEnv

    env = VecInfectiousEnv(n_envs)
    rng = np.random.default_rng(seed)
    t0 = _clock()
    done = 0
    while done < steps * n_envs:
        env.reset(rng)
        done += n_envs  # the burn-in step
        for _ in range(20):
            env.step(rng.integers(0, 35, n_envs))
            done += n_envs
    return done / (_clock() - t0)


def floor_infectious(n_envs: int, steps: int, seed: int = 0) -> float:
    """The ceiling of any vectorised step: graph-steps per second of drawing one float32
    uniform per member and doing nothing else (every step needs at least that much luck)."""
    rng = np.random.default_rng(seed)
    t0 = _clock()
    for _ in range(steps):
        rng.random(n_envs * 34, dtype=np.float32)
    return steps * n_envs / (_clock() - t0)


def gym_attention(steps: int, seed: int = 0) -> float:
    """Steps per second of the Gymnasium environment (one set of sites, numpy)."""
    import gymnasium as gym

    import causalfair  # noqa: F401 - registers the environments

    env = gym.make("causalfair/Attention-v0")
    rng = np.random.default_rng(seed)
    t0 = _clock()
    done = 0
    while done < steps:
        env.reset(seed=int(rng.integers(1 << 30)))
        for _ in range(20):
            env.step(rng.uniform(-3, 3, 5).astype(np.float32))
            done += 1
    return done / (_clock() - t0)


def floor_attention(n_envs: int, steps: int, seed: int = 0) -> float:
    """The ceiling of any vectorised step: numpy's compiled Poisson sampler drawing every
    site's incidents at attention-1's rates, and nothing else."""
    rng = np.random.default_rng(seed)
    lam = np.tile([8.0, 6.0, 4.0, 3.0, 1.5], n_envs)
    t0 = _clock()
    for _ in range(steps):
        rng.poisson(lam)
    return steps * n_envs / (_clock() - t0)


def loop_attention(steps: int, seed: int = 0) -> float:
    """Steps per second of a plain Python loop over one set of 5 sites (attention-1)."""
    import math

    rnd = random.Random(seed)
    rates0, d, units = [8.0, 6.0, 4.0, 3.0, 1.5], 0.1, 6

    def poisson(lam: float) -> int:  # Knuth's method, as a plain implementation would
        if lam <= 0:
            return 0
        limit, k, p = math.exp(-lam), 0, rnd.random()
        while p > limit:
            k += 1
            p *= rnd.random()
        return k

    t0 = _clock()
    done = 0
    while done < steps:
        rates = list(rates0)
        for _ in range(20):
            w = [rnd.random() + 0.01 for _ in range(5)]
            tot = sum(w)
            share = [x / tot for x in w]
            a = [0] * 5
            for _ in range(units):
                k = max(range(5), key=share.__getitem__)
                a[k] += 1
                share[k] -= 1.0 / units
            for k in range(5):
                y = poisson(rates[k])
                _seen = min(a[k], y)
                rates[k] = rates[k] + d if a[k] == 0 else max(0.0, rates[k] - d * a[k])
            done += 1
    return done / (_clock() - t0)


def vec_attention(n_envs: int, steps: int, seed: int = 0, old: bool = False) -> float:
    """Steps per second of ``VecAttentionEnv`` (``old``: with the placement and sampler
    before issue 28)."""
    if old:
        with old_attention():
            return vec_attention(n_envs, steps, seed)
    from causalfair.systems.gym.attention import VecAttentionEnv

    env = VecAttentionEnv(n_envs)
    rng = np.random.default_rng(seed)
    t0 = _clock()
    done = 0
    while done < steps * n_envs:
        env.reset(rng)
        for _ in range(20):
            env.step(rng.random((n_envs, 5)) + 0.01)
            done += n_envs
    return done / (_clock() - t0)


#: The systems' steps before issue 28, by the simulator's class name.
OLD_STEPS = {"LendingSimulator": old_lending_step, "TabularSimulator": old_tabular_step}


def vec_system(system_id: str, n: int, steps: int, seed: int = 0, old: bool = False
               ) -> tuple[float, float]:
    """Unit-steps per second of a system's own simulator ``step`` (``n`` replicas of group
    0, random decisions and the noise drawn beforehand: the step alone), and the page
    faults per step (:func:`_page_faults`). ``old``: the step before issue 28."""
    from causalfair.systems import registry

    system = registry.make(system_id)
    sim = system.simulator()  # the raw simulator, without the contract guard
    units = n * system.units_per_replica
    rng = np.random.default_rng(seed)
    state = sim.reset(n, 0, rng)
    # decisions as the Monte Carlo engine passes them: bool for two actions, else indices
    dtype = bool if system.n_actions == 2 else np.intp
    d = [rng.integers(0, system.n_actions, units).astype(dtype) for _ in range(steps)]
    noise = [sim.draw_noise(units, rng) for _ in range(steps)]
    step = sim.step
    if old:
        old_step = OLD_STEPS[type(sim).__name__]

        def step(state: Any, d: Any, noise: Any) -> Any:
            return old_step(sim, state, d, noise)

    f0, t0 = _page_faults(), _clock()
    for t in range(steps):
        state = step(state, d[t], noise[t]).state
    t1, f1 = _clock(), _page_faults()
    return steps * units / (t1 - t0), (f1 - f0) / steps


def floor_system(system_id: str, n: int, steps: int, seed: int = 0) -> float:
    """The ceiling of a system's step: unit-steps per second of its simulator's
    ``draw_noise`` alone (the random numbers a step needs, drawn its own way)."""
    from causalfair.systems import registry

    system = registry.make(system_id)
    sim = system.simulator()
    units = n * system.units_per_replica
    rng = np.random.default_rng(seed)
    t0 = _clock()
    for _ in range(steps):
        sim.draw_noise(units, rng)
    return steps * units / (_clock() - t0)


def _page_faults() -> float:
    """The minor page faults of this process so far (nan where ``resource`` is missing):
    each is the kernel handing over a fresh 4 KiB page. With arrays of MiBs, the C
    allocator returns freed ones to the system and takes fresh pages for new ones, so a
    step can fault on most of the memory it writes; each fault costs CPU time in the
    kernel, counted in the step's figure."""
    try:
        import resource
    except ImportError:  # not on Windows
        return float("nan")
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def _best(repeats: int, fn: Any, *args: Any) -> Any:
    """The best of ``repeats`` rounds (a tuple: by its first entry, the rate)."""
    return max(fn(*args) for _ in range(repeats))


def _best_pair(repeats: int, fn: Any, *args: Any) -> tuple[Any, Any]:
    """Best of ``repeats`` rounds of ``fn(*args)`` (the new step) and of ``fn(*args,
    old=True)``, rounds alternating so that both see the same load."""
    new, old = fn(*args), fn(*args, old=True)
    for _ in range(repeats - 1):
        old = max(old, fn(*args, old=True))
        new = max(new, fn(*args))
    return new, old


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", type=int, default=4096, help="graphs stepped at once")
    ap.add_argument("--steps", type=int, default=42, help="steps per graph (vectorised)")
    ap.add_argument("--individuals", type=int, default=1 << 18,
                    help="units stepped at once by the systems' own simulators (default "
                         "262,144)")
    ap.add_argument("--repeats", type=int, default=5,
                    help="rounds per vectorised figure and ceiling; the best counts (default 5)")
    args = ap.parse_args()
    r = args.repeats
    loop = loop_infectious(20000)
    one = gym_infectious(2000)
    vec, old_vec = _best_pair(r, vec_infectious, args.envs, args.steps)
    floor = _best(r, floor_infectious, args.envs, args.steps)
    print("infectious disease, karate club (34 members), steps of one graph per second:")
    print(f"  pure Python loop over members, one graph: {loop:12,.0f}")
    print(f"  Gymnasium env, one graph (numpy):         {one:12,.0f}")
    print(f"  vectorised, {args.envs} graphs at once:        {vec:12,.0f}   "
          f"({vec / one:,.0f}x the one-graph env, target >= 100x; {vec / loop:,.1f}x the pure "
          "loop)")
    print(f"  the same, the step before its sparse path: {old_vec:10,.0f}   (now "
          f"{vec / old_vec:.2f}x; it reached {old_vec / floor:.0%} of the ceiling)")
    print(f"  ceiling: one float32 uniform per member:  {floor:12,.0f}   "
          f"({floor / loop:,.1f}x the pure loop; the vectorised step reaches "
          f"{vec / floor:.0%} of it)")
    loop_a = loop_attention(20000)
    one_a = gym_attention(4000)
    vec_a, old_a = _best_pair(r, vec_attention, args.envs, 40)
    floor_a = _best(r, floor_attention, args.envs, 40)
    print("attention allocation, 5 sites, 6 units (attention-1), steps per second:")
    print(f"  pure Python loop, one set of sites:       {loop_a:12,.0f}")
    print(f"  Gymnasium env, one set of sites (numpy):  {one_a:12,.0f}")
    print(f"  vectorised, {args.envs} sets at once:          {vec_a:12,.0f}   "
          f"({vec_a / one_a:,.0f}x the one-set env, target >= 100x; {vec_a / loop_a:,.1f}x "
          "the pure loop)")
    print(f"  the same, the step before issue 28:       {old_a:12,.0f}   "
          f"(now {vec_a / old_a:.2f}x; it reached {old_a / floor_a:.0%} of the ceiling)")
    print(f"  ceiling: numpy's Poisson sampler alone:   {floor_a:12,.0f}   "
          f"({floor_a / loop_a:,.1f}x the pure loop; the vectorised step reaches "
          f"{vec_a / floor_a:.0%} of it)")
    from causalfair.systems import registry

    print(f"the systems' own simulator steps, {args.individuals:,} units at once (one group),"
          " unit-steps per second:")
    for sid, what in (("lending-1", "one 64-bit random word per individual"),
                      ("lending-harder", "one float64 uniform per individual"),
                      ("replicator-1", None)):
        n = args.individuals // registry.make(sid).units_per_replica
        if what is None:
            vec_s, faults = _best(r, vec_system, sid, n, 20)
            print(f"  {sid:15s} step {vec_s:14,.0f}   (deterministic dynamics: no random "
                  f"numbers, no ceiling; {faults:,.0f} page faults a step)")
            continue
        (vec_s, faults), (old_s, old_faults) = _best_pair(r, vec_system, sid, n, 20)
        floor_s = _best(r, floor_system, sid, n, 20)
        print(f"  {sid:15s} step {vec_s:14,.0f}   ceiling ({what}): {floor_s:,.0f}; the step "
              f"reaches {vec_s / floor_s:.0%} of it")
        print(f"  {'':15s} before issue 28 {old_s:,.0f} ({old_s / floor_s:.0%} of the "
              f"ceiling): now {vec_s / old_s:.2f}x; page faults a step {faults:,.0f} (before "
              f"{old_faults:,.0f}; a step writes {3 * args.individuals * 8 / 4096:,.0f} pages "
              "of new arrays)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

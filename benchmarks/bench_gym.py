"""The Gymnasium door's cost (docs/own-system.md, "Audit your Gymnasium env"): the Monte
Carlo audit of a cheap Gymnasium env through ``cf.systems.from_gym`` against the env's own
bare ``step`` loop, both per individual-step, measured in the same run on one core.

    OMP_NUM_THREADS=1 python benchmarks/bench_gym.py [--n 2000] [--horizon 10] [--work 0] [--jobs 2]

Both are CPU seconds of this process (``time.process_time``), so other work on the machine
inflates them less than wall time; the ratio is the audit's over the bare loop's. Each is
timed after a short warm-up run (the first audit of a process also pays one-time imports).
``--work K`` adds K iterations of float arithmetic to each env step (a costlier env: the
ratio falls towards the env steps an individual-step needs). ``--jobs J`` also times the
audit (without and with Lambda) on J local worker processes (``--backend process``) in wall time, the same
(group, batch) tasks with keyed random streams (batches of the door's 256 individuals,
as ``causalfair decompose`` runs them), so the estimates are identical to serial
(checked here), and prints serial wall time / J-process wall time with the core count and
the load average, and the same net of the workers' start-up (timed on trivial tasks).

The audit's individual-step is the env steps the decomposition needs (pi; the pi^PS fork
where pi's decision is not the baseline; pi0 once its path has left pi's: a transition
already made from the same env state with the same action and random numbers is reused)
plus the policy (evaluated once per batch on the stacked observations), a copy of the env
where pi's decision leaves the baseline (``GymSimulator.step_paths`` steps the other envs
in place), and the per-step generator states.

The audit with Lambda (``benefit_n`` = n, what ``causalfair decompose`` runs) adds the
benefit rollout: n individuals per group under pi, each state forked once per action
with one noise, plus the bootstrap of its interval; the last line is that part alone and
its share of the audit with Lambda. ``GymSimulator.step_forks`` steps an epoch's forks and
pi's decisions in one call: per individual, A - 1 copies of its env and A env steps (the
decision's transition is the fork of its action; the last fork steps the env in place).
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import causalfair as cf
from causalfair.backends import make_backend
from causalfair.engines.benefit_mc import system_benefit
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.adapters import callable_policy


class CheapEnv(gym.Env):
    """A student whose skill moves by a few microseconds of arithmetic per step (plus
    ``work`` iterations of a float loop)."""

    work = 0

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.x = float(self.np_random.normal(0.5 - self.g, 1.0))
        return np.array([self.x, float(self.g)]), {"group": self.g}

    def step(self, action):
        u = self.np_random.random()
        ok = u < 1.0 / (1.0 + np.exp(-self.x))
        dx = (0.4 if ok else -0.3) if action == 1 else -0.1 * self.x
        acc = 0.0
        for _ in range(self.work):
            acc += 1e-9
        self.x += dx + acc * 0.0
        return np.array([self.x, float(self.g)]), float(ok) if action else 0.0, False, False, \
            {"gain": dx}


def bare_loop(n: int, T: int) -> float:
    """Seconds per individual-step of reset + T steps of n envs, actions at random."""
    rng = np.random.default_rng(0)
    env = CheapEnv()
    t0 = time.process_time()
    for i in range(n):
        env.reset(seed=i, options={"group": i % 2})
        for a in rng.integers(2, size=T):
            env.step(int(a))
    return (time.process_time() - t0) / (n * T)


def _setup(T: int) -> tuple[object, object]:
    system = cf.systems.from_gym(CheapEnv, groups=["s+", "s-"], horizon=T)
    policy = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                             name="logistic")
    return system, policy


def audit(n: int, T: int, jobs: int = 1, benefit_n: int | None = 2
          ) -> tuple[float, dict[str, float]]:
    """Seconds per individual-step of decompose_mc on the same env (n per group), CPU
    seconds of this process on one core, wall seconds on ``jobs`` > 1 processes; and the
    estimates. ``benefit_n``: the units per group of Lambda's rollout (2: next to nothing;
    None: n, what ``causalfair decompose`` runs)."""
    system, policy = _setup(T)
    backend = make_backend(jobs=jobs, backend="process") if jobs > 1 else None
    clock = time.perf_counter if jobs > 1 else time.process_time
    t0 = clock()
    res = decompose_mc(system, policy, n=n, seed=0, benefit_n=benefit_n, backend=backend)
    return (clock() - t0) / (2 * n * T), res.estimates()


def benefit_part(n: int, T: int) -> float:
    """Seconds per individual-step (CPU, one core) of Lambda by forks alone, as the audit
    with Lambda runs it (:func:`system_benefit` over n units per group, its bootstrap
    included)."""
    system, policy = _setup(T)
    t0 = time.process_time()
    system_benefit(system, policy, T, engine="mc", n=n, seed=0)
    return (time.process_time() - t0) / (2 * n * T)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="individuals per group")
    ap.add_argument("--horizon", type=int, default=10)
    ap.add_argument("--work", type=int, default=0,
                    help="extra float-loop iterations per env step (a costlier env)")
    ap.add_argument("--jobs", type=int, default=1, help="also time J worker processes")
    args = ap.parse_args()
    CheapEnv.work = args.work
    bare_loop(100, args.horizon)  # warm-up
    audit(50, args.horizon, benefit_n=None)
    bare = bare_loop(2 * args.n, args.horizon)
    aud, est = audit(args.n, args.horizon)
    print(f"bare env step loop: {bare * 1e6:8.2f} us per individual-step (CPU, one core)")
    print(f"from_gym audit    : {aud * 1e6:8.2f} us per individual-step (CPU, one core; pi, "
          "the pi^PS fork and pi0)")
    print(f"ratio             : {aud / bare:8.2f}x the bare loop")
    full, _ = audit(args.n, args.horizon, benefit_n=None)
    ben = benefit_part(args.n, args.horizon)
    print(f"audit with Lambda : {full * 1e6:8.2f} us per individual-step (CPU, one core; and "
          f"Lambda by forks of {args.n} per group), {full / bare:.2f}x the bare loop")
    print(f"benefit part      : {ben * 1e6:8.2f} us per individual-step (Lambda alone: its "
          f"rollout and bootstrap), {ben / full:.0%} of the audit with Lambda")
    if args.jobs > 1:
        t0 = time.perf_counter()  # the workers' start-up alone: a trivial task each
        make_backend(jobs=args.jobs, backend="process").map(abs, list(range(args.jobs)))
        start = time.perf_counter() - t0
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"--jobs {args.jobs} on {os.cpu_count()} cores (load average {load}; wall "
              f"time; worker start-up {start:.2f} s):")
        for label, ben_n in (("decomposition", 2), ("with Lambda", None)):
            t0 = time.perf_counter()
            _, est_s = audit(args.n, args.horizon, benefit_n=ben_n)
            serial = time.perf_counter() - t0
            t0 = time.perf_counter()
            _, est_j = audit(args.n, args.horizon, args.jobs, benefit_n=ben_n)
            par = time.perf_counter() - t0
            same = all(est_s[k] == est_j[k] for k in est_s)
            print(f"  {label:<16s}: {serial:.2f} s serial, {par:.2f} s on {args.jobs} processes: "
                  f"speed-up {serial / par:.2f}x ({serial / max(par - start, 1e-9):.2f}x net of "
                  f"start-up); estimates {'identical to' if same else 'DIFFER from'} serial")

if __name__ == "__main__":
    main()

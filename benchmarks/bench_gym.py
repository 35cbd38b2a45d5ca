"""The Gymnasium door's cost (docs/own-system.md, "Audit your Gymnasium env"): the Monte
Carlo audit of a cheap Gymnasium env through ``cf.systems.from_gym`` against the env's own
bare ``step`` loop, both per individual-step, measured in the same run on one core.

    OMP_NUM_THREADS=1 python benchmarks/bench_gym.py [--n 20000] [--horizon 10] [--work 0]
        [--jobs 16] [--jobs-n 60000]

Both are CPU seconds of this process (``time.process_time``), so other work on the machine
inflates them less than wall time; the ratio is the audit's over the bare loop's. Each is
timed after a short warm-up run (the first audit of a process also pays one-time imports),
on one core (``jobs=1``: no threads, no worker processes, whatever the size).
``--work K`` adds K iterations of float arithmetic to each env step (a costlier env: the
ratio falls towards the env steps an individual-step needs).

``--jobs J`` also times, in wall time, the audit at ``--jobs-n`` individuals per group
(default 60,000: about 20 s on one core, so that starting workers weighs little) on one
core and on J local worker processes (``--backend process``): the same (group, batch)
tasks with keyed random streams (batches of the door's 256 individuals, as ``causalfair
decompose`` runs them), so the estimates are identical to serial (checked here). Timed
(:func:`jobs_part`): the decomposition and Lambda (by forks of min(n, 20,000) per group,
what ``causalfair decompose`` runs) each on one core, then each on J workers already
started (the scaling net of start-up: serial time / time on started workers, both
measured), then the whole audit with Lambda on J new workers, as a command runs it (the
speed-up with start-up), and the start-up itself: J new workers each answering a trivial
task. The core count and the load average are printed with them. ``--factory-ms K``
makes the env's factory spend K ms of CPU (an env that loads or builds data when made):
a worker makes its env once per (factory, params), not once per task, so this cost is
paid once per worker (``GymSimulator._make_env``); the line ``factory calls`` counts
them in this process.

The audit's individual-step is the env steps the decomposition needs (pi; the pi^PS fork
where pi's decision is not the baseline; pi0 once its path has left pi's: a transition
already made from the same env state with the same action and random numbers is reused)
plus the policy (evaluated once per batch on the stacked observations), a copy of the env
where pi's decision leaves the baseline (``GymSimulator.step_paths`` steps the other envs
in place), and the per-step generator states.

The audit with Lambda (``benefit_n`` None: min(n, 20,000), what ``causalfair decompose`` runs) adds the
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
from causalfair.backends import ProcessBackend
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


#: CPU milliseconds each call of :func:`slow_factory` spends (``--factory-ms``).
FACTORY_MS = 0.0


def slow_factory() -> CheapEnv:
    """A CheapEnv made after ``FACTORY_MS`` ms of CPU work (data loaded when the env is
    made)."""
    end = time.process_time() + FACTORY_MS / 1e3
    while time.process_time() < end:
        pass
    return CheapEnv()


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
    system = cf.systems.from_gym(slow_factory if FACTORY_MS else CheapEnv, groups=["s+", "s-"],
                                 horizon=T)
    policy = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                             name="logistic")
    return system, policy


def audit(n: int, T: int, benefit_n: int | None = 2) -> float:
    """Seconds per individual-step (CPU, one core) of decompose_mc on the same env (n per
    group). ``benefit_n``: the units per group of Lambda's rollout (2: next to nothing;
    None: min(n, 20000), what ``causalfair decompose`` runs)."""
    system, policy = _setup(T)
    t0 = time.process_time()
    decompose_mc(system, policy, n=n, seed=0, benefit_n=benefit_n, jobs=1)
    return (time.process_time() - t0) / (2 * n * T)


def benefit_part(n: int, T: int) -> float:
    """Seconds per individual-step (CPU, one core) of Lambda by forks alone, as the audit
    with Lambda runs it (:func:`system_benefit` over n units per group, its bootstrap
    included)."""
    system, policy = _setup(T)
    t0 = time.process_time()
    system_benefit(system, policy, T, engine="mc", n=n, seed=0, jobs=1)
    return (time.process_time() - t0) / (2 * n * T)


def _timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t0, out


def jobs_part(n: int, T: int, jobs: int) -> dict[str, float | bool]:
    """Wall seconds of the audit at ``n`` per group on one core and on ``jobs`` worker
    processes (module docstring), and whether every estimate is identical to serial:
    ``dec_serial``, ``lam_serial`` (the decomposition, Lambda by forks), ``dec_started``,
    ``lam_started`` (the same on workers already started), ``audit_new`` (the audit with
    Lambda on new workers, start-up included), ``start`` (new workers answering a trivial
    task each), ``serial`` and ``started`` (the two parts' sums), and the ratios
    ``speedup_net`` = serial / started and ``speedup`` = serial / audit_new."""
    system, policy = _setup(T)
    m = min(n, 20_000)  # Lambda's units per group in the audit (decompose_mc's benefit_n)

    def dec(**kw):
        return decompose_mc(system, policy, n=n, seed=0, benefit_n=2, **kw)

    def lam(**kw):
        return system_benefit(system, policy, T, engine="mc", n=m, seed=0, **kw)

    t = {}
    t["dec_serial"], d_s = _timed(dec, jobs=1)
    t["lam_serial"], l_s = _timed(lam, jobs=1)
    started = ProcessBackend(jobs)
    t["start"], _ = _timed(started.map, abs, list(range(jobs)))
    t["dec_started"], d_p = _timed(dec, backend=started)
    t["lam_started"], l_p = _timed(lam, backend=started)
    started.close()
    new = ProcessBackend(jobs)
    t["audit_new"], a_n = _timed(decompose_mc, system, policy, n=n, seed=0, backend=new)
    new.close()
    t["serial"] = t["dec_serial"] + t["lam_serial"]
    t["started"] = t["dec_started"] + t["lam_started"]
    t["speedup_net"] = t["serial"] / t["started"]
    t["speedup"] = t["serial"] / t["audit_new"]
    est = d_s.estimates()
    t["identical"] = (d_p.estimates() == est and l_p.Lambda == l_s.Lambda
                      and l_p.ci == l_s.ci and a_n.Lambda == l_s.Lambda
                      and all(a_n.estimates()[k] == v for k, v in est.items() if k != "Lambda"))
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20_000,
                    help="individuals per group (default 20000: the audit's fixed cost, about "
                         "15 ms, then weighs about 0.04 us an individual-step)")
    ap.add_argument("--horizon", type=int, default=10)
    ap.add_argument("--work", type=int, default=0,
                    help="extra float-loop iterations per env step (a costlier env)")
    ap.add_argument("--jobs", type=int, default=1, help="also time J worker processes")
    ap.add_argument("--jobs-n", type=int, default=60_000,
                    help="individuals per group of the --jobs part (default 60000)")
    ap.add_argument("--factory-ms", type=float, default=0.0,
                    help="CPU ms the env factory spends per call (default 0)")
    args = ap.parse_args()
    CheapEnv.work = args.work
    global FACTORY_MS
    FACTORY_MS = args.factory_ms
    bare_loop(100, args.horizon)  # warm-up
    audit(50, args.horizon, benefit_n=None)
    bare = bare_loop(2 * args.n, args.horizon)
    aud = audit(args.n, args.horizon)
    print(f"bare env step loop: {bare * 1e6:8.2f} us per individual-step (CPU, one core)")
    print(f"from_gym audit    : {aud * 1e6:8.2f} us per individual-step (CPU, one core; pi, "
          "the pi^PS fork and pi0)")
    print(f"ratio             : {aud / bare:8.2f}x the bare loop")
    full = audit(args.n, args.horizon, benefit_n=None)
    ben = benefit_part(args.n, args.horizon)
    print(f"audit with Lambda : {full * 1e6:8.2f} us per individual-step (CPU, one core; and "
          f"Lambda by forks of {min(args.n, 20_000)} per group), {full / bare:.2f}x the bare "
          "loop")
    print(f"benefit part      : {ben * 1e6:8.2f} us per individual-step (Lambda alone: its "
          f"rollout and bootstrap), {ben / full:.0%} of the audit with Lambda")
    if args.jobs > 1:
        J, t = args.jobs, jobs_part(args.jobs_n, args.horizon, args.jobs)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"--jobs {J} on {os.cpu_count()} cores (load average {load}; wall time), "
              f"--jobs-n {args.jobs_n} per group (Lambda by forks of "
              f"{min(args.jobs_n, 20_000)}):")
        for label, key in (("decomposition", "dec"), ("Lambda by forks", "lam"),
                           ("the two", None)):
            s_, p_ = (t["serial"], t["started"]) if key is None else (t[f"{key}_serial"],
                                                                       t[f"{key}_started"])
            print(f"  {label:<16s}: {s_:6.2f} s serial, {p_:6.2f} s on {J} started processes: "
                  f"{s_ / p_:5.2f}x")
        print(f"  audit with Lambda: {t['audit_new']:6.2f} s on {J} new processes (start-up "
              f"included): {t['speedup']:5.2f}x; start-up alone {t['start']:.2f} s ({J} new "
              f"processes answering a trivial task)")
        print(f"  estimates {'identical to' if t['identical'] else 'DIFFER from'} serial")


if __name__ == "__main__":
    main()

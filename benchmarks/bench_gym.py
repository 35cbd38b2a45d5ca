"""The Gymnasium door's cost (docs/own-system.md, "Audit your Gymnasium env"): the Monte
Carlo audit of a cheap Gymnasium env through ``cf.systems.from_gym`` against the env's own
bare ``step`` loop, both per individual-step, measured in the same run on one core.

    OMP_NUM_THREADS=1 python benchmarks/bench_gym.py [--n 2000] [--horizon 10] [--jobs 2]

``--jobs J`` also times the audit on J local worker processes (``--backend process``),
the same (group, batch) tasks with keyed random streams, so the estimates are identical
to serial (checked here) and the speed-up is serial time / J-process time.

The audit's individual-step is the three env steps the decomposition needs (pi, the
pi^PS fork and pi0) plus the policy (evaluated once per batch on the stacked
observations), the copies that make forks, and the per-step generator states.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import causalfair as cf
from causalfair.backends import make_backend
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.adapters import callable_policy


class CheapEnv(gym.Env):
    """A student whose skill moves by a few microseconds of arithmetic per step."""

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
        self.x += dx
        return np.array([self.x, float(self.g)]), float(ok) if action else 0.0, False, False, \
            {"gain": dx}


def bare_loop(n: int, T: int) -> float:
    """Seconds per individual-step of reset + T steps of n envs, actions at random."""
    rng = np.random.default_rng(0)
    env = CheapEnv()
    t0 = time.perf_counter()
    for i in range(n):
        env.reset(seed=i, options={"group": i % 2})
        for a in rng.integers(2, size=T):
            env.step(int(a))
    return (time.perf_counter() - t0) / (n * T)


def audit(n: int, T: int, jobs: int = 1) -> tuple[float, dict[str, float]]:
    """Seconds per individual-step of decompose_mc on the same env (n per group) on
    ``jobs`` processes, and the estimates."""
    system = cf.systems.from_gym(CheapEnv, groups=["s+", "s-"], horizon=T)
    policy = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                             name="logistic")
    backend = make_backend(jobs=jobs, backend="process") if jobs > 1 else None
    t0 = time.perf_counter()
    res = decompose_mc(system, policy, n=n, seed=0, benefit_n=2, batch_size=max(1, n // 8),
                       backend=backend)
    return (time.perf_counter() - t0) / (2 * n * T), res.estimates()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="individuals per group")
    ap.add_argument("--horizon", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=1, help="also time J worker processes")
    args = ap.parse_args()
    bare = bare_loop(2 * args.n, args.horizon)
    aud, est = audit(args.n, args.horizon)
    print(f"bare env step loop: {bare * 1e6:8.2f} us per individual-step")
    print(f"from_gym audit    : {aud * 1e6:8.2f} us per individual-step "
          f"(pi, pi^PS fork and pi0: 3 env steps each)")
    print(f"ratio             : {aud / bare:8.2f}x")
    if args.jobs > 1:
        par, est_j = audit(args.n, args.horizon, args.jobs)
        same = all(est[k] == est_j[k] for k in est)
        print(f"--jobs {args.jobs:<11d}: {par * 1e6:8.2f} us per individual-step, speed-up "
              f"{aud / par:.2f}x, estimates {'identical to' if same else 'DIFFER from'} serial")


if __name__ == "__main__":
    main()

"""Training throughput of causalfair's trainer vs stable-baselines3 PPO, and a timed PPO-C run.

Usage (repository root):

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/bench_train.py [--sb3-steps N] [--iterations N]

What it measures, in one run:

1. stable-baselines3 PPO (MlpPolicy) on the Gymnasium lending environment
   ``causalfair.systems.gym.lending.LendingEnv`` (lending-1, one-hot level + group observation),
   8 environments in a DummyVecEnv, rollout 8 x 1280 = 10,240 transitions, minibatch
   2,560, 10 epochs, tanh MLPs [64, 64] for policy and value: environment transitions
   per second of wall time, updates included;
2. causalfair's trainer with the same network, rollout size and minibatch size
   (TrainConfig defaults: 10,240 transitions per iteration, 4 minibatches of 2,560,
   10 epochs), on the population environment (the same dynamics SB3 steps) and on the
   individual-level MDP (what PPO-C trains on): transitions per second;
3. the ratio (target: >= 10x);
4. PPO and PPO-C on lending-1 (seed 0, ``--iterations`` each): wall time and exact |C|;
   target: PPO-C's |C| below half of PPO's in under 5 minutes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def bench_sb3(steps: int) -> float:
    import torch.nn as nn
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from causalfair.systems.gym.lending import LendingEnv

    env = make_vec_env(lambda: LendingEnv("lending-1"), n_envs=8, seed=0)
    model = PPO("MlpPolicy", env, n_steps=1280, batch_size=2560, n_epochs=10, learning_rate=3e-3,
                gamma=0.99, gae_lambda=0.95, seed=0, device="cpu", verbose=0,
                policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]},
                               "activation_fn": nn.Tanh})
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    return model.num_timesteps / wall


def bench_ours(env: str, iterations: int) -> float:
    from causalfair.train import TrainConfig, train

    kw = {"n_individuals": 160, "pop_steps": 64} if env == "population" else {}
    cfg = TrainConfig(algo="ppo", env=env, iterations=iterations, eval_every=10**6, **kw)
    res = train(cfg)
    steps = int(res.history["env_steps"].iloc[-1])
    return steps / res.history["time/iteration_s"].sum()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="causalfair trainer vs SB3 PPO throughput")
    ap.add_argument("--sb3-steps", type=int, default=20480,
                    help="SB3 transitions (default 2 rollouts = 20,480)")
    ap.add_argument("--ours-iterations", type=int, default=20,
                    help="iterations of our trainer for the throughput figure (default 20)")
    ap.add_argument("--iterations", type=int, default=80,
                    help="iterations of the PPO and PPO-C runs (default 80)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"cores (os.cpu_count) = {os.cpu_count()}, torch threads = 1", flush=True)
    sb3 = bench_sb3(args.sb3_steps)
    print(f"stable-baselines3 PPO, Gymnasium LendingEnv x 8:   {sb3:10,.0f} transitions/s", flush=True)
    pop = bench_ours("population", args.ours_iterations)
    print(f"causalfair trainer, population env (160 envs):   {pop:10,.0f} transitions/s "
          f"({pop / sb3:.1f}x SB3)", flush=True)
    ind = bench_ours("individual", args.ours_iterations)
    print(f"causalfair trainer, individual MDP (512 x T=20): {ind:10,.0f} transitions/s "
          f"({ind / sb3:.1f}x SB3)", flush=True)
    print(f"ratio (ours / SB3, same network, rollout 10,240, minibatch 2,560): "
          f"population {pop / sb3:.1f}x, individual {ind / sb3:.1f}x  (target >= 10x)")

    from causalfair.train import TrainConfig, train

    out = {}
    for algo in ("ppo", "ppo-c"):
        t0 = time.perf_counter()
        res = train(TrainConfig(algo=algo, setting="lending-1", seed=0, iterations=args.iterations))
        out[algo] = (time.perf_counter() - t0, res.metrics)
        m = res.metrics
        print(f"{algo:<6} lending-1 seed 0, {args.iterations} iterations: {out[algo][0]:6.1f} s  "
              f"|C| = {abs(m['C']):.4f}  DPE = {m['DPE']:+.4f}  utility = {m['utility']:.3f}",
              flush=True)
    ratio = abs(out["ppo-c"][1]["C"]) / abs(out["ppo"][1]["C"])
    ok = ratio < 0.5 and out["ppo-c"][0] < 300
    print(f"PPO-C |C| / PPO |C| = {ratio:.3f} in {out['ppo-c'][0]:.1f} s "
          f"(target < 0.5 in < 300 s): {'MET' if ok else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

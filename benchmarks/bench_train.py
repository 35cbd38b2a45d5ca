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
   target: PPO-C's |C| below half of PPO's in under 5 minutes;
5. PPO iterations per second on the CPU and on the GPU (``train(..., device="cuda")``) in
   the same run, when torch sees a GPU (its name is printed; without one the GPU half is
   skipped with a message): lending-1 (defaults: the network is evaluated on the 14-cell
   input grid, so the GPU can only add transfer costs) and infectious-1 with a
   [``--device-hidden``] MLP over the members' features (the network runs on every
   member-step: ``--device-units`` members x T = 20 per iteration, 10 epochs); and
   whether the device's lending-1 run repeats bit for bit and agrees with the CPU's to
   1e-3 (exit status 1 otherwise). ``--device-only`` runs this part alone;
   ``--device cpu`` runs its device half on the CPU (a dry run of the script).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any


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


def bench_device(device: str, iterations: int, units: int, hidden: tuple[int, ...]
                 ) -> dict[str, Any]:
    """PPO iterations per second on ``device``: lending-1 (defaults; timed on its second run,
    the first warming up the CUDA context and kernels, and both tables kept) and
    infectious-1 with a ``hidden`` MLP over ``units`` members (wall time of ``train``, its
    final audit included: 200 replicas per group)."""
    import causalfair as cf
    from causalfair.train import TrainConfig, train

    out: dict[str, Any] = {}
    cfg = TrainConfig(algo="ppo", iterations=iterations, eval_every=10**6)
    first = train(cfg, device=device)  # warm-up, and the run the timed one must repeat
    t0 = time.perf_counter()
    again = train(cfg, device=device)
    out["lending-1"] = iterations / (time.perf_counter() - t0)
    out["tables"] = (first.table, again.table)
    system = cf.systems.make("infectious-1")
    cfg = TrainConfig(algo="ppo", iterations=iterations, n_individuals=units, hidden=hidden,
                      eval_every=10**6, audit_n=200)
    t0 = time.perf_counter()
    train(cfg, system=system, device=device)
    out["infectious-1"] = iterations / (time.perf_counter() - t0)
    return out


def device_part(args: argparse.Namespace) -> bool:
    """Part 5; False when the device's lending-1 run does not repeat bit for bit or differs
    from the CPU's by more than 1e-3."""
    import numpy as np
    import torch

    from causalfair.backends import available_cores, resolve_device
    from causalfair.errors import InputError

    hidden = tuple(int(h) for h in args.device_hidden.split(","))
    what = {"lending-1": "lending-1 PPO (512 x T=20, [64, 64], grid-evaluated)",
            "infectious-1": f"infectious-1 PPO ({args.device_units} members x T=20, {list(hidden)})"}
    print(f"\nPPO iterations per second ({args.device_iterations} iterations; "
          f"{available_cores()} cores (os.cpu_count {os.cpu_count()}), torch {torch.__version__}"
          f", CUDA {torch.version.cuda or 'none (a CPU-only build)'}, torch threads = "
          f"{torch.get_num_threads()}):", flush=True)
    device = None
    if args.device != "auto" or torch.cuda.is_available():
        try:
            device = resolve_device("cuda" if args.device == "auto" else args.device, "--device")
        except InputError as exc:
            raise SystemExit(f"bench_train: error: {exc}") from None
    label = "gpu"
    if device is None:
        print("GPU: none (torch sees no CUDA device): the GPU half is skipped "
              "(`--device cpu` runs it on the CPU as a dry run).", flush=True)
    elif device == "cpu":
        label = "dry"
        print("GPU: none, a dry run: the device half runs on the CPU.", flush=True)
    else:
        print(f"GPU: {torch.cuda.get_device_name(torch.device(device))}", flush=True)
    cpu = bench_device("cpu", args.device_iterations, args.device_units, hidden)
    gpu = None if device is None else \
        bench_device(device, args.device_iterations, args.device_units, hidden)
    for k, label_k in what.items():
        line = f"  {label_k:<58} cpu {cpu[k]:7.2f} it/s"
        if gpu is not None:
            line += f"   {label} {gpu[k]:7.2f} it/s   {label} / cpu = {gpu[k] / cpu[k]:.2f}x"
        print(line, flush=True)
    if gpu is None:
        return True
    same = np.array_equal(*gpu["tables"])
    diff = float(np.abs(gpu["tables"][1] - cpu["tables"][1]).max())
    print(f"  lending-1 on {device}: the same table run to run: {'yes' if same else 'NO'}; "
          f"largest |difference| from the CPU's table: {diff:.2e} (tolerance 1e-3)", flush=True)
    return same and diff <= 1e-3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="causalfair trainer vs SB3 PPO throughput")
    ap.add_argument("--sb3-steps", type=int, default=20480,
                    help="SB3 transitions (default 2 rollouts = 20,480)")
    ap.add_argument("--ours-iterations", type=int, default=20,
                    help="iterations of our trainer for the throughput figure (default 20)")
    ap.add_argument("--iterations", type=int, default=80,
                    help="iterations of the PPO and PPO-C runs (default 80)")
    ap.add_argument("--device-only", action="store_true",
                    help="only the CPU vs GPU iterations per second (part 5)")
    ap.add_argument("--device-iterations", type=int, default=5,
                    help="iterations per device run (default 5)")
    ap.add_argument("--device-units", type=int, default=34 * 16,
                    help="infectious-1 members per rollout in part 5 (default 544 = 16 "
                    "graphs; on a GPU try 34 * 1024)")
    ap.add_argument("--device-hidden", default="256,256",
                    help="infectious-1 MLP hidden layers in part 5 (default 256,256)")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="part 5's device half: cuda, or cpu for a dry run of the script; "
                    "auto (default): cuda when torch sees a GPU, else skipped")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.device_only:
        return 0 if device_part(args) else 1
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
    return 0 if device_part(args) else 1


if __name__ == "__main__":
    sys.exit(main())

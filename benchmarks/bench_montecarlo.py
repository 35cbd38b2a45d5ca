"""Throughput of the Monte Carlo engine (causalfair.engines.montecarlo.decompose_mc).

Measures, on the individual-level lending simulator (setting lending-1, T = 20):

(a) a tabular policy (threshold:0.5 as a TablePolicy);
(b) a torch MLP policy (one-hot level + group -> 64 -> 64 -> 1 logit, tanh), with
    torch.set_num_threads(2);
(d) the shipped PPO checkpoint causalfair/examples/checkpoints/lending-1-ppo.pt (one-hot
    (level, group) inputs, so 14 distinct rows), loaded as an audit loads it; the engine
    evaluates it once per (group, level) cell and looks it up per individual, and the
    script prints its time over (a)'s (target: at most 1.5x);
(c) a plain per-individual Python loop over the same simulator (reset / observe /
    draw_noise / step with batches of one individual, pi + fork + pi0 as the engine
    does), timed on a small number of individuals and scaled.

An *individual-step* is one individual at one decision epoch, and includes everything
the engine does for it: the policy, the decision, the noise, the pi step, the d0 fork
(pi^PS) and the pi0 step. ``--n`` is per group (2 groups), so the default audit rolls
2,000,000 individuals x 20 steps = 4e7 individual-steps.

Usage:  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/bench_montecarlo.py [--n 1000000]

(the engine's tasks run on ``--jobs`` threads, default auto: the cores this process may
use, which OMP_NUM_THREADS=1 caps at one; the script gives torch 2 threads with
torch.set_num_threads(2). Other processes on the machine slow every figure down.)
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

RAW = "(b') MLP per individual"
CKPT = "(d) PPO checkpoint"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kB


def python_loop(sim, policy, horizon: int, n: int, seed: int = 0) -> float:
    """Seconds for n individuals of one group, one at a time (no vectorisation)."""
    rng = np.random.default_rng(seed)
    zero = np.zeros(1, dtype=bool)
    start = time.perf_counter()
    for i in range(n):
        g = i % sim.n_groups
        state = sim.reset(1, g, rng)
        state0 = state
        a = b = z = r = 0.0
        for _ in range(horizon):
            p = policy.prob_d1(sim.observe(state))
            d = rng.random(1) < p
            noise = sim.draw_noise(1, rng)
            res = sim.step(state, d, noise)
            fork = sim.step(state, zero, noise)
            res0 = sim.step(state0, zero, noise)
            a += float(res.gain[0])
            b += float(fork.gain[0])
            z += float(res0.gain[0])
            r += float(res.reward[0])
            state, state0 = res.state, res0.state
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="individuals per group")
    ap.add_argument("--horizon", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--loop-n", type=int, default=400, help="individuals in the Python loop")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--jobs", default="auto", help="engine threads (default auto: the cores "
                    "this process may use)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per policy; the best is kept")
    ap.add_argument("--raw-divisor", type=int, default=10,
                    help="(b') runs at n / this and is scaled (default 10)")
    args = ap.parse_args()

    import torch

    from causalfair.engines.montecarlo import decompose_mc
    from causalfair.policies.core import (
        FeatureEncoding,
        TablePolicy,
        TorchPolicy,
        mlp,
        parse_policy,
    )
    from causalfair.systems.lending.settings import LendingSimulator, lending_setting

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    lm = lending_setting("lending-1")
    sim = LendingSimulator(lm)
    T, n, G = args.horizon, args.n, lm.n_groups
    steps = n * G * T
    table = TablePolicy(parse_policy("threshold:0.5", lm.tabular).table, name="threshold:0.5")
    net = mlp(lm.n_levels + G, (64, 64), 1, "tanh")
    net.eval()
    torch_policy = TorchPolicy(net, FeatureEncoding("onehot", lm.n_levels, G), name="mlp-64-64")

    print(f"causalfair Monte Carlo benchmark: lending-1, T = {T}, n = {n:,} per group x {G} "
          f"groups = {n * G:,} individuals = {steps:,} individual-steps "
          f"(each: policy + decision + noise + pi step + d0 fork + pi0 step)")
    from causalfair.backends import available_cores, resolve_jobs

    print(f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads); "
          f"engine jobs {resolve_jobs(args.jobs)} of {available_cores()} available cores")
    print(f"peak RSS before: {peak_rss_mb():.0f} MB")
    results = {}
    n_raw = max(2, n // args.raw_divisor)
    from pathlib import Path

    from causalfair.policies.resolver import resolve

    ckpt = Path(__file__).resolve().parents[1] / "causalfair/examples/checkpoints/lending-1-ppo.pt"
    ppo = resolve(str(ckpt), lm.tabular).policy
    runs = (
        ("(a) tabular policy", table, n, True),
        ("(b) torch MLP 64x64", torch_policy, n, True),
        (CKPT, ppo, n, True),
        (RAW, torch_policy, n_raw, False),
    )
    for label, pol, n_run, tabulate in runs:
        best = np.inf
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = decompose_mc(sim, pol, T, n=n_run, seed=0, batch_size=args.batch_size,
                               tabulate=tabulate, jobs=args.jobs)
            best = min(best, time.perf_counter() - t0)
        run_steps = n_run * G * T
        rate = run_steps / best
        results[label] = steps / rate  # seconds for the full audit
        scaled = "" if n_run == n else f" (measured at n = {n_run:,} per group; full audit ~{steps / rate:.1f} s)"
        print(f"{label:<25} {best:7.2f} s   {rate:12.3e} individual-steps/s   "
              f"C = {res.C:+.5f} +- {res.se['C']:.5f}   peak RSS {peak_rss_mb():.0f} MB{scaled}")
    print("    (a), (b): engine default tabulate=True: a policy that reads only (group, level) is "
          "evaluated once on the grid; (b'): tabulate=False, one MLP forward per individual-step")

    loop_t = python_loop(sim, table, T, args.loop_n)
    loop_rate = args.loop_n * T / loop_t
    print(f"(c) Python loop        {loop_t:7.2f} s for {args.loop_n} individuals: "
          f"{loop_rate:12.3e} individual-steps/s (scaled to this audit: "
          f"{steps / loop_rate:,.0f} s)")
    a = results["(a) tabular policy"]
    ratio = results[CKPT] / a
    print(f"(d) / (a): the example checkpoint costs {ratio:.2f}x the table policy "
          f"(target <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})")
    print(f"speed-up of (a) over the Python loop: {steps / a / loop_rate:,.0f}x; "
          f"of (b') over it: {steps / results[RAW] / loop_rate:,.0f}x")
    print(f"peak RSS (whole process): {peak_rss_mb():.0f} MB")
    print(f"targets: (a) >= 1e7 individual-steps/s: {'met' if steps / a >= 1e7 else 'NOT met'}; "
          f"(b) under 10 s: {'met' if results['(b) torch MLP 64x64'] < 10 else 'NOT met'}")


if __name__ == "__main__":
    main()

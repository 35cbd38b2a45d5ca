"""Benchmark: the policy forward of a Monte Carlo audit on a GPU (``device="cuda"``)
against the CPU, in one run on the same machine.

The audit: the continuous-feature system of ``bench_mc_features.py`` (4 features, two
actions, independent individuals) under a 4-256-256-1 tanh MLP evaluated on every
individual-step, ``--n`` individuals per group (default 1e6) x 2 groups x 20 steps, the
engine's (group, batch) tasks on every core (``jobs="auto"``) in both runs. Only the
policy's forward pass moves to the GPU (one pinned host buffer per thread, one copy each
way per batch); the simulator stays numpy on the CPU.

Printed: the machine's core count and GPU name, both wall times, the ratio CPU / GPU,
and the largest difference between the two runs' estimates (float32 rounding can flip a
decision only where a uniform falls within a rounding error of the probability).
Without a GPU the script says so and exits 0.

Run: ``python benchmarks/bench_gpu.py [--n 1000000] [--batch 65536]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_mc_features as feats  # noqa: E402

import causalfair as cf  # noqa: E402


def network(hidden: int = 256):
    """The MLP 4-hidden-hidden-1 (tanh, seeded) as a checkpoint policy (numpy on the CPU)."""
    from causalfair.policies.nets import NumpyMLPPolicy

    rng = np.random.default_rng(0)
    sizes = [feats.F, hidden, hidden, 1]
    layers = [(rng.standard_normal((b, a)) / np.sqrt(a), 0.1 * rng.standard_normal(b))
              for a, b in zip(sizes[:-1], sizes[1:], strict=False)]
    return NumpyMLPPolicy(layers, cf.FeatureEncoding("features", width_=feats.F), name="mlp-256")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="individuals per group")
    ap.add_argument("--batch", type=int, default=65_536)
    ap.add_argument("--jobs", default="auto")
    args = ap.parse_args()
    import torch

    from causalfair.backends import available_cores, resolve_jobs

    cores = available_cores()
    if not torch.cuda.is_available():
        print(f"bench_gpu: skipped: torch {torch.__version__} sees no GPU on this machine "
              f"({cores} cores).")
        return 0
    name = torch.cuda.get_device_name(0)
    system = cf.as_system(feats.Drift(), id="drift")
    pol = network()
    steps = 2 * args.n * 20
    out = {}
    for device in ("cuda", "cpu"):
        t0 = time.perf_counter()
        res = cf.decompose_mc(system, pol, 20, n=args.n, seed=0, batch_size=args.batch,
                              check=False, jobs=args.jobs, device=device, benefit_n=2_000)
        out[device] = (time.perf_counter() - t0, res)
    (t_gpu, r_gpu), (t_cpu, r_cpu) = out["cuda"], out["cpu"]
    diff = max(abs(getattr(r_gpu, k) - getattr(r_cpu, k)) for k in ("C", "DPE", "IPE", "SPE"))
    print(f"Monte Carlo audit, 4-256-256-1 tanh MLP on every individual-step, {args.n:,} per "
          f"group x 2 groups x 20 steps = {steps:.2e} individual-steps, batches of "
          f"{args.batch:,}, {resolve_jobs(args.jobs)} threads on {cores} cores")
    print(f"  GPU {name}: {t_gpu:.2f} s = {steps / t_gpu:.2e} individual-steps/s")
    print(f"  CPU ({cores} cores): {t_cpu:.2f} s = {steps / t_cpu:.2e} individual-steps/s")
    print(f"  CPU / GPU: {t_cpu / t_gpu:.2f}x; largest |difference| of C, DPE, IPE, SPE: "
          f"{diff:.2e} (se of C {r_cpu.se['C']:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

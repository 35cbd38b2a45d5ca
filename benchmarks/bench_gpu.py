"""Benchmark: the policy forward of a Monte Carlo audit on a GPU (``device="cuda"``)
against the CPU, in one run on the same machine.

The audit: the continuous-feature system of ``bench_mc_features.py`` (4 features, two
actions, independent individuals) under a 4-256-256-1 tanh MLP evaluated on every
individual-step, ``--n`` individuals per group (default 1e6) x 2 groups x 20 steps, the
engine's (group, batch) tasks on every core (``jobs="auto"``) in both runs. Only the
policy's forward pass moves to the GPU (one pinned host buffer per thread, one copy each
way per batch); the simulator stays numpy on the CPU.

Printed: the machine's core count, torch and CUDA versions and GPU name, the GPU's wall
time (after an untimed warm-up) and again (the same numbers, bit for bit?), the CPU's, the
ratio CPU / GPU, and the largest difference between the GPU's and the CPU's estimates
(float32 rounding can flip a decision only where a uniform falls within a rounding error
of the probability). Exit status 1 when the repeat differs or the difference is over
1e-3. Without a GPU the script says so and exits 0; ``--device cpu`` is a dry run of the
whole script with the device path on torch's CPU (n = 20,000 by default).

Run: ``python benchmarks/bench_gpu.py [--n 1000000] [--batch 65536] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import os
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


def _machine(torch) -> str:
    from causalfair.backends import available_cores

    cuda = torch.version.cuda or "none (a CPU-only build)"
    return (f"{available_cores()} cores (os.cpu_count {os.cpu_count()}), torch "
            f"{torch.__version__}, CUDA {cuda}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=None,
                    help="individuals per group (default 1,000,000; 20,000 with --device cpu)")
    ap.add_argument("--batch", type=int, default=65_536)
    ap.add_argument("--jobs", default="auto")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="the device timed against the CPU: cuda, or cpu for a dry run of "
                    "this script (the device path on torch's CPU); auto: cuda when torch "
                    "sees a GPU, else skip")
    args = ap.parse_args(argv)
    import torch

    from causalfair.backends import resolve_device, resolve_jobs
    from causalfair.errors import InputError
    from causalfair.policies.nets import DevicePolicy

    print(f"bench_gpu: {_machine(torch)}", flush=True)
    if args.device == "auto" and not torch.cuda.is_available():
        print("bench_gpu: skipped: torch sees no GPU on this machine (`--device cpu` runs "
              "the script on the CPU alone).")
        return 0
    try:
        device = resolve_device("cuda" if args.device == "auto" else args.device, "--device")
    except InputError as exc:
        print(f"bench_gpu: error: {exc}", file=sys.stderr)
        return 2
    dry = device == "cpu"
    n = args.n or (20_000 if dry else 1_000_000)
    name = "device path on torch's CPU (dry run)" if dry else \
        f"GPU {torch.cuda.get_device_name(torch.device(device))}"
    system = cf.as_system(feats.Drift(), id="drift")
    pol = network()
    steps = 2 * n * 20
    kw = dict(seed=0, batch_size=args.batch, check=False, jobs=args.jobs, benefit_n=2_000)

    def audit(device_leg: bool, n_: int = n):
        # the GPU through the door users take (device=); the dry run through the same
        # DevicePolicy on torch's CPU (device="cpu" alone keeps the numpy path)
        policy = DevicePolicy(pol, "cpu") if device_leg and dry else pol
        t0 = time.perf_counter()
        res = cf.decompose_mc(system, policy, 20, n=n_, device=device if device_leg else "cpu",
                              **kw)
        return time.perf_counter() - t0, res

    audit(True, 2_000)  # warm-up: CUDA context, kernels, the cuBLAS handle
    t_dev, r_dev = audit(True)
    t_again, r_again = audit(True)
    t_cpu, r_cpu = audit(False)
    keys = ("C", "DPE", "IPE", "SPE", "Lambda")
    diff = max(abs(getattr(r_dev, k) - getattr(r_cpu, k)) for k in keys)
    same = np.array_equal(r_dev.steps, r_again.steps) and all(
        getattr(r_dev, k) == getattr(r_again, k) for k in keys)
    print(f"Monte Carlo audit, 4-256-256-1 tanh MLP on every individual-step, {n:,} per "
          f"group x 2 groups x 20 steps = {steps:.2e} individual-steps, batches of "
          f"{args.batch:,}, {resolve_jobs(args.jobs)} threads")
    print(f"  {name}: {t_dev:.2f} s = {steps / t_dev:.2e} individual-steps/s "
          f"(again: {t_again:.2f} s; same numbers: {'yes' if same else 'NO'})")
    print(f"  CPU (numpy): {t_cpu:.2f} s = {steps / t_cpu:.2e} individual-steps/s")
    print(f"  CPU / {'dry run' if dry else 'GPU'}: {t_cpu / t_dev:.2f}x; largest |difference| "
          f"of C, DPE, IPE, SPE, Lambda: {diff:.2e} (se of C {r_cpu.se['C']:.2e})")
    return 0 if same and diff < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())

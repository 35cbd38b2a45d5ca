"""Benchmark: auditing a checkpoint on lending-1 with the exact engine, end to end, in
one process (interpreter start-up, imports, spec, checkpoint, decomposition, benefit
fairness, other notions, the frontier, every figure, report.html / report.md /
audit.json written atomically).

Budget (issue 5, kept by issue 11 without a second process): under 2 s. Printed, each the
median of ``--repeats`` cold ``python -m causalfair audit SPEC --out DIR`` commands:

- ``npz``: the checkpoint saved as ``.npz`` (read with numpy, evaluated without torch);
- ``pt``: the same weights as a torch ``.pt`` file (read without torch by
  causalfair.policies.torchzip; before that reader, the torch import made it the slow one);
- ``in-process``: ``audit(spec).write_report(dir)`` with the imports done (a notebook);
- ratios against the ``pt`` baseline measured in the same run (interleaved runs).

Run: ``python benchmarks/bench_audit.py [--repeats 7]`` on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_S = 2.0


def make_checkpoints(folder: Path) -> None:
    """A PPO checkpoint (3 iterations) saved both as .pt and .npz."""
    import causalfair as cf
    from causalfair.train import TrainConfig, train

    res = train(TrainConfig(algo="ppo", iterations=3, n_individuals=64, seed=0),
                out=folder / "run")
    _, meta = cf.load_checkpoint(res.checkpoint)
    for suffix in (".pt", ".npz"):
        cf.save_checkpoint(folder / f"policy{suffix}", res.policy.module,
                           architecture=meta["architecture"],
                           encoding=cf.FeatureEncoding("onehot", 7, 2))


def _cli(spec_path: Path, out: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "causalfair", "audit", str(spec_path),
                           "--out", str(out)], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"causalfair audit failed:\n{proc.stderr}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        make_checkpoints(tmp)
        specs = {}
        for suffix in ("npz", "pt"):
            specs[suffix] = tmp / f"lending-1-{suffix}.toml"
            specs[suffix].write_text(
                f'name = "bench-{suffix}"\nhorizon = 20\n[system]\nid = "lending-1"\n'
                f'[policy]\ncheckpoint = "policy.{suffix}"\n[engine]\nkind = "exact"\n'
                "[thresholds]\nabs_C = 0.05\nabs_DPE = 0.05\nLambda = 0.1\ntpr_gap = 0.1\n")
        _cli(specs["npz"], tmp / "warmup")  # page cache, matplotlib's font cache
        times: dict[str, list[float]] = {"npz": [], "pt": []}
        for i in range(args.repeats):  # interleaved, so both see the same machine state
            for k in times:
                times[k].append(_cli(specs[k], tmp / f"{k}{i}"))

        import matplotlib.backends.backend_agg  # noqa: F401
        import pandas  # noqa: F401

        import causalfair.engines.frontier  # noqa: F401
        import causalfair.graph  # noqa: F401
        from causalfair.audit import audit, load_spec

        def once(i: int) -> float:
            t0 = time.perf_counter()
            audit(load_spec(specs["npz"])).write_report(tmp / f"in{i}")
            return time.perf_counter() - t0

        first = once(0)
        warm = [once(i + 1) for i in range(args.repeats)]
    n, p, w = (statistics.median(times["npz"]), statistics.median(times["pt"]),
               statistics.median(warm))
    print(f"audit of a PPO checkpoint on lending-1, exact engine, T = 20, with report, one "
          f"process; {len(os.sched_getaffinity(0))} cores")
    print(f"  cold `causalfair audit`, .npz checkpoint (no torch): {n:.3f} s median of "
          f"{args.repeats} (min {min(times['npz']):.3f}, max {max(times['npz']):.3f})   "
          f"{n / BUDGET_S:.2f} x the {BUDGET_S:g} s budget")
    print(f"  cold `causalfair audit`, .pt checkpoint (no torch):  {p:.3f} s (min "
          f"{min(times['pt']):.3f}, max {max(times['pt']):.3f})   npz = {n / p:.2f} x pt")
    print(f"  in-process, imports done: first {first:.3f} s, warm median {w:.3f} s")
    ok = n < BUDGET_S
    print("PASS" if ok else "OVER BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

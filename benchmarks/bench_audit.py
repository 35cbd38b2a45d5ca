"""Benchmark: auditing a checkpoint on lending-1 with the exact engine, end to end
(interpreter start-up, imports, spec, checkpoint loaded with weights_only=True,
decomposition, benefit fairness, other notions, the frontier, every figure, report.html /
report.md / audit.json written atomically).

Budget (issue 5): under 2 s end to end including the report. Printed:

- ``cli``: wall clock of ``python -m causalfair audit SPEC --out DIR`` in a new process,
  the median of ``--repeats`` runs: what a user or a CI job waits for. The CLI loads the
  checkpoint in a second process while it imports the report's libraries, and draws half
  of the figures in a forked copy (causalfair._prefetch, causalfair.report.write_report);
- ``cli serial``: the same with CAUSALFAIR_SERIAL=1 (one process: the baseline);
- ``in-process``: ``audit(spec).write_report(dir)`` in a process where the imports are
  done (first call, and the median of the next repeats), as in a notebook;
- ratios against the baselines measured in the same run.

Run: ``python benchmarks/bench_audit.py [--repeats 5]`` on an otherwise idle machine.
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


def make_checkpoint(path: Path) -> str:
    """A PPO checkpoint (3 iterations) when causalfair.train exists, else a random MLP."""
    import torch

    import causalfair as cf

    try:
        from causalfair.train import TrainConfig, train

        res = train(TrainConfig(algo="ppo", iterations=3, n_individuals=64, seed=0),
                    out=path.parent / "run")
        path.write_bytes(Path(res.checkpoint).read_bytes())
        return "ppo (3 iterations)"
    except ImportError:
        torch.manual_seed(0)
        net = cf.policy.mlp(9, (64, 64), 1)
        cf.save_checkpoint(path, net, architecture={"type": "mlp", "input_dim": 9,
                                                    "hidden": [64, 64], "activation": "tanh",
                                                    "output_dim": 1},
                           encoding=cf.FeatureEncoding("onehot", 7, 2))
        return "random MLP"


def _cli(spec_path: Path, out: Path, **env: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "causalfair", "audit", str(spec_path),
                           "--out", str(out)], capture_output=True, text=True,
                          env={**os.environ, **env})
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
        kind = make_checkpoint(tmp / "policy.pt")
        spec_path = tmp / "lending-1.toml"
        spec_path.write_text(
            'name = "bench"\nhorizon = 20\n[model]\nsetting = "lending-1"\n'
            '[policy]\ncheckpoint = "policy.pt"\n[engine]\nkind = "exact"\n'
            "[thresholds]\nabs_C = 0.05\nabs_DPE = 0.05\nLambda = 0.1\ntpr_gap = 0.1\n")
        _cli(spec_path, tmp / "cli-warmup")  # page cache, matplotlib's font cache
        cli, serial = [], []
        for i in range(args.repeats):  # interleaved, so both see the same machine state
            cli.append(_cli(spec_path, tmp / f"cli{i}"))
            serial.append(_cli(spec_path, tmp / f"serial{i}", CAUSALFAIR_SERIAL="1"))

        # in-process, imports done (a notebook)
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
        import pandas  # noqa: F401

        import causalfair.frontier  # noqa: F401  (scipy.optimize)
        import causalfair.graph  # noqa: F401
        import causalfair.metrics  # noqa: F401
        from causalfair.audit import audit, load_spec

        def once(i: int) -> float:
            t0 = time.perf_counter()
            audit(load_spec(spec_path)).write_report(tmp / f"out{i}")
            return time.perf_counter() - t0

        first = once(0)
        warm = [once(i + 1) for i in range(args.repeats)]
    c, s, w = statistics.median(cli), statistics.median(serial), statistics.median(warm)
    print(f"audit of a checkpoint ({kind}) on lending-1, exact engine, T = 20, with report; "
          f"{len(os.sched_getaffinity(0))} cores")
    print(f"  cli `causalfair audit`, cold, median of {args.repeats}: {c:.3f} s "
          f"(min {min(cli):.3f}, max {max(cli):.3f})   {c / BUDGET_S:.2f} x the "
          f"{BUDGET_S:g} s budget")
    print(f"  cli serial (CAUSALFAIR_SERIAL=1), baseline:  {s:.3f} s "
          f"(min {min(serial):.3f}, max {max(serial):.3f})   cli = {c / s:.2f} x serial")
    print(f"  in-process, imports done: first {first:.3f} s, warm median {w:.3f} s")
    ok = c < BUDGET_S
    print("PASS" if ok else "OVER BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

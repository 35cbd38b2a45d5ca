"""Benchmark: what a fresh process pays to audit a ``.pt`` checkpoint - the cost every
``causalfair audit/decompose/gate`` command and every gate/sweep worker pays once.

Two rows, measured in one run, alternating, in fresh interpreters (median of ``--repeat``):

- ``torch-free``: ``causalfair decompose --checkpoint lending-1-ppo.pt`` (exact engine), the
  checkpoint read by :mod:`causalfair.policies.torchzip` (no torch import);
- ``torch.load``: the same command after ``import torch; torch.load(ck, weights_only=True)``
  in the same process: what reading it with torch cost.

Also printed: the time to ``load_checkpoint`` alone each way, and whether torch ended up in
``sys.modules``. On a shared machine the figures move with the load (printed with them);
the CPU seconds each process used (user + system) move less.

Two more rows time the README's first command, ``causalfair decompose --setting lending-1
--policy threshold:0.5``, as it runs (no pandas: its worst-pairs table is printed by
:mod:`causalfair._texttable`) and after ``import pandas`` (what the table cost when pandas
printed it), with their ratio.

Run: ``python benchmarks/bench_startup.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CK = ROOT / "causalfair" / "examples" / "checkpoints" / "lending-1-ppo.pt"
TORCH = f"import torch; torch.load({str(CK)!r}, weights_only=True); "
LOAD = f"import causalfair as cf; cf.load_checkpoint({str(CK)!r}); "
AUDIT = ("from causalfair.cli import main; main(['decompose', '--setting', 'lending-1', "
         f"'--checkpoint', {str(CK)!r}, '--json']); ")
README = ("import contextlib, io\nfrom causalfair.cli import main\n"
          "with contextlib.redirect_stdout(io.StringIO()):\n"
          "    main(['decompose', '--setting', 'lending-1', '--policy', 'threshold:0.5'])\n")
CHECK = "import sys; print('torch' in sys.modules, 'pandas' in sys.modules)"


def _wall(code: str, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s, the CHECK line) of ``code`` in a fresh interpreter."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code + CHECK], env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return wall, cpu, proc.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each row (default 5)")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    rows = {"load_checkpoint, torch-free": LOAD, "load_checkpoint, torch.load": TORCH + LOAD,
            "decompose, torch-free": AUDIT, "decompose, torch.load": TORCH + AUDIT,
            "README command, no pandas": README, "README command, pandas": "import pandas\n" + README}
    times: dict[str, list[float]] = {k: [] for k in rows}
    cpus: dict[str, list[float]] = {k: [] for k in rows}
    seen: dict[str, str] = {}
    _wall(LOAD, env)  # warm the file cache
    for _ in range(args.repeat):
        for label, code in rows.items():
            wall, cpu, seen[label] = _wall(code, env)
            times[label].append(wall)
            cpus[label].append(cpu)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; python "
          f"{sys.version.split()[0]}; {CK.name}; median of {args.repeat} fresh processes")
    print(f"{'':32s} {'wall s':>7s} {'CPU s':>6s} {'torch, pandas imported':>23s}")
    for label, ts in times.items():
        print(f"{label:32s} {statistics.median(ts):7.2f} {statistics.median(cpus[label]):6.2f} "
              f"{seen[label]:>23s}")
    for what, a, b in (("load_checkpoint", "torch-free", "torch.load"),
                       ("decompose", "torch-free", "torch.load"),
                       ("README command", "no pandas", "pandas")):
        free, tl = (statistics.median(times[f"{what}, {k}"]) for k in (a, b))
        cf, cl = (statistics.median(cpus[f"{what}, {k}"]) for k in (a, b))
        print(f"{what}: {tl - free:.2f} s wall saved per process ({tl / free:.1f}x), "
              f"{cl - cf:.2f} s CPU ({cl / cf:.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: what this machine gives N copies of the same one-core work at once - the
ceiling of any "N cores against 1" ratio measured here (bench_mc_features.py's engine
threads, bench_gate.py's worker processes).

Three workloads, each timed alone and as N concurrent copies, in one run:

- ``threads``: the Monte Carlo engine's dominant kernel, a 4-64-64-1 tanh MLP forward over
  1,572,864 float32 rows in blocks of ``--block`` rows (default 8,192, the blocks a
  checkpoint's network is evaluated in: causalfair.policies.nets; numpy, one BLAS thread,
  the interpreter lock released in the products and the tanh), on N threads of one
  process (with 65,536-row blocks 16 threads' intermediates outgrow the caches);
- ``python``: an interpreter-bound loop, in N processes;
- ``audit``: one lending-1 Monte Carlo audit of the example checkpoint (n = 200,000 per
  group, T = 20; the gate's unit of work), in N processes.

Printed per workload: the time alone, the mean and slowest of the N copies, and two
ratios: ``N x alone / slowest`` (N equal tasks started together, the ceiling of a fixed
split such as the engine's (group, batch) tasks) and ``N x alone / mean`` (the throughput
of a queue that keeps every core busy, the ceiling of a gate of many specs). A ratio
below N is the machine's (a lower all-core clock, shared caches and memory bandwidth,
noisy neighbours on a virtual machine), not causalfair's.

Run: ``python benchmarks/bench_ceiling.py [--copies N]`` (default: the cores this process
may use).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CK = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"

PYTHON = "s = 0\nfor i in range(6_000_000):\n    s += i * i % 7\n"
AUDIT = (
    "import causalfair as cf\n"
    "from causalfair._limits import set_threads\n"
    "set_threads(1)\n"
    f"pol = cf.load_checkpoint({str(CK)!r})[0]\n"
    "system = cf.systems.make('lending-1')\n"
    "cf.decompose_mc(system, pol, 20, n=20_000, seed=0, jobs=1, check=False)\n"
    "START\n"
    "for seed in (1, 2, 3):\n"
    "    cf.decompose_mc(system, pol, 20, n=200_000, seed=seed, jobs=1, check=False)\n"
)


def _timed(body: str) -> str:
    """A script that runs ``body`` and prints the seconds from its START line (or its first
    line) to its end."""
    if "START\n" not in body:
        body = "START\n" + body
    head, tail = body.split("START\n")
    return (f"import time\n{head}t0 = time.perf_counter()\n{tail}"
            "print(time.perf_counter() - t0)\n")


def in_processes(body: str, copies: int) -> list[float]:
    """Seconds of ``copies`` fresh interpreters running ``body`` at once (one BLAS thread
    each), each timed from its START line."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    code = _timed(body)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(copies)]
    out = []
    for p in procs:
        text, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"a copy failed ({p.returncode})")
        out.append(float(text.strip().splitlines()[-1]))
    return out


def in_threads(copies: int, block: int, rows: int = 24 * 65_536) -> list[float]:
    """Seconds of ``copies`` threads each running an MLP forward over ``rows`` rows in
    blocks of ``block`` rows."""
    import numpy as np

    from causalfair._limits import set_threads

    set_threads(1)
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(a, b)).astype(np.float32), rng.normal(size=b).astype(np.float32))
              for a, b in ((4, 64), (64, 64), (64, 1))]
    x = rng.normal(size=(block, 4)).astype(np.float32)

    def work(slot: int, out: list[float]) -> None:
        t0 = time.perf_counter()
        for _ in range(max(1, rows // block)):
            h = x
            for i, (w, b) in enumerate(layers):
                h = h @ w
                h += b
                if i < 2:
                    np.tanh(h, out=h)
        out[slot] = time.perf_counter() - t0

    times = [0.0] * copies
    threads = [threading.Thread(target=work, args=(k, times)) for k in range(copies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=len(os.sched_getaffinity(0)),
                    help="copies run at once (default: the cores this process may use)")
    ap.add_argument("--block", type=int, default=8192,
                    help="rows per block of the threads row's forward (default 8192)")
    args = ap.parse_args()
    n = args.copies
    print(f"machine: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} in this process's "
          f"affinity mask; python {sys.version.split()[0]}; {n} copies at once")
    print(f"{'workload':10s} {'alone s':>8s} {'mean s':>8s} {'slowest s':>10s} "
          f"{'N x alone / slowest':>20s} {'N x alone / mean':>17s}")
    rows = [("threads", lambda k: in_threads(k, args.block)),
            ("python", lambda k: in_processes(PYTHON, k)),
            ("audit", lambda k: in_processes(AUDIT, k))]
    for name, run in rows:
        alone = run(1)[0]
        many = run(n)
        mean = sum(many) / len(many)
        print(f"{name:10s} {alone:8.2f} {mean:8.2f} {max(many):10.2f} "
              f"{n * alone / max(many):20.2f} {n * alone / mean:17.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

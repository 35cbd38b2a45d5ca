"""Benchmark: the fixed cost of a training worker against one iteration's time, measured
in the same run - what keeps ``causalfair sweep --jobs N`` from scaling with N when each
run is short (docs/scale.md).

``--jobs J`` fresh worker processes (:class:`causalfair.backends.ProcessBackend`, as
``causalfair sweep --jobs J`` starts them) each train one run (ppo on lending-1, seeds
0..J-1, ``--iterations`` iterations) through the sweep's own task
(:func:`causalfair.train.sweep._train_config`), writing its run folder. Each worker's
time line is split at the first iteration's start and the last one's end:

- ``start``: the driver starts the worker until the task begins there (the interpreter,
  ``import causalfair``, the task unpickled);
- ``import torch``: the task's first import (the trainer needs it);
- ``until iteration 1``: the rest up to the first iteration (trainer modules, system,
  networks);
- ``iteration 1`` and ``iteration (median)``: the first pays torch's lazy set-up;
- ``after the last``: the final exact audit, the checkpoint and the run folder;
- ``back to driver``: the result sent back and read.

``fixed`` (everything but the iterations) is printed against one iteration (median):
the number of iterations a run must have before its fixed cost is half its wall time.
Wall time, and the worker's CPU time (``start``: since the process began; steadier on a
shared machine; the driver's part is not in it). Medians over the J workers, which run
at once (on J cores where the machine has them).
Also printed: the heavy libraries loaded in a worker by the end of its run (pandas,
scipy, networkx, matplotlib are not needed to train).

Run: ``python benchmarks/bench_sweep_startup.py [--jobs 16] [--iterations 20]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

#: Libraries whose presence in a worker is reported.
HEAVY = ("torch", "pandas", "scipy", "networkx", "matplotlib", "pyarrow", "dowhy",
         "statsmodels", "gymnasium", "torch._dynamo")


def _task(item: tuple) -> dict:
    """Runs in the worker: the sweep's task, its iterations timed (wall clock, shared by
    the driver and the workers)."""
    t_in, c_in = time.time(), time.process_time()  # CPU time since the worker started
    import torch  # noqa: F401 - timed: the trainer's first import

    t_torch, c_torch = time.time(), time.process_time()
    from causalfair.train import core, sweep

    steps: list[tuple[float, float, float, float]] = []
    step = core.Trainer.step

    def timed(self):  # noqa: ANN001, ANN202
        t0, c0 = time.time(), time.process_time()
        row = step(self)
        steps.append((t0, time.time(), c0, time.process_time()))
        return row

    core.Trainer.step = timed
    try:
        out = sweep._train_config(item)
    finally:
        core.Trainer.step = step
    if not isinstance(out, dict):
        raise RuntimeError(f"the run failed: {out}")
    return {"in": t_in, "torch": t_torch, "steps": steps, "out": time.time(),
            "cpu": (c_in, c_torch, time.process_time()),
            "loaded": [m for m in HEAVY if m in sys.modules]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1, help="workers, one run each (default 1)")
    ap.add_argument("--iterations", type=int, default=20, help="iterations per run (default 20)")
    ap.add_argument("--system", default="lending-1", help="a lending setting (default lending-1)")
    ap.add_argument("--algo", default="ppo", help="algorithm (default ppo)")
    args = ap.parse_args()
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # as the workers get
    t_import = time.perf_counter()
    from causalfair.backends import ProcessBackend
    from causalfair.train import sweep

    t_import = time.perf_counter() - t_import
    configs = [sweep._config(args.system, {}, args.algo, seed, {"iterations": args.iterations})
               for seed in range(args.jobs)]
    backend = ProcessBackend(args.jobs)
    with tempfile.TemporaryDirectory() as tmp:
        items = [(c, ".", str(Path(tmp) / f"seed-{i}")) for i, c in enumerate(configs)]
        t0 = time.time()
        try:
            results = backend.map(_task, items)
        finally:
            t1 = time.time()
            backend.close()
    bad = [r for r in results if not isinstance(r, dict)]
    if bad:
        raise SystemExit(f"a worker failed: {bad[0]}")
    stages = ("start", "import torch", "until iteration 1", "iteration 1",
              "iteration (median)", "after the last", "back to driver")
    rows: dict[str, list[float]] = {k: [] for k in (*stages, "fixed", "iterations")}
    cpu: dict[str, list[float]] = {k: [] for k in (*stages[:-1], "fixed", "iterations")}
    for r in results:
        steps = r["steps"]
        c_in, c_torch, c_out = r["cpu"]
        for out, i, j in ((rows, 0, 1), (cpu, 2, 3)):
            spans = [s[j] - s[i] for s in steps]
            out["iteration 1"].append(spans[0])
            out["iteration (median)"].append(statistics.median(spans[1:] or spans))
            out["iterations"].append(steps[-1][j] - steps[0][i])
        rows["start"].append(r["in"] - t0)
        rows["import torch"].append(r["torch"] - r["in"])
        rows["until iteration 1"].append(steps[0][0] - r["torch"])
        rows["after the last"].append(r["out"] - steps[-1][1])
        rows["back to driver"].append(t1 - r["out"])
        rows["fixed"].append((steps[0][0] - t0) + (t1 - steps[-1][1]))
        cpu["start"].append(c_in)
        cpu["import torch"].append(c_torch - c_in)
        cpu["until iteration 1"].append(steps[0][2] - c_torch)
        cpu["after the last"].append(c_out - steps[-1][3])
        cpu["fixed"].append(steps[0][2] + c_out - steps[-1][3])
    med = {k: statistics.median(v) for k, v in rows.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"machine: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} in this process's "
          f"affinity mask, load average {os.getloadavg()[0]:.1f}; python "
          f"{sys.version.split()[0]}")
    print(f"{args.jobs} worker(s) at once, each one run: {args.algo} on {args.system}, "
          f"{args.iterations} iterations (medians over the workers; the driver's own "
          f"imports, {t_import:.2f} s, not counted)")
    print(f"{'':22s} {'wall s':>7s} {'CPU s':>7s}")
    for k in (*stages, "iterations"):
        c = f"{mcpu[k]:7.3f}" if k in mcpu else f"{'':7s}"
        print(f"{'iterations (all)' if k == 'iterations' else k:22s} {med[k]:7.3f} {c}")
    for what, m in (("wall", med), ("CPU", mcpu)):
        print(f"fixed cost of a training worker ({what}): {m['fixed']:.2f} s = "
              f"{m['fixed'] / m['iteration (median)']:.1f} iterations "
              f"({100 * m['fixed'] / (m['fixed'] + m['iterations']):.0f}% of a "
              f"{args.iterations}-iteration run)")
    print(f"loaded in a worker at the end of its run: {', '.join(results[0]['loaded'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

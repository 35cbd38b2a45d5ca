"""Where the time of bench_mc_features.py's audit goes: the wall time of each stage that
runs on the engine's threads (the decomposition's (group, batch) tasks; Lambda's rollout,
bootstrap sums and products, gap errors and replicates) and of Lambda as a whole, with
``jobs=1`` and ``jobs="auto"``. A stage with few tasks, or time outside the stages, is
what keeps ``auto`` from the core count (docs/scale.md, "On a 16-core machine"). The last
line of each run is Lambda's time outside its threaded stages: the driver's serial share
(the cells, the Poisson weights' wait, the assembly between the stages).

Each stage also sums its tasks' own wall and CPU times (``time.thread_time`` of the thread
running the task): "waiting" is their difference, the time a task's thread was not
running (on the interpreter lock, mostly: numpy gives it up in each product and ufunc and
must take it back); a task's CPU time with ``jobs="auto"`` against ``jobs=1`` is what each
core loses when every core is busy (shared caches, memory, clock).

Run: ``python benchmarks/profile_mc_stages.py [N] [--auto-only]`` (N individuals per
group, default 1,000,000; leave OMP_NUM_THREADS unset, as for bench_mc_features.py).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_mc_features as bench  # noqa: E402

import causalfair.backends as backends  # noqa: E402
import causalfair.engines.benefit_mc as benefit_mc  # noqa: E402

log: list[tuple[str, int, float, float, float]] = []
_imap = backends.ThreadBackend.imap
_benefit = benefit_mc.benefit_fairness_mc


def imap(self, fn, items):  # every stage on the engine's threads, timed to its last result
    items = list(items)
    spent, lock = [0.0, 0.0], threading.Lock()

    def timed(item):  # the task's own wall and CPU time, on the thread that runs it
        w0, c0 = time.perf_counter(), time.thread_time()
        out = fn(item)
        w, c = time.perf_counter() - w0, time.thread_time() - c0
        with lock:
            spent[0] += w
            spent[1] += c
        return out

    t0 = time.perf_counter()
    yield from _imap(self, timed, items)
    log.append((getattr(fn, "__qualname__", str(fn))[-48:], len(items), time.perf_counter() - t0,
                *spent))


def benefit(*args, **kw):
    t0, first = time.perf_counter(), len(log)
    out = _benefit(*args, **kw)
    total = time.perf_counter() - t0
    staged = sum(s for _, _, s, _, _ in log[first:])
    log.append(("benefit_fairness_mc (Lambda, all of it)", 0, total, 0.0, 0.0))
    log.append(("Lambda outside its threaded stages (the driver's share)", 0, total - staged, 0.0,
                0.0))
    return out


def main() -> int:
    backends.ThreadBackend.imap = imap
    benefit_mc.benefit_fairness_mc = benefit  # system_benefit looks it up in its module
    n = next((int(a) for a in sys.argv[1:] if a.isdigit()), 1_000_000)
    for jobs in ("auto",) if "--auto-only" in sys.argv else (1, "auto"):
        log.clear()
        wall, _ = bench.audit(n, 1, 65_536, jobs=jobs)
        print(f"jobs={jobs}: {wall:.2f} s (n = {n:,} per group); wall, tasks, and the tasks' "
              "own wall / CPU / waiting summed")
        for name, k, s, w, c in log:
            own = f"{w:8.2f} {c:8.2f} {max(w - c, 0.0):8.2f}" if k else " " * 26
            print(f"   {s:7.3f} s  {k:4d} tasks {own}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where the time of bench_mc_features.py's audit goes: the wall time of each stage that
runs on the engine's threads (the decomposition's (group, batch) tasks; Lambda's rollout,
bootstrap sums and products, gap errors and replicates) and of Lambda as a whole, with
``jobs=1`` and ``jobs="auto"``. A stage with few tasks, or time outside the stages, is
what keeps ``auto`` from the core count (docs/scale.md, "On a 16-core machine"). The last
line of each run is Lambda's time outside its threaded stages: the driver's serial share
(the cells, the Poisson weights' wait, the assembly between the stages).

Run: ``python benchmarks/profile_mc_stages.py [N] [--auto-only]`` (N individuals per
group, default 1,000,000; leave OMP_NUM_THREADS unset, as for bench_mc_features.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_mc_features as bench  # noqa: E402

import causalfair.backends as backends  # noqa: E402
import causalfair.engines.benefit_mc as benefit_mc  # noqa: E402

log: list[tuple[str, int, float]] = []
_imap = backends.ThreadBackend.imap
_benefit = benefit_mc.benefit_fairness_mc


def imap(self, fn, items):  # every stage on the engine's threads, timed to its last result
    items = list(items)
    t0 = time.perf_counter()
    yield from _imap(self, fn, items)
    log.append((getattr(fn, "__qualname__", str(fn))[-48:], len(items), time.perf_counter() - t0))


def benefit(*args, **kw):
    t0, first = time.perf_counter(), len(log)
    out = _benefit(*args, **kw)
    total = time.perf_counter() - t0
    staged = sum(s for _, _, s in log[first:])
    log.append(("benefit_fairness_mc (Lambda, all of it)", 0, total))
    log.append(("Lambda outside its threaded stages (the driver's share)", 0, total - staged))
    return out


def main() -> int:
    backends.ThreadBackend.imap = imap
    benefit_mc.benefit_fairness_mc = benefit  # system_benefit looks it up in its module
    n = next((int(a) for a in sys.argv[1:] if a.isdigit()), 1_000_000)
    for jobs in ("auto",) if "--auto-only" in sys.argv else (1, "auto"):
        log.clear()
        wall, _ = bench.audit(n, 1, 65_536, jobs=jobs)
        print(f"jobs={jobs}: {wall:.2f} s (n = {n:,} per group)")
        for name, k, s in log:
            print(f"   {s:7.3f} s  {k:4d} tasks  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

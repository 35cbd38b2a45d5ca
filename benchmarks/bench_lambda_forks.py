"""Benchmark: Lambda by forks on a system observed through features (bench_mc_features.py's
system and 4-64-64-1 checkpoint: 4 features in 4 quantile bins, so up to 256 cells; T = 20;
n = 20,000 units per group, the default ``benefit_n``; 200 bootstrap replicates).

Printed, in one run:
- the bootstrap's replicate means (``benefit_mc._replicates``) by the (cell, unit) pairs
  against the baseline measured in the same run on the same rollout: the product of every
  replicate's weights with the (units, cells x (1 + 2A)) per-unit sums (the method before,
  written out here), their times, ratio, the per-unit array's size and the largest relative
  difference of the replicates' mean benefits (the two products may round differently in
  the last bits: 0 on our machine at the defaults, while the standard error moved in its
  last bits);
- the pair terms' total variations (``benefit_mc.total_variation``) against numpy's
  ``0.5 * np.abs(pa[:, None, :] - pb[None, :, :]).sum(-1)`` over the same cells, their
  times per replicate, ratio, and whether they are identical bit for bit (they must be);
- Lambda by forks as a whole (``benefit_fairness_mc``), one core (``jobs=1``) and every
  core (``jobs="auto"``), with the core count, and whether the two are identical.

Run: ``python benchmarks/bench_lambda_forks.py [--n 20000]`` (leave OMP_NUM_THREADS unset:
``auto`` honours it as a cap).
"""

from __future__ import annotations

import argparse
import time

import bench_mc_features as bench
import numpy as np

import causalfair as cf
import causalfair.engines.benefit_mc as benefit_mc
from causalfair._limits import set_threads
from causalfair.backends import resolve_jobs


def per_unit_product(cols: tuple, W: np.ndarray, n: int) -> list[np.ndarray]:
    """The baseline: each unit's sums per cell, (n, K (1 + 2A)), times the (replicates, n)
    weights of its group: (R, K, 1 + 2A) sums per group."""
    cells, unit_g, delta_g, prob_g, K, A = cols
    C = 1 + 2 * A
    out = []
    for g in range(len(cells)):
        vals = np.concatenate([np.ones((len(cells[g]), 1)), delta_g[g], prob_g[g]], axis=1)
        bins = (unit_g[g] * K + cells[g])[:, None] * C + np.arange(C)
        per_unit = np.bincount(bins.ravel(), weights=vals.ravel(),
                               minlength=n * K * C).reshape(n, K * C)
        out.append((W[g].astype(float) @ per_unit).reshape(-1, K, C))
    return out


def means(sums: np.ndarray, A: int) -> np.ndarray:
    mass = sums[..., 0]
    return sums[..., 1:1 + A] / np.where(mass > 0, mass, 1.0)[..., None]


def timed(fn, reps: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    n, T = args.n, 20
    system = cf.as_system(bench.Drift(), id="drift")
    policy = bench.policy("checkpoint", "tanh")
    cores = resolve_jobs("auto", "jobs")
    print(f"bench_lambda_forks: {cores} cores for jobs='auto'; n = {n:,} per group, T = {T}, "
          f"{benefit_mc.N_BOOT} replicates")

    seen: dict = {}
    real = benefit_mc._replicates

    def spy(cols, W, per_world, n_, jobs):
        seen.update(cols=cols, W=W)
        return real(cols, W, per_world, n_, jobs)

    set_threads(1)
    benefit_mc._replicates = spy
    try:
        benefit_mc.benefit_fairness_mc(system, policy, T, n=n, seed=0, jobs=1)
    finally:
        benefit_mc._replicates = real
    cols, W = seen["cols"], seen["W"]
    K, A = cols[4], cols[5]
    t_new, new = timed(lambda: real(cols, W, False, n, 1))
    t_old, old = timed(lambda: per_unit_product(cols, W, n))
    diff = max(float(np.max(np.abs(means(o, A) - np.stack([r[0][g] for r in new]))
                            / np.maximum(np.abs(means(o, A)), 1e-300)))
               for g, o in enumerate(old))
    print(f"replicate means ({K} cells): per-unit product {t_old:.3f} s "
          f"({8 * n * K * (1 + 2 * A) / 2**20:.0f} MiB of per-unit sums), pairs {t_new:.3f} s: "
          f"{t_old / t_new:.1f}x; largest relative difference {diff:.1e}")

    rng = np.random.default_rng(0)
    pa, pb = rng.dirichlet(np.ones(A), size=K), rng.dirichlet(np.ones(A), size=K)
    t_np, want = timed(lambda: 0.5 * np.abs(pa[:, None, :] - pb[None, :, :]).sum(-1), 20)
    t_tv, got = timed(lambda: benefit_mc.total_variation(pa, pb), 20)
    print(f"total variations ({K} x {K} pairs, {A} actions): numpy's sum {t_np * 1e3:.2f} ms, "
          f"total_variation {t_tv * 1e3:.2f} ms: {t_np / t_tv:.1f}x; identical: "
          f"{'yes' if np.array_equal(got, want) else 'NO'}")

    out = {}
    for jobs in (1, "auto"):
        t, res = timed(lambda jobs=jobs: benefit_mc.benefit_fairness_mc(
            system, policy, T, n=n, seed=0, jobs=jobs), 2)
        out[jobs] = (t, res)
        print(f"Lambda by forks, jobs={jobs}: {t:.2f} s (Lambda {res.Lambda:.6f}, "
              f"se {res.se:.3e})")
    (t1, r1), (ta, ra) = out[1], out["auto"]
    same = r1.Lambda == ra.Lambda and r1.se == ra.se and r1.ci == ra.ci
    print(f"jobs=1 / auto ({cores} cores): {t1 / ta:.2f}x; identical: {'yes' if same else 'NO'}")
    return 0 if same and np.array_equal(got, want) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: the utility-fairness frontier of lending-1, -2, -3 (T = 20, 50 eps points).

Run:  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/bench_frontier.py [--points 50] [--horizon 20]

For each setting it times

- ``frontier``: :func:`causalfair.engines.frontier.frontier` as shipped (sparse constraint matrix
  built once per model, only the eps bound changes; every frontier policy audited with
  the exact engine), and the same without the audits;
- ``baseline``: the straightforward implementation measured in the same run: for every
  eps, build the LP from scratch as dense matrices with Python loops over (t, s, x, d, x')
  and solve it with the same solver (no audits).

and prints the seconds per setting, the ratio baseline / frontier (solves only), and the
largest difference between the two utility curves (they solve the same programs).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import linprog

from causalfair.engines.frontier import frontier
from causalfair.systems.lending.settings import lending_setting


def dense_lp(model, T: int, eps: float) -> float:
    """The naive program: dense matrices built entry by entry, rebuilt for every eps."""
    G, K = model.n_groups, model.n_levels
    n = T * G * K * 2

    def col(t, s, x, d):
        return ((t * G + s) * K + x) * 2 + d

    A_eq = np.zeros((T * G * K, n))
    b_eq = np.zeros(T * G * K)
    for t in range(T):
        for s in range(G):
            for y in range(K):
                row = (t * G + s) * K + y
                for d in range(2):
                    A_eq[row, col(t, s, y, d)] += 1.0
                if t == 0:
                    b_eq[row] = model.initial[s, y]
                    continue
                for x in range(K):
                    for d in range(2):
                        A_eq[row, col(t - 1, s, x, d)] -= model.kernel[s, d, x, y]
    h = model.expected_gain()
    c = np.zeros(n)
    gain = np.zeros((2, n))
    for t in range(T):
        for s in range(G):
            for x in range(K):
                for d in range(2):
                    c[col(t, s, x, d)] = model.group_weights[s] * model.reward[s, d, x]
                    gain[s, col(t, s, x, d)] = h[s, d, x]
    diff = gain[0] - gain[1]
    res = linprog(-c, A_ub=np.vstack([diff, -diff]), b_ub=[eps, eps], A_eq=A_eq, b_eq=b_eq,
                  bounds=(0, None), method="highs")
    return float(-res.fun)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=50)
    ap.add_argument("--horizon", type=int, default=20)
    args = ap.parse_args()
    T, N = args.horizon, args.points
    print(f"frontier benchmark: T = {T}, {N} eps points per setting")
    print(f"{'setting':<11}{'frontier+audit s':>17}{'frontier s':>12}{'baseline s':>12}"
          f"{'ratio':>8}{'max |dU|':>11}")
    total = 0.0
    for setting in ("lending-1", "lending-2", "lending-3"):
        model = lending_setting(setting).tabular
        t0 = time.perf_counter()
        f = frontier(model, T, points=N)
        t_full = time.perf_counter() - t0
        total += t_full
        t0 = time.perf_counter()
        f_fast = frontier(model, T, points=N, audit=False)
        t_fast = time.perf_counter() - t0
        t0 = time.perf_counter()
        base = np.array([dense_lp(model, T, float(e)) for e in f_fast.eps])
        t_base = time.perf_counter() - t0
        du = float(np.max(np.abs(base - f_fast.utilities)))
        print(f"{setting:<11}{t_full:>17.3f}{t_fast:>12.3f}{t_base:>12.3f}"
              f"{t_base / t_fast:>7.1f}x{du:>11.1e}")
        if not np.allclose(f.utilities, f_fast.utilities, atol=1e-9):
            raise SystemExit("audited and unaudited frontiers differ")
    print(f"total (three settings, with audits): {total:.3f} s (target < 30 s on 2 cores)")


if __name__ == "__main__":
    main()

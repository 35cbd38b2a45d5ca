"""Speed of the exact decomposition (issue: core audit).

Targets: lending-1 at K = 7, T = 20 under 5 ms; K = 200, T = 200 under 1 s.
Baseline measured in the same run: a plain-Python reference implementation of the same
forward recursion with loops over levels (what the engine avoids).

    python benchmarks/bench_exact.py
"""

from __future__ import annotations

import time

import numpy as np

import causalfair as cf


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def python_loop_values(model: cf.TabularModel, p: np.ndarray, T: int) -> list[float]:
    """V^pi per group with Python loops over levels (the baseline)."""
    G, K = model.n_groups, model.n_levels
    ker = model.kernel.tolist()
    f = model.potential.tolist()
    pl = p.tolist()
    out = []
    for s in range(G):
        mu = model.initial[s].tolist()
        v = 0.0
        for _t in range(T):
            nxt = [0.0] * K
            for x in range(K):
                for y in range(K):
                    k = (1 - pl[s][x]) * ker[s][0][x][y] + pl[s][x] * ker[s][1][x][y]
                    nxt[y] += mu[x] * k
                    v += mu[x] * k * (f[s][y] - f[s][x])
            mu = nxt
        out.append(v)
    return out


def main() -> None:
    rows = []
    for K, T, target in ((7, 20, 5e-3), (200, 200, 1.0)):
        model = cf.lending_setting("lending-1", n_levels=K).tabular
        policy = cf.parse_policy("threshold:0.5", model)
        p = cf.policy_table(policy, model)
        res = cf.decompose(model, policy, T)
        ours = best_of(lambda m=model, q=policy, h=T: cf.decompose(m, q, h), 20 if K < 50 else 3)
        base_repeat = 3 if K < 50 else 1
        base = best_of(lambda m=model, q=p, h=T: python_loop_values(m, q, h), base_repeat)
        check = python_loop_values(model, p, T)
        if not np.allclose(check, res.V, atol=1e-9):
            raise SystemExit(f"baseline disagrees with the engine: {check} vs {res.V}")
        rows.append((K, T, ours, base, target))
    print(f"{'K':>5}{'T':>6}{'decompose':>14}{'python loop':>14}{'speed-up':>10}{'target':>10}  ok")
    for K, T, ours, base, target in rows:
        print(f"{K:>5}{T:>6}{ours * 1e3:>11.3f} ms{base * 1e3:>11.1f} ms{base / ours:>9.0f}x"
              f"{target * 1e3:>7.0f} ms  {'yes' if ours < target else 'NO'}")
    print("(decompose includes the backward check, the identities and Lambda; "
          "the loop baseline computes V^pi only)")


if __name__ == "__main__":
    main()

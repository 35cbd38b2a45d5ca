"""Benchmark: audit from logs, 1e5 individuals x 20 steps, 200 bootstrap replicates.

Times ``audit_logs`` end to end (validation, per-individual statistics, fit, positivity,
exact engine, 200 vectorised bootstrap replicates) on a log simulated from lending-1, and
a naive baseline measured in the same run: a bootstrap replicate done the obvious way
(resample individuals with pandas, rebuild the log, re-count with groupby, refit, run
the exact engine), timed on a few replicates and scaled to the same number.

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/bench_logs.py [--n 100000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from causalfair.engines.effects import decompose
from causalfair.logs import audit_logs, simulate_logs
from causalfair.model import TabularModel
from causalfair.systems.lending.settings import lending_potential, lending_setting


def naive_replicate(df: pd.DataFrame, rng: np.random.Generator, K: int, T: int, alpha: float):
    ids = df["id"].unique()
    pick = rng.choice(ids, size=ids.size, replace=True)
    by_id = df.set_index("id")
    rep = by_id.loc[pick].reset_index()
    rep["id"] = np.repeat(np.arange(pick.size), T)  # every individual has T rows here
    groups = sorted(rep["group"].astype(str).unique())
    rep["g"] = pd.Categorical(rep["group"].astype(str), categories=groups).codes
    G = len(groups)
    cnt = rep.groupby(["g", "decision", "level", "next_level"]).size()
    trans = np.zeros((G, 2, K, K))
    idx = np.array(cnt.index.tolist())
    trans[idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]] = cnt.to_numpy()
    first = rep[rep["t"] == 0]
    init = first.groupby(["g", "level"]).size().unstack(fill_value=0).reindex(
        columns=range(K), fill_value=0).to_numpy(dtype=float)
    rew = rep.groupby(["g", "decision", "level"])["reward"].mean()
    reward = np.zeros((G, 2, K))
    ri = np.array(rew.index.tolist())
    reward[ri[:, 0], ri[:, 1], ri[:, 2]] = rew.to_numpy()
    kernel = (trans + alpha) / (trans.sum(-1, keepdims=True) + K * alpha)
    n = trans.sum(-1)
    p = n[:, 1] / np.maximum(n.sum(1), 1)
    model = TabularModel(kernel=kernel, initial=init / init.sum(1, keepdims=True),
                         potential=lending_potential(K), reward=reward,
                         group_weights=init.sum(1) / init.sum())
    return decompose(model, p, T)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--horizon", type=int, default=20)
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--naive-reps", type=int, default=3)
    args = ap.parse_args()
    lm = lending_setting("lending-1")
    t0 = time.perf_counter()
    df = simulate_logs(lm, "random:0.5", args.n, args.horizon, seed=0)
    t_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    a = audit_logs(df, n_boot=args.boot, seed=0)
    t_audit = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(args.naive_reps):
        naive_replicate(df, rng, 7, args.horizon, 0.1)
    t_naive_rep = (time.perf_counter() - t0) / args.naive_reps
    t_naive = t_naive_rep * args.boot
    print(f"log: {args.n} individuals x {args.horizon} steps = {len(df)} rows "
          f"(simulated in {t_sim:.2f} s, not counted)")
    print(f"audit_logs (fit + exact engine + {args.boot} bootstrap replicates): {t_audit:.2f} s")
    print(f"naive pandas bootstrap: {t_naive_rep:.2f} s per replicate "
          f"({args.naive_reps} timed) -> {t_naive:.1f} s for {args.boot} (scaled)")
    print(f"speed-up: {t_naive / t_audit:.1f}x")
    print(f"C = {a.decomposition.C:+.5f}, 95% CI {a.conf_int().loc['C'].tolist()}")
    lam = a.lambda_estimate
    print(f"Lambda = {lam.value:.5f} ({lam.estimator}; plug-in {lam.plugin:.5f}), "
          f"95% CI {a.conf_int().loc['Lambda'].tolist()}")


if __name__ == "__main__":
    main()

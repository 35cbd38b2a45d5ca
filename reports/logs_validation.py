"""Validation study of the audit from logs (causalfair.logs.audit_logs).

Logs of a known stochastic policy on the lending-1 simulator, at several log sizes,
repeated with independent seeds. For each size the table gives, for C, DPE, IPE, SPE
and Lambda: the exact value (exact engine on the true model), the bias and RMSE of the
log-based estimate, the mean bootstrap standard error next to the empirical standard
deviation of the estimates, the mean width of the 95% percentile interval and its
coverage of the exact value.

The logged policy is a group-dependent smoothed threshold on the repayment probability,
pi(d1 | x, s) = 0.15 + 0.7 / (1 + exp(-(p_repay(x) - c_s) / 0.08)), c_{s+} = 0.5,
c_{s-} = 0.6, so that both decisions are taken at every (x, s) (positivity holds).

Regenerate (one process, about 15 minutes on one core):

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python reports/logs_validation.py

Writes reports/logs_validation/table.md and reports/logs_validation/results.csv
(per-repetition estimates and intervals) atomically.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np
import pandas as pd

from causalfair.effects import decompose
from causalfair.logs import audit_logs, simulate_logs
from causalfair.policy import TablePolicy, atomic_write_bytes
from causalfair.sim.lending import lending_setting

OUT = Path(__file__).resolve().parent / "logs_validation"
QUANTITIES = ("C", "DPE", "IPE", "SPE", "Lambda")


def soft_threshold_policy(lm) -> TablePolicy:
    thr = np.array([[0.5], [0.6]])
    tab = 0.15 + 0.7 / (1.0 + np.exp(-(lm.p_repay - thr) / 0.08))
    return TablePolicy(tab, name="soft-threshold(0.5, 0.6)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--horizon", type=int, default=20)
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    lm = lending_setting("lending-1")
    pol = soft_threshold_policy(lm)
    exact = decompose(lm.tabular, pol, args.horizon)
    truth = {"C": exact.C, "DPE": exact.DPE, "IPE": exact.IPE, "SPE": exact.SPE,
             "Lambda": exact.Lambda}
    records = []
    t_start = time.perf_counter()
    for si, n in enumerate(args.sizes):
        t0 = time.perf_counter()
        for r in range(args.reps):
            seed = 100_000 * (si + 1) + r
            df = simulate_logs(lm, pol, n, args.horizon, seed=seed)
            a = audit_logs(df, n_boot=args.boot, seed=seed)
            ci = a.conf_int(0.05)
            est = a.estimates()
            se = a.bootstrap.std(ddof=1)
            for q in QUANTITIES:
                records.append({
                    "n_individuals": n, "rep": r, "seed": seed, "quantity": q,
                    "exact": truth[q], "estimate": est[q], "se": float(se[q]),
                    "ci_lower": float(ci.loc[q, "lower"]), "ci_upper": float(ci.loc[q, "upper"]),
                })
        print(f"n = {n}: {args.reps} reps in {time.perf_counter() - t0:.1f} s", flush=True)
    res = pd.DataFrame(records)
    res["error"] = res["estimate"] - res["exact"]
    res["covered"] = (res["ci_lower"] <= res["exact"]) & (res["exact"] <= res["ci_upper"])
    res["width"] = res["ci_upper"] - res["ci_lower"]
    res["covered_normal"] = (res["estimate"] - res["exact"]).abs() <= 1.959964 * res["se"]
    tab = res.groupby(["n_individuals", "quantity"], sort=False).agg(
        exact=("exact", "first"),
        bias=("error", "mean"),
        rmse=("error", lambda e: float(np.sqrt(np.mean(np.square(e))))),
        sd=("estimate", "std"),
        mean_se=("se", "mean"),
        mean_width=("width", "mean"),
        coverage=("covered", "mean"),
        coverage_normal=("covered_normal", "mean"),
    ).reset_index()
    elapsed = time.perf_counter() - t_start

    args.out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    res.to_csv(buf, index=False, float_format="%.8g")
    atomic_write_bytes(args.out / "results.csv", lambda fh: fh.write(buf.getvalue().encode()))
    lines = [
        "# Audit from logs: validation study",
        "",
        f"Setting lending-1 (K = 7), horizon T = {args.horizon}, logged policy "
        f"{pol.name} (pi(d1|x,s) = 0.15 + 0.7 / (1 + exp(-(p_repay(x) - c_s) / 0.08))).",
        f"{args.reps} repetitions per size (independent logs and bootstrap seeds); "
        f"{args.boot} bootstrap replicates over individuals; 95% percentile intervals; "
        "count-based fit with Dirichlet smoothing alpha = 0.1.",
        f"Exact values from the exact engine on the true model. Total run time {elapsed:.0f} s.",
        "",
        "Columns: bias and RMSE of the estimate, sd = empirical standard deviation of the "
        "estimates over repetitions, mean_se = mean bootstrap standard error, mean_width = "
        "mean width of the 95% interval, coverage = share of repetitions whose interval "
        "contains the exact value (nominal 0.95; with "
        f"{args.reps} repetitions the Monte Carlo standard error of a 0.95 coverage is "
        f"{np.sqrt(0.95 * 0.05 / args.reps):.3f}).",
        "",
        "| individuals x T | quantity | exact | bias | RMSE | sd | mean se | mean CI width | coverage | coverage (normal) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in tab.itertuples():
        lines.append(
            f"| {row.n_individuals} x {args.horizon} | {row.quantity} | {row.exact:+.5f} | "
            f"{row.bias:+.5f} | {row.rmse:.5f} | {row.sd:.5f} | {row.mean_se:.5f} | "
            f"{row.mean_width:.5f} | {row.coverage:.2f} | {row.coverage_normal:.2f} |"
        )
    lines += [
        "",
        "coverage: bootstrap percentile interval (what `LogAudit.conf_int` returns); "
        "coverage (normal): estimate +- 1.96 bootstrap se (the Decomposition's own "
        "`conf_int`).",
        "",
        "Reading: C, DPE, IPE and SPE are close to unbiased with bootstrap standard errors "
        "that match the spread of the estimates, and their coverage is near nominal at "
        "every size. Lambda is a non-smooth functional of the estimates (it contains "
        "|pi(x,s+) - pi(x',s-)| and |Delta(x,s+) - Delta(x',s-)|, and in lending-1 both "
        "groups share p_repay and drift, so Delta(x,s+) = Delta(x,s-) exactly: the "
        "estimated gap is biased away from 0, pulling Lambda down). Its bias shrinks "
        "like its standard error, so its interval under-covers at the larger sizes; "
        "treat the Lambda interval as approximate.",
    ]
    lines += ["", "Regenerate: `OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python reports/logs_validation.py`", ""]
    text = "\n".join(lines)
    atomic_write_bytes(args.out / "table.md", lambda fh: fh.write(text.encode()))
    print(text)


if __name__ == "__main__":
    main()

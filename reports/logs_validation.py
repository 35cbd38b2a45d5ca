"""Validation study of the audit from logs (causalfair.logs.audit_logs).

Logs of a known stochastic policy on the lending-1 simulator, at several log sizes,
repeated with independent seeds. For each size the table gives, for C, DPE, IPE, SPE
and Lambda: the exact value (exact engine on the true model), the bias and RMSE of the
log-based estimate, the mean bootstrap standard error next to the empirical standard
deviation of the estimates, the mean width of the 95% percentile interval and its
coverage of the exact value. Lambda is reported twice, from the same logs and the same
bootstrap replicates: "Lambda" is the thresholded (pre-test) estimator that
``audit_logs`` uses by default, "Lambda (plug-in)" the plug-in estimator
(``lambda_estimator="plugin"``). A second table shows how often the pre-test zeroed
the benefit / policy gaps that are exactly 0 in the true model, and how often it
zeroed gaps that are not.

The logged policy is a group-dependent smoothed threshold on the repayment probability,
pi(d1 | x, s) = 0.15 + 0.7 / (1 + exp(-(p_repay(x) - c_s) / 0.08)), c_{s+} = 0.5,
c_{s-} = 0.6, so that both decisions are taken at every (x, s) (positivity holds).

Regenerate (one process, about 5 minutes on one core):

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python reports/logs_validation.py

Writes reports/logs_validation/table.md, reports/logs_validation/results.csv
(per-repetition estimates and intervals) and reports/logs_validation/pretest.csv (per
repetition: gaps zeroed by the pre-test, split by whether the true gap is 0) atomically.
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np
import pandas as pd

from causalfair._io import atomic_write_bytes
from causalfair.engines.benefit import benefit_fairness
from causalfair.engines.effects import decompose
from causalfair.logs import audit_logs, simulate_logs
from causalfair.policies.core import TablePolicy
from causalfair.systems.lending.settings import lending_setting

OUT = Path(__file__).resolve().parent / "logs_validation"
QUANTITIES = ("C", "DPE", "IPE", "SPE", "Lambda", "Lambda (thresholded alone)",
              "Lambda (plug-in)")
Z = 1.959964


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
             "Lambda": exact.Lambda, "Lambda (thresholded alone)": exact.Lambda,
             "Lambda (plug-in)": exact.Lambda}
    # Which pair gaps are exactly 0 in the true model (the kinks of Lambda)
    ben = benefit_fairness(lm.tabular, pol, args.horizon)
    true_gap = ben.delta[0][:, None] - ben.delta[1][None, :]
    true_dp = ben.p_d1[0][:, None] - ben.p_d1[1][None, :]
    zero_gap_true = np.abs(true_gap) < 1e-12
    zero_dp_true = np.abs(true_dp) < 1e-12
    records = []
    pretest = []
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
            lam = a.lambda_estimate
            plug = a.bootstrap["Lambda[plugin]"]
            q = plug.quantile([0.025, 0.975])
            ci.loc["Lambda (plug-in)"] = [float(q.iloc[0]), float(q.iloc[1])]
            est["Lambda (plug-in)"] = lam.plugin
            se["Lambda (plug-in)"] = float(plug.std(ddof=1))
            thr = a.bootstrap["Lambda[thresholded]"]
            q = thr.quantile([0.025, 0.975])
            ci.loc["Lambda (thresholded alone)"] = [float(q.iloc[0]), float(q.iloc[1])]
            est["Lambda (thresholded alone)"] = lam.thresholded
            se["Lambda (thresholded alone)"] = float(thr.std(ddof=1))
            # normal intervals: estimate +- z se; Lambda's reported one is the hull
            normal = {k: (est[k] - Z * float(se[k]), est[k] + Z * float(se[k]))
                      for k in QUANTITIES}
            normal["Lambda"] = a.lambda_interval(0.05, method="normal")
            pretest.append({
                "n_individuals": n, "rep": r, "seed": seed, "c_n": lam.c_n,
                "benefit_true_zero_zeroed": int((lam.zero_gap & zero_gap_true).sum()),
                "benefit_true_zero_total": int(zero_gap_true.sum()),
                "benefit_nonzero_zeroed": int((lam.zero_gap & ~zero_gap_true).sum()),
                "policy_true_zero_zeroed": int((lam.zero_dp & zero_dp_true).sum()),
                "policy_true_zero_total": int(zero_dp_true.sum()),
                "policy_nonzero_zeroed": int((lam.zero_dp & ~zero_dp_true).sum()),
            })
            for q in QUANTITIES:
                records.append({
                    "n_individuals": n, "rep": r, "seed": seed, "quantity": q,
                    "exact": truth[q], "estimate": est[q], "se": float(se[q]),
                    "ci_lower": float(ci.loc[q, "lower"]), "ci_upper": float(ci.loc[q, "upper"]),
                    "normal_lower": float(normal[q][0]), "normal_upper": float(normal[q][1]),
                })
        print(f"n = {n}: {args.reps} reps in {time.perf_counter() - t0:.1f} s", flush=True)
    res = pd.DataFrame(records)
    res["error"] = res["estimate"] - res["exact"]
    res["covered"] = (res["ci_lower"] <= res["exact"]) & (res["exact"] <= res["ci_upper"])
    res["width"] = res["ci_upper"] - res["ci_lower"]
    res["covered_normal"] = (res["normal_lower"] <= res["exact"]) & (res["exact"] <= res["normal_upper"])
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
    pre = pd.DataFrame(pretest)
    buf2 = io.StringIO()
    pre.to_csv(buf2, index=False, float_format="%.8g")
    atomic_write_bytes(args.out / "pretest.csv", lambda fh: fh.write(buf2.getvalue().encode()))
    pre_tab = pre.groupby("n_individuals", sort=False).agg(
        c_n=("c_n", "first"),
        bz=("benefit_true_zero_zeroed", "mean"), bt=("benefit_true_zero_total", "first"),
        bn=("benefit_nonzero_zeroed", "mean"),
        pz=("policy_true_zero_zeroed", "mean"), pt=("policy_true_zero_total", "first"),
        pn=("policy_nonzero_zeroed", "mean"),
    ).reset_index()
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
        "`conf_int`); for Lambda both are the hull described below (what the audit "
        "report and the gate use: `LogAudit.lambda_interval`, normal method).",
        "",
        "Lambda: the thresholded (pre-test) estimator, the default of `audit_logs`: "
        "a pair's benefit gap Delta(x,s+) - Delta(x',s-) (and policy gap "
        "pi(d1|x,s+) - pi(d1|x',s-)) is set to 0 where it is within c_n = sqrt(log n) "
        "bootstrap standard errors of 0, and every replicate runs the same test on its "
        "own gaps; its interval is the hull (union) of the thresholded interval and the "
        "plug-in interval. Lambda (thresholded alone): the same estimate with the "
        "thresholded interval only. Lambda (plug-in): the plug-in estimator "
        "(`lambda_estimator=\"plugin\"`) and its interval, from the same replicates "
        "(the plug-in's replicates are linear in the benefit gaps: docs/logs.md).",
        "",
        "Pre-test: mean number of pair gaps set to 0 per repetition. In the true model "
        f"{int(zero_gap_true.sum())} of {zero_gap_true.size} benefit gaps are exactly 0 "
        "(x = x': lending-1's groups share p_repay and drift, so Delta(x,s+) = "
        f"Delta(x,s-)) and {int(zero_dp_true.sum())} policy gaps are exactly 0 (pairs "
        "with p_repay(x') = p_repay(x) + 0.1, where the two groups' thresholds 0.5 and "
        "0.6 give the same approval probability).",
        "",
        "| individuals x T | c_n | true-zero benefit gaps zeroed | non-zero benefit gaps zeroed | true-zero policy gaps zeroed | non-zero policy gaps zeroed |",
        "|---|---|---|---|---|---|",
    ]
    for row in pre_tab.itertuples():
        lines.append(
            f"| {row.n_individuals} x {args.horizon} | {row.c_n:.2f} | {row.bz:.2f} of "
            f"{row.bt} | {row.bn:.2f} | {row.pz:.2f} of {row.pt} | {row.pn:.2f} |"
        )
    cov = tab.set_index(["n_individuals", "quantity"])["coverage"]
    covn = tab.set_index(["n_individuals", "quantity"])["coverage_normal"]
    wid = tab.set_index(["n_individuals", "quantity"])["mean_width"]
    sizes = list(dict.fromkeys(tab["n_individuals"]))
    fmt = " / ".join
    lines += [
        "",
        "Reading: C, DPE, IPE and SPE are close to unbiased with bootstrap standard errors "
        "that match the spread of the estimates, and their coverage is near nominal at "
        "every size. Lambda is a non-smooth functional of the estimates: it contains "
        "|pi(x,s+) - pi(x',s-)| and |Delta(x,s+) - Delta(x',s-)|, and where such a gap is "
        "exactly 0 (here the diagonal x = x' for Delta, three pairs for pi) the plug-in "
        "|gap_hat| is biased away from 0 by the order of its standard error. The plug-in "
        "Lambda's bias therefore shrinks only like its standard error, and its percentile "
        "interval under-covers more as n grows (coverage "
        + fmt(f"{cov[(n, 'Lambda (plug-in)')]:.2f}" for n in sizes)
        + " at " + fmt(str(n) for n in sizes) + " individuals). The thresholded "
        "estimator sets such gaps to exactly 0 once they are within c_n standard errors "
        "of 0 (c_n = sqrt(log n) grows, so a true zero is caught with probability -> 1; "
        "a fixed non-zero gap grows like sqrt(n) standard errors, so it is eventually "
        "kept) and the coverage of its own interval is "
        + fmt(f"{cov[(n, 'Lambda (thresholded alone)')]:.2f}" for n in sizes)
        + ". The price is at pairs whose gap is non-zero but small next to c_n standard "
        "errors (the 'non-zero ... zeroed' columns): there the thresholded estimate uses "
        "0 for a small true gap, a bias the bootstrap does not see; it fades as n grows "
        f"but dominates at {sizes[0]} individuals (non-zero benefit gaps of 0.02 to 0.1 "
        "between nearby levels, e.g. Delta(5,s+) - Delta(4,s-) = 0.095, are within c_n "
        "standard errors there). Each interval fails in one regime and the other does "
        "not, so the reported interval is their hull: coverage "
        + fmt(f"{cov[(n, 'Lambda')]:.2f}" for n in sizes)
        + " (normal: " + fmt(f"{covn[(n, 'Lambda')]:.2f}" for n in sizes)
        + "), for a mean width "
        + fmt(f"{wid[(n, 'Lambda')] / wid[(n, 'Lambda (plug-in)')]:.2f}" for n in sizes)
        + " times the plug-in's. The point estimate stays the thresholded one; at small "
        "sizes the plug-in estimate (in `LogAudit.lambda_estimate`) has the smaller "
        "error. Intervals for Lambda are pointwise in the true model (the usual "
        "limitation of pre-test estimators near, but not at, a kink).",
    ]
    lines += ["", "Regenerate: `OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python reports/logs_validation.py`", ""]
    text = "\n".join(lines)
    atomic_write_bytes(args.out / "table.md", lambda fh: fh.write(text.encode()))
    print(text)


if __name__ == "__main__":
    main()

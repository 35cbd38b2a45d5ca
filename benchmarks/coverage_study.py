"""Coverage study: does each interval causalfair prints cover the truth as often as it says?

The truth is the exact engine on the tabular lending models (lending-1, -3, -harder); every
estimate is repeated over many seeds at small n (so one run takes milliseconds) and the
table counts how often its nominal 95% interval holds the exact value. Studies:

- ``mc``: ``decompose_mc``'s normal intervals of C, DPE, IPE, SPE (``conf_int``; what the
  gate judges with the Monte Carlo engine), per setting, policy, n per group and horizon T.
  ``zero-se`` counts runs whose standard error was 0 (a zero-width interval).
- ``lambda``: ``benefit_fairness_mc``'s Lambda interval (hull of the thresholded and
  plug-in normal intervals) against the exact Lambda, cells = the lending levels, for the
  stochastic table and ``threshold:0.5``; the note gives the estimate's bias and the
  interval's mean width.
- ``logs``: a log audit of logs simulated from lending-1 (``simulate_logs`` + ``audit_logs``):
  the gate's normal intervals (bootstrap sd) of C, DPE, IPE, SPE, Lambda's hull, and the
  percentile intervals of ``LogAudit.conf_int``.
- ``logs-lambda``: a log audit's Lambda interval (the normal hull) against the exact Lambda,
  logs of 5,000 and 20,000 individuals x 5 steps simulated from lending-1 and lending-harder
  (soft-threshold and stochastic logged policies); the note gives the thresholded
  estimate's mean bootstrap sd against its sd over the logs, and each interval alone.
- ``pairs``: more than two identical groups (every true C is 0): the default pair, chosen
  from the same estimates, with its simultaneous intervals (Bonferroni over the pairs, what
  causalfair prints) and with a marginal one, against a pair named in advance (Monte Carlo
  and log audit).
- ``paired``: ``compare_mc``'s paired differences against a baseline policy (relative
  thresholds): the signed difference and the delta-method |X| - |X_baseline|.
- ``gate``: the CI rule (``thresholds.judge_key``) with the threshold set exactly at the
  true value: how often PASS, FAIL, INCONCLUSIVE, one threshold and four at once.

Columns: measured = share of seeds whose interval holds the exact value; SE = its binomial
standard error at the nominal level, sqrt(0.95 x 0.05 / seeds); flag "LOW" when measured is
more than 3 SE below nominal, "HIGH" when more than 3 SE above.

    OMP_NUM_THREADS=1 python benchmarks/coverage_study.py [--study mc lambda logs logs-lambda gate]
        [--seeds 500]

Takes about 15 minutes of CPU time on one core with the defaults (``mc`` 2.5, ``lambda``
3, ``logs`` 3.5, ``logs-lambda`` 5, ``pairs`` 1, ``paired`` and ``gate`` a few seconds
each; ``--quick`` about a minute); ``--study`` and ``--settings`` run a part.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Iterable

import numpy as np

NOMINAL = 0.95
QUANTITIES = ("C", "DPE", "IPE", "SPE")
SETTINGS = ("lending-1", "lending-3", "lending-harder")


def _setup(setting: str, policy_spec: str):
    """(tabular model, system, policy): a registered lending system (lending-1, -3, -harder)."""
    from causalfair.policies.core import TablePolicy, parse_policy
    from causalfair.systems import make

    system = make(setting)
    tab = system.tabular
    if policy_spec == "stochastic":  # the test suite's stochastic table (tests/engines)
        rng = np.random.default_rng(123)
        pol = TablePolicy(rng.uniform(0.05, 0.95, size=(tab.n_groups, tab.n_levels)))
    elif policy_spec == "soft-threshold":  # reports/logs_validation.py's logged policy
        thr = np.array([[0.5], [0.6]])
        pol = TablePolicy(0.15 + 0.7 / (1.0 + np.exp(-(tab.aux["p_repay"] - thr) / 0.08)))
    else:
        pol = parse_policy(policy_spec, system)
    return tab, system, pol


def _row(study: str, quantity: str, setting: str, policy: str, n: int, T: int, seeds: int,
         hits: int, extra: str = "") -> dict:
    m = hits / seeds
    se = math.sqrt(NOMINAL * (1 - NOMINAL) / seeds)
    flag = "LOW" if m < NOMINAL - 3 * se else ("HIGH" if m > NOMINAL + 3 * se else "")
    return {"study": study, "quantity": quantity, "setting": setting, "policy": policy,
            "n": n, "T": T, "seeds": seeds, "nominal": NOMINAL, "measured": m, "se": se,
            "flag": flag, "extra": extra}


def study_mc(seeds: int, cases: Iterable[tuple[str, str, int, int]]) -> list[dict]:
    """decompose_mc's 95% normal intervals against the exact engine."""
    from causalfair.engines.effects import decompose
    from causalfair.engines.montecarlo import decompose_mc

    rows = []
    for setting, policy_spec, n, T in cases:
        tab, system, pol = _setup(setting, policy_spec)
        exact = decompose(tab, pol, T).estimates()
        hits = dict.fromkeys(QUANTITIES, 0)
        zero = dict.fromkeys(QUANTITIES, 0)
        for s in range(seeds):
            res = decompose_mc(system, pol, T, n=n, seed=s, check=False, jobs=1)
            ci = res.intervals(0.05)
            for k in QUANTITIES:
                lo, hi = ci[k]
                hits[k] += bool(lo <= exact[k] <= hi)
                zero[k] += res.se[k] == 0.0
        for k in QUANTITIES:
            row = _row("mc", k, setting, policy_spec, n, T, seeds, hits[k],
                       f"zero-se {zero[k]}" if zero[k] else "")
            if zero[k] == seeds and exact[k] == 0.0:  # IPE at T = 1: 0 by definition
                row["flag"], row["extra"] = "", "exactly 0 (se 0 in every run)"
            rows.append(row)
    return rows


def study_lambda(seeds: int, cases: Iterable[tuple[str, str, int, int]],
                 n_boot: int = 100) -> list[dict]:
    """benefit_fairness_mc's Lambda interval against the exact Lambda (levels as cells)."""
    from causalfair.engines.benefit import benefit_fairness
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    rows = []
    for setting, policy_spec, n, T in cases:
        tab, system, pol = _setup(setting, policy_spec)
        exact = benefit_fairness(tab, pol, T).Lambda
        hits = bias = width = 0.0
        for s in range(seeds):
            b = benefit_fairness_mc(system, pol, T, n=n, seed=s, n_boot=n_boot, jobs=1,
                                    check=False)
            hits += bool(b.ci[0] <= exact <= b.ci[1])
            bias += (b.Lambda - exact) / seeds
            width += (b.ci[1] - b.ci[0]) / seeds
        rows.append(_row("lambda", "Lambda", setting, policy_spec, n, T, seeds, int(hits),
                         f"exact {exact:.4f}, bias {bias:+.4f}, mean width {width:.4f}, "
                         f"n_boot {n_boot}"))
    return rows


def study_logs(seeds: int, cases: Iterable[tuple[int, int]], n_boot: int = 200) -> list[dict]:
    """A log audit's intervals (gate: normal with bootstrap sd; conf_int: percentile)."""
    from causalfair.engines.effects import decompose
    from causalfair.logs import audit_logs, simulate_logs
    from causalfair.policies.core import TablePolicy
    from causalfair.systems.lending.settings import lending_setting

    lm = lending_setting("lending-1")
    thr = np.array([[0.5], [0.6]])  # reports/logs_validation.py's soft-threshold policy
    pol = TablePolicy(0.15 + 0.7 / (1.0 + np.exp(-(lm.p_repay - thr) / 0.08)))
    rows = []
    for n, T in cases:
        ex = decompose(lm.tabular, pol, T)
        truth = {**{k: ex.estimates()[k] for k in QUANTITIES}, "Lambda": ex.Lambda}
        keys = (*QUANTITIES, "Lambda")
        normal = dict.fromkeys(keys, 0)
        pct = dict.fromkeys(keys, 0)
        done = 0
        for s in range(seeds):
            df = simulate_logs(lm, pol, n, T, seed=10_000 + s)
            try:
                a = audit_logs(df, n_boot=n_boot, seed=s, horizon=T)
            except Exception:  # noqa: BLE001 - a small log can fail positivity: skipped, counted
                continue
            done += 1
            ci_n = a.decomposition.intervals(0.05)
            ci_n["Lambda"] = a.lambda_interval(0.05, method="normal")
            ci_p = a.conf_int(0.05)
            for k in keys:
                normal[k] += bool(ci_n[k][0] <= truth[k] <= ci_n[k][1])
                pct[k] += bool(ci_p.loc[k, "lower"] <= truth[k] <= ci_p.loc[k, "upper"])
        for k in keys:
            skipped = f", {seeds - done} logs not identified" if done < seeds else ""
            rows.append(_row("logs normal", k, "lending-1", "soft-threshold", n, T, done,
                             normal[k], f"n = individuals{skipped}"))
            rows.append(_row("logs percentile", k, "lending-1", "soft-threshold", n, T, done,
                             pct[k], ""))
    return rows


def study_logs_lambda(seeds: int, cases: Iterable[tuple[str, str, int, int]],
                      n_boot: int = 200) -> list[dict]:
    """A log audit's Lambda interval (the normal hull, what the gate and the audit report
    use) against the exact Lambda, logs simulated from the setting under the policy (the
    logged one, estimated); the note gives the mean width and, for the thresholded
    estimate, its mean bootstrap sd against its sd over the logs, and the coverage of each
    interval alone (thresholded, plug-in)."""
    from causalfair.engines.benefit import benefit_fairness
    from causalfair.logs import audit_logs, simulate_logs

    z = 1.959963984540054
    rows = []
    for setting, policy_spec, n, T in cases:
        tab, system, pol = _setup(setting, policy_spec)
        exact = benefit_fairness(tab, pol, T).Lambda
        hits = thr_hits = plug_hits = 0
        width, est, se = 0.0, [], []
        for s in range(seeds):
            a = audit_logs(simulate_logs(system, pol, n, T, seed=10_000 + s), n_boot=n_boot,
                           seed=s, horizon=T)
            lo, hi = a.lambda_interval(0.05, method="normal")
            hits += bool(lo <= exact <= hi)
            width += (hi - lo) / seeds
            lam, boot = a.lambda_estimate, a.bootstrap
            for e, col, kind in ((lam.thresholded, "Lambda[thresholded]", "thr"),
                                 (lam.plugin, "Lambda[plugin]", "plug")):
                sd = float(boot[col].std(ddof=1))
                ok = bool(e - z * sd <= exact <= e + z * sd)
                thr_hits += ok and kind == "thr"
                plug_hits += ok and kind == "plug"
            est.append(lam.thresholded)
            se.append(float(boot["Lambda[thresholded]"].std(ddof=1)))
        rows.append(_row("logs lambda", "Lambda", setting, policy_spec, n, T, seeds, hits,
                         f"n = individuals, exact {exact:.4f}, mean width {width:.4f}; "
                         f"thresholded: se {np.mean(se):.4f} / sd {np.std(est, ddof=1):.4f}, "
                         f"alone {thr_hits / seeds:.3f}; plug-in alone "
                         f"{plug_hits / seeds:.3f}"))
    return rows


def study_gate(seeds: int, n: int = 300, T: int = 5) -> list[dict]:
    """The CI rule with every threshold exactly at the true value (Monte Carlo engine)."""
    from causalfair.engines.effects import decompose
    from causalfair.engines.montecarlo import decompose_mc
    from causalfair.thresholds import FAIL, INCONCLUSIVE, PASS, judge_key, overall_verdict

    tab, system, pol = _setup("lending-1", "stochastic")
    exact = decompose(tab, pol, T).estimates()
    count = {k: {PASS: 0, FAIL: 0, INCONCLUSIVE: 0} for k in (*QUANTITIES, "abs_C", "all four")}
    for s in range(seeds):
        ci = decompose_mc(system, pol, T, n=n, seed=s, check=False, jobs=1).intervals(0.05)
        v = {k: judge_key(k, ci[k][0], ci[k][1], exact[k]) for k in QUANTITIES}
        v["abs_C"] = judge_key("abs_C", ci["C"][0], ci["C"][1], abs(exact["C"]))
        v["all four"] = overall_verdict([v[k] for k in QUANTITIES])
        for k, verdict in v.items():
            count[k][verdict] += 1
    return [{"key": k, "n": n, "T": T, "seeds": seeds,
             **{f"{x} share": c[x] / seeds for x in (PASS, FAIL, INCONCLUSIVE)}}
            for k, c in count.items()]


def study_paired(seeds: int, cases: Iterable[tuple[str, str, str, int, int]]) -> list[dict]:
    """compare_mc's paired differences (relative thresholds, ``[baseline.thresholds]``): the
    signed difference's interval and the delta-method interval of |X| - |X_baseline|, as
    compare_mc returns them (its ``lower``/``upper``, ``abs_lower``/``abs_upper``: what users
    get). Then more than two identical groups (every true difference 0), no pair named: the
    default pair's simultaneous intervals, the same pair's marginal ones and a named pair."""
    from causalfair.engines.effects import decompose
    from causalfair.engines.montecarlo import compare_mc

    rows = []
    for setting, p1, p2, n, T in cases:
        tab, system, pol = _setup(setting, p1)
        base = _setup(setting, p2)[2]
        ep, eb = decompose(tab, pol, T).estimates(), decompose(tab, base, T).estimates()
        hit = dict.fromkeys(QUANTITIES, 0)
        hit_abs = dict.fromkeys(QUANTITIES, 0)
        for s in range(seeds):
            r = compare_mc(system, pol, base, T, n=n, seed=s, jobs=1)
            for k in QUANTITIES:
                d = r[k]
                hit[k] += d["lower"] <= ep[k] - eb[k] <= d["upper"]
                hit_abs[k] += d["abs_lower"] <= abs(ep[k]) - abs(eb[k]) <= d["abs_upper"]
        for k in QUANTITIES:
            note = f"exact {ep[k]:+.4f} vs {eb[k]:+.4f}"
            for q, h in ((f"{k} diff", hit[k]), (f"abs_{k} diff", hit_abs[k])):
                row = _row("paired", q, setting, f"{p1} vs {p2}", n, T, seeds, h, note)
                if ep[k] == eb[k] and h == seeds:  # SPE: pi0 under both, the same numbers
                    row["flag"], row["extra"] = "", note + " (the same pi0: difference 0)"
                rows.append(row)
    return rows + _paired_many(min(seeds, 200))


def _paired_many(seeds: int) -> list[dict]:
    """compare_mc on 3 and 5 identical groups (0.5 / 0.5 vs 0.3 / 0.7; n = 200, T = 3):
    coverage of the C difference's true value 0 by the default pair's interval (simultaneous
    over the pairs), the same pair's marginal 95% one (estimate +- 1.96 se) and pair (0, 1)
    named in advance."""
    from causalfair.engines.montecarlo import compare_mc
    from causalfair.policies.core import TablePolicy

    labels = ("default pair, simultaneous", "default pair, marginal", "named pair")
    rows = []
    for G in (3, 5):
        m, pol = _same_groups(G)
        base = TablePolicy(np.tile([0.3, 0.7], (G, 1)))
        hits = dict.fromkeys(labels, 0)
        for s in range(seeds):
            d = compare_mc(m, pol, base, 3, n=200, seed=s, jobs=1)["C"]
            hits[labels[0]] += d["lower"] <= 0.0 <= d["upper"]
            hits[labels[1]] += abs(d["diff"]) <= 1.959963984540054 * d["se"]
            c = compare_mc(m, pol, base, 3, n=200, seed=s, jobs=1, pair=(0, 1))["C"]
            hits[labels[2]] += c["lower"] <= 0.0 <= c["upper"]
        rows += [_row("paired, same groups", f"C diff, {k}", f"{G} groups",
                      "0.5 / 0.5 vs 0.3 / 0.7", 200, 3, seeds, v) for k, v in hits.items()]
    return rows


def _same_groups(G: int):
    """G groups with the same start, kernel and policy: every true effect is 0."""
    from causalfair.model import TabularModel
    from causalfair.policies.core import TablePolicy

    k = np.zeros((G, 2, 2, 2))
    k[:, 0, 0], k[:, 1, 0], k[:, 0, 1], k[:, 1, 1] = [0.8, 0.2], [0.4, 0.6], [0.3, 0.7], [0.1, 0.9]
    reward = np.zeros((G, 2, 2))
    reward[:, 1, 0] = 1.0
    m = TabularModel(kernel=k, initial=np.tile([0.5, 0.5], (G, 1)),
                     potential=np.array([0.0, 1.0]), reward=reward,
                     group_names=[f"g{i}" for i in range(G)], name="same")
    return m, TablePolicy(np.tile([0.5, 0.5], (G, 1)))


def study_pairs(seeds: int) -> list[dict]:
    """More than two identical groups (true C = 0 for every pair): the default pair (largest
    and smallest estimated V^pi) with its simultaneous intervals (Bonferroni over the
    G(G-1)/2 pairs, what causalfair prints), the same pair's marginal 95% interval (what it
    printed before: it covers less than its level), and the pair (0, 1) named in advance;
    Monte Carlo (n = 200 per group, T = 3) and a log audit (200 individuals per group, T = 3,
    policy supplied)."""
    from dataclasses import replace

    from causalfair.logs import audit_logs, simulate_logs

    def covers(dec) -> bool:
        lo, hi = dec.intervals(0.05)["C"]
        return bool(lo <= 0.0 <= hi)

    labels = ("default pair, simultaneous", "default pair, marginal", "named pair")
    rows = []
    for G in (3, 5):
        m, pol = _same_groups(G)
        hits = dict.fromkeys(labels, 0)
        for s in range(seeds):
            for pair in (None, (0, 1)):
                dec = decompose_mc_c(m, pol, s, pair)
                if pair is None:
                    hits[labels[0]] += covers(dec)
                    hits[labels[1]] += covers(replace(dec, simultaneous=1))
                else:
                    hits[labels[2]] += covers(dec)
        rows += [_row("mc, same groups", f"C, {k}", f"{G} groups", "0.5 / 0.5", 200, 3, seeds,
                      v) for k, v in hits.items()]
    S = min(seeds, 150)
    for G in (3, 5):
        m, pol = _same_groups(G)
        hits = dict.fromkeys(labels, 0)
        for s in range(S):
            df = simulate_logs(m, pol, 200 * G, 3, seed=s)
            for pair in (None, "g0-g1"):
                dec = audit_logs(df, n_boot=100, seed=s, horizon=3, pair=pair,
                                 policy=pol).decomposition
                if pair is None:
                    hits[labels[0]] += covers(dec)
                    hits[labels[1]] += covers(replace(dec, simultaneous=1))
                else:
                    hits[labels[2]] += covers(dec)
        rows += [_row("logs, same groups", f"C, {k}", f"{G} groups", "0.5 / 0.5", 200 * G, 3,
                      S, v, "n = individuals") for k, v in hits.items()]
    return rows


def decompose_mc_c(m, pol, seed: int, pair):
    from causalfair.engines.montecarlo import decompose_mc

    return decompose_mc(m, pol, 3, n=200, seed=seed, check=False, jobs=1, pair=pair)


def _table(rows: list[dict]) -> str:
    out = ["| study | quantity | setting | policy | n | T | seeds | nominal | measured | SE | "
           "flag | note |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['study']} | {r['quantity']} | {r['setting']} | {r['policy']} | "
                   f"{r['n']} | {r['T']} | {r['seeds']} | {r['nominal']:.2f} | "
                   f"{r['measured']:.3f} | {r['se']:.3f} | {r['flag']} | {r['extra']} |")
    return "\n".join(out)


def _gate_table(rows: list[dict]) -> str:
    out = ["| threshold(s) at the true value | n | T | seeds | PASS | FAIL | INCONCLUSIVE |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['key']} | {r['n']} | {r['T']} | {r['seeds']} | "
                   f"{r['PASS share']:.3f} | {r['FAIL share']:.3f} | "
                   f"{r['INCONCLUSIVE share']:.3f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    studies = ["mc", "lambda", "logs", "logs-lambda", "pairs", "paired", "gate"]
    ap.add_argument("--study", nargs="+", default=studies, choices=studies)
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    ap.add_argument("--quick", action="store_true", help="fewer cases and seeds (smoke run)")
    args = ap.parse_args(argv)
    seeds = 60 if args.quick else args.seeds
    t0 = time.perf_counter()
    rows: list[dict] = []
    if "mc" in args.study:
        ns = (30, 300) if args.quick else (20, 50, 200, 1000)
        Ts = (5,) if args.quick else (1, 5, 20)
        cases = [(st, p, n, T) for st in args.settings
                 for p in ("threshold:0.5", "stochastic") for n in ns for T in Ts]
        rows += study_mc(seeds, cases)
    if "lambda" in args.study:
        cases = [(st, p, n, 5) for st in args.settings for p in ("stochastic", "threshold:0.5")
                 for n in ((500,) if args.quick else (200, 1000, 5000))]
        rows += study_lambda(min(seeds, 300), cases)
    if "logs" in args.study:
        cases = [(300, 5)] if args.quick else [(300, 5), (1000, 5), (1000, 20)]
        rows += study_logs(min(seeds, 300), cases)
    if "logs-lambda" in args.study:
        cases = [("lending-harder", "stochastic", 5000, 5)] if args.quick else [
            (st, p, n, 5) for st, p in (("lending-1", "soft-threshold"),
                                        ("lending-harder", "soft-threshold"),
                                        ("lending-harder", "stochastic"))
            for n in (5000, 20_000) if st in args.settings]
        rows += study_logs_lambda(min(seeds, 200), cases)
    if "paired" in args.study:
        rows += study_paired(min(seeds, 400), [
            ("lending-1", "threshold:0.5", "stochastic", 200, 5),
            ("lending-1", "threshold:0.5", "threshold:0.6", 200, 5),
            ("lending-3", "threshold:0.5", "stochastic", 200, 5)])
    if "pairs" in args.study:
        rows += study_pairs(min(seeds, 300))
    if rows:
        print(_table(rows))
    if "gate" in args.study:
        print()
        print(_gate_table(study_gate(max(seeds, 1000))))
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()

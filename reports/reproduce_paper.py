"""Reproduce seeds/003's findings (PPO-C / PPO-Cb vs PPO, A-PPO, F-PPO-L, ...) on our runs.

Usage (from the repository root; one process, about 20-25 minutes on 2 shared cores):

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python reports/reproduce_paper.py

Options: ``--iterations N`` (default 80), ``--seeds S`` (default 3), ``--quick`` (a smoke
run: 1 setting, 1 seed, 4 iterations, written to /tmp/causalfair-paper-quick), ``--out``,
``--jobs N`` / ``--backend ray`` (the runs as tasks of :func:`causalfair.train.sweep.train_many`,
the same numbers as one process; docs/scale.md).

Writes ``reports/paper/``:

- ``runs.csv``: one row per training run (algorithm, setting, seed, beta_Lambda, wall
  time, final exact metrics: utility, C, DPE, IPE, SPE, Lambda, TPR gap, ELBERT bias,
  W1, DP gap);
- ``table.csv`` / ``table.md``: mean and 95% t-interval over seeds per algorithm and setting;
- ``curves.csv`` and ``fig5_curves.png``: C, DPE, IPE, SPE over training for PPO-C and
  PPO-Cb (paper Fig. 5), mean over seeds;
- ``sweep.csv`` and ``fig6_sweep.png``: Lambda and DPE over training for PPO-C and PPO-Cb
  at several beta_Lambda on lending-1 and lending-2 (paper Fig. 6);
- ``frontier.csv``: each trained algorithm (seed-mean policy metrics) placed against the
  utility-|C| frontier of causalfair.engines.frontier (when that module is available);
- ``README.md``: the command, the machine, wall times, and which claims our runs support.

Run folders (checkpoints, resume state, metric logs) go to ``runs/paper/`` (not committed).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from causalfair.train.sweep import t_interval

ALGOS = ("ppo", "ppo-c", "ppo-cb", "a-ppo", "f-ppo-l", "f-ppo", "elbert-po")
SETTINGS = ("lending-1", "lending-2", "lending-3")
SWEEP_BETAS = (2.0, 8.0)  # plus the default 0.5 (main table) and 0 (= PPO-C)
SWEEP_SETTINGS = ("lending-1", "lending-2")
METRICS = ("utility", "C", "abs_C", "DPE", "IPE", "SPE", "Lambda", "tpr_gap", "elbert_bias",
           "w1_final", "dp_gap")


def _machine() -> str:
    def sh(cmd: str) -> str:
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:  # noqa: BLE001 - best effort description
            return "(unavailable)"

    import torch

    return "\n".join([
        f"$ nproc\n{sh('nproc')}",
        f"$ lscpu | head\n{sh('lscpu | head')}",
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, "
        f"torch threads {torch.get_num_threads()}",
    ])


def run_folder(cfg, out_root: Path) -> Path:
    return out_root / cfg.setting / (cfg.algo if cfg.name == "" else cfg.name) / f"seed{cfg.seed}"


def row_and_curve(cfg, res: dict) -> tuple[dict, pd.DataFrame]:
    """The runs.csv row and the exact-metric curve of one run (a train_many result)."""
    hist = res["history"]
    row = {"algo": cfg.algo, "setting": cfg.setting, "seed": cfg.seed,
           "beta_lambda": cfg.beta_lambda if cfg.algo == "ppo-cb" else np.nan,
           "variant": cfg.name or cfg.algo, "iterations": cfg.iterations,
           "env_steps": int(hist["env_steps"].iloc[-1]), "wall_s": res["wall_s"],
           **res["metrics"]}
    row["abs_C"] = abs(row["C"])
    cols = ["iteration"] + [c for c in hist.columns if c.startswith("exact/")]
    curve = hist[cols].dropna().copy()
    curve.columns = ["iteration"] + [c[6:] for c in cols[1:]]
    for k in ("algo", "setting", "seed", "variant"):
        curve[k] = row[k]
    curve["beta_lambda"] = row["beta_lambda"]
    return row, curve


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (variant, setting), grp in runs.groupby(["variant", "setting"], sort=False):
        r = {"algorithm": variant, "setting": setting, "n_seeds": len(grp),
             "wall_s_mean": grp["wall_s"].mean()}
        for m in METRICS:
            mean, lo, hi = t_interval(grp[m])
            r[m] = mean
            r[f"{m}_lo"] = lo
            r[f"{m}_hi"] = hi
        rows.append(r)
    return pd.DataFrame(rows)


def table_markdown(tab: pd.DataFrame) -> str:
    show = ("utility", "abs_C", "C", "DPE", "IPE", "SPE", "Lambda", "tpr_gap", "elbert_bias", "w1_final")
    lines = []
    for setting, grp in tab.groupby("setting", sort=False):
        lines.append(f"\n**{setting}** (mean [95% CI] over {int(grp['n_seeds'].max())} seeds)\n")
        lines.append("| algorithm | " + " | ".join(show) + " |")
        lines.append("|---|" + "---|" * len(show))
        for _, r in grp.iterrows():
            cells = [f"{r[m]:+.3f} [{r[m + '_lo']:+.3f}, {r[m + '_hi']:+.3f}]" for m in show]
            lines.append(f"| {r['algorithm']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_curves(curves: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(curves["setting"]))
    algos = ("ppo-c", "ppo-cb")
    fig, axes = plt.subplots(len(algos), len(settings), figsize=(4.2 * len(settings), 6.5),
                             squeeze=False, sharex=True)
    for j, st in enumerate(settings):
        for i, algo in enumerate(algos):
            ax = axes[i, j]
            d = curves[(curves.setting == st) & (curves.variant == algo)]
            m = d.groupby("iteration")[["C", "DPE", "IPE", "SPE"]].mean()
            for k in ("C", "DPE", "IPE", "SPE"):
                ax.plot(m.index, m[k], label=k, lw=2 if k == "C" else 1.2)
            ax.axhline(0, color="grey", lw=0.5)
            ax.set_title(f"{algo.upper()} - {st}")
            if i == len(algos) - 1:
                ax.set_xlabel("policy iteration")
            if j == 0:
                ax.legend(fontsize=8)
    fig.suptitle("C and its decomposition over training (exact engine; mean over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(curves: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(SWEEP_SETTINGS), figsize=(5 * len(SWEEP_SETTINGS), 6.5),
                             squeeze=False, sharex=True)
    for j, st in enumerate(SWEEP_SETTINGS):
        d = curves[curves.setting == st]
        for i, k in enumerate(("Lambda", "DPE")):
            ax = axes[i, j]
            for variant, g in d.groupby("variant", sort=False):
                if not (variant == "ppo-c" or variant.startswith("ppo-cb")):
                    continue
                m = g.groupby("iteration")[k].mean()
                ax.plot(m.index, m.values, label=variant)
            ax.set_title(f"{k} - {st}")
            if i == 1:
                ax.set_xlabel("policy iteration")
            if ax.lines:
                ax.legend(fontsize=7)
    fig.suptitle("beta_Lambda sweep: Lambda and DPE over training (mean over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def claims(runs: pd.DataFrame, sweep: pd.DataFrame) -> list[str]:
    out = []
    main = runs[runs.variant.isin(ALGOS)]
    mean = main.groupby(["setting", "variant"])[list(METRICS)].mean()
    for st in SETTINGS:
        if st not in mean.index.get_level_values(0):
            continue
        m = mean.loc[st]
        base = [a for a in ("ppo", "a-ppo", "f-ppo-l") if a in m.index]
        ours = [a for a in ("ppo-c", "ppo-cb") if a in m.index]
        if not base or not ours:
            continue
        best_base = min(m.loc[a, "abs_C"] for a in base)
        ok = all(m.loc[a, "abs_C"] < best_base for a in ours)
        vals = ", ".join(f"{a} {m.loc[a, 'abs_C']:.3f}" for a in base + ours)
        out.append(f"- **{st}: PPO-C and PPO-Cb give a smaller |C| than PPO, A-PPO and F-PPO-L: "
                   f"{'SUPPORTED' if ok else 'NOT SUPPORTED'}** (mean |C|: {vals}).")
        for a in ours:
            dC = m.loc[a, "C"] - m.loc["ppo", "C"]
            dD = m.loc[a, "DPE"] - m.loc["ppo", "DPE"]
            dI = m.loc[a, "IPE"] - m.loc["ppo", "IPE"]
            mostly = abs(dD) > abs(dI)
            dpe_falls = abs(m.loc[a, "DPE"]) < abs(m.loc["ppo", "DPE"])
            out.append(
                f"  - {a} vs PPO: change of C {dC:+.3f} = change of DPE {dD:+.3f} + change of "
                f"IPE {dI:+.3f} (SPE is fixed by the environment). The change of C comes "
                f"mostly from the DPE: {'yes' if mostly else 'no'}"
                + ("" if np.sign(dD) == np.sign(dC) or abs(dC) < 1e-9 else
                   "; note the DPE moves against the direction of C's change and the IPE "
                   "moves with it")
                + f". The DPE itself {'falls' if dpe_falls else 'GROWS'} in magnitude "
                f"(|DPE| {abs(m.loc['ppo', 'DPE']):.3f} -> {abs(m.loc[a, 'DPE']):.3f})"
                + ("" if dpe_falls else ": here |C| falls because the policy's direct "
                   "effect is pushed to offset the spurious (and indirect) effects, not "
                   "because the DPE is reduced") + "."
            )
            du = m.loc[a, "utility"] - m.loc["ppo", "utility"]
            out.append(f"  - utility cost of {a}: {du:+.3f} ({m.loc[a, 'utility']:.3f} vs PPO "
                       f"{m.loc['ppo', 'utility']:.3f}, {100 * du / abs(m.loc['ppo', 'utility']):+.0f}%).")
    if len(sweep):
        for st, g in sweep.groupby("setting"):
            s = g.groupby("beta_lambda")[["Lambda", "DPE", "abs_C", "utility"]].mean().sort_index()
            lam_down = bool(np.all(np.diff(s["Lambda"].to_numpy()) <= 1e-9))
            dpe_down = bool(np.all(np.diff(np.abs(s["DPE"].to_numpy())) <= 1e-9))
            txt = "; ".join(f"beta_Lambda={b:g}: Lambda {r.Lambda:.3f}, DPE {r.DPE:+.3f}, |C| {r.abs_C:.3f}, utility {r.utility:.2f}"
                            for b, r in s.iterrows())
            out.append(f"- **{st} (measured at iteration {int(g['iteration'].max())}): a larger beta_Lambda lowers Lambda: {'SUPPORTED' if lam_down else 'NOT SUPPORTED (not monotone)'}; "
                       f"and lowers |DPE|: {'SUPPORTED' if dpe_down else 'NOT SUPPORTED (not monotone)'}** ({txt}).")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=80)
    ap.add_argument("--sweep-iterations", type=int, default=60)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--runs", default="runs/paper")
    ap.add_argument("--jobs", type=int, default=1,
                    help="train in N local worker processes (causalfair.train.sweep.train_many; the "
                         "numbers are those of one process)")
    ap.add_argument("--backend", choices=("serial", "process", "ray"), default=None,
                    help="where the runs go (default: serial, or process with --jobs > 1)")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild reports/paper from runs.csv, curves.csv and the run folders "
                         "of a previous full run (no training)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from causalfair.systems.lending.settings import lending_setting
    from causalfair.train import TrainConfig

    settings, algos, seeds, iters, sweep_iters = SETTINGS, ALGOS, args.seeds, args.iterations, args.sweep_iterations
    sweep_settings, betas = SWEEP_SETTINGS, SWEEP_BETAS
    out = Path(args.out or "reports/paper")
    runs_root = Path(args.runs)
    if args.quick:
        settings, seeds, iters, sweep_iters = ("lending-1",), 1, 4, 4
        sweep_settings, betas = ("lending-1",), (2.0,)
        out = Path(args.out or "/tmp/causalfair-paper-quick")
        runs_root = Path("/tmp/causalfair-paper-quick-runs")
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    rows, curves = [], []

    def save_partial() -> pd.DataFrame:
        df = pd.DataFrame(rows)
        df.to_csv(out / "runs.csv", index=False)
        return df

    jobs = []
    for st in settings:
        for algo in algos:
            for seed in range(seeds):
                jobs.append(TrainConfig(algo=algo, setting=st, seed=seed, iterations=iters,
                                        eval_every=5, checkpoint_every=20))
    for st in sweep_settings:
        for beta in betas:
            for seed in range(seeds):
                jobs.append(TrainConfig(algo="ppo-cb", setting=st, seed=seed, iterations=sweep_iters,
                                        beta_lambda=beta, eval_every=5, checkpoint_every=20,
                                        name=f"ppo-cb(beta_Lambda={beta:g})"))
    if args.report_only:
        jobs = []
        rows = pd.read_csv(out / "runs.csv").to_dict("records")
        curves = [pd.read_csv(out / "curves.csv")]
    from causalfair.backends import TaskError, make_backend
    from causalfair.train.sweep import train_many, write_run

    backend = make_backend(args.jobs, args.backend)
    # one process: run by run, saving runs.csv after each; else all runs as tasks at once
    batches = [[cfg] for cfg in jobs] if args.jobs == 1 and args.backend in (None, "serial") \
        else [jobs]
    done = 0
    for batch in batches:
        for cfg, res in zip(batch, train_many(batch, backend=backend), strict=True):
            done += 1
            if isinstance(res, TaskError):
                raise SystemExit(f"run {cfg.algo} {cfg.setting} seed {cfg.seed} failed: "
                                 f"{res.kind}: {res.message}\n{res.traceback}")
            write_run(run_folder(cfg, runs_root), res)
            row, curve = row_and_curve(cfg, res)
            rows.append(row)
            curves.append(curve)
            save_partial()
            print(f"[{done}/{len(jobs)}] {row['variant']:<24} {row['setting']} seed {row['seed']}: "
                  f"{row['wall_s']:.1f} s  utility {row['utility']:+.3f}  C {row['C']:+.4f}  "
                  f"DPE {row['DPE']:+.4f}  Lambda {row['Lambda']:.4f}", flush=True)
    runs = save_partial()
    if args.report_only and "seed" in runs:
        seeds = int(runs["seed"].max()) + 1
    curves_df = pd.concat(curves, ignore_index=True)
    curves_df.to_csv(out / "curves.csv", index=False)
    main_runs = runs[runs.variant.isin(algos)]
    tab = summarise(main_runs)
    tab.to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(table_markdown(tab) + "\n")
    plot_curves(curves_df[curves_df.variant.isin(("ppo-c", "ppo-cb"))], out / "fig5_curves.png")
    # the sweep: PPO-C (beta_Lambda = 0) and PPO-Cb at 0.5 from the main table (their first
    # sweep_iters iterations are the same runs' curves), plus the larger betas
    sw_curves = curves_df[(curves_df.setting.isin(sweep_settings))
                          & ((curves_df.variant.isin(("ppo-c", "ppo-cb")))
                             | curves_df.variant.str.startswith("ppo-cb("))]
    sw_curves = sw_curves[sw_curves.iteration <= sweep_iters].copy()
    sw_curves.loc[sw_curves.variant == "ppo-cb", "variant"] = "ppo-cb(beta_Lambda=0.5)"
    sw_curves.to_csv(out / "sweep_curves.csv", index=False)
    plot_sweep(sw_curves, out / "fig6_sweep.png")
    # sweep table at iteration sweep_iters (all variants measured at the same iteration)
    last = sw_curves[sw_curves.iteration == sweep_iters].copy()
    last["beta_lambda"] = last["variant"].map(
        lambda v: 0.0 if v == "ppo-c" else float(v.split("=")[1].rstrip(")")))
    last["abs_C"] = last["C"].abs()
    last.to_csv(out / "sweep.csv", index=False)

    # frontier placement
    front_note = ""
    try:
        from causalfair.engines.frontier import frontier

        placed = []
        for st in settings:
            model = lending_setting(st).tabular
            fr = frontier(model, 20, points=12)
            tables = {}
            for variant in main_runs.variant.unique():
                for seed in range(seeds):
                    ck = runs_root / st / variant / f"seed{seed}" / "checkpoint.pt"
                    if ck.is_file():
                        from causalfair.policies.core import load_checkpoint

                        pol, _ = load_checkpoint(ck, model)
                        tables[f"{variant}/seed{seed}"] = pol
            df = fr.place(tables)
            df["setting"] = st
            placed.append(df)
        fdf = pd.concat(placed, ignore_index=True)
        fdf.to_csv(out / "frontier.csv", index=False)
        fdf["algorithm"] = fdf["policy"].str.split("/").str[0]
        fsum = fdf.groupby(["setting", "algorithm"], sort=False)[["x", "utility", "frontier_utility", "gap"]].mean()
        front_note = ("frontier.csv: every trained policy placed against causalfair.engines.frontier's "
                      "utility-|C| frontier (12 points; x = the policy's |C|; gap = the best utility any time-indexed "
                      "policy reaches at the policy's |C|, minus the policy's utility). Mean over "
                      "seeds:\n\n" + fsum.round(3).to_string() + "\n")
    except ImportError:
        front_note = "causalfair.engines.frontier was not available when this ran: no frontier placement."
    except Exception as exc:  # noqa: BLE001 - report, do not lose the rest
        front_note = f"frontier placement failed: {type(exc).__name__}: {exc}"

    total = time.perf_counter() - t_all
    if args.report_only:
        total = float(runs["wall_s"].sum())
    cl = claims(main_runs, last if len(last) else pd.DataFrame())
    cmd = "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python reports/reproduce_paper.py" + (
        " " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    wall = runs.groupby("variant")["wall_s"].agg(["mean", "min", "max", "count"])
    readme = [
        "# Reproduction of seeds/003 (PPO-C / PPO-Cb) on causalfair's lending settings",
        "",
        "Generated by one command, from the repository root:",
        "",
        f"    {cmd}",
        "",
        ("Sum of the runs' wall times" if args.report_only else "Total wall time")
        + f": {total / 60:.1f} min for {len(runs)} training runs "
        f"({len(algos)} algorithms x {len(settings)} settings x {seeds} seeds at {iters} "
        f"iterations, plus the beta_Lambda sweep at {sweep_iters} iterations). Every run: "
        "individual-level MDP (episodes of T = 20 epochs, 512 individuals per rollout, 10,240 "
        "transitions per iteration), TrainConfig defaults otherwise (docs/training.md). All "
        "metrics are exact (causalfair.engines.effects.decompose and causalfair.engines.notions.other_notions "
        "on the trained policy table, T = 20).",
        "",
        "## Machine",
        "",
        "```",
        _machine(),
        "```",
        "",
        "The 2 cores were shared with other jobs while this ran; wall times are upper bounds.",
        "",
        "## Which of the paper's claims our runs support",
        "",
        *cl,
        "",
        "## Files",
        "",
        "- runs.csv: one row per run, final exact metrics and wall time (`wall_s`).",
        "- table.md / table.csv: mean and 95% t-interval over seeds per algorithm and setting.",
        "- fig5_curves.png / curves.csv: C, DPE, IPE, SPE over training (paper Fig. 5).",
        "- fig6_sweep.png / sweep_curves.csv / sweep.csv: beta_Lambda in {0 (PPO-C), 0.5, "
        + ", ".join(f"{b:g}" for b in betas) + "} on " + ", ".join(sweep_settings)
        + f", measured at iteration {sweep_iters} (paper Fig. 6).",
        "",
        "## Against the utility-|C| frontier",
        "",
        "```",
        front_note,
        "```",
        "",
        "## Table",
        table_markdown(tab),
        "",
        "## Wall time per run (seconds)",
        "",
        wall.round(1).to_markdown() if _has_tabulate() else wall.round(1).to_string(),
        "",
    ]
    (out / "README.md").write_text("\n".join(readme))
    print(f"done in {total / 60:.1f} min; wrote {out}", flush=True)
    return 0


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())

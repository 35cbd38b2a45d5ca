"""``causalfair audit SPEC``: run an audit spec and write its report."""

from __future__ import annotations

import argparse
import json
import sys

from causalfair._io import causalfair_dir, check_output_folder, to_jsonable
from causalfair._limits import check_timeout
from causalfair.commands._system import add_vecnormalize_argument, flag_given
from causalfair.errors import UsageError
from causalfair.report.explain import GLOSSARY
from causalfair.report.mlflow_log import log_audit, open_experiment
from causalfair.thresholds import OTHER_NOTIONS
from causalfair.workers import user_prints_to_stderr


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="run an audit spec (TOML) and write report.html, report.md, audit.json",
        description=(
            "Run an audit spec: decompose the qualification-gain disparity of the spec's "
            "policy, measure benefit fairness and the other notions, judge every threshold "
            "(PASS only if the whole confidence interval is inside it, INCONCLUSIVE when it "
            "straddles it) and write a self-contained report to --out (default: "
            ".causalfair/reports/NAME, a folder git ignores)."
        ),
        epilog="Example: causalfair audit audits/lending-1.toml --out reports/lending-1. "
               "Spec keys: docs/audit.md. For CI exit codes use `causalfair gate`. An "
               "existing --out is replaced only if causalfair wrote it. Re-run a recorded "
               "audit: causalfair audit --reproduce reports/lending-1 (docs/audit.md, "
               "\"Reproducing an audit\"). A spec is code: one that names a factory ([system] "
               "factory, [system] gym, [policy] factory) runs it (docs/limits.md, \"Security\").",
    )
    p.add_argument("spec", metavar="SPEC", nargs="?", help="audit spec (TOML file)")
    p.add_argument("--reproduce", metavar="AUDIT",
                   help="instead of SPEC: audit again the spec an audit.json recorded (AUDIT: "
                        "its audit folder or the file), after checking that the spec file "
                        "still parses to the recorded spec and that its checkpoint and every "
                        "other file it records (factory modules, tabular model, logs, "
                        "VecNormalize statistics) still have the recorded SHA-256, and list "
                        "every number that differs from the recorded one and every report "
                        "file (report.md, report.html, the exports) that differs from the "
                        "report rendered again; exit 0 when every number and file is "
                        "identical, 1 when one differs, 2 when an input changed")
    p.add_argument("--base-dir", metavar="DIR",
                   help="with --reproduce: the folder the recorded spec's relative paths start "
                        "from (default: the folder of the recorded spec file, as seen from "
                        "this working directory); --baseline POLICY: the one the recorded "
                        "audit was given on its command line")
    p.add_argument("--out", metavar="DIR",
                   help="report folder (default: .causalfair/reports/NAME); written atomically; "
                   "an existing folder is replaced only if causalfair wrote it")
    p.add_argument("--no-report", action="store_true",
                   help="print the verdicts only, writing no report folder (so not with --out)")
    p.add_argument("--baseline", metavar="POLICY",
                   help="a policy to compare with (a built-in such as threshold:0.7, a "
                        "checkpoint path or module:callable; overrides the spec's [baseline]): "
                        "the report's 'What changed' section and audit.json's attribution say "
                        "why C moved from it, by path (DPE, IPE), step and cell")
    add_vecnormalize_argument(p, "--baseline-vecnormalize", applies="the statistics of "
                              "--baseline (the spec's [baseline] takes [baseline] vecnormalize)")
    p.add_argument("--json", action="store_true",
                   help="print the audit as one JSON object instead of the text summary")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop the audit after SECONDS (exit 2), as the spec's own `timeout` "
                        "key does (the smaller limit applies); a limited audit runs in a "
                        "worker process, killed when the limit passes; at most 1e9 (about 31 "
                        "years)")
    add_mlflow_arguments(p)
    p.set_defaults(run=run)


def add_mlflow_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mlflow", action="store_true",
                   help="log each audit as an MLflow run (metrics with CI bounds, verdicts as "
                        "tags, audit.json and the report as artifacts) to $MLFLOW_TRACKING_URI; "
                        "needs pip install 'causalfair[mlflow]' (docs/scale.md)")
    p.add_argument("--mlflow-experiment", metavar="NAME", default="causalfair",
                   help="MLflow experiment (default: causalfair)")


def check_mlflow_arguments(args: argparse.Namespace) -> None:
    """``--mlflow-experiment`` goes with ``--mlflow`` (audit, gate): without it nothing is
    logged, and the experiment named was ignored without a word; with it, MLflow and its
    store are opened before any audit runs."""
    if args.mlflow:
        open_experiment(args.mlflow_experiment)
    elif flag_given(args, "mlflow_experiment"):
        raise UsageError(f"--mlflow-experiment {args.mlflow_experiment[:40]}: only with "
                         "--mlflow (nothing is logged without it); add --mlflow, or drop "
                         "--mlflow-experiment.")


def default_report_dir(name: str):
    """``.causalfair/reports/NAME`` under the working directory (:func:`causalfair_dir`)."""
    return causalfair_dir() / "reports" / name


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from causalfair.audit import load_spec
    from causalfair.audit.gate import audit_within

    check_mlflow_arguments(args)  # before any audit runs: MLflow or its store unusable
    check_timeout(args.timeout, "--timeout")
    if args.reproduce is not None or args.spec is None:
        return _reproduce(args)
    if args.base_dir is not None:
        raise UsageError("--base-dir: goes with --reproduce AUDIT.")
    if args.out and args.no_report:
        raise UsageError(f"--out {args.out}: --no-report writes no report folder; drop "
                         "--no-report to write the report (and its audit.json) there, or "
                         "drop --out.")
    spec = load_spec(args.spec)
    if not args.no_report:  # a folder that cannot be written: refused before the audit runs
        check_output_folder(Path(args.out) if args.out else
                            Path(".causalfair", "reports", spec.name))
    with user_prints_to_stderr():  # what the simulator or policy prints: never into stdout
        result = audit_within(spec, args.timeout, baseline=args.baseline,
                              baseline_where="--baseline",
                              baseline_vecnormalize=args.baseline_vecnormalize)
    out = None
    if not args.no_report:
        out = result.write_report(Path(args.out) if args.out else default_report_dir(spec.name))
    if args.mlflow:
        run_id = log_audit(result, experiment=args.mlflow_experiment, report_dir=out)
        print(f"mlflow run: {run_id}", file=sys.stderr)
    if args.json:
        doc = result.to_dict()
        doc["report"] = str(out) if out else None
        json.dump(to_jsonable(doc), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(result.summary())
        legend = notions_legend(result)
        if legend:
            print(legend)
        if result.attribution is not None:
            print("\n" + result.attribution.summary())
        if out is not None:
            print(f"\nreport: {out / 'report.html'}")
    return 0


def notions_legend(result) -> str:
    """A few lines naming what each other notion in the summary measures and its unit
    (0 is equal for each), or ``""`` when the summary shows none."""
    shown = [k for k in result.spec.metrics if k in OTHER_NOTIONS and k in result.quantities]
    if not shown:
        return ""
    lines = ["", "  other notions (0 is equal; docs/audit.md):"]
    lines += [f"  {k:<12} {GLOSSARY[k][0]} [{GLOSSARY[k][2]}]" for k in shown]
    return "\n".join(lines)


def _reproduce(args: argparse.Namespace) -> int:
    """``--reproduce AUDIT``: the recorded audit run again and compared
    (:func:`causalfair.audit.reproduce.reproduce`)."""
    from causalfair.audit.reproduce import reproduce

    if args.reproduce is None:
        raise UsageError("give an audit spec (SPEC), or --reproduce AUDIT_DIR.")
    other = [flag for flag, on in (("SPEC", args.spec is not None), ("--out", args.out),
                                   ("--json", args.json), ("--baseline-vecnormalize",
                                                           args.baseline_vecnormalize is not None),
                                   ("--timeout", args.timeout is not None),
                                   ("--mlflow", args.mlflow)) if on]
    if other:
        raise UsageError(f"--reproduce: cannot be combined with {other[0]}; it re-runs the "
                         "recorded spec as it was and prints the comparison.")
    with user_prints_to_stderr():  # what the simulator or policy prints: never into stdout
        rep = reproduce(args.reproduce, base_dir=args.base_dir, baseline=args.baseline)
    print(rep.summary())
    return 0 if rep.identical else 1

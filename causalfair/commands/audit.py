"""``causalfair audit SPEC``: run an audit spec and write its report."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit",
        help="run an audit spec (TOML) and write report.html, report.md, audit.json",
        description=(
            "Run an audit spec: decompose the qualification-gain disparity of the spec's "
            "policy, measure benefit fairness and the other notions, judge every threshold "
            "(PASS only if the whole confidence interval is inside it, INCONCLUSIVE when it "
            "straddles it) and write a self-contained report to reports/NAME (or --out)."
        ),
        epilog="Example: causalfair audit audits/lending-1.toml --out reports/lending-1. "
               "Spec keys: docs/audit.md. For CI exit codes use `causalfair gate`. "
               "With a report to write, the checkpoint is loaded in a second process and "
               "half of the figures are drawn in a forked one (same files, faster); "
               "CAUSALFAIR_SERIAL=1 keeps it to one process.",
    )
    p.add_argument("spec", metavar="SPEC", help="audit spec (TOML file)")
    p.add_argument("--out", metavar="DIR",
                   help="report folder (default: reports/NAME); replaced atomically")
    p.add_argument("--no-report", action="store_true", help="print the verdicts only")
    p.add_argument("--json", action="store_true",
                   help="print the audit as one JSON object instead of the text summary")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from causalfair._io import to_jsonable as _json_safe
    from causalfair._prefetch import CheckpointPrefetch
    from causalfair.audit import audit, load_spec
    from causalfair.cli import report_jobs

    spec = load_spec(args.spec)
    # With a report to write, load the checkpoint in a second process while this one
    # imports the plotting libraries and solves the frontier LP (see causalfair._prefetch;
    # results are identical, errors are re-raised from an in-process load).
    prefetch = None if args.no_report else CheckpointPrefetch.start(spec)
    try:
        if prefetch is not None:
            from causalfair.report import warm_up

            warm_up(spec)
        result = audit(spec, prefetched=prefetch.result() if prefetch is not None else None)
    finally:
        if prefetch is not None:
            prefetch.close()
    out = None
    if not args.no_report:
        out = result.write_report(Path(args.out) if args.out else Path("reports") / spec.name,
                                  jobs=report_jobs())
    if args.json:
        doc = result.to_dict()
        doc["report"] = str(out) if out else None
        json.dump(_json_safe(doc), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(result.summary())
        if out is not None:
            print(f"\nreport: {out / 'report.html'}")
    return 0

"""``causalfair export annex-iv|ll144 AUDIT_DIR``: documents for regulators and bias-audit
rules, written from an audit's audit.json (nothing is recomputed)."""

from __future__ import annotations

import argparse

from causalfair._names import EXPORT_KINDS  # the keys of causalfair.report.export.EXPORTS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write annex-iv.md or ll144.md + ll144.csv from an audit's audit.json",
        description=(
            "Write, from the audit.json of an audit folder and nothing else: annex-iv "
            "(annex-iv.md, an EU AI Act Annex IV technical-documentation skeleton with the "
            "audit's versions, checksums, metrics with intervals, assumptions and seeds filled "
            "in, and [TO BE COMPLETED BY THE DEPLOYER: ...] placeholders for the rest) or ll144 "
            "(ll144.md and ll144.csv: selection rate per group, step and non-baseline action, "
            "impact ratio against the group with the highest rate, and the counts behind them, "
            "in the style of NYC Local Law 144). Files are written atomically; an existing file "
            "with other content is refused unless --force. Exit 2 when audit.json is missing, "
            "malformed, or lacks what the export needs (the message names the field)."
        ),
        epilog="Example: causalfair audit audits/lending-1.toml --out reports/lending-1 && "
               "causalfair export ll144 reports/lending-1. See docs/audit.md.",
    )
    p.add_argument("kind", choices=EXPORT_KINDS, help="what to write")
    p.add_argument("audit_dir", metavar="AUDIT_DIR",
                   help="an audit folder (holding audit.json), or the audit.json file")
    p.add_argument("--out", metavar="DIR",
                   help="folder to write into (default: AUDIT_DIR)")
    p.add_argument("--force", action="store_true",
                   help="replace existing files of the same names that have other content")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from causalfair.report.export import write_exports

    for path, written in write_exports(args.kind, args.audit_dir, args.out,
                                       force=args.force).items():
        print(f"{'wrote' if written else 'unchanged'} {path}")
    return 0

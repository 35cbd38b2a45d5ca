"""``causalfair gate-merge``: merge the outputs of sharded gate runs (a CI job matrix)."""

from __future__ import annotations

import argparse

from causalfair._io import atomic_write_bytes, check_distinct_outputs, check_output_file
from causalfair.commands.gate import (
    annotate,
    check_junit_path,
    refuse_foreign_outputs,
    remove_earlier_outputs,
)
from causalfair.errors import UsageError, first_line, one_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gate-merge",
        help="merge sharded `causalfair gate --shard K/N` outputs into one verdict",
        description=(
            "Merge the JSON summaries (and JUnit files) of `causalfair gate --shard K/N` "
            "runs: the merged JSON is the unsharded gate's (every spec in the gate's order, "
            "whatever the order of the files; its exit_code over all of them); the merged "
            "JUnit holds every shard's test suites, in the same order. "
            "Every input is read and checked in full (sizes within CAUSALFAIR_MAX_MEMORY, "
            "docs/limits.md) before anything is written: a malformed one is refused with "
            "exit 2, naming the file and the field; so is a merge with a shard missing or "
            "given twice, shards of different spec lists or causalfair versions, shards "
            "run with and without --retrain, or "
            "--junit-in files that are not those of the JSON summaries (a spec's suite "
            "missing or given twice, a suite no summary holds, one of another run, or a spec "
            "that fails in the JSON shown passing). Exits with the merged "
            "exit code (0 pass, 1 fail, 2 when a shard holds a spec that could not be "
            "audited or whose retrain failed)."
        ),
        epilog="Example: causalfair gate-merge shard-*.json --junit-in shard-*.xml "
               "--junit gate.xml --json gate.json",
    )
    p.add_argument("json_in", metavar="SHARD.json", nargs="+", help="gate JSON summaries")
    p.add_argument("--junit-in", metavar="SHARD.xml", nargs="*", default=[],
                   help="the shards' JUnit files to merge: one suite per spec of the JSON "
                        "summaries, of the same runs (a spec that fails there fails here)")
    p.add_argument("--json", metavar="PATH", dest="json_out",
                   help="write the merged JSON to PATH ('-' or no --json: to stdout)")
    p.add_argument("--junit", metavar="PATH", dest="junit_out",
                   help="write the merged JUnit to the file PATH (needs --junit-in)")
    p.add_argument("--partial", action="store_true",
                   help="accept some shards of a sharded gate only (e.g. one shard's own "
                        "job summary); the exit code is then over those shards, not the "
                        "gate's; without it a missing shard is an error (exit 2)")
    p.add_argument("--markdown", action="store_true",
                   help="print the verdicts as a Markdown table on stdout instead of the merged "
                        "JSON (e.g. >> $GITHUB_STEP_SUMMARY; one gate JSON works too), with a "
                        "'why:' row for each spec gated against a [baseline] (why C moved); "
                        "with --partial over some shards only, the heading names them "
                        "(e.g. 'shard 1/4: passed (15 specs)'); "
                        "spec names and keys are escaped, so they show as plain text")
    p.add_argument("--annotations", action=argparse.BooleanOptionalAction, default=None,
                   help="print on stderr the GitHub workflow command of each spec that fails "
                        "the merged gate, as `causalfair gate --annotations` does (::error, "
                        "::warning for an INCONCLUSIVE counted as a pass), so a sharded gate "
                        "marks the spec files too (default: on when $GITHUB_ACTIONS is true)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from causalfair.audit.shards import (
        check_input_sizes,
        covered_shards,
        errors_in_words,
        markdown,
        merge_junit,
        merge_summaries,
        merged_suites,
        read_gate_summary,
        read_junit,
    )

    check_junit_path(args.junit_out)
    if args.junit_out and not args.junit_in:
        raise UsageError("--junit: give the shards' JUnit files with --junit-in.")
    if args.json_out == "-":  # stdout, as `gate --json -`
        if args.markdown:
            raise UsageError("--json -: stdout holds the --markdown table; write the JSON to "
                             "a file (--json merged.json) or leave --markdown out.")
        args.json_out = None
    check_distinct_outputs({"--json": args.json_out, "--junit": args.junit_out})
    for out in (args.json_out, args.junit_out):
        if out:
            check_output_file(out, [*args.json_in, *args.junit_in])
    # an earlier merge's outputs go first: a merge refused below leaves none behind
    remove_earlier_outputs(args.json_out, args.junit_out)
    refuse_foreign_outputs({"--json": args.json_out, "--junit": args.junit_out})
    # every input read and checked in full before anything is written
    check_input_sizes(args.json_in, args.junit_in)
    docs = [read_gate_summary(path) for path in args.json_in]
    suites = [s for path in args.junit_in for s in read_junit(path)]
    merged = merge_summaries(docs, args.json_in, partial=args.partial)
    if args.junit_in:  # (checked against every shard; the merged specs' suites kept)
        suites = merged_suites(merged, docs, suites, args.junit_in)
    text = json.dumps(merged, indent=2, allow_nan=False) + "\n"
    table = markdown(merged, covered_shards(docs)) if args.markdown else None
    xml = merge_junit(suites, [e["name"] for e in merged["specs"]]) if args.junit_out else None
    if args.json_out:
        atomic_write_bytes(Path(args.json_out), lambda fh: fh.write(text.encode()))
    if xml is not None:
        atomic_write_bytes(Path(args.junit_out), lambda fh: fh.write(xml.encode()))
    if table is not None:
        sys.stdout.write(table)
    elif not args.json_out:
        sys.stdout.write(text)
    # on stderr: stdout holds the merged JSON or the --markdown table
    annotate(merged, args.annotations, sys.stderr)
    errors = [e for e in merged["specs"] if e["overall"] == "ERROR"]
    if errors:  # exit 2, as the gate's: a spec that was not audited is never a verdict
        print(one_line("gate-merge", "error", f"{errors_in_words(merged['specs'])}; the "
                       f"first: {first_line(errors[0]['error'])[:300]}"),
              file=sys.stderr)
    else:
        n, m = len(docs), len(merged["specs"])
        kind = (("shard", "shards") if all(d.get("shard") is not None for d in docs)
                else ("gate summary", "gate summaries"))  # (the Action reads one gate's)
        print(f"{'merged' if n > 1 else 'read'} {n} {kind[n != 1]}, {m} spec{'s' * (m != 1)}:"
              f" exit code {merged['exit_code']}", file=sys.stderr)
    return merged["exit_code"]

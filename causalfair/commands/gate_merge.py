"""``causalfair gate-merge``: merge the outputs of sharded gate runs (a CI job matrix)."""

from __future__ import annotations

import argparse

from causalfair._io import atomic_write_bytes
from causalfair.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gate-merge",
        help="merge sharded `causalfair gate --shard K/N` outputs into one verdict",
        description=(
            "Merge the JSON summaries (and JUnit files) of `causalfair gate --shard K/N` "
            "runs: the merged JSON lists every spec in shard order and its exit_code is the "
            "gate's over all of them; the merged JUnit holds every shard's test suites. "
            "Exits with the merged exit code (0 pass, 1 fail)."
        ),
        epilog="Example: causalfair gate-merge shard-*.json --junit-in shard-*.xml "
               "--junit gate.xml --json gate.json",
    )
    p.add_argument("json_in", metavar="SHARD.json", nargs="+", help="gate JSON summaries")
    p.add_argument("--junit-in", metavar="SHARD.xml", nargs="*", default=[],
                   help="the shards' JUnit files to merge")
    p.add_argument("--json", metavar="PATH", dest="json_out", help="write the merged JSON")
    p.add_argument("--junit", metavar="PATH", dest="junit_out", help="write the merged JUnit")
    p.add_argument("--markdown", action="store_true",
                   help="print the verdicts as a Markdown table on stdout instead of the merged "
                        "JSON (e.g. >> $GITHUB_STEP_SUMMARY; one gate JSON works too)")
    p.set_defaults(run=run)


def markdown(doc: dict) -> str:
    """The verdict table of a gate JSON summary (one row per threshold per spec)."""
    def num(x) -> str:
        return "n/a" if x is None else f"{x:.4g}"

    icon = {"PASS": "PASS", "FAIL": "**FAIL**", "INCONCLUSIVE": "*INCONCLUSIVE*"}
    verdict = "passed" if doc["exit_code"] == 0 else "failed"
    lines = [f"### causalfair gate: {verdict} ({len(doc['specs'])} specs)", "",
             "| spec | threshold | estimate | CI | verdict |", "|---|---|---|---|---|"]
    for e in doc["specs"]:
        name = e["name"] + (" (repaired)" if "after" in e else "")
        for v in e["verdicts"]:
            ci = ("exact" if v.get("lower") == v.get("upper") == v.get("estimate")
                  else f"[{num(v.get('lower'))}, {num(v.get('upper'))}]")
            lines.append(f"| {name} | {v['key']} <= {num(v['threshold'])} | "
                         f"{num(v.get('estimate'))} | {ci} | {icon.get(v['status'], v['status'])} |")
        if not e["verdicts"]:
            lines.append(f"| {name} | (no thresholds) | | | {icon.get(e['overall'], e['overall'])} |")
    return "\n".join(lines) + "\n"


def _exit_code(doc: dict) -> int:
    bad = {"FAIL"} if doc.get("inconclusive") == "pass" else {"FAIL", "INCONCLUSIVE"}
    for e in doc["specs"]:
        if e["overall"] in bad:
            return 1
        before = (e.get("before") or {}).get("overall")
        if "after" in e and before in bad and not doc.get("accept_repaired", False):
            return 1
    return 0


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    import xml.etree.ElementTree as ET
    from pathlib import Path

    docs = []
    for path in args.json_in:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: not a readable gate JSON summary ({exc}).") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("specs"), list):
            raise UsageError(f"{path}: not a gate JSON summary (no 'specs' list).")
        docs.append(doc)
    modes = {(d.get("inconclusive"), d.get("accept_repaired", False)) for d in docs}
    if len(modes) > 1:
        raise UsageError("gate-merge: the shards ran with different --inconclusive or "
                         "--accept-repaired settings; run them alike.")
    merged = {"inconclusive": docs[0].get("inconclusive", "fail"),
              "accept_repaired": docs[0].get("accept_repaired", False),
              "specs": [e for d in docs for e in d["specs"]]}
    names = [e["name"] for e in merged["specs"]]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})[0]
        raise UsageError(f"gate-merge: spec {dup!r} appears in more than one shard.")
    merged = {"exit_code": _exit_code(merged), **merged}
    text = json.dumps(merged, indent=2, allow_nan=False) + "\n"
    if args.json_out:
        atomic_write_bytes(Path(args.json_out), lambda fh: fh.write(text.encode()))
    if args.markdown:
        sys.stdout.write(markdown(merged))
    elif not args.json_out:
        sys.stdout.write(text)
    if args.junit_out:
        root = ET.Element("testsuites", name="causalfair gate")
        totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
        for path in args.junit_in:
            try:
                shard = ET.parse(path).getroot()
            except (OSError, ET.ParseError) as exc:
                raise UsageError(f"{path}: not a readable JUnit file ({exc}).") from None
            for suite in shard.findall("testsuite"):
                root.append(suite)
                for k in totals:
                    totals[k] += int(suite.get(k, "0"))
        for k, v in totals.items():
            root.set(k, str(v))
        ET.indent(root)
        xml = '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
        atomic_write_bytes(Path(args.junit_out), lambda fh: fh.write(xml.encode()))
    print(f"merged {len(docs)} shards, {len(merged['specs'])} specs: exit code "
          f"{merged['exit_code']}", file=sys.stderr)
    return merged["exit_code"]

"""``causalfair gate SPEC...``: the CI fairness gate (exit codes, JSON, JUnit XML)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from causalfair._io import (
    atomic_write_bytes,
    check_distinct_outputs,
    check_output_file,
    check_output_folder,
    escape_chars,
)
from causalfair._io import to_jsonable as _json_safe
from causalfair._limits import check_timeout
from causalfair._usercode import keep_tracebacks
from causalfair.commands._system import jobs_for_backend
from causalfair.commands.audit import add_mlflow_arguments, check_mlflow_arguments
from causalfair.errors import (
    CausalfairError,
    OutputError,
    UsageError,
    first_line,
    one_line,
    terminal_text,
)
from causalfair.report.mlflow_log import log_audit
from causalfair.workers import user_prints_to_stderr


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gate",
        help="CI fairness gate: exit 0 when every spec passes, 1 otherwise",
        description=(
            "Audit one or more specs and set the exit code for CI: 0 when every threshold "
            "of every spec passes, 1 when any fails or is inconclusive (see --inconclusive), "
            "2 on usage or input errors (a broken spec: the message names the key), for a spec "
            "whose user code raised or exited (its traceback: .causalfair/logs/, or --debug; "
            "the other specs' verdicts are kept) and for one whose --retrain failed (its audit "
            "is kept in the table, JSON and JUnit). Every "
            "spec is validated before anything runs. The human-readable table (every threshold "
            "and the utility, before and after a repair) goes to stdout (what user code "
            "prints goes to stderr); the JSON summary "
            "only to --json PATH (or to stdout with --json -, the table then goes to stderr)."
        ),
        epilog="Example: causalfair gate audits/*.toml --junit gate.xml --json gate.json. "
               "See docs/ci-gate.md for a CI workflow. A spec is code: one that names a factory "
               "([system] factory, [system] gym, [policy] factory) runs it (docs/limits.md, "
               "\"Security\").",
    )
    p.add_argument("specs", metavar="SPEC", nargs="+", help="audit specs (TOML files)")
    p.add_argument("--inconclusive", choices=("pass", "fail"), default="fail",
                   help="exit code treatment of INCONCLUSIVE verdicts (default: fail)")
    p.add_argument("--junit", metavar="PATH",
                   help="write JUnit XML to the file PATH: one test case per threshold per "
                        "spec ('-' is refused: only --json - means stdout)")
    p.add_argument("--junit-inconclusive", choices=("failure", "skipped"), default=None,
                   help="how INCONCLUSIVE shows in JUnit (default: failure with "
                        "--inconclusive fail, skipped with --inconclusive pass)")
    p.add_argument("--json", metavar="PATH", dest="json_path",
                   help="write the JSON summary to PATH ('-': to stdout, and the table to "
                        "stderr); without --json no JSON is written")
    p.add_argument("--reports", metavar="DIR",
                   help="also write each spec's report to DIR/NAME (a spec whose audit "
                        "failed: a page stating its error; one whose retrain failed: its "
                        "audit's report, opening with that error); the folders an earlier "
                        "gate wrote in DIR for specs no longer in the list are removed "
                        "(docs/ci-gate.md)")
    p.add_argument("--retrain", action="store_true",
                   help="retrain failing checkpoints with the spec's [retrain] section "
                        "(warm start; the new checkpoint is written beside the old one as "
                        "NAME.retrained-ALGO-N.npz or .pt, in its format, never overwriting; "
                        "a policy that is not a checkpoint needs [retrain] init = \"scratch\": "
                        "a new network, beside the spec as SPECSTEM.retrained-ALGO-N.pt) and "
                        "re-audit them; the exit "
                        "code stays 1 while the checkpoint under version control fails, and a "
                        "repair that makes a threshold worse or keeps less utility than "
                        "[retrain] min_utility (default: the better of the baseline and the "
                        "uniform policy) fails; each checkpoint is written as its retrain "
                        "finishes, so Ctrl-C keeps (and names) those that finished")
    p.add_argument("--jobs", default=1, metavar="N|auto",
                   help="audit the specs (and retrain the failing ones, with --retrain) in N "
                        "local worker processes (default: 1, this "
                        "process; auto: one per core this process may use (affinity, cgroup "
                        "quota, OMP_NUM_THREADS)); results are merged in spec order, so the "
                        "JSON and JUnit are the same")
    p.add_argument("--backend", choices=("serial", "process", "ray"), default=None,
                   help="where the audits run: serial (this process), process (--jobs local "
                        "workers; the default when --jobs > 1) or ray (a Ray cluster at "
                        "--address or $RAY_ADDRESS, else a local Ray started for this run "
                        "with --jobs CPUs; needs pip install 'causalfair[ray]'); docs/scale.md")
    p.add_argument("--address", metavar="ADDR",
                   help="with --backend ray: the cluster, 'auto', HOST:PORT or ray://HOST:PORT "
                        "(default: $RAY_ADDRESS); checked with a 5 s TCP connection first")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop a spec's audit (and, with --retrain, its retrain) after SECONDS, "
                        "each limited on its own, and report it as an error of that "
                        "spec (exit 2; the other specs' verdicts are kept); a spec's own "
                        "`timeout` key does the same, the smaller limit applies. A spec with a "
                        "limit runs in a worker process, killed when the limit passes. At most 1e9 "
                        "(about 31 years)")
    p.add_argument("--shard", metavar="K/N",
                   help="audit only shard K of N (the specs at positions K-1, K-1+N, ... of the "
                        "list; a CI matrix runs K = 1..N, then `causalfair gate-merge`)")

    p.add_argument("--annotations", action=argparse.BooleanOptionalAction, default=None,
                   help="print a GitHub workflow command per spec that fails the gate "
                        "(::error file=SPEC,title=causalfair gate NAME::why; ::warning for an "
                        "INCONCLUSIVE counted as a pass), so GitHub marks the spec file "
                        "(default: on when $GITHUB_ACTIONS is true)")
    add_mlflow_arguments(p)
    p.add_argument("--accept-repaired", action="store_true",
                   help="with --retrain: exit 0 when every repaired checkpoint passes (you take "
                        "the repaired checkpoint in place of the failing one)")
    p.set_defaults(run=run, refuses_empty_itself=True)  # in its --junit too


def check_junit_path(path: str | None) -> None:
    """Refuse ``--junit -``: JUnit XML goes to a file (only ``--json -`` means stdout, where
    a CI step reads the JSON), never to a file literally named ``-``."""
    if path == "-":
        raise UsageError("--junit: bad value '-'; JUnit XML is written to a file, not stdout "
                         "(only --json - means stdout): give a path, e.g. --junit gate.xml.")


def remove_earlier_outputs(json_path: str | None, junit: str | None) -> None:
    """Remove the JSON summary and the JUnit file an earlier gate (or gate-merge) left at
    this run's output paths, before anything runs: in a reused CI workspace (Jenkins, a
    GitLab shell runner) a gate that is then killed (a job timeout's SIGTERM, the OOM
    killer's SIGKILL) writes nothing, and CI must not read the earlier, maybe green, files
    as this run's. A file that is no gate output is left alone (and refused:
    :func:`refuse_foreign_outputs`)."""
    from pathlib import Path

    for path, ours in ((json_path, _is_gate_json),
                       (junit, lambda data: b'<testsuites name="causalfair gate"' in data)):
        if not path or path == "-" or not Path(path).is_file():
            continue
        try:
            if Path(path).stat().st_size > 1 << 28:  # no gate output is this large: not read
                continue
            if ours(Path(path).read_bytes()):
                Path(path).unlink()
        except OSError:  # unreadable or not ours to remove: replaced (or refused) at the end
            pass


#: The keys every gate summary (gate --json, gate-merge --json) has at its top level
#: (docs/schema/gate.schema.json, "required").
_GATE_KEYS = frozenset({"schema_version", "exit_code", "inconclusive", "accept_repaired", "specs"})


def _is_gate_json(data: bytes) -> bool:
    """Whether ``data`` is a gate summary: a JSON object with every required key (a JSON
    file of the user's that merely mentions "specs" and "exit_code" is not)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and _GATE_KEYS <= doc.keys()


def refuse_foreign_outputs(outputs: dict[str, str | None]) -> None:
    """After :func:`remove_earlier_outputs`: refuse (exit 2, naming the option) an output
    path still holding a file that is not empty, since it is no gate output (a user's
    notes, a ``pyproject.toml`` typed by mistake): causalfair never writes over a file it
    did not create. An empty file (``mktemp``'s) is written."""
    from pathlib import Path

    for flag, path in outputs.items():
        if not path or path == "-":
            continue
        try:
            foreign = Path(path).is_file() and Path(path).stat().st_size > 0
        except OSError:
            foreign = False
        if foreign:
            raise OutputError(f"{flag}: {path} exists and is no causalfair gate output; "
                              "causalfair does not overwrite a file it did not create (choose "
                              "another path, or delete the file).")


def run_gate(*args: Any, **kwargs: Any) -> Any:
    """:func:`causalfair.audit.run_gate`, imported when a gate runs (``causalfair gate --help``
    imports no audit)."""
    from causalfair.audit import run_gate as gate

    return gate(*args, **kwargs)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from causalfair.audit.gate import gate_error_junit

    check_junit_path(args.junit)
    check_distinct_outputs({"--json": args.json_path, "--junit": args.junit})
    _check_apart_from_reports(args)
    outputs = [out for out in (args.junit, args.json_path) if out and out != "-"]
    if outputs:  # never over a spec, nor a checkpoint, model, log or module a spec reads
        from causalfair.audit.shards import spec_inputs

        inputs = [*args.specs, *(p for spec in args.specs for p in spec_inputs(spec))]
        for out in outputs:
            check_output_file(out, inputs)
    remove_earlier_outputs(args.json_path, args.junit)
    refuse_foreign_outputs({"--json": args.json_path, "--junit": args.junit})
    wrote: list[str] = []
    try:
        return _gate(args, wrote)
    except CausalfairError as exc:  # CI reads this run's error, never an earlier JUnit file
        # (an interrupt writes nothing: docs/limits.md, "Interrupts")
        if args.junit and not wrote:
            msg = first_line(str(exc)) if str(exc) else type(exc).__name__
            xml = gate_error_junit(msg, type(exc).__name__).encode("utf-8")
            atomic_write_bytes(Path(args.junit), lambda fh: fh.write(xml))
        raise


def _gate(args: argparse.Namespace, wrote: list[str]) -> int:
    """The gate once its output paths are checked; ``wrote`` gets the JUnit path once
    this run has written it."""
    from pathlib import Path

    from causalfair.audit.gate import GateSpecErrors

    if getattr(args, "empty_argument", None):  # (causalfair.cli: `--json ""`, `gate ""`)
        raise UsageError(args.empty_argument)
    check_mlflow_arguments(args)  # before any audit runs: MLflow or its store unusable
    if args.junit_inconclusive is not None and not args.junit:
        raise UsageError(f"--junit-inconclusive {args.junit_inconclusive}: only with --junit "
                         "PATH (it says how INCONCLUSIVE shows in the JUnit file); add "
                         "--junit, or drop --junit-inconclusive.")
    if args.accept_repaired and not args.retrain:
        raise UsageError("--accept-repaired: only with --retrain.")
    args.jobs = jobs_for_backend(args.jobs, args.backend)
    if args.address is not None and args.backend != "ray":
        raise UsageError("--address: only with --backend ray.")

    check_timeout(args.timeout, "--timeout")
    shard = None
    every = list(args.specs)  # the whole list: its shards keep each other's reports
    if args.shard:
        args.specs, shard = _shard(args.specs, args.shard, args.retrain)
    if args.reports:  # refused before anything runs or is written there (its record too)
        _check_reports(args.reports, args.specs)
    sweep = _stale_reports(args, every)
    try:
        # user code's prints (factories and, without workers, policies and simulators) go
        # to stderr, as in a worker: never into the table or the JSON of --json -
        with user_prints_to_stderr():
            try:
                result = run_gate(args.specs, inconclusive=args.inconclusive,
                                  retrain=args.retrain, reports=args.reports,
                                  accept_repaired=args.accept_repaired, jobs=args.jobs,
                                  backend=args.backend, address=args.address,
                                  timeout=args.timeout,
                                  of_gate=every if shard is not None else None)
            finally:
                sweep()  # a reports folder the run created gets its record
    except GateSpecErrors as exc:  # a bad spec still gives CI a JUnit file (with <error>s)
        if args.junit:
            xml = exc.to_junit().encode("utf-8")
            atomic_write_bytes(Path(args.junit), lambda fh: fh.write(xml))
            wrote.append(args.junit)
        if args.json_path:  # (stdout stays empty: nothing was audited)
            doc = exc.to_dict(inconclusive=args.inconclusive, accept_repaired=args.accept_repaired)
            if shard is not None:  # which specs these are, for gate-merge's order
                from causalfair.audit.shards import stopped_shard

                doc["shard"] = (shard if exc.positions is None
                                else stopped_shard(shard, exc.positions, exc.stage))
            _write_json(args, json.dumps(doc, indent=2) + "\n")
        annotate(exc.to_dict(), args.annotations, _table_stream(args))
        _report_errors(args, [str(exc)] + [msg for _, msg in exc.errors[1:]],
                       exc.user_tracebacks, exc.tracebacks)
        return 2
    summary = result.to_dict()
    if shard is not None:  # gate-merge checks that every shard of this list is merged
        summary["shard"] = shard
    doc = json.dumps(_json_safe(summary), indent=2, allow_nan=False) + "\n"
    if args.junit:
        how = args.junit_inconclusive or ("skipped" if args.inconclusive == "pass" else "failure")
        xml = result.to_junit(inconclusive_as=how).encode("utf-8")
        atomic_write_bytes(Path(args.junit), lambda fh: fh.write(xml))
        wrote.append(args.junit)
    table = result.side_by_side()
    if len(result.entries) > 1:  # a CI log of many specs ends with the gate's verdict
        table += "\n" + summary_line(result.to_dict())
    print(terminal_text(table), file=_table_stream(args))  # (stdout escapes it too)
    annotate(summary, args.annotations, _table_stream(args))
    _write_json(args, doc)
    errs = [e for e in result.entries if e.error is not None]
    _report_errors(args, [e.error for e in errs], [e.user_traceback for e in errs],
                   [e.traceback for e in errs])
    if args.mlflow:  # the driver logs every audit (before and after retraining), once the
        # verdicts are written: a store failing mid-way loses no JUnit or JSON
        for e in result.entries:
            if e.before is None:  # not audited (a failed retrain keeps its audit: logged)
                continue
            stage = "before" if e.after is not None or e.error is not None else "audit"
            log_audit(e.before, experiment=args.mlflow_experiment, stage=stage,
                      report_dir=e.report if e.after is None else None, retrain_error=e.error)
            if e.after is not None:
                log_audit(e.after, experiment=args.mlflow_experiment, stage="after",
                          report_dir=e.report)
    return result.exit_code


def _check_apart_from_reports(args: argparse.Namespace) -> None:
    """``--json`` / ``--junit`` never the ``--reports`` folder, its record, or a path in a
    spec's report folder ``DIR/NAME`` (the report's own audit.json or card.md would be
    overwritten, or the file written after every audit fails on a folder): an OutputError
    naming both options before anything runs or is removed."""
    from pathlib import Path

    from causalfair.audit.stale_reports import INDEX, gated_names

    if not args.reports:
        return
    folder = Path(os.path.abspath(args.reports))
    mine = [folder, folder / INDEX, *(folder / n for n in sorted(gated_names(args.specs)))]
    for flag, out in (("--json", args.json_path), ("--junit", args.junit)):
        if not out or out == "-":
            continue
        path = Path(os.path.abspath(out))
        hit = next((m for m in mine if path == m or (m not in mine[:2] and m in path.parents)),
                   None)
        if hit is not None:
            what = ("the --reports folder" if hit == folder else
                    "the record of --reports" if hit.name == INDEX else
                    f"the report folder of spec {hit.name!r} (--reports)")
            raise OutputError(f"{flag}: {out} is {'' if path == hit else 'in '}{what}, which "
                              f"the gate writes whole; give {flag} a path outside "
                              f"{args.reports}'s report folders (e.g. beside them).")


def _check_reports(reports: str, specs: list[str]) -> None:
    """``--reports DIR``: a folder (or one to create, below no file) where each spec's
    report folder DIR/NAME may be written (absent, empty or a report causalfair wrote),
    else an OutputError naming --reports, before any audit runs."""
    from pathlib import Path

    from causalfair.audit.stale_reports import gated_names

    folder = Path(reports)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--reports: {reports} is a file; give a folder (each spec's report "
                         "is written to DIR/NAME).")
    for name in sorted(gated_names(specs)):
        check_output_folder(folder / name, "--reports")


def _stale_reports(args: argparse.Namespace, every: list[str]) -> Any:
    """With --reports: remove the report folders an earlier gate wrote there for specs
    that are not in this gate's list ``every`` (:mod:`causalfair.audit.stale_reports`),
    record those this run writes, and return the same sweep to call once the run is done;
    without --reports, a sweep that does nothing."""
    if not args.reports:
        return lambda: None
    from causalfair.audit.stale_reports import gated_names, sweep_reports

    gated = gated_names(every)
    mine = gated_names(args.specs) & gated

    def sweep() -> None:
        sweep_reports(args.reports, gated, mine)

    sweep()
    return sweep


def summary_line(doc: dict) -> str:
    """The last line of a gate's table over several specs: how many specs have each
    overall verdict (as the JSON's entries), how many repairs are not taken (a spec whose
    repair passes while its checkpoint fails) and the exit code, e.g. ``40 specs: 20 PASS,
    17 FAIL, 3 ERROR; exit code 2`` or ``3 specs: 3 PASS; 1 repair not taken (the
    checkpoint under version control: FAIL); exit code 1``."""
    from causalfair.audit.shards import spec_failure

    overall = [e["overall"] for e in doc["specs"]]
    parts = [f"{overall.count(k)} {k}" for k in ("PASS", "FAIL", "INCONCLUSIVE", "ERROR")
             if k in overall]
    # a spec whose repair passes counts as its repair (the JSON's overall), but its
    # checkpoint under version control still fails the gate: say so, or the line names
    # nothing that explains the exit code
    held = [why for e in doc["specs"] if (why := spec_failure(doc, e)) is not None
            and why != e["overall"]]
    taken = (f"; {len(held)} repair{'s' * (len(held) != 1)} not taken (the checkpoint under "
             f"version control: {', '.join(w.removesuffix(' before its repair') for w in held)})"
             if held else "")
    return f"{len(overall)} specs: {', '.join(parts)}{taken}; exit code {doc['exit_code']}"


def _table_stream(args: argparse.Namespace) -> Any:
    """Where the table (and the annotations) go: stdout, or stderr with --json -."""
    return sys.stderr if args.json_path == "-" else sys.stdout


def _write_json(args: argparse.Namespace, doc: str) -> None:
    """The JSON summary to --json PATH (atomically), to stdout with --json -, else
    nowhere."""
    if args.json_path == "-":
        sys.stdout.write(doc)
    elif args.json_path:
        from pathlib import Path

        atomic_write_bytes(Path(args.json_path), lambda fh: fh.write(doc.encode("utf-8")))


def _report_errors(args: argparse.Namespace, messages: list[str], user_tracebacks: list[str],
                   tracebacks: list[str]) -> None:
    """One line per spec that could not be audited; the user's tracebacks to a log file
    (or stderr with --debug), named at the end of the first line; a bug's traceback to
    stderr."""
    for tb in tracebacks:
        if tb:
            sys.stderr.write(tb)
    note = keep_tracebacks(user_tracebacks, "gate", getattr(args, "debug", False))
    for i, msg in enumerate(messages):
        line = first_line(str(msg)) if str(msg) else "error"
        print(one_line("gate", "error", line + (note if i == 0 else "")), file=sys.stderr)


def _shard(specs: list[str], text: str, retrain: bool) -> tuple[list[str], dict]:
    from causalfair.audit.shards import select_shard

    mine, record = select_shard(specs, text, retrain=retrain)
    if not mine:
        print(f"causalfair gate: shard {record['k']}/{record['n']} holds no spec "
              f"({len(specs)} given); nothing audited.", file=sys.stderr)
    return mine, record


def annotate(doc: dict, on: bool | None, file: Any) -> None:
    """With ``on`` (None: when $GITHUB_ACTIONS is true), one GitHub workflow command per
    spec of the gate summary ``doc`` that an annotation marks
    (:func:`causalfair.audit.shards.annotations`), to ``file``, escaped as GitHub's toolkit
    does: ``%``, CR and LF in the message; also ``:`` and ``,`` in a property. The one
    writer of the annotations of ``gate`` and ``gate-merge`` (a sharded gate's merge marks
    the specs as the unsharded gate does)."""
    if not (os.environ.get("GITHUB_ACTIONS") == "true" if on is None else on):
        return
    from causalfair.audit.shards import annotations

    for level, spec, name, msg in annotations(doc):
        print(f"::{level} file={_prop(spec)},title={_prop(f'causalfair gate {name}')}"
              f"::{_data(msg)}", file=file)


def _data(text: str) -> str:
    """GitHub's escapes, and what a terminal acts on (:func:`causalfair.errors.
    terminal_text`: an ESC or CSI in a spec's file name would reach the job log as a
    terminal sequence, a bidi override reorder the line) or a lone surrogate (a file name
    that is not UTF-8: a UTF-8 stream cannot print it) written as ``\\xNN`` / ``\\uNNNN``."""
    text = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return escape_chars(_SURROGATE, terminal_text(text))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")

"""The CI fairness gate: audit several specs, exit codes, JSON and JUnit XML, and
retrain-on-fail."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causalfair._io import MANIFEST, beside, foreign_entries
from causalfair._io import fixed as _fixed
from causalfair._limits import check_timeout
from causalfair._usercode import find_user_modules, user_modules, user_traceback
from causalfair._version import __version__
from causalfair._width import ljust, text_width
from causalfair.audit.gate_junit import gate_error_junit, gate_junit, spec_errors_junit
from causalfair.audit.result import AuditResult, display_path
from causalfair.audit.retrain import (
    Retrained,
    any_retrain,
    check_retrain,
    place_retrained,
    retrain_targets,
    retrained_checkpoint_path,
    run_retrain,
    utility_of,
)
from causalfair.audit.run import Prepared, as_spec, audit, check_spec, run_prepared
from causalfair.audit.spec import AuditSpec, is_valid_name, read_spec_file
from causalfair.audit.spec_sections import spec_label
from causalfair.backends import SerialBackend, TaskError, holding, make_backend
from causalfair.errors import CausalfairError, InputError, ResourceLimitError, SpecError, first_line
from causalfair.report.render import render_report, write_error_report, write_rendered, write_report
from causalfair.thresholds import FAIL, failing

__all__ = ["GateEntry", "GateResult", "GateSpecErrors", "audit_within", "run_gate",
           "retrained_checkpoint_path", "gate_error_junit"]


#: The overall status of a spec that could not be audited (its code raised, it timed out).
ERROR = "ERROR"
#: Version of the gate JSON summary (docs/schema/gate.schema.json): the minor number grows
#: when keys are added, the major when a key changes or goes (CHANGELOG.md).
GATE_SCHEMA_VERSION = "1.0"


def gate_summary(exit_code: int, inconclusive: str, accept_repaired: bool,
                 specs: list[dict[str, Any]]) -> dict[str, Any]:
    """The gate JSON summary (gate.json; merged by gate-merge): the one place its
    top-level keys, ``schema_version`` first, are written. ``causalfair_version`` is the
    version that wrote it (gate-merge refuses shards of different versions)."""
    return {"schema_version": GATE_SCHEMA_VERSION, "causalfair_version": __version__,
            "exit_code": exit_code, "inconclusive": inconclusive,
            "accept_repaired": accept_repaired, "specs": specs}


@dataclass(frozen=True)
class SpecFailure:
    """Why one spec could not be audited: the one-line message (naming the spec and the
    callable), the kind of error, and the user's traceback when user code raised."""

    message: str
    kind: str = ""
    user_traceback: str = ""


@dataclass(eq=False)
class GateEntry:
    """One spec's gate outcome: the audit, and the re-audit after retraining if any; or,
    for a spec that could not be audited, ``error`` (its one-line message) and the
    traceback (``user_traceback``: of user code; ``traceback``: of a bug)."""

    spec: AuditSpec
    before: AuditResult | None
    after: AuditResult | None = None
    retrained_checkpoint: Path | None = None
    report: Path | None = None
    error: str | None = None
    error_kind: str = ""
    traceback: str = ""
    user_traceback: str = ""
    #: ``gate --retrain`` left this spec alone: it has no ``[retrain]`` section
    not_retrained: bool = False

    @property
    def final(self) -> AuditResult:
        return self.after if self.after is not None else self.before

    @property
    def overall(self) -> str:
        """ERROR, or the final audit's verdict; a repair with problems
        (:attr:`repair_problems`) is a FAIL whatever its thresholds say."""
        if self.error is not None:
            return ERROR
        return FAIL if self.repair_problems else self.final.overall

    @property
    def repair_check(self) -> dict[str, Any] | None:
        """The honesty check of the repair (:func:`causalfair.audit.retrain.repair_check`),
        or None without one."""
        return (getattr(self.after, "extra", None) or {}).get("repair_check")

    @property
    def repair_problems(self) -> list[str]:
        """Why the repair is not accepted (utility under its floor, a threshold made
        worse); empty when there is none."""
        return list((self.repair_check or {}).get("problems") or [])

    @property
    def repair(self) -> dict[str, Any] | None:
        """The constrained repair's summary (``[retrain] algo = "exact"``), or None."""
        return None if self.after is None else self.after.extra.get("repair")

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            d = {"name": self.spec.name, "spec": self.spec.file_shown,
                 "overall": ERROR, "error": self.error, "verdicts": [],
                 "checkpoint_sha256": None}
            if self.before is not None:  # its retrain failed: the audit, as for a FAIL
                d.update(checkpoint_sha256=self.before.checkpoint_sha256,
                         utility=utility_of(self.before), before=_block(self.before),
                         retrain_error=self.error)
            return {**d, **({"report": display_path(self.report)} if self.report is not None
                            else {})}
        d: dict[str, Any] = {
            "name": self.spec.name,
            "spec": self.spec.file_shown,
            "overall": self.overall,
            "verdicts": [v.to_dict() for v in self.final.verdicts],
            "utility": utility_of(self.final),
            "checkpoint_sha256": self.before.checkpoint_sha256,
        }
        att = getattr(self.final, "attribution", None)
        if att is not None:  # why C moved from [baseline]: one line
            d["attribution"] = att.line()
        if self.after is not None:
            d["before"] = _block(self.before)
            d["retrained_checkpoint"] = display_path(self.retrained_checkpoint)
            d["after"] = {"overall": self.after.overall, "utility": utility_of(self.after),
                          "checkpoint_sha256": self.after.checkpoint_sha256,
                          "verdicts": [v.to_dict() for v in self.after.verdicts]}
            if self.repair_check is not None:
                d["repair_check"] = self.repair_check
            rep = self.repair
            if rep is not None:
                d["repair"] = {k: v for k, v in rep.items() if k != "tables"}
        if self.report is not None:
            d["report"] = display_path(self.report)
        return d


def _block(res: AuditResult) -> dict[str, Any]:
    """An audit's verdict block in the gate JSON (``before``: the audit before retraining)."""
    return {"overall": res.overall, "utility": utility_of(res),
            "verdicts": [v.to_dict() for v in res.verdicts]}


class GateSpecErrors(SpecError):
    """Some specs of a gate are invalid; ``errors`` lists (spec, one-line message) for
    each. Nothing was audited; the JUnit file gets one <error> test case per bad spec,
    the JSON summary one ERROR entry. ``tracebacks``: of bugs; ``user_tracebacks``: of
    user code that raised (a factory), for a log file. ``positions``: each bad spec's
    place in the list gated (0 = the first); ``stage``: ``"check"`` (the specs' check,
    before anything runs) or ``"retrain"`` (their ``[retrain]``, checked once every spec
    passed the first): a sharded gate's merge keeps the errors of the first stage that
    stopped a shard, as the unsharded gate stops there (gate-merge)."""

    def __init__(self, errors: list[tuple[str, str]], n_specs: int,
                 tracebacks: list[str] | None = None, user_tracebacks: list[str] | None = None,
                 names: list[str] | None = None, positions: list[int] | None = None,
                 stage: str = "check"):
        self.errors = errors
        self.positions = list(positions) if positions is not None else None
        self.stage = stage
        #: each bad spec's name in the JSON and JUnit (CI keys a test's history on it): its
        #: ``name`` where it can be read and is unique, else its file (``errors``' first item)
        self.names = list(names) if names is not None else [spec for spec, _ in errors]
        self.tracebacks = tracebacks or []
        self.user_tracebacks = [t for t in user_tracebacks or [] if t]
        first = errors[0][1]
        more = f"{len(errors)} of {n_specs} specs are invalid; the first: " if len(errors) > 1 else ""
        super().__init__(more + first)

    def to_junit(self) -> str:
        """JUnit XML: one <error> test case per bad spec (:func:`spec_errors_junit`)."""
        return spec_errors_junit(self.names, self.errors)

    def to_dict(self, *, inconclusive: str = "fail", accept_repaired: bool = False
                ) -> dict[str, Any]:
        """The JSON summary: exit code 2 and one ERROR entry per invalid spec."""
        return gate_summary(2, inconclusive, accept_repaired,
                            [{"name": name, "spec": spec, "overall": ERROR, "error": msg,
                              "verdicts": [], "checkpoint_sha256": None}
                             for name, (spec, msg) in zip(self.names, self.errors, strict=True)])


@dataclass(eq=False)
class GateResult:
    """Outcome of :func:`run_gate`: entries per spec and the exit code. With retraining,
    the exit code stays 1 while a checkpoint under version control fails, even when its
    repair passes, unless ``accept_repaired`` (the user takes the repaired checkpoint)."""

    entries: list[GateEntry]
    inconclusive: str = "fail"
    accept_repaired: bool = False

    @property
    def exit_code(self) -> int:
        """0: every spec passes; 1: a threshold fails (or is inconclusive); 2: a spec
        could not be audited, or its retrain failed (an error is never a pass, nor mistaken
        for a verdict)."""
        if any(e.error is not None for e in self.entries):
            return 2
        bad = failing(self.inconclusive)
        for e in self.entries:
            if e.overall in bad:
                return 1
            if e.after is not None and e.before.overall in bad and not self.accept_repaired:
                return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        return gate_summary(self.exit_code, self.inconclusive, self.accept_repaired,
                            [e.to_dict() for e in self.entries])

    def counts_against(self, status: str) -> bool:
        """Whether a verdict of ``status`` fails the gate (INCONCLUSIVE per --inconclusive)."""
        return status in failing(self.inconclusive)

    def repair_not_taken(self, e: GateEntry) -> bool:
        """A retrained spec whose original checkpoint still fails the gate: the repair is a
        proposal until it is committed or ``accept_repaired`` (the rule of exit_code)."""
        return (e.error is None and e.after is not None and not self.accept_repaired
                and self.counts_against(e.before.overall))

    def side_by_side(self) -> str:
        """Text table: one line per threshold, before and (if retrained) after."""
        lines = []
        w = max([22] + [text_width(v.shown) for e in self.entries if e.before is not None
                        for v in e.before.verdicts])  # one column for every label
        for e in self.entries:
            if e.error is not None:
                lines.append(f"{e.spec.name}: {ERROR} (" + ("not audited" if e.before is None
                             else f"its retrain failed; the audit: {e.before.overall}")
                             + "; the error follows)")
                if e.before is None:
                    continue
            elif self.repair_not_taken(e):
                held = ("the checkpoint under version control until you commit the repair or"
                        if e.spec.checkpoint is not None else "the spec's policy until its "
                        "[policy] names the repaired checkpoint or you")
                lines.append(f"{e.spec.name}: {e.before.overall} (its repair: {e.overall}; the "
                             f"exit code counts {held} pass --accept-repaired)")
            else:
                lines.append(f"{e.spec.name}: {e.overall}")
            after = {v.key: v for v in e.after.verdicts} if e.after else {}
            for v in e.before.verdicts:
                row = f"  {ljust(v.shown, w)} {beside(v.estimate, v.threshold, 6):>11} {v.status:<12}"
                if e.after is not None:
                    a = after[v.key]
                    row += f" -> {beside(a.estimate, a.threshold, 6):>11} {a.status}"
                    if a.pair is not None and a.pair != v.pair:  # the label names v's pair
                        row += f" (pair {a.pair})"
                lines.append(row.rstrip())
            row = f"  {'utility':<{w}} {_fixed(utility_of(e.before)):>11} {'':<12}"
            check = e.repair_check
            if e.after is not None:
                row += f" -> {_fixed(utility_of(e.after)):>11}"
                if check is not None and check.get("min_utility", -math.inf) > -math.inf:
                    row += f" (floor {_fixed(check['min_utility'])})"
            lines.append(row.rstrip())
            lines += [f"  REPAIR NOT ACCEPTED: {p}" for p in e.repair_problems]
            if getattr(e.final, "attribution", None) is not None:
                lines.append(f"  why: {e.final.attribution.line()}")
            if e.retrained_checkpoint:
                lines.append(f"  retrained checkpoint: {display_path(e.retrained_checkpoint)}")
            if e.not_retrained and self.counts_against(e.before.overall):
                lines.append("  not retrained: the spec has no [retrain] section")
            if e.repair is not None:
                lines += ["  " + x for x in repair_lines(e.repair)]
                wall = e.after.extra.get("repair_wall_s") if e.after is not None else None
                if wall is not None:
                    lines.append(f"  repair wall time: {wall:.1f} s")
        return "\n".join(lines)

    def to_junit(self, *, inconclusive_as: str = "failure") -> str:
        """JUnit XML: one <testsuite> per spec, one <testcase> per threshold; FAIL is a
        <failure>, INCONCLUSIVE a <failure> or <skipped> (``inconclusive_as``); a spec
        that could not be audited is one <error> test case
        (:func:`causalfair.audit.gate_junit.gate_junit`)."""
        return gate_junit(self, inconclusive_as)


def run_gate(specs: Sequence[str | os.PathLike[str] | AuditSpec], *, inconclusive: str = "fail",
             retrain: bool = False, reports: str | os.PathLike[str] | None = None,
             accept_repaired: bool = False, jobs: int = 1, backend: str | None = None,
             address: str | None = None, timeout: float | None = None,
             of_gate: Sequence[str | os.PathLike[str] | AuditSpec] | None = None) -> GateResult:
    """Audit every spec (all are validated first, where their audits will run
    (:func:`_check_specs`): a broken one raises :class:`SpecError` before anything is
    audited). With ``retrain``, a spec whose verdict is not PASS is
    retrained from its checkpoint and re-audited. With ``reports``, each spec's report
    is written to ``reports/NAME`` (after retraining: the new policy beside the old; a
    spec whose audit failed: a page stating its error,
    :func:`causalfair.report.render.write_error_report`; a spec whose retrain failed: its
    audit's report, opening with the retrain's error).
    ``jobs``, ``backend`` and ``address`` choose where the audits run, and then the
    retrains with their re-audits, one task per failing spec
    (:func:`causalfair.backends.make_backend`: this process by default, ``jobs`` local
    worker processes, or Ray); the result is the same whichever runs them, and the
    retrained checkpoints are written by this process. ``timeout`` (seconds) limits each
    spec's audit, and its retrain on its own, as the spec's own ``timeout`` does (the
    smaller applies): a spec over its limit is stopped and reported as an error of that
    spec, as is a retrain that raises. With ``reports`` and worker processes or Ray, each
    report is rendered by the task that audited (or retrained) its spec, on a worker in
    this process's working directory on this host (elsewhere, here), so its rendering
    counts towards the spec's time limit; this process writes every report folder, the
    same bytes as a serial gate's, as each comes back. ``of_gate``: the whole spec list
    when ``specs`` is one shard of it (``gate --shard``): a shard none of whose specs has
    ``[retrain]`` gates them as without ``retrain`` when another spec of the list has one,
    as the unsharded gate does."""
    if inconclusive not in ("pass", "fail"):
        raise InputError(f"inconclusive: bad value {inconclusive!r}; allowed values: pass, fail.")

    runner = make_backend(jobs, backend, address)
    timeout = check_timeout(timeout, "timeout")

    loaded, errors, names, at = [], [], [], []  # at: each loaded spec's place in specs
    unread_at = []  # each spec that cannot be read: its place in specs
    for k, s in enumerate(specs):
        label = str(getattr(s, "path", None) or s) if not isinstance(s, AuditSpec) else s.name
        try:
            sp = as_spec(s)
            if ("thresholds" not in sp.raw and not sp.baseline_thresholds
                    and not isinstance(s, AuditSpec)):
                raise SpecError(
                    f"{sp.label}: [thresholds]: missing; a gate without thresholds "
                    "passes everything. Add thresholds, or write an empty [thresholds] table "
                    "to gate on nothing on purpose.")
            loaded.append(sp)
            at.append(k)
        except CausalfairError as exc:
            errors.append((label, first_line(str(exc))))
            names.append(spec_file_name(s) or label)
            unread_at.append(k)
    names, bad_names = [s.name for s in loaded], names
    dup = {n for n in names if names.count(n) > 1}
    if dup:  # the JSON, the JUnit, --reports/NAME and gate-merge's shards key on the name
        first = sorted(dup)[0]
        files = ", ".join(s.file_shown or s.name for s in loaded
                          if s.name == first)
        raise SpecError(f"audit spec name: bad value {first!r} in {files}; the specs of one "
                        "gate need distinct names (its JSON, JUnit and reports hold one entry "
                        "per name): give each spec its own name = \"...\".")
    limits = [min((t for t in (s.timeout, timeout) if t is not None), default=None)
              for s in loaded]
    # one backend for the checks, the audits and the retrains: Ray is started or connected
    # to once, worker processes start once
    written: dict[int, Path] = {}  # reports written as their audits came back
    entries: list[GateEntry] = []
    fresh = _missing_top(reports)  # the folder --reports creates, if any
    try:
        with holding(runner):
            # every spec is checked (its system built, its policy resolved) before any is
            # audited: here, or on the workers (then each rebuilds its spec for its audit)
            # (a spec that cannot be read: the others are checked here, every error at once)
            prepared_, failed = _check_specs(SerialBackend() if errors else runner, loaded, limits)
            unread = list(bad_names)
            # every invalid spec in the order given (a shard's, hence gate-merge's, order too):
            # (place, (file, message), name, user's traceback, traceback of a bug)
            invalid = sorted([(k, err, n, "", "") for k, err, n in zip(unread_at, errors, unread,
                                                                         strict=True)]
                             + [(at[i], (loaded[i].file_shown or loaded[i].name, msg),
                                 loaded[i].name, user_tb, tb)
                                for i, (msg, user_tb, tb) in failed.items()],
                             key=lambda e: e[0])
            errors = [e[1] for e in invalid]
            bad_names = [e[2] for e in invalid]
            user_tracebacks = [e[3] for e in invalid if e[3]]
            tracebacks = [e[4] for e in invalid if e[4]]
            if errors:  # each named as a spec that ran would be, unless another spec has its name
                every = names + unread
                raise GateSpecErrors(errors, len(specs), tracebacks=tracebacks,
                                     user_tracebacks=user_tracebacks,
                                     positions=[e[0] for e in invalid],
                                     names=[n if every.count(n) == 1 else spec
                                            for n, (spec, _) in zip(bad_names, errors, strict=True)])
            keep = (_retrainable(loaded, prepared_, any_retrain(of_gate), at) if retrain
                    else frozenset())
            prepared = [prepared_.get(i, s) for i, s in enumerate(loaded)]
            # one spec per task (here, or in worker processes); results in spec order; a task
            # that fails is reported for its spec while the others finish
            bad = failing(inconclusive)
            # with workers, each report is rendered where its spec was audited (the driver only
            # writes the bytes); a spec that will be retrained gets its report after the retrain
            plan = (_RenderPlan(_place(), bad if retrain else frozenset())
                    if reports is not None and not isinstance(runner, SerialBackend) else None)
            if isinstance(runner, SerialBackend):  # a spec with a time limit runs in a worker
                audited = runner.map(_audit_one, [s if t is not None else p for s, p, t
                                                  in zip(loaded, prepared, limits, strict=True)], limits)
            elif plan is None:  # workers rebuild everything from the spec (paths and strings
                # travel, not objects)
                audited = runner.map(_audit_one, loaded, limits)
            else:  # the same; each report is written as its audit comes back
                audited = runner.map(_task(_audit_one, plan), loaded, limits,
                                     functools.partial(_write_now, Path(reports), loaded, written))
            redo = [i for i, b in enumerate(audited) if i in keep and isinstance(b, AuditResult)
                    and b.overall in bad]
            # the retrains (each with its re-audit) as one more map on the same backend, in spec
            # order, under the same per-spec limit; each checkpoint's path is given here, in the
            # whole list's order (every spec with [retrain] sharing a checkpoint takes the next
            # name, failing or not, so a shard names as the unsharded gate), and its bytes
            # written here (only the driver writes files) as each retrain finishes
            targets = retrain_targets(loaded, redo, of_gate) if redo else []
            placed: list[Path] = []
            try:
                redone = dict(zip(redo, runner.map(_retrain_one if plan is None else
                                                   _task(_retrain_one, plan),
                                                   [(loaded[i], audited[i], t) for i, t
                                                    in zip(redo, targets, strict=True)],
                                                   [limits[i] for i in redo],
                                                   functools.partial(_place_now, placed)),
                                  strict=True)) if redo else {}
            except KeyboardInterrupt as exc:  # the interrupt's message says what is kept
                exc.add_note("the retrained checkpoints of the retrains that finished are written: "
                             + ", ".join(map(display_path, placed)) if placed else
                             "no retrain had finished: no retrained checkpoint written")
                raise
        for i, (s, before) in enumerate(zip(loaded, audited, strict=True)):
            out = redone.get(i)
            files = None  # the report rendered by the retrain's worker
            if isinstance(out, _Rendered):
                out, files = out.out, out.files
            if isinstance(before, (TaskError, SpecFailure)) or isinstance(out, (TaskError, SpecFailure)):
                # this spec errs (its audit, or its retrain); the others go on
                entry = (_error_entry(s, before) if out is None
                         else _error_entry(s, out, "retrain", before=before))
                if reports is not None:  # a folder that says why, in place of any earlier
                    # report: the audit's report, opening with the error, when its retrain failed
                    entry.report = (write_error_report(
                        Path(reports) / s.name, name=s.name,
                        spec=s.file_shown or s.name, error=entry.error)
                        if entry.before is None else
                        write_report(entry.before, Path(reports) / s.name, retrain_error=entry.error))
                entries.append(entry)
                continue
            entry = GateEntry(spec=s, before=before, not_retrained=retrain and i not in keep)
            if out is not None:
                entry.retrained_checkpoint, entry.after = out
            if i in written:
                entry.report = written[i]
            elif reports is not None and files is not None:
                entry.report = write_rendered(Path(reports) / s.name, files)
            elif reports is not None:
                entry.report = entry.final.write_report(
                    Path(reports) / s.name, before=before if entry.after is not None else None)
            entries.append(entry)
        return GateResult(entries=entries, inconclusive=inconclusive, accept_repaired=accept_repaired)
    except KeyboardInterrupt:  # no report left behind, whole or half (docs/limits.md), nor
        # an earlier run's of these specs, which CI would show as this run's (as --json)
        earlier = [Path(reports) / s.name for s in loaded] if reports is not None else []
        _drop_reports([*written.values(), *(e.report for e in entries), *earlier], fresh)
        raise


def _missing_top(reports: str | os.PathLike[str] | None) -> Path | None:
    """The outermost folder of ``reports`` that does not exist yet (the gate would create
    it, and all below it), or None."""
    if reports is None:
        return None
    top, path = None, Path(reports).absolute()
    while not path.exists() and not path.is_symlink() and path != path.parent:
        top, path = path, path.parent
    return top


def _drop_reports(folders: list[Path | None], fresh: Path | None) -> None:
    """After an interrupt: remove the report folders this gate wrote (each holds
    causalfair's manifest: :func:`causalfair._io.write_folder`), then the folders it
    created for them (``fresh`` and below), where nothing else is left in them."""
    import shutil

    for folder in folders:
        if folder is not None and not folder.is_symlink() and (folder / MANIFEST).is_file() \
                and not foreign_entries(folder):  # a file the user added there: kept
            shutil.rmtree(folder, ignore_errors=True)
    if fresh is None or not fresh.is_dir():
        return
    for path in sorted((p for p in [fresh, *fresh.rglob("*")] if p.is_dir()),
                       key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            path.rmdir()  # only an empty folder goes


@dataclass(frozen=True)
class _RenderPlan:
    """Where a gate's reports may be rendered (the driver's working directory and host: a
    report names paths relative to the one and records the other's platform), and the
    verdicts after which a spec is retrained (its report is the retrain's)."""

    place: tuple[str, str]
    retrained: frozenset[str]


@dataclass(frozen=True)
class _Rendered:
    """A task's outcome (an audit, a retrain, a failure) and its spec's report files
    rendered where it ran (:func:`causalfair.report.render.render_report`); None when
    there is no report to render there."""

    out: Any
    files: dict[str, bytes] | None


def _place_now(placed: list[Path], _i: int, out: Any) -> Any:
    """A retrain's outcome as it comes back to the driver: its checkpoint written now
    (:func:`~causalfair.audit.retrain.place_retrained`; an interrupt later keeps it) and
    added to ``placed``; a checkpoint that cannot be written is that spec's
    :class:`SpecFailure` (the others are written)."""
    inner = out.out if isinstance(out, _Rendered) else out
    if not isinstance(inner, Retrained) or inner.data is None:
        return out
    try:
        place_retrained(inner.target, inner.data)
    except CausalfairError as exc:
        return _spec_failure(exc)
    placed.append(inner.target)
    kept = Retrained(inner.target, inner.after)
    return _Rendered(kept, out.files) if isinstance(out, _Rendered) else kept


def _write_now(reports: Path, specs: list[AuditSpec], written: dict[int, Path], i: int,
               out: Any) -> Any:
    """An audit's outcome as it comes back to the driver: the report its worker rendered
    written now (the driver holds no report's bytes longer), its folder added to
    ``written``; the outcome is kept without the bytes."""
    if not isinstance(out, _Rendered):
        return out
    if out.files is not None:
        written[i] = write_rendered(reports / specs[i].name, out.files)
    return out.out


def _place() -> tuple[str, str]:
    return os.getcwd(), platform.node()


def _task(fn: Any, plan: _RenderPlan) -> Any:
    """``fn`` rendering its spec's report under ``plan``, named as ``fn``."""
    return functools.update_wrapper(functools.partial(fn, render=plan), fn)


def _rendered(out: Any, plan: _RenderPlan | None, *, before: AuditResult | None = None) -> Any:
    """``out`` with its report rendered here, when ``plan`` says this process may (same
    working directory and host) and ``out`` is an audit that is not retrained next (or a
    retrain's re-audit, after ``before``); else ``out`` as it is."""
    if plan is None:
        return out
    if _place() != plan.place:  # the driver renders it
        return _Rendered(out, None)
    if isinstance(out, Retrained):
        return _Rendered(out, render_report(out.after, before=before))
    if isinstance(out, AuditResult) and (out.overall not in plan.retrained
                                         or out.spec.retrain is None):  # not retrained
        return _Rendered(out, render_report(out))
    return _Rendered(out, None)


def repair_lines(rep: Mapping[str, Any]) -> list[str]:
    """Plain lines on a constrained repair: passed or not, utility kept, the ratios."""
    res = rep.get("result") or {}
    orig = rep.get("original") or {}
    lines = []
    if not rep.get("passed"):
        lines.append("no passing repair found; the attempt closest to passing has utility "
                     f"{_fixed(res.get('utility', math.nan), 4)}, "
                     f"C {_fixed(res.get('C', math.nan), 4, sign=True)}, "
                     f"Lambda {res.get('Lambda', float('nan')):.4f} (the checkpoint written "
                     "fails the thresholds)")
        return lines
    lines.append(f"repair: utility {_fixed(res['utility'], 4)} (original "
                 f"{_fixed(orig.get('utility', math.nan), 4)}), "
                 f"C {_fixed(res['C'], 4, sign=True)}, Lambda {res['Lambda']:.4f}")
    r = rep.get("ratios") or {}
    bf = rep.get("best_found") or {}
    lp = rep.get("lp_bound") or {}
    parts = []
    if r.get("to_best_found") is not None:
        parts.append(f"{r['to_best_found']:.3f} of the best found ({_fixed(bf.get('utility', 0), 4)})")
    if r.get("to_bound") is not None:
        parts.append(f"{r['to_bound']:.3f} of the LP bound ({_fixed(lp.get('utility', 0), 4)}, "
                     f"{', '.join(lp.get('constraints') or []) or 'no linear threshold'} only)")
    if r.get("to_original") is not None:
        parts.append(f"{r['to_original']:.3f} of the original")
    if parts:
        lines.append("utility kept: " + "; ".join(parts))
    return lines


def _retrainable(loaded: Sequence[AuditSpec], prepared: Mapping[int, Prepared],
                 elsewhere: bool = False, at: Sequence[int] | None = None) -> frozenset[int]:
    """The specs ``gate --retrain`` retrains when they fail: those with a ``[retrain]``
    section (a spec without one is gated as without --retrain). Every such spec that
    cannot be retrained (:func:`causalfair.audit.retrain.check_retrain`) is refused at
    once, before anything is audited; so is a gate none of whose specs has ``[retrain]``
    (--retrain would do nothing), unless ``elsewhere``: these specs are a shard of a gate
    another spec of which has one. ``at``: each spec's place in the list gated (the
    errors' ``positions``)."""
    keep = [i for i, s in enumerate(loaded) if s.retrain is not None]
    if not keep and loaded and not elsewhere:  # check_retrain's refusal of the first, naming the section
        check_retrain(loaded[0], prepared[0].system if 0 in prepared else None)
    errors, names, positions = [], [], []
    for i in keep:
        s = loaded[i]
        try:
            check_retrain(s, prepared[i].system if i in prepared else None)
        except SpecError as exc:
            errors.append((s.file_shown or s.name,
                           first_line(str(exc))))
            names.append(s.name)
            positions.append(i if at is None else at[i])
    if errors:
        raise GateSpecErrors(errors, len(loaded), names=names, positions=positions,
                             stage="retrain")
    return frozenset(keep)


def _error_entry(spec: AuditSpec, failure: Any, what: str = "audit",
                 before: AuditResult | None = None) -> GateEntry:
    """The entry of a spec whose ``what`` (its audit, or its retrain after the audit
    ``before``) failed (a :class:`SpecFailure`, or a backend's ``TaskError``: a crash, a
    dead worker, a time limit), in one form whatever failed: ``audit spec PATH: the WHAT
    failed: what happened; the fix`` (PATH relative to the checkout, as the JSON's)."""
    label = spec.label if spec.path is not None else f"audit spec {spec.name}"
    if isinstance(failure, SpecFailure):
        msg = failure.message
        if spec.path is not None:  # a message that names it by its absolute path
            msg = msg.replace(spec_label(spec.path), label, 1)
        head, sep, rest = msg.partition(": ")
        if sep and head.startswith("audit spec"):  # the spec as the message names it
            label, msg = head, rest
        body, tb = msg.removeprefix(f"the {what} failed: "), ""
    else:
        body, tb = f"{failure.kind}: {failure.message}", getattr(failure, "traceback", "") or ""
        exited = "worker failed" in failure.message and "(exit code" in failure.message
        fix = ("" if getattr(failure, "input_error", False) else
               "; its worker process exited before it answered (code that calls sys.exit or "
               "os._exit?): run the spec alone to see why" if exited else
               "; its worker process died: if it ran out of memory, give the job more memory "
               "or pass a smaller --jobs (or a smaller n); else run the spec alone to see why"
               if "worker failed" in failure.message else
               "; its traceback is on stderr" if tb else "")
        if fix:
            body = body.rstrip().removesuffix(".") + fix + "."
    return GateEntry(spec=spec, before=before, error=f"{label}: the {what} failed: {body}",
                     error_kind=failure.kind, traceback=tb,
                     user_traceback=getattr(failure, "user_traceback", ""))


def spec_file_name(spec: Any) -> str | None:
    """The ``name`` of the spec file ``spec`` that could not be loaded, when the file reads
    as TOML and its name is a valid one; else None (the gate then names it by its file)."""
    if isinstance(spec, AuditSpec):
        return None
    try:  # the audit's own reading, within its limits (a deep or huge file is refused)
        name = read_spec_file(spec).get("name")
    except (OSError, ValueError, TypeError, CausalfairError):
        return None
    return name if is_valid_name(name) else None


def audit_within(spec: AuditSpec, timeout: float | None = None, **kw: Any) -> AuditResult:
    """``audit(spec, **kw)`` under the smaller of ``timeout`` (seconds) and the spec's own
    ``timeout``, the limit the gate applies per spec: with a limit the audit runs in a
    worker process killed when it passes (:class:`~causalfair.backends.SerialBackend`),
    raising :class:`~causalfair.errors.ResourceLimitError`; an input error in the worker
    is raised as one, a crash as a RuntimeError carrying the worker's traceback."""
    limit = min((t for t in (spec.timeout, check_timeout(timeout, "timeout")) if t is not None),
                default=None)
    if limit is None:
        return audit(spec, **kw)
    (out,) = SerialBackend().map(functools.partial(_audit_one, **kw), [spec], [limit])
    if isinstance(out, SpecFailure):
        raise InputError(out.message)
    if isinstance(out, TaskError):
        if out.kind == "TimeoutError":
            raise ResourceLimitError(f"{spec.label}: the audit {out.message}")
        if out.input_error:
            raise InputError(out.message)
        raise RuntimeError(f"the audit failed in its worker: {out.kind}: {out.message}\n"
                           f"{out.traceback}")
    return out


def _retrain_one(item: tuple[AuditSpec, AuditResult, Path], render: _RenderPlan | None = None
                 ) -> Retrained | SpecFailure | _Rendered:
    """Retrain one spec whose audit ``before`` failed (here, or in a worker) and re-audit
    it (:func:`causalfair.audit.retrain.run_retrain`), the checkpoint's bytes returned for
    the driver to write at ``target``; an input error, user code that raised included, is
    that spec's :class:`SpecFailure`. ``render``: render the re-audit's report here too
    (:func:`_rendered`)."""
    spec, before, target = item
    try:
        out = run_retrain(spec, before, target, place=False)
    except CausalfairError as exc:
        return _spec_failure(exc)
    return _rendered(out, render, before=before)


def _check_specs(runner: Any, loaded: Sequence[AuditSpec], limits: Sequence[float | None]
                 ) -> tuple[dict[int, Prepared], dict[int, tuple[str, str, str]]]:
    """Every spec checked before any is audited (:func:`~causalfair.audit.run.check_spec`:
    a model's system built and its policy resolved, a [logs] spec's log read and the
    groups it names checked), where its audit will run. On a serial backend a spec without
    a time limit here, the prepared spec kept for its audit; every other spec as a task of
    ``runner`` under its limit (on workers, or Ray; a serial backend runs a task with a
    limit in a worker), which rebuilds it for its audit. So user code that kills its
    process, hangs or exhausts memory while a spec is built ends that spec's task, not the
    gate. A check past its limit stops the checks still running or not started. Returns
    the prepared specs and, per spec index that failed, (its one-line message, the user's
    traceback, the traceback of a bug)."""
    serial = isinstance(runner, SerialBackend)
    prepared: dict[int, Prepared] = {}
    failed: dict[int, tuple[str, str, str]] = {}
    away = [i for i in range(len(loaded)) if not serial or limits[i] is not None]
    for i in sorted(set(range(len(loaded))) - set(away)):
        try:
            if (prep := check_spec(loaded[i])) is not None:
                prepared[i] = prep
        except CausalfairError as exc:  # a factory that raised or exited included
            failed[i] = (first_line(str(exc)), user_traceback(exc), "")
    if not away:
        return prepared, failed
    got: dict[int, Any] = {}  # the checks back (a time limit passed stops the others)

    def keep(j: int, out: Any) -> Any:
        if isinstance(out, TaskError) and out.kind == "TimeoutError":
            got[j] = out
            raise _ChecksStopped
        return got.setdefault(j, out)

    with contextlib.suppress(_ChecksStopped):
        runner.map(_check_one, [loaded[i] for i in away], [limits[i] for i in away], keep)
    checked = [got.get(j) for j in range(len(away))]
    # the users' modules the workers loaded, found here too (results may hold their objects)
    find_user_modules(sorted({m for out in checked if isinstance(out, tuple) for m in out[1]
                              if m[0] not in sys.modules}))
    stopped = sum(out is None for out in checked)
    for i, out in zip(away, checked, strict=True):
        out = out[0] if isinstance(out, tuple) else out
        if isinstance(out, SpecFailure):
            failed[i] = (out.message, out.user_traceback, "")
        elif isinstance(out, TaskError):  # a crash, a dead worker, a time limit
            entry = _error_entry(loaded[i], out, "check")
            failed[i] = ((entry.error or "") + (f"; the checks of {stopped} other spec(s) "
                         "were stopped then (nothing is audited while a spec is invalid)"
                         if stopped and out.kind == "TimeoutError" else ""), "",
                         entry.traceback or "")
    return prepared, dict(sorted(failed.items()))  # failed: the specs here, then away


class _ChecksStopped(Exception):
    """A spec's check passed its time limit: the others stop (:func:`_check_specs`)."""


def _check_one(spec: AuditSpec) -> tuple[SpecFailure | None, list[tuple[str, str]]]:
    """A spec's check on a worker (:func:`_check_specs`): None or why it failed, and the
    modules of users' folders loaded there (:func:`~causalfair._usercode.user_modules`),
    which the driver must find to read back results holding their objects."""
    try:
        check_spec(spec)
    except CausalfairError as exc:
        return _spec_failure(exc), user_modules()
    return None, user_modules()


def _spec_failure(exc: CausalfairError) -> SpecFailure:
    """``exc`` as a spec's failure: its first line, its kind, the user's traceback."""
    return SpecFailure(first_line(str(exc)) if str(exc) else type(exc).__name__,
                       type(exc).__name__, user_traceback(exc))


def _audit_one(prep: Any, render: _RenderPlan | None = None, **kw: Any
               ) -> AuditResult | SpecFailure | _Rendered:
    """Audit one spec (prepared here, or rebuilt from its file in a worker); an input
    error, user code that raised included, is that spec's :class:`SpecFailure` (picklable,
    with the user's traceback): the other specs go on. ``render``: its report too."""
    try:
        out = run_prepared(prep) if isinstance(prep, Prepared) else audit(prep, **kw)
    except CausalfairError as exc:
        return _spec_failure(exc)
    return _rendered(out, render)

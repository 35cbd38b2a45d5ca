"""The outputs of sharded gate runs (``causalfair gate --shard K/N``) and their merge
(``causalfair gate-merge``), read as untrusted input.

Every shard file is read within the limits of docs/limits.md (its size against
``CAUSALFAIR_MAX_MEMORY`` before it is read, JSON nesting depth before it is parsed, no
DTD or entity in JUnit XML) and checked in full against the gate summary's schema - the
one :meth:`causalfair.audit.GateResult.to_dict` writes - before anything is written. A
malformed input is an :class:`~causalfair.errors.InputError` naming the file and the field
(``shard-1.json: specs[0].verdicts[2].estimate: ...``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from causalfair._io import check_document
from causalfair._limits import check_memory, format_bytes
from causalfair._markdown import md_escape
from causalfair._safe_read import JSON_BYTES_FACTOR, read_file, read_json_file
from causalfair._usercode import module_in_folder
from causalfair.audit.gate import ERROR, GATE_SCHEMA_VERSION, gate_summary
from causalfair.audit.junit import suite_properties, xml_document
from causalfair.audit.spec import check_spec_size, load_spec, spec_file
from causalfair.errors import CausalfairError, InputError, ResourceLimitError, UsageError
from causalfair.thresholds import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    Verdict,
    failing,
    overall_verdict,
    pair_note,
    threshold_op,
)

__all__ = ["JUNIT_BYTES_FACTOR", "STATUSES", "check_input_sizes", "read_gate_summary", "read_junit",
           "merge_summaries", "merge_junit", "summary_exit_code", "markdown", "covered_shards",
           "select_shard", "stopped_shard", "STAGES", "merged_suites",
           "check_junit_matches", "spec_failure", "errors_in_words", "annotations"]

#: Verdict statuses a gate summary may hold (a spec's overall may also be ERROR: it could
#: not be audited, and its ``error`` says why).
STATUSES = (PASS, FAIL, INCONCLUSIVE)
#: Memory per byte of JUnit XML assumed when parsing it (the element tree), checked
#: against ``CAUSALFAIR_MAX_MEMORY`` before the file is read.
JUNIT_BYTES_FACTOR = 20
_COUNTS = ("tests", "failures", "errors", "skipped")
#: Where a gate stops on invalid specs (``shard.invalid.stage``; ``GateSpecErrors.stage``):
#: the specs' check, then, once every spec passed it, their ``[retrain]``.
STAGES = ("check", "retrain")
_NUMBER_FIELDS = ("estimate", "lower", "upper")


def _bad(where: str, field: str, what: str, value: Any = ...) -> InputError:
    shown = "" if value is ... else f", got {_short(value)}"
    return InputError(f"{where}: {field}: {what}{shown}.")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_input_sizes(json_paths: Sequence[str], junit_paths: Sequence[str]) -> None:
    """Refuse, before any is read, inputs whose parsed forms together would need more
    memory than ``CAUSALFAIR_MAX_MEMORY`` allows (each file is checked again as it is
    read)."""
    needs = {}
    for paths, factor in ((json_paths, JSON_BYTES_FACTOR), (junit_paths, JUNIT_BYTES_FACTOR)):
        for path in paths:
            try:
                needs[path] = factor * Path(path).stat().st_size
            except OSError as exc:
                raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})."
                                 ) from None
    total, largest = sum(needs.values()), max(needs, key=needs.get)
    check_memory(total, f"{len(needs)} gate-merge input file(s), the largest {largest} (about "
                 f"{format_bytes(total)} once parsed)", "merge fewer or smaller shards at a time")


# ------------------------------------------------------------------------------ shards
def select_shard(specs: Sequence[str], text: str, *, retrain: bool = False
                 ) -> tuple[list[str], dict[str, Any]]:
    """The specs of shard ``text`` (``"K/N"``: positions K-1, K-1+N, ... of ``specs``) and
    the shard's record for its JSON summary: ``k``, ``n``, the number of specs listed and
    ``specs_sha256``, a digest of every listed spec in order (its file name, its bytes and
    those of the checkpoints and data files it reads; not its folder, which differs between
    runners), and ``retrain``, whether the shard ran with ``--retrain``, so that
    :func:`merge_summaries` can tell a missing shard, shards run on different spec lists,
    or shards of which some retrained their failing specs and others did not, from a
    complete merge. Every listed spec must exist (a missing one fails every
    shard, not only the one holding it)."""
    k, sep, n = text.partition("/")
    try:
        k_i, n_i = int(k), int(n)
    except ValueError:
        k_i = n_i = 0
    if not sep or not 1 <= k_i <= n_i:
        raise UsageError(f"--shard: expected K/N with 1 <= K <= N, got {text[:40]!r}.")
    digest = hashlib.sha256()
    hashed: dict[Path, bytes] = {}  # a file many specs read (one checkpoint) is read once
    for spec in specs:  # each spec's file name and contents, not its folder: the shards of
        # one gate may run on runners with other checkout folders, or from another folder
        digest.update(os.fsencode(Path(spec).name) + b"\0" + _spec_digest(spec_file(spec)))
        for path in spec_inputs(spec):  # (contents only: absolute paths differ by machine)
            key = Path(os.path.realpath(path))
            if key not in hashed:
                hashed[key] = _file_digest(path)
            digest.update(hashed[key])
    record = {"k": k_i, "n": n_i, "specs": len(specs), "specs_sha256": digest.hexdigest(),
              "retrain": bool(retrain)}
    return list(specs[k_i - 1::n_i]), record


def stopped_shard(record: Mapping[str, Any], positions: Sequence[int], stage: str
                  ) -> dict[str, Any]:
    """The record of a shard that stopped on invalid specs (its summary lists their errors
    only, as the unsharded gate's does): ``record`` (:func:`select_shard`'s) with
    ``invalid``: the ``stage`` that stopped it (:data:`STAGES`) and ``at``, each listed
    error's place in the whole spec list (0 = the first; the shard's i-th spec, i in
    ``positions``, is at k - 1 + i n), so that :func:`merge_summaries` gives what the
    unsharded gate gives."""
    k, n = record["k"], record["n"]
    return {**record, "invalid": {"stage": stage, "at": [k - 1 + i * n for i in positions]}}


def _spec_digest(path: Path) -> bytes:
    """A spec file's digest, or its size alone when the file is over what its reading
    allows (:func:`causalfair.audit.spec.read_spec_file`: the shard holding it refuses it;
    a link to /proc/kcore is not hashed for ever)."""
    try:
        size = path.stat().st_size
    except OSError:
        return b"unreadable"
    try:
        check_spec_size(size, "spec")
    except ResourceLimitError:
        return b"over the limit: %d" % size
    return _file_digest(path)


def _file_digest(path: Path) -> bytes:
    try:
        with Path(path).open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").digest()
    except OSError:
        return b"unreadable"


def spec_inputs(spec: str | os.PathLike[str]) -> list[Path]:
    """The files a spec reads (checkpoints, tabular model, log, VecNormalize statistics,
    and the modules of its ``module:callable`` factories found beside it: ``[system]
    factory``, ``[system] gym``, ``[policy] factory``): those a shard's record hashes, and
    those ``gate --json/--junit`` never write over; none when the spec does not load (the
    gate, or the shard holding it, reports that). A module found elsewhere (an installed
    package) is not listed: nothing is imported here."""
    try:
        s = load_spec(spec)
    except CausalfairError:
        return []
    found = [s.checkpoint, s.baseline_checkpoint, s.system_tabular, s.logs_path,
             s.policy_vecnormalize, s.baseline_vecnormalize]
    refs = [s.policy_factory, s.system_id,
            s.system_params.get("env") if s.system_id == "gym" else None]
    for ref in refs:
        if isinstance(ref, str) and ":" in ref and s.base_dir is not None:
            found.append(module_in_folder(ref.partition(":")[0], Path(s.base_dir)))
    return [p for p in found if isinstance(p, Path)]


def _check_shard_record(doc: Mapping[str, Any], where: str) -> None:
    rec = doc.get("shard")
    if rec is None:
        return
    _object(rec, where, "shard")
    for key in ("k", "n", "specs"):
        v = rec.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if key == "specs" else 1):
            raise _bad(where, f"shard.{key}", "must be an integer >= "
                       + ("0" if key == "specs" else "1"), v)
    if rec["k"] > rec["n"]:
        raise _bad(where, "shard.k", f"must be at most shard.n = {rec['n']}", rec["k"])
    _text(rec, "specs_sha256", where, "shard")
    if not isinstance(rec.get("retrain", False), bool):
        raise _bad(where, "shard.retrain", "must be true or false", rec.get("retrain"))
    if rec.get("invalid") is not None:
        _check_stopped(doc, rec, where)


def _check_stopped(doc: Mapping[str, Any], rec: Mapping[str, Any], where: str) -> None:
    """``shard.invalid`` (:func:`stopped_shard`): a stage, and one place in the spec list
    per entry, each of this shard's, increasing; every entry an ERROR."""
    inv = _object(rec["invalid"], where, "shard.invalid")
    if inv.get("stage") not in STAGES:
        raise _bad(where, "shard.invalid.stage", "must be 'check' or 'retrain'", inv.get("stage"))
    at, specs = inv.get("at"), doc["specs"]
    if not isinstance(at, list) or len(at) != len(specs):
        raise _bad(where, "shard.invalid.at", f"must be a list of {len(specs)} places in the "
                   "spec list, one per spec entry", at)
    k, n = rec["k"], rec["n"]
    for j, p in enumerate(at):
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < rec["specs"] \
                or p % n != k - 1 or (j and p <= at[j - 1]):
            raise _bad(where, f"shard.invalid.at[{j}]", f"must be the place of a spec of shard "
                       f"{k}/{n} (k - 1 + i n, below shard.specs = {rec['specs']}), after the "
                       "one before", p)
    for j, e in enumerate(specs):
        if isinstance(e, dict) and e.get("overall") != ERROR:
            raise _bad(where, f"specs[{j}].overall", "must be ERROR in a shard that stopped on "
                       "invalid specs (shard.invalid)", e.get("overall"))


def _check_shards(docs: Sequence[Mapping[str, Any]], paths: Sequence[str],
                  partial: bool = False) -> None:
    """Refuse a merge that would gate fewer specs than the sharded gate was given: a shard
    missing (unless ``partial``: a summary of some shards only) or given twice, shards of
    different spec lists or --shard N, a plain gate summary among shards, shards
    written by different causalfair versions, or shards some of which ran with --retrain
    (``shard.retrain``) and some without."""
    versions = {d.get("causalfair_version") for d in docs}
    if len(versions) > 1:
        shown = ", ".join(f"{p}: {d.get('causalfair_version') or 'unknown'}"
                          for d, p in zip(docs, paths, strict=True))
        raise InputError(f"the shards were written by different causalfair versions ({shown}); "
                         "run every shard with the same causalfair.")
    recs = [d.get("shard") for d in docs]
    if all(r is None for r in recs):
        return  # plain gate summaries (e.g. one gate.json for --markdown)
    for r, p in zip(recs, paths, strict=True):
        if r is None:
            raise InputError(f"{p}: not the output of `causalfair gate --shard K/N` (no 'shard' "
                             "record), merged with shards; merge the JSON of every shard of "
                             "one sharded gate.")
    first, first_path = recs[0], paths[0]
    for r, p in zip(recs, paths, strict=True):
        if (r["n"], r["specs"], r["specs_sha256"]) != (first["n"], first["specs"],
                                                         first["specs_sha256"]):
            raise InputError(
                f"{p} (shard {r['k']}/{r['n']} of {r['specs']} specs) and {first_path} (shard "
                f"{first['k']}/{first['n']} of {first['specs']} specs) come from different "
                "sharded gates (another --shard N, other specs, or a factory's module, spec or "
                "checkpoint files changed between the shards' runs); merge the "
                "shards of one run.")
    for r, p in zip(recs, paths, strict=True):
        if r.get("retrain", False) != first.get("retrain", False):
            (w, kw), (wo, kwo) = sorted([(p, r["k"]), (first_path, first["k"])],
                                        key=lambda x: x[0] != (p if r.get("retrain") else
                                                               first_path))
            raise InputError(
                f"{w} (shard {kw}/{r['n']}) ran with --retrain and {wo} (shard {kwo}/{r['n']}) "
                "without it: the merge would hold repairs of some shards' failing specs "
                "only; run every shard with the same --retrain.")
    seen: dict[int, str] = {}
    for r, p in zip(recs, paths, strict=True):
        if r["k"] in seen:
            raise InputError(f"shard {r['k']}/{r['n']} given twice: {seen[r['k']]} and {p}.")
        seen[r["k"]] = p
    n_missing = first["n"] - len(seen)  # (never a list of range(n): n is the input's)
    if n_missing and not partial:
        missing = list(itertools.islice((k for k in range(1, first["n"] + 1) if k not in seen), 10))
        shown = ", ".join(f"{k}/{first['n']}" for k in missing) + (", ..." * (n_missing > 10))
        raise InputError(f"shard{'s' * (n_missing > 1)} {shown} missing (got "
                         f"{len(seen)} of {first['n']}): the specs "
                         f"{'they hold' if n_missing > 1 else 'it holds'} "
                         "would not be gated; "
                         "merge the JSON of every shard (a shard that crashed or timed out "
                         "wrote none: rerun it), or pass --partial for a table of these "
                         "shards alone.")


# ------------------------------------------------------------------------- JSON summaries
def read_gate_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The gate JSON summary at ``path``, checked in full (:func:`check_gate_summary`)."""
    where = str(path)
    doc = read_json_file(path, where, InputError,
                         fix="a gate summary is a few KB per spec; split the gate in more shards")
    check_gate_summary(doc, where)
    return doc


def _check_plain(x: Any, where: str, field: str) -> None:
    """Every number in ``x`` finite, every string and key valid Unicode (no lone
    surrogate), walked without recursion."""
    stack = [(x, field)]
    while stack:
        v, f = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise _bad(where, f, "must be a finite number (JSON has no NaN or Infinity)", v)
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise _bad(where, f, "is not valid Unicode text (a lone surrogate)") from None
        elif isinstance(v, dict):
            for k, item in v.items():
                _check_plain(k, where, f"{f} key")
                stack.append((item, f"{f}.{k}"))
        elif isinstance(v, list):
            stack.extend((item, f"{f}[{i}]") for i, item in enumerate(v))


def _number(d: Mapping[str, Any], key: str, where: str, field: str, *, optional: bool) -> None:
    if key not in d:
        raise _bad(where, f"{field}.{key}", "missing" + ("; give a number or null" if optional
                                                         else "; give a number"))
    v = d[key]
    if v is None and optional:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        need = "a number or null" if optional else "a number"
        raise _bad(where, f"{field}.{key}", f"must be {need}", v)
    try:
        ok = math.isfinite(float(v))
    except OverflowError:
        ok = False
    if not ok:
        raise _bad(where, f"{field}.{key}", "must be a finite number", v)


def _text(d: Mapping[str, Any], key: str, where: str, field: str, *, optional: bool = False
          ) -> None:
    v = d.get(key)
    if optional and v is None:
        return
    if not isinstance(v, str) or not v.strip():
        raise _bad(where, f"{field}.{key}", "must be a non-empty string", v)


def _object(v: Any, where: str, field: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise _bad(where, field, "must be a JSON object", v)
    return v


def _verdict_block(block: Mapping[str, Any], where: str, field: str) -> None:
    """``overall`` and ``verdicts`` of a spec (or of its before/after audit)."""
    overall = block.get("overall")
    if overall not in STATUSES:
        raise _bad(where, f"{field}.overall", f"must be one of {', '.join(STATUSES)}", overall)
    verdicts = block.get("verdicts")
    if not isinstance(verdicts, list):
        raise _bad(where, f"{field}.verdicts", "must be a list of verdicts", verdicts)
    for j, v in enumerate(verdicts):
        vf = f"{field}.verdicts[{j}]"
        _object(v, where, vf)
        _text(v, "key", where, vf)
        if "pair" in v:  # the pair of groups it is about
            _text(v, "pair", where, vf)
        _number(v, "threshold", where, vf, optional=False)
        for key in _NUMBER_FIELDS:
            _number(v, key, where, vf, optional=True)
        if v.get("status") not in STATUSES:
            raise _bad(where, f"{vf}.status", f"must be one of {', '.join(STATUSES)}",
                       v.get("status"))
    statuses = [v["status"] for v in verdicts]
    if overall != overall_verdict(statuses):
        raise _bad(where, f"{field}.overall",
                   f"is {overall} but its verdicts give {overall_verdict(statuses)}")


def check_gate_summary(doc: Any, where: str) -> None:
    """Check a parsed gate JSON summary against the schema of ``GateResult.to_dict``."""
    check_document(doc, where, "gate summary", GATE_SCHEMA_VERSION, "causalfair gate --json FILE",
                   absent=GATE_SCHEMA_VERSION)  # none: written before versions were
    _check_plain(doc, where, "summary")
    specs = doc.get("specs")
    if not isinstance(specs, list):
        raise _bad(where, "specs", "must be a list of spec entries (not a gate summary?)", specs)
    if doc.get("inconclusive", "fail") not in ("pass", "fail"):
        raise _bad(where, "inconclusive", "must be 'pass' or 'fail'", doc.get("inconclusive"))
    if not isinstance(doc.get("accept_repaired", False), bool):
        raise _bad(where, "accept_repaired", "must be true or false", doc.get("accept_repaired"))
    _check_shard_record(doc, where)
    v = doc.get("causalfair_version")
    if v is not None and not isinstance(v, str):
        raise _bad(where, "causalfair_version", "must be a string", v)
    code = doc.get("exit_code", 0)
    if isinstance(code, bool) or code not in (0, 1, 2):
        raise _bad(where, "exit_code", "must be 0, 1 or 2", code)
    for i, e in enumerate(specs):
        field = f"specs[{i}]"
        _object(e, where, field)
        _text(e, "name", where, field)
        if e.get("overall") == ERROR:  # the reason, and no verdicts (a failed retrain's
            # audit is in ``before``, checked below)
            _text(e, "error", where, field)
            if e.get("verdicts") != []:
                raise _bad(where, f"{field}.verdicts", "must be [] for a spec that could not "
                           "be audited (overall ERROR)", e.get("verdicts"))
        else:
            _verdict_block(e, where, field)
        for key in ("spec", "checkpoint_sha256", "retrained_checkpoint", "report",
                    "retrain_error", "attribution"):
            v = e.get(key)
            if v is not None and not isinstance(v, str):
                raise _bad(where, f"{field}.{key}", "must be a string or null", v)
        for key in ("before", "after"):
            if key in e:
                _verdict_block(_object(e[key], where, f"{field}.{key}"), where, f"{field}.{key}")
        if "repair" in e and not isinstance(e["repair"], dict):
            raise _bad(where, f"{field}.repair", "must be a JSON object", e["repair"])
    if "exit_code" in doc and code != summary_exit_code(doc):
        raise _bad(where, "exit_code", f"is {code} but its specs give {summary_exit_code(doc)}")


def _failing(doc: Mapping[str, Any]) -> set[str]:
    """The verdicts that fail the gate of summary ``doc`` (INCONCLUSIVE per its mode)."""
    return failing(doc.get("inconclusive", "fail"))


def _repair_not_taken(doc: Mapping[str, Any], e: Mapping[str, Any]) -> bool:
    """Spec entry ``e`` was retrained, but its original checkpoint still fails the gate
    (the repair is a proposal until it is committed or accepted)."""
    before = (e.get("before") or {}).get("overall")
    return "after" in e and before in _failing(doc) and not doc.get("accept_repaired", False)


def spec_failure(doc: Mapping[str, Any], e: Mapping[str, Any]) -> str | None:
    """Why spec entry ``e`` of summary ``doc`` fails the gate, the rule of
    :attr:`causalfair.audit.GateResult.exit_code`: ERROR, FAIL, INCONCLUSIVE, or e.g.
    ``"FAIL before its repair"``; None when it passes."""
    if e["overall"] == ERROR or e["overall"] in _failing(doc):
        return e["overall"]
    if _repair_not_taken(doc, e):
        return f"{e['before']['overall']} before its repair"
    return None


def annotations(doc: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(level, spec file, name, message) of each spec of the gate summary ``doc`` (a
    gate's, or gate-merge's) that a GitHub annotation marks, in the summary's order: an
    ``error`` per spec that fails the gate (ERROR, FAIL, INCONCLUSIVE under
    ``--inconclusive fail``, a repair not taken: :func:`spec_failure`), a ``warning`` per
    INCONCLUSIVE counted as a pass. The message is an ERROR's error, else the verdict and
    each threshold that is not PASS, as the table prints them (six decimals; a number the
    JSON wrote as null reads ``nan``)."""
    out = []
    for e in doc["specs"]:
        spec = e.get("spec") or e["name"]
        if e["overall"] == ERROR:
            out.append(("error", spec, e["name"], e["error"]))
            continue
        held = _repair_not_taken(doc, e)  # the checkpoint under version control fails
        block = e["before"] if held else e
        status = block["overall"]
        if status not in (FAIL, INCONCLUSIVE):
            continue
        why = [_verdict_message(v) for v in block["verdicts"] if v["status"] != PASS]
        why += ([f"its repair: {e['overall']}; commit it or pass --accept-repaired"] if held
                else list((e.get("repair_check") or {}).get("problems") or []))
        out.append(("error" if status in _failing(doc) else "warning", spec, e["name"],
                    f"{status}: " + "; ".join(why)))
    return out


def _verdict_message(v: Mapping[str, Any]) -> str:
    """A summary's verdict as :meth:`causalfair.thresholds.Verdict.message` words it."""
    def num(x: Any) -> float:
        return math.nan if x is None else float(x)

    return Verdict(key=v["key"], threshold=float(v["threshold"]), estimate=num(v.get("estimate")),
                   lower=num(v.get("lower")), upper=num(v.get("upper")), status=v["status"],
                   pair=v.get("pair")).message(fixed_decimals=True)


def errors_in_words(specs: Sequence[Mapping[str, Any]]) -> str | None:
    """What the ERROR entries of a summary's ``specs`` are, in words: specs that could not
    be audited, and specs audited whose retrain failed (their entry keeps the audit in
    ``before``), e.g. ``"1 of 3 specs could not be audited; the retrain of 1 failed"``;
    None when there is none."""
    errors = [e for e in specs if e["overall"] == ERROR]
    if not errors:
        return None
    retrains = sum("before" in e for e in errors)
    n, lost = len(specs), len(errors) - retrains
    if not lost:
        return f"the retrain of {retrains} of {n} spec{'s' * (n != 1)} failed"
    return (f"{lost} of {n} spec{'s' * (n != 1)} could not be audited"
            + (f"; the retrain of {retrains} failed" if retrains else ""))


def summary_exit_code(doc: Mapping[str, Any]) -> int:
    """The gate's exit code over a (checked) summary's specs: 2 when a spec could not be
    audited, else 1 when one fails (:func:`spec_failure`)."""
    why = [spec_failure(doc, e) for e in doc["specs"]]
    return 2 if ERROR in why else 1 if any(why) else 0


def merge_summaries(docs: Sequence[Mapping[str, Any]], paths: Sequence[str], *,
                    partial: bool = False) -> dict[str, Any]:
    """One summary of checked shard summaries: every spec, in the order of the sharded
    gate's spec list (that of the unsharded gate; in the order given for summaries that
    are not shards), the gate's exit code over all of them. Shards must share the gate's
    settings and no spec, and, when they are `gate --shard` outputs, be every shard of one
    sharded gate
    (:func:`select_shard`); ``partial`` allows some of its shards only (their exit code
    is theirs, not the gate's)."""
    _check_shards(docs, paths, partial)
    modes = {(d.get("inconclusive", "fail"), d.get("accept_repaired", False)) for d in docs}
    if len(modes) > 1:
        raise InputError("the shards ran with different --inconclusive or "
                         "--accept-repaired settings; run them alike.")
    specs = [e for d in docs for e in d["specs"]]
    if all(d.get("shard") is not None for d in docs):  # the gate's own order: shard k's
        # i-th spec stood at position k - 1 + i * n of the list (select_shard)
        placed = [(d["shard"]["k"] - 1 + i * d["shard"]["n"], e) for d in docs
                  for i, e in enumerate(d["specs"])]
        stopped = [d["shard"] for d in docs if d["shard"].get("invalid") is not None]
        if stopped:  # the unsharded gate stops on its invalid specs and lists them alone:
            # those of the first stage that stopped a shard, at their places (stopped_shard)
            stage = min((r["invalid"]["stage"] for r in stopped), key=STAGES.index)
            placed = [(p, e) for d in docs if (d["shard"].get("invalid") or {}).get("stage")
                      == stage for p, e in zip(d["shard"]["invalid"]["at"], d["specs"],
                                               strict=True)]
        specs = [e for _, e in sorted(placed, key=lambda p: p[0])]
    seen: dict[str, str] = {}
    for d, path in zip(docs, paths, strict=True):
        for e in d["specs"]:
            if e["name"] in seen:
                raise InputError(f"spec {e['name'][:80]!r} appears in {seen[e['name']]}"
                                 f" and {path}; each spec belongs to one shard (or two spec "
                                 "files share this `name`: give each its own).")
            seen[e["name"]] = path
    merged = gate_summary(0, docs[0].get("inconclusive", "fail"),
                          docs[0].get("accept_repaired", False), specs)
    merged["exit_code"] = summary_exit_code(merged)
    return merged


# ------------------------------------------------------------------------------- JUnit
class _Refused(Exception):
    pass


def _no_dtd(*_: Any) -> None:
    raise _Refused


def read_junit(path: str | os.PathLike[str]) -> list[Any]:
    """The ``<testsuite>`` elements of the JUnit file at ``path`` (a ``<testsuites>``
    root, or one ``<testsuite>``), read safely: size checked against
    ``CAUSALFAIR_MAX_MEMORY`` before reading (:data:`JUNIT_BYTES_FACTOR` bytes per byte),
    a DTD or entity declaration refused (no entity expansion), and every suite's
    ``tests``/``failures``/``errors``/``skipped`` checked to be counts."""
    import pyexpat
    import xml.etree.ElementTree as ET

    where = str(path)
    data = read_file(path, where, InputError, check=lambda size: check_memory(
        JUNIT_BYTES_FACTOR * size, f"{where}: {format_bytes(size)} of JUnit XML",
        "split the gate in more shards"))
    guard = pyexpat.ParserCreate()
    guard.StartDoctypeDeclHandler = _no_dtd
    guard.EntityDeclHandler = _no_dtd
    guard.SetParamEntityParsing(pyexpat.XML_PARAM_ENTITY_PARSING_NEVER)
    try:
        guard.Parse(data, True)
        root = ET.fromstring(data)
    except _Refused:
        raise InputError(f"{where}: holds a DTD or entity declaration; a JUnit file has none "
                         "(refused, entities are never expanded).") from None
    except (pyexpat.ExpatError, ET.ParseError, ValueError) as exc:
        raise InputError(f"{where}: not a readable JUnit file ({str(exc)[:120]}).") from None
    if root.tag == "testsuite":
        suites = [root]
    elif root.tag == "testsuites":
        suites = list(root)
    else:
        raise _bad(where, "root element", "must be <testsuites> or <testsuite>", root.tag)
    for i, suite in enumerate(suites):
        if suite.tag != "testsuite":
            raise _bad(where, f"element {i + 1} of <testsuites>", "must be <testsuite>", suite.tag)
        for k in _COUNTS:
            v = suite.get(k, "0")
            if not (v.isascii() and v.isdigit() and len(v) <= 12):
                raise _bad(where, f"testsuite {suite.get('name', i + 1)!r} attribute {k}",
                           "must be a count (an integer >= 0)", v)
    return suites


def check_junit_matches(doc: Mapping[str, Any], suites: Sequence[Any],
                        junit_paths: Sequence[str]) -> None:
    """Refuse JUnit inputs that are not those of the merged JSON summaries (a shard's JUnit
    file missing or given twice, one of another run or of another gate): the merged JUnit
    file must be the unsharded gate's, so every spec of ``doc`` has exactly one suite and
    no other suite is there; a suite's ``<properties>`` (the numbers of its JSON entry)
    match the entry's; and CI reads the JUnit file, so every spec that counts against the
    gate (:func:`summary_exit_code`) has a failure or an error there (or a skipped test
    case, for an INCONCLUSIVE shown as skipped)."""
    where = ", ".join(str(p) for p in junit_paths)[:200]
    counts: dict[str, int] = {}
    by_name: dict[str, list[Any]] = {}
    for suite in suites:
        name = suite.get("name", "")
        by_name.setdefault(name, []).append(suite)
        counts[name] = counts.get(name, 0) + sum(int(suite.get(k, "0"))
                                                 for k in ("failures", "errors", "skipped"))
    entries = {e["name"]: e for e in doc["specs"]}
    for name in by_name:
        if name not in entries:
            raise InputError(f"--junit-in {where}: holds the test suite {name[:80]!r}, which no "
                             "merged JSON summary holds (a JUnit file of another gate or "
                             "run); give the JSON and the JUnit file of every shard, from "
                             "the same runs.")
    for e in doc["specs"]:
        found = by_name.get(e["name"], [])
        if len(found) > 1:
            raise InputError(f"--junit-in {where}: spec {e['name'][:80]!r} has {len(found)} "
                             "test suites (a shard's JUnit file given twice?); give each "
                             "shard's JUnit file once.")
        status = spec_failure(doc, e)
        if not found or (status is not None and counts[e["name"]] == 0):
            how = "lack it" if not found else "show it passing"
            fails = f"fails the gate ({status})" if status is not None else "is in the JSON"
            raise InputError(f"--junit-in {where}: spec {e['name'][:80]!r} {fails} but the "
                             f"JUnit files {how}; give the JSON and the JUnit file of every "
                             "shard, from the same runs.")
        props = found[0].find("properties")
        if props is not None:  # (a suite of an older causalfair, or an error's, has none;
            # a newer minor's may have more: the properties both know are compared)
            got = {p.get("name"): p.get("value") for p in props.findall("property")}
            for key, value in suite_properties(e):
                if key in got and got[key] != value:
                    raise InputError(f"--junit-in {where}: the test suite of spec "
                                     f"{e['name'][:80]!r} is not its JSON entry's (property "
                                     f"{_short(key)}: JSON {_short(value)}, JUnit "
                                     f"{_short(got[key])}): a JUnit file of another run; give "
                                     "the JSON and the JUnit file of every shard, from the same "
                                     "runs.")


def merged_suites(merged: Mapping[str, Any], docs: Sequence[Mapping[str, Any]],
                  suites: Sequence[Any], junit_paths: Sequence[str]) -> list[Any]:
    """The suites of the merged JUnit file: ``suites`` checked against every entry of the
    summaries ``docs`` (:func:`check_junit_matches`), then those of the specs of ``merged``
    alone (shards that stopped on invalid specs merge to their errors, as the unsharded
    gate's JUnit holds them alone: the other shards' suites are left out)."""
    check_junit_matches({**merged, "specs": [e for d in docs for e in d["specs"]]}, suites,
                        junit_paths)
    names = {e["name"] for e in merged["specs"]}
    return [s for s in suites if s.get("name", "") in names]


def merge_junit(suites: Sequence[Any], order: Sequence[str] = ()) -> str:
    """One JUnit document (UTF-8 text) holding ``suites``, with the totals on its root;
    the suites of the specs named in ``order`` (the merged summary's) in that order, any
    other after them."""
    import xml.etree.ElementTree as ET

    rank = {name: i for i, name in enumerate(order)}
    suites = sorted(suites, key=lambda s: rank.get(s.get("name", ""), len(rank)))
    root = ET.Element("testsuites", name="causalfair gate")
    totals = dict.fromkeys(("tests", "failures", "errors"), 0)  # (no skipped: Jenkins'
    # junit-10.xsd refuses it on <testsuites>; each <testsuite> keeps its own)
    seconds = 0.0
    for suite in suites:
        root.append(suite)
        for k in totals:
            totals[k] += int(suite.get(k, "0"))
        seconds += _seconds(suite.get("time"))
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{seconds:.4f}")
    return xml_document(root)


def _seconds(text: str | None) -> float:
    """A suite's ``time`` attribute in seconds; 0 when absent or not a finite number >= 0
    (a shard written by an older causalfair has none)."""
    try:
        t = float(text) if text else 0.0
    except ValueError:
        return 0.0
    return t if math.isfinite(t) and t >= 0 else 0.0


# ---------------------------------------------------------------------------- Markdown
def covered_shards(docs: Sequence[Mapping[str, Any]]) -> str | None:
    """Which shards of a sharded gate some checked shard summaries are, in words
    (``"shard 1/4"``, ``"shards 1, 3/4"``); None when they are every shard, or not
    `gate --shard` outputs (a plain gate summary)."""
    recs = [d.get("shard") for d in docs]
    if not recs or any(r is None for r in recs):
        return None
    ks, n = sorted(r["k"] for r in recs), recs[0]["n"]
    if len(ks) == n:
        return None
    return f"shard{'s' * (len(ks) > 1)} {', '.join(str(k) for k in ks)}/{n}"


def markdown(doc: Mapping[str, Any], shards: str | None = None) -> str:
    """The verdict table of a checked gate summary (one row per threshold per spec, and
    for a spec gated against a baseline the gate's ``why:`` row: its ``attribution`` line,
    why C moved; an ERROR row saying why for a spec not audited, or, after its audit's
    rows, for a spec whose retrain failed), for a GitHub job summary: names and keys are escaped
    (:func:`causalfair._markdown.md_escape`), so they render as the text they are.
    ``shards``: the shards the summary covers when it is some shards of a sharded gate
    only (:func:`covered_shards`); the heading then says so, e.g. ``shard 1/4: passed (15
    specs)``."""
    def num(x: Any) -> str:
        return "n/a" if x is None else f"{x:.4g}"

    icon = {PASS: "PASS", FAIL: "**FAIL**", INCONCLUSIVE: "*INCONCLUSIVE*", ERROR: "**ERROR**"}
    n, errors = len(doc["specs"]), errors_in_words(doc["specs"])
    head = (f"error (exit code 2): {errors}" if errors
            else f"{'passed' if doc['exit_code'] == 0 else 'failed'} ({n} spec{'' if n == 1 else 's'})")
    lines = [f"### causalfair gate{', ' + shards if shards else ''}: {head}", "",
             "| spec | threshold | estimate | CI | verdict |", "|---|---|---|---|---|"]
    if not doc["specs"]:  # a shard left with no spec: no empty table
        return lines[0] + f"\n\nNo spec to gate{' in this shard' if shards else ''}.\n"
    for e in doc["specs"]:
        name = md_escape(e["name"]) + (" (repaired)" if "after" in e else "")
        blocks = [(name, e["verdicts"])]
        if e["overall"] == ERROR and "before" in e:  # its retrain failed: the audit's rows
            blocks = [(name, e["before"].get("verdicts", []))]
        elif _repair_not_taken(doc, e):  # the original still fails the gate
            blocks.insert(0, (md_escape(e["name"]) + " (original; the repair is not taken)",
                              e["before"].get("verdicts", [])))
        for label, verdicts in blocks:
            for v in verdicts:
                ci = ("exact" if v.get("lower") == v.get("upper") == v.get("estimate")
                      else f"[{num(v.get('lower'))}, {num(v.get('upper'))}]")
                lines.append(f"| {label} | {md_escape(v['key'])} {threshold_op(v['key'])} "
                             f"{num(v['threshold'])}{md_escape(pair_note(v))} | "
                             f"{num(v.get('estimate'))} | {ci} | {icon[v['status']]} |")
        if e["overall"] == ERROR:
            what = "retrain error" if "before" in e else "not audited"
            lines.append(f"| {name} | {what}: {md_escape(e['error'][:300])} | | | "
                         f"{icon[ERROR]} |")
        elif not e["verdicts"]:
            lines.append(f"| {name} | (no thresholds) | | | {icon[e['overall']]} |")
        if e.get("attribution"):
            lines.append(f"| {name} | why: {md_escape(e['attribution'][:300])} | | | |")
    return "\n".join(lines) + "\n"

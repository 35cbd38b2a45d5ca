"""Re-running the audit an ``audit.json`` describes, and comparing its numbers with the
recorded ones (``causalfair audit --reproduce AUDIT_DIR``; docs/audit.md, "Reproducing an
audit").

An audit.json records what the audit read: the spec as parsed (``spec.parsed``) and the
file it came from (``spec.file``), the checkpoint's path and SHA-256
(``policy.checkpoint_sha256``; a baseline checkpoint's in ``extra.baseline``), every other
file it read (``inputs``: factory modules, tabular model, logs, VecNormalize statistics;
:func:`causalfair.audit.result.read_inputs`), the seeds, the versions and the CPU kernels
(``provenance``). :func:`reproduce` audits that spec again - its relative paths resolved
against the folder of ``spec.file``, or ``base_dir`` - after checking that every
checkpoint and every input is still the one recorded, and lists every number that differs
from the recorded one (none on the same versions and kernels: docs/limits.md,
"Reproducibility").
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from causalfair._io import to_jsonable
from causalfair._version import __version__
from causalfair.audit.result import (
    AuditResult,
    display_path,
    kernels,
    provenance,
    read_inputs,
    resolved_spec,
)
from causalfair.audit.run import audit
from causalfair.audit.spec import load_spec, read_spec_file
from causalfair.errors import InputError, SpecError
from causalfair.policies.checkpoint import file_sha256
from causalfair.report.export import read_audit
from causalfair.report.render import render_report

__all__ = ["Reproduction", "reproduce", "COMPARED"]

#: The blocks of audit.json whose every number a reproduction must give again (``figures``:
#: the figures' numbers, when audit.json was written with its report).
COMPARED = ("overall", "verdicts", "quantities", "decomposition", "benefit", "notions",
            "attribution", "selection", "groups", "pairs", "extra", "name", "spec",
            "policy", "seeds", "system", "figures")
#: Display paths (relative to the working directory of the run, so another folder with
#: --base-dir writes them otherwise): not compared; their files are checked by SHA-256.
_PATHS = frozenset({"spec.file", "spec.resolved.checkpoint", "spec.resolved.logs",
                    "policy.checkpoint"})
#: Blocks whose keys are the spec's rows, not the format's: a verdict (keyed by its
#: threshold) the recorded audit lacks was removed from it, never written by a later
#: causalfair; keys inside a verdict of another version's audit stay notes (:func:`_diff`'s
#: ``added``).
_ROWS = frozenset({"verdicts"})
_SHOWN = 10  # differences listed in the summary
_DATA_URI = re.compile(rb"data:image/png;base64,[A-Za-z0-9+/=]+")
_RETRAIN_FAILED = "The gate's verdict is ERROR: this spec's retrain failed"


@dataclass
class Reproduction:
    """The audit run again (``result``) and how it differs from the recorded one:
    ``differences`` (``"quantities.C.estimate: recorded 0.1, now 0.2"``, every number or
    value of :data:`COMPARED` that is not the same; ``"report.md: line 12: ..."``, a
    report file beside audit.json that is not the one rendered from the reproduction),
    ``notes`` (versions or kernels that differ from the recorded ones, which may move the
    last bits; what could not be checked), ``checked`` (what was checked, one line
    each)."""

    source: Path
    result: AuditResult
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        head = (f"reproduced {self.source}: every number identical (bit for bit)"
                if self.identical else
                f"reproduced {self.source}: {len(self.differences)} value(s) or file(s) differ "
                "from the recorded audit")
        lines = [head, *(f"  {d}" for d in self.differences[:_SHOWN])]
        if len(self.differences) > _SHOWN:
            lines.append(f"  ... and {len(self.differences) - _SHOWN} more")
        lines += [f"  checked: {c}" for c in self.checked]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def reproduce(path: str | os.PathLike[str], *,
              base_dir: str | os.PathLike[str] | None = None,
              baseline: str | None = None) -> Reproduction:
    """Audit again the spec recorded in the audit.json at ``path`` (an audit folder or the
    file) and compare the numbers. ``base_dir``: the folder the spec's relative paths
    (checkpoint, factory module, tabular model, logs) start from; default the folder of
    the recorded ``spec.file`` (as given on the command line of the audit, so run from the
    same working directory, or give ``base_dir``). ``baseline``: the policy an audit run
    with ``--baseline POLICY`` compared with (audit.json names it in ``extra.baseline``,
    not in the spec). A checkpoint or an input (``inputs``) that is not the recorded one
    raises :class:`InputError` before any audit; an audit.json without ``inputs`` (an
    older one) checks its checkpoints only."""
    doc = read_audit(path)
    src = Path(path) / "audit.json" if Path(path).is_dir() else Path(path)
    block = doc.get("spec") or {}
    parsed = block.get("parsed")
    if not isinstance(parsed, Mapping):
        raise InputError(f"{src}: spec.parsed: missing; this audit.json does not record its "
                         "spec, so it cannot be reproduced: audit its spec file instead.")
    if "retrained_from" in (doc.get("extra") or {}):
        raise InputError(f"{src}: extra.retrained_from: this is the audit of a checkpoint "
                         "`gate --retrain` wrote, not of its spec's policy; reproduce it by "
                         "auditing that checkpoint (the spec with [policy] checkpoint = "
                         f"{(doc.get('policy') or {}).get('checkpoint')!r}).")
    base = Path(base_dir) if base_dir is not None else _spec_folder(block.get("file"), src)
    checked: list[str] = []
    notes: list[str] = []
    spec_file = _check_spec_file(block.get("file"), parsed, base_dir, src)
    try:
        spec = load_spec(parsed, base_dir=base)
    except SpecError as exc:
        raise InputError(f"{src}: spec.parsed: the recorded spec does not load here "
                         f"({str(exc).rstrip('.')}); its relative paths start from the "
                         f"folder {str(display_path(base))!r}: run "
                         "--reproduce where the audit ran, or give --base-dir DIR.") from None
    if spec_file is not None:  # the report quotes the file, as the audit's did
        spec = replace(spec, path=spec_file.resolve())
        checked.append(f"spec file {display_path(spec_file)} (the recorded spec.parsed)")
    else:
        notes.append((f"spec.file {block.get('file')!r} is not here" if block.get("file")
                      else "audit.json names no spec file (a spec given in Python)")
                     + ": the recorded spec.parsed was audited without comparing it with "
                     "its file")
    _check_overrides(block.get("resolved"), spec, src)
    recorded = (doc.get("policy") or {}).get("checkpoint_sha256")
    _check_sha(spec.checkpoint, recorded, src, "policy.checkpoint_sha256", checked)
    compared = (doc.get("extra") or {}).get("baseline") or {}
    if compared and "baseline" not in parsed and baseline is None:
        raise InputError(f"{src}: extra.baseline: the audit compared with a baseline given on "
                         f"its command line ({compared.get('policy')!r}), not in its spec; give "
                         "it again: `causalfair audit --reproduce AUDIT --baseline POLICY`.")
    if baseline is not None and (not compared or "baseline" in parsed):
        raise InputError(f"--baseline: {src} records no baseline given on the command line; "
                         "reproduce it without --baseline.")
    given = Path(baseline) if baseline is not None and Path(baseline).is_file() else None
    _check_sha(spec.baseline_checkpoint or given, compared.get("checkpoint_sha256"), src,
               "extra.baseline.checkpoint_sha256", checked)
    if inputs := _check_inputs(doc.get("inputs"), spec, src):
        checked.append(f"inputs (SHA-256, or package version): {', '.join(inputs)}")
    result = audit(spec, baseline=baseline, baseline_where="--baseline")
    files: dict[str, bytes] = {}
    if "figures" in doc:  # written with its report: its figures' numbers, and its files
        files = _render(result, doc)
        now = json.loads(files["audit.json"])
    else:
        now = json.loads(json.dumps(to_jsonable(result.to_dict()), allow_nan=False))
    differences: list[str] = _unrecorded_inputs(doc.get("inputs"), now.get("inputs"))
    # keys a later causalfair writes that an earlier one did not are notes (the format grows
    # by keys); from the same version a key the record lacks was deleted from it (a pair's
    # or a group's row, a quantity): a difference
    later = (doc.get("provenance") or {}).get("causalfair") not in (None, __version__)
    count, added = [0], ([] if later else None)
    blocks = [k for k in COMPARED if k in doc or k not in ("figures", "system", "name",
                                                             "spec", "policy", "seeds")]
    for key in blocks:
        _diff(_by_key(doc.get(key)) if key == "verdicts" else doc.get(key),
              _by_key(now.get(key)) if key == "verdicts" else now.get(key), key, differences,
              count=count, added=added)
    if added:
        notes.append(f"not in the recorded audit, so not compared (written by a later "
                     f"causalfair): {', '.join(added[:10])}"
                     + (f" and {len(added) - 10} more" if len(added) > 10 else ""))
    checked.append(f"{count[0]} values of audit.json's {', '.join(b for b in blocks if b in doc)}")
    notes += _notes(doc.get("provenance") or {})
    if files:
        _compare_report(src.parent, files, doc, now, differences, checked, notes)
    return Reproduction(src, result, differences, notes, checked)


def _check_spec_file(file: Any, parsed: Mapping[str, Any], base_dir: Any,
                     src: Path) -> Path | None:
    """The spec file audit.json names (``spec.file``; under ``base_dir`` when given)
    parses to the recorded ``spec.parsed``, else one InputError naming the file, the first
    key that differs and both values: a spec edited after the audit, or audit.json's
    record of it edited (its thresholds loosened, say, which the re-run would follow).
    Returns the file, or None when it is not here (nothing to compare)."""
    if not isinstance(file, str):
        return None
    tries = ([Path(base_dir) / Path(file).name] if base_dir is not None else []) + [Path(file)]
    path = next((p for p in tries if p.is_file()), None)
    if path is None:
        return None
    raw = read_spec_file(path)
    out: list[str] = []
    _diff(parsed, json.loads(json.dumps(to_jsonable(dict(raw)))), "spec.parsed", out,
          now_word="the file gives")
    if out:
        more = f" (and {len(out) - 1} more)" if len(out) > 1 else ""
        raise InputError(f"{display_path(path)}: {out[0]}{more}: the spec is not the one "
                         f"{src} recorded: it changed after the audit, or audit.json's "
                         "spec.parsed was edited; reproduce with the audited spec.")
    return path


def _render(result: AuditResult, doc: Mapping[str, Any]) -> dict[str, bytes]:
    """The report folder of the reproduction, as the audit rendered it: its wall-clock
    ``seconds`` and its ``provenance`` (the machine, versions and date of the run, which
    are not results: :func:`_notes` says where they differ) set to the recorded ones."""
    shown = copy.copy(result)
    if isinstance(doc.get("seconds"), (int, float)):
        shown.seconds = doc["seconds"]
    if isinstance(doc.get("provenance"), Mapping):
        shown.recorded_provenance = dict(doc["provenance"])
    return render_report(shown)


def _compare_report(folder: Path, files: Mapping[str, bytes], doc: Mapping[str, Any],
                    now: Mapping[str, Any], differences: list[str], checked: list[str],
                    notes: list[str]) -> None:
    """Each report file beside audit.json (report.md, report.html, card.md, the exports,
    the figures) against the one rendered from the reproduction: report.html's embedded
    PNGs aside, byte for byte; the figures' PNGs too unless matplotlib's version differs
    from the recorded one (its rasterizer may move pixels; their numbers are compared in
    audit.json's ``figures``). A file another causalfair version wrote, which may be worded
    otherwise, still differs (tampering cannot hide behind an edited version), saying so."""
    if not any((folder / name).is_file() for name in files if name != "audit.json"):
        notes.append("no report file beside audit.json (report.md, report.html, card.md, "
                     "the exports, the figures): only audit.json's numbers were compared")
        return
    if (doc.get("spec") or {}).get("file") != (now.get("spec") or {}).get("file"):
        notes.append("report files not compared: the audit ran from another working "
                     "directory (spec.file differs), so the paths they quote differ; run "
                     "--reproduce where the audit ran to compare them")
        return
    head = ""
    if (folder / "report.md").is_file():
        with open(folder / "report.md", "rb") as fh:  # the error opens the report: its head only
            head = fh.read(1 << 16).decode("utf-8", "replace")
    if _RETRAIN_FAILED in head:
        notes.append("report files not compared: the gate wrote this report of a spec whose "
                     "retrain failed (it opens with that error)")
        return
    same_mpl = _matplotlib(doc) == _matplotlib({"provenance": provenance()})
    wrote = (doc.get("provenance") or {}).get("causalfair")
    same = 0
    for name, body in files.items():
        path = folder / name
        if name == "audit.json":
            continue
        if not path.is_file():
            notes.append(f"{name}: not in the audit folder (not compared)")
            continue
        with open(path, "rb") as fh:  # enough to tell it from body: a huge file is not read
            old = fh.read(len(body) + (1 << 20))
        if old == body:
            same += 1
            continue
        if name.endswith(".png") or (name == "report.html" and _DATA_URI.sub(b"", old)
                                     == _DATA_URI.sub(b"", body)):
            if same_mpl:
                differences.append(f"{name}: its figures are not the ones drawn from the "
                                   "reproduction")
            else:
                notes.append(f"{name}: its figures differ from the ones drawn here "
                             "(another matplotlib); their numbers are compared in figures")
            continue
        why = (f" (written by causalfair {wrote}, rendered here by {__version__}, which may "
               "word it otherwise)" if wrote not in (None, __version__) else "")
        differences.append(f"{name}: {_first_line_diff(old, body)}{why}")
    checked.append(f"{same} of {len(files) - 1} report files identical to the report "
                   "rendered from the reproduction" + (" (figures aside)" if not same_mpl
                                                        else ""))


def _matplotlib(doc: Mapping[str, Any]) -> Any:
    return ((doc.get("provenance") or {}).get("dependencies") or {}).get("matplotlib")


def _first_line_diff(old: bytes, new: bytes) -> str:
    a = old.decode("utf-8", errors="replace").splitlines()
    b = new.decode("utf-8", errors="replace").splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"line {i + 1}: recorded {_short(_around(x, y))}, now {_short(_around(y, x))}"
    return f"{len(a)} lines recorded, {len(b)} now"


def _around(x: str, y: str) -> str:
    """``x`` from a little before where it first differs from ``y``."""
    i = next((k for k, (p, q) in enumerate(zip(x, y, strict=False)) if p != q),
             min(len(x), len(y)))
    return x[max(0, i - 20):]


def _spec_folder(file: Any, src: Path) -> Path:
    if not isinstance(file, str) or not Path(file).is_file():
        raise InputError(f"{src}: spec.file: {file!r} is not a file here (the audit ran from "
                         "another folder); give the folder the spec's relative paths start "
                         "from (`--base-dir DIR`, base_dir=).")
    return Path(file).resolve().parent


def _check_sha(path: Path | None, recorded: Any, src: Path, field_: str,
               checked: list[str] | None = None) -> None:
    if path is None or not isinstance(recorded, str):
        return
    try:
        now = file_sha256(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__}); "
                         f"{src} audited a file with SHA-256 {recorded}.") from None
    if now != recorded:
        raise InputError(f"{path}: SHA-256 {now} is not the {recorded} that {src} recorded "
                         f"({field_}): the checkpoint changed after the audit; reproduce with "
                         "the audited file.")
    if checked is not None:
        checked.append(f"checkpoint {display_path(path)} (SHA-256 {now}, {field_})")


def _check_inputs(recorded: Any, spec: Any, src: Path) -> list[str]:
    """Every input audit.json records (``inputs``) is the one the reproduction reads: the
    same SHA-256, or the same installed package version; else one InputError naming the
    role, the file and both digests (or versions). Returns each checked as "ROLE PATH"."""
    if not isinstance(recorded, list):
        return []  # an audit.json before inputs were recorded: its checkpoints only
    try:
        now = {e["role"]: e for e in read_inputs(spec)}
    except OSError as exc:
        raise InputError(f"{exc.filename}: cannot be read ({exc.strerror or type(exc).__name__})"
                         f"; {src} recorded its SHA-256 (inputs).") from None
    for old in recorded:
        if not isinstance(old, Mapping) or not isinstance(old.get("role"), str):
            continue
        if old["role"].endswith(".read"):
            _check_read(old, spec, src)
            continue
        role, new = old["role"], now.get(old["role"], {})
        what = f"inputs: {role}" + (f", module {old['module']}" if old.get("module") else "")
        if "package" in old or "package" in new:
            was = f"{old.get('package')} {old.get('version')}" if "package" in old \
                else f"the file {old.get('path')}"
            here = f"{new.get('package')} {new.get('version')}" if "package" in new \
                else f"the file {new.get('path')}" if new else "nothing"
            if was != here:
                raise InputError(f"{src}: {what}: recorded {was}, here {here}: the input "
                                 "changed after the audit; reproduce with the audited one.")
        elif new.get("sha256") != old.get("sha256"):
            path = new.get("path") or old.get("path")
            digest = f"SHA-256 {new['sha256']}" if new else "cannot be found"
            raise InputError(f"{path}: {digest} is not the {old.get('sha256')} that {src} "
                             f"recorded ({what}): the file changed after the audit; "
                             "reproduce with the audited file.")
    return [f"{o['role']} {o.get('path') or o.get('package')}" for o in recorded
            if isinstance(o, Mapping) and isinstance(o.get("role"), str)]


def _unrecorded_inputs(recorded: Any, now: Any) -> list[str]:
    """A file the reproduction read that audit.json's ``inputs`` does not record (an entry
    deleted, so its file went unchecked), one difference each; an audit.json without
    ``inputs`` (an older one) records none and is not held to them. The files a factory
    read (``ROLE.read``) aside: what an import read is seen only in the process that
    first imported the module, so an honest audit may record fewer than a fresh one."""
    if not isinstance(recorded, list):
        return []

    def key(e: Any) -> Any:
        return (e.get("role"), e.get("module"), e.get("sha256"), e.get("package"),
                e.get("version")) if isinstance(e, Mapping) else None

    have = {key(e) for e in recorded}
    return [f"inputs: the audit read {e.get('path') or e.get('package')} ({e.get('role')}"
            + (f", module {e['module']}" if e.get("module") else "")
            + "), which audit.json does not record"
            for e in now or [] if key(e) not in have
            and not str(e.get("role", "")).endswith(".read")]


def _check_overrides(resolved: Any, spec: Any, src: Path) -> None:
    """The system and the policy the audit ran with are the spec's own: a ``system=`` or
    ``policy=`` passed to ``cf.audit`` shows in ``spec.resolved`` but not in
    ``spec.parsed``, which the reproduction re-runs; such an audit is refused in one
    line before it runs (it reported differing numbers)."""
    if not isinstance(resolved, Mapping):
        return  # an audit.json before spec.resolved
    now = json.loads(json.dumps(to_jsonable(resolved_spec(spec))))
    for key, what in (("system", "system"), ("system_params", "system"),
                      ("policy_factory", "policy"), ("policy_params", "policy"),
                      ("builtin", "policy")):
        if key in resolved and resolved[key] != now.get(key):
            raise InputError(
                f"{src}: spec.resolved.{key}: recorded {json.dumps(resolved[key])[:120]}, the "
                f"spec gives {json.dumps(now.get(key))[:120]}: the audit ran with a {what} "
                f"passed to cf.audit({what}=...), which its spec does not describe, so it "
                f"cannot be re-run from the spec; write that {what} into the spec ([{what}] "
                "keys or a factory) and audit again.")


def _check_read(old: Mapping[str, Any], spec: Any, src: Path) -> None:
    """A file a factory read (``ROLE.read``, :func:`causalfair.audit.result.read_inputs`):
    the recorded path (relative to the spec's folder, or absolute) must hold the recorded
    SHA-256."""
    rel = Path(str(old.get("path", "")))
    path = rel if rel.is_absolute() else Path(spec.base_dir or ".") / rel
    what = f"inputs: {old['role']}, module {old.get('module')}"
    shown = display_path(path)
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise InputError(f"{shown}: cannot be read ({exc.strerror or type(exc).__name__}); "
                         f"{src} recorded its SHA-256 {old.get('sha256')} ({what}): the "
                         "audited module read it; reproduce where that file is.") from None
    if digest != old.get("sha256"):
        raise InputError(f"{shown}: SHA-256 {digest} is not the {old.get('sha256')} that {src} "
                         f"recorded ({what}): the file changed after the audit; reproduce "
                         "with the audited file.")


def _by_key(verdicts: Any) -> Any:
    """Verdicts by their key (and pair): their order follows the spec's thresholds, which
    a tool that sorts JSON keys (``jq -S``) reorders in ``spec.parsed``."""
    if not isinstance(verdicts, list) or not all(isinstance(v, Mapping) for v in verdicts):
        return verdicts
    keyed = {f"{v.get('key')}" + (f"[{v['pair']}]" if v.get("pair") else ""): v
             for v in verdicts}
    return keyed if len(keyed) == len(verdicts) else verdicts


def _diff(old: Any, new: Any, where: str, out: list[str], *, now_word: str = "now",
          count: list[int] | None = None, added: list[str] | None = None) -> None:
    """Append to ``out`` every place where ``new`` is not ``old`` (floats compared bit
    for bit; the display paths of :data:`_PATHS` aside); ``count[0]`` counts the values
    compared. With ``added``, a key that ``new`` has and ``old`` lacks is no difference
    but goes there: a later causalfair writes keys an earlier one did not (the format
    grows by keys, docs/schema/README.md), and a recorded audit still reproduces."""
    if where in _PATHS:
        return
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for k in dict.fromkeys([*old, *new]):
            if added is not None and k not in old and where not in _ROWS:
                added.append(f"{where}.{k}")
                continue
            _diff(old.get(k), new.get(k), f"{where}.{k}", out, now_word=now_word, count=count,
                  added=added)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{where}[{i}]", out, now_word=now_word, count=count, added=added)
    else:
        if count is not None:
            count[0] += 1
        if not _same(old, new):
            out.append(f"{where}: recorded {_short(old)}, {now_word} {_short(new)}")


def _same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` (both read back from JSON) are the same value: of one type, floats
    bit for bit (``-0.0`` is not ``0.0``)."""
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)
    return type(a) is type(b) and a == b


def _short(x: Any) -> str:
    text = repr(x) if not isinstance(x, (dict, list)) else f"{type(x).__name__} of {len(x)}"
    return text if len(text) <= 60 else text[:57] + "..."


def _notes(prov: Mapping[str, Any]) -> list[str]:
    """What differs from the recorded audit's environment and may move the last bits."""
    notes = []
    if prov.get("causalfair") not in (None, __version__):
        notes.append(f"recorded with causalfair {prov['causalfair']}, reproduced with "
                     f"{__version__}")
    here = provenance()
    for k in ("python", "platform"):
        if prov.get(k) not in (None, here[k]):
            notes.append(f"{k}: recorded {prov[k]!r}, here {here[k]!r}")
    deps = prov.get("dependencies") if isinstance(prov.get("dependencies"), Mapping) else {}
    if moved := [f"{k}: recorded {v!r}, here {here['dependencies'].get(k)!r}"
                 for k, v in deps.items() if here["dependencies"].get(k, v) != v]:
        notes.append("dependencies differ (" + "; ".join(moved) + ")")
    mine = kernels()
    for k, v in (prov.get("kernels") or {}).items():
        if mine.get(k) != v:
            notes.append(f"kernel {k}: recorded {v}, here {mine.get(k)} (the last bits may "
                         "differ: docs/limits.md, \"Reproducibility\")")
    return notes

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

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causalfair._io import to_jsonable
from causalfair._version import __version__
from causalfair.audit.result import AuditResult, display_path, kernels, read_inputs, resolved_spec
from causalfair.audit.run import audit
from causalfair.audit.spec import load_spec
from causalfair.errors import InputError
from causalfair.policies.checkpoint import file_sha256
from causalfair.report.export import read_audit

__all__ = ["Reproduction", "reproduce", "COMPARED"]

#: The blocks of audit.json whose every number a reproduction must give again.
COMPARED = ("overall", "verdicts", "quantities", "decomposition", "benefit", "notions",
            "attribution", "selection", "groups", "pairs", "extra")
_SHOWN = 10  # differences listed in the summary


@dataclass
class Reproduction:
    """The audit run again (``result``) and how it differs from the recorded one:
    ``differences`` (``"quantities.C.estimate: recorded 0.1, now 0.2"``, every number or
    value of :data:`COMPARED` that is not the same), ``notes`` (versions or kernels that
    differ from the recorded ones, which may move the last bits)."""

    source: Path
    result: AuditResult
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        head = (f"reproduced {self.source}: every number identical (bit for bit)"
                if self.identical else
                f"reproduced {self.source}: {len(self.differences)} value(s) differ from the "
                "recorded audit")
        lines = [head, *(f"  {d}" for d in self.differences[:_SHOWN])]
        if len(self.differences) > _SHOWN:
            lines.append(f"  ... and {len(self.differences) - _SHOWN} more")
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
    spec = load_spec(parsed, base_dir=base)
    _check_overrides(block.get("resolved"), spec, src)
    recorded = (doc.get("policy") or {}).get("checkpoint_sha256")
    _check_sha(spec.checkpoint, recorded, src, "policy.checkpoint_sha256")
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
               "extra.baseline.checkpoint_sha256")
    _check_inputs(doc.get("inputs"), spec, src)
    result = audit(spec, baseline=baseline, baseline_where="--baseline")
    now = json.loads(json.dumps(to_jsonable(result.to_dict()), allow_nan=False))  # as written
    differences: list[str] = []
    for key in COMPARED:
        _diff(_by_key(doc.get(key)) if key == "verdicts" else doc.get(key),
              _by_key(now.get(key)) if key == "verdicts" else now.get(key), key, differences)
    return Reproduction(src, result, differences, _notes(doc.get("provenance") or {}))


def _spec_folder(file: Any, src: Path) -> Path:
    if not isinstance(file, str) or not Path(file).is_file():
        raise InputError(f"{src}: spec.file: {file!r} is not a file here (the audit ran from "
                         "another folder); give the folder the spec's relative paths start "
                         "from (`--base-dir DIR`, base_dir=).")
    return Path(file).resolve().parent


def _check_sha(path: Path | None, recorded: Any, src: Path, field_: str) -> None:
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


def _check_inputs(recorded: Any, spec: Any, src: Path) -> None:
    """Every input audit.json records (``inputs``) is the one the reproduction reads: the
    same SHA-256, or the same installed package version; else one InputError naming the
    role, the file and both digests (or versions)."""
    if not isinstance(recorded, list):
        return  # an audit.json before inputs were recorded: its checkpoints only
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


def _diff(old: Any, new: Any, where: str, out: list[str]) -> None:
    """Append to ``out`` every place where ``new`` is not ``old`` (floats compared bit
    for bit)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for k in dict.fromkeys([*old, *new]):
            _diff(old.get(k), new.get(k), f"{where}.{k}", out)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{where}[{i}]", out)
    elif not _same(old, new):
        out.append(f"{where}: recorded {_short(old)}, now {_short(new)}")


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
    mine = kernels()
    for k, v in (prov.get("kernels") or {}).items():
        if mine.get(k) != v:
            notes.append(f"kernel {k}: recorded {v}, here {mine.get(k)} (the last bits may "
                         "differ: docs/limits.md, \"Reproducibility\")")
    return notes

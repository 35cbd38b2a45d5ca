"""Exports of an audit document (``audit.json``) for the people and rules that read audits
next, computed from the document alone (nothing is recomputed; every number is a value
of audit.json, or a ratio of two of them):

- ``annex-iv.md``: a skeleton of the technical documentation of the EU AI Act's Annex IV,
  with what the audit knows filled in (versions, checksums, metrics with their
  intervals, thresholds and verdicts, assumptions, seeds) and marked placeholders
  (:data:`PLACEHOLDER`) for what only the deployer can write (intended purpose, human
  oversight, monitoring, ...). A skeleton to complete, not legal advice.
- ``ll144.md`` and ``ll144.csv``: a bias-audit table in the style of New York City's
  Local Law 144 rules: per step and over the episode, per non-baseline action and group,
  the selection rate (share of the group given the action), the impact ratio (the rate
  over the highest group's rate) and the counts behind them (from ``selection`` in
  audit.json: observed counts for a log audit, simulated units for a Monte Carlo audit; a
  model audit has population shares and no counts).

The card's ``model-index`` block (Hugging Face card metadata) is written with card.md
(:func:`causalfair.report.card.model_index`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causalfair._io import (
    AUDIT_SCHEMA_VERSION,
    atomic_write_text,
    beside,
    check_document,
    csv_text,
)
from causalfair._safe_read import not_a_file, read_json_file
from causalfair.errors import InputError, OutputError
from causalfair.report.card import audited_on, spec_sha256
from causalfair.report.explain import (
    assumptions,
    change_lines,
    doc_gain_unit,
    doc_glossary,
    doc_pair,
    md_code,
    md_escape,
    pairs_lines,
    threshold_label,
    verdict_has_interval,
)
from causalfair.thresholds import pair_note

__all__ = ["EXPORTS", "PLACEHOLDER", "read_audit", "annex_iv", "ll144_rows", "ll144_markdown",
           "ll144_csv", "csv_text", "export_files", "report_exports", "links_markdown",
           "write_exports"]

#: Export kind -> the files it writes.
EXPORTS: dict[str, tuple[str, ...]] = {"annex-iv": ("annex-iv.md",),
                                       "ll144": ("ll144.md", "ll144.csv")}
#: The marker of what the deployer must write (``PLACEHOLDER.format(what)``).
PLACEHOLDER = "[TO BE COMPLETED BY THE DEPLOYER: {}]"
LL144_COLUMNS = ("step", "action", "group", "n", "selected", "population_share",
                 "selection_rate", "impact_ratio", "highest_rate_group")


def read_audit(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The audit document at ``path`` (an audit folder holding audit.json, or the file),
    read within the limits of docs/limits.md; an :class:`InputError` naming the file and
    the field when it is not an audit.json of schema 1.x."""
    p = Path(path)
    if p.is_dir():
        p = p / "audit.json"
    if not p.is_file():
        if (err := p.with_name("error.json")).is_file():  # a gate's ERROR report folder
            raise InputError(f"{err}: {_gate_error(err)}; this folder holds no audit.json, "
                             "so there is nothing to reproduce or export: fix the error and "
                             "audit the spec again.")
        raise InputError(f"{p}: {not_a_file(p)}; give an audit folder (written by `causalfair "
                         "audit --out DIR`) or its audit.json.")
    doc = read_json_file(p, str(p), InputError, fix="an audit.json is a few MB at most")
    check_document(doc, str(p), "audit.json", AUDIT_SCHEMA_VERSION, "causalfair audit SPEC --out DIR")
    if "decomposition" not in doc or "quantities" not in doc:
        raise InputError(f"{p}: not an audit.json (no decomposition or quantities).")
    _check_core(doc, str(p))
    return doc


def _gate_error(path: Path) -> str:
    """What a gate's error.json (:func:`causalfair.report.render.write_error_report`) says,
    in a few words."""
    try:
        with open(path, "rb") as fh:  # its first 100 kB: the error is at the top
            doc = json.loads(fh.read(100_000).decode("utf-8"))
    except (OSError, ValueError):
        doc = None
    if not isinstance(doc, dict) or not doc.get("spec") or not doc.get("error"):
        return "a gate's error report"
    return (f"the gate could not audit spec {doc.get('spec')} "
            f"({str(doc.get('error', '')).rstrip('.')[:300]})")


#: What the exports read of an audit.json (the stable core of docs/schema/audit.schema.json):
#: path -> (accepted types, what it is).
_CORE: dict[tuple[Any, ...], tuple[tuple[type, ...], str]] = {
    ("name",): ((str,), "a string"),
    ("overall",): ((str,), "a string"),
    ("verdicts",): ((list,), "a list"),
    ("quantities",): ((dict,), "an object"),
    ("decomposition", "engine"): ((str,), "a string"),
    ("decomposition", "horizon"): ((int,), "an integer"),
    ("decomposition", "groups"): ((dict,), "an object (group -> values)"),
}
_VERDICT_KEYS = ("key", "threshold", "estimate", "lower", "upper", "status")
#: Optional blocks: an object (or null) when present, holding these keys.
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "spec": (), "policy": (), "seeds": (), "provenance": (), "system": (), "benefit": (),
    "groups": (), "selection": ("groups", "actions", "steps", "rate", "rate_overall"),
    "attribution": ("policy", "baseline", "total", "largest"), "pairs": ("worst", "values"),
}


def _check_core(doc: Mapping[str, Any], where: str) -> None:
    """An :class:`InputError` naming the first field of the stable core the exports read
    that is missing or of the wrong type (a hand-edited or truncated audit.json)."""
    def fail(path: str, what: str) -> InputError:
        return InputError(f"{where}: {path}: missing or not {what}; this is not an audit.json "
                          "causalfair wrote (docs/schema/audit.schema.json). Re-run the audit "
                          "(`causalfair audit SPEC --out DIR`).")

    for path, (types, what) in _CORE.items():
        node: Any = doc
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(node, types) or isinstance(node, bool):
            raise fail(".".join(path), what)
    for key, inner in _OPTIONAL.items():
        block = doc.get(key)
        if block is not None and not isinstance(block, Mapping):
            raise fail(key, "an object")
        if block and any(k not in block for k in inner):
            raise fail(key, "an object with " + ", ".join(inner))
    for k, q in doc["quantities"].items():
        if not isinstance(q, Mapping) or not all(
                isinstance(q.get(f), (int, float, type(None))) for f in
                ("estimate", "ci_lower", "ci_upper", "se")) or q.get("estimate") is None:
            raise fail(f"quantities.{k}", "an object with a numeric estimate, ci_lower, "
                                          "ci_upper and se")
    for i, v in enumerate(doc["verdicts"]):
        if not isinstance(v, Mapping) or any(f not in v for f in _VERDICT_KEYS):
            raise fail(f"verdicts[{i}]", "an object with " + ", ".join(_VERDICT_KEYS))


def _num(x: Any, digits: int = 6) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows])


INPUT_HEADER = ["role", "path or package", "SHA-256 or version"]


def input_rows(doc: Mapping[str, Any]) -> list[list[Any]]:
    """audit.json's ``inputs`` (every file the audit read besides its checkpoints; see
    :func:`causalfair.audit.result.read_inputs`) as rows under :data:`INPUT_HEADER`: a
    hashed file is ``[role, path, sha256]``, an installed package's module is
    ``[role, "module (package)", "version V"]``; ``[]`` when the audit read none."""
    rows: list[list[Any]] = []
    for e in doc.get("inputs") or ():
        if e.get("package") is not None:
            rows.append([e.get("role"), f"{e.get('module')} ({e['package']})",
                         f"version {e.get('version')}"])
        else:
            where = e.get("path")
            if e.get("module"):
                by = "read by module" if str(e.get("role", "")).endswith(".read") else "module"
                where = f"{where} ({by} {e['module']})"
            rows.append([e.get("role"), where, e.get("sha256")])
    return rows


# ---------------------------------------------------------------------------- Annex IV
def annex_iv(doc: Mapping[str, Any], audit_sha256: str | None = None) -> str:
    """``annex-iv.md``: the Annex IV skeleton for the audit ``doc`` (``audit_sha256``: of
    the audit.json bytes it was read from, when known)."""
    todo = PLACEHOLDER.format
    prov = doc.get("provenance") or {}
    pol = doc.get("policy") or {}
    res = (doc.get("spec") or {}).get("resolved") or {}
    system = doc.get("system") or {}
    dec = doc["decomposition"]
    level = 100 * (1 - float(res.get("alpha", 0.05)))
    spec_sha = spec_sha256(doc)
    words = doc_glossary(doc)
    lines = [f"# Technical documentation (EU AI Act, Annex IV): audit {md_code(doc['name'])}", "",
             "A skeleton generated by causalfair from audit.json: the fields the audit knows "
             "are filled in; every `[TO BE COMPLETED BY THE DEPLOYER: ...]` is for the "
             "provider or deployer to write. It is not legal advice.", "",
             "## 1. General description of the AI system", "",
             f"- (a) Intended purpose: {todo('intended purpose')}",
             f"- Provider and version of the system: {todo('provider, system name and version')}",
             f"- Decision policy audited: {md_code(pol.get('label'))}; "
             + (f"checkpoint: {md_code(pol['checkpoint'])}; checkpoint SHA-256: "
                f"`{pol.get('checkpoint_sha256') or 'n/a'}`" if pol.get("checkpoint")
                else "no checkpoint (a built-in policy, a policy factory or decision logs)"),
             f"- (b) Interaction with other hardware and software: {todo('interfaces')}",
             f"- (c) Versions of the software used by the audit: causalfair "
             f"{prov.get('causalfair')}, Python {prov.get('python')} on {prov.get('platform')}; "
             + ", ".join(f"{k} {v}" for k, v in (prov.get("dependencies") or {}).items()
                         if v is not None),
             f"- (d) Forms in which the system is placed on the market: {todo('forms')}",
             f"- (h) Instructions for use: {todo('instructions for use')}", "",
             "## 2. Elements of the system and of its development", "",
             f"- (a) Methods and steps of development: {todo('how the policy was built')}",
             f"- (d) Data requirements and provenance: {todo('data sheets')}",
             f"- Simulated system audited: {md_code(system.get('id', 'logs'))}"
             + (f" ({md_escape(system['description'])})" if system.get("description") else "")
             + f", horizon T = {dec.get('horizon')}, engine {md_code(dec.get('engine'))}",
             f"- (e) Human oversight measures (Article 14): {todo('human oversight')}", "",
             "### 2(g). Validation and testing: the fairness audit", "",
             f"Audit {md_code(doc['name'])}" + (f" ({audited_on(prov['date'])})" if prov.get("date")
                                          else "")
             + f": overall verdict **{doc['overall']}**. Intervals: "
             f"{level:g}% confidence intervals; n/a: "
             + ("a plug-in value of the model fitted to the logs, no interval computed."
                if dec.get("engine") == "logs" else
                "a value computed exactly, with no sampling error."), ""]
    rows = [[k, _num(q["estimate"]), _num(q["ci_lower"]) if q.get("se") is not None else "n/a",
             _num(q["ci_upper"]) if q.get("se") is not None else "n/a",
             words.get(k, ("", "", ""))[2]] for k, q in (doc.get("quantities") or {}).items()]
    lines += _table(["metric", "estimate", "CI lower", "CI upper", "unit"], rows) + [""]
    if len(dec.get("groups") or ()) > 2:  # which pair the table's C, its parts and Lambda are
        a, b = doc_pair(doc)
        lines += [md_escape(f"C, DPE, IPE, SPE and Lambda above compare the pair {a}-{b} (C: "
                            f"{a}'s value minus {b}'s); every pair: Pairs of groups, section 3."),
                  ""]
    ben = doc.get("benefit") or {}
    if isinstance(ben.get("eps"), (int, float)):  # Lambda depends on it: its value and unit
        lines += [f"Lambda's eps (benefit gaps well below it count as equal benefit): "
                  f"{_num(ben['eps'])} {md_escape(doc_gain_unit(doc))} ({ben.get('eps_source') or 'given'}).", ""]
    if doc.get("verdicts"):
        lines += _table(["threshold", "estimate", "CI lower", "CI upper", "verdict"],
                        [[f"{threshold_label(v)}{pair_note(v)}",
                          beside(v["estimate"], v["threshold"], 6, significant=True),
                          *((beside(v["lower"], v["threshold"], 6, significant=True),
                             beside(v["upper"], v["threshold"], 6, significant=True))
                            if verdict_has_interval(doc, v)
                            else ("n/a", "n/a")),
                          v["status"]]
                         for v in doc["verdicts"]]) + [""]
    else:
        lines += ["No thresholds were set.", ""]
    seeds = doc.get("seeds") or {}
    lines += ["Reproducibility:", "",
              "- spec: " + (md_code(spec_file) if (spec_file := (doc.get("spec") or {}).get("file"))
                            else "given in memory (no file)") + "; SHA-256 of the parsed spec "
              f"(canonical JSON): `{spec_sha}`",
              f"- audit.json SHA-256: `{audit_sha256 or 'n/a'}`",
              *(["- other inputs the audit read (audit.json `inputs`):", "",
                 *_table(INPUT_HEADER, inputs), ""] if (inputs := input_rows(doc)) else []),
              "- seeds: " + (", ".join(f"{k} = {v}" for k, v in seeds.items() if v is not None)
                             or "none (no random numbers were drawn)"),
              f"- test logs and reports, dated and signed: {todo('date and signature')}", "",
              "## 3. Monitoring, functioning and control", "",
              f"- Capabilities and limitations in performance: {todo('limitations')}",
              "- Outcomes per group (the audit's per-group values; "
              + md_escape(per_group_units(doc_gain_unit(doc), words.get("utility", ("", "", ""))[2]))
              + ")" + _estimated(dec.get("engine")) + ":", ""]
    groups = dec.get("groups") or {}
    keys = [k for k in ("V", "direct", "indirect", "utility", "weight")
            if all(k in g for g in groups.values())]
    lines += _table(["group", *keys], [[g, *(_num(v[k]) for k in keys)]
                                       for g, v in groups.items()]) + [""]
    lines += pairs_lines(doc, "###") + change_lines(doc, "###")
    if doc.get("selection"):
        lines += ["- Selection rates per group and step: ll144.md (`causalfair export ll144`).", ""]
    lines += [f"- Foreseeable unintended outcomes and risks: {todo('risks')}",
              f"- Human oversight in operation: {todo('human oversight in operation')}", "",
              "## 4. Appropriateness of the performance metrics", ""]
    lines += [f"- **{k}**: " + md_escape(f"{words[k][0]} Sign: {words[k][1]}")
              for k in (doc.get("quantities") or {}) if k in words]
    lines += [f"- Why these metrics and thresholds fit the use: {todo('justification')}", "",
              "Assumptions the numbers rest on:", ""]
    lines += [f"- {md_escape(a)}" for a in assumptions(doc)]
    lines += ["", "## 5. Risk management system (Article 9)", "", todo("risk management system"),
              "", "## 6. Changes through the lifecycle", "", todo("changes"), "",
              "## 7. Harmonised standards applied", "", todo("standards"), "",
              "## 8. EU declaration of conformity", "", todo("declaration of conformity"), "",
              "## 9. Post-market monitoring plan", "",
              f"{todo('monitoring')} (for instance: this audit re-run by `causalfair gate` on "
              "every new policy, docs/ci-gate.md)", ""]
    return "\n".join(lines)


def per_group_units(gain: str, reward: str) -> str:
    """What annex IV's per-group columns are, with their units (``gain``: the system's gain
    unit; ``reward``: its reward unit, "" when unknown)."""
    return (f"V (the group's expected total gain under the policy), direct and indirect in {gain}"
            + (f"; utility in {reward}" if reward else "")
            + "; weight: the group's share of the population")


# ------------------------------------------------------------------------------- LL144
def ll144_rows(doc: Mapping[str, Any], where: str = "audit.json") -> list[dict[str, Any]]:
    """The LL144 table: one row per (step, action, group); ``step`` is ``all`` for the
    whole episode. An :class:`InputError` when ``doc`` has no ``selection``."""
    sel = doc.get("selection")
    if not isinstance(sel, Mapping):
        engine = doc["decomposition"].get("engine")
        raise InputError(
            f"{where}: selection: missing; the LL144 table needs per-group, per-step selection "
            "rates, which every audit of this causalfair records (from a tabular model, "
            f"decision logs or the Monte Carlo run's decisions; this audit: engine {engine!r}, "
            "written by an older causalfair): re-run the audit.")
    weights = {g: v.get("weight") for g, v in (doc["decomposition"].get("groups") or {}).items()}
    steps = list(sel.get("t") or range(sel["steps"]))
    rows = []

    def add(step: Any, action: str, rate: dict[str, Any], n: dict[str, Any],
            count: dict[str, Any]) -> None:
        known = {g: r for g, r in rate.items() if r is not None}
        top = max(known.values(), default=None)
        best = [g for g, r in known.items() if r == top]
        for g in sel["groups"]:
            r = rate.get(g)
            rows.append({"step": step, "action": action, "group": g, "n": n.get(g),
                         "selected": count.get(g), "population_share": weights.get(g),
                         "selection_rate": r,
                         "impact_ratio": (r / top) if r is not None and top else None,
                         "highest_rate_group": " = ".join(best) if top else None})

    n_all, c_all = sel.get("n") or {}, sel.get("count") or {}
    for a in sel["actions"]:
        add("all", a, {g: sel["rate_overall"][g][a] for g in sel["groups"]},
            {g: sum(v) for g, v in n_all.items()},
            {g: sum(v[a]) for g, v in c_all.items()})
        for i, t in enumerate(steps):
            add(t, a, {g: sel["rate"][g][a][i] for g in sel["groups"]},
                {g: v[i] for g, v in n_all.items()}, {g: v[a][i] for g, v in c_all.items()})
    return rows


def ll144_csv(doc: Mapping[str, Any], where: str = "audit.json") -> str:
    """``ll144.csv``: :func:`ll144_rows` (empty cells: not available; a text cell a
    spreadsheet would read as a formula is written as text: :func:`csv_text`)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LL144_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in ll144_rows(doc, where):
        w.writerow({k: ("" if v is None else repr(v) if isinstance(v, float)
                        else csv_text(v) if isinstance(v, str) else v)
                    for k, v in r.items()})
    return buf.getvalue()


def ll144_markdown(doc: Mapping[str, Any], where: str = "audit.json") -> str:
    """``ll144.md``: the episode table, the per-step table and how to read them."""
    rows = ll144_rows(doc, where)
    sel = doc["selection"]
    source = ("the decisions observed in the logs (counts: individuals)" if sel["source"] == "logs"
              else "the decisions drawn by the Monte Carlo run (counts: simulated units)"
              if sel["source"] == "mc"
              else "the policy applied to the model's population (shares of each group; a model "
              "has no individuals, so counts are n/a)")
    lines = ["# Selection rates and impact ratios (NYC Local Law 144 style): audit "
             + md_code(doc['name']), "",
             f"Selection rate: the share of a group given the action (each action other than "
             f"the baseline {md_code(sel['baseline_action'])}), from {source}. Impact ratio: the "
             "group's selection rate over the highest group's rate (groups that share the "
             "highest rate are all named, `A = B`; n/a when no group is given the action). "
             "Step `all`: the whole "
             f"episode of {sel['steps']} steps. The same numbers: ll144.csv.", ""]
    header = ["step", "action", "group", "n", "selected", "selection rate", "impact ratio",
              "highest-rate group"]

    def cells(r: dict[str, Any]) -> list[Any]:
        return [r["step"], r["action"], r["group"], _num(r["n"]), _num(r["selected"]),
                _num(r["selection_rate"], 4), _num(r["impact_ratio"], 4), r["highest_rate_group"] or "n/a"]

    lines += ["## Over the episode", ""]
    lines += _table(header, [cells(r) for r in rows if r["step"] == "all"]) + [""]
    lines += ["## Per step", ""]
    lines += _table(header, [cells(r) for r in rows if r["step"] != "all"]) + [""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- writing
def export_files(doc: Mapping[str, Any], kinds: tuple[str, ...] = tuple(EXPORTS), *,
                 audit_sha256: str | None = None, where: str = "audit.json") -> dict[str, str]:
    """File name -> text of the exports ``kinds`` of ``doc``."""
    out: dict[str, str] = {}
    for kind in kinds:
        if kind == "annex-iv":
            out["annex-iv.md"] = annex_iv(doc, audit_sha256)
        elif kind == "ll144":
            out["ll144.md"] = ll144_markdown(doc, where)
            out["ll144.csv"] = ll144_csv(doc, where)
        else:
            raise InputError(f"export: bad value {kind!r}; allowed values: {', '.join(EXPORTS)}.")
    return out


def report_exports(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """The export kinds a report folder holds for ``doc`` (ll144 only when audit.json has
    ``selection``)."""
    return tuple(k for k in EXPORTS if k != "ll144" or doc.get("selection"))


def links_markdown(doc: Mapping[str, Any]) -> str:
    """The report's line of links to card.md and the exports in its folder."""
    names = ["card.md", *(n for k in report_exports(doc) for n in EXPORTS[k])]
    return "Exports: " + ", ".join(f"[{n}]({n})" for n in names) + (
        "" if "ll144" in report_exports(doc) else
        " (no ll144.md: this audit.json has no selection rates)")


def write_exports(kind: str, audit: str | os.PathLike[str],
                  out: str | os.PathLike[str] | None = None, *, force: bool = False
                  ) -> dict[Path, bool]:
    """Write the export ``kind`` of the audit at ``audit`` (a folder or its audit.json)
    into the folder ``out`` (default: the audit's folder), each file atomically. A file
    already there with other content is refused (:class:`OutputError`) unless ``force``;
    everything is checked before anything is written. Returns each file's path -> whether
    it was written (False: it already held the same bytes)."""
    src = Path(audit) / "audit.json" if Path(audit).is_dir() else Path(audit)
    doc = read_audit(src)
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    files = export_files(doc, (kind,), audit_sha256=sha, where=str(src))
    folder = Path(out) if out is not None else src.parent
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--out: {folder} is a file; give a folder.")
    todo = {}
    for name, text in files.items():
        target = folder / name
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise OutputError(f"{target}: exists and is not a regular file; causalfair never "
                              "replaces it. Choose another --out.")
        if target.is_file() and not force:
            data = text.encode("utf-8")  # the size first: a huge file is not read
            if target.stat().st_size == len(data) and target.read_bytes() == data:
                continue
            raise OutputError(f"{target}: exists with other content; causalfair does not "
                              "overwrite it. Pass --force to replace it, or choose another --out.")
        todo[target] = text
    for target, text in todo.items():
        atomic_write_text(target, text)
    return {folder / name: folder / name in todo for name in files}


def _estimated(engine: Any) -> str:
    """What the per-group values of an audit by ``engine`` are, when they are estimates
    (the report gives their standard errors and intervals); "" for the exact engine."""
    if engine == "mc":
        return ("; Monte Carlo estimates, not exact values: their standard errors and "
                "intervals are in report.md")
    if engine == "logs":
        return ("; estimates from the decision log, not exact values (report.md gives their "
                "bootstrap standard errors and intervals when the audit drew replicates)")
    return ""

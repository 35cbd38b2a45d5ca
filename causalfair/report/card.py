"""The audit card (``card.md``, model-card style: a YAML metadata block with the Hugging Face
``model-index``, then one plain-language paragraph per metric) and the stamps every page of
an audit carries: when it ran (:func:`audited_on`; :func:`without_date` drops it for a
byte-for-byte comparison of two runs) and the spec's hash (:func:`spec_sha256`).

As :mod:`causalfair.report.explain`, whose sentences, glossary and sections the card
reuses, it reads the audit's JSON document (:meth:`AuditResult.to_dict`, the content of
``audit.json``) alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from causalfair._simultaneous import ci_label
from causalfair.report.explain import (
    assumptions,
    change_lines,
    doc_gain_unit,
    doc_glossary,
    doc_pair,
    fmt,
    has_interval,
    md_escape,
    pairs_lines,
    sentences,
    threshold_label,
)
from causalfair.report.marks import simultaneous_note, widened, yaml_simultaneous, yaml_string

__all__ = ["card_markdown", "model_index", "audited_on", "without_date", "spec_sha256"]


def _yaml_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    return yaml_string(v)


#: The quantities of one pair of groups (with more than two groups, of the pair C compares).
_PAIR_QUANTITIES = ("C", "DPE", "IPE", "SPE", "Lambda")


def model_index(doc: Mapping[str, Any]) -> list[str]:
    """The card's ``model-index`` block (YAML lines) in the Hugging Face model card
    metadata format (hub-docs modelcard.md): the audited policy as the model, the audit as
    the task, the system as the dataset, one metric per audited quantity (``type``: the
    quantity's key; ``value``: its estimate; ``unit`` extra) with the interval as extra
    fields (``ci_lower``, ``ci_upper``, ``ci_level``, ``se``) when it has one. ``verified`` is
    false: the numbers are the auditor's, not the Hub's."""
    system = doc.get("system") or {}
    words = doc_glossary(doc)
    level = 1 - float(doc["spec"]["resolved"].get("alpha", 0.05))
    y = ["model-index:", f"- name: {_yaml_value(doc['policy']['label'])}", "  results:",
         "  - task:", "      type: long-term-fairness-audit",
         f"      name: {_yaml_value('Long-term fairness audit ' + repr(doc['name']))}",
         "    dataset:", f"      type: {_yaml_value(system.get('id', 'logs'))}",
         f"      name: {_yaml_value(system.get('description') or system.get('id', 'logs'))}",
         f"      args: {{horizon: {doc['decomposition']['horizon']}, "
         f"engine: {_yaml_value(doc['decomposition']['engine'])}}}",
         "    metrics:"]
    a, b = doc_pair(doc)
    many = len(doc["decomposition"].get("groups") or {}) > 2  # name the pair C compares
    for k, q in (doc.get("quantities") or {}).items():
        unit = words.get(k, ("", "", ""))[2]
        name = f"{k}[{a}-{b}]" if many and k in _PAIR_QUANTITIES else k
        y += [f"    - type: {_yaml_value(k)}", f"      name: {_yaml_value(name)}",
              f"      value: {_yaml_value(q['estimate'])}"] + (
            [f"      unit: {_yaml_value(unit)}"] if unit else [])
        if has_interval(q):
            y += [f"      ci_lower: {_yaml_value(q['ci_lower'])}",
                  f"      ci_upper: {_yaml_value(q['ci_upper'])}",
                  f"      ci_level: {_yaml_value(level)}", f"      se: {_yaml_value(q['se'])}",
                  *(yaml_simultaneous(doc, " " * 6) if widened(doc, k) > 1 else [])]
        y.append("      verified: false")
    if not doc.get("quantities"):
        y[-1] = "    metrics: []"
    return y


#: When the audit ran (audit.json ``provenance.date``, UTC) as the pages state it: the
#: report's header (``; audited DATE (UTC)``), annex IV's validation section
#: (`` (audited DATE (UTC))``) and the card's YAML (``date: "DATE"  # ...``).
_ISO = rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
_CARD_DATE = "  # UTC, when the audit ran"
_DATED = re.compile(rb"; audited " + _ISO + rb" \(UTC\)| \(audited " + _ISO + rb" \(UTC\)\)"
                    rb'|\ndate: "' + _ISO + rb'"' + re.escape(_CARD_DATE.encode()))


def audited_on(date: str) -> str:
    """How a page states when the audit ran: ``audited DATE (UTC)``."""
    return f"audited {date} (UTC)"


def without_date(page: bytes) -> bytes:
    """A page's bytes without the date of its audit (:func:`audited_on`, the card's
    ``date:``): what stays the same from run to run of one audit, for tools that compare
    two runs' pages byte for byte (the regen tier, the gate's parallel-vs-serial check)."""
    return _DATED.sub(b"", page)


def spec_sha256(doc: Mapping[str, Any]) -> str:
    """The spec's SHA-256 every output states (card.md, annex-iv.md, the report's
    provenance): of the parsed spec (audit.json ``spec/parsed``) as canonical JSON (sorted
    keys), so it can be recomputed from audit.json alone and does not change with the
    file's comments or layout."""
    return hashlib.sha256(json.dumps((doc.get("spec") or {}).get("parsed"), sort_keys=True,
                                     default=str).encode()).hexdigest()


def card_markdown(doc: Mapping[str, Any], spec_text: str | None = None) -> str:
    """``card.md``: a YAML metadata block (metrics with CI bounds, verdicts, spec hash
    (:func:`spec_sha256`, the one annex-iv.md and the report state), checkpoint SHA-256,
    versions) and one plain-language paragraph per metric. ``spec_text`` is accepted and
    not used: the hash is of the parsed spec, which audit.json holds."""
    prov = doc.get("provenance") or {}
    level = 100 * (1 - float(doc["spec"]["resolved"].get("alpha", 0.05)))
    y = ["---", f"audit: {_yaml_value(doc['name'])}", f"overall: {doc['overall']}",
         *([f"date: {_yaml_value(prov['date'])}{_CARD_DATE}"]
           if prov.get("date") else []),
         f"engine: {doc['decomposition']['engine']}",
         f"horizon: {doc['decomposition']['horizon']}",
         "pair: [" + ", ".join(_yaml_value(g) for g in doc_pair(doc))
         + "]  # C = the first group's gain minus the second's; its parts and Lambda compare them",
         f"system: {_yaml_value((doc.get('system') or {}).get('id'))}",
         f"policy: {_yaml_value(doc['policy']['label'])}",
         f"checkpoint_sha256: {_yaml_value(doc['policy'].get('checkpoint_sha256'))}",
         f"spec_sha256: {spec_sha256(doc)}  # of the parsed spec as canonical JSON",
         f"ci_level: {_yaml_value(level / 100)}  # null ci bounds: exact values, no sampling error",
         *yaml_simultaneous(doc),  # C, DPE, IPE, SPE of a data-chosen pair: over its m pairs
         "metrics:"]
    ben = doc.get("benefit") or {}
    if ben.get("eps") is not None:  # Lambda's eps, its unit and how it was chosen
        y.insert(-1, f"lambda_eps: {{value: {_yaml_value(ben['eps'])}, unit: "
                     f"{_yaml_value(doc_gain_unit(doc))}, source: {_yaml_value(ben.get('eps_source'))}}}")
    for k, q in (doc.get("quantities") or {}).items():
        lo, hi = (q["ci_lower"], q["ci_upper"]) if has_interval(q) else (None, None)
        y.append(f"  {k}: {{estimate: {_yaml_value(q['estimate'])}, ci_lower: "
                 f"{_yaml_value(lo)}, ci_upper: {_yaml_value(hi)}, se: {_yaml_value(q['se'])}}}")
    y.append("verdicts:")
    for v in doc.get("verdicts") or []:
        y.append(f"  - {{threshold: {_yaml_value(threshold_label(v))}, "
                 f"status: {v['status']}, estimate: {_yaml_value(v['estimate'])}"
                 + (f", pair: {_yaml_value(v['pair'])}" if v.get("pair") is not None else "")
                 + "}")  # the pair as audit.json's verdicts/i/pair (one pair's key too)
    if not doc.get("verdicts"):
        y[-1] = "verdicts: []"
    y.append("versions:")
    y.append(f"  causalfair: {_yaml_value(prov.get('causalfair'))}")
    y.append(f"  python: {_yaml_value(prov.get('python'))}")
    for k, v in (prov.get("dependencies") or {}).items():
        y.append(f"  {k}: {_yaml_value(v)}")
    y += model_index(doc)
    y.append("---")
    lines = y + ["", f"# Fairness audit card: {md_escape(doc['name'])}", ""]
    lines += [md_escape(s.text) for s in sentences(doc)[:1]] + [""]
    lines += ["## Metrics", ""]
    by_topic = {s.topic: md_escape(s.text) for s in sentences(doc)}
    words = doc_glossary(doc)
    level = 100 * (1 - float(doc["spec"]["resolved"].get("alpha", 0.05)))
    for k, q in (doc.get("quantities") or {}).items():
        definition, sign, unit = words.get(k, ("", "", ""))
        est = fmt(q["estimate"])
        ci = "" if not has_interval(q) else (  # the label's mark escaped: in bold, no emphasis
            f", {ci_label(level, widened(doc, k))} {fmt(q['ci_lower'])} to {fmt(q['ci_upper'])}")
        lines.append(f"**{md_escape(f'{k} = {est}{ci}')}** "
                     + md_escape(f"({unit}). {definition} Sign: {sign}".rstrip()))
        lines.append("")
    if any(has_interval(q) and widened(doc, k) > 1
           for k, q in (doc.get("quantities") or {}).items()):
        # what the mark above stands for (escaped: a line starting "* " is a list item)
        lines += [md_escape(simultaneous_note(doc)), ""]
    for topic in ("gap", "decomposition"):
        if topic in by_topic:
            lines += [by_topic[topic], ""]
    lines += pairs_lines(doc) + change_lines(doc)
    lines += ["## Verdicts", ""]
    lines += [f"- {md_escape(s.text)}" for s in sentences(doc) if s.topic.startswith("threshold:")] or [
        "- no thresholds"]
    lines += ["", "## Assumptions", ""] + [f"- {md_escape(a)}" for a in assumptions(doc)] + [""]
    return "\n".join(lines)

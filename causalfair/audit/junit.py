"""The numbers of a gate's spec entry as JUnit ``<property>`` elements, so CI tools that
read JUnit XML (Jenkins, GitLab, GitHub reporters) get the estimates, intervals and
thresholds as values, not only inside failure messages (docs/ci-gate.md, ``--junit``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from causalfair._io import escape_chars

__all__ = ["suite_properties", "xml_document"]

#: Characters XML 1.0 forbids (C0 controls but tab, LF, CR; lone surrogates, which a
#: file name that is not UTF-8 decodes to; U+FFFE, U+FFFF): a JUnit file holding one is
#: refused by every CI reader, and a surrogate cannot be written as UTF-8 at all.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_document(root: Any) -> str:
    """The JUnit document of the ElementTree element ``root`` (indented, with its XML
    declaration), every character XML forbids written as its escape (``\\x1b``,
    ``\\udcff``): names and messages come from spec file names and user code, which may
    hold any character."""
    import xml.etree.ElementTree as ET

    ET.indent(root)
    text = ET.tostring(root, encoding="unicode")
    text = escape_chars(_NOT_XML, text)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n"


#: A verdict's fields, in this order, as properties ``KEY.FIELD`` (those it has).
VERDICT_FIELDS = ("threshold", "estimate", "lower", "upper", "status", "pair")


def _text(x: Any) -> str:
    """A JSON value as a property's text: numbers as JSON writes them, null as ``null``."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    return repr(float(x)) if isinstance(x, float) else str(x)


def suite_properties(entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, value) pairs of a gate JSON spec entry (``GateEntry.to_dict()``, the same
    values): ``spec``, ``overall``, ``utility``, ``checkpoint_sha256`` and, for each
    verdict the suite's test cases show, ``KEY.threshold``, ``KEY.estimate``,
    ``KEY.lower``, ``KEY.upper``, ``KEY.status`` (and ``KEY.pair``); with a repair,
    ``before.overall`` and ``before.utility`` of the audited checkpoint."""
    props: list[tuple[str, Any]] = [("spec", entry.get("spec")), ("overall", entry["overall"])]
    if "utility" in entry:
        props.append(("utility", entry["utility"]))
    if entry.get("checkpoint_sha256"):
        props.append(("checkpoint_sha256", entry["checkpoint_sha256"]))
    before = entry.get("before") or {}
    if before:
        props += [("before.overall", before.get("overall")),
                  ("before.utility", before.get("utility"))]
    for v in entry.get("verdicts") or before.get("verdicts") or []:
        props += [(f"{v['key']}.{f}", v[f]) for f in VERDICT_FIELDS if f in v]
    return [(k, _text(x)) for k, x in props]

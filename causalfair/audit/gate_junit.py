"""The CI gate's JUnit XML (``causalfair gate --junit``, docs/ci-gate.md): one
<testsuite> per spec and one <testcase> per threshold (:func:`gate_junit`), one <error>
test case per spec that could not be audited or whose retrain failed, the documents of
a gate whose specs are invalid (:func:`spec_errors_junit`) and of one that stopped
before any verdict (:func:`gate_error_junit`). The gate's result classes
(causalfair/audit/gate.py) call these; each spec entry's numbers as <property> elements
and the document's escaping are causalfair/audit/junit.py's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from causalfair._io import to_jsonable
from causalfair.audit.junit import suite_properties, xml_document
from causalfair.audit.retrain import utility_of
from causalfair.errors import InputError
from causalfair.thresholds import FAIL, INCONCLUSIVE

__all__ = ["gate_error_junit", "gate_junit", "spec_errors_junit"]


def gate_junit(result: Any, inconclusive_as: str = "failure") -> str:
    """The JUnit XML of ``result`` (a :class:`~causalfair.audit.gate.GateResult`, read
    through its entries, ``repair_not_taken`` and ``counts_against``): one <testsuite>
    per spec, one <testcase> per threshold; FAIL is a <failure>, INCONCLUSIVE a <failure>
    or <skipped> (``inconclusive_as``). A spec that could not be audited is one <error>
    test case; one whose retrain failed keeps its audit's test cases and adds a
    ``retrain`` test case with the <error>."""
    import xml.etree.ElementTree as ET

    if inconclusive_as not in ("failure", "skipped"):
        raise InputError(
            f"inconclusive_as: bad value {inconclusive_as!r}; allowed values: failure, skipped."
        )
    root = ET.Element("testsuites", name="causalfair gate")
    tot_t = tot_f = tot_e = 0
    tot_time = 0.0
    for e in result.entries:
        if e.error is not None and e.before is None:
            _junit_error(root, e.spec.name, e.error, e.error_kind or "Error")
            tot_t += 1
            tot_e += 1
            continue
        res = e.final
        suite = ET.SubElement(root, "testsuite", name=e.spec.name)
        props = ET.SubElement(suite, "properties")  # the JSON entry's numbers
        for k, x in suite_properties(to_jsonable(e.to_dict())):
            ET.SubElement(props, "property", name=k, value=x)
        n_f = n_s = 0
        original = ({b.key: b for b in e.before.verdicts} if result.repair_not_taken(e)
                    else {})
        for v in res.verdicts:
            tc = ET.SubElement(suite, "testcase", classname=f"causalfair.gate.{e.spec.name}",
                               name=v.label, time=f"{res.seconds / max(1, len(res.verdicts)):.4f}")
            b = original.get(v.key)
            if (b is not None and result.counts_against(b.status)
                    and not result.counts_against(v.status)):
                # the checkpoint under version control still fails here (an INCONCLUSIVE
                # shown as skipped stays skipped: never a passing test case)
                msg = (f"before retraining: {b.message()}; the repaired checkpoint: "
                       f"{v.message()}; commit it or pass --accept-repaired")
                if b.status == FAIL or inconclusive_as == "failure":
                    n_f += 1
                    ET.SubElement(tc, "failure", message=msg, type=b.status).text = msg
                else:
                    n_s += 1
                    ET.SubElement(tc, "skipped", message=msg)
            elif v.status == FAIL or (v.status == INCONCLUSIVE and inconclusive_as == "failure"):
                n_f += 1
                f = ET.SubElement(tc, "failure", message=v.message(), type=v.status)
                f.text = v.message()
            elif v.status == INCONCLUSIVE:
                n_s += 1
                ET.SubElement(tc, "skipped", message=v.message())
            out = [f"{res.summary()}", f"utility: {utility_of(res):.6g}"]
            if e.after is not None:
                b = next(x for x in e.before.verdicts if x.key == v.key)
                out.append(f"before retraining: {b.message()}; utility "
                           f"{utility_of(e.before):.6g}")
            ET.SubElement(tc, "system-out").text = "\n".join(out) if e.after else v.message()
        n_t = len(res.verdicts)
        if e.after is not None:  # the repair's honesty: utility and thresholds made worse
            n_t += 1
            check = e.repair_check or {}
            tc = ET.SubElement(suite, "testcase", classname=f"causalfair.gate.{e.spec.name}",
                               name="repair keeps utility and no threshold worse", time="0")
            text = (f"utility {utility_of(e.before):.6g} -> {utility_of(e.after):.6g} "
                    f"(floor {check.get('min_utility', -math.inf):.6g}: "
                    f"{check.get('min_utility_from', 'none')})")
            if e.repair_problems:
                n_f += 1
                msg = "; ".join(e.repair_problems)
                ET.SubElement(tc, "failure", message=msg, type=FAIL).text = msg
            ET.SubElement(tc, "system-out").text = text
        n_e = int(e.error is not None)
        if n_e:  # its retrain failed: the audit above, and the retrain's error
            n_t += 1
            tc = ET.SubElement(suite, "testcase", classname=f"causalfair.gate.{e.spec.name}",
                               name="retrain", time="0")
            ET.SubElement(tc, "error", message=e.error,
                          type=e.error_kind or "Error").text = e.error
            ET.SubElement(tc, "system-out").text = (
                f"the audit before retraining: {res.overall}; utility "
                f"{utility_of(res):.6g}")
        suite.set("tests", str(n_t))
        suite.set("failures", str(n_f))
        suite.set("errors", str(n_e))
        suite.set("skipped", str(n_s))
        suite.set("time", f"{res.seconds:.4f}")
        tot_time += res.seconds
        tot_t += n_t
        tot_e += n_e
        tot_f += n_f
    root.set("tests", str(tot_t))
    root.set("failures", str(tot_f))
    root.set("errors", str(tot_e))
    root.set("time", f"{tot_time:.4f}")  # (no skipped here: junit-10.xsd refuses it on
    # <testsuites>; each <testsuite> has its own)
    return xml_document(root)


def spec_errors_junit(names: Sequence[str], errors: Sequence[tuple[str, str]]) -> str:
    """The JUnit XML of a gate whose specs are invalid (``GateSpecErrors.to_junit``): one
    <error> test case per bad spec, under its name in ``names``, with the message of
    ``errors`` (spec, one-line message)."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="causalfair gate", tests=str(len(errors)),
                      failures="0", errors=str(len(errors)), time="0")
    for name, (_, msg) in zip(names, errors, strict=True):
        _junit_error(root, name, msg, "SpecError")
    return xml_document(root)


def gate_error_junit(message: str, kind: str) -> str:
    """A JUnit document for a gate that stopped on an error before any verdict (a bad
    option, a missing spec, an unusable MLflow store): one <error> test case saying why,
    so CI reads this run's error rather than an earlier run's file."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="causalfair gate", tests="1", failures="0",
                      errors="1", time="0")
    suite = ET.SubElement(root, "testsuite", name="causalfair gate", tests="1", failures="0",
                          errors="1", skipped="0", time="0")
    tc = ET.SubElement(suite, "testcase", classname="causalfair.gate", name="gate")
    ET.SubElement(tc, "error", message=message, type=kind).text = message
    return xml_document(root)


def _junit_error(root: Any, spec: str, msg: str, kind: str) -> None:
    """A <testsuite> with one <testcase> whose <error> says why ``spec`` was not audited."""
    import xml.etree.ElementTree as ET

    suite = ET.SubElement(root, "testsuite", name=spec, tests="1", failures="0", errors="1",
                          skipped="0", time="0")
    tc = ET.SubElement(suite, "testcase", classname="causalfair.gate", name=f"spec {spec}")
    ET.SubElement(tc, "error", message=msg, type=kind).text = msg

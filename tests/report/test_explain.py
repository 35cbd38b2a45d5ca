"""The report explains itself: the summary sentences and the audit card are
generated from the numbers, for an exact, a Monte Carlo and a log audit, and every number a
sentence prints is the number audit.json holds (and no sentence prints a number that has no
source)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from causalfair.audit import audit
from causalfair.report.card import card_markdown
from causalfair.report.explain import GLOSSARY, fmt, glossary, sentences
from causalfair.report.render import md_escape

BASE = {"horizon": 20, "system": {"id": "lending-1"}, "policy": {"builtin": "threshold:0.5"},
        "thresholds": {"abs_C": 0.05, "Lambda": 0.1, "DPE": 1.0}}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("explain")
    out = {}
    out["exact"] = audit({**BASE, "name": "exact"}).write_report(tmp / "exact")
    out["mc"] = audit({**BASE, "name": "mc", "engine": {"kind": "mc", "n": 3000, "seed": 3}}
                      ).write_report(tmp / "mc")
    from causalfair.cli import main

    logs = tmp / "logs.csv"
    assert main(["simulate-logs", "--setting", "lending-1", "--policy", "random:0.5",
                 "--n", "400", "--seed", "2", "--out", str(logs)]) == 0
    spec = {"name": "logs", "logs": {"path": str(logs), "n_boot": 30, "seed": 1},
            "thresholds": {"abs_C": 0.05, "Lambda": 0.1}}
    out["logs"] = audit(spec).write_report(tmp / "logs")
    return out


def _resolve(doc: dict, path: str) -> float:
    neg = path.startswith("-")
    node = doc
    for part in path.lstrip("-").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return -float(node) if neg else float(node)


NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d{4}(?!\d)")


@pytest.mark.parametrize("kind", ["exact", "mc", "logs"])
def test_every_sentence_number_comes_from_audit_json(reports, kind):
    doc = json.loads((reports[kind] / "audit.json").read_text())
    said = sentences(doc)
    assert said[0].topic == "verdict" and said[0].text.startswith(doc["overall"])
    topics = {s.topic for s in said}
    assert {"gap", "decomposition", "benefit", "utility"} <= topics
    assert {f"threshold:{v['key']}" for v in doc["verdicts"]} <= topics
    for s in said:
        printed = NUMBER.findall(s.text)
        sourced = [fmt(v) for _, v in s.sources]
        for path, value in s.sources:
            assert fmt(_resolve(doc, path)) == fmt(value), (kind, s.topic, path)
            assert fmt(value) in printed, (kind, s.topic, path, s.text)
        # no number without a source (T and CI levels are integers, not matched)
        assert sorted(set(printed)) == sorted(set(sourced)), (kind, s.topic, s.text)


@pytest.mark.parametrize("kind", ["exact", "mc", "logs"])
def test_report_and_card_carry_the_sentences(reports, kind):
    folder = reports[kind]
    doc = json.loads((folder / "audit.json").read_text())
    md = (folder / "report.md").read_text()
    page = (folder / "report.html").read_text()
    card = (folder / "card.md").read_text()
    for s in sentences(doc):
        assert md_escape(s.text) in md
        assert html.escape(s.text) in page
    # order: summary and the headline figure before the details, glossary after
    assert md.index("## Summary") < md.index("waterfall.png") < md.index("## Details") \
        < md.index("## Glossary") < md.index("## Assumptions")
    for section in ("summary", "details", "glossary", "assumptions"):
        assert f"<section id='{section}'>" in page
    assert card == card_markdown(doc, _spec_text(folder, doc))


def _spec_text(folder: Path, doc: dict) -> str:
    """The spec as the report prints it (these specs are dicts: JSON, no trailing newline)."""
    md = (folder / "report.md").read_text()
    return md.split("## Spec\n\n```toml\n", 1)[1].rsplit("\n```", 1)[0]


@pytest.mark.parametrize("kind", ["exact", "mc", "logs"])
def test_card_metadata_matches_audit_json(reports, kind):
    import yaml

    doc = json.loads((reports[kind] / "audit.json").read_text())
    text = (reports[kind] / "card.md").read_text()
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["overall"] == doc["overall"]
    assert meta["engine"] == doc["decomposition"]["engine"]
    assert meta["checkpoint_sha256"] == doc["policy"]["checkpoint_sha256"]
    assert len(meta["spec_sha256"]) == 64
    for k, q in doc["quantities"].items():
        m = meta["metrics"][k]
        assert m["estimate"] == q["estimate"]
        assert m["se"] == q["se"]
        if kind == "exact":  # exact values have no interval: null, not three equal numbers
            assert m["ci_lower"] is None and m["ci_upper"] is None and m["se"] is None
        elif q["se"] is not None and q["ci_lower"] != q["ci_upper"]:
            assert (m["ci_lower"], m["ci_upper"]) == (q["ci_lower"], q["ci_upper"])
    assert [v["status"] for v in meta["verdicts"]] == [v["status"] for v in doc["verdicts"]]
    assert meta["versions"]["causalfair"] == doc["provenance"]["causalfair"]
    # one paragraph per metric, with its definition
    for k in doc["quantities"]:
        if k in GLOSSARY:
            assert f"**{k} = {fmt(doc['quantities'][k]['estimate'])}" in text


def test_exact_tables_show_one_number(reports):
    md = (reports["exact"] / "report.md").read_text()
    details = md.split("## Details", 1)[1].split("## Glossary", 1)[0]
    assert "CI lower" not in details and "standard error" not in details
    assert "| threshold | value | verdict |" in details
    mc = (reports["mc"] / "report.md").read_text()
    assert "| threshold | estimate | 95% CI lower | 95% CI upper | verdict |" in mc
    # a missing standard error (MC Lambda, from the tabular model) reads "n/a" in tables
    # and null in audit.json and the card
    doc = json.loads((reports["mc"] / "audit.json").read_text())
    missing = [k for k, q in doc["quantities"].items() if q["se"] is None]
    for k in missing:
        row = next(ln for ln in mc.splitlines() if ln.startswith(f"| {k} |"))
        assert "| n/a |" in row


def test_sentences_name_the_advantaged_group():
    """Hand-made document: C < 0 favours the second group of the pair, and the interval of
    the gap's size is the negated interval of C."""
    doc = {"name": "t", "overall": "FAIL",
           "verdicts": [{"key": "abs_C", "threshold": 0.05, "estimate": 0.2, "lower": 0.1,
                         "upper": 0.3, "status": "FAIL"}],
           "quantities": {"C": {"estimate": -0.2, "ci_lower": -0.3, "ci_upper": -0.1, "se": 0.05},
                          "DPE": {"estimate": 0.1, "ci_lower": 0.0, "ci_upper": 0.2, "se": 0.05},
                          "IPE": {"estimate": -0.3, "ci_lower": -0.4, "ci_upper": -0.2, "se": 0.05},
                          "SPE": {"estimate": 0.0, "ci_lower": 0.0, "ci_upper": 0.0, "se": None}},
           "spec": {"resolved": {"alpha": 0.1}},
           "decomposition": {"groups": ["north", "south"], "pair": [0, 1], "horizon": 5,
                             "engine": "mc"},
           "system": {"gain": {"name": "health gain", "unit": "QALYs"}}}
    said = {s.topic: s.text for s in sentences(doc)}
    assert said["verdict"] == "FAIL: of 1 thresholds, 1 fails."
    assert said["gap"].startswith("Over T = 5 decisions, south ends with 0.2000 more health gain "
                                  "than north (90% CI 0.1000 to 0.3000), in QALYs")
    assert "(DPE) contributes 0.1000 (90% CI 0.0000 to 0.2000), favouring north" in said["decomposition"]
    assert "(IPE) contributes -0.3000 (90% CI -0.4000 to -0.2000), favouring south" in said["decomposition"]
    assert "(SPE) contributes 0.0000, favouring neither group" in said["decomposition"]
    assert "its whole interval lies above the threshold 0.0500" in said["threshold:abs_C"]


def test_glossary_in_the_systems_words():
    g = glossary(("north", "south"), "QALYs", "lives saved")
    assert g["C"][1] == "positive: north gains more; negative: south gains more."
    assert g["C"][2] == "QALYs" and g["utility"][2].startswith("lives saved")
    assert not any("s+" in d or "s-" in d for d, s, _ in g.values())


def test_threshold_sentences_print_the_threshold_as_given_and_never_a_tie():
    """The sentences printed thresholds and values at 4 decimals: `abs_DPE <= 0.0000: FAIL`
    for a threshold of 4e-05, and a failing 0.162747 against 0.16274 read "is 0.1627; it
    is above the threshold 0.1627". The threshold prints as given, and each value on its
    side of it; tables, the console and JUnit print the threshold exactly too."""
    from causalfair.thresholds import Verdict

    def verdict(key, thr, est, lo, hi, status):
        return {"key": key, "threshold": thr, "estimate": est, "lower": lo, "upper": hi,
                "status": status}

    doc = {"name": "t", "overall": "FAIL",
           "verdicts": [verdict("abs_DPE", 4e-05, 0.0565, 0.0565, 0.0565, "FAIL"),
                        verdict("abs_C", 0.16274, 0.162747, 0.162747, 0.162747, "FAIL"),
                        verdict("Lambda", 0.15049, 0.150485, 0.150485, 0.150485, "PASS"),
                        verdict("tpr_gap", 0.05, 0.05004, 0.05001, 0.05007, "FAIL"),
                        verdict("dp_gap", 0.1234567, 0.1234568, 0.1234568, 0.1234568, "FAIL")],
           "quantities": {"abs_DPE": {"estimate": 0.0565, "ci_lower": 0.0565,
                                      "ci_upper": 0.0565, "se": None}},
           "spec": {"resolved": {"alpha": 0.05}},
           "decomposition": {"groups": ["a", "b"], "pair": [0, 1], "horizon": 5,
                             "engine": "exact"}}
    said = {s.topic: s.text for s in sentences(doc)}
    assert said["threshold:abs_DPE"].startswith("abs_DPE <= 4e-05: FAIL.")
    assert "is 0.0565 gain units; it is above the threshold 4e-05." in said["threshold:abs_DPE"]
    assert said["threshold:abs_C"].startswith("abs_C <= 0.16274: FAIL.")
    assert "is 0.16275 gain units; it is above the threshold 0.16274." in said["threshold:abs_C"]
    assert "is 0.150485; it is within the threshold 0.15049." in said["threshold:Lambda"]
    assert "is 0.05004 (95% CI 0.05001 to 0.0501); its whole interval lies above the " \
           "threshold 0.0500." in said["threshold:tpr_gap"], said["threshold:tpr_gap"]
    assert "is 0.1235; it is above the threshold 0.1234567." in said["threshold:dp_gap"]
    v = Verdict("dp_gap", 0.1234567, 0.1234568, 0.1234568, 0.1234568, "FAIL")
    assert v.label == "dp_gap <= 0.1234567"  # :g printed 0.123457, below the value
    assert v.message().endswith("(outside threshold 0.1234567)")
    assert Verdict("abs_C", 0.05, 0.1, 0.1, 0.1, "FAIL").label == "abs_C <= 0.05"


def test_an_estimate_with_a_tiny_standard_error_keeps_its_interval():
    """A Monte Carlo estimate whose standard error is 0 or ~1e-17 (a deterministic policy
    on coupled sites) has bounds that round to the estimate: the card then wrote null
    bounds under its "null ci bounds: exact values, no sampling error" while report.md's
    tables showed the interval, and the pairs table bracketed one pair's DPE and not the
    next one's, by floating-point noise. Every output now shows such an interval."""
    from causalfair.report.card import card_markdown
    from causalfair.report.explain import has_interval

    tiny = {"estimate": 2.5, "ci_lower": 2.5, "ci_upper": 2.5, "se": 2.6e-17}
    assert has_interval(tiny) and has_interval({**tiny, "se": 0.0})
    assert not has_interval({**tiny, "se": None})  # exact: no interval
    doc = {"name": "t", "overall": "PASS", "verdicts": [],
           "quantities": {"C": tiny, "Lambda": {**tiny, "se": None}},
           "spec": {"resolved": {"alpha": 0.05}, "parsed": {}},
           "policy": {"label": "p", "checkpoint_sha256": None},
           "provenance": {"date": "2026-01-01T00:00:00Z"},
           "decomposition": {"groups": ["a", "b"], "pair": [0, 1], "horizon": 5,
                             "engine": "mc"}}
    card = card_markdown(doc)
    assert "  C: {estimate: 2.5, ci_lower: 2.5, ci_upper: 2.5, se: 2.6e-17}" in card
    assert "  Lambda: {estimate: 2.5, ci_lower: null, ci_upper: null, se: null}" in card
    said = {s.topic: s.text for s in sentences(doc)}
    assert "(95% CI 2.5000 to 2.5000)" in said["gap"], said["gap"]


def test_verdict_tables_print_each_value_on_its_side_of_an_exact_threshold():
    """With thresholds printed exactly, a value rounded to 6 decimals (the report's verdict
    table, the console, the gate's table) or 6 significant figures (annex-iv.md, JUnit)
    could land on the wrong side of it: |C| = 0.16274697 against 0.162746975 (PASS)
    printed 0.162747, above its threshold. Each prints with the decimals it needs."""
    from causalfair._io import to_jsonable
    from causalfair.report.export import annex_iv
    from causalfair.report.render import _tables

    spec = {**BASE, "name": "side", "horizon": 5}
    c = abs(audit(spec).quantities["C"][0])
    thr = (c + float(f"{c:.6f}")) / 2  # between |C| and its 6-decimal rounding
    r = audit({**spec, "thresholds": {"abs_C": thr}})
    v = r.verdicts[0]
    shown = next(rows for title, _, rows, _ in _tables(r, None) if title.startswith("Verdicts"))
    printed = [shown[0][1], v.message().split(" = ")[1].split(":")[0],
               v.message(fixed_decimals=True).split(" = ")[1].split(":")[0]]
    row = next(ln for ln in annex_iv(to_jsonable(r.to_dict())).splitlines()
               if ln.startswith("| abs_C \\<= "))
    printed.append(row.split(" | ")[1])
    for text in printed:
        assert (float(text) > thr) == (c > thr), (text, c, thr, v.status)


def test_a_repairs_report_says_the_gate_counts_the_specs_checkpoint():
    """`gate --retrain --reports R` writes the report of the repaired checkpoint: it
    opened "PASS: all 2 thresholds hold." while the spec's checkpoint failed and the gate
    exited 1 (the repair not taken until committed or --accept-repaired), with no word of
    it outside the Before and after table. The verdict sentence (report.md, report.html,
    card.md) says whose verdict it is and what the gate counts."""
    doc = {"name": "t", "overall": "PASS",
           "verdicts": [{"key": "abs_C", "threshold": 0.05, "estimate": 0.0499, "lower": 0.0499,
                         "upper": 0.0499, "status": "PASS"}],
           "quantities": {}, "spec": {"resolved": {"alpha": 0.05}},
           "policy": {"checkpoint": "ck/m.retrained-exact-1.pt"},
           "before": {"overall": "FAIL"}, "extra": {"retrained_from": {"checkpoint": "ck/m.pt"}},
           "decomposition": {"groups": ["a", "b"], "pair": [0, 1], "horizon": 5,
                             "engine": "exact"}}
    head = sentences(doc)[0].text
    assert head.startswith("PASS: all 1 thresholds hold. This is the verdict of the checkpoint "
                           "`causalfair gate --retrain` wrote (ck/m.retrained-exact-1.pt); the "
                           "spec's own checkpoint (ck/m.pt) is FAIL"), head
    assert "--accept-repaired" in head
    doc["before"]["overall"] = "PASS"  # nothing to say when both agree
    assert sentences(doc)[0].text == "PASS: all 1 thresholds hold."


def test_a_verdict_decided_at_the_compared_pair_read_backwards_carries_the_mark():
    """With 5 sites, the audit compares site 1-site 5 (chosen from the data: its
    intervals Bonferroni-widened over the 10 pairs); max_abs_C is decided at the same pair
    read as site 5-site 1, whose interval (z = 2.807) is the widened one, yet the verdict
    read "95% CI" without the mark, as a marginal 95% interval. The compared pair read
    either way round is marked; other pairs are not."""
    from causalfair.report.marks import widened_by

    assert widened_by(10, "site 1-site 5", "max_abs_C", "site 5-site 1") == 10
    assert widened_by(10, "site 1-site 5", "abs_C[site 5-site 1]") == 10
    assert widened_by(10, "site 1-site 5", "max_abs_C", "site 1-site 5") == 10
    assert widened_by(10, "site 1-site 5", "max_abs_C", "site 2-site 3") == 1
    assert widened_by(10, "a-b-c", "max_abs_C", "c-a-b") == 10  # groups "a-b" and "c"
    assert widened_by(1, "a-b", "max_abs_C", "b-a") == 1

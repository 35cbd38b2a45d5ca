"""An external auditor's checks of the reports: every sentence true of the numbers it
prints (the C = 0 case, what an attribution of C can and cannot explain), exact values
without pretend intervals in a Monte Carlo report, table cells that equal audit.json at
the precision they print, and one spec hash stated alike by every output."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

import causalfair as cf
from causalfair.report import render
from causalfair.report.explain import fmt, sentences
from causalfair.report.export import annex_iv
from tests.conftest import skill_simulator

LENDING_1 = """
name = "l1"
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 0.05
abs_DPE = 0.05
Lambda = 0.1
tpr_gap = 0.1
"""

LENDING_2_MC = """
name = "l2"
[system]
id = "lending-2"
[policy]
builtin = "blind:0.5"
[engine]
kind = "mc"
n = 1000
seed = 0
[thresholds]
abs_C = 0.1
Lambda = 0.1
"""


@pytest.fixture(scope="module")
def exact_report(tmp_path_factory):
    """An exact FAIL audit of lending-1 written as a report folder: (folder, doc)."""
    folder = tmp_path_factory.mktemp("auditor")
    (folder / "l1.toml").write_text(LENDING_1, encoding="utf-8")
    out = cf.audit(folder / "l1.toml").write_report(folder / "report")
    return out, json.loads((out / "audit.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def mc_audit(tmp_path_factory):
    """A Monte Carlo audit of a system with a tabular model (Lambda exact, C sampled)."""
    folder = tmp_path_factory.mktemp("auditor_mc")
    (folder / "l2.toml").write_text(LENDING_2_MC, encoding="utf-8")
    res = cf.audit(folder / "l2.toml")
    return res, json.loads(json.dumps(res.to_dict()))


def _summary(md: str) -> list[str]:
    return md.split("## Summary", 1)[1].split("## Details", 1)[0].split("\n\n")


def test_a_gap_that_prints_as_zero_favours_no_group(tmp_path):
    """Two identical groups under one policy: C is 0, and the sentence must not say that
    one group ends with 0.0000 more gain than the other."""
    kernel = [[[0.8, 0.2, 0.0], [0.1, 0.8, 0.1], [0.0, 0.2, 0.8]],
              [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.0, 0.1, 0.9]]]
    model = {"kernel": [kernel, kernel], "initial": [[0.5, 0.3, 0.2]] * 2,
             "potential": [0, 1, 2], "reward": [[[0, 0, 0], [-1, 0.2, 1]]] * 2,
             "group_names": ["A", "B"], "name": "twins"}
    (tmp_path / "twins.json").write_text(json.dumps(model), encoding="utf-8")
    (tmp_path / "z.toml").write_text('name = "z"\n[system]\ntabular = "twins.json"\n'
                                     '[policy]\nbuiltin = "always"\n', encoding="utf-8")
    doc = json.loads(json.dumps(cf.audit(tmp_path / "z.toml").to_dict()))
    assert fmt(doc["quantities"]["C"]["estimate"]) == "0.0000"
    gap = next(s.text for s in sentences(doc) if s.topic == "gap")
    assert "A and B end with the same" in gap and "more" not in gap, gap


def test_drivers_explain_only_c_and_name_the_systems_part(exact_report):
    """The attribution against pi0 explains the policy's DPE + IPE: the sentence names only
    the failing thresholds on C and its parts, states SPE (which no policy changes) and
    says that Lambda and tpr_gap are not explained by it."""
    folder, doc = exact_report
    md = (folder / "report.md").read_text(encoding="utf-8")
    summary = _summary(md)
    drivers = next(p for p in summary if p.startswith("What drives"))
    assert drivers.startswith("What drives the failure of abs_C, abs_DPE, against"), drivers
    dec = doc["decomposition"]
    assert f"C = {fmt(dec['C'])}, of which SPE = {fmt(dec['SPE'])}" in drivers, drivers
    assert f"DPE + IPE = {fmt(dec['DPE'] + dec['IPE'])}" in drivers, drivers
    also = next(p for p in summary if p.startswith("Also failing"))
    assert "Lambda, tpr_gap" in also and "does not explain them" in also, also


def test_mc_drivers_use_the_exact_numbers_they_are_computed_from(mc_audit):
    """In a Monte Carlo audit the attribution is exact (tabular model): the C and SPE it is
    set against are the exact values of audit.json extra/exact, and it says so."""
    res, doc = mc_audit
    drivers = next(p for p in _summary(render.render_markdown(res, doc, {}))
                   if p.startswith("What drives"))
    exact = doc["extra"]["exact"]
    assert f"C = {fmt(exact['C'])}, of which SPE = {fmt(exact['SPE'])}" in drivers, drivers
    assert "exact values from the tabular model" in drivers, drivers


def test_exact_values_in_a_monte_carlo_report_have_no_interval(mc_audit):
    """Lambda is exact on the tabular model: the report's and annex-iv's interval cells of
    it read n/a (a note says why), not a zero-width "95% CI"; C keeps its interval."""
    res, doc = mc_audit
    md = render.render_markdown(res, doc, {})
    lam = doc["quantities"]["Lambda"]["estimate"]
    assert f"| Lambda | {lam:.6f} | n/a | n/a | n/a |" in md
    assert f"| Lambda \\<= 0.1 | {lam:.6f} | n/a | n/a |" in md
    assert "n/a interval: a value computed exactly on the tabular model" in md
    c = doc["quantities"]["C"]
    assert f"| {c['ci_lower']:.6f} | {c['ci_upper']:.6f} |" in md
    annex = annex_iv(doc)
    assert re.search(r"\| Lambda \\<= 0\.1 \| [0-9.]+ \| n/a \| n/a \|", annex), annex
    assert "95% CI [" in res.summary()  # the console summary states the level too


def test_worst_pairs_cells_equal_audit_json_at_the_printed_precision(exact_report):
    """The worst-pairs table prints 4 decimals (as rounded), each equal to audit.json's
    value rounded to 4 decimals (not a 4-decimal value padded to look like 6)."""
    folder, doc = exact_report
    md = (folder / "report.md").read_text(encoding="utf-8")
    table = md.split("### Worst benefit pairs", 1)[1].split("\n\n", 2)[1].splitlines()
    header = [h.strip().replace("\\", "") for h in table[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table[2:]]
    pairs = doc["benefit"]["worst_pairs"]
    assert len(rows) == len(pairs)
    for row, pair in zip(rows, pairs, strict=True):
        for name, cell in zip(header, row, strict=True):
            value = pair[name]
            if isinstance(value, float):
                assert cell == fmt(value), (name, cell, value)


def test_one_spec_hash_in_every_output(exact_report):
    """card.md, annex-iv.md and the report's provenance state the same spec SHA-256: of the
    parsed spec (audit.json spec/parsed) as canonical JSON."""
    folder, doc = exact_report
    want = hashlib.sha256(json.dumps(doc["spec"]["parsed"], sort_keys=True,
                                     default=str).encode()).hexdigest()
    card = (folder / "card.md").read_text(encoding="utf-8")
    assert re.search(r"^spec_sha256: ([0-9a-f]{64})", card, re.M).group(1) == want
    assert f"(canonical JSON): `{want}`" in (folder / "annex-iv.md").read_text(encoding="utf-8")
    for page in ("report.md", "report.html"):
        assert want in (folder / page).read_text(encoding="utf-8"), page


def test_ll144_names_every_group_sharing_the_highest_rate(exact_report):
    """A tie at the highest selection rate names every tied group (the table would
    otherwise single one out); no group is named when no one is given the action."""
    from causalfair.report.export import ll144_markdown, ll144_rows

    _, doc = exact_report
    doc = json.loads(json.dumps(doc))
    sel = doc["selection"]
    sel["rate_overall"]["s-"]["approve"] = sel["rate_overall"]["s+"]["approve"]
    sel["rate"]["s+"]["approve"][0] = sel["rate"]["s-"]["approve"][0] = 0.0
    rows = {(r["step"], r["group"]): r for r in ll144_rows(doc)}
    assert rows[("all", "s-")]["highest_rate_group"] == "s+ = s-"
    assert rows[(0, "s+")]["highest_rate_group"] is None
    assert "| 0 | approve | s+ | n/a | n/a | 0 | n/a | n/a |" in ll144_markdown(doc)


def test_a_log_audit_does_not_call_its_plug_in_values_exact(tmp_path):
    """A log audit's notions (tpr_gap, ...) are plug-in values of the fitted model: the
    note on their n/a intervals says so, in the report and in annex-iv.md."""
    from causalfair.logs import simulate_logs

    simulate_logs("lending-1", "random:0.5", n_individuals=300, horizon=4,
                  seed=1).to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "l.toml").write_text('name = "l"\nmetrics = ["C", "tpr_gap"]\n[logs]\n'
                                     'path = "log.csv"\nn_boot = 10\n', encoding="utf-8")
    res = cf.audit(tmp_path / "l.toml")
    doc = json.loads(json.dumps(res.to_dict()))
    md = render.render_markdown(res, doc, {})
    assert "| tpr_gap | " in md and "plug-in value of the model fitted to the logs" in md
    assert "computed exactly" not in md.split("## Glossary")[0]
    assert "n/a: a plug-in value of the model fitted to the logs" in annex_iv(doc)


def test_a_sign_the_interval_does_not_settle_is_not_stated_as_fact(mc_audit):
    """A Monte Carlo part (or C) whose interval holds 0 favours a group only by its
    estimate: the sentence says so instead of naming the favoured group outright."""
    _, doc = mc_audit
    doc = json.loads(json.dumps(doc))
    for key, (lo, hi) in (("SPE", (-0.01, 0.03)), ("C", (-0.02, 0.4))):
        q = doc["quantities"][key]
        q["estimate"], q["ci_lower"], q["ci_upper"] = (lo + hi) / 2, lo, hi
    said = {s.topic: s.text for s in sentences(doc)}
    assert "(SPE) contributes 0.0100 (95% CI -0.0100 to 0.0300), favouring white by its " \
           "estimate only (its interval contains 0)" in said["decomposition"], said
    assert "does not settle which group gains more" in said["gap"], said["gap"]
    assert "(DPE) contributes" in said["decomposition"] and "favouring white;" in said["decomposition"]


EVIL_SIM = skill_simulator(("<b>A&amp;B</b>", "x|y"))


def test_group_names_never_become_markup_in_the_exports(tmp_path):
    """A group named like HTML reads as its text in card.md, annex-iv.md and ll144.md
    (Markdown renders raw tags and entities): every one is escaped outside the YAML."""
    from causalfair.report.card import card_markdown
    from causalfair.report.export import ll144_markdown

    (tmp_path / "evil.py").write_text(EVIL_SIM, encoding="utf-8")
    (tmp_path / "e.toml").write_text('name = "e"\n[system]\nfactory = "evil:make"\n[policy]\n'
                                     'builtin = "uniform"\n[engine]\nn = 200\n', encoding="utf-8")
    doc = json.loads(json.dumps(cf.audit(tmp_path / "e.toml").to_dict()))
    card = card_markdown(doc).split("\n---\n", 1)[1]  # the body, after the YAML block
    for name, text in (("card.md", card), ("annex-iv.md", annex_iv(doc)),
                       ("ll144.md", ll144_markdown(doc))):
        assert not re.search(r"(?<!\\)<b>|(?<!\\)&amp;", text), (name, text)
        assert "\\<b\\>A\\&amp;B\\</b\\>" in text, name  # as report.md escapes it


def test_the_repair_table_says_why_its_utility_differs_from_the_audit_at_rounding():
    """The constrained repair's rows are its own evaluations of policy tables; the audit of
    the written float32 checkpoint can differ in the 7th digit (3.232153 vs 3.232154 in
    reports/examples/gate/lending-1-ppo): the table's title says which is which."""
    title, header, rows, _ = render._repair_table(
        {"constraints": ["abs_C <= 0.05"], "passed": True,
         "result": {"utility": 3.2321533, "C": -0.0499, "Lambda": 0.1399},
         "original": {"utility": 4.28, "C": -0.17, "Lambda": 0.149}})
    assert "the written checkpoint (a float32 network) reproduces them to rounding" in title
    assert "'after' column" in title and rows[1][0] == "repair"


def test_the_attribution_summary_states_its_interval_level():
    from causalfair.engines.attribution import attribute

    m = cf.lending_setting("lending-1").tabular
    a = attribute(m, "threshold:0.5", baseline="always", engine="mc", n=500, seed=0, alpha=0.1)
    lines = [ln for ln in a.summary().splitlines() if "CI [" in ln]
    assert lines and all("90% CI [" in ln for ln in lines), a.summary()

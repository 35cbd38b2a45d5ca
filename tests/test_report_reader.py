"""A bank's model-risk officer reads the report pages (report.md, report.html, card.md,
annex-iv.md) of an audit, not the code: every number says its unit, every pointer leads
to a file the reader has, the pages say when the audit ran, and a table of pairs that
each contribute 0 is one sentence instead."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
GAIN = "gain units (largest one-level gain = 1)"  # lending's gain unit, as the report says it
PROFIT = "profit (the system's reward units)"
PAGES = ("report.md", "report.html", "card.md", "annex-iv.md")


def _audit(policy: str, tmp: Path, name: str = "r") -> tuple[object, Path]:
    import causalfair as cf

    res = cf.audit({"name": name, "horizon": 5, "model": {"setting": "lending-1"},
                    "policy": {"builtin": policy}, "thresholds": {"abs_C": 0.05, "Lambda": 0.1}})
    return res, res.write_report(tmp / name)


@pytest.fixture(scope="module")
def threshold(tmp_path_factory):
    """A lending-1 audit whose Lambda is not 0 (a threshold policy reads the group's
    repayment curve)."""
    return _audit("threshold:0.5", tmp_path_factory.mktemp("thr"))


@pytest.fixture(scope="module")
def never(tmp_path_factory):
    """A lending-1 audit of deny-everyone: both groups get d1 with probability 0 at every
    level, so every pair contributes 0 and Lambda = 0 exactly."""
    return _audit("never", tmp_path_factory.mktemp("nev"))


def _section(md: str, head: str) -> str:
    """The Markdown from the heading line starting with ``head`` to the next heading."""
    start = md.index(head)
    rest = md[start + len(head):]
    nxt = re.search(r"^#+ ", rest, flags=re.M)
    return md[start: start + len(head) + (nxt.start() if nxt else len(rest))]


# ---------------------------------------------------------------- 1. no method.md for users
def test_no_page_points_the_reader_to_method_md(threshold):
    """The eps sentence and the worst-pairs title said "(its gain's resolution, method.md
    section 4)": a file that ships with neither the package nor the docs. They point to
    the shipped doc's section instead, whose heading exists."""
    res, out = threshold
    assert "method.md" not in res.benefit.eps_source
    for page in (*PAGES, "audit.json"):
        assert "method.md" not in (out / page).read_text(encoding="utf-8"), page
    assert "docs/decomposition.md, \"eps: the benefit resolution\"" in res.benefit.eps_source
    heads = (ROOT / "docs" / "decomposition.md").read_text(encoding="utf-8").splitlines()
    assert "## eps: the benefit resolution" in heads


def test_the_declared_eps_source_names_the_shipped_doc():
    """The text the engines record (benefit.eps_source, audit.json benefit/eps_source)
    for a system that declares its eps."""
    import causalfair as cf
    from causalfair.engines.benefit import eps_for

    model = cf.lending_setting("lending-2").tabular
    eps, source = eps_for(None, model)
    assert eps == 0.1
    assert source == ("declared by system 'lending-2' (its gain's resolution, "
                      "docs/decomposition.md, \"eps: the benefit resolution\")")


def test_no_user_facing_string_of_the_package_cites_method_md():
    """Docstrings and comments may cite the math contract (developers have it); a string
    that reaches the user (a message, a recorded source, a report line) may not. Every
    line citing method.md must sit in a docstring or a comment."""
    import ast

    bad = []
    for path in sorted((ROOT / "causalfair").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)) and node.body \
                    and isinstance(node.body[0], ast.Expr) \
                    and isinstance(node.body[0].value, ast.Constant):
                docs.add(id(node.body[0].value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                docs.add(id(node.value))  # attribute docstrings (#: or a bare string)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and "method.md" in node.value and id(node) not in docs:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad


# ------------------------------------------------------------------- 2. per-group units
def test_the_per_group_tables_say_their_units(threshold):
    """The report's per-group table (V^pi, V^PS, V^pi0, direct, indirect, utility) and
    annex IV's outcomes per group had no unit: a reader could not tell gains from
    profit. Both now name the system's gain unit and its reward unit, and what each
    column is."""
    _, out = threshold
    md = (out / "report.md").read_text(encoding="utf-8")
    title = _section(md, "### Per-group values").splitlines()[0]
    assert f"these five in {GAIN}; utility in {PROFIT})" in title, title
    assert "V^pi0" in title and "baseline" in title, title  # what the columns are
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<h3>Per-group values (V^pi, V^PS, V^pi0: the group&#x27;s expected total gain" in html
    assert f"these five in {GAIN}; utility in profit (the system&#x27;s reward units))</h3>" in html
    annex = (out / "annex-iv.md").read_text(encoding="utf-8")
    line = next(x for x in annex.splitlines() if x.startswith("- Outcomes per group"))
    assert GAIN in line and PROFIT in line and "weight" in line, line


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    """docs/own-system.md's clinic (3 actions, gain in "health levels") under the uniform
    policy: the same probabilities for both groups, so Lambda = 0."""
    import os
    import shutil

    import causalfair as cf

    tmp = tmp_path_factory.mktemp("clinic")
    shutil.copyfile(ROOT / "docs" / "examples" / "clinic.py", tmp / "clinic.py")
    here = os.getcwd()
    os.chdir(tmp)
    try:
        res = cf.audit({"name": "clinic", "system": {"factory": "clinic:make_clinic",
                                                     "params": {"levels": 5}},
                        "policy": {"builtin": "uniform"}, "thresholds": {"Lambda": 0.1}})
        return res, res.write_report(tmp / "rep")
    finally:
        os.chdir(here)


def test_the_per_group_units_follow_the_system(clinic):
    """Another system's units (the clinic's gain in health levels, its reward "health
    gain minus treatment cost") are the ones the per-group titles state, not lending's."""
    _, out = clinic
    md = (out / "report.md").read_text(encoding="utf-8")
    title = _section(md, "### Per-group values").splitlines()[0]
    assert "these five in health levels" in title, title
    assert "utility in health gain minus treatment cost (the system's reward units)" in title
    annex = (out / "annex-iv.md").read_text(encoding="utf-8")
    line = next(x for x in annex.splitlines() if x.startswith("- Outcomes per group"))
    assert "health levels" in line and GAIN not in line, line


def test_the_other_notions_table_says_its_units(threshold):
    """"Other notions" listed values without a unit: the per-group approval rates
    (probabilities) beside mean final levels (levels) and the utility (profit)."""
    _, out = threshold
    sec = _section((out / "report.md").read_text(encoding="utf-8"), "### Other notions")
    assert "| notion | value | unit |" in sec, sec
    for row in ("| dp_gap |", "| w1_final |", "| w1_initial |", "| approval_rate\\[s+\\] |",
                "| mean_level_final\\[s-\\] |", "| utility |"):
        line = next(x for x in sec.splitlines() if x.startswith(row))
        unit = line.rstrip(" |").rsplit("| ", 1)[1]
        assert unit == {"| dp_gap |": "probability", "| w1_final |": "levels",
                        "| w1_initial |": "levels", "| utility |": PROFIT}.get(
            row, "probability" if "approval" in row else "levels"), line


def test_the_before_and_after_table_says_its_units(threshold, never):
    """A gate's before/after table put C (gain units), Lambda (a probability) and the
    utility (profit) in one column with no unit; each row now says its own."""
    from causalfair.report.render import render_markdown

    before, _ = threshold
    after, _ = never
    md = render_markdown(after, after.to_dict(), {}, before)
    sec = _section(md, "### Before and after retraining")
    assert "| threshold | before | verdict before | after | verdict after | unit |" in sec
    units = {x.split("|")[1].strip(): x.rstrip(" |").rsplit("| ", 1)[-1]
             for x in sec.splitlines()[4:] if x.startswith("| ")}
    assert units["abs_C \\<= 0.05"] == GAIN and units["Lambda \\<= 0.1"] == "probability (0 to 1)"
    assert units["C"] == GAIN and units["utility"] == PROFIT, units


def test_the_constrained_repair_table_says_its_units():
    """The repair table (utility, C, Lambda of the original, the repair, the best found
    and the LP bound) had no unit; its title now states each column's."""
    from causalfair.report.render import _repair_table

    rep = {"constraints": ["abs_C <= 0.05"], "passed": True,
           "result": {"utility": 3.0, "C": 0.04, "Lambda": 0.1},
           "original": {"utility": 4.0, "C": 0.2, "Lambda": 0.2}}
    title, header, rows, _ = _repair_table(rep, {"utility": PROFIT, "C": GAIN,
                                                  "Lambda": "probability (0 to 1)"})
    assert header[1:4] == ["utility", "C", "Lambda"]
    assert title.endswith(f"; utility in {PROFIT}; C in {GAIN}; Lambda in probability (0 to 1)")
    assert rows[0][4] == 0.75  # the repair's utility over the original's, 3 / 4


# ----------------------------------------------------------- 3. Lambda = 0: one sentence
def test_lambda_zero_shows_one_sentence_not_a_table_of_zero_rows(never):
    """Deny-everyone has Lambda = 0: the worst-pairs table listed rows that each
    contribute 0 (the console summary already said so in one sentence). The report says
    it in one sentence, with eps and where it comes from, and lists no rows."""
    res, out = never
    assert res.benefit.Lambda == 0.0
    md = (out / "report.md").read_text(encoding="utf-8")
    sec = _section(md, "### Worst benefit pairs")
    assert "| level" not in sec and "contribution |" not in sec, sec
    assert "no pair of levels contributes to Lambda" in sec, sec
    assert "eps = 0.1 gain units" in sec, sec
    html = (out / "report.html").read_text(encoding="utf-8")
    block = html[html.index("<h3>Worst benefit pairs"):]
    block = block[: block.index("<h3>", 4)]
    assert "<table>" not in block and "no pair of levels contributes to Lambda" in block


def test_lambda_zero_with_three_actions_is_one_sentence_too(clinic):
    """The clinic's uniform policy (Lambda = 0, 3 actions) listed a row per pair and
    action, each contributing 0 (15 rows): one sentence, in the clinic's unit."""
    res, out = clinic
    assert res.benefit.Lambda == 0.0 and len(res.benefit.actions) == 3
    sec = _section((out / "report.md").read_text(encoding="utf-8"), "### Worst benefit pairs")
    assert "| level" not in sec and "no pair of levels contributes to Lambda" in sec, sec
    assert "health levels" in sec, sec


def test_a_nonzero_lambda_keeps_its_table(threshold):
    """The sentence replaces the table only at Lambda = 0: the threshold policy's worst
    pairs are still listed, with contributions that add up to at most Lambda."""
    res, out = threshold
    assert res.benefit.Lambda > 0.1
    sec = _section((out / "report.md").read_text(encoding="utf-8"), "### Worst benefit pairs")
    rows = [r for r in sec.splitlines() if r.startswith("| ") and not r.startswith("| level")]
    assert rows, sec
    contrib = [float(r.split("|")[8]) for r in rows]
    assert 0 < sum(contrib) <= res.benefit.Lambda + 1e-4 * len(rows)
    # the title says what the columns are: Delta's unit and the contribution's formula
    title = sec.splitlines()[0]
    assert "; Delta in the same unit as eps; weight: the product of the two cells' shares" in title
    assert "the terms of all pairs summing to Lambda; values rounded to 4 decimals)" in title
    b = res.benefit
    row = b.worst_pairs(1).iloc[0]  # the formula the title states, checked on the top row
    (ia,), (ib,) = (np.flatnonzero(np.asarray(b.levels) == row.iloc[k]) for k in (0, 1))
    a, c = b.pair
    gap_p = abs(b.p_d1[a, ia] - b.p_d1[c, ib])
    gap_d = abs(b.delta[a, ia] - b.delta[c, ib])
    assert row["contribution"] == pytest.approx(row["weight"] * gap_p * b.eps / (b.eps + gap_d))


# ------------------------------------------------------------- 4. the date of the audit
def test_the_pages_say_when_the_audit_ran(threshold):
    """audit.json's provenance.date (UTC) was in no page: the report's header line, the
    card's metadata and annex IV's validation section now state it."""
    res, out = threshold
    date = json.loads((out / "audit.json").read_text(encoding="utf-8"))["provenance"]["date"]
    assert date == res.date and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", date)
    md = (out / "report.md").read_text(encoding="utf-8")
    header = md.splitlines()[2]
    assert header.startswith("source: lending-1") and f"audited {date} (UTC)" in header
    assert f"audited {date} (UTC)" in (out / "report.html").read_text(encoding="utf-8")
    card = (out / "card.md").read_text(encoding="utf-8")
    assert f'\ndate: "{date}"  # UTC, when the audit ran\n' in card
    annex = (out / "annex-iv.md").read_text(encoding="utf-8")
    assert f"audited {date} (UTC)" in annex


def test_a_recorded_audit_without_a_date_renders_without_one(threshold):
    """An audit.json written before dates were recorded (the shipped examples) renders
    with no date line rather than today's: the report is of the recorded audit."""
    import copy

    from causalfair.report.render import render_report

    res, _ = threshold
    shown = copy.copy(res)
    prov = res.to_dict()["provenance"]
    prov.pop("date")
    shown.recorded_provenance = prov
    files = render_report(shown)
    for page in PAGES:
        assert "audited 20" not in files[page].decode(), page
    assert "\ndate:" not in files["card.md"].decode()


def test_the_regen_tier_ignores_the_date_as_it_ignores_timings(threshold, tmp_path):
    """The regen tier compares reports/examples/ byte for byte with a fresh
    regenerate.sh; the pages now state the date of the run, which differs run to run (and
    the shipped pages, rendered from an audit.json without one, state none): its
    normaliser drops the date from every page, and nothing else."""
    import copy

    from causalfair.report.render import render_report
    from tests.test_examples_regenerate import _normalised

    res, _ = threshold
    undated = copy.copy(res)
    prov = res.to_dict()["provenance"]
    prov.pop("date")
    undated.recorded_provenance = prov
    dated = copy.copy(res)
    dated.recorded_provenance = {**prov, "date": "2031-01-02T03:04:05Z"}
    a, b = render_report(undated), render_report(dated)
    for page in PAGES:
        (tmp_path / "a").mkdir(exist_ok=True)
        (tmp_path / "b").mkdir(exist_ok=True)
        (tmp_path / "a" / page).write_bytes(a[page])
        (tmp_path / "b" / page).write_bytes(b[page])
        assert a[page] != b[page], page  # the dated page states its date
        assert _normalised(tmp_path / "a" / page) == _normalised(tmp_path / "b" / page), page


# ------------------------------------------------- INCONCLUSIVE: what would settle it
def test_an_inconclusive_verdict_says_what_would_settle_it():
    """A FAIL report ends its opening with repair options; an INCONCLUSIVE one said only
    that the interval straddles the threshold. It now says by how much, how many times
    the sample would settle it (intervals narrow as 1 / sqrt(n): half-width 0.1 against
    a gap of 0.01 is (0.1 / 0.01)^2 = 100 times n), and that a system with a tabular
    model can be audited exactly."""
    from causalfair.report.explain import inconclusive_steps

    doc = {"decomposition": {"engine": "mc"}, "system": {"engines": ["exact", "mc"]},
           "spec": {"resolved": {"alpha": 0.05, "n": 5000}},
           "verdicts": [{"key": "abs_C", "threshold": 0.19, "estimate": 0.2, "lower": 0.1,
                         "upper": 0.3, "status": "INCONCLUSIVE"},
                        {"key": "Lambda", "threshold": 0.5, "estimate": 0.2, "lower": 0.1,
                         "upper": 0.3, "status": "PASS"}]}
    (step,) = inconclusive_steps(doc)
    assert step.startswith("To settle abs_C (INCONCLUSIVE): its 95% interval, 0.1000 to "
                           "0.3000 (half-width 0.1000), must lie on one side of the threshold "
                           "0.1900, which the estimate 0.2000 is 0.0100 from;"), step
    assert "about 100 times [engine] n (now 5000 per group)" in step, step
    assert step.endswith('[engine] kind = "exact" gives the value without sampling error.')
    doc["system"]["engines"] = ["mc"]  # no tabular model: no exact engine to suggest
    assert "exact" not in inconclusive_steps(doc)[0]
    doc["verdicts"][0]["status"] = "PASS"
    assert inconclusive_steps(doc) == []


def test_the_report_opens_an_inconclusive_summary_with_the_step(threshold):
    """The step is in the report's summary, where a FAIL's repair options are."""
    from causalfair.report.render import render_markdown

    res, _ = threshold
    doc = res.to_dict()
    doc["overall"] = "INCONCLUSIVE"
    doc["verdicts"][0].update(status="INCONCLUSIVE", lower=0.0, upper=0.2)
    md = render_markdown(res, doc, {})
    summary = _section(md, "## Summary")
    assert "To settle abs_C (INCONCLUSIVE): its 95% interval, 0.0000 to 0.2000" in summary

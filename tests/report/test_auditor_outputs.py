"""The outputs read as an auditor reads them: every document a three-group audit against a
baseline writes (report.md, audit.json, card.md, annex-iv.md, the gate's Markdown) says the
same numbers, names its groups and pairs, reads each threshold the way it is judged, and
validates against its published schema (docs/schema/), strictly enough to catch a
misspelt key or a wrong type."""

from __future__ import annotations

import copy
import json
import re

import pytest

import causalfair as cf
from causalfair.audit.shards import markdown
from causalfair.cli import main
from causalfair.report import render
from causalfair.report.card import card_markdown
from causalfair.report.explain import fmt
from causalfair.report.export import annex_iv
from tests.conftest import schema_errors
from tests.tri_system import tri_source

TRI = tri_source(2)


SPEC = '''
name = "tri-vs-uniform"
reference = "A"
[system]
factory = "tri:make"
[policy]
factory = "tri:policy"
[baseline]
builtin = "uniform"
[baseline.thresholds]
abs_C = 0.5
[thresholds]
"abs_C[B-A]" = 0.1
max_abs_C = 0.3
min_ratio_V = 0.3
'''


@pytest.fixture(scope="module")
def tri(tmp_path_factory):
    """A three-group exact audit with a ratio threshold and a [baseline] (attribution)."""
    folder = tmp_path_factory.mktemp("tri")
    (folder / "tri.py").write_text(TRI, encoding="utf-8")
    (folder / "tri.toml").write_text(SPEC, encoding="utf-8")
    res = cf.audit(folder / "tri.toml")
    return folder, res, json.loads(json.dumps(res.to_dict()))


def test_a_ratio_threshold_reads_at_least_in_every_output(tri):
    _, res, doc = tri
    assert "min_ratio_V" in [v["key"] for v in doc["verdicts"]]
    summary = {"schema_version": "1.0", "exit_code": 0, "inconclusive": "fail",
               "accept_repaired": False,
               "specs": [{"name": doc["name"], "overall": doc["overall"],
                          "verdicts": doc["verdicts"]}]}
    outputs = {"gate-merge --markdown": markdown(summary), "annex-iv.md": annex_iv(doc),
               "card.md": card_markdown(doc), "report.md": render.render_markdown(res, doc, {})}
    for name, text in outputs.items():
        assert re.search(r"min_ratio_V (\\)?>= 0\.3", text), name
        assert not re.search(r"min_ratio_V (\\)?<=", text), name  # the ratio is a floor


def test_three_group_exports_name_the_pairs_and_say_what_changed(tri):
    _, res, doc = tri
    pairs, att = doc["pairs"], doc["attribution"]
    for name, text in {"annex-iv.md": annex_iv(doc), "card.md": card_markdown(doc)}.items():
        assert "Pairs of groups" in text, name
        for pair, values in pairs["values"].items():
            row = next(line for line in text.splitlines() if line.startswith(f"| {pair}"))
            assert fmt(values["C"]["estimate"]) in row, (name, pair)
            assert fmt(values["ratio_V"]["estimate"]) in row, (name, pair)
        assert f"| {pairs['worst']} (worst; compared" in text, name  # the default pair
        assert "What changed against the baseline policy" in text, name
        assert f"C moved by {fmt(att['total']['C']['estimate'])} from" in text, name
        assert "in gain units" in text, name  # the changes carry their unit
    md = render.render_markdown(res, doc, {})
    assert "| worst pair, compared |" in md.split("### Pairs of groups", 1)[1]  # no unnamed column


def test_three_groups_lambda_and_its_worst_pairs_speak_of_the_pair_C_compares(tri):
    _, res, doc = tri
    a, b = doc["decomposition"]["pair"]
    assert doc["benefit"]["Lambda"] == doc["quantities"]["Lambda"]["estimate"]
    assert set(doc["benefit"]["worst_pairs"][0]) >= {f"level[{a}]", f"level[{b}]"}
    md = render.render_markdown(res, doc, {})
    assert f"### Worst benefit pairs of groups {a} and {b} (Lambda = " in md


def test_annex_iv_prints_no_python_none(tri):
    _, _, doc = tri
    text = annex_iv(doc)
    assert "None" not in text
    assert "no checkpoint" in text
    assert "95% confidence intervals; n/a: a value computed exactly" in text
    eps = doc["benefit"]["eps"]
    assert f"Lambda's eps (benefit gaps well below it count as equal benefit): {eps:.6g} gain " \
           f"units ({doc['benefit']['eps_source']})." in text  # the eps with its unit


def test_report_card_and_annex_agree_with_audit_json(tri):
    """The cross-check: every quantity of audit.json appears with the same value in the
    report's metrics table (6 decimals), the card (4 decimals) and annex-iv (6 digits)."""
    _, res, doc = tri
    md, card, annex = render.render_markdown(res, doc, {}), card_markdown(doc), annex_iv(doc)
    for k, q in doc["quantities"].items():
        e = q["estimate"]
        assert f"| {k} | {e:.6f} |" in md, k
        assert f"**{k} = {fmt(e)}" in card, k
        assert f"| {k} | {e:.6g} |" in annex, k
    for v in doc["verdicts"]:
        assert f"{v['estimate']:.6g}" in annex and v["status"] in annex


def _schema_problems(doc, schema, tmp_path):
    path = tmp_path / f"{schema}.mutant"  # not *.json: the session's schema check skips it
    path.write_text(json.dumps(doc), encoding="utf-8")
    return schema_errors(path, schema)


def test_audit_schema_catches_wrong_types_in_groups_benefit_and_system(tri, tmp_path):
    _, _, doc = tri
    assert _schema_problems(doc, "audit", tmp_path) == []
    mutations = {
        "decomposition/groups/A/V": lambda d: d["decomposition"]["groups"]["A"].update(V="x"),
        "benefit/eps": lambda d: d["benefit"].update(eps="0.1"),
        "benefit/eps_source": lambda d: d["benefit"].update(
            eps_src=d["benefit"].pop("eps_source")),
        "system/groups": lambda d: d["system"].update(groups="A"),
    }
    for name, mutate in mutations.items():
        bad = copy.deepcopy(doc)
        mutate(bad)
        assert _schema_problems(bad, "audit", tmp_path), name


def test_decompose_json_of_a_three_group_log_validates(tmp_path, capsys, monkeypatch):
    """decompose --logs --json with three groups: its `groups` is the group comparison (as
    in audit.json), its per-group values sit under `decomposition`."""
    (tmp_path / "tri.py").write_text(TRI, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "log.csv"
    assert main(["simulate-logs", "--system", "tri:make", "--policy", "tri:mixed", "--n", "600",
                 "--seed", "2", "--out", str(log)]) == 0
    capsys.readouterr()
    assert main(["decompose", "--logs", str(log), "--json", "--boot", "20"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["groups"]) >= {"reference", "values"} and "worst" in doc["pairs"]
    assert _schema_problems(doc, "decompose", tmp_path) == []
    bad = copy.deepcopy(doc)
    bad["decomposition"]["groups"]["A"]["V"] = "x"
    assert _schema_problems(bad, "decompose", tmp_path)
    bad = copy.deepcopy(doc)
    bad["pairs"]["values"]["B-A"]["C"]["estimate"] = "x"
    assert _schema_problems(bad, "decompose", tmp_path)


def test_gate_schema_types_the_utility(tri, tmp_path):
    _, _, doc = tri
    summary = {"schema_version": "1.0", "exit_code": 0, "inconclusive": "fail",
               "accept_repaired": False,
               "specs": [{"name": "x", "overall": "PASS", "verdicts": [], "utility": 1.5}]}
    assert _schema_problems(summary, "gate", tmp_path) == []
    summary["specs"][0]["utility"] = "1.5"
    assert _schema_problems(summary, "gate", tmp_path)


def test_a_part_that_rounds_to_zero_favours_no_group(tri):
    from causalfair.report.explain import sentences

    _, res, doc = tri
    doc = copy.deepcopy(doc)
    doc["quantities"]["IPE"].update(estimate=-1e-12, ci_lower=-1e-12, ci_upper=-1e-12)
    text = next(s.text for s in sentences(doc) if s.topic == "decomposition")
    assert "(IPE) contributes 0.0000, favouring neither group" in text
    assert "-0.0000" not in text
    assert render._fmt(-1e-12) == "0.000000"


@pytest.mark.parametrize("field, mutate", [
    ("decomposition.groups", lambda d: d["decomposition"].pop("groups")),
    ("overall", lambda d: d.pop("overall")),
    ("seeds", lambda d: d.update(seeds=[1])),
    ("selection", lambda d: d["selection"].pop("rate")),
    ("attribution", lambda d: d.update(attribution="x")),
])
def test_export_of_a_broken_audit_json_is_a_one_line_error_naming_the_field(
        tri, tmp_path, field, mutate):
    from causalfair.errors import InputError
    from causalfair.report.export import write_exports

    _, _, doc = tri
    bad = copy.deepcopy(doc)
    mutate(bad)
    path = tmp_path / "broken.audit"
    path.write_text(json.dumps(bad), encoding="utf-8")
    for kind in ("annex-iv", "ll144"):
        with pytest.raises(InputError, match=rf"broken.audit: {re.escape(field)}: missing or not"):
            write_exports(kind, path, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_threshold_sentences_carry_the_unit_and_read_a_ratio_as_a_floor(tri):
    from causalfair.report.explain import sentences

    _, _, doc = tri
    text = {s.topic: s.text for s in sentences(doc)}
    assert "The size of C[B-A] is 0.0" in text["threshold:abs_C[B-A]"]
    assert text["threshold:abs_C[B-A]"].split(" is ", 1)[1].split(";")[0].endswith("gain units")
    assert "The largest |C| over the pairs of groups is" in text["threshold:max_abs_C"]
    ratio = text["threshold:min_ratio_V"]
    assert ratio.startswith("min_ratio_V >= 0.3000: PASS") and "at or above the threshold" in ratio


def test_card_names_the_pair_its_numbers_compare(tri):
    _, _, doc = tri
    a, b = doc["decomposition"]["pair"]
    card = card_markdown(doc)
    assert f'pair: ["{a}", "{b}"]' in card
    assert f'name: "C[{a}-{b}]"' in card and f'name: "Lambda[{a}-{b}]"' in card
    assert f"| {b}-{a}" in card or f"| {a}-{b}" in card  # and the pairs table beside


def test_a_monte_carlo_report_says_its_other_notions_are_exact(tmp_path):
    """On a tabular system the Monte Carlo audit's other notions (utility included) are the
    model's exact values: the report says so beside the estimates it differs from."""
    (tmp_path / "tri.py").write_text(TRI, encoding="utf-8")
    (tmp_path / "mc.toml").write_text(
        'name = "mc"\n[system]\nfactory = "tri:make"\n[policy]\nfactory = "tri:policy"\n'
        '[engine]\nkind = "mc"\nn = 400\nseed = 1\n', encoding="utf-8")
    res = cf.audit(tmp_path / "mc.toml")
    titles = [t[0] for t in render._tables(res, None)]
    assert "Other notions (exact values from the tabular model; the metrics above are " \
           "Monte Carlo estimates)" in titles

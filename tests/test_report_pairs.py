"""The audit's pairs say which pair was compared and how it was chosen (audit.json
``pairs.compared`` / ``compared_by``, the report's and card.md's pairs tables), from the
same function as ``causalfair decompose`` (GroupComparison.compared_by / pairs_dict)."""

from __future__ import annotations

import json

import causalfair as cf
from causalfair.report.explain import pairs_lines
from causalfair.report.render import render_markdown
from tests.conftest import schema_errors
from tests.tri_system import tri_source

TRI = tri_source(1)  # V = (0.3, 0.24, 0.1) at T = 1: the largest |C| is A against C

SPEC = '''
name = "tri"
[system]
factory = "tri:make"
[policy]
factory = "tri:policy"
[engine]
{engine}
[thresholds]
max_abs_C = 0.3
'''


def _audit(tmp_path, engine='kind = "exact"'):
    (tmp_path / "tri.py").write_text(TRI, encoding="utf-8")
    path = tmp_path / "tri.toml"
    path.write_text(SPEC.format(engine=engine), encoding="utf-8")
    res = cf.audit(path)
    return res, json.loads(json.dumps(res.to_dict()))


def _pairs_tab(res, doc):
    """report.md's "Pairs of groups" section, Markdown escapes undone (no figures: fast)."""
    md = render_markdown(res, doc, {})
    head = md.index("### Pairs of groups")
    return md[head:md.index("###", head + 3)].replace("\\", "")


def test_default_pair_of_three_groups_is_named_as_chosen_from_the_data(tmp_path):
    res, doc = _audit(tmp_path)
    a, b = (res.decomposition.groups[i] for i in res.decomposition.pair)
    assert (a, b) == ("A", "C")  # the largest minus the smallest V^pi
    assert res.group_comparison.worst == "C-A"  # the table reads the pair the other way
    mark = "compared as A-C"
    pairs = doc["pairs"]
    assert pairs["compared"] == f"{a}-{b}" and pairs["compared_by"] == "largest_abs_C"
    # the same keys and values decompose --json gives (one function)
    gc = res.group_comparison
    same = gc.pairs_dict(res.decomposition.pair, named=False)
    assert (pairs["compared"], pairs["compared_by"]) == (same["compared"], same["compared_by"])
    (tmp_path / "audit.json").write_text(json.dumps(doc), encoding="utf-8")
    assert schema_errors(tmp_path / "audit.json", "audit") == []
    (tmp_path / "bad.json").write_text(json.dumps(
        {**doc, "pairs": {**pairs, "compared_by": "largest_C"}}), encoding="utf-8")
    assert schema_errors(tmp_path / "bad.json", "audit") != []
    tab = _pairs_tab(res, doc)
    row = next(x for x in tab.splitlines() if x.startswith(f"| {gc.worst} "))
    assert row.endswith(f"| worst, {mark} |")  # the compared pair is the worst pair here
    assert f"The audit compares {a}-{b}, the default: the pair with the largest |C|" in tab
    assert "[engine] pair compares another" in tab
    assert "covers less" not in tab  # exact values: no interval to cover
    card = pairs_lines(doc)  # card.md's and annex-iv.md's section
    assert f"| {gc.worst} (worst; {mark}) |" in "\n".join(card)


def test_a_named_pair_is_marked_and_said_named(tmp_path):
    res, doc = _audit(tmp_path, 'kind = "exact"\npair = "B-A"')
    assert doc["pairs"]["compared"] == "B-A" and doc["pairs"]["compared_by"] == "named"
    tab = _pairs_tab(res, doc)
    marked = [x for x in tab.splitlines()
              if x.startswith("| ") and not x.startswith("| pair ") and "compared" in x]
    assert len(marked) == 1 and marked[0].startswith("| B-A ")
    assert "the pair named in the spec ([engine] pair)" in tab
    lines = pairs_lines(doc)
    row = next(x for x in lines if x.startswith("| B-A"))
    assert "compared" in row
    assert sum("compared" in x for x in lines if x.startswith("| ")) == 1
    assert any("named in the spec" in x for x in lines)


def test_monte_carlo_default_pair_says_its_intervals_are_simultaneous(tmp_path):
    """The default pair of three groups under Monte Carlo: audit.json says its intervals are
    simultaneous over the 3 pairs; the report and the card say the command line's sentence
    (tests/test_pairs_honest.py)."""
    from causalfair._simultaneous import simultaneous_sentence

    res, doc = _audit(tmp_path, 'kind = "mc"\nn = 200\nseed = 1')
    assert doc["pairs"]["compared_by"] == "largest_abs_C"
    assert doc["pairs"]["simultaneous"]["pairs"] == 3
    assert doc["decomposition"]["simultaneous"]["pairs"] == 3
    (tmp_path / "audit.json").write_text(json.dumps(doc), encoding="utf-8")
    assert schema_errors(tmp_path / "audit.json", "audit") == []
    sentence = simultaneous_sentence(doc["pairs"]["compared"], 3, 0.05)
    tab = _pairs_tab(res, doc)
    assert sentence in tab and "covers less" not in tab
    assert any(sentence in x for x in pairs_lines(doc))


def test_without_the_keys_the_card_reads_as_before():
    doc = {"decomposition": {"groups": ["A", "B", "C"]},
           "pairs": {"worst": "C-A", "reference_pairs": ["B-A", "C-A"],
                     "values": {"B-A": {"C": {"estimate": -0.06}}, "C-A": {"C": {"estimate": -0.2}}}}}
    lines = pairs_lines(doc)
    assert not any("compared" in x for x in lines)
    assert "| C-A (worst) | -0.2000 |" in lines


TWO = """
name = "two"
horizon = 2
reference = "s-"
[model]
setting = "lending-1"
[policy]
builtin = "threshold:0.5"
[engine]
kind = "exact"
"""


def test_a_two_group_audit_with_a_reference_says_its_pair(tmp_path):
    """Two groups with a pairs section (a reference named): audit.json says compared and
    compared_by, as decompose --logs --json does, and the report marks the row."""
    (tmp_path / "two.toml").write_text(TWO, encoding="utf-8")
    res = cf.audit(tmp_path / "two.toml")
    doc = json.loads(json.dumps(res.to_dict()))
    assert set(doc["pairs"]) == {"worst", "reference_pairs", "values", "compared", "compared_by"}
    assert doc["pairs"]["compared_by"] == "first_minus_second"
    assert doc["pairs"]["compared"] == res.decomposition.pair_name
    tab = _pairs_tab(res, doc)
    assert "compared" in tab and "the default with two groups" in tab
    assert any("compared" in x for x in pairs_lines(doc))

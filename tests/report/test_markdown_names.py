"""User strings in card.md and annex-iv.md read as the text they are, escaped by the one
function report.md uses (causalfair.report.explain.md_escape), and code spans of names and
paths hold them whole (md_code)."""

from __future__ import annotations

import json
import re

import pytest

import causalfair as cf
from causalfair.report.card import card_markdown
from causalfair.report.explain import md_code, md_escape
from causalfair.report.export import annex_iv
from tests.conftest import skill_simulator


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("md")
    (tmp / "mdsim.py").write_text(skill_simulator(("*A*", "_B_", "[c](x)"), 2),
                                   encoding="utf-8")
    (tmp / "s.toml").write_text('name = "my_spec_"\n[system]\nfactory = "mdsim:make"\n'
                                '[policy]\nbuiltin = "uniform"\n[engine]\nn = 100\n'
                                '[thresholds]\nmax_abs_C = 0.5\n', encoding="utf-8")
    import sys
    sys.path.insert(0, str(tmp))
    try:
        return json.loads(json.dumps(cf.audit(tmp / "s.toml").to_dict()))
    finally:
        sys.path.remove(str(tmp))
        sys.modules.pop("mdsim", None)


def _unescaped(text: str, raw: str) -> bool:
    """Whether ``raw`` occurs in ``text`` with its first character not backslash-escaped."""
    return re.search(r"(?<!\\)" + re.escape(raw), text) is not None


@pytest.mark.parametrize("which", ["card.md", "annex-iv.md"])
def test_group_names_with_markdown_specials_read_as_text(doc, which):
    # before: card.md's and annex-iv.md's prose (the compared pair, the worst pair, the
    # verdicts) escaped only what starts HTML: "*A*" rendered as an emphasised A
    text = card_markdown(doc).split("\n---\n", 1)[1] if which == "card.md" else annex_iv(doc)
    for raw in ("*A*", "_B_", "[c](x)"):
        assert not _unescaped(text, raw), (which, raw)
    assert md_escape("*A*-_B_") in text or md_escape("_B_-*A*") in text or \
        md_escape("*A*-[c](x)") in text, which
    assert "\\*A\\*" in text and "\\_B\\_" in text and "\\[c\\](x)" in text


def test_a_path_with_a_backtick_keeps_its_code_span(doc):
    # before: "spec: `runs/a`b/s.toml`" closed the span after "a" and left "b/s.toml`"
    # open (a legal file name); a spec's name, allowed no such character, is escaped too
    assert doc["spec"]["file"].endswith("s.toml")
    odd = json.loads(json.dumps(doc))
    odd["spec"]["file"] = "runs/a`b/s.toml"
    assert "- spec: ``runs/a`b/s.toml``;" in annex_iv(odd)
    assert "# Fairness audit card: my_spec\\_\n" in card_markdown(doc)


@pytest.mark.parametrize("text,span", [("abc", "`abc`"), ("a`b", "``a`b``"),
                                       ("`x", "`` `x ``"), ("a``b`", "``` a``b` ```"),
                                       ("p\nq", "`p q`"), ("", "` `")])
def test_md_code_is_one_span_holding_the_text(text, span):
    assert md_code(text) == span


def test_card_front_matter_reads_back_a_group_name_beyond_the_bmp(tmp_path):
    # before: card.md's YAML wrote JSON's surrogate pair "\ud83d\ude00" for an emoji, which
    # YAML readers (PyYAML, the Hugging Face Hub) read as two lone surrogates: the pair's
    # group name was not the group's, and could not even be written as UTF-8
    import sys

    import yaml

    (tmp_path / "emosim.py").write_text(skill_simulator(("A \U0001f600", "B \u00e9"), 2),
                                        encoding="utf-8")
    (tmp_path / "s.toml").write_text('name = "emo"\n[system]\nfactory = "emosim:make"\n'
                                     '[policy]\nbuiltin = "uniform"\n[engine]\nn = 100\n',
                                     encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        card = card_markdown(cf.audit(tmp_path / "s.toml").to_dict())
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("emosim", None)
    front = yaml.safe_load(card.split("---\n")[1])
    assert sorted(front["pair"]) == ["A \U0001f600", "B \u00e9"]
    assert "\\U0001f600" in card and "\\ud83d" not in card


def test_report_md_figure_titles_quote_an_action_label_as_text(tmp_path):
    # before: report.md wrote "![Benefit fairness: Delta vs the probability of go] *now*]
    # (benefit.png)": the label's "]" ended the image's text, so the figure did not show
    import sys

    src = skill_simulator(("A", "B"), 2).replace(
        '    feature_names = ("skill",)',
        '    feature_names = ("skill",)\n    action_labels = ("wait", "go] *now*")')
    (tmp_path / "actsim.py").write_text(src, encoding="utf-8")
    (tmp_path / "s.toml").write_text('name = "act"\n[system]\nfactory = "actsim:make"\n'
                                     '[policy]\nbuiltin = "uniform"\n[engine]\nn = 100\n',
                                     encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        out = cf.audit(tmp_path / "s.toml").write_report(tmp_path / "out")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("actsim", None)
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "![Benefit fairness: Delta vs the probability of go\\] \\*now\\*](benefit.png)" in text
    assert not _unescaped(text, "go] *now*")


def test_annex_iv_quotes_the_systems_description_as_text(doc):
    # before: "- Simulated system audited: `m:make` (Loans <2024> for *beta*)" raw: the
    # description (a simulator's docstring, a System's description) rendered as HTML/markup
    odd = json.loads(json.dumps(doc))
    odd["system"]["description"] = "Loans <2024> for *beta* | v2"
    text = annex_iv(odd)
    line = next(ln for ln in text.splitlines() if ln.startswith("- Simulated system audited"))
    assert "(Loans \\<2024\\> for \\*beta\\* \\| v2)" in line, line

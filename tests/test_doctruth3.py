"""What README.md, docs/ci-gate.md and CHANGELOG.md say about the pairs of groups, the
16-core figures and today's options is what the code and docs/scale.md hold: README's
summary of the 16-core machine quotes docs/scale.md's current ratios (not the earlier
ones it keeps in brackets), the gate's table row and JUnit message ci-gate.md quotes for
a threshold over every pair are what the gate prints, and every option, benchmark option
and dotted name CHANGELOG.md's "Unreleased" section names exists (the checks of
tests/test_doc_truth.py, run on that section)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tests.test_doc_truth as doc_truth
from causalfair.audit.gate import run_gate
from tests.test_pairs import SPEC
from tests.tri_system import tri_source

ROOT = Path(__file__).resolve().parents[1]


def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_readme_quotes_the_current_16_core_ratios_of_docs_scale():
    readme = _flat(_text("README.md"))
    summary = readme.split("measured on a 16-core machine with an H100", 1)[1]
    summary = summary.split('docs/scale.md, "On a 16-core machine with an H100"', 1)[0]
    quoted = re.findall(r"\d+\.\d+x", summary)
    section = _text("docs/scale.md").split("### On a 16-core machine with an H100", 1)[1]
    section = section.split("\n## ", 1)[0]
    current = re.sub(r"\[[^\]]*\]", "", section)  # "[8.31x]": an earlier lease's figure
    assert len(quoted) >= 5, summary
    missing = [r for r in quoted if r not in current]
    assert not missing, (f"README's 16-core figures {missing} are not docs/scale.md's "
                         f"current ones (outside brackets): {summary!r}")


def test_ci_gate_quotes_what_the_gate_prints_for_a_threshold_over_every_pair(tmp_path):
    doc = _flat(_text("docs/ci-gate.md"))
    message = re.findall(r"`(max_Lambda = [^`]* at pair [^`]*)`", doc)
    row = re.findall(r"`(max_Lambda <= [^`]* \(pair [^`]*\))`", doc)
    assert message and row, "docs/ci-gate.md quotes no JUnit message or row naming a pair"
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    (tmp_path / "tri.toml").write_text(SPEC.format(engine=""), encoding="utf-8")
    gate = run_gate([tmp_path / "tri.toml"])
    junit, table = gate.to_junit(), gate.side_by_side()
    for m in message:
        assert f'message="{m}"' in junit, (m, junit)
    for r in row:
        assert r in table, (r, table)


def _unreleased(tmp_path: Path) -> Path:
    text = _text("CHANGELOG.md").split("## Unreleased", 1)[1]
    path = tmp_path / "CHANGELOG-unreleased.md"
    path.write_text(re.split(r"^## ", text, flags=re.M)[0], encoding="utf-8")
    return path


@pytest.mark.parametrize("check", ["test_every_cli_option_quoted_in_the_docs_exists",
                                   "test_every_benchmark_option_quoted_in_the_docs_exists",
                                   "test_dotted_names_in_the_docs_resolve"])
def test_changelog_unreleased_names_what_exists(tmp_path, monkeypatch, check):
    monkeypatch.setattr(doc_truth, "DOCS", [_unreleased(tmp_path)])
    getattr(doc_truth, check)()

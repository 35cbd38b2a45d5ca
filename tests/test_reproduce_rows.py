"""``causalfair audit --reproduce`` and a row deleted from audit.json: a key the
reproduction writes that the record lacks is a note only when another causalfair version
wrote the record (the format grows by keys); from the same version it was deleted (a
group's row, a quantity, a pair), and a deleted row is a difference, exit 1. Before, every
such key was a note and the reproduction passed: a quantity or a group's row could be
taken out of an audit.json unseen."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def recorded(tmp_path, cli_here):
    shutil.copy(ROOT / "audits" / "lending-1.toml", tmp_path / "spec.toml")
    proc = cli_here("audit", "spec.toml", "--no-report", "--json", cwd=tmp_path)
    return json.loads(proc.stdout)


def _reproduce(cli_here, tmp_path, doc):
    (tmp_path / "edited.audit").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return cli_here("audit", "--reproduce", "edited.audit", cwd=tmp_path)


@pytest.mark.parametrize("where", [("quantities", "Lambda"), ("benefit", "delta", "s-"),
                                   ("notions", "tpr", "s+"), ("benefit", "pair")])
def test_a_row_deleted_from_the_same_versions_record_is_a_difference(tmp_path, cli_here,
                                                                     recorded, where):
    doc = json.loads(json.dumps(recorded))
    block = doc
    for key in where[:-1]:
        block = block[key]
    assert where[-1] in block
    del block[where[-1]]
    proc = _reproduce(cli_here, tmp_path, doc)
    assert proc.returncode == 1, proc.stdout
    assert f"{'.'.join(where)}: recorded None, now" in proc.stdout, proc.stdout
    assert "written by a later causalfair" not in proc.stdout


def test_the_untouched_record_reproduces(tmp_path, cli_here, recorded):
    proc = _reproduce(cli_here, tmp_path, recorded)
    assert proc.returncode == 0 and "every number identical" in proc.stdout, proc.stdout


def test_another_versions_record_lacking_a_key_is_a_note(tmp_path, cli_here, recorded):
    doc = json.loads(json.dumps(recorded))
    del doc["quantities"]["Lambda"]
    doc["provenance"]["causalfair"] = "0.0.1"
    proc = _reproduce(cli_here, tmp_path, doc)
    assert proc.returncode == 0, proc.stdout
    assert "(written by a later causalfair): quantities.Lambda" in proc.stdout, proc.stdout
    assert "recorded with causalfair 0.0.1" in proc.stdout, proc.stdout


def test_report_files_are_compared_without_report_md(tmp_path):
    """`audit --reproduce` compared no report file when report.md was missing: a folder
    whose report.md was deleted and whose report.html (or annex-iv.md) was edited
    reproduced "bit for bit", exit 0, with no note. Every report file present is compared;
    a folder holding none says so."""
    from causalfair.audit.reproduce import _compare_report

    doc = {"spec": {"file": "s.toml"}, "provenance": {}}
    files = {"audit.json": b"{}", "report.md": b"# a\n", "report.html": b"<p>0.162747</p>\n",
             "annex-iv.md": b"C 0.162747\n"}
    (tmp_path / "report.html").write_bytes(b"<p>0.010000</p>\n")
    (tmp_path / "annex-iv.md").write_bytes(b"C 0.162747\n")
    differences: list[str] = []
    checked: list[str] = []
    notes: list[str] = []
    _compare_report(tmp_path, files, doc, doc, differences, checked, notes)
    assert [d.split(":")[0] for d in differences] == ["report.html"], differences
    assert "1 of 3 report files identical" in checked[0], checked
    assert any(n.startswith("report.md: not in the audit folder") for n in notes), notes

    alone = tmp_path / "alone"
    alone.mkdir()
    notes.clear()
    _compare_report(alone, files, doc, doc, differences, checked, notes)
    assert any("no report file beside audit.json" in n for n in notes), notes

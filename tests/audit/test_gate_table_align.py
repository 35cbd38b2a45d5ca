"""The gate's table keeps one column for the estimates however long a threshold's label
("utility drop vs baseline <= 0.5" is longer than the old fixed 22 characters)."""

from __future__ import annotations

import re

from causalfair.audit import run_gate
from tests.audit.test_baseline import _spec


def test_estimates_line_up_under_long_labels(tmp_path):
    spec = _spec(tmp_path, "exact", "abs_C = 0.01\nutility = 0.5")
    table = run_gate([str(spec)]).side_by_side()
    rows = [r for r in table.splitlines() if r.startswith("  ") and re.search(r"\d\.\d{6}", r)]
    assert any("vs baseline" in r for r in rows) and len(rows) >= 3, table
    ends = {re.search(r"-?\d+\.\d{6}", r).end() for r in rows}  # where each estimate ends
    assert len(ends) == 1, table


def test_estimates_line_up_in_terminal_columns_with_wide_group_names(tmp_path, monkeypatch):
    # before: labels were padded by characters; "(pair 男-女)" takes two columns more on a
    # terminal than it has characters, so its estimate stood two columns right of the others
    from causalfair._width import text_width
    from tests.conftest import skill_simulator

    (tmp_path / "cjk.py").write_text(skill_simulator(("男", "女 \U0001f600", "x"), 2),
                                     encoding="utf-8")
    (tmp_path / "s.toml").write_text(
        'name = "cjk"\n[system]\nfactory = "cjk:make"\n[policy]\nbuiltin = "uniform"\n'
        '[engine]\nn = 50\n[thresholds]\nabs_C = 0.5\nabs_DPE = 0.5\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    table = run_gate([str(tmp_path / "s.toml")]).side_by_side()
    rows = [r for r in table.splitlines() if r.startswith("  ") and re.search(r"\d\.\d{6}", r)]
    assert any("男" in r for r in rows) and len(rows) >= 3, table
    ends = {text_width(r[:re.search(r"-?\d+\.\d{6}", r).end()]) for r in rows}
    assert len(ends) == 1, table

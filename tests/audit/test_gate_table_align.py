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

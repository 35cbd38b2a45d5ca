"""The decomposition a log audit returns carries the log audit's own Lambda interval (the
normal hull the verdicts use), which contains its Lambda; it used to carry the fitted
model's exact-engine point [plug-in, plug-in], which could miss the thresholded Lambda."""

from __future__ import annotations

import numpy as np

import causalfair as cf
from causalfair.logs import audit_logs, simulate_logs
from causalfair.policies.core import TablePolicy


def test_decomposition_lambda_interval_is_the_log_audits():
    model = cf.systems.make("lending-1", levels=4).tabular
    p = np.array([[0.2, 0.4, 0.6, 0.8], [0.3, 0.5, 0.5, 0.7]])
    log = simulate_logs(model, TablePolicy(p), 300, 3, seed=2)
    a = audit_logs(log, n_boot=12, seed=0)
    d = a.decomposition
    assert d.Lambda_ci == a.lambda_interval(0.05, method="normal")
    assert d.Lambda_ci_level == 0.95
    assert d.Lambda_ci[0] <= d.Lambda <= d.Lambda_ci[1]
    assert audit_logs(log, n_boot=0).decomposition.Lambda_ci is None


def test_a_log_audit_counts_its_selection_rates_for_the_pairs():
    """`decompose --logs --json` had `ratio_selection: null` on every pair while the
    `[logs]` spec of the same log had values: the log audit now counts them itself."""
    from tests.logs.test_log_groups import tri_model

    p = np.array([[0.3, 0.8], [0.5, 0.6], [0.7, 0.4]])
    log = simulate_logs(tri_model(), TablePolicy(p), 300, 2, seed=3)
    a = audit_logs(log, n_boot=4, seed=1)
    sel = a.selection
    d1 = {g: int(((log["group"] == g) & (log["decision"] == 1)).sum()) /
          int((log["group"] == g).sum()) for g in ("A", "B", "C")}  # by hand from the log
    for g, rate in d1.items():
        assert sel["rate_overall"][g][sel["actions"][0]] == rate
    pairs = a.to_dict()["pairs"]["values"]
    ra, rb = d1["B"], d1["A"]
    assert pairs["B-A"]["ratio_selection"]["estimate"] == min(ra, rb) / max(ra, rb)

"""A log audit's benefit result carries the log audit's Lambda interval (h8sys F2b): it
said se 0 and the zero-width interval [Lambda, Lambda] (to_frame, and Lambda_ci), as for a
known model, while the same audit's decomposition gave the bootstrap hull."""

from __future__ import annotations

import causalfair as cf
from causalfair.logs.simulate import simulate_logs


def test_the_benefit_of_a_log_audit_has_its_bootstrap_interval():
    log = simulate_logs("lending-1", "random:0.5", n_individuals=300, horizon=3, seed=4)
    audit = cf.audit_logs(log, n_boot=20, seed=0)
    ben, dec = audit.benefit, audit.decomposition
    assert ben.Lambda_ci == dec.Lambda_ci and ben.Lambda_ci[0] < ben.Lambda_ci[1]
    row = ben.to_frame().iloc[0]
    assert (row["ci_lower"], row["ci_upper"]) == tuple(dec.Lambda_ci)
    assert row["se"] > 0

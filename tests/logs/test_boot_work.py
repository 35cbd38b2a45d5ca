"""h8bound F7: a log audit's bootstrap is bounded in time, not only in memory: each
replicate reweights every individual's visits, so n_boot x individuals x epochs (plus a
replicate's own fit) is counted against the work limit before the fit. 600,000
replicates of a 2,000-individual lending-1 log fit the memory and ran for about an hour;
of a 500,000-individual log, some 30 hours."""

from __future__ import annotations

import pytest

from causalfair.errors import ResourceLimitError
from causalfair.logs import audit_logs, simulate_logs
from causalfair.logs.bootstrap import REPLICATE_STEPS, check_boot_work


def test_the_bootstrap_is_counted_before_the_fit(monkeypatch):
    df = simulate_logs("lending-1", "random:0.5", 100, 5, seed=0)
    need = 20 * (100 * 5 + REPLICATE_STEPS)
    monkeypatch.setenv("CAUSALFAIR_MAX_UNIT_STEPS", str(need))
    audit_logs(df, n_boot=20, seed=0)  # at the limit: runs
    monkeypatch.setenv("CAUSALFAIR_MAX_UNIT_STEPS", str(need - 1))
    with pytest.raises(ResourceLimitError, match=r"audit_logs: bootstrap of 20 replicates of a "
                       r"log of 100 individuals over 5 epochs: .* over the limit.*lower n_boot"):
        audit_logs(df, n_boot=20, seed=0)


def test_a_bootstrap_that_fits_the_memory_can_still_be_refused():
    with pytest.raises(ResourceLimitError, match="unit-steps"):
        check_boot_work(600_000, 500_000, 20)
    check_boot_work(200, 500_000, 20)  # the default n_boot of a large log: fine

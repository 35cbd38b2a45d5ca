"""A log audit with one bootstrap replicate (audit_logs(n_boot=1), which Python still takes)
claims no interval, as with none: conf_int refuses, to_frame has no se or CI columns,
to_dict no "ci", summary no "95% percentile CI". It printed a "95% percentile CI" that was
the one replicate's value, a point that missed the estimate (C = +0.018 with the CI
[+0.065, +0.065]); decompose --logs --boot 1 and [logs] n_boot = 1 are refused."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.logs import audit_logs, simulate_logs
from causalfair.logs.errors import LogError
from causalfair.policies.core import TablePolicy


def test_one_replicate_claims_no_interval():
    model = cf.systems.make("lending-1", levels=3).tabular
    df = simulate_logs(model, TablePolicy(np.full((2, 3), 0.5)), 200, 2, seed=1)
    one = audit_logs(df, n_boot=1, seed=0)
    assert len(one.bootstrap) == 1
    with pytest.raises(LogError, match="n_boot >= 2"):
        one.conf_int()
    frame = one.to_frame()
    assert list(frame.columns) == ["estimate"]
    assert "ci" not in one.to_dict()
    assert "percentile CI" not in one.summary()
    two = audit_logs(df, n_boot=2, seed=0)
    assert {"se", "ci_lower", "ci_upper"} <= set(two.to_frame().columns)
    assert "ci" in two.to_dict() and "percentile CI" in two.summary()

"""audit_logs(policy=table) checks a supplied time-indexed table's epochs as every exact
door does (policies.grid.policy_table): one covering fewer epochs than the audit horizon
is refused in one line naming the epochs (it crashed with numpy's IndexError), a longer
one is read for its first T epochs."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CausalfairError
from causalfair.logs import audit_logs, simulate_logs
from causalfair.policies.core import TablePolicy


def _log():
    model = cf.systems.make("lending-1", levels=3).tabular
    return simulate_logs(model, TablePolicy(np.full((2, 3), 0.5)), 200, 3, seed=1)


def test_a_short_table_is_refused_naming_its_epochs():
    with pytest.raises(CausalfairError, match="covers 2 epochs, the horizon is 3"):
        audit_logs(_log(), n_boot=0, policy=np.full((2, 2, 3), 0.5))


def test_a_long_table_is_read_for_its_first_epochs():
    rng = np.random.default_rng(0)
    table = rng.random((6, 2, 3))
    df = _log()
    long, cut = (audit_logs(df, n_boot=0, policy=p) for p in (table, table[:3]))
    assert long.policy_table.shape == (3, 2, 3)
    assert (long.decomposition.C, long.decomposition.Lambda) == (cut.decomposition.C,
                                                                  cut.decomposition.Lambda)

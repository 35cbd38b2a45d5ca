"""simulate_logs resolves its policy by the rule of every door (policies.resolver.resolve,
then engines' epoch check, policies.grid.engine_policy): a time-indexed table must cover
the horizon (a TablePolicy of 2 epochs logged 3, its last row reused for the third), a
table of other (group, level) cells is refused, and an array is a table, as elsewhere (it
was refused as having no prob_d1). The logs of the policies it took are unchanged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from causalfair.errors import CausalfairError
from causalfair.logs import simulate_logs
from causalfair.policies.core import TablePolicy


@pytest.mark.parametrize("policy", [TablePolicy(np.full((2, 2, 7), 0.5)),
                                    np.full((2, 2, 7), 0.5)], ids=["object", "array"])
def test_a_short_time_indexed_table_is_refused(policy):
    with pytest.raises(CausalfairError, match="covers 2 epochs, horizon is 3"):
        simulate_logs("lending-1", policy, 50, 3, seed=1)


@pytest.mark.parametrize("shape", [(3, 7), (2, 5)])
def test_a_table_of_other_cells_is_refused(shape):
    with pytest.raises(CausalfairError, match="2 groups and 7 levels"):
        simulate_logs("lending-1", TablePolicy(np.full(shape, 0.5)), 50, 3, seed=1)


def test_an_array_is_a_table_and_the_logs_are_the_same():
    table = np.random.default_rng(0).random((2, 7))
    a = simulate_logs("lending-1", table, 200, 3, seed=4)
    b = simulate_logs("lending-1", TablePolicy(table), 200, 3, seed=4)
    pd.testing.assert_frame_equal(a, b)

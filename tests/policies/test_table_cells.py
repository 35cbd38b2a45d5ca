"""A policy table whose (group, level) cells are not the system's is refused in one line
by the resolver every door goes through (policies.resolver._in_memory), before any engine
reads it: on the Monte Carlo engines (decompose, Lambda_T by forks) fewer levels than the
system's crashed with numpy's IndexError, and more groups or levels were read in part
(Lambda_T by forks ran a (3, 7) table on two groups and a (2, 9) one on seven levels)."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import PolicyError

BAD = {"fewer levels": (2, 5), "more levels": (2, 9), "more groups": (3, 7),
       "per epoch, fewer levels": (3, 2, 5)}


@pytest.mark.parametrize("shape", list(BAD.values()), ids=list(BAD))
@pytest.mark.parametrize("door", ["decompose", "lambda_t"])
def test_a_table_of_other_cells_is_refused_on_monte_carlo(shape, door):
    system = cf.systems.make("lending-1")
    table = np.full(shape, 0.5)
    with pytest.raises(PolicyError, match="system 'lending-1' has 2 groups and 7 levels"):
        if door == "decompose":
            cf.decompose(system, table, 3, engine="mc", n=50)
        else:
            cf.benefit_fairness(system, table, 3, engine="mc", n=50, horizon_benefit=True)


def test_a_table_of_the_systems_cells_runs():
    system = cf.systems.make("lending-1")
    for table in (np.full((2, 7), 0.5), np.full((3, 2, 7), 0.5)):
        assert cf.decompose(system, table, 3, engine="mc", n=50).Lambda == 0.0


@pytest.mark.parametrize("shape", [(3, 7), (2, 5)])
def test_a_table_policy_of_other_cells_is_refused_too(shape):
    from causalfair.policies.core import TablePolicy

    with pytest.raises(PolicyError, match="system 'lending-1' has 2 groups and 7 levels"):
        cf.decompose(cf.systems.make("lending-1"), TablePolicy(np.full(shape, 0.5)), 3,
                     engine="mc", n=50)

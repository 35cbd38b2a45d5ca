"""cf.attribute on the exact engine checks a policy or baseline given as a table as every
exact door does (policies.grid.policy_table): a value outside [0, 1] or NaN, a wrong shape,
too few epochs are refused naming the argument, a longer time-indexed table is read for
its first T epochs. It took them as they were: 1.5 and NaN gave numbers, the shapes
crashed with numpy's ValueError or IndexError."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CausalfairError

BAD = {"above 1": np.full((2, 7), 1.5), "nan": np.full((2, 7), np.nan),
       "levels": np.full((2, 5), 0.5), "actions": np.full((2, 7, 2), 0.5),
       "epochs": np.full((2, 2, 7), 0.5)}


@pytest.mark.parametrize("which", ["policy", "baseline"])
@pytest.mark.parametrize("bad", list(BAD), ids=list(BAD))
def test_a_bad_table_is_refused_naming_the_argument(bad, which):
    model = cf.systems.make("lending-1").tabular
    args = (BAD[bad], "pi0") if which == "policy" else ("pi0", BAD[bad])
    with pytest.raises(CausalfairError, match=which):
        cf.attribute(model, *args, horizon=3)


def test_a_longer_table_is_read_for_its_first_epochs():
    model = cf.systems.make("lending-1").tabular
    rng = np.random.default_rng(0)
    long, flat = rng.random((6, 2, 7)), rng.random((2, 7))
    att = cf.attribute(model, long, flat, horizon=3)
    want = cf.decompose(model, long[:3], 3).C - cf.decompose(model, flat, 3, pair=att.pair).C
    assert abs(att.change - want) < 1e-12

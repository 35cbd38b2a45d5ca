"""The lending models bound their interest, so no expected reward overflows (one check,
causalfair.systems.lending.settings.check_interest, for every lending model)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from causalfair.model import ModelError
from causalfair.systems.lending.harder import harder_lending_model
from causalfair.systems.lending.settings import MAX_INTEREST, lending_setting
from tests.conftest import one_line_error, run_cli


@pytest.mark.parametrize("bad", [1e308, -0.5, float("nan"), float("inf"), True, "1"])
@pytest.mark.parametrize("make", [lambda i: lending_setting("lending-1", interest=i),
                                  harder_lending_model])
def test_bad_interest_is_refused_by_every_lending_model(make, bad):
    with pytest.raises(ModelError, match=r"interest: must be a number in \[0, 1e\+06\]"):
        make(bad)


def test_largest_interest_keeps_the_utility_finite():
    model = lending_setting("lending-1", interest=MAX_INTEREST).tabular
    T = 20
    # the largest expected total reward: every step approved and repaid at the cap
    assert math.isfinite(float(np.abs(model.reward).max()) * T)
    assert float(model.reward.max()) <= MAX_INTEREST


def test_cli_refuses_an_overflowing_interest_with_exit_2():
    err = one_line_error(run_cli("decompose", "--interest", "1e308"))
    assert "interest" in err and "1e+308" in err

"""cf.decompose checks gamma on every engine before any run (_validation.check_gamma in
engines.choice._decompose): on the Monte Carlo engine gamma=True passed for 1 and a
string "0.9" was refused as a discount the engine cannot apply, not as a bad value."""

from __future__ import annotations

import pytest

import causalfair as cf
from causalfair.errors import ModelError


@pytest.mark.parametrize("engine", ["exact", "mc"])
@pytest.mark.parametrize("gamma", [True, "0.9", 0, 1.5, float("nan")])
def test_a_bad_gamma_is_refused_on_every_engine(engine, gamma):
    with pytest.raises(ModelError, match="gamma: must be a number in"):
        cf.decompose(cf.systems.make("lending-1"), "threshold:0.5", 3, engine=engine, n=50,
                     gamma=gamma)


def test_a_discount_is_still_refused_by_monte_carlo():
    with pytest.raises(ModelError, match="undiscounted"):
        cf.decompose(cf.systems.make("lending-1"), "threshold:0.5", 3, engine="mc", n=50,
                     gamma=0.9)

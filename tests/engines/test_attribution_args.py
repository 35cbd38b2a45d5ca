"""cf.attribute checks alpha and gamma as every door does, on both engines, before any
run: on the Monte Carlo engine alpha = 0, 1, NaN or True raised a bare ValueError, a string
"0.05" was taken and alpha = 0.95 gave 5% intervals (every other door refuses it as a
confidence level given for the error level); on the exact engine any alpha was taken;
gamma = True passed for 1 on the Monte Carlo engine."""

from __future__ import annotations

import pytest

import causalfair as cf
from causalfair.errors import CausalfairError


@pytest.mark.parametrize("engine", ["exact", "mc"])
@pytest.mark.parametrize("alpha", [0, 1, float("nan"), True, "0.05", -1, 0.95])
def test_a_bad_alpha_is_refused(engine, alpha):
    with pytest.raises(CausalfairError, match="alpha"):
        cf.attribute(cf.systems.make("lending-1"), "threshold:0.5", "never", 3, engine=engine,
                     n=50, alpha=alpha)


@pytest.mark.parametrize("engine", ["exact", "mc"])
def test_gamma_true_is_refused(engine):
    with pytest.raises(CausalfairError, match="gamma"):
        cf.attribute(cf.systems.make("lending-1"), "threshold:0.5", "never", 3, engine=engine,
                     n=50, gamma=True)


def test_a_good_alpha_sets_the_level():
    att = cf.attribute(cf.systems.make("lending-1"), "threshold:0.5", "never", 3, engine="mc",
                       n=200, alpha=0.1)
    assert att.alpha == 0.1

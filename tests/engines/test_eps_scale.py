"""Lambda's eps (docs/decomposition.md, "eps: the benefit resolution"): a number is in the
gain's units; "auto" is 0.1 x the 90th percentile of |Delta|, so Lambda does not move when
the gain is rescaled; the doors default to what the system declares (lending: 0.1,
method.md section 4), else to "auto"; every result says how eps was chosen."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit import audit, load_spec
from causalfair.engines.benefit import auto_eps
from causalfair.errors import CausalfairError, SpecError
from causalfair.systems import as_system, make

POLICY = "threshold:0.5"


def _outside(scale: float):
    """lending-1's tabular model with its gain multiplied by ``scale``, as a system that
    declares no eps (an outside system)."""
    m = make("lending-1").tabular
    return as_system(dataclasses.replace(m, potential=m.potential * scale, name="outside",
                                         lambda_eps=None))


def test_auto_eps_by_hand():
    # |Delta| = 0..10: the 90th percentile is 9, so eps = 0.9
    eps, how = auto_eps(np.arange(11.0))
    assert eps == pytest.approx(0.9) and how.startswith("auto: 0.1 x the 90th percentile")
    # one large benefit among zeros: the quantile is 0, the largest sets the scale
    assert auto_eps(np.array([0.0] * 19 + [5.0]))[0] == pytest.approx(0.5)
    assert auto_eps(np.zeros(4))[0] == 1.0  # nothing to resolve: Lambda ignores eps


def test_lending_keeps_the_papers_eps():
    b = cf.benefit_fairness(make("lending-1"), POLICY)
    assert b.eps == 0.1 and b.eps_source.startswith("declared by system 'lending-1'")
    assert b.Lambda == pytest.approx(0.150485427444203, rel=1e-12)  # the golden value
    assert "in the gain's units, declared by system" in b.summary()
    assert b.to_dict()["eps_source"] == b.eps_source


def test_default_on_an_outside_system_is_scale_free():
    small, big = _outside(1.0), _outside(10.0)
    a, b = cf.benefit_fairness(small, POLICY), cf.benefit_fairness(big, POLICY)
    assert a.eps_source.startswith("auto") and b.eps == pytest.approx(10 * a.eps)
    assert a.Lambda == pytest.approx(b.Lambda, rel=1e-12)
    assert a.Lambda == pytest.approx(0.06873701328851513, rel=1e-9)
    # a fixed eps in the gain's units moves with the scale of the gain (the old default)
    f1, f10 = (cf.benefit_fairness(s, POLICY, eps=0.1).Lambda for s in (small, big))
    assert f1 == pytest.approx(0.150485427444203) and f10 < 0.2 * f1
    assert cf.benefit_fairness(small, POLICY, eps=0.1).eps_source == "given"
    # decompose's Lambda uses the same rule
    assert cf.decompose(big, POLICY).Lambda == pytest.approx(b.Lambda, rel=1e-12)


def test_auto_by_forks_is_scale_free_too():
    a = cf.benefit_fairness(_outside(1.0), POLICY, engine="mc", n=300)
    b = cf.benefit_fairness(_outside(10.0), POLICY, engine="mc", n=300)
    assert a.method == "mc" and a.eps_source.startswith("auto")
    assert b.eps == pytest.approx(10 * a.eps) and a.Lambda == pytest.approx(b.Lambda, rel=1e-9)


def test_spec_eps(tmp_path):
    base = 'name = "e"\nhorizon = 10\n[model]\nsetting = "lending-1"\n[thresholds]\nLambda = 1\n'
    p = tmp_path / "e.toml"
    p.write_text(base + '[benefit]\neps = "auto"\n', encoding="utf-8")
    res = audit(load_spec(p))
    assert res.benefit.eps_source.startswith("auto") and res.benefit.eps != 0.1
    p.write_text(base, encoding="utf-8")
    assert audit(load_spec(p)).benefit.eps_source.startswith("declared by system")
    p.write_text(base + '[benefit]\neps = "big"\n', encoding="utf-8")
    with pytest.raises(SpecError, match=r"\[benefit\] eps: bad value 'big'.*\"auto\""):
        load_spec(p)
    with pytest.raises(CausalfairError, match="eps: must be a number > 0"):
        cf.benefit_fairness(make("lending-1"), POLICY, eps="wide")

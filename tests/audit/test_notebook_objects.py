"""Notebook objects: fairlearn's MetricFrame vocabulary on results, the temporal
graph drawing itself inline, reprs with captions and the coloured verdict."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.audit import audit
from causalfair.errors import InputError
from causalfair.graph import temporal_graph

SPEC = {"name": "nb", "horizon": 12, "system": {"id": "lending-2"},
        "policy": {"builtin": "threshold:0.4"}, "thresholds": {"abs_C": 0.01}}


@pytest.fixture(scope="module")
def result():
    return audit(SPEC)


def test_by_group_overall_difference(result):
    d = result.decomposition
    bg = result.by_group
    assert list(bg.index) == list(d.groups)
    np.testing.assert_array_equal(bg["V"], d.V)
    np.testing.assert_array_equal(bg["direct"], d.V - d.V_ps)
    # the pair difference is the decomposition itself
    pair = result.difference("pair")
    for col, key in (("V", "C"), ("direct", "DPE"), ("indirect", "IPE"), ("spurious", "SPE")):
        assert pair[col] == pytest.approx(getattr(d, key), abs=1e-12)
    # between groups (fairlearn's default) is the absolute gap for two groups
    assert result.difference()["V"] == pytest.approx(abs(d.C), abs=1e-12)
    assert (result.difference() >= 0).all()
    # overall: the population-weighted values; its utility is the audit's utility
    w = np.asarray(d.group_weights) / np.sum(d.group_weights)
    assert d.overall["V"] == pytest.approx(float(w @ d.V), abs=1e-12)
    assert d.overall["utility"] == pytest.approx(d.total_utility, abs=1e-12)
    to_overall = result.difference("to_overall")
    assert to_overall["V"] == pytest.approx(float(np.max(np.abs(d.V - w @ d.V))), abs=1e-12)
    with pytest.raises(InputError, match="difference: method: unknown value 'max'"):
        result.difference("max")


def test_reprs_carry_captions_and_the_coloured_verdict(result):
    page = result._repr_html_()
    assert "color:#cf222e'>FAIL" in page  # the verdict, in red
    assert "FAIL: of 1 thresholds, 1 fails." in page  # the generated summary first
    assert page.index("Over T = 12 decisions") < page.index("<img")
    dec_html = result.decomposition._repr_html_()
    assert "C = DPE + IPE + SPE" in dec_html and "ci_lower" not in dec_html  # exact: one number
    mc = audit({**SPEC, "engine": {"kind": "mc", "n": 500, "seed": 0}}).decomposition
    assert "ci_lower" in mc._repr_html_() and "intervals at 95%" in mc._repr_html_()


def test_temporal_graph_draws_itself_inline(result):
    svg = temporal_graph(result.system.structure, 2)._repr_svg_()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "</svg>" in svg

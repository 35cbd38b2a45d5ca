"""Figures of publication quality: every text, legend and colour bar lies inside
its figure's canvas (the old graph caption was cut off), every axis has a label with a
unit, the worst-pair labels of the benefit figure do not overprint, and coinciding points
of the two groups stay visible (different markers, the second hollow)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from causalfair.audit import audit
from causalfair.report.render import DPI, make_figures

SPECS = {
    "exact": {"name": "exact", "horizon": 20, "system": {"id": "lending-1"},
              "policy": {"builtin": "threshold:0.5"},
              "thresholds": {"abs_C": 0.05, "Lambda": 0.1, "tpr_gap": 0.1}},
    "mc": {"name": "mc", "horizon": 8, "system": {"id": "lending-2"},
           "policy": {"builtin": "threshold:0.5"}, "engine": {"kind": "mc", "n": 2000, "seed": 1},
           "thresholds": {"abs_C": 0.05}},
    "long-names": {"name": "long", "horizon": 20, "system": {"id": "lending-3"},
                   "policy": {"builtin": "threshold:0.3"}, "thresholds": {"abs_C": 0.05}},
}


@pytest.fixture(scope="module", params=sorted(SPECS))
def figures(request):
    system = None
    if request.param == "long-names":  # long group names must not push text off the canvas
        import dataclasses

        from causalfair.systems.lending.settings import lending_setting

        system = dataclasses.replace(lending_setting("lending-3"), group_names=(
            "applicants of the first group", "applicants of group two"))
    r = audit(SPECS[request.param], system=system)
    return request.param, make_figures(r)


def _draw(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.set_dpi(DPI)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _texts(fig):
    """Every drawn text but tick labels (those count through the axes' tight boxes)."""
    out = list(fig.texts)
    for ax in fig.axes:
        out += [*ax.texts, ax.title, ax._left_title, ax._right_title, ax.xaxis.label,
                ax.yaxis.label]
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def test_nothing_leaves_the_canvas(figures):
    kind, figs = figures
    assert "waterfall" in figs
    for name, fig in figs.items():
        renderer = _draw(fig)
        W, H = fig.bbox.width, fig.bbox.height
        items = _texts(fig) + [lg for ax in fig.axes if (lg := ax.get_legend())] + fig.legends
        for t in items:
            bb = t.get_window_extent(renderer)
            assert bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1, (
                kind, name, getattr(t, "get_text", lambda: "legend")(), bb.bounds, (W, H))
        for ax in fig.axes:  # the axes themselves (and colour bars) inside too
            bb = ax.get_tightbbox(renderer)
            assert bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1, (kind, name)


def test_every_axis_has_a_unit(figures):
    kind, figs = figures
    for name, fig in figs.items():
        if name == "graph":  # a diagram, no axes
            continue
        for ax in fig.axes:
            if not ax.get_visible() or not ax.axison:
                continue
            is_colorbar = hasattr(ax, "_colorbar")
            labels = [ax.get_ylabel()] if is_colorbar else [ax.get_xlabel(), ax.get_ylabel()]
            if name in ("waterfall", "decomposition"):  # categorical x: ticks name the bars
                labels = [ax.get_ylabel()]
            if name == "notions":  # categorical y: each tick label carries its unit
                labels = [ax.get_xlabel()]
                assert all("(" in t.get_text() for t in ax.get_yticklabels()), (kind, name)
            if name == "levels":  # shared axes: the outer ones carry the labels
                labels = [t for t in labels if t] or ["(shared)"]
            for lab in labels:
                assert lab, (kind, name, "missing axis label")
                assert "(" in lab or lab == "(shared)" or lab == "level", (kind, name, lab)


def test_benefit_pair_labels_do_not_overprint(figures):
    kind, figs = figures
    fig = figs.get("benefit")
    if fig is None:
        pytest.skip("no benefit figure for this audit")
    renderer = _draw(fig)
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text().startswith("#")]
    assert labels
    boxes = [t.get_window_extent(renderer) for t in labels]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (kind, a.bounds, b.bounds)
    ranks = sorted(int(x.strip("#")) for t in labels for x in t.get_text().split(", "))
    assert ranks == list(range(1, len(ranks) + 1))


def test_groups_drawn_with_different_markers(figures):
    kind, figs = figures
    fig = figs.get("benefit")
    if fig is None:
        pytest.skip("no benefit figure for this audit")
    colls = [c for c in fig.axes[0].collections if len(c.get_offsets())]
    assert len(colls) == 2
    first, second = colls
    assert first.get_paths()[0] != second.get_paths()[0] or not np.array_equal(
        first.get_paths()[0].vertices, second.get_paths()[0].vertices)
    assert second.get_facecolor().size == 0 or np.all(second.get_facecolor()[:, 3] == 0)
    assert second.get_zorder() > first.get_zorder()

"""The notebook views of the result objects: ``BenefitResult.plot()`` (the report's benefit
figure, in the system's gain unit, into a given Axes too), ``Decomposition.to_frame(
pair_level=True)`` in the (pair, quantity) shape of the other pair results, the
``causalfair decompose`` tables with long group names, ``conf_int`` without a Lambda row
(audit.json reads it), and the plots' handling of group names and of ``ax``."""

from __future__ import annotations

import io
import re
import textwrap

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import causalfair as cf  # noqa: E402
from causalfair.cli import main  # noqa: E402
from causalfair.errors import InputError  # noqa: E402
from causalfair.model import TabularModel  # noqa: E402
from tests.test_analyst_user import GROUPS, K, _Credit, _cutoff  # noqa: E402


@pytest.fixture(scope="module")
def lending():
    return cf.lending_setting("lending-1").tabular


def _three(names=("A", "B", "C")) -> TabularModel:
    """docs/decomposition.md's three groups on two levels."""
    m, q, r = np.array([0.5, 0.8, 1.0]), np.array([0.6, 0.5, 0.4]), np.array([0.2, 0.1, 0.0])
    kernel = np.zeros((3, 2, 2, 2))
    for s in range(3):
        kernel[s, 0, 0], kernel[s, 1, 0], kernel[s, :, 1] = [1 - r[s], r[s]], [1 - q[s], q[s]], [0, 1]
    return TabularModel(kernel=kernel, initial=np.stack([m, 1 - m], 1),
                        potential=np.array([0.0, 1.0]), group_names=list(names))


_POLICY3 = np.array([[1.0, 0.0], [0.5, 0.0], [0.25, 0.0]])


def _credit_system() -> cf.System:
    return cf.System(id="credit", groups=GROUPS,
                     decisions=cf.DecisionSet(labels=("deny", "approve"), baseline=0),
                     features=("score",), levels=tuple(f"band{i}" for i in range(K)),
                     gain=cf.Gain("credit band gain", "bands"), horizon=4, simulator=_Credit)


def _scatters(ax) -> list[np.ndarray]:
    return [np.asarray(c.get_offsets(), dtype=float) for c in ax.collections
            if hasattr(c, "get_offsets") and len(c.get_offsets())]


# ------------------------------------------------------------------ BenefitResult.plot
def test_benefit_plot_draws_every_level_of_every_group_and_the_worst_pairs(lending):
    import matplotlib.pyplot as plt

    ben = cf.benefit_fairness(lending, "threshold:0.5", 8)
    before = plt.get_fignums()
    fig = ben.plot(n_worst=3)
    assert isinstance(fig, Figure) and plt.get_fignums() == before  # never shown
    ax = fig.axes[0]
    points = _scatters(ax)
    assert len(points) == 2
    for i in range(2):  # one point per level: (Delta, P(d1)) of the group
        np.testing.assert_array_equal(points[i], np.column_stack([ben.delta[i], ben.p_d1[i]]))
    pairs = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]
    assert len(pairs) == min(3, int((ben.contributions > 0).sum())) == 3
    # worst pair #1 joins the two levels of the largest contribution
    a, b = np.unravel_index(np.argmax(ben.contributions), ben.contributions.shape)
    np.testing.assert_array_equal(pairs[0].get_xdata(), [ben.delta[0, a], ben.delta[1, b]])
    assert ax.get_xlabel().endswith("(gain units)") and f"{ben.Lambda:.4f}" in ax.get_title()
    legend = " ".join(t.get_text() for t in fig.legends[0].get_texts())
    assert "s+ (area ~ P(x | s+))" in legend and "s- (area ~ P(x | s-))" in legend
    assert "(#1 = largest, 3 shown)" in legend


def test_benefit_plot_is_the_reports_benefit_figure(lending):
    r = cf.audit({"name": "t", "horizon": 8, "model": {"setting": "lending-1"},
                  "policy": {"builtin": "threshold:0.5"}, "benefit": {"worst": 4}})
    report = r.figures()["benefit"].axes[0]
    mine = r.benefit.plot(n_worst=4).axes[0]
    for x, y in zip(_scatters(report), _scatters(mine), strict=True):
        np.testing.assert_array_equal(x, y)
    assert [ln.get_xydata().tolist() for ln in report.get_lines()] == \
        [ln.get_xydata().tolist() for ln in mine.get_lines()]


def test_benefit_plot_says_the_systems_unit_and_draws_into_a_given_axes():
    ben = cf.benefit_fairness(_credit_system(), _cutoff, n=400, seed=0)
    assert ben.gain_unit == "bands" and ben.method == "mc"
    assert ben.plot().axes[0].get_xlabel().endswith("(bands)")
    assert ben.plot(unit="levels").axes[0].get_xlabel().endswith("(levels)")
    assert "P(approve | x, s)" not in ben.plot().axes[0].get_ylabel()  # approve: the paper's P(d1)
    dec = cf.decompose(_credit_system(), _cutoff, n=400, seed=0)
    assert dec.benefit.gain_unit == "bands"  # the decomposition's own benefit says it too
    slide = Figure(figsize=(12, 4))
    left, right = slide.subplots(1, 2)
    assert ben.plot(ax=right) is slide and dec.plot(ax=left) is slide
    assert len(slide.axes) == 2 and not slide.legends  # the legend stays inside its panel
    assert right.get_legend() is not None and right.get_xlabel().endswith("(bands)")


def test_benefit_plot_by_forks_leaves_out_the_levels_a_group_never_visits():
    ben = cf.benefit_fairness(_Credit(), _cutoff, n=400, seed=0)
    seen = np.asarray(ben.visited, dtype=bool)
    assert not seen.all()  # some group never visits some band: no estimate there
    points = _scatters(ben.plot().axes[0])
    for i, pts in enumerate(points):
        drawn = ~np.isnan(pts).any(axis=1)
        np.testing.assert_array_equal(drawn, seen[i])
        np.testing.assert_array_equal(pts[drawn], np.column_stack(
            [ben.delta[i], ben.p_d1[i]])[seen[i]])


def test_benefit_plot_with_more_actions_has_a_panel_per_action(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend("docs/examples")
    from clinic import make_clinic

    ben = cf.benefit_fairness(make_clinic(levels=4), "uniform", 4)
    assert ben.multi and ben.gain_unit == "health levels"
    fig = ben.plot()
    assert [ax.get_title() for ax in fig.axes] == ["action medication", "action surgery"]
    np.testing.assert_array_equal(_scatters(fig.axes[1])[0],
                                  np.column_stack([ben.delta[0, :, 2], ben.p_d1[0, :, 2]]))
    slide = Figure()
    ax = slide.subplots()
    assert ben.plot(action="surgery", ax=ax) is slide and len(slide.axes) == 1
    assert ax.get_ylabel() == "P(surgery | x, s) (probability)"
    assert ax.get_xlabel() == "benefit of surgery over the baseline (health levels)"
    with pytest.raises(InputError, match=r"^action: required with ax= for a result with 3 "
                                         r"actions \(one panel each\); name one of wait, "
                                         r"medication, surgery, or leave ax out\.$"):
        ben.plot(ax=ax)
    with pytest.raises(InputError, match=r"^action: bad value 'Surgery'; allowed values: wait, "
                                         r"medication, surgery\.$"):
        ben.plot(action="Surgery")


def test_benefit_plot_of_lambda_t_names_its_notion(lending):
    lam_t = cf.benefit_fairness(lending, "threshold:0.5", 4, horizon_benefit=True)
    ax = lam_t.plot().axes[0]
    assert f"(Lambda_T = {lam_t.Lambda:.4f})" in ax.get_title()
    assert ax.get_xlabel() == "benefit to the horizon Delta^T(x, s) (gain units)"
    np.testing.assert_array_equal(_scatters(ax)[1], np.column_stack([lam_t.delta[1],
                                                                     lam_t.p_d1[1]]))


def test_benefit_plot_refuses_bad_arguments_naming_them(lending):
    ben = cf.benefit_fairness(lending, "threshold:0.5", 4)
    with pytest.raises(InputError, match=r"^n_worst: must be an integer >= 0, got -1\.$"):
        ben.plot(n_worst=-1)
    with pytest.raises(InputError, match=r"^action: bad value 'd1'; only a result with more "
                                         r"than two actions"):
        ben.plot(action="d1")


# ------------------------------------------------------- every plot: ax, group names
def test_every_plot_refuses_an_array_of_axes_or_a_figure_naming_it(lending):
    dec = cf.decompose(lending, "threshold:0.5", 4)
    ben = cf.benefit_fairness(lending, "threshold:0.5", 4)
    g = cf.compare_groups(lending, "threshold:0.5", 4)
    fig = Figure()
    axes = fig.subplots(1, 2)
    for plot in (dec.plot, ben.plot, g.plot):
        with pytest.raises(InputError, match=r"^ax: expected one matplotlib Axes, got an array "
                                             r"of 2 Axes; pass one panel, e\.g\. ax=axes\[0\]"):
            plot(ax=axes)
        with pytest.raises(InputError, match=r"^ax: expected one matplotlib Axes, got a Figure"):
            plot(ax=fig)


def test_group_names_are_drawn_as_written_never_as_mathtext():
    model = _three((r"$\nope$", "B", "C"))
    dec = cf.decompose(model, _POLICY3, 1)
    for fig in (dec.plot(), cf.benefit_fairness(model, _POLICY3, 1).plot(),
                cf.compare_groups(model, _POLICY3, 1).plot()):
        fig.savefig(io.BytesIO(), format="png")  # was: ValueError, unknown symbol \nope
        texts = [t for ax in fig.axes for t in (ax.xaxis.label, ax.yaxis.label, ax.title,
                                                *ax.get_yticklabels())]
        texts += [t for leg in fig.legends for t in leg.get_texts()]
        assert any(r"$\nope$" in t.get_text() for t in texts)


# ----------------------------------------------------------------- one pandas shape
def test_a_decomposition_frame_concats_with_the_other_pair_results():
    model = _three()
    dec = cf.decompose(model, _POLICY3, 1, pair=("C", "A"))
    ben = cf.benefit_fairness(model, _POLICY3, 1, pair="C-A")
    g = cf.compare_groups(model, _POLICY3, 1, reference="A")
    framed = dec.to_frame(pair_level=True)
    assert dec.pair_name == "C-A" and framed.index.names == ["pair", "quantity"]
    assert framed.loc["C-A"].equals(dec.to_frame())  # the same rows, the pair named
    both = pd.concat([framed, ben.to_frame(), g.to_frame()], keys=["dec", "ben", "groups"],
                     names=["result"])
    assert both.index.names == ["result", "pair", "quantity"]
    assert list(both.columns) == ["estimate", "se", "ci_lower", "ci_upper"]
    for q in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert list(both.loc[("dec", "C-A", q)]) == pytest.approx(
            list(both.loc[("groups", "C-A", q)]), abs=1e-12), q
    assert list(both.loc[("dec", "C-A", "Lambda")]) == list(both.loc[("ben", "C-A", "Lambda")])
    assert dec.to_frame().index.name == "quantity"  # the default shape is the old one
    with pytest.raises(InputError, match=r"^pair_level: bad value 'yes'; give True"):
        dec.to_frame(pair_level="yes")


def test_conf_int_has_no_lambda_row_because_audit_json_reads_its_rows():
    dec = cf.decompose(_Credit(), _cutoff, n=400, seed=0)
    assert dec.Lambda is not None and "Lambda" in dec.to_frame().index
    ci = dec.conf_int(0.05)
    assert "Lambda" not in ci.index
    assert list(dec.to_dict()["ci95"]) == list(ci.index)  # audit.json's decomposition.ci95
    assert "No ``Lambda`` row" in type(dec).conf_int.__doc__


def test_the_repr_names_the_pair_and_lambda(lending):
    dec = cf.decompose(lending, "threshold:0.5", 8, pair=("s-", "s+"))
    assert repr(dec) == (f"Decomposition(engine='exact', pair=('s-', 's+'), C={dec.C:.6g}, "
                         f"DPE={dec.DPE:.6g}, IPE={dec.IPE:.6g}, SPE={dec.SPE:.6g}, "
                         f"Lambda={dec.Lambda:.6g})")


# ------------------------------------------------------ causalfair decompose's tables
_LONG = ("Applicants under twenty-five", "Applicants over sixty-five years")


@pytest.fixture()
def long_names(tmp_path, monkeypatch):
    (tmp_path / "longnames.py").write_text(textwrap.dedent(f"""
        import numpy as np
        from causalfair.model import TabularModel

        def make():
            kernel = np.zeros((2, 2, 2, 2))
            for s, (q, r) in enumerate(((0.6, 0.2), (0.4, 0.1))):
                kernel[s, 0, 0], kernel[s, 1, 0], kernel[s, :, 1] = [1 - r, r], [1 - q, q], [0, 1]
            return TabularModel(kernel=kernel, initial=np.array([[0.5, 0.5], [0.7, 0.3]]),
                                potential=np.array([0.0, 1.0]), group_names={list(_LONG)!r})
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return ["decompose", "--system", "longnames:make", "--policy", "random:0.5", "--horizon", "3"]


def _ends(line: str) -> list[int]:
    """Where each number of a table row ends (the columns are right-aligned)."""
    return [m.end() for m in re.finditer(r"[+-]?\d+\.\d+", line)]


def test_decompose_keeps_its_columns_with_long_group_names(long_names, capsys):
    assert main(long_names) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(ln for ln in lines if ln.lstrip().startswith("group") and "V^pi" in ln)
    rows = [ln for ln in lines if ln.lstrip().startswith(_LONG)]
    assert len(rows) == 2
    header_ends = [m.end() for m in re.finditer(r"\S+", head)][1:]  # V^pi ... indirect
    for row in rows:
        assert _ends(row) == header_ends, (head, row)


def test_decompose_mc_keeps_its_columns_with_long_group_names(long_names, capsys):
    assert main([*long_names, "--engine", "mc", "--n", "200"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(ln for ln in lines if ln.lstrip().startswith("quantity"))
    start = lines.index(head)
    rows = lines[start + 1: start + 18]  # C, DPE, IPE, SPE, 6 per group, utility
    assert any("indirect[Applicants over sixty-five years]" in r for r in rows)
    est_end, se_end = head.index("estimate") + len("estimate"), head.index(" se ") + 3
    for row in rows:
        assert _ends(row)[:2] == [est_end, se_end], (head, row)


def test_a_group_comparison_takes_alpha_as_the_other_frames_do():
    g = cf.compare_groups(_three(), _POLICY3, 1, reference="A")
    assert g.to_frame(0.1).equals(g.to_frame())  # exact: points at every level
    mc = cf.compare_groups(_Credit(), _cutoff, n=400, seed=0, alpha=0.1)
    assert mc.to_frame(0.1).equals(mc.to_frame())
    with pytest.raises(InputError, match=r"^alpha: 0\.05 asks for 95% intervals; this "
                                         r"comparison's are at 90%: compare again with "
                                         r"cf\.compare_groups\(\.\.\., alpha=0\.05\)\.$"):
        mc.to_frame(0.05)
    with pytest.raises(InputError, match=r"^alpha: must be in \(0, 1\), got 5"):
        g.to_frame(5)

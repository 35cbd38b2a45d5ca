"""A credit analyst's notebook session with four customer segments: groups named by their
names at every door, one pandas shape (estimate, se, ci_lower, ci_upper, the pair named)
for every result, figures that return themselves and label their axes, and one-line
errors for the inputs a notebook makes (a pandas table, a Series pair)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

import causalfair as cf
from causalfair.errors import CausalfairError, PolicyError
from causalfair.results import check_pair

GROUPS = ("prime", "near-prime", "thin-file", "young")
K = 5


@dataclass(frozen=True)
class _S:
    level: np.ndarray
    group: np.ndarray
    t: int = 0


class _Credit:
    """Four segments, credit bands 0..K-1, a score feature; approve moves the band up on
    repayment and down on default, deny keeps it (one noise column)."""

    n_groups = 4
    group_names = GROUPS
    feature_names = ("score",)
    n_levels = K
    horizon = 4

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        return _S(np.minimum(rng.integers(0, K, n) + (g == 0), K - 1), g)

    def observe(self, s):
        score = 300.0 + 550.0 * s.level / (K - 1)
        return cf.Observation(group=s.group, level=s.level, features=score[:, None], t=s.t)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, noise):
        repaid = noise < 0.3 + 0.6 * s.level / (K - 1) - 0.05 * s.group
        move = np.where(np.asarray(d) == 1, np.where(repaid, 1, -1), 0)
        nxt = np.clip(s.level + move, 0, K - 1)
        return cf.StepResult(state=_S(nxt, s.group, s.t + 1),
                             reward=np.where(np.asarray(d) == 1, np.where(repaid, 1.0, -3.0), 0.0),
                             gain=(nxt - s.level).astype(float))


def _cutoff(obs):
    return (obs.features[:, 0] >= 575.0).astype(float)


@pytest.fixture(scope="module")
def model():
    return cf.lending_setting("lending-1").tabular


@pytest.fixture(scope="module")
def credit():
    return _Credit()


# ------------------------------------------------------------------ groups by name
def test_decompose_and_benefit_fairness_take_the_pair_by_group_names(model):
    by_index = cf.decompose(model, "threshold:0.5", 8, pair=(1, 0))
    for pair in (("s-", "s+"), ["s-", "s+"], "s--s+", pd.Series([1, 0]), np.array([1, 0])):
        dec = cf.decompose(model, "threshold:0.5", 8, pair=pair)
        assert dec.pair == (1, 0) and dec.C == by_index.C == -cf.decompose(
            model, "threshold:0.5", 8).C
    ben = cf.benefit_fairness(model, "threshold:0.5", 8, pair=("s-", "s+"))
    assert ben.pair == (1, 0)
    assert ben.Lambda == cf.benefit_fairness(model, "threshold:0.5", 8, pair=(1, 0)).Lambda
    lam_t = cf.benefit_fairness(model, "threshold:0.5", 8, pair="s--s+", horizon_benefit=True)
    assert lam_t.pair == (1, 0)


def test_four_segments_by_name_agree_with_their_indices_and_the_group_comparison(credit):
    kw = dict(n=400, seed=0)
    named = cf.decompose(credit, _cutoff, pair=("thin-file", "prime"), **kw)
    assert named.pair == (2, 0)
    assert named.C == cf.decompose(credit, _cutoff, pair=(2, 0), **kw).C
    g = cf.compare_groups(credit, _cutoff, **kw)
    assert g.pairs["thin-file-prime"]["C"][0] == pytest.approx(named.C, abs=1e-12)


@pytest.mark.parametrize("pair, says", [
    (("prime", "Young"), "'Young' is not one of the groups"),
    (("young", "young"), "the same group 'young' twice"),
    ("prime+young", "names no two groups"),
])
def test_a_pair_that_names_no_two_groups_is_one_line_naming_them(credit, pair, says):
    with pytest.raises(CausalfairError) as err:
        cf.decompose(credit, _cutoff, n=50, pair=pair)
    msg = str(err.value)
    assert msg.startswith("pair: ") and says in msg and "\n" not in msg
    assert "prime, near-prime, thin-file, young" in msg


def test_a_pair_of_the_wrong_kind_is_one_line(model):
    with pytest.raises(CausalfairError) as err:
        cf.decompose(model, "threshold:0.5", 5, pair=pd.Series([0.5, 1.0]))
    msg = str(err.value)
    assert msg.startswith("pair: expected two group indices (integers), got (0.5, 1.0); ")
    assert "\n" not in msg and "names" in msg
    with pytest.raises(CausalfairError) as err:  # the engines' own check, one line too
        check_pair(pd.Series([0, 1], index=[7, 8]), 2, None)
    assert str(err.value).startswith("pair: expected two group indices (integers), got [0, 1]; ")


# ------------------------------------------------------------------ one pandas shape
def test_benefit_fairness_has_the_to_frame_of_every_other_result(model, credit):
    ex = cf.benefit_fairness(model, "threshold:0.5", 8)
    df = ex.to_frame()
    assert list(df.columns) == ["estimate", "se", "ci_lower", "ci_upper"]
    assert df.index.names == ["pair", "quantity"]  # as GroupComparison.to_frame()
    assert list(df.loc[("s+-s-", "Lambda")]) == [ex.Lambda, 0.0, ex.Lambda, ex.Lambda]
    dec = cf.decompose(model, "threshold:0.5", 8)
    assert list(df.loc[("s+-s-", "Lambda")]) == list(dec.to_frame().loc["Lambda"])

    mc = cf.benefit_fairness(credit, _cutoff, n=400, seed=0, pair=("young", "prime"))
    row = mc.to_frame().loc[("young-prime", "Lambda")]
    assert list(row) == [mc.Lambda, mc.se, mc.ci[0], mc.ci[1]]
    g = cf.compare_groups(credit, _cutoff, n=400, seed=0)
    assert g.quantity("young-prime", "Lambda") == (mc.Lambda, mc.ci[0], mc.ci[1], mc.se)
    assert list(g.to_frame().loc[("young-prime", "Lambda")]) == list(row)
    # another level: estimate +- z se floored at 0, as Decomposition.to_frame(alpha)
    lo, hi = mc.to_frame(0.5).loc[("young-prime", "Lambda"), ["ci_lower", "ci_upper"]]
    assert hi == pytest.approx(mc.Lambda + 0.6744897501960817 * mc.se, rel=1e-9)
    assert lo == pytest.approx(max(0.0, mc.Lambda - 0.6744897501960817 * mc.se), rel=1e-9)
    lam_t = cf.benefit_fairness(model, "threshold:0.5", 8, horizon_benefit=True)
    assert list(lam_t.to_frame().index) == [("s+-s-", "Lambda_T")]
    with pytest.raises(CausalfairError, match=r"^alpha: "):
        ex.to_frame(alpha=5)


def test_the_notebook_view_of_benefit_fairness_names_the_pair_notion_and_interval(model,
                                                                                  credit):
    mc = cf.benefit_fairness(credit, _cutoff, n=400, seed=0, pair=("young", "prime"))
    page = mc._repr_html_()
    assert "Lambda = " in page
    assert "young" in page.split("<table")[0] and "prime" in page.split("<table")[0]
    assert f"[{mc.ci[0]:.6f}, {mc.ci[1]:.6f}]" in page
    lam_t = cf.benefit_fairness(model, "threshold:0.5", 8, horizon_benefit=True)
    assert f"Lambda_T = {lam_t.Lambda:.6f}" in lam_t._repr_html_()


# ------------------------------------------------------------------ figures
def test_the_group_comparison_plots_every_pair_with_its_interval(credit, tmp_path,
                                                                 monkeypatch):
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    g = cf.compare_groups(credit, _cutoff, n=400, seed=0)
    before = plt.get_fignums()
    fig = g.plot(unit="bands")
    assert plt.get_fignums() == before and list(tmp_path.iterdir()) == []  # nothing opened
    (ax,) = fig.axes
    df = g.to_frame().xs("C", level="quantity")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(labels) == sorted(df.index) and len(labels) == 6
    assert any(g.worst in t.get_text() for t in ax.texts + [ax.title])
    assert "bands" in ax.get_xlabel() and "C" in ax.get_xlabel()
    # the drawn points and error bars are the table's estimates and intervals
    ys = {lab: tick for lab, tick in zip(labels, ax.get_yticks(), strict=True)}
    pts = np.vstack([line.get_xydata() for line in ax.lines if len(line.get_xydata()) == 6])
    for pair, row in df.iterrows():
        assert [row["estimate"], ys[pair]] in pts.tolist()
    segs = np.vstack([c.get_segments() for c in ax.collections if len(c.get_segments()) == 6])
    for pair, row in df.iterrows():
        assert [[row["ci_lower"], ys[pair]], [row["ci_upper"], ys[pair]]] in segs.tolist()
    lam = g.plot("Lambda").axes[0]
    assert "Lambda" in lam.get_xlabel()
    with pytest.raises(CausalfairError, match=r"^quantity: bad value 'c'; allowed values: C,"):
        g.plot("c")


# ------------------------------------------------------------------ notebook inputs
@pytest.mark.parametrize("kind", ["DataFrame", "Series", "list"])
def test_a_policy_table_in_pandas_or_a_list_names_the_numpy_array_it_must_be(model, kind):
    table = np.tile((np.arange(7) >= 4).astype(float), (2, 1))
    given = {"DataFrame": pd.DataFrame(table, index=["s+", "s-"]), "list": table.tolist(),
             "Series": pd.Series(table[0])}[kind]
    with pytest.raises(PolicyError) as err:
        cf.decompose(model, given, 5)
    msg = str(err.value)
    assert "\n" not in msg and f"cannot use {type(given).__name__} as a policy" in msg
    assert "np.asarray" in msg and "(G, K)" in msg and "group order" in msg
    assert cf.decompose(model, np.asarray(table), 5).C == cf.decompose(
        model, pd.DataFrame(table).to_numpy(), 5).C


def test_the_printed_group_comparison_has_fixed_decimals_and_says_n_a(credit):
    g = cf.compare_groups(credit, _cutoff, n=400, seed=0)
    assert g.pairs[g.worst]["ratio_selection"] is None  # not given: printed as n/a
    text = str(g)
    assert " None " not in text and "n/a" in text and not re.search(r"\de[-+]\d", text)
    c = g.pairs["thin-file-prime"]["C"]
    row = next(line for line in text.splitlines() if line.split()[0] == "thin-file-prime")
    assert row.split()[1:4] == [f"{v:.6f}" for v in c[:3]]
    page = g._repr_html_()  # the notebook view: the same n/a
    assert "<td>None</td>" not in page and "<td>n/a</td>" in page


def test_the_verdicts_frame_names_its_interval_as_every_other_frame():
    r = cf.audit({"name": "t", "horizon": 8, "model": {"setting": "lending-1"},
                  "policy": {"builtin": "threshold:0.5"}, "thresholds": {"abs_C": 0.05}})
    vf = r.verdicts_frame()
    assert list(vf.columns) == ["threshold", "estimate", "ci_lower", "ci_upper", "status"]
    qf = r.quantities_frame()
    assert vf.loc["abs_C", "estimate"] == abs(qf.loc["C", "estimate"])
    assert {"ci_lower", "ci_upper"} <= set(qf.columns) and "ci_lower" in r._repr_html_()


def test_the_frontier_prints_on_one_line_and_renders_its_table(model):
    from causalfair.engines.frontier import frontier

    front = frontier(model, 8, points=4)
    text = repr(front)
    assert "\n" not in text and len(text) < 250 and "LPResult" not in text
    assert text.startswith("Frontier(model='lending-1', horizon=8, constraint='C', points=4")
    assert f"utility {front.utilities.min():.6g}..{front.utilities.max():.6g}" in text
    page = front._repr_html_()
    assert "<table" in page and "utility" in page and "lending-1" in page


def test_figures_draw_into_the_axes_of_a_slide(model, credit):
    from matplotlib.figure import Figure

    slide = Figure(figsize=(12, 4))
    left, right = slide.subplots(1, 2)
    dec = cf.decompose(model, "threshold:0.5", 8)
    assert dec.plot(ax=left, unit="levels") is slide
    assert len(left.patches) == 4 and "levels" in left.get_ylabel()
    assert [round(p.get_height(), 12) for p in left.patches] == [
        round(getattr(dec, k), 12) for k in ("SPE", "IPE", "DPE", "C")]
    g = cf.compare_groups(credit, _cutoff, n=400, seed=0)
    assert g.plot(ax=right) is slide and right.get_yticklabels()[0].get_text()
    assert len(slide.axes) == 2  # nothing added beside the two axes


def test_an_audit_has_the_to_frame_of_every_other_result():
    r = cf.audit({"name": "t", "horizon": 8, "model": {"setting": "lending-1"},
                  "policy": {"builtin": "threshold:0.5"}, "thresholds": {"abs_C": 0.05}})
    df = r.to_frame()
    assert df.equals(r.quantities_frame()) and df.index.name == "quantity"
    assert list(df.columns) == ["estimate", "se", "ci_lower", "ci_upper"]
    assert df.loc["C", "estimate"] == cf.decompose(
        cf.lending_setting("lending-1").tabular, "threshold:0.5", 8).C
    # the same rows as the decomposition's own table: an exact point has se 0, as there
    dec = r.decomposition_frame()
    for k in ("C", "DPE", "IPE", "SPE", "utility", "Lambda"):
        assert list(df.loc[k]) == list(dec.loc[k]), k
    assert df["se"].dtype == float


def test_figures_of_a_system_say_its_gain_unit_without_being_told(credit):
    system = cf.System(id="credit", groups=GROUPS,
                       decisions=cf.DecisionSet(labels=("deny", "approve"), baseline=0),
                       features=("score",), levels=tuple(f"band{i}" for i in range(K)),
                       gain=cf.Gain("credit band gain", "bands"), horizon=4,
                       simulator=_Credit)
    dec = cf.decompose(system, _cutoff, n=400, seed=0)
    assert dec.gain_unit == "bands" and "(bands)" in dec.plot().axes[0].get_ylabel()
    assert "(levels)" in dec.plot(unit="levels").axes[0].get_ylabel()  # told: as told
    g = cf.compare_groups(system, _cutoff, n=400, seed=0)
    assert "(bands)" in g.plot().axes[0].get_xlabel()
    bare = cf.decompose(credit, _cutoff, n=400, seed=0)  # a simulator declares no unit
    assert bare.gain_unit == "gain units" and "(gain units)" in bare.plot().axes[0].get_ylabel()
    assert bare.C == dec.C  # the unit changes no number


def test_a_mistyped_quantity_of_a_pair_is_refused_not_none(credit):
    g = cf.compare_groups(credit, _cutoff, n=400, seed=0)
    assert g.quantity("prime-young", "C")[0] == -g.pairs["young-prime"]["C"][0]
    assert g.quantity("prime-young", "ratio_selection") is None  # known, not available
    for call in (lambda: g.quantity("prime-young", "c"), lambda: g.by_pair("lambda"),
                 lambda: g.over_pairs("dpe")):
        with pytest.raises(CausalfairError, match=r"^key: bad value '(c|lambda|dpe)'; allowed "
                                                  r"values: C, DPE, IPE, SPE, Lambda, ratio_V, "
                                                  r"ratio_selection\.$"):
            call()


def test_an_audits_own_plots_say_the_unit_its_report_figures_say():
    r = cf.audit({"name": "t", "horizon": 8, "model": {"setting": "lending-1"},
                  "policy": {"builtin": "threshold:0.5"}, "thresholds": {"abs_C": 0.05},
                  "reference": "s-"})
    report = r.figures()["waterfall"].axes[0].get_ylabel()
    assert r.decomposition.plot().axes[0].get_ylabel() == report
    assert r.system.gain.unit.split()[0] in report
    assert r.system.gain.unit.split()[0] in r.group_comparison.plot().axes[0].get_xlabel()


def test_an_attribution_has_the_to_frame_and_notebook_view_of_every_other_result(model,
                                                                                  credit):
    ex = cf.attribute(model, "threshold:0.5", "pi0", 8)
    df = ex.to_frame()
    assert list(df.columns) == ["estimate", "se", "ci_lower", "ci_upper"]
    assert df.index.names == ["pair", "quantity"]
    assert list(df.loc[("s+-s-", "C")]) == [ex.change, 0.0, ex.change, ex.change]
    row = df.loc[("s+-s-", "DPE"), "estimate"] + df.loc[("s+-s-", "IPE"), "estimate"]
    assert row == pytest.approx(ex.change, abs=1e-12)
    # the change in C is the policy's C minus pi0's, i.e. C minus SPE
    dec = cf.decompose(model, "threshold:0.5", 8)
    assert ex.change == pytest.approx(dec.C - dec.SPE, abs=1e-12)
    mc = cf.attribute(credit, _cutoff, "never", n=400, seed=0, alpha=0.1,
                      pair=("young", "prime"))
    assert mc.pair == (3, 0)
    e, s = mc.total["DPE"]
    lo, hi = mc.to_frame().loc[(mc.to_dict()["pair"][0] + "-" + mc.to_dict()["pair"][1],
                                "DPE"), ["ci_lower", "ci_upper"]]
    assert s > 0 and [lo, hi] == pytest.approx([e - 1.6448536269514722 * s,
                                                e + 1.6448536269514722 * s], rel=1e-12)
    page = ex._repr_html_()
    assert "<table" in page and "threshold:0.5" in page and "pi0" in page


def test_attribution_against_pi0_by_name_on_every_engine(model, credit):
    """"pi0" is a baseline of the exact attribution; the Monte Carlo one refused it as an
    unknown policy. It is the built-in "never" there (the baseline action everywhere)."""
    mc = cf.attribute(credit, _cutoff, "pi0", n=400, seed=0, pair="prime-young")
    assert mc.baseline == "pi0"
    never = cf.attribute(credit, _cutoff, "never", n=400, seed=0, pair=(0, 3))
    assert mc.total == never.total
    dec = cf.decompose(credit, _cutoff, n=400, seed=0, pair=(0, 3))
    assert mc.change == pytest.approx(dec.C - dec.SPE, abs=1e-12)  # same streams


def test_four_segments_agree_between_python_audit_and_the_command_line(tmp_path, cli_here):
    (tmp_path / "seg.py").write_text(
        "import causalfair as cf\n"
        "from tests.test_analyst_user import _Credit, _cutoff\n\n"
        "def make():\n    return _Credit()\n\n"
        "def policy():\n    return _cutoff\n")
    (tmp_path / "seg.toml").write_text(
        'name = "seg"\n[system]\nfactory = "seg:make"\n[policy]\nfactory = "seg:policy"\n'
        '[engine]\nkind = "mc"\nn = 400\nseed = 0\npair = ["young", "prime"]\n'
        '[thresholds]\nabs_C = 0.5\n')
    proc = cli_here("audit", "seg.toml", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cli = __import__("json").loads((tmp_path / "out" / "audit.json").read_text())
    py = cf.audit(tmp_path / "seg.toml")
    dec = cf.decompose(_Credit(), _cutoff, n=400, seed=0, pair=("young", "prime"))
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert cli["decomposition"][k] == getattr(py.decomposition, k) == getattr(dec, k), k
    g = cf.compare_groups(_Credit(), _cutoff, n=400, seed=0)
    assert cli["pairs"]["worst"] == py.group_comparison.worst == g.worst
    audited = py.group_comparison.to_frame()  # with ratio_selection: audits count selection
    audited = audited.drop("ratio_selection", level="quantity")
    # the audit named young-prime in advance; compare_groups chose it from the data, so its
    # row's intervals are simultaneous over the 6 pairs (tests/test_pairs_honest.py)
    assert g.chosen == "young-prime" and py.group_comparison.chosen is None
    others = [p for p in g.pairs if p != g.chosen]
    assert audited.loc[others].equals(g.to_frame().loc[others])
    assert audited.loc[g.chosen, "estimate"].equals(g.to_frame().loc[g.chosen, "estimate"])
    c, c_named = g.quantity(g.chosen, "C"), py.group_comparison.quantity(g.chosen, "C")
    assert c[2] - c[1] > c_named[2] - c_named[1]


@pytest.mark.parametrize("bad", [0.95, 0.9, 0.51])
def test_alpha_given_as_the_confidence_level_is_refused_naming_the_error_level(credit, bad):
    """alpha=0.95 "for 95% intervals" gave 5% intervals, silently (any alpha in (0, 1) was
    taken); an interval at a level under 50% is no audit's, so alpha is at most 0.5."""
    for call in (lambda: cf.decompose(credit, _cutoff, n=50, alpha=bad),
                 lambda: cf.decompose(credit, _cutoff, n=50).to_frame(bad)):
        with pytest.raises(CausalfairError) as err:
            call()
        msg = str(err.value)
        assert msg.startswith(f"alpha: {bad!r} is the error level of {100 * (1 - bad):g}% ")
        assert f"alpha={1 - bad:.2g}" in msg and "\n" not in msg
    assert len(cf.decompose(credit, _cutoff, n=50).conf_int(0.5)) > 0  # 50%: allowed


def test_a_count_written_1e4_says_to_write_the_integer(credit):
    with pytest.raises(CausalfairError) as err:
        cf.decompose(credit, _cutoff, n=1e4)
    assert str(err.value) == ("n: must be an integer >= 2, got 10000.0; write 10000 (a number "
                              "written 1e4 is a float).")


@pytest.mark.parametrize("engine", ["exact", "mc"])
def test_attribute_names_the_baseline_when_it_is_the_bad_argument(engine):
    """``cf.attribute(m, policy, 20)``, the horizon in the baseline's place, said "policy:
    cannot use int as a policy" (the policy was fine); the message names ``baseline``."""
    system = cf.systems.make("lending-1")
    with pytest.raises(cf.CausalfairError, match=r"^baseline: cannot use int as a policy"):
        cf.attribute(system, "threshold:0.5", 20, engine=engine, n=100)


def test_an_exact_value_in_a_monte_carlo_audit_has_no_interval_in_the_notebook_either():
    """Lambda (and the other notions) computed on the tabular model inside a Monte Carlo
    audit: report.md reads n/a and Decomposition.to_frame NaN; the audit's own table (its
    notebook view) said se 0 with a zero-width interval (docs/audit.md: "not a zero-width
    interval")."""
    import math

    r = cf.audit({"name": "t", "horizon": 8, "model": {"setting": "lending-1"},
                  "policy": {"builtin": "threshold:0.6"}, "engine": {"kind": "mc", "n": 200},
                  "thresholds": {"abs_C": 3.0}})
    q = r.to_frame()
    assert r.quantities["Lambda"][3] is None  # computed exactly: no standard error
    assert all(math.isnan(q.loc["Lambda", c]) for c in ("se", "ci_lower", "ci_upper"))
    dec = r.decomposition_frame().loc["Lambda"]
    assert math.isnan(dec["se"]) and math.isnan(dec["ci_lower"])
    assert q.loc["C", "se"] > 0 and q.loc["C", "ci_lower"] < q.loc["C", "ci_upper"]
    assert "<td>0.000000</td>" not in r._metrics_html().split("Lambda", 1)[1].split("</tr>")[0]

"""What a new user meets in a notebook and a report: Decomposition.plot(), short reprs, a
small AuditResult HTML, utility as the total, a readable worst-pairs table, no empty
"Other notions" table, no shares of a Lambda that is zero up to rounding, and a FAIL
report that opens with what drives the failure and how to repair it."""

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit import audit, load_spec
from causalfair.engines.attribution import attribute_exact
from causalfair.report import render
from causalfair.results import SHARE_FLOOR, BenefitResult


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    d = tmp_path_factory.mktemp("spec")
    spec = d / "f.toml"
    spec.write_text('name = "f"\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "threshold:0.5"\n'
                    "[thresholds]\nabs_C = 0.01\n")
    return audit(load_spec(spec))


def test_decomposition_plot_is_the_waterfall():
    m = cf.lending_setting("lending-1").tabular
    d = cf.decompose(m, "threshold:0.5", 20)
    fig = d.plot()
    ax = fig.axes[0]
    bars = [p for p in ax.patches]
    assert len(bars) == 4  # SPE, IPE, DPE, C
    assert [round(b.get_height(), 9) for b in bars] == [round(v, 9) for v in
                                                        (d.SPE, d.IPE, d.DPE, d.C)]
    assert [t.get_text().split(":")[0] for t in ax.get_xticklabels()] == ["SPE", "IPE", "DPE", "C"]


def test_utility_is_the_total_and_per_group_has_its_own_name():
    m = cf.lending_setting("lending-1").tabular
    d = cf.decompose(m, "threshold:0.5", 20)
    assert isinstance(d.utility, float)
    assert d.utility == pytest.approx(float(m.group_weights @ d.utility_by_group), abs=1e-15)
    assert d.utility == d.estimates()["utility"] == d.to_dict()["utility"]
    assert d.utility_by_group.shape == (2,)


def _benefit(Lambda: float, A: int = 3) -> BenefitResult:
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(A), size=(2, 2))
    return BenefitResult(
        Lambda=Lambda, eps=0.1, weights="visitation", delta=rng.normal(size=(2, 2, A)) / 3,
        p_d1=p, state_weights=np.full((2, 2), 0.5), contributions=np.full((2, 2), Lambda / 4),
        pair=(0, 1), groups=("a", "b"), levels=("1", "2"), dpe_prop1=0.0,
        actions=("wait", "drug", "surgery")[:A])


def test_benefit_repr_is_short():
    b = _benefit(0.2)
    text = repr(b)
    assert len(text) < 300 and "array(" not in text and "Lambda=0.2" in text
    assert "delta(2, 2, 3)" in text and "eps=0.1" in text


def test_worst_pairs_table_names_actions_and_rounds():
    b = _benefit(0.2)
    t = b.worst_pairs_table(2)
    assert list(t["action"]) == ["wait", "drug", "surgery"] * 2
    for col in ("Delta[a]", "Delta[b]", "pi[a]", "pi[b]", "contribution"):
        vals = t[col].to_numpy(dtype=float)
        assert np.array_equal(vals, np.round(vals, 4)), col
    assert "[" not in t.to_string().split("\n", 1)[1]  # no raw lists in the cells
    assert "share" in t.columns


def test_shares_only_above_the_floor():
    tiny = _benefit(1e-13, A=2)
    assert SHARE_FLOOR > 1e-13
    assert "share" not in tiny.worst_pairs_table().columns
    assert "share" in tiny.worst_pairs().columns  # the data (audit.json) keep it
    assert "not shown" in tiny.summary()


def test_audit_html_is_small(failing):
    h = failing._repr_html_()
    assert len(h) < 50_000 and h.count("<img") == 1
    assert "write_report" in h


def test_other_notions_table_omitted_when_empty(failing):
    titles = [t[0] for t in render._tables(failing, None)]
    assert "Other notions" in titles
    failing.notions, saved = {}, failing.notions
    try:
        titles = [t[0] for t in render._tables(failing, None)]
    finally:
        failing.notions = saved
    assert "Other notions" not in titles


def test_fail_report_opens_with_drivers_and_repairs(failing):
    doc = failing.to_dict()
    md = render.render_markdown(failing, doc, {})
    summary = md.split("## Summary", 1)[1].split("\n\n")
    assert summary[1].startswith("FAIL")
    drivers = summary[2]
    att = attribute_exact(failing.model, failing.policy_table, "pi0", 20)
    big = att.largest()
    assert drivers.startswith("What drives the failure of abs_C, against the baseline policy pi0")
    assert f"mostly the {big['path']} path ({big['path_estimate']:.4f})" in drivers
    assert f"step t = {big['step']}" in drivers
    assert f"{big['cells'][0]['group']} / level {big['cells'][0]['cell']}" in drivers
    assert "--retrain" in summary[3] and "Repair options" in summary[3]



def test_passing_report_has_no_drivers(tmp_path):
    spec = tmp_path / "p.toml"
    spec.write_text('name = "p"\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "threshold:0.5"\n'
                    "[thresholds]\nabs_C = 1.0\n")
    ok = audit(load_spec(spec))
    assert ok.overall == "PASS"
    assert "What drives" not in render.render_markdown(ok, ok.to_dict(), {})


@pytest.mark.parametrize("thresholds, path", [("abs_DPE = 0.05", "DPE"), ("IPE = -0.5", "IPE")])
def test_a_failing_part_of_c_is_explained_by_its_own_path(tmp_path, thresholds, path):
    """A failing abs_DPE alone opened with "What drives the failure of abs_DPE ...: mostly
    the IPE path (-0.0984), step t = 0 ..." (the attribution of C, whose largest path was
    the other one): false, a DPE is all on the DPE path. Its own path, step and cells are
    named; a failing SPE, which no policy changes, is never "driven" by a path."""
    spec = tmp_path / "p.toml"
    spec.write_text('name = "p"\n[system]\nid = "lending-1"\n[policy]\nbuiltin = '
                    f'"threshold:0.5"\n[thresholds]\n{thresholds}\nabs_SPE = 0.05\n')
    r = audit(load_spec(spec))
    assert r.overall == "FAIL"
    md = render.render_markdown(r, r.to_dict(), {})
    drivers = md.split("## Summary", 1)[1].split("\n\n")[2]
    att = attribute_exact(r.model, r.policy_table, "pi0", 20)
    i = ("DPE", "IPE").index(path)
    t = int(np.argmax(np.abs(att.by_step[i])))
    assert f": the {path} path itself ({att.total[path][0]:.4f}), mostly step t = {t} " \
           f"({att.by_step[i][t]:.4f})" in drivers, drivers
    assert "mostly the" not in drivers and f"(changes in {path}," in drivers
    assert "abs_SPE" not in drivers
    spe = md.split("## Summary", 1)[1].split("\n\n")[3]
    assert spe.startswith("Also failing: abs\\_SPE; SPE is the gap that exists without any "
                          "decision") or spe.startswith("Also failing: abs_SPE; SPE is"), spe

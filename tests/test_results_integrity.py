"""What a notebook can do to a result and what a result may hold: the names a result
prints are text, checked where a result is built (every engine builds one there)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import InputError
from tests.conftest import SMALL_SPEC


@pytest.fixture(scope="module")
def lending():
    return cf.lending_setting("lending-1").tabular


@pytest.mark.parametrize("bad", [5, 0, "", "  ", ["x"], b"pi"])
def test_a_policy_name_that_is_not_text_is_refused_by_every_engine(lending, bad):
    system = cf.systems.make("lending-1")
    for call in (lambda: cf.decompose(lending, "threshold:0.5", 2, policy_name=bad),
                 lambda: cf.decompose(system, "threshold:0.5", 2, engine="exact",
                                      policy_name=bad),
                 lambda: cf.decompose(system, "threshold:0.5", 2, engine="mc", n=20,
                                      policy_name=bad),
                 lambda: cf.attribute(lending, "threshold:0.5", "never", 2,
                                      policy_name=bad),
                 lambda: cf.attribute(lending, "threshold:0.5", "never", 2,
                                      baseline_name=bad)):
        with pytest.raises(InputError, match="_name: must be the policy's name as non-empty text"):
            call()


def test_a_decomposition_built_directly_checks_its_policy_name(lending):
    dec = cf.decompose(lending, "threshold:0.5", 2, policy_name="mine")
    assert dec.policy_name == "mine" and dec.to_dict()["policy"] == "mine"
    assert cf.decompose(lending, "threshold:0.5", 2).policy_name == "threshold:0.5"
    with pytest.raises(InputError, match="policy_name"):
        cf.Decomposition(**{**{f: getattr(dec, f) for f in dec.__dataclass_fields__},
                            "policy_name": 7})
    assert isinstance(np.asarray(dec.V), np.ndarray)


def test_a_results_arrays_are_read_only_so_an_in_place_op_cannot_rewrite_it(lending):
    dec = cf.decompose(lending, "threshold:0.5", 2)
    ben = cf.benefit_fairness(lending, "threshold:0.5", 2)
    C, lam = dec.C, ben.Lambda
    for res, names in ((dec, ("V", "V_ps", "V_0", "steps", "utility_by_group",
                              "group_weights")),
                       (ben, ("delta", "p_d1", "state_weights", "contributions"))):
        for again in (res, pickle.loads(pickle.dumps(res)), copy.deepcopy(res),
                      copy.copy(res)):
            for name in names:
                arr = getattr(again, name)
                with pytest.raises(ValueError, match="read-only"):
                    arr[...] = 0.0
                with pytest.raises(ValueError, match="read-only"):
                    arr += 1.0
    assert dec.C == C and ben.Lambda == lam
    v = dec.V.copy()  # a copy is the user's to change
    v -= dec.V_0
    assert np.allclose(v, dec.V - dec.V_0)
    by = dec.by_group  # the frames are copies: changing one leaves the result as it was
    by.iloc[0, 0] = 99.0
    assert dec.by_group.iloc[0, 0] == dec.V[0] != 99.0
    mc = cf.decompose(cf.systems.make("lending-1"), "threshold:0.5", 2, engine="mc", n=20)
    with pytest.raises(ValueError, match="read-only"):
        mc.decisions[...] = 0
    att = cf.attribute(lending, "threshold:0.5", "never", 2)
    change = att.change
    for again in (att, pickle.loads(pickle.dumps(att))):
        for name in ("by_step", "by_step_se", "by_cell", "by_cell_se"):
            with pytest.raises(ValueError, match="read-only"):
                getattr(again, name)[...] = 1.0
    assert att.change == change


def test_a_coupled_decompositions_paired_variances_are_read_only():
    dec = cf.decompose(cf.systems.make("attention-1"), "uniform", 2, engine="mc", n=20, seed=1)
    assert dec.paired_var
    for arr in dec.paired_var.values():
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 0.0


def test_an_attributions_arrays_are_read_only_too(lending):
    att = cf.attribute(lending, "threshold:0.5", "never", 2)
    for again in (att, pickle.loads(pickle.dumps(att)), copy.deepcopy(att)):
        for name in ("by_step", "by_step_se", "by_cell", "by_cell_se"):
            with pytest.raises(ValueError, match="read-only"):
                getattr(again, name)[...] = 0.0


def test_a_mistyped_keyword_is_an_input_error_naming_the_keyword_everywhere(lending, tmp_path):
    """The package docstring: "A mistyped keyword ... raises a CausalfairError naming the
    argument and the fix": every public method of the results with keywords, and the
    public functions, not Python's bare TypeError."""
    dec = cf.decompose(lending, "threshold:0.5", 2)
    ben = cf.benefit_fairness(lending, "threshold:0.5", 2)
    groups = cf.compare_groups(lending, "threshold:0.5", 2)
    att = cf.attribute(lending, "threshold:0.5", "never", 2)
    graph = cf.temporal_graph(lending, 2)
    calls = {
        "Decomposition.intervals": lambda: dec.intervals(alpah=0.1),
        "Decomposition.conf_int": lambda: dec.conf_int(alpah=0.1),
        "Decomposition.lambda_row": lambda: dec.lambda_row(alpah=0.1),
        "Decomposition.difference": lambda: dec.difference(methd="pair"),
        "Decomposition.summary": lambda: dec.summary(alpah=0.1),
        "Decomposition.simultaneous_note": lambda: dec.simultaneous_note(alpah=0.1),
        "BenefitResult.worst_pairs_table": lambda: ben.worst_pairs_table(digit=2),
        "BenefitResult.to_frame": lambda: ben.to_frame(alpah=0.1),
        "BenefitResult.plot": lambda: ben.plot(n_wrost=3),
        "BenefitResult.no_pairs_note": lambda: ben.no_pairs_note(cell="levels"),
        "BenefitResult.to_dict": lambda: ben.to_dict(n=3),
        "BenefitResult.summary": lambda: ben.summary(n=3),
        "GroupComparison.to_frame": lambda: groups.to_frame(alpah=0.1),
        "GroupComparison.plot": lambda: groups.plot(qty="C"),
        "GroupComparison.table_lines": lambda: groups.table_lines(compare=(0, 1)),
        "GroupComparison.pairs_dict": lambda: groups.pairs_dict(compare=(0, 1)),
        "Attribution.largest": lambda: att.largest(n=2),
        "Attribution.to_dict": lambda: att.to_dict(n=2),
        "Attribution.plot": lambda: att.plot(units="x"),
        "TemporalGraph.nodes": lambda: graph.nodes(knd="state"),
        "TemporalGraph.count_paths": lambda: graph.count_paths(src="S"),
        "TemporalGraph.to_dot": lambda: graph.to_dot(pth=None),
        "TemporalGraph.to_graphml": lambda: graph.to_graphml(pth=tmp_path / "g"),
        "TemporalGraph.to_gml": lambda: graph.to_gml(pth=None),
        "TemporalGraph.to_json": lambda: graph.to_json(pth=None),
        "TemporalGraph.draw": lambda: graph.draw(pth=tmp_path / "g.png"),
        "as_system": lambda: cf.as_system(lending, idd="x"),
        "potential_from_gain": lambda: cf.potential_from_gain(np.zeros((2, 2)), tl=1.0),
        "hypothetical_graphs": lambda: cf.hypothetical_graphs(lending, 2, reads_s=True),
        "as_policy": lambda: cf.as_policy("never", outputs="probs"),
    }
    for label, call in calls.items():
        with pytest.raises(InputError, match=rf"^{label}: unknown keyword argument"):
            call()


@pytest.mark.parametrize("unit", [3, 2.5, ["FICO"], True])
def test_every_plot_refuses_a_unit_that_is_not_text(lending, unit):
    dec = cf.decompose(lending, "threshold:0.5", 2)
    ben = cf.benefit_fairness(lending, "threshold:0.5", 2)
    groups = cf.compare_groups(lending, "threshold:0.5", 2)
    att = cf.attribute(lending, "threshold:0.5", "never", 2)
    for plot in (dec.plot, ben.plot, groups.plot, att.plot):
        with pytest.raises(InputError, match="unit: must be the gain's unit as text"):
            plot(unit=unit)
    assert groups.plot(unit="FICO points").axes[0].get_xlabel().count("FICO points") == 1


@pytest.mark.parametrize("cells", [5, None, "lvl", "levels"])
def test_a_benefit_summary_refuses_cells_it_cannot_name(lending, cells):
    ben = cf.benefit_fairness(lending, "threshold:0.5", 2)
    with pytest.raises(InputError, match="cells: bad value .*allowed values: level, state"):
        ben.summary(cells=cells)
    assert "state[s+]" in ben.summary(cells="state")


def test_an_audits_figures_are_a_new_dict_each_call(tmp_path):
    """Removing a figure from what figures() returned left the result without it."""
    spec = tmp_path / "rel.toml"
    spec.write_text(SMALL_SPEC)
    res = cf.audit(spec)
    figs = res.figures()
    names = list(figs)
    assert "waterfall" in names
    figs.pop("waterfall")
    figs.clear()
    again = res.figures()
    assert list(again) == names and again is not figs
    assert again["waterfall"] is res.figures()["waterfall"]  # built once, then cached


@pytest.fixture(scope="module")
def two_audits():
    spec = {"name": "rel", "horizon": 2, "system": {"id": "lending-1"},
            "policy": {"builtin": "threshold:0.5"}, "thresholds": {"abs_C": 1.0}}
    return cf.audit(spec), cf.audit(spec, policy="blind:0.5")


@pytest.mark.parametrize("names, said", [
    ("ab", "expected a list of names, one per audit, got str"),
    (["x", "x"], "'x' names two audits"),
    ([1, 2], "bad name '1'"),
    (["x", " "], "bad name ' '"),
    (["x"], "1 names for 2 audits"),
])
def test_compare_refuses_names_that_are_not_one_distinct_name_per_audit(two_audits, names,
                                                                         said):
    from causalfair.audit import compare

    with pytest.raises(InputError, match=f"^compare: names: .*{said}"):
        compare(*two_audits, names=names)
    assert compare(*two_audits, names=("before", "after")).index.tolist() == ["before",
                                                                              "after"]


def test_compare_refuses_no_audit():
    from causalfair.audit import compare

    with pytest.raises(InputError, match="compare: no audit given"):
        compare()


@pytest.mark.parametrize("bad", [5, None, ["a.toml"], b"a.toml", 2.5])
def test_an_audit_of_something_that_is_no_spec_is_a_spec_error_naming_it(bad):
    from causalfair.errors import SpecError

    with pytest.raises(SpecError, match=r"^audit spec: got .*give a spec file's path"):
        cf.audit(bad)
    with pytest.raises(SpecError, match=r"^audit spec: got "):
        cf.audit.load_spec(bad)


@pytest.mark.parametrize("alpha", [float("nan"), 2.0, 0.0, True, "0.05"])
def test_every_view_of_a_decomposition_checks_alpha_exact_or_sampled(lending, alpha):
    """lambda_row(2.0) returned NaN bounds, simultaneous_note(nan) "" and an exact result's
    summary(nan) its text: a bad alpha passed unseen where no interval was computed."""
    exact = cf.decompose(lending, "threshold:0.5", 2)
    mc = cf.decompose(cf.systems.make("lending-1"), "threshold:0.5", 2, engine="mc", n=20)
    for dec in (exact, mc):
        for view in (dec.lambda_row, dec.simultaneous_note, dec.summary, dec.to_frame,
                     dec.conf_int, dec.intervals, dec.plot):
            with pytest.raises(InputError, match="alpha: must be in"):
                view(alpha)
    assert exact.lambda_row(0.1) == exact.lambda_row() and mc.simultaneous_note(0.1) == ""


@pytest.mark.parametrize("flag", [1, 0, 1.0, np.float64(0.0)])
def test_a_graphs_policy_reads_s_is_a_flag_not_a_number(lending, flag):
    with pytest.raises(InputError, match="policy_reads_s: expected True or False"):
        cf.temporal_graph(lending, 2, policy_reads_s=flag)
    with pytest.raises(InputError, match="policy_reads_s: expected True or False"):
        cf.hypothetical_graphs(lending, 2, policy_reads_s=flag)
    assert cf.temporal_graph(lending, 2, policy_reads_s=np.bool_(False)).horizon == 2


@pytest.mark.parametrize("q", [True, False, np.bool_(True)])
def test_a_constant_policy_takes_a_probability_not_a_flag(q):
    from causalfair.errors import PolicyError

    with pytest.raises(PolicyError, match="q: must be a probability in"):
        cf.ConstantPolicy(q)
    assert cf.ConstantPolicy(1).q == 1 and cf.ConstantPolicy(0.25).q == 0.25

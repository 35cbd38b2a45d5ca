"""An analyst's notebook, second walk (three groups, a torch network in memory): the
findings the first walk left, each pinned by a test (a: compare refuses decompositions
naming what it takes; b: compare's numbers are float columns; d: a benefit result's dict
names its pair; f: rounding noise never prints as -0.000000; i: one check and one error
class per bad argument, values echoed as given; j: TemporalGraph.to_dict and its inline
SVG; l: a bare torch module is labelled with its layer widths)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit import audit, compare
from causalfair.errors import InputError, ModelError
from causalfair.model import TabularModel
from causalfair.systems.tabular_sim import TabularSimulator

GROUPS = ("north", "south", "east")


def _model() -> TabularModel:
    """Two levels; north moves up more often than the others (who share dynamics)."""
    kernel = np.zeros((3, 2, 2, 2))
    for s in range(3):
        q, r = (0.6, 0.2) if s == 0 else (0.5, 0.1)
        kernel[s, 0, 0], kernel[s, 1, 0], kernel[s, :, 1] = [1 - r, r], [1 - q, q], [0, 1]
    initial = np.array([[0.5, 0.5], [0.8, 0.2], [0.7, 0.3]])
    return TabularModel(kernel=kernel, initial=initial, potential=np.array([0.0, 1.0]),
                        group_names=list(GROUPS))


def _system(exact: bool = True) -> cf.System:
    model = _model()
    return cf.System(id="hiring3", groups=GROUPS, tabular=model if exact else None,
                     levels=("low", "high"), horizon=2,
                     simulator=lambda: TabularSimulator(model))


class HalfAtLow:
    name = "half-at-low"

    def prob_d1(self, obs):
        return np.where(np.asarray(obs.level) == 0, 0.5, 0.0)


# ------------------------------------------------------------------ a, b: cf.compare
def test_compare_of_decompositions_is_refused_naming_what_it_takes():
    """cf.compare(dec_a, dec_b) raised AttributeError "'Decomposition' object has no
    attribute 'decomposition'"; now an InputError naming what compare takes and the fix,
    and the fix it names works."""
    import pandas as pd

    system = _system()
    da, db = cf.decompose(system, HalfAtLow()), cf.decompose(system, "always")
    with pytest.raises(InputError, match=r"compare: argument 1 is a Decomposition; compare "
                                         r"takes audits \(cf\.audit") as info:
        cf.compare(da, db)
    msg = str(info.value)
    assert "pd.concat" in msg and "cf.attribute" in msg and "\n" not in msg
    side = pd.concat({"half": da.to_frame(), "always": db.to_frame()}, axis=1)  # the fix
    assert side.loc["C", ("always", "estimate")] == db.C
    with pytest.raises(InputError, match=r"argument 2 is a str"):
        cf.compare(audit({"name": "x"}, system=system, policy=HalfAtLow()), "always")


def test_compare_table_has_float_columns_for_the_numbers_and_the_same_text():
    """Every column of compare's table was object dtype (pair and verdict rows among the
    numbers); now one row per audit: the numbers are float64 columns, the pair, verdicts
    and overall text columns holding the same text as before."""
    system = _system()
    spec = {"name": "three", "thresholds": {"abs_C": 0.05, "Lambda": 10.0}}
    r1 = audit(spec, system=system, policy=HalfAtLow())
    r2 = audit(spec, system=system, policy="always")
    table = compare(r1, r2, names=["half", "always"])
    assert list(table.index) == ["half", "always"] and table.index.name == "audit"
    numbers = [k for k in table.columns if k not in ("pair", "overall")
               and not k.startswith("verdict ")]
    assert {"C", "DPE", "IPE", "SPE", "Lambda"} <= set(numbers)
    assert all(table[k].dtype == np.float64 for k in numbers), dict(table.dtypes)
    for name, r in (("half", r1), ("always", r2)):
        a, b = r.decomposition.pair
        assert table.loc[name, "pair"] == f"{GROUPS[a]}-{GROUPS[b]}"
        assert table.loc[name, "C"] == r.decomposition.C
        for v in r.verdicts:
            assert table.loc[name, f"verdict {v.label}"] == v.status
        assert table.loc[name, "overall"] == r.overall
    text = table.to_string()
    assert "verdict abs_C <= 0.05" in text and r1.overall in text
    same = compare(r1, r1)  # one row per audit, even under one name (was one column)
    assert same.index.tolist() == ["half-at-low"] * 2 and same["C"].tolist() == [r1.decomposition.C] * 2
    with pytest.raises(InputError, match=r"names: 1 names for 2 audits"):
        compare(r1, r2, names=["half"])


# ------------------------------------------------------------------ d: BenefitResult.to_dict
def test_benefit_to_dict_names_its_pair_as_the_decomposition_does():
    system = _system(exact=False)
    ben = cf.benefit_fairness(system, HalfAtLow(), n=300, seed=0, pair=("east", "north"))
    assert ben.to_dict()["pair"] == ["east", "north"]
    r = audit({"name": "p", "engine": {"n": 300, "seed": 0}}, system=system, policy=HalfAtLow())
    doc = r.to_dict()
    assert doc["benefit"]["pair"] == doc["decomposition"]["pair"]
    exact = cf.benefit_fairness(_model(), HalfAtLow(), 3)
    a, b = exact.pair
    assert exact.to_dict()["pair"] == [GROUPS[a], GROUPS[b]]


# ------------------------------------------------------------------ f: no negative zero
def test_fixed_prints_no_negative_zero():
    from causalfair._io import fixed

    assert fixed(-4.4e-16) == "0.000000" and fixed(4.4e-16) == "0.000000"
    assert fixed(-4.4e-16, sign=True) == "+0.000000"
    assert fixed(-4.4e-16, sign=True, width=10) == " +0.000000"
    assert fixed(-0.25, 4) == "-0.2500" and fixed(0.25, sign=True) == "+0.250000"


def test_rounding_noise_prints_no_negative_zero_in_the_text_outputs():
    """A quantity that is rounding noise (IPE 4.4e-16 of a simulator whose baseline gain
    does not depend on the state) printed as -0.000000 in compare_groups' text (the pair
    order flips its sign); every text output of the decomposition prints 0.000000."""
    system = _system(exact=False)
    dec = cf.decompose(system, HalfAtLow(), n=300, seed=0)
    gc = cf.compare_groups(system, HalfAtLow(), n=300, seed=0)
    noise = (-4.4e-16, -4.7e-16, -4.2e-16, 1.2e-17)
    pairs = {p: {**q, "IPE": noise} for p, q in gc.pairs.items()}
    gc = dataclasses.replace(gc, pairs=pairs)
    texts = [str(gc), gc._repr_html_(), "\n".join(gc.table_lines(dec.pair))]
    noisy = dataclasses.replace(dec, V_ps=dec.V_0 - 4.4e-16, V=dec.V_0 - 4.4e-16)
    texts += [str(noisy), noisy.summary() if hasattr(noisy, "summary") else ""]
    for text in texts:
        assert "-0.000000" not in text, text
    assert "0.000000" in texts[0]


# ------------------------------------------------------------------ i: one check, one class
def test_weights_is_one_check_with_one_class_at_every_door():
    """weights= gave ModelError in cf.decompose and InputError in cf.benefit_fairness; now
    one check (causalfair._validation.check_weights) and one class, ModelError (the exact
    engine's, a subclass of InputError), with one message per bad value."""
    system = _system(exact=False)
    for bad, said in (("uniform", r"weights: unknown value 'uniform'; allowed values: "
                                  r"visitation, initial\."),
                      ("initial", r"weights: bad value 'initial'; .*needs the exact engine")):
        msgs = set()
        for door, extra in ((cf.decompose, {}), (cf.benefit_fairness, {}),
                            (cf.benefit_fairness, {"horizon_benefit": True})):
            with pytest.raises(ModelError, match=said) as info:
                door(system, HalfAtLow(), n=200, weights=bad, **extra)
            msgs.add(str(info.value))
        assert len(msgs) == 1, msgs
    with pytest.raises(ModelError, match="weights: unknown value 'uniform'"):
        cf.decompose(_model(), HalfAtLow(), 3, weights="uniform")  # the exact engine alike


def test_bad_reference_jobs_and_engine_are_echoed_as_given():
    system = _system(exact=False)
    with pytest.raises(InputError, match=r"reference: bad value 5; name one of the groups"):
        cf.compare_groups(system, HalfAtLow(), n=200, reference=5)
    with pytest.raises(InputError, match=r"reference: bad value 'west'; "):
        cf.compare_groups(system, HalfAtLow(), n=200, reference="west")
    with pytest.raises(InputError, match=r"jobs: bad value 0; give a whole number >= 1"):
        cf.decompose(system, HalfAtLow(), n=200, jobs=0)
    with pytest.raises(InputError, match=r"engine: bad value 1; allowed values"):
        cf.decompose(system, HalfAtLow(), n=200, engine=1)
    from causalfair.backends import resolve_jobs

    with pytest.raises(InputError, match=r"--jobs: bad value '0'"):  # typed: a string
        resolve_jobs("0", "--jobs")


# ------------------------------------------------------------------ j: TemporalGraph
def test_temporal_graph_to_dict_is_what_to_json_writes_and_draws_inline():
    g = cf.temporal_graph(_model(), 2)
    d = g.to_dict()
    assert d == json.loads(g.to_json())
    kinds = {n["id"]: n["kind"] for n in d["nodes"]}
    assert kinds["S"] == "sensitive" and kinds["D0"] == "decision" and kinds["G1"] == "gain"
    assert [tuple(e) for e in d["edges"]] == g.edges()
    assert d["horizon"] == 2 and d["variant"] == "pi"
    svg = g._repr_svg_()
    assert svg is not None and "<svg" in svg


# ------------------------------------------------------------------ l: a bare torch module
def test_bare_torch_module_is_labelled_with_its_layer_widths():
    torch = pytest.importorskip("torch")
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 8), nn.ReLU(),
                        nn.Linear(8, 1))
    dec = cf.decompose(_model(), net, 2)  # one-hot: 2 levels + 3 groups
    assert dec.policy_name == "torch Sequential(5-16-8-1)"
    assert "torch Sequential(5-16-8-1)" in str(dec)
    named = cf.TorchPolicy(net, cf.FeatureEncoding("onehot", 2, 3), name="mlp")
    assert cf.as_policy(named, _model()).name == "mlp"  # a name given stays

"""The Python API as an analyst in a notebook uses it: bad arguments get one causalfair
error naming the argument, the bad value and the fix (never a bare numpy / TypeError, never
silently wrong numbers), and the result objects' pandas views agree with each other."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import InputError, PolicyError
from causalfair.policies.core import Observation
from causalfair.systems.simulator import StepResult


@pytest.fixture(scope="module")
def model():
    return cf.lending_setting("lending-1").tabular


# ------------------------------------------------------------------ policy tables
@pytest.mark.parametrize("bad", [1.5, -0.1, np.nan])
@pytest.mark.parametrize("door", ["decompose", "benefit_fairness", "lambda_T", "value_tables",
                                  "lambda_metric"])
def test_a_table_of_non_probabilities_is_refused_by_every_exact_door(model, door, bad):
    table = np.full((2, 7), 0.5)
    table[1, 3] = bad
    call = {
        "decompose": lambda: cf.decompose(model, table, 5),
        "benefit_fairness": lambda: cf.benefit_fairness(model, table, 5),
        "lambda_T": lambda: cf.benefit_fairness(model, table, 5, horizon_benefit=True),
        "value_tables": lambda: cf.value_tables(model, table, 5),
        "lambda_metric": lambda: cf.lambda_metric(model, table, 5),
    }[door]
    with pytest.raises(cf.CausalfairError, match=r"policy table: returned (a value outside "
                                                 r"\[0, 1\]|NaN)"):
        call()


def test_a_time_indexed_table_shorter_than_the_horizon_is_refused(model):
    with pytest.raises(cf.CausalfairError, match="covers 5 epochs, the horizon is 20"):
        cf.decompose(model, np.full((5, 2, 7), 0.5), horizon=20)
    # a table that covers the horizon still gives the same numbers as the policy
    full = cf.decompose(model, np.full((20, 2, 7), 0.5), horizon=20)
    assert full.C == pytest.approx(cf.decompose(model, "random:0.5", horizon=20).C, abs=1e-12)


def test_a_policy_returning_one_number_is_told_the_shape_it_must_return():
    s = cf.systems.make("lending-1")
    with pytest.raises(PolicyError, match=r"returned 1 probabilities for \d+ observations; "
                                          r"return one P\(d1\) per observation.*np\.full"):
        cf.decompose(s, lambda obs: 0.5, engine="mc", n=200, seed=0)


def test_constant_policy_refuses_a_string_with_a_policy_error():
    with pytest.raises(PolicyError, match=r"q: must be a probability in \[0, 1\], got 'a'"):
        cf.ConstantPolicy("a")


# ------------------------------------------------------------- keyword arguments
@pytest.mark.parametrize("call, typo, meant", [
    (lambda m: cf.decompose(m, "threshold:0.5", horizn=5), "horizn", "horizon"),
    (lambda m: cf.benefit_fairness(m, "threshold:0.5", epsilon=0.1), "epsilon", "eps"),
    (lambda m: cf.compare_groups(m, "threshold:0.5", refrence="s-"), "refrence", "reference"),
    (lambda m: cf.temporal_graph(m, 2, policy_reads=False), "policy_reads", "policy_reads_s"),
    (lambda m: cf.audit_logs("never-read.csv", horizen=3), "horizen", "horizon"),
    (lambda m: cf.audit(cf.examples.path("lending-1-ppo.toml"), polcy="blind:0.5"), "polcy",
     "policy"),
])
def test_a_keyword_typo_names_the_keyword_it_means(model, call, typo, meant):
    with pytest.raises(InputError, match=rf"unknown keyword argument '{typo}'; did you mean "
                                         rf"'{meant}'\? it takes: "):
        call(model)


def test_checked_entry_points_keep_their_signature_and_docstring():
    for fn in (cf.decompose, cf.benefit_fairness, cf.compare_groups, cf.temporal_graph,
               cf.audit_logs):
        assert "horizon" in inspect.signature(fn).parameters, fn
        assert fn.__doc__ and fn.__name__ in {"decompose", "benefit_fairness", "compare_groups",
                                              "temporal_graph", "audit_logs"}


# ------------------------------------------------------------- other arguments
def test_alpha_of_the_wrong_type_is_an_input_error(model):
    dec = cf.decompose(model, "threshold:0.5", 5)
    for call in (lambda: dec.to_frame("0.05"), lambda: dec.conf_int([0.05]),
                 lambda: cf.decompose(model, "threshold:0.5", 5, alpha=5),
                 lambda: cf.benefit_fairness(model, "threshold:0.5", 5, alpha="0.05")):
        with pytest.raises(InputError, match=r"alpha: must be in \(0, 1\), got .*e\.g\. 0\.05"):
            call()


def test_a_system_name_instead_of_a_system_says_how_to_make_one():
    with pytest.raises(cf.CausalfairError, match=r"model: got 'lending-1', a name, not a "
                                                 r"system;.*cf\.systems\.make\('lending-1'\)"):
        cf.decompose("lending-1", "threshold:0.5")


def test_audit_logs_refuses_a_float_seed():
    from causalfair.logs import simulate_logs

    df = simulate_logs("lending-1", "random:0.5", n_individuals=50, horizon=3, seed=1)
    with pytest.raises(InputError, match=r"seed: must be an integer >= 0, got 0\.5"):
        cf.audit_logs(df, n_boot=2, seed=0.5)


# ---------------------------------------------------------------- the views
def test_compare_groups_has_pandas_views_that_agree_with_its_numbers(model):
    g = cf.compare_groups(model, "threshold:0.5", 10)
    dec = cf.decompose(model, "threshold:0.5", 10)
    df = g.to_frame()
    assert list(df.columns) == ["estimate", "se", "ci_lower", "ci_upper"]
    pair = g.worst
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert df.loc[(pair, k), "estimate"] == g.pairs[pair][k][0]
    e = df.loc[pair, "estimate"]
    assert e["C"] == pytest.approx(e["DPE"] + e["IPE"] + e["SPE"], abs=1e-12)
    # the pair is "s- minus the reference s+": C is minus the decomposition's s+ - s-
    assert pair == "s--s+" and e["C"] == pytest.approx(-dec.C, abs=1e-12)
    assert (df["se"] == 0).all()  # exact: points
    per = g.groups_frame()
    assert per.loc[("s+", "V"), "estimate"] == pytest.approx(dec.V[0], abs=1e-12)
    assert len(repr(g)) < 200 and "worst='s--s+'" in repr(g)
    assert "<table" in g._repr_html_() and "s--s+" in str(g)


@dataclass(frozen=True)
class _State:
    score: np.ndarray
    group: np.ndarray
    t: int = 0


class _NoNames:
    """Observations with a feature column, but no ``feature_names`` declared."""

    n_groups = 2
    group_names = ("A", "B")
    group_weights = np.array([0.5, 0.5])

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(int)
        return _State(rng.normal(-0.5 * g, 1.0), g)

    def observe(self, state):
        return Observation(group=state.group, features=state.score[:, None], t=state.t)

    def draw_noise(self, n, rng):
        return {"z": rng.normal(size=n)}

    def step(self, state, decisions, noise):
        score = state.score + 0.1 * noise["z"] + 0.3 * np.asarray(decisions)
        return StepResult(state=_State(score, state.group, state.t + 1),
                          reward=np.zeros(len(score)), gain=score - state.score)


def test_a_simulator_without_feature_names_says_why_lambda_is_missing():
    dec = cf.decompose(_NoNames(), lambda obs: np.full(len(obs), 0.5), 3, n=200, seed=0,
                       jobs=1)
    assert dec.Lambda is None
    assert "Lambda: not computed" in dec.summary() and "feature_names" in dec.summary()
    assert "Lambda: not computed" in dec._repr_html_()
    with pytest.raises(cf.CausalfairError, match=r"declares neither levels nor feature names"
                                                 r".*feature_names"):
        cf.benefit_fairness(_NoNames(), lambda obs: np.full(len(obs), 0.5), 3, n=200)


def test_a_monte_carlo_audit_labels_the_exact_utility_among_the_notions():
    spec = {"name": "mine", "horizon": 5, "system": {"id": "lending-1"},
            "policy": {"builtin": "threshold:0.5"},
            "engine": {"kind": "mc", "n": 500, "seed": 0}, "thresholds": {"abs_C": 0.5}}
    r = cf.audit(spec)
    notions = r.notions_frame()["value"]
    q = r.quantities_frame()["estimate"]
    assert "utility" not in notions.index
    assert notions["utility (exact model)"] == r.notions["utility"]
    assert q["utility"] == r.decomposition.utility  # the Monte Carlo one, with its interval
    assert q["utility"] != notions["utility (exact model)"]


def test_log_audit_renders_in_a_notebook_and_dir_lists_the_lazy_entry_points():
    from causalfair.logs import simulate_logs

    df = simulate_logs("lending-1", "random:0.5", n_individuals=200, horizon=3, seed=1)
    la = cf.audit_logs(df, n_boot=2, seed=0)
    html = la._repr_html_()
    assert html.startswith("<pre>") and "C      =" in html
    assert {"temporal_graph", "audit_logs", "decompose_mc", "examples"} <= set(dir(cf))


def test_benefit_fairness_takes_a_pair_of_names_and_refuses_a_missing_group(model):
    s = cf.systems.make("lending-1")
    # group names are taken (tests/test_analyst_user.py), the same as their indices
    assert cf.benefit_fairness(model, "threshold:0.5", 5, pair=("s+", "s-")).Lambda \
        == cf.benefit_fairness(model, "threshold:0.5", 5, pair=(0, 1)).Lambda
    with pytest.raises(cf.CausalfairError, match=r"^pair: expected two"):
        cf.benefit_fairness(s, "threshold:0.5", 5, engine="mc", n=50, pair=(0, 3))


def test_worst_pairs_refuses_a_count_that_is_not_a_whole_number(model):
    ben = cf.benefit_fairness(model, "threshold:0.5", 5)
    assert len(ben.worst_pairs(3)) == 3
    for bad in ("x", 2.5, -1):
        with pytest.raises(InputError, match=rf"^n: must be an integer >= 0, got {bad!r}"):
            ben.worst_pairs(bad)


def test_the_notebook_view_of_a_decomposition_shows_lambda(model):
    dec = cf.decompose(model, "threshold:0.5", 5)
    assert f"Lambda = {dec.Lambda:.6f}" in dec._repr_html_()
    assert f"Lambda = {dec.Lambda:.6f}" in dec.summary()


def test_a_training_result_prints_on_one_line():
    import pandas as pd

    from causalfair.train import TrainConfig
    from causalfair.train.result import TrainResult

    history = pd.DataFrame({"iteration": [1, 2, 3], "losses/policy": [0.3, 0.2, 0.1]})
    res = TrainResult(policy=None, checkpoint=None, history=history,
                      metrics={"C": -0.1, "Lambda": 0.05, "utility": 1.5},
                      config=TrainConfig(algo="ppo-c", setting="lending-1"))
    text = repr(res)
    assert "\n" not in text and "iterations=3" in text and "C=-0.1" in text


def test_hypothetical_policies_of_a_name_says_how_to_make_the_policy():
    with pytest.raises(PolicyError, match=r"got str 'threshold:0\.5'; make one with "
                                          r"cf\.parse_policy\('threshold:0\.5', model\)"):
        cf.hypothetical_policies("threshold:0.5")


def test_a_policy_returning_something_that_is_not_numbers_is_a_policy_error(model):
    with pytest.raises(PolicyError, match=r"returned str 'abc', not numbers; return one P\(d1\)"):
        cf.decompose(model, cf.CallablePolicy(lambda obs: "abc"), 5)


def test_a_module_ending_in_a_sigmoid_must_say_its_outputs_are_probabilities(model):
    # read as logits, a Sigmoid's outputs were squashed twice: P(d1) in (0.5, 0.73), silently
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(9, 1), torch.nn.Sigmoid())
    with pytest.raises(PolicyError, match=r"ends in Sigmoid.*output='probs'"):
        cf.decompose(model, net)
    pol = cf.as_policy(net, model, output="probs")
    obs = Observation(group=np.array([0, 1]), level=np.array([2, 5]), t=0)
    x = torch.from_numpy(np.asarray(pol.encoding.encode(obs), dtype=np.float32))
    with torch.no_grad():
        want = net(x)[:, 0].double().numpy()
    assert np.allclose(pol.prob_d1(obs), want, atol=1e-7)  # read once, as probabilities
    nested = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(9, 2), torch.nn.Softmax(1)))
    with pytest.raises(PolicyError, match=r"ends in Softmax"):
        cf.decompose(model, nested)


def test_a_function_returning_text_is_one_policy_error(model):
    with pytest.raises(PolicyError, match=r"returned str 'abc', not numbers"):
        cf.decompose(model, lambda obs: "abc")


def test_a_training_setting_that_is_not_one_is_refused():
    from causalfair.errors import ConfigError
    from causalfair.train.config import TrainConfig

    with pytest.raises(ConfigError, match=r"setting: bad value 'lending1'; allowed values: "
                       r"lending-1, lending-2, lending-3"):
        TrainConfig(setting="lending1")
    assert TrainConfig(setting="lending-3").setting == "lending-3"


def test_an_object_that_is_no_system_is_named_without_a_factory():
    from causalfair.errors import SystemError_

    with pytest.raises(SystemError_, match=r"system: got object .*neither a causalfair System"):
        cf.decompose(object(), "uniform")


def test_a_star_import_brings_the_lazily_loaded_entry_points():
    ns: dict = {}
    exec("from causalfair import *", ns)  # noqa: S102 - what a notebook cell does
    for name in ("temporal_graph", "decompose_mc", "audit_logs", "as_policy", "compare"):
        assert callable(ns[name]) and ns[name] is getattr(cf, name), name


def test_a_torch_policy_of_no_module_or_a_bad_encoding_is_refused_at_once():
    with pytest.raises(PolicyError, match=r"module: got str 'net', not a torch module"):
        cf.TorchPolicy("net", cf.FeatureEncoding())
    for args, key in ((("onehot", "7", 2), "n_levels"), (("onehot", 7, 0), "n_groups"),
                      (("features", 7, 2, 2.5), "width_")):
        with pytest.raises(PolicyError, match=rf"encoding {key}: must be an integer >= 1"):
            cf.FeatureEncoding(*args)

"""Python API fixes from the hunt_b report (findings 3-7, 10-12): bad input refused with
an error naming the argument, the value and the fix; ``jobs`` never starts more workers
than tasks."""

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CausalfairError, PolicyError


@pytest.fixture(scope="module")
def model():
    return cf.lending_setting("lending-1").tabular


# ------------------------------------------------------------------ 3: one-hot width
@pytest.mark.parametrize("K, G", [(5, 2), (10, 2), (7, 3)])
def test_exact_engine_on_a_model_refuses_a_onehot_encoding_of_another_grid(model, K, G):
    torch = pytest.importorskip("torch")
    pol = cf.TorchPolicy(torch.nn.Linear(K + G, 1), cf.FeatureEncoding("onehot", K, G))
    for call in (lambda: cf.decompose(model, pol, horizon=3),
                 lambda: cf.policy_table(pol, model)):
        with pytest.raises(PolicyError, match=rf"encoded for {K} levels x {G} groups .* but "
                                              r"the model has 7 levels x 2 groups"):
            call()
    ok = cf.TorchPolicy(torch.nn.Linear(9, 1), cf.FeatureEncoding("onehot", 7, 2))
    assert cf.policy_table(ok, model).shape == (2, 7)


# ------------------------------------------------------------------ 5 and 11: jobs
def _threads_started(run):
    import threading

    started = []
    orig = threading.Thread.start

    def start(self, *a, **k):
        if self.name.startswith("causalfair_"):
            started.append(self.name)
        return orig(self, *a, **k)

    threading.Thread.start = start
    try:
        out = run()
    finally:
        threading.Thread.start = orig
    return out, started


def test_thread_backend_starts_no_more_threads_than_tasks():
    from causalfair.backends import ThreadBackend

    out, started = _threads_started(lambda: list(ThreadBackend(200).imap(lambda x: x * x,
                                                                         iter(range(3)))))
    assert out == [0, 1, 4] and len(started) == 3


def test_jobs_larger_than_the_work_same_numbers_few_threads():
    system = cf.systems.make("lending-1")
    one = cf.decompose(system, "random:0.5", engine="mc", n=200, jobs=1)
    many, started = _threads_started(
        lambda: cf.decompose(system, "random:0.5", engine="mc", n=200, jobs=200))
    assert (many.C, many.se, many.Lambda) == (one.C, one.se, one.Lambda)
    # two groups x one batch: two tasks, two threads (was 200; Lambda is exact here)
    assert len(started) == 2


def test_huge_jobs_refused_naming_jobs():
    system = cf.systems.make("lending-1")
    for jobs in (3000, 10**6, np.int64(5000)):
        with pytest.raises(CausalfairError, match=r"^jobs: .*more than the 1024 allowed"):
            cf.decompose(system, "random:0.5", engine="mc", n=200, jobs=jobs)


def test_numpy_integer_jobs_accepted():
    system = cf.systems.make("lending-1")
    a = cf.decompose(system, "random:0.5", engine="mc", n=200, jobs=np.int64(2))
    b = cf.decompose(system, "random:0.5", engine="mc", n=200, jobs=2)
    assert (a.C, a.se) == (b.C, b.se)


# ------------------------------------------------------------------ 6: gamma
@pytest.mark.parametrize("gamma", [float("nan"), -1, 0, 5, "x", True, None])
def test_value_tables_and_attribution_refuse_a_bad_gamma(model, gamma):
    pol = cf.parse_policy("random:0.5", model)
    for call in (lambda: cf.value_tables(model, pol, 3, gamma=gamma),
                 lambda: cf.decompose(model, pol, horizon=3, gamma=gamma),
                 lambda: cf.attribute(model, pol, "pi0", 3, gamma=gamma)):
        with pytest.raises(CausalfairError, match=r"^gamma: must be a number in \(0, 1\]"):
            call()


def test_value_tables_gamma_in_range_still_works(model):
    pol = cf.parse_policy("random:0.5", model)
    v = cf.value_tables(model, pol, 3, gamma=np.float32(0.9))["V_pi"]
    assert np.isfinite(v).all()
    assert np.array_equal(cf.value_tables(model, pol, 3, gamma=1)["V_pi"],
                          cf.value_tables(model, pol, 3)["V_pi"])


# ------------------------------------------------------------------ 7: horizon, model, mu
@pytest.mark.parametrize("horizon", [0, -2, 2.5, "3"])
def test_policy_table_and_lambda_metric_refuse_a_bad_horizon(model, horizon):
    pol = cf.CallablePolicy(lambda obs: np.full(len(obs.group), 0.5))
    for call in (lambda: cf.policy_table(pol, model, horizon),
                 lambda: cf.lambda_metric(model, pol, horizon)):
        with pytest.raises(CausalfairError, match=r"^horizon: must be an integer >= 1"):
            call()


def test_policy_table_refuses_what_is_not_a_model():
    pol = cf.CallablePolicy(lambda obs: np.full(len(obs.group), 0.5))
    with pytest.raises(CausalfairError, match=r"model: expected a TabularModel, got "
                                              r"'lending-1'.*make\('lending-1'\)\.tabular"):
        cf.policy_table(pol, "lending-1")
    with pytest.raises(CausalfairError, match=r"system\.tabular"):
        cf.policy_table(pol, cf.systems.make("lending-1"))


def test_lambda_metric_mu_checked_and_documented(model):
    pol = cf.parse_policy("random:0.5", model)
    assert "mu" in cf.lambda_metric.__doc__
    for mu in (np.full((2, 7), 0.5), np.full((4, 2, 7), np.nan), "x"):
        with pytest.raises(CausalfairError, match=r"^mu: must be the state distributions .*"
                                                  r"\(4, 2, 7\)"):
            cf.lambda_metric(model, pol, 3, mu=mu)
    mu = model.propagate(cf.policy_table(pol, model, 3), 3)
    assert cf.lambda_metric(model, pol, 3, mu=mu) == cf.lambda_metric(model, pol, 3)


# ------------------------------------------------------------------ 10: policy outputs
@pytest.mark.parametrize("engine", ["exact", "mc"])
@pytest.mark.parametrize("out, words", [
    (lambda n: None, r"returned None, not probabilities"),
    (lambda n: np.full(n, 0.5 + 0.3j), r"returned complex numbers \(e\.g\. \(0\.5\+0\.3j\)\)"),
    (lambda n: np.full((1, n), 0.5), r"returned shape \(1, \d+\) for \d+ observations"),
])
def test_policy_outputs_refused_with_what_is_wrong(engine, out, words):
    import warnings

    system = cf.systems.make("lending-1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: an error instead
        with pytest.raises(PolicyError, match=words):
            cf.decompose(system, lambda obs: out(len(obs.group)), engine=engine, n=200,
                         horizon=3)


def test_n_by_1_output_still_accepted(model):
    a = cf.decompose(model, lambda obs: np.full((len(obs.group), 1), 0.5), horizon=3)
    b = cf.decompose(model, lambda obs: np.full(len(obs.group), 0.5), horizon=3)
    assert a.C == b.C


def test_action_rows_out_of_range_name_a_softmax(model):
    class Rows:
        name = "rows"

        def action_probs(self, obs):
            return np.full((len(obs.group), 2), [1.2, -0.2])

    with pytest.raises(PolicyError, match=r"outside \[0, 1\].*softmax") as exc:
        cf.decompose(model, Rows(), horizon=3)
    assert "sigmoid" not in str(exc.value)


# ------------------------------------------------------------------ 11: small inconsistencies
def test_system_refuses_groups_given_as_one_string():
    for groups in ("AB", "White"):
        with pytest.raises(CausalfairError, match=r"groups must be a sequence of names, got "
                                                  r"the string .*groups=\('A', 'B'\)"):
            cf.System(id="x", groups=groups, tabular=cf.lending_setting("lending-1").tabular)


def test_readme_pair_claim_matches_group_comparison_plot():
    import inspect
    from pathlib import Path

    from causalfair.engines.groups import GroupComparison

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("fig = groups.plot()"))
    assert ("pair=" in line) == ("pair" in inspect.signature(GroupComparison.plot).parameters)


def test_flags_units_and_digits_checked(model):
    pol = cf.parse_policy("threshold:0.5", model)
    with pytest.raises(CausalfairError, match=r"^horizon_benefit: must be True or False, got "
                                              r"'yes'"):
        cf.benefit_fairness(model, pol, 3, horizon_benefit="yes")
    with pytest.raises(CausalfairError, match=r"^unit: must be the gain's unit as text"):
        cf.decompose(model, pol, horizon=3).plot(unit=5)
    ben = cf.benefit_fairness(model, pol, 3)
    with pytest.raises(CausalfairError, match=r"^unit: "):
        ben.plot(unit=5)
    with pytest.raises(CausalfairError, match=r"^digits: must be an integer >= 0, got -1"):
        ben.worst_pairs_table(digits=-1)
    assert len(ben.worst_pairs_table(3, digits=2)) == 3


# ------------------------------------------------------------------ 9: mistyped keywords
def _keyword_calls(model):
    from causalfair.logs import simulate_logs

    pol = cf.CallablePolicy(lambda o: np.full(len(o.group), 0.5))
    sim = cf.LendingSimulator(cf.lending_setting("lending-1"))
    return {
        "decompose_mc": lambda: cf.decompose_mc(sim, pol, 2, nn=5),
        "lending_setting": lambda: cf.lending_setting("lending-1", levelz=3),
        "simulate_logs": lambda: simulate_logs("lending-1", "uniform", 5, 2, sed=1),
        "value_tables": lambda: cf.value_tables(model, pol, 2, gama=1.0),
        "lambda_metric": lambda: cf.lambda_metric(model, pol, 2, epss=0.1),
        "policy_table": lambda: cf.policy_table(pol, model, horizn=2),
        "hypothetical_policies": lambda: cf.hypothetical_policies(pol, sytem=model),
        "parse_policy": lambda: cf.parse_policy("uniform", model, foo=1),
        "fair_lp": lambda: cf.fair_lp(model, 2, eps=0.1, constraint_="C"),
        "attribute": lambda: cf.attribute(model, pol, "uniform", engin="exact"),
        "other_notions": lambda: cf.other_notions(model, pol, 2, par=(0, 1)),
        "TabularModel": lambda: cf.TabularModel(kernel=model.kernel, initial=model.initial,
                                                potential=model.potential, rewrd=None),
        "System": lambda: cf.System(id="x", groups=("a", "b"), tabulr=model),
        "TorchPolicy": lambda: cf.TorchPolicy(None, encodng=None),
        "FeatureEncoding": lambda: cf.FeatureEncoding("onehot", 7, 2, nams=()),
        "save_checkpoint": lambda: cf.save_checkpoint("/nonexistent/x.pt", None, architectur=1),
        "load_checkpoint": lambda: cf.load_checkpoint("/nonexistent/x.pt", devce="cpu"),
        "Decomposition.to_frame": lambda: cf.decompose(model, pol, 2).to_frame(alpa=0.1),
        "Decomposition.plot": lambda: cf.decompose(model, pol, 2).plot(alph=0.1),
        "BenefitResult.worst_pairs": lambda: cf.benefit_fairness(model, pol, 2).worst_pairs(m=3),
        "CallablePolicy": lambda: cf.CallablePolicy(lambda o: 0.5, nme="f"),
        "TablePolicy": lambda: cf.TablePolicy(np.full((2, 3), 0.5), nam="x"),
    }


@pytest.mark.parametrize("name", sorted(_keyword_calls(None)))
def test_a_mistyped_keyword_is_named_with_the_fix(model, name):
    call = _keyword_calls(model)[name]
    with pytest.raises(CausalfairError, match=rf"^{name}: unknown keyword argument '\w+'; "
                                              r".*it takes: "):
        call()

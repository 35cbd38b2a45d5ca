"""A credit-risk team whose deployed policy is a scikit-learn model (predict_proba and a
cut-off), audited on its own simulator: the ways such a policy reaches causalfair and the
refusals that name the fix. A stand-in class with predict_proba plays the estimator, so
only the last test needs scikit-learn."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import CheckpointError, PolicyError

K = 4


@dataclass
class _State:
    level: np.ndarray
    group: np.ndarray
    income: np.ndarray
    t: int


class LenderSim:
    """Two groups, credit level 0..K-1, a continuous income; approving moves the level up
    on repayment, down on default."""

    n_groups = 2
    feature_names = ("income", "credit")
    n_levels = K

    def __init__(self, n_actions: int = 2):
        self.n_actions = n_actions

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        level = np.clip(np.rint(np.array([2.0, 1.2])[g] + rng.normal(0, 1, n)), 0, K - 1)
        return _State(level.astype(np.intp), g, np.exp(rng.normal(0, 0.4, n)), 0)

    def observe(self, s):
        return cf.Observation(group=s.group, level=s.level, t=s.t,
                              features=np.stack([s.income, s.level.astype(float)], axis=1))

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, noise):
        d = np.asarray(d, dtype=np.intp)
        repay = noise < 1 / (1 + np.exp(-(-1.0 + 0.7 * s.level + 0.5 * s.income)))
        move = np.where(d > 0, np.where(repay, 1, -d), 0)
        nxt = np.clip(s.level + move, 0, K - 1)
        return cf.StepResult(state=_State(nxt, s.group, s.income, s.t + 1),
                             reward=np.where(d > 0, np.where(repay, 0.3, -1.0) * d, 0.0),
                             gain=(nxt - s.level).astype(float), info={})


def make_lender(n_actions: int = 2) -> cf.System:
    labels = ("reject", "approve") if n_actions == 2 else ("reject", "small", "large")
    return cf.System(id=f"lender{n_actions}", groups=("A", "B"),
                     decisions=cf.DecisionSet(labels=labels, baseline=0),
                     features=("income", "credit"), levels=tuple(map(str, range(K))),
                     horizon=5, simulator=lambda: LenderSim(n_actions))


class StandInClassifier:
    """What a fitted scikit-learn classifier offers: predict_proba(X) -> (n, 2), predict."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X):
        p = 1 / (1 + np.exp(-(-1.2 + 0.6 * X[:, 1] + 0.8 * X[:, 0])))
        return np.stack([1 - p, p], axis=1)

    def predict(self, X):
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(int)


CLF = StandInClassifier()


def _approve(obs):  # the deployed policy: approve when P(repay) >= 0.6, a hard 0/1
    return (CLF.predict_proba(obs.features)[:, 1] >= 0.6).astype(float)


def _mc(policy, n_actions=2, **kw):
    return cf.decompose(make_lender(n_actions), policy, n=300, seed=0, **kw)


def test_an_estimator_itself_is_refused_naming_the_wrapper():
    """Old code: 'cannot use StandInClassifier as a policy' without a word on predict_proba."""
    with pytest.raises(PolicyError, match=r"StandInClassifier has predict_proba.*predict_proba\("
                       r"obs\.features\)\[:, 1\] >= 0\.6.*docs/own-system\.md"):
        _mc(CLF)


def test_a_factory_returning_an_estimator_names_the_wrapper(tmp_path, monkeypatch, capsys):
    (tmp_path / "riskmodel.py").write_text(
        "import numpy as np\n"
        "class Clf:\n"
        "    def predict_proba(self, X):\n"
        "        return np.full((len(X), 2), 0.5)\n"
        "def make():\n"
        "    return Clf()\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lender_sys.py").write_text(
        "from tests.test_sklearn_user import make_lender\n")
    code = main(["decompose", "--system", "lender_sys:make_lender", "--policy", "riskmodel:make",
                 "--n", "50", "--search-path", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Clf has predict_proba" in err and "Traceback" not in err


class _Boom:
    """A pickle that would write a file if it were ever loaded."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


@pytest.mark.parametrize("name", ["model.joblib", "model.pkl", "model.bin"])
def test_a_pickle_checkpoint_is_refused_unread_naming_a_factory(tmp_path, name):
    """Old code: refused with 'save the module with cf.save_checkpoint(path, module,
    architecture=...)', a torch fix for a scikit-learn model."""
    sentinel = tmp_path / "ran"
    path = tmp_path / name
    path.write_bytes(pickle.dumps(_Boom(str(sentinel)), protocol=4))
    with pytest.raises(CheckpointError, match=r"is a pickle \(joblib/pickle\) file.*never runs "
                       r"code.*factory = \"mypolicy:make\".*A scikit-learn model"):
        _mc(path if name != "model.bin" else str(path))
    assert not sentinel.exists()


def test_a_pickle_checkpoint_in_a_spec_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "lender_sys.py").write_text(
        "from tests.test_sklearn_user import make_lender\n")
    (tmp_path / "model.joblib").write_bytes(pickle.dumps({"coef": [1.0]}))
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[system]\nfactory = "lender_sys:make_lender"\n'
        '[policy]\ncheckpoint = "model.joblib"\n[engine]\nkind = "mc"\nn = 50\n')
    monkeypatch.chdir(tmp_path)
    assert main(["audit", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a pickle (joblib/pickle) file" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_a_legacy_torch_pt_keeps_its_own_message(tmp_path):
    path = tmp_path / "old.pt"
    path.write_bytes(pickle.dumps({"w": [1.0]}, protocol=2))
    with pytest.raises(CheckpointError, match="cannot be loaded safely"):
        _mc(path)


def test_predict_proba_columns_from_a_two_action_function_name_the_shape():
    """Old code: 'returned 600 probabilities for 300 observations'."""
    with pytest.raises(PolicyError, match=r"returned shape \((\d+), 2\), 2 columns per observation"
                       r".*shape \(\1,\)"):
        _mc(lambda obs: CLF.predict_proba(obs.features))


def test_action_indices_on_three_actions_name_one_hot_rows():
    with pytest.raises(PolicyError, match=r"expected \(\d+, 3\); for chosen actions a \(n,\) "
                       r"give one-hot rows, np\.eye\(3\)\[a\]"):
        _mc(lambda obs: (CLF.predict_proba(obs.features)[:, 1] >= 0.6).astype(int), n_actions=3)


def test_hard_decisions_in_any_container_give_the_same_audit():
    pd = pytest.importorskip("pandas")
    ref = _mc(_approve)
    assert np.isfinite(ref.Lambda) and ref.Lambda_ci[0] <= ref.Lambda <= ref.Lambda_ci[1]
    assert ref.C != 0.0
    forms = [lambda o: _approve(o).astype(int), lambda o: _approve(o).astype(bool),
             lambda o: list(_approve(o)), lambda o: _approve(o).astype(np.float32),
             lambda o: pd.Series(_approve(o), index=np.arange(len(o)) + 7),
             lambda o: pd.DataFrame({"p": _approve(o)}), lambda o: _approve(o)[:, None]]
    for f in forms:
        r = _mc(f)
        assert (r.C, r.DPE, r.IPE, r.SPE, r.Lambda) == (ref.C, ref.DPE, ref.IPE, ref.SPE, ref.Lambda)
    b = cf.benefit_fairness(make_lender(), lambda o: pd.Series(_approve(o)), n=300, seed=0)
    assert b.Lambda == ref.Lambda


def test_three_actions_from_score_cutoffs_any_container():
    pd = pytest.importorskip("pandas")

    def rows(obs):
        p = CLF.predict_proba(obs.features)[:, 1]
        return np.eye(3)[(p >= 0.5).astype(int) + (p >= 0.8)]

    ref = _mc(rows, n_actions=3)
    assert ref.C != 0.0 and np.isfinite(ref.Lambda)
    for f in (lambda o: rows(o).astype(int), lambda o: rows(o).tolist(),
              lambda o: pd.DataFrame(rows(o))):
        r = _mc(f, n_actions=3)
        assert (r.C, r.DPE, r.Lambda) == (ref.C, ref.DPE, ref.Lambda)


def test_exact_engine_deterministic_function_equals_its_table():
    """A hard-threshold function on the reference lending model: the exact engine, benefit
    fairness and the Lambda interval agree with the same 0/1 table given as a table."""
    model = cf.lending_setting("lending-1").tabular
    table = np.broadcast_to((np.arange(model.n_levels) >= 4).astype(float),
                            (model.n_groups, model.n_levels)).copy()
    fn = cf.decompose(model, lambda obs: (obs.level >= 4).astype(int), horizon=10)
    tab = cf.decompose(model, table, horizon=10)
    assert (fn.C, fn.DPE, fn.IPE, fn.SPE, fn.Lambda) == (tab.C, tab.DPE, tab.IPE, tab.SPE, tab.Lambda)
    assert fn.Lambda_ci == tab.Lambda_ci
    assert abs(fn.C - (fn.DPE + fn.IPE + fn.SPE)) < 1e-12


def test_a_policy_declaring_level_group_is_evaluated_once_per_cell():
    class Scorecard:  # a model over (group, level) only, declared so
        reads_only_level_group = True
        calls = 0

        def prob_d1(self, obs):
            Scorecard.calls += 1
            return (obs.level >= 2).astype(float)

    undeclared = _mc(lambda obs: (obs.level >= 2).astype(float))
    declared = _mc(Scorecard())
    assert (declared.C, declared.DPE, declared.Lambda) == (undeclared.C, undeclared.DPE,
                                                           undeclared.Lambda)
    # one grid per engine pass, not one call per batch and step; plus the row-wise check
    # of a user's policy once per audit (a batch, its first half, a random half: 3 calls)
    assert Scorecard.calls <= 4 + 3


def test_a_real_sklearn_model_through_a_function():
    pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = np.stack([np.exp(rng.normal(0, 0.4, 400)), rng.integers(0, K, 400).astype(float)], 1)
    y = (rng.random(400) < CLF.predict_proba(X)[:, 1]).astype(int)
    lr = LogisticRegression().fit(X, y)
    r = _mc(lambda obs: (lr.predict_proba(obs.features)[:, 1] >= 0.6).astype(float))
    assert np.isfinite(r.C) and abs(r.C - (r.DPE + r.IPE + r.SPE)) < 1e-9
    with pytest.raises(PolicyError, match="LogisticRegression has predict_proba"):
        _mc(lr)


def test_a_failing_factory_policy_report_does_not_offer_retrain(tmp_path, monkeypatch, capsys):
    """Old code: the report's repair options named `gate SPEC --retrain`, which refuses a
    factory policy (no network to warm-start from)."""
    (tmp_path / "lender_sys.py").write_text(
        "from tests.test_sklearn_user import make_lender, _approve\n"
        "def make_policy():\n"
        "    return _approve\n")
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[system]\nfactory = "lender_sys:make_lender"\n'
        '[policy]\nfactory = "lender_sys:make_policy"\n[engine]\nkind = "mc"\nn = 200\n'
        '[thresholds]\nC = -3.5\n[retrain]\nalgo = "ppo-c"\niterations = 1\n')
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "s.toml", "--out", "rep"]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "FAIL" in md
    assert "Repair options: the policy is not a checkpoint" in md
    assert "--retrain retrains the policy" not in md
    assert main(["gate", "s.toml", "--retrain"]) == 2  # what that line would have led to
    assert "cannot be retrained" in capsys.readouterr().err


def test_load_checkpoint_itself_refuses_a_pickle_unread(tmp_path):
    """The refusal lives in the checkpoint loader every door calls: cf.load_checkpoint
    directly (old code: a legacy-torch message advising cf.save_checkpoint), and a file
    whose bytes are a pickle whatever its suffix."""
    sentinel = tmp_path / "ran"
    for name in ("model.joblib", "model.bin"):
        path = tmp_path / name
        path.write_bytes(pickle.dumps(_Boom(str(sentinel)), protocol=4))
        with pytest.raises(CheckpointError, match=r"is a pickle \(joblib/pickle\) file"):
            cf.load_checkpoint(path)
    assert not sentinel.exists()


def test_a_function_declaring_level_group_is_evaluated_once_per_cell():
    """A declaration set on a plain function is read as on an object (old code: the
    function wrapper dropped it and the function was called on every batch and step)."""
    calls = []

    def scorecard(obs):
        calls.append(len(obs))
        return (obs.level >= 2).astype(float)

    undeclared = _mc(scorecard)
    n_undeclared = len(calls)
    calls.clear()
    scorecard.reads_only_level_group = True
    declared = _mc(scorecard)
    assert (declared.C, declared.DPE, declared.Lambda) == (undeclared.C, undeclared.DPE,
                                                           undeclared.Lambda)
    assert len(calls) <= 4 < n_undeclared

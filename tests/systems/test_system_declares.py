"""A System that contradicts what its own simulator declares (group names, action labels,
baseline, feature names, the number of levels) is refused in one line naming both, as
n_groups, n_actions and group_weights are: the engines read the system's, so the groups
would be mislabelled, pi0 would take another action, or Lambda's cells would crash
after the run (hunt2_own F4, F5)."""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import SimulatorContractError, SystemError_


class Hiring:
    n_groups = 3
    group_names = ("A", "B", "C")
    n_actions = 3
    action_labels = ("reject", "interview", "hire")
    baseline = 0
    feature_names = ("skill", "years")
    n_levels = 4

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        skill = rng.normal(-0.3 * g, 1.0)
        return {"skill": skill, "years": np.zeros(n), "g": g, "t": 0}

    def observe(self, s):
        level = np.clip((s["skill"] + 2).astype(int), 0, 3)
        return cf.Observation(group=s["g"], level=level, t=s["t"],
                              features=np.stack([s["skill"], s["years"]], 1))

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        d = np.asarray(d)
        gain = 0.2 * (d == 2) + 0.05 * (d == 1) + 0.1 * noise
        return cf.StepResult(state={"skill": s["skill"] + gain, "years": s["years"] + (d == 2),
                                    "g": s["g"], "t": s["t"] + 1},
                             reward=np.where(d == 2, s["skill"], 0.0), gain=gain, info={})


class NoLevels(Hiring):
    n_levels = None


def _system(**changes):
    base = cf.System(id="hiring", groups=("A", "B", "C"),
                     decisions=cf.DecisionSet(labels=("reject", "interview", "hire"), baseline=0),
                     features=("skill", "years"), levels=("L0", "L1", "L2", "L3"), horizon=3,
                     simulator=Hiring)
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize("changes, says", [
    ({"groups": ("C", "B", "A")},
     "has group_names = (A, B, C), but the system's groups are (C, B, A)"),
    ({"decisions": cf.DecisionSet(labels=("hire", "interview", "reject"), baseline=0)},
     "has action_labels = (reject, interview, hire), but the system's actions are (hire, "),
    ({"decisions": cf.DecisionSet(labels=("reject", "interview", "hire"), baseline=2)},
     "has baseline = 0, but the system's DecisionSet has baseline=2 ('hire')"),
    ({"features": ("years", "skill")},
     "has feature_names = (skill, years), but the system's features are (years, skill)"),
    ({"levels": ("a", "b", "c")}, "has n_levels = 4, but the system has 3 levels (a, b, c)"),
    ({"levels": ("a", "b", "c", "d", "e")}, "has n_levels = 4, but the system has 5 levels"),
])
def test_a_contradicting_declaration_is_refused(changes, says):
    with pytest.raises(SystemError_) as info:
        cf.decompose(_system(**changes), "uniform", n=50, seed=0)
    assert says in str(info.value), info.value


def test_levels_beyond_the_systems_are_refused_when_the_simulator_declares_none():
    """Level 3 observed on a system of 3 levels: a ValueError traceback from Lambda's cells
    (benefit_mc._cell_means) after the whole decomposition had run."""
    system = _system(levels=("a", "b", "c"), simulator=NoLevels)
    with pytest.raises(SimulatorContractError, match=r"Observation.level outside \[0, 3\)"):
        cf.decompose(system, "uniform", n=50, seed=0)


def test_a_consistent_system_still_audits():
    res = cf.decompose(_system(), "uniform", n=50, seed=0)
    assert np.isfinite(res.C)


def test_the_command_line_refuses_it_in_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "lvl.py").write_text(textwrap.dedent('''
        import dataclasses
        from tests.systems.test_system_declares import _system


        def make():
            return _system(levels=("a", "b", "c"))
    '''))
    monkeypatch.chdir(tmp_path)
    code = main(["decompose", "--system", "lvl:make", "--policy", "uniform", "--n", "50"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "has n_levels = 4, but the system has 3 levels" in err, err


class LosesAColumn(Hiring):
    """Gives both feature columns in the contract check's steps (t < 3), one from t = 3 on."""

    def observe(self, s):
        obs = super().observe(s)
        if s["t"] < 3:
            return obs
        return cf.Observation(group=obs.group, level=obs.level, t=obs.t,
                              features=obs.features[:, :1])


def _skill_reader(obs):
    p = 1.0 / (1.0 + np.exp(-obs.features[:, 0] - obs.features[:, 1]))
    return np.column_stack([1.0 - p, np.zeros_like(p), p])


@pytest.mark.parametrize("door", ["decompose", "benefit", "gym"])
def test_a_feature_column_lost_after_the_contract_check_is_the_simulators_error(door):
    """h8sys F1: observations that lose a feature column after the contract check's steps
    were read by the policy (an IndexError blamed on the policy) or handed on by the
    Gymnasium view (an observation shorter than its space); the guard every door's
    simulator goes through (System.make_simulator) checks the width at every call."""
    system = _system(horizon=5, simulator=LosesAColumn)
    says = (r"simulator LosesAColumn.observe: gave 1 feature columns, but the system "
            r"declares 2 features \(skill, years\)")
    with pytest.raises(SimulatorContractError, match=says):
        if door == "decompose":
            cf.decompose(system, _skill_reader, n=50, seed=0)
        elif door == "benefit":
            cf.benefit_fairness(system, _skill_reader, n=50, seed=0)
        else:
            gym = pytest.importorskip("gymnasium")
            env = gym.make("causalfair/System-v0", system=system)
            env.reset(seed=0)
            for _ in range(5):
                env.step(0)


def _tab_system(system_weights, model_weights):
    kernel = np.zeros((3, 2, 2, 2))
    kernel[:, 0] = [[0.9, 0.1], [0.3, 0.7]]
    kernel[:, 1] = [[0.4, 0.6], [0.1, 0.9]]
    reward = np.zeros((3, 2, 2))
    reward[:, 1] = [[-0.5, 1.0], [-0.2, 1.2], [0.1, 1.5]]   # each group its own utility
    model = cf.TabularModel(kernel=kernel, initial=np.array([[.5, .5], [.6, .4], [.8, .2]]),
                            potential=np.array([0.0, 1.0]), reward=reward,
                            group_weights=model_weights)
    return cf.System(id="w", groups=("A", "B", "C"), decisions=cf.DecisionSet(("no", "yes")),
                     horizon=3, tabular=model, group_weights=system_weights)


@pytest.mark.parametrize("system_weights, model_weights, expect", [
    (None, [0.6, 0.3, 0.1], [0.6, 0.3, 0.1]),          # the model's, when the system gives none
    ([0.1, 0.3, 0.6], [0.6, 0.3, 0.1], [0.1, 0.3, 0.6]),  # the system's win, as its names do
    ([0.1, 0.3, 0.6], None, [0.1, 0.3, 0.6]),
])
def test_the_exact_and_monte_carlo_engines_weigh_the_groups_alike(system_weights,
                                                                  model_weights, expect):
    """h8sys F5: a System whose group_weights differ from its tabular model's (given to
    one of them only, or to both) gave two utilities: the exact engine weighed the groups
    by the model's, Monte Carlo (and the system's own group_weights) by the system's."""
    system = _tab_system(system_weights, model_weights)
    assert np.allclose(system.group_weights, expect)
    assert np.allclose(system.tabular.group_weights, expect)
    exact = cf.decompose(system, "random:0.5")
    mc = cf.decompose(system, "random:0.5", engine="mc", n=20_000, seed=0)
    assert abs(exact.utility - mc.utility) < 4 * mc.se["utility"], (exact.utility, mc.utility)


class GrowsAUnit(Hiring):
    """A step from t = 3 on returns a state of one unit more (after the contract check)."""

    def step(self, s, d, noise):
        res = super().step(s, d, noise)
        if s["t"] < 3:
            return res
        st = {k: (np.r_[v, v[:1]] if isinstance(v, np.ndarray) else v)
              for k, v in res.state.items()}
        return cf.StepResult(state=st, reward=res.reward, gain=res.gain, info=res.info)


class RowsPolicy:
    name = "rows"

    def action_probs(self, obs):
        return np.tile([0.5, 0.25, 0.25], (len(obs), 1))


@pytest.mark.parametrize("door", ["decompose", "benefit", "lambda_T"])
def test_a_state_that_grows_after_the_check_is_the_simulators_error(door):
    """h8sys F6: a step whose state gains a unit after the contract check's steps gave a
    ValueError traceback (`operands could not be broadcast`, exit 1) with a policy of
    action rows, and `policy ...: returned 301 probabilities for 300 observations` (the
    policy was given 301) with P(d1) functions; now one line naming the simulator."""
    system = _system(horizon=5, simulator=GrowsAUnit)
    with pytest.raises(SimulatorContractError,
                       match=r"simulator: its observe gave 51 observations for a batch of 50"):
        if door == "decompose":
            cf.decompose(system, RowsPolicy(), n=50, seed=0)
        else:
            cf.benefit_fairness(system, RowsPolicy(), n=50, seed=0,
                                horizon_benefit=door == "lambda_T")


def test_training_refuses_a_state_that_grows_in_one_line(tmp_path, monkeypatch, capsys):
    """h8sys F6, the trainer's rollout: a ValueError traceback from np.stack before."""
    (tmp_path / "grows.py").write_text(textwrap.dedent('''
        from tests.systems.test_system_declares import GrowsAUnit, _system


        def make():
            return _system(horizon=5, simulator=GrowsAUnit)
    '''))
    monkeypatch.chdir(tmp_path)
    code = main(["train", "--system", "grows:make", "--algo", "ppo", "--iterations", "1",
                 "--individuals", "30", "--out", "run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "its observe gave 11 observations for a batch of 10 units" in err, err

"""How the Gymnasium door steps an epoch of the benefit rollout (Lambda by forks,
method.md section 4): ``GymSimulator.step_forks`` steps the A forks and pi's decisions of
an epoch in one call with A - 1 env copies and A env steps per live individual, and gives
bit for bit what A + 1 ``step`` calls give: the same Lambda, interval and cells on a
two-action and a three-action env whose episodes end mid-horizon, an env with a state
API, actions that repeat or leave out a decision."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.policies.adapters import callable_policy
from causalfair.systems.gym import simulator
from causalfair.systems.gym.door import GymSimulator

from .gym_students import Student, ThreeActions, WithState3


class Softmax3:
    """Three actions, probabilities moving with the skill."""

    name = "softmax3"

    def action_probs(self, obs):
        x = np.asarray(obs.features, dtype=np.float64)[:, 0]
        z = np.stack([-x, np.zeros_like(x), 2.0 * x], axis=1)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


def _lambda_both_ways(monkeypatch, system, policy, **kw):
    """benefit_fairness_mc with step_forks, then with the A + 1 step() calls."""
    Student.ends = 0
    fast = benefit_fairness_mc(system, policy, **kw)
    ended = Student.ends
    monkeypatch.delattr(GymSimulator, "step_forks")
    slow = benefit_fairness_mc(system, policy, **kw)
    assert ended > 0, "no episode ended mid-horizon: the test would not cover terminations"
    return fast, slow


def _assert_same(fast, slow):
    assert fast.Lambda == slow.Lambda
    assert fast.ci == slow.ci and fast.se == slow.se and fast.ci is not None
    assert fast.levels == slow.levels and fast.cells == slow.cells
    for name in ("delta", "p_d1", "state_weights", "contributions"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    assert fast.dpe_prop1 == slow.dpe_prop1


def test_lambda_identical_two_actions(monkeypatch):
    system = cf.systems.from_gym(Student, groups=["s+", "s-"], horizon=6)
    policy = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-3.0 * f[:, 0])), inputs="features",
                             name="logistic")
    _assert_same(*_lambda_both_ways(monkeypatch, system, policy, n=80, seed=3, n_boot=8))


def test_lambda_identical_three_actions_baseline_one(monkeypatch):
    system = cf.systems.from_gym(ThreeActions, groups=["s+", "s-"], horizon=6, baseline=1)
    fast, slow = _lambda_both_ways(monkeypatch, system, Softmax3(), n=80, seed=5, n_boot=8)
    _assert_same(fast, slow)
    assert fast.delta.shape[-1] == 3


def _epochs(sim, A, T, n, rng, counted, decide=None, actions=None):
    """T epochs of step_forks from one reset; per epoch (live individuals, env copies,
    env steps), and the results."""
    state = sim.reset(n, 1, rng)
    acts = list(range(A)) if actions is None else actions
    per, outs = [], []
    for _t in range(T):
        live = int((~state.done).sum())
        d = rng.integers(0, A, size=n) if decide is None else decide(n, rng)
        noise = sim.draw_noise(n, rng)
        counted[0], Student.steps = 0, 0
        gains, res = sim.step_forks(state, acts, d, noise)
        per.append((live, counted[0], Student.steps))
        outs.append((gains, res))
        state = res.state
    return per, outs


def _steps_twin(sim, A, T, n, rng, decide=None, actions=None):
    """The same epochs by len(actions) + 1 step() calls."""
    state = sim.reset(n, 1, rng)
    acts = list(range(A)) if actions is None else actions
    outs = []
    for _t in range(T):
        d = rng.integers(0, A, size=n) if decide is None else decide(n, rng)
        noise = sim.draw_noise(n, rng)
        gains = np.stack([sim.step(state, np.full(n, a), noise).gain for a in acts], axis=1)
        res = sim.step(state, d, noise)
        outs.append((gains, res))
        state = res.state
    return outs


def _counting_copies(monkeypatch):
    counted = [0]
    real = simulator.copy_env

    def copy_env(env, shared):
        counted[0] += 1
        return real(env, shared)

    monkeypatch.setattr(simulator, "copy_env", copy_env)
    return counted


def _assert_epochs_equal(got, want):
    for t, ((g1, r1), (g2, r2)) in enumerate(zip(got, want, strict=True)):
        assert np.array_equal(g1, g2), f"epoch {t}: fork gains {g1} != {g2}"
        for name in ("gain", "reward"):
            assert np.array_equal(getattr(r1, name), getattr(r2, name)), f"epoch {t} {name}"
        for name in ("obs", "done", "group"):
            assert np.array_equal(getattr(r1.state, name), getattr(r2.state, name)), \
                f"epoch {t} state.{name}"
        assert r1.state.t == r2.state.t


@pytest.mark.parametrize("factory, A", [(Student, 2), (ThreeActions, 3)])
def test_copies_and_steps_per_epoch(monkeypatch, factory, A):
    """A - 1 copies and A env steps per live individual and epoch; A + 1 step() calls make
    A copies and A steps (the decision's transition is reused from the step memo)."""
    sim = cf.systems.from_gym(factory, groups=["a", "b"], horizon=8).simulator
    twin = cf.systems.from_gym(factory, groups=["a", "b"], horizon=8).simulator
    counted = _counting_copies(monkeypatch)
    per, got = _epochs(sim, A, 8, 50, np.random.default_rng(1), counted)
    want = _steps_twin(twin, A, 8, 50, np.random.default_rng(1))
    _assert_epochs_equal(got, want)
    assert any(live < 50 for live, _, _ in per), "no episode ended mid-horizon"
    for t, (live, copies, steps) in enumerate(per):
        assert (copies, steps) == ((A - 1) * live, A * live), f"epoch {t}: {per[t]}"
    # the A + 1 step() calls: a copy per fork
    state = twin.reset(50, 1, np.random.default_rng(2))
    counted[0] = 0
    noise = twin.draw_noise(50, np.random.default_rng(3))
    for a in range(A):
        twin.step(state, np.full(50, a), noise)
    twin.step(state, np.zeros(50, dtype=np.intp), noise)
    assert counted[0] == A * 50


def test_state_api_one_snapshot_per_individual(monkeypatch):
    sim = cf.systems.from_gym(WithState3, groups=["a", "b"], horizon=6).simulator
    twin = cf.systems.from_gym(WithState3, groups=["a", "b"], horizon=6).simulator
    counted = _counting_copies(monkeypatch)
    state = sim.reset(40, 0, np.random.default_rng(4))
    Student.snapshots = 0
    noise = sim.draw_noise(40, np.random.default_rng(5))
    sim.step_forks(state, [0, 1, 2], np.random.default_rng(6).integers(0, 3, size=40), noise)
    assert Student.snapshots == 40 and counted[0] == 0
    _assert_epochs_equal(_epochs(sim, 3, 6, 40, np.random.default_rng(7), counted)[1],
                         _steps_twin(twin, 3, 6, 40, np.random.default_rng(7)))


def test_repeated_actions_and_a_decision_outside_them(monkeypatch):
    """Forks [2, 0, 2] (one repeated); decisions 1 among them, taken by no fork: the
    decision steps on its own."""
    sim = cf.systems.from_gym(ThreeActions, groups=["a", "b"], horizon=5).simulator
    twin = cf.systems.from_gym(ThreeActions, groups=["a", "b"], horizon=5).simulator
    counted = _counting_copies(monkeypatch)
    decide = lambda n, rng: rng.integers(0, 3, size=n)  # noqa: E731
    per, got = _epochs(sim, 3, 5, 40, np.random.default_rng(8), counted, decide, [2, 0, 2])
    want = _steps_twin(twin, 3, 5, 40, np.random.default_rng(8), decide, [2, 0, 2])
    _assert_epochs_equal(got, want)
    assert got[0][0].shape == (40, 3)
    assert all(steps <= 3 * live and copies <= 2 * live for live, copies, steps in per)


def test_consumed_state_refused():
    sim = cf.systems.from_gym(Student, groups=["a", "b"], horizon=2).simulator
    rng = np.random.default_rng(0)
    state = sim.reset(4, 0, rng)
    noise = sim.draw_noise(4, rng)
    sim.step_forks(state, [False, True], np.ones(4, dtype=bool), noise)
    with pytest.raises(RuntimeError, match="consumed by step_paths"):
        sim.step(state, np.ones(4, dtype=bool), noise)

"""The Gymnasium door's per-step path (``GymSimulator.step_paths`` and ``step_forks`` over
``readings.stepper``'s ``run``): every env step starts from the generator state its noise
names (what numpy's ``bit_generator.state`` setter gives, a buffered 32-bit value and a
moved increment cleared); a decomposition makes one env copy per branch of pi, the env
steps of the three-``step()`` reference path and one generator-state conversion per
individual-step; and its estimates, with Lambda, are bit for bit those of the reference
path and of the setter fallback, whether the gain reads the observation before the step
(``obs:INDEX``) or not (``info:KEY``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import causalfair as cf
from causalfair.engines import montecarlo as mc
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.adapters import callable_policy
from causalfair.systems.gym import forks, simulator
from causalfair.systems.gym.door import GymSimulator
from causalfair.systems.gym.forks import StepGenerator, generator_state


class Pupil(gym.Env):
    """One pupil: skill and group observed, 64- and 32-bit draws (a buffered 32-bit value
    after each step), the gain in info. Class-wide: env steps per action, and (when
    ``record`` is a list) each step's individual and generator state at its start; with
    ``move_inc``, each step ends by moving its generator's increment, as an env's
    ``set_state`` might."""

    steps = [0, 0]
    record: list | None = None
    move_inc = False

    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.who, self.g = seed, int((options or {}).get("group", 0))
        self.x = float(self.np_random.normal(0.4 - self.g, 0.6))
        return np.array([self.x, float(self.g)]), {"group": self.g}

    def step(self, action):
        Pupil.steps[action] += 1
        if Pupil.record is not None:
            Pupil.record.append((self.who, self.np_random.bit_generator.state))
        u = self.np_random.random()
        k = int(self.np_random.integers(0, 5, dtype=np.int32))  # one 32-bit draw: buffered
        dx = (0.3 if u < 0.6 else -0.25) if action == 1 else -0.05 * self.x + 0.01 * k
        self.x += dx
        if Pupil.move_inc:
            st = self.np_random.bit_generator.state
            self.np_random.bit_generator.state = {**st, "state": {**st["state"], "inc": 9}}
        return np.array([self.x, float(self.g)]), float(action) * u, False, False, {"gain": dx}


def _policy():
    """Action 1 exactly where the skill is positive (pi's branches are known)."""
    return callable_policy(lambda f: (f[:, 0] > 0).astype(np.float64), inputs="features",
                           name="sign")


@pytest.fixture(autouse=True)
def _fresh_counters():
    Pupil.steps, Pupil.record, Pupil.move_inc = [0, 0], None, False
    yield
    Pupil.record, Pupil.move_inc = None, False


@pytest.mark.parametrize("move_inc", [False, True], ids=["buffered", "moved-increment"])
def test_every_step_starts_from_its_noise_state(move_inc):
    sim = cf.systems.from_gym(Pupil, groups=["a", "b"], horizon=4).simulator
    Pupil.move_inc = move_inc
    rng = np.random.default_rng(3)
    state = state0 = sim.reset(30, 1, rng)
    which = {env.who: i for i, env in enumerate(state.envs)}
    seen = 0
    for _t in range(4):
        d = rng.random(30) < 0.5
        noise = sim.draw_noise(30, rng)
        Pupil.record = []
        res, _fork, res0 = sim.step_paths(state, d, state0, np.zeros(30, dtype=bool), noise)
        for who, st in Pupil.record:
            assert st == generator_state(*noise[which[who]].tolist())
        seen += len(Pupil.record)
        state, state0 = res.state, res0.state
    assert seen > 4 * 30  # the fork and pi0 stepped too


def _counted(monkeypatch, system, **kw):
    """decompose_mc with what its Monte Carlo batches (``montecarlo._simulate``: resets
    and epochs, not the simulator check or Lambda) do counted: (result, env steps per
    action, env copies, rows of generator states made by StepGenerator.words)."""
    counts = {"copies": 0, "rows": 0, "in": False}
    steps = [0, 0]
    real_copy, real_words, real_sim = simulator.copy_env, StepGenerator.words, mc._simulate

    def copy_env(env, shared, memo=None):
        counts["copies"] += counts["in"]
        return real_copy(env, shared, memo)

    def words(self, noise):
        out = real_words(self, noise)
        counts["rows"] += len(out) if counts["in"] else 0
        return out

    def _simulate(*args, **kwargs):
        before = list(Pupil.steps)
        counts["in"] = True
        try:
            return real_sim(*args, **kwargs)
        finally:
            counts["in"] = False
            for a in (0, 1):
                steps[a] += Pupil.steps[a] - before[a]

    with monkeypatch.context() as m:
        m.setattr(simulator, "copy_env", copy_env)
        m.setattr(StepGenerator, "words", words)
        m.setattr(mc, "_simulate", _simulate)
        res = decompose_mc(system, _policy(), **kw)
    return res, steps, counts["copies"], counts["rows"]


def test_decomposition_copies_steps_and_generator_rows(monkeypatch):
    """Per individual-step: one env copy per branch of pi (its steps with action 1: pi's
    copy, the fork stepping the env itself), no other (the reset's fresh envs aside); the
    env steps of the engine's three step() calls (the reference path, a copy per stepped
    env); one row of generator states; the same estimates."""
    system = cf.systems.from_gym(Pupil, groups=["s+", "s-"], horizon=6)
    n, T = 90, 6
    kw = dict(n=n, seed=2, benefit_n=2, batch_size=40)
    fast, steps, copies, rows = _counted(monkeypatch, system, **kw)
    monkeypatch.setattr(GymSimulator, "step_paths", None)  # the engine's three step() calls
    slow, steps_ref, copies_ref, rows_ref = _counted(monkeypatch, system, **kw)
    assert fast.estimates() == slow.estimates() and fast.se == slow.se
    assert steps == steps_ref and 0 < steps[1] < steps[0], (steps, steps_ref)
    resets = 2 * n  # a fresh env (a copy of the template) per individual
    assert copies - resets == steps[1], (copies, steps)  # pi's branches: only pi takes 1
    assert copies_ref - resets == sum(steps_ref)  # the reference path: a copy per env step
    assert rows == 2 * n * T and rows_ref == 3 * 2 * n * T, (rows, rows_ref)


@pytest.mark.parametrize("gain", ["info:gain", "obs:0"])
def test_estimates_identical_to_reference_and_setter_paths(monkeypatch, gain):
    """The decomposition with Lambda through step_paths/step_forks and the inline C-state
    writes, through the engine's step() calls, and with numpy's setter: bit for bit."""
    system = cf.systems.from_gym(Pupil, groups=["s+", "s-"], horizon=5, gain=gain)
    policy = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])),
                             inputs="features", name="logistic")
    kw = dict(n=60, seed=5, benefit_n=30, batch_size=25)
    fast = decompose_mc(system, policy, **kw)
    real_init = StepGenerator.__init__

    def setter_only(self):
        real_init(self)
        self._words = self.view = self.flags = None

    with monkeypatch.context() as m:
        m.setattr(StepGenerator, "__init__", setter_only)
        setter = decompose_mc(cf.systems.from_gym(Pupil, groups=["s+", "s-"], horizon=5,
                                                  gain=gain), policy, **kw)
    monkeypatch.setattr(GymSimulator, "step_paths", None)
    monkeypatch.delattr(GymSimulator, "step_forks")
    slow = decompose_mc(system, policy, **kw)
    assert forks.StepGenerator().view is not None  # the inline writes were in use
    for other in (setter, slow):
        assert fast.estimates() == other.estimates()
        assert fast.se == other.se and fast.Lambda == other.Lambda
    assert fast.Lambda is not None

"""How the Gymnasium door steps forks: a transition already made from the same env state
with the same action and random numbers is reused, not stepped again, and gives what a
fresh step gives; gymnasium.make's bookkeeping wrappers are stepped through."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import causalfair as cf


class CountingEnv(gym.Env):
    """One student; counts its steps (class-wide, so copies count too)."""

    steps = 0

    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.x = float(self.np_random.normal(0.5 - self.g, 1.0))
        return np.array([self.x, float(self.g)]), {"group": self.g}

    def step(self, action):
        CountingEnv.steps += 1
        u = self.np_random.random()
        dx = (0.4 if u < 0.6 else -0.3) if action == 1 else 0.1 * (u - 0.5)
        self.x += dx
        return np.array([self.x, float(self.g)]), float(action), False, False, {"gain": dx}


def _sim():
    return cf.systems.from_gym(CountingEnv, groups=["a", "b"], horizon=3).simulator


def test_fork_with_the_same_action_and_noise_is_reused_and_equals_a_fresh_step():
    sim = _sim()
    rng = np.random.default_rng(1)
    n = 40
    state = sim.reset(n, 0, rng)
    noise = sim.draw_noise(n, rng)
    d = np.arange(n) % 2 == 0  # half take the baseline action 0
    d0 = np.zeros(n, dtype=bool)
    CountingEnv.steps = 0
    res = sim.step(state, d, noise)
    assert CountingEnv.steps == n
    fork = sim.step(state, d0, noise)
    assert CountingEnv.steps == n + n // 2  # only those whose action differs are stepped
    # a fresh simulator (no reuse possible) gives the same fork, bit for bit
    fresh = pickle.loads(pickle.dumps(sim)).step(state, d0, noise)
    np.testing.assert_array_equal(fork.gain, fresh.gain)
    np.testing.assert_array_equal(fork.reward, fresh.reward)
    np.testing.assert_array_equal(fork.state.obs, fresh.state.obs)
    np.testing.assert_array_equal(res.state.obs[~d], fork.state.obs[~d])
    # other random numbers are other transitions: no reuse
    CountingEnv.steps = 0
    sim.step(state, d0, sim.draw_noise(n, rng))
    assert CountingEnv.steps == n
    # a state that shares snapshots with another steps on unchanged
    again = sim.step(fork.state, d, sim.draw_noise(n, np.random.default_rng(5)))
    ref = pickle.loads(pickle.dumps(sim)).step(fresh.state, d,
                                              sim.draw_noise(n, np.random.default_rng(5)))
    np.testing.assert_array_equal(again.gain, ref.gain)


def test_gym_make_bookkeeping_wrappers_are_stepped_through_others_kept():
    gym.register("causalfair_test/Counting-v0", entry_point=CountingEnv, max_episode_steps=7)
    try:
        system = cf.systems.from_gym("causalfair_test/Counting-v0", groups=["a", "b"])
        sim = system.simulator
        assert type(sim._template) is CountingEnv  # TimeLimit, OrderEnforcing, checker gone
        assert system.horizon == 7  # the spec's max_episode_steps still sets the horizon
        wrapped = cf.systems.from_gym(
            lambda: gym.wrappers.TransformReward(CountingEnv(), lambda r: 2 * r),
            groups=["a", "b"], horizon=2)
        assert type(wrapped.simulator._template).__name__ == "TransformReward"
        rng = np.random.default_rng(0)
        st = wrapped.simulator.reset(4, 0, rng)
        out = wrapped.simulator.step(st, np.ones(4, dtype=bool), wrapped.simulator.draw_noise(4, rng))
        np.testing.assert_array_equal(out.reward, 2.0)
    finally:
        gym.registry.pop("causalfair_test/Counting-v0", None)

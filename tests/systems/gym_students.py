"""The test envs of the Gymnasium door's fork tests (test_gym_speed_paths.py,
test_gym_step_forks.py): one student per env, its own ``np_random`` (64- and 32-bit
draws), a group pinned through ``options``, the gain in ``info``; the episode ends when
the skill leaves [-1.5, 1.5]. Class-wide counters: env steps, ended episodes, state
snapshots (``WithState``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Student(gym.Env):
    """One student; float32 observations (skill, group) and a history kept in an array."""

    steps = ends = snapshots = 0

    def __init__(self, n_actions=2):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(n_actions)
        self.hist = np.zeros(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.x = float(self.np_random.normal(0.5 - self.g, 0.5))
        self.hist = np.zeros(3)
        return np.array([self.x, self.g], dtype=np.float32), {"group": self.g}

    def step(self, action):
        Student.steps += 1
        u, z = self.np_random.random(), self.np_random.integers(0, 7)  # 32-bit draws too
        dx = (0.4 if u < 0.6 else -0.3) * (action - 0.5) * 2 + 0.01 * z
        self.x += dx
        self.hist = np.roll(self.hist, 1)
        self.hist[0] = self.x
        ended = abs(self.x) > 1.5
        Student.ends += ended
        return (np.array([self.x, self.g], dtype=np.float32), float(action) - u, ended,
                False, {"gain": dx + self.hist[1:].sum() * 1e-3})


class ThreeActions(Student):
    """The same student choosing among three actions."""

    def __init__(self):
        super().__init__(3)


class WithState(Student):
    """The same student with a state API (``get_state`` counts the snapshots)."""

    def get_state(self):
        Student.snapshots += 1
        return (self.x, self.g, self.hist.copy())

    def set_state(self, s):
        self.x, self.g, hist = s
        self.hist = hist.copy()


class WithState3(WithState):
    """The student with a state API choosing among three actions."""

    def __init__(self):
        super().__init__(3)

"""A textbook Gymnasium env for docs/own-system.md, "Audit your Gymnasium env": one
student per env, tutored (action 1) or not (action 0, the baseline), who succeeds with
probability sigmoid(skill). The group is pinned by ``reset(options={"group": g})``, the
qualification gain (the change of skill) is returned in ``info["gain"]``, and every step
draws the same random numbers whatever the action, from ``self.np_random``."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class TutorEnv(gym.Env):
    def __init__(self, horizon: int = 10):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)
        self.horizon = horizon

    def _obs(self):
        return np.array([self.skill, float(self.group), float(self.t)])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.group = int((options or {}).get("group", self.np_random.integers(2)))
        self.skill = float(self.np_random.normal(0.5 if self.group == 0 else -0.5, 1.0))
        self.t = 0
        return self._obs(), {"group": self.group}

    def step(self, action):
        u, z = self.np_random.random(), self.np_random.normal()  # whatever the action
        success = u < 1.0 / (1.0 + np.exp(-self.skill))
        change = (0.4 if success else -0.3) if action == 1 else -0.1 * self.skill
        change += 0.1 * z
        self.skill += change
        self.t += 1
        reward = (1.0 if success else -1.0) if action == 1 else 0.0
        return self._obs(), reward, False, self.t >= self.horizon, {"gain": change}


def make_env(horizon: int = 10) -> TutorEnv:
    return TutorEnv(horizon)

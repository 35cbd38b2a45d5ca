"""Envs that do not follow Gymnasium's API where the door relies on it are refused with
one line saying what is wrong and how to fix it (instead of failing later on a
mis-unpacked observation): gym 0.21's reset (an observation alone) and step (four
values), and a reset without ``options`` under ``group="options"``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import causalfair as cf
from causalfair.systems.gym.checks import GymForkError


class Walk(gym.Env):
    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.x = float(self.np_random.normal(-self.g, 1.0))
        return np.array([self.x, self.g], dtype=np.float64), {"group": self.g}

    def step(self, action):
        dx = 0.1 * action + 0.01 * self.np_random.random()
        self.x += dx
        return np.array([self.x, self.g], dtype=np.float64), 0.0, False, False, {"gain": dx}


class OldReset(Walk):
    def reset(self, *, seed=None, options=None):
        return super().reset(seed=seed, options=options)[0]


class OldStep(Walk):
    def step(self, action):
        o, r, term, _trunc, info = super().step(action)
        return o, r, term, info


class NoOptions(Walk):
    def reset(self, *, seed=None):
        return super().reset(seed=seed)


@pytest.mark.parametrize("env, words", [
    (OldReset, r"reset returned array\(\[.*\]\), not \(observation, info\); return "
               r"\(observation, info\) from reset .*shimmy's GymV21CompatibilityV0"),
    (OldStep, r"step returned 4 values, not \(observation, reward, terminated, truncated, "
              r"info\); return"),
    (NoOptions, r"its reset takes no options, and group = 'options' pins .*give reset an "
                r"options=None argument"),
])
def test_gymnasium_api_refused_with_the_fix(env, words):
    with pytest.raises(GymForkError, match=words) as exc:
        cf.systems.from_gym(env, groups=["a", "b"])
    assert "\n" not in str(exc.value)


def test_the_same_env_on_gymnasium_api_is_accepted():
    assert cf.systems.from_gym(Walk, groups=["a", "b"]).n_groups == 2

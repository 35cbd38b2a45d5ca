"""Envs that do not follow Gymnasium's API where the door relies on it are refused with
one line saying what is wrong and how to fix it (instead of failing later on a
mis-unpacked observation): gym 0.21's reset (an observation alone) and step (four
values), and a reset without ``options`` under ``group="options"``."""

from __future__ import annotations

import pytest

import causalfair as cf
from causalfair.systems.gym.checks import GymForkError

from .gym_students import Student


class OldReset(Student):
    def reset(self, *, seed=None, options=None):
        return super().reset(seed=seed, options=options)[0]


class OldStep(Student):
    def step(self, action):
        o, r, term, _trunc, info = super().step(action)
        return o, r, term, info


class NoOptions(Student):
    def reset(self, *, seed=None):
        return super().reset(seed=seed)


@pytest.mark.parametrize("env, words", [
    (OldReset, r"reset returned array\(\[.*\), not \(observation, info\); return "
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
    assert cf.systems.from_gym(Student, groups=["a", "b"]).n_groups == 2

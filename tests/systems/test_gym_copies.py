"""Copies of a Gymnasium env continue its individual: an env pickled through Gymnasium's
``EzPickle`` (as its toy-text, Box2D and MuJoCo envs are) is copied by its state, not
rebuilt from its constructor's arguments; an env whose copies are rebuilt some other way
is refused, since two forks would still agree with each other."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils import EzPickle

import causalfair as cf
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.adapters import callable_policy
from causalfair.systems.gym.checks import GymForkError
from causalfair.systems.gym.forks import copy_env

from .gym_students import Student

POLICY = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                         name="logistic")


class EzStudent(Student, EzPickle):
    """The same student, pickled as its constructor's arguments."""

    def __init__(self, n_actions=2):
        Student.__init__(self, n_actions)
        EzPickle.__init__(self, n_actions)


class Rebuilt(Student):
    """A student whose pickling (and so ``copy.deepcopy``) builds a new one."""

    def __reduce__(self):
        return (type(self), ())


def test_an_ezpickle_env_audits_as_the_same_env_without_it():
    plain = decompose_mc(cf.systems.from_gym(Student, groups=["a", "b"], horizon=4), POLICY,
                         n=300, seed=2, benefit_n=100)
    ez = decompose_mc(cf.systems.from_gym(EzStudent, groups=["a", "b"], horizon=4), POLICY,
                      n=300, seed=2, benefit_n=100)
    assert ez.estimates() == plain.estimates() and ez.se == plain.se


def test_an_env_whose_copies_are_rebuilt_is_refused():
    with pytest.raises(GymForkError, match=r"a copy of a reset env fails where the env itself "
                       r"steps .*Rebuilt's __getstate__ or __reduce__ .*give it get_state\(\)"
                       ) as exc:
        cf.systems.from_gym(Rebuilt, groups=["a", "b"])
    assert "\n" not in str(exc.value)


def test_gymnasium_cliffwalking_copies_keep_the_position():
    """An env written outside this project, wrapped: a copy made mid-episode is where the
    env is, not back at the start."""
    if "CliffWalking-v1" not in gym.registry:
        pytest.skip("this Gymnasium has no CliffWalking-v1")
    from gymnasium.wrappers import FlattenObservation

    env = FlattenObservation(gym.make("CliffWalking-v1").unwrapped)
    env.reset(seed=0)
    for a in (0, 1, 1):  # up, then right twice
        env.step(a)
    twin = copy_env(env, {})
    assert twin.unwrapped.s == env.unwrapped.s != 36  # 36: the start
    assert np.array_equal(twin.step(2)[0], env.step(2)[0])

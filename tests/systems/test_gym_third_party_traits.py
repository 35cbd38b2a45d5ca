"""Traits of Gymnasium envs from third-party packages, each reproduced by a tiny env
written here (CI has none of the packages), through ``cf.systems.from_gym``:

- an attribute that refers back to the env (flappy-bird-gymnasium keeps a bound method
  ``self._get_observation`` set in ``__init__``; helpers holding ``self.env = env``):
  copies refer to themselves, as ``copy.deepcopy`` makes them;
- a reward vector (mo-gymnasium's multi-objective envs) is refused with the wrapper that
  scalarizes it; a reward of one value in an array is that value;
- a Dict observation with a part that cannot be flattened (minigrid's mission string) is
  refused with the ``FilterObservation`` that keeps the others, and that fix audits.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import causalfair as cf
from causalfair.errors import SystemError_
from causalfair.policies.adapters import callable_policy
from causalfair.systems.gym.forks import copy_env, shared_objects

ALWAYS = callable_policy(lambda f: np.ones(len(f)), inputs="features", name="always")


class _Sensor:
    """Reads the env it is attached to (a helper holding ``self.env = env``)."""

    def __init__(self, env):
        self.env = env

    def read(self):
        return np.array([self.env.x, self.env.g], dtype=np.float32)


class Walk(gym.Env):
    """Deterministic: x starts at the group, each step adds the action."""

    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def _get_obs(self):
        return np.array([self.x, self.g], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.x = float(self.g)
        return self._get_obs(), {"group": self.g}

    def step(self, action):
        self.np_random.random()  # the same draws whatever the action
        self.x += int(action)
        return self._get_obs(), 0.0, False, False, {}


class BoundObs(Walk):
    """The walk whose observation comes through a bound method stored in ``__init__``
    (flappy-bird-gymnasium's ``self._get_observation``) and a sensor holding the env;
    ``x`` exists only after reset."""

    def __init__(self):
        super().__init__()
        self._get_obs = self._features
        self.sensor = _Sensor(self)

    def _features(self):
        return self.sensor.read()


def test_an_env_whose_attributes_refer_back_to_it_forks_itself():
    """A copy's bound method and sensor were copies of another env: a reset copy read the
    never-reset template (AttributeError at reset, as flappy-bird-gymnasium's did), and a
    fork's observations never moved."""
    system = cf.systems.from_gym(BoundObs, groups=["a", "b"], gain="obs:0", horizon=3)
    res = cf.decompose(system, ALWAYS, n=8, seed=0).estimates()
    # always action 1: x grows by 1 a step, gain 1 a step; the baseline (0) gains nothing
    assert res["V[a]"] == res["V[b]"] == 3.0 and res["V_0[a]"] == 0.0, res
    env = system.simulator._template
    twin = copy_env(env, shared_objects(env))
    assert twin._get_obs.__self__ is twin and twin.sensor.env is twin


def test_copies_keep_one_array_held_by_two_attributes_one_array():
    env = Walk()
    env.reset(seed=0)
    env.pos = np.zeros(2)
    env.view = env.pos  # two names of one array, as copy.deepcopy keeps them
    env.box = [env.pos]  # and the same array inside a deep-copied attribute
    twin = copy_env(env, {})
    assert twin.view is twin.pos and twin.box[0] is twin.pos and twin.pos is not env.pos


class VectorReward(Walk):
    """A multi-objective env (mo-gymnasium): the reward is a vector; ``width`` 1 gives an
    array of one value."""

    width = 2

    def step(self, action):
        obs, _, term, trunc, info = super().step(action)
        return obs, np.full(self.width, float(action), dtype=np.float32), term, trunc, info


class OneReward(VectorReward):
    width = 1


def test_a_reward_vector_is_refused_with_the_wrapper_that_scalarizes_it():
    """It was 'gym env X.step raised TypeError: only 0-dimensional arrays can be
    converted', blaming the env's step for causalfair's own float()."""
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(VectorReward, groups=["a", "b"], gain="reward", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "not one number" in msg and "LinearReward" in msg, msg
    assert "raised" not in msg, msg
    one = cf.systems.from_gym(OneReward, groups=["a", "b"], gain="reward", horizon=2)
    res = cf.decompose(one, ALWAYS, n=4, seed=0).estimates()
    assert res["V[a]"] == 2.0 and res["utility[a]"] == 2.0, res


class ArrayGain(Walk):
    def step(self, action):
        obs, r, term, trunc, info = super().step(action)
        return obs, r, term, trunc, {"gain": np.array([1.0, 2.0])}


def test_a_gain_of_several_values_is_refused_naming_the_gain():
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(ArrayGain, groups=["a", "b"], horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "gain = 'info:gain' gave" in msg and "not one number" in msg, msg


class _Mission(spaces.Space):
    """A text part of an observation (minigrid's MissionSpace): no flat form."""

    def __init__(self):
        super().__init__(None, None)

    def sample(self, mask=None, probability=None):
        return "get to the green square"

    def contains(self, x):
        return isinstance(x, str)


class WithMission(Walk):
    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Dict({
            "direction": spaces.Discrete(4),
            "image": spaces.Box(0, 255, shape=(2,), dtype=np.uint8),
            "mission": _Mission()})

    def _get_obs(self):
        return {"direction": 1, "image": np.array([self.x, self.g], dtype=np.uint8),
                "mission": "get to the green square"}


def test_a_dict_with_a_mission_string_names_the_filter_that_fixes_it():
    """The refusal named FlattenObservation alone, which raises NotImplementedError on
    the mission part."""
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(WithMission, groups=["a", "b"], gain="obs:4", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "'mission' (_Mission) cannot be flattened" in msg, msg
    assert "FilterObservation(env, ['direction', 'image'])" in msg, msg

    def fixed():  # what the message says, literally
        return gym.wrappers.FlattenObservation(
            gym.wrappers.FilterObservation(WithMission(), ["direction", "image"]))

    system = cf.systems.from_gym(fixed, groups=["a", "b"], gain="obs:4", horizon=2)
    assert system.simulator.width == 6  # direction one-hot (4) and the image (2)
    assert cf.decompose(system, ALWAYS, n=4, seed=0).estimates()["V[b]"] == 2.0


class LateGlobal(Walk):
    """mo-gymnasium's minecart: its step reads np.random (scipy.stats' rvs) only once the
    cart is at a mine, later than the fork check's few steps reach."""

    def step(self, action):
        if self.x >= 5:
            np.random.random()
        return super().step(action)


def test_a_step_reading_np_random_late_is_refused_while_auditing():
    """The check saw three steps and passed; the audit then drew from np.random."""
    system = cf.systems.from_gym(LateGlobal, groups=["a", "b"], gain="obs:0", horizon=8)
    assert cf.decompose(system, ALWAYS, n=4, seed=0, horizon=4).estimates()["V[b]"] == 4.0
    with pytest.raises(SystemError_) as exc:
        cf.decompose(system, ALWAYS, n=4, seed=0)
    msg = str(exc.value)
    assert "\n" not in msg and "reads a global random generator" in msg, msg


class OwnRandom(Walk):
    """Its own ``random.Random`` seeded at reset, drawn only under action 1."""

    def reset(self, *, seed=None, options=None):
        import random

        self.rng = random.Random(seed)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if action == 1:
            self.x += self.rng.random()
        return super().step(action)


class _World:
    """A simulation object with its own step and a generator seeded once."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def step(self):
        return self.rng.normal()


class WorldNoise(Walk):
    def __init__(self):
        super().__init__()
        self.world = _World()

    def step(self, action):
        self.x += 0.1 * self.world.step()
        return super().step(action)


def test_own_generators_that_forks_would_not_share_are_refused():
    """A generator of the env's own (not self.np_random) drawn under one action only, or
    held by an object with a step method and in one state for every individual: both
    audited silently (forks without common random numbers; every individual the same
    noise)."""
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(OwnRandom, groups=["a", "b"], gain="obs:0", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "self.rng under different actions" in msg, msg
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(WorldNoise, groups=["a", "b"], gain="obs:0", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "self.world.rng, in the same state for every individual" in msg, msg


class Unseeded(Walk):
    """Reset never calls ``super().reset(seed=seed)`` (np_random seeded from the OS) and
    picks a start with the global ``random`` (mo-gymnasium's four-room)."""

    def reset(self, *, seed=None, options=None):
        import random

        self.g = int((options or {}).get("group", 0))
        self.x = self.g + random.choice([0.0, 0.5, 1.0]) + self.np_random.random()
        return self._get_obs(), {"group": self.g}


def test_a_reset_its_seed_does_not_fix_is_refused():
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(Unseeded, groups=["a", "b"], gain="obs:0", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "two resets with one seed gave two individuals" in msg, msg
    assert "super().reset(seed=seed)" in msg, msg


class ScipyNoise(Walk):
    """Noise from a scipy.stats distribution without random_state (mo-gymnasium's
    minecart): it draws from np.random's RandomState, which the distribution holds."""

    def __init__(self):
        super().__init__()
        import scipy.stats

        self.noise = scipy.stats.norm(0.0, 0.1)

    def step(self, action):
        self.x += float(self.noise.rvs())
        return super().step(action)


def test_a_scipy_distribution_without_random_state_is_refused_as_a_global_read():
    """Copies of the env copied np.random's RandomState with it: every individual drew
    the same noise from a copy of it, and no check saw a global read."""
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(ScipyNoise, groups=["a", "b"], gain="obs:0", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "reads a global random generator" in msg, msg

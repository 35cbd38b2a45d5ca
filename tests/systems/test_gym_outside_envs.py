"""Gymnasium envs written the way users outside causalfair write them, through
``cf.systems.from_gym``: a Dict observation space is refused with the wrapper that fixes
it; an env registered on import of its module audits by Gymnasium's own ``"module:ID"``
form; an unregistered id names that form; and ``gymnasium.make`` of an env under a user's
own wrapper steps without the bookkeeping wrappers around it, sharing the env spec
between copies."""

from __future__ import annotations

import textwrap

import gymnasium as gym
import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import SystemError_
from causalfair.systems.gym.forks import copy_env, shared_objects

ENV_SRC = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces


    class Clinic(gym.Env):
        """Health in obs[0]; actions 0 less care, 1 standard (the baseline), 2 intensive."""

        def __init__(self):
            self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
            self.action_space = spaces.Discrete(3)

        def _obs(self):
            return np.array([self.health, self.g], dtype=np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.g = int((options or {}).get("group", self.np_random.integers(2)))
            self.health = float(self.np_random.normal(1.0 - self.g, 1.0))
            return self._obs(), {"group": self.g}

        def step(self, action):
            eps = self.np_random.normal(size=2)
            self.health += [-0.2, 0.0, 0.5][int(action)] * (1 + 0.5 * eps[0]) + 0.1 * eps[1]
            return self._obs(), self.health, False, False, {}


    class Scale(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)

        def observation(self, obs):
            return (0.5 * obs).astype(np.float32)


    class DictObs(Clinic):
        def __init__(self):
            super().__init__()
            self.observation_space = spaces.Dict({
                "health": spaces.Box(-np.inf, np.inf, shape=(1,)),
                "group": spaces.Discrete(2)})


    def make_scaled():
        return Scale(Clinic())


    gym.register("causalfair_q27/Clinic-v0", entry_point=make_scaled, max_episode_steps=4)
''')


class _Mixed:
    """Less care, standard care or intensive care with probabilities 0.2, 0.5, 0.3."""

    def action_probs(self, obs):
        return np.tile([0.2, 0.5, 0.3], (len(obs), 1))


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "q27_user_envs.py").write_text(ENV_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("q27_user_envs")
    yield mod
    gym.registry.pop("causalfair_q27/Clinic-v0", None)
    import sys

    sys.modules.pop("q27_user_envs", None)


def test_dict_observation_space_is_refused_with_the_wrapper_that_fixes_it(user_module):
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(user_module.DictObs, groups=["a", "b"], gain="obs:0", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "Dict" in msg and "FlattenObservation" in msg, msg
    flat = cf.systems.from_gym(lambda: gym.wrappers.FlattenObservation(user_module.Clinic()),
                               groups=["a", "b"], gain="obs:0", baseline=1, horizon=2)
    assert flat.n_actions == 3


def test_gymnasium_module_id_form_audits_and_unregistered_id_names_it(user_module):
    """``"module:ID"`` is what gymnasium.make accepts for an env its module registers;
    from_gym used to read it as ``module:callable`` and refuse it."""
    system = cf.systems.from_gym("q27_user_envs:causalfair_q27/Clinic-v0", groups=["a", "b"],
                                 gain="obs:0", baseline=1)
    assert system.id == "gym:q27_user_envs:causalfair_q27/Clinic-v0"
    assert system.horizon == 4  # the registered max_episode_steps
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym("causalfair_q27/Nowhere-v0", groups=["a", "b"], gain="obs:0")
    msg = str(exc.value)
    assert "\n" not in msg and "not a registered Gymnasium id" in msg and "'module:ID'" in msg, msg


def test_gym_make_under_a_user_wrapper_steps_without_bookkeeping_and_shares_the_spec(user_module):
    """gymnasium.make around a user's wrapper: TimeLimit, OrderEnforcing and the checker
    are taken off (they were kept, with an EnvSpec deep-copied at every fork: 6x slower);
    the user's wrapper stays and still transforms the observations."""
    system = cf.systems.from_gym("causalfair_q27/Clinic-v0", groups=["a", "b"], gain="obs:0",
                                 baseline=1)
    sim = system.simulator
    assert type(sim._template).__name__ == "Scale"
    env = sim._template
    twin = copy_env(env, shared_objects(env))
    assert twin is not env and twin.env is not env.env
    assert twin._cached_spec is env._cached_spec or env._cached_spec is None
    rng = np.random.default_rng(0)
    st = sim.reset(3, 1, rng)
    np.testing.assert_array_equal(st.obs[:, 1], 0.5)  # Scale(group 1)
    # the same numbers as the env made without gymnasium.make's wrappers
    ref = cf.systems.from_gym(user_module.make_scaled, groups=["a", "b"], gain="obs:0",
                              baseline=1, horizon=4)
    a = cf.decompose(system, _Mixed(), n=40, seed=1)
    b = cf.decompose(ref, _Mixed(), n=40, seed=1)
    assert a.estimates() == b.estimates()


class _Hiring(gym.Env):
    """Reset draws the applicant's sex itself (70% "M") and reports it in info["sex"]; it
    ignores options, as an env written without causalfair in mind does."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-10, 10, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.sex = "M" if self.np_random.random() < 0.7 else "F"
        self.skill = float(self.np_random.normal(0.3 if self.sex == "M" else -0.3))
        return np.array([self.skill], dtype=np.float32), {"sex": self.sex}

    def step(self, action):
        z = self.np_random.normal()
        old = self.skill
        self.skill += 0.3 * action + 0.1 * z
        return np.array([self.skill], dtype=np.float32), 0.0, False, False, {"gain": self.skill - old}


def test_env_that_ignores_the_group_option_is_refused_not_audited_as_one_population():
    """group = "options" (the default) on an env whose reset ignores options: every group
    was the same population and C came out near 0 for any policy, silently."""
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(_Hiring, groups=["M", "F"], horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "same individuals for every group" in msg and "info:KEY" in msg, msg
    system = cf.systems.from_gym(_Hiring, groups=["M", "F"], group="info:sex", horizon=2)
    obs = system.simulator.reset(20, 1, np.random.default_rng(0)).obs
    assert obs[:, 0].mean() < 0.0  # the "F" applicants, drawn by rejection


def test_info_group_values_that_are_no_group_name_are_named():
    """group = "info:KEY" with group names the env does not use: the refusal said the
    group was too rare; it names the values the env reported."""
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(_Hiring, groups=["male", "female"], group="info:sex", horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "'M'" in msg and "'F'" in msg and "too rare" not in msg, msg


class _Rates:
    """ml-fairness-gym keeps a generator in the env's state object."""

    def __init__(self, reseed=None):
        self.rng = np.random.RandomState(0 if reseed is None else reseed)


class _OwnGenerator(gym.Env):
    """Its step draws from ``self.state.rng``; with ``reseed`` reset seeds it per individual."""

    reseed = False

    def __init__(self):
        self.observation_space = gym.spaces.Box(-10, 10, shape=(2,), dtype=np.float64)
        self.action_space = gym.spaces.Discrete(2)
        self.state = _Rates()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.reseed:
            self.state = _Rates(seed % 2**32)
        self.g = options["group"]
        self.x = float(self.np_random.normal(-self.g))
        return np.array([self.x, self.g], float), {"group": self.g}

    def step(self, action):
        old = self.x
        self.x += 0.5 * action * self.state.rng.normal() + 0.1
        return np.array([self.x, self.g], float), 0.0, False, False, {"gain": self.x - old}


class _OwnGeneratorReseeded(_OwnGenerator):
    reseed = True


def test_env_stepping_a_generator_every_individual_shares_is_refused():
    """Every individual drew the same step noise: V came out as one draw with a standard
    error of 1e-17. An env that seeds its own generator per individual is fine."""
    with pytest.raises(SystemError_) as exc:
        cf.systems.from_gym(_OwnGenerator, groups=["a", "b"], horizon=2)
    msg = str(exc.value)
    assert "\n" not in msg and "self.state.rng" in msg and "self.np_random" in msg, msg
    system = cf.systems.from_gym(_OwnGeneratorReseeded, groups=["a", "b"], horizon=2)
    res = cf.decompose(system, lambda obs: np.ones(len(obs)), n=100, seed=0)
    assert res.se["V[a]"] > 0.01

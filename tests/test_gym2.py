"""The Gymnasium door with an env written as Gymnasium's docs write one (not for
causalfair): a ``TimeLimit`` the factory adds itself, a vector env returned by mistake, and
a ``NormalizeObservation`` wrapper whose running statistics restart at every individual."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import SystemError_

gym = pytest.importorskip("gymnasium")
from gymnasium.wrappers import NormalizeObservation, TimeLimit  # noqa: E402


class Hiring(gym.Env):
    """One applicant: skill and group in a flat Box; reject, interview or hire."""

    observation_space = gym.spaces.Box(-10, 10, shape=(2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.skill = float(self.np_random.normal(-0.5 * self.g))
        return np.array([self.skill, self.g], dtype=np.float32), {"group": self.g}

    def step(self, action):
        change = (0.0, 0.1, 0.4)[int(action)] + 0.1 * float(self.np_random.normal())
        self.skill += change
        obs = np.array([self.skill, self.g], dtype=np.float32)
        return obs, float(action == 2), False, False, {"gain": change}


def make_env():
    return TimeLimit(Hiring(), max_episode_steps=5)


def test_a_timelimit_the_factory_adds_sets_the_horizon():
    """The horizon came from a registered spec's max_episode_steps only: a factory's own
    TimeLimit gave T = 20."""
    assert cf.systems.from_gym(make_env, groups=["a", "b"]).horizon == 5


@pytest.mark.parametrize("registered", [False, True])
def test_an_audit_past_a_timelimit_warns(registered):
    """The door steps envs without their TimeLimit (gymnasium.make's or the factory's),
    so the probe for truncation never saw it end an episode: an audit of T = 7 on episodes
    of 5 steps ran without the warning that names the horizon to give."""
    env = make_env
    if registered:
        env = "causalfair_gym2/Hiring-v0"
        if env not in gym.registry:
            gym.register(env, entry_point=Hiring, max_episode_steps=5)
    system = cf.systems.from_gym(env, groups=["a", "b"], horizon=7)
    with pytest.warns(UserWarning, match=r"truncated\) after 5 steps.*--horizon 5"):
        decompose_mc(system, "uniform", n=4, seed=0, benefit_n=2)


def test_a_vector_env_is_refused_naming_the_one_env_to_return():
    """A SyncVectorEnv was refused for its MultiDiscrete action space, which names
    neither the vector env nor the fix."""
    def make_vec():
        return gym.vector.SyncVectorEnv([make_env, make_env])

    with pytest.raises(SystemError_, match=r"vector env \(SyncVectorEnv of 2 envs\).*return one "
                                           r"env from the factory"):
        cf.systems.from_gym(make_vec, groups=["a", "b"])


def test_observations_normalized_by_running_statistics_get_a_warning():
    """NormalizeObservation's statistics restart at every individual (each is a copy of
    the factory's env), so the policy reads observations unlike in training: warned,
    naming update_running_mean; frozen statistics are not."""
    def make_norm():
        return NormalizeObservation(make_env())

    with pytest.warns(UserWarning, match=r"NormalizeObservation wrapper updates its running "
                                         r"mean.*update_running_mean = False"):
        cf.systems.from_gym(make_norm, groups=["a", "b"])

    def make_frozen():
        env = make_norm()
        env.update_running_mean = False
        return env

    system = cf.systems.from_gym(make_frozen, groups=["a", "b"])  # warnings are errors here
    assert system.horizon == 5


def test_a_copy_of_a_wrapper_stack_owns_its_queues_and_statistics():
    """Copies of RecordEpisodeStatistics' queues (copied as queues of numbers) and of
    NormalizeObservation's statistics belong to the copy: stepping it leaves the
    original's as they were."""
    from gymnasium.wrappers import RecordEpisodeStatistics

    from causalfair.systems.gym.forks import copy_env, shared_objects

    env = RecordEpisodeStatistics(NormalizeObservation(make_env()), buffer_length=7)
    env.reset(seed=0, options={"group": 1})
    for _ in range(5):
        env.step(1)
    queue, mean = list(env.return_queue), env.env.obs_rms.mean.copy()
    copy = copy_env(env, shared_objects(env))
    assert copy.return_queue.maxlen == 7 and list(copy.return_queue) == queue
    copy.reset(seed=1, options={"group": 0})
    for _ in range(5):
        copy.step(2)
    assert len(copy.return_queue) == len(queue) + 1
    assert list(env.return_queue) == queue
    np.testing.assert_array_equal(env.env.obs_rms.mean, mean)


class StepSamples(Hiring):
    """Draws its step's noise by ``action_space.sample()``, as many envs do."""

    def step(self, action):
        self.skill += 0.1 * int(action) + 0.01 * int(self.action_space.sample())
        return np.array([self.skill, self.g], dtype=np.float32), 0.0, False, False, {"gain": 0.0}


class ResetSamples(Hiring):
    """Draws its individual by ``observation_space.sample()``."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed, options=options)
        self.skill = float(self.observation_space.sample()[0])
        return np.array([self.skill, self.g], dtype=np.float32), {"group": self.g}


@pytest.mark.parametrize(("env", "where"), [(StepSamples, "step"), (ResetSamples, "reset")])
def test_drawing_from_a_space_is_refused_naming_the_space(env, where):
    """A space's generator is not set by reset(seed=...) and is shared by the copies: the
    refusal blamed the env's __getstate__/__reduce__ (step) or generators it does not use
    (reset), and named neither the space nor the fix."""
    with pytest.raises(SystemError_, match=rf"its {where} draws from action_space.sample\(\) "
                                           r"or observation_space.sample\(\).*self.np_random"):
        cf.systems.from_gym(env, groups=["a", "b"])

"""The seeds' Gymnasium environments as a Gymnasium user meets them: an observation is
the user's own array (writing over it leaves the environment as it was), and an episode
length that is not an integer >= 1 is refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.errors import InputError
from causalfair.systems.gym.infectious import InfectiousEnv, VecInfectiousEnv
from tests.conftest import check_gym_env


def _next_state(env, overwrite: bool) -> np.ndarray:
    obs, _ = env.reset(seed=3)
    if overwrite:
        obs[...] = 2  # an in-place wrapper, or a user, writes over the observation
    nxt = env.step(34)[0]
    kept = nxt.copy()
    if overwrite:
        nxt[...] = 0
    return np.concatenate([kept, env.step(34)[0]])


@pytest.mark.parametrize("harder", [False, True])
def test_infectious_observation_is_a_copy(harder):
    env = InfectiousEnv(harder=harder)
    assert np.array_equal(_next_state(env, False), _next_state(env, True))


def test_vec_infectious_observation_is_a_copy():
    env = VecInfectiousEnv(3)
    obs = env.reset(np.random.default_rng(0))
    before = env.state.health.copy()
    obs[...] = 2
    assert np.array_equal(env.state.health, before)
    obs = env.step(np.array([34, 34, 34]))[0]
    before = env.state.health.copy()
    obs[...] = 0
    assert np.array_equal(env.state.health, before)


@pytest.mark.parametrize("env_id, key", [
    ("causalfair/Infectious-v0", "horizon"),
    ("causalfair/InfectiousHarder-v0", "horizon"),
    ("causalfair/System-v0", "horizon"),
    ("causalfair/Attention-v0", "max_steps"),
])
@pytest.mark.parametrize("value", [0, -3, 2.7, "abc", True])
def test_episode_length_is_checked(env_id, key, value):
    import gymnasium as gym

    with pytest.raises(InputError, match=rf"^{key}: must be an integer >= 1, got "):
        gym.make(env_id, **{key: value})


def test_episode_length_is_kept():
    import gymnasium as gym

    env = gym.make("causalfair/Infectious-v0", horizon=2).unwrapped
    env.reset(seed=0)
    assert [env.step(34)[3] for _ in range(2)] == [False, True]


def test_system_env_reads_unnamed_features():
    """attention-central names no features (165 columns pair no individuals), yet its
    observations carry them: System-v0 steps it (docs/simulators.md: any registered id)."""
    import warnings

    import gymnasium as gym

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # unbounded feature boxes
        check_gym_env("causalfair/System-v0", system="attention-central", horizon=3)
    env = gym.make("causalfair/System-v0", system="attention-central", horizon=3).unwrapped
    obs, _ = env.reset(seed=1)
    assert obs.shape == (5 * 165,) and env.action_space.nvec.tolist() == [7] * 5
    obs = env.step(env.action_space.sample())[0]
    rows = env.sim.observe(env.state).features
    assert np.array_equal(obs, rows.astype(np.float32).reshape(-1))


@pytest.mark.parametrize("system", ["attention-1", "attention-harder", "attention-central",
                                    "infectious-1", "infectious-harder", "replicator-1",
                                    "replicator-binding"])
@pytest.mark.parametrize("value", [2.5, True, "3", 3.0])
def test_seed_factories_refuse_a_horizon_they_would_round(system, value):
    """h6hunt2 F2: int(horizon) ran 2.5 as T = 2, true as T = 1 and "3" as 3, while the
    system's params (audit.json) recorded the value given."""
    import causalfair as cf
    from causalfair.errors import SystemError_

    with pytest.raises(SystemError_, match=r"^horizon: must be an integer >= 1, got "):
        cf.systems.make(system, horizon=value)
    assert cf.systems.make(system, horizon=np.int64(3)).horizon == 3


@pytest.mark.parametrize("system, key, value", [
    ("infectious-1", "initially_infected", [0.7]),  # was member 0
    ("infectious-1", "initially_infected", [True]),  # was member 1
    ("infectious-1", "initially_infected", ["5"]),
    ("replicator-1", "thresholds", "0.5"),  # a ValueError of float('.')
    ("replicator-1", "thresholds", ["a"]),
    ("replicator-1", "thresholds", [True, 0.5]),
    ("replicator-1", "q0", [0.5, None]),  # a TypeError of float(None)
    ("replicator-1", "q0", "ab"),
])
def test_seed_factories_name_a_bad_list(system, key, value):
    import causalfair as cf
    from causalfair.errors import SystemError_

    with pytest.raises(SystemError_, match=rf"^{key}: must be "):
        cf.systems.make(system, **{key: value})


def test_seed_factories_keep_good_lists():
    import causalfair as cf

    s = cf.systems.make("infectious-1", initially_infected=[np.int64(3), 5])
    assert s.params["initially_infected"] == [3, 5]
    assert cf.systems.make("replicator-1", thresholds=np.array([0.2, 0.4])).n_actions == 3


@pytest.mark.parametrize("make, act", [
    (lambda: VecInfectiousEnv(3), lambda t: np.array([t, 34, 5])),
    (lambda: _vec_attention(3), lambda t: np.ones((3, 5)) + np.arange(5) * (t % 2)),
])
def test_vec_envs_reset_with_a_seed(make, act):
    """h6hunt2 F3: reset(3) kept the int as the generator (AttributeError at the first
    step) and reset(seed=3) was a TypeError; VecLendingEnv.reset takes a seed first."""
    def run(**kw):
        env = make()
        out = [env.reset(**kw)]
        for t in range(4):
            out += env.step(act(t))[:2]
        return out

    def same(a, b):
        return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))

    by_seed = run(seed=3)
    assert same(by_seed, run(rng=3)) and same(by_seed, run(rng=np.random.default_rng(3)))
    assert not same(by_seed, run(seed=4))
    for bad in ({"rng": "3"}, {"rng": True}, {"seed": -1}, {"seed": 2.5},
                {"rng": np.random.default_rng(0), "seed": 1}):
        with pytest.raises(InputError, match=r"^(rng|seed|reset): "):
            make().reset(**bad)


def _vec_attention(n):
    from causalfair.systems.gym.attention import VecAttentionEnv

    return VecAttentionEnv(n)

"""Policy adapters (causalfair.policies.adapters): stable-baselines3 models and plain callables,
audited with both engines."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines.effects import decompose
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.adapters import SB3Policy, as_policy, callable_policy
from causalfair.policies.core import Observation, PolicyError, TablePolicy
from causalfair.policies.grid import policy_table
from causalfair.systems.gym.lending import LendingEnv
from causalfair.systems.lending.settings import lending_setting

K, G = 7, 2


@pytest.fixture(autouse=True)
def _one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _grid_obs(extras: bool = False) -> np.ndarray:
    """The environment's observation for every (group, level), in (s, x) order."""
    out = np.zeros((G * K, K + G + (G if extras else 0)), dtype=np.float32)
    out[np.arange(G * K), np.tile(np.arange(K), G)] = 1.0
    out[np.arange(G * K), K + np.repeat(np.arange(G), K)] = 1.0
    return out


def test_callable_adapters():
    lm = lending_setting("lending-1").tabular
    # level/group function returning decisions
    pol = callable_policy(lambda x, g: (x >= 3 + g).astype(int), inputs="level_group",
                          output="action", name="step")
    tab = policy_table(pol, lm)
    want = (np.arange(K)[None, :] >= 3 + np.arange(G)[:, None]).astype(float)
    np.testing.assert_array_equal(tab, want)
    # plain function of the observation, via as_policy; the exact engine agrees with a table
    fn = as_policy(lambda obs: 0.2 + 0.1 * obs.level / K)
    np.testing.assert_allclose(decompose(lm, fn, 10).C,
                               decompose(lm, np.broadcast_to(0.2 + 0.1 * np.arange(K) / K, (G, K)).copy(), 10).C)
    # time-dependent callable: the exact engine evaluates each t
    td = callable_policy(lambda obs: np.full(len(obs), 1.0 if obs.t % 2 else 0.0),
                         time_dependent=True)
    assert policy_table(td, lm, 4)[:, 0, 0].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert isinstance(as_policy(np.full((G, K), 0.5)), TablePolicy)
    bad = callable_policy(lambda x, g: np.full(x.shape, 0.5), inputs="level_group", output="action")
    with pytest.raises(PolicyError, match="decisions 0 or 1"):
        bad.prob_d1(Observation(group=np.zeros(3, int), level=np.zeros(3, int)))
    with pytest.raises(PolicyError, match="inputs"):
        callable_policy(lambda o: o, inputs="pixels")
    with pytest.raises(PolicyError, match="cannot use"):
        as_policy(42)
    feats = callable_policy(lambda f: 1 / (1 + np.exp(-f[:, 0])), inputs="features")
    np.testing.assert_allclose(
        feats.prob_d1(Observation(group=np.zeros(2, int), features=np.array([[0.0], [100.0]]))),
        [0.5, 1.0])


@pytest.fixture(scope="module")
def trained_ppo():
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    env = LendingEnv("lending-1", max_steps=500)
    model = PPO("MlpPolicy", env, n_steps=512, batch_size=64, n_epochs=4, seed=0,
                policy_kwargs={"net_arch": [32, 32]}, device="cpu")
    model.learn(total_timesteps=3072)
    return model


def test_sb3_ppo_trained_then_audited_with_both_engines(trained_ppo):
    """Train PPO on the Gymnasium env for 3,072 steps; audit it exactly (policy_table on
    the tabular model) and by Monte Carlo (per-individual SB3 forwards and the
    tabulated fast path): every estimate agrees with the exact value within 4.5 SE."""
    pol = SB3Policy(trained_ppo)
    lm = lending_setting("lending-1")
    table = policy_table(pol, lm.tabular)
    # probabilities are those SB3 samples from: check against model.predict frequencies
    obs = np.repeat(_grid_obs(), 4000, axis=0)
    acts, _ = trained_ppo.predict(obs, deterministic=False)
    freq = acts.reshape(G * K, 4000).mean(axis=1)
    p = table.reshape(-1)
    assert (np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / 4000) + 1e-9).all(), (freq, p)
    greedy, _ = trained_ppo.predict(_grid_obs(), deterministic=True)
    np.testing.assert_array_equal(
        policy_table(SB3Policy(trained_ppo, deterministic=True), lm.tabular).reshape(-1), greedy)

    exact = decompose(lm.tabular, pol, 20)
    fast = decompose_mc(lm, pol, 20, n=40_000, seed=1)
    slow = decompose_mc(lm, pol, 20, n=4_000, seed=2, tabulate=False)
    for res in (fast, slow):
        for k in ("C", "DPE", "IPE", "SPE", "utility"):
            assert abs(res.estimates()[k] - exact.estimates()[k]) < 4.5 * res.se[k], (k, res.n)


def test_sb3_dqn_and_a2c_adapters():
    import torch
    from stable_baselines3 import A2C, DQN

    torch.set_num_threads(1)
    env = LendingEnv("lending-2", max_steps=200)
    lm = lending_setting("lending-2")
    dqn = DQN("MlpPolicy", env, learning_starts=50, buffer_size=500, seed=0, device="cpu",
              policy_kwargs={"net_arch": [16]})
    dqn.learn(total_timesteps=300)
    greedy, _ = dqn.predict(_grid_obs(), deterministic=True)
    np.testing.assert_array_equal(policy_table(SB3Policy(dqn), lm.tabular).reshape(-1), greedy)
    a2c = A2C("MlpPolicy", env, n_steps=8, seed=0, device="cpu", policy_kwargs={"net_arch": [16]})
    a2c.learn(total_timesteps=64)
    with torch.no_grad():
        probs = a2c.policy.get_distribution(torch.as_tensor(_grid_obs())).distribution.probs
    np.testing.assert_allclose(policy_table(as_policy(a2c), lm.tabular).reshape(-1),
                               probs[:, 1].double().numpy(), rtol=1e-6)
    # with TPR extras in the observation, obs_fn builds the input
    env_x = LendingEnv("lending-1", extras=True, max_steps=100)
    a2c_x = A2C("MlpPolicy", env_x, n_steps=8, seed=0, device="cpu")
    with pytest.raises(PolicyError, match="obs_fn"):
        SB3Policy(a2c_x, n_levels=7)
    wrong = SB3Policy(a2c_x)  # width 11 read as 9 levels + 2 groups: the MC engine refuses it
    with pytest.raises(PolicyError, match="9 levels"):
        decompose_mc(lm, wrong, 3, n=10)
    pol_x = SB3Policy(a2c_x, obs_fn=lambda o: np.hstack([_grid_obs()[o.group * K + o.level],
                                                         np.zeros((len(o), G), np.float32)]))
    assert policy_table(pol_x, lm.tabular).shape == (G, K)


def test_sb3_rejects_non_binary_actions():
    import gymnasium as gym
    from stable_baselines3 import PPO

    class ThreeActions(LendingEnv):
        def __init__(self):
            super().__init__(max_steps=10)
            self.action_space = gym.spaces.Discrete(3)

        def step(self, action):
            return super().step(min(int(action), 1))

    model = PPO("MlpPolicy", ThreeActions(), n_steps=16, batch_size=16, device="cpu")
    pol = SB3Policy(model)  # Discrete(n) is audited as n actions; P(d1) alone is refused
    obs = Observation(group=np.zeros(2, int), level=np.array([0, 3]))
    assert pol.action_probs(obs).shape == (2, 3)
    with pytest.raises(PolicyError, match="3 actions; use action_probs"):
        pol.prob_d1(obs)
    model.action_space = gym.spaces.Box(0.0, 1.0, (1,))
    with pytest.raises(PolicyError, match="Discrete\\(n\\)"):
        SB3Policy(model)

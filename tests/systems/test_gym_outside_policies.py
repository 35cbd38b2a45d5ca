"""Policies a user outside causalfair brings to a Gymnasium env with two actions: an
object with ``action_probs(obs)`` only (the Policy protocol's multi-action form) audits
by Monte Carlo like its ``prob_d1`` twin, and a retraining warm start from an SB3 network
(two logits over Discrete(2), raw observations) starts from the same policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import causalfair as cf
from causalfair.policies.nets import FeatureEncoding, NumpyMLPPolicy


class Hiring(gym.Env):
    """One applicant: skill in obs[0], experience in obs[1]; hiring (1) trains the skill."""

    def __init__(self):
        self.observation_space = spaces.Box(-10, 10, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {})["group"])
        self.skill, self.exp = float(self.np_random.normal(0.3 - 0.6 * self.g)), 0.0
        return np.array([self.skill, self.exp], dtype=np.float32), {"group": self.g}

    def step(self, action):
        z = self.np_random.normal(size=2)
        old = self.skill
        self.skill += (0.3 + 0.2 * z[0]) if action == 1 else -0.05 * self.skill
        self.skill += 0.1 * z[1]
        self.exp += float(action)
        obs = np.array([self.skill, self.exp], dtype=np.float32)
        return obs, float(action) * self.skill, False, False, {"gain": self.skill - old}


class HireIfSkilled:
    """P(hire) = 0.8 above skill 0, 0.3 below, as action distributions only."""

    def action_probs(self, obs):
        p = np.where(np.asarray(obs.features)[:, 0] > 0, 0.8, 0.3)
        return np.stack([1 - p, p], axis=1)


class HireIfSkilledD1:
    def prob_d1(self, obs):
        return np.where(np.asarray(obs.features)[:, 0] > 0, 0.8, 0.3)


def _system():
    return cf.systems.from_gym(Hiring, groups=["M", "F"], horizon=3)


def test_two_action_policy_with_action_probs_only_audits_by_monte_carlo():
    """The Monte Carlo engine asked every two-action policy for prob_d1: a policy with
    action_probs only (as the Policy protocol allows) crashed with an AttributeError."""
    system = _system()
    a = cf.decompose(system, HireIfSkilled(), n=60, seed=4)
    b = cf.decompose(system, HireIfSkilledD1(), n=60, seed=4)
    assert a.estimates() == b.estimates()


def test_warm_start_from_a_two_logit_sb3_network_keeps_the_policy():
    """``gate --retrain`` of an SB3 .zip on a two-action system: the checkpoint's network
    has two logits over raw observations; the trainer's has one logit over standardised
    ones. The warm start used to fail ("architecture differs from the config"); it must
    start from the policy the checkpoint audits as."""
    from causalfair.train.config import TrainConfig
    from causalfair.train.generic import SystemTrainer

    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(8, 2)), rng.normal(size=8)),
              (rng.normal(size=(2, 8)), rng.normal(size=2))]
    init = NumpyMLPPolicy(layers, FeatureEncoding("features", names=("x0", "x1")),
                          activation="tanh", name="sb3")
    system = _system()
    trainer = SystemTrainer(system, TrainConfig(algo="ppo-c", iterations=1, horizon=3, seed=7,
                                                hidden=(8,)), init=init)
    obs = system.simulator.observe(system.simulator.reset(50, 1, np.random.default_rng(1)))
    np.testing.assert_allclose(trainer.policy().prob_d1(obs), init.prob_d1(obs), atol=1e-5)

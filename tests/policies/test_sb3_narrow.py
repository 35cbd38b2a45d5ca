"""An in-memory SB3 model whose observation is narrower than one-hot level + group reads
the observed features (as its saved .zip does), and says what to do when there are none."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.errors import PolicyError
from causalfair.types import Observation

sb3 = pytest.importorskip("stable_baselines3")
gym = pytest.importorskip("gymnasium")


class _TwoFeatures(gym.Env):
    observation_space = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, True, False, {}


def test_a_two_feature_model_reads_the_features_and_matches_sb3():
    import torch

    from causalfair.policies.sb3 import SB3Policy

    model = sb3.PPO("MlpPolicy", _TwoFeatures(), seed=0, device="cpu")
    pol = SB3Policy(model)  # width 2 = n_groups: one-hot cannot fit; features it is
    feats = np.array([[0.5, -1.0], [2.0, 0.25], [-3.0, 1.5]])
    obs = Observation(group=np.array([0, 1, 0]), features=feats)
    probs = pol.action_probs(obs)
    with torch.no_grad():
        dist = model.policy.get_distribution(torch.as_tensor(feats, dtype=torch.float32))
        want = dist.distribution.probs.numpy()
    assert probs.shape == (3, 3)
    np.testing.assert_allclose(probs, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(PolicyError, match="too few for one-hot level and group.*obs_fn"):
        pol.action_probs(Observation(group=np.array([0, 1]), level=np.array([1, 2])))

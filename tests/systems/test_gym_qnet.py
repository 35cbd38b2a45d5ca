"""Q-value networks trained on a Gymnasium env (CleanRL's DQN ``QNetwork``, SB3's DQN):
acted on greedily, never read as logits; a Q-network that does not say how its outputs
are read, and an SB3 DQN .zip, are refused with a message naming the fix."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CheckpointError, PolicyError
from causalfair.types import Observation
from tests.systems.test_gym_forks import CountingEnv

torch = pytest.importorskip("torch")
nn = torch.nn


class QNetwork(nn.Module):
    """CleanRL's dqn.py QNetwork: observation -> one Q-value per action."""

    def __init__(self, width=2, actions=2):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(width, 16), nn.ReLU(), nn.Linear(16, actions))

    def forward(self, x):
        return self.network(x)


def _system():
    return cf.systems.from_gym(CountingEnv, groups=["a", "b"], horizon=3)


def _obs(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return Observation(group=np.arange(n) % 2, features=rng.normal(size=(n, 2)) * 3, t=0)


def test_q_network_acts_greedily_on_its_q_values():
    torch.manual_seed(0)
    net = QNetwork()
    pol = cf.as_policy(net, _system(), output="q")
    obs = _obs()
    probs = pol.action_probs(obs)
    with torch.no_grad():
        q = net(torch.as_tensor(obs.features, dtype=torch.float32)).numpy()
    np.testing.assert_array_equal(probs.argmax(axis=1), q.argmax(axis=1))
    assert set(np.unique(probs)) == {0.0, 1.0}  # greedy, not softmax of Q-values
    np.testing.assert_array_equal(pol.prob_d1(obs), probs[:, 1])


def test_q_network_without_output_is_refused_and_output_checked():
    with pytest.raises(PolicyError, match=r"QNetwork.*Q-values, not logits.*output='q'"):
        cf.as_policy(QNetwork(), _system())
    logits = cf.as_policy(QNetwork(), _system(), output="logits")  # said explicitly: as asked
    assert not set(np.unique(logits.action_probs(_obs()))) <= {0.0, 1.0}
    with pytest.raises(PolicyError, match=r"output: bad value 'argmax'"):
        cf.as_policy(QNetwork(), _system(), output="argmax")
    with pytest.raises(PolicyError, match=r"output='q'.*not a torch module"):
        cf.as_policy(lambda obs: np.full(len(obs), 0.5), _system(), output="q")
    with pytest.raises(PolicyError, match=r"output='q'.*checkpoint or built-in"):
        cf.as_policy("uniform", _system(), output="q")
    with pytest.raises(PolicyError, match=r"reads 3 inputs"):
        cf.as_policy(QNetwork(width=3), _system(), output="q")


@pytest.mark.slow
def test_sb3_dqn_in_memory_is_greedy_and_its_zip_refused(tmp_path):
    sb3 = pytest.importorskip("stable_baselines3")
    model = sb3.DQN("MlpPolicy", CountingEnv(), buffer_size=64, learning_starts=0, seed=0,
                    device="cpu")
    pol = cf.as_policy(model, _system())
    obs = _obs()
    acted, _ = model.predict(obs.features.astype(np.float32), deterministic=True)
    np.testing.assert_array_equal(pol.action_probs(obs).argmax(axis=1), acted)
    model.save(tmp_path / "dqn.zip")
    with pytest.raises(CheckpointError, match=r"a DQN model.*DQN.load"):
        cf.as_policy(str(tmp_path / "dqn.zip"), _system())

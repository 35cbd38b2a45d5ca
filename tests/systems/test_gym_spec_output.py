"""An audit spec on a Gymnasium system whose policy is a CleanRL-style Q-network:
``[policy] output = "q"`` says its outputs are Q-values (acted on greedily), checked
like every spec key; and audit.json names the gym system as reports and MLflow do."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.spec import load_spec
from causalfair.errors import PolicyError, SpecError
from causalfair.types import Observation
from tests.systems.test_from_gym import ENV_SRC, SPEC

torch = pytest.importorskip("torch")

# A CleanRL dqn.py QNetwork and a factory that loads its saved state_dict.
QNET_SRC = textwrap.dedent('''
    import torch
    from torch import nn


    class QNetwork(nn.Module):
        def __init__(self, width=3, actions=2):
            super().__init__()
            self.network = nn.Sequential(nn.Linear(width, 8), nn.ReLU(), nn.Linear(8, actions))

        def forward(self, x):
            return self.network(x)


    def make_qnet(path="qnet.pt"):
        net = QNetwork()
        net.load_state_dict(torch.load(path))
        return net
''')


def _folder(tmp_path, policy):
    (tmp_path / "tutor_env.py").write_text(ENV_SRC, encoding="utf-8")
    (tmp_path / "qnet.py").write_text(QNET_SRC, encoding="utf-8")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    torch.save({f"network.{k}": v for k, v in net.state_dict().items()}, tmp_path / "qnet.pt")
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(factory="make_env", policy=policy).replace(
        "n = 300", "n = 120"), encoding="utf-8")
    return path


def test_spec_output_q_acts_greedily_and_audit_json_names_the_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the factory loads qnet.pt from the working folder
    spec = _folder(tmp_path, 'factory = "qnet:make_qnet"\noutput = "q"')
    res = cf.audit(spec)
    out = res.to_dict()
    # one name for the system everywhere: audit.json, the resolved spec, the summary
    assert out["system"]["id"] == "gym:tutor_env:make_env", out["system"]
    assert out["spec"]["resolved"]["system"] == "gym:tutor_env:make_env"
    assert "gym:tutor_env:make_env" in res.summary()
    # the spec's output reaches the policy: the same audit as the module read as Q-values
    pol = cf.policies.resolve("qnet:make_qnet", res.system, search_path=tmp_path, output="q")
    obs = Observation(group=np.arange(64) % 2, t=0,
                      features=np.random.default_rng(0).normal(size=(64, 3)) * 3)
    probs = pol.policy.action_probs(obs)
    assert set(probs.ravel().tolist()) == {0.0, 1.0}  # greedy, not a softmax of Q-values
    same = cf.audit(spec, policy=pol).decomposition.estimates()
    assert res.decomposition.estimates() == same


def test_spec_q_network_without_output_refused_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _folder(tmp_path, 'factory = "qnet:make_qnet"')
    with pytest.raises(PolicyError,
                       match=r"QNetwork.*Q-values.*\[policy\] output = \"q\"") as exc:
        cf.audit(spec)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("policy, words", [
    ('factory = "qnet:make_qnet"\noutput = "argmax"',
     r"\[policy\] output: bad value 'argmax'; allowed values: 'logits', 'probs', 'q'"),
    ('builtin = "uniform"\noutput = "q"', r"\[policy\] output: only used with \[policy\] factory"),
    ('checkpoint = "qnet.pt"\noutput = "q"',
     r"\[policy\] output: only used with \[policy\] factory"),
])
def test_spec_output_checked(tmp_path, policy, words):
    spec = _folder(tmp_path, policy)
    with pytest.raises(SpecError, match=words) as exc:
        load_spec(spec)
    assert "\n" not in str(exc.value)

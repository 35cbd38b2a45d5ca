"""Policies: built-ins, torch adapter, checkpoints and their errors."""

import json
import pickle

import numpy as np
import pytest
import torch

import causalfair as cf
from causalfair.policies.core import CheckpointError, PolicyError, mlp


@pytest.fixture
def model():
    return cf.lending_setting("lending-1").tabular


def test_builtins(model):
    rep = model.aux["p_repay"]
    np.testing.assert_array_equal(cf.policy_table(cf.parse_policy("always", model), model), 1.0)
    np.testing.assert_array_equal(cf.policy_table(cf.parse_policy("never", model), model), 0.0)
    np.testing.assert_array_equal(cf.policy_table(cf.parse_policy("random:0.3", model), model), 0.3)
    thr = cf.policy_table(cf.parse_policy("threshold:0.5", model), model)
    np.testing.assert_array_equal(thr, (rep > 0.5).astype(float))
    assert thr[0].tolist() == [0, 0, 0, 1, 1, 1, 1]


def test_blind_policy_ignores_group():
    m2 = cf.lending_setting("lending-2").tabular
    blind = cf.policy_table(cf.parse_policy("blind:0.9", m2), m2)
    np.testing.assert_array_equal(blind[0], blind[1])
    assert not cf.policies.grid.reads_group(blind)
    # the group-aware threshold does read the group at 0.85 on lending-2
    assert cf.policies.grid.reads_group(cf.policy_table(cf.parse_policy("threshold:0.85", m2), m2))


@pytest.mark.parametrize("spec,msg", [
    ("bogus", "unknown policy 'bogus'"),
    ("random:x", "needs a number after ':'"),
    ("threshold:1.5", "P must be in"),
])
def test_parse_errors(model, spec, msg):
    with pytest.raises(PolicyError, match=msg):
        cf.parse_policy(spec, model)


def test_threshold_needs_p_repay():
    m = cf.TabularModel(kernel=np.full((2, 2, 3, 3), 1 / 3), initial=np.full((2, 3), 1 / 3),
                        potential=[0, 1, 2])
    with pytest.raises(PolicyError, match="needs the score table 'p_repay' of a tabular model, and system 'tabular' has none"):
        cf.parse_policy("threshold:0.5", m)


def test_torch_policy_logit_and_two_way(model):
    torch.manual_seed(0)
    enc = cf.FeatureEncoding("onehot", 7, 2)
    net1 = mlp(9, (8,), 1)
    p1 = cf.policy_table(cf.TorchPolicy(net1, enc), model)
    x = torch.from_numpy(enc.encode(cf.policies.grid.grid_observation(model)))
    np.testing.assert_allclose(p1.reshape(-1), torch.sigmoid(net1(x)[:, 0]).detach().double().numpy(), rtol=1e-6)
    net2 = mlp(9, (8,), 2)
    p2 = cf.policy_table(cf.TorchPolicy(net2, enc), model)
    np.testing.assert_allclose(p2.reshape(-1), torch.softmax(net2(x), 1)[:, 1].detach().double().numpy(), rtol=1e-6)


def test_torch_policy_out_of_range(model):
    class Bad(torch.nn.Module):
        def forward(self, x):
            return x[:, :1] * 3.0

    with pytest.raises(PolicyError, match=r"outside \[0, 1\]"):
        cf.policy_table(cf.TorchPolicy(Bad(), output="probs"), model)


def save(path, net, K=7, meta=None):
    cf.save_checkpoint(path, net, architecture={"type": "mlp", "input_dim": K + 2, "hidden": [8],
                                                "activation": "tanh", "output_dim": 1},
                       encoding=cf.FeatureEncoding("onehot", K, 2), metadata=meta or {"name": "t"})


def test_checkpoint_roundtrip(tmp_path, model):
    torch.manual_seed(1)
    net = mlp(9, (8,), 1)
    path = tmp_path / "p.pt"
    save(path, net, meta={"name": "mine", "algorithm": "ppo"})
    pol, meta = cf.load_checkpoint(path, model)
    assert meta["metadata"]["algorithm"] == "ppo" and meta["architecture"]["hidden"] == [8]
    # evaluated in numpy (docs/checkpoints.md): torch's forward pass agrees to float32 rounding
    np.testing.assert_allclose(cf.policy_table(pol, model), cf.policy_table(cf.TorchPolicy(net), model),
                               rtol=0, atol=1e-6)
    assert not list(tmp_path.glob("*.tmp"))


def test_checkpoint_wrong_width(tmp_path):
    path = tmp_path / "p.pt"
    save(path, mlp(9, (8,), 1))
    m5 = cf.lending_setting("lending-1", n_levels=5).tabular
    with pytest.raises(CheckpointError, match=rf"checkpoint {path}: wrong input width"):
        cf.load_checkpoint(path, m5)


def test_checkpoint_nan(tmp_path, model):
    net = mlp(9, (8,), 1)
    with torch.no_grad():
        net[0].weight.fill_(float("nan"))
    path = tmp_path / "nan.pt"
    save(path, net)
    with pytest.raises(CheckpointError, match=rf"checkpoint {path}: weights contain NaN or inf"):
        cf.load_checkpoint(path, model)


def test_checkpoint_not_loadable(tmp_path):
    path = tmp_path / "junk.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=rf"checkpoint {path}: cannot be loaded safely"):
        cf.load_checkpoint(path)
    with pytest.raises(CheckpointError, match="no such file"):
        cf.load_checkpoint(tmp_path / "missing.pt")


class Evil:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('PWNED').write_text('x')",))


def test_checkpoint_never_runs_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    with open(path, "wb") as fh:
        pickle.dump({"meta_json": "{}", "state_dict": Evil()}, fh)
    with pytest.raises(CheckpointError, match="cannot be loaded safely"):
        cf.load_checkpoint(path)
    assert not (tmp_path / "PWNED").exists()


def test_checkpoint_foreign_dict(tmp_path):
    path = tmp_path / "sd.pt"
    torch.save(mlp(9, (8,), 1).state_dict(), path)
    with pytest.raises(CheckpointError, match="not a causalfair checkpoint"):
        cf.load_checkpoint(path)


def test_checkpoint_arch_mismatch(tmp_path):
    path = tmp_path / "p.pt"
    arch = {"type": "mlp", "input_dim": 9, "hidden": [16], "output_dim": 1}
    with pytest.raises(CheckpointError, match="weights do not match the declared architecture"):
        cf.save_checkpoint(path, mlp(9, (8,), 1), architecture=arch,
                           encoding=cf.FeatureEncoding())
    assert not path.exists()
    meta = {"format": "causalfair-checkpoint", "version": 2, "architecture": arch,
            "encoding": cf.FeatureEncoding().to_dict(), "metadata": {}}
    torch.save({"meta_json": json.dumps(meta), "state_dict": mlp(9, (8,), 1).state_dict()}, path)
    with pytest.raises(CheckpointError, match="weights do not match the declared architecture"):
        cf.load_checkpoint(path)


def test_time_dependent_policy_object():
    m = cf.lending_setting().tabular

    class Alternating:
        name = "alt"
        time_dependent = True

        def prob_d1(self, obs):
            return np.full(len(obs), float(obs.t % 2))

    tab = cf.policy_table(Alternating(), m, 4)
    assert tab.shape == (4, 2, 7) and tab[1].all() and not tab[0].any()
    r = cf.decompose(m, Alternating(), 4)
    assert r.diagnostics_ok

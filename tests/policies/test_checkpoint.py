"""Checkpoints: a pickle-free .npz format read without torch, robust
metadata, declared sizes checked before building anything, feature names checked
against the system, A actions, and stable-baselines3 archives read without unpickling."""

from __future__ import annotations

import io
import json
import pickle
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import causalfair as cf
from causalfair.errors import CausalfairError, CheckpointError
from causalfair.policies.checkpoint import (
    FeatureEncoding,
    NumpyMLPPolicy,
    check_policy_inputs,
    load_checkpoint,
    mlp,
    save_checkpoint,
)
from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[2]


def _net(inp=9, hidden=(16, 8), out=1, seed=0, act="tanh"):
    import torch

    torch.manual_seed(seed)
    return mlp(inp, hidden, out, act)


def _arch(inp=9, hidden=(16, 8), out=1, act="tanh"):
    return {"type": "mlp", "input_dim": inp, "hidden": list(hidden), "output_dim": out,
            "activation": act}


def _obs(n=50, seed=0):
    rng = np.random.default_rng(seed)
    return cf.Observation(group=rng.integers(2, size=n), level=rng.integers(7, size=n),
                          features=rng.normal(size=(n, 3)))


@pytest.mark.parametrize("out, act", [(1, "tanh"), (2, "relu"), (3, "tanh")])
def test_npz_round_trip_matches_torch(tmp_path, out, act):
    net = _net(out=out, act=act)
    enc = FeatureEncoding("onehot", 7, 2)
    save_checkpoint(tmp_path / "p.npz", net, architecture=_arch(out=out, act=act), encoding=enc,
                    metadata={"name": "mine"})
    save_checkpoint(tmp_path / "p.pt", net, architecture=_arch(out=out, act=act), encoding=enc)
    a, meta = load_checkpoint(tmp_path / "p.npz")
    b, _ = load_checkpoint(tmp_path / "p.pt")
    assert isinstance(a, NumpyMLPPolicy) and a.name == "mine" and meta["version"] == 2
    assert isinstance(b, NumpyMLPPolicy)  # one evaluator for every format
    obs = _obs()
    np.testing.assert_array_equal(a.action_probs(obs), b.action_probs(obs))
    b = cf.TorchPolicy(net, enc)  # torch's own forward pass
    pa, pb = a.action_probs(obs), b.action_probs(obs)
    assert pa.shape == (50, max(2, out)) and np.allclose(pa.sum(1), 1.0)
    assert np.abs(pa - pb).max() < 1e-6
    if out <= 2:
        assert np.abs(a.prob_d1(obs) - b.prob_d1(obs)).max() < 1e-6
    else:
        with pytest.raises(cf.errors.PolicyError, match="has 3 actions; use action_probs"):
            a.prob_d1(obs)
    # back to torch for training: the same function
    import torch

    x = torch.from_numpy(FeatureEncoding("onehot", 7, 2).encode(obs))
    assert torch.allclose(a.to_torch()(x), net(x), atol=1e-6)


@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_numpy_forward_is_bit_identical_under_any_thread_count(act):
    """OpenBLAS's 2-thread sgemm rounds some rows differently from its 1-thread kernel
    (seen on this project's machine for 64 x 64 layers); the evaluator runs fixed blocks of
    rows with one BLAS thread each, so the thread count changes the speed only."""
    from threadpoolctl import threadpool_limits

    import causalfair.policies.nets as nets

    net = _net(inp=4, hidden=(64, 64), out=1, act=act)
    lin = [m for m in net if hasattr(m, "weight")]
    pol = NumpyMLPPolicy([(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in lin],
                         FeatureEncoding("features", width_=4), activation=act)
    n = 5 * nets._BLOCK_ROWS + 123  # several blocks and a short last one
    x = np.random.default_rng(0).standard_normal((n, 4)).astype(np.float32)
    outs = []
    for threads in (1, 2, 3):
        with threadpool_limits(threads, user_api="blas"):
            outs.append(pol._outputs(x))
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    # and it is the network's function: float64 arithmetic agrees to float32 rounding
    h = x.astype(np.float64)
    for i, m in enumerate(lin):
        h = h @ m.weight.detach().numpy().T.astype(np.float64) + m.bias.detach().numpy()
        if i < len(lin) - 1:
            h = np.tanh(h) if act == "tanh" else np.maximum(h, 0.0)
    assert np.abs(outs[0] - h).max() < 1e-5


def test_loading_and_auditing_an_npz_checkpoint_imports_no_torch(tmp_path):
    save_checkpoint(tmp_path / "p.npz", _net(), architecture=_arch(),
                    encoding=FeatureEncoding("onehot", 7, 2))
    (tmp_path / "s.toml").write_text('name = "s"\n[system]\nid = "lending-1"\n'
                                     '[policy]\ncheckpoint = "p.npz"\n')
    code = ("import sys, causalfair as cf\n"
            f"r = cf.audit({str(tmp_path / 's.toml')!r})\n"
            "print(r.decomposition.C, 'torch' in sys.modules)")
    out = run_cmd([sys.executable, "-c", code], expect=0)
    assert out.stdout.split()[-1] == "False"


def _npz_with_meta(path, meta, arrays=None):
    arrays = dict(arrays or {})
    arrays["meta_json"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)


GOOD_META = {"format": "causalfair-checkpoint", "version": 2, "architecture": _arch(),
             "encoding": {"name": "onehot", "n_levels": 7, "n_groups": 2, "width": 9},
             "metadata": {}}


@pytest.mark.parametrize("edit, needle", [
    (lambda m: m.pop("architecture"), "metadata .architecture is missing"),
    (lambda m: m.update(architecture=None), "metadata .architecture is missing"),
    (lambda m: m.update(encoding=None), "metadata .encoding is missing"),
    (lambda m: m["architecture"].update(hidden="64"), "architecture.hidden: bad value '64'"),
    (lambda m: m["architecture"].update(activation="gelu"), "activation: bad value 'gelu'"),
    (lambda m: m["architecture"].update(input_dim=True), "architecture.input_dim: bad value True"),
    (lambda m: m["encoding"].update(name="pixels"), "encoding.name: bad value 'pixels'"),
    (lambda m: m["encoding"].pop("n_levels"), "encoding.n_levels is missing"),
    (lambda m: m.update(metadata=None) or m.update(metadata=[1]), "metadata .metadata: bad value [1]"),
    (lambda m: m.update(format="x" * 1000), "format 'xxxxxxx"),
])
def test_bad_metadata_names_the_field(tmp_path, edit, needle):
    meta = json.loads(json.dumps(GOOD_META))
    edit(meta)
    _npz_with_meta(tmp_path / "bad.npz", meta)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(tmp_path / "bad.npz")
    msg = str(err.value)
    assert needle in msg and "bad.npz" in msg and len(msg) < 400, msg


def test_declared_shapes_are_checked_before_building(tmp_path):
    net = _net()
    arrays = {k: v.detach().numpy() for k, v in net.state_dict().items()}
    meta = json.loads(json.dumps(GOOD_META))
    meta["architecture"]["hidden"] = [32, 8]
    _npz_with_meta(tmp_path / "p.npz", meta, arrays)
    with pytest.raises(CheckpointError, match=r"0.weight has shape \(16, 9\), declared \(32, 9\)"):
        load_checkpoint(tmp_path / "p.npz")


def test_a_tiny_file_declaring_a_huge_network_is_refused_without_allocating(tmp_path):
    meta = json.loads(json.dumps(GOOD_META))
    meta["architecture"]["hidden"] = [65536, 65536]
    _npz_with_meta(tmp_path / "huge.npz", meta)
    assert (tmp_path / "huge.npz").stat().st_size < 4096
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (700 << 20, 700 << 20))\n"
            "from causalfair.policies.checkpoint import load_checkpoint\n"
            "from causalfair.errors import CheckpointError\n"
            "import sys\n"
            "try:\n    load_checkpoint(sys.argv[1])\nexcept CheckpointError as e:\n    print(e)\n")
    out = run_cmd([sys.executable, "-c", code, tmp_path / "huge.npz"], expect=0)
    assert "over the limit of 50000000" in out.stdout and "before building" in out.stdout


def test_malicious_pickles_never_run(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    import torch

    torch.save({"meta_json": json.dumps(GOOD_META), "state_dict": Evil()}, tmp_path / "e.pt")
    with pytest.raises(CheckpointError, match="cannot be loaded safely"):
        load_checkpoint(tmp_path / "e.pt")
    np.save(tmp_path / "x.npy", np.array([Evil()], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(tmp_path / "e.npz", "w") as zf:
        zf.write(tmp_path / "x.npy", "meta_json.npy")
    with pytest.raises(CheckpointError, match="cannot be read without pickle"):
        load_checkpoint(tmp_path / "e.npz")
    with zipfile.ZipFile(tmp_path / "e.zip", "w") as zf:
        buf = io.BytesIO()
        torch.save({"x": Evil()}, buf)
        zf.writestr("policy.pth", buf.getvalue())
        zf.writestr("data", json.dumps({"policy_class": {":serialized:": pickle.dumps(Evil()).hex()}}))
    with pytest.raises(CheckpointError, match="without unpickling"):
        load_checkpoint(tmp_path / "e.zip")
    assert not marker.exists()


def test_feature_names_are_recorded_and_checked(tmp_path):
    enc = FeatureEncoding("features", names=("severity", "distance"), mean=(0.5, 20.0),
                          std=(0.3, 15.0))
    save_checkpoint(tmp_path / "f.npz", _net(inp=2), architecture=_arch(inp=2), encoding=enc)
    pol, meta = load_checkpoint(tmp_path / "f.npz")
    assert meta["encoding"]["names"] == ["severity", "distance"]
    x = np.array([[0.8, 5.0]])
    got = pol.encoding.encode(cf.Observation(group=np.zeros(1, int), features=x))
    assert np.allclose(got, [[(0.8 - 0.5) / 0.3, (5.0 - 20.0) / 15.0]])
    check_policy_inputs(pol, feature_names=("severity", "distance"))
    with pytest.raises(CheckpointError, match=r"reads features \[severity, distance\] but the "
                                              r"system gives \[age, distance\]"):
        check_policy_inputs(pol, feature_names=("age", "distance"), source="f.npz")
    unnamed = FeatureEncoding("features", width_=2)
    save_checkpoint(tmp_path / "u.npz", _net(inp=2), architecture=_arch(inp=2), encoding=unnamed)
    pol2, _ = load_checkpoint(tmp_path / "u.npz")
    with pytest.raises(CheckpointError, match="reads 2 features but the system gives 3"):
        check_policy_inputs(pol2, feature_names=("a", "b", "c"))
    with pytest.raises(CheckpointError, match="reads one-hot levels .* the system observes no levels"):
        check_policy_inputs(load_checkpoint_for_onehot(tmp_path), feature_names=("a",))


def load_checkpoint_for_onehot(tmp_path):
    save_checkpoint(tmp_path / "o.npz", _net(), architecture=_arch(),
                    encoding=FeatureEncoding("onehot", 7, 2))
    return load_checkpoint(tmp_path / "o.npz")[0]


def test_an_audit_refuses_a_checkpoint_with_other_features(tmp_path):
    import shutil

    shutil.copy(ROOT / "docs" / "examples" / "clinic.py", tmp_path / "clinic.py")
    enc = FeatureEncoding("features", names=("age", "distance"))
    save_checkpoint(tmp_path / "f.npz", _net(inp=2, out=3), architecture=_arch(inp=2, out=3),
                    encoding=enc)
    (tmp_path / "s.toml").write_text('name = "s"\n[system]\nfactory = "clinic:make_clinic"\n'
                                     '[policy]\ncheckpoint = "f.npz"\n')
    proc = run_cmd([sys.executable, "-m", "causalfair", "audit", "s.toml", "--no-report"],
                   cwd=tmp_path, expect=2)
    err = proc.stderr.strip()
    assert "\n" not in err and "f.npz" in err
    assert "reads features [age, distance] but the system gives [severity, distance]" in err
    # the right names: the audit runs (3 actions, Monte Carlo or exact on the clinic)
    save_checkpoint(tmp_path / "f.npz", _net(inp=2, out=3), architecture=_arch(inp=2, out=3),
                    encoding=FeatureEncoding("features", names=("severity", "distance")))
    run_cmd([sys.executable, "-m", "causalfair", "audit", "s.toml", "--no-report"],
            cwd=tmp_path, expect=0)


def test_stable_baselines3_zip_matches_sb3(tmp_path):
    pytest.importorskip("stable_baselines3")
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO

    env = gym.make("causalfair/Lending-v0")
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu",
                policy_kwargs={"net_arch": [16, 16]})
    model.learn(64)
    model.save(tmp_path / "sb3.zip")
    pol, meta = load_checkpoint(tmp_path / "sb3.zip")
    assert meta["format"] == "stable-baselines3" and meta["architecture"]["hidden"] == [16, 16]
    obs = np.eye(9, dtype=np.float32)[[0, 3, 6]] + np.eye(9, dtype=np.float32)[[7, 8, 7]]
    with torch.no_grad():
        ref = model.policy.get_distribution(torch.from_numpy(obs)).distribution.probs.numpy()
    got = pol.action_probs(cf.Observation(group=np.zeros(3, int), features=obs))
    assert np.abs(got - ref).max() < 1e-6
    # in an audit on lending-1 its 9 inputs are read as the one-hot (level, group)
    from causalfair.policies.checkpoint import load_checkpoint_for

    pol2, _ = load_checkpoint_for(tmp_path / "sb3.zip", cf.systems.make("lending-1"))
    assert pol2.encoding.name == "onehot"


_JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                                  st.floats(allow_nan=False), st.text(max_size=12)),
                        lambda x: st.one_of(st.lists(x, max_size=4),
                                            st.dictionaries(st.text(max_size=10), x, max_size=4)),
                        max_leaves=10)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["architecture", "encoding", "metadata", "format", "version"]),
       st.sampled_from([None, "input_dim", "hidden", "output_dim", "activation", "name",
                        "n_levels", "n_groups", "width", "names", "mean", "std"]),
       _JSONISH, st.booleans())
def test_fuzzed_metadata_raises_only_causalfair_errors(tmp_path_factory, top, sub, value, truncate):
    meta = json.loads(json.dumps(GOOD_META))
    if sub is None or not isinstance(meta.get(top), dict):
        meta[top] = value
    else:
        meta[top][sub] = value
    d = tmp_path_factory.mktemp("fz")
    arrays = {k: v.detach().numpy() for k, v in _net().state_dict().items()}
    _npz_with_meta(d / "p.npz", meta, arrays)
    if truncate:
        data = (d / "p.npz").read_bytes()
        (d / "p.npz").write_bytes(data[: len(data) // 2])
    try:
        pol, _ = load_checkpoint(d / "p.npz")
        pol.action_probs(_obs(5))
    except CausalfairError:
        pass

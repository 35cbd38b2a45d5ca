"""The policy forward on a GPU (``device=`` / ``--device``): the CPU path is unchanged, a
GPU that is not there is a one-line input error, and where torch sees a GPU the device
path agrees with the CPU to float32 rounding and repeats run to run."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.backends import DEVICE_ENV, engine_device
from causalfair.cli import main
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import InputError
from causalfair.policies.core import FeatureEncoding, Observation, TorchPolicy
from causalfair.policies.nets import DevicePolicy, NumpyMLPPolicy, on_device
from causalfair.systems.registry import make


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


CUDA = _cuda()
needs_gpu = pytest.mark.skipif(not CUDA, reason="torch sees no GPU")


def _mlp(seed: int = 0, width: int = 9, hidden: int = 32) -> NumpyMLPPolicy:
    rng = np.random.default_rng(seed)
    layers = [(rng.standard_normal((hidden, width)) * 0.5, rng.standard_normal(hidden) * 0.1),
              (rng.standard_normal((1, hidden)) * 0.5, rng.standard_normal(1) * 0.1)]
    return NumpyMLPPolicy(layers, FeatureEncoding("onehot", 7, 2), name="mlp")


def test_cpu_is_the_default_and_leaves_the_policy_as_it_is(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    pol = _mlp()
    assert engine_device() == "cpu"
    assert on_device(pol, "cpu") is pol


@pytest.mark.skipif(CUDA, reason="a GPU is present")
def test_cuda_without_a_gpu_is_a_one_line_input_error(monkeypatch, capsys):
    with pytest.raises(InputError, match=r"^device: 'cuda' asked for, but torch sees no GPU"):
        decompose_mc(make("lending-1"), _mlp(), 3, n=100, tabulate=False, device="cuda")
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    with pytest.raises(InputError, match=rf"^{DEVICE_ENV}: 'cuda' asked for"):
        engine_device()
    monkeypatch.delenv(DEVICE_ENV)
    rc = main(["decompose", "--device", "cuda", "--setting", "lending-1", "--policy",
               "threshold:0.5"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("causalfair decompose: error: --device: 'cuda' asked for") \
        and "\n" not in err, err


def test_bad_device_names_the_flag(capsys):
    assert main(["audit", "--device", "tpu", "nowhere.toml"]) == 2
    err = capsys.readouterr().err
    assert "--device: bad value 'tpu'; allowed values: cpu, cuda, cuda:N, auto." in err, err


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_device_policy_on_the_cpu_runs_the_same_network(kind):
    """The device path's code (a torch copy of the network, a reused host buffer) checked
    where there is no GPU: on torch's CPU device it agrees with the policy's own forward."""
    import pickle

    pol = _mlp(3)
    if kind == "torch":
        pol = TorchPolicy(pol.to_torch(), pol.encoding, name="mlp")
    dev = DevicePolicy(pol, "cpu")
    rng = np.random.default_rng(1)
    for n in (3000, 10):  # the buffer is made once, then reused for a smaller batch
        obs = Observation(group=rng.integers(0, 2, n), level=rng.integers(0, 7, n))
        assert np.allclose(dev.prob_d1(obs), pol.prob_d1(obs), rtol=0, atol=1e-6)
    assert isinstance(pickle.loads(pickle.dumps(dev)), type(pol))  # on_device(base, "cpu")


@needs_gpu
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_device_forward_matches_cpu_to_float32(kind):
    pol = _mlp(1)
    if kind == "torch":
        pol = TorchPolicy(pol.to_torch(), pol.encoding, name="mlp")
    gpu = on_device(pol, "cuda")
    assert isinstance(gpu, DevicePolicy)
    rng = np.random.default_rng(0)
    obs = Observation(group=rng.integers(0, 2, 50_000), level=rng.integers(0, 7, 50_000))
    a, b = pol.prob_d1(obs), gpu.prob_d1(obs)
    assert np.allclose(a, b, rtol=0, atol=1e-6), float(np.abs(a - b).max())
    assert np.array_equal(b, gpu.prob_d1(obs))  # run to run on the same device


@needs_gpu
def test_device_audit_agrees_with_cpu_and_repeats():
    system = make("lending-1")
    pol = _mlp(2)
    kw = dict(n=20_000, seed=0, tabulate=False, benefit_n=2_000)
    cpu = decompose_mc(system, pol, 6, **kw)
    gpu = [decompose_mc(system, pol, 6, device="cuda", **kw) for _ in range(2)]
    assert np.array_equal(gpu[0].steps, gpu[1].steps) and gpu[0].se == gpu[1].se
    for key in ("C", "DPE", "IPE", "SPE"):  # decisions u < p: equal unless u falls
        assert getattr(gpu[0], key) == pytest.approx(getattr(cpu, key), abs=1e-4)  # in a ulp

"""The device path of the policy forward (``causalfair.policies.nets.DevicePolicy``) run on
torch's CPU, where there is no GPU: the same code as on a GPU (a torch copy of the network,
one host buffer per thread, chunks of bounded size, one copy each way) minus pinning and
the stream. It agrees with the numpy path to float32 rounding, repeats run to run, is safe
on the engine's threads, and the device names a GPU machine would resolve are checked
with torch's GPU count faked."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from causalfair.backends import resolve_device
from causalfair.cli import main
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import InputError, PolicyError, ResourceLimitError
from causalfair.policies.core import FeatureEncoding, Observation, TorchPolicy
from causalfair.policies.nets import DevicePolicy, NumpyMLPPolicy
from causalfair.systems.registry import make

CUDA = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not CUDA, reason="torch sees no GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_gpu)]


def _mlp(seed: int = 0, width: int = 9, hidden: int = 32, enc: FeatureEncoding | None = None
         ) -> NumpyMLPPolicy:
    rng = np.random.default_rng(seed)
    layers = [(rng.standard_normal((hidden, width)) * 0.5, rng.standard_normal(hidden) * 0.1),
              (rng.standard_normal((1, hidden)) * 0.5, rng.standard_normal(1) * 0.1)]
    return NumpyMLPPolicy(layers, enc or FeatureEncoding("onehot", 7, 2), name="mlp")


def _features(n: int, seed: int = 0) -> Observation:
    rng = np.random.default_rng(seed)
    return Observation(group=rng.integers(0, 2, n), features=rng.standard_normal((n, 4)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_chunked_forward_matches_numpy_and_keeps_the_buffer_bounded(kind, device):
    """Chunks reuse one host buffer (pinned on a GPU): each chunk's copy to the device has
    finished before the next chunk overwrites the buffer."""
    pol = _mlp(1, width=4, enc=FeatureEncoding("features", width_=4))
    if kind == "torch":
        pol = TorchPolicy(pol.to_torch(), pol.encoding, name="mlp")
    dev = DevicePolicy(pol, device)
    assert dev.chunk_rows == (1 << 24) // 32  # 64 MiB of the widest layer's activations
    dev.chunk_rows = 1000
    for n in (2500, 1000, 7, 0):  # three chunks, one full chunk, a smaller batch, none
        obs = _features(n, seed=n)
        got = dev.prob_d1(obs)
        assert got.dtype == np.float64 and got.shape == (n,)
        np.testing.assert_allclose(got, pol.prob_d1(obs), rtol=0, atol=1e-6)
        assert np.array_equal(got, dev.prob_d1(obs))  # run to run
        assert dev._local.buf.shape[0] == 1000  # one chunk's rows, whatever the batch


def test_an_output_that_views_the_buffer_survives_the_next_chunk():
    pol = TorchPolicy(torch.nn.Identity(), FeatureEncoding("features", width_=1), name="id")
    dev = DevicePolicy(pol, "cpu")
    dev.chunk_rows = 1000
    x = np.linspace(-3, 3, 2500)[:, None]
    obs = Observation(group=np.zeros(2500, int), features=x)
    np.testing.assert_allclose(dev.prob_d1(obs), 1 / (1 + np.exp(-x[:, 0])), atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_threads_do_not_share_a_buffer(device):
    """Four threads at once, each its own inputs: a buffer shared between threads would be
    overwritten while another thread's forward reads it."""
    pol = _mlp(2, width=4, hidden=64, enc=FeatureEncoding("features", width_=4))
    dev = DevicePolicy(pol, device)
    inputs = [_features(20_000 + 1000 * i, seed=i) for i in range(4)]
    want = [dev.prob_d1(o) for o in inputs]
    bad: list[int] = []
    start = threading.Barrier(4)

    def work(i: int) -> None:
        start.wait()
        for _ in range(15):
            if not np.array_equal(dev.prob_d1(inputs[i]), want[i]):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad


@pytest.mark.parametrize("device", DEVICES)
def test_engine_on_the_device_path_agrees_repeats_and_is_jobs_invariant(device):
    """decompose_mc (benefit forks included) with the network on the device path, engine
    threads jobs=2: the numpy path's numbers to float32 rounding, the same numbers again
    and with jobs=1, and Lambda from the same engine as the numpy policy's (the exact one:
    a network over the one-hot encoding reads (group, level) only, on a device or not).
    On a GPU through the door users take (``device="cuda"``)."""
    system = make("lending-1")
    pol = _mlp(2)
    kw = dict(n=2000, seed=0, tabulate=False, benefit_n=400)
    cpu = decompose_mc(system, pol, 6, jobs=2, **kw)
    if device == "cpu":  # device="cpu" alone is the numpy path: hand the engine the device path
        runs = [decompose_mc(system, DevicePolicy(pol, "cpu"), 6, jobs=j, **kw) for j in (2, 2, 1)]
    else:
        runs = [decompose_mc(system, pol, 6, jobs=j, device=device, **kw) for j in (2, 2, 1)]
    for r in runs[1:]:
        assert np.array_equal(r.steps, runs[0].steps) and r.se == runs[0].se
        assert r.Lambda == runs[0].Lambda
    for key in ("C", "DPE", "IPE", "SPE"):
        assert getattr(runs[0], key) == pytest.approx(getattr(cpu, key), abs=1e-4), key
    assert runs[0].Lambda == pytest.approx(cpu.Lambda, abs=1e-6)


def test_out_of_device_memory_is_a_one_line_resource_error():
    class Hungry(torch.nn.Module):
        def forward(self, x):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB\n"
                                              "more detail")

    dev = DevicePolicy(TorchPolicy(Hungry(), FeatureEncoding("onehot", 7, 2)), "cpu")
    obs = Observation(group=np.zeros(5, int), level=np.zeros(5, int))
    with pytest.raises(ResourceLimitError) as err:
        dev.prob_d1(obs)
    msg = str(err.value)
    assert "\n" not in msg and "forward on cpu ran out of device memory for 5 rows" in msg \
        and "Tried to allocate 9.00 GiB" in msg and "--device cpu" in msg, msg


def test_a_checkpoints_mlp_stays_float32_whatever_torchs_default_dtype():
    pol = _mlp(5)
    obs = Observation(group=np.array([0, 1, 1]), level=np.array([0, 3, 6]))
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        dev = DevicePolicy(pol, "cpu")
    finally:
        torch.set_default_dtype(was)
    np.testing.assert_allclose(dev.prob_d1(obs), pol.prob_d1(obs), rtol=0, atol=1e-6)


def test_a_network_that_rejects_its_input_is_a_policy_error():
    pol = TorchPolicy(torch.nn.Linear(3, 1), FeatureEncoding("onehot", 7, 2), name="narrow")
    with pytest.raises(PolicyError, match=r"rejected input of width 9 on cpu"):
        DevicePolicy(pol, "cpu").prob_d1(Observation(group=np.zeros(2, int),
                                                     level=np.zeros(2, int)))


# ------------------------------------------------- device names, with a GPU count faked
@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)


def test_gpu_names_resolve_where_torch_sees_gpus(two_gpus, capsys):
    import os

    assert resolve_device("auto") == "cuda" and resolve_device("CUDA:1") == "cuda:1"
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"  # before any product
    with pytest.raises(InputError, match=r"^--device: 'cuda:7' asked for, but torch sees 2 "
                       r"GPU\(s\) \(cuda:0 to cuda:1\) on this machine"):
        resolve_device("cuda:7")
    rc = main(["decompose", "--device", "cuda:7", "--setting", "lending-1", "--policy",
               "threshold:0.5"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "'cuda:7' asked for" in err, err


def test_cpu_resolves_without_setting_cublas(monkeypatch):
    import os

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if CUDA else "cpu")
    assert CUDA or "CUBLAS_WORKSPACE_CONFIG" not in os.environ


@pytest.mark.skipif(torch.version.cuda is not None, reason="torch is a CUDA build")
def test_a_cpu_only_torch_build_is_named():
    with pytest.raises(InputError, match=r"torch sees no GPU on this machine \(torch .* is a "
                       r"CPU-only build: install a CUDA build of torch to use a GPU\); use cpu"):
        resolve_device("cuda", "device")


@needs_gpu
def test_a_torch_policy_left_on_the_gpu_runs_where_it_is():
    pol = _mlp(4)
    obs = Observation(group=np.array([0, 1, 1]), level=np.array([0, 3, 6]))
    gpu = TorchPolicy(pol.to_torch().cuda(), pol.encoding, name="mlp")
    np.testing.assert_allclose(gpu.prob_d1(obs), pol.prob_d1(obs), atol=1e-6)

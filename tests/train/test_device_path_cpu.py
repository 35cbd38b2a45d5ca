"""The pieces of training on a device that run without a GPU: the determinism switch a
GPU run trains under (entered and left on the CPU: it only sets torch's flags), the
rollout arrays' crossing (shared with numpy on the CPU), and a trained network evaluated
through the device path (``DevicePolicy`` on torch's CPU) giving the trainer's own table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from causalfair.policies.grid import grid_observation
from causalfair.policies.nets import DevicePolicy
from causalfair.train import TrainConfig
from causalfair.train.core import Trainer
from causalfair.train.device import device_determinism, to_device

TINY = dict(n_individuals=64, horizon=5, hidden=(16,), n_epochs=2, n_minibatches=2,
            eval_every=10**6, iterations=1)


@pytest.fixture
def nondeterministic():
    was = torch.are_deterministic_algorithms_enabled()
    warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    yield
    torch.use_deterministic_algorithms(was, warn_only=warn)


def test_a_gpu_run_trains_under_deterministic_algorithms_then_restores(nondeterministic):
    with device_determinism("cuda:1"):
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    assert not torch.are_deterministic_algorithms_enabled()
    with pytest.raises(KeyError), device_determinism("cuda"):
        raise KeyError("a failing run")
    assert not torch.are_deterministic_algorithms_enabled()  # restored on the way out
    with device_determinism("cpu"):
        assert not torch.are_deterministic_algorithms_enabled()  # the CPU: nothing changes


def test_rollout_arrays_cross_to_the_cpu_without_a_copy():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = to_device(a, torch.device("cpu"))
    assert t.dtype == torch.float64 and np.shares_memory(t.numpy(), a)
    s = to_device(a[:, ::2], torch.device("cpu"))  # a strided view: made contiguous
    assert s.is_contiguous() and np.array_equal(s.numpy(), a[:, ::2])
    assert to_device(a > 3, torch.device("cpu")).dtype == torch.bool


def test_a_trained_network_on_the_device_path_gives_the_trainers_table():
    """The trainer's (G, K) table against its policy evaluated through the device path
    (float32 forward on torch's CPU, the host buffer, one copy each way), twice."""
    tr = Trainer(TrainConfig(algo="ppo", **TINY), "cpu")
    tr.step()
    dev = DevicePolicy(tr.torch_policy(), "cpu")
    obs = grid_observation(tr.model)
    table = tr.policy_table()
    got = dev.prob_d1(obs)
    np.testing.assert_allclose(got, table[np.asarray(obs.group), np.asarray(obs.level)],
                               rtol=0, atol=1e-6)
    assert np.array_equal(got, dev.prob_d1(obs))
    assert next(dev.module.parameters()).data_ptr() != \
        next(tr.policy_net.parameters()).data_ptr()  # a copy: training goes on unaffected

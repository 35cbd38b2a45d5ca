"""PPO training on a device (``causalfair train --device``, ``train(..., device=)``).

Without a GPU: the device is resolved and refused with a one-line error naming the flag,
before anything is written; ``auto`` is the CPU. With one (skipped here otherwise): a GPU
run agrees with the CPU run to float32 rounding, is reproducible run to run, and writes
a run folder that resumes and audits on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import causalfair as cf
from causalfair.backends import resolve_device
from causalfair.cli import main
from causalfair.errors import InputError
from causalfair.policies.core import load_checkpoint
from causalfair.policies.grid import policy_table
from causalfair.systems.lending.settings import lending_setting
from causalfair.train import TrainConfig, train
from causalfair.train.core import Trainer

TINY = dict(n_individuals=64, horizon=5, hidden=(16,), n_epochs=2, n_minibatches=2,
            eval_every=2, checkpoint_every=2)
GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="no CUDA device: the GPU path is not tested here")


@pytest.mark.skipif(GPU, reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_a_one_line_error_naming_the_flag(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--device", "cuda", "--iterations", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--device" in lines[0] and "no GPU" in lines[0], err
    assert not out.exists()  # refused before the run folder is made
    with pytest.raises(InputError, match="device: 'cuda' asked for"):
        train(TrainConfig(iterations=1, **TINY), device="cuda")


def test_bad_device_names_the_value_and_the_allowed_ones(tmp_path, capsys):
    code = main(["train", "--device", "gpu", "--iterations", "1", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "--device: bad value 'gpu'; allowed values: cpu, cuda" in err, err
    with pytest.raises(InputError, match="device: bad value"):
        resolve_device("tpu", "device")


def test_auto_is_the_gpu_only_when_torch_sees_one():
    assert resolve_device("auto") == ("cuda" if GPU else "cpu")
    assert resolve_device(None) == resolve_device("cpu") == "cpu"


@pytest.mark.skipif(GPU, reason="this machine has a GPU")
def test_auto_without_a_gpu_trains_exactly_the_cpu_run():
    cfg = TrainConfig(algo="ppo-cb", iterations=1, **TINY)
    a, b = train(cfg), train(cfg, device="auto")
    assert np.array_equal(a.table, b.table)


# ------------------------------------------------------------------ with a GPU only
def _weights(policy) -> list[np.ndarray]:
    module = getattr(policy, "module", None) or policy.base.module
    return [v.detach().cpu().numpy() for v in module.state_dict().values()]


@needs_gpu
@pytest.mark.parametrize("algo", ["ppo-cb", "f-ppo"])
def test_lending_on_the_gpu_matches_the_cpu_and_repeats(algo, tmp_path):
    cfg = TrainConfig(algo=algo, iterations=3, **TINY)
    assert next(Trainer(cfg, "cuda").policy_net.parameters()).is_cuda
    cpu = train(cfg)
    gpu = train(cfg, device="cuda", out=tmp_path / "run")
    again = train(cfg, device="cuda")
    # float32 rounding differs between the devices; Adam can turn it into steps of up to
    # lr on near-zero gradients, hence 1e-3 rather than 1e-6
    np.testing.assert_allclose(gpu.table, cpu.table, atol=1e-3)
    for k in ("C", "utility", "Lambda"):
        assert gpu.metrics[k] == pytest.approx(cpu.metrics[k], abs=1e-3), k
    assert np.array_equal(gpu.table, again.table)  # reproducible on the same device
    # the run folder's checkpoint audits on the CPU, and the run resumes there (its state is
    # on the CPU); the resumed run rewrites the same checkpoint file, so each is read first
    model = lending_setting("lending-1").tabular
    pol, _ = load_checkpoint(gpu.checkpoint, model)
    np.testing.assert_allclose(policy_table(pol, model), gpu.table, atol=1e-6)
    state = torch.load(tmp_path / "run" / "state.pt", weights_only=True)
    assert all(v.device.type == "cpu" for v in state["policy"].values())
    more = train(cfg.replace(iterations=4), out=tmp_path / "run", resume=True)
    assert more.history["iteration"].iloc[-1] == 4
    pol, _ = load_checkpoint(more.checkpoint, model)
    np.testing.assert_allclose(policy_table(pol, model), more.table, atol=1e-6)


@needs_gpu
@pytest.mark.parametrize("system,algo", [("infectious-1", "ppo-c"), ("attention-1", "a-ppo")])
def test_generic_trainer_on_the_gpu_matches_the_cpu(system, algo):
    cfg = TrainConfig(algo=algo, iterations=2, n_individuals=68, horizon=4, audit_n=50,
                      hidden=(16,), n_epochs=2, n_minibatches=2)
    s = cf.systems.make(system)
    cpu = train(cfg, system=s)
    gpu = train(cfg, system=s, device="cuda")
    again = train(cfg, system=s, device="cuda")
    for a, b, c in zip(_weights(cpu.policy), _weights(gpu.policy), _weights(again.policy),
                       strict=True):
        np.testing.assert_allclose(b, a, atol=1e-3)
        assert np.array_equal(b, c)

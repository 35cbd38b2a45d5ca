"""``device="auto"`` (``--device auto``): the GPU when torch sees one, except for a network
evaluated only on the (group, level) grid (the lending trainer), which stays on the CPU; an
explicit ``cuda`` is kept. A GPU is faked (torch.cuda.is_available / device_count), so
this runs on any machine."""

from __future__ import annotations

import pytest
import torch

import causalfair.train as train_mod
import causalfair.train.system_run as system_run
from causalfair.backends import resolve_device
from causalfair.errors import InputError
from causalfair.train import TrainConfig


@pytest.fixture
def one_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # resolving a GPU sets it


def test_auto_is_the_cpu_for_a_grid_evaluated_network_and_cuda_stays_cuda(one_gpu):
    assert resolve_device("auto") == "cuda"
    assert resolve_device("auto", grid=True) == "cpu"
    assert resolve_device("cuda", grid=True) == "cuda"
    assert resolve_device("cuda:0", grid=True) == "cuda:0"
    with pytest.raises(InputError, match="'cuda:1' asked for"):  # still checked with grid
        resolve_device("cuda:1", "--device", grid=True)
    with pytest.raises(InputError, match="--device: bad value 'gpu'"):
        resolve_device("gpu", "--device", grid=True)


def test_train_auto_puts_lending_on_the_cpu_and_the_generic_trainer_on_the_gpu(one_gpu,
                                                                             monkeypatch):
    seen = {}
    monkeypatch.setattr(train_mod, "_train_lending",
                        lambda *a, **kw: seen.setdefault("lending", a[-1]))
    monkeypatch.setattr(system_run, "train_system",
                        lambda *a, device, **kw: seen.setdefault("generic", device))
    tiny = dict(n_individuals=8, horizon=2, hidden=(4,), iterations=1)
    for device, want in (("auto", "cpu"), ("cuda", "cuda")):
        seen.clear()
        train_mod.train(TrainConfig(algo="ppo", **tiny), device=device)
        train_mod.train(TrainConfig(algo="ppo", system="infectious-1", **tiny), device=device)
        assert seen == {"lending": want, "generic": "cuda"}, device


class _Stop(Exception):
    pass


def test_the_command_line_hands_auto_to_train_and_takes_it_for_cpu_trainers(one_gpu,
                                                                           monkeypatch,
                                                                           tmp_path):
    """``causalfair train --device auto`` leaves "auto" to train() (which puts lending on
    the CPU), and --algo exact, which runs on the CPU, takes auto (a GPU named is still
    refused for it)."""
    import causalfair.commands.train as cmd
    from causalfair.cli import main

    def fake_train(config, **kw):
        raise _Stop(kw["device"])

    monkeypatch.setattr(cmd, "train", fake_train)
    with pytest.raises(_Stop, match="^auto$"):
        main(["train", "--iterations", "1", "--device", "auto", "--out", str(tmp_path)])
    monkeypatch.setattr(cmd, "run_exact", lambda args: 0)
    exact = ["train", "--algo", "exact", "--out", str(tmp_path), "--device"]
    assert main([*exact, "auto"]) == 0
    assert main([*exact, "cuda"]) == 2

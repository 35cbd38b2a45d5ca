"""Training on any system and bit-identical training whatever the
thread settings: the example clinic (3 actions, continuous features) trained
from the command line (causalfair.cli.main, in this process) and retrained by the gate
from a spec."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import ConfigError
from causalfair.train import TrainConfig, train
from causalfair.train.generic import SystemTrainer
from causalfair.train.sweep import sweep
from tests.conftest import run_cmd, skill_simulator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own(tmp_path):
    shutil.copy(ROOT / "docs" / "examples" / "clinic.py", tmp_path / "clinic.py")
    yield tmp_path
    sys.modules.pop("clinic", None)


@pytest.mark.parametrize("algo", ["ppo", "ppo-c"])
def test_train_on_the_clinic_from_the_command_line(own, algo, cli_here):
    proc = cli_here("train", "--system", "clinic:make_clinic", "--algo", algo, "--iterations",
                    "3", "--horizon", "6", "--individuals", "64", "--out", "run", "--json", cwd=own)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    pol, meta = cf.load_checkpoint(own / out["checkpoint"])
    assert meta["encoding"]["names"] == ["severity", "distance"]
    assert meta["metadata"]["system"] == "clinic:make_clinic" and meta["metadata"]["n_actions"] == 3
    system = cf.systems.make("clinic:make_clinic", search_path=own)
    sim = system.make_simulator()
    obs = sim.observe(sim.reset(10, 1, np.random.default_rng(0)))
    probs = pol.action_probs(obs)
    assert probs.shape == (10, 3) and np.allclose(probs.sum(1), 1.0)
    # the exact and the Monte Carlo engines agree on the trained feature policy
    ex = cf.decompose(system.tabular, pol, 12)
    mc = cf.decompose_mc(system, pol, 12, n=20_000, seed=0)
    assert abs(mc.C - ex.C) < 5 * mc.se["C"]


def test_ppo_cb_without_a_two_action_table_estimates_benefits_by_forks(own):
    """The clinic has three actions: PPO-Cb's benefits come from forks of the rollout, and
    the audit reports Lambda."""
    system = cf.systems.make("clinic:make_clinic", search_path=own)
    res = train(TrainConfig(algo="ppo-cb", iterations=2, horizon=4, n_individuals=64,
                            eval_every=2, audit_n=200), system=system)
    assert np.isfinite(res.history["Lambda_batch"]).all() and res.metrics["Lambda"] >= 0
    with pytest.raises(ConfigError, match="'f-ppo'.*use one of ppo, ppo-c, ppo-cb"):
        train(TrainConfig(algo="f-ppo", iterations=1, horizon=4, n_individuals=16), system=system)
    # the seeds' methods need the signals they read: the clinic reports no supply/demand
    with pytest.raises(ConfigError, match=r"'a-ppo' needs the supply and demand .*'clinic:make_clinic'"):
        train(TrainConfig(algo="a-ppo", iterations=1, horizon=4, n_individuals=16), system=system)


def test_ppo_cb_on_a_tabular_file_system(tmp_path):
    """A tabular model from a file (no simulator code): PPO-Cb with the exact benefit."""
    model = cf.lending_setting("lending-3").tabular.with_(name="bank")
    cf.systems.save_tabular(tmp_path / "bank.npz", model)
    system = cf.as_system(cf.systems.load_tabular(tmp_path / "bank.npz"), id="bank")
    res = train(TrainConfig(algo="ppo-cb", iterations=2, horizon=5, n_individuals=32,
                            eval_every=1), system=system)
    assert {"C", "DPE", "Lambda"} <= set(res.metrics)
    d = cf.decompose(model, res.policy, 5)
    assert res.metrics["C"] == pytest.approx(d.C, abs=1e-12)


def test_same_seed_same_weights(own):
    system = cf.systems.make("clinic:make_clinic", search_path=own)
    cfg = TrainConfig(algo="ppo-c", iterations=2, horizon=5, n_individuals=32, seed=3)
    a, b = train(cfg, system=system), train(cfg, system=system)
    for (ka, va), (kb, vb) in zip(a.policy.module.state_dict().items(),
                                  b.policy.module.state_dict().items(), strict=True):
        assert ka == kb and (va == vb).all()


_WEIGHTS = """
import hashlib, sys, torch
torch.set_num_threads(int(sys.argv[1]))
from causalfair.train import TrainConfig, train
from causalfair.train.generic import SystemTrainer
from causalfair.train.sweep import sweep
res = train(TrainConfig(algo="ppo-c", iterations=3, seed=1, n_individuals=256, hidden=(64, 64)))
h = hashlib.sha256()
for v in res.policy.module.state_dict().values():
    h.update(v.numpy().tobytes())
print(h.hexdigest(), torch.get_num_threads())
"""


@pytest.mark.slow
def test_training_gives_the_same_weights_under_1_and_2_threads(tmp_path):
    """The trainer runs with config.threads (1) whatever the caller's thread settings
    (torch threads and OMP/MKL variables), and restores the caller's count afterwards."""
    outs = []
    for threads, omp in (("1", "1"), ("2", "2")):
        env = {**os.environ, "OMP_NUM_THREADS": omp, "MKL_NUM_THREADS": omp}
        p = run_cmd([sys.executable, "-c", _WEIGHTS, threads], env=env, cwd=tmp_path,
                    timeout=600, expect=0)
        digest, restored = p.stdout.split()
        assert restored == threads
        outs.append(digest)
    assert outs[0] == outs[1]


@pytest.mark.slow
def test_gate_retrains_a_failing_checkpoint_of_the_clinic(own, cli_here):
    proc = cli_here("train", "--system", "clinic:make_clinic", "--algo", "ppo", "--iterations",
                    "2", "--horizon", "12", "--individuals", "64", "--out", "run", cwd=own)
    assert proc.returncode == 0, proc.stderr
    system = cf.systems.make("clinic:make_clinic", search_path=own)
    pol, _ = cf.load_checkpoint(own / "run" / "checkpoint.pt")
    C = abs(cf.decompose(system.tabular, pol, 12).C)
    (own / "g.toml").write_text(
        'name = "g"\n[system]\nfactory = "clinic:make_clinic"\n[policy]\n'
        'checkpoint = "run/checkpoint.pt"\n'
        f"[thresholds]\nabs_C = {C / 2}\n"
        '[retrain]\nalgo = "ppo-c"\niterations = 3\nbetas = { C = 20.0 }\n')
    proc = cli_here("gate", "g.toml", "--retrain", "--junit", "g.xml", "--json", "-", cwd=own)
    assert proc.returncode in (0, 1), proc.stderr
    new = own / "run" / "checkpoint.retrained-ppo-c-1.pt"
    assert new.is_file()
    doc = json.loads(proc.stdout)  # --json -: the JSON on stdout, the table on stderr
    entry = doc["specs"][0]
    assert entry["before"]["overall"] == "FAIL"
    after_c = abs(cf.decompose(system.tabular, cf.load_checkpoint(new)[0], 12).C)
    assert entry["after"]["verdicts"][0]["estimate"] == pytest.approx(after_c, abs=1e-12)


def test_generic_trainer_makes_n_minibatches_per_epoch(own):
    """n_minibatches is the number of minibatches (optimiser steps) per epoch, as the
    lending trainer's torch.tensor_split cuts: 30 samples in 4 minibatches are 8, 8, 7, 7
    (it was 7, 7, 7, 7 and a fifth of 2: one step more per epoch, on two samples)."""
    system = cf.systems.make("clinic:make_clinic", search_path=own)
    tr = SystemTrainer(system, TrainConfig(algo="ppo", iterations=1, n_individuals=10,
                                           horizon=3, n_epochs=2, n_minibatches=4,
                                           eval_every=100))
    sizes = []
    orig = tr._apply

    def step(loss):
        sizes.append(loss)
        return orig(loss)

    real = tr._ppo_epochs

    def epochs(n, logp_of, *rest):
        def seen(idx):
            sizes.append(len(idx))
            return logp_of(idx)
        return real(n, seen, *rest)

    tr._apply, tr._ppo_epochs = step, epochs
    tr.step()
    batches = [s for s in sizes if isinstance(s, int)]
    assert batches == [8, 8, 7, 7] * 2
    assert len(sizes) - len(batches) == 8  # one optimiser step per minibatch


def test_train_names_the_pair_its_metrics_compare_with_three_groups(tmp_path, cli_here):
    """h8sys F4: with more than two groups the training's audit compares a pair chosen from
    its own numbers (B-C here, where the decomposition of the checkpoint compares A-C);
    `causalfair train` printed C, DPE, ... and Lambda without naming it (text and --json),
    where a sweep's runs.csv names it. Both now name the sweep's pair."""
    (tmp_path / "three.py").write_text(skill_simulator(("A", "B", "C"), 3), encoding="utf-8")
    args = ("train", "--system", "three:make", "--algo", "ppo", "--iterations", "1",
            "--individuals", "32", "--seed", "0")
    proc = cli_here(*args, "--out", "run", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pair = json.loads(proc.stdout)["pair"]
    proc = cli_here(*args, "--out", "run2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"  pair: {pair[0]} - {pair[1]} (C, DPE, IPE, SPE and Lambda above" in proc.stdout
    res = sweep(["ppo"], [0], systems=["three:make"], search_path=tmp_path,
                overrides={"iterations": 1, "n_individuals": 32})
    assert json.loads(res.runs["pair"].iloc[0]) == pair

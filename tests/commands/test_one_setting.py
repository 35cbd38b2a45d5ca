"""h8cli F1: one setting named by a flag and by ``--set FIELD=`` / ``--param KEY=`` (or by two
flags) follows one rule, in every command (causalfair.commands._system.one_setting): a
flag left at its default never overrides the other source, and two given sources that
disagree are refused (exit 2, naming both). ``train --seed 3 --set seed=5`` trained seed 5."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import causalfair.commands.train as train_cmd
from causalfair.cli import build_parser


def test_the_parser_tells_a_given_flag_from_its_default():
    p = build_parser(commands=("train",))
    assert {"seed", "out", "threads"} <= p.parse_args(
        ["--threads", "1", "train", "--out", "x", "--seed", "0"]).given
    args = p.parse_args(["train", "--out", "x"])
    assert args.seed == 0 and args.algo == "ppo-c" and "seed" not in args.given
    assert "algo" not in args.given and "threads" not in args.given
    # the parser keeps its defaults for the next parse
    assert p.parse_args(["train", "--out", "y"]).seed == 0


@pytest.mark.parametrize("words, message", [
    (["--seed", "3", "--set", "seed=5"], "--set seed: given with --seed as well (5 and 3)"),
    (["--seed", "0", "--set", "seed=5"], "--set seed: given with --seed as well (5 and 0)"),
    (["--algo", "ppo", "--set", 'algo="ppo-cb"'], "--set algo: given with --algo as well"),
    (["--env", "individual", "--set", 'env="population"'], "--set env: given with --env"),
    (["--levels", "7", "--set", "n_levels=5"], "--set n_levels: given with --levels"),
    (["--levels", "5", "--param", "levels=3"], "--param levels: given with --levels"),
    (["--set", "n_levels=5", "--param", "levels=3"],
     "--param levels: given with --set n_levels"),
    (["--set", "interest=3", "--param", "interest=2"],
     "--param interest: given with --set interest"),
    (["--constraint", "abs_C<=0.1", "--set", 'constraints=["abs_C<=0.5"]'],
     "--set constraints: given with --constraint"),
    (["--system", "attention-1", "--set", 'system="lending-2"'],
     "--set system: given with --system"),
    (["--setting", "lending-2", "--set", 'system="lending-3"'],
     "--set system: given with --setting"),
    (["--system", "lending-2", "--set", 'setting="lending-3"'],
     "--set setting: given with --system"),
    (["--system", "replicator-1", "--horizon", "10", "--param", "horizon=5"],
     "--param horizon: given with --horizon as well (5 and 10)"),
    (["--system", "attention-1", "--param", "units=3", "--set",
      'system_params={"units": 4}'], "--set system_params: given with --param"),
])
def test_train_refuses_a_setting_given_twice_with_two_values(tmp_path, cli_here, monkeypatch,
                                                             words, message):
    monkeypatch.setattr(train_cmd, "train", lambda *a, **k: pytest.fail("trained"))
    p = cli_here("train", "--no-progress", "--iterations", "1", "--out", tmp_path / "run",
                 *words, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr and "keep one." in p.stderr
    assert not (tmp_path / "run").exists()


def test_train_global_threads_and_set_threads_disagreeing_are_refused(tmp_path, cli_here,
                                                                      monkeypatch):
    monkeypatch.setattr(train_cmd, "train", lambda *a, **k: pytest.fail("trained"))
    p = cli_here("--threads", "1", "train", "--no-progress", "--set", "threads=2",
                 "--out", tmp_path / "run", cwd=tmp_path)
    assert p.returncode == 2
    assert "--set threads: given with --threads as well (2 and 1); keep one." in p.stderr


def _fake_train(seen: list):
    def fake(config, **kwargs):
        seen.append(config)
        return SimpleNamespace(metrics={"C": 0.0}, checkpoint="ck.pt", wall_s=0.0,
                               config=SimpleNamespace(horizon=config.horizon or 20))
    return fake


@pytest.mark.parametrize("words, want", [
    (["--set", "seed=5"], {"seed": 5}),                 # --seed left at 0: --set's
    (["--seed", "3"], {"seed": 3}),
    (["--seed", "3", "--set", "seed=3"], {"seed": 3}),  # the same value: one setting
    (["--set", 'algo="ppo-cb"'], {"algo": "ppo-cb"}),
    (["--set", "n_levels=5"], {"n_levels": 5}),
])
def test_train_a_set_field_wins_over_a_flag_left_at_its_default(tmp_path, cli_here,
                                                                monkeypatch, words, want):
    seen: list = []
    monkeypatch.setattr(train_cmd, "train", _fake_train(seen))
    p = cli_here("train", "--no-progress", "--json", "--out", tmp_path / "run", *words,
                 cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert {k: getattr(seen[0], k) for k in want} == want
    if "algo" in want:  # --json names the algorithm trained
        assert f'"algo": "{want["algo"]}"' in p.stdout


def test_train_uses_the_global_threads(tmp_path, cli_here, monkeypatch):
    """``causalfair --threads 2 train`` trained with TrainConfig.threads = 1."""
    seen: list = []
    monkeypatch.setattr(train_cmd, "train", _fake_train(seen))
    p = cli_here("--threads", "2", "train", "--no-progress", "--out", tmp_path / "run",
                 cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert seen[0].threads == 2


def test_population_train_refuses_seed_and_set_seed_disagreeing(tmp_path, cli_here):
    p = cli_here("train", "--no-progress", "--algo", "l-ucbfair", "--system", "replicator-1",
                 "--seed", "3", "--set", "seed=5", "--iterations", "1",
                 "--out", tmp_path / "run", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--set seed: given with --seed as well (5 and 3); keep one." in p.stderr
    assert not (tmp_path / "run").exists()


def test_sweep_refuses_threads_and_set_threads_disagreeing(tmp_path, cli_here):
    p = cli_here("--threads", "2", "sweep", "--algo", "ppo", "--seeds", "0", "--set",
                 "threads=1", "--out", tmp_path / "sw", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--set threads: given with --threads as well (1 and 2); keep one." in p.stderr


@pytest.mark.parametrize("command", [["decompose"], ["frontier", "--no-plot"],
                                     ["simulate-logs", "--n", "5"]])
@pytest.mark.parametrize("flag, param", [(["--levels", "7"], "levels=5"),
                                         (["--interest", "1"], "interest=2")])
def test_system_flags_and_param_disagreeing_are_refused(tmp_path, cli_here, command, flag,
                                                        param):
    """``decompose --param levels=5 --levels 7`` audited 7 levels."""
    out = ["--out", str(tmp_path / "o.csv")] if command[0] != "decompose" else []
    p = cli_here(*command, *flag, "--param", param, *out, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    key = param.partition("=")[0]
    assert f"--param {key}: given with --{key} as well" in p.stderr


def test_decompose_horizon_and_param_horizon_disagreeing_are_refused(tmp_path, cli_here):
    """``--param horizon=5 --horizon 10`` audited 10 steps of a 5-step replicator system."""
    p = cli_here("decompose", "--system", "replicator-1", "--policy", "uniform", "--param",
                 "horizon=5", "--horizon", "10", "--n", "2", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--param horizon: given with --horizon as well (5 and 10); keep one." in p.stderr


def test_system_flag_and_param_agreeing_are_one(tmp_path, cli_here):
    p = cli_here("decompose", "--levels", "5", "--param", "levels=5", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert '"levels": 5' in p.stdout


def test_train_names_the_flag_that_gave_a_bad_iterations(tmp_path, cli_here, monkeypatch):
    """``train --iterations 0`` said ``iterations: bad value 0`` (the field, not the flag)."""
    monkeypatch.setattr(train_cmd, "train", lambda *a, **k: pytest.fail("trained"))
    p = cli_here("train", "--no-progress", "--iterations", "0", "--out", tmp_path / "r",
                 cwd=tmp_path)
    assert p.returncode == 2
    assert "causalfair train: error: --iterations: bad value 0" in p.stderr

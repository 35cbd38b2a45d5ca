"""An ML team retrains and repairs its own torch policy on its own (non-lending) system,
through `causalfair train` and `causalfair.train.train`: warm starts keep the team's
network or are refused in one line, checkpoints saved the usual torch ways are refused
with the fix, and the training options that do not apply are refused, not ignored."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import CausalfairError, CheckpointError, ConfigError
from causalfair.train import TrainConfig, train

FEATURES = ("skill", "experience")


@dataclass
class _State:
    skill: np.ndarray
    exp: np.ndarray
    group: np.ndarray
    t: int


class _Hiring:
    """Two groups, hire (1) or not (0, the baseline), two continuous features."""

    n_groups = 2
    group_names = ("a", "b")
    n_actions = 2
    baseline = 0
    feature_names = FEATURES

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        return _State(rng.normal(0.5 - 0.2 * g, 0.2), rng.gamma(2.0, 1.0, n), g, 0)

    def observe(self, s):
        return cf.Observation(group=s.group, features=np.stack([s.skill, s.exp], 1), t=s.t)

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        d = np.asarray(d, dtype=float)
        skill = s.skill + d * (0.1 + 0.05 * noise) - (1 - d) * 0.02 * (1 + s.group)
        return cf.StepResult(state=_State(skill, s.exp + d, s.group, s.t + 1),
                             reward=d * (s.skill - 0.4), gain=skill - s.skill, info={})


def _system(features=FEATURES) -> cf.System:
    return cf.System(id="hiring-test", groups=("a", "b"),
                     decisions=cf.DecisionSet(labels=("reject", "hire"), baseline=0),
                     features=features, horizon=3, simulator=_Hiring)


def _save(path, hidden=(8,), names=FEATURES, n_out=1, activation="tanh"):
    import torch

    torch.manual_seed(0)
    net = cf.policies.checkpoint.mlp(len(names), hidden, n_out, activation)
    arch = {"type": "mlp", "input_dim": len(names), "hidden": list(hidden),
            "output_dim": n_out, "activation": activation}
    cf.save_checkpoint(path, net, architecture=arch,
                       encoding=cf.FeatureEncoding("features", names=names), metadata={"name": "own"})
    return net


def _config(**kw) -> TrainConfig:
    return TrainConfig(algo="ppo", iterations=1, n_individuals=16, n_minibatches=2, n_epochs=1,
                       audit_n=50, **kw)


def test_a_warm_start_trains_the_checkpoints_own_network(tmp_path):
    """`causalfair train --init-checkpoint own.pt` on a 32-32 network was refused with
    "architecture differs from the config (Error(s) in loading state_dict for
    Sequential:)": no sizes, no fix. A warm start now trains the checkpoint's network (as
    `gate --retrain` does), starting from its weights."""
    net = _save(tmp_path / "own.pt", hidden=(8,), activation="relu")
    cfg = _config().replace(iterations=1, lr=1e-12)  # a step too small to move the weights
    res = train(cfg, out=tmp_path / "run", init_checkpoint=tmp_path / "own.pt", system=_system())
    assert (res.config.hidden, res.config.activation) == ((8,), "relu")
    _, meta = cf.load_checkpoint(res.checkpoint)
    assert meta["architecture"]["hidden"] == [8]
    assert meta["architecture"]["activation"] == "relu"
    import torch

    w0 = net.state_dict()["0.weight"]
    w1 = torch.as_tensor(cf.load_checkpoint(res.checkpoint)[0].to_torch().state_dict()["0.weight"])
    assert torch.allclose(w0, w1, atol=1e-6)  # it started from the team's weights


def test_a_warm_start_with_another_architecture_named_is_one_line(tmp_path):
    _save(tmp_path / "own.pt", hidden=(8,))
    with pytest.raises(ConfigError) as e:
        train(_config(hidden=(16,)), out=tmp_path / "run", init_checkpoint=tmp_path / "own.pt",
              system=_system())
    msg = str(e.value)
    assert "hidden [8] tanh" in msg and "hidden [16] tanh" in msg, msg
    assert "leave hidden and activation out" in msg and "\n" not in msg, msg
    assert not (tmp_path / "run").exists()


def test_a_warm_start_reading_other_features_is_refused_before_training(tmp_path):
    """A checkpoint of features (experience, skill) warm-started on a system giving
    (skill, experience) was trained silently on the swapped columns, and wrote a
    checkpoint the audit then refused."""
    _save(tmp_path / "swapped.pt", names=("experience", "skill"))
    with pytest.raises(CheckpointError, match=r"reads features \[experience, skill\] but the "
                       r"system gives \[skill, experience\]"):
        train(_config(), out=tmp_path / "run", init_checkpoint=tmp_path / "swapped.pt",
              system=_system())
    assert not (tmp_path / "run").exists()


def test_a_warm_start_with_other_actions_is_one_line(tmp_path):
    _save(tmp_path / "three.pt", n_out=3)
    with pytest.raises(CheckpointError) as e:
        train(_config(), init_checkpoint=tmp_path / "three.pt", system=_system())
    msg = str(e.value)
    assert "3 output(s)" in msg and "2 actions (1 output)" in msg and "\n" not in msg, msg


def test_torch_save_files_are_refused_with_the_fix(tmp_path):
    """`torch.save(model)` was refused with torch's own message cut mid-word (an ANSI
    escape and "do those steps only if you t"); a bare state_dict and a safetensors file
    did not say what was missing."""
    import torch

    net = _save(tmp_path / "own.pt")
    torch.save(net, tmp_path / "pickled.pt")
    torch.save(net.state_dict(), tmp_path / "state.pt")
    header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    (tmp_path / "w.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(4))
    fix = "save the module with cf.save_checkpoint(path, module, architecture=..., encoding=...)"
    for name, what in (("pickled.pt", "a whole pickled torch module, Sequential, as "
                        "torch.save(model) writes"),
                       ("state.pt", "a bare state_dict of 4 tensors, without the architecture "
                        "and input encoding"),
                       ("w.safetensors", "is a safetensors file: weights without the "
                        "architecture and input encoding")):
        with pytest.raises(CheckpointError) as e:
            cf.load_checkpoint(tmp_path / name)
        msg = str(e.value)
        assert what in msg and fix in msg and "\n" not in msg and "\x1b" not in msg, msg


def test_the_exact_repair_never_writes_into_a_folder_of_the_users(tmp_path, capsys):
    """`causalfair train --algo exact --out DIR` ran the repair and then replaced
    DIR/checkpoint.pt, a file it did not create (the PPO trainers refuse such a folder)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "checkpoint.pt").write_bytes(b"the team's own file")
    code = main(["train", "--setting", "lending-1", "--algo", "exact", "--constraint",
                 "abs_C<=0.05", "--iterations", "1", "--out", str(mine)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "causalfair did not write" in err, err
    assert (mine / "checkpoint.pt").read_bytes() == b"the team's own file"
    assert sorted(p.name for p in mine.iterdir()) == ["checkpoint.pt"]


def test_the_exact_repair_on_a_system_without_a_model_names_ppo_lagrangian(tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setattr("causalfair.commands.train.make", lambda *a, **k: _system())
    _save(tmp_path / "own.pt")
    code = main(["train", "--system", "hiring-test", "--algo", "exact", "--constraint",
                 "abs_C<=0.1", "--init-checkpoint", str(tmp_path / "own.pt"),
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--algo ppo-c --constraint" in err and '"ppo-lag"' in err, err
    assert not (tmp_path / "run").exists()  # the folder it made for the repair is gone


def test_errors_of_the_python_api_are_causalfair_errors(tmp_path):
    with pytest.raises(CausalfairError):
        train(_config(), init_checkpoint=tmp_path / "missing.pt", system=_system())


def test_thresholds_no_policy_meets_are_named_by_the_cli(tmp_path, capsys, monkeypatch):
    """An infeasible bound (|SPE| below the SPE no policy changes) printed only "NOT met by
    any audited policy": not which threshold, nor its value."""
    monkeypatch.setattr("causalfair.commands.train.make", lambda *a, **k: _system())
    code = main(["train", "--system", "hiring-test", "--algo", "ppo-c", "--iterations", "1",
                 "--individuals", "16", "--set", "audit_n=50", "--set", "n_epochs=1",
                 "--constraint", "abs_SPE<=0.001", "--out", str(tmp_path / "run"),
                 "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "NOT met by any audited policy" in out and "its last training audit: abs_SPE = " in out, out
    assert "FAIL (outside threshold 0.001)" in out, out


def test_a_constrained_runs_audit_hint_uses_other_random_numbers(tmp_path, capsys, monkeypatch):
    """The kept policy is the best of several audited on the same random numbers (seed,
    audit_n), so its numbers are optimistic; the printed `decompose` line audited it with
    those same numbers (seed 0), which only repeats the selection."""
    monkeypatch.setattr("causalfair.commands.train.make", lambda *a, **k: _system())
    code = main(["train", "--system", "hiring-test", "--algo", "ppo-c", "--iterations", "1",
                 "--individuals", "16", "--set", "audit_n=50", "--set", "n_epochs=1",
                 "--constraint", "abs_C<=10", "--out", str(tmp_path / "run"), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "met on the training's audits (the selection stream of seed 0, n = 50 per group" \
        in out, out
    hint = next(line for line in out.splitlines() if "audit it:" in line)
    assert hint.endswith("--horizon 3 --n 50 --seed 1"), hint


@pytest.mark.parametrize("algo, where", [
    ("exact", "causalfair.train.exact.repair_checkpoint("),
    ("ppo-lag", "'ppo-lag' is 'ppo-c' with beta_c=0, beta_lambda=0 and the thresholds as "
                "constraints=(...)"),
])
def test_a_python_config_of_a_repair_algo_says_where_it_runs(algo, where):
    """`TrainConfig(algo="exact")` and `"ppo-lag"` (names the docs and specs use) listed
    the PPO objectives only, without saying how to run the repair in Python."""
    with pytest.raises(ConfigError) as e:
        TrainConfig(algo=algo)
    assert where in str(e.value), str(e.value)

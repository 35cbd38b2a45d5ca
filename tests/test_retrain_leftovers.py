"""Retraining and Gymnasium loose ends (the Retrain helper's walkthrough): a scratch
retrain of a policy behind ``[policy] vecnormalize``, the exact repair's ``original`` on
the spec's ``[engine] pair``, the files a registered Gymnasium env's constructor reads
pinned in audit.json ``inputs``, and the checkpoint messages that name the key to use."""

from __future__ import annotations

import sys

import pytest

import causalfair as cf
from causalfair.audit.retrain import run_retrain
from causalfair.audit.spec import load_spec
from tests.tri_system import tri_source

TRI_SPEC = '''
name = "tri"
[system]
factory = "tri_lo:make"
[policy]
factory = "tri_lo:policy"
[engine]
kind = "exact"
pair = ["B", "A"]
[thresholds]
abs_C = 0.01
[retrain]
algo = "exact"
init = "scratch"
hidden = [4]
starts = 0
iterations = 2
min_utility = -inf
'''


@pytest.fixture
def tri(tmp_path, monkeypatch):
    (tmp_path / "tri_lo.py").write_text(tri_source(1), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("tri_lo", None)


def test_the_table_searchs_attempts_report_the_pair_asked(tri):
    """The plain keys of every attempt are the numbers of ``pair`` (before: the engine's
    default pair, whatever the caller compared)."""
    import importlib

    from causalfair.engines.exact import exact_numbers
    from causalfair.thresholds import Constraint
    from causalfair.train.repair import best_found

    model = importlib.import_module("tri_lo").make(1).tabular
    found = best_found(model, 1, [Constraint("abs_C[B-A]", 0.01)], n_random=0, outer=1,
                       inner=5, pair=(1, 0))
    assert found.attempts
    for a in found.attempts:
        mine = exact_numbers(model, a.table, 1, pair=(1, 0)).scalars()
        default = exact_numbers(model, a.table, 1).scalars()
        assert a.metrics["C"] == pytest.approx(mine["C"], abs=1e-12)
        assert a.metrics["Lambda"] == pytest.approx(mine["Lambda"], abs=1e-12)
        assert a.metrics["C[B-A]"] == pytest.approx(mine["C"], abs=1e-12)
    assert abs(default["C"] - mine["C"]) > 1e-3  # the default pair is another here


@pytest.mark.slow
def test_the_exact_repairs_original_is_the_spec_pairs(tri):
    """Before, the repair's ``original`` C was the engine's default pair's (C-A: -0.2)
    while the gate judged B-A (-0.06, tests/audit/test_three_groups.py)."""
    (tri / "tri.toml").write_text(TRI_SPEC, encoding="utf-8")
    spec = load_spec(tri / "tri.toml")
    before = cf.audit(spec)
    assert before.decomposition.C == pytest.approx(-0.06)  # B-A, hand-checked
    done = run_retrain(spec, before)
    rep = done.after.extra["repair"]
    assert rep["original"]["C"] == pytest.approx(-0.06, abs=1e-12)
    for q in ("DPE", "IPE", "SPE", "Lambda", "utility"):
        got = getattr(before.decomposition, q, None) if q != "Lambda" else before.benefit.Lambda
        if q == "utility":
            got = before.decomposition.total_utility
        assert rep["original"][q] == pytest.approx(got, abs=1e-12), q
    # the repaired network's numbers are the pair's too: its audit agrees
    after = done.after
    assert rep["result"]["C"] == pytest.approx(after.decomposition.C, abs=1e-6)  # float32 net
    assert after.decomposition.pair == (1, 0)


# ------------------------------------------------------------ 1. scratch behind VecNormalize
def _sb3_behind_vecnormalize(folder):
    """An SB3 PPO trained behind VecNormalize on tests/policies/test_vecnormalize.py's env
    (``vn_scaled``), saved as ppo.zip with vecnormalize.pkl beside it."""
    pytest.importorskip("stable_baselines3")
    import importlib

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from tests.policies.test_vecnormalize import ENV_SRC

    (folder / "vn_lo.py").write_text(ENV_SRC)
    sys.path.insert(0, str(folder))
    try:
        make_env = importlib.import_module("vn_lo").make_env
    finally:
        sys.path.remove(str(folder))
    venv = VecNormalize(DummyVecEnv([make_env]), norm_reward=False)
    venv.seed(0)
    venv.reset()
    for a in (0, 1, 1, 0, 1, 0, 0, 1) * 4:
        venv.step([a])
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=16, seed=0, device="cpu",
                policy_kwargs={"net_arch": [8]})
    model.save(folder / "ppo.zip")
    venv.save(folder / "vecnormalize.pkl")


VN_SPEC = '''
name = "vn"
horizon = 2
[system]
gym = "vn_lo:make_env"
groups = ["a", "b"]
[policy]
checkpoint = "ppo.zip"
vecnormalize = "vecnormalize.pkl"
[engine]
kind = "mc"
n = 60
[thresholds]
abs_C = 0.0001
[retrain]
algo = "ppo"
init = "scratch"
hidden = [4]
iterations = 1
min_utility = -inf
'''


def test_a_scratch_retrain_of_a_policy_behind_vecnormalize(tmp_path):
    """Before, the spec was refused ("[retrain]: not with [policy] vecnormalize") although
    a new network needs no statistics. The retrained checkpoint carries its own encoding
    and audits, without the statistics, to the numbers the retrain reported."""
    _sb3_behind_vecnormalize(tmp_path)
    (tmp_path / "vn.toml").write_text(VN_SPEC)
    spec = load_spec(tmp_path / "vn.toml")
    before = cf.audit(spec)
    done = run_retrain(spec, before)
    assert done.target == tmp_path / "ppo.retrained-ppo-1.pt" and done.target.is_file()
    assert done.after.spec.policy_vecnormalize is None
    enc = done.after.checkpoint_meta["encoding"]  # its own standardisation of the raw env
    assert enc["name"] == "features" and len(enc["mean"]) == len(enc["std"]) == 3, enc
    assert enc["mean"][0] > 100  # the raw observation's scale (600 + 80 x), not VecNormalize's
    assert "vecnormalize" not in done.after.checkpoint_meta.get("metadata", {})
    (tmp_path / "again.toml").write_text(VN_SPEC.replace('checkpoint = "ppo.zip"', (
        f'checkpoint = "{done.target.name}"')).replace('vecnormalize = "vecnormalize.pkl"\n', ""))
    again = cf.audit(tmp_path / "again.toml")
    assert again.checkpoint_sha256 == done.after.checkpoint_sha256
    for q in ("C", "DPE", "IPE", "SPE", "total_utility"):
        assert getattr(again.decomposition, q) == getattr(done.after.decomposition, q), q
    # a warm start stays refused, naming the opt-in
    (tmp_path / "warm.toml").write_text(VN_SPEC.replace('init = "scratch"\nhidden = [4]\n', ""))
    with pytest.raises(cf.errors.SpecError, match=r'set \[retrain\] init = "scratch"'):
        load_spec(tmp_path / "warm.toml")


# ------------------------------------------------ 3. files a registered gym env's constructor reads
CSV_ENV = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class CsvEnv(gym.Env):
    """Reads its step sizes from rates.csv when constructed (not when imported)."""

    def __init__(self, rates="rates.csv"):
        with open(rates, encoding="utf-8") as fh:
            self.up, self.down = (float(v) for v in fh.read().split(","))
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return np.array([self.x, float(self.g)], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", self.np_random.integers(2)))
        self.x = float(self.np_random.normal(0.3 - 0.6 * self.g, 1.0))
        return self._obs(), {}

    def step(self, action):
        u = self.np_random.random()
        dx = (self.up if u < 0.6 else -self.down) * (2 * int(action) - 1)
        self.x += dx
        return self._obs(), float(action) - u, False, False, {"gain": dx}


gym.register("CsvEnv-v0", entry_point=CsvEnv)
'''

CSV_SPEC = '''
name = "csv"
horizon = 2
[system]
gym = "{env}"
groups = ["a", "b"]
[policy]
builtin = "uniform"
[engine]
kind = "mc"
n = 40
[thresholds]
abs_C = 1
'''


@pytest.fixture
def csv_gym(tmp_path, monkeypatch):
    pytest.importorskip("gymnasium")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "csvgym_lo.py").write_text(CSV_ENV, encoding="utf-8")
    (tmp_path / "rates.csv").write_text("0.3,0.2", encoding="utf-8")
    yield tmp_path
    sys.modules.pop("csvgym_lo", None)
    import gymnasium

    gymnasium.envs.registration.registry.pop("CsvEnv-v0", None)


def _sha(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_registered_gym_envs_constructor_reads_are_pinned(csv_gym):
    """Before, the reads of ``gymnasium.make`` (the env's import and constructor) were
    recorded under causalfair's own door, so ``inputs`` had the module and not rates.csv."""
    import json

    from causalfair._io import to_jsonable
    from causalfair.audit.reproduce import reproduce
    from causalfair.errors import InputError

    (csv_gym / "csv.toml").write_text(CSV_SPEC.format(env="csvgym_lo:CsvEnv-v0"))
    res = cf.audit(csv_gym / "csv.toml")
    assert res.inputs == [
        {"role": "system.gym", "module": "csvgym_lo", "path": "csvgym_lo.py",
         "sha256": _sha(csv_gym / "csvgym_lo.py")},
        {"role": "system.gym.read", "module": "csvgym_lo", "path": "rates.csv",
         "sha256": _sha(csv_gym / "rates.csv")}]
    (csv_gym / "rep").mkdir()
    (csv_gym / "rep" / "audit.json").write_text(json.dumps(to_jsonable(res.to_dict())))
    assert reproduce(csv_gym / "rep").identical
    (csv_gym / "rates.csv").write_text("0.3,0.25", encoding="utf-8")
    with pytest.raises(InputError, match=r"^rates.csv: SHA-256 .*\(inputs: system.gym.read, "
                                         r"module csvgym_lo\)"):
        reproduce(csv_gym / "rep")


def test_a_bare_registered_ids_constructor_reads_go_to_its_entry_points_module(csv_gym):
    """``gym = "CsvEnv-v0"`` (registered by a module imported before): what its
    constructor reads is recorded under the module of its entry point (before: under
    causalfair's door, where no ``inputs`` entry could find it)."""
    import importlib

    from causalfair._usercode import module_reads

    importlib.import_module("csvgym_lo")  # registers CsvEnv-v0; its import reads nothing
    cf.systems.from_gym("CsvEnv-v0", groups=["a", "b"], horizon=2)
    assert module_reads(csv_gym / "csvgym_lo.py") == [(csv_gym / "rates.csv").resolve()]


# ------------------------------------------------------------ 4. checkpoint messages
def test_a_bare_state_dict_names_the_factory_route(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save(cf.policies.checkpoint.mlp(3, (4,), 1).state_dict(), tmp_path / "state.pt")
    with pytest.raises(cf.errors.CheckpointError) as e:
        cf.load_checkpoint(tmp_path / "state.pt")
    msg = str(e.value)
    assert "a bare state_dict of 4 tensors" in msg and "\n" not in msg, msg
    assert "cf.save_checkpoint(path, module, architecture=..., encoding=...)" in msg, msg
    assert '[policy] factory = "module:make" (--policy module:make)' in msg, msg
    assert "load_state_dict" in msg and "cf.TorchPolicy(module, encoding)" in msg, msg


ENCODING_FIX = 'FeatureEncoding("features", names=..., mean=..., std=...)'
ARCH = {"type": "mlp", "input_dim": 2, "hidden": [4], "output_dim": 1, "activation": "tanh"}


def _normalising(buffers):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(2, 4), nn.Linear(4, 1)
            mean, std = torch.tensor([600.0, 0.5]), torch.tensor([80.0, 0.5])
            if buffers:
                self.register_buffer("mean", mean)
                self.register_buffer("std", std)
            else:
                self.mean, self.std = mean, std

        def forward(self, x):
            return self.fc2(torch.tanh(self.fc1((x - self.mean) / self.std)))

    return Net()


@pytest.mark.parametrize("buffers, what", [(True, "holds buffers ['mean', 'std']"),
                                           (False, "not the declared MLP")])
def test_a_forward_that_normalises_names_the_encodings_mean_and_std(tmp_path, buffers, what):
    """Before: "weights do not match the declared architecture" (buffers) or "declare its
    activation" (constants), neither naming where a normalisation goes."""
    pytest.importorskip("torch")
    enc = cf.FeatureEncoding("features", names=("score", "g"))
    with pytest.raises(cf.errors.CheckpointError) as e:
        cf.save_checkpoint(tmp_path / "p.pt", _normalising(buffers), architecture=ARCH,
                           encoding=enc)
    msg = str(e.value)
    assert what in msg and ENCODING_FIX in msg and "\n" not in msg, msg
    assert not (tmp_path / "p.pt").exists()
    # the fix the message names: the same policy, the step in the encoding
    net = _normalising(buffers)
    plain = cf.policies.checkpoint.mlp(2, (4,), 1)
    plain.load_state_dict({"0.weight": net.fc1.weight, "0.bias": net.fc1.bias,
                           "2.weight": net.fc2.weight, "2.bias": net.fc2.bias})
    fixed = cf.FeatureEncoding("features", names=("score", "g"), mean=(600.0, 0.5),
                               std=(80.0, 0.5))
    cf.save_checkpoint(tmp_path / "p.pt", plain, architecture=ARCH, encoding=fixed)
    import numpy as np
    import torch

    x = np.array([[650.0, 1.0], [520.0, 0.0]])
    obs = cf.Observation(group=np.array([1, 0]), features=x)
    got = cf.load_checkpoint(tmp_path / "p.pt")[0].action_probs(obs)[:, 1]
    with torch.no_grad():
        want = torch.sigmoid(net(torch.tensor(x, dtype=torch.float32)))[:, 0].numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)


# ------------------------------------------------------------ 5. the platform engineer's walk
def test_a_retrained_checkpoint_kept_behind_vecnormalize_names_the_key_once(tmp_path):
    """Pointing the spec at the checkpoint a scratch retrain wrote, with its
    ``[policy] vecnormalize`` left in: the refusal said "so drop audit spec X: [policy]
    vecnormalize" (the spec named twice)."""
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).parents[1] / "reports/examples/checkpoints/lending-1-ppo.pt",
                tmp_path / "new.pt")
    (tmp_path / "vecnormalize.json").write_text("{}")
    (tmp_path / "kept.toml").write_text(
        'name = "kept"\nhorizon = 3\n[system]\nid = "lending-1"\n[policy]\ncheckpoint = '
        '"new.pt"\nvecnormalize = "vecnormalize.json"\n[thresholds]\nabs_C = 1\n')
    with pytest.raises(cf.errors.PolicyError) as e:
        cf.audit(tmp_path / "kept.toml")
    msg = str(e.value)
    assert "is a checkpoint policy, so drop [policy] vecnormalize (a causalfair" in msg, msg
    assert msg.count("kept.toml") == 1, msg


def _sb3_raw(folder, with_stats=False):
    """``_sb3_behind_vecnormalize``'s model saved alone (its stats only ``with_stats``):
    a stable-baselines3 PPO whose action_net gives two logits over Discrete(2)."""
    _sb3_behind_vecnormalize(folder)
    if not with_stats:
        (folder / "vecnormalize.pkl").unlink()
    warm = VN_SPEC.replace('init = "scratch"\nhidden = [4]\n', "")
    if with_stats:
        warm = warm.replace('vecnormalize = "vecnormalize.pkl"', 'vecnormalize = "none"')
    else:
        warm = warm.replace('vecnormalize = "vecnormalize.pkl"\n', "")
    (folder / "warm.toml").write_text(warm)
    return load_spec(folder / "warm.toml")


def test_a_warm_start_from_a_stable_baselines3_zip_trains_its_two_logits_as_one(tmp_path):
    """Before, ``gate --retrain`` audited the .zip and then failed in its retrain: "the
    network has 2 output(s), but system ... has 2 actions (1 output)", although the
    trainer takes two logits over two actions as one (l1 - l0)."""
    import numpy as np

    from causalfair.audit.run import build_system
    from causalfair.policies.checkpoint import load_checkpoint_for
    from causalfair.train import warm_start_config
    from causalfair.train.config import TrainConfig
    from causalfair.train.generic import SystemTrainer

    spec = _sb3_raw(tmp_path)
    system = build_system(spec)
    zip_ = tmp_path / "ppo.zip"
    config = warm_start_config(TrainConfig(algo="ppo", iterations=1), zip_, system)
    assert config.hidden == (8,)
    init = load_checkpoint_for(zip_, system)[0]
    start = SystemTrainer(system, config, init).policy()  # the .zip's policy, one logit
    obs = cf.Observation(group=np.arange(40) % 2, features=np.stack(
        [np.linspace(400, 800, 40), np.arange(40) % 2, np.linspace(-2, 2, 40) * 0.01], 1))
    np.testing.assert_allclose(start.action_probs(obs), init.action_probs(obs), atol=1e-6)
    done = run_retrain(spec, cf.audit(spec))
    assert done.target.name == "ppo.retrained-ppo-1.pt"
    arch = done.after.checkpoint_meta["architecture"]
    assert arch["hidden"] == [8] and arch["output_dim"] == 1, arch


def test_a_warm_start_from_a_zip_kept_with_its_statistics_is_refused_before_the_audit(tmp_path):
    """``[policy] vecnormalize = "none"`` audits the .zip on raw observations, but the
    trainer refuses to start from a .zip kept with a vecnormalize.pkl: before, the gate
    audited it and then failed in its retrain, saying "leave init_checkpoint out" (a key
    no spec has); now check_retrain refuses first, naming init = "scratch"."""
    from causalfair.audit.retrain import check_retrain

    spec = _sb3_raw(tmp_path, with_stats=True)
    with pytest.raises(cf.errors.SpecError) as e:
        check_retrain(spec)
    msg = str(e.value)
    assert "vecnormalize.pkl" in msg and '[retrain] init = "scratch"' in msg, msg
    assert "\n" not in msg and "init_checkpoint" not in msg, msg


def test_the_lending_trainer_warm_starts_from_a_stable_baselines3_zip(tmp_path):
    """A PPO trained on causalfair/Lending-v0 audits on lending-1 (its one-hot (level,
    group) observation, load_checkpoint_for), but its warm start (``gate --retrain`` with
    a lending trainer, ``causalfair train --setting lending-1 --init-checkpoint``) was
    refused: "the policy reads a feature vector (encoding 'features')"."""
    pytest.importorskip("stable_baselines3")
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import PPO

    from causalfair.train import train
    from causalfair.train.config import TrainConfig

    model = PPO("MlpPolicy", gym.make("causalfair/Lending-v0"), n_steps=16, batch_size=16,
                seed=0, device="cpu", policy_kwargs={"net_arch": [8]})
    model.save(tmp_path / "lz.zip")
    system = cf.systems.make("lending-1")
    res = train(TrainConfig(algo="ppo", setting="lending-1", iterations=1, lr=1e-12),
                out=str(tmp_path / "run"), init_checkpoint=str(tmp_path / "lz.zip"))
    got, meta = cf.load_checkpoint(res.checkpoint if hasattr(res, "checkpoint")
                                   else tmp_path / "run" / "checkpoint.pt")
    assert meta["architecture"]["hidden"] == [8] and meta["architecture"]["output_dim"] == 1
    want = cf.policies.checkpoint.load_checkpoint_for(tmp_path / "lz.zip", system)[0]
    m = system.tabular
    from causalfair.policies.grid import policy_table

    np.testing.assert_allclose(policy_table(got, m, 1), policy_table(want, m, 1), atol=1e-5)

"""A stable-baselines3 policy trained behind VecNormalize is audited on the observations it
was trained on (causalfair.policies.vecnormalize): the statistics read from SB3's own
pickle without running code (or .npz/.json, or the object in memory), applied as
``VecNormalize.normalize_obs`` does, through every door (Python, spec, CLI); a ``.zip``
with a ``vecnormalize.pkl`` beside it and no statistics is refused."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import sys
import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.run import resolve_policy
from causalfair.audit.spec import load_spec
from causalfair.errors import CausalfairError, PolicyError, SpecError
from causalfair.policies.vecnormalize import obs_normalization, read_obs_normalization
from causalfair.types import Observation
from tests.conftest import one_line_error, run_cli

pytest.importorskip("stable_baselines3")

#: A student observed on a large scale: a policy trained behind VecNormalize reads its
#: observation only after normalisation.
ENV_SRC = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Scaled(gym.Env):
    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return np.array([600.0 + 80.0 * self.x, float(self.g), self.x * 0.01], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", self.np_random.integers(2)))
        self.x = float(self.np_random.normal(0.3 - 0.6 * self.g, 1.0))
        return self._obs(), {"group": self.g}

    def step(self, action):
        u = self.np_random.random()
        dx = (0.3 if u < 0.6 else -0.2) * (2 * int(action) - 1)
        self.x += dx
        return self._obs(), float(action) - u, False, False, {"gain": dx}


def make_env():
    return Scaled()
'''
GYM_ARGS = ["--system", "gym", "--param", "env=vn_scaled:make_env", "--param",
            'groups=["a", "b"]', "--horizon", "2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(folder, model, venv, make_env): an SB3 PPO behind VecNormalize with non-trivial
    statistics, saved as ppo.zip and vecnormalize.pkl in the folder. The network is
    untrained, its action logits scaled up so that its decisions depend on the input."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    folder = tmp_path_factory.mktemp("vn")
    (folder / "vn_scaled.py").write_text(ENV_SRC)
    sys.path.insert(0, str(folder))
    try:
        make_env = importlib.import_module("vn_scaled").make_env
    finally:
        sys.path.remove(str(folder))
    venv = VecNormalize(DummyVecEnv([make_env]), norm_reward=False)
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    for _ in range(64):
        venv.step(rng.integers(0, 2, size=1))
    model = PPO("MlpPolicy", venv, n_steps=16, batch_size=16, seed=0, device="cpu",
                policy_kwargs={"net_arch": [8]})
    with torch.no_grad():
        model.policy.action_net.weight.mul_(300.0)
    model.save(folder / "ppo.zip")
    venv.save(folder / "vecnormalize.pkl")
    return folder, model, venv, make_env


def _batch(make_env, n=200):
    x = np.stack([make_env().reset(seed=i, options={"group": i % 2})[0] for i in range(n)])
    return x, Observation(group=np.arange(n) % 2, features=x.astype(np.float64))


def _sb3(model, venv, x):
    import torch

    norm = venv.normalize_obs(x)
    actions, _ = model.predict(norm, deterministic=True)
    with torch.no_grad():
        probs = model.policy.get_distribution(torch.as_tensor(norm)).distribution.probs.numpy()
    return actions, probs


def test_the_zip_and_the_model_in_memory_act_as_sb3_on_normalized_observations(trained):
    folder, model, venv, make_env = trained
    x, obs = _batch(make_env)
    actions, probs = _sb3(model, venv, x)
    assert 0 < actions.mean() < 1  # both decisions occur: the comparison can fail
    for stats in (folder / "vecnormalize.pkl", venv):
        for policy in (folder / "ppo.zip", model):
            got = cf.as_policy(policy, vecnormalize=stats).action_probs(obs)
            np.testing.assert_array_equal(got.argmax(axis=1), actions)
            np.testing.assert_allclose(got, probs, atol=1e-6)
    raw = cf.as_policy(folder / "ppo.zip", vecnormalize="none").action_probs(obs)
    assert (raw.argmax(axis=1) != actions).sum() > 20  # raw observations: another policy
    assert np.abs(raw - probs).max() > 0.3


def test_a_zip_with_statistics_beside_it_is_refused_without_them(trained, tmp_path):
    folder, *_ = trained
    with pytest.raises(PolicyError, match="vecnormalize.pkl next to the checkpoint: the policy "
                       "was trained on normalized observations; pass --vecnormalize PATH"):
        cf.as_policy(folder / "ppo.zip")
    zoo = tmp_path / "CartPole-v1"  # rl-zoo: <env>.zip and <env>/vecnormalize.pkl
    zoo.mkdir()
    (zoo / "vecnormalize.pkl").write_bytes((folder / "vecnormalize.pkl").read_bytes())
    (tmp_path / "CartPole-v1.zip").write_bytes((folder / "ppo.zip").read_bytes())
    with pytest.raises(PolicyError, match="next to the checkpoint"):
        cf.as_policy(tmp_path / "CartPole-v1.zip")
    assert cf.as_policy(tmp_path / "CartPole-v1.zip", vecnormalize="none") is not None


def test_npz_json_and_numpy1_pickles_give_the_same_statistics(trained, tmp_path):
    folder, _, venv, make_env = trained
    x, _ = _batch(make_env, 50)
    rms = venv.obs_rms
    fields = {"mean": rms.mean, "var": rms.var, "epsilon": venv.epsilon, "clip_obs": venv.clip_obs}
    np.savez(tmp_path / "stats.npz", **fields)
    (tmp_path / "stats.json").write_text(json.dumps({k: np.asarray(v).tolist()
                                                     for k, v in fields.items()}))
    # protocol 3 names globals in text lines: the numpy 1 spelling (numpy.core) in place
    # of numpy 2's (numpy._core), as a pickle written under numpy 1 has it
    p3 = pickle.dumps(venv, protocol=3)
    assert b"numpy._core.multiarray\n" in p3 or np.__version__ < "2"
    (tmp_path / "np1.pkl").write_bytes(p3.replace(b"numpy._core", b"numpy.core"))
    want = venv.normalize_obs(x)
    for name in ("stats.npz", "stats.json", "np1.pkl"):
        stats = read_obs_normalization(tmp_path / name)
        np.testing.assert_array_equal(stats.apply(x), want)
        assert stats.apply(x).dtype == want.dtype == np.float32
    pkl = read_obs_normalization(folder / "vecnormalize.pkl")
    np.testing.assert_array_equal(pkl.apply(x), want)
    assert len(pkl.sha256) == 64
    assert obs_normalization("none") is None


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_the_restricted_unpickler_refuses_other_globals_without_running_them(tmp_path, trained):
    folder, _, venv, _ = trained
    marker = tmp_path / "ran"
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps(_Evil(marker)))
    with pytest.raises(CausalfairError, match=r"refused global (posix|os|nt)\.system in the "
                       r"pickle \(nothing was run\)") as err:
        read_obs_normalization(tmp_path / "evil.pkl")
    assert "\n" not in str(err.value) and not marker.exists()
    # the same global hidden inside a real VecNormalize's state
    venv.__dict__["extra"] = _Evil(marker)
    try:
        (tmp_path / "hidden.pkl").write_bytes(pickle.dumps(venv))
    finally:
        del venv.__dict__["extra"]
    with pytest.raises(CausalfairError, match="refused global"):
        read_obs_normalization(tmp_path / "hidden.pkl")
    assert not marker.exists()
    good = (folder / "vecnormalize.pkl").read_bytes()
    for name, data, why in (("cut.pkl", good[: len(good) // 2], "cannot be read as a VecNormalize"),
                            ("dict.pkl", pickle.dumps({"mean": [0.0]}), "holds dict, not a "
                             "VecNormalize"),
                            ("stats.txt", good, "unknown suffix '.txt'")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CausalfairError, match=why) as err:
            read_obs_normalization(tmp_path / name)
        assert "\n" not in str(err.value)
    with pytest.raises(PolicyError, match="Dict observation space"):
        obs_normalization({"mean": [0.0], "var": [1.0], "epsilon": 1e-8, "clip_obs": 10.0,
                           "norm_obs_keys": ["pos"]})
    with pytest.raises(PolicyError, match="missing clip_obs"):
        obs_normalization({"mean": [0.0], "var": [1.0], "epsilon": 1e-8})
    with pytest.raises(PolicyError, match="have 1 columns, but the network reads 3 inputs"):
        cf.as_policy(folder / "ppo.zip", vecnormalize={"mean": [0.0], "var": [1.0],
                                                       "epsilon": 1e-8, "clip_obs": 10.0})


def test_the_spec_door(trained, tmp_path):
    folder, model, venv, make_env = trained
    spec_text = textwrap.dedent(f"""
        name = "vn"
        horizon = 2
        [system]
        gym = "vn_scaled:make_env"
        groups = ["a", "b"]
        [policy]
        checkpoint = "{folder / 'ppo.zip'}"
        [engine]
        kind = "mc"
        n = 50
        """)
    (folder / "bare.toml").write_text(spec_text)
    (folder / "vn.toml").write_text(spec_text.replace(
        "[engine]", 'vecnormalize = "vecnormalize.pkl"\n[engine]'))
    spec = load_spec(folder / "vn.toml")
    system = cf.systems.from_gym(make_env, groups=["a", "b"], horizon=2)
    x, obs = _batch(make_env, 50)
    got = resolve_policy(spec, system).policy.action_probs(obs)
    np.testing.assert_allclose(got, _sb3(model, venv, x)[1], atol=1e-6)
    result = cf.audit(folder / "vn.toml")
    assert result.checkpoint_meta["metadata"]["vecnormalize"]["sha256"] == \
        read_obs_normalization(folder / "vecnormalize.pkl").sha256
    with pytest.raises(CausalfairError, match="next to the checkpoint"):
        cf.audit(folder / "bare.toml")
    (folder / "builtin.toml").write_text(spec_text.replace(
        f'checkpoint = "{folder / "ppo.zip"}"', 'builtin = "always"\nvecnormalize = "none"'))
    with pytest.raises(SpecError, match=r"\[policy\] vecnormalize: only used with"):
        load_spec(folder / "builtin.toml")


def test_the_cli_door(trained):
    folder, *_ = trained
    from causalfair.cli import main

    args = [*GYM_ARGS, "--search-path", str(folder), "--checkpoint", str(folder / "ppo.zip"),
            "--engine", "mc", "--n", "50", "--json"]
    assert main(["decompose", *args, "--vecnormalize", str(folder / "vecnormalize.pkl")]) == 0
    assert main(["decompose", *args, "--vecnormalize", "none"]) == 0
    err = one_line_error(run_cli("decompose", *args))
    assert "vecnormalize.pkl next to the checkpoint" in err
    assert "--vecnormalize none to audit on raw observations" in err


def test_spec_refuses_a_repair_of_a_normalized_policy(tmp_path):
    """A repair warm-starts from the network and trains it on raw observations: with
    statistics in [policy] it would not be the policy audited, so the spec refuses it."""
    from causalfair.audit.spec import load_spec
    from causalfair.errors import SpecError

    (tmp_path / "vecnormalize.pkl").write_bytes(b"")
    (tmp_path / "m.zip").write_bytes(b"")
    raw = {"name": "x", "system": {"id": "lending-1"},
           "policy": {"checkpoint": "m.zip", "vecnormalize": "vecnormalize.pkl"},
           "retrain": {"algo": "exact"}}
    with pytest.raises(SpecError, match=r"\[retrain\]: not with \[policy\] vecnormalize"):
        load_spec(raw, base_dir=tmp_path)
    raw["policy"]["vecnormalize"] = "none"
    assert load_spec(raw, base_dir=tmp_path).retrain is not None

"""The one way to resolve a policy for a system (:func:`causalfair.policies.resolve`): each
kind of input gives the probabilities of the policy built directly, and every command that
takes ``--policy`` accepts a factory ``module:callable`` (one that imports a sibling module
while it runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.policies import ResolvedPolicy, as_policy, resolve
from causalfair.policies.core import (
    FeatureEncoding,
    TablePolicy,
    TorchPolicy,
    parse_policy,
    save_checkpoint,
)
from causalfair.systems.lending.settings import SETTINGS

FACTORY = '''
import numpy as np


class Quarter:
    """P(d1) = 0.3 for everyone, the built-in random:0.3 written outside causalfair."""
    name = "quarter"

    def prob_d1(self, obs):
        return np.full(len(obs), 0.3)


def make(q=0.3):
    import helper_sibling  # imported while the factory runs: the folder stays importable

    return helper_sibling.wrap(Quarter())
'''
SIBLING = "def wrap(policy):\n    return policy\n"


@pytest.fixture()
def lending():
    return cf.systems.make("lending-1")


@pytest.fixture()
def factory_dir(tmp_path):
    (tmp_path / "respol.py").write_text(FACTORY)
    (tmp_path / "helper_sibling.py").write_text(SIBLING)
    return tmp_path


def _probs(policy, system):
    return np.asarray(cf.policy_table(policy, system.tabular))


def _net(seed=0, width=9, out=1):
    import torch

    torch.manual_seed(seed)
    from causalfair.policies.core import mlp

    return mlp(width, [8], out)


def test_builtin_resolves_to_the_parsed_policy(lending):
    res = resolve("threshold:0.5", lending)
    assert isinstance(res, ResolvedPolicy)
    assert (res.kind, res.label) == ("builtin", "threshold:0.5")
    np.testing.assert_array_equal(_probs(res.policy, lending),
                                  _probs(parse_policy("threshold:0.5", lending), lending))
    assert res.reads_levels is True


def test_table_function_and_object_resolve_to_their_direct_construction(lending):
    G, K = 2, 7
    table = np.linspace(0.0, 1.0, G * K).reshape(G, K)
    res = resolve(table, lending)
    assert res.kind == "table" and isinstance(res.policy, TablePolicy)
    np.testing.assert_array_equal(_probs(res.policy, lending), table)
    fn = resolve(lambda obs: 0.1 + 0.05 * obs.level, lending)
    assert fn.kind == "callable"
    np.testing.assert_allclose(_probs(fn.policy, lending),
                               np.tile(0.1 + 0.05 * np.arange(K), (G, 1)))

    class Mine:
        def prob_d1(self, obs):
            return np.where(obs.group == 0, 0.2, 0.6)

    obj = resolve(Mine(), lending)
    assert (obj.kind, obj.label) == ("object", "Mine")
    np.testing.assert_array_equal(_probs(obj.policy, lending),
                                  np.repeat([[0.2], [0.6]], K, axis=1))
    assert obj.reads_group is True and fn.reads_group is False
    assert as_policy(table, lending).table.tolist() == table.tolist()


def test_a_users_policy_that_raises_is_a_user_code_error(lending):
    class Broken:
        def prob_d1(self, obs):
            raise ZeroDivisionError("boom")

    for value in (Broken(), lambda obs: 1 / 0):
        with pytest.raises(cf.errors.UserCodeError, match="ZeroDivisionError"):
            cf.decompose(lending, value, 5)


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_checkpoint_and_module_in_memory_resolve_to_the_same_network(lending, tmp_path, suffix):
    net = _net()
    enc = FeatureEncoding("onehot", 7, 2)
    direct = TorchPolicy(net, enc)
    path = tmp_path / f"net{suffix}"
    save_checkpoint(path, net, architecture={"type": "mlp", "input_dim": 9, "hidden": [8],
                                             "activation": "tanh", "output_dim": 1},
                    encoding=enc)
    ck = resolve(path, lending)
    assert (ck.kind, ck.label) == ("checkpoint", path.name) and len(ck.sha256) == 64
    assert ck.meta["architecture"]["hidden"] == [8]
    same = resolve(str(path), lending)  # a path given as text, as a spec or flag holds it
    mem = resolve(net, lending)
    assert mem.kind == "torch" and mem.policy.encoding == enc
    want = _probs(direct, lending)
    np.testing.assert_allclose(_probs(ck.policy, lending), want, atol=1e-6)
    np.testing.assert_array_equal(_probs(same.policy, lending), _probs(ck.policy, lending))
    np.testing.assert_array_equal(_probs(mem.policy, lending), want)
    assert ck.reads_levels is True and ck.features is None


def test_a_features_network_knows_it_does_not_read_the_group():
    system = cf.systems.make("attention-1")  # features rate_seen, attention, seen; no group
    res = resolve(_net(width=len(system.features)), system)
    assert res.kind == "torch" and res.features == tuple(system.features)
    assert res.reads_group is False and res.reads_levels is False
    assert resolve(_net(width=9)).reads_group is None  # no system, nothing declared


def test_factory_resolves_through_the_search_path(lending, factory_dir):
    res = resolve("respol:make", lending, search_path=factory_dir, params={"q": 0.3})
    assert (res.kind, res.label) == ("factory", "respol:make")
    np.testing.assert_array_equal(_probs(res.policy, lending),
                                  _probs(parse_policy("random:0.3", lending), lending))
    with pytest.raises(cf.PolicyError, match=r"--policy 'respol:make': unknown parameter 'z'"):
        resolve("respol:make", lending, search_path=factory_dir, params={"z": 1},
                where="--policy")


def test_sb3_model_in_memory_resolves_to_its_adapter():
    sb3 = pytest.importorskip("stable_baselines3")
    gym = pytest.importorskip("gymnasium")

    class Env(gym.Env):
        observation_space = gym.spaces.Box(-5.0, 5.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(3)

        def reset(self, *, seed=None, options=None):
            return np.zeros(3, np.float32), {}

        def step(self, a):
            return np.zeros(3, np.float32), 0.0, True, False, {}

    model = sb3.PPO("MlpPolicy", Env(), seed=0, n_steps=8, batch_size=8,
                    policy_kwargs={"net_arch": [8]})
    res = resolve(model)
    assert res.kind == "sb3" and res.policy.n_actions == 3
    obs = cf.Observation(group=np.array([0, 1]), features=np.array([[0.1, 0.2, 0.3],
                                                                     [1.0, -1.0, 0.0]]))
    from causalfair.policies.sb3 import SB3Policy

    direct = SB3Policy(model).action_probs(obs)
    np.testing.assert_allclose(res.policy.action_probs(obs), direct, atol=1e-6)


def test_messages_name_what_the_flag_holds(lending):
    with pytest.raises(cf.PolicyError, match=r"^--policy: unknown policy 'nosuch'"):
        resolve("nosuch", lending, where="--policy")
    with pytest.raises(cf.PolicyError, match=r"^--policy: cannot use int as a policy"):
        resolve(42, lending, where="--policy")


def test_the_lending_settings_are_defined_once():
    import causalfair.audit.spec as spec
    import causalfair.commands._system as flags
    import causalfair.commands.train as train_cmd

    assert spec.SETTINGS is SETTINGS and train_cmd.SETTINGS is SETTINGS
    assert not hasattr(flags, "LEGACY_SETTINGS")
    src = "\n".join(Path(m.__file__).read_text() for m in (spec, flags, train_cmd))
    assert '"lending-1", "lending-2"' not in src


# ---------------------------------------------------------------- every --policy door
def _json(capsys):
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


DOORS = {
    "decompose": (["decompose", "--horizon", "5", "--json"], "json"),
    "decompose-mc": (["decompose", "--horizon", "5", "--json", "--engine", "mc", "--n", "400"],
                     "json"),
    "graph": (["graph", "--horizon", "3"], "text"),
    "frontier": (["frontier", "--horizon", "4", "--points", "3", "--no-plot"], "frontier"),
    "simulate-logs": (["simulate-logs", "--horizon", "3", "--n", "50"], "log"),
}


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_command_with_policy_accepts_a_factory(door, factory_dir, monkeypatch, capsys):
    monkeypatch.chdir(factory_dir)
    args, kind = DOORS[door]
    results = []
    for i, pol in enumerate(("respol:make", "random:0.3")):
        extra = []
        if kind == "frontier":
            extra = ["--out", f"front{i}"]
        elif kind == "log":
            extra = ["--out", f"log{i}.csv"]
        code = main([*args, "--policy", pol, "--search-path", str(factory_dir), *extra])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        if kind == "json":
            out = captured.out
            doc = json.loads(out[out.index("{"):])
            results.append({k: doc[k] for k in ("C", "DPE", "IPE", "SPE", "utility")})
        elif kind == "frontier":
            placed = json.loads((factory_dir / f"front{i}" / "frontier.json").read_text())["placed"]
            results.append([(r["utility"], r["C"]) for r in placed])
        elif kind == "log":
            results.append((factory_dir / f"log{i}.csv").read_text())
        else:
            results.append(captured.out.split("\n", 1)[1])  # the first line names the policy
    assert results[0] == results[1]


def test_decompose_logs_audits_a_factory_policy(factory_dir, monkeypatch, capsys):
    monkeypatch.chdir(factory_dir)
    assert main(["simulate-logs", "--horizon", "3", "--n", "300", "--policy", "random:0.5",
                 "--out", "logs.csv"]) == 0
    capsys.readouterr()
    docs = []
    for pol in ("respol:make", "random:0.3"):
        code = main(["decompose", "--logs", "logs.csv", "--audit-policy", "--policy", pol,
                     "--search-path", str(factory_dir), "--boot", "0", "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        doc = json.loads(captured.out[captured.out.index("{"):])
        docs.append({k: doc.get(k) for k in ("C", "DPE", "IPE", "SPE")})
    assert docs[0] == docs[1]


def test_a_builtin_parsed_for_one_model_is_named_for_it_on_another():
    """cf.parse_policy("threshold:0.5", lending-1) holds lending-1's score table; on lending-2
    it was evaluated as given but labelled as lending-2's own threshold:0.5 (C 0.398 beside
    the built-in's 0.442 under one name). Now named for the model it was parsed for; the
    same table (the System and its tabular model) keeps its name."""
    m1, m2 = (cf.lending_setting(s).tabular for s in ("lending-1", "lending-2"))
    p = parse_policy("threshold:0.5", m1)
    theirs, own = cf.decompose(m2, p, 5), cf.decompose(m2, "threshold:0.5", 5)
    assert theirs.C != pytest.approx(own.C)
    assert theirs.policy_name == "threshold:0.5 (parsed for lending-1)"
    assert own.policy_name == "threshold:0.5" and p.parsed_for == "lending-1"
    assert resolve(p, cf.systems.make("lending-2")).label == "threshold:0.5 (parsed for lending-1)"
    assert resolve(p, cf.systems.make("lending-1")).label == "threshold:0.5"  # the same table
    assert cf.decompose(m1, parse_policy("threshold:0.5", cf.systems.make("lending-1")),
                        5).policy_name == "threshold:0.5"
    again = resolve(resolve(p, m2).policy, m2).label  # resolved twice: named once
    assert again == "threshold:0.5 (parsed for lending-1)"


def test_a_builtin_without_a_model_is_refused_naming_the_argument():
    """resolve("action:2", 6) and parse_policy(spec, None) were AttributeErrors ('int' object
    has no attribute 'n_actions'); now a PolicyError naming system / model."""
    for bad in (6, None, "lending-1"):
        with pytest.raises(cf.errors.PolicyError, match="^model: a built-in policy needs"):
            parse_policy("threshold:0.5", bad)
        with pytest.raises(cf.errors.PolicyError, match="^model: a built-in policy needs"):
            parse_policy("never", bad)
    for bad in (6, "lending-1"):
        with pytest.raises(cf.errors.PolicyError, match="^system: a built-in policy needs"):
            resolve("action:2", bad)
    assert resolve("never", cf.systems.make("lending-1")).label == "never"


def test_a_policy_function_given_as_a_factory_is_named_as_such(tmp_path, monkeypatch, capsys):
    """h8sys F7: `--policy mod:f` with f(obs) the policy itself (docs' `def triage(obs)`)
    said `--policy 'mod:f' raised TypeError: f() missing 1 required positional argument:
    'obs'`, as if the policy were broken; a factory's parameter without a default that the
    spec's params leave out was the same TypeError. Both are one line naming the fix, at
    every door (resolve)."""
    (tmp_path / "pols.py").write_text(
        "def score(obs):\n    return obs.level * 0.0 + 0.5\n\n"
        "def make(path, low=0.4):\n    raise RuntimeError('not reached')\n")
    monkeypatch.chdir(tmp_path)
    model = cf.lending_setting("lending-1").tabular
    with pytest.raises(cf.PolicyError) as exc:
        resolve("pols:score", model, search_path=tmp_path)
    assert "pols:score': is called as a factory, with no arguments" in str(exc.value)
    assert "def make(): return score" in str(exc.value)
    with pytest.raises(cf.PolicyError) as exc:
        resolve("pols:make", model, search_path=tmp_path)
    assert "its factory needs 'path' (no default)" in str(exc.value), exc.value
    assert "'low'" not in str(exc.value)
    code = main(["decompose", "--setting", "lending-1", "--policy", "pols:score",
                 "--horizon", "2"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "TypeError" not in err, err

"""A new user's own simulator, policy and Gymnasium env through the command line and the
Python API: the mistakes a first day brings (inconsistent class attributes, options that
do not apply, groups spelled the Python way on the command line) are one-line input
errors, never a traceback or a silent audit of something else."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import InputError

HIRING = textwrap.dedent('''
    import numpy as np
    import causalfair as cf


    class Hiring:
        n_groups = 3
        group_names = ("A", "B", "C")
        n_actions = 2
        action_labels = ("reject", "hire")
        feature_names = ("skill", "years")
        horizon = 3

        def reset(self, n, group, rng):
            g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
            return {"skill": rng.normal(-0.3 * g, 1.0), "years": np.zeros(n), "g": g, "t": 0}

        def observe(self, s):
            return cf.Observation(group=s["g"], features=np.stack([s["skill"], s["years"]], 1),
                                  t=s["t"])

        def draw_noise(self, n, rng):
            return rng.normal(size=n)

        def step(self, s, d, noise):
            d = np.asarray(d)
            gain = np.where(d == 1, 0.3, -0.05) + 0.1 * noise
            return cf.StepResult(state={"skill": s["skill"] + gain, "years": s["years"] + (d == 1),
                                        "g": s["g"], "t": s["t"] + 1},
                                 reward=np.where(d == 1, s["skill"], 0.0), gain=gain, info={})


    def make(**attrs):
        sim = Hiring()
        for k, v in attrs.items():
            setattr(sim, k, tuple(v) if isinstance(v, list) else v)
        return sim


    def two_groups():
        return cf.System(id="two", groups=("A", "B"),
                         decisions=cf.DecisionSet(labels=("reject", "hire"), baseline=0),
                         features=("skill", "years"), simulator=Hiring, horizon=3)
''')


@pytest.fixture
def hiring(tmp_path, monkeypatch):
    (tmp_path / "hiring.py").write_text(HIRING)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _decompose(capsys, *args):
    code = main(["decompose", "--n", "200", "--policy", "uniform", *args])
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("params, says", [
    # labels for 2 actions, n_actions = 3: audited as 2 actions before, silently
    (['n_actions=3'], "n_actions = 3, but the system has 2 (reject, hire)"),
    # 3 labels, n_actions = 2: the engine drew action 2, which the simulator never knew
    (['action_labels=["reject", "hire", "fast"]'], "n_actions = 2, but the system has 3"),
    # 2 group names, n_groups = 3: a ValueError traceback from the engine before
    (['group_names=["A", "B"]'], "n_groups = 3, but the system has 2 (A, B)"),
])
def test_simulator_attributes_that_disagree_are_refused(hiring, capsys, params, says):
    args = [a for p in params for a in ("--param", p)]
    code, err = _decompose(capsys, "--system", "hiring:make", *args)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert says in err and "give one" in err, err


def test_a_system_whose_simulator_has_other_groups_is_refused(hiring, capsys):
    code, err = _decompose(capsys, "--system", "hiring:two_groups")
    assert code == 2, err
    assert "n_groups = 3, but the system has 2 (A, B)" in err and "Traceback" not in err, err


def test_consistent_attributes_still_audit(hiring, capsys):
    assert main(["decompose", "--system", "hiring:make", "--policy", "uniform", "--n", "200",
                 "--json"]) == 0
    out = capsys.readouterr().out
    assert '"C"' in out


@pytest.mark.parametrize("flags", [["--boot", "5"], ["--dowhy"],
                                   ["--fit", "ordinal", "--on-positivity", "bounds"]])
def test_logs_only_options_without_logs_are_refused(hiring, capsys, flags):
    """They were ignored without a word. (`--reference B` on a system, once refused here
    too, is the reference of the table of every pair: tests/test_leftovers5.py.)"""
    code, err = _decompose(capsys, "--system", "hiring:make", *flags)
    assert code == 2, err
    assert "only with --logs" in err and flags[0] in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_gym_groups_spelled_as_python_get_the_command_line_spelling():
    """`--param "groups=['A','B']"` (what the error used to suggest) is not JSON, so it
    arrived as a string and got the same error back."""
    with pytest.raises(InputError) as info:
        cf.systems.from_gym(lambda: None, groups="['A','B']")
    msg = str(info.value)
    assert "\"['A','B']\"" in msg and "--param 'groups=[\"White\",\"Black\"]'" in msg, msg


def test_a_misspelt_built_in_policy_is_named(hiring, capsys):
    """`--policy thresold:0.5` was read as a factory: "cannot import module 'thresold' ...
    put thresold.py next to the spec"."""
    code = main(["decompose", "--system", "hiring:make", "--n", "200", "--policy", "randon:0.5"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "did you mean the built-in 'random:0.5'" in err and "thresold.py" not in err, err


def test_a_module_missing_a_dependency_names_the_dependency(hiring, capsys):
    """The module is there; what it imports is not: the fix is to install that, not to
    "put needsdep.py next to the spec"."""
    (hiring / "needsdep.py").write_text("import nonexistent_pkg_xyz\n\ndef make():\n    pass\n")
    code, err = _decompose(capsys, "--system", "needsdep:make")
    assert code == 2, err
    assert "imports 'nonexistent_pkg_xyz', which is not installed" in err, err
    assert "put needsdep.py" not in err, err


def test_a_feature_checkpoint_on_a_system_of_levels_says_so(tmp_path, capsys):
    pytest.importorskip("torch")
    net = cf.policies.checkpoint.mlp(2, (4,), 2)
    arch = {"type": "mlp", "input_dim": 2, "hidden": [4], "output_dim": 2, "activation": "tanh"}
    path = tmp_path / "hire.npz"
    cf.save_checkpoint(path, net, architecture=arch,
                       encoding=cf.FeatureEncoding("features", names=("skill", "years")))
    code = main(["decompose", "--system", "lending-1", "--checkpoint", str(path), "--horizon", "2"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "reads a feature vector [skill, years]" in err and "no features" in err, err


def test_set_with_a_field_that_does_not_exist_names_the_field(hiring, capsys):
    """`--set individuals=128` (the train flag is --individuals) was a TypeError of
    TrainConfig.__init__, not naming the field it meant."""
    code = main(["train", "--system", "hiring:make", "--set", "individuals=128",
                 "--out", str(hiring / "run")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--set individuals: not a field of TrainConfig; did you mean 'n_individuals'" in err, err
    assert not (hiring / "run").exists()


def _truncating_env():
    """One individual per env that ends its episodes by truncation after 3 steps (the env
    of tests/test_rough_edges.py, defined here in memory)."""
    pytest.importorskip("gymnasium")
    from tests.test_rough_edges import GYM_ENV

    ns: dict = {"__name__": "trunc_env_in_memory"}
    exec(GYM_ENV, ns)  # noqa: S102 - the test's own source
    return ns["Truncating"]


def test_an_audit_past_the_env_s_truncation_warns_with_the_horizon_to_give():
    """The door does not read `truncated`: without horizon= an env that ends its episodes
    after 3 steps was audited over 20, silently."""
    from causalfair.engines.montecarlo import decompose_mc

    env = _truncating_env()
    long = cf.systems.from_gym(env, groups=["a", "b"])
    with pytest.warns(UserWarning, match=r"end \(truncated\) after 3 steps, but the audit runs "
                      r"T = 20 .*--horizon 3"):
        decompose_mc(long, "uniform", n=8, seed=0, benefit_n=2)
    right = cf.systems.from_gym(env, groups=["a", "b"], horizon=3)
    assert decompose_mc(right, "uniform", n=8, seed=0, benefit_n=2).horizon == 3  # no warning


def test_policy_and_checkpoint_together_are_refused(hiring, capsys):
    """`--policy uniform --checkpoint p.npz` audited the checkpoint, saying nothing of the
    --policy it ignored."""
    pytest.importorskip("torch")
    net = cf.policies.checkpoint.mlp(2, (4,), 2)
    arch = {"type": "mlp", "input_dim": 2, "hidden": [4], "output_dim": 2, "activation": "tanh"}
    cf.save_checkpoint(hiring / "p.npz", net, architecture=arch,
                       encoding=cf.FeatureEncoding("features", names=("skill", "years")))
    code, err = _decompose(capsys, "--system", "hiring:make", "--checkpoint", "p.npz")
    assert code == 2, err
    assert "--policy uniform and --checkpoint p.npz: give one policy" in err, err
    assert main(["decompose", "--system", "hiring:make", "--n", "200", "--checkpoint",
                 "p.npz"]) == 0, capsys.readouterr().err


def test_observations_wider_than_the_feature_names_are_refused(hiring, capsys):
    """Two feature columns, one name: an IndexError traceback from the benefit table's
    labels after the whole decomposition had run."""
    code, err = _decompose(capsys, "--system", "hiring:make", "--param", 'feature_names=["skill"]')
    assert code == 2, err
    assert "observe: gave 2 feature columns, but the system declares 1 features (skill)" in err, err
    assert "Traceback" not in err


class _Half:
    """Hire with probability 1/2."""

    def action_probs(self, obs):
        return np.full((len(obs.group), 2), 0.5)


def _racy_hiring(tmp_path, monkeypatch):
    """The hiring simulator writing each step's gain into a buffer it keeps: two threads
    stepping two batches overwrite each other's gains."""
    (tmp_path / "hiring.py").write_text(HIRING)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    hiring = importlib.import_module("hiring")

    class Racy(hiring.Hiring):
        def step(self, s, d, noise):
            d = np.asarray(d)
            if getattr(self, "_buf", None) is None or len(self._buf) != len(d):
                self._buf = np.empty(len(d))
            np.copyto(self._buf, np.where(d == 1, 0.3, -0.05))
            self._buf += 0.1 * noise
            gain = self._buf.copy()
            return cf.StepResult(state={**s, "skill": s["skill"] + gain, "t": s["t"] + 1},
                                 reward=np.zeros(len(d)), gain=gain, info={})

    return Racy


def test_a_simulator_that_keeps_state_between_calls_is_refused(tmp_path, monkeypatch):
    """On two threads (the default on a multi-core machine) such a simulator gave another
    C than on one: 0.676 against 0.826 for seed 2 of the first day's hiring simulator."""
    from causalfair.engines.montecarlo import decompose_mc

    Racy = _racy_hiring(tmp_path, monkeypatch)
    with pytest.raises(InputError, match=r"simulator Racy: its methods change its own "
                       r"attributes between calls \(_buf\).*thread_safe = False"):
        decompose_mc(Racy(), _Half(), n=64, seed=0, benefit_n=2)
    Racy.thread_safe = False  # declared: it runs on one thread, and is accepted
    assert decompose_mc(Racy(), _Half(), n=64, seed=0, benefit_n=2).n == 64


def test_a_bare_simulator_is_audited_over_the_horizon_it_declares(hiring, monkeypatch):
    """`decompose_mc(sim, ...)` ran 20 epochs for a simulator declaring horizon = 3, while
    the System made from the same simulator ran 3."""
    from causalfair.engines.montecarlo import decompose_mc

    monkeypatch.syspath_prepend(str(hiring))
    import hiring as mod

    bare = decompose_mc(mod.Hiring(), _Half(), n=200, seed=0, benefit_n=2)
    system = decompose_mc(cf.systems.make("hiring:make", search_path=str(hiring)), _Half(),
                          n=200, seed=0, benefit_n=2)
    assert bare.horizon == system.horizon == 3
    assert bare.C == system.C


class _BufferedPolicy:
    """Writes its probabilities into a buffer it keeps (and returns it)."""

    def action_probs(self, obs):
        n = len(obs.group)
        if getattr(self, "_buf", None) is None or len(self._buf) != n:
            self._buf = np.empty((n, 2))
        self._buf[:, 1] = 1.0 / (1.0 + np.exp(-obs.features[:, 0]))
        self._buf[:, 0] = 1.0 - self._buf[:, 1]
        return self._buf


def test_a_policy_that_keeps_state_between_calls_is_refused(hiring):
    """Two threads evaluating two batches shared the buffer: rows of another batch, or
    rows that no longer sum to 1 ("apply a softmax to logits", a wrong fix)."""
    from causalfair.engines.montecarlo import decompose_mc

    system = cf.systems.make("hiring:make", search_path=str(hiring))
    with pytest.raises(InputError, match=r"policy '_BufferedPolicy': its methods change its "
                       r"own attributes between calls \(_buf\)"):
        decompose_mc(system, _BufferedPolicy(), n=64, seed=0, benefit_n=2)
    safe = _BufferedPolicy()
    safe.thread_safe = False
    assert decompose_mc(system, safe, n=64, seed=0, benefit_n=2).n == 64


def test_a_run_folder_given_as_the_checkpoint_is_named_a_folder(hiring, capsys):
    """`--checkpoint runs/h` (the train --out folder) said "no such file"; it is there."""
    (hiring / "runs" / "h").mkdir(parents=True)
    code, err = main(["decompose", "--system", "hiring:make", "--checkpoint", "runs/h"]), \
        capsys.readouterr().err
    assert code == 2, err
    assert "checkpoint runs/h: is a folder; give the checkpoint file in it" in err, err


def test_the_system_options_are_refused_with_logs(tmp_path, capsys):
    # with --logs the model is fitted to the log: --setting or --levels were silently ignored
    from causalfair.logs.simulate import simulate_logs

    log = tmp_path / "log.csv"
    simulate_logs("lending-1", "random:0.5", n_individuals=2000, horizon=3, seed=0).to_csv(
        log, index=False)
    assert main(["decompose", "--logs", str(log), "--boot", "0"]) == 0
    capsys.readouterr()
    assert main(["decompose", "--logs", str(log), "--setting", "lending-2", "--levels",
                 "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--setting, --levels: not with --logs FILE" in err, err

"""The Gymnasium door as an RL researcher uses it with an admissions env of their own
(docs/own-system.md, "Audit your Gymnasium env"): four groups of unequal size (one of 3%)
reported in ``info["group"]``, reject / waitlist / admit, a qualification level in
``info``, and a policy trained with plain torch."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import SystemError_, UserCodeError

gym = pytest.importorskip("gymnasium")

GROUPS = ["G0", "G1", "G2", "G3"]


class Admissions(gym.Env):
    """One applicant over a few admission rounds; the group is drawn from the population
    (shares ``sizes``) unless ``options["group"]`` pins it; ``info["group"]`` is its name."""

    observation_space = gym.spaces.Box(-10, 10, shape=(2,), dtype=np.float64)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, sizes=(0.5, 0.3, 0.17, 0.03), meanings=None):
        self.sizes = tuple(sizes)
        self.meanings = meanings

    def get_action_meanings(self):  # the Atari (ALE) convention; only when given
        if self.meanings is None:
            raise AttributeError("get_action_meanings")
        return list(self.meanings)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        g = (options or {}).get("group")
        self.g = int(g) if g is not None else int(self.np_random.choice(4, p=self.sizes))
        self.q = float(self.np_random.normal(0.3 - 0.2 * self.g))
        return np.array([self.q, 0.0]), {"group": GROUPS[self.g], "qualification": self.q}

    def step(self, action):
        z = float(self.np_random.normal())
        self.q += (-0.05, 0.05, 0.3)[int(action)] + 0.05 * z
        reward = (0.0, 0.1, 1.0 if self.q > 0 else -1.0)[int(action)]
        return (np.array([self.q, 1.0]), reward, False, False,
                {"group": GROUPS[self.g], "qualification": self.q})


def test_rare_group_by_info_is_not_refused_by_chance():
    """group = "info:group": a 3% group (a 6% one at the default n) needs about 33 resets
    per individual; each individual used to be refused after 200 (0.97**200 = 0.2%), so an
    audit of 1,500 of them was refused by bad luck. Now a group is drawn until it comes, up
    to 10,000 resets an individual (names the env never reports: 200)."""
    system = cf.systems.from_gym(Admissions, groups=GROUPS, group="info:group",
                                 gain="info-change:qualification", horizon=2, check=False)
    sim = system.simulator
    state = sim.reset(1500, 3, np.random.default_rng(0))
    assert state.group.tolist() == [3] * 1500
    assert all(env.unwrapped.g == 3 for env in state.envs)
    # the individuals are the same whatever the cap: the first 200 draws are unchanged
    assert sim.reset(50, 3, np.random.default_rng(1)).obs.tolist() == \
        sim.reset(50, 3, np.random.default_rng(1)).obs.tolist()
    # a group the env (almost) never reports is still refused with one line
    with pytest.raises(SystemError_, match=r"group 'G3' not reached in 10000 resets"):
        cf.systems.from_gym(lambda: Admissions(sizes=(0.5, 0.3, 0.19999, 0.00001)),
                            groups=GROUPS, group="info:group", horizon=2, check=False)
    # names the env never reports are refused after 200 resets, naming what it reports
    with pytest.raises(SystemError_, match=r"was 'G.', .* in 200 resets, never a group"):
        cf.systems.from_gym(Admissions, groups=["A", "B"], group="info:group", horizon=2,
                            check=False)


def test_group_weights_weight_the_utility():
    """The env's population is 50/30/17/3%: ``group_weights`` gives the utility those
    shares (it was uniform, with no way to say otherwise)."""
    w = [0.5, 0.3, 0.17, 0.03]
    kw = dict(groups=GROUPS, gain="info-change:qualification", horizon=3, check=False)
    plain = cf.systems.from_gym(Admissions, **kw)
    weighted = cf.systems.from_gym(Admissions, group_weights=w, **kw)
    assert weighted.group_weights.tolist() == w
    assert plain.group_weights.tolist() == [0.25] * 4
    uniform = cf.parse_policy("uniform", plain)
    ra = decompose_mc(plain, uniform, n=200, seed=0)
    rb = decompose_mc(weighted, uniform, n=200, seed=0)
    a, b = ra.estimates(), rb.estimates()
    assert a["C"] == b["C"] and a["utility[G3]"] == b["utility[G3]"]  # only the weights move
    assert ra.Lambda == rb.Lambda
    per = [b[f"utility[{g}]"] for g in GROUPS]
    assert b["utility"] == pytest.approx(float(np.dot(w, per)), abs=1e-12)
    assert b["utility"] != pytest.approx(a["utility"], abs=1e-6)
    # the registered system `gym` (spec and command line) takes them too
    s = cf.systems.make("gym", env=f"{__name__}:Admissions", groups=GROUPS,
                        gain="info-change:qualification", group_weights=w)
    assert s.group_weights.tolist() == w and s.params["group_weights"] == w
    with pytest.raises(SystemError_, match=r"from_gym group_weights: bad value .*4 shares"):
        cf.systems.from_gym(Admissions, group_weights=[0.5, 0.5], **kw)


def test_spec_group_weights_are_the_python_ones(tmp_path, monkeypatch):
    """``[system] group_weights`` (it had no spec key: a spec user passed the system to
    cf.audit, which --reproduce could not re-run) gives the Python utility bit for bit;
    a bad value is one line naming the key."""
    from causalfair.audit import load_spec
    from causalfair.errors import SpecError

    w = [0.5, 0.3, 0.17, 0.03]
    monkeypatch.chdir(tmp_path)
    spec = ('name = "gw"\nhorizon = 3\n[system]\ngym = "{mod}:Admissions"\n'
            'groups = ["G0", "G1", "G2", "G3"]\ngain = "info-change:qualification"\n'
            'group_weights = {w}\n[policy]\nbuiltin = "uniform"\n[engine]\nkind = "mc"\n'
            'n = 200\nseed = 0\n')
    (tmp_path / "gw.toml").write_text(spec.format(mod=__name__, w=w))
    res = cf.audit(tmp_path / "gw.toml")
    system = cf.systems.from_gym(Admissions, groups=GROUPS, gain="info-change:qualification",
                                 horizon=3, group_weights=w, check=False)
    direct = decompose_mc(system, cf.parse_policy("uniform", system), n=200, seed=0)
    assert res.decomposition.estimates()["utility"] == direct.estimates()["utility"]
    assert res.to_dict()["system"]["group_weights"] == w
    (tmp_path / "bad.toml").write_text(spec.format(mod=__name__, w='"half"'))
    with pytest.raises(SpecError, match=r"\[system\] group_weights: bad value 'half'"):
        load_spec(tmp_path / "bad.toml")


def test_action_names_from_the_env():
    """An env that names its actions (``get_action_meanings()``, the ALE convention) has
    them in reports without ``actions=``; ``actions=`` still wins; names that do not fit
    the action space are not used."""
    kw = dict(groups=GROUPS, gain="info-change:qualification", horizon=2, check=False)
    named = cf.systems.from_gym(lambda: Admissions(meanings=("reject", "waitlist", "admit")), **kw)
    assert named.decisions.labels == ("reject", "waitlist", "admit")
    given = cf.systems.from_gym(lambda: Admissions(meanings=("reject", "waitlist", "admit")),
                                actions=["no", "maybe", "yes"], **kw)
    assert given.decisions.labels == ("no", "maybe", "yes")
    for bad in (("a", "b"), ("a", "a", "b"), ("a", "", "b")):
        other = cf.systems.from_gym(lambda bad=bad: Admissions(meanings=bad), **kw)
        assert other.decisions.labels == ("d0", "d1", "d2")
    assert cf.systems.from_gym(Admissions, **kw).decisions.labels == ("d0", "d1", "d2")


def test_more_groups_than_the_env_has_names_them():
    """groups lists 5 names for a 4-group env: reset(options={"group": 4}) fails in the
    env; the line names the group asked for and how many groups were listed."""
    with pytest.raises(UserCodeError, match=r"reset\(options=\{'group': 4\}\) \(group 'G4', "
                       r"5 groups listed\) raised IndexError.*list as many groups as the env "
                       r"has"):
        cf.systems.from_gym(Admissions, groups=GROUPS + ["G4"], horizon=2,
                            gain="info-change:qualification")


def test_native_vector_env_names_the_simulator_protocol():
    """A natively vectorised env (a VectorEnv subclass without env_fns) has no one-env
    version to return: the refusal names the batch simulator protocol instead."""
    from gymnasium.vector.utils import batch_space

    class Batch(gym.vector.VectorEnv):
        def __init__(self):
            self.num_envs = 8
            self.single_observation_space = gym.spaces.Box(-1, 1, (2,))
            self.single_action_space = gym.spaces.Discrete(3)
            self.observation_space = batch_space(self.single_observation_space, 8)
            self.action_space = batch_space(self.single_action_space, 8)

    with pytest.raises(SystemError_, match=r"natively vectorised.*docs/simulators\.md"):
        cf.systems.from_gym(Batch, groups=GROUPS)


def test_running_program_is_not_a_factory_input(tmp_path, monkeypatch):
    """A factory's module that formats a stack while imported (torch.cuda does, through
    linecache) opens ``__main__``'s file: the ``causalfair`` launcher of the venv. It was
    pinned in audit.json ``inputs`` as ``policy.factory.read``, so a reproduce on another
    machine (another venv path) failed with 'cannot be read'."""
    from causalfair import _usercode

    launcher = tmp_path / "bin" / "causalfair"
    launcher.parent.mkdir()
    launcher.write_text("import sys\n")
    data = tmp_path / "weights.txt"
    data.write_text("1\n")
    mod = tmp_path / "stacky.py"
    mod.write_text(
        "import linecache\n"
        f"linecache.updatecache({str(launcher)!r})\n"
        f"with open({str(data)!r}) as f:\n    WEIGHTS = f.read()\n"
        "def make():\n    return WEIGHTS\n")
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__file__=str(launcher)))
    monkeypatch.delitem(sys.modules, "stacky", raising=False)
    fn = _usercode.load_callable("stacky:make", search_path=tmp_path, what="factory")
    assert fn() == "1\n"
    reads = _usercode.module_reads(mod)
    assert data.resolve() in reads
    assert launcher.resolve() not in reads


def test_groups_in_another_order_than_the_env_names_them():
    """groups = ["G3", "G2", "G1", "G0"] (the user wants G3 as s+) while the env's index 0
    is "G0": the refusal says which name the env gave for which index and that groups
    must follow the env's order, not only that the env 'must start the group asked for'."""
    with pytest.raises(SystemError_, match=r"reported info\['group'\] = 'G0', which is "
                       r"groups\[3\] = 'G0'.*not groups\[0\] = 'G3'.*list groups in the env's "
                       "order"):
        cf.systems.from_gym(Admissions, groups=GROUPS[::-1], horizon=2,
                            gain="info-change:qualification")


def test_module_in_training_mode_with_dropout_is_refused():
    """A plain-torch policy left in training mode (no ``model.eval()`` after the training
    loop) with a Dropout layer drew a new dropout mask at every call: the same seed gave
    another C each run (0.0772 then 0.0836), silently. Refused with one line naming
    ``module.eval()``; in eval mode it audits, the same numbers twice."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Dropout(0.5), torch.nn.Tanh(),
                              torch.nn.Linear(8, 3))
    system = cf.systems.from_gym(Admissions, groups=GROUPS, horizon=2,
                                 gain="info-change:qualification", check=False)
    with pytest.raises(cf.errors.PolicyError, match=r"training mode.*Dropout.*\.eval\(\)"):
        decompose_mc(system, net, n=20, seed=0)
    net.eval()
    a = decompose_mc(system, net, n=50, seed=0).estimates()["C"]
    assert a == decompose_mc(system, net, n=50, seed=0).estimates()["C"]
    # a network without such layers audits in training mode, as before
    plain = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    assert plain.training
    decompose_mc(system, plain, n=20, seed=0)


class TorchNoise(Admissions):
    """Draws its step noise from torch's global generator (``torch.randn``), as an env
    with torch dynamics does: forks would not share random numbers."""

    def step(self, action):
        import torch

        z = float(torch.randn(()))
        self.q += (-0.05, 0.05, 0.3)[int(action)] + 0.05 * z
        return (np.array([self.q, 1.0]), 0.0, False, False,
                {"group": GROUPS[self.g], "qualification": self.q})


def test_env_reading_torch_global_generator_is_named():
    """An env drawing from torch's global generator was refused as one whose copies do not
    continue an individual, blaming __getstate__/__reduce__ (it has neither); the refusal
    now names torch's generator and self.np_random."""
    pytest.importorskip("torch")
    with pytest.raises(SystemError_, match=r"global random generator \(np\.random, random or "
                       r"torch's.*self\.np_random"):
        cf.systems.from_gym(TorchNoise, groups=GROUPS, horizon=2,
                            gain="info-change:qualification")


class OneHotGroup(Admissions):
    """Reports the group as a one-hot vector, as some envs put it in their observation."""

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, "group": np.eye(4)[self.g]}


@pytest.mark.parametrize("mode", ["options", "info:group"])
def test_group_reported_as_a_vector_is_one_line(mode):
    """info["group"] as a one-hot vector raised numpy's bare 'truth value of an array is
    ambiguous' ValueError; now one line naming the key and the fix. An array of one value
    counts as that value."""
    with pytest.raises(SystemError_, match=r"info\['group'\] is .*4 values.*np\.argmax"):
        cf.systems.from_gym(OneHotGroup, groups=GROUPS, group=mode, horizon=2,
                            gain="info-change:qualification")


class TorchGenerator(Admissions):
    """Steps with a ``torch.Generator`` of its own, seeded at reset: from the reset's
    generator (``seeded``), or with one constant for every individual."""

    seeded = True

    def reset(self, *, seed=None, options=None):
        import torch

        obs, info = super().reset(seed=seed, options=options)
        start = int(self.np_random.integers(2**31)) if self.seeded else 0
        self.gen = torch.Generator().manual_seed(start)
        return obs, info

    def step(self, action):
        import torch

        z = float(torch.randn((), generator=self.gen))
        self.q += (-0.05, 0.05, 0.3)[int(action)] + 0.05 * z
        return (np.array([self.q, 1.0]), 0.0, False, False,
                {"group": GROUPS[self.g], "qualification": self.q})


class TorchGeneratorConstant(TorchGenerator):
    seeded = False


def test_env_with_own_torch_generator_in_one_state_is_refused():
    """A torch.Generator of the env's own, seeded with one constant at every reset, gave
    every individual the same step noise: SPE's 95% CI was [-2.4e-18, 2.4e-18], silently.
    It is refused like numpy's and random's own generators; seeded from the reset it
    audits."""
    pytest.importorskip("torch")
    kw = dict(groups=GROUPS, horizon=2, gain="info-change:qualification")
    with pytest.raises(SystemError_, match=r"its own generator self\.gen, in the same state "
                       r"for every individual"):
        cf.systems.from_gym(TorchGeneratorConstant, **kw)
    system = cf.systems.from_gym(TorchGenerator, **kw)
    res = decompose_mc(system, cf.parse_policy("uniform", system), n=100, seed=0)
    assert res.conf_int(0.05).loc["SPE"].diff().iloc[-1] > 1e-3  # a real interval


class Queue(Admissions):
    """A new applicant at every step (an admissions queue): the step's info reports the
    next applicant's group, so an episode follows no one individual."""

    def step(self, action):
        z = float(self.np_random.normal())
        gain = (-0.05, 0.05, 0.3)[int(action)] + 0.05 * z
        self.g = int(self.np_random.choice(4, p=self.sizes))
        self.q = float(self.np_random.normal(0.3 - 0.2 * self.g))
        return (np.array([self.q, 0.0]), 0.0, False, False,
                {"group": GROUPS[self.g], "gain": gain})


@pytest.mark.parametrize("mode", ["options", "info:group"])
def test_queue_env_is_refused_beyond_one_step(mode):
    """An env that brings a new applicant at each step audited over T = 8 steps summed
    the gains of applicants of every group as those of the first one's group (silently
    mixing the groups). Its steps report other groups than the individual's: refused with
    one line naming horizon=1, at which it audits."""
    with pytest.raises(SystemError_, match=r"step \d reported info\['group'\] = 'G.' for an "
                       r"individual of group 'G.'.*horizon=1"):
        cf.systems.from_gym(Queue, groups=GROUPS, group=mode, horizon=8)
    system = cf.systems.from_gym(Queue, groups=GROUPS, group=mode, horizon=1)
    assert system.horizon == 1


ENV_READING_A_FILE = '''
import numpy as np, gymnasium as gym

class E(gym.Env):
    observation_space = gym.spaces.Box(-10, 10, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, scale):
        self.scale = scale

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.x = float(self.np_random.normal()) - self.g
        return np.array([self.x]), {"group": self.g}

    def step(self, a):
        d = self.scale * int(a) + 0.1 * float(self.np_random.normal())
        self.x += d
        return np.array([self.x]), 0.0, False, False, {"gain": d}

def make(path="scale.txt"):
    with open(path) as f:   # the frozen statistics, a data file: read by the factory
        return E(float(f.read()))
'''


def test_spec_whose_env_factory_reads_a_file(tmp_path, monkeypatch):
    """``[system] gym = "module:make"`` whose factory reads a file (frozen observation
    statistics, a data table) ended ``causalfair audit`` with a ValueError traceback
    (``list.remove(x): x not in list``): the system factory's recording and the env
    factory's, nested, held equal sets and the inner one removed the outer one. The file
    is now pinned in audit.json inputs as ``system.gym.read``."""
    (tmp_path / "genv_reads.py").write_text(ENV_READING_A_FILE)
    (tmp_path / "scale.txt").write_text("0.3\n")
    (tmp_path / "n.toml").write_text(
        'name = "nest"\nhorizon = 2\n[system]\ngym = "genv_reads:make"\ngroups = ["A", "B"]\n'
        '[policy]\nbuiltin = "uniform"\n[engine]\nkind = "mc"\nn = 50\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "genv_reads", raising=False)
    result = cf.audit(str(tmp_path / "n.toml"))
    reads = [e for e in result.inputs if e["role"] == "system.gym.read"]
    assert [e["path"] for e in reads] == ["scale.txt"], result.inputs


def test_missing_gain_key_names_the_keys_the_env_reports():
    """The default gain = "info:gain" on an env that reports a level in
    info["qualification"]: the refusal lists the keys the step's info has and names
    info-change:KEY for a level, so the researcher sees which one to pick."""
    with pytest.raises(SystemError_, match=r"no key 'gain' \(it has 'group', 'qualification'\)"
                       r".*gain = 'info-change:KEY'"):
        cf.systems.from_gym(Admissions, groups=GROUPS, horizon=2)


def test_duplicate_group_names_are_refused_up_front():
    """groups = ["G0", "G0", ...] in Python: the spec refuses it, from_gym went on and failed
    later with a message about the env's reset."""
    with pytest.raises(SystemError_, match=r"from_gym groups: .*distinct.*'G0'"):
        cf.systems.from_gym(Admissions, groups=["G0", "G0", "G2", "G3"], horizon=2,
                            gain="info-change:qualification")

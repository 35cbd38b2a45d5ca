"""A buggy simulator and a buggy policy, as their author wrote them, through every door
(the command line's decompose, audit and gate, ``cf.decompose``; a Gymnasium env through
``from_gym``): each bug the contract can see is refused with one line naming the method,
the field and the fix, never a silent number or a traceback; a factory's prints never
reach the JSON of ``--json``; a slow step stops at ``--timeout``. One module holds the
simulator and the policy; ``MODE`` picks the bug."""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import SimulatorContractError
from tests.conftest import describe

SRC = textwrap.dedent('''
    import time
    import numpy as np
    import causalfair as cf

    MODE = {mode!r}


    class State:
        def __init__(self, x, g, t):
            self.x, self.g, self.t = x, g, t


    class Sim:
        n_groups = 2
        group_names = ("A", "B")
        feature_names = ("skill", "age")
        horizon = 8

        def reset(self, n, group, rng):
            g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
            x = np.column_stack([rng.random(n) + 0.3 * (g == 0), rng.random(n)])
            return State(x, g, 0)

        def observe(self, s):
            f = s.x.copy()
            grp = s.g
            if MODE == "group_flip" and s.t >= 1:
                grp = 1 - s.g
            if MODE == "group_col":
                grp = s.g[:, None]
            if MODE == "features_obj":
                f = f.astype(object)
            if MODE == "features_list":
                f = f.tolist()
            return cf.Observation(group=grp, features=f, t=s.t)

        def draw_noise(self, n, rng):
            if MODE == "fixed_noise":   # a seed of its own: every batch the same noise
                return np.random.default_rng(0).random(n)
            if MODE == "no_noise":      # a deterministic simulator: nothing random
                return np.zeros(n)
            return rng.random(n)

        def step(self, s, d, noise):
            if MODE == "slow":
                time.sleep(1.5)
            if MODE == "mutate_noise":
                noise *= 0.5            # rescales the caller's noise
            if MODE == "half_noise":
                noise = noise * 0.5     # the same dynamics, written correctly
            if MODE == "mutate_decisions":
                d[noise > 0.9] = 0      # "capacity": the caller's decisions change
            if MODE == "late_global" and s.t >= 4:
                noise = np.random.random(len(noise))   # the global generator, late
            gain = 0.1 * np.asarray(d) + 0.05 * (noise - 0.5)
            x = s.x.copy()
            x[:, 0] += gain
            return cf.StepResult(state=State(x, s.g, s.t + 1), gain=gain,
                                 reward=np.asarray(d) * 1.0)


    def make():
        if MODE == "factory_prints":
            print("loading population ... done")
        return Sim()


    class Pol:
        name = "skill"

        def prob_d1(self, obs):
            p = np.clip(obs.features[:, 0], 0, 1)
            if MODE == "torch_grad":
                import torch
                w = torch.tensor(1.0, requires_grad=True)
                return torch.as_tensor(p) * w
            return p


    def policy():
        if MODE == "factory_prints":
            print("policy loaded")
        return Pol()
''')

SPEC = '''name = "{name}"
[system]
factory = "{module}:make"
[policy]
factory = "{module}:policy"
[engine]
kind = "mc"
n = 200
[thresholds]
abs_C = 5.0
'''


@pytest.fixture
def buggy(tmp_path, monkeypatch):
    """``buggy(mode)``: the module ``bug_<mode>`` written to tmp_path (the working
    directory), its system and a spec naming it."""
    monkeypatch.chdir(tmp_path)
    made = []

    def write(mode: str):
        module = f"bug_{mode or 'ok'}"
        (tmp_path / f"{module}.py").write_text(SRC.format(mode=mode))
        (tmp_path / f"{module}.toml").write_text(SPEC.format(name=module, module=module))
        made.append(module)
        return module

    yield write
    for m in made:
        sys.modules.pop(m, None)


def _system(module: str):
    return cf.systems.make(f"{module}:make", search_path=".")


def _load(ref: str):
    from causalfair._usercode import load_callable

    return load_callable(ref, search_path=".")


def _policy(module: str):
    return _load(f"{module}:policy")()


def _refused_everywhere(module: str, cli_here, tmp_path, needles: list[str]) -> None:
    """cf.decompose and the command line's decompose, audit and gate refuse ``module``'s
    system with one line holding every needle (exit 2), never a verdict."""
    with pytest.raises(SimulatorContractError) as info:
        cf.decompose(_system(module), _policy(module), n=200)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
    for args in (["decompose", "--system", f"{module}:make", "--policy", f"{module}:policy",
                  "--n", "200", "--json"],
                 ["audit", f"{module}.toml", "--no-report"],
                 ["gate", f"{module}.toml", "--json", "gate.json"]):
        proc = cli_here(*args, cwd=tmp_path)
        assert proc.returncode == 2, describe(proc, 2)
        assert "Traceback" not in proc.stderr, describe(proc)
        for needle in needles:
            assert needle in proc.stderr, (needle, describe(proc))
        if args[0] == "gate":  # its table: the spec's row is an ERROR, never a verdict
            assert "ERROR" in proc.stdout and "PASS" not in proc.stdout, describe(proc)
        else:  # no number printed
            assert proc.stdout.strip() == "", describe(proc)
    doc = json.loads((tmp_path / "gate.json").read_text())
    assert doc["exit_code"] == 2, doc


@pytest.mark.parametrize("mode, needles", [
    ("mutate_noise", ["Sim.step", "noise", "in place"]),
    ("mutate_decisions", ["Sim.step", "decisions", "in place"]),
    ("group_flip", ["Observation.group", "group 0 show group 1", "reset"]),
    ("fixed_noise", ["Sim.draw_noise", "two different seeds", "rng argument"]),
    ("features_obj", ["Observation.features", "object"]),
    ("features_list", ["Observation.features", "list", "numpy array"]),
])
def test_a_bug_the_contract_sees_is_refused_at_every_door(buggy, cli_here, tmp_path, mode,
                                                          needles):
    _refused_everywhere(buggy(mode), cli_here, tmp_path, needles)


def test_the_broken_step_gave_another_number_before_it_was_refused(buggy, monkeypatch):
    """Why mutating the noise matters: the pi^PS fork steps with the noise pi's step left,
    so the same dynamics written with and without the in-place change give pi the same
    value and pi^PS another (this check of the contract off, as before)."""
    from causalfair.systems import contract

    monkeypatch.setattr(contract, "_check_arguments_kept", lambda *a: None)
    good, bad = buggy("half_noise"), buggy("mutate_noise")
    good_r, bad_r = (cf.decompose(_system(m), _policy(good), n=400) for m in (good, bad))
    np.testing.assert_allclose(good_r.V, bad_r.V, rtol=0, atol=1e-12)
    assert np.all(np.abs(np.asarray(good_r.V_ps) - np.asarray(bad_r.V_ps)) > 0.01), \
        (good_r.V_ps, bad_r.V_ps)


def test_a_deterministic_simulator_without_noise_is_fine(buggy):
    """Noise that is the same under every seed because it is constant (no randomness at
    all) is not the bug of a generator of its own."""
    module = buggy("no_noise")
    res = cf.decompose(_system(module), _policy(module), n=200)
    assert np.isfinite(res.C)


def test_group_of_shape_n_1_names_the_batch_size(buggy):
    module = buggy("group_col")
    with pytest.raises(SimulatorContractError) as info:
        cf.decompose(_system(module), _policy(module), n=200)
    assert "shape (64, 1), expected (64,)" in str(info.value), str(info.value)


def test_the_global_generator_drawn_after_the_sampled_check_is_refused(buggy):
    """The contract check samples three steps; a step that draws from np.random from the
    fifth epoch on is caught by the guard of every call (the global generator moved)."""
    module = buggy("late_global")
    with pytest.raises(SimulatorContractError) as info:
        cf.decompose(_system(module), _policy(module), n=200)
    msg = str(info.value)
    assert "Sim.step" in msg and "np.random" in msg and "rng" in msg, msg


def test_a_torch_tensor_that_requires_grad_is_read_as_its_numbers(buggy):
    """A policy returning a tensor that requires grad gives the numbers of its detached
    values (before: a RuntimeError traceback from numpy)."""
    ok, grad = buggy(""), buggy("torch_grad")
    pytest.importorskip("torch")
    a = cf.decompose(_system(ok), _policy(ok), n=200)
    b = cf.decompose(_system(ok), _policy(grad), n=200)
    assert a.C == b.C and a.Lambda == b.Lambda, (a.C, b.C)


class _ExploringPolicy:
    """Epsilon-greedy exploration left on: a tenth of the decisions sampled from np.random."""

    name = "explore"

    def prob_d1(self, obs):
        p = np.clip(obs.features[:, 0], 0, 1)
        return np.where(np.random.random(len(p)) < 0.1, 1.0, p)


@pytest.mark.parametrize("policy", ["object", "function"])
def test_a_policy_sampling_from_np_random_is_refused(buggy, policy):
    """A policy that samples with np.random gave a number that changed from run to run
    (the seed does not set it); it is refused naming the policy (one thread), or the
    call during which the generator moved (several)."""
    module = buggy("")
    pol = _ExploringPolicy() if policy == "object" else _ExploringPolicy().prob_d1
    with pytest.raises(cf.CausalfairError) as info:
        cf.decompose(_system(module), pol, n=200, jobs=1)
    msg = str(info.value)
    assert "policy" in msg and "np.random" in msg and "probabilities" in msg, msg
    with pytest.raises(cf.CausalfairError) as info:
        cf.decompose(_system(module), pol, n=2000, jobs=2)
    assert "numpy's global generator" in str(info.value), str(info.value)


@pytest.mark.parametrize("command", ["decompose", "audit"])
def test_a_factory_that_prints_leaves_json_clean(buggy, cli_here, tmp_path, command):
    module = buggy("factory_prints")
    args = (["decompose", "--system", f"{module}:make", "--policy", f"{module}:policy",
             "--n", "200", "--json"] if command == "decompose" else
            ["audit", f"{module}.toml", "--no-report", "--json"])
    proc = cli_here(*args, cwd=tmp_path)
    assert proc.returncode == 0, describe(proc, 0)
    doc = json.loads(proc.stdout)  # the prints would make this fail
    assert isinstance(doc, dict)
    assert "loading population ... done" in proc.stderr, describe(proc)
    assert "policy loaded" in proc.stderr, describe(proc)


@pytest.mark.parametrize("command", ["audit", "gate"])
def test_a_slow_step_stops_at_the_timeout(buggy, cli_here, tmp_path, command):
    """A step of 1.5 s under --timeout 1: exit 2 naming the limit, in about the limit (the
    contract check alone would step 12 times, 18 s, were it run outside the limit)."""
    import time

    module = buggy("slow")
    args = ([f"{module}.toml", "--no-report"] if command == "audit" else
            [f"{module}.toml", "--json", "gate.json"])
    start = time.monotonic()
    proc = cli_here(command, *args, "--timeout", "1", cwd=tmp_path)
    took = time.monotonic() - start
    assert proc.returncode == 2, describe(proc, 2)
    assert "time limit of 1 s" in proc.stderr, describe(proc)
    assert took < 10, (took, describe(proc))


GYM_SRC = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces


    class Student(gym.Env):
        def __init__(self):
            self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
            self.action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.g = int((options or {}).get("group", 0))
            self.x, self.t = float(self.np_random.normal(0.5 - self.g, 0.5)), 0
            return np.array([self.x, self.g], dtype=np.float32), {}

        def step(self, action):
            self.t += 1
            u = self.np_random.random()
            dx = (0.4 if u < 0.6 else -0.3) * (action - 0.5) * 2
            self.x += dx
            obs = np.array([self.x, self.g], dtype=np.float32)
            if self.t >= 5:
                obs[0] = np.nan            # a division by zero, late in the episode
            return obs, float(action) - u, False, False, {"gain": dx}


    def make_env():
        return Student()
''')


def test_the_gym_door_refuses_late_nan_observations_as_the_contract_does(tmp_path,
                                                                         monkeypatch):
    """An env whose observations turn NaN at t = 5 is refused by the Gymnasium door as a
    simulator's are by the contract (before: audited, with a policy that does not read
    them, as if nothing were wrong)."""
    pytest.importorskip("gymnasium")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bug_gym_nan.py").write_text(GYM_SRC)
    try:
        from causalfair._usercode import load_callable

        make_env = load_callable("bug_gym_nan:make_env", search_path=tmp_path)
        system = cf.systems.from_gym(make_env, groups=["A", "B"],
                                     group="options", gain="info:gain", horizon=8)
        with pytest.raises(SimulatorContractError) as info:
            cf.decompose(system, "uniform", n=100)
    finally:
        sys.modules.pop("bug_gym_nan", None)
    msg = str(info.value)
    assert "NaN" in msg and "column 0" in msg and "t = 5" in msg, msg

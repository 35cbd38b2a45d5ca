"""Constant data of a Gymnasium env shared by its copies (``from_gym(shared=[...])``, the
spec's ``[system] shared``): the same numbers as copying it, one object for every copy,
a shared attribute that reset or step changes refused, and a slow copy named in a hint.
The env is a tabular walk like Gymnasium's toy-text envs: its transitions in a table
``P`` built at construction, which step only reads. The slow copy is slow on a virtual
clock (:data:`CLOCK`, installed as ``time.perf_counter``) that only copying its table
moves, so the hint's tests count copies and never depend on this machine's speed."""

from __future__ import annotations

import copy
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import causalfair as cf
from causalfair.audit.spec import load_spec
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import SpecError
from causalfair.policies.adapters import callable_policy
from causalfair.systems.gym.door import GymForkError

S = 12  # states


class TableWalk(gym.Env):
    """A walk on 0..S-1: ``P[s][a]`` lists (probability, next state, gain); the group
    sets the start. ``rows`` extra entries make the table slow to copy."""

    rows = 0

    def __init__(self):
        self.observation_space = spaces.Box(0.0, S, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(2)
        self.P = {s: {a: [(0.7, min(S - 1, s + 1 + a), 0.1 + a), (0.3, max(0, s - 1), -0.1)]
                      for a in range(2)} for s in range(S + self.rows)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.s = int(self.np_random.integers(0, 3)) + 3 * (1 - self.g)
        return np.array([self.s, self.g], dtype=np.float64), {"group": self.g}

    def step(self, action):
        u = self.np_random.random()
        p, nxt, gain = self.P[self.s][int(action)][0]
        if u >= p:
            _, nxt, gain = self.P[self.s][int(action)][1]
        self.s = nxt
        return np.array([self.s, self.g], dtype=np.float64), gain, False, False, {"gain": gain}


class Scribbles(TableWalk):
    """Writes into its table: it may not be shared."""

    def step(self, action):
        self.P[self.s][int(action)] = list(self.P[self.s][int(action)])
        self.P[self.s][int(action)].append((0.0, 0, 0.0))
        return super().step(action)


#: The virtual clock (seconds) of the slow-copy tests: only copying a Heavy table moves it.
CLOCK = [0.0]


class CostlyTable(dict):
    """A transition table each of whose copies costs one second on :data:`CLOCK` and is
    counted in ``copies``."""

    copies = 0

    def __deepcopy__(self, memo):
        type(self).copies += 1
        CLOCK[0] += 1.0
        return CostlyTable(copy.deepcopy(dict(self), memo))


class Heavy(TableWalk):
    """TableWalk whose table is slow to copy (on :data:`CLOCK`)."""

    def __init__(self):
        super().__init__()
        self.P = CostlyTable(self.P)


@pytest.fixture
def virtual_clock(monkeypatch):
    """``time.perf_counter`` reads :data:`CLOCK`: a copy takes exactly as long as the
    tables it copies."""
    monkeypatch.setattr(time, "perf_counter", lambda: CLOCK[0])


POLICY = callable_policy(lambda f: 1.0 / (1.0 + np.exp(f[:, 0] - 5.0)), inputs="features",
                         name="logistic")


def test_shared_table_same_numbers_one_object():
    plain = cf.systems.from_gym(TableWalk, groups=["a", "b"], horizon=4)
    shared = cf.systems.from_gym(TableWalk, groups=["a", "b"], horizon=4, shared=["P"])
    a = decompose_mc(plain, POLICY, n=300, seed=3, benefit_n=100)
    b = decompose_mc(shared, POLICY, n=300, seed=3, benefit_n=100)
    assert a.estimates() == b.estimates() and a.se == b.se
    sim = shared.simulator
    state = sim.reset(5, 1, np.random.default_rng(0))
    step = sim.step(state, np.ones(5, dtype=int), sim.draw_noise(5, np.random.default_rng(1)))
    table = sim._template.P
    assert all(e.P is table for e in (*state.envs, *step.state.envs))
    state = plain.simulator.reset(2, 1, np.random.default_rng(0))
    assert state.envs[0].P is not state.envs[1].P and state.envs[0].P == state.envs[1].P
    assert shared.params["shared"] == ["P"]


def test_a_shared_attribute_that_step_changes_is_refused():
    with pytest.raises(GymForkError, match=r"shared = \['P', \.\.\.\] but reset or step "
                       r"changed env\.P.*leave 'P' out of shared") as exc:
        cf.systems.from_gym(Scribbles, groups=["a", "b"], shared=["P"])
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("shared, words", [
    (["Q"], r"from_gym shared: bad value 'Q'; the env \(after its factory\) has no "
            r"attribute 'Q'; name attributes of env.unwrapped \(.*P"),
    ("P", r"from_gym shared: bad value 'P'; give a list of env attribute names"),
])
def test_bad_shared_names_refused(shared, words):
    with pytest.raises(cf.errors.SystemError_, match=words):
        cf.systems.from_gym(TableWalk, groups=["a", "b"], shared=shared)


def test_a_slow_copy_names_what_to_share(virtual_clock):
    # one copy of the env copies its table once: 1000.0 ms on the virtual clock
    with pytest.warns(UserWarning, match=r"copying one env takes 1000\.0 ms, mostly env\.P; "
                      r".*pass shared=\['P'\]"):
        cf.systems.from_gym(Heavy, groups=["a", "b"])
    n = CostlyTable.copies
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # shared: no hint
        cf.systems.from_gym(Heavy, groups=["a", "b"], shared=["P"])
    assert CostlyTable.copies == n  # a shared table is never copied


def test_spec_shared_key():
    spec = load_spec({"name": "x", "system": {"gym": "m:f", "groups": ["a", "b"],
                                              "shared": ["P"]}})
    assert spec.system_params["shared"] == ["P"]
    with pytest.raises(SpecError, match=r"\[system\] shared: bad value 'P'"):
        load_spec({"name": "x", "system": {"gym": "m:f", "groups": ["a", "b"], "shared": "P"}})
    with pytest.raises(SpecError, match=r"\[system\] shared: only used with \[system\] gym"):
        load_spec({"name": "x", "system": {"id": "lending-1", "shared": ["P"]}})


class Uniform:
    """Each of Taxi's six actions with probability 1/6."""

    name = "uniform"

    def action_probs(self, obs):
        return np.full((len(obs.features), 6), 1 / 6)


def taxi(**kw):
    from gymnasium.wrappers import FlattenObservation

    return FlattenObservation(gym.make("Taxi-v4", **kw))


def taxi_groups(env, g, seed):
    """Gymnasium's Taxi has no groups: here the group is the parity of the reset seed."""
    return env.reset(seed=2 * (seed // 2) + g)


def test_gymnasium_taxi_audits_with_its_table_shared():
    """An env written outside this project: Taxi keeps its transitions in ``self.P``."""
    if "Taxi-v4" not in gym.registry:
        pytest.skip("this Gymnasium has no Taxi-v4")
    system = cf.systems.from_gym(taxi, groups=["even", "odd"],
                                 group=f"{__name__}:taxi_groups", gain="reward",
                                 horizon=3, shared=["P"])
    res = decompose_mc(system, Uniform(), n=60, seed=0, benefit_n=20)
    est = res.estimates()
    assert est["C"] == pytest.approx(est["DPE"] + est["IPE"] + est["SPE"], abs=1e-12)
    sim = system.simulator
    state = sim.reset(3, 0, np.random.default_rng(0))
    assert all(e.unwrapped.P is sim._template.unwrapped.P for e in state.envs)


def test_the_command_line_prints_the_hint_as_one_line(virtual_clock, capsys, monkeypatch):
    """causalfair's own warnings on the command line: one line, no file or source."""
    from pathlib import Path

    from causalfair.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as outside pytest (whose warnings are errors)
        code = main(["decompose", "--system", "gym", "--param",
                     f"env={__name__}:Heavy", "--param", 'groups=["a","b"]',
                     "--policy", "uniform", "--horizon", "1", "--n", "2"])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [x for x in err.splitlines() if "warning" in x.lower()]
    assert len(lines) == 1 and lines[0].startswith(
        "causalfair decompose: warning: gym env ") and "--param 'shared=[\"P\"]'" in lines[0], \
        err
    assert "UserWarning" not in err and "check_forks(" not in err, err

"""Own systems with several actions: Lambda by forks computes each bootstrap replicate's
pair terms once for both of its sums (the cost of a Monte Carlo audit, and of the audit
that ends a training run, on a system with many feature cells); a Gymnasium system names
its actions (``from_gym(actions=...)``, ``[system] actions``, ``--param actions=...``);
and a policy that puts probability on an action its system forbids
(``DecisionSet.allowed``) is refused by every engine, naming the action."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import causalfair as cf
import causalfair.engines.benefit_mc as benefit_mc
from causalfair.audit.spec_sections import system_section
from causalfair.engines.exact import exact_numbers
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import PolicyError, SpecError, SystemError_
from causalfair.policies.core import ActionPolicy, TablePolicy
from causalfair.policies.grid import allowed_only, engine_policy, policy_table
from causalfair.systems import make


class Clinic(gym.Env):
    """Three actions (wait, meds, surgery), two groups, two Box features."""

    def __init__(self, horizon: int = 3):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.action_space = spaces.Discrete(3)
        self.horizon = horizon

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.group = int((options or {}).get("group", self.np_random.integers(2)))
        self.h, self.t = float(self.np_random.normal(0.3 * self.group, 1.0)), 0
        return np.array([self.h, float(self.t)]), {"group": self.group}

    def step(self, action):
        z = self.np_random.normal()
        change = [0.0, 0.2, 0.5][int(action)] - 0.05 * self.h + 0.1 * z
        self.h += change
        self.t += 1
        return (np.array([self.h, float(self.t)]), change - [0, 0.1, 0.6][int(action)], False,
                self.t >= self.horizon, {"gain": change})


def make_env(horizon: int = 3) -> Clinic:
    return Clinic(horizon)


ENV = "tests.test_gym_train:make_env"
ACTIONS = ["wait", "meds", "surgery"]


# ------------------------------------------------------------------- 1. Lambda by forks
def test_lambda_by_forks_builds_each_replicates_pair_terms_once(monkeypatch):
    """Each bootstrap replicate's (K, K, A) benefit gaps and action differences are built
    once for its two sums (with and without the mask), not once per sum: the audit that
    ends a Gymnasium training run spent most of its time there."""
    system = cf.systems.from_gym(ENV, groups=["a", "b"], horizon=3)
    calls = []
    real_abs = np.abs

    class CountingNumpy:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def abs(x, *a, **kw):
            if np.ndim(x) == 3:
                calls.append(np.shape(x))
            return real_abs(x, *a, **kw)

    monkeypatch.setattr(benefit_mc, "np", CountingNumpy())
    n_boot = 20
    res = benefit_mc.benefit_fairness_mc(system, ActionPolicy(1, 3), 3, n=60, seed=0,
                                         n_boot=n_boot, jobs=1)
    assert res.ci is not None and np.isfinite(res.Lambda)
    # per replicate: one abs for the action differences, one for the gaps; plus the
    # point estimate's two and the mask's one (the old code: twice as many)
    assert len(calls) <= 2 * n_boot + 3, len(calls)


# ------------------------------------------------------------------- 2. action names
def test_from_gym_names_its_actions_and_refuses_a_wrong_count():
    s = cf.systems.from_gym(ENV, groups=["a", "b"], horizon=3, actions=ACTIONS)
    assert s.decisions.labels == tuple(ACTIONS)
    assert s.params["actions"] == ACTIONS
    assert cf.systems.from_gym(ENV, groups=["a", "b"], horizon=3).decisions.labels == (
        "d0", "d1", "d2")
    with pytest.raises(SystemError_, match=r"from_gym actions: 2 names .* Discrete\(3\)"):
        cf.systems.from_gym(ENV, groups=["a", "b"], actions=["wait", "meds"])
    for bad in ("wait", ["wait", "wait", "meds"], ["wait", "", "x"]):
        with pytest.raises(SystemError_, match="from_gym actions: bad value"):
            cf.systems.from_gym(ENV, groups=["a", "b"], actions=bad)


def test_action_names_travel_through_the_registry_the_spec_and_the_command_line():
    """``--param 'actions=[...]'`` and ``[system] actions`` reach ``gym_system``, and the
    system's params rebuild it with its names (what worker processes do)."""
    from causalfair.commands._system import parse_params

    params = parse_params([f"env={ENV}", 'groups=["a","b"]', 'actions=["wait","meds","surgery"]'])
    s = make("gym", **params)
    assert s.id == f"gym:{ENV}" and s.decisions.labels == tuple(ACTIONS)
    assert make("gym", **dict(s.params)).decisions.labels == tuple(ACTIONS)
    sec = system_section({"gym": ENV, "groups": ["a", "b"], "actions": ACTIONS}, None, None)
    assert sec["system_params"]["actions"] == ACTIONS
    assert make("gym", **sec["system_params"]).decisions.labels == tuple(ACTIONS)
    with pytest.raises(SpecError, match=r"\[system\] actions: bad value"):
        system_section({"gym": ENV, "groups": ["a", "b"], "actions": "wait"}, None, None)
    with pytest.raises(SpecError, match=r"\[system\] actions: only used with \[system\] gym"):
        system_section({"id": "lending-1", "actions": ACTIONS}, None, None)


# ------------------------------------------------------------------- 3. allowed actions
def _approve_only():
    """lending-1 whose deployed policy may only approve (action 1); pi0 denies."""
    s = make("lending-1")
    return s.with_(decisions=cf.DecisionSet(labels=s.decisions.labels, baseline=0,
                                            allowed=(1,)))


@pytest.mark.parametrize("engine", ["exact", "mc"])
def test_a_policy_on_a_forbidden_action_is_refused_by_both_engines(engine):
    s = _approve_only()
    half = TablePolicy(np.full((s.n_groups, s.n_levels), 0.5), name="half")
    with pytest.raises(PolicyError, match=r"policy 'half': gives action 0 \('deny'\) "
                       r"probability 0\.5 .*allows only actions 1 \('approve'\)"):
        cf.decompose(s, half, 3, engine=engine, n=50)
    ok = cf.decompose(s, "always", 3, engine=engine, n=50)  # keeps to the allowed action
    assert np.isfinite(ok.estimates()["C"])


def test_every_engine_door_refuses_it():
    """The engines' own entry points (what the command line and audit specs call): Monte
    Carlo through engine_policy, the exact engine through policy_table on the system's
    tabular model, which carries the system's allowed actions."""
    s = _approve_only()
    assert s.tabular.allowed == (1,)
    half = TablePolicy(np.full((s.n_groups, s.n_levels), 0.5), name="half")
    with pytest.raises(PolicyError, match="gives action 0"):
        decompose_mc(s, half, 3, n=50)
    with pytest.raises(PolicyError, match="gives action 0"):
        benefit_mc.benefit_fairness_mc(s, half, 3, n=50, n_boot=0, jobs=1)
    with pytest.raises(PolicyError, match=r"gives action 0 .*\(group 0, level 0\)"):
        exact_numbers(s.tabular, half, 3)
    with pytest.raises(PolicyError, match=r"policy table: gives action 0"):
        policy_table(np.full((s.n_groups, s.n_levels), 0.5), s.tabular, 3)
    assert policy_table(np.ones((s.n_groups, s.n_levels)), s.tabular, 3).shape == (
        s.n_groups, s.n_levels)


def test_the_check_wraps_only_systems_that_forbid_actions():
    """A system allowing every action evaluates the policy as it is (the same numbers)."""
    s = make("lending-1")
    pol = TablePolicy(np.full((s.n_groups, s.n_levels), 0.5), name="half")
    assert allowed_only(pol, s.decisions) is pol
    assert type(engine_policy(pol, s, 2)).__name__ == "GridTabulated"
    wrapped = engine_policy(pol, _approve_only(), 2)
    assert type(wrapped).__name__ == "AllowedOnly" and wrapped.name == "half"

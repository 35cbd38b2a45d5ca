"""A gain that is NaN only under an action the decomposition's paths never take (pi and
pi0 both take the baseline here) is refused by the benefit forks, naming the simulator,
rather than making Lambda NaN (the protocol check, which steps random actions on a small
batch, is turned off: such a gain can hide in states it does not reach)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import causalfair as cf
import causalfair.engines.montecarlo  # (cf.engines.montecarlo below: not imported by cf)
from causalfair.errors import SimulatorContractError


class Fragile(gym.Env):
    """One individual; action 1 from a skill above 0.5 gives a NaN gain."""

    def __init__(self):
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.x = float(self.np_random.normal(0.3 * self.g, 0.5))
        return np.array([self.x], dtype=np.float32), {"group": self.g}

    def step(self, action):
        dx = 0.1 * int(action) + 0.05 * self.np_random.standard_normal()
        gain = float("nan") if action == 1 and self.x > 0.5 else dx
        self.x += dx
        return np.array([self.x], dtype=np.float32), 0.0, False, False, {"gain": gain}


def test_nan_gain_in_a_fork_only_is_refused():
    system = cf.systems.from_gym(Fragile, groups=["s+", "s-"], horizon=3)
    never = cf.ConstantPolicy(0.0)  # pi takes the baseline: the decomposition sees no NaN
    # (jobs=1: the decomposition runs first and would raise its own message)
    with pytest.raises(SimulatorContractError, match="step returned NaN or inf gains in a benefit fork"):
        cf.engines.montecarlo.decompose_mc(system, never, n=60, seed=1, benefit_n=60, jobs=1,
                                          check=False)


class Huge(Fragile):
    """Finite gains too large to square (1e120 each)."""

    def step(self, action):
        obs, r, term, trunc, info = super().step(0)
        return obs, r, term, trunc, {"gain": 1e120 * (1 + int(action))}


def test_gains_too_large_to_square_are_refused_not_a_crash(tmp_path):
    # before: 1e200 gains passed the finite check; their squares overflowed, the standard
    # errors and upper bounds were inf (audit.json null, "exact values" in card.md), the
    # verdict INCONCLUSIVE for a |C| of 4e199, and the report crashed with a traceback
    from tests.conftest import one_line_error, run_cli, skill_simulator

    (tmp_path / "big.py").write_text(skill_simulator(("A", "B"), 2).replace(
        "gain = 0.1 *", "gain = 1e200 *"), encoding="utf-8")
    (tmp_path / "s.toml").write_text('name = "big"\n[system]\nfactory = "big:make"\n'
                                     '[policy]\nbuiltin = "uniform"\n[engine]\nn = 50\n'
                                     '[thresholds]\nabs_C = 0.01\n', encoding="utf-8")
    err = one_line_error(run_cli("audit", "s.toml", "--out", "out", cwd=tmp_path))
    assert "Sim.step: StepResult.gain holds 1.2e+200, beyond 1e+100" in err, err
    assert not (tmp_path / "out").exists()
    # a system of causalfair's own (a Gymnasium env's) is checked by the engine
    system = cf.systems.from_gym(Huge, groups=["s+", "s-"], horizon=2)
    with pytest.raises(SimulatorContractError, match="beyond 1e\\+100"):
        cf.engines.montecarlo.decompose_mc(system, cf.ConstantPolicy(0.5), n=40, seed=1,
                                          benefit_n=40, jobs=1, check=False)

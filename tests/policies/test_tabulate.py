"""Policies that read a finite grid are evaluated once per (group, level) cell and looked
up per individual, in every engine (:func:`causalfair.policies.grid.engine_policy`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.engines.montecarlo import compare_mc, decompose_mc
from causalfair.policies.core import Observation
from causalfair.policies.grid import GridTabulated, engine_policy, reads_only_level_group
from causalfair.policies.nets import NumpyMLPPolicy
from causalfair.policies.resolver import resolve
from causalfair.systems.registry import make

CKPT = Path(__file__).resolve().parents[2] / "causalfair/examples/checkpoints/lending-1-ppo.pt"


class Hidden:
    """The checkpoint behind an object that does not say what it reads: evaluated on
    every individual-step (the untabulated path)."""

    reads_only_level_group = False

    def __init__(self, policy):
        self.policy, self.name = policy, policy.name

    def prob_d1(self, obs):
        return self.policy.prob_d1(obs)


@pytest.fixture(scope="module")
def setup():
    system = make("lending-1")
    return system, resolve(str(CKPT), system).policy


def test_checkpoint_in_numpy_reads_only_level_group(setup):
    _, pol = setup
    assert isinstance(pol, NumpyMLPPolicy)
    assert reads_only_level_group(pol)
    assert isinstance(engine_policy(pol, setup[0], 2), GridTabulated)


def test_checkpoint_network_runs_once_per_cell_not_per_individual(setup, monkeypatch):
    system, pol = setup
    rows = []
    forward = NumpyMLPPolicy._outputs
    monkeypatch.setattr(NumpyMLPPolicy, "_outputs",
                        lambda self, x: rows.append(len(x)) or forward(self, x))
    decompose_mc(system, pol, 5, n=3000, seed=0, benefit_n=2)
    cells = system.n_groups * system.n_levels
    # the grid once (stationary policy), plus the exact Lambda's table; never 2 x 3000 x 5
    assert 0 < sum(rows) <= 4 * cells, rows


def test_tabulated_and_untabulated_checkpoint_give_the_same_numbers(setup):
    system, pol = setup
    a = decompose_mc(system, pol, 6, n=4000, seed=3, benefit_n=500)
    b = decompose_mc(system, pol, 6, n=4000, seed=3, benefit_n=500, tabulate=False)
    for key in ("V", "V_ps", "V_0", "utility", "steps"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key
    assert a.se == b.se
    # the decisions are the same, so the per-step numbers are bit for bit; pi's
    # probabilities on the grid agree with the per-row forward to float32 rounding
    grid = Observation(group=np.repeat([0, 1], 7), level=np.tile(np.arange(7), 2))
    one = engine_policy(pol, system, 2).prob_d1(grid)
    many = pol.prob_d1(Observation(group=np.repeat(grid.group, 500), level=np.repeat(grid.level, 500)))
    assert np.allclose(np.repeat(one, 500), many, rtol=0, atol=1e-7)


def test_benefit_forks_tabulated_match_untabulated(setup):
    system, pol = setup
    a = benefit_fairness_mc(system, pol, 5, n=3000, seed=1, n_boot=20)
    b = benefit_fairness_mc(system, Hidden(pol), 5, n=3000, seed=1, n_boot=20)
    assert np.array_equal(a.delta, b.delta)
    assert np.array_equal(a.state_weights, b.state_weights)
    assert a.Lambda == pytest.approx(b.Lambda, rel=1e-6, abs=1e-12)


def test_paired_comparison_tabulates_both_policies(setup):
    system, pol = setup
    a = compare_mc(system, pol, "threshold:0.5", 4, n=2000, seed=0)
    b = compare_mc(system, Hidden(pol), "threshold:0.5", 4, n=2000, seed=0)
    assert a == b


class TimeGrid:
    """A declared grid policy that changes with t: tabulated once per epoch."""

    reads_only_level_group = True
    time_dependent = True
    name = "time-grid"

    def prob_d1(self, obs):
        return np.full(len(obs), 0.9 if (obs.t or 0) % 2 == 0 else 0.1)


def test_time_dependent_grid_policy_is_tabulated_per_epoch(setup):
    system, _ = setup
    tab = engine_policy(TimeGrid(), system, 2, horizon=4)
    obs = Observation(group=np.array([0, 1]), level=np.array([2, 3]), t=1)
    assert tab.prob_d1(obs).tolist() == [0.1, 0.1]
    assert tab.prob_d1(Observation(group=obs.group, level=obs.level, t=2)).tolist() == [0.9, 0.9]
    a = decompose_mc(system, TimeGrid(), 4, n=1000, seed=0, benefit_n=2)
    b = decompose_mc(system, TimeGrid(), 4, n=1000, seed=0, benefit_n=2, tabulate=False)
    assert np.array_equal(a.steps, b.steps)

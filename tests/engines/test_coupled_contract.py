"""A user's simulator of coupled units gets the contract check that independent units get
(hunt2_own F1, F2): a step that changes its input state in place gave other numbers
without a word (the engine steps pi, the pi^PS fork and pi0 from the same state), and a
draw_noise that ignores its rng, a unit whose group changes, attributes written by step
were accepted. check_simulator takes the System a factory returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.montecarlo import check_simulator
from causalfair.errors import SimulatorContractError

U = 6
UNIT_GROUP = np.array([0, 0, 1, 1, 2, 2])


@dataclass
class World:
    skill: np.ndarray  # (worlds, U)
    budget: np.ndarray  # (worlds,)
    t: int = 0


class Market:
    """Six applicants a world (two per group) sharing a training budget."""

    n_groups = 3
    n_actions = 3

    def reset(self, n, group, rng):
        return World(rng.normal(-0.3 * UNIT_GROUP, 1.0, size=(n, U)), np.full(n, 3.0))

    def observe(self, w):
        feats = np.column_stack([w.skill.reshape(-1), np.repeat(w.budget, U)])
        return cf.Observation(group=np.tile(UNIT_GROUP, w.skill.shape[0]), features=feats, t=w.t)

    def draw_noise(self, n, rng):  # n = worlds x U: one row per unit
        return rng.normal(size=n)

    def step(self, w, decisions, noise):
        n = w.skill.shape[0]
        a = np.asarray(decisions).reshape(n, U)
        hires = (a == 2).sum(1)
        share = np.minimum(1.0, w.budget / np.maximum(hires, 1))
        gain = (0.05 * noise.reshape(n, U) - 0.1 * w.skill + (a == 2) * 0.4 * share[:, None]
                + (a == 1) * 0.05)
        budget = np.maximum(w.budget - 0.5 * hires, 0.0) + 0.5
        reward = ((a == 2) * ((w.skill + gain) > 0) - 0.3 * (a == 2)).reshape(-1)
        return cf.StepResult(state=World(w.skill + gain, budget, w.t + 1), reward=reward,
                             gain=gain.reshape(-1), info={})


class InPlace(Market):
    def step(self, w, decisions, noise):
        res = super().step(w, decisions, noise)
        w.skill[...] = res.state.skill  # the fork and pi0 then start from pi's next state
        return res


class OwnNoise(Market):
    def draw_noise(self, n, rng):
        return np.random.default_rng(0).normal(size=n)


class OwnStart(Market):
    def reset(self, n, group, rng):
        return super().reset(n, group, np.random.default_rng(0))


class Unseeded(Market):
    """Draws its start from a generator of its own, seeded afresh at each call."""

    def reset(self, n, group, rng):
        return super().reset(n, group, np.random.default_rng())


class GroupMoves(Market):
    def observe(self, w):
        obs = super().observe(w)
        return cf.Observation(group=(obs.group + w.t) % 3, features=obs.features, t=obs.t)


class Buffer(Market):
    def step(self, w, decisions, noise):
        res = super().step(w, decisions, noise)
        self.last = res.gain
        return res


class FixedSites(Market):
    """Units of a world differ by design, worlds start alike, no noise: legal."""

    def reset(self, n, group, rng):
        return World(np.tile(-0.3 * UNIT_GROUP, (n, 1)).astype(float), np.full(n, 3.0))

    def draw_noise(self, n, rng):
        return np.zeros(n)


def _system(sim):
    return cf.System(id="market", groups=("A", "B", "C"),
                     decisions=cf.DecisionSet(labels=("reject", "interview", "hire")),
                     features=("skill", "budget"), horizon=4, units_per_replica=U,
                     simulator=sim)


def _policy(obs):
    p = 1 / (1 + np.exp(-2 * obs.features[:, 0]))
    return np.column_stack([1 - p, 0 * p, p])


@pytest.mark.parametrize("sim, says", [
    (InPlace, "InPlace.step: modified its input state in place"),
    (OwnNoise, "OwnNoise.draw_noise: ignores its rng"),
    (OwnStart, "OwnStart.reset: ignores its rng"),
    (GroupMoves, "GroupMoves.step: Observation.group changed over time: unit 0 of replica 0"),
    (Buffer, "Buffer: its methods change its own attributes between calls (last)"),
    (Unseeded, "Unseeded.reset: does not honour its seed: two calls with the same seed"),
])
def test_a_broken_coupled_simulator_is_refused_before_anything_runs(sim, says):
    with pytest.raises(SimulatorContractError) as info:
        cf.decompose(_system(sim), _policy, n=40, seed=0)
    assert says in str(info.value), info.value
    with pytest.raises(SimulatorContractError):
        check_simulator(_system(sim))


def test_a_correct_coupled_simulator_audits_and_checks():
    check_simulator(_system(Market))
    check_simulator(_system(FixedSites))
    res = cf.decompose(_system(Market), _policy, n=40, seed=0)
    assert abs(res.C - (res.DPE + res.IPE + res.SPE)) < 1e-9
    assert np.isfinite(cf.decompose(_system(FixedSites), _policy, n=20, seed=0).C)


def test_check_simulator_takes_a_system():
    """It said "System lacks methods reset, observe, draw_noise, step"."""
    check_simulator(cf.systems.make("lending-1"))
    with pytest.raises(SimulatorContractError, match=r"Observation.level outside \[0, 2\)"):
        check_simulator(cf.System(id="m", groups=("A", "B"), levels=("a", "b"),
                                  simulator=_LevelTwo))


class _LevelTwo:
    """Independent units observed at level 2, on a system of two levels."""

    n_groups = 2

    def reset(self, n, group, rng):
        return np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()

    def observe(self, g):
        return cf.Observation(group=g, level=np.full(g.shape, 2))

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, g, decisions, noise):
        return cf.StepResult(state=g, reward=noise, gain=noise, info={})


def test_a_baseline_on_coupled_units_names_a_fix_that_exists(tmp_path, monkeypatch):
    """It said 'Use [engine] kind = "exact"', which a system of coupled units never has
    (hunt2_own F7)."""
    (tmp_path / "market.py").write_text(
        "from tests.engines.test_coupled_contract import Market, _system, _policy\n\n\n"
        "def make():\n    return _system(Market)\n\n\ndef policy():\n    return _policy\n")
    (tmp_path / "m.toml").write_text(
        'name = "m"\n[system]\nfactory = "market:make"\n[policy]\nfactory = "market:policy"\n'
        '[engine]\nn = 20\n[baseline]\nbuiltin = "uniform"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cf.errors.SpecError) as info:
        cf.audit("m.toml")
    msg = str(info.value)
    assert "couples them (6 units per world" in msg and "exact" in msg, msg
    assert 'kind = "exact"' not in msg and "cf.compare(cf.audit(SPEC)" in msg, msg


def _across_worlds(obs):  # centred on the whole batch: every world reads the others
    z = obs.features[:, 0] - obs.features[:, 0].mean()
    p = 1 / (1 + np.exp(-2 * z))
    return np.column_stack([1 - p, 0 * p, p])


def _in_place(obs):
    obs.features[:, 0] *= 2.0
    return _policy(obs)


class _Counting:
    name = "counting"

    def __init__(self):
        self.calls = 0

    def action_probs(self, obs):
        self.calls += 1
        p = np.full(len(obs.group), 0.5 if self.calls % 2 else 0.2)
        return np.column_stack([1 - p, 0 * p, p])


def _best_of_world(obs):  # compares the units of one world only: legal
    skill = obs.features[:, 0].reshape(-1, U)
    best = (skill == skill.max(1, keepdims=True)).reshape(-1)
    return np.eye(3)[np.where(best, 2, 0)]


@pytest.mark.parametrize("policy, says", [
    (_across_worlds, "depends on the other individuals in the batch: on a batch of 10 of "
                     "Market's worlds of 6 units"),
    (_in_place, "changed the observation it was given in place (obs.features"),
    (_Counting(), "depends on the other individuals in the batch"),
])
def test_a_policy_on_coupled_units_gets_the_row_checks(policy, says):
    """They ran on independent units only: on coupled units these were audited (hunt2_own F8)."""
    with pytest.raises(cf.PolicyError) as info:
        cf.decompose(_system(Market), policy, n=40, seed=0)
    assert says in str(info.value), info.value
    with pytest.raises(cf.PolicyError):
        cf.benefit_fairness(_system(Market), policy, n=40, seed=0)


def test_a_policy_comparing_the_units_of_one_world_still_audits():
    res = cf.decompose(_system(Market), _best_of_world, n=40, seed=0)
    assert np.isfinite(res.C) and res.Lambda is not None


class Alone:
    """Independent units, the start drawn from a generator seeded afresh at each call."""

    n_groups = 2

    def reset(self, n, group, rng):
        return np.random.default_rng().normal(size=n)

    def observe(self, x):
        return cf.Observation(group=np.zeros(len(x), dtype=int), features=x[:, None], t=0)

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, x, decisions, noise):
        return cf.StepResult(state=x + noise, reward=noise, gain=noise, info={})


def test_independent_and_coupled_units_refuse_an_unseeded_start_alike():
    """One check (contract._check_reset_seeded) for both: the same sentence."""
    from causalfair.systems.contract import check_protocol

    with pytest.raises(SimulatorContractError) as info:
        check_protocol(Alone())
    assert "Alone.reset: does not honour its seed: two calls with the same seed" in \
        str(info.value), info.value

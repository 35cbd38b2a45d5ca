"""How the Gymnasium door steps an epoch of the Monte Carlo engine: ``step_paths`` steps
pi's and pi0's envs in place and copies an env only where pi's decision leaves the
baseline, and gives bit for bit what three ``step`` calls (a copy per stepped env) give,
on an env whose pi^PS fork diverges often, one where it never does, a three-action env,
an env with a state API, and through the whole decomposition; the step generator's
direct state writes give what ``bit_generator.state`` gives."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines._mc_base import engine_backend
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.adapters import callable_policy
from causalfair.systems.gym.door import GymSimulator
from causalfair.systems.gym.forks import StepGenerator, generator_state

from .gym_students import Student, ThreeActions, WithState


def _paths_against_steps(factory, decide, *, n=60, T=6, baseline=0, seed=0):
    """Run T epochs of the engine's pattern twice from the same resets: step_paths on one
    simulator, three step() calls on a pickled twin; assert every result is identical and
    return the env steps each made and the live individual-steps."""
    sim = cf.systems.from_gym(factory, groups=["a", "b"], horizon=T, baseline=baseline).simulator
    twin = pickle.loads(pickle.dumps(sim))
    counts, live = [], 0
    for which in (sim, twin):
        rng = np.random.default_rng(seed)
        state = state0 = which.reset(n, 1, rng)
        d0 = np.full(n, baseline)
        out = []
        Student.steps = 0
        for t in range(T):
            live += int((~state.done).sum()) if which is sim else 0
            d = decide(t, state.obs, rng)
            noise = which.draw_noise(n, rng)
            if which is sim:
                res, fork, res0 = sim.step_paths(state, d, state0, d0, noise)
            else:
                res, fork, res0 = (twin.step(state, d, noise), twin.step(state, d0, noise),
                                   twin.step(state0, d0, noise))
            out.append([(r.gain, r.reward, r.state.obs, r.state.done) for r in (res, fork, res0)])
            state, state0 = res.state, res0.state
        counts.append(Student.steps)
        if which is sim:
            got = out
    for t, (a, b) in enumerate(zip(got, out, strict=True)):
        for path, x, y in zip(("pi", "fork", "pi0"), a, b, strict=True):
            for name, u, v in zip(("gain", "reward", "obs", "done"), x, y, strict=True):
                assert np.array_equal(u, v), f"epoch {t} {path} {name}: {u} != {v}"
    return (*counts, live)


def test_branches_often_same_numbers_and_env_steps_as_copying():
    flip = lambda t, obs, rng: rng.random(len(obs)) < 0.5  # noqa: E731
    steps_paths, steps_copy, live = _paths_against_steps(Student, flip)
    assert steps_paths == steps_copy > live


def test_never_branches_one_env_step_per_individual_step():
    stay = lambda t, obs, rng: np.zeros(len(obs), dtype=bool)  # noqa: E731 - the baseline
    steps_paths, steps_copy, live = _paths_against_steps(Student, stay, n=40, T=4)
    assert steps_paths == steps_copy == live  # pi's transition is the fork's and pi0's


def test_three_actions_baseline_one_and_a_state_api():
    pick = lambda t, obs, rng: rng.integers(0, 3, size=len(obs))  # noqa: E731
    _paths_against_steps(ThreeActions, pick, baseline=1)
    flip = lambda t, obs, rng: rng.random(len(obs)) < 0.5  # noqa: E731
    _paths_against_steps(WithState, flip)


def test_consumed_state_refused():
    sim = cf.systems.from_gym(Student, groups=["a", "b"], horizon=2).simulator
    rng = np.random.default_rng(0)
    state = sim.reset(4, 0, rng)
    noise = sim.draw_noise(4, rng)
    sim.step_paths(state, np.ones(4, dtype=bool), state, np.zeros(4, dtype=bool), noise)
    with pytest.raises(RuntimeError, match="consumed by step_paths"):
        sim.step(state, np.ones(4, dtype=bool), noise)


def test_decomposition_identical_to_forced_copying(monkeypatch):
    system = cf.systems.from_gym(Student, groups=["s+", "s-"], horizon=5)
    policy = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-3.0 * f[:, 0])), inputs="features",
                             name="logistic")
    fast = decompose_mc(system, policy, n=150, seed=4, benefit_n=2, batch_size=50)
    monkeypatch.setattr(GymSimulator, "step_paths", None)  # the engine's three step() calls
    slow = decompose_mc(system, policy, n=150, seed=4, benefit_n=2, batch_size=50)
    assert fast.estimates() == slow.estimates()
    assert fast.se == slow.se


def test_simulator_runs_on_one_thread():
    """One generator and one memo per simulator: threads would interleave their states."""
    sim = cf.systems.from_gym(Student, groups=["a", "b"], horizon=2).make_simulator()
    assert engine_backend(None, 2, sim).jobs == 1


@pytest.mark.parametrize("direct", [True, False], ids=["c-state", "setter"])
def test_step_generator_sets_what_the_state_setter_sets(direct):
    """Writing the C state and numpy's setter (the fallback) leave the same generator."""
    gen = StepGenerator()
    if sys.platform.startswith("linux") and sys.byteorder == "little":
        assert gen._words is not None  # the direct write is in use on this build
    if not direct:
        gen._words = None
    ref = np.random.Generator(np.random.PCG64(0))
    words = np.random.default_rng(7).integers(0, 2**64, size=(50, 2), dtype=np.uint64).tolist()
    for k, (hi, lo) in enumerate(words):
        gen.rng.integers(0, 7, size=3)  # leaves a buffered 32-bit value
        if k % 5 == 0:  # another increment, as an env's set_state might leave it
            gen.rng.bit_generator.state = {**generator_state(1, 2),
                                           "state": {"state": 5, "inc": 9}}
        gen.set(hi, lo)
        ref.bit_generator.state = generator_state(hi, lo)
        assert gen.rng.bit_generator.state == ref.bit_generator.state
        assert np.array_equal(gen.rng.random(3), ref.random(3))
        assert np.array_equal(gen.rng.integers(0, 2**31, size=3, dtype=np.int32),
                              ref.integers(0, 2**31, size=3, dtype=np.int32))

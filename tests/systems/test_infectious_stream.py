"""The infectious simulator's epidemics and random streams, pinned bit for bit: a fixed
seed gives the same health, rewards, gains, supply and demand after every step, the same
vectorised-environment outputs, and leaves the generator at the same place, for the
original system and the one with loss of immunity. The digests were recorded from the
step as published in docs/simulators.md before its speed work; a faster step must not
move them (nor the audits' numbers that follow from them)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from causalfair.systems import infectious as inf
from causalfair.systems.gym.infectious import VecInfectiousEnv


def _update(h: Any, *arrays: np.ndarray) -> None:
    for a in arrays:
        a = np.asarray(a)
        h.update(a.dtype.str.encode())
        h.update(a.tobytes())


def _simulator_digest(loss: float) -> str:
    """20 treated steps of 1,000 replicas (two blocks of 512, the second short)."""
    sim = inf.InfectiousSimulator(0.5, 0.005, loss, 1, (0,))
    rng = np.random.default_rng(2024)
    n = 1000
    h = hashlib.sha256()
    s = sim.reset(n, None, rng)
    _update(h, s.health)
    for _ in range(20):
        d = np.zeros((n, 34), dtype=bool)
        d[np.arange(n), rng.integers(0, 34, n)] = True
        res = sim.step(s, d.reshape(-1), sim.draw_noise(n * 34, rng))
        _update(h, res.state.health, res.reward, res.gain, res.info["demand"],
                res.info["supply"])
        s = res.state
    _update(h, rng.random(4))  # where the stream stands after the episode
    return h.hexdigest()[:16]


def _env_digest(harder: bool) -> str:
    """One episode of 600 graphs of the vectorised Gymnasium environment."""
    env = VecInfectiousEnv(600, harder=harder)
    rng = np.random.default_rng(11)
    h = hashlib.sha256()
    _update(h, env.reset(rng))
    for _ in range(20):
        obs, reward, term, trunc, info = env.step(rng.integers(0, 35, 600))
        _update(h, obs, reward, term, trunc, info["newly_infected"], info["infected"])
    _update(h, rng.random(4))
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("loss", "digest"), [(0.0, "847b16be924d24e9"),
                                              (0.2, "3b7b276aed507990")])
def test_simulator_epidemic_and_stream_are_pinned(loss, digest):
    assert _simulator_digest(loss) == digest


@pytest.mark.parametrize(("harder", "digest"), [(False, "70d4bd3e724c5a12"),
                                                (True, "294fbbad13920484")])
def test_vectorised_env_episode_and_stream_are_pinned(harder, digest):
    assert _env_digest(harder) == digest


def test_a_readable_episode():
    """Infected members summed over 8 graphs (of 272 members) after the burn-in and after
    each of 6 steps (seed 5): the epidemic from member 0 spreads within a few steps."""
    env = VecInfectiousEnv(8)
    rng = np.random.default_rng(5)
    counts = [int((env.reset(rng) == inf.INF).sum())]
    for _ in range(6):
        health, *_ = env.step(rng.integers(0, 35, 8))
        counts.append(int((health == inf.INF).sum()))
    assert counts == [68, 135, 193, 226, 241, 248, 245]

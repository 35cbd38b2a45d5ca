"""The infectious step runs in blocks of whole replicas (its temporaries stay in the
cache): the same epidemic, bit for bit, as one pass over every member, whatever the block
size and wherever the last block ends."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.systems import infectious as inf
from causalfair.systems.gym.infectious import VecInfectiousEnv


def _one_pass(sim: inf.InfectiousSimulator, health: np.ndarray, d: np.ndarray,
              noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The step written plainly over all members at once (next health, newly infected)."""
    U = sim.units
    h = np.where(d & (health == inf.SUS), np.int8(inf.REC), health)
    k = ((h == inf.INF).reshape(-1, U).astype(np.float32) @ sim._adj32).reshape(-1)
    move = noise < sim._p_move[h.astype(np.intp) * (U + 1) + k.astype(np.intp)]
    nxt = (h + move).astype(np.int8)
    nxt[nxt == 3] = inf.SUS
    return nxt, (move & (h == inf.SUS)).astype(np.int8)


@pytest.mark.parametrize("block", [1, 3, 512])
@pytest.mark.parametrize("loss", [0.0, 0.2])
def test_blocked_step_is_the_one_pass_step(block, loss, monkeypatch):
    monkeypatch.setattr(inf, "_BLOCK_REPLICAS", block)
    sim = inf.InfectiousSimulator(0.5, 0.005, loss, 1, (0,))
    rng = np.random.default_rng(7)
    n = 7  # not a multiple of 3: the last block is short
    state = sim.reset(n, None, rng)
    for _ in range(12):
        d = rng.random(n * 34) < 0.1
        noise = sim.draw_noise(n * 34, rng)
        res = sim.step(state, d, noise)
        nxt, newly = _one_pass(sim, state.health, d, noise)
        assert np.array_equal(res.state.health, nxt) and res.state.health.dtype == np.int8
        assert np.array_equal(res.info["demand"], newly)
        assert np.array_equal(res.info["supply"], d.astype(np.int8))
        assert np.array_equal(res.reward, (nxt != inf.INF).astype(np.int8))
        assert np.array_equal(res.gain, res.reward - (state.health != inf.INF))
        state = res.state
    assert (state.health != inf.SUS).any()  # the epidemic moved


def test_vectorised_env_counts_match_its_health():
    env = VecInfectiousEnv(5)
    rng = np.random.default_rng(3)
    env.reset(rng)
    for _ in range(6):
        health, reward, _, _, info = env.step(rng.integers(0, 35, 5))
        infected = (health == inf.INF).sum(1)
        assert np.array_equal(info["infected"], infected)
        assert np.array_equal(reward, (34 - infected) / 34)

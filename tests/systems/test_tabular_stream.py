"""The tabular simulator's and the lending simulator's transitions and random streams,
pinned bit for bit: a fixed seed gives the same levels, rewards and gains after every step
(decisions and their baseline fork on the same noise), and leaves the generator at the
same place, for lending-harder, lending-1 and small tabular models with three actions and
three groups. The digests were recorded from the steps as published in docs/simulators.md
before their speed work; a faster step must not move them (nor the audits' numbers that
follow from them). Noise that lands exactly on a CDF value pins how ties are broken
(``u == cdf`` moves past that level: the next level is the number of CDF values <= u)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import InputError
from causalfair.systems import tabular_sim
from causalfair.systems.lending.settings import LendingNoise, LendingSimulator
from causalfair.systems.tabular_sim import TabularSimulator, TabularState
from tests.engines.test_actions import three_action_model  # the hand-worked model


def _update(h: Any, *arrays: np.ndarray) -> None:
    for a in arrays:
        a = np.asarray(a)
        h.update(a.dtype.str.encode())
        h.update(a.tobytes())


def _sparse_model() -> cf.TabularModel:
    """G = 3 groups, A = 3 actions (baseline 1), K = 6 levels; about a third of the kernel's
    entries are zero, so CDFs have flat runs (equal consecutive values)."""
    rng = np.random.default_rng(7)
    G, A, K = 3, 3, 6
    k = rng.dirichlet(np.ones(K), size=(G, A, K)) * (rng.random((G, A, K, K)) < 0.65)
    k[..., 0] += 1e-3  # no empty row
    k /= k.sum(-1, keepdims=True)
    return cf.TabularModel(kernel=k, initial=rng.dirichlet(np.ones(K), size=G),
                           potential=rng.normal(size=K), reward=rng.normal(size=(G, A, K)),
                           baseline=1, group_names=["a", "b", "c"])


def _model(name: str) -> cf.TabularModel:
    if name == "lending-harder":
        return cf.systems.make("lending-harder").tabular
    return {"sparse": _sparse_model, "three-action": three_action_model}[name]()


def _tabular_digest(name: str, mixed: bool, seed: int = 2024) -> str:
    """20 steps of 3,001 individuals: random decisions (bool for two actions, else intp)
    and the baseline fork on the same noise."""
    m = _model(name)
    sim = TabularSimulator(m)
    rng = np.random.default_rng(seed)
    n = 3001
    group = rng.integers(0, m.n_groups, n) if mixed else m.n_groups - 1
    s = sim.reset(n, group, rng)
    h = hashlib.sha256()
    _update(h, s.level, s.group)
    base = np.full(n, m.baseline, dtype=np.intp)
    for _ in range(20):
        d = rng.integers(0, m.n_actions, n)
        if m.n_actions == 2:
            d = d.astype(bool)
        noise = sim.draw_noise(n, rng)
        res = sim.step(s, d, noise)
        fork = sim.step(s, base, noise)
        _update(h, res.state.level, res.reward, res.gain, fork.state.level, fork.reward,
                fork.gain)
        s = res.state
    _update(h, rng.random(4))
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("name", "mixed", "digest"), [
    ("lending-harder", False, "27fc6867013fa684"),
    ("lending-harder", True, "35e1b1557274e6df"),
    ("sparse", False, "69b09ac856c57002"),
    ("sparse", True, "8361b05d9e97746c"),
    ("three-action", True, "8d39bcf72f31d9e4"),
])
def test_tabular_transitions_and_stream_are_pinned(name, mixed, digest):
    assert _tabular_digest(name, mixed) == digest


@pytest.mark.parametrize("name", ["lending-harder", "sparse", "three-action"])
def test_noise_on_a_cdf_value_moves_past_that_level(name):
    """Every individual's uniform is one of its own row's CDF values (or 0): the next level
    is the count of CDF values <= u, read off a plain loop over the row."""
    m = _model(name)
    sim = TabularSimulator(m)
    rng = np.random.default_rng(3)
    n = 4000
    g = rng.integers(0, m.n_groups, n)
    x = rng.integers(0, m.n_levels, n)
    d = rng.integers(0, m.n_actions, n)
    cdf = np.cumsum(m.kernel, axis=-1)[g, d, x]  # (n, K), the simulator's cumsum
    k = rng.integers(0, m.n_levels - 1, n)
    u = np.where(rng.random(n) < 0.1, 0.0, cdf[np.arange(n), k])
    got = sim.step(TabularState(level=x, group=g), d, u).state.level
    want = [sum(1 for c in row[:-1] if ui >= c) for ui, row in zip(u, cdf, strict=True)]
    assert got.tolist() == want
    assert (got > k)[u > 0].all()  # a tie moves past the level whose CDF value it equals


def test_guide_table_by_hand():
    """Row (0.25, 0.5, 0.6), 4 buckets: [-inf, .25) holds no value; [.25, .5) starts on
    0.25 (counted: u >= 0.25 there) and ends before 0.5; [.5, .75) holds 0.6 (depends on
    u: -1); [.75, 1) and [1, inf) lie above all three values."""
    table = tabular_sim._guide_table(np.array([[0.25, 0.5, 0.6]]), 4)
    assert table.tolist() == [[0, 1, -1, 3, 3]]


@pytest.mark.parametrize("name", ["sparse", "lending-harder"])
@pytest.mark.parametrize("entries", [None, 300, 40])
def test_next_level_at_bucket_edges_cdf_values_and_out_of_range_noise(monkeypatch, name,
                                                                       entries):
    """The guide-table lookup agrees with counting ``u >= cdf`` for uniforms on and next to
    every bucket edge and every CDF value (0 included), and for u < 0 and u >= 1, with the
    default table and with tables capped to a few buckets and to one bucket per row (every
    lookup then falls back to counting)."""
    if entries is not None:
        monkeypatch.setattr(tabular_sim, "_GUIDE_MAX_ENTRIES", entries)
    m = _model(name)
    sim = TabularSimulator(m)
    B = sim._buckets
    # 54 (sparse) or 28 (lending-harder) rows of B + 1 buckets, B a power of two
    assert B == {None: 512, 300: 4 if name == "sparse" else 8, 40: 1}[entries]
    cdf = np.cumsum(m.kernel, axis=-1)[..., :-1].reshape(-1, m.n_levels - 1)
    base = np.concatenate([np.arange(B + 1) / B, np.unique(cdf), [-0.5, 1.5, 3.0, 1e300]])
    u = np.concatenate([base, np.nextafter(base, -np.inf), np.nextafter(base, np.inf),
                        [0.0, -0.0]])
    cells = np.repeat(np.arange(cdf.shape[0]), u.size)
    uu = np.tile(u, cdf.shape[0])
    want = (uu[:, None] >= cdf[cells]).sum(axis=1)
    assert sim._next_level(cells, uu).tolist() == want.tolist()


def test_decisions_outside_the_actions_are_refused():
    m = _sparse_model()
    sim = TabularSimulator(m)
    s = sim.reset(4, 0, np.random.default_rng(0))
    for bad in (3, -1):
        with pytest.raises(InputError, match=rf"decisions: .*\[0, 3\), got {bad}"):
            sim.step(s, np.array([0, 1, bad, 2]), np.full(4, 0.5))


def test_a_tabular_model_audited_directly_keeps_its_actions_and_baseline():
    """``decompose_mc`` of a bare TabularModel (3 actions, baseline 1) reads the actions
    and the baseline from its simulator: the same numbers as through its System."""
    from causalfair.systems.system import as_system

    m = _sparse_model()
    pol = np.random.default_rng(1).dirichlet(np.ones(3), size=(3, 6))
    bare = cf.decompose_mc(m, pol, 4, n=2000, seed=4)
    via_system = cf.decompose_mc(as_system(m), pol, 4, n=2000, seed=4)
    got = (bare.C, bare.DPE, bare.IPE, bare.SPE)
    assert got == (via_system.C, via_system.DPE, via_system.IPE, via_system.SPE)


def _lending_digest(mixed: bool, floats: bool, seed: int = 99) -> str:
    """20 steps of 3,001 individuals of lending-1 (one 64-bit word or two float uniforms
    per individual), decisions and the all-deny fork on the same noise."""
    sim = LendingSimulator(cf.systems.make("lending-1").simulator().model)
    rng = np.random.default_rng(seed)
    n = 3001
    group = rng.integers(0, 2, n) if mixed else 1
    s = sim.reset(n, group, rng)
    h = hashlib.sha256()
    _update(h, s.level, s.group)
    deny = np.zeros(n, dtype=bool)
    for _ in range(20):
        d = rng.random(n) < 0.6
        noise = (LendingNoise(repay=rng.random(n), drift=rng.random(n)) if floats
                 else sim.draw_noise(n, rng))
        res = sim.step(s, d, noise)
        fork = sim.step(s, deny, noise)
        _update(h, res.state.level, res.reward, res.gain, res.info["repay"],
                res.info["drift"], fork.state.level, fork.reward, fork.gain)
        s = res.state
    _update(h, rng.random(4))
    return h.hexdigest()[:16]


@pytest.mark.parametrize(("mixed", "floats", "digest"), [
    (False, False, "62ad98d3caa3a3d7"),
    (True, False, "012d2481e11222bb"),
    (False, True, "b1e0064e4048df89"),
    (True, True, "01dc0e2bef4d7170"),
])
def test_lending_transitions_and_stream_are_pinned(mixed, floats, digest):
    assert _lending_digest(mixed, floats) == digest

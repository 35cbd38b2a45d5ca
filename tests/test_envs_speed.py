"""The seeds' simulator steps made faster (issue 28, item 4) give the same arrays, bit for
bit and dtype for dtype, as the steps they replaced, which benchmarks/bench_envs.py keeps
as its baselines (loaded from there): the lending simulator's step (fewer temporaries),
the tabular simulator's (one lookup for the gain), the attention placement (flat indices),
its Poisson inverse CDF (sums in place on the entries still counting) and the infectious
step (its sparse path once few members are susceptible). Several seeds,
groups (one, or mixed), sizes (n = 1, and n that is no multiple of any block), decisions
(all baseline, mixed, all d1), noise (64-bit words and float uniforms), and tables capped
so that many uniforms fall back to counting."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import causalfair as cf
from causalfair.systems import tabular_sim
from causalfair.systems.attention import allocate, poisson_inverse
from causalfair.systems.lending.settings import LendingNoise, LendingSimulator, lending_setting
from causalfair.systems.tabular_sim import TabularSimulator, TabularState

SIZES = (1, 2, 7, 1000, 4099)


# ------------------------------------------------------------------ the references
def _bench() -> Any:
    """benchmarks/bench_envs.py, which keeps the steps before issue 28 as its baselines."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_envs.py"
    spec = importlib.util.spec_from_file_location("bench_envs_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OLD = _bench()


def _old_lending_step(sim: LendingSimulator, state: Any, decisions: Any, noise: Any) -> dict:
    res = OLD.old_lending_step(sim, state, decisions, noise)
    return {"level": res.state.level, "reward": res.reward, "gain": res.gain,
            "repay": res.info["repay"], "drift": res.info["drift"]}


def _old_tabular_step(sim: TabularSimulator, state: Any, decisions: Any, noise: Any) -> dict:
    res = OLD.old_tabular_step(sim, state, decisions, noise)
    return {"level": res.state.level, "reward": res.reward, "gain": res.gain}


_old_allocate, _old_poisson_inverse = OLD.old_allocate, OLD.old_poisson_inverse


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.tobytes() == want.tobytes(), what  # bit for bit (signed zeros included)


def _decisions(rng: np.random.Generator, n: int, kind: str, actions: int = 2) -> np.ndarray:
    if kind == "d0":
        return np.zeros(n, dtype=bool)
    if kind == "d1":
        return np.ones(n, dtype=bool)
    d = rng.integers(0, actions, n)
    return d.astype(bool) if actions == 2 else d


# ------------------------------------------------------------------ lending
@pytest.mark.parametrize("setting,levels,interest", [
    ("lending-1", 7, 1.0), ("lending-2", 7, 0.1), ("lending-3", 11, 0.3),
    ("delayed-impact", 7, 1.0), ("lending-1", 4, 0.7)])
def test_lending_step_is_the_old_step(setting: str, levels: int, interest: float) -> None:
    """Five steps per case, the state chained through the new step; each step's arrays
    (levels, rewards, gains, the info's repay and drift) equal the old step's on the same
    state and noise: one group and mixed groups, integer and float noise, every size."""
    lm = (cf.systems.make(setting).simulator().model if setting == "delayed-impact"
          else lending_setting(setting, n_levels=levels, interest=interest))
    sim = LendingSimulator(lm)
    for seed, n in enumerate(SIZES):
        for mixed in (False, True):
            for float_noise in (False, True):
                rng = np.random.default_rng(100 * seed + 10 * mixed + float_noise)
                group = rng.integers(0, 2, n) if mixed else seed % 2
                state = sim.reset(n, group, rng)
                for t, kind in enumerate(("mixed", "d0", "d1", "mixed", "mixed")):
                    d = _decisions(rng, n, kind)
                    if t == 3:
                        d = d.astype(np.intp)  # 0/1 integers, as a user may pass
                    noise = (LendingNoise(repay=rng.random(n), drift=rng.random(n))
                             if float_noise else sim.draw_noise(n, rng))
                    want = _old_lending_step(sim, state, d, noise)
                    res = sim.step(state, d, noise)
                    for key in ("reward", "gain"):
                        _same(getattr(res, key), want[key], key)
                    _same(res.state.level, want["level"], "level")
                    for key in ("repay", "drift"):
                        _same(res.info[key], want[key], key)
                    state = res.state


def test_lending_reward_keeps_its_rounding() -> None:
    """With interest 0.1 a repaid loan's reward is (0.1 + 1) - 1 = 0.10000000000000009, as
    the published arithmetic gives it (not 0.1): the audits' numbers depend on it."""
    sim = LendingSimulator(lending_setting("lending-1", interest=0.1))
    rng = np.random.default_rng(0)
    state = sim.reset(2000, 0, rng)
    res = sim.step(state, np.ones(2000, dtype=bool), sim.draw_noise(2000, rng))
    repaid = res.reward[np.asarray(res.info["repay"])]
    assert repaid.size and (repaid == (0.1 + 1.0) - 1.0).all() and (repaid != 0.1).all()
    assert set(res.reward.tolist()) == {-1.0, (0.1 + 1.0) - 1.0}


# ------------------------------------------------------------------ tabular
def _tabular_models() -> list[cf.TabularModel]:
    from tests.engines.test_actions import three_action_model
    from tests.systems.test_tabular_stream import _sparse_model

    return [cf.systems.make("lending-harder").tabular, _sparse_model(), three_action_model(),
            lending_setting("lending-3", n_levels=9).tabular]


@pytest.mark.parametrize("entries", [None, 300, 40])
@pytest.mark.parametrize("which", range(4))
def test_tabular_step_is_the_old_step(monkeypatch: Any, which: int, entries: int | None
                                      ) -> None:
    """The default guide table, and tables capped to a few buckets and to one bucket per
    row (every level then counted, and every gain computed from the potential), give the
    old step's levels, rewards and gains; uniforms on the CDF values and outside [0, 1)
    included."""
    if entries is not None:
        monkeypatch.setattr(tabular_sim, "_GUIDE_MAX_ENTRIES", entries)
    m = _tabular_models()[which]
    sim = TabularSimulator(m)
    cdf_values = np.unique(sim._cdf)
    for seed, n in enumerate(SIZES):
        for mixed in (False, True):
            rng = np.random.default_rng(1000 * which + 10 * seed + mixed)
            group = rng.integers(0, m.n_groups, n) if mixed else seed % m.n_groups
            state = sim.reset(n, group, rng)
            for kind in ("mixed", "d0", "d1", "mixed"):
                d = _decisions(rng, n, kind, m.n_actions)
                if kind != "mixed" and m.n_actions > 2:
                    d = d.astype(np.intp)
                u = sim.draw_noise(n, rng)
                pick = rng.random(n)
                u = np.where(pick < 0.2, rng.choice(cdf_values, n), u)  # on CDF values
                u = np.where(pick > 0.97, rng.choice([-0.5, 1.0, 1.5], n), u)
                want = _old_tabular_step(sim, state, d, u)
                res = sim.step(state, d, u)
                _same(res.state.level, want["level"], "level")
                _same(res.reward, want["reward"], "reward")
                _same(res.gain, want["gain"], "gain")
                state = TabularState(level=res.state.level, group=state.group,
                                     group_id=state.group_id)


# ------------------------------------------------------------------ attention
@pytest.mark.parametrize("m", [1, 2, 5, 777, 4096])
def test_allocate_is_the_old_placement(m: int) -> None:
    """Random weights, rows of zeros (they get nothing), ties (the lowest index wins),
    non-finite weights (a row whose shares are NaN), 1, 6 and 30 units, 5 and 3 sites."""
    rng = np.random.default_rng(m)
    for trial in range(12):
        K = 3 if trial % 4 == 3 else 5
        w = rng.random((m, K)) + 0.01
        if trial % 4 == 1:
            w[rng.random(m) < 0.4] = 0.0
        if trial % 4 == 2:
            w = np.round(w * 2) / 2  # ties
        if trial == 11:
            w[0, 1] = np.inf
        for units in (1, 6, 30):
            with np.errstate(invalid="ignore"):
                _same(allocate(w, units), _old_allocate(w, units), f"allocate {trial} {units}")


@pytest.mark.parametrize("m", [1, 3, 5, 999, 20480])
def test_poisson_inverse_is_the_old_sampler(m: int) -> None:
    """Rates 0, small, the attention systems' (up to about 30), near and above the
    scipy switch at 500, negative and NaN; uniforms including 0 and the largest below 1."""
    rng = np.random.default_rng(m)
    for trial in range(10):
        lam = rng.choice([0.0, 0.5, 1.5, 3.0, 8.0, 30.0, 499.9, 600.0, -1.0, np.nan], m)
        lam = lam * (rng.random(m) + 0.5) if trial % 2 else lam
        u = rng.random(m)
        u[rng.random(m) < 0.05] = 0.0
        u[rng.random(m) < 0.05] = np.nextafter(1.0, 0.0)
        with np.errstate(invalid="ignore"):
            _same(poisson_inverse(u, lam), _old_poisson_inverse(u, lam), f"poisson {trial}")
    # the attention-1 step's rates, as arrays of sites, as (replicas, sites) and one rate
    lam = np.tile([8.0, 6.0, 4.0, 3.0, 1.5], m)
    u = rng.random(lam.size)
    _same(poisson_inverse(u, lam), _old_poisson_inverse(u, lam), "attention-1 rates")
    u, lam = u.reshape(m, 5), lam.reshape(m, 5)
    _same(poisson_inverse(u, lam), _old_poisson_inverse(u, lam), "(replicas, sites)")
    _same(poisson_inverse(u[0, 0], lam), _old_poisson_inverse(u[0, 0], lam), "one uniform")
    _same(poisson_inverse(u[0, 0], lam[0, 0]), _old_poisson_inverse(u[0, 0], lam[0, 0]),
          "one rate")


def test_attention_step_is_unchanged_over_an_episode() -> None:
    """20 steps of 333 replicas of attention-1 and attention-harder through the step,
    against the same step with the old placement and sampler patched in."""
    from causalfair.systems import attention as att

    for sid in ("attention-1", "attention-harder"):
        system = cf.systems.make(sid)
        runs = []
        for old in (False, True):
            sim = system.simulator()
            rng = np.random.default_rng(5)
            state = sim.reset(333, None, rng)
            out = []
            saved = att.allocate, att.poisson_inverse
            if old:
                att.allocate, att.poisson_inverse = _old_allocate, _old_poisson_inverse
            try:
                for _ in range(20):
                    d = rng.integers(1, 5, 333 * 5)
                    res = sim.step(state, d, sim.draw_noise(333 * 5, rng))
                    out += [res.reward, res.gain, res.state.rate, res.state.attention]
                    state = res.state
            finally:
                att.allocate, att.poisson_inverse = saved
            runs.append(out)
        for a, b in zip(*runs, strict=True):
            _same(a, b, sid)


# ------------------------------------------------------------------ infectious disease
def _infectious_episode(sim: Any, n: int, seed: int, vaccinate: str, old: bool
                        ) -> list[np.ndarray]:
    """Every array of an episode (burn-in included) of ``n`` replicas: next health,
    reward, gain, supply and demand of each step, and what the generator draws next."""
    from contextlib import nullcontext

    with OLD.old_infectious() if old else nullcontext():
        rng = np.random.default_rng(seed)
        state = sim.reset(n, None, rng)
        out = [state.health]
        U = sim.units
        for _ in range(20):
            if vaccinate == "one":  # one member per replica, as the environments give
                d = np.zeros(n * U, dtype=bool)
                d[np.arange(n) * U + rng.integers(0, U, n)] = True
            else:
                d = rng.random(n * U) < {"none": 0.0, "some": 0.3, "all": 1.0}[vaccinate]
            res = sim.step(state, d, sim.draw_noise(n * U, rng))
            out += [res.state.health, res.reward, res.gain, res.info["supply"],
                    res.info["demand"]]
            state = res.state
        out.append(rng.random(3))  # the same random numbers consumed
        return out


@pytest.mark.parametrize("blocks", [None, (3, 5)])
@pytest.mark.parametrize("few", [None, 0.0, 1.0])
@pytest.mark.parametrize("loss", [0.0, 0.2])
def test_infectious_step_is_the_old_step(monkeypatch: Any, few: float | None, loss: float,
                                         blocks: tuple[int, int] | None) -> None:
    """The block step with its sparse path (few susceptible members: recovery and loss by
    one comparison each, infection by each susceptible member's neighbours) gives the
    old block step's arrays over whole episodes: the default switch, the matrix product
    always (0) and the sparse path always (1); the default blocks and blocks of 3 and 5
    graphs; no replica, one, several blocks and a short last block; no vaccine, one per replica, 30% of members, everyone; one and
    several members infected at the start, with and without the burn-in step."""
    from causalfair.systems import infectious as inf

    if few is not None:
        monkeypatch.setattr(inf, "_FEW_SUSCEPTIBLE", few)
    if blocks is not None:
        monkeypatch.setattr(inf, "_BLOCK_REPLICAS", blocks[0])
        monkeypatch.setattr(inf, "_SPARSE_BLOCK_REPLICAS", blocks[1])
    for case, (n, vaccinate) in enumerate([(0, "one"), (1, "one"), (2, "none"), (7, "all"),
                                           (300, "some"), (2500, "one")]):
        for burn_in, initial in ((1, (0,)), (0, (0, 33, 5))):
            sim = inf.InfectiousSimulator(0.5, 0.005, loss, burn_in, initial)
            seed = 10 * case + burn_in
            new = _infectious_episode(sim, n, seed, vaccinate, old=False)
            old = _infectious_episode(sim, n, seed, vaccinate, old=True)
            for i, (a, b) in enumerate(zip(new, old, strict=True)):
                _same(a, b, f"infectious n={n} {vaccinate} array {i}")
    # by default both paths run: the first steps have many susceptible members, the last few
    sim = inf.InfectiousSimulator(0.5, 0.005, loss, 1, (0,))
    health = _infectious_episode(sim, 600, 1, "one", old=False)[1::5]
    share = [(h == inf.SUS).mean() for h in health]
    assert share[0] > 0.1 and share[-1] < 0.01  # switch at 1/32 by default


def test_vectorised_infectious_env_is_the_old_env() -> None:
    """``VecInfectiousEnv`` (infectious-1 and infectious-harder) over an episode: health,
    rewards and counts as with the old block step (bench_envs's baseline)."""
    from contextlib import nullcontext

    from causalfair.systems.gym.infectious import VecInfectiousEnv

    runs: list[list[np.ndarray]] = []
    for old in (False, True):
        runs.append([])
        for harder in (False, True):
            env = VecInfectiousEnv(777, harder=harder)
            rng = np.random.default_rng(11)
            with OLD.old_infectious() if old else nullcontext():
                runs[-1].append(env.reset(rng).copy())
                for _ in range(20):
                    health, reward, _, _, info = env.step(rng.integers(0, 35, 777))
                    runs[-1] += [health.copy(), reward, info["newly_infected"],
                                 info["infected"]]
    for i, (a, b) in enumerate(zip(*runs, strict=True)):
        _same(a, b, f"VecInfectiousEnv array {i}")

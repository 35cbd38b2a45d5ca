"""Population lending environment (causalfair.systems.gym.lending): DelayedImpactEnv semantics,
Gymnasium / SB3 checkers, seeding, the mean-field link to the individual model."""

from __future__ import annotations

import tracemalloc

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from causalfair.systems.gym.lending import ENV_ID, LendingEnv, VecLendingEnv, delayed_impact_model
from causalfair.systems.lending.settings import lending_setting

K = 7


def _levels(obs: np.ndarray) -> np.ndarray:
    return obs[:, :K].argmax(axis=1)


def _groups(obs: np.ndarray) -> np.ndarray:
    return obs[:, K:K + 2].argmax(axis=1)


@pytest.mark.parametrize("kwargs", [{}, {"extras": True}, {"model": "lending-2", "max_steps": 50}])
def test_passes_gymnasium_and_sb3_checkers(kwargs):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    gym_check_env(LendingEnv(**kwargs), skip_render_check=True)
    sb3_check_env(LendingEnv(**kwargs), warn=True)


def test_registered_id_and_make():
    env = gym.make(ENV_ID, max_steps=10)
    assert isinstance(env.unwrapped, LendingEnv)
    obs, info = env.reset(seed=0)
    assert obs.shape == (9,) and obs.dtype == np.float32 and obs.sum() == 2
    assert set(info) >= {"group", "level", "will_repay", "mu", "cash", "tpr"}
    env.close()


def test_seeding_reproducible_and_matches_vector_form():
    def run(seed):
        env = LendingEnv("lending-3")
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for t in range(300):
            obs, r, *_ = env.step(t % 2)
            out.append(obs)
        return np.array(out), env.vec.mu.copy()

    a, mu_a = run(5)
    b, mu_b = run(5)
    c, _ = run(6)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(mu_a, mu_b)
    assert not np.array_equal(a, c)
    # the Gymnasium env is the vectorised env with one row: same seed, same trajectory
    vec = VecLendingEnv("lending-3", 1)
    obs, _ = vec.reset(seed=5)
    rows = [obs[0]]
    for t in range(300):
        obs, *_ = vec.step(np.array([t % 2]))
        rows.append(obs[0])
    np.testing.assert_array_equal(np.array(rows), a)


def test_delayed_impact_step_semantics():
    """Drift-free mode: reward +1 / -1 / 0; approved mass moves one level up on repay and
    down on default (0.01 each), rejections and edge moves keep mass, mass stays on the
    0.01 grid, and each next applicant comes from the already-updated distribution."""
    E = 64
    vec = VecLendingEnv("delayed-impact", E, max_steps=10_000)
    rng = np.random.default_rng(0)
    obs, info = vec.reset(seed=1)
    rows = np.arange(E)
    edge_moves = 0
    for _ in range(400):
        mu_before = vec.mu.copy()
        g, x = _groups(obs), _levels(obs)
        np.testing.assert_array_equal(g, vec.group)
        a = (rng.random(E) < 0.7).astype(int)
        obs, reward, term, trunc, info = vec.step(a)
        y = info["will_repay"]
        np.testing.assert_array_equal(info["group"], g)
        np.testing.assert_array_equal(info["level"], x)
        np.testing.assert_array_equal(reward, np.where(a == 1, np.where(y, 1.0, -1.0), 0.0))
        target = np.clip(x + np.where(a == 1, np.where(y, 1, -1), 0), 0, K - 1)
        want = mu_before.copy()
        moved = target != x
        edge_moves += int(((a == 1) & ~moved).sum())
        want[rows[moved], g[moved], x[moved]] -= 0.01
        want[rows[moved], g[moved], target[moved]] += 0.01
        np.testing.assert_allclose(info["mu"], want, atol=1e-12)
        np.testing.assert_allclose(info["mu"] * 100, np.round(info["mu"] * 100), atol=1e-9)
        # next applicant's level has mass in the updated distribution of its group
        assert (info["mu"][rows, _groups(obs), _levels(obs)] > 1e-12).all()
        assert not term.any() and not trunc.any()
    assert edge_moves > 0  # repayments at the top / defaults at the bottom happened
    np.testing.assert_allclose(vec.mu.sum(axis=2), 1.0, atol=1e-9)


def test_next_applicant_drawn_after_the_shift():
    """eps = 1 moves a level's whole mass: the next applicant can never come from a
    level emptied by the step before (it would if drawn before the shift)."""
    E = 256
    vec = VecLendingEnv("delayed-impact", E, eps=1.0, max_steps=10_000)
    obs, _ = vec.reset(seed=3)
    emptied = 0
    for _ in range(30):
        g, x = _groups(obs), _levels(obs)
        obs, _, _, _, info = vec.step(np.ones(E, dtype=int))
        same = _groups(obs) == g
        emptied += int((same & (info["mu"][np.arange(E), g, x] == 0)).sum())
        assert (info["mu"][np.arange(E), _groups(obs), _levels(obs)] > 0).all()
    assert emptied > 0


def test_outcome_drawn_with_applicant_matches_p_repay():
    """would-repay outcomes exist for rejected applicants too, with P = p_repay(x, g)."""
    vec = VecLendingEnv("lending-1", 2000, max_steps=10_000)
    vec.reset(seed=0)
    ys, xs, gs = [], [], []
    for _ in range(50):
        _, _, _, _, info = vec.step(np.zeros(2000, dtype=int))  # always reject
        ys.append(info["will_repay"])
        xs.append(info["level"])
        gs.append(info["group"])
    y, x, g = map(np.concatenate, (ys, xs, gs))
    p = lending_setting("lending-1").p_repay[g, x]
    z = (y.sum() - p.sum()) / np.sqrt((p * (1 - p)).sum())
    assert abs(z) < 4
    assert abs(np.mean(g == 0) - 0.5) < 4 * np.sqrt(0.25 / g.size)


def test_truncation_termination_and_autoreset():
    env = LendingEnv("lending-1", max_steps=5)
    env.reset(seed=0)
    flags = [env.step(0)[2:4] for _ in range(5)]
    assert flags[:4] == [(False, False)] * 4 and flags[4] == (False, True)
    # cash 2, loan 1: always approving the lowest level (p = 0.1) soon goes below the loan
    env = LendingEnv("delayed-impact", cash=2.0, max_steps=1000)
    env.reset(seed=0)
    for _ in range(1000):
        _, _, term, trunc, info = env.step(1)
        if term:
            break
    assert term and not trunc and info["cash"] < 1.0
    vec = VecLendingEnv("lending-1", 4, max_steps=3, autoreset=True)
    vec.reset(seed=0)
    for _ in range(3):
        obs, _, term, trunc, info = vec.step(np.zeros(4, dtype=int))
    assert trunc.all() and "final_obs" in info and (vec.t == 0).all()
    np.testing.assert_allclose(vec.mu, np.broadcast_to(vec.model.initial, vec.mu.shape))


def test_tpr_extras_and_info_is_a_copy():
    vec = VecLendingEnv("lending-1", 3, extras=True)
    obs, _ = vec.reset(seed=2)
    tp = np.zeros((3, 2))
    pos = np.zeros((3, 2))
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = rng.integers(0, 2, 3)
        obs, _, _, _, info = vec.step(a)
        pos[np.arange(3), info["group"]] += info["will_repay"]
        tp[np.arange(3), info["group"]] += info["will_repay"] & (a == 1)
    tpr = np.divide(tp, pos, out=np.zeros_like(tp), where=pos > 0)
    np.testing.assert_allclose(obs[:, K + 2:], tpr, rtol=1e-6)
    info["mu"][:] = -1.0
    assert (vec.mu >= 0).all()


def test_no_state_history_kept():
    """Steps allocate no growing state (the anchors deep-copied it every step): 2,000
    steps under tracemalloc peak below 200 kB (a copy of mu alone per step would be
    ~2,000 x 250 bytes)."""
    env = LendingEnv("delayed-impact", max_steps=20_000)
    env.reset(seed=0)
    for _ in range(200):
        env.step(1)
    tracemalloc.start()
    for _ in range(2_000):
        env.step(1)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 200_000, peak


@pytest.mark.parametrize("model", ["lending-3", "delayed-impact"])
def test_mean_field_one_step(model):
    """Mean-field link (lending.md section B). From the initial state, where every level
    with mass holds >= eps (so no mass bound binds), one step changes mu_g in
    expectation by eps * P(g) * (mu_g K_pi,g - mu_g), K_pi the individual model's
    policy kernel: the average over 200,000 independent environments (same state,
    independent applicants) matches it within 5 standard errors in every entry.
    "delayed-impact" is the drift-free case (rejections move nothing, K_pi,g(x, x) =
    1 - pi(x) for interior levels); "lending-3" has group-dependent drift."""
    E = 200_000
    lm = delayed_impact_model() if model == "delayed-impact" else lending_setting(model)
    policy = np.random.default_rng(0).uniform(0.1, 0.9, size=(2, K))
    vec = VecLendingEnv(lm, E, eps=0.01)
    obs, _ = vec.reset(seed=4)
    mu0 = vec.mu[0].copy()
    assert (mu0[mu0 > 0] >= 0.01).all()  # no bound binds
    a = (np.random.default_rng(1).random(E) < policy[_groups(obs), _levels(obs)]).astype(int)
    vec.step(a)
    delta = vec.mu - mu0  # (E, 2, K)
    Kpi = lm.tabular.policy_kernel(policy)  # (2, K, K)
    w = lm.group_weights
    want = 0.01 * w[:, None] * (np.einsum("gx,gxy->gy", mu0, Kpi) - mu0)
    mean = delta.mean(axis=0)
    se = delta.std(axis=0, ddof=1) / np.sqrt(E)
    ok = np.abs(mean - want) <= 5 * se + 1e-12
    assert ok.all(), (mean, want, se)
    assert np.abs(want).max() > 20 * se.max()  # the test has power: the change is visible


def test_mean_field_fails_when_a_bound_binds():
    """With eps = 0.5 > mu_g(x) the mass moved is mu_g(x), not eps: the formula's
    premise fails and so does the formula (shows what 'no bound binds' means)."""
    E = 100_000
    lm = delayed_impact_model()
    vec = VecLendingEnv(lm, E, eps=0.5)
    obs, _ = vec.reset(seed=0)
    mu0 = vec.mu[0].copy()
    vec.step(np.ones(E, dtype=int))
    delta = vec.mu - mu0
    mean, se = delta.mean(axis=0), delta.std(axis=0, ddof=1) / np.sqrt(E)
    Kpi = lm.tabular.policy_kernel(np.ones((2, K)))
    want = 0.5 * lm.group_weights[:, None] * (np.einsum("gx,gxy->gy", mu0, Kpi) - mu0)
    assert (np.abs(mean - want) > 10 * se + 1e-12).any()


@pytest.mark.slow
def test_reference_behaviour_threshold_policy():
    """20 seeds x 10,000 steps, approve iff level index >= 3 (DelayedImpactEnv mode): at
    step 10,000 group 0's mean level is about 3.06 and group 1's 2.40 (lending.md)."""
    vec = VecLendingEnv("delayed-impact", 20, max_steps=10_000)
    obs, _ = vec.reset(seed=0)
    for _ in range(10_000):
        obs, _, term, trunc, _ = vec.step((_levels(obs) >= 3).astype(int))
        assert not term.any()
    assert trunc.all()
    means = vec.mean_level().mean(axis=0)
    assert abs(means[0] - 3.06) < 0.1 and abs(means[1] - 2.40) < 0.1, means
    # always-approve drives both groups toward the two sticky edges
    vec = VecLendingEnv("delayed-impact", 20, max_steps=10_000)
    vec.reset(seed=0)
    for _ in range(10_000):
        vec.step(np.ones(20, dtype=int))
    edges = vec.mu[:, :, [0, K - 1]].sum(axis=2).mean(axis=0)
    assert (edges > 0.65).all(), edges


@pytest.mark.parametrize("kw, words", [
    ({"eps": "abc"}, "eps: must be a finite number > 0, got 'abc'."),
    ({"cash": None}, "cash: must be a finite number > 0, got None."),
    ({"loan": [1]}, "loan: must be a finite number > 0, got [1]."),
    ({"loan": True}, "loan: must be a finite number > 0, got True."),
    ({"model": "lending-harder"}, "model: expected a LendingModel or a setting name (lending-1, "
                                  "lending-2, lending-3, delayed-impact), got 'lending-harder'."),
])
def test_bad_arguments_name_the_field(kw, words):
    from causalfair.errors import ModelError

    with pytest.raises(ModelError) as exc:
        VecLendingEnv(**kw)
    assert str(exc.value) == words
    with pytest.raises(ModelError):
        gym.make(ENV_ID, **kw)

"""The Gymnasium environment over any system: causalfair/System-v0,
LendingHarder-v0 and Replicator-v0 pass both checkers, are seeded, map actions through
DecisionSet.allowed, and step the system's own dynamics."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from scipy.stats import norm

import causalfair as cf
from causalfair.errors import InputError
from causalfair.systems.replicator import REPLICATOR_DEFAULTS
from tests.conftest import check_gym_env, gym_episode


@pytest.mark.parametrize("env_id,kw", [("causalfair/LendingHarder-v0", {}),
                                       ("causalfair/Replicator-v0", {}),
                                       ("causalfair/System-v0", {"system": "attention-harder"}),
                                       ("causalfair/System-v0", {"system": "lending-3"})])
def test_both_checkers_pass_and_episodes_are_seeded(env_id, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # unbounded feature boxes
        check_gym_env(env_id, **kw)
    runs = []
    for seed in (4, 4, 5):
        traj, term, trunc, _ = gym_episode(env_id, seed, None,
                                           lambda env, t: env.action_space.sample(),
                                           lambda r, info: [r], **kw)
        assert trunc and not term
        runs.append(traj)
    assert runs[0] == runs[1]
    if env_id != "causalfair/Replicator-v0":  # the replicator is deterministic
        assert runs[0] != runs[2]


def test_the_replicator_env_steps_the_replicator_equation():
    env = gym.make("causalfair/Replicator-v0").unwrapped
    obs, _ = env.reset(seed=0)
    U = np.array(REPLICATOR_DEFAULTS["U"])
    th = REPLICATOR_DEFAULTS["thresholds"]
    q = np.array(REPLICATOR_DEFAULTS["q0"])
    assert obs.reshape(2, 2)[:, 0] == pytest.approx(q, abs=1e-7)  # float32 observations
    for a in ([0, 4], [2, 2], [4, 1]):
        obs, r, *_ = env.step(np.array(a))
        tpr = 1 - norm.cdf(np.array([th[i] for i in a]) - 1)
        fpr = 1 - norm.cdf(np.array([th[i] for i in a]) + 1)
        w_pos = U[1, 1] * tpr + U[1, 0] * (1 - tpr)
        w_neg = U[0, 1] * fpr + U[0, 0] * (1 - fpr)
        reward = float((q * tpr).sum())
        q = q * w_pos / (q * w_pos + (1 - q) * w_neg)
        assert obs.reshape(2, 2)[:, 0] == pytest.approx(q, abs=1e-7)
        assert r == pytest.approx(reward, abs=1e-12)


def test_actions_go_through_allowed_and_lending_rewards_are_the_loans():
    env = gym.make("causalfair/LendingHarder-v0").unwrapped
    env.reset(seed=1)
    assert env.allowed.tolist() == [0, 1]
    for _ in range(20):
        _, r, *_ = env.step(0)
        assert r == 0.0  # denied: no loan, no profit
    env.reset(seed=2)
    p = cf.systems.make("lending-harder").tabular.aux["p_repay"][0]
    expected = {round(float(1.0 * q - (1 - q)), 12) for q in p}  # interest 1, loan 1
    # approved: the tabular model's expected profit at the applicant's level
    assert {round(env.step(1)[1], 12) for _ in range(20)} <= expected
    att = gym.make("causalfair/System-v0", system="attention-1").unwrapped
    assert att.allowed.tolist() == [1, 2, 3, 4]  # "no attention" is not the policy's to take


def test_budgeted_systems_are_refused_with_their_own_env_named():
    with pytest.raises(InputError, match="causalfair/Infectious-v0"):
        gym.make("causalfair/System-v0", system="infectious-1")
    cf.systems.make("infectious-1")  # the system itself is fine

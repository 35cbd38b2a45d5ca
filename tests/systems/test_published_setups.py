"""The seeds' published setups as options (issue 29 point 1): attention with one central
policy, seed 001's per-site increases, allocation parity (Eq. 9) and observed long-term
signal, A-PPO's post-step gap, and a replicator setting where the constraint binds."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import SystemError_
from causalfair.systems.attention import (
    CENTRAL_LOGITS,
    FPPO_INCREASE,
    HISTORY,
    WINDOW,
    allocation_parity,
)
from causalfair.train.config import TrainConfig
from causalfair.train.generic import SystemTrainer
from causalfair.train.objectives import appo_advantage
from causalfair.train.population import PopulationEnv, episode_values, myopic


def _greedy(p, units):
    """The published ``process_action`` on one row of probabilities, in plain Python."""
    p = list(p)
    out = [0] * len(p)
    for _ in range(units):
        k = max(range(len(p)), key=lambda i: (p[i], -i))
        out[k] += 1
        p[k] -= 1.0 / units
    return out


def test_central_actions_are_logits_through_softmax_and_greedy_placement():
    # fails if the central policy's actions were read as priorities (weights 1..7) or the
    # logits used as weights without the exponential (negative weights)
    system = cf.systems.make("attention-central")
    sim = system.make_simulator()
    assert system.n_actions == 1 + len(CENTRAL_LOGITS) and 0 not in system.decisions.allowed
    rng = np.random.default_rng(0)
    s = sim.reset(4, None, rng)
    d = rng.integers(1, system.n_actions, size=20)
    res = sim.step(s, d, sim.draw_noise(20, rng))
    for r in range(4):
        z = np.exp(np.asarray(CENTRAL_LOGITS)[d[5 * r:5 * r + 5] - 1])
        assert res.state.attention[5 * r:5 * r + 5].tolist() == _greedy(z / z.sum(), 6)
    # one site at logit +3, the rest at -3: softmax 0.990 -> all 6 units there (priorities
    # 7 and 1 would give 3 : 1 : 1 : 1 : 0 by share 7/11)
    res = sim.step(s, np.tile([7, 1, 1, 1, 1], 4), sim.draw_noise(20, rng))
    assert res.state.attention[:5].tolist() == [6, 0, 0, 0, 0]


def test_central_observation_is_the_published_history_of_every_site():
    # fails if a site saw only its own history, or the window delta were a one-step ratio
    system = cf.systems.make("attention-central")
    sim = system.make_simulator()
    rng = np.random.default_rng(1)
    s = sim.reset(2, None, rng)
    seen, occ, alloc = [], [], []
    for _ in range(HISTORY + 2):
        res = sim.step(s, rng.integers(1, 8, size=10), sim.draw_noise(10, rng))
        s = res.state
        occ.append(res.info["incidents"].reshape(2, 5))
        seen.append(s.seen.reshape(2, 5))
        alloc.append(s.attention.reshape(2, 5))
    obs = sim.observe(s)
    assert obs.features.shape == (10, 4 * HISTORY * 5 + 5)
    hist = obs.features[:, :-5].reshape(10, HISTORY, 5, 4)
    last = slice(-HISTORY, None)
    for unit in range(10):
        r = unit // 5
        np.testing.assert_array_equal(hist[unit, :, :, 0], np.stack(seen[last])[:, r])
        np.testing.assert_array_equal(hist[unit, :, :, 1], np.stack(occ[last])[:, r])
        np.testing.assert_array_equal(hist[unit, :, :, 2], np.stack(alloc[last])[:, r])
        np.testing.assert_array_equal(obs.features[unit, -5:], np.eye(5)[unit % 5])
    # the newest delta: seen / (occurred + 1) summed over the 8-step window
    want = np.stack(seen[last]).sum(0) / (np.stack(occ[last]).sum(0) + 1.0)
    np.testing.assert_allclose(hist[::5, -1, :, 3], want)
    # no names: the 165 columns pair no individuals, so the audit reports no Lambda
    assert system.features is None


def test_seed_001_increases_and_refusals():
    sim = cf.systems.make("attention-central", increase="f-ppo").make_simulator()
    assert tuple(sim.up) == FPPO_INCREASE
    # a site left alone rises by its own increase (fails with ELBERT's uniform 0.1)
    s = sim.reset(1, None, np.random.default_rng(0))
    res = sim.step(s, np.array([7, 7, 7, 0, 0]), np.full(5, 0.5))
    np.testing.assert_allclose(res.state.rate[3:] - s.rate[3:], FPPO_INCREASE[3:])
    for kw, field in (({"increase": "fppo"}, "increase"), ({"policy": "centre"}, "policy"),
                      ({"long_gap": "seen"}, "long_gap"), ({"logits": [1, 1]}, "logits")):
        with pytest.raises(SystemError_, match=f"^{field}: "):
            cf.systems.make("attention-central", **kw)
    with pytest.raises(SystemError_, match="^logits: used only with policy='central'"):
        cf.systems.make("attention-1", logits=[0, 1])


def test_allocation_parity_is_seed_001s_eq_9():
    # fails if the share were divided by K instead of N w, or the window ignored
    units = 6
    a = np.array([[2, 1, 1, 1, 1]] * 4, dtype=float)  # equal priority: site 1 gets 2 of 6
    assert allocation_parity(a, units)[()] == pytest.approx(2 / 6 - 1 / 5)
    b = np.array([[6, 0, 0, 0, 0]] * 3 + [[0, 6, 0, 0, 0]] * 2, dtype=float)
    # the last 2 steps only: site 2 got 12 of 12 units
    assert allocation_parity(b, units, window=2)[()] == pytest.approx(1 - 1 / 5)
    # the whole history: shares (18, 12, 0, 0, 0) / 30
    assert allocation_parity(b, units)[()] == pytest.approx(18 / 30 - 1 / 5)
    # per replica: (T, replicas, K) -> (replicas,)
    both = np.stack([a[:3], a[:3]], axis=1)
    np.testing.assert_allclose(allocation_parity(both, units), [2 / 6 - 1 / 5] * 2)
    with pytest.raises(SystemError_, match="^units: "):
        allocation_parity(a, 0)


def test_observed_long_term_gap_is_seed_001s_training_signal():
    # fails if "observed" read the true rates, or kept more than the 300-step window
    sim = cf.systems.make("attention-1", long_gap="observed").make_simulator()
    rng = np.random.default_rng(2)
    s = sim.reset(1, None, rng)
    assert sim.long_term_gap(s)[0] == 0.0  # nothing occurred yet
    ys = []
    for _ in range(WINDOW + 5):
        res = sim.step(s, np.full(5, 4), sim.draw_noise(5, rng))
        s = res.state
        ys.append(res.info["incidents"])
    h = np.sum(ys[-WINDOW:], axis=0)
    assert sim.long_term_gap(s)[0] == pytest.approx(np.abs(h - h.mean()).max() / h.max())
    true = cf.systems.make("attention-1").make_simulator()
    lam = s.rate
    assert true.long_term_gap(s)[0] == pytest.approx(np.abs(lam - lam.mean()).max())


def test_a_ppo_reads_the_gap_after_the_step_on_the_published_setup():
    # fails if appo_gap="after" still passed D_t (the pre-step gap) to the fairness terms
    system = cf.systems.make("attention-central", horizon=2)
    tr = SystemTrainer(system, TrainConfig(algo="a-ppo", iterations=1, n_individuals=10))
    assert tr.config.appo_gap == "after"  # the system's published setup
    supply, demand = np.zeros((2, 10)), np.zeros((2, 10))
    supply[0, 0], demand[0, [0, 1]] = 1.0, 1.0  # replica 0: site 1 found 1 of 1, site 2 0 of 1
    adv = np.array([[0.5, -0.2], [0.1, 0.3]])
    group = np.tile(np.arange(5), 2)
    out, _ = tr._fair_advantage(adv, {"supply": supply, "demand": demand}, np.arange(2),
                                np.repeat(np.arange(2), 5), group)
    gap = np.array([[0.0, 0.0], [0.5, 0.0], [0.5, 0.0]])  # replica 0: rates (1/2, 0, 0, 0, 0)
    c = tr.config
    want = appo_advantage(adv, gap[1:], gap[1:] - gap[:-1], c.appo_beta0, c.appo_beta1,
                          c.appo_beta2, c.appo_omega)
    np.testing.assert_allclose(out, want)
    before = appo_advantage(adv, gap[:-1], gap[1:] - gap[:-1], c.appo_beta0, c.appo_beta1,
                            c.appo_beta2, c.appo_omega)
    assert not np.allclose(out, before)
    # the site systems keep the pre-step gap unless asked
    tr1 = SystemTrainer(cf.systems.make("attention-1", horizon=2),
                        TrainConfig(algo="a-ppo", iterations=1, n_individuals=10))
    assert tr1.config.appo_gap == "before"
    with pytest.raises(cf.errors.ConfigError, match="^appo_gap: "):
        TrainConfig(appo_gap="later")


def test_attention_central_trains_with_the_command_and_audits(tmp_path, capsys):
    # fails if the central system could not go through `causalfair train` and the audit
    run = tmp_path / "run"
    assert main(["train", "--system", "attention-central", "--param", "horizon=12", "--algo",
                 "ppo", "--iterations", "1", "--individuals", "40", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["decompose", "--system", "attention-central", "--param", "horizon=12",
                 "--checkpoint", str(run / "checkpoint.pt"), "--n", "30", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    d = d.get("decomposition", d)
    assert all(math.isfinite(d[k]) for k in ("C", "DPE", "IPE", "SPE"))
    assert abs(d["IPE"]) < 1e-12  # attention-1's h0 is constant (attention.py's docstring)
    assert d.get("Lambda") is None  # no feature names: nothing pairs individuals


def test_replicator_binding_makes_the_parity_constraint_bind():
    # fails if the binding setting were replicator-1 again: there Myopic-Fair equals Myopic
    # and Myopic already meets V_g >= H - 1.5
    env = PopulationEnv(cf.systems.make("replicator-binding"))
    H, c = env.H, env.H - 1.5
    m, mf = episode_values(env, myopic(env, 0.0)), episode_values(env, myopic(env, 0.5))
    assert m["V_g"][0] < c - 0.5  # the unconstrained policy violates the constraint
    assert mf["V_g"][0] > m["V_g"][0] + 0.3 and mf["V_r"][0] < m["V_r"][0] - 0.2
    assert not np.allclose(myopic(env, 0.5).act(env.q0[None], 0), myopic(env, 0.0).act(
        env.q0[None], 0))
    one = PopulationEnv(cf.systems.make("replicator-1", horizon=H))
    m1, mf1 = episode_values(one, myopic(one, 0.0)), episode_values(one, myopic(one, 0.5))
    assert m1["V_g"][0] > one.H - 1.5 and mf1["V_r"][0] == m1["V_r"][0]


def test_the_gymnasium_env_offers_the_published_observation():
    # fails if history=True still returned the last step only, or ignored the f-ppo rates
    from causalfair.systems.gym.attention import AttentionEnv

    env = AttentionEnv(history=True, increase="f-ppo")
    assert env.observation_space.shape == (4 * HISTORY * 5,)
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        obs, *_ = env.step(np.array([3.0, -3.0, -3.0, -3.0, -3.0], dtype=np.float32))
    hist = obs.reshape(HISTORY, 5, 4)
    assert hist[-1, :, 2].tolist() == [6, 0, 0, 0, 0] and hist[:-3].sum() == 0
    # sites 2..5 got nothing for 3 steps: each rose by its own seed-001 increase
    np.testing.assert_allclose(env.vec.state.rate[1:] - np.array([6.0, 4.0, 3.0, 1.5]),
                               3 * np.array(FPPO_INCREASE[1:]))


def test_docs_name_the_central_observations_departures():
    """docs/simulators.md says what the published wrappers' observation is and where
    causalfair's differs (delta over 8 steps, site-by-site order), and the code does what
    it says (the published pocar / ELBERT / Fairness-in-RL `ppo_wrapper_env.py` sum delta
    over the episode or 300 steps and list all sites' seen, then occurred, ...)."""
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[2] / "docs/simulators.md")
                    .read_text(encoding="utf-8").split())
    assert "as Fairness-in-RL's code" not in text
    section = text.split("### `attention-central`", 1)[1].split("###", 1)[0]
    for words in ("**Two departures**", "whole episode so far", "last 300 steps",
                  "site by site", "all sites' seen, then all occurred"):
        assert words in section, words
    # site by site: columns 0..3 are site 0's (seen, occurred, allocation, delta) of the
    # oldest step; the published order would put site 1's seen in column 1
    sim = cf.systems.make("attention-central").make_simulator()
    s = sim.reset(1, None, np.random.default_rng(0))
    for _ in range(HISTORY):
        s = sim.step(s, np.array([7, 1, 1, 1, 1]), np.full(5, 0.999)).state
    row = sim.observe(s).features[0, 4 * 5 * (HISTORY - 1):4 * 5 * HISTORY]
    np.testing.assert_array_equal(row[0:4:2], s.history[0, -1, 0, [0, 2]])
    np.testing.assert_array_equal(row[4:8:2], s.history[0, -1, 1, [0, 2]])

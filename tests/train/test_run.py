"""Trainer runs: determinism, checkpoints the audit loads, resume after a kill, CLI smoke."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
import torch

from causalfair.engines.effects import decompose
from causalfair.policies.core import load_checkpoint
from causalfair.policies.grid import policy_table
from causalfair.systems.lending.settings import lending_setting
from causalfair.train import EXIT_AFTER_ENV, ConfigError, TrainConfig, train
from causalfair.train.rollout import IndividualRollout, PopulationRollout
from tests.conftest import describe, run_cmd

TINY = dict(n_individuals=64, horizon=5, hidden=(16,), n_epochs=2, n_minibatches=2,
            eval_every=2, checkpoint_every=3)


def _env():
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def test_same_seed_same_weights_and_different_seed_differs():
    cfg = TrainConfig(algo="ppo-cb", iterations=3, **TINY)
    a = train(cfg)
    b = train(cfg)
    c = train(cfg.replace(seed=1))
    for k, v in a.policy.module.state_dict().items():
        assert torch.equal(v, b.policy.module.state_dict()[k])
    assert not np.array_equal(a.table, c.table)


@pytest.mark.parametrize("algo", ["ppo", "ppo-c", "ppo-cb", "a-ppo", "f-ppo-l", "f-ppo",
                                  "elbert-po"])
@pytest.mark.parametrize("env", ["individual", "population"])
def test_every_algorithm_runs_and_audits_exactly(algo, env):
    cfg = TrainConfig(algo=algo, env=env, iterations=2, pop_steps=8, **TINY)
    res = train(cfg)
    model = lending_setting("lending-1").tabular
    # the returned policy, audited by the exact engine, gives the logged metrics
    d = decompose(model, res.policy, cfg.horizon)
    assert d.C == pytest.approx(res.metrics["C"], abs=1e-6)
    last = res.history.iloc[-1]
    assert last["exact/C"] == pytest.approx(res.metrics["C"], abs=1e-6)
    for key in ("losses/pg_loss", "losses/v_loss", "losses/kl_penalty", "losses/fairness_penalty"):
        assert np.isfinite(last[key])
    if algo in ("ppo", "a-ppo", "f-ppo-l", "f-ppo", "elbert-po"):
        assert last["losses/fairness_penalty"] == 0.0


def test_checkpoint_loads_in_audit_with_metadata(tmp_path):
    cfg = TrainConfig(algo="ppo-c", iterations=4, **TINY)
    res = train(cfg, out=tmp_path)
    model = lending_setting("lending-1").tabular
    pol, meta = load_checkpoint(res.checkpoint, model)
    md = meta["metadata"]
    assert md["algorithm"] == "ppo-c" and md["setting"] == "lending-1" and md["seed"] == 0
    assert md["iteration"] == 4 and md["config"]["iterations"] == 4
    assert md["metrics"]["C"] == pytest.approx(res.metrics["C"], abs=1e-9)
    np.testing.assert_allclose(policy_table(pol, model), res.table, atol=1e-6)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    assert {"exact/C", "exact/DPE", "exact/IPE", "exact/SPE", "exact/Lambda"} <= set(rows[1])
    assert (tmp_path / "metrics.csv").read_text().startswith("iteration")


@pytest.mark.parametrize("algo,env", [("ppo-cb", "individual"), ("f-ppo", "population")])
def test_resume_after_kill_equals_uninterrupted(tmp_path, algo, env):
    cfg = TrainConfig(algo=algo, env=env, iterations=7, pop_steps=8, massage_start=1, **TINY)
    full = train(cfg, out=tmp_path / "full")
    args = json.dumps(cfg.to_dict())
    code = ("import json,sys; from causalfair.train import train, TrainConfig; "
            "train(TrainConfig.from_dict(json.loads(sys.argv[1])), out=sys.argv[2])")
    env = _env()
    env[EXIT_AFTER_ENV] = "5"  # dies after iteration 5; last checkpoint at 3
    run_cmd([sys.executable, "-c", code, args, tmp_path / "cut"], env=env, timeout=120,
            expect=75)
    _, meta = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert meta["metadata"]["iteration"] == 3
    resumed = train(cfg, out=tmp_path / "cut", resume=True)
    for k, v in full.policy.module.state_dict().items():
        assert torch.equal(v, resumed.policy.module.state_dict()[k]), k
    a = full.history.drop(columns=[c for c in full.history if c.startswith("time/")])
    b = resumed.history.drop(columns=[c for c in resumed.history if c.startswith("time/")])
    assert a.equals(b)
    rows = (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["iteration"] for r in rows] == list(range(1, 8))


def test_resume_refuses_changed_config(tmp_path):
    cfg = TrainConfig(algo="ppo", iterations=3, **TINY)
    train(cfg, out=tmp_path)
    with pytest.raises(ConfigError, match="lr"):
        train(cfg.replace(lr=0.1, iterations=5), out=tmp_path, resume=True)
    with pytest.raises(Exception, match="does not exist"):
        train(cfg, out=tmp_path / "nothing", resume=True)


def test_warm_start_from_checkpoint(tmp_path):
    cfg = TrainConfig(algo="ppo", iterations=3, **TINY)
    first = train(cfg, out=tmp_path)
    warm = train(cfg.replace(iterations=1, lr=1e-12), init_checkpoint=first.checkpoint)
    np.testing.assert_allclose(warm.table, first.table, atol=1e-6)


def test_bad_config_fields_are_named():
    with pytest.raises(ConfigError, match="algo"):
        TrainConfig(algo="sac")
    with pytest.raises(ConfigError, match="iterations"):
        TrainConfig(iterations=0)


def test_cli_smoke(tmp_path, cli_here):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "causalfair", "train", "--setting", "lending-1", "--algo",
           "ppo-cb", "--seed", "0", "--iterations", "3", "--out", str(out), "--individuals",
           "64", "--horizon", "5", "--json"]
    p = run_cmd(cmd, env=_env(), timeout=120, expect=0)
    res = json.loads(p.stdout)
    assert set(res["metrics"]) >= {"C", "DPE", "IPE", "SPE", "Lambda", "utility"}
    # the checkpoint audited in this process (a second interpreter would import torch again)
    p = cli_here("decompose", "--horizon", "5", "--checkpoint", out / "checkpoint.pt", "--json",
                 cwd=tmp_path)
    assert p.returncode == 0, describe(p, 0)
    assert json.loads(p.stdout)["C"] == pytest.approx(res["metrics"]["C"], abs=1e-6)
    run_cmd(cmd[:3] + ["--algo", "nope", "--out", out], env=_env(), timeout=60, expect=2)


def test_individual_rollout_matches_exact_propagation():
    from causalfair.train.rollout import IndividualRollout

    lm = lending_setting("lending-3")
    model = lm.tabular
    table = np.array([[0.1, 0.2, 0.5, 0.9, 0.9, 1.0, 1.0], [0.0, 0.3, 0.6, 0.8, 1.0, 1.0, 1.0]])
    ro = IndividualRollout(lm, 40000, 3)
    b = ro.collect(table, np.random.default_rng(0))
    mu = model.propagate(table, 3)
    for g in range(2):
        m = b.group[0] == g
        emp = np.bincount(b.level[2][m], minlength=7) / m.sum()
        se = np.sqrt(mu[2, g] * (1 - mu[2, g]) / m.sum())
        assert np.all(np.abs(emp - mu[2, g]) < 5 * se + 1e-12)
    d = decompose(model, table, 3)
    per_ind = b.reward.sum(0)
    se = per_ind.std() / np.sqrt(per_ind.size)
    assert abs(per_ind.mean() - d.total_utility) < 5 * se


def test_population_rollout_conserves_mass_and_logs_w1():
    from causalfair.train.rollout import PopulationRollout

    lm = lending_setting("lending-1")
    ro = PopulationRollout(lm, 6, 50, max_steps=1000)
    table = np.full((2, 7), 0.7)
    b0 = ro.collect(table, np.random.default_rng(1))  # starts the environments
    assert b0.level.shape == (50, 6)
    w1_0 = ro._w1().copy()
    b = ro.collect(table, np.random.default_rng(2))
    np.testing.assert_allclose(ro.env.mu.sum(2), 1.0, atol=1e-12)
    assert (ro.env.mu >= -1e-12).all()
    np.testing.assert_allclose(w1_0 + b.signals["dw1_env"].sum(0), ro._w1(), atol=1e-9)
    assert b.action.shape == (50, 6) and b.reward[~b.action].max() == 0.0


def test_population_appo_gap_is_each_environments_running_gap():
    """A-PPO's D_t and F-PPO-L's branch on the population env read each environment's
    running TPR gap before the step: carried from the previous rollout and restarted when
    the environment resets (it was the rollout's own applicants' gap: 0 at every
    rollout's first step)."""
    from causalfair.train.rollout import PopulationRollout

    lm = lending_setting("lending-1")
    ro = PopulationRollout(lm, 4, 40, max_steps=30)  # episodes end inside the rollout
    table = np.full((2, 7), 0.7)
    ro.collect(table, np.random.default_rng(1))
    tpr = ro.env.tpr()
    carried = np.abs(tpr[:, 0] - tpr[:, 1])
    b = ro.collect(table, np.random.default_rng(2))
    sig = ro.signals(b)
    assert carried.max() > 0
    np.testing.assert_array_equal(sig["gap_state"][0], carried)
    np.testing.assert_array_equal(sig["cohort_gap"][0], carried)
    # by hand after an environment's first reset: its TPRs restart from that episode's
    # applicants (tp / pos replayed from the batch)
    first_end = b.done.argmax(0)
    assert b.done.any(0).all()
    for e in range(4):
        hits, seen = np.zeros(2), np.zeros(2)
        for s in range(first_end[e] + 1, 40):
            rate = np.divide(hits, seen, out=np.zeros(2), where=seen > 0)
            assert sig["gap_state"][s, e] == pytest.approx(abs(rate[0] - rate[1]), abs=1e-12)
            g, y = b.group[s, e], b.repay[s, e]
            seen[g] += y
            hits[g] += b.action[s, e] & y
            if b.done[s, e]:
                hits[:], seen[:] = 0.0, 0.0


def test_f_ppo_massaging_never_widens_a_cohorts_tpr_gap():
    """The lending trainer's rollout with F-PPO's massaging: every epoch's cohort ends with a
    TPR gap no larger than without massaging (same random numbers: massaging draws none).
    Flipping every low-confidence applicant at once pushed gaps of 0.2 to 1.0."""
    from causalfair.train.objectives import cohort_tpr_gap
    from causalfair.train.rollout import IndividualRollout

    lm = lending_setting("lending-1")
    ro = IndividualRollout(lm, 512, 6)
    table = np.linspace(0.3, 0.7, 14).reshape(2, 7)
    plain = ro.collect(table, np.random.default_rng(3))
    mass = ro.collect(table, np.random.default_rng(3), massage_tau=0.25)
    assert mass.massaged > 0
    g0 = np.abs(cohort_tpr_gap(plain.action, plain.repay, plain.group))
    np.testing.assert_array_equal(mass.level[0], plain.level[0])
    g1 = np.abs(cohort_tpr_gap(mass.action[:1], mass.repay[:1], mass.group[:1]))
    assert g1[0] < g0[0]  # the first epoch: the same cohort, its gap lowered
    assert g1[0] <= 2.0 / min(((mass.group[0] == g) & mass.repay[0]).sum() for g in (0, 1))


def test_appo_state_term_counts_on_the_individual_mdp():
    """A-PPO's state gap D_t on the lending trainer's individual MDP is the TPR gap of the
    rollout's decisions before epoch t (by hand below), so its min-max scaled term varies
    and appo_beta1 changes the training (D_t was the whole batch's gap, one number, which
    min-max scaling turned into 0: beta1 = 0, 0.25 and 100 trained the same weights)."""
    from causalfair.train.rollout import IndividualRollout

    lm = lending_setting("lending-1")
    ro = IndividualRollout(lm, 64, 4)
    b = ro.collect(np.full((2, 7), 0.6), np.random.default_rng(0))
    sig = ro.signals(b)
    tp, pos = np.zeros(2), np.zeros(2)
    for t in range(4):
        rate = np.divide(tp, pos, out=np.zeros(2), where=pos > 0)
        np.testing.assert_allclose(sig["gap_state"][t], abs(rate[0] - rate[1]), atol=1e-15)
        for g in (0, 1):
            m = (b.group[t] == g) & b.repay[t]
            pos[g] += m.sum()
            tp[g] += (m & b.action[t]).sum()
    assert np.ptp(sig["gap_state"]) > 0
    small = dict(algo="a-ppo", iterations=1, n_individuals=64, horizon=4, n_epochs=1,
                 hidden=(8,))
    a = train(TrainConfig(appo_beta1=0.0, **small)).table
    b2 = train(TrainConfig(appo_beta1=100.0, **small)).table
    assert not np.array_equal(a, b2)


@pytest.mark.parametrize("env", ["individual", "population"])
def test_appo_gap_after_is_read_by_the_lending_trainer(env):
    """``appo_gap="after"`` (the published codes' D_{t+1}) on the lending trainer: the gap of
    the epochs through t (individual MDP) or each environment's running gap after the step
    (population env); it was accepted and ignored (the same weights as "before")."""
    lm = lending_setting("lending-1")
    table = np.full((2, 7), 0.6)
    if env == "individual":
        ro = IndividualRollout(lm, 64, 4)
        sig = ro.signals(ro.collect(table, np.random.default_rng(0)))
        np.testing.assert_array_equal(sig["gap_state_after"][:-1], sig["gap_state"][1:])
    else:
        ro = PopulationRollout(lm, 4, 30, max_steps=1000)
        b = ro.collect(table, np.random.default_rng(0))
        sig = ro.signals(b)
        np.testing.assert_array_equal(sig["gap_state_after"][:-1], sig["gap_state"][1:])
        tpr = ro.env.tpr()
        np.testing.assert_array_equal(sig["gap_state_after"][-1], np.abs(tpr[:, 0] - tpr[:, 1]))
    small = dict(algo="a-ppo", env=env, iterations=2, n_individuals=64, horizon=4,
                 n_epochs=1, hidden=(8,), pop_steps=16)
    a = train(TrainConfig(appo_gap="before", **small)).table
    b2 = train(TrainConfig(appo_gap="after", **small)).table
    assert not np.array_equal(a, b2)


def test_population_rollout_counts_each_episode_once():
    """ELBERT-PO's eta divides by the episodes in the batch: a rollout of exactly one
    episode per env counts M (it counted 2M: the end at its last step was counted as a
    start, and the next rollout counted every env again); ends inside count their
    successors (h8repair O4)."""
    from causalfair.train.rollout import PopulationRollout

    lm = lending_setting("lending-1")
    table = np.full((2, 7), 0.7)
    ro = PopulationRollout(lm, 3, 20, max_steps=20)  # one episode per env per rollout
    for seed in (1, 2):
        b = ro.collect(table, np.random.default_rng(seed))
        assert b.done[-1].all() and b.n_episodes == 3.0
    ro = PopulationRollout(lm, 3, 25, max_steps=10)  # ends at steps 9 and 19 of 25
    b = ro.collect(table, np.random.default_rng(1))
    assert int(b.done[:-1].sum()) == 6 and b.n_episodes == 3.0 + 6

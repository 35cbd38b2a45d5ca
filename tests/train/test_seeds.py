"""The fair-RL papers' methods on their systems (Hu et al. 2023, Xu et al. 2024): A-PPO,
F-PPO-L and ELBERT-PO in the generic trainer, driven by the supply and demand a simulator
reports and its long-term gap; each signal checked against a hand computation, every method
trained briefly on every system it applies to."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.backends import make_backend
from causalfair.errors import ConfigError
from causalfair.systems.infectious import INF, REC, SUS
from causalfair.train import TrainConfig, train
from causalfair.train.generic import SystemTrainer
from causalfair.train.objectives import (
    appo_advantage,
    elbert_advantage,
    fppol_advantage,
    gain_to_go,
    rate_gap,
    soft_bias,
)
from causalfair.train.sweep import train_many


def test_rate_gap_and_gain_to_go_by_hand():
    # supply / (demand + 1): group rates 2/(3+1) = 0.5 and 1/(0+1) = 1, 0/(1+1) = 0
    assert rate_gap(np.array([2.0, 1.0, 0.0]), np.array([3.0, 0.0, 1.0])) == pytest.approx(1.0)
    assert rate_gap(np.array([[2.0, 1.0]]), np.array([[3.0, 0.0]]))[0] == pytest.approx(0.5)
    np.testing.assert_array_equal(gain_to_go(np.array([[1.0], [2.0], [4.0]]))[:, 0], [7.0, 6.0, 4.0])


@pytest.mark.parametrize("beta", [0.5, 5.0, 50.0])
def test_soft_bias_bounds_and_gradient(beta):
    z = np.array([0.3, 0.9, 0.1, 0.45, 0.2])
    b = z.max() - z.min()
    assert b <= soft_bias(z, beta) <= b + 2 * np.log(len(z)) / beta + 1e-12  # Prop. 3.3
    # with A = 0, A^S_g = 1 for one g, A^D = 0 and eta^D = 1 the fair advantage is
    # -alpha dh/dz_g: compare with a central difference of h = b_soft^2
    G, h = len(z), 1e-6
    for g in range(G):
        e = np.eye(G)[g]
        fd = (soft_bias(z + h * e, beta) ** 2 - soft_bias(z - h * e, beta) ** 2) / (2 * h)
        out = elbert_advantage(np.zeros(1), np.eye(G)[:, g:g + 1], np.zeros((G, 1)), z,
                               np.ones(G), alpha=2.0, beta=beta)
        assert out[0] == pytest.approx(-2.0 * fd, rel=1e-5, abs=1e-8)


def test_long_term_gaps_by_hand():
    att = cf.systems.make("attention-1").make_simulator()
    s = att.reset(2, None, np.random.default_rng(0))
    s.rate[:] = [8, 6, 4, 3, 1.5, 1, 1, 1, 1, 6]
    # mean 4.5 -> max |x - 4.5| = 3.5; mean 2 -> |6 - 2| = 4
    np.testing.assert_allclose(att.long_term_gap(s), [3.5, 4.0])
    inf = cf.systems.make("infectious-1").make_simulator()
    s = inf.reset(1, None, np.random.default_rng(0))
    comm = inf.comm
    h = np.full(34, SUS, dtype=np.int8)
    h[np.nonzero(comm == 0)[0][:4]] = INF  # community 0 (15 members): 11 S, 4 I, 0 R
    h[np.nonzero(comm == 1)[0][:2]] = REC  # community 1 (19 members): 17 S, 0 I, 2 R
    s.health[:] = h
    assert inf.long_term_gap(s)[0] == pytest.approx(np.sqrt(6 ** 2 + 4 ** 2 + 2 ** 2))


def test_fair_advantage_aggregates_each_replica_by_hand():
    """Two infectious replicas, two steps: supply/demand per member are summed per replica
    and community, the running bias is the seeds' smoothed ratio, and A-PPO gets it."""
    tr = SystemTrainer(cf.systems.make("infectious-1"), TrainConfig(
        algo="a-ppo", system="infectious-1", iterations=1, n_individuals=68, horizon=2))
    assert (tr.config.appo_omega, tr.config.appo_beta1) == (0.05, 0.1)  # the system's values
    comm = np.tile(tr.sim.comm, 2)
    m0, m1 = np.nonzero(comm[:34] == 0)[0][0], np.nonzero(comm[:34] == 1)[0][0]
    supply, demand = np.zeros((2, 68)), np.zeros((2, 68))
    supply[0, m0] = 1.0  # replica 0, step 0: a vaccine to community 0
    demand[0, [m0 + 1 if comm[m0 + 1] == 0 else m0, m1]] = 1.0  # one new case in each
    supply[1, 34 + m1] = 1.0  # replica 1, step 1: a vaccine to community 1
    adv = np.array([[0.5, -0.2], [0.1, 0.3]])
    out, row = tr._fair_advantage(adv, {"supply": supply, "demand": demand}, np.arange(2),
                                  np.repeat(np.arange(2), 34), comm)
    # replica 0: before step 0 no totals (gap 0); after it S = (1, 0), D = (1, 1): rates
    # (1/2, 0) -> gap 0.5; step 1 adds nothing. Replica 1: gap 0, then 0, then S = (0, 1),
    # D = (0, 0): rates (0, 1) -> gap 1.
    gap = np.array([[0.0, 0.0], [0.5, 0.0], [0.5, 1.0]])
    want = appo_advantage(adv, gap[:-1], gap[1:] - gap[:-1], 1.0, 0.1, 0.1, 0.05)
    np.testing.assert_allclose(out, want)
    # the batch bias: totals S = (1, 1), D = (1, 1) over 2 episodes -> 1/3 - 1/3 = 0
    assert row["bias_batch"] == pytest.approx(0.0)


@pytest.mark.parametrize("sid", ["attention-1", "infectious-1", "attention-harder",
                                 "infectious-harder"])
@pytest.mark.parametrize("algo", ["a-ppo", "f-ppo-l", "elbert-po"])
def test_every_method_trains_on_every_system(sid, algo, tmp_path):
    system = cf.systems.make(sid)
    # two PPO epochs a batch (not 10): every signal and step of the method still runs
    cfg = TrainConfig(algo=algo, system=sid, iterations=2, seed=1, n_individuals=170,
                      eval_every=2, audit_n=100, n_epochs=2)
    res = train(cfg, out=tmp_path / "run")
    again = train(cfg)
    assert res.metrics["C"] == again.metrics["C"]  # seeded
    m = res.metrics
    assert m["C"] == pytest.approx(m["DPE"] + m["IPE"] + m["SPE"], abs=1e-9)
    assert np.isfinite(res.history["bias_batch"]).all()
    assert ("long_gap_batch" in res.history) == (algo == "f-ppo-l")
    for k, v in system.train_defaults.items():  # published values, recorded with the run
        assert getattr(res.config, k) == v
    pol, _ = cf.load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    d = cf.decompose_mc(system, pol, n=100, seed=0)
    assert d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-9)


def test_an_explicit_value_beats_the_systems_default():
    tr = SystemTrainer(cf.systems.make("attention-1"), TrainConfig(
        algo="elbert-po", system="attention-1", iterations=1, elbert_alpha=3.0))
    assert tr.config.elbert_alpha == 3.0 and tr.config.elbert_beta == 20.0


class _NoGap:
    """attention-1's simulator without its long-term gap."""

    def __init__(self, sim):
        self._sim = sim

    def __getattr__(self, name):
        if name == "long_term_gap":
            raise AttributeError(name)
        return getattr(self._sim, name)


def test_missing_signals_are_named():
    import dataclasses

    base = cf.systems.make("attention-1")
    no_gap = dataclasses.replace(base, simulator=lambda: _NoGap(base.make_simulator()))
    with pytest.raises(ConfigError, match="long-term gap per replica"):
        SystemTrainer(no_gap, TrainConfig(algo="f-ppo-l", system="attention-1", iterations=1))
    with pytest.raises(ConfigError, match=r"supply and demand .*'supply', 'demand'"):
        SystemTrainer(cf.systems.make("replicator-1"), TrainConfig(
            algo="a-ppo", system="replicator-1", iterations=1))


def test_the_long_term_gap_notion_by_hand():
    """attention-1 under "priority 1 everywhere": equal weights place the 6 units as
    (2, 1, 1, 1, 1) at every step (greedy, ties to the first site), so after 20 steps the
    rates are 8 - 4, 6 - 2, 4 - 2, 3 - 2, max(0, 1.5 - 2) = (4, 4, 2, 1, 0): mean 2.2, gap
    max |lambda - 2.2| = 2.2. With no attention anywhere every rate rises by 0.1 a step,
    so the gap stays the initial |8 - 4.5| = 3.5. The dynamics do not depend on the
    incidents, so both are exact (SE 0)."""
    system = cf.systems.make("attention-1")
    d = cf.decompose_mc(system, cf.parse_policy("action:1", system), n=20, seed=0)
    assert d.notions["long_term_gap"] == pytest.approx(2.2, abs=1e-12)
    assert d.notions["long_term_gap_pi0"] == pytest.approx(3.5, abs=1e-12)
    assert d.notions["long_term_gap_se"] < 1e-12
    inf = cf.systems.make("infectious-1")
    d = cf.decompose_mc(inf, cf.parse_policy("never", inf), n=40, seed=0)
    # no vaccine: the policy's world is the baseline's world, step for step
    assert d.notions["long_term_gap"] == pytest.approx(d.notions["long_term_gap_pi0"], abs=1e-12)
    assert d.notions["long_term_gap_se"] > 0


# ------------------------------------------------------------ PPO-Cb on coupled units
def test_lambda_over_cells_by_hand():
    import torch

    from causalfair.train.objectives import lambda_cells_torch, lambda_torch

    rng = np.random.default_rng(0)
    p1 = torch.from_numpy(rng.random((2, 3)))
    delta = torch.from_numpy(rng.random((2, 3)))
    w = torch.from_numpy(np.array([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]]))
    two = lambda_cells_torch(torch.stack([1 - p1, p1], -1), torch.stack([0 * delta, delta], -1),
                             w, 0.1)
    assert float(two) == pytest.approx(float(lambda_torch(p1, delta, w, 0.1)), abs=1e-15)
    # three actions, one cell per group: TV 0.3, largest benefit gap 0.5
    p = torch.tensor([[[0.5, 0.3, 0.2]], [[0.2, 0.5, 0.3]]], dtype=torch.float64)
    d = torch.tensor([[[0.0, 1.0, 2.0]], [[0.0, 1.5, 2.2]]], dtype=torch.float64)
    one = torch.ones((2, 1), dtype=torch.float64)
    assert float(lambda_cells_torch(p, d, one, 0.1)) == pytest.approx(0.1 * 0.3 / 0.6, abs=1e-15)


def test_unit_alone_benefits_by_hand():
    from causalfair.engines.benefit_forks import unit_benefits
    from causalfair.systems.attention import ATTENTION_DEFAULTS  # noqa: F401 - the sources
    from causalfair.systems.infectious import INF, SUS, InfectiousState, karate_graph

    # attention-harder at t = 0: a site alone at any priority gets all N = 30 units, so its
    # benefit is min(lambda, down N) + up (the rate it loses instead of gaining up)
    system = cf.systems.make("attention-harder")
    sim = system.make_simulator()
    state = sim.reset(3, None, np.random.default_rng(0))
    delta = unit_benefits(sim, state, sim.draw_noise(15, np.random.default_rng(1)), 3, 5,
                          system.n_actions, 0).reshape(3, 5, -1)
    lam, down, up = sim.rates0, sim.down, sim.up
    want = np.minimum(lam, down * 30) + up
    assert np.allclose(delta[:, :, 1:], want[None, :, None], atol=1e-12)
    assert (delta[:, :, 0] == 0).all()
    # infectious: a vaccine's benefit to a susceptible member is the infection it prevents
    # this step, 1[u < 1 - (1 - tau)^k]; nobody else benefits
    isim = cf.systems.make("infectious-1").make_simulator()
    adj, comm = karate_graph()
    rng = np.random.default_rng(2)
    health = rng.choice(np.array([SUS, INF, 2], dtype=np.int8), size=34, p=[0.5, 0.3, 0.2])
    u = rng.random(34, dtype=np.float32)
    d1 = unit_benefits(isim, InfectiousState(health=health, group=comm.copy(), t=0), u, 1, 34,
                       2, 0)[:, 1]
    k = (health == INF).astype(float) @ adj
    want = ((health == SUS) & (u < np.float32(1 - 0.5 ** k))).astype(float)
    assert d1.tolist() == want.tolist() and want.sum() > 3


@pytest.mark.parametrize("sid", ["attention-1", "infectious-1", "attention-harder",
                                 "infectious-harder"])
def test_ppo_cb_trains_on_every_coupled_system(sid, tmp_path):
    cfg = TrainConfig(algo="ppo-cb", system=sid, iterations=2, seed=1, n_individuals=170,
                      eval_every=2, audit_n=100, n_epochs=2)
    res = train(cfg, out=tmp_path / "run")
    assert res.metrics["C"] == train(cfg).metrics["C"]  # seeded
    assert np.isfinite(res.history["Lambda_batch"]).all() and res.metrics["Lambda"] >= 0
    pol, _ = cf.load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    assert benefit_fairness_mc(cf.systems.make(sid), pol, n=100, seed=1, n_boot=0).Lambda >= 0


@pytest.mark.slow
def test_a_larger_beta_lambda_lowers_lambda_on_attention():
    """method.md section 5's finding, on attention-1: beta_Lambda = 50 against 0 (3 seeds,
    15 iterations; measured 2026-11-27: Lambda 0.0002-0.0003 against 0.021-0.041, as
    docs/training.md reports), with a collapse guard: a Lambda bought by giving up the task
    does not count. Floor: the uniform policy's utility (random priorities, 7.10; measured
    utilities 7.07-7.55 at 50, 7.11-7.92 at 0, 8.85 for equal priorities). Fails if the
    penalty drove the policy below random."""
    from causalfair.policies.core import parse_policy

    betas = (0.0, 50.0)
    cfgs = [TrainConfig(algo="ppo-cb", system="attention-1", iterations=15, seed=s,
                        n_individuals=320, eval_every=15, audit_n=300, beta_lambda=bl)
            for bl in betas for s in range(3)]
    # the six runs in two worker processes: each run's numbers are those of train(cfg) in
    # this process, bit for bit (tests/train/test_sweep.py)
    out = train_many(cfgs, backend=make_backend(2))
    assert all(isinstance(r, dict) for r in out), out  # a TaskError names a run that raised
    lam, util = {}, {}
    for i, bl in enumerate(betas):
        runs = [r["metrics"] for r in out[3 * i:3 * i + 3]]
        lam[bl] = np.mean([m["Lambda"] for m in runs])
        util[bl] = np.mean([m["utility"] for m in runs])
    assert lam[50.0] < 0.25 * lam[0.0]
    system = cf.systems.make("attention-1")
    floor = cf.decompose_mc(system, parse_policy("uniform", system), n=300, seed=0).total_utility
    assert util[50.0] > floor, (util, floor)


class _WithSupply:
    """lending-1's simulator (independent units) that also reports supply (approved) and
    demand (every applicant) per unit, as a system of one's own may."""

    def __init__(self, sim):
        self._sim = sim

    def __getattr__(self, name):
        return getattr(self._sim, name)

    def step(self, state, decisions, noise):
        import dataclasses

        res = self._sim.step(state, decisions, noise)
        d = np.asarray(decisions, dtype=np.float64)
        info = {**(res.info or {}), "supply": d, "demand": np.ones_like(d)}
        return dataclasses.replace(res, info=info)


def test_elbert_po_on_independent_units_uses_alpha():
    """With independent units every unit is an episode: ELBERT's supply and demand
    advantages are not 0, so alpha changes the update (it was plain PPO, bit for bit:
    the batch was one replica whose advantages minus their mean over replicas are 0)."""
    import dataclasses

    base = cf.systems.make("lending-1")
    system = dataclasses.replace(base, id="lending-sd", tabular=None,
                                 simulator=lambda: _WithSupply(base.make_simulator()))
    nets = []
    for alpha in (1e-9, 50.0):
        tr = SystemTrainer(system, TrainConfig(algo="elbert-po", elbert_alpha=alpha,
                                               iterations=2, n_individuals=64, horizon=3,
                                               n_epochs=1, eval_every=1000))
        tr.step()
        nets.append([p.detach().clone() for p in tr.policy_net.parameters()])
    assert any(not np.array_equal(a.numpy(), b.numpy()) for a, b in zip(*nets, strict=True))


def test_f_ppo_l_reads_the_bias_with_the_steps_decisions():
    """Seed 001's Eq. 7: the branch is 1[Delta_s(s_t, a_t) > omega], the bias with the
    step's decisions (Delta_{t+1}), not the one before them (h8repair O1)."""
    tr = SystemTrainer(cf.systems.make("infectious-1"), TrainConfig(
        algo="f-ppo-l", system="infectious-1", iterations=1, n_individuals=68, horizon=2))
    comm = np.tile(tr.sim.comm, 2)
    m0, m1 = np.nonzero(comm[:34] == 0)[0][0], np.nonzero(comm[:34] == 1)[0][0]
    supply, demand = np.zeros((2, 68)), np.zeros((2, 68))
    supply[0, m0] = 1.0
    demand[0, [m0 + 1 if comm[m0 + 1] == 0 else m0, m1]] = 1.0
    supply[1, 34 + m1] = 1.0
    long_gap = np.array([[1.0, 1.0], [0.8, 1.2], [0.9, 1.0]])  # (T + 1, replicas)
    adv = np.array([[0.5, -0.2], [0.1, 0.3]])
    out, _ = tr._fair_advantage(adv, {"supply": supply, "demand": demand,
                                      "long_gap": long_gap}, np.arange(2),
                                np.repeat(np.arange(2), 34), comm)
    gap = np.array([[0.0, 0.0], [0.5, 0.0], [0.5, 1.0]])  # as in the A-PPO test above
    c = tr.config
    want = fppol_advantage(adv, gap[1:] > c.fppo_omega, long_gap[1:] - long_gap[:-1],
                           c.fppo_beta0, c.fppo_beta3, c.fppo_beta4)
    np.testing.assert_allclose(out, want)
    old = fppol_advantage(adv, gap[:-1] > c.fppo_omega, long_gap[1:] - long_gap[:-1],
                          c.fppo_beta0, c.fppo_beta3, c.fppo_beta4)
    assert not np.allclose(out, old)  # step 0 of replica 0: its own vaccine opened the gap

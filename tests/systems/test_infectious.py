"""The infectious-disease systems: ml-fairness-gym's SIR epidemic on the
karate-club graph, checked against the published facts and a hand computation; one
vaccine per replica and step drawn as one categorical; the decomposition's identities;
the Gymnasium environments."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.montecarlo_coupled import joint_actions
from causalfair.errors import InputError, PolicyError
from causalfair.systems.infectious import (
    INF,
    INFECTIOUS_DEFAULTS,
    REC,
    SUS,
    InfectiousSimulator,
    InfectiousState,
    karate_graph,
)
from tests.conftest import check_gym_env, gym_episode


def test_the_published_graph_and_parameters():
    adj, comm = karate_graph()
    assert adj.shape == (34, 34) and adj.sum() == 2 * 78 and (adj == adj.T).all()
    assert np.bincount(comm).tolist() == [15, 19] and comm[0] == 0 and adj[0].sum() == 16
    d = INFECTIOUS_DEFAULTS
    assert (d["infection_probability"], d["recovery_probability"]) == (0.5, 0.005)
    assert (d["immunity_loss_probability"], d["harder_immunity_loss_probability"]) == (0.0, 0.2)
    assert (d["horizon"], d["burn_in"], d["treatments_per_step"]) == (20, 1, 1)
    s = cf.systems.make("infectious-1")
    assert s.units_per_replica == 34 and s.decisions.budget == 1 and s.decisions.baseline == 0
    assert s.group_weights.tolist() == [15 / 34, 19 / 34]


def _by_hand(health, vaccinate, u, tau, rho, loss):
    """One step, member by member, from networkx's neighbour lists: each member's one
    uniform decides the one transition its health allows."""
    g = nx.karate_club_graph()
    h = list(health)
    for v in range(34):
        if vaccinate[v] and h[v] == SUS:
            h[v] = REC
    out = list(h)
    for v in range(34):
        k = sum(1 for w in g.neighbors(v) if h[w] == INF)
        if h[v] == SUS and u[v] < np.float32(1 - (1 - tau) ** k):
            out[v] = INF
        elif h[v] == INF and u[v] < np.float32(rho):
            out[v] = REC
        elif h[v] == REC and u[v] < np.float32(loss):
            out[v] = SUS
    return out


@pytest.mark.parametrize("loss", [0.0, 0.2])
def test_one_step_equals_a_hand_computation(loss):
    rng = np.random.default_rng(7)
    sim = InfectiousSimulator(0.5, 0.005, loss, 1, (0,))
    _, comm = karate_graph()
    moved = 0
    for _ in range(20):
        health = rng.integers(0, 3, 34).astype(np.int8)
        vacc = np.zeros(34, dtype=np.intp)
        vacc[rng.integers(0, 34)] = 1
        u = rng.random(34, dtype=np.float32)
        u[health == INF] *= np.float32(0.01)  # let some recoveries happen
        res = sim.step(InfectiousState(health=health, group=comm.copy(), t=0), vacc, u)
        want = _by_hand(health.tolist(), vacc.tolist(), u.tolist(), 0.5, 0.005, loss)
        assert res.state.health.tolist() == want
        before, after = (health != INF), (np.array(want) != INF)
        assert res.gain.tolist() == (after.astype(int) - before).tolist()
        assert res.reward.tolist() == after.astype(int).tolist()
        assert res.info["supply"].tolist() == vacc.tolist()
        assert res.info["demand"].tolist() == ((health == SUS) & ~vacc.astype(bool)
                                               & (np.array(want) == INF)).astype(int).tolist()
        moved += int((np.array(want) != np.where(vacc.astype(bool) & (health == SUS), REC,
                                                  health)).sum())
    assert moved > 20  # the steps exercised transitions, not only "nothing happens"


def test_reset_burns_in_one_untreated_step_from_member_0():
    sim = InfectiousSimulator(0.5, 0.005, 0.0, 1, (0,))
    s = sim.reset(500, None, np.random.default_rng(0))
    h = s.health.reshape(500, 34)
    adj, _ = karate_graph()
    infected = h == INF
    # member 0 is infected (or has recovered, probability rho = 0.005)
    assert (h[:, 0] != SUS).all() and infected[:, 0].mean() > 0.98 and s.t == 0
    # only member 0's neighbours can have caught it, each with probability tau = 0.5
    assert not infected[:, adj[0] == 0][:, 1:].any()
    assert abs(infected[:, adj[0] == 1].mean() - 0.5) < 0.03


def test_one_vaccine_per_replica_drawn_as_one_categorical():
    m, U = 20000, 4
    p = np.array([0.1, 0.2, 0.0, 0.3])  # nobody: 0.4
    probs = np.zeros((m * U, 2))
    probs[:, 1] = np.tile(p, m)
    probs[:, 0] = 1 - probs[:, 1]
    d = joint_actions(probs, np.random.default_rng(1).random(m), m, U, 0, "pol").reshape(m, U)
    assert (d.sum(1) <= 1).all()
    freq = d.mean(0)
    assert np.allclose(freq, p, atol=0.01) and abs((d.sum(1) == 0).mean() - 0.4) < 0.01
    probs[:, 1] = 0.5
    with pytest.raises(PolicyError, match="sum to at most 1; got 2"):
        joint_actions(probs, np.zeros(m), m, U, 0, "pol")


class ExposedFirst:
    """Vaccinate the susceptible member with the most infected neighbours (ties: share)."""

    name = "exposed-first"

    def action_probs(self, obs):
        f = obs.features.reshape(-1, 34, 5)
        score = np.where(f[..., 0] > 0, f[..., 3], -1.0)
        best = (score == score.max(1, keepdims=True)) & (score >= 0)
        p = best / np.maximum(best.sum(1, keepdims=True), 1)
        p1 = p.reshape(-1)
        return np.stack([1 - p1, p1], 1)


@pytest.mark.parametrize("sid", ["infectious-1", "infectious-harder"])
def test_decomposition_identities_and_seeding(sid):
    system = cf.systems.make(sid)
    d = cf.decompose_mc(system, ExposedFirst(), n=400, seed=3)
    assert d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-12)
    again = cf.decompose_mc(system, ExposedFirst(), n=400, seed=3)
    assert d.estimates() == again.estimates() and d.se == again.se
    assert cf.decompose_mc(system, ExposedFirst(), n=400, seed=4).C != d.C
    # nobody vaccinated: the policy is pi0, all of C is SPE
    never = cf.decompose_mc(system, cf.parse_policy("never", system), n=400, seed=3)
    assert never.DPE == never.IPE == 0.0 and never.C == never.SPE == d.SPE
    # vaccines prevent infections: the vaccinating policy's gains are higher in both groups
    assert (d.V > never.V).all() and (d.utility_by_group > never.utility_by_group).all()


def test_losing_immunity_makes_the_epidemic_worse():
    never = {sid: cf.decompose_mc(cf.systems.make(sid), cf.parse_policy("never", cf.systems.make(sid)),
                                  n=300, seed=0) for sid in ("infectious-1", "infectious-harder")}
    assert (never["infectious-harder"].utility_by_group < never["infectious-1"].utility_by_group).all()


def test_gymnasium_environments_pass_both_checkers_and_are_seeded():
    for env_id in ("causalfair/Infectious-v0", "causalfair/InfectiousHarder-v0"):
        check_gym_env(env_id)
    runs = []
    for seed in (5, 5, 6):
        traj, term, trunc, env = gym_episode("causalfair/Infectious-v0", seed, 20,
                                             lambda env, t: t % 35)
        assert trunc and not term
        runs.append(traj)
    assert runs[0] == runs[1] and runs[0] != runs[2]
    with pytest.raises(InputError, match=r"must be an integer in \[0, 34\]"):
        env.step(35)


@pytest.mark.slow
def test_the_example_spec_audits_its_policy():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    res = cf.audit(root / "audits" / "infectious-1.toml")
    d = res.decomposition
    assert res.overall == "PASS" and d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-12)
    assert d.DPE < 0 < d.SPE  # the vaccines prevent more infections in the other community

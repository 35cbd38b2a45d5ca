"""Training on systems of coupled units: every unit of a replica is a learner
sharing the policy; actions the deployed policy may not take keep probability exactly 0
(their logits are pinned); runs are seeded; the checkpoint audits through a spec. With
one choice per replica (infectious-1), a replica-level agent learns to vaccinate."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import ConfigError
from causalfair.train import TrainConfig, train


@pytest.mark.parametrize("sid,algo", [("replicator-1", "ppo"), ("attention-1", "ppo-c")])
def test_coupled_training_is_seeded_and_never_takes_a_forbidden_action(sid, algo, tmp_path):
    system = cf.systems.make(sid)
    # small on purpose: what is checked (seeding, C = DPE + IPE + SPE, banned actions at
    # probability 0, the checkpoint's audit) holds after any number of updates
    cfg = TrainConfig(algo=algo, system=sid, iterations=2, seed=2, n_individuals=128,
                      n_epochs=2, audit_n=400)
    res = train(cfg, out=tmp_path / "run")
    again = train(cfg)
    same = lambda a, b: a == b or (a != a and b != b)  # noqa: E731 - NaN equals NaN here
    assert res.metrics.keys() == again.metrics.keys()
    assert all(same(res.metrics[k], again.metrics[k]) for k in res.metrics)
    m = res.metrics
    assert m["C"] == pytest.approx(m["DPE"] + m["IPE"] + m["SPE"], abs=1e-9)
    # the baseline action lies outside what the policy may choose: probability exactly 0
    sim = system.make_simulator()
    state = sim.reset(50, None, np.random.default_rng(0))
    banned = [a for a in range(system.n_actions) if a not in system.decisions.allowed]
    for _ in range(5):
        obs = sim.observe(state)
        p = res.policy.action_probs(obs)
        assert p.shape == (obs.group.shape[0], system.n_actions)
        assert (p[:, banned] == 0.0).all() and np.allclose(p.sum(1), 1.0)
        a = np.argmax(p, axis=1)
        state = sim.step(state, a, sim.draw_noise(obs.group.shape[0], np.random.default_rng(1))).state
    # the checkpoint audits through a spec (Monte Carlo on the coupled system)
    spec = tmp_path / "a.toml"
    spec.write_text(f'name = "a"\n[system]\nid = "{sid}"\n[policy]\ncheckpoint = "run/checkpoint.pt"\n'
                    '[engine]\nkind = "mc"\nn = 50\n[thresholds]\nabs_C = 100\n')
    audited = cf.audit(spec)
    assert audited.overall == "PASS"


def test_choice_probabilities_by_hand():
    from causalfair.policies.choice import choice_probabilities

    s = np.array([0.0, np.log(2.0), -np.inf, np.log(3.0), 0.0, 0.0])
    p = choice_probabilities(s, np.log(4.0), 3)  # replicas of 3 units; nobody weight 4
    assert p[:3] == pytest.approx([1 / 7, 2 / 7, 0.0])  # 4 + 1 + 2 + 0
    assert p[3:] == pytest.approx([3 / 9, 1 / 9, 1 / 9])  # 4 + 3 + 1 + 1
    with pytest.raises(cf.PolicyError, match="not whole replicas of 4 units"):
        choice_probabilities(s, 0.0, 4)


@pytest.mark.slow
def test_one_vaccine_per_step_is_learned_and_the_checkpoint_keeps_the_choice(tmp_path):
    from causalfair.policies.choice import ReplicaChoicePolicy

    system = cf.systems.make("infectious-1")
    cfg = TrainConfig(algo="ppo", system="infectious-1", iterations=10, seed=0, eval_every=10)
    res = train(cfg, out=tmp_path / "run")
    never = cf.decompose_mc(system, cf.parse_policy("never", system), n=1000, seed=0)
    # it learned to vaccinate: never gives 1.63; 10 iterations give 3.55, 3.36, 3.52 at
    # seeds 0, 1, 2 (20 iterations: 3.82, 3.54, 4.93)
    assert res.metrics["utility"] > never.total_utility + 1.0
    pol, meta = cf.load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert isinstance(pol, ReplicaChoicePolicy) and meta["metadata"]["choice"]["units"] == 34
    obs = system.make_simulator().observe(
        system.make_simulator().reset(8, None, np.random.default_rng(0)))
    p = pol.action_probs(obs)
    # the checkpoint is evaluated in numpy, the trained module by torch: float32 rounding
    np.testing.assert_allclose(p, res.policy.action_probs(obs), rtol=0, atol=1e-6)
    assert (p[:, 1].reshape(8, 34).sum(1) <= 1.0 + 1e-12).all()
    spec = tmp_path / "a.toml"
    spec.write_text('name = "a"\n[system]\nid = "infectious-1"\n[policy]\n'
                    'checkpoint = "run/checkpoint.pt"\n[engine]\nkind = "mc"\nn = 200\n'
                    '[thresholds]\nabs_C = 1\n')
    d = cf.audit(spec).decomposition
    assert d.C == pytest.approx(d.DPE + d.IPE + d.SPE, abs=1e-12)
    # ppo-c runs too (a small run: two replicas of 34); constraints are refused on this system
    assert "C" in train(TrainConfig(algo="ppo-c", system="infectious-1", iterations=1,
                                    n_individuals=68, n_epochs=2, audit_n=200)).metrics
    with pytest.raises(ConfigError, match="not imposed on system 'infectious-1'"):
        train(TrainConfig(algo="ppo-c", system="infectious-1", iterations=1,
                          constraints=("abs_C<=0.1",)))

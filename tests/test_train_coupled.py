"""Training on systems of coupled units (issue 14): every unit of a replica is a learner
sharing the policy; actions the deployed policy may not take keep probability exactly 0
(their logits are pinned); runs are seeded; the checkpoint audits through a spec."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import ConfigError
from causalfair.train import TrainConfig, train


@pytest.mark.parametrize("sid,algo", [("replicator-1", "ppo"), ("attention-1", "ppo-c")])
def test_coupled_training_is_seeded_and_never_takes_a_forbidden_action(sid, algo, tmp_path):
    system = cf.systems.make(sid)
    cfg = TrainConfig(algo=algo, system=sid, iterations=3, seed=2, n_individuals=256)
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


def test_a_budget_per_replica_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="needs a policy over the whole replica"):
        train(TrainConfig(algo="ppo", system="infectious-1", iterations=1))

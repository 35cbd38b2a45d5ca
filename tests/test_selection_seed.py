"""The generic trainer's selection audits draw from a stream of their own
(causalfair.train.generic.selection_seed), never a user audit's; one "needs a tabular
model" message for every door of the exact repair; checkpoint_every on the generic
trainer, and what a Ctrl-C leaves on disk (docs/training.md)."""

from __future__ import annotations

import hashlib
import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.spec import load_spec
from causalfair.errors import SpecError
from causalfair.train import TrainConfig, train
from causalfair.train import generic as G

SIM = textwrap.dedent('''
    from dataclasses import dataclass
    import numpy as np
    import causalfair as cf

    @dataclass
    class S:
        skill: np.ndarray
        group: np.ndarray
        t: int

    class Sim:
        n_groups = 2
        n_actions = 2
        baseline = 0

        def reset(self, n, group, rng):
            g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
            return S(rng.normal(0.5 - 0.2 * g, 0.2), g, 0)

        def observe(self, s):
            return cf.Observation(group=s.group, features=np.stack(
                [s.skill, s.skill ** 2], 1), t=s.t)

        def draw_noise(self, n, rng):
            return rng.normal(size=n)

        def step(self, s, d, noise):
            d = np.asarray(d, dtype=float)
            skill = s.skill + d * (0.1 + 0.05 * noise) - (1 - d) * 0.02 * (1 + s.group)
            return cf.StepResult(state=S(skill, s.group, s.t + 1), reward=d * (s.skill - 0.4),
                                 gain=skill - s.skill, info={})

    def make():
        return cf.System(id="selhire", groups=("a", "b"),
                         decisions=cf.DecisionSet(labels=("reject", "hire"), baseline=0),
                         features=("skill", "skill2"), horizon=3, simulator=Sim)
''')


@pytest.fixture
def hire(tmp_path, monkeypatch):
    """A two-feature simulator without a tabular model (selhire.py), a checkpoint of a
    small network over its features (own.pt), and the folder as the working directory."""
    import torch

    (tmp_path / "selhire.py").write_text(SIM)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    net = cf.policies.checkpoint.mlp(2, (8,), 1)
    cf.save_checkpoint(tmp_path / "own.pt", net, architecture={
        "type": "mlp", "input_dim": 2, "hidden": [8], "output_dim": 1, "activation": "tanh"},
        encoding=cf.FeatureEncoding("features", names=("skill", "skill2")),
        metadata={"name": "own"})
    return tmp_path


def _system():
    import selhire

    return selhire.make()


def _config(**kw) -> TrainConfig:
    base = dict(algo="ppo", iterations=2, n_individuals=16, n_minibatches=2, n_epochs=1,
                audit_n=60, eval_every=1)
    return TrainConfig(**{**base, **kw})


def test_the_selection_seed_is_no_user_seed():
    """The rule: 2**64 + the first 64-bit word of SeedSequence([seed, "SELE"]), one per
    run seed, reproducible, never a seed below 2**64 (a user's audit seed)."""
    seeds = [G.selection_seed(s) for s in range(50)]
    assert all(s >= 2**64 for s in seeds)
    assert len(set(seeds)) == 50
    word = np.random.SeedSequence([7, G.SELECTION_STREAM]).generate_state(1, np.uint64)[0]
    assert G.selection_seed(7) == 2**64 + int(word)


def test_gate_retrain_judges_on_numbers_the_selection_did_not_use(hire, monkeypatch):
    """gate --retrain's constrained repair (PPO-Lagrangian on [thresholds]) audited its
    candidates with [retrain] seed 0 and n = [engine] n, and the after-audit used [engine]
    seed 0 and the same n: the verdict read the very numbers the policy was kept on."""
    from causalfair.audit.retrain import run_retrain
    from causalfair.audit.run import audit

    seen = []
    real = G.decompose_mc

    def spy(*a, **kw):
        d = real(*a, **kw)
        seen.append((kw["seed"], kw["n"], float(d.C)))
        return d

    monkeypatch.setattr(G, "decompose_mc", spy)
    (hire / "g.toml").write_text(
        'name = "g"\nhorizon = 3\n[system]\nfactory = "selhire:make"\n'
        '[policy]\ncheckpoint = "own.pt"\n[engine]\nkind = "mc"\nn = 60\n'
        '[thresholds]\nabs_C = 10\n'
        '[retrain]\nalgo = "ppo-c"\niterations = 2\n')
    spec = load_spec(hire / "g.toml")
    before = audit(spec)
    target, after = run_retrain(spec, before)
    assert seen, "the repair made no Monte Carlo selection audit"
    seeds = [s for s, _, _ in seen]
    assert spec.seed not in seeds, (spec.seed, seen)
    # the selection audits only: the spec's re-audit replaces the trainer's final audit
    assert set(seeds) == {G.selection_seed(0)}, seen
    assert {n for _, n, _ in seen} == {spec.n}  # same n: only the random numbers differ
    kept = seen[-1][2]  # the kept (last, all passing) policy's selection audit
    assert float(after.decomposition.C) != kept, (after.decomposition.C, seen)
    # the after-audit is the spec's own: re-running it on the accepted checkpoint agrees
    again = audit(spec.with_policy(checkpoint=target))
    assert float(again.decomposition.C) == float(after.decomposition.C)


def test_a_constrained_run_reports_its_kept_policy_on_fresh_random_numbers(hire, monkeypatch):
    """A constrained run's final metrics were its kept policy's selection audit: the numbers
    it was kept on (a sweep's table of constrained runs averaged them). They are now one
    more audit of the kept policy on the evaluation stream."""
    from causalfair.train import TrainConfig, train

    seen = []
    real = G.decompose_mc

    def spy(*a, **kw):
        d = real(*a, **kw)
        seen.append((kw["seed"], float(d.C), float(d.total_utility)))
        return d

    monkeypatch.setattr(G, "decompose_mc", spy)
    monkeypatch.chdir(hire)
    cfg = TrainConfig(algo="ppo", system="selhire:make", horizon=3, iterations=2, seed=5,
                      audit_n=60, eval_every=1, constraints=("abs_C<=10",))
    res = train(cfg)
    assert [s for s, _, _ in seen] == [G.selection_seed(5)] * 2 + [G.evaluation_seed(5)], seen
    assert res.metrics["constraints_met"] is True
    assert res.metrics["C"] == seen[-1][1] != seen[-2][1], seen
    assert res.metrics["utility"] == seen[-1][2]
    assert G.evaluation_seed(5) != G.selection_seed(5) and G.evaluation_seed(5) >= 2**64


def test_exact_on_a_system_without_a_tabular_model_is_one_message(hire):
    """check_retrain said "Use a sampled algo such as 'ppo-cb'" while the train door
    (causalfair.train.exact) points to PPO-Lagrangian: one check, one message."""
    from causalfair.audit.retrain import check_retrain
    from causalfair.train.exact import repair_checkpoint

    (hire / "x.toml").write_text(
        'name = "x"\nhorizon = 3\n[system]\nfactory = "selhire:make"\n'
        '[policy]\ncheckpoint = "own.pt"\n[engine]\nkind = "mc"\nn = 60\n'
        '[thresholds]\nabs_C = 0.1\n[retrain]\nalgo = "exact"\n')
    with pytest.raises(SpecError) as gate:
        check_retrain(load_spec(hire / "x.toml"))
    with pytest.raises(cf.CausalfairError) as door:
        repair_checkpoint(_system(), 3, [])
    one = ("'exact' needs a system with a tabular model of independent units; '{}' has "
           "none. Impose the same thresholds with PPO-Lagrangian: causalfair train --algo "
           "ppo-c --constraint ..., or [retrain] algo = \"ppo-lag\" in a spec.")
    assert str(gate.value).endswith(": [retrain] algo: " + one.format("selhire:make")), gate.value
    assert str(door.value) == "--algo exact: " + one.format("selhire"), door.value
    assert "\n" not in str(gate.value)


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_checkpoint_every_and_ctrl_c_on_the_generic_trainer(hire, monkeypatch):
    """train() refused checkpoint_every on a non-lending system, and a run stopped by
    Ctrl-C left no checkpoint at all. Now: checkpoint.pt every N iterations (the policy of
    that iteration), the last one left after a KeyboardInterrupt, nothing half-written."""
    import torch

    full = train(_config(iterations=3), out=hire / "full", system=_system())
    every = train(_config(iterations=3, checkpoint_every=1), out=hire / "every",
                  system=_system())
    # periodic writes change nothing the run computes: the final file is the same bytes
    assert _sha(every.checkpoint) == _sha(full.checkpoint)
    assert "iteration" not in cf.load_checkpoint(every.checkpoint)[1]["metadata"]

    real, weights = G.SystemTrainer.step, {}

    def step(self):
        if self.iteration == 3:  # Ctrl-C during the fourth iteration
            raise KeyboardInterrupt
        row = real(self)
        weights[self.iteration] = {k: v.clone() for k, v in self.policy_net.state_dict().items()}
        return row

    monkeypatch.setattr(G.SystemTrainer, "step", step)
    run = hire / "stopped"
    with pytest.raises(KeyboardInterrupt):
        train(_config(iterations=6, checkpoint_every=2), out=run, system=_system())
    assert sorted(p.name for p in run.iterdir()) == [
        ".causalfair-run", "checkpoint.pt", "config.json", "metrics.jsonl"]
    pol, meta = cf.load_checkpoint(run / "checkpoint.pt")
    assert meta["metadata"]["iteration"] == 2
    for k, v in pol.to_torch().state_dict().items():
        assert torch.equal(v, weights[2][k]), k
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 3


def test_an_exact_constrained_run_reports_its_kept_policy_and_pair(tmp_path):
    """On a tabular system the final audit of the kept policy repeats its kept row bit for
    bit (exact numbers have no random draws), and the run's pair is the kept policy's."""
    from causalfair.engines.exact import exact_numbers
    from causalfair.systems import System
    from causalfair.train import TrainConfig
    from causalfair.train.generic import SystemTrainer
    from tests.train.test_repair_thresholds import _tri_model

    model = _tri_model(tmp_path)
    system = System(id="tri", groups=("A", "B", "C"), tabular=model, horizon=1,
                    levels=("low", "high"))
    tr = SystemTrainer(system, TrainConfig(algo="ppo", constraints=("max_abs_C<=5",),
                                           iterations=3, eval_every=1, n_individuals=48,
                                           horizon=1))
    rows = [tr.step() for _ in range(3)]
    final = tr.finish()
    kept = max((r for r in rows if r["constraints_met"]), key=lambda r: r["utility"])
    assert final["constraints_met"] is True
    assert all(final[k] == kept[k] for k in ("C", "DPE", "IPE", "SPE", "utility")), (final, kept)
    assert tr.pair == tuple(int(g) for g in
                            exact_numbers(model, tr.policy(), 1).decomposition.pair)

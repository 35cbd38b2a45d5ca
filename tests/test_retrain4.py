"""Repairing a failing audit on a system of several groups (docs/ci-gate.md, "An honest
repair"; docs/training.md, "PPO-Lagrangian"): the honesty check's floor is the audit's own
utility of pi0 and of the uniform policy, judged on no threshold and without the group
comparison's forks of every pair; a ratio threshold is worse when it shrinks; a ratio of a
mean gain <= 0 is not met (exact repair, PPO-Lagrangian); the trainer's audits reuse the
forks of the audit's own pair, and the gate's retrain skips the trainer's own final audit;
a lending run folder written before a config field existed resumes with it at its
default."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

import causalfair as cf
from causalfair.audit.retrain import repair_check, utility_of
from causalfair.audit.spec import load_spec
from causalfair.engines import benefit_mc, groups
from causalfair.errors import ConfigError
from causalfair.train import TrainConfig, train
from causalfair.train.generic import SystemTrainer
from tests.train.test_repair_thresholds import MODULE

SPEC = '''name = "tri4"
[system]
factory = "tri_rt4:make_sim"
[policy]
builtin = "uniform"
[engine]
kind = "mc"
n = 300
seed = 3
[thresholds]
max_abs_C = 0.01
[retrain]
algo = "ppo-c"
iterations = 1
betas = { C = 1.0 }
'''


@pytest.fixture
def tri(tmp_path, monkeypatch):
    """The three-group system of tests/audit/test_three_groups.py without its tabular model
    (``make_sim``: Monte Carlo only, its level observed as a feature), as ``tri_rt4``."""
    (tmp_path / "tri_rt4.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import tri_rt4

    yield tri_rt4
    sys.modules.pop("tri_rt4", None)


def _count_forks(monkeypatch):
    """Record the pair of every Lambda fork estimate (the decomposition's own and the group
    comparison's)."""
    calls = []
    real = benefit_mc.benefit_fairness_mc

    def counted(*a, **kw):
        calls.append(tuple(kw.get("pair") or ()))
        return real(*a, **kw)

    monkeypatch.setattr(benefit_mc, "benefit_fairness_mc", counted)
    monkeypatch.setattr(groups, "benefit_fairness_mc", counted)
    return calls


def test_repair_floor_is_the_audits_utility_without_the_group_comparison(tri, tmp_path,
                                                                         monkeypatch):
    """Before, the floor audited pi0 and the uniform policy in full: on several groups
    Lambda by forks for every pair (most of a Monte Carlo gate --retrain's time on a
    4-group system), to read one utility each. Now only the decomposition runs, and the
    floor is the same number the audit reports."""
    (tmp_path / "tri4.toml").write_text(SPEC, encoding="utf-8")
    spec = load_spec(tmp_path / "tri4.toml")
    uniform = cf.audit(spec)  # the spec's own policy is the uniform one
    never = cf.audit(spec.with_policy(builtin="never"))
    calls = _count_forks(monkeypatch)
    check = repair_check(spec, uniform, uniform)
    assert len(calls) == 2  # each policy's own pair in its decomposition; no comparison
    assert check["uniform_utility"] == utility_of(uniform)
    assert check["baseline_utility"] == utility_of(never)
    assert check["min_utility"] == max(utility_of(uniform), utility_of(never))


def test_trainers_group_comparison_reuses_its_own_pairs_forks(tri, monkeypatch):
    """Before, the trainer's audit estimated Lambda of its own pair twice (the
    decomposition's forks, then again in the group comparison); now the comparison takes
    the decomposition's, as the gate's audit does, with the same numbers."""
    config = TrainConfig(algo="ppo", iterations=1, eval_every=1, n_individuals=48,
                         audit_n=200, horizon=1, constraints=("max_Lambda<=0.5",))
    tr = SystemTrainer(tri.make_sim(1), config)
    calls = _count_forks(monkeypatch)
    row = tr.step()
    own = tr.pair
    assert calls.count(own) == 1  # the decomposition's; the comparison asks none of it
    assert len(calls) == 3  # and each of the other two pairs once
    name = f"Lambda[{'ABC'[own[0]]}-{'ABC'[own[1]]}]"
    assert row[name] == row["Lambda"]


def test_resume_reads_a_field_the_saved_run_lacks_as_its_default(tmp_path):
    """A lending run folder of an earlier causalfair, whose config has no ``audit_n``:
    before, resume refused it ("the config differs ... saved [None], given [2000]"); now a
    missing field reads as its default, and a given value other than the default is
    still refused."""
    import torch

    cfg = TrainConfig(algo="ppo", iterations=1, n_individuals=64, horizon=5, hidden=(16,),
                      n_epochs=1, n_minibatches=2, eval_every=1, checkpoint_every=1)
    train(cfg, out=tmp_path)
    path = tmp_path / "state.pt"
    state = torch.load(path, map_location="cpu", weights_only=True)
    doc = json.loads(state["json"])
    del doc["config"]["audit_n"]
    state["json"] = json.dumps(doc)
    torch.save(state, path)
    with pytest.raises(ConfigError, match=r"audit_n.*saved \[2000\], given \[500\]"):
        train(cfg.replace(iterations=2, audit_n=500), out=tmp_path, resume=True)
    more = train(cfg.replace(iterations=2), out=tmp_path, resume=True)
    assert list(more.history["iteration"]) == [1, 2]


TRI_SPEC = '''name = "t"
[system]
factory = "tri4x:make"
[policy]
factory = "tri4x:policy"
[thresholds]
min_ratio_V = 0.9
'''


@pytest.fixture
def tri_exact(tmp_path, monkeypatch):
    """The tabular three-group system (T = 1) as ``tri4x`` and a spec of it bounding
    min_ratio_V: under pi0 group C's mean gain is 0, so pi0 has no ratio_V of the pairs
    with C."""
    from tests.tri_system import tri_source

    (tmp_path / "tri4x.py").write_text(tri_source(1), encoding="utf-8")
    (tmp_path / "t.toml").write_text(TRI_SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import tri4x

    yield load_spec(tmp_path / "t.toml"), tri4x
    sys.modules.pop("tri4x", None)


def test_repair_check_of_a_ratio_threshold(tri_exact):
    """Before, the floor audited pi0 with the spec's thresholds, and min_ratio_V has no
    value where pi0's mean gain is 0: the honesty check (so the retrain) failed with "ratio_V
    is not available". And a ratio that grew (better) was called "worse after repair". Now
    the floor judges nothing, and a ratio is worse when it shrinks."""
    spec, _ = tri_exact
    low = cf.audit(spec)  # min_ratio_V 1/3
    high = cf.audit(spec, policy="uniform")  # 5/6
    (lo,), (hi,) = low.verdicts, high.verdicts
    assert lo.estimate == pytest.approx(1 / 3) and hi.estimate == pytest.approx(5 / 6)
    up = repair_check(spec, low, high)
    assert up["worse"] == [] and up["problems"] == []
    bare = dataclasses.replace(spec, thresholds={})  # pi0's own audit, nothing judged
    assert up["baseline_utility"] == utility_of(cf.audit(bare, policy="never"))
    down = repair_check(spec, high, low)
    assert down["worse"] == ["min_ratio_V"]
    assert "min_ratio_V worse after repair: 0.833333 -> 0.333333" in down["problems"][0]


def test_a_ratio_of_a_non_positive_mean_gain_is_not_met(tri_exact):
    """A ratio of two groups' mean gains of which one is <= 0 has no value (the audit's
    rule). Before, the exact repair's ratio of two negative mean gains read above 1 (met),
    and PPO-Lagrangian's judge raised InputError mid-training; now the repair's ratio is
    <= 0 and the trainer counts the constraint as not met, its multiplier rising."""
    import numpy as np

    from causalfair.engines.effects import decompose
    from causalfair.engines.groups import compare
    from causalfair.thresholds import FAIL, PASS
    from causalfair.train.lagrangian import Lagrangian
    from causalfair.train.repair import _add_pairs

    zero = dict.fromkeys(("C", "DPE", "IPE", "SPE", "Lambda"), 0.0)
    neg = _add_pairs({"V": np.array([-0.14, -0.136])}, {"A-B": (0, 1)}, lambda ab: zero)
    assert neg["ratio_V[A-B]"] < 0
    pos = _add_pairs({"V": np.array([0.3, 0.24])}, {"A-B": (0, 1)}, lambda ab: zero)
    # of two positive values unchanged, bit for bit: (s - |d|) / (s + |d|) = min / max
    assert pos["ratio_V[A-B]"] == (0.54 - abs(0.3 - 0.24)) / (0.54 + abs(0.3 - 0.24))
    assert pos["ratio_V[A-B]"] == pytest.approx(0.8, abs=1e-15)

    system = tri_exact[1].make(1)
    dec = decompose(system.tabular, np.zeros((3, 2)), 1)  # pi0: V = (0.2, 0.1, 0)
    lag = Lagrangian(["min_ratio_V>=0.4"], system.groups, lr=0.1, system_id="tri")
    row = {"utility": 0.0}
    lag.after_audit(row, compare(dec), lambda: None)
    status = {k.key: v for k, v in zip(lag.cons, lag.judge(dict(row), compare(dec)),
                                       strict=True)}
    assert status["min_ratio_V[B-A]"].status == PASS  # 0.1 / 0.2
    assert status["min_ratio_V[C-A]"].status == FAIL and row["min_ratio_V[C-A]"] == 0.0
    assert row["constraints_met"] is False
    assert list(lag.multipliers.values > 0) == [False, True, True]


RETRAIN_SPEC = '''name = "tri4r"
[system]
factory = "tri_rt4:make_sim"
[policy]
checkpoint = "run/checkpoint.pt"
[engine]
kind = "mc"
n = 200
[thresholds]
max_abs_C = 0.5
[retrain]
algo = "ppo-c"
iterations = 1
betas = { C = 1.0 }
min_utility = -inf
'''


def test_gate_retrain_skips_the_trainers_own_final_audit(tri, tmp_path, monkeypatch):
    """Before, a constrained retrain audited its kept policy once more on the trainer's
    evaluation stream, then the gate audited it again with the spec's audit, which is the
    one judged (a fifth of a Monte Carlo gate --retrain's time on a 4-group system). Now
    the gate's retrain skips the trainer's; the policy kept is the same."""
    from causalfair.audit.retrain import run_retrain
    from causalfair.train.generic import evaluation_seed

    config = TrainConfig(algo="ppo-c", iterations=2, eval_every=1, n_individuals=48,
                         audit_n=200, horizon=1, constraints=("max_abs_C<=0.5",))
    full = train(config, system=tri.make_sim(1))
    bare = train(config, system=tri.make_sim(1), evaluate=False)
    for k, v in full.policy.module.state_dict().items():
        assert (bare.policy.module.state_dict()[k] == v).all(), k
    rows = bare.history.to_dict("records")
    kept = max((r for r in rows if r.get("constraints_met") is True), key=lambda r: r["utility"])
    assert bare.metrics["C"] == kept["C"] != full.metrics["C"]  # the selection's numbers

    train(config.replace(iterations=1, constraints=()), out=tmp_path / "run",
          system=tri.make_sim(1))
    (tmp_path / "r.toml").write_text(RETRAIN_SPEC, encoding="utf-8")
    spec = load_spec(tmp_path / "r.toml")
    seeds = []
    real = SystemTrainer.audit
    monkeypatch.setattr(SystemTrainer, "audit",
                        lambda self, seed=None: seeds.append(seed) or real(self, seed))
    out = run_retrain(spec, cf.audit(spec), place=False)
    assert seeds == [None]  # the one selection audit, on the selection stream
    assert evaluation_seed(0) not in seeds and out.data


def test_train_cli_imposes_constraints_on_top_of_ppo_cb_as_the_gate_does(tri, tmp_path,
                                                                         cli_here):
    """A spec's [retrain] algo = "ppo-cb" imposes its thresholds on top of its betas
    (TrainConfig takes constraints with every generic algo); before, ``causalfair train
    --algo ppo-cb --constraint ...`` was refused ("takes fixed betas"), so the gate's
    retrain could not be reproduced from the command line."""
    proc = cli_here("train", "--system", "tri_rt4:make_sim", "--algo", "ppo-cb",
                    "--beta-lambda", "1", "--iterations", "1", "--individuals", "48",
                    "--horizon", "1", "--eval-every", "1", "--set", "audit_n=100",
                    "--constraint", "max_abs_C<=5", "--out", "run", "--no-progress",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "constraints max_abs_C<=5: met" in proc.stdout, proc.stdout

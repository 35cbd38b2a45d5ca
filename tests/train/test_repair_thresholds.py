"""Every repair imposes every threshold of the spec, pairs of groups included: the PPO
family through PPO-Lagrangian on top of its own penalty (causalfair.train.lagrangian), the
exact repair on the tabular model (causalfair.train.repair); docs/ci-gate.md, "Which
thresholds a repair imposes"."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from causalfair.audit.gate import run_gate
from causalfair.audit.retrain import _train_config, check_retrain
from causalfair.audit.spec import load_spec
from causalfair.engines.effects import decompose
from causalfair.engines.groups import compare
from causalfair.errors import ConfigError, SpecError
from causalfair.thresholds import FAIL, PASS, Constraint
from causalfair.train.config import TrainConfig
from causalfair.train.lagrangian import Lagrangian
from tests.audit.test_three_groups import TRI

# the three-group system of tests/audit/test_three_groups.py, and the same system without
# its tabular model (Monte Carlo only), observing its level as a feature (PPO-Cb's
# Lambda pairs units through their features)
MODULE = TRI + '''
import dataclasses

def make_sim(horizon=1):
    m = dataclasses.replace(make(horizon).tabular, feature_names=["level"],
                            features=np.tile(np.array([[0.0], [1.0]]), (3, 1, 1)))
    s = System(id="tri", groups=("A", "B", "C"), tabular=m, horizon=horizon,
               levels=("low", "high"), features=("level",))
    return dataclasses.replace(s, tabular=None, id="tri-sim")
'''

SPEC = '''name = "g"
[system]
factory = "tri_r29:make_sim"
[policy]
checkpoint = "run/checkpoint.pt"
[engine]
kind = "mc"
n = 400
seed = 0
[thresholds]
{thresholds}
[retrain]
algo = "{algo}"
iterations = 2
{betas}
'''


@pytest.fixture
def here(tmp_path, monkeypatch):
    (tmp_path / "tri_r29.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("tri_r29", None)


def _spec(here, thresholds, algo="ppo-cb", betas="betas = { C = 1.0, Lambda = 0.5 }"):
    ck = here / "run" / "checkpoint.pt"
    if not ck.exists():  # the spec names a checkpoint; these tests read only the spec
        ck.parent.mkdir(exist_ok=True)
        ck.write_bytes(b"")
    path = here / f"{algo}.toml"
    path.write_text(SPEC.format(thresholds=thresholds, algo=algo, betas=betas), encoding="utf-8")
    return load_spec(path)


def test_every_ppo_retrain_imposes_every_threshold_on_top_of_its_betas(here):
    """Before, [retrain] algo = "ppo-cb" trained with its betas alone (no constraint)."""
    spec = _spec(here, '"abs_C[B-A]" = 0.03\nmax_abs_C = 0.5\nLambda = 0.2')
    config = _train_config(TrainConfig, spec, spec.retrain)
    assert config.algo == "ppo-cb" and (config.beta_c, config.beta_lambda) == (1.0, 0.5)
    assert config.constraints == ("abs_C[B-A]<=0.03", "max_abs_C<=0.5", "Lambda<=0.2")
    assert config.audit_n == 400
    # ppo-lag stays PPO-Lagrangian alone: the same constraints, no beta
    lag = _spec(here, '"abs_C[B-A]" = 0.03', algo="ppo-lag", betas="")
    config = _train_config(TrainConfig, lag, lag.retrain)
    assert (config.algo, config.beta_c, config.beta_lambda) == ("ppo-c", 0.0, 0.0)
    assert config.constraints == ("abs_C[B-A]<=0.03",)


@pytest.mark.parametrize("threshold, named", [
    ("tpr_gap = 0.1", ["tpr_gap", "cannot impose", "unknown or not repairable"]),
    ("min_ratio_selection = 0.8", ["min_ratio_selection", "cannot impose", "min_ratio_V"]),
])
def test_a_threshold_no_repair_imposes_is_refused_by_name(here, threshold, named):
    with pytest.raises(SpecError) as info:
        check_retrain(_spec(here, threshold))
    msg = str(info.value)
    assert "\n" not in msg and all(s in msg for s in named), msg


def test_lagrangian_expands_every_pair_key_and_refuses_an_unknown_pair():
    lag = Lagrangian(["max_abs_C<=0.1", "Lambda[C-B]<=0.2", "min_ratio_V>=0.8"],
                     ("A", "B", "C"), lr=0.5, system_id="tri")
    assert [k.key for k in lag.cons] == ["abs_C[B-A]", "abs_C[C-A]", "abs_C[B-C]",
                                         "Lambda[C-B]", "min_ratio_V[B-A]", "min_ratio_V[C-A]",
                                         "min_ratio_V[B-C]"]
    assert lag.pairs[:4] == [(1, 0), (2, 0), (1, 2), (2, 1)] and lag.lambda_pairs
    with pytest.raises(ConfigError, match=r"constraints: abs_C\[B-Z\] <= 0.1: 'B-Z' names no two groups; name two of the groups A, B, C"):
        Lagrangian(["abs_C[B-Z]<=0.1"], ("A", "B", "C"), lr=0.5, system_id="tri")


def test_gate_retrain_ppo_cb_imposes_a_pair_threshold_and_says_when_it_fails(here):
    """A three-group simulator gated with a pair threshold and [retrain] algo = "ppo-cb":
    the repair trains under the pair's constraint; its audit meets it, or the gate fails
    the repair naming the pair's number."""
    from causalfair.systems import make as make_system
    from causalfair.train.system_run import train_system

    system = make_system("tri_r29:make_sim")
    train_system(system, TrainConfig(algo="ppo", iterations=1, n_individuals=96, horizon=1),
                 out=here / "run")
    path = here / "g.toml"
    path.write_text(SPEC.format(thresholds='"abs_C[B-A]" = 0.03\nmax_abs_C = 0.5',
                                algo="ppo-cb", betas="betas = { C = 1.0, Lambda = 0.5 }"),
                    encoding="utf-8")
    gate = run_gate([path], retrain=True)
    entry = gate.entries[0]
    assert entry.after is not None, entry.to_dict()
    check = entry.repair_check
    assert check["imposed"] == ["abs_C[B-A]<=0.03", "max_abs_C<=0.5"]
    pair = {v.key: v for v in entry.after.verdicts}["abs_C[B-A]"]
    if pair.status == PASS:
        assert check["constraints_met"] is True
    else:  # the gate says the repair failed, naming the number
        assert entry.overall == FAIL and check["constraints_met"] is False
        text = " ".join(check["problems"])
        assert "met its thresholds on none" in text and f"abs_C[B-A] = {pair.estimate:.6g}" in text


def _tri_model(tmp_path):
    (tmp_path / "tri_r29.py").write_text(MODULE, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        import tri_r29
        return tri_r29.make(1).tabular
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("tri_r29", None)


def test_exact_repair_meets_max_abs_C_on_every_pair(tmp_path):
    """T = 1: the most profitable table (d1 everywhere) has V = (0.3, 0.4, 0.4), |C| up to
    0.1 and ratio_V down to 0.75; the repair under max_abs_C <= 0.05 and min_ratio_V >= 0.9
    meets both bounds on every pair, as the audit's group comparison measures them."""
    from causalfair.train.repair import best_found

    model = _tri_model(tmp_path)

    def worst(table):
        cmp = compare(decompose(model, np.asarray(table), 1))
        return (max(abs(q["C"][0]) for q in cmp.pairs.values()),
                min(q["ratio_V"][0] for q in cmp.pairs.values()))

    assert worst(np.ones((3, 2))) == pytest.approx((0.1, 0.75))
    res = best_found(model, 1, [Constraint("max_abs_C", 0.05), Constraint("min_ratio_V", 0.9)],
                     n_random=2, outer=8, inner=60)
    assert res.best is not None, res.summary()
    assert [c.key for c in res.constraints] == ["abs_C[B-A]", "abs_C[C-A]", "abs_C[B-C]",
                                                "min_ratio_V[B-A]", "min_ratio_V[C-A]",
                                                "min_ratio_V[B-C]"]
    max_c, min_ratio = worst(res.best.table)
    assert max_c <= 0.05 + 1e-9 and min_ratio >= 0.9 - 1e-9
    assert res.best.metrics["C[C-A]"] == pytest.approx(
        compare(decompose(model, res.best.table, 1)).quantity("C-A", "C")[0])
    assert res.best.utility > 0.5  # not a collapsed policy (d0 everywhere: 0; d1: 0.77)


def test_generic_trainer_measures_a_pair_constraint_as_the_audit_does(tmp_path):
    """On the tabular three-group system (exact audits) a pair constraint that cannot hold
    (C(C-A) = 0.4 p_C - 0.5 (0.6 p_A + 0.2 (1 - p_A)) >= -0.3 for every policy at T = 1) is
    judged on the pair's exact value, its multiplier rises, and the run reports that no
    audit met it."""
    from causalfair.policies.grid import policy_table
    from causalfair.systems import System
    from causalfair.train.generic import SystemTrainer

    model = _tri_model(tmp_path)
    system = System(id="tri", groups=("A", "B", "C"), tabular=model, horizon=1,
                    levels=("low", "high"))
    tr = SystemTrainer(system, TrainConfig(algo="ppo-c", constraints=("C[C-A]<=-0.35", "min_ratio_V[B-A]>=0.1"),
                                           iterations=2, eval_every=1, n_individuals=48,
                                           horizon=1))
    rows = [tr.step(), tr.step()]
    final = tr.finish()
    assert final["constraints_met"] is False
    assert rows[0]["lagrange_C[C-A]"] > 0
    exact = compare(decompose(model, policy_table(tr.policy(), model, 1), 1))
    assert rows[-1]["C[C-A]"] == pytest.approx(exact.quantity("C-A", "C")[0])
    assert rows[-1]["min_ratio_V[B-A]"] == pytest.approx(exact.quantity("B-A", "ratio_V")[0])
    assert rows[0]["lagrange_min_ratio_V[B-A]"] == 0.0  # met: its multiplier stays at 0
    assert any("C[C-A] = " in s for s in final["constraints_failed"])


def test_a_search_over_many_pairs_is_refused_before_it_starts(monkeypatch):
    """Each step of the search is one exact pass, every pair's C, DPE, IPE, SPE the
    differences of its per-group values (h5grp F5: one pass a pair, 60 groups 1.9 s an
    attempt and 1,770 graphs held), with its T kernels of every start, and the K x K Lambda
    terms of each pair a Lambda constraint names. max_abs_C over 12 groups (66 pairs), once
    refused under 100M (67 passes), fits; max_Lambda over 30 groups of 20 levels (435
    pairs' terms, about 86 MiB; measured 213 MiB) is refused at once, naming the pairs."""
    from causalfair.errors import ResourceLimitError
    from causalfair.train.repair import best_found
    from tests.engines.test_groups_many import many

    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "100M")
    res = best_found(many(12, K=10), 20, [Constraint("max_abs_C", 0.05)], n_random=12,
                     outer=1, inner=1)
    assert len(res.attempts) >= 15 and len(res.constraints) == 66
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "60M")
    with pytest.raises(ResourceLimitError) as info:
        best_found(many(30, K=20), 1, [Constraint("max_Lambda", 0.05)], n_random=12, outer=1,
                   inner=1)
    assert ("the exact repair: one exact pass a step of 16 starting tables, horizon 1, 30 "
            "groups x 20 levels, and the Lambda terms of 435 pairs") in str(info.value), info.value
    assert "fewer Lambda pairs" in str(info.value)
    res = best_found(many(30, K=20), 1, [Constraint("max_abs_C", 0.05)], n_random=12,
                     outer=1, inner=1)  # the same model's pairs without Lambda: one pass
    assert len(res.constraints) == 435

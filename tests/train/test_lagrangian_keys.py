"""PPO-Lagrangian imposes every threshold key its audit measures, each with its own
multiplier moved on the audit's value of that key (docs/training.md, "PPO-Lagrangian"),
on the example clinic without its tabular model (Monte Carlo audits only)."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from causalfair.audit.spec import load_spec
from causalfair.errors import ConfigError, SpecError
from causalfair.thresholds import PPO_LAG_KEYS
from causalfair.train import TrainConfig
from causalfair.train.generic import SystemTrainer
from causalfair.train.system_run import train_system

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(horizon=6, n_individuals=256, eval_every=2, audit_n=500, seed=0)


@pytest.fixture(scope="module")
def clinic_sim():
    spec = importlib.util.spec_from_file_location("_clinic_keys", ROOT / "docs/examples/clinic.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses read their module
    try:
        spec.loader.exec_module(mod)
        yield dataclasses.replace(mod.make_clinic(), tabular=None, id="clinic-sim")
    finally:
        sys.modules.pop(spec.name, None)


def test_each_multiplier_moves_on_its_own_keys_audit(clinic_sim):
    """One audited iteration: the Lambda multiplier moves on the audit's Lambda (the far
    end of its CI), the abs_DPE one on |DPE|, the abs_C one (a loose bound) stays at 0;
    the constraints are met only if all of them are, so a failing Lambda fails the run
    while abs_C holds."""
    cons = ("Lambda<=0.02", "abs_C<=5", "abs_DPE<=0.01")
    tr = SystemTrainer(clinic_sim, TrainConfig(algo="ppo-c", constraints=cons, iterations=1,
                                               lagrange_lr=0.5, **{**SMALL, "eval_every": 1}))
    row = tr.step()
    lam_hi = row["Lambda_ci"][1]
    assert lam_hi > 0.02  # the Lambda constraint is violated on this audit
    assert row["lagrange_Lambda"] == pytest.approx(0.5 * (lam_hi - 0.02) / 0.02)
    dlo, dhi = row["DPE_ci"]
    far = max(abs(dlo), abs(dhi))
    assert row["lagrange_abs_DPE"] == pytest.approx(max(0.0, 0.5 * (far - 0.01) / 0.01))
    assert row["lagrange_abs_DPE"] != pytest.approx(row["lagrange_Lambda"])
    assert row["lagrange_abs_C"] == 0.0 and max(map(abs, row["C_ci"])) < 5
    assert row["lagrange_multiplier"] == row["lagrange_Lambda"]  # the first constraint's
    assert row["constraints_met"] is False
    assert tr.finish()["constraints_met"] is False


def test_unsupported_keys_are_refused_by_name(tmp_path):
    with pytest.raises(ConfigError) as info:
        TrainConfig(algo="ppo-c", constraints=("tpr_gap<=0.1",))
    msg = str(info.value)
    assert "'tpr_gap'" in msg and all(k in msg for k in PPO_LAG_KEYS) and "\n" not in msg
    p = tmp_path / "s.toml"
    p.write_text('name = "s"\n[system]\nid = "lending-1"\n[thresholds]\nLambda = 0.1\n'
                 'tpr_gap = 0.1\n[retrain]\nalgo = "ppo-lag"\n')
    with pytest.raises(SpecError, match=r"tpr_gap: \[retrain\] algo 'ppo-lag' imposes only "
                                        + ", ".join(PPO_LAG_KEYS)):
        load_spec(p)
    p.write_text('name = "s"\n[system]\nid = "lending-1"\n[thresholds]\nLambda = 0.1\n'
                 'abs_DPE = 0.1\n[retrain]\nalgo = "ppo-lag"\n')
    assert load_spec(p).thresholds == {"Lambda": 0.1, "abs_DPE": 0.1}


@pytest.mark.slow
def test_a_lambda_constraint_lowers_the_audited_lambda(clinic_sim):
    """Same seed, same budget: plain PPO ends with Lambda above 0.08 by the gate's rule
    (its whole CI above); PPO-Lagrangian with Lambda <= 0.08 keeps an audited policy
    whose CI lies inside the bound, at a utility near plain PPO's."""
    # at eps = 0.1 (the clinic declares no eps; the figures in docs/training.md are at 0.1)
    plain = train_system(clinic_sim, TrainConfig(algo="ppo", iterations=8, lambda_eps=0.1,
                                                 **SMALL))
    lag = train_system(clinic_sim, TrainConfig(algo="ppo-c", constraints=("Lambda<=0.08",),
                                               beta_c=0.0, iterations=8, lambda_eps=0.1,
                                               **SMALL))
    assert plain.metrics["Lambda_ci"][0] > 0.08, plain.metrics
    m = lag.metrics
    assert m["constraints_met"] is True and m["Lambda_ci"][1] <= 0.08, m
    audited = lag.history.dropna(subset=["Lambda"])
    assert audited["lagrange_Lambda"].iloc[0] > 0  # the multiplier rose on the first audit
    kept = audited[audited["constraints_met"].astype(bool)]
    assert all(ci[1] <= 0.08 for ci in kept["Lambda_ci"])
    best = kept.loc[kept["utility"].idxmax()]  # the best-utility policy that passed
    # the final metrics are that policy audited again on the evaluation stream, not the
    # selection audit it was kept on
    assert (m["utility"], m["Lambda"]) != (best["utility"], best["Lambda"]), (m, best)
    assert m["utility"] > plain.metrics["utility"] - 0.1


def test_many_pairs_weights_and_loss_pairs_are_linear_in_the_constraints():
    """A max_* key over 300 groups is 44,850 constraints: loss_pairs and weight() (read on
    every minibatch, weight once per pair) took 28 s and 40 ms each; they read an index
    built once, and give the sums of the scan they replace (their time is not asserted
    here: a unit test is no timer; 120 groups, 7,140 pairs, keep it short)."""
    import numpy as np

    from causalfair.train.lagrangian import Lagrangian, scale

    names = [f"g{i}" for i in range(120)]
    lag = Lagrangian(["max_abs_C<=0.1", "abs_C[g2-g1]<=0.2", "C[g2-g1]<=0.3",
                      "max_Lambda<=0.1"], names, lr=0.1, system_id="x")
    lag.multipliers.values = np.random.default_rng(0).random(len(lag.cons))
    pairs = lag.loss_pairs("C")
    w = [lag.weight("abs_C", ab) for ab in pairs]
    # every pair of max_abs_C, and g2-g1 of C[g2-g1] (max_abs_C has it as g1-g2)
    assert len(pairs) == 120 * 119 // 2 + 1 and len(set(pairs)) == len(pairs)
    assert lag.loss_pairs("Lambda") == [p for p in pairs if p != (2, 1)]
    for i in (0, 1, 17, len(pairs) - 1):  # the scan's sums, in the same order
        ab = pairs[i]
        want = sum(float(v) / scale(k) for v, k, p in zip(
            lag.multipliers.values, lag.cons, lag.pairs, strict=True)
            if k.base == "abs_C" and p == ab)
        assert w[i] == want
    ab = lag.pairs[lag.cons.index(next(k for k in lag.cons if k.key == "C[g2-g1]"))]
    assert lag.weight("C", ab) > 0 and lag.weight("abs_C") == 0.0

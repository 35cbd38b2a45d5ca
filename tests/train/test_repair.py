"""Constrained repair: the multipliers, the augmented Lagrangian, the table search
against independent engines, and the gate's repair that never hides a failure."""

from __future__ import annotations

import json
import math
import re
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import causalfair as cf
from causalfair.audit.spec import load_spec
from causalfair.errors import InputError, SpecError
from causalfair.train.repair import (
    Constraint,
    Multipliers,
    augmented_lagrangian,
    best_found,
    constraints_from_thresholds,
    lp_bound,
    parse_constraint,
    repair_network,
)

# ------------------------------------------------------------ a tiny known problem
# maximise f(x) = -(x - 2)^2  subject to  x <= 1.
# KKT: the optimum is x* = 1 and f'(x*) = 2 = lambda* * 1, so lambda* = 2.

def test_multiplier_moves_the_right_way():
    m = Multipliers([1.0], lr=0.5)
    assert m.update([1.5])[0] == pytest.approx(0.25)  # violated: up by lr * 0.5
    assert m.update([1.2])[0] == pytest.approx(0.35)
    assert m.update([0.0])[0] == 0.0  # slack: down, never below 0


def test_primal_dual_with_multipliers_converges_to_the_constrained_optimum():
    """Gradient ascent on the Lagrangian f - lambda (x - 1), dual ascent on lambda."""
    x, mult = 0.0, Multipliers([1.0], lr=0.05)
    for _ in range(4000):
        lam = mult.values[0]
        x += 0.05 * (-2.0 * (x - 2.0) - lam)
        mult.update([x])
    assert x == pytest.approx(1.0, abs=1e-3)
    assert mult.values[0] == pytest.approx(2.0, abs=1e-2)


def test_augmented_lagrangian_finds_the_known_optimum_and_multiplier():
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)

    def fn():
        return -(x[0] - 2.0) ** 2, (x - 1.0)

    res = augmented_lagrangian(fn, [x], outer=40, inner=100, lr=0.05,
                               snapshot=lambda _i: float(x.detach()[0]))
    assert res.multipliers[0] == pytest.approx(2.0, abs=1e-2)
    assert res.best_state == pytest.approx(1.0, abs=1e-3)
    assert res.best_state <= 1.0  # the kept iterate is feasible


def test_augmented_lagrangian_rows_are_independent_problems():
    """A batch of two problems (bounds 1 and 3) gives each its own optimum: x* = 1
    (multiplier 2) and x* = 2 (bound slack, multiplier 0)."""
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    bounds = torch.tensor([1.0, 3.0], dtype=torch.float64)

    def fn():
        return -(x - 2.0) ** 2, (x - bounds)[:, None]

    res = augmented_lagrangian(fn, [x], outer=40, inner=100, lr=0.05,
                               snapshot=lambda i: float(x.detach()[i]))
    assert res.best_state[0] == pytest.approx(1.0, abs=1e-3)
    assert res.best_state[1] == pytest.approx(2.0, abs=1e-3)
    np.testing.assert_allclose(res.multipliers[:, 0], [2.0, 0.0], atol=1e-2)


# --------------------------------------------------------------------- constraints
def test_constraints_parse_and_refuse_what_they_cannot_impose():
    c = parse_constraint("abs_C<=0.05")
    assert (c.key, c.bound, c.metric) == ("abs_C", 0.05, "C")
    assert c.value({"C": -0.2}) == 0.2 and not c.holds({"C": -0.2}) and c.holds({"C": 0.04})
    assert Constraint("C", 0.0).holds({"C": -0.3})  # signed: only an upper bound
    with pytest.raises(InputError, match="expected QUANTITY<=VALUE"):
        parse_constraint("abs_C=0.05")
    with pytest.raises(InputError, match="tpr_gap: the exact repair cannot impose"):
        constraints_from_thresholds({"abs_C": 0.1, "tpr_gap": 0.1})
    with pytest.raises(InputError, match="bound -0.1 < 0 can never hold"):
        Constraint("abs_C", -0.1)


# ------------------------------------------------------------- search on tables
def small_model(seed=0, K=5):
    rng = np.random.default_rng(seed)
    return cf.TabularModel(
        kernel=rng.dirichlet(np.ones(K) * 0.7, size=(2, 2, K)),
        initial=rng.dirichlet(np.ones(K), size=2),
        potential=np.sort(rng.normal(size=(2, K)), axis=1),
        reward=rng.normal(size=(2, 2, K)),
    )


def test_best_found_is_feasible_below_the_bound_and_matches_an_independent_search():
    """With |C| only, the LP is an upper bound over all policies and SLSQP's stationary
    search (frontier.fair_lp(stationary=True), an independent method) a reference: the
    augmented Lagrangian's best table is feasible on the numpy audit, below the bound,
    and at least as good as SLSQP's to 1%."""
    m = small_model(1)
    T = 8
    free = cf.fair_lp(m, T, eps=math.inf).utility
    tight = 0.3 * abs(cf.decompose(m, cf.fair_lp(m, T, eps=math.inf).policy, T).C)
    cons = [Constraint("abs_C", tight)]
    # 10 rounds find the table 20 find (utility -1.62571 here, 3.3548 on small_model(8))
    r = best_found(m, T, cons, n_random=4, outer=10, inner=100)
    assert r.passed
    d = cf.decompose(m, r.best.table, T)
    assert abs(d.C) <= tight
    assert d.total_utility == pytest.approx(r.best.utility, abs=1e-12)
    assert r.bound is not None and r.best.utility <= r.bound + 1e-9 <= free + 1e-9
    slsqp = cf.fair_lp(m, T, eps=tight, stationary=True).utility
    assert r.best.utility >= slsqp - 0.01 * abs(slsqp)


def test_lp_bound_uses_only_linear_thresholds():
    m = small_model(2)
    u, keys, _ = lp_bound(m, 6, [Constraint("abs_C", 0.01), Constraint("Lambda", 0.01)])
    assert keys == ("abs_C",)
    assert u == pytest.approx(cf.fair_lp(m, 6, eps=0.01).utility, abs=1e-9)


@pytest.mark.slow
def test_repair_network_passes_and_reports_the_numbers_of_its_audit():
    m = small_model(3)
    T = 6
    torch.manual_seed(0)
    net = cf.policies.checkpoint.mlp(m.n_levels + 2, (8,), 1)
    enc = cf.FeatureEncoding("onehot", n_levels=m.n_levels, n_groups=2)
    d0 = cf.decompose(m, cf.TorchPolicy(net, enc), T)
    cons = [Constraint("abs_C", 0.5 * abs(d0.C)), Constraint("Lambda", 0.5 * d0.Lambda)]
    before = [p.detach().clone() for p in net.parameters()]
    # 8 rounds: the same repair as 15 here (utility 0.1995, Lambda at 0.999 of its bound);
    # it passes at torch seeds 0, 1 and 2 with either
    r = repair_network(m, T, net, enc, cons, n_random=2, outer=8, inner=80)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))  # not mutated
    assert r.passed and r.module is not None
    d = cf.decompose(m, cf.TorchPolicy(r.module, enc), T)
    assert abs(d.C) <= cons[0].bound and d.Lambda <= cons[1].bound
    assert r.best.utility == pytest.approx(d.total_utility, abs=1e-12)
    assert r.best_found.utility >= r.best.utility - 1e-12


def test_unreachable_threshold_gives_no_passing_repair_with_the_closest_numbers():
    """SPE does not depend on the policy: a bound below |SPE| cannot be met."""
    m = small_model(4)
    spe = abs(cf.decompose(m, np.zeros((2, 5)), 5).SPE)
    r = best_found(m, 5, [Constraint("abs_SPE", spe / 2)], n_random=1, outer=3, inner=10)
    assert not r.passed and r.best is None
    att = r.best_attempt()
    assert att is not None and abs(att.metrics["SPE"]) == pytest.approx(spe, abs=1e-12)
    assert "no passing repair found" in r.summary()
    assert r.to_dict()["passed"] is False


# ------------------------------------------------------------------------ the gate
def _gate_case(tmp_path: Path, thresholds: str, retrain: str = 'algo = "exact"\nstarts = 1\niterations = 4') -> Path:
    m = small_model(5)
    cf.systems.save_tabular(tmp_path / "model.npz", m)
    torch.manual_seed(0)
    net = cf.policies.checkpoint.mlp(m.n_levels + 2, (8,), 1)
    with torch.no_grad():  # a policy with a clear gap: approve s+ only
        net[-1].bias.fill_(0.0)
    enc = cf.FeatureEncoding("onehot", n_levels=m.n_levels, n_groups=2)
    cf.save_checkpoint(tmp_path / "pol.pt", net, encoding=enc, architecture={
        "type": "mlp", "input_dim": m.n_levels + 2, "hidden": [8], "activation": "tanh",
        "output_dim": 1})
    spec = tmp_path / "spec.toml"
    spec.write_text(textwrap.dedent(f"""\
        name = "small"
        horizon = 5
        [system]
        tabular = "model.npz"
        [policy]
        checkpoint = "pol.pt"
        [thresholds]
        {thresholds}
        [retrain]
        """) + retrain + "\n")
    return spec


@pytest.fixture
def gate(cli_here, monkeypatch):
    """``causalfair gate SPEC --retrain --json gate.json EXTRA`` in the spec's folder, in this
    process (torch is imported here already), every progress line reported."""
    monkeypatch.setenv("CAUSALFAIR_PROGRESS_SECONDS", "0")

    def run(spec: Path, *extra: str) -> subprocess.CompletedProcess:
        return cli_here("gate", spec, "--retrain", "--json", spec.parent / "gate.json", *extra,
                        cwd=spec.parent)

    return run


def test_gate_reports_no_passing_repair_with_the_best_attempts_numbers(tmp_path, gate):
    # SPE does not depend on the policy: no number of rounds meets abs_SPE = 0, so one will do
    spec = _gate_case(tmp_path, "abs_SPE = 0.0", 'algo = "exact"\nstarts = 1\niterations = 1')
    out = gate(spec)
    assert out.returncode == 1, out.stderr
    assert "no passing repair found" in out.stdout
    doc = json.loads((tmp_path / "gate.json").read_text())
    entry = doc["specs"][0]
    assert entry["overall"] == "FAIL" and entry["repair"]["passed"] is False
    assert entry["repair"]["result"]["SPE"] == pytest.approx(entry["after"]["verdicts"][0]["estimate"] * np.sign(entry["repair"]["result"]["SPE"]), abs=1e-12)


@pytest.mark.slow
def test_gate_exact_repair_passes_and_says_what_it_kept(tmp_path, gate):
    m = small_model(5)
    # a constant policy has Lambda = 0: the best constant's |C| (+ 0.01) is feasible
    c_const = min(abs(cf.decompose(m, np.full((2, 5), c), 5).C) for c in np.linspace(0, 1, 101))
    bound = round(c_const + 0.01, 4)
    # the repair spends Lambda's slack (0.006 -> 0.0499, under its 0.05): the honest-repair
    # rule refuses that unless the spec allows it (tests/audit/test_repair_honest.py)
    # 8 rounds repair as 15 do here (best found 2.5842 kept whole); it passes with [retrain]
    # seed 0, 1 and 2
    spec = _gate_case(tmp_path, f"abs_C = {bound}\nLambda = 0.05",
                      'algo = "exact"\nstarts = 2\niterations = 8\nallow_worse = ["Lambda"]')
    out = gate(spec, "--accept-repaired")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "utility kept:" in out.stdout
    # the repair reports its rounds on stderr (captured: not a terminal)
    assert re.search(r"^\[constrained repair \(\d+ starts\)\] done: \d+/8 rounds", out.stderr, re.M)
    doc = json.loads((tmp_path / "gate.json").read_text())
    e = doc["specs"][0]
    assert e["before"]["overall"] == "FAIL" and e["overall"] == "PASS"
    ck = tmp_path / e["retrained_checkpoint"]
    pol, meta = cf.load_checkpoint(ck)
    # the spec's system (a saved bare model) declares no eps, so its audit used "auto";
    # cf.decompose on the bare model itself defaults to 0.1 (docs/decomposition.md)
    d = cf.decompose(m, pol, 5, eps="auto")
    assert abs(d.C) <= bound and d.Lambda <= 0.05
    assert meta["metadata"]["repair"]["passed"] is True
    assert (tmp_path / "pol.pt").is_file()  # the original is untouched


def test_spec_refuses_betas_with_exact_and_an_unrepairable_threshold(tmp_path, gate):
    spec = _gate_case(tmp_path, "abs_C = 0.02", 'algo = "exact"\nbetas = { C = 1.0 }')
    with pytest.raises(SpecError, match="takes no betas"):
        load_spec(spec)
    # dp_gap: a quantity this model has (tpr_gap it has not: refused before, as unavailable)
    spec = _gate_case(tmp_path, "abs_C = 0.02\ndp_gap = 0.1")
    out = gate(spec)
    assert out.returncode == 2 and "dp_gap: the exact repair cannot impose" in out.stderr

"""Tests of the fair-policy LPs and the utility-fairness frontier (causalfair.engines.occupancy,
causalfair.engines.frontier, causalfair.engines.wen)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from causalfair.engines.effects import decompose
from causalfair.engines.frontier import frontier
from causalfair.engines.occupancy import InfeasibleError, OccupancyLP, fair_lp, policy_metrics
from causalfair.engines.wen import loan_belief_mdp, wen_evaluate, wen_lp
from causalfair.errors import InputError, ResourceLimitError
from causalfair.model import ModelError, TabularModel
from causalfair.policies.core import TablePolicy
from causalfair.systems.lending.settings import lending_setting

TOL = 1e-7
SETTINGS = ("lending-1", "lending-2", "lending-3")


@pytest.fixture(scope="module")
def models():
    return {s: lending_setting(s).tabular for s in SETTINGS}


def toy_model() -> TabularModel:
    """Two groups start at level 0; d1 moves to level 1 (gain 1). Approving group a earns
    1, approving group b costs 0.5. With T = 1 and weights 1/2: U = p_a/2 - p_b/4 and
    C = DPE = DP = p_a - p_b, so the best policy with |C| <= eps (eps <= 1) is p_a = 1,
    p_b = 1 - eps with U = 1/4 + eps/4."""
    stay = np.eye(2)
    up = np.array([[0.0, 1.0], [0.0, 1.0]])
    kernel = np.stack([np.stack([stay, up])] * 2)
    reward = np.zeros((2, 2, 2))
    reward[0, 1, 0] = 1.0
    reward[1, 1, 0] = -0.5
    return TabularModel(kernel=kernel, initial=[[1.0, 0.0], [1.0, 0.0]], potential=[0.0, 1.0],
                        reward=reward, name="toy")


def bellman_optimum(model: TabularModel, T: int) -> float:
    """Unconstrained optimum by backward induction (independent of the LP)."""
    V = np.zeros((model.n_groups, model.n_levels))
    for _ in range(T):
        Q = model.reward + np.einsum("sdxy,sy->sdx", model.kernel, V)
        V = Q.max(axis=1)
    return float(model.group_weights @ np.einsum("sx,sx->s", model.initial, V))


# ------------------------------------------------------------------ hand-computed
@pytest.mark.parametrize("constraint", ["C", "DPE", "DP"])
@pytest.mark.parametrize("eps", [0.0, 0.3, 0.7])
def test_toy_model_hand_computed(constraint, eps):
    res = fair_lp(toy_model(), 1, eps=eps, constraint=constraint)
    assert res.utility == pytest.approx(0.25 + 0.25 * eps, abs=TOL)
    assert res.policy[0, 0, 0] == pytest.approx(1.0, abs=TOL)
    assert res.policy[0, 1, 0] == pytest.approx(1.0 - eps, abs=TOL)
    assert res.C == pytest.approx(eps, abs=TOL)


def test_toy_frontier_is_the_hand_computed_line():
    f = frontier(toy_model(), 1, points=5)
    assert f.eps_min == pytest.approx(0.0, abs=TOL)
    assert f.eps[-1] == pytest.approx(1.0, abs=TOL)
    np.testing.assert_allclose(f.utilities, 0.25 + 0.25 * f.eps, atol=TOL)
    assert f.unconstrained.utility == pytest.approx(0.5, abs=TOL)


def test_toy_stationary_equals_time_indexed_at_T1():
    res = fair_lp(toy_model(), 1, eps=0.4, stationary=True)
    assert res.status == "heuristic" and res.stationary
    assert res.utility == pytest.approx(0.35, abs=1e-6)
    assert res.upper_bound == pytest.approx(0.35, abs=TOL)


# ------------------------------------------------------------- lending settings
@pytest.mark.parametrize("setting", SETTINGS)
def test_unconstrained_lp_equals_backward_induction(models, setting):
    m = models[setting]
    res = fair_lp(m, 20, eps=math.inf)
    assert res.utility == pytest.approx(bellman_optimum(m, 20), abs=1e-7)


@pytest.mark.parametrize("setting", SETTINGS)
def test_recovered_policy_audit_matches_lp(models, setting):
    m = models[setting]
    lp = OccupancyLP(m, 20)
    eps_min = lp.min_metric("C")
    for eps in (eps_min + 0.01, eps_min + 0.05, eps_min + 0.2):
        res = fair_lp(m, 20, eps=eps, lp=lp)
        dec = decompose(m, TablePolicy(res.policy), 20)
        assert dec.C == pytest.approx(res.C, abs=TOL)
        assert dec.total_utility == pytest.approx(res.utility, abs=TOL)
        assert abs(dec.C) <= eps + TOL
        assert res.audit_gap() <= TOL
        # The occupancy of the recovered policy is the LP's occupancy.
        mu = m.propagate(res.policy, 20)[:20]
        np.testing.assert_allclose(mu, res.occupancy.sum(-1), atol=1e-8)


@pytest.mark.parametrize("constraint", ["DPE", "DP"])
def test_other_constraints_hold_on_audit(models, constraint):
    m = models["lending-2"]
    free = fair_lp(m, 20, eps=math.inf, constraint=constraint)
    eps = abs(getattr(free, constraint)) / 2
    res = fair_lp(m, 20, eps=eps, constraint=constraint)
    audit = policy_metrics(m, res.policy, 20)
    assert abs(audit[constraint]) <= eps + TOL
    assert audit[constraint] == pytest.approx(getattr(res, constraint), abs=TOL)
    assert res.utility <= free.utility + TOL


def test_combined_constraints(models):
    m = models["lending-1"]
    res = fair_lp(m, 20, eps={"C": 0.05, "DP": 0.05}, constraint=("C", "DP"))
    audit = policy_metrics(m, res.policy, 20)
    assert abs(audit["C"]) <= 0.05 + TOL and abs(audit["DP"]) <= 0.05 + TOL
    only_c = fair_lp(m, 20, eps=0.05)
    assert res.utility <= only_c.utility + TOL


def test_three_groups_bound_the_largest_gap(models):
    a, b = models["lending-1"], models["lending-3"]
    m = TabularModel(kernel=np.concatenate([a.kernel, b.kernel[1:]]),
                     initial=np.concatenate([a.initial, b.initial[1:]]),
                     potential=np.concatenate([a.potential, b.potential[1:]]),
                     reward=np.concatenate([a.reward, b.reward[1:]]), name="three")
    lp = OccupancyLP(m, 10)
    eps = lp.min_metric("C") + 0.05
    res = fair_lp(m, 10, eps=eps, lp=lp)
    dec = decompose(m, res.policy, 10)
    assert dec.V.max() - dec.V.min() <= eps + TOL
    assert dec.V.max() - dec.V.min() == pytest.approx(res.C, abs=TOL)


def test_infeasible_gives_a_clear_message(models):
    m = models["lending-3"]
    lp = OccupancyLP(m, 20)
    eps_min = lp.min_metric("C")
    assert eps_min > 0.005  # lending-3's drift makes exact parity impossible
    with pytest.raises(InfeasibleError, match=r"^no policy satisfies \|C\| <= 0\.005 .*"
                       r"smallest achievable value is \|C\| >= "):
        fair_lp(m, 20, eps=0.005, lp=lp)
    res = fair_lp(m, 20, eps=0.005, lp=lp, raise_infeasible=False)
    assert res.status == "infeasible" and math.isnan(res.utility)
    # eps_min really is the boundary: just above it is feasible.
    assert fair_lp(m, 20, eps=eps_min + 1e-6, lp=lp).feasible


def test_bad_inputs_are_refused(models):
    m = models["lending-1"]
    with pytest.raises(ModelError, match="constraint: unknown value 'X'"):
        fair_lp(m, 20, eps=0.1, constraint="X")
    with pytest.raises(ModelError, match=r"eps\[C\]: must be a number >= 0"):
        fair_lp(m, 20, eps=-0.1)
    with pytest.raises(ModelError, match="horizon"):
        fair_lp(m, 0, eps=0.1)


# --------------------------------------------------------------------- frontier
@pytest.mark.parametrize("setting", SETTINGS)
def test_frontier_is_monotone_concave_and_audited(models, setting):
    f = frontier(models[setting], 20, points=20)
    u = f.utilities
    assert np.all(np.isfinite(u))
    assert np.all(np.diff(u) >= -TOL)
    # LP value as a function of the bound is concave (uniform grid).
    assert np.all(np.diff(u, 2) <= 1e-7)
    assert u[-1] == pytest.approx(f.unconstrained.utility, abs=1e-7)
    assert f.unconstrained.utility == pytest.approx(bellman_optimum(models[setting], 20), abs=1e-7)
    df = f.to_frame()
    assert (np.abs(df["C"] - df["audit_C"]) <= TOL).all()
    assert (df["abs_C"] <= df["eps"] + TOL).all()
    assert df["Lambda"].notna().all()


def test_place_gaps_are_nonnegative_and_exact(models):
    m = models["lending-1"]
    f = frontier(m, 20, points=10)
    rng = np.random.default_rng(0)
    tables = {f"random{i}": rng.uniform(size=(2, 7)) for i in range(3)}
    placed = f.place({"threshold:0.5": "threshold:0.5", "always": "always", **tables})
    assert list(placed["policy"][:2]) == ["threshold:0.5", "always"]
    assert (placed["gap"] >= -TOL).all()
    assert (placed["frontier_utility"] >= placed["frontier_interp"] - TOL).all()
    row = placed.iloc[0]
    direct = fair_lp(m, 20, eps=abs(row["C"]) + 1e-10)
    assert row["gap"] == pytest.approx(direct.utility - decompose(m, TablePolicy(
        (m.aux["p_repay"] > 0.5).astype(float)), 20).total_utility, abs=1e-7)
    # A frontier policy sits on the frontier.
    on = f.place([f.points[5].policy])
    assert on["gap"].iloc[0] == pytest.approx(0.0, abs=1e-6)


def test_one_lambda_eps_for_points_and_placed_policies(models):
    """Lambda on a frontier uses one eps, the one it was built with: at its points and
    for the policies placed against it; frontier.json says which, and where from."""
    m = models["lending-1"]
    f = frontier(m, 10, points=3, lambda_eps=0.05)
    placed = f.place({"threshold:0.5": "threshold:0.5"})
    want = decompose(m, TablePolicy((m.aux["p_repay"] > 0.5).astype(float)), 10, eps=0.05)
    assert placed["Lambda"].iloc[0] == pytest.approx(want.Lambda, abs=1e-12)
    point = f.points[1]
    assert point.Lambda == pytest.approx(decompose(m, point.table_policy(), 10, eps=0.05).Lambda,
                                         abs=1e-12)
    doc = f.to_dict()
    assert (doc["lambda_eps"], doc["lambda_eps_source"]) == (0.05, "given")
    declared = frontier(m, 10, points=2).to_dict()
    assert declared["lambda_eps"] == 0.1 and "declared by" in declared["lambda_eps_source"]


def test_place_accepts_torch_policies(models):
    torch = pytest.importorskip("torch")
    from causalfair.policies.core import FeatureEncoding, TorchPolicy, mlp

    torch.manual_seed(0)
    net = mlp(9, (8,), 1)
    pol = TorchPolicy(net, FeatureEncoding("onehot", 7, 2), name="net")
    f = frontier(models["lending-2"], 20, points=5)
    placed = f.place([pol])
    assert placed["policy"].iloc[0] == "net"
    assert placed["gap"].iloc[0] >= -TOL


def test_plot_writes_png(models, tmp_path):
    f = frontier(models["lending-1"], 10, points=5)
    fig = f.plot(["threshold:0.5"], path=str(tmp_path / "f.png"))
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(fig.axes) == 2


def test_stationary_variant_is_feasible_and_below_the_bound(models):
    m = models["lending-1"]
    res = fair_lp(m, 20, eps=0.05, stationary=True)
    assert res.status == "heuristic"
    assert np.ptp(res.policy, axis=0).max() == 0.0
    dec = decompose(m, res.policy[0], 20)
    assert abs(dec.C) <= 0.05 + TOL
    assert dec.total_utility == pytest.approx(res.utility, abs=1e-12)
    assert res.utility <= res.upper_bound + TOL
    assert res.upper_bound == pytest.approx(fair_lp(m, 20, eps=0.05).utility, abs=TOL)


# ------------------------------------------------- Wen et al.: counterexample MDP
def counterexample(rho_s4: float = 2.0):
    """App. B: s0 -> s1 -> s1 (majority), s2 -> s3 (a = 0) or s4 (a = 1) (minority)."""
    P = np.zeros((5, 2, 5))
    P[0, :, 1] = P[1, :, 1] = 1.0
    P[2, 0, 3] = P[2, 1, 4] = 1.0
    P[3, :, 3] = P[4, :, 4] = 1.0
    D = np.array([0.5, 0, 0.5, 0, 0])
    rho = np.array([0, 1.0, 0, 0, rho_s4])
    R = np.zeros((5, 2))
    R[2, 1] = 1.0  # the decision maker wants to offer at s2
    return P, R, D, rho, np.array([0, 0, 1, 1, 1]), 0.5


def test_counterexample_no_deterministic_fair_policy():
    P, R, D, rho, g, gamma = counterexample()
    for actions in itertools.product((0, 1), repeat=5):
        pi = np.eye(2)[list(actions)]
        ev = wen_evaluate(P, R, D, rho, g, gamma, pi)
        assert ev["rho"][0] == pytest.approx(0.5, abs=1e-12)  # every policy
        assert ev["rho"][1] == pytest.approx(float(actions[2]), abs=1e-12)
        assert ev["gap"] == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("eps", [0.0, 0.25, 0.49])
def test_counterexample_stochastic_fair_policy_exists(eps):
    P, R, D, rho, g, gamma = counterexample()
    res = wen_lp(P, R, D, rho, g, gamma, eps)
    # rho_min = pi(s2, 1) must lie in [1/2 - eps, 1/2 + eps]; R favours offering.
    assert res.policy[2, 1] == pytest.approx(0.5 + eps, abs=TOL)
    assert 0 < res.policy[2, 1] < 1
    assert res.objective == pytest.approx(0.5 * (0.5 + eps), abs=TOL)
    ev = wen_evaluate(P, R, D, rho, g, gamma, res.policy)
    assert ev["gap"] <= eps + TOL
    assert ev["objective"] == pytest.approx(res.objective, abs=TOL)


def test_counterexample_without_rho_s4_has_no_fair_policy():
    P, R, D, rho, g, gamma = counterexample(rho_s4=0.0)
    with pytest.raises(InfeasibleError, match=r"^no policy satisfies eps-demographic parity"):
        wen_lp(P, R, D, rho, g, gamma, 0.49)
    assert wen_lp(P, R, D, rho, g, gamma, 0.5).status == "optimal"


def test_wen_lp_refuses_non_separable_mdp():
    P, R, D, rho, g, gamma = counterexample()
    P[2, 0] = 0
    P[2, 0, 1] = 1.0  # minority state moves to a majority state
    with pytest.raises(ModelError, match="not separable"):
        wen_lp(P, R, D, rho, g, gamma, 0.1)


# ------------------------------------------ Wen et al.: Algorithm 1 on a loan MDP
@pytest.fixture(scope="module")
def loan():
    return loan_belief_mdp()


def value_iteration(L) -> float:
    V = np.zeros(L.P.shape[0])
    for _ in range(2000):
        V = (L.R + L.gamma * L.P @ V).max(axis=1)
    return float(L.D @ V)


def test_algorithm1_unconstrained_equals_value_iteration(loan):
    res = loan.lp(math.inf)
    assert res.objective == pytest.approx(value_iteration(loan), abs=1e-7)
    assert loan.evaluate(res.policy)["objective"] == pytest.approx(res.objective, abs=1e-7)


def test_algorithm1_fair_policy(loan):
    free = loan.lp(math.inf)
    assert free.gap > 0.01  # the constraint binds
    res = loan.lp(0.01)
    ev = loan.evaluate(res.policy)
    assert ev["gap"] <= 0.01 + TOL
    assert ev["objective"] == pytest.approx(res.objective, abs=1e-7)
    assert res.objective <= free.objective + TOL
    # Theorem 2.7: state-independent policies are fair (rho = 1[a = 1]); the LP does
    # at least as well as the best of them.
    best_const = -math.inf
    for q in np.linspace(0, 1, 21):
        pi = np.tile([1 - q, q], (loan.P.shape[0], 1))
        e = loan.evaluate(pi)
        assert e["gap"] == pytest.approx(0.0, abs=1e-9)
        best_const = max(best_const, e["objective"])
    assert res.objective >= best_const - TOL


# ---------------------------------------------------------------------------- CLI
def test_cli_writes_table_json_and_plot(tmp_path, capsys):
    from causalfair.cli import main

    out = tmp_path / "fr"
    rc = main(["frontier", "--setting", "lending-1", "--horizon", "8", "--points", "6",
               "--out", str(out), "--policy", "threshold:0.5", "always"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "threshold:0.5" in text and "gap" in text
    lines = (out / "frontier.csv").read_text().strip().splitlines()
    assert len(lines) == 7 and lines[0].startswith("eps,status,utility,C")
    doc = json.loads((out / "frontier.json").read_text())
    assert doc["setting"] == "lending-1" and len(doc["points"]) == 6
    assert [p["policy"] for p in doc["placed"]] == ["threshold:0.5", "always"]
    assert (out / "frontier.png").stat().st_size > 0


def test_cli_bad_input_exit_code(tmp_path, capsys):
    from causalfair.cli import main

    rc = main(["frontier", "--points", "1", "--out", str(tmp_path / "x")])
    assert rc == 2
    assert "--points: must be >= 2" in capsys.readouterr().err


def _random_model(G: int, K: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    k = rng.random((G, 2, K, K)) + 0.1
    ini = rng.random((G, K)) + 0.1
    rew = np.zeros((G, 2, K))
    rew[:, 1] = np.linspace(-1.0, 1.0, K)
    return TabularModel(kernel=k / k.sum(-1, keepdims=True),
                        initial=ini / ini.sum(-1, keepdims=True),
                        potential=np.linspace(0.0, 1.0, K), reward=rew)


def test_lp_memory_counts_the_pairs_of_groups_and_the_solve(monkeypatch):
    """The LP's rows of every pair of groups (G = 300 took 4.0 GiB where 12 MiB was
    counted) and HiGHS's solve (406 MiB at G = 2, K = 100, T = 50, counted 98 MiB) are
    checked before the program is built."""
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "32M")
    with pytest.raises(ResourceLimitError, match=r"of 60 groups \(1770 pairs\).*fewer groups"):
        OccupancyLP(_random_model(60, 3), 5)
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "200M")
    with pytest.raises(ResourceLimitError, match="frontier LP over 50 epochs"):
        OccupancyLP(_random_model(2, 100), 50)
    # the sparse pair rows give the LP of the dense ones: C of every pair within the bound
    monkeypatch.delenv("CAUSALFAIR_MAX_MEMORY")
    lp = OccupancyLP(_random_model(4, 3), 4)
    eps = 1.5 * lp.min_metric("C")
    res = lp.solve(eps, "C")
    V = np.asarray(res.V)
    assert max(abs(V[a] - V[b]) for a in range(4) for b in range(4)) <= eps + 1e-9
    assert len(lp.pairs) == 6


def test_infeasible_bound_is_infeasible_error_whatever_highs_status():
    """HiGHS stops with status 4 (model status Unknown) on this infeasible program at
    T = 20 (at T = 5 it says infeasible): the error is InfeasibleError with the smallest
    achievable |C|, never a RuntimeError."""
    model = _random_model(3, 3)
    lp = OccupancyLP(model, 20)
    low = lp.min_metric("C")
    for eps in (0.5 * low, 0.99 * low):
        with pytest.raises(InfeasibleError, match="smallest achievable value is"):
            fair_lp(model, 20, eps=eps, lp=lp)
        res = lp.solve(eps, "C", raise_infeasible=False, audit=False)
        assert res.status == "infeasible"
    assert fair_lp(model, 20, eps=1.01 * low, lp=lp).C <= 1.01 * low + 1e-9


@pytest.mark.parametrize("grid", [0.1, "0.1", np.float64(0.1), np.array(0.1)])
def test_an_eps_grid_that_is_one_number_is_refused_by_name(grid):
    # h6hunt1 F6: 0.1 crashed (TypeError: 'float' object is not iterable), "0.1" read its
    # characters ("eps[C]: ... got '0'")
    model = lending_setting("lending-1").tabular
    with pytest.raises(ModelError, match=r"^eps_grid: expected a list of eps values >= 0"):
        frontier(model, 3, eps_grid=grid)
    assert len(frontier(model, 3, eps_grid=(e for e in [0.1]), audit=False).eps) == 1


@pytest.mark.parametrize("kw,field", [({"stationary": "yes"}, "stationary"),
                                      ({"audit": 0}, "audit"),
                                      ({"raise_infeasible": "no"}, "raise_infeasible"),
                                      ({"lambda_eps": -1}, "lambda_eps")])
def test_fair_lp_and_frontier_flags_and_lambda_eps_are_named(kw, field):
    # h6hunt1 F7: a string flag read as True ("yes", "no" alike), and lambda_eps refused as
    # "eps: ..." (fair_lp's eps is the constraint's bound, another number)
    model = lending_setting("lending-1").tabular
    with pytest.raises((ModelError, InputError), match=rf"^{field}: must be"):
        fair_lp(model, 3, eps=0.1, **kw)
    if field in ("audit", "lambda_eps"):
        with pytest.raises((ModelError, InputError), match=rf"^{field}: must be"):
            frontier(model, 3, points=2, **kw)


def test_points_beside_an_eps_grid_is_refused():
    # a size given with the grid itself was ignored without a word (h6hunt1's leftover)
    model = lending_setting("lending-1").tabular
    with pytest.raises(ModelError, match=r"^points: 5 given with eps_grid"):
        frontier(model, 3, eps_grid=[0.0, 0.1], points=5, audit=False)
    assert len(frontier(model, 3, points=5, audit=False).eps) == 5
    assert len(frontier(model, 3, audit=False).eps) == 50  # the default grid's size

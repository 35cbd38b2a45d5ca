"""Are the printed intervals honest? Coverage of the exact value over many seeds, where the
exact engine gives the truth, and the CI rule's error rates at a threshold's bound.

Not repeated here: the Monte Carlo decomposition at n = 1,500 / 4,000 and T = 20 on
lending-1..3 (tests/engines/test_montecarlo.py), Lambda by forks on the example clinic
(tests/engines/test_montecarlo_system.py), Lambda_T's small-n bias
(tests/engines/test_lambda_horizon_bias.py). New: small n and short horizons (n = 20 per
group, T = 1 and 5) on lending-harder, Lambda by forks against the exact Lambda of a
lending model, small decision logs, the gate rule at the bound, a data-chosen pair of
groups. benchmarks/coverage_study.py prints the full table (docs/decomposition.md,
"How often the intervals cover").
"""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines.effects import decompose
from causalfair.engines.montecarlo import decompose_mc
from causalfair.model import TabularModel
from causalfair.policies.core import TablePolicy, parse_policy
from causalfair.systems import make
from causalfair.thresholds import FAIL, INCONCLUSIVE, PASS, judge_key, overall_verdict

EFFECTS = ("C", "DPE", "IPE", "SPE")


def _stochastic(tab) -> TablePolicy:  # tests/engines/test_montecarlo.py's table
    rng = np.random.default_rng(123)
    return TablePolicy(rng.uniform(0.05, 0.95, size=(tab.n_groups, tab.n_levels)))


def _coverage(system, pol, T: int, n: int, seeds: range) -> dict[str, float]:
    exact = decompose(system.tabular, pol, T).estimates()
    hits = dict.fromkeys(EFFECTS, 0)
    for s in seeds:
        ci = decompose_mc(system, pol, T, n=n, seed=s, check=False, jobs=1).intervals(0.05)
        for k in EFFECTS:
            hits[k] += bool(ci[k][0] <= exact[k] <= ci[k][1])
    return {k: v / len(seeds) for k, v in hits.items()}


# ------------------------------------------------------------ the CI rule at the bound
def test_gate_rule_at_the_bound_errs_at_half_alpha_per_threshold():
    """Threshold exactly at the true value (Monte Carlo, n = 100, T = 3, 200 seeds): each
    threshold PASSes and FAILs in about alpha / 2 = 2.5% of the seeds each (a one-sided
    test; Binomial(200, 0.025) has mean 5, sd 2.2: above 12 of 200 = 0.06 in 0.3%), so
    intervals too narrow (FAIL and PASS both frequent) or too wide (neither ever) fail.
    Four thresholds at once: the overall PASS is rarer than every single PASS (all must
    pass: the false PASS stays <= alpha / 2), the overall FAIL at least as frequent as each
    single FAIL and at most their sum (docs/ci-gate.md, "What a verdict promises")."""
    system = make("lending-1")
    pol = _stochastic(system.tabular)
    T, n, S = 3, 100, 200
    exact = decompose(system.tabular, pol, T).estimates()
    count = {k: {PASS: 0, FAIL: 0, INCONCLUSIVE: 0} for k in (*EFFECTS, "all")}
    for s in range(S):
        ci = decompose_mc(system, pol, T, n=n, seed=s, check=False, jobs=1).intervals(0.05)
        v = {k: judge_key(k, ci[k][0], ci[k][1], exact[k]) for k in EFFECTS}
        v["all"] = overall_verdict([v[k] for k in EFFECTS])
        for k, verdict in v.items():
            count[k][verdict] += 1
    share = {k: {x: c / S for x, c in cnt.items()} for k, cnt in count.items()}
    for k in EFFECTS:
        assert share[k][PASS] <= 0.06 and share[k][FAIL] <= 0.06, (k, share[k])
        assert share[k][INCONCLUSIVE] >= 0.88, (k, share[k])
    assert sum(share[k][PASS] + share[k][FAIL] for k in EFFECTS) / 4 >= 0.02, share
    assert share["all"][PASS] <= min(share[k][PASS] for k in EFFECTS), share
    assert max(share[k][FAIL] for k in EFFECTS) <= share["all"][FAIL] \
        <= sum(share[k][FAIL] for k in EFFECTS), share


# ------------------------------------------------------------ a data-chosen pair
def _same_groups(G: int) -> TabularModel:
    """G groups with the same start, kernel and policy: every true effect is 0."""
    k = np.zeros((G, 2, 2, 2))
    k[:, 0, 0] = [0.8, 0.2]
    k[:, 1, 0] = [0.4, 0.6]
    k[:, :, 1] = [0.0, 1.0]
    reward = np.zeros((G, 2, 2))
    reward[:, 1, 0] = 1.0
    return TabularModel(kernel=k, initial=np.tile([0.5, 0.5], (G, 1)),
                        potential=np.array([0.0, 1.0]), reward=reward,
                        group_names=[f"g{i}" for i in range(G)], name="same")


def test_default_pair_of_identical_groups_is_never_negative():
    """docs/decomposition.md ("More than two groups"): under Monte Carlo the default pair
    (largest and smallest estimated V^pi) is picked from the same estimates, so with
    group-blind groups its C is the range of noisy estimates, never negative, while a
    pair named in advance is negative about half the time."""
    m = _same_groups(3)
    pol = TablePolicy(np.tile([0.5, 0.0], (3, 1)))
    assert decompose(m, pol, 3).estimates()["C"] == 0.0
    default = [decompose_mc(m, pol, 3, n=100, seed=s, check=False, jobs=1).estimates()["C"]
               for s in range(20)]
    named = [decompose_mc(m, pol, 3, n=100, seed=s, check=False, jobs=1,
                          pair=(0, 1)).estimates()["C"] for s in range(20)]
    assert min(default) >= 0.0, default
    assert 3 <= sum(c < 0 for c in named) <= 17, named


@pytest.mark.slow
def test_data_chosen_pair_covers_with_simultaneous_intervals():
    """Three identical groups, 300 seeds, n = 200, T = 3: the named pair's C interval
    covers 0 at its level (>= 0.92); the default (data-chosen) pair's marginal interval
    clearly less (docs/decomposition.md, "More than two groups": 0.877 and 0.737 with 3 and
    5 groups of benchmarks/coverage_study.py's model; this model: 0.897 with 3), so the
    printed one is simultaneous over the 3 pairs (Bonferroni) and covers >= 0.93
    (tests/test_pairs_honest.py)."""
    from dataclasses import replace

    m = _same_groups(3)
    pol = TablePolicy(np.tile([0.5, 0.0], (3, 1)))
    S = 300
    cover_default = cover_marginal = cover_named = 0
    for s in range(S):
        for pair in (None, (0, 1)):
            r = decompose_mc(m, pol, 3, n=200, seed=s, check=False, jobs=1, pair=pair)
            lo, hi = r.intervals(0.05)["C"]
            ok = lo <= 0.0 <= hi
            if pair is None:
                cover_default += ok
                lo, hi = replace(r, simultaneous=1).intervals(0.05)["C"]
                cover_marginal += lo <= 0.0 <= hi
            else:
                cover_named += ok
    assert cover_named / S >= 0.92, cover_named
    assert cover_marginal / S <= 0.93 and cover_marginal < cover_named - 9, (cover_marginal,
                                                                             cover_named)
    assert cover_default / S >= 0.93, cover_default


# ------------------------------------------------------------ slow coverage studies
@pytest.mark.slow
@pytest.mark.parametrize("T", [1, 5])
@pytest.mark.parametrize("policy_spec", ["threshold:0.5", "stochastic"])
def test_mc_intervals_cover_at_twenty_per_group(policy_spec, T):
    """lending-harder (non-adjacent jumps, rejected applicants move), n = 20 per group,
    300 seeds: every effect's 95% interval covers the exact value in 90-99% of seeds
    (IPE at T = 1 is 0 exactly, se 0: covered always). benchmarks/coverage_study.py
    measured 0.920-0.974 over 264 such cells at n = 20-1,000, T = 1-20."""
    system = make("lending-harder")
    pol = _stochastic(system.tabular) if policy_spec == "stochastic" \
        else parse_policy(policy_spec, system)
    cov = _coverage(system, pol, T, 20, range(300))
    for k, v in cov.items():
        assert (v == 1.0 if (k == "IPE" and T == 1) else 0.90 <= v <= 0.99), cov


@pytest.mark.slow
def test_lambda_by_forks_covers_the_exact_lambda_on_lending():
    """benefit_fairness_mc on lending-1 (levels are the cells, so its target is the exact
    Lambda), n = 1,000, T = 5, 100 bootstrap replicates, 150 seeds: the hull interval
    covers at least at its level (measured 0.990; conservative) and its estimate errs
    high (the thresholded estimator's known small-n bias, docs/decomposition.md)."""
    from causalfair.engines.benefit import benefit_fairness
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    system = make("lending-1")
    pol = _stochastic(system.tabular)
    exact = benefit_fairness(system.tabular, pol, 5).Lambda
    hits, est = 0, []
    for s in range(150):
        b = benefit_fairness_mc(system, pol, 5, n=1000, seed=s, n_boot=100, jobs=1,
                                check=False)
        hits += b.ci[0] <= exact <= b.ci[1]
        est.append(b.Lambda)
    assert hits / 150 >= 0.93, hits
    assert np.mean(est) > exact, (np.mean(est), exact)


@pytest.mark.slow
def test_small_log_audit_intervals_cover():
    """Logs of 1,000 individuals x 5 steps from lending-1 (the validation study's policy),
    150 logs: the gate's normal intervals of C, DPE, IPE, SPE (bootstrap sd) and Lambda's
    hull cover the exact values in at least 90% (measured 0.937-0.997 over 300 logs;
    docs/logs.md, section 6)."""
    from causalfair.logs import audit_logs, simulate_logs
    from causalfair.systems.lending.settings import lending_setting

    lm = lending_setting("lending-1")
    thr = np.array([[0.5], [0.6]])
    pol = TablePolicy(0.15 + 0.7 / (1.0 + np.exp(-(lm.p_repay - thr) / 0.08)))
    ex = decompose(lm.tabular, pol, 5)
    truth = {**{k: ex.estimates()[k] for k in EFFECTS}, "Lambda": ex.Lambda}
    hits = dict.fromkeys(truth, 0)
    S = 150
    for s in range(S):
        a = audit_logs(simulate_logs(lm, pol, 1000, 5, seed=10_000 + s), n_boot=100, seed=s,
                       horizon=5)
        ci = a.decomposition.intervals(0.05)
        ci["Lambda"] = a.lambda_interval(0.05, method="normal")
        for k in hits:
            hits[k] += ci[k][0] <= truth[k] <= ci[k][1]
    assert all(v / S >= 0.90 for v in hits.values()), hits


# ------------------------------------------------------------ small non-zero benefit gaps
@pytest.mark.slow
def test_lambda_hull_covers_with_small_nonzero_gaps():
    """Lambda by forks on lending-harder at n = 5,000 (no benefit gap exactly 0, the
    smallest 0.002-0.009, zeroed by the pre-test at this n): the thresholded estimate is
    high by about one sd. The hull covered 0.89 (a strict xfail until session 18): the
    bootstrap kept the estimate's mask in every replicate (se a quarter of the spread) and
    the plug-in's replicates of |gap| folded at 0 (se too small where it was high). Now
    every replicate redoes the pre-test (benefit_mc.pretest) and the plug-in's replicates
    are linear in the gaps (benefit_mc.plugin_tangent): 0.97 over these 100 seeds
    (tests/test_lambda_honest.py; docs/decomposition.md, 'How often the intervals cover')."""
    from causalfair.engines.benefit import benefit_fairness
    from causalfair.engines.benefit_mc import benefit_fairness_mc

    system = make("lending-harder")
    pol = _stochastic(system.tabular)
    exact = benefit_fairness(system.tabular, pol, 5).Lambda
    S = 100
    hits = sum(bool(b.ci[0] <= exact <= b.ci[1]) for b in (
        benefit_fairness_mc(system, pol, 5, n=5000, seed=s, n_boot=100, jobs=1, check=False)
        for s in range(S)))
    assert hits / S >= 0.93, hits


# The small-log SPE shortfall (coverage ~0.905 at 300 individuals x 5 steps, docs/logs.md
# section 6) is measured by `python benchmarks/coverage_study.py --study logs` (47 s as a
# test: left to the benchmark).

"""lending-harder: ELBERT's harder lending as a tabular system, its kernel
checked cell by cell against the published transition tables, the exact engine against
the Monte Carlo engine, and a training smoke run."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.systems.lending.harder import ELBERT_HARDER_LENDING as P


def test_kernel_cells_by_hand():
    tab = cf.systems.make("lending-harder").tabular
    p = P["p_repay"]
    # level 5 (index 4): a repaying applicant falls to level 2 with probability 0.5
    assert tab.kernel[0, 1, 4, 1] == pytest.approx(p[4] * 0.5)
    assert tab.kernel[1, 1, 4, 1] == pytest.approx(p[4] * 0.5)
    # denied: moves as if approved with the group's alter rate, else stays
    assert tab.kernel[0, 0, 4, 1] == pytest.approx(0.3 * p[4] * 0.5)
    stay = p[4] * 0.2 + (1 - p[4]) * 0.1
    assert tab.kernel[1, 0, 4, 4] == pytest.approx(0.1 * stay + 0.9)
    # level 1 (index 0) defaulting jumps to level 5 with probability 0.5
    assert tab.kernel[0, 1, 0, 4] == pytest.approx((1 - p[0]) * 0.5)
    assert np.allclose(tab.kernel.sum(-1), 1.0)
    assert tab.initial.tolist() == [list(r) for r in P["initial"]]
    assert tab.reward[:, 1].tolist() == [[q - (1 - q) for q in p]] * 2


@pytest.mark.parametrize("policy", ["threshold:0.5", "random:0.7"])
def test_exact_and_monte_carlo_engines_agree(policy):
    system = cf.systems.make("lending-harder")
    pol = cf.parse_policy(policy, system)
    ex = cf.decompose(system.tabular, pol, 20)
    assert ex.C == pytest.approx(ex.DPE + ex.IPE + ex.SPE, abs=1e-12)
    mc = cf.decompose_mc(system, pol, 20, n=200_000, seed=7)
    for k in ("C", "DPE", "IPE", "SPE"):
        assert abs(getattr(mc, k) - getattr(ex, k)) < 4 * mc.se[k], k


def test_training_smoke(tmp_path):
    from causalfair.train import TrainConfig, train

    res = train(TrainConfig(algo="ppo-cb", system="lending-harder", iterations=2, seed=0,
                            n_individuals=256))
    assert set(res.metrics) >= {"C", "DPE", "IPE", "SPE", "utility"}
    m = res.metrics
    assert m["C"] == pytest.approx(m["DPE"] + m["IPE"] + m["SPE"], abs=1e-9)

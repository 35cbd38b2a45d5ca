"""The Monte Carlo engine on any system: three actions, a baseline action, a System as
input; agreement with the exact engine on the example clinic (which has a tabular model)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.montecarlo import _sample_actions

ROOT = Path(__file__).resolve().parents[1]
POLICY = np.tile([0.2, 0.5, 0.3], (2, 5, 1))


@pytest.fixture(scope="module")
def clinic(tmp_path_factory):
    d = tmp_path_factory.mktemp("own")
    shutil.copy(ROOT / "docs" / "examples" / "clinic.py", d / "clinic.py")
    yield cf.systems.make("clinic:make_clinic", search_path=d)
    sys.modules.pop("clinic", None)


def test_inverse_cdf_sampling_hits_each_action_with_its_probability():
    probs = np.array([[0.2, 0.5, 0.3], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    u = np.array([0.1, 0.99, 0.999])
    assert _sample_actions(probs, u).tolist() == [0, 2, 0]
    assert _sample_actions(probs[:1], np.array([0.2]))[0] == 1  # boundary: [0.2, 0.7) -> 1
    rng = np.random.default_rng(0)
    d = _sample_actions(np.tile(probs[0], (200_000, 1)), rng.random(200_000))
    assert np.bincount(d, minlength=3) / d.size == pytest.approx(probs[0], abs=0.005)


def test_three_actions_agree_with_the_exact_engine(clinic):
    pol = cf.TablePolicy(POLICY, n_actions=3)
    ex = cf.decompose(clinic.tabular, pol, clinic.horizon)
    mc = cf.decompose_mc(clinic, pol, n=50_000, seed=3)
    assert mc.horizon == clinic.horizon and mc.groups == ("urban", "rural")
    for k in ("C", "DPE", "IPE", "SPE"):
        assert abs(getattr(mc, k) - getattr(ex, k)) < 5 * mc.se[k], k


def test_the_baseline_policy_has_zero_direct_and_indirect_effect_exactly(clinic):
    """pi = pi0: the fork and pi0 take the same action as pi with the same noise, so the
    per-individual differences are exactly 0 (common random numbers)."""
    mc = cf.decompose_mc(clinic, cf.parse_policy("never", clinic), n=2_000, seed=0)
    assert mc.DPE == 0.0 and mc.IPE == 0.0 and mc.se["DPE"] == 0.0


def test_a_two_action_policy_on_three_actions_is_refused(clinic):
    with pytest.raises(cf.errors.PolicyError, match="the system has 3 actions"):
        cf.decompose_mc(clinic, cf.ConstantPolicy(0.5), n=100)


@pytest.mark.slow
def test_exact_inside_the_95_ci_in_90_to_99_percent_of_seeds(clinic):
    pol = cf.TablePolicy(POLICY, n_actions=3)
    ex = cf.decompose(clinic.tabular, pol, clinic.horizon)
    hits = {k: 0 for k in ("C", "DPE", "IPE", "SPE")}
    seeds = range(200)
    for seed in seeds:
        ci = cf.decompose_mc(clinic, pol, n=4_000, seed=seed, check=False).conf_int(0.05)
        for k in hits:
            hits[k] += ci.loc[k, "lower"] <= getattr(ex, k) <= ci.loc[k, "upper"]
    for k, h in hits.items():
        assert 0.90 <= h / len(seeds) <= 0.99, (k, h)

"""One exact pass for every pair (engines.exact_torch.exact_metrics_by_pair, and the numpy
side's engines.exact.exact_numbers_by_pair): each pair's C, DPE, IPE, SPE and Lambda equal,
bit for bit, those of a pass of its own."""

from __future__ import annotations

import dataclasses
from itertools import permutations

import numpy as np
import pytest
import torch

from causalfair.engines.benefit import lambda_by_pair, lambda_metric
from causalfair.engines.exact import exact_numbers, exact_numbers_by_pair
from causalfair.engines.exact_torch import exact_metrics, exact_metrics_by_pair
from causalfair.model import ModelError
from tests.engines.test_exact_torch import random_model, random_table

CASES = [  # (G, K, A, baseline, timed, weights)
    (2, 7, 2, 0, False, "visitation"), (3, 4, 2, 0, False, "visitation"),
    (3, 5, 2, 0, True, "initial"), (4, 6, 3, 1, False, "visitation"),
    (4, 3, 4, 0, True, "visitation"), (3, 9, 2, 1, False, "initial"), (5, 17, 2, 0, False, "visitation"),
]
KEYS = ("C", "DPE", "IPE", "SPE", "Lambda")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("G,K,A,baseline,timed,weights", CASES)
@pytest.mark.parametrize("batched", [False, True])
def test_every_pair_equals_its_own_pass_exactly(seed, G, K, A, baseline, timed, weights,
                                                batched):
    rng = np.random.default_rng(seed)
    m = random_model(rng, G, K, A, baseline)
    T = int(rng.integers(1, 12))
    gamma = 1.0 if seed % 2 == 0 else 0.9
    tabs = np.stack([random_table(rng, m, T, timed) for _ in range(3)])
    p = torch.tensor(tabs if batched else tabs[0])
    pairs = list(permutations(range(G), 2))
    kw = dict(gamma=gamma, eps=0.07, weights=weights, batched=batched)
    got = exact_metrics_by_pair(m, p, T, pairs, **kw)
    plain = exact_metrics(m, p, T, **kw)
    for k in ("utility", *KEYS, "V", "V_ps", "V_0"):
        assert torch.equal(got[k], plain[k]), k
    for j, ab in enumerate(pairs):
        one = exact_metrics(m, p, T, pair=ab, **kw)
        for k in KEYS:
            assert torch.equal(got["by_pair"][k][..., j], one[k]), (ab, k)


def test_lambda_of_some_pairs_and_the_gradient():
    rng = np.random.default_rng(5)
    m = random_model(rng, 4, 6)
    p0 = torch.tensor(rng.random((2, 4, 6)))
    pairs, lam_pairs = [(0, 1), (2, 3), (3, 0)], [(3, 0)]
    p = p0.clone().requires_grad_(True)
    got = exact_metrics_by_pair(m, p, 7, pairs, lambda_pairs=lam_pairs, batched=True)
    assert tuple(got["by_pair"]["C"].shape) == (2, 3)
    assert tuple(got["by_pair"]["Lambda"].shape) == (2, 1)
    one = exact_metrics(m, p0, 7, pair=(3, 0), batched=True)
    assert torch.equal(got["by_pair"]["Lambda"][:, 0], one["Lambda"])
    # the gradient of a sum over pairs is the sum of the per-pair passes' (up to round-off)
    (got["by_pair"]["C"].abs().sum() + got["by_pair"]["Lambda"].sum()).backward()
    q = p0.clone().requires_grad_(True)
    ref = sum(exact_metrics(m, q, 7, pair=ab, batched=True)["C"].abs().sum() for ab in pairs)
    (ref + exact_metrics(m, q, 7, pair=(3, 0), batched=True)["Lambda"].sum()).backward()
    torch.testing.assert_close(p.grad, q.grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [(0, 0), (0, 3), (1,), "ab", (0.5, 1), (True, 0)])
def test_a_bad_pair_is_refused_naming_it(bad):
    """By the one check of a pair (_validation.check_pair), naming the bad entry."""
    m = random_model(np.random.default_rng(0), 3, 4)
    with pytest.raises(ModelError, match=r"^pairs\[1\]: expected two (distinct )?group ind"):
        exact_metrics_by_pair(m, torch.full((3, 4), 0.5), 3, [(0, 1), bad])
    with pytest.raises(ModelError, match="^lambda_pairs: None is not a pair"):
        exact_metrics_by_pair(m, torch.full((3, 4), 0.5), 3, [(0, 1)], lambda_pairs=[None])


@pytest.mark.parametrize("G,K,A,baseline,timed,weights", CASES[1:5])
def test_the_numpy_numbers_of_every_pair_equal_their_own_decomposition_exactly(
        G, K, A, baseline, timed, weights):
    """The repair's attempts (the audit's numbers, engines.exact) read every pair from one
    decomposition: each pair's C, DPE, IPE, SPE, Lambda as exact_numbers(pair=ab) has them."""
    rng = np.random.default_rng(G * K)
    m = random_model(rng, G, K, A, baseline)
    T = 6
    tab = random_table(rng, m, T, timed)
    pairs = list(permutations(range(G), 2))
    ex, by = exact_numbers_by_pair(m, tab, T, pairs, eps=0.07, weights=weights, pair=(1, 0))
    assert ex.scalars() == exact_numbers(m, tab, T, eps=0.07, weights=weights,
                                         pair=(1, 0)).scalars()
    for ab in pairs:
        one = exact_numbers(m, tab, T, eps=0.07, weights=weights, pair=ab).scalars()
        assert by[ab] == {k: one[k] for k in KEYS}, ab


def test_lambda_by_pair_equals_lambda_metric_with_departed_levels():
    rng = np.random.default_rng(2)
    base = random_model(rng, 3, 5)
    kernel = np.array(base.kernel)
    kernel[:, :, 4] = np.eye(5)[4]  # level 4 absorbing: individuals who leave
    m = dataclasses.replace(base, kernel=kernel, departed_levels=(4,))
    tab = rng.random((3, 5))
    pairs = [(0, 1), (2, 0), (1, 2)]
    got = lambda_by_pair(m, tab, 4, pairs, eps=0.1)
    assert got == [lambda_metric(m, tab, 4, eps=0.1, pair=ab) for ab in pairs]

"""Lambda by forks without its large temporaries (causalfair.engines.benefit_mc): the
bootstrap's replicates by the (cell, unit) pairs agree with a pass over the visits per
replicate (an independent computation) and do not depend on the threads; the pair terms'
total variations are numpy's own sums bit for bit; the plug-in tangent's one-column path
is its general path's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines import benefit_mc
from causalfair.engines.benefit_mc import plugin_tangent, total_variation


def _cols(n, K, A, T, G, seed, unvisited=()):
    """Random visits: each of n units per group visits one of K cells a step for T steps
    (the cells in ``unvisited`` never), with benefits and action distributions."""
    rng = np.random.default_rng(seed)
    allowed = np.setdiff1d(np.arange(K), unvisited)
    cells = [rng.choice(allowed, size=n * T) for _ in range(G)]
    units = [np.tile(np.arange(n), T) for _ in range(G)]
    delta = [rng.normal(size=(n * T, A)) for _ in range(G)]
    prob = [rng.dirichlet(np.ones(A), size=n * T) for _ in range(G)]
    return cells, units, delta, prob, K, A


def _weighted_means(cols, weights):
    """A replicate's cell means by a pass over the visits, each weighted by its unit's
    weight in ``weights`` (one array per group): mean benefit, action distribution and
    visitation weight per (group, cell)."""
    cells, units, delta_g, prob_g, K, A = cols
    G = len(cells)
    delta, prob, w = np.zeros((G, K, A)), np.zeros((G, K, A)), np.zeros((G, K))
    for g in range(G):
        wt = weights[g][units[g]].astype(float)
        mass = np.bincount(cells[g], weights=wt, minlength=K)
        w[g] = mass / mass.sum()
        safe = np.where(mass > 0, mass, 1.0)
        for a in range(A):
            delta[g, :, a] = np.bincount(cells[g], weights=wt * delta_g[g][:, a], minlength=K) / safe
            prob[g, :, a] = np.bincount(cells[g], weights=wt * prob_g[g][:, a], minlength=K) / safe
    return delta, prob, w


@pytest.mark.parametrize(("n", "K", "A", "T", "per_world"), [
    (300, 64, 2, 5, False),   # feature cells: a unit visits few of them
    (500, 5, 3, 8, False),    # levels: a unit visits most of them
    (40, 9, 2, 3, True),      # coupled units: one weight per world for every group
])
def test_replicates_by_pairs_match_a_pass_over_the_visits(n, K, A, T, per_world):
    G, R = 2, 7
    cols = _cols(n, K, A, T, G, seed=n, unvisited=(3,))
    rng = np.random.default_rng(1)
    W = rng.poisson(1.0, size=(1 if per_world else G, R, n)).astype(np.uint8)
    got = benefit_mc._replicates(cols, W, per_world, n, 1)
    assert len(got) == R
    for r in range(R):
        want = _weighted_means(cols, [W[0 if per_world else g, r] for g in range(G)])
        for x, y in zip(got[r], want, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)
        assert (got[r][2][:, 3] == 0).all()  # the cell nobody visits weighs 0
    again = benefit_mc._replicates(cols, W, per_world, n, 2)  # two threads: the same bits
    assert all(np.array_equal(a, b) for x, y in zip(got, again, strict=True)
               for a, b in zip(x, y, strict=True))


def test_a_cells_replicates_in_blocks_give_the_same_numbers():
    # a cell of many units takes its replicates in blocks (2^18 weights a block: 17
    # replicates for 15,000 units); the block boundaries must not change a number beyond the
    # product's rounding
    n, K, A, T, R = 20_000, 2, 2, 2, 40
    cols = _cols(n, K, A, T, 2, seed=5)
    W = np.random.default_rng(2).poisson(1.0, size=(2, R, n)).astype(np.uint8)
    whole = benefit_mc._replicates(cols, W, False, n, 1)
    for r in (0, R - 1):
        want = _weighted_means(cols, [W[g, r] for g in range(2)])
        for x, y in zip(whole[r], want, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)
    assert (1 << 18) // (n // 2) < R  # a cell holds over half the units: blocks ran


@pytest.mark.parametrize("A", range(2, 10))
@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (1, 7), (5, 1), (37, 300)])
def test_total_variation_is_numpys_sum_bit_for_bit(A, rows, cols):
    rng = np.random.default_rng(A * 1000 + rows)
    pa = rng.dirichlet(np.ones(A), size=rows) * 10.0 ** rng.uniform(-3, 0, size=(rows, 1))
    pb = rng.dirichlet(np.ones(A), size=cols)
    want = 0.5 * np.abs(pa[:, None, :] - pb[None, :, :]).sum(-1)
    got = total_variation(pa, pb)
    assert got.shape == (rows, cols)
    assert np.array_equal(got, want)


def test_plugin_tangent_one_column_is_its_general_path():
    # three actions where action 1's gap is the largest everywhere: the general path
    # (take_along_axis over two benefit columns) picks column 1, as the one-column path does
    # with the third action dropped
    rng = np.random.default_rng(3)
    signed = rng.normal(size=(6, 8, 3))
    signed[..., 1] = np.sign(signed[..., 1]) * (np.abs(signed[..., 2]) + 0.5)
    gap = np.abs(signed)
    general = plugin_tangent(signed, gap, 0, 0.1)
    one = plugin_tangent(signed[..., :2], gap[..., :2], 0, 0.1)
    tv, ww = rng.random((6, 8)), rng.random((6, 8))
    for _ in range(3):
        rep = signed + 0.1 * rng.normal(size=signed.shape)
        assert general(rep, tv, ww) == one(rep[..., :2], tv, ww)

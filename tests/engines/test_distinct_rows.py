"""benefit_cells.distinct_rows: the visited cells of features-binned visits, found through one
integer per row, are np.unique(rows, axis=0, return_inverse=True)'s rows, order and inverse."""

import numpy as np
import pytest

from causalfair.engines.benefit_cells import distinct_rows


def _rows(rng, sizes, n, dtype, few):
    if few:  # a handful of distinct rows, repeated (the bincount path)
        base = np.stack([rng.integers(0, s, size=5) for s in sizes], axis=1)
        return base[rng.integers(0, 5, n)].astype(dtype)
    return np.stack([rng.integers(0, s, n) for s in sizes], axis=1).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_same_rows_order_and_inverse_as_unique(dtype):
    rng = np.random.default_rng(7)
    for trial in range(60):
        F = int(rng.integers(1, 30))  # past 26 features of 5 bins: the integer sort path
        sizes = [int(rng.integers(1, 6)) for _ in range(F)]
        rows = _rows(rng, sizes, int(rng.integers(1, 2000)), dtype, few=trial % 2 == 0)
        want, inv = np.unique(rows, axis=0, return_inverse=True)
        got, got_inv = distinct_rows(rows, sizes)
        assert got.dtype == want.dtype and np.array_equal(got, want), trial
        assert np.array_equal(got_inv.reshape(-1), inv.reshape(-1)), trial


def test_joint_bins_past_64_bits_fall_back_to_unique():
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 5, size=(300, 40)).astype(np.uint8)  # 5**40 joint bins
    want, inv = np.unique(rows, axis=0, return_inverse=True)
    got, got_inv = distinct_rows(rows, [5] * 40)
    assert np.array_equal(got, want) and np.array_equal(got_inv.reshape(-1), inv.reshape(-1))

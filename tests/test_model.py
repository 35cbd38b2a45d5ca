"""TabularModel validation: every error with its message."""

import numpy as np
import pytest

import causalfair as cf
from causalfair.model import ModelError, potential_from_gain


def parts(G=2, K=3):
    kernel = np.full((G, 2, K, K), 1.0 / K)
    initial = np.full((G, K), 1.0 / K)
    return dict(kernel=kernel, initial=initial, potential=np.arange(K, dtype=float))


def test_valid_model_builds():
    m = cf.TabularModel(**parts())
    assert m.n_groups == 2 and m.n_levels == 3 and m.group_names == ("s+", "s-")
    assert m.level_labels == ("1", "2", "3")
    assert m.reward.shape == (2, 2, 3) and not m.reward.any()


def test_kernel_shape():
    p = parts()
    p["kernel"] = np.full((2, 1, 3, 3), 1 / 3)
    with pytest.raises(ModelError, match=r"kernel: expected shape \(groups, A, K, K\) with A >= 2 actions, got \(2, 1, 3, 3\)"):
        cf.TabularModel(**p)
    p["kernel"] = np.full((2, 3, 3, 4), 1 / 4)
    with pytest.raises(ModelError, match=r"got \(2, 3, 3, 4\)"):
        cf.TabularModel(**p)


def test_kernel_row_not_distribution():
    p = parts()
    p["kernel"] = p["kernel"].copy()
    p["kernel"][1, 0, 2] = [0.5, 0.5, 0.1]
    with pytest.raises(ModelError, match=r"kernel: the distribution at \(s, d, x\) = \(1, 0, 2\) sums to 1.1"):
        cf.TabularModel(**p)


def test_row_within_tolerance_accepted():
    p = parts()
    p["kernel"] = p["kernel"].copy()
    p["kernel"][0, 0, 0] = [0.5, 0.5 + 5e-10, 0.0]
    cf.TabularModel(**p)
    p["kernel"][0, 0, 0] = [0.5, 0.5 + 5e-9, 0.0]
    with pytest.raises(ModelError, match="sums to"):
        cf.TabularModel(**p)


def test_negative_probability():
    p = parts()
    p["initial"] = np.array([[1.2, -0.2, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    with pytest.raises(ModelError, match=r"initial: negative probability -0.2 at index \(0, 1\)"):
        cf.TabularModel(**p)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_inf(bad):
    p = parts()
    p["potential"] = np.array([0.0, bad, 2.0])
    with pytest.raises(ModelError, match=r"potential: contains NaN or inf at index \(0, 1\)"):
        cf.TabularModel(**p)


def test_initial_shape():
    p = parts()
    p["initial"] = np.full((2, 4), 0.25)
    with pytest.raises(ModelError, match=r"initial: expected shape \(2, 3\)"):
        cf.TabularModel(**p)


def test_group_names_and_weights():
    with pytest.raises(ModelError, match="group_names: expected 2 names"):
        cf.TabularModel(**parts(), group_names=["a"])
    with pytest.raises(ModelError, match="group_weights: the distribution"):
        cf.TabularModel(**parts(), group_weights=[0.6, 0.6])


def test_one_group_refused():
    with pytest.raises(ModelError, match="kernel: needs at least 2 groups, got 1"):
        cf.TabularModel(**parts(G=1))


def test_gain_matrix_additive_roundtrip():
    f = np.array([[0.0, 1.0, 3.0], [0.0, 2.0, 2.5]])
    g = f[:, None, :] - f[:, :, None]
    np.testing.assert_allclose(potential_from_gain(g), f)
    m = cf.TabularModel(**{**parts(), "potential": potential_from_gain(g)})
    np.testing.assert_allclose(m.gain(), g)


def test_gain_matrix_not_additive_names_triple():
    g = np.array([[0.0, 1.0, 2.0], [-1.0, 0.0, 1.0], [-2.0, -1.0, 0.5]])
    with pytest.raises(ModelError, match=r"gain: not additive for group 0: g\(2,2\) = 0.5 but g\(2,0\) \+ g\(0,2\) = 0"):
        potential_from_gain(g)


def test_gain_matrix_in_large_units_is_additive():
    # an additive gain in a currency (1e7): the rounding of f(z) - f(x) against
    # (f(0) - f(x)) + (f(z) - f(0)) is about 1e-9 there; an absolute 1e-9 refused 8 of 200
    rng = np.random.default_rng(0)
    for _ in range(200):
        f = rng.normal(size=7) * 1e7 + 3.3e7
        g = f[None, :] - f[:, None]
        np.testing.assert_allclose(potential_from_gain(g)[0], f - f[0], rtol=1e-12, atol=1e-6)
    g = np.array([[0.0, 1e7, 2e7], [-1e7, 0.0, 1e7], [-2e7, -1e7, 1.0]])  # off by 1 at (2, 2)
    with pytest.raises(ModelError, match=r"not additive for group 0: g\(2,2\) = 1 but"):
        potential_from_gain(g)


def test_arrays_are_read_only():
    m = cf.TabularModel(**parts())
    with pytest.raises(ValueError):
        m.kernel[0, 0, 0, 0] = 1.0


def test_with_revalidates():
    m = cf.TabularModel(**parts())
    with pytest.raises(ModelError, match="initial"):
        m.with_(initial=np.ones((2, 3)))

"""The IPE cells of the attribution of a change (causalfair.engines.attribution) are centred:
cell = sign(s) gamma^t [mu_t(x) - mu'_t(x)] (h0(x) - hbar_{t,s}) with hbar_{t,s} the mean of
h0 under (mu_t + mu'_t) / 2, so they do not depend on the zero point of h0 and the totals per
step and per path are those of the uncentred formula; the Monte Carlo cells centre each
visit's fork gain at the two policies' mean fork gain per (t, s)."""

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.attribution import (
    _Reference,
    attribute_exact,
    attribute_mc,
    check_sums,
)
from causalfair.model import TabularModel
from causalfair.policies.grid import policy_table

NEW, OLD = "threshold:0.5", "threshold:0.3"


@pytest.fixture(scope="module")
def lending():
    return cf.systems.make("lending-1")


class _Shifted(TabularModel):
    """A model whose expected gains carry an extra constant per group on every action
    (``shift``), or whose baseline gain is that constant everywhere (``flat``)."""

    shift = np.zeros(2)
    flat = False

    def expected_gain(self):
        h = super().expected_gain()
        if self.flat:
            return h - h[:, self.baseline][:, None] + self.shift[:, None, None]
        return h + self.shift[:, None, None]


def _shifted(model, shift, flat=False):
    m = _Shifted(kernel=model.kernel, initial=model.initial, potential=model.potential,
                 reward=model.reward, baseline=model.baseline)
    m.shift, m.flat = np.asarray(shift, dtype=float), flat
    return m


def _tab(model, v):
    return np.full((model.n_groups, model.n_levels), float(v))


def _uncentred_ipe(model, p, q, T, pair=(0, 1)):
    """The IPE cells without centring, (T, 2, K): sign(s) [mu_t - mu'_t](x) h0(x)."""
    h0 = model.expected_gain()[:, model.baseline]
    d = model.propagate(p, T)[:T] - model.propagate(q, T)[:T]
    cells = d * h0
    return np.stack([cells[:, pair[0]], -cells[:, pair[1]]], axis=1)


def _centred_ipe(model, p, q, T, pair=(0, 1)):
    """The centred IPE cells summed over steps, (2, K), written out from the definition."""
    h0 = model.expected_gain()[:, model.baseline]
    mu, nu = model.propagate(p, T)[:T], model.propagate(q, T)[:T]
    hbar = (0.5 * (mu + nu) * h0).sum(2, keepdims=True)
    cells = ((mu - nu) * (h0 - hbar)).sum(0)
    return np.stack([cells[pair[0]], -cells[pair[1]]])


def _tables(system, T):
    return [policy_table(cf.policies.resolve(x, system).policy, system.tabular, T)
            for x in (NEW, OLD)]


def test_ipe_cells_do_not_depend_on_a_constant_added_to_the_gains(lending):
    m = lending.tabular
    p, q = _tab(m, 0.8), _tab(m, 0.2)
    base = attribute_exact(m, p, q, 12, pair=(0, 1))
    moved = attribute_exact(_shifted(m, [0.7, -0.4]), p, q, 12, pair=(0, 1))
    for k in ("C", "DPE", "IPE"):
        assert moved.total[k][0] == pytest.approx(base.total[k][0], abs=1e-12), k
    assert np.abs(moved.by_step - base.by_step).max() < 1e-12
    assert np.abs(moved.by_cell - base.by_cell).max() < 1e-12
    # uncentred, the same shift moves the cells (the test bites)
    gap = _uncentred_ipe(_shifted(m, [0.7, -0.4]), p, q, 12) - _uncentred_ipe(m, p, q, 12)
    assert np.abs(gap.sum(0)).max() > 1e-2


def test_flat_baseline_gain_gives_zero_ipe_cells(lending):
    m = _shifted(lending.tabular, [0.3, -0.2], flat=True)  # h0 = 0.3 on s+, -0.2 on s-
    p, q = _tab(m, 0.8), _tab(m, 0.2)
    att = attribute_exact(m, p, q, 12, pair=(0, 1))
    assert np.abs(att.by_cell[1]).max() < 1e-14
    assert abs(att.total["IPE"][0]) < 1e-14 and check_sums(att) < 1e-12
    assert np.abs(_uncentred_ipe(m, p, q, 12).sum(0)).max() > 1e-2  # old cells were not


def test_totals_per_step_and_path_are_those_of_the_uncentred_cells(lending):
    m = lending.tabular
    att = attribute_exact(m, NEW, OLD, 20, system=lending, pair=(0, 1))
    old = _uncentred_ipe(m, *_tables(lending, 20), 20)
    assert np.abs(att.by_step[1] - old.sum((1, 2))).max() < 1e-12
    assert abs(att.total["IPE"][0] - old.sum()) < 1e-12
    assert np.abs(att.by_cell[1] - old.sum(0)).max() > 1e-3  # the cells themselves moved
    d = cf.decompose(m, NEW, 20).IPE - cf.decompose(m, OLD, 20).IPE
    assert att.total["IPE"][0] == pytest.approx(d, abs=1e-12)


def test_exact_cells_by_hand_on_a_two_level_model():
    k = np.array([[[[0.9, 0.1], [0.3, 0.7]], [[0.5, 0.5], [0.1, 0.9]]]] * 2)
    m = TabularModel(kernel=k, initial=np.array([[0.6, 0.4], [0.8, 0.2]]),
                     potential=np.array([0.0, 1.0]))
    att = attribute_exact(m, _tab(m, 1.0), _tab(m, 0.0), 2, gamma=0.9, pair=(0, 1))
    # h0 = (0.1, -0.3). s+: mu_1 = (0.34, 0.66), mu'_1 = (0.66, 0.34), hbar = -0.1,
    # cells 0.9 * (-0.32 * 0.2, 0.32 * -0.2). s-: mu_1 = (0.42, 0.58), mu'_1 = (0.78, 0.22),
    # hbar = 0.6 * 0.1 + 0.4 * -0.3 = -0.06, cells -0.9 * (-0.36 * 0.16, 0.36 * -0.24).
    # t = 0: the same mu_0 under both, no IPE.
    want = 0.9 * np.array([[-0.064, -0.064], [0.0576, 0.0864]])
    assert np.abs(att.by_cell[1] - want).max() < 1e-12
    assert att.by_step[1, 0] == 0.0
    assert att.by_step[1, 1] == pytest.approx(0.9 * (-0.128 + 0.144), abs=1e-12)


def test_mc_cells_agree_with_the_exact_cells_and_sum_to_the_total(lending):
    T = 8
    ex = attribute_exact(lending.tabular, NEW, OLD, T, system=lending, pair=(0, 1))
    want = _centred_ipe(lending.tabular, *_tables(lending, T), T)
    assert np.abs(ex.by_cell[1] - want).max() < 1e-12
    mc = attribute_mc(lending, NEW, OLD, T, n=3000, seed=1, pair=(0, 1), jobs=1)
    assert check_sums(mc) < 1e-12
    se = mc.by_cell_se[1]
    live = np.abs(want) + se > 0
    assert (se[live] > 0).all()
    z = np.abs(mc.by_cell[1] - want)[live] / se[live]
    assert z.max() < 4.0, (z.max(), mc.by_cell[1], want, se)


def test_reference_fold_is_the_centred_sum_and_its_delta_method_variance():
    rng = np.random.default_rng(3)
    T, K, n = 3, 4, 400
    w0 = rng.choice(K, (T, n), p=[0.1, 0.1, 0.3, 0.5])  # the two policies put people in
    w1 = rng.choice(K, (T, n), p=[0.5, 0.3, 0.1, 0.1])  # different cells
    f0, f1 = rng.normal(1.0, 1.0, (T, n)) + w0, rng.normal(0.5, 1.0, (T, n)) + w1
    F = 0.5 * (f0 + f1)
    r = F.mean(1)
    onehot = np.eye(K)[w0] - np.eye(K)[w1]  # (T, n, K): D_i(t, x)
    a = (np.eye(K)[w0] * f0[..., None] - np.eye(K)[w1] * f1[..., None]).sum(0)  # (n, K)
    want = (a - np.einsum("t,tnk->nk", r, onehot)).mean(0)
    dbar = onehot.mean(1)  # (T, K)
    psi = a - np.einsum("t,tnk->nk", r, onehot) - np.einsum("tk,tn->nk", dbar, F)

    def fold(splits):
        ref, ys = _Reference(T, K), []
        for sl in splits:
            fb = F[:, sl]
            rb = fb.mean(1)
            y = a[sl] - np.einsum("t,tnk->nk", rb, onehot[:, sl])  # (m, K)
            ys.append(y)
            yc, fc = y - y.mean(0), fb - rb[:, None]
            ref.merge(y.shape[0], y.mean(0), rb, onehot[:, sl].sum(1), yc.T @ fc.T, fc @ fc.T)
        y = np.concatenate(ys)
        return ref.cells(y.mean(0), y.var(0, ddof=1))

    est, var = fold([slice(0, n)])  # one batch: the variance is the influence's exactly
    assert np.abs(est - want).max() < 1e-12
    assert np.abs(var - psi.var(0, ddof=1)).max() < 1e-10
    est2, var2 = fold([slice(0, 150), slice(150, n)])  # batches with their own references
    assert np.abs(est2 - want).max() < 1e-12
    assert np.abs(var2 / var - 1).max() < 0.05
    # the reference's own sampling error is in the variance: it differs from Y's alone
    y = a - np.einsum("t,tnk->nk", r, onehot)
    assert np.abs(var - y.var(0, ddof=1)).max() > 0.1 * y.var(0).min()

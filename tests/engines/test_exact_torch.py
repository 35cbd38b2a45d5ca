"""The torch exact engine equals the numpy one (values and identities) on random models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import causalfair as cf
from causalfair.engines.exact_torch import exact_metrics, exact_metrics_by_pair
from causalfair.model import ModelError


def random_model(rng, G, K, A=2, baseline=0):
    return cf.TabularModel(
        kernel=rng.dirichlet(np.ones(K) * 0.7, size=(G, A, K)),
        initial=rng.dirichlet(np.ones(K), size=G),
        potential=rng.normal(size=(G, K)),
        reward=rng.normal(size=(G, A, K)),
        group_weights=rng.dirichlet(np.ones(G)),
        baseline=baseline,
        action_labels=tuple(f"a{i}" for i in range(A)),
    )


def random_table(rng, m, T, timed):
    G, K, A = m.n_groups, m.n_levels, m.n_actions
    lead = (T,) if timed else ()
    if A == 2:
        return rng.random(lead + (G, K))
    return rng.dirichlet(np.ones(A), size=lead + (G, K))


CASES = [  # (G, K, A, baseline, timed)
    (2, 7, 2, 0, False), (2, 5, 2, 0, True), (3, 4, 2, 0, False), (2, 6, 3, 1, False),
    (3, 3, 4, 0, True), (2, 4, 2, 1, False),
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("G,K,A,baseline,timed", CASES)
def test_torch_engine_equals_numpy(seed, G, K, A, baseline, timed):
    rng = np.random.default_rng(seed)
    m = random_model(rng, G, K, A, baseline)
    T = int(rng.integers(1, 25))
    gamma = 1.0 if seed % 2 == 0 else 0.9
    p = random_table(rng, m, T, timed)
    ref = cf.decompose(m, p, horizon=T, gamma=gamma, eps=0.07)
    got = exact_metrics(m, torch.tensor(p), T, gamma=gamma, eps=0.07)
    assert got["pair"] == ref.pair
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert abs(float(got[k]) - getattr(ref, k)) <= 1e-9, k
    assert abs(float(got["utility"]) - ref.total_utility) <= 1e-9
    np.testing.assert_allclose(got["V"].numpy(), ref.V, atol=1e-9, rtol=0)
    np.testing.assert_allclose(got["V_ps"].numpy(), ref.V_ps, atol=1e-9, rtol=0)
    np.testing.assert_allclose(got["V_0"].numpy(), ref.V_0, atol=1e-9, rtol=0)
    # identities on the torch side: the parts add up, and (undiscounted) the gain
    # telescopes into the change of the expected potential between t = 0 and t = T
    parts = float(got["DPE"] + got["IPE"] + got["SPE"])
    assert abs(float(got["C"]) - parts) <= 1e-12 * max(1.0, abs(parts))
    if gamma == 1.0:
        f = torch.tensor(m.potential)
        mu = got["mu"]
        tele = (mu[T] * f).sum(-1) - (mu[0] * f).sum(-1)
        np.testing.assert_allclose(got["V"].numpy(), tele.numpy(), atol=1e-9, rtol=0)


def test_initial_weights_equal_numpy():
    rng = np.random.default_rng(7)
    m = random_model(rng, 2, 6)
    p = rng.random((2, 6))
    ref = cf.lambda_metric(m, p, 10, eps=0.2, weights="initial")
    got = exact_metrics(m, torch.tensor(p), 10, eps=0.2, weights="initial")["Lambda"]
    assert abs(float(got) - ref) <= 1e-12


def test_gradients_match_finite_differences():
    """The gradient of utility and C with respect to the table is the exact derivative
    of the numpy engine's values (central differences, step 1e-6)."""
    rng = np.random.default_rng(3)
    m = random_model(rng, 2, 5)
    T = 8
    p = rng.uniform(0.1, 0.9, size=(2, 5))
    pt = torch.tensor(p, requires_grad=True)
    out = exact_metrics(m, pt, T)
    for key in ("utility", "C", "DPE"):
        (g,) = torch.autograd.grad(out[key], pt, retain_graph=True)
        fd = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            up, dn = p.copy(), p.copy()
            up[idx] += 1e-6
            dn[idx] -= 1e-6
            r_up, r_dn = cf.decompose(m, up, T), cf.decompose(m, dn, T)
            attr = "total_utility" if key == "utility" else key
            fd[idx] = (getattr(r_up, attr) - getattr(r_dn, attr)) / 2e-6
        np.testing.assert_allclose(g.numpy(), fd, atol=1e-6, rtol=0)


def test_lending_table_of_a_checkpoint_network():
    """Through a network: the table the audit evaluates (float32 forward, float64 sigmoid)
    gives the same numbers in both engines."""
    torch.manual_seed(0)
    system = cf.systems.make("lending-1")
    m = system.tabular
    net = cf.policies.checkpoint.mlp(m.n_levels + m.n_groups, (16, 16), 1)
    pol = cf.TorchPolicy(net, cf.FeatureEncoding("onehot", n_levels=m.n_levels, n_groups=2))
    ref = cf.decompose(m, pol, 20)
    from causalfair.policies.grid import grid_observation

    x = torch.from_numpy(pol.encoding.encode(grid_observation(m)))
    with torch.no_grad():
        table = torch.sigmoid(net(x).double()[:, 0]).reshape(2, m.n_levels)
        got = exact_metrics(m, table, 20)
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert abs(float(got[k]) - getattr(ref, k)) <= 1e-9, k


def test_bad_table_shape_names_the_expected_shape():
    m = random_model(np.random.default_rng(0), 2, 4)
    with pytest.raises(cf.errors.ModelError, match=r"expected \(2, 4\)"):
        exact_metrics(m, torch.zeros(3, 4), 5)


def test_batched_tables_equal_one_at_a_time():
    rng = np.random.default_rng(11)
    m = random_model(rng, 3, 5)
    tabs = rng.random((4, 3, 5))
    got = exact_metrics(m, torch.tensor(tabs), 9, batched=True)
    for i in range(4):
        one = exact_metrics(m, torch.tensor(tabs[i]), 9)
        for k in ("utility", "C", "DPE", "IPE", "SPE", "Lambda"):
            assert abs(float(got[k][i]) - float(one[k])) <= 1e-12, (i, k)
        assert (int(got["pair"][0][i]), int(got["pair"][1][i])) == one["pair"]


@pytest.mark.parametrize("weights", ["visitation", "initial"])
@pytest.mark.parametrize("departed", [(4,), (0, 4)])
def test_lambda_weighs_those_present_as_numpy_does(weights, departed):
    """A model with departed levels: Lambda's weights are P(x | s) over those present
    (zero at the departed levels, renormalised per group) on both engines; the torch
    engine, which the repair's search follows, used every level's weight (0.208 against
    the audit's 0.151 on this model)."""
    rng = np.random.default_rng(2)
    base = random_model(rng, 2, 5)
    kernel = np.array(base.kernel)
    for k in departed:  # absorbing, as departed levels must be
        kernel[:, :, k, :] = 0.0
        kernel[:, :, k, k] = 1.0
    m = cf.TabularModel(kernel=kernel, initial=base.initial, potential=base.potential,
                        reward=base.reward, group_weights=base.group_weights, baseline=0,
                        action_labels=base.action_labels, departed_levels=departed)
    p = rng.random((2, 5))
    ref = cf.lambda_metric(m, p, 4, eps=0.1, weights=weights)
    bare = cf.lambda_metric(cf.TabularModel(kernel=kernel, initial=base.initial,
                                            potential=base.potential, reward=base.reward,
                                            group_weights=base.group_weights, baseline=0,
                                            action_labels=base.action_labels), p, 4, eps=0.1,
                            weights=weights)
    assert abs(ref - bare) > 1e-3  # the departed levels matter on this model
    got = exact_metrics(m, torch.tensor(p), 4, eps=0.1, weights=weights)["Lambda"]
    assert abs(float(got) - ref) <= 1e-12
    batched = exact_metrics(m, torch.tensor(np.stack([p, p])), 4, eps=0.1, weights=weights,
                            batched=True)["Lambda"]
    assert torch.equal(batched[0], got) and torch.equal(batched[1], got)


@pytest.mark.parametrize("pair", [(0, 0), (0, 5), (-1, 0), ("s+", "s-")])
def test_torch_engine_checks_its_pair_as_the_numpy_engine(pair):
    """exact_metrics(pair=(0, 0)) gave C = 0 (a group against itself: "fair"), (0, 5) torch's
    IndexError; the numpy engine refuses both (check_pair), and now so does this one."""
    m = cf.lending_setting("lending-1").tabular
    p = torch.full((2, 7), 0.5, dtype=torch.float64)
    with pytest.raises(ModelError, match=r"^pair: expected"):
        exact_metrics(m, p, 3, pair=pair)
    with pytest.raises(ModelError, match=r"^pair: expected"):
        exact_metrics_by_pair(m, p, 3, [(0, 1)], pair=pair)
    assert float(exact_metrics(m, p, 3, pair=(1, 0))["C"]) == \
        -float(exact_metrics(m, p, 3, pair=(0, 1))["C"])

"""The exact engine: a hand-worked model, identities on random models, pi0 / pi^PS."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import causalfair as cf
from causalfair.engines.effects import value_tables


def hand_model() -> cf.TabularModel:
    # Two levels {0, 1}, potential f = (0, 1) for both groups.
    kernel = np.array([
        [  # group a
            [[1.0, 0.0], [0.5, 0.5]],  # d0
            [[0.5, 0.5], [0.0, 1.0]],  # d1
        ],
        [  # group b
            [[1.0, 0.0], [1.0, 0.0]],  # d0
            [[0.75, 0.25], [0.5, 0.5]],  # d1
        ],
    ])
    reward = np.array([[[0, 0], [1, 2]], [[0, 0], [1, 2]]], dtype=float)
    return cf.TabularModel(kernel=kernel, initial=[[0.5, 0.5], [1.0, 0.0]],
                           potential=[0.0, 1.0], reward=reward, group_names=["a", "b"],
                           lambda_eps=0.1)


HAND_POLICY = np.array([[1.0, 0.0], [0.5, 0.5]])


def test_hand_worked_two_level_two_step():
    # Worked by hand (see the derivation in docs/decomposition.md, "a tiny example"):
    # h0 = a: (0, -1/2), b: (0, -1); h1 = a: (1/2, 0), b: (1/4, -1/2).
    # Group a: mu_0 = mu_1 = (1/2, 1/2): V = 0, V^PS = -1/2, under pi0 nu_1 = (3/4, 1/4):
    #   V^pi0 = -1/4 - 1/8 = -3/8.
    # Group b: mu_1 = (7/8, 1/8): V = 1/8 + (7/64 - 6/64) = 9/64, V^PS = -1/8, V^pi0 = 0.
    r = cf.decompose(hand_model(), HAND_POLICY, horizon=2)
    np.testing.assert_allclose(r.V, [0.0, 9 / 64], atol=1e-15)
    np.testing.assert_allclose(r.V_ps, [-0.5, -0.125], atol=1e-15)
    np.testing.assert_allclose(r.V_0, [-0.375, 0.0], atol=1e-15)
    assert r.C == pytest.approx(-9 / 64, abs=1e-15)
    assert r.DPE == pytest.approx(0.5 - (9 / 64 + 1 / 8), abs=1e-15)
    assert r.IPE == pytest.approx(0.0, abs=1e-15)
    assert r.SPE == pytest.approx(-0.375, abs=1e-15)
    # per-step gains under pi for group b: 1/8 then 1/64
    np.testing.assert_allclose(r.steps[0, 1], [0.125, 1 / 64], atol=1e-15)
    # utility: a earns 1/2 per step; b earns 1/2 then 7/16 + 1/8
    np.testing.assert_allclose(r.utility_by_group, [1.0, 1.0625], atol=1e-15)
    assert r.total_utility == pytest.approx(1.03125)
    # Lambda, eps = 0.1, visitation weights a: (1/2, 1/2), b: (15/16, 1/16);
    # Delta a = (1/2, 1/2), b = (1/4, 1/2); |dp| = 1/2 for every pair.
    expected = 2 * (0.5 * 15 / 16 * 0.05 / 0.35 + 0.5 / 16 * 0.5)
    assert r.Lambda == pytest.approx(expected, abs=1e-15)
    assert r.diagnostics_ok


def test_hand_model_benefit_and_expected_gain():
    m = hand_model()
    h = m.expected_gain()
    np.testing.assert_allclose(h[0], [[0, -0.5], [0.5, 0]])
    np.testing.assert_allclose(h[1], [[0, -1], [0.25, -0.5]])
    np.testing.assert_allclose(m.benefit(), [[0.5, 0.5], [0.25, 0.5]])


def random_model(rng: np.random.Generator, G: int, K: int) -> cf.TabularModel:
    kernel = rng.dirichlet(np.ones(K) * 0.7, size=(G, 2, K))
    initial = rng.dirichlet(np.ones(K), size=G)
    return cf.TabularModel(kernel=kernel, initial=initial, potential=rng.normal(size=(G, K)),
                           reward=rng.normal(size=(G, 2, K)))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), G=st.integers(2, 4), K=st.integers(2, 12),
       T=st.integers(1, 25), time_indexed=st.booleans())
def test_identities_on_random_models(seed, G, K, T, time_indexed):
    rng = np.random.default_rng(seed)
    m = random_model(rng, G, K)
    p = rng.random((T, G, K) if time_indexed else (G, K))
    r = cf.decompose(m, p, horizon=T)
    scale = max(1.0, float(np.abs(np.concatenate([r.V, r.V_ps, r.V_0])).max()))
    assert abs(r.C - (r.DPE + r.IPE + r.SPE)) <= 1e-12 * scale
    for name, resid in r.diagnostics.items():
        assert resid <= 1e-12, (name, resid)
    # Proposition 1 recomputed here from the backward values (independent of the engine's
    # forward sums): V - V^PS = sum_t E_mu_t[pi Delta].
    vt = value_tables(m, p, T)
    mu = m.propagate(p, T)
    pt = p if p.ndim == 3 else np.broadcast_to(p, (T, G, K))
    direct = np.einsum("tsx,tsx->s", mu[:T], pt * m.benefit())
    back = np.einsum("sx,sx->s", m.initial, vt["V_pi"][0] - vt["V_ps"][0])
    np.testing.assert_allclose(back, direct, atol=1e-12 * scale)
    # Telescoping: V = E f(x_T) - E f(x_0)
    tele = np.einsum("sx,sx->s", mu[T], m.potential) - np.einsum("sx,sx->s", mu[0], m.potential)
    np.testing.assert_allclose(r.V, tele, atol=1e-12 * scale)


def test_pi0_has_no_policy_effects_and_always_equals_table_of_ones():
    m = cf.lending_setting("lending-1").tabular
    r0 = cf.decompose(m, cf.BaselinePolicy(), 20)
    assert r0.DPE == 0.0 and r0.IPE == 0.0
    assert r0.C == r0.SPE
    r1 = cf.decompose(m, cf.parse_policy("always", m), 20)
    r1t = cf.decompose(m, np.ones((2, 7)), 20)
    assert r1.C == r1t.C and r1.DPE == r1t.DPE
    # SPE does not depend on the policy
    assert r1.SPE == r0.SPE


def test_path_specific_policy_is_inspectable():
    m = cf.lending_setting("lending-1").tabular
    pi = cf.parse_policy("threshold:0.5", m)
    pi0, ps = cf.hypothetical_policies(pi)
    np.testing.assert_array_equal(ps.transition_table(m), cf.policy_table(pi, m))
    np.testing.assert_array_equal(ps.gain_table(m), np.zeros((2, 7)))
    np.testing.assert_array_equal(cf.policy_table(pi0, m), np.zeros((2, 7)))
    assert "d0" in ps.describe() and "threshold:0.5" in ps.name


def test_pi_ps_value_is_h0_along_pi_trajectories():
    # V^PS computed directly from its definition: trajectories under pi, gains h0.
    m = cf.lending_setting("lending-2").tabular
    pi = cf.parse_policy("threshold:0.6", m)
    p = cf.policy_table(pi, m)
    mu = m.propagate(p, 12)
    h0 = m.expected_gain()[:, 0]
    r = cf.decompose(m, pi, 12)
    np.testing.assert_allclose(r.V_ps, np.einsum("tsx,sx->s", mu[:12], h0), atol=1e-14)


def test_more_than_two_groups_uses_largest_gap_pair():
    rng = np.random.default_rng(3)
    m = random_model(rng, 3, 5)
    p = rng.random((3, 5))
    r = cf.decompose(m, p, 6)
    assert r.C == pytest.approx(r.V.max() - r.V.min())
    assert r.C == pytest.approx(r.DPE + r.IPE + r.SPE)
    r01 = cf.decompose(m, p, 6, pair=(0, 1))
    assert r01.C == pytest.approx(r.V[0] - r.V[1])


def test_discounting_reduces_to_weighted_steps():
    m = cf.lending_setting("lending-3").tabular
    p = cf.policy_table(cf.parse_policy("threshold:0.5", m), m)
    und = cf.decompose(m, p, 10)
    disc = cf.decompose(m, p, 10, gamma=0.9)
    np.testing.assert_allclose(disc.steps, und.steps * 0.9 ** np.arange(10), atol=1e-15)
    assert disc.diagnostics_ok and "telescoping" not in disc.diagnostics


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_bad_horizon(bad):
    m = cf.lending_setting().tabular
    with pytest.raises(cf.ModelError, match="horizon: must be an integer >= 1"):
        cf.decompose(m, np.zeros((2, 7)), bad)


def test_bad_policy_table_shape():
    m = cf.lending_setting().tabular
    with pytest.raises(cf.ModelError, match=r"policy: table has shape \(2, 6\)"):
        cf.decompose(m, np.zeros((2, 6)), 5)


def test_result_views_are_consistent():
    m = cf.lending_setting("lending-1").tabular
    r = cf.decompose(m, cf.parse_policy("threshold:0.5", m), 10)
    df = r.to_frame()
    assert df.loc["C", "estimate"] == r.C
    assert df.loc["DPE", "ci_lower"] == df.loc["DPE", "ci_upper"] == r.DPE
    g = r.groups_frame()
    assert g.loc["s+", "direct"] == pytest.approx(r.V[0] - r.V_ps[0])
    steps = r.steps_frame()
    assert steps.groupby("group")["pi"].sum()["s-"] == pytest.approx(r.V[1])
    d = r.to_dict()
    import json

    back = json.loads(json.dumps(d, allow_nan=False))
    assert back["C"] == r.C and back["groups"]["s+"]["V_ps"] == r.V_ps[0]
    assert back["diagnostics"]["ok"] is True
    assert "DPE" in r.summary() and "<table" in r._repr_html_()
    with pytest.raises(ValueError, match="alpha"):
        r.conf_int(1.5)

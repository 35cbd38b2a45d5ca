"""Benefit fairness by forks on continuous observations (method.md section 4): the cells
that pair individuals are the joint quantile bins some visit falls in, so their number,
and the K x K pair terms of Lambda, stay within the visits however many features the
observations have (``bins`` to the power F joint bins would be quadratic in that)."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines.benefit_cells import (
    bin_cells,
    bin_labels,
    bin_rows,
    quantile_edges,
    visit_cells,
)
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.errors import ResourceLimitError
from causalfair.policies.adapters import callable_policy
from causalfair.systems import as_system
from causalfair.types import Observation, StepResult


class WideSim:
    """F continuous features (the last column of the state is the group); acting adds
    0.2 to every feature, and the gain of acting grows with the first feature."""

    n_groups = 2

    def __init__(self, F: int):
        self.F = F

    def reset(self, n, group, rng):
        return np.column_stack([rng.normal(0.3 * group, 1.0, size=(n, self.F)),
                                np.full(n, float(group))])

    def observe(self, state):
        return Observation(group=state[:, -1].astype(int), features=state[:, :-1])

    def draw_noise(self, n, rng):
        return rng.normal(size=(n, self.F))

    def step(self, state, decisions, noise):
        d = np.asarray(decisions, dtype=float)
        x = state[:, :-1]
        nxt = np.column_stack([x + 0.1 * noise + 0.2 * d[:, None], state[:, -1]])
        gain = d * (0.5 + 0.2 * x[:, 0]) + 0.1 * noise[:, 0]
        return StepResult(state=nxt, reward=gain, gain=gain)


def test_cells_are_the_visited_joint_bins():
    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(40, 3)), rng.normal(1.0, 1.0, size=(30, 3))]
    cells, K, labels, desc = visit_cells(None, feats, 4, ("a", "b", "c"), None)
    edges, values = quantile_edges(np.concatenate(feats), 4)
    assert values == [None, None, None]  # continuous: quantile bins
    joint = [bin_cells(x, edges) for x in feats]
    full, _ = bin_labels(edges, ("a", "b", "c"))
    visited = np.unique(np.concatenate(joint))
    assert K == len(labels) == len(visited) < 64
    for c, j in zip(cells, joint, strict=True):  # same joint bin, same cell, same label
        assert [labels[i] for i in c] == [full[i] for i in j]
    assert desc == f"joint quantile bins of a, b, c (4x4x4 cells, {K} visited)"


def test_a_feature_with_few_values_gets_one_bin_per_value():
    """A binary feature whose rarer value is under a quarter of the visits (every quantile
    edge on 0) keeps its two values apart, and a three-valued one its three; a
    continuous one gets quantile bins."""
    rng = np.random.default_rng(2)
    n = 1000
    rare = (rng.random(n) < 0.1).astype(float)  # quantiles 0.25, 0.5, 0.75 are all 0
    three = rng.choice([-1.0, 0.5, 2.0], size=n, p=[0.05, 0.9, 0.05])
    cont = rng.normal(size=n)
    x = np.column_stack([rare, three, cont])
    edges, values = quantile_edges(x, 4)
    assert values[0].tolist() == [0.0, 1.0] and values[1].tolist() == [-1.0, 0.5, 2.0]
    assert values[2] is None and len(edges[2]) == 3
    rows = bin_rows(x, edges)
    assert np.array_equal(rows[:, 0], rare) and np.array_equal(rows[:, 1], np.searchsorted(
        [-1.0, 0.5, 2.0], three))
    cells, K, labels, desc = visit_cells(None, [x[:500], x[500:]], 4, ("r", "t", "c"), None)
    assert K == len(np.unique(rows, axis=0))  # 2 x 3 x 4 joint bins, the visited ones
    assert any(lab.startswith("r=1 t=-1 c:q") for lab in labels), labels
    assert "one bin per value of r, t" in desc, desc
    # every feature binned by value: no quantile at all, and the description says so
    _, K2, labels2, desc2 = visit_cells(None, [x[:500, :2], x[500:, :2]], 4, ("r", "t"), None)
    assert desc2.startswith("one cell per joint value of r, t (2x3 cells"), desc2
    assert "quantile" not in desc2 and K2 == len(labels2) == len(np.unique(rows[:, :2], axis=0))
    # the quantile rule alone would put the rare value with the common one
    qs = np.unique(np.quantile(rare, [0.25, 0.5, 0.75]))
    assert len(np.unique(np.searchsorted(qs, rare, side="right"))) == 1


def test_number_of_cells_bounded_by_the_visits_with_many_features():
    rng = np.random.default_rng(1)
    feats = [rng.normal(size=(40, 8)), rng.normal(size=(40, 8))]  # 4**8 = 65536 joint bins
    cells, K, labels, _ = visit_cells(None, feats, 4, None, None)
    assert K <= 80 and len(labels) == K
    assert all(c.min() >= 0 and c.max() < K for c in cells)


def test_benefit_mc_pairs_only_visited_cells():
    """Four continuous features (256 joint bins) and 160 visits: the pair terms are over
    the visited cells only, every cell carries weight, and Lambda is their sum."""
    system = as_system(WideSim(4))
    n, T = 40, 2
    policy = callable_policy(lambda obs: 1 / (1 + np.exp(-obs.features[:, 0])))
    res = benefit_fairness_mc(system, policy, T, n=n, seed=0, n_boot=20, jobs=1)
    K = len(res.levels)
    assert K <= 2 * n * T < 4**4 and res.contributions.shape == (K, K)
    assert (res.state_weights.sum(axis=0) > 0).all()
    assert res.Lambda == float(res.contributions.sum()) and res.Lambda > 0
    assert res.se is not None and res.se > 0


def test_pair_terms_checked_against_the_memory_limit(monkeypatch):
    """The K x K pair terms of every bootstrap replicate are counted before they are
    made: over the limit, one line naming the cells, the pairs and the fix."""
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "1M")
    policy = callable_policy(lambda obs: np.full(len(obs), 0.5))
    with pytest.raises(ResourceLimitError, match=r"benefit_fairness_mc: .*the \d+ cells \(joint "
                       r"quantile bins of f0, f1, f2, f3 .*\) make \d+ pairs; lower the quantile "
                       r"bins per feature \(now 4: benefit_bins=") as exc:
        benefit_fairness_mc(as_system(WideSim(4)), policy, 2, n=40, seed=0, n_boot=20, jobs=1)
    assert "\n" not in str(exc.value)


def test_cells_past_a_64_bit_joint_index():
    """80 features of 2 bins each: 2**80 joint bins, past a 64-bit joint index (which
    would keep only the last 64 features' bins, here constant, and merge every row into
    one cell). Each visited pattern of the 16 varying features is its own cell, and a
    label names the features off their most common bin only."""
    rng = np.random.default_rng(3)
    feats = [np.column_stack([rng.normal(size=(n, 16)), np.zeros((n, 64))]) for n in (60, 50)]
    cells, K, labels, desc = visit_cells(None, feats, 2, None, None)
    med = np.median(np.concatenate(feats)[:, :16], axis=0)
    bits = [(x[:, :16] > med).astype(int) for x in feats]  # bin 0 or 1 of each varying feature
    assert K == len({tuple(r) for b in bits for r in b.tolist()}) > 100
    mode = (np.concatenate(bits).mean(axis=0) > 0.5).astype(int)
    for c, b in zip(cells, bits, strict=True):
        want = [" ".join(f"f{j}:q{v + 1}/2" for j, v in enumerate(r) if v != mode[j]) or
                "(most common bins)" for r in b.tolist()]
        assert [labels[i] for i in c] == want
    assert desc.endswith(f"{K} visited; labels name the features off their most common bin)")


def test_a_one_hot_state_makes_one_cell_per_visited_state():
    """A flattened Discrete observation (one-hot over 12 states, some rarer than a
    quarter): each visited state is its own cell, and the description stays short."""
    rng = np.random.default_rng(3)
    states = rng.choice(12, size=600, p=np.r_[0.5, np.full(11, 0.5 / 11)])
    x = np.eye(12)[states]
    cells, K, labels, desc = visit_cells(None, [x[:300], x[300:]], 4, None, None)
    assert K == len(np.unique(states))
    hot = [int(np.flatnonzero(r)[0]) for r in x]
    for c, i in zip(np.concatenate(cells), hot, strict=True):  # one state, one cell
        assert np.unique(np.array(hot)[np.concatenate(cells) == c]).tolist() == [i]
    assert desc.startswith("one cell per joint value of 12 features (f0, ..., f11) "
                           "(12-feature cells, "), desc

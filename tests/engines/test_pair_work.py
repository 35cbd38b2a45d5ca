"""The every-pair comparison's time is bounded before its pairs are computed (h8bound F1):
the memory limit bounded the number of pairs only, while a pair's Lambda costs K x K terms
(exact) or 200 bootstrap replicates of them (forks), so 1,448 groups of 400 levels, or 100
groups of a few thousand cells by forks, ran for hours. Counted in pair terms against
CAUSALFAIR_MAX_PAIR_TERMS (docs/limits.md, "Work") at every door (compare, which
compare_groups, decompose, an audit and training reach; the log audit's comparison)."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines import pair_work
from causalfair.errors import InputError, ResourceLimitError
from causalfair.logs import simulate_logs
from causalfair.systems import as_system
from tests.engines.test_groups_many import many, table


def test_exact_pairs_are_counted_and_refused(monkeypatch):
    G, K = 6, 20
    model = many(G, K)
    pol = np.full((G, K), 0.5)
    res = cf.compare_groups(model, pol, 3)  # within the default limit: unchanged
    assert len(res.pairs) == 15
    # 15 pairs x (K^2 = 400 terms + 3,000 of their own quantities) = 51,000 terms
    monkeypatch.setenv("CAUSALFAIR_MAX_PAIR_TERMS", "51000")
    assert cf.compare_groups(model, pol, 3).pairs == res.pairs
    monkeypatch.setenv("CAUSALFAIR_MAX_PAIR_TERMS", "50999")
    with pytest.raises(ResourceLimitError, match=r"6 groups compared in every one of their 15 "
                       r"pairs \(Lambda exact over 20 levels\): about 5.1e\+04 pair terms, over "
                       r"the limit of 5.1e\+04.*CAUSALFAIR_MAX_PAIR_TERMS"):
        cf.compare_groups(model, pol, 3)


class Features:
    """G groups, one continuous feature, no tabular model: Lambda by forks per pair."""

    n_actions, feature_names, horizon = 2, ("x",), 3

    def __init__(self, G: int) -> None:
        self.n_groups = G
        self.group_names = tuple(f"g{i}" for i in range(G))

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(np.int64)
        return {"g": g.copy(), "x": rng.normal(size=n) + 0.1 * g}

    def observe(self, s):
        return cf.Observation(group=s["g"], features=s["x"][:, None], t=None)

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        x = s["x"] + 0.1 * (2 * d - 1) * (1 + 0.05 * s["g"]) + 0.1 * noise
        return cf.StepResult(state={"g": s["g"], "x": x}, reward=d * x, gain=x - s["x"],
                             info={})


def reads_x(obs):
    return (obs.features[:, 0] > 0).astype(float)


def test_forks_pairs_are_counted_before_the_pairs(monkeypatch):
    G = 4
    system = Features(G)
    calls = []
    real = pair_work.check_pair_work

    def spy(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr("causalfair.engines.groups.check_pair_work", spy)
    monkeypatch.setenv("CAUSALFAIR_MAX_PAIR_TERMS", "1e6")
    with pytest.raises(ResourceLimitError, match=r"Lambda by forks over up to 3 cells a group, "
                       r"200 bootstrap replicates a pair.*fewer cells"):
        cf.compare_groups(system, reads_x, 3, n=200, seed=1, benefit_bins=3, jobs=1)
    # 6 pairs, 202 runs of 3 x 3 cells x 4 terms, 201 replicates' 8,000 each
    assert calls[-1][1] == pytest.approx(202 * 4 * 6 * 9 + 201 * 8000 * 6)
    monkeypatch.setenv("CAUSALFAIR_MAX_PAIR_TERMS", "1e11")
    res = cf.compare_groups(system, reads_x, 3, n=200, seed=1, benefit_bins=3, jobs=1)
    assert len(res.pairs) == 6 and all(q["Lambda"] is not None for q in res.pairs.values())


def test_log_audit_pairs_are_counted(tmp_path, monkeypatch):
    G = 3
    model = many(G)
    logs = simulate_logs(as_system(model), table(G), 200, 3, seed=0)
    path = tmp_path / "logs.csv"
    logs.to_csv(path, index=False)
    monkeypatch.setenv("CAUSALFAIR_MAX_PAIR_TERMS", "1e5")
    with pytest.raises(ResourceLimitError, match=r"3 groups compared in every one of their 3 "
                       r"pairs \(50 bootstrap replicates a pair.*fewer bootstrap replicates"):
        cf.audit_logs(path, n_boot=50, seed=0).compare_groups()


def test_bad_limit_is_an_input_error(monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_PAIR_TERMS", "lots")
    with pytest.raises(InputError, match="CAUSALFAIR_MAX_PAIR_TERMS: bad value 'lots'"):
        pair_work.max_pair_terms()


def test_two_groups_are_never_refused(monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_PAIR_TERMS", "1")
    pair_work.check_pair_work(2, 1e30, "")

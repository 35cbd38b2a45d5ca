"""Many groups: the every-pair comparison's numbers against a brute force, and its size
refused before any work at every door (docs/limits.md, "the every-pair comparison")."""

from __future__ import annotations

import itertools
import textwrap
from statistics import NormalDist

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines import groups as groups_mod
from causalfair.errors import ResourceLimitError
from causalfair.model import TabularModel
from causalfair.systems import as_system


def many(G: int, K: int = 3, seed: int = 0) -> TabularModel:
    rng = np.random.default_rng(seed)
    k = rng.random((G, 2, K, K)) + 0.1
    ini = rng.random((G, K)) + 0.1
    return TabularModel(kernel=k / k.sum(-1, keepdims=True),
                        initial=ini / ini.sum(-1, keepdims=True),
                        potential=np.linspace(0.0, 1.0, K),
                        group_names=[f"g{i}" for i in range(G)])


def table(G: int) -> np.ndarray:
    p = np.full((G, 3), 0.5)
    p[:, 0] = 0.2
    return p


def test_every_pair_matches_a_brute_force_exact_and_monte_carlo():
    G = 6
    model = many(G)
    res = cf.compare_groups(model, table(G), 5)
    V = np.asarray(cf.decompose(model, table(G), 5).V)
    assert len(res.pairs) == G * (G - 1) // 2
    worst = max(itertools.combinations(range(G), 2), key=lambda ab: abs(V[ab[0]] - V[ab[1]]))
    assert set(res.worst.split("-")) == {f"g{worst[0]}", f"g{worst[1]}"}
    for name, q in res.pairs.items():
        a, b = (int(x[1:]) for x in name.split("-"))
        assert q["C"][0] == pytest.approx(V[a] - V[b], abs=1e-12)
    mc = cf.compare_groups(as_system(model), table(G), 5, engine="mc", n=500, seed=1)
    assert mc.simultaneous == G * (G - 1) // 2
    q = mc.pairs[mc.chosen]["C"]
    z = NormalDist().inv_cdf(1 - 0.05 / (2 * mc.simultaneous))
    assert (q[2] - q[1]) / 2 / q[3] == pytest.approx(z)


def test_pairs_count_is_checked(monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "4M")
    groups_mod.check_pairs(45)  # 990 pairs, 3.9 MiB
    with pytest.raises(ResourceLimitError, match=r"46 groups compared in every one of their "
                       r"1035 pairs.*merge groups"):
        groups_mod.check_pairs(46)


def test_many_groups_refused_before_the_decomposition(monkeypatch):
    """compare_groups, and compare() that every door reaches, refuse before any work."""
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "4M")
    model = many(60)  # 1770 pairs: 6.9 MiB
    dec = cf.decompose(model, table(60), 3)
    ran = []
    monkeypatch.setattr("causalfair.engines.choice._decompose",
                        lambda *a, **k: ran.append(1))
    with pytest.raises(ResourceLimitError, match="compare_groups: 60 groups .* 1770 pairs"):
        cf.compare_groups(model, table(60), 3)
    assert not ran
    with pytest.raises(ResourceLimitError, match="1770 pairs"):
        groups_mod.compare(dec)


def test_many_groups_refused_by_decompose_and_an_audit(tmp_path, cli_here, monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "4M")
    (tmp_path / "manyg.py").write_text(textwrap.dedent("""
        import numpy as np
        from causalfair.model import TabularModel

        def make(G=60):
            rng = np.random.default_rng(0)
            k = rng.random((G, 2, 3, 3)) + 0.1
            ini = rng.random((G, 3)) + 0.1
            return TabularModel(kernel=k / k.sum(-1, keepdims=True),
                                initial=ini / ini.sum(-1, keepdims=True),
                                potential=np.linspace(0.0, 1.0, 3),
                                group_names=[f"g{i}" for i in range(G)])
        """))
    proc = cli_here("decompose", "--system", "manyg:make", "--horizon", "3", "--policy",
                    "uniform", "--search-path", tmp_path, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "60 groups compared in every one of their 1770 pairs" in proc.stderr
    assert proc.stdout == ""
    (tmp_path / "a.toml").write_text(textwrap.dedent("""
        name = "many"
        horizon = 3
        [system]
        factory = "manyg:make"
        [policy]
        builtin = "uniform"
        [thresholds]
        max_abs_C = 0.1
        """))
    proc = cli_here("audit", tmp_path / "a.toml", "--out", tmp_path / "rep", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "1770 pairs" in proc.stderr

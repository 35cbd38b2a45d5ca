"""The Python API as an analyst calls it in a notebook (hunt 4): arguments checked where
every door passes, results that keep the level they were asked for."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

import causalfair as cf  # noqa: E402


@pytest.fixture(scope="module")
def lending():
    return cf.lending_setting("lending-1").tabular


def test_a_monte_carlo_decomposition_keeps_the_level_it_was_asked_for():
    """cf.decompose(alpha=0.1) printed and tabulated 95% intervals for C, DPE, IPE, SPE
    beside a 90% Lambda interval; its views now default to the call's level, as
    compare_groups and `causalfair decompose --alpha` do, and audit.json's ci95 stays 95%."""
    sim = cf.LendingSimulator(cf.lending_setting("lending-1"))
    r = cf.decompose(sim, "threshold:0.5", 4, engine="mc", n=2000, seed=0, alpha=0.1)
    assert r.alpha == 0.1
    assert "90% CI" in str(r) and "95% CI" not in str(r)
    frame = r.to_frame()
    assert frame.loc["C", "ci_lower"] == pytest.approx(r.intervals(0.1)["C"][0], abs=0)
    assert frame.loc["C", "ci_lower"] != r.intervals(0.05)["C"][0]
    assert r.conf_int().loc["C"].tolist() == r.conf_int(0.1).loc["C"].tolist()
    assert r.to_dict()["ci95"]["C"] == list(r.intervals(0.05)["C"])
    g = cf.compare_groups(sim, "threshold:0.5", 4, engine="mc", n=2000, seed=0, alpha=0.1)
    lo = g.to_frame().loc[("s--s+", "C"), "ci_lower"]
    assert -lo == pytest.approx(frame.loc["C", "ci_upper"], rel=1e-12)
    default = cf.decompose(sim, "threshold:0.5", 4, engine="mc", n=2000, seed=0)
    assert default.alpha == 0.05 and "95% CI" in str(default)

"""The Python API as an analyst calls it in a notebook (hunt 4): arguments checked where
every door passes, results that keep the level they were asked for."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import causalfair as cf  # noqa: E402
from causalfair.errors import CausalfairError  # noqa: E402


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


@pytest.mark.parametrize("table", [np.full((2, 7), 2.0), np.full((2, 7), np.nan),
                                   np.full((3, 7), 0.5)])
def test_other_notions_checks_a_table_as_every_exact_door(lending, table):
    """cf.other_notions took an ndarray as it was: approval rates of 2.0, NaN gaps, a
    broadcast ValueError, where value_tables and lambda_metric refuse the same table."""
    with pytest.raises(CausalfairError, match=r"policy(: table| table:)"):
        cf.other_notions(lending, table, 5)


@pytest.mark.parametrize("pair", [(0, -1), (1, 1), (0, 9), ("s+", "s-")])
def test_other_notions_checks_its_pair(lending, pair):
    """pair=(0, -1) read the last group through numpy's negative index, (1, 1) gave a gap
    of 0 and (0, 9) an IndexError; lambda_metric's check now refuses them."""
    policy = cf.parse_policy("threshold:0.5", lending)
    with pytest.raises(CausalfairError, match=r"^pair: expected two"):
        cf.other_notions(lending, policy, 5, pair=pair)
    assert cf.other_notions(lending, policy, 5, pair=(1, 0))["dp_gap"] == pytest.approx(
        cf.other_notions(lending, policy, 5)["dp_gap"], abs=0)


@pytest.mark.parametrize("kw, match", [
    ({"seed": -1}, r"^seed: must be an integer >= 0"),
    ({"seed": 1.5}, r"^seed: must be an integer >= 0"),
    ({"seed": None}, r"^seed: must be an integer >= 0"),  # OS entropy: another log each call
    ({"n_individuals": 2.5}, r"^n_individuals: must be an integer >= 1"),
    ({"horizon": 2.5}, r"^horizon: must be an integer >= 1"),
    ({"groups": [-1, -1, 0, 0]}, r"groups\[0\] = -1 is not a group index \(0 to 1\)"),
    ({"groups": [5, 0, 0, 0]}, r"groups\[0\] = 5 is not a group index"),
    ({"groups": [0, 1]}, r"groups must be 4 integer group indices"),
    ({"groups": ["s+"] * 4}, r"groups must be 4 integer group indices"),
])
def test_simulate_logs_checks_its_arguments(kw, match):
    """simulate_logs (the function the CLI calls) raised numpy's errors for a negative or
    fractional seed, truncated 2.5 individuals to 2, drew OS entropy for seed=None, and
    simulated groups=-1 as the last group while logging it as a missing group (NaN)."""
    from causalfair.logs import simulate_logs

    with pytest.raises(CausalfairError, match=match):
        simulate_logs("lending-1", "random:0.5", **{"n_individuals": 4, "horizon": 3, **kw})
    df = simulate_logs("lending-1", "random:0.5", 4, 3, 7, groups=np.array([0, 1, 1, 0]))
    assert df.group.tolist()[:4] == ["s+", "s-", "s-", "s+"]
    assert df.equals(simulate_logs("lending-1", "random:0.5", 4, 3, 7, groups=[0, 1, 1, 0]))


def test_a_benefit_result_tabulates_the_interval_it_prints():
    """benefit_fairness(alpha=0.1) printed its 90% bootstrap interval while to_frame()
    showed a 95% normal one; to_frame() now defaults to the result's level, as
    Decomposition.to_frame and GroupComparison.to_frame do."""
    sim = cf.LendingSimulator(cf.lending_setting("lending-1"))
    b = cf.benefit_fairness(sim, "threshold:0.5", 4, engine="mc", n=1000, seed=0, alpha=0.1)
    row = b.to_frame().iloc[0]
    assert (row["ci_lower"], row["ci_upper"]) == tuple(map(float, b.ci))
    assert f"[{b.ci[0]:.6f}, {b.ci[1]:.6f}]" in str(b) and "90% bootstrap CI" in str(b)
    wide = b.to_frame(0.05).iloc[0]
    assert wide["ci_upper"] - wide["ci_lower"] > row["ci_upper"] - row["ci_lower"]


@pytest.mark.parametrize("tol", [float("nan"), -1.0, float("inf"), "1e-9", True])
def test_potential_from_gain_checks_its_tolerance(tol):
    """tol=nan compared False with every error, so a non-additive gain (random numbers)
    came back as a potential; -1 refused an additive one with a nonsense triple."""
    gain = np.random.default_rng(0).random((3, 3))
    with pytest.raises(CausalfairError, match=r"^tol: must be a finite number >= 0"):
        cf.potential_from_gain(gain, tol=tol)
    with pytest.raises(CausalfairError, match=r"^gain: not additive"):
        cf.potential_from_gain(gain)
    assert cf.potential_from_gain(np.zeros((3, 3)), tol=0).tolist() == [[0.0, 0.0, 0.0]]


@pytest.mark.parametrize("kw, match", [
    ({"metadata": {"trained_on": object()}}, r"metadata: Object of type object is not JSON"),
    ({"module": None}, r"module: bad value None"),
    ({"encoding": None}, r"encoding: bad value None"),
    ({"encoding": "onehot"}, r"encoding: bad value 'onehot'"),
])
def test_save_checkpoint_refuses_what_it_cannot_write_in_its_own_words(tmp_path, kw, match):
    """A metadata value JSON cannot write, a None module or a string encoding raised
    TypeError / AttributeError from inside save_checkpoint; nothing is written either way."""
    args = {"module": cf.policies.checkpoint.mlp(9, (4,), 1),
            "encoding": cf.FeatureEncoding("onehot", 7, 2),
            "architecture": {"type": "mlp", "input_dim": 9, "hidden": [4], "output_dim": 1,
                             "activation": "tanh"}}
    args.update(kw)
    with pytest.raises(cf.CheckpointError, match=match):
        cf.save_checkpoint(tmp_path / "policy.pt", **args)
    assert list(tmp_path.iterdir()) == []

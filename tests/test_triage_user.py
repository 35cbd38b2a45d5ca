"""A hospital's triage audit (docs/own-system.md, "Individuals who leave"): patients who
recover or die leave the population, modelled as an absorbing level whose gain is 0 and
whose decisions change nothing. A tiny case (two groups, levels sick / well plus the
absorbing `left`, two actions, T = 2) is computed by hand here and compared with the exact
engine and Monte Carlo; the report of a triage system uses its own words."""

from __future__ import annotations

import re
import sys
import textwrap

import pytest

import causalfair as cf
from tests.conftest import run_cmd
from tests.tri_tiny import HAND, PI, PI_BASELINE_AT_LEFT, tiny_module  # noqa: F401


def _terms(res) -> dict[str, float]:
    frame = res.to_frame()["estimate"]
    return {k: float(frame[k]) for k in ("C", "DPE", "IPE", "SPE")}


def test_absorbing_level_exact_engine_matches_the_hand_computation(tiny):
    system = tiny.make()
    res = cf.decompose(system, tiny.TablePolicy(PI))
    got = _terms(res)
    for key in ("C", "DPE", "IPE", "SPE"):
        assert got[key] == pytest.approx(HAND[key], abs=1e-12), key
    frame = res.to_frame()["estimate"]
    assert float(frame["V[insured]"]) == pytest.approx(HAND["V_a"], abs=1e-12)
    assert float(frame["V[uninsured]"]) == pytest.approx(HAND["V_b"], abs=1e-12)


def test_decisions_on_patients_who_left_change_no_term(tiny):
    """Exact and Monte Carlo: a policy that admits 90% of the patients who left and one that
    gives them the baseline give the same C, DPE, IPE, SPE (Monte Carlo: bit for bit, the
    same random numbers), and Monte Carlo agrees with the hand values."""
    system = tiny.make()
    exact = [_terms(cf.decompose(system, tiny.TablePolicy(p))) for p in (PI, PI_BASELINE_AT_LEFT)]
    assert exact[0] == exact[1]
    mc = [cf.decompose(system, tiny.TablePolicy(p), engine="mc", n=20_000, seed=3)
          for p in (PI, PI_BASELINE_AT_LEFT)]
    assert _terms(mc[0]) == _terms(mc[1])
    frame = mc[0].to_frame()
    for key in ("C", "DPE", "IPE", "SPE"):
        est, se = float(frame.loc[key, "estimate"]), float(frame.loc[key, "se"])
        assert 0 < se < 0.02 and abs(est - HAND[key]) < 4 * se, (key, est, se, HAND[key])


def test_lambda_does_not_count_decisions_on_patients_who_left(tiny):
    """With the departed level declared (System(departed=...)), Lambda's P(x | s) is the
    visitation distribution of those present: what the policy does at 'left' changes
    nothing, and Lambda is the hand value of tests/test_departed.py (0.12310 over the
    present visits' mass 0.932 x 0.8975). Undeclared it stays 0.15294 / 0.14235."""
    system = tiny.make().with_(departed=(2,))
    lam = [cf.benefit_fairness(system, tiny.TablePolicy(p), eps=0.1).Lambda
           for p in (PI, PI_BASELINE_AT_LEFT)]
    assert lam[0] == pytest.approx(lam[1], abs=1e-12)
    assert lam[0] == pytest.approx(0.12309506875 / (0.932 * 0.8975), abs=1e-12)
    plain = [cf.benefit_fairness(tiny.make(), tiny.TablePolicy(p), eps=0.1).Lambda
             for p in (PI, PI_BASELINE_AT_LEFT)]
    assert plain == pytest.approx([0.15293605875, 0.14235], abs=1e-5)


LENDING = re.compile(r"\b(loans?|lend\w*|repay\w*|approv\w*|credit|borrow\w*|applicants?)\b", re.I)


def test_triage_report_speaks_of_health_not_lending(tiny, tmp_path):
    """Negative gains (patients who die), a gain named by the system, two actions named
    monitor/admit: the report's sentences use those words and none of lending's."""
    (tmp_path / "tinypol.py").write_text(
        "from tinytri import make_policy\n\ndef make():\n    return make_policy()\n")
    (tmp_path / "tri.toml").write_text(textwrap.dedent("""
        name = "tri"
        [system]
        factory = "tinytri:make"
        [policy]
        factory = "tinypol:make"
        [thresholds]
        abs_C = 0.1
        Lambda = 0.05
    """))
    run_cmd([sys.executable, "-m", "causalfair", "audit", "tri.toml", "--out", "rep"],
            cwd=tmp_path, expect=0, timeout=240)
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "health index change" in text and "index points" in text and "admit" in text
    hits = sorted({m.group(0) for m in LENDING.finditer(text)})
    assert not hits, hits


def test_pairs_table_says_why_a_ratio_is_missing(tiny, tmp_path):
    """Three groups whose health falls for one (V^pi < 0): ratio_V is n/a for its pairs,
    and report.md and card.md say why instead of leaving a bare n/a."""
    (tmp_path / "tri3.py").write_text(textwrap.dedent("""
        import numpy as np
        import causalfair as cf
        from tinytri import KERNEL, HEALTH

        def make():
            k = np.concatenate([KERNEL, KERNEL[:1]])
            init = np.array([[0.3, 0.7, 0.0], [0.7, 0.3, 0.0], [0.5, 0.5, 0.0]])
            tab = cf.TabularModel(kernel=k, initial=init, potential=HEALTH,
                                  reward=np.einsum("saxy,y->sax", k, HEALTH) - HEALTH,
                                  group_names=("private", "public", "uninsured"), name="tri3")
            return cf.System(id="tri3", groups=("private", "public", "uninsured"),
                             decisions=cf.DecisionSet(labels=("monitor", "admit"), baseline=0),
                             levels=("sick", "well", "left"), horizon=2, tabular=tab,
                             gain=cf.Gain("health index change", "index points"))
    """))
    (tmp_path / "tri3.toml").write_text(textwrap.dedent("""
        name = "tri3"
        [system]
        factory = "tri3:make"
        [policy]
        builtin = "random:0.5"
        [thresholds]
        abs_C = 0.1
    """))
    run_cmd([sys.executable, "-m", "causalfair", "audit", "tri3.toml", "--out", "rep"],
            cwd=tmp_path, expect=0, timeout=240)
    md = (tmp_path / "rep" / "report.md").read_text().replace("\\", "")  # markdown escapes
    card = (tmp_path / "rep" / "card.md").read_text()
    rows = [line for line in md.splitlines() if re.match(r"\| \w+-private \|", line)]
    assert rows and all("n/a" in row for row in rows), rows
    assert "ratios min/max of the two groups, n/a where a value is <= 0" in md
    assert "n/a where a value is <= 0" in card

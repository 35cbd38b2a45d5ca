"""Pairs of groups and policy readings: a log audit's bounds compare the pair its point
estimate would (and name it); every verdict on a quantity of the audited pair names that
pair when there are more than two groups; one reading of a policy with both ``prob_d1``
and ``action_probs`` (``action_probs`` wins) in every engine; the benefit result of
another pair carries no DPE of the original pair (docs/logs.md section 4;
docs/audit.md, "More than two groups"; causalfair.policies.grid.d1_probs)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.gate import run_gate
from causalfair.engines.benefit import benefit_fairness
from causalfair.engines.groups import benefit_for_pair
from causalfair.engines.notions import other_notions
from causalfair.logs import audit_logs, simulate_logs
from causalfair.logs.fit import positivity_bounds
from causalfair.model import TabularModel
from causalfair.policies.core import TablePolicy
from causalfair.thresholds import Verdict, pair_note
from tests.conftest import schema_errors
from tests.tri_system import tri_source


def _tri() -> TabularModel:
    """Three groups A, B, C (docs/logs.md's example)."""
    k = np.zeros((3, 2, 2, 2))
    k[:, 0, 0] = [[0.8, 0.2], [0.9, 0.1], [0.95, 0.05]]
    k[:, 0, 1] = [[0.4, 0.6], [0.5, 0.5], [0.7, 0.3]]
    k[:, 1, 0], k[:, 1, 1] = [0.2, 0.8], [0.1, 0.9]
    reward = np.zeros((3, 2, 2))
    reward[:, 1, 0] = 1.0
    return TabularModel(kernel=k, initial=[[0.5, 0.5], [0.7, 0.3], [0.9, 0.1]],
                        potential=np.array([0.0, 1.0]), reward=reward,
                        group_names=["A", "B", "C"])


# ------------------------------------------------------------------ 1. log bounds' pair
def test_log_bounds_compare_the_pair_of_the_estimate_and_name_it():
    # group A's policy is deterministic: positivity fails at A's cells
    df = simulate_logs(_tri(), TablePolicy([[0.0, 1.0], [0.3, 0.6], [0.7, 0.4]]), 600, 3, seed=3)
    a = audit_logs(df, n_boot=0, on_positivity="bounds")
    assert not a.identified
    # the pair the point estimate on the fitted model compares: the extreme V^pi, not (0, 1)
    assert a.pair == cf.decompose(a.model, a.policy_table, 3).pair == (2, 0)
    assert a.pair_name == "C-A"
    b = a.bounds
    assert b.attrs["pair"] == (2, 0)
    # C's bounds are V[C]'s minus V[A]'s (groups have separate rows)
    assert b.loc["C", "lower"] == pytest.approx(b.loc["V[C]", "lower"] - b.loc["V[A]", "upper"])
    assert b.loc["C", "upper"] == pytest.approx(b.loc["V[C]", "upper"] - b.loc["V[A]", "lower"])
    assert "Lambda of pair C-A: C minus A" in a.summary()
    doc = a.to_dict()
    assert doc["pair"] == ["C", "A"] and doc["bounds"]["C"]["lower"] == b.loc["C", "lower"]
    named = audit_logs(df, n_boot=0, on_positivity="bounds", pair="B-A")
    assert named.pair == (1, 0) and named.to_dict()["pair"] == ["B", "A"]
    # the function itself: no pair given, the same pair
    direct = positivity_bounds(a.model, a.policy_table, _unknown(df), 3)
    assert direct.attrs["pair"] == (2, 0) and direct.equals(b)


def _unknown(df):
    from causalfair.logs.fit import log_stats
    from causalfair.logs.schema import validate_logs

    st = log_stats(validate_logs(df))
    return st.unpack(st.total())["trans"].sum(-1) == 0


# --------------------------------------------------------- 2. plain keys carry the pair
SPEC = '''
name = "{name}"
[system]
factory = "tri:make"
[policy]
factory = "tri:mixed"
[thresholds]
abs_C = 0.05
abs_DPE = 1
Lambda = 1
dp_gap = 1
max_abs_C = 1
'''


def test_a_verdict_on_the_audited_pair_names_it_at_every_door(tmp_path):
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    path = tmp_path / "tri.toml"
    path.write_text(SPEC.format(name="tri"), encoding="utf-8")
    res = cf.audit(path)
    assert res.decomposition.pair == (1, 2)  # B-C: the largest and smallest V^pi
    v = {x.key: x for x in res.verdicts}
    assert {k: x.pair for k, x in v.items()} == {
        "abs_C": "B-C", "abs_DPE": "B-C", "Lambda": "B-C", "dp_gap": "B-C",
        "max_abs_C": "B-C"}
    assert v["abs_C"].shown == "abs_C <= 0.05 (pair B-C)"
    assert v["abs_C"].message() == "abs_C = 0.2546 for pair B-C: FAIL (outside threshold 0.05)"
    (tmp_path / "audit.json").write_text(json.dumps(res.to_dict()), encoding="utf-8")
    doc = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    assert [d.get("pair") for d in doc["verdicts"]] == ["B-C"] * 5
    assert schema_errors(tmp_path / "audit.json", "audit") == []
    gate = run_gate([path])
    assert "abs_C <= 0.05 (pair B-C)" in gate.side_by_side()
    assert 'message="abs_C = 0.2546 for pair B-C: FAIL' in gate.to_junit()
    (tmp_path / "gate.json").write_text(json.dumps(gate.to_dict()), encoding="utf-8")
    assert schema_errors(tmp_path / "gate.json", "gate") == []
    assert gate.to_dict()["specs"][0]["verdicts"][0]["pair"] == "B-C"


def test_two_groups_keep_verdicts_without_a_pair_and_other_keys_keep_theirs():
    from causalfair.thresholds import name_pairs

    v = [Verdict("abs_C", 0.1, 0.2, 0.2, 0.2, "FAIL"),
         Verdict("elbert_bias", 0.1, 0.0, 0.0, 0.0, "PASS"),
         Verdict("abs_C vs baseline", 0.1, 0.0, 0.0, 0.0, "PASS"),
         Verdict("utility drop vs baseline", 0.1, 0.0, 0.0, 0.0, "PASS"),
         Verdict("abs_C[A-B]", 0.1, 0.0, 0.0, 0.0, "PASS", "A-B"),
         Verdict("max_abs_C", 0.1, 0.0, 0.0, 0.0, "PASS", "A-C")]
    assert [x.pair for x in name_pairs(v, ("A", "B"), (0, 1))] == [
        None, None, None, None, "A-B", "A-C"]
    three = name_pairs(v, ("A", "B", "C"), (2, 0))
    assert [x.pair for x in three] == ["C-A", None, "C-A", None, "A-B", "A-C"]
    notes = [pair_note(x.to_dict(), " decided by {}", of=" of {}") for x in three]
    assert notes == [" of C-A", "", " of C-A", "", "", " decided by A-C"]


def test_a_log_audit_judges_the_gaps_of_its_own_pair(tmp_path):
    df = simulate_logs(_tri(), TablePolicy([[0.2, 0.9], [0.5, 0.6], [0.7, 0.4]]), 900, 3, seed=1)
    df.to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "s.toml").write_text(
        'name = "log"\n[logs]\npath = "log.csv"\nn_boot = 2\n[thresholds]\ndp_gap = 1\n',
        encoding="utf-8")
    res = cf.audit(tmp_path / "s.toml")
    pair = res.decomposition.pair
    assert pair not in ((0, 1), (1, 0))
    want = other_notions(res.model, res.policy_table, 3, pair=pair)["dp_gap"]
    assert res.notions["dp_gap"] == want != other_notions(res.model, res.policy_table, 3)["dp_gap"]
    g = res.decomposition.groups
    assert res.verdicts[0].pair == f"{g[pair[0]]}-{g[pair[1]]}"


# --------------------------------------------- 3. one reading of a policy with both methods
class Both:
    """prob_d1 and action_probs that disagree: action_probs is read."""

    name = "both"

    def prob_d1(self, obs):
        return np.full(len(obs), 0.1)

    def action_probs(self, obs):
        p = np.where(np.asarray(obs.level) == 1, 0.9, 0.3)
        return np.stack([1.0 - p, p], axis=1)


class BothOnTheGrid(Both):
    reads_only_level_group = True  # the Monte Carlo engine tabulates it


@pytest.mark.parametrize("cls", [Both, BothOnTheGrid])
def test_a_policy_with_both_methods_is_read_through_action_probs_by_every_engine(cls):
    m = _tri()
    want = cf.decompose(m, TablePolicy(np.tile([[0.3, 0.9]], (3, 1))), 4)
    exact = cf.decompose(m, cls(), 4, engine="exact")
    assert exact.C == want.C and exact.pair == want.pair
    mc = cf.decompose(m, cls(), 4, engine="mc", n=4000, seed=1)
    assert mc.pair == exact.pair
    assert abs(mc.C - exact.C) < 4 * mc.se["C"], (mc.C, exact.C, mc.se["C"])


def test_simulated_logs_read_the_policy_as_the_engines_do():
    df = simulate_logs(_tri(), Both(), 3000, 1, seed=0)
    rate = df.groupby("level")["decision"].mean()
    assert rate.loc[1] == pytest.approx(0.9, abs=0.03) and rate.loc[0] == pytest.approx(0.3, abs=0.03)


# ------------------------------------------------- 4. the benefit result of another pair
def test_the_benefit_of_another_pair_carries_no_dpe_of_the_original_pair():
    m = _tri()
    pol = TablePolicy([[0.2, 0.9], [0.5, 0.6], [0.7, 0.4]])
    b01 = benefit_fairness(m, pol, 4, pair=(0, 1))
    other = benefit_for_pair(b01, "C-A")
    ref = benefit_fairness(m, pol, 4, pair=(2, 0))
    assert other.pair == (2, 0) and other.Lambda == pytest.approx(ref.Lambda, abs=1e-15)
    assert math.isnan(other.dpe_prop1) and not math.isnan(b01.dpe_prop1)
    assert benefit_for_pair(b01, "A-B") is b01

"""More than two groups (causalfair.engines.groups): per pair, worst pair, ratios,
thresholds over groups, intersections - on a three-group model small enough to check by
hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.groups import compare, resolve_pair, split_pair
from causalfair.errors import InputError, SystemError_
from causalfair.model import TabularModel
from causalfair.systems import System
from causalfair.thresholds import FAIL, INCONCLUSIVE, PASS, group_verdicts, judge_min

# Group s starts at level 0 ("low") with probability M[s]; d0 moves it up with
# probability R[s], d1 with Q[s]; "high" stays. Gain potential f = (0, 1). The policy
# gives d1 at "low" with probability P[s, 0].
M = np.array([0.5, 0.8, 1.0])
Q = np.array([0.6, 0.5, 0.4])
R = np.array([0.2, 0.1, 0.0])
P = np.array([[1.0, 0.0], [0.5, 0.0], [0.25, 0.0]])
GROUPS = ("A", "B", "C")


def tri_model(idx=(0, 1, 2), names=GROUPS, weights=None) -> TabularModel:
    idx = list(idx)
    k = np.zeros((len(idx), 2, 2, 2))
    for j, s in enumerate(idx):
        k[j, 0, 0] = [1 - R[s], R[s]]
        k[j, 1, 0] = [1 - Q[s], Q[s]]
        k[j, :, 1] = [0.0, 1.0]
    reward = np.zeros((len(idx), 2, 2))
    reward[:, 1, 0] = 1.0
    return TabularModel(kernel=k, initial=np.stack([M[idx], 1 - M[idx]], 1),
                        potential=np.array([0.0, 1.0]), reward=reward,
                        group_weights=weights, group_names=list(names), name="tri")


def test_hand_checked_numbers_one_step():
    # T = 1: V^pi_s = M (P Q + (1 - P) R), V^PS_s = V^pi0_s = M R.
    g = cf.compare_groups(tri_model(), P, 1, reference="B")
    V = M * (P[:, 0] * Q + (1 - P[:, 0]) * R)  # 0.3, 0.24, 0.1
    assert list(g.pairs) == ["A-B", "C-B", "A-C"]  # against the reference, then the others
    ab = g.pairs["A-B"]
    assert ab["C"][0] == pytest.approx(V[0] - V[1]) == pytest.approx(0.06)
    assert ab["SPE"][0] == pytest.approx(M[0] * R[0] - M[1] * R[1]) == pytest.approx(0.02)
    assert ab["DPE"][0] == pytest.approx(0.04)
    assert ab["IPE"][0] == pytest.approx(0.0)
    assert ab["ratio_V"][0] == pytest.approx(0.24 / 0.3)  # min / max: the four-fifths ratio
    assert g.pairs["C-B"]["ratio_V"][0] == pytest.approx(0.1 / 0.24)
    assert g.worst == "A-C" and g.pairs["A-C"]["C"][0] == pytest.approx(0.2)
    assert g.quantity("B-A", "C")[0] == pytest.approx(-0.06)  # the other order flips C
    assert g.quantity("B-A", "ratio_V")[0] == pytest.approx(0.8)  # and keeps a ratio
    assert all(q[3] is None and q[1] == q[2] for q in g.over_pairs("C"))  # exact: points


def test_each_pair_is_the_two_group_engine_on_the_pair_alone():
    T = 3
    g = cf.compare_groups(tri_model(), P, T)
    for name in g.pairs:
        a, b = split_pair(name, GROUPS)
        two = cf.decompose(tri_model((a, b), (GROUPS[a], GROUPS[b])), P[[a, b]], T)
        for key in ("C", "DPE", "IPE", "SPE", "Lambda"):
            assert g.pairs[name][key][0] == pytest.approx(getattr(two, key), abs=1e-12), (name, key)


def test_monte_carlo_agrees_with_exact_within_4_se():
    system = System(id="tri", groups=GROUPS, tabular=tri_model(), horizon=2, levels=("low", "high"))
    exact = cf.compare_groups(system, P, engine="exact")
    mc = cf.compare_groups(system, P, engine="mc", n=20_000, seed=3)
    assert mc.engine == "mc" and mc.worst == exact.worst
    for name in exact.pairs:
        for key in ("C", "DPE", "IPE", "SPE", "ratio_V"):
            e, (m, lo, hi, se) = exact.pairs[name][key][0], mc.pairs[name][key]
            assert se > 0 and lo < m < hi, (name, key)
            assert abs(m - e) <= 4 * se, (name, key, m, e, se)
    # the pair's interval is that of two independent groups: se^2 = se_a^2 + se_b^2
    d = mc.pairs["B-A"]["C"][3]
    sa, sb = mc.per_group["A"]["V"][3], mc.per_group["B"]["V"][3]
    assert d == pytest.approx(np.hypot(sa, sb))


def test_coupled_groups_get_the_conservative_interval():
    dec = cf.decompose(tri_model(), P, 1)
    se = {f"{k}[{g}]": 0.01 for g in GROUPS for k in ("V", "V_ps", "V_0", "direct", "indirect")}
    dec = replace(dec, se=se)
    assert compare(dec, coupled=True).pairs["B-A"]["C"][3] == pytest.approx(0.02)
    assert compare(dec).pairs["B-A"]["C"][3] == pytest.approx(np.sqrt(2) * 0.01)


def test_bad_reference_and_pair_are_refused_naming_the_groups():
    g = cf.compare_groups(tri_model(), P, 1)
    with pytest.raises(InputError, match=r"reference: bad value 'D'.*A, B, C"):
        cf.compare_groups(tri_model(), P, 1, reference="D")
    with pytest.raises(InputError,  # the one refusal of a pair (resolve_pair), naming the key
                       match=r"abs_C\[A-D\]: 'A-D' names no two groups; name two of the groups A, B, C"):
        group_verdicts({"abs_C[A-D]": 0.1}, g)


def test_group_thresholds_judge_a_pair_every_pair_and_ratios():
    g = cf.compare_groups(tri_model(), P, 1)  # |C|: B-A 0.06, C-A 0.2, B-C 0.14
    v = {x.key: x for x in group_verdicts(
        {"abs_C[A-B]": 0.1, "C[A-B]": 0.05, "max_abs_C": 0.15, "C": 9,
         "min_ratio_V": 0.3, "min_ratio_V[A-B]": 0.9}, g)}
    assert "C" not in v  # not a threshold over groups: judged by the audit's pair
    assert v["abs_C[A-B]"].status == PASS and v["abs_C[A-B]"].estimate == pytest.approx(0.06)
    assert v["C[A-B]"].status == FAIL  # A minus B = +0.06 > 0.05, whichever order is stored
    assert v["max_abs_C"].status == FAIL and v["max_abs_C"].estimate == pytest.approx(0.2)
    assert v["min_ratio_V"].status == PASS and v["min_ratio_V"].estimate == pytest.approx(1 / 3)
    assert v["min_ratio_V[A-B]"].status == FAIL and v["min_ratio_V[A-B]"].label == \
        "min_ratio_V[A-B] >= 0.9"
    # "ratio >= t" on an interval: PASS above, FAIL below, INCONCLUSIVE across
    assert (judge_min(0.85, 0.9, 0.8), judge_min(0.5, 0.7, 0.8),
            judge_min(0.7, 0.9, 0.8)) == (PASS, FAIL, INCONCLUSIVE)


def test_group_threshold_without_the_quantity_is_refused():
    g = cf.compare_groups(tri_model(), P, 1)  # no selection rates outside an audit
    with pytest.raises(InputError, match="ratio_selection is not available"):
        group_verdicts({"min_ratio_selection": 0.8}, g)


def test_intersections_pool_the_groups_of_each_attribute_value():
    names = ("A-F", "A-M", "B-F", "B-M")  # race x sex, in product order
    w = np.array([0.1, 0.2, 0.3, 0.4])
    model = tri_model((0, 1, 2, 0), names, weights=w)
    system = System(id="x", groups=names, tabular=model, horizon=2, levels=("low", "high"),
                    group_attributes={"race": ("A", "B"), "sex": ("F", "M")})
    g = cf.compare_groups(system, np.vstack([P, P[:1]]), engine="exact")
    dec = cf.decompose(system, np.vstack([P, P[:1]]), engine="exact")
    race = g.attributes["race"]
    va = (w[:2] @ dec.V[:2]) / w[:2].sum()
    vb = (w[2:] @ dec.V[2:]) / w[2:].sum()
    assert race["per_value"]["A"]["V"][0] == pytest.approx(va)
    assert race["pairs"]["B-A"]["C"][0] == pytest.approx(vb - va)
    sex = g.attributes["sex"]
    vm = (w[[1, 3]] @ dec.V[[1, 3]]) / w[[1, 3]].sum()
    assert sex["per_value"]["M"]["V"][0] == pytest.approx(vm)
    assert "attributes" in g.to_dict()["groups"]
    assert system.to_dict()["group_attributes"] == {"race": ["A", "B"], "sex": ["F", "M"]}
    assert split_pair("A-F-B-M", names) == (0, 3)  # group names with "-" still split
    with pytest.raises(SystemError_, match="group_attributes"):
        System(id="x", groups=names, tabular=model, group_attributes={"race": ("A", "B")})


def test_attribute_values_whose_pairs_read_alike_are_refused():
    # h6hunt1 F2: "a-b" - "c" and "a" - "b-c" are both "a-b-c": a marginal pair row was lost
    vals = ("z", "a-b", "c", "a", "b-c")
    names = tuple(f"{v}/{s}" for v in vals for s in ("F", "M"))
    model = tri_model((0, 1, 2, 0, 1, 2, 0, 1, 2, 0), names)
    with pytest.raises(SystemError_, match=r"group_attributes 'band': 'a-b-c' names two pairs"):
        System(id="x", groups=names, tabular=model, horizon=2, levels=("low", "high"),
               group_attributes={"band": vals, "sex": ("F", "M")})


def test_a_pair_that_reads_two_ways_is_refused_listing_the_readings():
    groups = ("a-b", "c", "a", "b-c")  # never checked: split_pair on its own
    with pytest.raises(InputError, match=r"^--pair: pair 'a-b-c' reads as 2 pairs: 'a' minus "
                       r"'b-c', 'a-b' minus 'c'; name the pair by its two groups"):
        resolve_pair("a-b-c", groups, "--pair")
    assert resolve_pair(["a-b", "c"], groups) == (0, 1)
    assert resolve_pair(["a", "b-c"], groups) == (2, 3)
    assert split_pair("a-b-a", groups) == (0, 2)  # one reading: as before

"""The doors tests/test_pairs_honest.py left with marginal intervals for a pair chosen from
the data (docs/decomposition.md, "More than two groups"): compare_mc's paired differences,
the audit's comparison with a baseline, the report's interval labels (one function,
causalfair._simultaneous.ci_label, and its mark) and where decompose --logs --json says
it. A named pair and two groups read as before."""

from __future__ import annotations

import json

import numpy as np
import pytest

import causalfair as cf
from causalfair._io import DECOMPOSE_SCHEMA_VERSION, versioned
from causalfair._simultaneous import WIDENED, pair_z, simultaneous_dict, simultaneous_sentence
from causalfair._validation import z_quantile
from causalfair.engines.groups import compare
from causalfair.engines.montecarlo import compare_mc
from causalfair.errors import InputError
from causalfair.policies.core import TablePolicy
from tests.conftest import schema_errors
from tests.test_pairs_honest import _mc, _same_groups
from tests.tri_system import tri_source

EFFECTS = ("C", "DPE", "IPE", "SPE")


def _cmp(G: int = 3, **kw):
    m, pol = _same_groups(G)
    base = TablePolicy(np.tile([0.3, 0.7], (G, 1)))
    return compare_mc(m, pol, base, 3, n=200, seed=1, jobs=1, **kw)


# ------------------------------------------------------------------ 1. compare_mc
def test_compare_mc_default_pair_of_three_groups_is_simultaneous():
    """No pair, three groups: the pair is the largest and smallest V^pi of this run, so the
    paired differences' intervals of C, DPE, IPE, SPE (and their abs_) are z_{1-0.05/6} x se;
    utility (population-weighted, no pair's) keeps z_{0.975}. to_dict and str say it with
    the functions every other door uses."""
    r = _cmp()
    assert r.simultaneous == 3 and r.alpha == 0.05
    zm, z1 = pair_z(0.05, 3), z_quantile(0.05)
    for k in EFFECTS:
        d = r[k]
        assert (d["lower"], d["upper"]) == pytest.approx(
            (d["diff"] - zm * d["se"], d["diff"] + zm * d["se"]), abs=1e-15)
        assert (d["abs_lower"], d["abs_upper"]) == pytest.approx(
            (d["abs_diff"] - zm * d["abs_se"], d["abs_diff"] + zm * d["abs_se"]), abs=1e-15)
    u = r["utility"]
    assert (u["lower"], u["upper"]) == pytest.approx((u["diff"] - z1 * u["se"],
                                                      u["diff"] + z1 * u["se"]), abs=1e-15)
    out = json.loads(json.dumps(r.to_dict()))
    assert out["simultaneous"] == simultaneous_dict(3, 0.05)
    assert out["pair"] == list(r.pair) and set(out["quantities"]) == {*EFFECTS, "utility"}
    sentence = simultaneous_sentence(f"{r.pair[0]}-{r.pair[1]}", 3, 0.05)
    assert str(r).count(sentence) == 1
    # the same pair named: the same numbers, marginal intervals, nothing said
    names = [f"g{i}" for i in range(3)]
    named = _cmp(pair=(names.index(r.pair[0]), names.index(r.pair[1])))
    assert named.simultaneous == 1 and "simultaneous" not in named.to_dict()
    assert "simultaneous" not in str(named)
    for k in EFFECTS:
        assert {x: named[k][x] for x in ("diff", "se", "abs_diff", "abs_se")} == \
            {x: r[k][x] for x in ("diff", "se", "abs_diff", "abs_se")}
        assert named[k]["upper"] - named[k]["diff"] == pytest.approx(z1 * named[k]["se"],
                                                                     abs=1e-15)


def test_compare_mc_two_groups_and_the_old_keys_are_as_before():
    """Two groups: nothing chosen (m = 1); the dict keeps its keys and numbers (indexing,
    iteration and json read it as before), with the intervals added."""
    r = _cmp(G=2)
    assert r.simultaneous == 1 and isinstance(r, dict)
    assert set(r) == {*EFFECTS, "utility"}
    assert {"policy", "baseline", "diff", "se", "abs_diff", "abs_se"} <= set(r["C"])
    assert json.loads(json.dumps(r)) == {k: dict(v) for k, v in r.items()}
    with pytest.raises(InputError, match="alpha"):
        _cmp(alpha=1.5)


# ------------------------------------------------------------------ 2. the audit's baseline
SPEC = '''
name = "tri"
[system]
factory = "tri:make"
[policy]
factory = "tri:policy"
[engine]
kind = "mc"
n = 300
seed = 2
{pair}
[baseline]
builtin = "never"
[baseline.thresholds]
C = 5.0
abs_DPE = 5.0
utility = 5.0
'''


def _tri_audit(tmp_path, pair: str = ""):
    (tmp_path / "tri.py").write_text(tri_source(2), encoding="utf-8")
    path = tmp_path / "tri.toml"
    path.write_text(SPEC.format(pair=pair), encoding="utf-8")
    return cf.audit(path)


def test_audit_baseline_of_a_data_chosen_pair_is_simultaneous(tmp_path):
    """The decomposition chose its pair from the data (m = 3): the paired differences of C
    and abs_DPE from the baseline are judged on z_{1-0.05/6} x se, utility on z_{0.975};
    audit.json's extra.baseline says it. The numbers are compare_mc's with that pair named
    (the same paired run)."""
    res = _tri_audit(tmp_path)
    dec = res.decomposition
    assert dec.simultaneous == 3
    system = res.system
    p = compare_mc(system, res.policy, cf.parse_policy("never", system), dec.horizon, n=300, seed=2, pair=dec.pair, jobs=1)
    v = {x.key: x for x in res.verdicts}
    zm, z1 = pair_z(0.05, 3), z_quantile(0.05)
    c = v["C vs baseline"]
    assert c.estimate == pytest.approx(p["C"]["diff"], abs=1e-12)
    assert (c.lower, c.upper) == pytest.approx((p["C"]["diff"] - zm * p["C"]["se"],
                                                p["C"]["diff"] + zm * p["C"]["se"]), abs=1e-12)
    d = v["abs_DPE vs baseline"]
    assert d.upper - d.estimate == pytest.approx(zm * p["DPE"]["abs_se"], abs=1e-12)
    u = v["utility drop vs baseline"]
    assert u.upper - u.estimate == pytest.approx(z1 * p["utility"]["se"], abs=1e-12)
    assert res.extra["baseline"]["simultaneous"] == simultaneous_dict(3, 0.05)
    assert json.loads(json.dumps(res.to_dict()))["extra"]["baseline"]["simultaneous"][
        "pairs"] == 3


def test_audit_baseline_of_a_named_pair_is_marginal(tmp_path):
    res = _tri_audit(tmp_path, 'pair = ["A", "C"]')
    assert res.decomposition.simultaneous == 1
    c = next(x for x in res.verdicts if x.key == "C vs baseline")
    p = compare_mc(res.system, res.policy, cf.parse_policy("never", res.system), res.decomposition.horizon, n=300, seed=2,
                   pair=(0, 2), jobs=1)
    assert c.upper - c.estimate == pytest.approx(z_quantile(0.05) * p["C"]["se"], abs=1e-12)
    assert "simultaneous" not in res.extra["baseline"]


# ------------------------------------------------------------------ 3. the labels
def test_ci_label_is_the_old_label_for_one_pair_and_marks_many():
    """m = 1 (a named pair, two groups): exactly the labels the report printed before
    (render's int level and explain's float level alike); m > 1: the mark."""
    from causalfair._simultaneous import MARK, ci_label

    assert ci_label(95) == ci_label(95.0) == "95% CI" and ci_label(90.0, 1) == "90% CI"
    assert ci_label(97.5) == "97.5% CI"
    assert ci_label(95, 3) == "95% CI" + MARK
    with pytest.raises(ValueError, match="m: bad value 0"):
        ci_label(95, 0)


def test_report_labels_of_a_data_chosen_pair_carry_the_mark_and_its_sentence(tmp_path):
    """The verdict and metrics tables' headers, the decomposition figure's legend, the
    sentences and the card: the widened intervals are labelled "95% CI*" and the mark's
    sentence is said; utility and Lambda keep "95% CI"."""
    from causalfair._simultaneous import MARK
    from causalfair.report.card import card_markdown
    from causalfair.report.explain import sentences
    from causalfair.report.figures import _fig_decomposition, _fig_waterfall
    from causalfair.report.render import render_markdown

    res = _tri_audit(tmp_path)
    doc = json.loads(json.dumps(res.to_dict()))
    pair = res.decomposition.pair_name
    note = f"{MARK} {simultaneous_sentence(pair, 3, 0.05)}"
    md = render_markdown(res, doc, {}).replace("\\", "")
    assert "| threshold | estimate | 95% CI* lower | 95% CI* upper | verdict |" in md
    assert "| quantity | estimate | standard error | 95% CI* lower | 95% CI* upper | unit |" in md
    assert f"### Verdicts ({note})" in md
    said = {s.topic: s.text for s in sentences(doc)}
    assert "(95% CI* " in said["gap"] and "(95% CI* " in said["decomposition"]
    assert "(95% CI* " in said["threshold:C vs baseline"]
    assert "95% CI*" not in said["utility"] and "(95% CI " in said["utility"]
    assert "95% CI*" not in said["threshold:utility drop vs baseline"]
    card = card_markdown(doc).replace("\\", "")
    # said where marks stand: after the card's tables and after its "What changed" lines
    assert "95% CI*" in card and card.count(note) == 2
    fig, data = _fig_decomposition(res)
    assert data["simultaneous"] == 3
    legend = fig.legends[0].get_title().get_text()
    assert legend == "error bars: 95% CI; C, DPE, IPE, SPE: 95% CI*"
    assert _fig_waterfall(res)[1]["simultaneous"] == 3


def test_report_labels_of_a_named_pair_are_as_before(tmp_path):
    """A named pair (as two groups: m = 1): no mark, no sentence, the figure data without
    the key: what the report printed before."""
    from causalfair.report.card import card_markdown
    from causalfair.report.explain import sentences
    from causalfair.report.figures import _fig_decomposition, _fig_waterfall
    from causalfair.report.render import render_markdown

    res = _tri_audit(tmp_path, 'pair = ["A", "C"]')
    doc = json.loads(json.dumps(res.to_dict()))
    md = render_markdown(res, doc, {})
    assert "| threshold | estimate | 95% CI lower | 95% CI upper | verdict |" in md
    assert "CI\\*" not in md and "simultaneous over" not in md
    assert not any("CI*" in s.text for s in sentences(doc))
    assert "CI\\*" not in card_markdown(doc)
    fig, data = _fig_decomposition(res)
    assert "simultaneous" not in data and "simultaneous" not in _fig_waterfall(res)[1]
    assert fig.legends[0].get_title().get_text() == "error bars: 95% CI"  # beside: 3 groups


# ------------------------------------------------------------------ 4. where JSON says it
def test_logs_json_says_it_at_the_top_level_as_from_a_system(tmp_path):
    """decompose --logs --json (LogAudit.to_dict): the top-level simultaneous, as from a
    system, and still under ci (additive); the schema accepts both; a named pair: neither."""
    from causalfair.logs import audit_logs, simulate_logs

    m, pol = _same_groups(3)
    df = simulate_logs(m, pol, 600, 3, seed=0)
    a = audit_logs(df, n_boot=40, seed=0, horizon=3, policy=pol)
    d = json.loads(json.dumps(versioned(DECOMPOSE_SCHEMA_VERSION, a.to_dict(0.1))))  # the door
    d["logs"] = "logs.csv"  # as the command adds
    assert d["simultaneous"] == simultaneous_dict(3, 0.1) == d["ci"]["simultaneous"]
    (tmp_path / "d.json").write_text(json.dumps(d), encoding="utf-8")
    assert schema_errors(tmp_path / "d.json", "decompose") == []
    named = audit_logs(df, n_boot=40, seed=0, horizon=3, policy=pol, pair=a.pair_name)
    assert "simultaneous" not in named.to_dict()


# ------------------------------------------------------------------ 5. what is widened
def test_chosen_pair_widens_only_the_quantities_it_says_it_widens():
    """The data-chosen pair's intervals are simultaneous for WIDENED (C, DPE, IPE, SPE,
    ratio_V: what `simultaneous.quantities` and the docs list) and marginal for the rest:
    ratio_selection, like Lambda, is not what chose the pair. Worked by hand: the delta
    method on log(q_a / q_b) with z_{0.975} (docs/decomposition.md, "Intervals")."""
    m, pol = _same_groups(3)
    dec = _mc(m, pol, seed=2)
    assert dec.simultaneous == 3
    share = {"g0": (0.5, 0.02), "g1": (0.4, 0.03), "g2": (0.45, 0.025)}
    sel = {"groups": list(share), "actions": ["d1"],
           "rate_overall": {g: {"d1": q} for g, (q, _) in share.items()},
           "se_selected": {g: s for g, (_, s) in share.items()}}
    g = compare(dec, selection=sel)
    assert g.chosen is not None and "ratio_selection" not in WIDENED
    z1, zm = z_quantile(0.05), pair_z(0.05, 3)
    for name, q in g.pairs.items():
        a, b = name.split("-")
        (qa, sa), (qb, sb) = share[a], share[b]
        r, s_log = min(qa, qb) / max(qa, qb), np.hypot(sa / qa, sb / qb)
        want = (r, r * np.exp(-z1 * s_log), min(1.0, r * np.exp(z1 * s_log)), r * s_log)
        assert q["ratio_selection"] == pytest.approx(want, abs=1e-12), name
        zc = zm if name == g.chosen else z1  # C is widened on the chosen pair only
        assert q["C"][2] - q["C"][0] == pytest.approx(zc * q["C"][3], abs=1e-12)

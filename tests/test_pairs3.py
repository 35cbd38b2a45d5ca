"""The last doors of a pair chosen from the data (docs/decomposition.md, "More than two
groups"): the card's YAML says its intervals are simultaneous, plotting.waterfall's title
uses the one label and sentence, the attribution of an audit's data-chosen pair is
simultaneous over the pairs as the same paired run's [baseline] differences are, and
benchmarks/coverage_study.py's paired study reads compare_mc's own intervals. A named
pair and two groups read as before."""

from __future__ import annotations

import json

import numpy as np
import pytest

from causalfair._simultaneous import MARK, pair_z, simultaneous_sentence
from causalfair._validation import z_quantile
from causalfair.engines.attribution import compare_attribute_mc
from causalfair.policies.core import TablePolicy
from tests.conftest import schema_errors
from tests.test_pairs_honest import _same_groups
from tests.test_pairs_honest2 import _tri_audit


def _yaml(card: str) -> str:
    return card.split("---")[1]


# ------------------------------------------------------------------ 1. the card's YAML
def test_card_yaml_says_simultaneous_for_a_data_chosen_pair(tmp_path):
    """m = 3: the top level has simultaneous (pairs, method, level, family_level, pair) next
    to ci_level; in model-index, C, DPE, IPE and SPE carry it and utility does not."""
    from causalfair.report.card import card_markdown

    res = _tri_audit(tmp_path)
    doc = json.loads(json.dumps(res.to_dict()))
    y = _yaml(card_markdown(doc))
    pair = res.decomposition.pair_name
    line = (f'simultaneous: {{pairs: 3, method: "bonferroni", level: {1 - 0.05 / 3!r}, '
            f'family_level: {1 - 0.05!r}, pair: "{pair}"}}')
    assert "\n" + line + "\n" in y  # top level
    blocks = y.split("    - type: ")[1:]
    by_key = {b.split("\n")[0].strip('"'): b for b in blocks}
    for k in ("C", "DPE", "IPE", "SPE"):
        assert "      " + line in by_key[k], k
    assert "simultaneous" not in by_key["utility"]
    yaml = pytest.importorskip("yaml")
    meta = yaml.safe_load(y)
    assert meta["simultaneous"] == {"pairs": 3, "method": "bonferroni", "level": 1 - 0.05 / 3,
                                    "family_level": 0.95, "pair": pair}


def test_card_yaml_of_a_named_pair_is_as_before(tmp_path):
    """A named pair (m = 1): no simultaneous anywhere in the card, and the card's bytes are
    those of the card without the new lines (the same function with them removed)."""
    from causalfair.report import marks
    from causalfair.report.card import card_markdown

    res = _tri_audit(tmp_path, 'pair = ["A", "C"]')
    doc = json.loads(json.dumps(res.to_dict()))
    card = card_markdown(doc)
    assert "simultaneous" not in _yaml(card)
    assert marks.yaml_simultaneous(doc) == []


# ------------------------------------------------------------------ 2. plotting.waterfall
def test_waterfall_title_uses_the_one_label_and_sentence():
    from causalfair.engines.montecarlo import decompose_mc
    from causalfair.plotting import waterfall

    m, pol = _same_groups(3)
    dec = decompose_mc(m, pol, 3, n=200, seed=1, check=False, jobs=1)
    assert dec.simultaneous == 3
    fig, _ = waterfall(dec)
    title = fig.axes[0].get_title().replace("\n", " ")
    assert "(error bars: 95% CI*)" in title and "Bonferroni)" not in title.split(MARK)[0]
    a, b = dec.pair
    sentence = simultaneous_sentence(f"{dec.groups[a]}-{dec.groups[b]}", 3, 0.05)
    assert f"{MARK} {sentence}" in title
    named = decompose_mc(m, pol, 3, n=200, seed=1, check=False, jobs=1, pair=(a, b))
    t1 = waterfall(named)[0].axes[0].get_title().replace("\n", " ")
    assert "95% confidence intervals)" in t1 and MARK not in t1 and "simultaneous" not in t1


# ------------------------------------------------------------------ 3. the attribution
def test_audit_attribution_of_a_data_chosen_pair_is_simultaneous(tmp_path):
    """The audit's decomposition chose its pair (m = 3): the attribution (same paired run as
    the [baseline] verdicts) has intervals z_{1-0.05/6} x se, says so in to_dict, summary
    and the report's "What changed" lines; its C interval is the C vs baseline verdict's."""
    from causalfair.report.explain import what_changed

    res = _tri_audit(tmp_path)
    att = res.attribution
    assert att.simultaneous == 3
    zm = pair_z(0.05, 3)
    for k in ("C", "DPE", "IPE"):
        e, s = att.total[k]
        assert s > 0
        assert att._interval(e, s) == pytest.approx((e - zm * s, e + zm * s), abs=1e-15)
    v = next(x for x in res.verdicts if x.key == "C vs baseline")
    assert att._interval(*att.total["C"]) == pytest.approx((v.lower, v.upper), abs=1e-12)
    d = json.loads(json.dumps(att.to_dict()))
    assert d["simultaneous"]["pairs"] == 3 and d["simultaneous"]["z"] == pytest.approx(zm)
    assert d["total"]["C"]["interval"] == pytest.approx(list(att._interval(*att.total["C"])))
    sentence = simultaneous_sentence("-".join(d["pair"]), 3, 0.05)
    assert str(att).count(sentence) == 1
    lines = what_changed(d)
    assert lines[-1] == f"{MARK} {sentence}"  # every interval marked, then what the mark means
    assert lines[0].count(f"95% interval{MARK} ") == 3 and "95% interval " not in " ".join(lines)
    from causalfair.report.explain import change_lines

    card = change_lines({"attribution": d})
    assert card[-2] == f"- \\{MARK} {sentence}" and f"interval\\{MARK} " in card[2]
    title = att.plot().axes[0].get_title().replace("\n", " ")
    assert "(error bars: 95% CI*)" in title and f"{MARK} {sentence}" in title
    audit_doc = json.loads(json.dumps(res.to_dict()))
    assert audit_doc["attribution"]["simultaneous"]["pairs"] == 3
    (tmp_path / "audit.json").write_text(json.dumps(audit_doc), encoding="utf-8")
    assert schema_errors(tmp_path / "audit.json", "audit") == []


def test_audit_attribution_of_a_named_pair_is_marginal(tmp_path):
    from causalfair.report.explain import what_changed

    res = _tri_audit(tmp_path, 'pair = ["A", "C"]')
    att = res.attribution
    assert att.simultaneous == 1
    e, s = att.total["C"]
    assert att._interval(e, s) == pytest.approx((e - z_quantile(0.05) * s,
                                                 e + z_quantile(0.05) * s), abs=1e-15)
    d = att.to_dict()
    assert "simultaneous" not in d and "simultaneous" not in str(att)
    assert not any("simultaneous" in x or MARK in x for x in what_changed(d))
    title = att.plot().axes[0].get_title().replace("\n", " ")
    assert "(error bars: 95% intervals)" in title and MARK not in title


def test_attribute_mc_checks_simultaneous():
    m, pol = _same_groups(2)
    base = np.tile([0.3, 0.7], (2, 1))
    with pytest.raises(ValueError, match="m: bad value 0"):
        compare_attribute_mc(m, pol, TablePolicy(base), 3, n=50, seed=0, simultaneous=0)


# ------------------------------------------------------------------ 4. the coverage study
def test_coverage_study_paired_reads_compare_mc_intervals():
    """study_paired's >2-group rows: per seed the default pair's simultaneous interval
    contains its marginal one, so it covers at least as often; named pair rows present."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "coverage_study.py"
    spec = importlib.util.spec_from_file_location("coverage_study_p3", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = {(r["setting"], r["quantity"]): r for r in mod._paired_many(12)}
    for G in (3, 5):
        sim = rows[(f"{G} groups", "C diff, default pair, simultaneous")]["measured"]
        marg = rows[(f"{G} groups", "C diff, default pair, marginal")]["measured"]
        assert sim >= marg and 0.0 < sim <= 1.0
        assert rows[(f"{G} groups", "C diff, named pair")]["seeds"] == 12

"""A three-group system through audit, gate (pair and all-pair thresholds) and report
(docs/decomposition.md, "More than two groups"; docs/audit.md)."""

from __future__ import annotations

import json

import pytest

import causalfair as cf
from causalfair.audit.gate import run_gate
from causalfair.audit.spec import load_spec
from causalfair.errors import InputError, SpecError
from causalfair.thresholds import FAIL, PASS
from tests.conftest import schema_errors
from tests.tri_system import tri_source

TRI = tri_source(1)  # the model of tests/engines/test_groups.py


# T = 1 (hand-checked in tests/engines/test_groups.py): V = (0.3, 0.24, 0.1), so
# C(B-A) = -0.06, C(C-A) = -0.2 (the worst pair), C(B-C) = 0.14; SPE(C-B) = -0.08.
SPEC = '''
name = "tri"
reference = "A"
{engine}
[system]
factory = "tri:make"
[policy]
factory = "tri:policy"
[thresholds]
"abs_C[B-A]" = 0.1
max_abs_C = {max_abs_C}
min_ratio_V = 0.3
[thresholds.abs_SPE]
"C-B" = 0.1
'''


def _spec(tmp_path, engine="", max_abs_C=0.3, name="tri.toml"):
    (tmp_path / "tri.py").write_text(TRI, encoding="utf-8")
    path = tmp_path / name
    path.write_text(SPEC.format(engine=engine, max_abs_C=max_abs_C), encoding="utf-8")
    return path


def test_audit_gate_and_report_of_three_groups(tmp_path):
    res = cf.audit(_spec(tmp_path))
    v = {x.key: x for x in res.verdicts}
    assert list(v) == ["abs_C[B-A]", "max_abs_C", "min_ratio_V", "abs_SPE[C-B]"]
    assert v["abs_C[B-A]"].estimate == pytest.approx(0.06)
    assert v["max_abs_C"].estimate == pytest.approx(0.2)
    assert v["abs_SPE[C-B]"].estimate == pytest.approx(0.08)
    assert res.overall == PASS
    doc = res.to_dict()
    assert doc["groups"]["reference"] == "A"
    assert doc["pairs"]["worst"] == "C-A" and doc["pairs"]["reference_pairs"] == ["B-A", "C-A"]
    assert doc["pairs"]["values"]["B-C"]["C"]["estimate"] == pytest.approx(0.14)
    # selection ratio: share given d1, 1, 0.5 and 0.25 of the low ones = M * P
    assert doc["pairs"]["values"]["B-A"]["ratio_selection"]["estimate"] == pytest.approx(0.8)

    out = res.write_report(tmp_path / "rep")
    assert schema_errors(out / "audit.json", "audit") == []
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Pairs of groups (reference A; worst pair C-A" in md
    assert "abs_C\\[B-A\\] \\<= 0.1" in md and "min_ratio_V \\>= 0.3000: PASS" in md
    # the exports of a three-group audit, from its audit.json: LL144's impact ratios
    # against the group with the highest rate (step 0: shares 0.5, 0.4, 0.25 = M * P)
    import csv

    text = (out / "ll144.csv").read_text(encoding="utf-8")
    rows = [r for r in csv.DictReader(text.splitlines()) if r["step"] == "0"]
    assert [r["group"] for r in rows] == ["A", "B", "C"]
    assert [float(r["selection_rate"]) for r in rows] == pytest.approx([0.5, 0.4, 0.25])
    assert [float(r["impact_ratio"]) for r in rows] == pytest.approx([1.0, 0.8, 0.5])
    assert {r["highest_rate_group"] for r in rows} == {"A"}
    annex = (out / "annex-iv.md").read_text(encoding="utf-8")
    assert "TO BE COMPLETED BY THE DEPLOYER" in annex and "tri" in annex

    gate = run_gate([_spec(tmp_path, max_abs_C=0.15, name="strict.toml")])  # all-pair fails
    assert gate.exit_code == 1
    verdicts = {x.key: x.status for x in gate.entries[0].final.verdicts}
    assert verdicts == {"abs_C[B-A]": PASS, "max_abs_C": FAIL, "min_ratio_V": PASS,
                        "abs_SPE[C-B]": PASS}


def test_monte_carlo_audit_agrees_with_exact_within_4_se(tmp_path):
    exact = cf.audit(_spec(tmp_path)).group_comparison
    mc = cf.audit(_spec(tmp_path, engine="[engine]\nkind = \"mc\"\nn = 20000\nseed = 1",
                        name="mc.toml")).group_comparison
    assert mc.engine == "mc"
    for name, q in exact.pairs.items():
        for key in ("C", "DPE", "SPE"):
            m, se = mc.pairs[name][key][0], mc.pairs[name][key][3]
            assert abs(m - q[key][0]) <= 4 * se, (name, key)


def test_two_groups_keep_their_output_and_bad_group_keys_are_refused(tmp_path):
    spec = tmp_path / "two.toml"
    spec.write_text('name = "two"\n[system]\nid = "lending-1"\n[thresholds]\nabs_C = 1\n',
                    encoding="utf-8")
    doc = cf.audit(spec).to_dict()
    assert "groups" not in doc and "pairs" not in doc  # the two-group form, unchanged
    raw = {"name": "x", "system": {"id": "lending-1"}}
    parsed = load_spec({**raw, "thresholds": {"abs_C": {"s+-s-": 0.1}, "min_ratio_V": 0.8}})
    assert dict(parsed.thresholds) == {"abs_C[s+-s-]": 0.1, "min_ratio_V": 0.8}
    with pytest.raises(SpecError, match=r"max_tpr_gap: unknown key; allowed keys: .*max_abs_C"):
        load_spec({**raw, "thresholds": {"max_tpr_gap": 0.1}})
    with pytest.raises(SpecError, match=r"min_ratio_V.*1.5"):
        load_spec({**raw, "thresholds": {"min_ratio_V": 1.5}})
    with pytest.raises(SpecError, match=r"tri.toml: \[thresholds\] abs_C\[A-D\]: 'A-D' names no "
                                        r"two groups; name two of the groups A, B, C"):
        path = _spec(tmp_path)
        path.write_text(path.read_text().replace('"abs_C[B-A]"', '"abs_C[A-D]"'))
        cf.audit(path)
    with pytest.raises(InputError, match=r"tri.toml: reference: bad value 'D'; name one of the groups A, B, C"):
        path.write_text(path.read_text().replace('reference = "A"', 'reference = "D"'))
        cf.audit(path)
    assert json.loads(json.dumps(load_spec(raw).thresholds)) == {}

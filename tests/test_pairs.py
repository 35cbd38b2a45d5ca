"""Audits and sweeps of systems with more than two groups say which pair of groups each
number is about: the pair deciding a verdict over every pair, the audited pair a spec
chooses (``[engine] pair``), each sweep run's pair (docs/audit.md, "More than two
groups"; docs/scale.md, "Training sweeps")."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import causalfair as cf
from causalfair.audit.gate import run_gate
from causalfair.audit.shards import markdown
from causalfair.audit.spec import load_spec
from causalfair.errors import SpecError
from causalfair.logs.simulate import simulate_logs
from causalfair.policies.core import TablePolicy
from causalfair.report.card import card_markdown
from causalfair.report.explain import sentences
from causalfair.thresholds import FAIL, PASS, abs_interval, deciding_pair
from causalfair.train.sweep import sweep
from tests.conftest import one_line_error, schema_errors
from tests.tri_system import tri_source

# T = 3 under the table `mixed` (exact): V = (A 0.62, B 0.70, C 0.45): C(B-C) = 0.2546 the
# largest |C| and smallest ratio_V; Lambda B-A 0.0937, C-A 0.1525 (the largest), B-C 0.1422.
SPEC = '''
name = "tri"
{engine}
[system]
factory = "tri:make"
[policy]
factory = "tri:mixed"
[thresholds]
max_abs_C = 0.05
max_Lambda = 0.01
min_ratio_V = 0.5
"abs_C[B-A]" = 1
'''


def _spec(tmp_path, engine="", name="tri.toml"):
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    path = tmp_path / name
    path.write_text(SPEC.format(engine=engine), encoding="utf-8")
    return path


def test_a_verdict_over_every_pair_names_its_pair_at_every_door(tmp_path):
    res = cf.audit(_spec(tmp_path))
    gc = res.group_comparison
    v = {x.key: x for x in res.verdicts}
    lam = {p: q["Lambda"][0] for p, q in gc.pairs.items()}
    absc = {p: abs(q["C"][0]) for p, q in gc.pairs.items()}
    ratio = {p: q["ratio_V"][0] for p, q in gc.pairs.items()}
    # the pair attaining each extreme (exact values), not the audited (worst-C) pair
    assert v["max_Lambda"].pair == max(lam, key=lam.get) == "C-A" != gc.worst
    assert v["max_Lambda"].estimate == lam["C-A"] and v["max_Lambda"].status == FAIL
    assert v["max_abs_C"].pair == max(absc, key=absc.get) == "B-C"
    assert v["min_ratio_V"].pair == min(ratio, key=ratio.get) == "B-C"
    assert v["min_ratio_V"].status == PASS and v["abs_C[B-A]"].pair == "B-A"
    out = res.write_report(tmp_path / "rep")
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert schema_errors(out / "audit.json", "audit") == []
    assert [d.get("pair") for d in doc["verdicts"]] == ["B-C", "C-A", "B-C", "B-A"]
    # the text of the audit, the report's sentence, tables and card, the annex
    assert "max_Lambda = 0.152479 at pair C-A: FAIL" in res.summary()
    assert res.verdicts_frame().loc["max_Lambda", "pair"] == "C-A"  # the notebook's table
    said = {s.topic: s.text for s in sentences(doc)}
    assert "is 0.1525 (at pair C-A); it is above" in said["threshold:max_Lambda"]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| max_Lambda \\<= 0.01 (pair C-A) | 0.152479 | FAIL |" in md
    # the failing Lambda pair's own worst benefit pairs, beside the audited pair's
    assert "Worst benefit pairs of groups B and C" in md
    assert "Worst benefit pairs of pair C-A, where max_Lambda is FAIL (Lambda = 0.152479" in md
    assert 'pair: "C-A"' in card_markdown(doc)
    assert "max_Lambda \\<= 0.01 (pair C-A)" in (out / "annex-iv.md").read_text(encoding="utf-8")
    # the gate: its table, its JUnit message, gate.json and gate-merge's Markdown
    gate = run_gate([_spec(tmp_path, name="g.toml")])
    assert "max_Lambda <= 0.01 (pair C-A)" in gate.side_by_side()
    assert 'message="max_Lambda = 0.152479 at pair C-A: FAIL' in gate.to_junit()
    gdoc = gate.to_dict()
    (tmp_path / "gate.json").write_text(json.dumps(gdoc), encoding="utf-8")
    assert schema_errors(tmp_path / "gate.json", "gate") == []
    assert "| tri | max_Lambda <= 0.01 (pair C-A) | 0.1525 | exact | **FAIL** |" in markdown(gdoc)


def test_the_deciding_pair_is_the_worst_own_verdict_then_the_extreme():
    # A has the largest estimate but only straddles; B's whole interval lies above: B fails
    qs = {"A-C": (0.2, 0.05, 0.35, None), "B-C": (0.15, 0.14, 0.16, None),
          "A-B": (0.01, 0.0, 0.02, None)}
    assert deciding_pair("max_abs_C", qs, 0.1) == "B-C"
    assert deciding_pair("max_abs_C", qs, 0.5) == "A-C"  # all pass: the largest
    assert deciding_pair("max_abs_C", qs, 0.15) == "A-C"  # B-C and A-C inconclusive
    ratios = {"A-C": (0.7, 0.5, 0.9, None), "B-C": (0.75, 0.72, 0.78, None)}
    assert deciding_pair("min_ratio_V", ratios, 0.8) == "B-C"  # B-C fails, A-C straddles
    assert deciding_pair("min_ratio_V", ratios, 0.4) == "A-C"  # all pass: the smallest


def test_a_monte_carlo_verdict_names_the_deciding_pair(tmp_path):
    res = cf.audit(_spec(tmp_path, engine='[engine]\nkind = "mc"\nn = 2000\nseed = 0',
                         name="mc.toml"))
    v = {x.key: x for x in res.verdicts}["max_abs_C"]
    by = {p: (abs(q[0]), *abs_interval(q[1], q[2]))
          for p, q in res.group_comparison.by_pair("C").items()}
    assert v.status == FAIL and v.lower < v.upper  # an interval, not a point
    failing = {p: q for p, q in by.items() if q[1] > 0.05}
    assert v.pair == max(failing, key=lambda p: failing[p][0]) == "B-C"
    said = {s.topic: s.text for s in sentences(res.to_dict())}
    assert "; pair B-C decides the verdict;" in said["threshold:max_abs_C"]


@pytest.mark.parametrize("engine", ["", 'kind = "mc"\nn = 2000\n'])
def test_the_spec_chooses_the_audited_pair(tmp_path, engine):
    res = cf.audit(_spec(tmp_path, engine=f'[engine]\n{engine}pair = ["A", "C"]'))
    dec = res.decomposition
    assert dec.pair == (0, 2) and res.benefit.pair == (0, 2)
    assert dec.C == pytest.approx(dec.V[0] - dec.V[2])
    text = _spec(tmp_path, name="s.toml").read_text().replace("[system]",
                                                                '[engine]\npair = "C-A"\n[system]')
    (tmp_path / "s.toml").write_text(text, encoding="utf-8")
    assert cf.audit(tmp_path / "s.toml").decomposition.pair == (2, 0)


def test_a_pair_that_is_not_two_groups_is_refused_naming_the_groups(tmp_path):
    path = _spec(tmp_path, engine='[engine]\npair = ["A", "D"]')
    with pytest.raises(SpecError, match=r"tri.toml: \[engine\] pair: 'D' is not one of the "
                                        r"groups; name two of the groups A, B, C"):
        cf.audit(path)
    path.write_text(path.read_text().replace('["A", "D"]', '"A-D"'), encoding="utf-8")
    with pytest.raises(SpecError, match=r"\[engine\] pair: 'A-D' names no two groups; .*A, B, C"):
        cf.audit(path)
    raw = {"name": "x", "system": {"id": "lending-1"}}
    for bad in (["s+"], ["s+", "s+"], 3, "s+"):
        with pytest.raises(SpecError, match=r"\[engine\] pair: bad value .*two different group"):
            load_spec({**raw, "engine": {"pair": bad}})
    assert load_spec({**raw, "engine": {"pair": ["s-", "s+"]}}).pair == ("s-", "s+")
    assert cf.audit(load_spec({**raw, "engine": {"pair": ["s-", "s+"]}})).decomposition.pair == (1, 0)


def test_a_log_audit_takes_the_pair(tmp_path):
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    tri = cf.systems.make("tri:make", search_path=tmp_path)
    pol = TablePolicy(np.array([[0.8, 0.3], [0.5, 0.2], [0.25, 0.4]]))
    simulate_logs(tri, pol, 2000, 3, seed=0).to_csv(tmp_path / "log.csv", index=False)
    spec = tmp_path / "l.toml"
    spec.write_text('name = "l"\n[logs]\npath = "log.csv"\nn_boot = 2\n[engine]\n'
                    'pair = "C-A"\n', encoding="utf-8")
    res = cf.audit(spec)
    assert res.decomposition.pair == (2, 0) and res.benefit.pair == (2, 0)
    spec.write_text(spec.read_text().replace('"C-A"', '["A", "Z"]'), encoding="utf-8")
    with pytest.raises(SpecError, match=r"l.toml: \[engine\] pair: 'Z' is not one of the "
                                        r"groups; name two of the groups A, B, C"):
        cf.audit(spec)


def test_the_spec_schema_takes_the_pair(tmp_path):
    for pair in (["B", "A"], "B-A"):
        (tmp_path / "s.json").write_text(json.dumps(
            {"name": "x", "system": {"id": "lending-1"}, "engine": {"pair": pair}}))
        assert schema_errors(tmp_path / "s.json", "spec") == []
    (tmp_path / "s.json").write_text(json.dumps(
        {"name": "x", "system": {"id": "lending-1"}, "engine": {"pair": ["B"]}}))
    assert schema_errors(tmp_path / "s.json", "spec") != []


def test_a_sweep_names_each_runs_pair_and_the_rows_that_mix_pairs(tmp_path):
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    res = sweep(["ppo"], [0, 1], ["tri:make"], overrides={"iterations": 1},
                out=tmp_path / "sw", search_path=tmp_path)
    runs = pd.read_csv(tmp_path / "sw" / "runs.csv")
    # seeds 0 and 1 compare different pairs (two group names: tests/test_sweep_leftovers.py)
    assert list(runs["pair"]) == ['["C", "A"]', '["B", "A"]']
    result = json.loads((tmp_path / "sw" / "runs" / "tri_make" / "ppo" / "seed-1" /
                         "result.json").read_text())
    assert result["pair"] == ["B", "A"]
    table = pd.read_csv(tmp_path / "sw" / "table.csv")
    assert set(table["pairs"]) == {'["C", "A"] (1), ["B", "A"] (1)'}
    assert "pair" not in set(table["metric"])
    md = (tmp_path / "sw" / "table.md").read_text()
    assert "C (mean [95% t-interval])" in md and '| \\["C", "A"\\] (1), \\["B", "A"\\] (1) |' in md
    assert "t-interval of that mean over the seeds" in md
    assert "A row listing several pairs averages runs that compare different pairs" in md
    # a resumed sweep keeps the pairs of the runs it reuses
    again = sweep(["ppo"], [0, 1], ["tri:make"], overrides={"iterations": 1},
                  out=tmp_path / "sw", search_path=tmp_path, existing="resume")
    assert again.reused == 2 and list(again.runs["pair"]) == ['["C", "A"]', '["B", "A"]']
    assert again.table.equals(res.table)


def test_decompose_takes_the_pair_through_the_same_check(tmp_path, cli_here):
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    log = tmp_path / "log.csv"
    simulate_logs(cf.systems.make("tri:make", search_path=tmp_path),
                  TablePolicy(np.array([[0.8, 0.3], [0.5, 0.2], [0.25, 0.4]])), 2000, 3,
                  seed=0).to_csv(log, index=False)
    base = ["decompose", "--system", "tri:make", "--policy", "tri:mixed", "--json"]
    doc = json.loads(cli_here(*base, "--pair", "A-C", cwd=tmp_path).stdout)
    assert doc["pair"] == ["A", "C"] and doc["C"] == pytest.approx(0.173704)
    assert "level[C]" in doc["benefit"]["worst_pairs"][0]  # Lambda of the same pair
    for args in (base + ["--pair", "A-Z"], ["decompose", "--logs", log, "--pair", "Z-A"]):
        proc = cli_here(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert one_line_error(proc) == (
            f"causalfair decompose: error: --pair: '{args[-1]}' names no two groups; name two "
            "of the groups A, B, C, the first minus the second, e.g. \"C-A\" or [\"C\", \"A\"].")
    doc = json.loads(cli_here("decompose", "--logs", log, "--pair", "C-A", "--boot", "0",
                              "--json", cwd=tmp_path).stdout)
    assert doc["decomposition"]["pair"] == ["C", "A"]


def test_a_verdict_message_says_at_pair_only_when_the_numbers_are_that_pairs():
    """Exact values: the deciding pair attains the extreme, 'at pair'. Intervals: the
    estimate and each bound are extremes over the pairs (not one pair's own), so the
    message says which pair decides, not that the numbers are at it."""
    from causalfair.thresholds import Verdict

    exact = Verdict("max_abs_C", 0.1, 0.15, 0.15, 0.15, "FAIL", "B-C").message()
    mc = Verdict("max_abs_C", 0.1, 0.15, 0.11, 0.3, "FAIL", "B-C").message()
    assert exact.startswith("max_abs_C = 0.15 at pair B-C: FAIL"), exact
    assert "at pair" not in mc and "pair B-C deciding: FAIL" in mc, mc

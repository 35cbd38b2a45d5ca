"""An honest repair (docs/ci-gate.md, "An honest repair"): the gate's table, JSON and JUnit
show utility before and after, and a repair that keeps less utility than its floor or
makes another threshold worse fails the gate with a message naming the number, unless
``[retrain] min_utility`` / ``allow_worse`` accept it.

The repair itself is replaced by a fixed built-in policy (the numbers below are the exact
engine's on lending-1, horizon 20): the checkpoint reports/examples/checkpoints/
lending-1-ppo.pt has utility 4.2815, |C| 0.1715, Lambda 0.1491; ``threshold:0.5`` has
utility 4.0779, |C| 0.1627, Lambda 0.1505 (Lambda worse); ``always`` has utility -1.1415
(below the floor max(u(pi0) = 0, u(uniform) = -0.2179) = 0), |C| 0.1554, Lambda 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import causalfair.audit.gate as gate_mod
from causalfair.audit import audit, load_spec, run_gate
from causalfair.audit.retrain import repair_check
from causalfair.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
CKPT = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"


def _spec(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "repair.toml"
    p.write_text(f"""name = "repair"
horizon = 20
[model]
setting = "lending-1"
[policy]
checkpoint = "{CKPT.as_posix()}"
[engine]
kind = "exact"
[thresholds]
abs_C = 0.165
Lambda = 0.151
[retrain]
algo = "exact"
{extra}
""", encoding="utf-8")
    return p


def _fake_repair(builtin: str):
    """run_retrain replaced by a fixed policy, judged as the real re-audit judges it."""
    def run_retrain(spec, before, *_, **__):
        after = audit(spec.with_policy(builtin=builtin))
        after.extra["repair_check"] = repair_check(spec, before, after)
        return CKPT, after
    return run_retrain


def test_repair_that_worsens_another_threshold_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(gate_mod, "run_retrain", _fake_repair("threshold:0.5"))
    res = run_gate([_spec(tmp_path)], retrain=True, accept_repaired=True)
    e = res.entries[0]
    # the thresholds alone would pass after the repair (abs_C FAIL -> PASS, Lambda PASS)
    assert e.before.overall == "FAIL" and e.after.overall == "PASS"
    assert res.exit_code == 1 and e.overall == "FAIL"
    assert e.repair_problems == [
        'Lambda worse after repair: 0.149108 -> 0.150485 (threshold 0.151); add "Lambda" to '
        "[retrain] allow_worse to accept it"], e.repair_problems
    table = res.side_by_side()
    row = next(r for r in table.splitlines() if r.strip().startswith("utility"))
    assert row.split() == ["utility", "4.281466", "->", "4.077888", "(floor", "0.000000)"], table
    assert "REPAIR NOT ACCEPTED: Lambda worse after repair: 0.149108 -> 0.150485" in table
    doc = json.loads(json.dumps(res.to_dict()))["specs"][0]
    assert doc["overall"] == "FAIL"
    assert doc["before"]["utility"] == pytest.approx(4.28146647654007)
    assert doc["after"]["utility"] == pytest.approx(4.077888399145766)
    assert doc["repair_check"]["worse"] == ["Lambda"]
    xml = res.to_junit()
    assert 'name="repair keeps utility and no threshold worse"' in xml
    assert 'message="Lambda worse after repair: 0.149108 -&gt; 0.150485' in xml


def test_allow_worse_accepts_it(tmp_path, monkeypatch):
    monkeypatch.setattr(gate_mod, "run_retrain", _fake_repair("threshold:0.5"))
    res = run_gate([_spec(tmp_path, 'allow_worse = ["Lambda"]')], retrain=True,
                   accept_repaired=True)
    assert res.entries[0].repair_problems == [] and res.exit_code == 0


def test_repair_below_the_utility_floor_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(gate_mod, "run_retrain", _fake_repair("always"))
    res = run_gate([_spec(tmp_path)], retrain=True, accept_repaired=True)
    e = res.entries[0]
    assert e.after.overall == "PASS" and res.exit_code == 1
    check = e.repair_check
    assert check["baseline_utility"] == 0.0
    assert check["uniform_utility"] == pytest.approx(-0.217890976004268)
    assert check["min_utility"] == 0.0
    assert e.repair_problems == [
        "utility -1.14153 after repair is below min_utility 0 (the baseline policy's utility "
        "(the better of the baseline policy pi0 and the uniform policy); before: 4.28147); set "
        "[retrain] min_utility to accept it"], e.repair_problems
    assert "(floor 0.000000)" in res.side_by_side()


def test_min_utility_minus_inf_accepts_it(tmp_path, monkeypatch):
    monkeypatch.setattr(gate_mod, "run_retrain", _fake_repair("always"))
    res = run_gate([_spec(tmp_path, "min_utility = -inf")], retrain=True, accept_repaired=True)
    assert res.entries[0].repair_check["min_utility"] == -math.inf
    assert res.entries[0].repair_problems == [] and res.exit_code == 0


@pytest.mark.parametrize("extra, needle", [
    ('min_utility = "high"', "[retrain] min_utility: bad value"),
    ("min_utility = nan", "[retrain] min_utility: bad value"),
    ('allow_worse = ["tpr_gap"]', "[retrain] allow_worse: bad value 'tpr_gap'"),
])
def test_bad_guards_are_refused(tmp_path, extra, needle):
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tmp_path, extra))
    assert needle in str(exc.value) and "\n" not in str(exc.value)

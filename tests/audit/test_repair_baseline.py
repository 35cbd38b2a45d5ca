"""A repair imposes the spec's [baseline.thresholds] too (h6hunt1 F4): "KEY(policy) -
KEY(baseline) <= v" becomes KEY <= KEY(baseline) + v from the baseline's audited numbers
(causalfair.audit.retrain.imposed_constraints, which the exact repair and the trainers
call); before it, the repair imposed only [thresholds] and a spec failing on its baseline
was "repaired" into the same failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from causalfair.audit import audit, load_spec
from causalfair.audit.retrain import check_retrain, imposed_constraints
from causalfair.errors import SpecError
from causalfair.thresholds import Constraint

ROOT = Path(__file__).resolve().parents[2]
CKPT = ROOT / "causalfair" / "examples" / "checkpoints" / "lending-1-ppo.pt"


def _spec(tmp_path: Path, thresholds: str, relative: str) -> object:
    p = tmp_path / "rel.toml"
    p.write_text(f"""name = "rel"
horizon = 4
[system]
id = "lending-1"
[policy]
checkpoint = "{CKPT.as_posix()}"
[thresholds]
{thresholds}
[baseline]
builtin = "never"
[baseline.thresholds]
{relative}
[retrain]
algo = "exact"
""", encoding="utf-8")
    return load_spec(p)


def test_baseline_thresholds_become_absolute_constraints(tmp_path):
    spec = _spec(tmp_path, "abs_C = 0.5", "abs_C = 0.0\nC = 0.01\nutility = 0.1")
    before = audit(spec)
    theirs = before.extra["baseline"]["quantities"]
    assert before.overall == "FAIL"  # |C| grew against never's
    got = imposed_constraints(spec, before)
    assert got == [Constraint("abs_C", 0.5),
                   Constraint("abs_C", abs(theirs["abs_C"]["baseline"])),
                   Constraint("C", theirs["C"]["baseline"] + 0.01)]  # utility: the floor's
    assert imposed_constraints(spec) == [Constraint("abs_C", 0.5)]  # before the audit


def test_a_spec_gated_only_against_its_baseline_is_repairable(tmp_path):
    spec = _spec(tmp_path, "", "abs_C = 0.0")
    check_retrain(spec)  # it was refused: "[thresholds]: no thresholds, so nothing to repair"
    before = audit(spec)
    assert imposed_constraints(spec, before) == [
        Constraint("abs_C", abs(before.extra["baseline"]["quantities"]["abs_C"]["baseline"]))]


def test_a_baseline_threshold_no_policy_meets_is_refused_by_name(tmp_path):
    spec = _spec(tmp_path, "abs_C = 0.5", "abs_C = -1.0")
    with pytest.raises(SpecError, match=r"\[baseline.thresholds\] abs_C = -1: the exact repair "
                       r"cannot meet it: .* < 0, which no policy meets"):
        imposed_constraints(spec, audit(spec))


def test_a_relative_lambda_no_policy_meets_is_refused_by_its_own_name(tmp_path):
    spec = _spec(tmp_path, "abs_C = 0.5", "Lambda = -5.0")
    with pytest.raises(SpecError, match=r"\[baseline.thresholds\] Lambda = -5: .* it asks "
                       r"Lambda <= [0-9.e-]+ \(the baseline's\) -5 = "):
        imposed_constraints(spec, audit(spec))

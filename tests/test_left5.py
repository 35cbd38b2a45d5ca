"""Warm starts refuse a checkpoint reading other features at every door; the gate keeps a
failed retrain's audit; one gate holds one backend; identical decision rows have a total
variation of exactly 0."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from causalfair.errors import CheckpointError
from causalfair.policies.checkpoint import FeatureEncoding, load_checkpoint, mlp, save_checkpoint
from causalfair.train import TrainConfig, train
from causalfair.train.generic import SystemTrainer
from tests.conftest import clinic_module, retrain_spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clinic():
    with clinic_module("clinic_left5") as mod:
        yield mod.make_clinic()


def _swapped_checkpoint(path: Path) -> Path:
    """A clinic-shaped network (2 inputs, 3 actions) whose inputs are the clinic's two
    features in the other order: same width, other columns."""
    save_checkpoint(path, mlp(2, (8,), 3), architecture={
        "type": "mlp", "input_dim": 2, "hidden": [8], "output_dim": 3, "activation": "tanh"},
        encoding=FeatureEncoding("features", names=("distance", "severity")))
    return path


def _cfg(**kw):
    return TrainConfig(algo="ppo", iterations=1, n_individuals=8, horizon=2, hidden=(8,), **kw)


def test_a_direct_trainer_refuses_a_warm_start_reading_other_features(clinic, tmp_path):
    ck = _swapped_checkpoint(tmp_path / "swapped.npz")
    init = load_checkpoint(ck)[0]
    with pytest.raises(CheckpointError) as direct:
        SystemTrainer(clinic, _cfg(), init)
    with pytest.raises(CheckpointError) as door:
        train(_cfg(), init_checkpoint=ck, system=clinic)
    msg = str(direct.value)
    assert "\n" not in msg and str(ck) in msg
    assert "reads features [distance, severity] but the system gives [severity, distance]" in msg
    assert "retrain" in msg  # the fix
    assert str(door.value) == msg  # both doors refuse alike


def test_a_warm_start_with_the_right_features_keeps_its_encoding(clinic, tmp_path):
    enc = FeatureEncoding("features", names=("severity", "distance"), mean=(0.5, 10.0),
                          std=(0.3, 5.0))
    save_checkpoint(tmp_path / "ok.npz", mlp(2, (8,), 3), architecture={
        "type": "mlp", "input_dim": 2, "hidden": [8], "output_dim": 3, "activation": "tanh"},
        encoding=enc)
    tr = SystemTrainer(clinic, _cfg(), load_checkpoint(tmp_path / "ok.npz")[0])
    assert tr.encoding == enc  # its normalisation, not the fresh one
    assert SystemTrainer(clinic, _cfg()).encoding != enc


# ------------------------------------------------------------ a failed retrain's audit


def test_a_failed_retrain_keeps_its_audit_in_the_json_and_junit(tmp_path, monkeypatch):
    import json
    import xml.etree.ElementTree as ET

    import jsonschema

    import causalfair.audit.gate as gate_mod
    from causalfair.audit import run_gate

    ckpt = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"
    (tmp_path / "a.toml").write_text(retrain_spec("a", ckpt.as_posix()), encoding="utf-8")

    def broken(spec, before, target=None, *, place=True):
        raise ValueError("boom in the trainer")

    monkeypatch.setattr(gate_mod, "run_retrain", broken)
    res = run_gate([tmp_path / "a.toml"], retrain=True)
    (e,) = res.entries
    assert res.exit_code == 2 and e.overall == "ERROR"
    doc = res.to_dict()
    jsonschema.validate(doc, json.loads((ROOT / "docs/schema/gate.schema.json").read_text()))
    entry = doc["specs"][0]
    assert entry["overall"] == "ERROR" and entry["verdicts"] == []  # the schema's ERROR form
    assert "boom in the trainer" in entry["error"] and entry["retrain_error"] == entry["error"]
    # the audit, verdicts and numbers, as for a FAIL
    before = entry["before"]
    assert before["overall"] == "FAIL" == e.before.overall
    assert [v["key"] for v in before["verdicts"]] == ["abs_C"]
    assert before["verdicts"][0]["estimate"] == e.before.verdicts[0].to_dict()["estimate"] > 0.001
    assert entry["utility"] == before["utility"] is not None
    assert entry["checkpoint_sha256"] == e.before.checkpoint_sha256 is not None
    # JUnit: the audit's failing threshold and the retrain's error, in one suite
    suite = ET.fromstring(res.to_junit()).find("testsuite")
    cases = {tc.get("name"): tc for tc in suite.iter("testcase")}
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "1")
    assert cases["retrain"].find("error").get("type") == "ValueError"
    assert "boom in the trainer" in cases["retrain"].find("error").get("message")
    (threshold,) = [tc for name, tc in cases.items() if name != "retrain"]
    assert threshold.find("failure").get("type") == "FAIL"
    # gate-merge reads it; the text table shows the audit's rows too
    from causalfair.audit.shards import check_gate_summary, summary_exit_code

    check_gate_summary(doc, "gate.json")
    assert summary_exit_code(doc) == 2
    table = res.side_by_side()
    assert "its retrain failed; the audit: FAIL" in table
    assert "abs_C <= 0.001" in table and "0.004445 FAIL" in table, table


# ---------------------------------------------------------------- one gate, one Ray
class _FakeRay:
    """Ray's driver API, in this process: counts the connections (``init``) and the
    letting go (``shutdown``); a task runs when it is submitted."""

    class exceptions:  # noqa: N801 - the name Ray uses
        RayError = RuntimeError

    def __init__(self) -> None:
        self.up = False
        self.inits = self.shutdowns = 0

    def is_initialized(self):
        return self.up

    def init(self, **kwargs):
        self.up, self.inits = True, self.inits + 1

    def shutdown(self):
        self.up, self.shutdowns = False, self.shutdowns + 1

    def put(self, data):
        return data

    def get(self, ref):
        return ref

    def cancel(self, ref, force=False):
        pass

    def remote(self, **opts):
        class _Task:
            def __init__(self, fn):
                self.remote = fn
        return _Task


@pytest.mark.ray
def test_a_gate_that_retrains_connects_to_ray_once(tmp_path, monkeypatch):
    from causalfair.audit import run_gate

    ckpt = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"
    (tmp_path / "m.pt").write_bytes(ckpt.read_bytes())  # the retrained file goes beside it
    (tmp_path / "a.toml").write_text(retrain_spec("a", "m.pt"), encoding="utf-8")
    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    res = run_gate([tmp_path / "a.toml"], retrain=True, backend="ray")
    (e,) = res.entries
    assert e.error is None and e.after is not None, res.side_by_side()  # both maps ran
    assert (fake.inits, fake.shutdowns, fake.up) == (1, 1, False)

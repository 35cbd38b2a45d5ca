"""MLflow logging of an audit of a user's Gymnasium env (``[system] gym = ...``), against a
local file store: one run naming the gym system, the decomposition's metrics with CI
bounds equal to audit.json's, the verdict as a tag, audit.json as an artifact."""

from __future__ import annotations

import importlib.util
import json

import pytest

from causalfair.cli import main
from tests.systems.test_from_gym import _spec

# not imported here: collecting this module in every test session would pay MLflow's import
if importlib.util.find_spec("mlflow") is None:
    pytest.skip("MLflow comes with the mlflow extra", allow_module_level=True)

pytestmark = pytest.mark.mlflow


def test_gym_audit_logs_its_run(tmp_path, monkeypatch, capsys):
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, "tutor")
    code = main(["audit", str(spec), "--out", str(tmp_path / "rep"), "--mlflow",
                 "--mlflow-experiment", "gym"])
    err = capsys.readouterr().err
    assert code == 0, err
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("gym").experiment_id])
    assert len(runs) == 1, err
    run = runs[0]
    doc = json.loads((tmp_path / "rep" / "audit.json").read_text())
    assert run.data.params["spec"] == "tutor"
    assert run.data.params["system"] == "gym:tutor_env:make_env", json.dumps(doc["system"])[:300]
    assert run.data.params["engine"] == "mc"
    for key in ("C", "DPE", "IPE", "SPE"):
        q = doc["quantities"][key]
        m = run.data.metrics
        assert (m[key], m[f"{key}.lower"], m[f"{key}.upper"]) == (
            q["estimate"], q["ci_lower"], q["ci_upper"]), key
    assert run.data.tags["causalfair.overall"] == doc["overall"]
    assert "audit.json" in {a.path for a in client.list_artifacts(run.info.run_id)}

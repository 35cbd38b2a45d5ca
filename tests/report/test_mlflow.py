"""MLflow logging of audits, against a local file store: one run per audit,
metrics with CI bounds equal to audit.json's, verdicts as tags, audit.json and the
report as artifacts."""

from __future__ import annotations

import importlib.util
import json

import pytest

from causalfair.cli import main

# not imported here: collecting this module in every test session would pay MLflow's import
if importlib.util.find_spec("mlflow") is None:
    pytest.skip("MLflow comes with the mlflow extra", allow_module_level=True)

pytestmark = pytest.mark.mlflow

SPEC = ('name = "{n}"\nhorizon = 6\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "{p}"\n'
        '[engine]\nkind = "{e}"\n{k}[thresholds]\nabs_C = {t}\n')


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 wants this for files
    return uri


def _runs(uri: str, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time"])


def test_gate_logs_one_run_per_audit_with_ci_bounds_tags_and_artifacts(tmp_path, store, capsys):
    specs = []
    for name, pol, eng, thr in (("mc", "threshold:0.5", "mc", 0.001), ("ex", "never", "exact", 1)):
        p = tmp_path / f"{name}.toml"
        p.write_text(SPEC.format(n=name, p=pol, e=eng, t=thr, k="n = 4000\n" if eng == "mc" else ""))
        specs.append(str(p))
    code = main(["gate", *specs, "--json", str(tmp_path / "g.json"), "--reports",
                 str(tmp_path / "rep"), "--mlflow", "--mlflow-experiment", "fairness"])
    assert code == 1
    client, runs = _runs(store, "fairness")
    assert sorted(r.data.params["spec"] for r in runs) == ["ex", "mc"]
    by = {r.data.params["spec"]: r for r in runs}
    for name in ("mc", "ex"):
        doc = json.loads((tmp_path / "rep" / name / "audit.json").read_text())
        run = by[name]
        v = doc["verdicts"][0]
        assert run.data.tags["causalfair.overall"] == doc["overall"]
        assert run.data.tags["causalfair.verdict.abs_C le " + f"{v['threshold']:g}"] == v["status"]
        assert run.data.metrics["verdict.abs_C.estimate"] == v["estimate"]
        assert run.data.params["engine"] == name.replace("ex", "exact")
        arts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"audit.json", "report"} <= arts
        assert "report/report.html" in {a.path for a in client.list_artifacts(run.info.run_id,
                                                                                  "report")}
    mc = by["mc"].data.metrics
    doc = json.loads((tmp_path / "rep" / "mc" / "audit.json").read_text())
    c = doc["quantities"]["C"]
    assert mc["C.lower"] < mc["C"] < mc["C.upper"]
    assert (mc["C"], mc["C.lower"], mc["C.upper"]) == (c["estimate"], c["ci_lower"], c["ci_upper"])
    assert "C.lower" not in by["ex"].data.metrics  # exact numbers carry no interval


def test_audit_logs_too_and_a_missing_store_is_an_input_error(tmp_path, store, capsys,
                                                              monkeypatch):
    p = tmp_path / "a.toml"
    p.write_text(SPEC.format(n="a", p="never", e="exact", t=1, k=""))
    assert main(["audit", str(p), "--no-report", "--mlflow"]) == 0
    assert "mlflow run: " in capsys.readouterr().err
    _, runs = _runs(store, "causalfair")
    assert len(runs) == 1 and runs[0].data.tags["causalfair.stage"] == "audit"
    import sys

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    assert main(["audit", str(p), "--no-report", "--mlflow"]) == 2
    assert "MLflow is not installed; install the extra with pip install 'causalfair[mlflow]'" \
        in capsys.readouterr().err


def test_run_params_are_what_ran_log_and_exact_audits(tmp_path, store, capsys):
    """A log audit's run said horizon None, n 20000, seed 0, system None and policy
    "builtin None" (the spec's unused defaults), and an exact audit's n 20000 and seed 0,
    which it never uses: the params are audit.json's (the log's length, the log, the
    logged policy's label, the bootstrap's n_boot and seed; no n or seed for exact)."""
    from causalfair.logs import simulate_logs

    simulate_logs("lending-1", "random:0.5", n_individuals=200, horizon=3,
                  seed=1).to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "l.toml").write_text('name = "l"\n[logs]\npath = "log.csv"\nn_boot = 5\n'
                                     'seed = 7\n[thresholds]\n')
    (tmp_path / "e.toml").write_text(SPEC.format(n="e", p="never", e="exact", t=1, k=""))
    for spec in ("l.toml", "e.toml"):
        assert main(["audit", str(tmp_path / spec), "--out", str(tmp_path / spec[0]),
                     "--mlflow"]) == 0
    _, runs = _runs(store, "causalfair")
    by = {r.data.params["spec"]: r.data.params for r in runs}
    doc = json.loads((tmp_path / "l" / "audit.json").read_text())
    assert by["l"]["horizon"] == "3" == str(doc["decomposition"]["horizon"])
    assert (by["l"]["n_boot"], by["l"]["seed"]) == ("5", "7") and "n" not in by["l"]
    assert by["l"]["policy"] == doc["policy"]["label"] and by["l"]["system"] == "logs log.csv"
    assert by["e"]["horizon"] == "6" and "n" not in by["e"] and "seed" not in by["e"]
    assert by["e"]["system"] == "lending-1" and by["e"]["policy"] == "builtin never"


def test_verdicts_of_groups_named_in_another_script_keep_their_own_names(tmp_path, store,
                                                                           capsys):
    """Groups named only by characters MLflow refuses in a name ("Анна", "Бори", "Вера")
    made two pairs' verdicts one metric and one tag, ``abs_C_____-_____``: the FAIL's
    estimate and status were overwritten by the PASS's. Each verdict keeps its own."""
    from tests.tri_system import tri_source

    src = tri_source(1).replace('"A", "B", "C"', '"Анна", "Бори", "Вера"')
    (tmp_path / "tricyr.py").write_text(src, encoding="utf-8")
    (tmp_path / "c.toml").write_text(
        'name = "c"\n[system]\nfactory = "tricyr:make"\n[policy]\nfactory = "tricyr:policy"\n'
        '[thresholds]\n"abs_C[Бори-Анна]" = 0.1\n"abs_C[Вера-Анна]" = 0.1\n'
        'min_ratio_V = 0.3\n', encoding="utf-8")
    assert main(["gate", str(tmp_path / "c.toml"), "--mlflow"]) == 1
    _, runs = _runs(store, "causalfair")
    run = runs[0].data
    est = sorted(v for k, v in run.metrics.items() if k.startswith("verdict.abs_C"))
    assert est == pytest.approx([0.06, 0.2])  # B-A and C-A of tests/audit/test_three_groups
    status = sorted(v for k, v in run.tags.items() if k.startswith("causalfair.verdict.abs_C"))
    assert status == ["FAIL", "PASS"]
    assert run.tags["causalfair.verdict.min_ratio_V ge 0.3"] == "PASS"

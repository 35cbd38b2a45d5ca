"""`causalfair decompose --json` prints a versioned document (``schema_version`` first,
docs/schema/decompose.schema.json) from a system (exact, Monte Carlo) and from a decision
log, and `causalfair frontier` writes a versioned frontier.json
(docs/schema/frontier.schema.json); ``--jobs`` of decompose and gate takes ``auto``
(causalfair.backends.resolve_jobs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jsonschema
import pytest

from causalfair._io import DECOMPOSE_SCHEMA_VERSION, FRONTIER_SCHEMA_VERSION
from causalfair.backends import ProcessBackend, available_cores
from causalfair.cli import main
from causalfair.commands.decompose import backend_from_args
from causalfair.errors import InputError
from causalfair.logs.schema import simulate_logs
from tests.conftest import schema_errors, written_documents


def _decompose_json(capsys, tmp_path, name, *argv):
    capsys.readouterr()
    rc = main(["decompose", *argv, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    path = tmp_path / f"{name}.json"
    path.write_text(out, encoding="utf-8")
    return path, json.loads(out)


def test_decompose_json_is_versioned_and_validates(tmp_path, capsys):
    logs = tmp_path / "logs.csv"
    simulate_logs("lending-2", "random:0.3", 200, 4, 3).to_csv(logs, index=False)
    runs = {
        "exact": ("--system", "lending-1", "--horizon", "4"),
        "mc": ("--system", "lending-1", "--horizon", "2", "--engine", "mc", "--n", "50"),
        "logs": ("--logs", str(logs), "--boot", "3"),
    }
    for name, argv in runs.items():
        path, doc = _decompose_json(capsys, tmp_path, name, *argv)
        assert next(iter(doc)) == "schema_version", name
        assert doc["schema_version"] == DECOMPOSE_SCHEMA_VERSION == "1.0"
        assert schema_errors(path, "decompose") == [], name
        assert doc.get("engine", doc.get("source")) == name
    # the session check of tests/conftest.py finds (and validates) what decompose printed
    found = {(p.name, kind) for p, kind in written_documents(tmp_path)}
    assert {("exact.json", "decompose"), ("mc.json", "decompose"),
            ("logs.json", "decompose")} <= found


def test_the_decompose_schema_can_fail(tmp_path, capsys):
    _, doc = _decompose_json(capsys, tmp_path, "exact", "--system", "lending-1", "--horizon", "2")
    root = Path(__file__).resolve().parents[1] / "docs" / "schema"
    schema = json.loads((root / "decompose.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    assert not list(v.iter_errors(doc))
    bad = [{k: x for k, x in doc.items() if k != "schema_version"},
           {**doc, "schema_version": "2.0"},
           {**doc, "source": "logs"},  # a document is from a system or from a log, not both
           {**doc, "benefit": {**doc["benefit"], "eps": 0}}]
    for b in bad:
        assert list(v.iter_errors(b)), sorted(set(b) ^ set(doc))


def test_frontier_json_is_versioned_and_validates(tmp_path, capsys):
    out = tmp_path / "fr"
    rc = main(["frontier", "--setting", "lending-1", "--horizon", "3", "--points", "3",
               "--no-plot", "--out", str(out), "--policy", "always"])
    assert rc == 0, capsys.readouterr().err
    doc = json.loads((out / "frontier.json").read_text(encoding="utf-8"))
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == FRONTIER_SCHEMA_VERSION
    assert schema_errors(out / "frontier.json", "frontier") == []
    assert (out / "frontier.json", "frontier") in written_documents(tmp_path)
    root = Path(__file__).resolve().parents[1] / "docs" / "schema"
    v = jsonschema.Draft202012Validator(
        json.loads((root / "frontier.schema.json").read_text(encoding="utf-8")))
    assert list(v.iter_errors({k: x for k, x in doc.items() if k != "schema_version"}))
    assert list(v.iter_errors({**doc, "constraint": "Lambda"}))


def test_decompose_jobs_takes_auto(capsys):
    ns = argparse.Namespace(jobs="auto", backend="process", address=None)
    backend = backend_from_args(ns)
    assert isinstance(backend, ProcessBackend) and backend.jobs == available_cores()
    ns = argparse.Namespace(jobs="2", backend=None, address=None)
    assert backend_from_args(ns).jobs == 2
    assert backend_from_args(argparse.Namespace(jobs=None, backend=None, address=None)) is None
    with pytest.raises(InputError, match=r"--jobs: bad value 'two'.*'auto'"):
        backend_from_args(argparse.Namespace(jobs="two", backend=None, address=None))
    # on the command line: auto is accepted (the exact engine then refuses --jobs by name)
    rc = main(["decompose", "--system", "lending-1", "--jobs", "auto"])
    err = capsys.readouterr().err
    assert rc == 2 and "--n/--backend/--jobs/--address/--benefit-bins: only with the Monte Carlo engine" in err, err
    rc = main(["decompose", "--system", "lending-1", "--engine", "mc", "--jobs", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and "--jobs: bad value '0'" in err, err


def test_gate_jobs_takes_auto(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.toml").write_text('name = "bad"\nhorizon = 0\n[thresholds]\nabs_C = 1.0\n')
    rc = main(["gate", "bad.toml", "--jobs", "auto", "--json", "gate.json"])
    err = capsys.readouterr().err
    assert rc == 2 and "--jobs" not in err and "horizon" in err, err  # the spec's error
    assert json.loads((tmp_path / "gate.json").read_text())["specs"][0]["overall"] == "ERROR"
    rc = main(["gate", "bad.toml", "--jobs", "many"])
    err = capsys.readouterr().err
    assert rc == 2 and "--jobs: bad value 'many'" in err, err


def test_a_log_without_positivity_under_bounds_validates(tmp_path, capsys):
    """`--on-positivity bounds` prints bounds in place of C, DPE, IPE, SPE, Lambda and
    benefit: a form of its own in decompose.schema.json (it failed the schema, which
    required the point estimates of every form)."""
    logs = tmp_path / "det.csv"
    simulate_logs("lending-1", "threshold:0.5", 300, 20, 0).to_csv(logs, index=False)
    path, doc = _decompose_json(capsys, tmp_path, "bounds", "--logs", str(logs), "--boot", "0",
                                "--on-positivity", "bounds")
    assert doc["identified"] is False and "C" not in doc and doc["bounds"]["DPE"]["identified"] \
        is False, sorted(doc)
    assert schema_errors(path, "decompose") == []
    root = Path(__file__).resolve().parents[1] / "docs" / "schema"
    v = jsonschema.Draft202012Validator(json.loads((root / "decompose.schema.json").read_text(
        encoding="utf-8")))
    for bad in ({**doc, "C": 0.1},  # bounds and a point estimate: neither form
                {k: x for k, x in doc.items() if k != "bounds"},
                {**doc, "bounds": {**doc["bounds"], "DPE": {"lower": 0.0}}}):
        assert list(v.iter_errors(bad)), sorted(set(bad) ^ set(doc))

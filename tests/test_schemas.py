"""The published JSON Schemas (docs/schema/): valid draft 2020-12 schemas; audit.json and
the gate summaries that audit, gate and gate-merge write validate against them; the spec
schema has exactly the keys the spec parser allows; the written versions are the ones
CHANGELOG.md announces; and the session check of tests/conftest.py finds what it must."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

from causalfair.audit import spec as spec_mod
from causalfair.audit import spec_sections
from causalfair.audit.gate import GATE_SCHEMA_VERSION
from causalfair.audit.result import AUDIT_SCHEMA_VERSION
from causalfair.cli import main
from causalfair.thresholds import THRESHOLD_KEYS
from tests.conftest import schema_errors, written_documents

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "docs" / "schema"


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, err.getvalue()


@pytest.mark.parametrize("name", ["audit", "gate", "spec"])
def test_schemas_are_valid_draft_2020_12(name):
    s = schema(name)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(s)


def test_audit_and_gate_of_two_shipped_specs_validate(tmp_path, monkeypatch, capsys):
    """audit (Monte Carlo on replicator-1 with its report; exact on lending-1, its JSON),
    the gate over both and gate-merge of the gate's summary: each document validates and
    carries the version the code declares. (Every shipped spec's report is also written,
    and so validated at the end of the session, by tests/test_golden_specs.py.)"""
    monkeypatch.chdir(tmp_path)
    specs = [str(ROOT / "audits" / "lending-1.toml"), str(ROOT / "audits" / "replicator-1.toml")]
    rc, err = cli("audit", specs[1], "--out", "rep")
    assert rc in (0, 1), err
    assert schema_errors(tmp_path / "rep" / "audit.json", "audit") == []
    capsys.readouterr()
    assert main(["audit", specs[0], "--no-report", "--json"]) in (0, 1)
    Path("lending-1.json").write_text(capsys.readouterr().out)
    doc = json.loads(Path("lending-1.json").read_text())
    assert doc["schema_version"] == AUDIT_SCHEMA_VERSION and doc["selection"]
    assert schema_errors(tmp_path / "lending-1.json", "audit") == []
    rc, err = cli("gate", *specs, "--json", "gate.json")
    assert rc in (0, 1), err
    gate = json.loads((tmp_path / "gate.json").read_text())
    assert gate["schema_version"] == GATE_SCHEMA_VERSION and len(gate["specs"]) == 2
    assert schema_errors(tmp_path / "gate.json", "gate") == []
    rc, err = cli("gate-merge", "gate.json", "--json", "merged.json")
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["schema_version"] == GATE_SCHEMA_VERSION, err
    assert schema_errors(tmp_path / "merged.json", "gate") == []
    # the session check finds those causalfair wrote (and would report any that failed)
    found = {(p.name, kind) for p, kind in written_documents(tmp_path)}
    assert {("audit.json", "audit"), ("gate.json", "gate"), ("merged.json", "gate")} <= found


def test_a_gate_summary_of_invalid_specs_validates(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.toml").write_text('name = "bad"\nhorizon = 0\n[thresholds]\nabs_C = 1.0\n')
    rc, err = cli("gate", "bad.toml", "--json", "gate.json")
    assert rc == 2, err
    doc = json.loads(Path("gate.json").read_text())
    assert doc["specs"][0]["overall"] == "ERROR"
    assert schema_errors(tmp_path / "gate.json", "gate") == []


def test_the_schemas_can_fail():
    """What the schemas refuse: a document without schema_version, another major
    version, a verdict with an unknown status, an ERROR entry without its error."""
    base = json.loads((ROOT / "tests" / "golden" / "specs" / "audits__lending-1.json").read_text())
    base.update(schema_version=AUDIT_SCHEMA_VERSION, seconds=1.0,
                provenance={"causalfair": "x", "python": "3", "platform": "p", "dependencies": {}})
    v = jsonschema.Draft202012Validator(schema("audit"))
    assert list(v.iter_errors(base)) == []
    for change in ({"schema_version": "2.0"}, {"overall": "MAYBE"}):
        assert list(v.iter_errors({**base, **change})), change
    assert list(v.iter_errors({k: x for k, x in base.items() if k != "schema_version"}))
    g = jsonschema.Draft202012Validator(schema("gate"))
    entry = {"name": "a", "spec": "a.toml", "overall": "ERROR", "verdicts": [],
             "checkpoint_sha256": None}
    doc = {"schema_version": "1.0", "exit_code": 2, "inconclusive": "fail",
           "accept_repaired": False, "specs": [entry]}
    assert list(g.iter_errors(doc))  # no error message
    assert not list(g.iter_errors({**doc, "specs": [{**entry, "error": "why"}]}))


def test_gate_merge_refuses_another_major_version(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = {"schema_version": "2.0", "exit_code": 0, "inconclusive": "fail",
           "accept_repaired": False, "specs": []}
    Path("s.shard").write_text(json.dumps(doc))  # not .json: the session check skips it
    rc, err = cli("gate-merge", "s.shard", "--json", "m.json")
    assert rc == 2 and "s.shard: schema_version: must be 1.x" in err, err
    assert not Path("m.json").exists()


# ----------------------------------------------------------- the spec schema and the parser
def _props(node: dict) -> set[str]:
    return set(node["properties"])


def test_spec_schema_has_exactly_the_keys_the_parser_allows():
    s = schema("spec")
    assert s["additionalProperties"] is False
    assert _props(s) == set(spec_mod.TOP_KEYS)
    for section, keys in spec_mod.SECTION_KEYS.items():
        node = s["properties"][section]
        assert node["additionalProperties"] is False, section
        assert _props(node) == set(keys), section
    assert _props(s["properties"]["thresholds"]) == set(THRESHOLD_KEYS)
    assert _props(s["properties"]["baseline"]["properties"]["thresholds"]) == set(
        spec_mod.RELATIVE_KEYS)


def test_spec_schema_enums_are_the_parsers():
    p = schema("spec")["properties"]
    assert p["metrics"]["items"]["enum"] == list(spec_mod.METRICS)
    assert p["engine"]["properties"]["kind"]["enum"] == list(spec_mod.ENGINES)
    assert p["benefit"]["properties"]["weights"]["enum"] == list(spec_mod.WEIGHTS)
    assert p["retrain"]["properties"]["algo"]["enum"] == list(spec_mod.RETRAIN_ALGOS)
    assert p["model"]["properties"]["setting"]["enum"] == list(spec_mod.SETTINGS)
    assert p["logs"]["properties"]["fit"]["enum"] == list(spec_sections.METHODS)
    assert p["logs"]["properties"]["lambda_estimator"]["enum"] == list(
        spec_sections.LAMBDA_ESTIMATORS)


def test_every_shipped_spec_validates_and_unknown_keys_are_refused():
    import tomllib

    v = jsonschema.Draft202012Validator(schema("spec"))
    specs = sorted([*ROOT.glob("audits/*.toml"), *ROOT.glob("reports/examples/*.toml"),
                    *ROOT.glob("causalfair/examples/*.toml")])
    assert specs
    for path in specs:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        assert list(v.iter_errors(raw)) == [], path
        assert list(v.iter_errors({**raw, "unknown": 1})), path
        spec_mod.load_spec(path)  # and the parser accepts it too


# ------------------------------------------------------------------- versions and changelog
def test_versions_are_announced_in_the_changelog():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for version, name in ((AUDIT_SCHEMA_VERSION, "audit"), (GATE_SCHEMA_VERSION, "gate")):
        assert f"schema_version {version}" in text, name
        pattern = schema(name)["properties"]["schema_version"]["pattern"]
        assert re.fullmatch(pattern, version), (name, version, pattern)
    assert "bumps" in text  # the rule: a format change bumps the version

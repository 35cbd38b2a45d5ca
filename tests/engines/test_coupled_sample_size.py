"""A Monte Carlo decomposition says what its n counts (h4_sch F9): units of each group, or
worlds of coupled units (``System.units_per_replica`` > 1) with the units of one world and of
each group in it. Before, a decomposition of 20 worlds of 2 units printed "n = 20 per group"
(``Decomposition.summary``, ``causalfair decompose``) and the report said "20 simulated units
(or worlds) per group"; the JSON (to_dict, decompose --json, audit.json) held n alone."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import causalfair as cf
from causalfair._io import sample_size, sample_size_of
from causalfair.errors import InputError
from causalfair.report.explain import assumptions
from causalfair.results import Decomposition
from tests.conftest import run_cli, schema_errors

SPEC = {"name": "r", "system": {"id": "replicator-1"}, "policy": {"builtin": "action:2"},
        "engine": {"kind": "mc", "n": 3}, "horizon": 3, "thresholds": {"abs_C": 0.25}}


def _coupled() -> Decomposition:
    return cf.decompose_mc(cf.systems.make("replicator-1"), "action:2", 3, n=20, seed=0)


def test_a_coupled_decomposition_records_worlds_and_their_units():
    dec = _coupled()
    assert (dec.n, dec.n_counts, dec.units_per_world) == (20, "worlds", 2)
    assert dict(dec.group_units_per_world) == {"g1": 1, "g2": 1}
    assert "n = 20 worlds of 2 units (1 per group), seed = 0" in str(dec)
    assert "n = 20 per group" not in str(dec)
    d = json.loads(json.dumps(dec.to_dict()))  # the JSON round trip keeps what n counts
    assert (d["n"], d["n_counts"], d["units_per_world"], d["group_units_per_world"]) == (
        20, "worlds", 2, {"g1": 1, "g2": 1})
    assert sample_size_of(d) == "20 worlds of 2 units (1 per group)"


def test_independent_units_count_units_per_group_and_exact_has_no_n():
    lending = cf.systems.make("lending-3")
    mc = cf.decompose_mc(lending, "threshold:0.5", 2, n=10, seed=0)
    assert (mc.n_counts, mc.units_per_world, mc.group_units_per_world) == (
        "units_per_group", None, None)
    d = mc.to_dict()
    assert d["n_counts"] == "units_per_group" and "units_per_world" not in d
    assert "n = 10 per group, seed = 0" in str(mc)
    exact = cf.decompose(lending, "threshold:0.5", horizon=2)
    assert exact.n is None and "n_counts" not in exact.to_dict() and exact.sample_size == ""


def test_n_counts_is_checked():
    dec = _coupled()
    with pytest.raises(InputError, match="n_counts: expected one of units_per_group, worlds"):
        replace(dec, n_counts="people")


def test_the_words_of_every_form():
    assert sample_size(5) == "5 per group"
    assert sample_size(5, simulated=True) == "5 simulated units per group"
    assert sample_size(5, "worlds") == "5 worlds"
    assert sample_size(5, "worlds", 1) == "5 worlds of 1 unit"
    assert sample_size(5, "worlds", 34, {"a": 15, "b": 19}) == "5 worlds of 34 units (a: 15, b: 19)"
    assert sample_size(5, "worlds", 6, {"a": 3, "b": 3}, simulated=True) == (
        "5 simulated worlds of 6 units (3 per group)")


def test_decompose_command_text_and_json_say_worlds(tmp_path):
    args = ("decompose", "--system", "replicator-1", "--policy", "action:2", "--n", "20",
            "--horizon", "3")
    text = run_cli(*args, expect=0, cwd=tmp_path).stdout
    assert "n = 20 worlds of 2 units (1 per group), seed = 0, common random numbers" in text
    assert "n = 20 per group" not in text
    out = tmp_path / "d.json"
    out.write_text(run_cli(*args, "--json", expect=0, cwd=tmp_path).stdout)
    d = json.loads(out.read_text())
    assert (d["n"], d["n_counts"], d["units_per_world"]) == (20, "worlds", 2)
    assert schema_errors(out, "decompose") == []
    d["n_counts"] = "people"  # the schema types the new keys
    bad = tmp_path / "d.bad"
    bad.write_text(json.dumps(d))
    assert schema_errors(bad, "decompose")


def test_audit_json_and_report_say_worlds_also_for_an_older_audit_json(tmp_path):
    r = cf.audit(SPEC)
    folder = r.write_report(tmp_path / "rep")
    doc = json.loads((folder / "audit.json").read_text())
    assert doc["decomposition"]["n_counts"] == "worlds"
    assert schema_errors(folder / "audit.json", "audit") == []
    mc = next(s for s in assumptions(doc) if s.startswith("Monte Carlo engine"))
    assert mc.startswith("Monte Carlo engine: 3 simulated worlds of 2 units (1 per group), seed 0")
    md = (folder / "report.md").read_text()
    assert "n = 3 worlds of 2 units (1 per group), seed = 0" in md
    for k in ("n_counts", "units_per_world", "group_units_per_world"):  # written before them
        del doc["decomposition"][k]
    mc = next(s for s in assumptions(doc) if s.startswith("Monte Carlo engine"))
    assert mc.startswith("Monte Carlo engine: 3 simulated worlds of 2 units, seed 0"), mc
    doc["system"]["units_per_replica"] = 1  # an older audit of independent units
    mc = next(s for s in assumptions(doc) if s.startswith("Monte Carlo engine"))
    assert mc.startswith("Monte Carlo engine: 3 simulated units per group, seed 0"), mc

"""A user's own system, end to end: the example clinic (3 actions,
continuous features, docs/examples/clinic.py) registered from a module:callable in a
temporary folder, audited, gated, decomposed and drawn from the command line; bad
factories, files and checkpoints give one-line errors with exit code 2."""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[2]

SPEC = """name = "clinic"

[system]
factory = "clinic:make_clinic"
params = { levels = 5 }

[policy]
builtin = "uniform"

[thresholds]
abs_C = 0.2
Lambda = 0.1
"""


def run_cli(*args, cwd):
    env = {"OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT)}
    return run_cmd([sys.executable, "-m", "causalfair", *args], cwd=cwd, env=env, timeout=300)


@pytest.fixture
def own(tmp_path):
    shutil.copy(ROOT / "docs" / "examples" / "clinic.py", tmp_path / "clinic.py")
    (tmp_path / "clinic.toml").write_text(SPEC)
    yield tmp_path
    sys.modules.pop("clinic", None)


def test_audit_report_and_json_on_a_factory_system(own):
    proc = run_cli("audit", "clinic.toml", "--out", "rep", cwd=own)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((own / "rep" / "audit.json").read_text())
    system = cf.systems.make("clinic:make_clinic", search_path=own, levels=5)
    ref = cf.decompose(system.tabular, cf.parse_policy("uniform", system), system.horizon)
    assert doc["decomposition"]["C"] == ref.C and doc["decomposition"]["horizon"] == 12
    assert doc["system"]["decisions"]["labels"] == ["wait", "medication", "surgery"]
    assert doc["overall"] == ("FAIL" if abs(ref.C) > 0.2 else "PASS")
    html = (own / "rep" / "report.html").read_text()
    assert "Not shown" in html and "frontier" in html  # the frontier needs two actions


def test_gate_exit_code_and_junit(own):
    proc = run_cli("gate", "clinic.toml", "--junit", "gate.xml", cwd=own)
    system = cf.systems.make("clinic:make_clinic", search_path=own, levels=5)
    C = cf.decompose(system.tabular, cf.parse_policy("uniform", system), system.horizon).C
    assert proc.returncode == (1 if abs(C) > 0.2 else 0), proc.stderr
    root = ET.parse(own / "gate.xml").getroot()
    assert root.get("tests") == "2"
    assert root.get("failures") == ("1" if abs(C) > 0.2 else "0")


def test_graph_and_decompose_from_the_command_line(own):
    proc = run_cli("graph", "--system", "clinic:make_clinic", "--policy", "uniform",
                   "--out", "g.graphml", cwd=own)
    assert proc.returncode == 0, proc.stderr
    assert (own / "g.graphml").is_file() and "reads S: no" in proc.stdout
    proc = run_cli("decompose", "--system", "clinic:make_clinic", "--policy", "action:2",
                   "--json", cwd=own)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["C"] == pytest.approx(out["DPE"] + out["IPE"] + out["SPE"], abs=1e-12)


def test_python_audit_with_a_system_object_and_a_policy_object(own):
    system = cf.systems.make("clinic:make_clinic", search_path=own)
    table = np.tile([0.1, 0.6, 0.3], (2, 5, 1))
    res = cf.audit(json.loads(json.dumps({"name": "nb", "thresholds": {"abs_C": 1.0}})) | {
        "system": {"factory": "clinic:make_clinic"}}, system=system,
        policy=cf.TablePolicy(table, n_actions=3, name="mine"))
    ref = cf.decompose(system.tabular, table, 12)
    assert res.decomposition.C == ref.C and res.decomposition.policy_name == "mine"
    assert "mine" in res.summary()  # the report is labelled with the policy it computed


@pytest.mark.parametrize("body, needles", [
    ('[system]\nfactory = "nosuch:make"\n', ["clinic.toml", "[system]", "cannot import module 'nosuch'",
                                             "put nosuch.py in ", "or install the package"]),
    ('[system]\nfactory = "clinic:GROUPS"\n', ["[system]", "'clinic:GROUPS' is a tuple, not a callable"]),
    ('[system]\nfactory = "clinic:make_clinic"\nparams = { level = 3 }\n',
     ["[system]", "unknown parameter 'level'", "levels, rural_penalty"]),
    ('[system]\nfactory = "clinic:ClinicSimulator"\nparams = { levels = 2 }\n[policy]\nbuiltin = "never"\n', None),
    ('[system]\ntabular = "bad.json"\n', ["bad.json", "kernel: expected a 4-d array (groups, actions, K, K), got shape (1, 1, 1)"]),
])
def test_bad_systems_are_one_line_errors_with_exit_2(own, body, needles):
    (own / "bad.json").write_text(json.dumps({"kernel": [[[1.0]]], "initial": [[1.0]],
                                              "potential": [0.0]}))
    (own / "clinic.toml").write_text('name = "bad"\n' + body)
    proc = run_cli("audit", "clinic.toml", "--no-report", cwd=own)
    if needles is None:  # a bare simulator is wrapped with defaults: Monte Carlo audit runs
        assert proc.returncode == 0, proc.stderr
        assert "engine: mc" in proc.stdout
        return
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    for n in needles:
        assert n in line, (n, line)

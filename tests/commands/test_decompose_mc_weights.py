"""Lambda's weights (method.md section 4: P(x | s), "visitation" or "initial") on the Monte
Carlo engine, one rule at every door (causalfair.engines.montecarlo.decompose_mc): honoured
where Lambda is exact from the tabular model, refused before any run where it is by forks.
`causalfair decompose --engine mc --weights initial` printed Lambda with visitation weights
("P(x | s) = visitation", exit 0), and an audit spec's `[benefit] weights = "initial"` on a
system without a tabular model wrote audit.json's benefit/weights "visitation"."""

from __future__ import annotations

import json

import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.model import ModelError
from tests.conftest import run_cli


def test_mc_honours_initial_weights_where_lambda_is_exact():
    system = cf.systems.make("lending-1")
    want = cf.decompose(system, "threshold:0.5", 5, weights="initial").Lambda  # exact
    assert want != cf.decompose(system, "threshold:0.5", 5).Lambda
    dec = cf.decompose(system, "threshold:0.5", 5, engine="mc", n=200, weights="initial")
    assert dec.Lambda == want and dec.benefit.weights == "initial"
    proc = run_cli("decompose", "--setting", "lending-1", "--policy", "threshold:0.5",
                   "--horizon", "5", "--engine", "mc", "--n", "200", "--weights", "initial",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["Lambda"] == want and out["benefit"]["weights"] == "initial"


def test_forks_refuse_initial_weights_at_every_door(tmp_path, capsys):
    said = r"weights: bad value 'initial'; by forks .*needs the exact engine"
    with pytest.raises(ModelError, match=said):
        cf.decompose(cf.systems.make("infectious-1"), "never", 2, n=20, weights="initial")
    assert main(["decompose", "--system", "infectious-1", "--policy", "never", "--horizon",
                 "2", "--n", "20", "--weights", "initial"]) == 2
    assert "weights: bad value 'initial'" in capsys.readouterr().err
    spec = tmp_path / "a.toml"
    spec.write_text('name = "w"\nhorizon = 2\n[system]\nid = "infectious-1"\n[policy]\n'
                    'builtin = "never"\n[engine]\nn = 20\n[benefit]\nweights = "initial"\n')
    assert main(["audit", str(spec), "--out", str(tmp_path / "out")]) == 2
    assert "weights: bad value 'initial'" in capsys.readouterr().err
    assert not (tmp_path / "out" / "audit.json").exists()


def test_audit_with_a_model_keeps_its_exact_lambda_at_initial_weights(tmp_path):
    """A Monte Carlo audit of a system with a tabular model takes Lambda exactly from the
    model (audit.run): its [benefit] weights apply there, whatever policy the forks of the
    decomposition's own Lambda could not weigh so (a factory not known to read only the
    level and group)."""
    (tmp_path / "halfpol.py").write_text(
        "import numpy as np\n\n\nclass Half:\n    name = 'half'\n\n"
        "    def prob_d1(self, obs):\n"
        "        return np.where(np.asarray(obs.level) >= 3, 0.9, 0.2)\n\n\n"
        "def make():\n    return Half()\n")
    spec = tmp_path / "s.toml"
    spec.write_text('name = "w"\nhorizon = 4\n[system]\nid = "lending-1"\n[policy]\n'
                    'factory = "halfpol:make"\n[engine]\nkind = "mc"\nn = 200\n'
                    '[benefit]\nweights = "initial"\n')
    assert main(["audit", str(spec), "--out", str(tmp_path / "out")]) == 0
    doc = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert doc["benefit"]["weights"] == "initial"

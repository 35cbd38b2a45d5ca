"""Rough edges a new user hit (issue 15), each pinned by a test."""

import json
from pathlib import Path

import causalfair as cf
from causalfair.cli import main


def test_audit_with_a_policy_override_is_labelled_with_that_policy(tmp_path):
    res = cf.audit(_spec(tmp_path), policy="always")
    assert res.spec.policy_label == "builtin always"
    doc = res.to_dict()
    assert doc["policy"]["label"] == "builtin always"
    assert doc["decomposition"]["policy"] == "always"
    obj = cf.ConstantPolicy(0.25, name="quarter")
    res = cf.audit(_spec(tmp_path), policy=obj)
    assert res.to_dict()["policy"]["label"] == "policy object quarter"
    assert "quarter" in res.summary() and "threshold:0.5" not in res.summary()


def _spec(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('name = "s"\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "threshold:0.5"\n')
    return p


def test_log_audit_labels_its_two_kinds_of_interval(tmp_path):
    from causalfair.logs import audit_logs
    from causalfair.logs.schema import simulate_logs

    la = audit_logs(simulate_logs("lending-1", "random:0.5", 300, 5, 0), n_boot=20, seed=0)
    text = la.summary()
    assert "percentile CI" in text and "normal intervals" in text
    assert "Dirichlet smoothing" in text and "alpha =" not in text


def test_mc_decompose_says_which_dpe_is_exact(capsys):
    assert main(["decompose", "--system", "lending-1", "--engine", "mc", "--n", "200"]) == 0
    out = capsys.readouterr().out
    assert "is exact, from the system's tabular model" in out


def test_decompose_json_names_the_system(capsys):
    assert main(["decompose", "--system", "lending-2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["system"]["groups"] == ["white", "black"]


def test_a_bug_keeps_its_traceback_and_an_input_error_exits_2(monkeypatch, capsys):
    """Only CausalfairError subclasses are input errors (exit 2, one line); any other
    exception is a bug in causalfair and propagates with its traceback."""
    import pytest

    import causalfair.commands.decompose as command

    def broken(*a, **k):
        raise ValueError("an internal bug")

    monkeypatch.setattr(command, "decompose", broken)
    with pytest.raises(ValueError, match="an internal bug"):
        main(["decompose", "--system", "lending-1"])
    monkeypatch.undo()
    assert main(["decompose", "--system", "lending-1", "--horizon", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--horizon: must be >= 1, got 0." in err


def test_torch_requirement_is_a_range_that_holds_the_tested_version():
    """pyproject pinned torch==2.13.0, which cannot live beside a user's own torch: the
    requirement is a range, it holds the tested version (the one installed here), and
    the README states the same range."""
    import tomllib

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[1]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    req = Requirement(next(d for d in deps if d.split(">")[0].split("=")[0].strip() == "torch"))
    assert not any(s.operator in ("==", "===") for s in req.specifier)
    import torch

    assert torch.__version__.split("+")[0] in req.specifier
    assert "2.4.0" in req.specifier and "2.14.0" not in req.specifier
    readme = (root / "README.md").read_text()
    assert "torch >= 2.4 and < 2.14" in readme and "pinned" not in readme.split("\n\n")[1]

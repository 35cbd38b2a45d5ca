"""The decompose command: same numbers as the Python API, exit codes."""

import json

import pytest

import causalfair as cf
from causalfair.cli import main
from tests.conftest import run_cli


@pytest.mark.parametrize("policy", ["always", "threshold:0.5"])
def test_cli_matches_api(policy):
    proc = run_cli("decompose", "--setting", "lending-1", "--policy", policy, "--horizon", "10", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    m = cf.lending_setting("lending-1").tabular
    r = cf.decompose(m, cf.parse_policy(policy, m), 10)
    for k in ("C", "DPE", "IPE", "SPE", "Lambda"):
        assert out[k] == getattr(r, k)
    for i, g in enumerate(r.groups):
        assert out["groups"][g]["V"] == r.V[i]
        assert out["groups"][g]["V_ps"] == r.V_ps[i]
        assert out["groups"][g]["V_0"] == r.V_0[i]
    assert out["diagnostics"]["ok"] is True


def test_cli_text_output(capsys):
    assert main(["decompose", "--setting", "lending-3", "--policy", "always", "--horizon", "5"]) == 0
    out = capsys.readouterr().out
    assert "DPE" in out and "Worst pairs" in out


@pytest.mark.parametrize("args,msg", [
    (["decompose", "--policy", "nope"], "unknown policy 'nope'"),
    (["decompose", "--horizon", "0"], "--horizon: must be an integer >= 1"),
    (["decompose", "--levels", "2"], "--levels: must be an integer >= 3"),
    (["decompose", "--checkpoint", "/nonexistent.pt"], "no such file"),
])
def test_usage_errors_exit_2(args, msg, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_argparse_error_exit_2():
    proc = run_cli("decompose", "--setting", "lending-9")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_checkpoint_through_cli(tmp_path):
    import torch

    torch.manual_seed(0)
    net = cf.policies.core.mlp(9, (8,), 1)
    path = tmp_path / "c.pt"
    cf.save_checkpoint(path, net, architecture={"type": "mlp", "input_dim": 9, "hidden": [8], "output_dim": 1},
                       encoding=cf.FeatureEncoding())
    proc = run_cli("decompose", "--checkpoint", str(path), "--horizon", "7", "--json")
    assert proc.returncode == 0, proc.stderr
    m = cf.lending_setting().tabular
    pol, _ = cf.load_checkpoint(path, m)
    assert json.loads(proc.stdout)["C"] == cf.decompose(m, pol, 7).C


def test_coupled_systems_default_to_2000_worlds_and_report_lambda(capsys):
    """On coupled units --n counts worlds (default 2000) and Lambda comes from unit-alone
    forks: both groups take threshold 0.5, so their chances are equal and Lambda is 0."""
    assert main(["decompose", "--system", "replicator-1", "--param", "horizon=5",
                 "--policy", "action:2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 2000 and out["benefit"]["Lambda"] == 0.0


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

    monkeypatch.setattr(command, "exact_numbers", broken)
    with pytest.raises(ValueError, match="an internal bug"):
        main(["decompose", "--system", "lending-1"])
    monkeypatch.undo()
    assert main(["decompose", "--system", "lending-1", "--horizon", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--horizon: must be an integer >= 1, got 0." in err


def test_negative_worst_is_refused(capsys):
    assert main(["decompose", "--worst", "-3"]) == 2
    assert "--worst: must be an integer >= 1, got -3." in capsys.readouterr().err

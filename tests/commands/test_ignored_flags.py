"""h8cli F4: options that only act with another one are refused without it, naming both,
before any audit runs (``--mlflow-experiment`` without ``--mlflow``, ``gate
--junit-inconclusive`` without ``--junit``: accepted and ignored, the gate's exit code its
verdict's)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec(tmp_path):
    shutil.copy(ROOT / "audits" / "lending-1.toml", tmp_path / "lending-1.toml")
    return tmp_path / "lending-1.toml"


@pytest.mark.parametrize("command", [["audit", "--no-report"], ["gate"]])
def test_mlflow_experiment_without_mlflow_is_refused(tmp_path, cli_here, spec, command):
    p = cli_here(*command, spec, "--mlflow-experiment", "mine", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--mlflow-experiment mine: only with --mlflow" in p.stderr
    assert p.stdout == ""


def test_junit_inconclusive_without_junit_is_refused(tmp_path, cli_here, spec):
    p = cli_here("gate", spec, "--junit-inconclusive", "skipped", cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--junit-inconclusive skipped: only with --junit PATH" in p.stderr
    assert p.stdout == ""


def test_junit_inconclusive_with_junit_is_taken(tmp_path, cli_here, spec):
    p = cli_here("gate", spec, "--junit-inconclusive", "skipped", "--junit",
                 tmp_path / "g.xml", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert (tmp_path / "g.xml").is_file()

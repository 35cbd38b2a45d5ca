"""`causalfair audit` honours a spec's `timeout` (and `--timeout`) the way the gate does:
one function, causalfair.audit.gate.audit_within."""

from __future__ import annotations

from pathlib import Path

import pytest

from causalfair.audit import audit, load_spec
from causalfair.audit.gate import audit_within
from causalfair.errors import ResourceLimitError
from tests.conftest import one_line_error, run_cli

ROOT = Path(__file__).resolve().parents[2]
SLOW = """name = "slow"
{timeout}
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[engine]
kind = "mc"
n = 3000000
[thresholds]
abs_C = 0.5
"""


def test_spec_timeout_stops_the_audit_command(tmp_path):
    spec = tmp_path / "slow.toml"
    spec.write_text(SLOW.format(timeout="timeout = 0.5"))
    err = one_line_error(run_cli("audit", spec, "--no-report"))
    assert "stopped after its time limit of 0.5 s" in err and str(spec) in err


def test_cli_timeout_applies_without_a_spec_timeout(tmp_path):
    spec = tmp_path / "slow.toml"
    spec.write_text(SLOW.format(timeout=""))
    err = one_line_error(run_cli("audit", spec, "--no-report", "--timeout", "0.5"))
    assert "stopped after its time limit of 0.5 s" in err


def test_a_limited_audit_in_its_worker_gives_the_same_numbers():
    spec = load_spec(ROOT / "audits" / "lending-1.toml")
    here = audit(spec).to_dict()
    there = audit_within(spec, 120).to_dict()  # runs in a worker process
    for key in ("decomposition", "verdicts", "overall"):
        assert there[key] == here[key]


def test_audit_within_raises_a_resource_limit_error(tmp_path):
    spec = tmp_path / "slow.toml"
    spec.write_text(SLOW.format(timeout=""))
    with pytest.raises(ResourceLimitError, match="time limit of 0.3 s"):
        audit_within(load_spec(spec), 0.3)

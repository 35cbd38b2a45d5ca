"""The composite GitHub Action (action.yml): its gate step, run here with bash
as the runner would run it, writes the verdict table to the job summary (appending),
the JUnit file and the exit-code output, and exits with the gate's code."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[1]
SPEC = 'name = "{n}"\nhorizon = 5\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "{p}"\n' \
       '[thresholds]\nabs_C = {t}\n'


def _step(step_id: str) -> dict:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    return next(s for s in action["runs"]["steps"] if s.get("id") == step_id)


def _run_gate_step(tmp: Path, specs: str, args: str = "") -> tuple[int, str, str]:
    step = _step("gate")
    summary, output = tmp / "summary.md", tmp / "output.txt"
    summary.write_text("earlier content\n")
    output.write_text("")
    env = dict(os.environ, CF_SPECS=specs, CF_ARGS=args, CF_JUNIT=str(tmp / "gate.xml"),
               GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary),
               RUNNER_TEMP=str(tmp), OMP_NUM_THREADS="1")
    assert set(step["env"]) == {"CF_SPECS", "CF_ARGS", "CF_JUNIT", "CF_JSON"}  # never inlined
    proc = run_cmd(["bash", "-e", "-c", step["run"]], cwd=tmp, env=env, timeout=300)
    return proc.returncode, summary.read_text(), output.read_text()


def test_the_action_writes_the_verdict_table_and_fails_with_the_gate(tmp_path):
    (tmp_path / "audits").mkdir()
    (tmp_path / "audits" / "never.toml").write_text(SPEC.format(n="never", p="never", t=1.0))
    (tmp_path / "audits" / "thr.toml").write_text(SPEC.format(n="thr", p="threshold:0.5",
                                                              t=0.001))
    code, summary, output = _run_gate_step(tmp_path, "audits/*.toml")
    assert code == 1 and output == "exit-code=1\n"
    assert summary.startswith("earlier content\n### causalfair gate: failed (2 specs)")
    import json

    doc = json.loads((tmp_path / "causalfair-gate.json").read_text())
    est = {e["name"]: e["verdicts"][0]["estimate"] for e in doc["specs"]}
    assert f"| never | abs_C <= 1 | {est['never']:.4g} | exact | PASS |" in summary
    assert f"| thr | abs_C <= 0.001 | {est['thr']:.4g} | exact | **FAIL** |" in summary
    root = ET.parse(tmp_path / "gate.xml").getroot()
    assert (root.get("tests"), root.get("failures")) == ("2", "1")
    # only the passing spec: exit 0
    code, summary, output = _run_gate_step(tmp_path, "audits/never.toml")
    assert code == 0 and output == "exit-code=0\n" and "gate: passed (1 spec)" in summary


def test_a_bad_spec_fails_the_action_with_exit_2_and_says_so(tmp_path):
    (tmp_path / "bad.toml").write_text(SPEC.format(n="bad", p="never", t=1.0).replace(
        "abs_C", "abs_CC"))
    code, summary, output = _run_gate_step(tmp_path, "bad.toml")
    assert code == 2 and output == "exit-code=2\n"
    assert "causalfair gate: error (exit code 2)" in summary
    assert ET.parse(tmp_path / "gate.xml").getroot().get("errors") == "1"


def test_the_step_exits_with_the_gates_code_not_the_summarys(tmp_path, monkeypatch):
    # before: the step ran with `bash -e`, so the job summary's `gate-merge` (exit 1: a
    # spec fails in the JSON) ended it with 1 while the gate had exited 2 (its MLflow store
    # failed after the JSON was written) and the exit-code output said 2
    import sys

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "causalfair").write_text(
        f'#!/bin/sh\n"{sys.executable}" -m causalfair "$@"; code=$?\n'
        'if [ "$1" = gate ]; then echo "causalfair gate: error: --mlflow: the store went '
        'away" >&2; exit 2; fi\nexit $code\n')
    (fake / "causalfair").chmod(0o755)
    (tmp_path / "thr.toml").write_text(SPEC.format(n="thr", p="threshold:0.5", t=0.001))
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    code, summary, output = _run_gate_step(tmp_path, "thr.toml")
    assert (code, output) == (2, "exit-code=2\n"), (code, output)
    assert "### causalfair gate: failed (1 spec)" in summary


def test_the_install_step_is_skipped_when_install_is_empty():
    step = _step("install")
    assert step["if"] == "inputs.install != ''" and "$CF_INSTALL" in step["run"]


def _run_install_step(tmp: Path, install: str) -> str:
    """The install step run with bash, a ``python`` on PATH that records its arguments."""
    fake = tmp / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "python").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$CF_LOG"\n')
    (fake / "python").chmod(0o755)
    step = _step("install")
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", CF_INSTALL=install,
               CF_ACTION_PATH="/runner/_actions/causalfair/causalfair/v1",
               CF_LOG=str(tmp / "args.txt"))
    run_cmd(["bash", "-e", "-c", step["run"]], cwd=tmp, env=env, expect=0, timeout=30)
    return (tmp / "args.txt").read_text()


def test_the_action_installs_its_own_checkout_unless_told_otherwise(tmp_path):
    """`uses: causalfair/causalfair@v1` installed causalfair from PyPI (whatever version
    it had), not the action's own version."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["inputs"]["install"]["default"] == "action"
    assert _step("install")["env"]["CF_ACTION_PATH"] == "${{ github.action_path }}"
    assert _run_install_step(tmp_path, "action").split() == [
        "-m", "pip", "install", "/runner/_actions/causalfair/causalfair/v1"]
    assert _run_install_step(tmp_path, "causalfair==1.2 --quiet").split() == [
        "-m", "pip", "install", "causalfair==1.2", "--quiet"]


def test_json_or_junit_in_args_is_refused_however_the_args_are_written(tmp_path):
    """`--json` in a multi-line `args: |` block (a newline, not a space, before it) or
    written as the prefix the gate takes (`--jso`) was not refused: the gate ran, exit 0,
    and the user's path was silently overridden by the action's (docs/scale.md: refused)."""
    (tmp_path / "never.toml").write_text(SPEC.format(n="never", p="never", t=1.0))
    for args in ("--jobs 1\n--json mine.json", "--jso mine.json", "--jobs 1\t--junit=m.xml",
                 "--json"):
        code, _, output = _run_gate_step(tmp_path, "never.toml", args)
        assert (code, output) == (2, "exit-code=2\n"), args
        assert not (tmp_path / "causalfair-gate.json").exists()
    code, _, output = _run_gate_step(tmp_path, "never.toml", "--junit-inconclusive skipped")
    assert (code, output) == (0, "exit-code=0\n")

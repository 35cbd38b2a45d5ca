"""End-to-end tests of ``causalfair audit`` and ``causalfair gate``: exit codes, JSON,
JUnit XML, broken specs, interrupted runs, retrain-on-fail."""

from __future__ import annotations

import json
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import run_cli

from causalfair.audit import INCONCLUSIVE, audit, load_spec
from causalfair.cli import main
from causalfair.report import render as report

PASSING = """
name = "ok"
horizon = 10
[model]
setting = "lending-1"
[policy]
builtin = "never"
[thresholds]
abs_DPE = 0.0
abs_IPE = 0.0
Lambda = 0.0
"""

# threshold:0.5 on lending-1, T = 10: |C| = 0.067, DPE = 0.057, Lambda = 0.15, TPR gap 0.14
FAILING = """
name = "bad"
horizon = 10
[model]
setting = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 1.0
abs_DPE = 0.01
Lambda = 0.01
abs_SPE = 5.0
"""


def spec(tmp_path: Path, text: str, name: str) -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def cli(*args, cwd=None):
    return run_cli(*args, cwd=cwd)


def test_passing_spec_exits_0(tmp_path):
    proc = cli("gate", spec(tmp_path, PASSING, "ok"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == 0
    assert [v["status"] for v in doc["specs"][0]["verdicts"]] == ["PASS"] * 3
    assert "ok: PASS" in proc.stderr


def test_failing_spec_exits_1_with_junit(tmp_path):
    junit = tmp_path / "out" / "gate.xml"
    js = tmp_path / "gate.json"
    proc = cli("gate", spec(tmp_path, FAILING, "bad"), spec(tmp_path, PASSING, "ok"),
               "--junit", junit, "--json", js)
    assert proc.returncode == 1, proc.stderr
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"bad", "ok"}
    cases = {c.get("name"): c for c in suites["bad"].findall("testcase")}
    assert set(cases) == {"abs_C <= 1", "abs_DPE <= 0.01", "Lambda <= 0.01", "abs_SPE <= 5"}
    failed = {n for n, c in cases.items() if c.find("failure") is not None}
    assert failed == {"abs_DPE <= 0.01", "Lambda <= 0.01"}
    assert suites["bad"].get("failures") == "2" and suites["bad"].get("tests") == "4"
    assert all(c.find("failure") is None for c in suites["ok"].findall("testcase"))
    assert root.get("tests") == "7" and root.get("failures") == "2"
    doc = json.loads(js.read_text())
    assert [s["overall"] for s in doc["specs"]] == ["FAIL", "PASS"]
    assert "bad: FAIL" in proc.stdout  # the human-readable table goes to stdout with --json


@pytest.mark.parametrize("text,needles", [
    ('name = "x"\n[engine]\nkind = "exactly"\n', ["[engine] kind", "'exactly'", "exact, mc"]),
    ('name = "x"\n[thresholds]\nabs_Q = 0.1\n', ["[thresholds] abs_Q", "unknown key"]),
    ('name = "x"\n[policy]\ncheckpoint = "missing.pt"\n', ["[policy] checkpoint", "missing.pt"]),
])
def test_broken_spec_exits_2_naming_the_key(tmp_path, text, needles):
    good = spec(tmp_path, PASSING, "ok")
    proc = cli("gate", good, spec(tmp_path, text, "broken"))
    assert proc.returncode == 2
    assert proc.stdout == ""  # validated before anything ran
    line = proc.stderr.strip()
    assert line.startswith("causalfair gate: error: audit spec")
    for n in needles:
        assert n in line


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["gate", str(tmp_path / "nope.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["gate", str(spec(tmp_path, PASSING, "ok")), "--inconclusive", "maybe"])
    assert e.value.code == 2
    # --retrain needs a [retrain] section
    assert main(["gate", str(spec(tmp_path, PASSING, "ok")), "--retrain"]) == 2
    assert "[retrain]: missing" in capsys.readouterr().err


def test_inconclusive_is_configurable(tmp_path, capsys):
    text = """
        name = "mc"
        horizon = 5
        [model]
        setting = "lending-1"
        [policy]
        builtin = "threshold:0.5"
        [engine]
        kind = "mc"
        n = 400
        seed = 1
    """
    pytest.importorskip("causalfair.engines.montecarlo")
    probe = audit(load_spec(spec(tmp_path, text, "probe")))
    est = abs(probe.quantities["DPE"][0])
    assert probe.quantities["DPE"][3] > 0  # a Monte Carlo standard error
    # the threshold sits at the estimate, strictly inside its own CI: INCONCLUSIVE
    p = spec(tmp_path, text + f"[thresholds]\nabs_DPE = {est!r}\n", "mc")
    junit = tmp_path / "j.xml"
    assert main(["gate", str(p), "--junit", str(junit)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["specs"][0]["verdicts"][0]["status"] == INCONCLUSIVE
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case.find("failure") is not None and case.find("failure").get("type") == INCONCLUSIVE
    assert main(["gate", str(p), "--inconclusive", "pass", "--junit", str(junit)]) == 0
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case.find("skipped") is not None and case.find("failure") is None
    assert main(["gate", str(p), "--inconclusive", "pass", "--junit", str(junit),
                 "--junit-inconclusive", "failure"]) == 0
    assert ET.parse(junit).getroot().get("failures") == "1"


def test_audit_command_writes_report(tmp_path, capsys):
    p = spec(tmp_path, FAILING, "bad")
    assert main(["audit", str(p), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Audit bad: FAIL")
    assert (tmp_path / "r" / "report.html").is_file()
    # default folder: .causalfair/reports/NAME, which git ignores (issue 15: a default
    # that does not dirty a repository)
    proc = cli("audit", p, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["overall"] == "FAIL"
    assert Path(doc["report"]) == Path(".causalfair/reports/bad")
    assert (tmp_path / ".causalfair" / "reports" / "bad" / "audit.json").is_file()
    assert (tmp_path / ".causalfair" / ".gitignore").read_text().splitlines()[-1] == "*"
    git = subprocess.run(["git", "init", "-q", str(tmp_path)], capture_output=True)
    if git.returncode == 0:
        status = subprocess.run(["git", "-C", str(tmp_path), "status", "--porcelain"],
                                capture_output=True, text=True).stdout
        assert ".causalfair" not in status


def test_interrupted_audit_leaves_no_partial_report(tmp_path, monkeypatch, capsys):
    def boom(r):
        raise KeyboardInterrupt

    figs = tuple((n, t, boom if n == "levels" else b) for n, t, b in report.FIGURES)
    monkeypatch.setattr(report, "FIGURES", figs)
    target = tmp_path / "out" / "rep"
    assert main(["audit", str(spec(tmp_path, FAILING, "bad")), "--out", str(target)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not target.exists()
    assert list((tmp_path / "out").iterdir()) == []


def _train_checkpoint(tmp_path: Path) -> Path:
    from causalfair.train import TrainConfig, train

    res = train(TrainConfig(algo="ppo", iterations=3, n_individuals=64, horizon=10, seed=0),
                out=tmp_path / "run")
    ck = tmp_path / "ppo.pt"
    ck.write_bytes(Path(res.checkpoint).read_bytes())
    return ck


@pytest.mark.slow
def test_retrain_writes_beside_and_reaudits(tmp_path):
    pytest.importorskip("causalfair.train")
    ck = _train_checkpoint(tmp_path)
    original = ck.read_bytes()
    text = f"""
        name = "ppo"
        horizon = 10
        [policy]
        checkpoint = "{ck.name}"
        [thresholds]
        abs_DPE = 0.0
        [retrain]
        algo = "ppo-cb"
        iterations = 2
        betas = {{ C = 20.0, Lambda = 2.0 }}
        seed = 0
    """
    p = spec(tmp_path, text, "ppo")
    (tmp_path / "ppo.retrained-ppo-cb-1.pt").write_bytes(b"taken")  # must not be overwritten
    js = tmp_path / "g.json"
    proc = cli("gate", p, "--retrain", "--json", js, "--reports", tmp_path / "reports")
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(js.read_text())["specs"][0]
    assert doc["before"]["overall"] == "FAIL"
    new = Path(doc["retrained_checkpoint"])
    assert new.name == "ppo.retrained-ppo-cb-2.pt" and new.parent == tmp_path
    assert (tmp_path / "ppo.retrained-ppo-cb-1.pt").read_bytes() == b"taken"
    assert ck.read_bytes() == original
    assert doc["after"]["checkpoint_sha256"] != doc["checkpoint_sha256"]
    md = (tmp_path / "reports" / "ppo" / "report.md").read_text()
    assert "Before and after retraining" in md
    assert "->" in proc.stdout  # side-by-side table

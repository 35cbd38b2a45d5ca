"""End-to-end tests of ``causalfair audit`` and ``causalfair gate``: exit codes, JSON,
JUnit XML, broken specs, interrupted runs, retrain-on-fail."""

from __future__ import annotations

import json
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from causalfair.audit import INCONCLUSIVE, audit, load_spec
from causalfair.cli import main
from causalfair.report import render as report
from tests.conftest import (
    SMALL_SPEC,
    describe,
    failing_simulator,
    one_line_error,
    run_cli,
    run_cmd,
)

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
    proc = cli("gate", spec(tmp_path, PASSING, "ok"), "--json", "-")
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
    assert main(["gate", str(p), "--junit", str(junit), "--json", "-"]) == 1
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
    # default folder: .causalfair/reports/NAME, which git ignores (a default
    # that does not dirty a repository)
    proc = cli("audit", p, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["overall"] == "FAIL"
    assert Path(doc["report"]) == Path(".causalfair/reports/bad")
    assert (tmp_path / ".causalfair" / "reports" / "bad" / "audit.json").is_file()
    assert (tmp_path / ".causalfair" / ".gitignore").read_text().splitlines()[-1] == "*"
    if shutil.which("git"):
        run_cmd(["git", "init", "-q", tmp_path], expect=0)
        status = run_cmd(["git", "-C", tmp_path, "status", "--porcelain"], expect=0)
        assert ".causalfair" not in status.stdout, describe(status)


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
def test_retrain_writes_beside_and_reaudits(tmp_path, cli_here):
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
    # in this process: the training has imported torch here already
    proc = cli_here("gate", p, "--retrain", "--json", js, "--reports", tmp_path / "reports",
                    cwd=Path.cwd())
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


OK = 'name = "{n}"\nhorizon = 5\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "never"\n'


def test_a_spec_without_thresholds_is_an_error_but_an_empty_table_is_explicit(tmp_path, capsys):
    (tmp_path / "a.toml").write_text(OK.format(n="a"))
    assert main(["gate", str(tmp_path / "a.toml")]) == 2
    assert "[thresholds]: missing; a gate without thresholds passes everything" in \
        capsys.readouterr().err
    (tmp_path / "b.toml").write_text(OK.format(n="b") + "[thresholds]\n")
    assert main(["gate", str(tmp_path / "b.toml")]) == 0


def test_bad_specs_still_write_junit_with_error_cases(tmp_path, capsys):
    (tmp_path / "good.toml").write_text(OK.format(n="good") + "[thresholds]\nabs_C = 1.0\n")
    (tmp_path / "typo.toml").write_text(OK.format(n="typo") + "[thresholds]\nabs_CC = 1.0\n")
    (tmp_path / "pol.toml").write_text(OK.format(n="pol").replace("never", "threshold:x")
                                       + "[thresholds]\nabs_C = 1.0\n")
    junit = tmp_path / "gate.xml"
    code = main(["gate", str(tmp_path / "good.toml"), str(tmp_path / "typo.toml"),
                 str(tmp_path / "pol.toml"), "--junit", str(junit)])
    assert code == 2
    err = capsys.readouterr().err
    assert "2 of 3 specs are invalid" in err and "abs_CC: unknown key" in err
    root = ET.parse(junit).getroot()
    assert root.get("errors") == "2" and root.get("failures") == "0"
    messages = [e.get("message") for e in root.iter("error")]
    assert any("typo.toml" in m for m in messages) and any("pol.toml" in m for m in messages)


def test_accept_repaired_needs_retrain(tmp_path, capsys):
    (tmp_path / "b.toml").write_text(OK.format(n="b") + "[thresholds]\n")
    assert main(["gate", str(tmp_path / "b.toml"), "--accept-repaired"]) == 2
    assert "--accept-repaired: only with --retrain." in capsys.readouterr().err


def test_shards_merge_to_the_unsharded_verdicts(tmp_path, capsys):
    specs = []
    for i, (builtin, thr) in enumerate([("never", 1.0), ("threshold:0.5", 0.001),
                                        ("always", 0.01), ("blind:0.5", 0.5)]):
        p = tmp_path / f"s{i}.toml"
        p.write_text(OK.format(n=f"s{i}").replace("never", builtin)
                     + f"[thresholds]\nabs_C = {thr}\n")
        specs.append(str(p))
    full = main(["gate", *specs, "--json", str(tmp_path / "full.json"),
                 "--junit", str(tmp_path / "full.xml")])
    codes = []
    for k in (1, 2, 3):
        codes.append(main(["gate", *specs, "--shard", f"{k}/3", "--json",
                           str(tmp_path / f"sh{k}.json"), "--junit", str(tmp_path / f"sh{k}.xml")]))
    merged = main(["gate-merge", *(str(tmp_path / f"sh{k}.json") for k in (1, 2, 3)),
                   "--junit-in", *(str(tmp_path / f"sh{k}.xml") for k in (1, 2, 3)),
                   "--json", str(tmp_path / "m.json"), "--junit", str(tmp_path / "m.xml")])
    assert merged == full == 1 and max(codes) == 1
    import json

    a = json.loads((tmp_path / "full.json").read_text())
    b = json.loads((tmp_path / "m.json").read_text())
    verdicts = lambda d: sorted((e["name"], e["overall"], json.dumps(e["verdicts"]))  # noqa: E731
                                for e in d["specs"])
    assert verdicts(a) == verdicts(b) and a["exit_code"] == b["exit_code"]
    ra, rb = ET.parse(tmp_path / "full.xml").getroot(), ET.parse(tmp_path / "m.xml").getroot()
    assert (ra.get("tests"), ra.get("failures")) == (rb.get("tests"), rb.get("failures"))
    assert sorted(s.get("name") for s in ra) == sorted(s.get("name") for s in rb)
    assert main(["gate", *specs, "--shard", "4/3"]) == 2


CRASH = failing_simulator('raise RuntimeError("the simulator broke")',
                          head="from clinic import make_clinic")


def test_jobs_give_the_same_json_and_junit_and_a_crash_is_named(tmp_path, capsys):
    import shutil
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "docs" / "examples" / "clinic.py", tmp_path / "clinic.py")
    specs = []
    # a slow Monte Carlo spec first, so with two workers it finishes after the others
    for i, (extra, thr) in enumerate([('[engine]\nkind = "mc"\nn = 60000\n', 0.01),
                                      ("", 0.001), ("", 1.0)]):
        p = tmp_path / f"s{i}.toml"
        p.write_text(OK.format(n=f"s{i}").replace("never", "threshold:0.5") + extra
                     + f"[thresholds]\nabs_C = {thr}\n")
        specs.append(str(p))
    outs = {}
    for jobs in ("1", "2"):
        code = main(["gate", *specs, "--jobs", jobs, "--json", str(tmp_path / f"g{jobs}.json"),
                     "--junit", str(tmp_path / f"g{jobs}.xml")])
        outs[jobs] = (code, (tmp_path / f"g{jobs}.json").read_bytes(),
                      __import__("re").sub(rb'time="[0-9.]+"', b"",
                                           (tmp_path / f"g{jobs}.xml").read_bytes()))
    assert outs["1"] == outs["2"]
    (tmp_path / "broken.py").write_text(CRASH)
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[system]\nfactory = "broken:make"\n[policy]\n'
                   'builtin = "always"\n[engine]\nkind = "mc"\nn = 100\n[thresholds]\nabs_C = 1\n')
    capsys.readouterr()
    for jobs in ("1", "2"):
        assert main(["gate", specs[2], str(bad), "--jobs", jobs,
                     "--junit", str(tmp_path / "b.xml")]) == 2
        err = capsys.readouterr().err
        assert "bad.toml: the audit failed: " in err and "the simulator broke" in err
        assert ET.parse(tmp_path / "b.xml").getroot().get("errors") == "1"
    sys.modules.pop("clinic", None)
    sys.modules.pop("broken", None)


def test_gate_checks_every_spec_before_auditing_any(tmp_path):
    for i, builtin in enumerate(["never", "always", "threshold:abc"]):
        (tmp_path / f"s{i}.toml").write_text(SMALL_SPEC.replace('name = "rel"', f'name = "s{i}"')
                                             .replace("threshold:0.5", builtin))
    err = one_line_error(cli("gate", "s0.toml", "s1.toml", "s2.toml", "--reports", "reps",
                             cwd=tmp_path))
    assert "s2.toml" in err and "[policy] builtin" in err and "'abc'" in err
    assert not (tmp_path / "reps").exists()  # nothing was audited or written

"""Gate follow-ups: one form for a spec that could not be audited, fixed decimals in the
console's verdict lines, a [baseline] without [baseline.thresholds], GitHub annotations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from causalfair.audit.gate import SpecFailure, _error_entry
from causalfair.audit.spec import load_spec
from causalfair.backends import TaskError
from causalfair.cli import main
from causalfair.thresholds import FAIL, INCONCLUSIVE, Verdict
from tests.test_ci_user import BAD_AND_SLOW, SPEC

MC = """name = "{name}"
horizon = 5
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[engine]
kind = "mc"
n = 2000
seed = 3
[thresholds]
abs_C = {thr}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return p


# ------------------------------------------------ 1. one form for a spec not audited

def test_user_code_errors_and_worker_deaths_read_alike(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = load_spec(_write(tmp_path, "m", SPEC.format(name="m", builtin="never", thr=1.0)))
    raised = _error_entry(spec, SpecFailure(
        f"audit spec {spec.path}: the audit failed: policy raised RuntimeError: down",
        "InputError"))
    died = _error_entry(spec, TaskError("WorkerError",
                                        "worker failed: its process ended (killed by SIGKILL)"))
    slow = _error_entry(spec, TaskError("TimeoutError", "stopped after its time limit of 2 s "
                                        "(raise the limit with the spec's timeout or --timeout)",
                                        input_error=True))
    retrain = _error_entry(spec, SpecFailure(f"audit spec {spec.path}: no room for 64", "X"),
                           "retrain")
    # before: "m.toml: the audit failed: WorkerError: ..." without "audit spec" nor a fix,
    # and "audit spec m.toml: no room for 64 (in its retrain)."
    assert raised.error == "audit spec m.toml: the audit failed: policy raised RuntimeError: down"
    assert died.error.startswith("audit spec m.toml: the audit failed: WorkerError: worker "
                                 "failed: its process ended (killed by SIGKILL); its worker "
                                 "process died: if it ran out of memory"), died.error
    assert "--jobs" in died.error and died.error.endswith(".")
    # a worker that exited by itself (exit code 0 or 3) was not killed: no memory hint
    for code in (0, 3):
        gone = _error_entry(spec, TaskError(
            "WorkerError", f"worker failed: its process ended (exit code {code})"))
        assert "out of memory" not in gone.error, gone.error
        assert gone.error.endswith(f"(exit code {code}); its worker process exited before it "
                                   "answered (code that calls sys.exit or os._exit?): run the "
                                   "spec alone to see why."), gone.error
    assert slow.error == ("audit spec m.toml: the audit failed: TimeoutError: stopped after its "
                          "time limit of 2 s (raise the limit with the spec's timeout or "
                          "--timeout)")
    assert retrain.error == "audit spec m.toml: the retrain failed: no room for 64"
    crash = _error_entry(spec, TaskError("ValueError", "boom", "Traceback ..."), "retrain")
    assert crash.error == ("audit spec m.toml: the retrain failed: ValueError: boom; its "
                           "traceback is on stderr."), crash.error
    assert crash.traceback == "Traceback ..."


def test_the_gate_json_and_junit_carry_the_one_form(tmp_path, monkeypatch, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "pols.py").write_text(BAD_AND_SLOW)
    for name in ("bad", "slow"):
        _write(tmp_path / "m", name, ("timeout = 3\n" if name == "slow" else "")
               + SPEC.format(name=name, builtin="never", thr=1.0).replace(
                   'builtin = "never"', f'factory = "pols:{name}"'))
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "m/bad.toml", "m/slow.toml", "--json", "g.json",
                 "--junit", "g.xml"]) == 2
    err = capsys.readouterr().err
    msgs = [e["error"] for e in json.loads(Path("g.json").read_text())["specs"]]
    assert msgs[0].startswith("audit spec m/bad.toml: the audit failed: "), msgs
    assert msgs[1].startswith("audit spec m/slow.toml: the audit failed: TimeoutError: "
                              "stopped after its time limit of 3 s (raise the limit"), msgs
    xml = Path("g.xml").read_text()
    for m in msgs:
        assert f"causalfair gate: error: {m}" in err
        assert m.replace("'", "&apos;") in xml or m in xml.replace("&apos;", "'")


# ------------------------------------------------ 2. fixed decimals in the console

def test_verdict_message_fixed_decimals_only_when_asked():
    v = Verdict("abs_C", 0.05, 0.2217, 0.178217, 0.26526, FAIL)
    assert v.message() == ("abs_C = 0.2217 (CI [0.178217, 0.26526]): FAIL (outside "
                           "threshold 0.05)")
    assert v.message(fixed_decimals=True) == ("abs_C = 0.221700 (CI [0.178217, 0.265260]): "
                                              "FAIL (outside threshold 0.05)")
    assert Verdict("C", 0.1, -1e-9, -1e-9, -1e-9, FAIL).message(fixed_decimals=True) \
        .startswith("C = 0.000000:")


def test_the_console_verdict_line_has_six_decimals_and_json_full_precision(tmp_path, capsys):
    p = _write(tmp_path, "mc", MC.format(name="mc", thr=0.01))
    assert main(["audit", str(p), "--no-report", "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    v = doc["verdicts"][0]
    assert v["lower"] != v["upper"]
    from causalfair.audit import audit
    res = audit(load_spec(p))
    line = next(ln for ln in res.summary().splitlines() if "abs_C = " in ln)
    # before: "abs_C = 0.0351 (CI [0.0291208, 0.0411])": 6 significant figures
    assert re.search(r"abs_C = \d+\.\d{6} \(CI \[-?\d+\.\d{6}, -?\d+\.\d{6}\]\)", line), line
    assert f"{res.verdicts[0].upper:.6f}" in line
    assert res.verdicts[0].upper == v["upper"]  # the JSON keeps every digit
    assert len(repr(v["upper"])) > 10


# ------------------------------------------------ 3. [baseline] without thresholds

def test_a_baseline_without_thresholds_compares_as_the_cli_baseline_does(tmp_path, capsys):
    plain = _write(tmp_path, "p", SPEC.format(name="p", builtin="threshold:0.5", thr=1.0))
    base = _write(tmp_path, "b", plain.read_text().replace('name = "p"', 'name = "b"')
                  + '[baseline]\nbuiltin = "never"\n')
    # before: refused, "[baseline.thresholds]: missing or empty"
    assert main(["audit", str(base), "--no-report", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(["audit", str(plain), "--baseline", "never", "--no-report", "--json"]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["attribution"] == b["attribution"] and a["attribution"]["line"]
    assert [v["key"] for v in a["verdicts"]] == ["abs_C"]  # nothing judged against it
    assert main(["gate", str(base), "--json", str(tmp_path / "g.json")]) == 0
    assert "why: C moved" in capsys.readouterr().out
    # an explicit empty table is still refused, naming the fix
    empty = _write(tmp_path, "e", base.read_text() + "[baseline.thresholds]\n")
    assert main(["audit", str(empty), "--no-report"]) == 2
    assert "remove the table" in capsys.readouterr().err


def test_the_schema_takes_a_baseline_without_thresholds():
    jsonschema = pytest.importorskip("jsonschema")
    import tomllib
    root = Path(__file__).resolve().parents[1]
    schema = json.loads((root / "docs/schema/spec.schema.json").read_text())
    doc = tomllib.loads(SPEC.format(name="p", builtin="never", thr=1.0)
                        + '[baseline]\nbuiltin = "never"\n')
    jsonschema.validate(doc, schema)  # before: 'thresholds' is a required property


# ------------------------------------------------ 4. GitHub annotations

def _gate_two(tmp_path: Path, monkeypatch, capsys, env: str | None, *flags: str) -> list[str]:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "ok", SPEC.format(name="ok", builtin="never", thr=1.0))
    _write(tmp_path, "bad", SPEC.format(name="bad", builtin="threshold:0.5", thr=0.001))
    if env is None:
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    else:
        monkeypatch.setenv("GITHUB_ACTIONS", env)
    assert main(["gate", "ok.toml", "bad.toml", *flags]) == 1
    return [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("::")]


def test_annotations_on_github_and_off_elsewhere(tmp_path, monkeypatch, capsys):
    on = _gate_two(tmp_path, monkeypatch, capsys, "true")
    assert len(on) == 1, on  # the failing spec only
    assert on[0].startswith("::error file=bad.toml,title=causalfair gate bad::FAIL: abs_C = "), on
    assert "(outside threshold 0.001)" in on[0]
    assert _gate_two(tmp_path, monkeypatch, capsys, None) == []
    assert _gate_two(tmp_path, monkeypatch, capsys, "false") == []
    assert _gate_two(tmp_path, monkeypatch, capsys, "true", "--no-annotations") == []
    assert _gate_two(tmp_path, monkeypatch, capsys, None, "--annotations") == on


def test_an_inconclusive_counted_as_pass_is_a_warning_and_errors_are_errors(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    from causalfair.audit import audit
    est = audit(load_spec(_write(tmp_path, "u", MC.format(name="u", thr=1.0)))).verdicts[0]
    _write(tmp_path, "u", MC.format(name="u", thr=round(est.estimate, 6)))
    assert main(["gate", "u.toml", "--inconclusive", "pass"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("::")]
    assert lines and lines[0].startswith(
        f"::warning file=u.toml,title=causalfair gate u::{INCONCLUSIVE}: abs_C = "), lines
    assert main(["gate", "u.toml"]) == 1  # counted as a fail: an error
    assert capsys.readouterr().out.count("::error file=u.toml,") == 1
    # a spec that cannot be audited (a missing checkpoint): an error naming the fix
    _write(tmp_path, "gone", SPEC.format(name="gone", builtin="never", thr=1.0).replace(
        'builtin = "never"', 'checkpoint = "gone.pt"'))
    assert main(["gate", "gone.toml", "--json", "-"]) == 2
    out = capsys.readouterr()
    json.loads(out.out)  # --json -: stdout stays the JSON, the annotations go to stderr
    err = [ln for ln in out.err.splitlines() if ln.startswith("::error")]
    assert len(err) == 1 and err[0].startswith(
        "::error file=gone.toml,title=causalfair gate gone::audit spec"), err


def test_workflow_command_escaping():
    from causalfair.commands.gate import _data, _prop

    assert _data("50% down\r\nnext") == "50%25 down%0D%0Anext"
    assert _prop("a: b, 5%\n") == "a%3A b%2C 5%25%0A"
    # before: only C0 controls were escaped: a CSI (0x9b), a bidi override or U+2028 in a
    # spec's file name reached the job log (stderr with --json -) as they are
    assert _data("a\x9b2J\u202eb\u2028c\udcff\x1b") == "a\\x9b2J\\u202eb\\u2028c\\udcff\\x1b"

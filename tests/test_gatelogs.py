"""Leftovers of the gate and log walkthroughs: gate-merge annotates as the gate does (one
function), the gate removes the report folders it wrote for specs it no longer gates, a
log audit fits its model once for a candidate policy, own-system.md hides no failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from causalfair.cli import main
from tests.test_ci_user import BAD_AND_SLOW, SPEC

ROOT = Path(__file__).resolve().parents[1]

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


def _write(folder: Path, name: str, text: str) -> str:
    (folder / f"{name}.toml").write_text(text)
    return f"{name}.toml"


def _notes(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("::")]


# ------------------------------------------------ 1. gate-merge annotates as the gate does

@pytest.fixture()
def four_specs(tmp_path, monkeypatch):
    """ok (PASS), bad (FAIL), u (INCONCLUSIVE), broken (its policy raises: ERROR)."""
    from causalfair.audit import audit
    from causalfair.audit.spec import load_spec

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pols.py").write_text(BAD_AND_SLOW)
    est = audit(load_spec(_write(tmp_path, "u", MC.format(name="u", thr=1.0)))).verdicts[0]
    return [_write(tmp_path, "ok", SPEC.format(name="ok", builtin="never", thr=1.0)),
            _write(tmp_path, "bad", SPEC.format(name="bad", builtin="threshold:0.5", thr=0.001)),
            _write(tmp_path, "u", MC.format(name="u", thr=round(est.estimate, 6))),
            _write(tmp_path, "broken", SPEC.format(name="broken", builtin="never", thr=1.0)
                   .replace('builtin = "never"', 'factory = "pols:bad"'))]


@pytest.mark.parametrize("inconclusive", ["pass", "fail"])
def test_gate_merge_prints_the_gates_annotations(four_specs, monkeypatch, capsys, inconclusive):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    mode = ["--inconclusive", inconclusive]
    assert main(["gate", *four_specs, *mode]) == 2
    gate = _notes(capsys.readouterr().out)
    # the gate's own: an error for bad and broken, u per --inconclusive
    assert [n.split("::")[1].split(",")[0] for n in gate] == [
        "error file=bad.toml", ("warning" if inconclusive == "pass" else "error")
        + " file=u.toml", "error file=broken.toml"], gate
    for k in (1, 2):
        main(["gate", *four_specs, *mode, "--shard", f"{k}/2", "--json", f"sh{k}.json"])
    capsys.readouterr()
    assert main(["gate-merge", "sh2.json", "sh1.json", "--json", "m.json"]) == 2
    out = capsys.readouterr()
    # before: none; now the gate's, in the gate's order, on stderr (stdout: the JSON's)
    assert _notes(out.err) == gate, out.err
    assert _notes(out.out) == []
    assert main(["gate-merge", "sh1.json", "sh2.json", "--markdown"]) == 2
    out = capsys.readouterr()
    assert _notes(out.err) == gate and out.out.startswith("### causalfair gate"), out
    assert main(["gate-merge", "sh1.json", "sh2.json", "--json", "m.json",
                 "--no-annotations"]) == 2
    assert _notes(capsys.readouterr().err) == []
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert main(["gate-merge", "sh1.json", "sh2.json", "--json", "m.json"]) == 2
    assert _notes(capsys.readouterr().err) == []
    assert main(["gate-merge", "sh1.json", "sh2.json", "--json", "m.json",
                 "--annotations"]) == 2
    assert _notes(capsys.readouterr().err) == gate


def test_one_function_writes_the_annotations_of_both_commands():
    """No second implementation: both commands call commands.gate.annotate (the gate's
    JSON summary in, workflow commands out)."""
    gate = (ROOT / "causalfair" / "commands" / "gate.py").read_text()
    merge = (ROOT / "causalfair" / "commands" / "gate_merge.py").read_text()
    assert len(re.findall(r"\bannotate\(", gate)) == 3  # its definition, two calls
    assert len(re.findall(r"\bannotate\(", merge)) == 1
    assert "::{level}" not in merge and "title=" not in merge


def test_annotations_of_a_summary_read_back_from_json():
    """A summary read back from JSON (NaN written as null, a repair not taken) annotates
    as the gate's objects did."""
    from causalfair.audit.shards import annotations

    v = {"key": "abs_C", "threshold": 0.05, "estimate": 0.1, "lower": 0.08, "upper": 0.12,
         "status": "FAIL"}
    held = {"name": "r", "spec": "r.toml", "overall": "PASS",
            "verdicts": [{**v, "estimate": 0.01, "lower": 0.0, "upper": 0.02, "status": "PASS"}],
            "before": {"overall": "FAIL", "verdicts": [v]}, "after": {}}
    nan = {"name": "n", "spec": "n.toml", "overall": "INCONCLUSIVE",
           "verdicts": [{**v, "estimate": None, "lower": None, "upper": None,
                         "status": "INCONCLUSIVE"}]}
    doc = {"inconclusive": "pass", "accept_repaired": False, "specs": [held, nan]}
    assert annotations(doc) == [
        ("error", "r.toml", "r", "FAIL: abs_C = 0.100000 (CI [0.080000, 0.120000]): FAIL "
         "(outside threshold 0.05); its repair: PASS; commit it or pass --accept-repaired"),
        ("warning", "n.toml", "n", "INCONCLUSIVE: abs_C = nan (CI [nan, nan]): INCONCLUSIVE "
         "(straddles threshold 0.05)")]
    assert annotations({**doc, "accept_repaired": True}) == annotations(doc)[1:]


# ------------------------------------------------ 2. stale report folders of the gate's own

def _quick_reports(monkeypatch) -> None:
    """Report folders written as the gate writes them (write_folder, causalfair's
    manifest), without rendering the figures."""
    from causalfair._io import write_folder
    from causalfair.audit.result import AuditResult

    def write(self, out, *, before=None):
        return write_folder(out, lambda tmp: (tmp / "report.md").write_text(self.overall))

    monkeypatch.setattr(AuditResult, "write_report", write)


def test_the_gate_removes_its_reports_of_specs_it_no_longer_gates(tmp_path, monkeypatch,
                                                                  capsys):
    from causalfair._io import MANIFEST, write_folder
    from causalfair.audit.stale_reports import INDEX

    monkeypatch.chdir(tmp_path)
    _quick_reports(monkeypatch)
    a, b, c, d = (_write(tmp_path, n, SPEC.format(name=n, builtin="never", thr=1.0))
                  for n in "abcd")
    assert main(["gate", a, b, c, d, "--reports", "R"]) == 0
    R = tmp_path / "R"
    assert {"a", "b", "c", "d"} <= {p.name for p in R.iterdir()}
    # what the gate did not write: a user's folder and file, an audit's report (causalfair's
    # manifest, but no gate's record), and a gated folder the user made their own
    (R / "mine").mkdir()
    (R / "mine" / "notes.md").write_text("mine")
    (R / "notes.txt").write_text("mine")
    write_folder(R / "audited", lambda tmp: (tmp / "report.md").write_text("audit --out"))
    (R / "c" / MANIFEST).unlink()
    outside = tmp_path / "outside"  # a link the record would name: never followed
    write_folder(outside, lambda tmp: (tmp / "report.md").write_text("elsewhere"))
    (R / "d").rename(tmp_path / "d-moved")
    (R / "d").symlink_to(outside)
    for spec in (b, c, d):  # removed from the repository
        Path(spec).unlink()
    (tmp_path / a).write_text(SPEC.format(name="a2", builtin="never", thr=1.0))  # renamed
    assert main(["gate", a, "--reports", "R"]) == 0
    capsys.readouterr()
    # before: a and b stayed, read as reports of this run in the artefact
    assert sorted(p.name for p in R.iterdir()) == sorted(
        [INDEX, "a2", "audited", "c", "d", "mine", "notes.txt"])
    assert (R / "mine" / "notes.md").is_file() and (R / "audited" / "report.md").is_file()
    assert (R / "c" / "report.md").is_file() and (outside / "report.md").is_file()
    assert json.loads((R / INDEX).read_text())["reports"] == ["a2"]


def test_shards_in_one_folder_keep_each_others_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _quick_reports(monkeypatch)
    specs = [_write(tmp_path, n, SPEC.format(name=n, builtin="never", thr=1.0)) for n in "xyz"]
    for k in (1, 2, 1):  # shard 1 again: a rerun of its job
        assert main(["gate", *specs, "--shard", f"{k}/2", "--reports", "R"]) == 0
    assert sorted(p.name for p in (tmp_path / "R").iterdir() if p.is_dir()) == ["x", "y", "z"]
    Path(specs[2]).unlink()  # z leaves the gate: its report goes with the next shard run
    assert main(["gate", *specs[:2], "--shard", "2/2", "--reports", "R"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "R").iterdir() if p.is_dir()) == ["x", "y"]


# ------------------------------------------------ 4. a log audit fits its model once

@pytest.fixture()
def counted_fits(monkeypatch):
    """How many times the log's model is fitted (bootstrap replicates aside)."""
    import causalfair.logs.audit as log_audit

    calls = []
    fit = log_audit.fit_model

    def counting(*args, **kwargs):
        calls.append(1)
        return fit(*args, **kwargs)

    monkeypatch.setattr(log_audit, "fit_model", counting)
    return calls


@pytest.fixture()
def logs_here(tmp_path, monkeypatch):
    from causalfair.logs import simulate_logs
    from tests.test_followups_audit import POLICY_MODULE

    df = simulate_logs("lending-1", "random:0.5", 300, 4, seed=1)
    df["group"] = df["group"].astype(str)
    df.to_csv(tmp_path / "log.csv", index=False)
    (tmp_path / "candpol.py").write_text(POLICY_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "candpol", raising=False)
    return tmp_path


def _old_route(log: str, policy, **kw):
    """What a candidate's audit did before: fit the model, resolve the policy on it, and
    audit the resolved policy (audit_logs fitting the model again)."""
    from causalfair.logs import audit_logs, fit_logs, read_logs
    from causalfair.policies.resolver import resolve

    df = read_logs(log)
    return audit_logs(df, policy=resolve(policy, fit_logs(df)[0]).policy, **kw)


@pytest.mark.parametrize("body", ['[policy]\nfactory = "candpol:make"\nparams = { level = 4 }',
                                  '[policy]\nbuiltin = "threshold:0.6"'])
def test_a_logs_spec_fits_its_model_once_with_the_same_numbers(logs_here, counted_fits, body):
    import causalfair as cf

    (logs_here / "c.toml").write_text(f'name = "c"\n[logs]\npath = "log.csv"\nn_boot = 4\n'
                                      f'{body}\n[thresholds]\nabs_C = 1\n')
    res = cf.audit("c.toml")
    assert len(counted_fits) == 1  # before: 2 for the factory (1 for a builtin)
    from candpol import make

    old = _old_route("log.csv", make(4) if "factory" in body else "threshold:0.6",
                     n_boot=4, seed=0)
    assert res.decomposition.estimates() == old.decomposition.estimates()
    assert res.decomposition.se == old.decomposition.se
    assert res.benefit.Lambda == old.benefit.Lambda


def test_a_policy_passed_to_a_logs_audit_is_fitted_once(logs_here, counted_fits):
    import causalfair as cf

    (logs_here / "c.toml").write_text('name = "c"\n[logs]\npath = "log.csv"\nn_boot = 4\n'
                                      '[thresholds]\nabs_C = 1\n')
    res = cf.audit("c.toml", policy="threshold:0.6")
    assert len(counted_fits) == 1  # before: 2
    assert res.spec.builtin == "threshold:0.6"  # the report names the policy passed in
    old = _old_route("log.csv", "threshold:0.6", n_boot=4, seed=0)
    assert res.decomposition.estimates() == old.decomposition.estimates()


def test_decompose_logs_audit_policy_fits_once_bit_for_bit(logs_here, counted_fits, capsys):
    from causalfair._io import DECOMPOSE_SCHEMA_VERSION, versioned

    assert main(["decompose", "--logs", "log.csv", "--audit-policy", "--policy",
                 "candpol:make", "--boot", "4", "--json"]) == 0
    assert len(counted_fits) == 1  # before: 2
    out = json.loads(capsys.readouterr().out)
    from candpol import make

    old = versioned(DECOMPOSE_SCHEMA_VERSION, _old_route("log.csv", make(), n_boot=4,
                                                         seed=0).to_dict(0.05, n_worst=5))
    old["logs"] = "log.csv"  # n_worst: decompose's --worst default, 5
    assert out == json.loads(json.dumps(old, default=str))


def test_the_action_marks_a_failing_spec_once(tmp_path):
    """The Action's gate step runs gate (annotating) and gate-merge --markdown (its job
    summary) under GITHUB_ACTIONS=true: each failing spec is marked once, not twice."""
    import os

    from tests.conftest import run_cmd
    from tests.test_action import SPEC as ACTION_SPEC
    from tests.test_action import _step

    (tmp_path / "thr.toml").write_text(ACTION_SPEC.format(n="thr", p="threshold:0.5", t=0.001))
    summary = tmp_path / "summary.md"
    env = dict(os.environ, CF_SPECS="thr.toml", CF_ARGS="", CF_JUNIT="gate.xml", CF_JSON="",
               GITHUB_OUTPUT=str(tmp_path / "out.txt"), GITHUB_STEP_SUMMARY=str(summary),
               RUNNER_TEMP=str(tmp_path), OMP_NUM_THREADS="1", GITHUB_ACTIONS="true")
    proc = run_cmd(["bash", "-e", "-c", _step("gate")["run"]], cwd=tmp_path, env=env,
                   timeout=300)
    assert proc.returncode == 1, proc.stderr
    notes = _notes(proc.stdout + "\n" + proc.stderr)
    assert len(notes) == 1 and notes[0].startswith("::error file=thr.toml,"), notes
    assert "::" not in summary.read_text()


# ------------------------------------------------ 3. a failing log audit's repair routes

def _repair_line(res) -> str:
    """The repair line of ``res``'s report as if it failed (a small log's intervals leave
    it INCONCLUSIVE)."""
    from causalfair.report.explain import failure_drivers

    doc = json.loads(json.dumps(res.to_dict(), default=str))
    doc["overall"] = "FAIL"
    doc["verdicts"] = [{**v, "status": "FAIL"} for v in doc["verdicts"]]
    return next(x for x in failure_drivers(doc, None) if x.startswith("Repair options"))


def test_a_failing_log_audits_repair_line_names_every_candidate_route(logs_here):
    import causalfair as cf

    (logs_here / "c.toml").write_text('name = "c"\n[logs]\npath = "log.csv"\nn_boot = 4\n'
                                      '[thresholds]\nabs_C = 0.0001\n')
    line = _repair_line(cf.audit("c.toml"))
    # before: only "causalfair decompose --logs LOG --audit-policy --policy ..."
    for route in ("a [policy] table beside [logs] in c.toml", 'builtin = "threshold:0.6"',
                  'checkpoint = "ck.pt"', 'factory = "module:make"',
                  "causalfair decompose --logs log.csv --audit-policy",
                  "--policy module:make (a factory)", "--checkpoint ck.pt",
                  "audit_logs(df, policy=...)", "[retrain]"):
        assert route in line, (route, line)
    assert "audit a candidate rule" in line
    (logs_here / "c.toml").write_text('name = "c"\n[logs]\npath = "log.csv"\nn_boot = 4\n'
                                      '[policy]\nbuiltin = "threshold:0.6"\n'
                                      '[thresholds]\nabs_C = 0.0001\n')
    assert "audit another candidate" in _repair_line(cf.audit("c.toml"))  # it audited one

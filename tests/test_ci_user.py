"""A CI engineer's and a researcher's contract: a sharded gate merged without one of its
shards, or with another run's shards, checkpoints or JUnit files, is an error (exit 2),
never a pass; no output of a gate is lost or stale after an error; a bad training field
is one line naming it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

import causalfair.commands.audit as audit_cmd
import causalfair.commands.gate as gate_cmd
from causalfair.cli import main
from causalfair.errors import InputError
from tests.conftest import run_cli, run_cmd

SPEC = """name = "{name}"
horizon = 5
[system]
id = "lending-1"
[policy]
builtin = "{builtin}"
[thresholds]
abs_C = {thr}
"""

#: A policy module: bad() raises when it scores, slow() never returns.
BAD_AND_SLOW = (
    "import time\nclass Bad:\n    def prob_d1(self, obs):\n"
    "        raise RuntimeError('scoring service down')\n"
    "class Slow:\n    def prob_d1(self, obs):\n        time.sleep(60)\n"
    "def bad():\n    return Bad()\ndef slow():\n    return Slow()\n")


@pytest.fixture()
def shards(tmp_path, capsys):
    """Three specs gated as shards 1/3, 2/3, 3/3; shard 3 holds the failing spec."""
    specs = []
    for i, (builtin, thr) in enumerate([("never", 1.0), ("always", 1.0),
                                        ("threshold:0.5", 0.001)]):
        p = tmp_path / f"s{i}.toml"
        p.write_text(SPEC.format(name=f"s{i}", builtin=builtin, thr=thr))
        specs.append(str(p))
    codes = [main(["gate", *specs, "--shard", f"{k}/3", "--json", str(tmp_path / f"sh{k}.json"),
                   "--junit", str(tmp_path / f"sh{k}.xml")]) for k in (1, 2, 3)]
    assert codes == [0, 0, 1]
    capsys.readouterr()
    return tmp_path, specs


def _merge(tmp_path, ks, junit_ks=None, extra=()):
    args = ["gate-merge", *(str(tmp_path / f"sh{k}.json") for k in ks), *extra]
    if junit_ks is not None:
        args += ["--junit-in", *(str(tmp_path / f"sh{k}.xml") for k in junit_ks)]
    return main(args)


def test_a_merge_without_the_failing_shard_is_an_error_not_a_pass(shards, capsys):
    tmp_path, _ = shards
    doc = json.loads((tmp_path / "sh1.json").read_text())
    assert doc["shard"]["k"] == 1 and doc["shard"]["n"] == 3 and doc["shard"]["specs"] == 3
    assert doc["causalfair_version"]
    assert _merge(tmp_path, (1, 2, 3), (1, 2, 3)) == 1  # the whole gate: shard 3 fails
    capsys.readouterr()
    assert _merge(tmp_path, (1, 2)) == 2  # was 0: the failing spec went ungated
    err = capsys.readouterr().err
    assert "shard 3/3 missing" in err and err.count("\n") == 1, err
    assert _merge(tmp_path, (1, 1, 2, 3)) == 2
    assert "shard 1/3 given twice" in capsys.readouterr().err


def test_junit_files_must_be_those_of_the_merged_shards(shards, capsys):
    tmp_path, _ = shards
    out = tmp_path / "m.xml"
    code = _merge(tmp_path, (1, 2, 3), (1, 2), extra=("--junit", str(out)))
    err = capsys.readouterr().err
    assert code == 2 and "--junit-in" in err and "'s2'" in err, err
    assert not out.exists()  # CI never reads a JUnit file without the failing spec


def test_merged_junit_is_the_unsharded_gates_or_refused(shards, capsys):
    # before: a passing shard's JUnit file left out, given twice, or from another run was
    # merged without a word (the merged file lacked or repeated passing specs' suites)
    tmp_path, specs = shards
    out = tmp_path / "m.xml"
    for junit_ks, needle in [((2, 3), "'s0' is in the JSON but the JUnit files lack it"),
                             ((1, 1, 2, 3), "'s0' has 2 test suites")]:
        assert _merge(tmp_path, (1, 2, 3), junit_ks, extra=("--junit", str(out))) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
        assert not out.exists()
    other = tmp_path / "other.xml"  # a suite of a spec no merged JSON holds
    other.write_text((tmp_path / "sh1.xml").read_text().replace('name="s0"', 'name="zz"'))
    assert main(["gate-merge", *(str(tmp_path / f"sh{k}.json") for k in (1, 2, 3)),
                 "--junit-in", *(str(tmp_path / f"sh{k}.xml") for k in (1, 2, 3)), str(other),
                 "--junit", str(out)]) == 2
    assert "test suite 'zz', which no merged JSON summary holds" in capsys.readouterr().err
    stale = tmp_path / "sh2.xml"  # shard 2's JUnit of another run: other numbers
    text = stale.read_text()
    estimate = re.search(r'"abs_C.estimate" value="([^"]+)"', text).group(1)
    stale.write_text(text.replace(f'value="{estimate}"', 'value="0.5"', 1))
    assert _merge(tmp_path, (1, 2, 3), (1, 2, 3), extra=("--junit", str(out))) == 2
    err = capsys.readouterr().err
    assert "the test suite of spec 's1' is not its JSON entry's" in err, err
    stale.write_text(text)
    assert _merge(tmp_path, (1, 2, 3), (1, 2, 3), extra=("--junit", str(out))) == 1
    names = [s.get("name") for s in ET.parse(out).getroot()]
    assert names == ["s0", "s1", "s2"]


def test_a_retrain_shard_without_retrain_sections_gates_its_specs(tmp_path, capsys):
    # before: shard 2/2 below held only a spec without [retrain] and was refused, exit 2
    # ("[retrain]: missing"), while the unsharded `gate --retrain` gated it
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(SPEC.format(name="a", builtin="threshold:0.5", thr=0.001)
                 + '[retrain]\nalgo = "exact"\ninit = "scratch"\n')
    b.write_text(SPEC.format(name="b", builtin="never", thr=1.0))
    out = tmp_path / "sh2.json"
    code = main(["gate", str(a), str(b), "--retrain", "--shard", "2/2", "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    assert [e["overall"] for e in json.loads(out.read_text())["specs"]] == ["PASS"]
    capsys.readouterr()
    # a gate none of whose specs has [retrain] is still refused, sharded or not
    c = tmp_path / "c.toml"
    c.write_text(SPEC.format(name="c", builtin="never", thr=1.0))
    for shard in ("1/2", "2/2", "1/1"):
        assert main(["gate", str(b), str(c), "--retrain", "--shard", shard]) == 2
        assert "[retrain]: missing" in capsys.readouterr().err


def test_an_invalid_spec_in_a_sharded_gate_is_what_the_docs_say(shards, capsys):
    # docs/scale.md, "CI job matrices": the unsharded gate stops on an invalid spec before
    # any audit and lists its error alone; so does the merge of its shards (was: with the
    # other shards' verdicts, at wrong places), exit 2 (tests/commands/test_gate_merge_invalid.py)
    tmp_path, specs = shards
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC.format(name="bad", builtin="never", thr=1.0).replace("abs_C", "abs_ZZ"))
    every = [specs[0], str(bad), specs[2]]
    assert main(["gate", *every, "--json", str(tmp_path / "whole.json")]) == 2
    whole = json.loads((tmp_path / "whole.json").read_text())
    assert [e["name"] for e in whole["specs"]] == ["bad"]
    codes = [main(["gate", *every, "--shard", f"{k}/2", "--json", str(tmp_path / f"v{k}.json")])
             for k in (1, 2)]
    assert codes == [1, 2]  # shard 1: s0 and s2 (FAIL); shard 2: bad
    capsys.readouterr()
    assert main(["gate-merge", *(str(tmp_path / f"v{k}.json") for k in (1, 2)),
                 "--json", str(tmp_path / "merged.json")]) == 2
    assert (tmp_path / "merged.json").read_text() == (tmp_path / "whole.json").read_text()


def test_the_last_line_names_a_repair_not_taken():
    # before: "2 specs: 2 PASS; exit code 1" (the JSON's overall of a retrained spec is
    # its repair's), a last line that names nothing failing under a failing exit code
    ok = {"name": "a", "overall": "PASS", "verdicts": []}
    held = {"name": "b", "overall": "PASS", "verdicts": [], "after": {},
            "before": {"overall": "FAIL", "verdicts": []}}
    doc = {"exit_code": 1, "inconclusive": "fail", "accept_repaired": False,
           "specs": [ok, held]}
    assert gate_cmd.summary_line(doc) == (
        "2 specs: 2 PASS; 1 repair not taken (the checkpoint under version control: FAIL); "
        "exit code 1")
    doc.update(accept_repaired=True, exit_code=0)
    assert gate_cmd.summary_line(doc) == "2 specs: 2 PASS; exit code 0"


def _small_memory() -> None:  # the child's address space: 1.5 GiB
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


def test_a_shard_of_a_huge_n_merges_in_bounded_time_and_memory(shards):
    # before: gate-merge listed range(1, n + 1) to find the missing shards, so a shard of
    # `--shard 1/100000000000` (a typo) died of MemoryError (a traceback, exit 1), and
    # `--partial --markdown` ran for ever
    tmp_path, specs = shards
    big = tmp_path / "big.json"
    assert main(["gate", specs[0], "--shard", "1/100000000000", "--json", str(big)]) == 0
    proc = run_cli("gate-merge", big, timeout=60, preexec_fn=_small_memory)
    assert proc.returncode == 2, proc.stderr
    assert "shards 2/100000000000, 3/100000000000" in proc.stderr and ", ... missing" in proc.stderr
    proc = run_cli("gate-merge", big, "--partial", "--markdown", timeout=60,
                   preexec_fn=_small_memory)
    assert proc.returncode == 0 and "shard 1/100000000000: passed" in proc.stdout, proc.stderr


def test_shards_name_the_repairs_of_a_shared_checkpoint_as_the_unsharded_gate(tmp_path):
    # before: r1 (shard 1) and r2 (shard 2) share m.pt; each shard, on its own runner, named
    # its repair m.retrained-exact-1.pt (two different files under one name, and the merged
    # JSON named one file for both), where the unsharded gate wrote -1 and -2
    from causalfair.audit.retrain import retrain_targets
    from causalfair.audit.spec import load_spec

    ck = Path(__file__).resolve().parents[1] / "causalfair" / "examples" / "checkpoints"
    shutil.copy(ck / "lending-1-ppo.pt", tmp_path / "m.pt")
    files = []
    for name in ("r1", "p", "r2"):
        f = tmp_path / f"{name}.toml"
        body = SPEC.format(name=name, builtin="never", thr=0.01).replace(
            'builtin = "never"', 'checkpoint = "m.pt"')
        f.write_text(body + ('[retrain]\nalgo = "exact"\n' if name != "p" else ""))
        files.append(str(f))
    specs = [load_spec(f) for f in files]
    names = [[p.name for p in retrain_targets(specs, redo)] for redo in ([0, 2], [2], [0])]
    assert names == [["m.retrained-exact-1.pt", "m.retrained-exact-2.pt"],
                     ["m.retrained-exact-2.pt"], ["m.retrained-exact-1.pt"]]
    shard2 = [specs[1]]  # shard 2/2 of the list holds p; shard 1/2 holds r1 and r2
    assert retrain_targets(shard2, [], files) == []
    shard1 = [specs[0], specs[2]]
    assert [p.name for p in retrain_targets(shard1, [1], files)] == ["m.retrained-exact-2.pt"]
    three = [[specs[i]] for i in range(3)]  # --shard k/3: one spec each
    assert [p.name for p in retrain_targets(three[2], [0], files)] == ["m.retrained-exact-2.pt"]
    assert [p.name for p in retrain_targets(three[0], [0], files)] == ["m.retrained-exact-1.pt"]


def test_shards_of_another_spec_list_or_version_are_refused(shards, capsys):
    tmp_path, specs = shards
    # shard 1 rerun after a spec file changed: another gate, not a shard of this one
    with open(specs[1], "a") as fh:
        fh.write("abs_DPE = 1.0\n")
    assert main(["gate", *specs, "--shard", "1/3", "--json", str(tmp_path / "sh1.json")]) == 0
    capsys.readouterr()
    assert _merge(tmp_path, (1, 2, 3)) == 2
    assert "different sharded gates" in capsys.readouterr().err
    doc = json.loads((tmp_path / "sh2.json").read_text())
    doc["causalfair_version"] = "0.0.1"
    (tmp_path / "sh2.json").write_text(json.dumps(doc))
    assert _merge(tmp_path, (2, 3)) == 2
    assert "different causalfair versions" in capsys.readouterr().err


@pytest.mark.parametrize("setting, word", [
    ("hidden=abc", "hidden"), ("hidden=[0]", "hidden"), ("hidden=[1.5]", "hidden"),
    ("beta_c=nan", "beta_c"), ("beta_lambda=inf", "beta_lambda"), ("seed=-1", "seed"),
    ("massage_start=abc", "massage_start"), ("normalize_advantage=3", "normalize_advantage"),
])
def test_a_bad_training_field_is_one_line_naming_it(tmp_path, capsys, setting, word):
    # before: a ValueError/TypeError traceback (hidden=abc, beta_c=nan, seed=-1) or a run
    # trained on nonsense (hidden=[0], hidden=[1.5] truncated to 1, massage_start='abc')
    cmds = [["train", "--iterations", "1", "--no-progress"],
            ["sweep", "--algo", "ppo", "--seeds", "0", "--iterations", "1"]]
    for cmd in cmds[:1] if word == "seed" else cmds:  # (a sweep sets seeds itself)
        code = main([*cmd, "--set", setting, "--out", str(tmp_path / cmd[0])])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.startswith(f"causalfair {cmd[0]}: error: {word}: bad value"), err
        assert "\n" not in err and not (tmp_path / cmd[0] / "checkpoint.pt").exists()


def test_json_and_junit_on_one_path_are_refused(shards, capsys):
    tmp_path, specs = shards
    same = tmp_path / "out" / "gate.out"
    # before: the JSON silently replaced the JUnit file CI reads (exit 0)
    assert main(["gate", specs[0], "--junit", str(same), "--json", str(same)]) == 2
    err = capsys.readouterr().err
    assert "--junit" in err and "--json" in err and not same.exists(), err
    assert main(["gate-merge", *(str(tmp_path / f"sh{k}.json") for k in (1, 2, 3)),
                 "--junit-in", *(str(tmp_path / f"sh{k}.xml") for k in (1, 2, 3)),
                 "--junit", str(same), "--json", str(same)]) == 2
    assert not same.exists()


def _two_specs(tmp_path, prefix: str, policy_line: str) -> list[str]:
    """Two passing specs PREFIX0, PREFIX1 whose policy is ``policy_line`` ([policy])."""
    specs = []
    for i in range(2):
        p = tmp_path / f"{prefix}{i}.toml"
        p.write_text(SPEC.format(name=f"{prefix}{i}", builtin="never", thr=1.0).replace(
            'builtin = "never"', policy_line))
        specs.append(str(p))
    return specs


def test_a_checkpoint_changed_between_shard_runs_is_refused(tmp_path, capsys):
    ck = Path(__file__).resolve().parents[1] / "causalfair" / "examples" / "checkpoints"
    shutil.copy(ck / "lending-1-ppo.pt", tmp_path / "ck.pt")
    specs = _two_specs(tmp_path, "c", 'checkpoint = "ck.pt"')
    for k in (1, 2):
        assert main(["gate", *specs, "--shard", f"{k}/2", "--json",
                     str(tmp_path / f"sh{k}.json")]) == 0
    # shard 2 rerun after the checkpoint was replaced: its verdict is of another policy
    shutil.copy(ck / "lending-1-ppo.retrained-exact-1.pt", tmp_path / "ck.pt")
    assert main(["gate", *specs, "--shard", "2/2", "--json", str(tmp_path / "sh2.json")]) == 0
    capsys.readouterr()
    assert _merge(tmp_path, (1, 2)) == 2
    assert "checkpoint files changed" in capsys.readouterr().err


def test_a_factory_module_changed_between_shard_runs_is_refused(tmp_path, capsys):
    # before: the shards' record hashed specs and checkpoints, not the policy module
    # beside them, so shards of two versions of the policy's code merged (exit 0)
    mod = tmp_path / "pol.py"
    code = ("import numpy as np\nclass P:\n    def prob_d1(self, obs):\n"
            "        return np.full(len(obs), {p})\ndef make():\n    return P()\n")
    mod.write_text(code.format(p=0.5))
    specs = _two_specs(tmp_path, "f", 'factory = "pol:make"')
    assert main(["gate", *specs, "--shard", "1/2", "--json", str(tmp_path / "sh1.json")]) == 0
    mod.write_text(code.format(p=0.9))
    assert main(["gate", *specs, "--shard", "2/2", "--json", str(tmp_path / "sh2.json")]) == 0
    capsys.readouterr()
    assert _merge(tmp_path, (1, 2)) == 2
    assert "a factory's module, spec or checkpoint files changed" in capsys.readouterr().err
    assert main(["gate", specs[0], "--json", str(mod)]) == 2  # nor written over
    assert "is also an input" in capsys.readouterr().err and "0.9" in mod.read_text()


def test_gate_outputs_never_write_over_a_file_a_spec_reads(tmp_path, capsys):
    # before: `gate c.toml --json ck.pt` replaced the audited checkpoint with the JSON
    # summary (exit 0), `--junit log.csv` a [logs] spec's log with the JUnit file
    ck = Path(__file__).resolve().parents[1] / "causalfair" / "examples" / "checkpoints"
    shutil.copy(ck / "lending-1-ppo.pt", tmp_path / "ck.pt")
    spec = tmp_path / "c.toml"
    spec.write_text(SPEC.format(name="c", builtin="never", thr=1.0).replace(
        'builtin = "never"', 'checkpoint = "ck.pt"'))
    (tmp_path / "log.csv").write_text("id,t,group,level,decision,next_level,reward\n")
    logs = tmp_path / "l.toml"
    logs.write_text('name = "l"\n[logs]\npath = "log.csv"\n[thresholds]\nabs_C = 1.0\n')
    before = {p: p.read_bytes() for p in (tmp_path / "ck.pt", tmp_path / "log.csv")}
    for argv in ([str(spec), "--json", str(tmp_path / "ck.pt")],
                 [str(spec), str(logs), "--junit", str(tmp_path / "log.csv")]):
        assert main(["gate", *argv]) == 2
        err = capsys.readouterr().err
        assert "is also an input of this command" in err and err.count("\n") == 1, err
    assert {p: p.read_bytes() for p in before} == before


def test_an_mlflow_failure_after_the_audits_keeps_junit_and_json(shards, monkeypatch, capsys):
    tmp_path, specs = shards

    def down(*_a, **_k):
        raise InputError("--mlflow: the tracking server went away.")

    monkeypatch.setattr(audit_cmd, "open_experiment", lambda *_a, **_k: None)
    monkeypatch.setattr(gate_cmd, "log_audit", down)
    out = tmp_path / "ml"
    code = main(["gate", *specs, "--mlflow", "--junit", str(out / "g.xml"),
                 "--json", str(out / "g.json")])
    assert code == 2 and "went away" in capsys.readouterr().err
    # before: MLflow logged first, so its failure lost the verdicts of every audit
    assert json.loads((out / "g.json").read_text())["exit_code"] == 1
    assert b"<failure" in (out / "g.xml").read_bytes()


@pytest.mark.mlflow
def test_an_unusable_mlflow_store_fails_before_any_audit(tmp_path, monkeypatch, capsys):
    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("MLflow comes with the mlflow extra")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    (tmp_path / "marker_pol.py").write_text(
        "from pathlib import Path\n"
        "def make():\n"
        f"    Path({str(tmp_path / 'ran')!r}).write_text('audited')\n"
        "    return None\n")
    spec = tmp_path / "m.toml"
    spec.write_text(SPEC.format(name="m", builtin="never", thr=1.0).replace(
        'builtin = "never"', 'factory = "marker_pol:make"'))
    assert main(["gate", str(spec), "--mlflow"]) == 2
    err = capsys.readouterr().err.strip()
    assert "MLFLOW_ALLOW_FILE_STORE=true" in err and "\n" not in err, err
    assert not (tmp_path / "ran").exists()  # before: every audit ran first


def _action_gate_step() -> str:
    root = Path(__file__).resolve().parents[1]
    return next(s for s in yaml.safe_load((root / "action.yml").read_text())["runs"]["steps"]
                if s.get("id") == "gate")["run"]


def test_the_action_leaves_no_stale_junit_when_the_gate_fails_early(tmp_path):
    junit = tmp_path / "gate.xml"  # a green JUnit file of last night's gate
    junit.write_text('<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="causalfair gate" '
                     'tests="1" failures="0" errors="0" skipped="0" />\n')
    (tmp_path / "s.toml").write_text(SPEC.format(name="s", builtin="never", thr=1.0))
    env = dict(os.environ, CF_SPECS="s.toml", CF_ARGS="--no-such-option", CF_JUNIT=str(junit),
               GITHUB_OUTPUT=str(tmp_path / "o"), GITHUB_STEP_SUMMARY=str(tmp_path / "sum"),
               RUNNER_TEMP=str(tmp_path), OMP_NUM_THREADS="1")
    proc = run_cmd(["bash", "-e", "-c", _action_gate_step()], cwd=tmp_path, env=env,
                   timeout=120)
    assert proc.returncode == 2, proc.stderr
    # before: the earlier green file stayed, and a JUnit reporter showed it as this run's
    assert not junit.exists(), proc.stderr


@pytest.mark.parametrize("args", [["--timeout", "-1"], ["missing.toml", "--shard", "1/2"]])
def test_a_gate_stopped_by_an_input_error_writes_a_junit_error(tmp_path, capsys, args):
    junit = tmp_path / "gate.xml"  # a green JUnit file of an earlier run
    junit.write_text('<testsuites name="causalfair gate" tests="1" failures="0" />\n')
    (tmp_path / "s.toml").write_text(SPEC.format(name="s", builtin="never", thr=1.0))
    assert main(["gate", str(tmp_path / "s.toml"), *args, "--junit", str(junit)]) == 2
    err = capsys.readouterr().err.strip()
    # before: the earlier file stayed, read by CI as this run's (green) result
    text = junit.read_text()
    assert 'errors="1"' in text and err.split("error: ", 1)[1][:30] in text, (err, text)


def test_an_unaccepted_repair_does_not_make_the_junit_file_green(tmp_path):
    import xml.etree.ElementTree as ET

    from causalfair._io import to_jsonable
    from causalfair.audit import audit, load_spec
    from causalfair.audit.gate import GateEntry, GateResult
    from causalfair.audit.shards import markdown

    specs = {}
    for name, thr in (("fails", 0.001), ("passes", 1.0)):
        (tmp_path / f"{name}.toml").write_text(SPEC.format(name="x", builtin="threshold:0.5",
                                                           thr=thr))
        specs[name] = load_spec(tmp_path / f"{name}.toml")
    before, after = audit(specs["fails"]), audit(specs["passes"])  # original, its repair
    assert (before.overall, after.overall) == ("FAIL", "PASS")
    for accept, code, failures in ((False, 1, "1"), (True, 0, "0")):
        res = GateResult([GateEntry(specs["fails"], before, after)], accept_repaired=accept)
        root = ET.fromstring(res.to_junit())
        # before: failures="0" while the gate exited 1 (CI read a green JUnit file)
        assert res.exit_code == code and root.get("failures") == failures
        first = res.side_by_side().splitlines()[0]
        assert first.startswith("x: FAIL (its repair: PASS") if not accept else first == "x: PASS"
        table = markdown(json.loads(json.dumps(to_jsonable(res.to_dict()))))
        assert ("(original; the repair is not taken) | abs_C <= 0.001" in table) != accept
    assert "commit it or pass --accept-repaired" in ET.fromstring(
        GateResult([GateEntry(specs["fails"], before, after)]).to_junit()).find(
            ".//failure").get("message")


def test_a_policy_calling_os_exit_0_fails_the_serial_gate(tmp_path):
    # in a subprocess: on the old code os._exit(0) ended the process with exit 0 and no
    # output, which CI reads as a pass (and which would end pytest itself, green)
    (tmp_path / "die_pol.py").write_text(
        "import os\nclass Die:\n    def prob_d1(self, obs):\n        os._exit(0)\n"
        "def make():\n    return Die()\n")
    spec = tmp_path / "die.toml"
    spec.write_text(SPEC.format(name="die", builtin="never", thr=1.0).replace(
        'builtin = "never"', 'factory = "die_pol:make"'))
    proc = run_cli("gate", spec, "--junit", tmp_path / "g.xml", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "os._exit(0) called" in proc.stderr, proc.stderr
    assert 'errors="1"' in (tmp_path / "g.xml").read_text(), proc.stderr


def test_os_exit_is_refused_in_the_command_but_not_in_a_process_it_forks():
    # every command runs under the guard (cli._run); a child forked by a user's code (a
    # multiprocessing fork) must still end the way it asks, not raise and run on
    from causalfair._usercode import OSExitCalled, refuse_os_exit

    real = os._exit
    with refuse_os_exit():
        with pytest.raises(OSExitCalled, match=r"os\._exit\(0\) called"):
            os._exit(0)
        pid = os.fork()
        if pid == 0:  # the child: 7 as it asks; 9 where the guard raised in it
            try:
                os._exit(7)
            finally:
                real(9)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    assert os._exit is real


def test_decompose_with_a_policy_calling_os_exit_is_an_error(tmp_path):
    # in a subprocess, as above (without the guard os._exit(0) would end pytest, green)
    (tmp_path / "die_pol2.py").write_text(
        "import os\nclass Die:\n    def prob_d1(self, obs):\n        os._exit(0)\n"
        "def make():\n    return Die()\n")
    proc = run_cli("decompose", "--policy", "die_pol2:make", "--horizon", "3", cwd=tmp_path,
                   timeout=120)
    assert proc.returncode == 2 and "os._exit(0) called" in proc.stderr, proc.stderr


def test_a_folder_given_as_a_spec_says_how_to_give_its_specs(tmp_path, capsys):
    # before: "no such file", about a folder that exists
    assert main(["gate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "*.toml" in err, err


def test_train_param_without_system_reaches_the_lending_setting(tmp_path, capsys):
    # before: --param was read only with --system; lending-1 trained on its 7 levels and
    # the printed "audit it" command (with --param levels=5) refused the checkpoint
    out = tmp_path / "run"
    assert main(["train", "--param", "levels=5", "--iterations", "1", "--no-progress",
                 "--set", "n_individuals=16", "--set", "horizon=3", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["n_levels"] == 5
    capsys.readouterr()
    assert main(["decompose", "--system", "lending-1", "--param", "levels=5", "--checkpoint",
                 str(out / "checkpoint.pt"), "--horizon", "3"]) == 0


def test_the_action_summarises_one_shard_of_a_sharded_gate(shards):
    tmp_path, specs = shards
    env = dict(os.environ, CF_SPECS=" ".join(specs), CF_ARGS="--shard 3/3",
               CF_JUNIT=str(tmp_path / "a.xml"), GITHUB_OUTPUT=str(tmp_path / "o"),
               GITHUB_STEP_SUMMARY=str(tmp_path / "sum"), RUNNER_TEMP=str(tmp_path),
               OMP_NUM_THREADS="1")
    proc = run_cmd(["bash", "-e", "-c", _action_gate_step()], cwd=tmp_path, env=env,
                   timeout=120)
    # shard 3/3 holds the failing spec: the shard's exit code and its table, not a refused
    # merge of one shard of three (exit 2)
    assert proc.returncode == 1, proc.stderr
    assert "| s2 | abs_C <= 0.001 |" in (tmp_path / "sum").read_text(), proc.stderr


# ---------------------------------------------------------------- CI-engineer round 2
# A bank's monorepo gate run as Jenkins/GitLab run it: a reused workspace, a killed job,
# Jenkins' JUnit schema, a spec that broke, history keyed on test names.

_SUITES_ATTRS = {"name", "time", "tests", "failures", "errors"}  # Jenkins junit-10.xsd


def _check_junit(text: str) -> Any:
    """``text`` read as the JUnit schemas CI tools validate against (Jenkins xunit's
    junit-10.xsd, windyroad's jenkins-junit.xsd) require, and its counts added up."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites" and set(root.attrib) <= _SUITES_ATTRS, root.attrib
    tot = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for suite in root:
        assert suite.tag == "testsuite" and suite.get("name"), suite.attrib
        assert float(suite.get("time")) >= 0, suite.attrib  # every suite has its time
        cases = suite.findall("testcase")
        n = {"tests": len(cases), "failures": 0, "errors": 0, "skipped": 0}
        for tc in cases:
            kinds = [c.tag for c in tc if c.tag in ("failure", "error", "skipped")]
            assert len(kinds) <= 1 and tc.get("name") and tc.get("classname"), tc.attrib
            for k in kinds:
                n[{"failure": "failures", "error": "errors", "skipped": "skipped"}[k]] += 1
        for k, v in n.items():
            assert suite.get(k) == str(v), (k, suite.attrib, v)
            tot[k] += v
    for k in ("tests", "failures", "errors"):
        assert root.get(k) == str(tot[k]), (k, root.attrib, tot)
    if root.get("time") is not None:
        assert float(root.get("time")) >= 0
    return root


def test_the_junit_file_is_valid_for_jenkins_and_its_counts_add_up(shards, capsys):
    tmp_path, specs = shards
    assert main(["gate", *specs, "--junit", str(tmp_path / "g.xml")]) == 1
    # before: <testsuites skipped="0"> (refused by junit-10.xsd) and no testsuite time
    root = _check_junit((tmp_path / "g.xml").read_text())
    assert [s.get("name") for s in root] == ["s0", "s1", "s2"]
    assert _merge(tmp_path, (1, 2, 3), (1, 2, 3), ["--json", str(tmp_path / "m.json"),
                                                   "--junit", str(tmp_path / "m.xml")]) == 1
    _check_junit((tmp_path / "m.xml").read_text())
    for sh in (1, 2, 3):
        _check_junit((tmp_path / f"sh{sh}.xml").read_text())
    # a gate stopped by bad specs, and by a bad option, too
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC.format(name="bad", builtin="never", thr=1.0) + "[engine]\nkind = 'x'\n")
    assert main(["gate", str(bad), "--junit", str(tmp_path / "e.xml")]) == 2
    _check_junit((tmp_path / "e.xml").read_text())
    assert main(["gate", specs[0], "--timeout", "-1", "--junit", str(tmp_path / "o.xml")]) == 2
    _check_junit((tmp_path / "o.xml").read_text())
    capsys.readouterr()


def test_a_gate_that_is_killed_leaves_no_earlier_green_output(tmp_path, monkeypatch, capsys):
    # a reused CI workspace (Jenkins, a GitLab shell runner) holds last night's green
    # gate.json / gate.xml; tonight's gate is stopped (SIGTERM of a job timeout, SIGKILL of
    # the OOM killer, Ctrl-C): CI must not read last night's files as tonight's result
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(name="s", builtin="never", thr=1.0))
    out = [str(tmp_path / "gate.json"), str(tmp_path / "gate.xml")]
    assert main(["gate", str(spec), "--json", out[0], "--junit", out[1]]) == 0
    assert json.loads(Path(out[0]).read_text())["exit_code"] == 0

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(gate_cmd, "run_gate", killed)
    assert main(["gate", str(spec), "--json", out[0], "--junit", out[1]]) == 130
    # before: both files stayed, exit_code 0 and a green JUnit file of the earlier run
    assert not Path(out[0]).exists() and not Path(out[1]).exists()
    # a bad option: the JUnit error file, and no earlier JSON left behind
    monkeypatch.undo()
    assert main(["gate", str(spec), "--json", out[0]]) == 0
    assert main(["gate", str(spec), "--timeout", "0", "--json", out[0], "--junit", out[1]]) == 2
    assert not Path(out[0]).exists() and 'errors="1"' in Path(out[1]).read_text()
    # a file that is no gate output is left alone, and refused (before: replaced when the
    # gate wrote, e.g. `--junit pyproject.toml` by mistake), by gate and gate-merge alike
    Path(out[0]).write_text("my notes\n")
    assert main(["gate", str(spec), "--timeout", "0", "--json", out[0]]) == 2
    assert Path(out[0]).read_text() == "my notes\n"
    capsys.readouterr()
    summary = str(tmp_path / "in.json")
    for argv in (["gate", str(spec), "--json", out[0]], ["gate", str(spec), "--junit", out[0]],
                 ["gate-merge", summary, "--json", out[0]]):
        if argv[0] == "gate-merge":
            assert main(["gate", str(spec), "--json", summary]) == 0
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "exists and is no causalfair gate output" in err and argv[-2] in err, err
        assert Path(out[0]).read_text() == "my notes\n"
    Path(out[0]).write_text("")  # an empty file (mktemp's) is written
    assert main(["gate", str(spec), "--json", out[0]]) == 0
    assert json.loads(Path(out[0]).read_text())["exit_code"] == 0
    capsys.readouterr()


def test_a_merge_refused_leaves_no_earlier_merged_output(shards, capsys):
    tmp_path, _ = shards
    merged = tmp_path / "merged.json"
    assert _merge(tmp_path, (1, 2, 3), extra=["--json", str(merged)]) == 1
    assert merged.exists()
    assert _merge(tmp_path, (1, 2), extra=["--json", str(merged)]) == 2  # shard 3 missing
    # before: the earlier merged.json (a complete gate's) stayed, read as this merge's
    assert not merged.exists()
    capsys.readouterr()


def test_errors_name_the_spec_by_its_path_relative_to_the_checkout(tmp_path, monkeypatch,
                                                                   capsys):
    # shards run in other checkout folders; the log, JSON and JUnit name files as the repo does
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "pols.py").write_text(BAD_AND_SLOW)
    for name in ("bad", "slow"):  # bad: in this process; slow: in a worker, stopped
        (tmp_path / "models" / f"{name}.toml").write_text(
            ("timeout = 2\n" if name == "slow" else "") +
            SPEC.format(name=name, builtin="never", thr=1.0).replace(
                'builtin = "never"', f'factory = "pols:{name}"'))
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "models/bad.toml", "models/slow.toml",
                 "--json", "g.json", "--junit", "g.xml"]) == 2
    err = capsys.readouterr().err
    doc = json.loads(Path("g.json").read_text())
    msgs = [e["error"] for e in doc["specs"]]
    assert msgs[0].startswith("audit spec models/bad.toml: the audit failed: "), msgs
    assert msgs[1].startswith("audit spec models/slow.toml: the audit failed: TimeoutError"), msgs
    # before: /tmp/.../models/bad.toml in the message, the log line and the JUnit file
    assert str(tmp_path) not in err + Path("g.xml").read_text() + json.dumps(doc), err


def test_a_spec_that_cannot_be_audited_keeps_its_name_in_json_and_junit(tmp_path, monkeypatch,
                                                                       capsys):
    # CI tracks a test's history by its suite and case names: a spec whose checkpoint went
    # missing keeps its name (a TOML that cannot be read at all is named by its file)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "gone.toml").write_text(
        'name = "lending-gone"\n[model]\nsetting = "lending-1"\n[policy]\n'
        'checkpoint = "nowhere.pt"\n[thresholds]\nabs_C = 1.0\n')
    (tmp_path / "m" / "junk.toml").write_text("name = \n")
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "m/gone.toml", "m/junk.toml", "--json", "g.json",
                 "--junit", "g.xml"]) == 2
    capsys.readouterr()
    entries = json.loads(Path("g.json").read_text())["specs"]
    # before: "name": "m/gone.toml" (the file path) in the JSON and the JUnit suite
    assert [(e["name"], e["spec"]) for e in entries] == [("lending-gone", "m/gone.toml"),
                                                         ("m/junk.toml", "m/junk.toml")]
    root = _check_junit(Path("g.xml").read_text())
    assert [s.get("name") for s in root] == ["lending-gone", "m/junk.toml"]


def test_the_table_has_no_trailing_blanks_for_a_ci_log(shards, capsys):
    _, specs = shards
    main(["gate", *specs])
    out = capsys.readouterr().out
    # before: every threshold row ended in blanks (its verdict padded to 12 columns)
    assert out.strip() and all(line == line.rstrip() for line in out.splitlines()), out


def test_junit_properties_carry_the_json_numbers(shards, capsys):
    # a CI dashboard (Jenkins, a JUnit reporter) reads values from <properties>, not from
    # failure messages rounded to 6 digits
    tmp_path, specs = shards
    assert main(["gate", *specs, "--junit", str(tmp_path / "g.xml"),
                 "--json", str(tmp_path / "g.json")]) == 1
    capsys.readouterr()
    root = _check_junit((tmp_path / "g.xml").read_text())
    doc = json.loads((tmp_path / "g.json").read_text())
    for suite, entry in zip(root, doc["specs"], strict=True):
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        assert props["overall"] == entry["overall"] and props["spec"] == entry["spec"]
        assert float(props["utility"]) == entry["utility"]
        for v in entry["verdicts"]:
            for f in ("threshold", "estimate", "lower", "upper"):
                assert float(props[f"{v['key']}.{f}"]) == v[f], (f, props)
            assert props[f"{v['key']}.status"] == v["status"]
    # the example gate's committed JUnit file holds its committed JSON's numbers
    ex = Path(__file__).resolve().parents[1] / "reports" / "examples"
    ex_root = _check_junit((ex / "gate.xml").read_text())
    ex_doc = json.loads((ex / "gate.json").read_text())
    for suite, entry in zip(ex_root, ex_doc["specs"], strict=True):
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        assert float(props["abs_C.estimate"]) == entry["verdicts"][0]["estimate"]


def test_a_gate_of_many_specs_ends_its_table_with_the_verdict(shards, capsys):
    # thirty models scroll by in a CI log: its last line says how the gate came out
    _, specs = shards
    assert main(["gate", *specs]) == 1
    out = capsys.readouterr().out
    # before: the last line was the last spec's utility row
    assert out.splitlines()[-1] == "3 specs: 2 PASS, 1 FAIL; exit code 1", out
    assert main(["gate", specs[0]]) == 0  # one spec: its own first line says it
    assert capsys.readouterr().out.splitlines()[-1].startswith("  utility")


def test_the_job_summary_of_an_empty_shard_and_of_one_gate_read_plainly(tmp_path, capsys):
    # the Action runs `gate-merge --partial --markdown` on its own gate's JSON
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(name="s", builtin="never", thr=1.0))
    assert main(["gate", str(spec), "--shard", "2/2", "--json", str(tmp_path / "e.json")]) == 0
    assert main(["gate", str(spec), "--json", str(tmp_path / "g.json")]) == 0
    capsys.readouterr()
    assert main(["gate-merge", str(tmp_path / "e.json"), "--partial", "--markdown"]) == 0
    # before: an empty table (its header only) under the heading
    assert capsys.readouterr().out == ("### causalfair gate, shard 2/2: passed (0 specs)\n\n"
                                       "No spec to gate in this shard.\n")
    assert main(["gate-merge", str(tmp_path / "g.json"), "--markdown"]) == 0
    # before: "merged 1 shard" of a JSON that is no shard, in every Action's log
    assert capsys.readouterr().err == "read 1 gate summary, 1 spec: exit code 0\n"


def test_a_users_json_mentioning_specs_and_exit_code_is_no_gate_output(tmp_path, capsys):
    """An earlier gate's JSON was told by the bytes `"exit_code"` and `"specs"` anywhere in
    the file: a JSON of the user's (another tool's CI summary) holding both was deleted and
    replaced by `gate --json` and `gate-merge --json`. A gate summary is a JSON object with
    every required key of docs/schema/gate.schema.json; anything else is refused, kept."""
    from causalfair.commands.gate import remove_earlier_outputs

    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(name="s", builtin="never", thr=1.0))
    mine = tmp_path / "ci-summary.json"
    text = '{"specs": ["unit", "e2e"], "exit_code": 0, "by": "another tool"}\n'
    for argv in (["gate", str(spec), "--json", str(mine)],
                 ["gate-merge", str(tmp_path / "in.json"), "--json", str(mine)]):
        mine.write_text(text)
        if argv[0] == "gate-merge":
            assert main(["gate", str(spec), "--json", str(tmp_path / "in.json")]) == 0
        assert main(argv) == 2
        assert "is no causalfair gate output" in capsys.readouterr().err
        assert mine.read_text() == text
    remove_earlier_outputs(str(tmp_path / "in.json"), None)  # a gate's own: removed
    assert not (tmp_path / "in.json").exists()

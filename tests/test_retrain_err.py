"""A spec whose retrain failed (its audit ran, then the retrain raised) keeps its audit in
every output of the gate: the --reports folder is the audit's report opening with the
retrain's error; gate-merge gives the unsharded gate's JSON and JUnit, and its Markdown
summary shows the audit's rows and the error; --mlflow logs the audit with the error."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import types
from pathlib import Path

import pytest

import causalfair.audit.gate as gate_mod
from causalfair.cli import main
from tests.conftest import retrain_spec

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"


@pytest.fixture
def specs(tmp_path, monkeypatch):
    """Three specs of the shipped lending-1 checkpoint (s0 and s2 fail, s1 passes) whose
    retrain raises at once."""
    def broken(spec, before, target=None, *, place=True):
        raise ValueError("boom in the trainer")

    monkeypatch.setattr(gate_mod, "run_retrain", broken)
    out = []
    for i, t in enumerate((0.001, 1.0, 0.001)):
        p = tmp_path / f"s{i}.toml"
        p.write_text(retrain_spec(f"s{i}", CKPT.as_posix(), abs_C=t, horizon=3), encoding="utf-8")
        out.append(str(p))
    return out


def test_merged_shards_keep_a_failed_retrain_s_audit_as_the_unsharded_gate(tmp_path, specs,
                                                                         capsys):
    """gate-merge's Markdown showed such a spec as "not audited" and left out its audit's
    verdicts; the merged JSON and JUnit must be the unsharded gate's, bit for bit."""
    def gate(*extra: str) -> int:
        return main(["gate", *specs, "--retrain", *extra])

    assert gate("--json", str(tmp_path / "g.json"), "--junit", str(tmp_path / "g.xml")) == 2
    for k, code in ((1, 2), (2, 0)):  # shard 1 holds s0 and s2, shard 2 s1
        assert gate("--shard", f"{k}/2", "--json", str(tmp_path / f"sh{k}.json"),
                    "--junit", str(tmp_path / f"sh{k}.xml")) == code
    capsys.readouterr()
    assert main(["gate-merge", str(tmp_path / "sh2.json"), str(tmp_path / "sh1.json"),
                 "--junit-in", str(tmp_path / "sh2.xml"), str(tmp_path / "sh1.xml"),
                 "--json", str(tmp_path / "m.json"), "--junit", str(tmp_path / "m.xml")]) == 2
    err = capsys.readouterr().err
    assert "the retrain of 2 of 3 specs failed; the first: " in err, err
    assert "could not be audited" not in err, err
    assert (tmp_path / "m.json").read_bytes() == (tmp_path / "g.json").read_bytes()

    def untimed(name: str) -> bytes:
        return re.sub(rb' time="[0-9.]+"', b"", (tmp_path / name).read_bytes())

    assert untimed("m.xml") == untimed("g.xml")
    entry = json.loads((tmp_path / "m.json").read_text())["specs"][0]
    assert entry["overall"] == "ERROR" and entry["before"]["overall"] == "FAIL"

    assert main(["gate-merge", str(tmp_path / "m.json"), "--markdown"]) == 2
    table = capsys.readouterr().out
    assert "error (exit code 2): the retrain of 2 of 3 specs failed" in table, table
    assert "not audited" not in table, table
    rows = [line for line in table.splitlines() if line.startswith("| s0 |")]
    assert len(rows) == 2, table  # the audit's threshold, then the retrain's error
    est = entry["before"]["verdicts"][0]["estimate"]
    assert rows[0] == f"| s0 | abs_C <= 0.001 | {est:.4g} | exact | **FAIL** |", table
    assert "| s0 | retrain error: " in rows[1] and "boom in the trainer" in rows[1], table
    assert rows[1].endswith("| **ERROR** |"), table


class _FakeMlflow(types.ModuleType):
    """MLflow's fluent API, in this process: records each run's tags and artifacts."""

    def __init__(self) -> None:
        super().__init__("mlflow")
        self.runs: list[dict] = []

    def set_tracking_uri(self, uri):
        pass

    def get_tracking_uri(self):
        return "file:///nowhere"

    def set_experiment(self, name):
        pass

    @contextlib.contextmanager
    def start_run(self, run_name=None):
        self.runs.append({"name": run_name, "tags": {}, "artifacts": []})
        yield types.SimpleNamespace(info=types.SimpleNamespace(run_id=str(len(self.runs))))

    def log_params(self, params):
        pass

    def log_metrics(self, metrics):
        pass

    def set_tags(self, tags):
        self.runs[-1]["tags"].update(tags)

    def log_artifact(self, path):
        self.runs[-1]["artifacts"].append(Path(path).name)

    def log_artifacts(self, path, artifact_path=None):
        self.runs[-1]["artifacts"].append(artifact_path)


def test_the_report_of_a_failed_retrain_is_its_audit_s_opening_with_the_error(tmp_path, specs,
                                                                           capsys):
    """--reports wrote an error page with no numbers for such a spec (as for a spec not
    audited); now its folder is the audit's report, opening with the retrain's error."""
    reports = tmp_path / "rep"
    code = main(["gate", specs[0], "--retrain", "--reports", str(reports),
                 "--json", str(tmp_path / "g.json")])
    err = capsys.readouterr().err
    assert code == 2, err
    entry = json.loads((tmp_path / "g.json").read_text())["specs"][0]
    assert "boom in the trainer" in entry["error"] and entry["report"] == str(reports / "s0")
    folder = reports / "s0"
    audit = json.loads((folder / "audit.json").read_text())  # the audit's, as for a FAIL
    assert audit["overall"] == "FAIL" and audit["verdicts"] == entry["before"]["verdicts"]
    assert not (folder / "error.json").exists()
    md = (folder / "report.md").read_text()
    assert md.startswith("# Audit `s0`: FAIL\n\n**The gate's verdict is ERROR: this spec's "
                         "retrain failed ("), md[:400]
    assert "boom in the trainer" in md.split("## Summary")[0]
    assert "## Details" in md  # the audit's numbers follow
    html = (folder / "report.html").read_text()
    head = html.split("<section id='summary'>")[0]
    assert "id='retrain-error'" in head and "boom in the trainer" in head, head


def test_mlflow_logs_a_failed_retrain_s_audit_with_its_error(tmp_path, specs, monkeypatch,
                                                             capsys):
    """--mlflow skipped such a spec, so its audit was not logged; now it is, as the audit
    before retraining, with the retrain's error as a tag."""
    fake = _FakeMlflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    code = main(["gate", *specs[:2], "--retrain", "--mlflow", "--json", str(tmp_path / "g.json")])
    err = capsys.readouterr().err
    assert code == 2, err
    error = json.loads((tmp_path / "g.json").read_text())["specs"][0]["error"]
    assert [r["name"] for r in fake.runs] == ["s0 (before)", "s1 (audit)"], fake.runs
    tags = fake.runs[0]["tags"]
    assert tags["causalfair.retrain_error"] == error and "boom in the trainer" in error, tags
    assert tags["causalfair.overall"] == "FAIL" and tags["causalfair.stage"] == "before"
    assert fake.runs[0]["artifacts"] == ["audit.json"]
    assert "causalfair.retrain_error" not in fake.runs[1]["tags"]  # a spec that passed

"""`gate --retrain` over a repository where some specs have no [retrain] and some cannot
be retrained (found by the fifteenth session's retraining walkthrough): the specs without
[retrain] are gated as without --retrain, every refusal is listed at once."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.test_retrain_scratch import EXACT, _case


def _plain(folder: Path, name: str, policy: str) -> Path:
    """A spec without [retrain] on the same tabular model, its policy a builtin."""
    spec = folder / f"{name}.toml"
    spec.write_text(textwrap.dedent(f"""\
        name = "{name}"
        horizon = 5
        [system]
        tabular = "model.npz"
        [policy]
        builtin = "{policy}"
        [engine]
        kind = "exact"
        [thresholds]
        abs_C = 0.3
        """))
    return spec


def test_specs_without_retrain_are_gated_and_the_others_retrained(tmp_path, cli_here,
                                                                  monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_PROGRESS_SECONDS", "0")
    spec = _case(tmp_path, EXACT)  # fails (|C| 0.52 > 0.3), [retrain] exact from scratch
    ok = _plain(tmp_path, "never", "never")  # passes (|C| 0.246)
    bad = _plain(tmp_path, "all", "always")  # no [retrain]
    proc = cli_here("gate", spec.name, ok.name, bad.name, "--retrain", "--json", "gate.json",
                    cwd=tmp_path)
    doc = json.loads((tmp_path / "gate.json").read_text())
    by = {e["name"]: e for e in doc["specs"]}
    assert "after" in by["credit"] and by["credit"]["after"]["overall"] == "PASS"
    assert "after" not in by["never"] and by["never"]["overall"] == "PASS"
    assert "after" not in by["all"] and "retrained_checkpoint" not in by["all"]
    failing = by["all"]["overall"] == "FAIL"
    # one retrained checkpoint only: the spec with [retrain]
    assert [p.name for p in tmp_path.glob("*.retrained-*")] == ["credit.retrained-exact-1.pt"]
    out = proc.stdout
    block = out[out.index("all: "):]
    assert ("not retrained: the spec has no [retrain] section" in block) == failing
    assert "not retrained" not in out[out.index("never: "):out.index("all: ")]  # it passed
    # the exit code: the committed policy of "credit" still fails, and so may "all"
    assert proc.returncode == 1


def test_every_spec_that_cannot_be_retrained_is_named_at_once(tmp_path, cli_here):
    one = _case(tmp_path / "a", 'algo = "exact"\n')  # a factory policy without init
    two = _case(tmp_path / "b", 'algo = "exact"\n')
    (two.parent / "credit.toml").rename(two.parent / "credit2.toml")
    two = two.parent / "credit2.toml"
    two.write_text(two.read_text().replace('name = "credit"', 'name = "credit2"'))
    proc = cli_here("gate", str(one), str(two), "--retrain", "--json",
                    str(tmp_path / "gate.json"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""  # refused before anything is audited
    err = proc.stderr
    assert "2 of 2 specs are invalid" in err and 'init = "scratch"' in err
    doc = json.loads((tmp_path / "gate.json").read_text())
    assert [e["name"] for e in doc["specs"]] == ["credit", "credit2"]
    assert all(e["overall"] == "ERROR" and 'init = "scratch"' in e["error"]
               for e in doc["specs"])


def test_a_gate_where_no_spec_has_retrain_is_still_refused(tmp_path, cli_here):
    _case(tmp_path, EXACT)  # writes model.npz
    a = _plain(tmp_path, "never", "never")
    b = _plain(tmp_path, "all", "always")
    proc = cli_here("gate", a.name, b.name, "--retrain", cwd=tmp_path)
    assert proc.returncode == 2 and "[retrain]: missing" in proc.stderr

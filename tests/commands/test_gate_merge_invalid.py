"""A sharded gate with invalid specs merges to the unsharded gate's outputs (h4_sch, h3scale
F14): the unsharded gate checks every spec first and, when some are invalid, stops and lists
their errors alone (exit 2). A shard holding an invalid spec stops too and lists its errors;
the others audit theirs. Before, gate-merge placed a stopped shard's i-th entry at
k - 1 + i n (where only a shard listing every spec it holds has it) and kept the other shards'
verdicts: a list p0, p1, p2, bad gated as shards 1/2, 2/2 merged to p0, bad, p2. Now a
stopped shard's record says which stage stopped it and where its errors stand in the list
(``shard.invalid``), and the merge is the unsharded gate's JSON bit for bit, its JUnit file
but for times, its exit code."""

from __future__ import annotations

import json
import re

import pytest

from causalfair.cli import main

SPEC = """name = "{name}"
horizon = 3
[system]
id = "lending-1"
[policy]
builtin = "{builtin}"
[thresholds]
{thresholds}
"""
#: Valid specs: two pass, one fails (abs_C of threshold:0.5 on lending-1 is about 0.08).
GOOD = [("p0", "never", "abs_C = 1.0"), ("p1", "always", "abs_C = 1.0"),
        ("f2", "threshold:0.5", "abs_C = 0.001"), ("p3", "never", "abs_C = 1.0")]
#: Invalid when checked: an unknown threshold key.
CHECK_BAD = "abs_ZZ = 1.0"
#: Valid, but refused by --retrain's check: a builtin policy has no network to warm-start.
RETRAIN_BAD = 'abs_C = 0.001\n[retrain]\nalgo = "exact"'


def _write(tmp_path, specs):
    paths = []
    for name, builtin, thresholds in specs:
        p = tmp_path / f"{name}.toml"
        p.write_text(SPEC.format(name=name, builtin=builtin, thresholds=thresholds))
        paths.append(p.name)
    return paths


def _times(text: str) -> str:
    return re.sub(r'time="[^"]*"', 'time=""', text)


def _gate_and_merge(tmp_path, monkeypatch, capsys, paths, n, extra=()):
    """(unsharded JSON, JUnit, exit code), (merged JSON, JUnit, exit code) of ``paths``
    gated whole and as ``n`` shards."""
    monkeypatch.chdir(tmp_path)
    code = main(["gate", *paths, *extra, "--json", "whole.json", "--junit", "whole.xml"])
    for k in range(1, n + 1):
        main(["gate", *paths, *extra, "--shard", f"{k}/{n}", "--json", f"sh{k}.json",
              "--junit", f"sh{k}.xml"])
    merged = main(["gate-merge", *(f"sh{k}.json" for k in range(1, n + 1)), "--junit-in",
                   *(f"sh{k}.xml" for k in range(1, n + 1)), "--json", "m.json",
                   "--junit", "m.xml"])
    capsys.readouterr()
    read = [(tmp_path / f).read_text() for f in ("whole.json", "whole.xml", "m.json", "m.xml")]
    return (read[0], _times(read[1]), code), (read[2], _times(read[3]), merged)


@pytest.mark.parametrize("where", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [2, 3])
def test_an_invalid_spec_anywhere_merges_to_the_unsharded_gate(tmp_path, monkeypatch, capsys,
                                                               where, n):
    specs = list(GOOD)
    specs.insert(where, ("bad", "never", CHECK_BAD))
    whole, merged = _gate_and_merge(tmp_path, monkeypatch, capsys, _write(tmp_path, specs), n)
    assert whole[2] == 2 and [e["name"] for e in json.loads(whole[0])["specs"]] == ["bad"]
    assert merged == whole


def test_invalid_specs_in_two_shards_merge_in_the_lists_order(tmp_path, monkeypatch, capsys):
    specs = list(GOOD)
    specs.insert(1, ("bad1", "never", CHECK_BAD))
    specs.insert(3, ("bad3", "never", CHECK_BAD.replace("ZZ", "YY")))  # shards 2 and 1 of 3
    whole, merged = _gate_and_merge(tmp_path, monkeypatch, capsys, _write(tmp_path, specs), 3)
    assert [e["name"] for e in json.loads(whole[0])["specs"]] == ["bad1", "bad3"]
    assert merged == whole
    shard = json.loads((tmp_path / "sh2.json").read_text())["shard"]
    assert shard["invalid"] == {"stage": "check", "at": [1]}


def test_a_retrain_refusal_merges_as_the_unsharded_gate_stops_first(tmp_path, monkeypatch,
                                                                     capsys):
    # --retrain checks the specs first, then their [retrain]: a shard stopped by the second
    # check adds nothing when another stopped on the first, as the unsharded gate never
    # reaches the second
    specs = [*GOOD[:2], ("r2", "never", RETRAIN_BAD), ("bad3", "never", CHECK_BAD), GOOD[2]]
    whole, merged = _gate_and_merge(tmp_path, monkeypatch, capsys, _write(tmp_path, specs), 2,
                                    ("--retrain",))
    assert [e["name"] for e in json.loads(whole[0])["specs"]] == ["bad3"]
    assert json.loads((tmp_path / "sh1.json").read_text())["shard"]["invalid"] == {
        "stage": "retrain", "at": [2]}
    assert merged == whole
    for f in tmp_path.glob("*.json"):  # without the invalid spec: the retrain's refusal alone
        f.unlink()
    del specs[3]
    whole, merged = _gate_and_merge(tmp_path, monkeypatch, capsys, _write(tmp_path, specs), 2,
                                    ("--retrain",))
    assert [e["name"] for e in json.loads(whole[0])["specs"]] == ["r2"]
    assert merged == whole


@pytest.mark.parametrize("invalid, field", [
    ({"stage": "audit", "at": [1]}, "shard.invalid.stage"),
    ({"stage": "check", "at": [0]}, "shard.invalid.at[0]"),  # shard 2/2 holds 1, 3, ...
    ({"stage": "check", "at": [1, 3]}, "shard.invalid.at"),  # one place per entry
    ({"stage": "check", "at": [True]}, "shard.invalid.at[0]"),
    ({"stage": "check", "at": [9]}, "shard.invalid.at[0]"),  # past the list
])
def test_a_malformed_stopped_record_is_refused(tmp_path, monkeypatch, capsys, invalid, field):
    specs = list(GOOD[:3])
    specs.insert(1, ("bad", "never", CHECK_BAD))
    _gate_and_merge(tmp_path, monkeypatch, capsys, _write(tmp_path, specs), 2)
    doc = json.loads((tmp_path / "sh2.json").read_text())
    assert doc["shard"]["invalid"] == {"stage": "check", "at": [1]}
    doc["shard"]["invalid"] = invalid
    (tmp_path / "sh2.bad").write_text(json.dumps(doc))
    assert main(["gate-merge", "sh1.json", "sh2.bad"]) == 2
    err = capsys.readouterr().err
    assert f"sh2.bad: {field}:" in err and err.count("\n") == 1, err

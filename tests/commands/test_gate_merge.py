"""`causalfair gate-merge` reads its shards as untrusted input: every JSON summary and
JUnit file is checked in full before anything is written, a malformed one is one line
naming the file and the field with exit 2, and the Markdown table escapes user strings."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import re
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from causalfair.cli import main

VALID = {
    "exit_code": 1, "inconclusive": "fail", "accept_repaired": False,
    "specs": [
        {"name": "a", "spec": "a.toml", "overall": "FAIL", "checkpoint_sha256": None,
         "verdicts": [
             {"key": "abs_C", "threshold": 1.0, "estimate": 0.0042, "lower": 0.0042,
              "upper": 0.0042, "status": "PASS"},
             {"key": "Lambda", "threshold": 0.001, "estimate": 0.147, "lower": 0.147,
              "upper": 0.147, "status": "FAIL"}]},
        {"name": "b", "spec": "b.toml", "overall": "PASS", "checkpoint_sha256": "ab12",
         "verdicts": [
             {"key": "abs_C", "threshold": 0.5, "estimate": 0.1, "lower": 0.05, "upper": 0.2,
              "status": "PASS"}]},
    ],
}

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="causalfair gate" tests="3" failures="1" errors="0" skipped="0">
  <testsuite name="a" tests="2" failures="1" errors="0" skipped="0">
    <testcase classname="causalfair.gate.a" name="abs_C &lt;= 1" time="0.0013"/>
    <testcase classname="causalfair.gate.a" name="Lambda &lt;= 0.001" time="0.0013">
      <failure message="Lambda FAIL" type="FAIL">Lambda FAIL</failure>
    </testcase>
  </testsuite>
  <testsuite name="b" tests="1" failures="0" errors="0" skipped="0">
    <testcase classname="causalfair.gate.b" name="abs_C &lt;= 0.5" time="0.0013"/>
  </testsuite>
</testsuites>
"""


def merge(folder: Path, shard_text: str, junit_text: str | None = None, *extra: str):
    """Run gate-merge in-process on one shard (and one JUnit file); (rc, stdout, stderr)."""
    shard = folder / "shard.json"
    shard.write_bytes(shard_text.encode("utf-8", "surrogateescape"))
    argv = ["gate-merge", str(shard), "--json", str(folder / "out.json"), *extra]
    if junit_text is not None:
        (folder / "shard.xml").write_bytes(junit_text.encode("utf-8", "surrogateescape"))
        argv += ["--junit-in", str(folder / "shard.xml"), "--junit", str(folder / "out.xml")]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def refused(folder: Path, rc: int, err: str, *needles: str) -> None:
    """Exit 2, one line naming the file (and each needle), nothing written."""
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("causalfair gate-merge: error: "), err
    assert "shard." in lines[0], err
    for needle in needles:
        assert needle in lines[0], err
    assert not (folder / "out.json").exists() and not (folder / "out.xml").exists(), err


def mutated(change) -> str:
    doc = copy.deepcopy(VALID)
    change(doc)
    return json.dumps(doc)


# ------------------------------------------------------------------ one test per defect
def test_valid_shards_merge(tmp_path):
    rc, _, err = merge(tmp_path, json.dumps(VALID), JUNIT)
    assert rc == 1, err
    assert json.loads((tmp_path / "out.json").read_text())["specs"] == VALID["specs"]
    root = ET.parse(tmp_path / "out.xml").getroot()
    assert (root.get("tests"), root.get("failures")) == ("3", "1")


def test_entry_without_name(tmp_path):
    rc, _, err = merge(tmp_path, mutated(lambda d: d["specs"][0].pop("name")))
    refused(tmp_path, rc, err, "specs[0].name")


def test_nan_estimate(tmp_path):
    text = mutated(lambda d: d["specs"][1]["verdicts"][0].update(estimate=math.nan))
    assert "NaN" in text
    rc, _, err = merge(tmp_path, text)
    refused(tmp_path, rc, err, "specs[1].verdicts[0].estimate", "finite")


def test_specs_holding_a_string(tmp_path):
    rc, _, err = merge(tmp_path, mutated(lambda d: d.update(specs=["a"])))
    refused(tmp_path, rc, err, "specs[0]", "object")


def test_deep_nesting(tmp_path):
    rc, _, err = merge(tmp_path, '{"specs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(tmp_path, rc, err, "nested")


def test_threshold_not_a_number_with_markdown(tmp_path):
    text = mutated(lambda d: d["specs"][0]["verdicts"][0].update(threshold="abc"))
    rc, out, err = merge(tmp_path, text, None, "--markdown")
    refused(tmp_path, rc, err, "specs[0].verdicts[0].threshold", "'abc'")
    assert out == ""


def test_junit_count_not_an_integer(tmp_path):
    rc, _, err = merge(tmp_path, json.dumps(VALID), JUNIT.replace('tests="2" failures="1" e',
                                                                   'tests="abc" failures="1" e', 2))
    refused(tmp_path, rc, err, "tests", "'abc'")


def test_verdicts_not_a_list_is_not_a_pass(tmp_path):
    rc, _, err = merge(tmp_path, mutated(lambda d: d["specs"][1].update(verdicts=5)))
    refused(tmp_path, rc, err, "specs[1].verdicts", "got 5")


def test_overall_that_contradicts_its_verdicts_is_not_a_pass(tmp_path):
    doc = copy.deepcopy(VALID)
    doc["specs"][0]["overall"] = "PASS"
    doc["exit_code"] = 0
    rc, _, err = merge(tmp_path, json.dumps(doc))
    refused(tmp_path, rc, err, "specs[0].overall", "FAIL")


def test_a_bad_junit_leaves_no_merged_json(tmp_path):
    rc, _, err = merge(tmp_path, json.dumps(VALID), "<testsuites><testsuite")
    refused(tmp_path, rc, err, "shard.xml", "JUnit")


def test_junit_entities_are_refused_not_expanded(tmp_path):
    laughs = ('<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">'
              + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">'
                        for p, c in zip("abcdefgh", "bcdefghi", strict=True))
              + ']><testsuites><testsuite name="&i;" tests="1"/></testsuites>')
    rc, _, err = merge(tmp_path, json.dumps(VALID), laughs)
    refused(tmp_path, rc, err, "shard.xml", "DTD")


def test_oversized_input_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "64K")
    doc = copy.deepcopy(VALID)
    doc["specs"][0]["spec"] = "x" * 20_000  # 20 KB of JSON: over 64 KiB / 10
    read = []
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or b"")
    rc, _, err = merge(tmp_path, json.dumps(doc))
    refused(tmp_path, rc, err, "CAUSALFAIR_MAX_MEMORY")
    assert read == []


def test_inputs_over_the_limit_together_are_refused_before_reading(tmp_path, monkeypatch):
    paths = []
    for i in range(3):  # each about 3 KB of JSON (30 KiB once parsed), 90 KiB together
        doc = copy.deepcopy(VALID)
        for e in doc["specs"]:
            e["name"] += str(i)
            e["spec"] = "x" * 1500
        paths.append(tmp_path / f"s{i}.json")
        paths[-1].write_text(json.dumps(doc))
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "64K")
    read = []
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or b"")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["gate-merge", *map(str, paths), "--json", str(tmp_path / "out.json")])
    assert rc == 2 and "3 gate-merge input file(s)" in err.getvalue() and read == [], err.getvalue()
    assert not (tmp_path / "out.json").exists()


def test_markdown_escapes_names_and_keys(tmp_path):
    doc = copy.deepcopy(VALID)
    doc["specs"][0]["name"] = "<img src=x onerror=alert(1)> | [pwn](http://e.vil)\n# _hi_"
    doc["specs"][0]["verdicts"][0]["key"] = "*bold* `code`"
    rc, out, err = merge(tmp_path, json.dumps(doc), None, "--markdown")
    assert rc == 1, err
    row = out.splitlines()[4]
    assert row.count(" | ") == 4, row  # the name's "|" does not open a new column
    for raw in ("<img", "](http", "`code", "_hi_"):  # each markup character escaped
        assert re.search("(?<!\\\\)" + re.escape(raw), out) is None, out
    assert "\\<img src=x onerror=alert(1)\\> \\| \\[pwn\\](http://e.vil) # \\_hi\\_" in row
    assert "\\*bold\\* \\`code\\`" in row
    assert len(out.splitlines()) == 7  # the newline in the name did not break the table


ERRORED = {"exit_code": 2, "inconclusive": "fail", "accept_repaired": False, "specs": [
    {"name": "c", "spec": "c.toml", "overall": "ERROR", "verdicts": [],
     "error": "audit spec c.toml: [policy] factory 'm:f' raised ValueError: <b>no</b>",
     "checkpoint_sha256": None}]}


def test_a_spec_that_was_not_audited_merges_to_exit_2(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(ERRORED))
    (tmp_path / "ok.json").write_text(json.dumps(VALID))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()) as out:
        rc = main(["gate-merge", str(tmp_path / "ok.json"), str(tmp_path / "c.json"),
                   "--markdown"])
    assert rc == 2, err.getvalue()
    assert "1 of 3 specs could not be audited" in err.getvalue()
    table = out.getvalue()
    assert table.startswith("### causalfair gate: error (exit code 2)"), table
    assert "| c | not audited: audit spec c.toml: \\[policy\\] factory 'm:f' raised " \
           "ValueError: \\<b\\>no\\</b\\> | | | **ERROR** |" in table, table


@pytest.mark.parametrize("change, field", [
    (lambda d: d["specs"][0].pop("error"), "specs[0].error"),
    (lambda d: d["specs"][0].update(verdicts=VALID["specs"][1]["verdicts"]), "specs[0].verdicts"),
    (lambda d: d.update(exit_code=0), "exit_code"),
])
def test_a_malformed_error_entry_is_refused(tmp_path, change, field):
    doc = copy.deepcopy(ERRORED)
    change(doc)
    rc, _, err = merge(tmp_path, json.dumps(doc))
    refused(tmp_path, rc, err, field)


# ---------------------------------------------------------------------------- fuzzing
REQUIRED = [  # (path, is the value valid there)
    (("specs",), lambda v: isinstance(v, list)),
    (("specs", 0), lambda v: False),  # an entry replaced by anything but its own object
    (("specs", 0, "name"), lambda v: isinstance(v, str) and v.strip() != ""),
    (("specs", 0, "overall"), lambda v: v == "FAIL"),
    (("specs", 0, "verdicts"), lambda v: False),
    (("specs", 1, "verdicts", 0), lambda v: False),
    (("specs", 0, "verdicts", 1, "key"), lambda v: isinstance(v, str) and v.strip() != ""),
    (("specs", 0, "verdicts", 1, "threshold"),
     lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    (("specs", 0, "verdicts", 1, "status"), lambda v: v == "FAIL"),
    (("specs", 1, "verdicts", 0, "estimate"),
     lambda v: v is None or isinstance(v, (int, float)) and not isinstance(v, bool)),
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8)


def _set(doc, path, value):
    for p in path[:-1]:
        doc = doc[p]
    if value is _DROP:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


_DROP = object()


def _finite(v) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(_finite(x) for x in v)
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    return True


@st.composite
def hostile_shards(draw):
    """(shard JSON text, JUnit text or None, whether the input is malformed for sure)."""
    kind = draw(st.sampled_from(["retype", "drop", "nonfinite", "deep", "bytes", "anywhere",
                                 "junit"]))
    doc = copy.deepcopy(VALID)
    junit = None
    bad = True
    if kind == "retype":
        path, ok = draw(st.sampled_from(REQUIRED))
        value = draw(json_values.filter(lambda v: not ok(v) or not _finite(v)))
        _set(doc, path, value)
    elif kind == "drop":
        path, _ = draw(st.sampled_from([r for r in REQUIRED if isinstance(r[0][-1], str)]))
        _set(doc, path, _DROP)
    elif kind == "nonfinite":
        path = draw(st.sampled_from([("specs", 0, "verdicts", 0, "lower"),
                                     ("specs", 1, "verdicts", 0, "threshold"),
                                     ("specs", 1, "extra"), ("exit_code",)]))
        _set(doc, path, draw(st.sampled_from([math.nan, math.inf, -math.inf])))
    elif kind == "deep":
        depth = draw(st.integers(101, 200_000))
        text = json.dumps(doc).replace('"ab12"', "[" * depth + "]" * depth)
        return text, None, True
    elif kind == "bytes":
        raw = draw(st.binary(max_size=300))
        return raw.decode("utf-8", "surrogateescape"), None, True
    elif kind == "anywhere":  # any value at any path: may or may not be valid
        path = draw(st.sampled_from([r[0] for r in REQUIRED] + [
            ("specs", 1, "spec"), ("specs", 0, "repair"), ("inconclusive",), ("extra",),
            ("specs", 1, "before")]))
        _set(doc, path, draw(json_values))
        bad = False
    else:
        attr = draw(st.sampled_from(["tests", "failures", "errors", "skipped"]))
        value = draw(st.text(max_size=8).filter(lambda v: not (v.isascii() and v.isdigit())))
        root = ET.fromstring(JUNIT)
        root[0].set(attr, value)
        junit = ET.tostring(root, encoding="unicode")
        if draw(st.booleans()):
            junit = draw(st.binary(max_size=200)).decode("utf-8", "surrogateescape")
            bad = not junit.lstrip().startswith("<")  # random bytes: almost never XML
    return json.dumps(doc), junit, bad


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hostile_shards())
def test_fuzzed_shards_never_crash_never_pass_and_write_nothing_when_refused(case):
    text, junit, bad = case
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        # anything but a CausalfairError would escape main() here as a traceback
        rc, out, err = merge(folder, text, junit if junit is not None else JUNIT)
        if bad:
            assert rc == 2, (text[:300], junit and junit[:300], err)
            refused(folder, rc, err)
        elif rc == 2 and (folder / "out.json").exists():  # merged: a spec was not audited
            assert "ERROR" in (folder / "out.json").read_text(), err
        elif rc == 2:
            refused(folder, rc, err)
        else:
            assert rc in (0, 1), err
            assert json.loads((folder / "out.json").read_text())["exit_code"] == rc
            assert (folder / "out.xml").is_file()

"""``causalfair gate``'s output streams: the human table on stdout, the JSON summary only
with ``--json FILE`` (or ``--json -``: JSON on stdout, the table on stderr)."""

from __future__ import annotations

import json

from causalfair.cli import main

SPEC = """name = "streams"
horizon = 10
[model]
setting = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 1.0
Lambda = 0.01
"""


def test_gate_streams(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text(SPEC, encoding="utf-8")
    # no --json: the table (thresholds and the utility) on stdout, no JSON anywhere
    assert main(["gate", str(p)]) == 1
    cap = capsys.readouterr()
    assert cap.out.startswith("streams: FAIL\n") and "{" not in cap.out, cap.out
    assert "  utility " in cap.out and "Lambda <= 0.01" in cap.out, cap.out
    assert cap.err == "", cap.err
    # --json -: the JSON on stdout (parseable as a whole), the table on stderr
    assert main(["gate", str(p), "--json", "-"]) == 1
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["specs"][0]["overall"] == "FAIL" and doc["specs"][0]["utility"] > 0
    assert cap.err.startswith("streams: FAIL\n"), cap.err
    # --json FILE: the table on stdout, the JSON in the file
    out = tmp_path / "g.json"
    assert main(["gate", str(p), "--json", str(out)]) == 1
    cap = capsys.readouterr()
    assert cap.out.startswith("streams: FAIL\n") and cap.err == "", cap
    assert json.loads(out.read_text())["exit_code"] == 1

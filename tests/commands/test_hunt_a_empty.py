"""hunt_a F5: an empty string for a path, id or spec (an unset variable in a script) is
refused, exit 2, one line naming the flag and saying it is empty, for every command
(causalfair.cli._empty_argument, one check), never a fall back to the default (auditing
threshold:0.5 or lending-1, writing to the default folder) with exit 0."""

from __future__ import annotations

import pytest

OK = 'name = "ok"\nhorizon = 3\n[system]\nid = "lending-1"\n[thresholds]\nabs_C = 1\n'


@pytest.mark.parametrize("argv, flag", [
    (["decompose", "--checkpoint", "", "--horizon", "2"], "--checkpoint"),
    (["decompose", "--logs", ""], "--logs"),
    (["decompose", "--system", ""], "--system"),
    (["graph", "--checkpoint", ""], "--checkpoint"),
    (["graph", "--out", ""], "--out"),
    (["graph", "--paths", ""], "--paths"),
    (["gate", "ok.toml", "--json", ""], "--json"),
    (["gate", "ok.toml", "--junit", ""], "--junit"),
    (["gate", ""], "SPEC"),
    (["audit", "ok.toml", "--out", ""], "--out"),
    (["frontier", "--out", ""], "--out"),
    (["export", "ll144", "rep", "--out", ""], "--out"),
    (["train", "--out", ""], "--out"),
])
def test_an_empty_value_is_refused(tmp_path, cli_here, argv, flag):
    (tmp_path / "ok.toml").write_text(OK)
    proc = cli_here(*argv, cwd=tmp_path)
    assert proc.returncode == 2, proc
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"causalfair {argv[0]}: error: {flag}: empty value; give the "), line
    assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.toml"]  # nothing written


def test_the_gate_writes_its_junit_error_for_an_empty_json(tmp_path, cli_here):
    (tmp_path / "ok.toml").write_text(OK)
    # an earlier run's JUnit file (a file that is no gate output is refused, not replaced)
    (tmp_path / "k.xml").write_text('<testsuites name="causalfair gate" tests="0" />')
    proc = cli_here("gate", "ok.toml", "--json", "", "--junit", "k.xml", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert 'errors="1"' in (tmp_path / "k.xml").read_text()
    assert "--json: empty value" in (tmp_path / "k.xml").read_text()

"""A user string in a one-line error (a simulator's error text, a file name, a mistyped
word) cannot drive the terminal: escape sequences, other control characters and the
bidirectional overrides are written as their escapes (causalfair.errors.terminal_text),
by the one function every door's error line goes through (errors.one_line)."""

from __future__ import annotations

import json

import pytest

from causalfair.errors import first_line, one_line, terminal_text
from tests.conftest import failing_simulator, one_line_error, run_cli

CLEAR, RED, RLO = "\x1b[2J", "\x1b[31m", "\u202e"


@pytest.mark.parametrize("text,shown", [
    ("plain \u00e9 text\twith a tab", "plain \u00e9 text\twith a tab"),
    (f"{RED}red", "\\x1b[31mred"), ("bell\x07 del\x7f c1\x9b", "bell\\x07 del\\x7f c1\\x9b"),
    (f"abc{RLO}fdp.exe", "abc\\u202efdp.exe"), ("\u2066isolate\u2069", "\\u2066isolate\\u2069")])
def test_terminal_text_escapes_what_a_terminal_acts_on(text, shown):
    assert terminal_text(text) == shown


def test_one_line_is_the_first_line_escaped():
    assert one_line("audit", "error", f"x {CLEAR}y\nsecond") == \
        "causalfair audit: error: x \\x1b[2Jy"
    assert one_line("gate", "warning", "") == "causalfair gate: warning: "


def test_a_simulators_error_text_reaches_the_terminal_escaped(tmp_path):
    # before: "causalfair audit: error: ... broke <ESC>[2J" cleared the user's screen
    (tmp_path / "brk.py").write_text(failing_simulator(
        f'raise RuntimeError("broke {CLEAR}{RED} here {RLO}txt")'), encoding="utf-8")
    (tmp_path / "s.toml").write_text('name = "s"\nhorizon = 2\n[system]\nfactory = '
                                     '"brk:make"\n[policy]\nbuiltin = "uniform"\n'
                                     '[engine]\nn = 50\n[thresholds]\nabs_C = 1.0\n',
                                     encoding="utf-8")
    for args in (["audit", "s.toml", "--no-report"], ["gate", "s.toml"]):
        err = one_line_error(run_cli(*args, cwd=tmp_path))
        assert "\x1b" not in err and RLO not in err, err
        assert "broke \\x1b[2J\\x1b[31m here \\u202etxt" in err, err
    # the gate's JSON keeps the text as it is (a machine reads it, not a terminal)
    run_cli("gate", "s.toml", "--json", "g.json", cwd=tmp_path, expect=2)
    spec = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))["specs"][0]
    assert CLEAR in spec["error"]


def test_a_mistyped_word_is_echoed_escaped():
    proc = run_cli("decompose", "--setting", f"l{RED}", expect=2)
    assert "\x1b" not in proc.stderr and "'l\\x1b[31m'" in proc.stderr


def test_a_commands_stdout_shows_a_file_names_escape_codes_escaped(tmp_path):
    # before: `causalfair audit` printed "policy: checkpoint ck<ESC>[2J<ESC>[31m..." raw to
    # stdout (the screen cleared, what followed red); every command's stdout now goes
    # through terminal_text (workers.reader_may_leave), its --json keeps the text
    import shutil
    from pathlib import Path

    name = f"ck{CLEAR}{RED}{RLO}X.pt"
    shutil.copy(Path(__file__).resolve().parents[1] / "reports/examples/checkpoints/"
                "lending-1-ppo.pt", tmp_path / name)
    (tmp_path / "s.toml").write_text(
        'name = "s"\nhorizon = 2\n[system]\nid = "lending-1"\n[policy]\ncheckpoint = '
        '"ck\\u001b[2J\\u001b[31m\\u202eX.pt"\n[thresholds]\nabs_C = 1.0\n', encoding="utf-8")
    for args in (["audit", "s.toml", "--no-report"], ["gate", "s.toml"],
                 ["gate", "s.toml", "--json", "-"]):  # (the table then on stderr)
        proc = run_cli(*args, cwd=tmp_path, expect=0)
        assert "\x1b" not in proc.stdout + proc.stderr and RLO not in proc.stdout, proc
    out = run_cli("audit", "s.toml", "--no-report", cwd=tmp_path, expect=0).stdout
    assert "checkpoint ck\\x1b[2J\\x1b[31m\\u202eX.pt" in out, out
    doc = json.loads(run_cli("audit", "s.toml", "--no-report", "--json", cwd=tmp_path,
                             expect=0).stdout)
    assert doc["policy"]["checkpoint"] == name


@pytest.mark.parametrize("sep", ["\u2028", "\x0c", "\x1c", "\x85"])
def test_a_line_separator_in_a_file_name_does_not_cut_the_error(tmp_path, sep):
    # before: one_line (and the cli, the gate) cut messages with str.splitlines, which
    # also breaks at U+2028, a form feed, 0x1c-0x1e and NEL: the error of a spec named
    # "a<U+2028>b.toml" read "causalfair audit: error: audit spec a" (no key, no fix)
    assert first_line(f"x{sep}y\nz") == f"x{sep}y" and first_line("a\r\nb") == "a"
    name = f"a{sep}b.toml"
    (tmp_path / name).write_text('name = "s"\n[system]\nid = "lending-1"\n[engine]\n'
                                 'kind = "exactly"\n', encoding="utf-8")
    for cmd in ("audit", "gate"):
        err = one_line_error(run_cli(cmd, name, cwd=tmp_path))
        assert "[engine] kind: bad value 'exactly'" in err, err
        assert sep not in err and terminal_text(sep) in err, err


def test_the_interrupted_line_shows_its_notes_escaped(monkeypatch, capsys):
    # before: "causalfair gate: interrupted; kept <path>" printed the notes (file names of
    # what was kept) raw: a name's ESC sequence reached the terminal
    import causalfair.commands.export as export
    from causalfair.cli import main

    def run(args):
        exc = KeyboardInterrupt()
        exc.add_note(f"kept ck{CLEAR}{RLO}.pt")
        raise exc

    monkeypatch.setattr(export, "run", run)
    assert main(["export", "annex-iv", "x"]) == 130
    err = capsys.readouterr().err
    assert err == "causalfair export: interrupted; kept ck\\x1b[2J\\u202e.pt\n", err

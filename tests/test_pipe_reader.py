"""A reader that leaves early (``causalfair gate ... | head -1``) must not change what a
command does: a failing gate still writes its JSON and exits 1. Before, the gate's first
print raised BrokenPipeError, which the CLI turned into exit 0 with no JSON written (a
failing gate passed CI under ``set -o pipefail``)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from causalfair import cli
from tests.conftest import SMALL_SPEC, describe

FAILING_SPEC = SMALL_SPEC.replace("abs_C = 1.0", "abs_C = 0.0")


class _GoneReader(io.StringIO):
    """A stdout whose reader has gone: every write raises BrokenPipeError."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_failing_gate_whose_reader_left_still_fails_and_writes_its_json(tmp_path, monkeypatch):
    spec = tmp_path / "rel.toml"
    spec.write_text(FAILING_SPEC)
    out = tmp_path / "gate.json"
    monkeypatch.setattr(sys, "stdout", _GoneReader())
    rc = cli.main(["gate", str(spec), "--json", str(out), "--junit", str(tmp_path / "g.xml")])
    assert rc == 1
    assert json.loads(out.read_text())["exit_code"] == 1
    assert (tmp_path / "g.xml").is_file()
    assert isinstance(sys.stdout, _GoneReader)  # the command's own stream is put back


def test_a_closed_pipe_leaves_the_exit_code_and_no_broken_pipe_noise(tmp_path):
    spec = tmp_path / "rel.toml"
    spec.write_text(FAILING_SPEC)
    out = tmp_path / "gate.json"
    proc = subprocess.Popen([sys.executable, "-m", "causalfair", "gate", str(spec), "--json",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    proc.stdout.close()  # the reader leaves before the first line, as `| head -0` would
    with proc.stderr:
        err = proc.stderr.read()
    rc = proc.wait(timeout=120)
    done = subprocess.CompletedProcess(proc.args, rc, "", err)
    assert rc == 1, describe(done, 1)
    assert "BrokenPipe" not in err and "Exception ignored" not in err, describe(done)
    assert json.loads(out.read_text())["exit_code"] == 1

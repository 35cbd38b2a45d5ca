"""A spec whose code ends the process itself (``os._exit(0)`` in a simulator's step) is an
error of that spec when it runs in a worker process (any time limit, docs/limits.md): the
gate exits 2, its JSON records the error and the other spec's verdict, never a pass."""

from __future__ import annotations

import json

from causalfair.cli import main
from tests.audit.test_gate_hangs import HANGSIM, SPEC

EXITING = HANGSIM.replace(
    "open(os.path.join(HERE, f\"stuck-{os.getpid()}\"), \"w\").close()\n"
    "            time.sleep(1000)", "os._exit(0)")


def test_a_spec_that_exits_its_process_is_an_error_not_a_pass(tmp_path, capsys):
    assert EXITING != HANGSIM  # the stuck step became an exit
    (tmp_path / "hangsim.py").write_text(EXITING)
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(SPEC.format(name="a", stuck="true", extra=""))
    b.write_text(SPEC.format(name="b", stuck="false", extra=""))
    out = tmp_path / "gate.json"
    code = main(["gate", str(a), str(b), "--timeout", "60", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "its process ended (exit code 0)" in err, err
    doc = json.loads(out.read_text())
    assert doc["exit_code"] == 2, doc
    by = {s["name"]: s for s in doc["specs"]}
    assert by["a"]["overall"] == "ERROR" and by["b"]["overall"] == "PASS", doc

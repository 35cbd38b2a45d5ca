"""`gate --shard`: a missing spec fails every shard, and an empty shard says so."""

from __future__ import annotations

import json

from tests.conftest import one_line_error, run_cli


def test_a_missing_spec_fails_every_shard_not_only_its_own(tmp_path):
    missing = tmp_path / "nope.toml"
    for k in (1, 2, 3):  # the old code audited nothing and exited 0 on shards 2 and 3
        err = one_line_error(run_cli("gate", str(missing), "--shard", f"{k}/3"))
        assert f"audit spec {missing}: no such file." in err


def test_an_empty_shard_says_it_audited_nothing(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text("")  # never parsed: shard 2/2 of one spec holds nothing
    out = tmp_path / "gate.json"
    proc = run_cli("gate", str(spec), "--shard", "2/2", "--json", str(out), expect=0)
    assert "shard 2/2 holds no spec (1 given); nothing audited." in proc.stderr
    assert json.loads(out.read_text())["specs"] == []

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


def _passing_spec(path, name):
    path.write_text(f'name = "{name}"\nhorizon = 5\n[model]\nsetting = "lending-1"\n'
                    '[policy]\nbuiltin = "threshold:0.5"\n[engine]\nkind = "exact"\n'
                    '[thresholds]\nabs_C = 10.0\n[retrain]\nalgo = "exact"\nseed = 0\n'
                    'init = "scratch"\n')
    return str(path)


def test_shards_with_and_without_retrain_are_not_merged(tmp_path):
    """h8bound F3: a shard run with --retrain and one without merged silently: the merge
    held repairs of one shard's failing specs and none of the other's, which no unsharded
    gate gives. Each shard records --retrain (shard.retrain); gate-merge refuses a mix."""
    specs = [_passing_spec(tmp_path / f"{x}.toml", f"spec-{x}") for x in "ab"]
    out = {}
    for k, extra in ((1, ["--retrain"]), (2, []), (3, ["--retrain"])):
        k_, n = (k, 2) if k < 3 else (2, 2)
        path = tmp_path / f"s{k}.json"
        run_cli("gate", *specs, "--shard", f"{k_}/{n}", "--json", str(path), *extra, expect=0)
        out[k] = path
        assert json.loads(path.read_text())["shard"]["retrain"] is bool(extra)
    err = one_line_error(run_cli("gate-merge", str(out[1]), str(out[2]), "--json",
                                 str(tmp_path / "m.json"), expect=2))
    assert (f"{out[1]} (shard 1/2) ran with --retrain and {out[2]} (shard 2/2) without it"
            in err), err
    assert not (tmp_path / "m.json").exists()
    run_cli("gate-merge", str(out[1]), str(out[3]), "--json", str(tmp_path / "m.json"),
            expect=0)
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [e["name"] for e in merged["specs"]] == ["spec-a", "spec-b"]
    assert "shard" not in merged


def test_a_file_many_specs_read_is_hashed_once(tmp_path, monkeypatch):
    """h8bound F8: every shard hashed a checkpoint once per spec naming it: 30 specs sharing
    a 200 MB file took 49 s per shard before anything ran (1.7 s now); the digest is the
    same bytes as before (each spec's inputs in order)."""
    import hashlib
    import os
    from pathlib import Path

    from causalfair.audit import shards

    (tmp_path / "big.npz").write_bytes(b"x" * 1000)
    specs = []
    for i in range(4):
        path = tmp_path / f"s{i}.toml"
        path.write_text(f'name = "s{i}"\n[system]\nid = "lending-1"\n[policy]\n'
                        'checkpoint = "big.npz"\n[thresholds]\nabs_C = 1\n')
        specs.append(str(path))
    reads = []
    real = shards._file_digest

    def counted(path):
        reads.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(shards, "_file_digest", counted)
    record = shards.select_shard(specs, "1/2")[1]
    assert reads.count("big.npz") == 1
    expected = hashlib.sha256()
    for spec in specs:  # the digest as it was: each spec's name, bytes and inputs
        expected.update(os.fsencode(Path(spec).name) + b"\0" + real(Path(spec)))
        expected.update(hashlib.sha256(b"x" * 1000).digest())
    assert record["specs_sha256"] == expected.hexdigest()

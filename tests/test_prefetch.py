"""The CLI's checkpoint prefetch (causalfair._prefetch): same numbers, same errors."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import causalfair as cf
from causalfair._prefetch import ENV_DISABLE, CheckpointPrefetch
from causalfair.audit import audit, load_spec
from causalfair.policy import load_checkpoint, policy_table
from causalfair.sim.lending import lending_setting

ROOT = Path(__file__).resolve().parents[1]


def _checkpoint(path: Path, seed: int = 3) -> Path:
    torch.manual_seed(seed)
    net = cf.policy.mlp(9, (8,), 1, "tanh")
    cf.save_checkpoint(path, net, architecture={"type": "mlp", "input_dim": 9, "hidden": [8],
                                                "output_dim": 1, "activation": "tanh"},
                       encoding=cf.FeatureEncoding("onehot", 7, 2),
                       metadata={"name": "tiny"})
    return path


def _spec(tmp_path: Path, ck: str = "pol.pt", horizon: int = 6) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(textwrap.dedent(f"""
        name = "pf"
        horizon = {horizon}
        [model]
        setting = "lending-2"
        [policy]
        checkpoint = "{ck}"
        [thresholds]
        abs_C = 0.05
        """), encoding="utf-8")
    return p


def test_prefetched_table_is_the_in_process_table(tmp_path):
    ck = _checkpoint(tmp_path / "pol.pt")
    spec = load_spec(_spec(tmp_path))
    pf = CheckpointPrefetch.start(spec)
    assert pf is not None
    got = pf.result()
    assert got is not None and got.path == ck.resolve()
    model = lending_setting("lending-2").tabular
    pol, meta = load_checkpoint(ck, model)
    want = policy_table(pol, model, 6)
    assert got.table.dtype == np.float64 and np.array_equal(got.table, want)  # bit for bit
    assert got.meta == meta and got.name == "pol.pt"
    # the audit from the prefetched table equals the in-process audit exactly
    a, b = audit(spec, prefetched=got), audit(spec)
    assert a.quantities == b.quantities
    assert a.checkpoint_sha256 == b.checkpoint_sha256 and a.checkpoint_meta == b.checkpoint_meta
    assert a.decomposition.policy_name == b.decomposition.policy_name == "pol.pt"


def test_prefetch_of_another_file_is_ignored(tmp_path):
    _checkpoint(tmp_path / "pol.pt", seed=1)
    _checkpoint(tmp_path / "other.pt", seed=2)
    spec = load_spec(_spec(tmp_path))
    other = CheckpointPrefetch.start(load_spec(_spec(tmp_path, "other.pt"))).result()
    assert other is not None
    assert audit(spec, prefetched=other).quantities == audit(spec).quantities


def test_child_imports_this_causalfair_whatever_the_working_directory(tmp_path, monkeypatch):
    _checkpoint(tmp_path / "pol.pt")
    spec = load_spec(_spec(tmp_path))
    decoy = tmp_path / "causalfair"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert CheckpointPrefetch.start(spec).result() is not None


def test_changed_file_is_not_used(tmp_path):
    ck = _checkpoint(tmp_path / "pol.pt")
    pf = CheckpointPrefetch.start(load_spec(_spec(tmp_path)))
    pf._proc.wait()                       # the child has hashed and loaded the old bytes
    _checkpoint(ck, seed=9)               # ... then the file changes
    assert pf.result() is None            # so the caller loads it again itself


def test_failures_fall_back_to_none(tmp_path):
    bad = tmp_path / "evil.pt"
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"meta_json": "{}", "state_dict": Evil()}, bad)
    pf = CheckpointPrefetch.start(load_spec(_spec(tmp_path, "evil.pt")))
    assert pf.result() is None and not marker.exists()
    (tmp_path / "junk.pt").write_bytes(pickle.dumps([1, 2, 3]))
    assert CheckpointPrefetch.start(load_spec(_spec(tmp_path, "junk.pt"))).result() is None


def test_nothing_to_prefetch(tmp_path, monkeypatch):
    _checkpoint(tmp_path / "pol.pt")
    spec = load_spec(_spec(tmp_path))
    monkeypatch.setenv(ENV_DISABLE, "1")
    assert CheckpointPrefetch.start(spec) is None
    monkeypatch.setenv(ENV_DISABLE, "0")
    pf = CheckpointPrefetch.start(spec)
    assert pf is not None
    pf.close()                            # stops the child; result() is then None
    assert pf.result() is None
    builtin = tmp_path / "b.toml"
    builtin.write_text('name = "b"\n[policy]\nbuiltin = "always"\n', encoding="utf-8")
    assert CheckpointPrefetch.start(load_spec(builtin)) is None


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "causalfair", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, cwd=ROOT, timeout=120)


def test_cli_report_is_the_same_with_and_without_prefetch(tmp_path):
    _checkpoint(tmp_path / "pol.pt")
    spec = _spec(tmp_path)
    docs = []
    for flag in ("0", "1"):
        out = tmp_path / f"r{flag}"
        res = _cli(["audit", str(spec), "--out", str(out)], **{ENV_DISABLE: flag})
        assert res.returncode == 0, res.stderr
        doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
        for k in ("seconds", "provenance"):
            doc.pop(k)
        docs.append(doc)
    assert docs[0] == docs[1]


def test_cli_error_is_the_in_process_error(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    spec = _spec(tmp_path, "junk.pt")
    res = [_cli(["audit", str(spec), "--out", str(tmp_path / "r")], **{ENV_DISABLE: f})
           for f in ("0", "1")]
    assert [r.returncode for r in res] == [2, 2]
    assert res[0].stderr == res[1].stderr and "junk.pt" in res[0].stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("delay", [0.4, 1.0, 1.5])
def test_sigint_at_any_moment_leaves_a_whole_report_or_none(tmp_path, delay):
    """A real Ctrl-C to the command (and its helper processes: same process group) while
    it imports, loads, draws or writes: afterwards the report folder is either absent or
    complete, and no temporary folder is left."""
    import signal
    import time

    _checkpoint(tmp_path / "pol.pt")
    spec = _spec(tmp_path)
    out = tmp_path / "reports" / "rep"
    proc = subprocess.Popen([sys.executable, "-m", "causalfair", "audit", str(spec),
                             "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(delay)
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        pass  # it had already finished
    _, err = proc.communicate(timeout=60)
    # 130 once causalfair's main() runs; a Ctrl-C during the interpreter's start-up (the
    # 0.4 s case on a loaded machine) ends in Python's own KeyboardInterrupt exit instead
    assert proc.returncode in (0, 130) or (
        proc.returncode in (1, -signal.SIGINT) and "KeyboardInterrupt" in err), err
    left = [p.name for p in (tmp_path / "reports").iterdir()] if out.parent.exists() else []
    assert left in ([], ["rep"])
    if left:
        names = {p.name for p in out.iterdir()}
        assert {"report.html", "report.md", "audit.json", "frontier.png", "graph.png"} <= names
        json.loads((out / "audit.json").read_text(encoding="utf-8"))
    if proc.returncode == 130:
        assert "interrupted" in err

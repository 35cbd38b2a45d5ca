"""gate --retrain sends the retrains (each with its re-audit) through the gate's backend,
as one map after the audits (docs/scale.md): with ``jobs=2`` they run in worker
processes, give the serial run's checkpoints byte for byte and its JSON, and a retrain
that fails is that spec's ERROR (exit 2) while the other specs keep their verdicts. The
workers return the checkpoints' bytes; the driver writes them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import causalfair.audit.gate as gate_mod
from causalfair.audit import run_gate
from causalfair.audit.retrain import Retrained, run_retrain
from causalfair.backends import SerialBackend
from tests.conftest import retrain_spec

ROOT = Path(__file__).resolve().parents[1]
CKPT = ROOT / "reports" / "examples" / "checkpoints" / "lending-1-ppo.pt"



def _specs(folder: Path) -> list[Path]:
    """Two failing specs sharing one checkpoint (their retrains get -1 and -2 in spec
    order), with different retrain seeds (different bytes), and a passing third."""
    shutil.copy(CKPT, folder / "m.pt")
    out = []
    for name, seed in (("a", 0), ("b", 1)):
        p = folder / f"{name}.toml"
        p.write_text(retrain_spec(name, "m.pt", seed=seed), encoding="utf-8")
        out.append(p)
    p = folder / "c.toml"
    p.write_text(retrain_spec("c", "m.pt", seed=0, abs_C=1.0),
                 encoding="utf-8")
    return out + [p]


def _retrained(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.retrained-*"))}


def _json(res) -> str:
    return json.dumps(res.to_dict(), sort_keys=True)


def test_two_jobs_retrain_in_workers_and_match_serial_bit_for_bit(tmp_path):
    specs = _specs(tmp_path)
    serial = run_gate(specs, retrain=True)
    first = _retrained(tmp_path)
    assert sorted(first) == ["m.retrained-ppo-1.pt", "m.retrained-ppo-2.pt"], sorted(first)
    assert first["m.retrained-ppo-1.pt"] != first["m.retrained-ppo-2.pt"]
    for p in tmp_path.glob("*.retrained-*"):
        p.unlink()
    parallel = run_gate(specs, retrain=True, jobs=2)
    assert _retrained(tmp_path) == first  # the same bytes at the same paths
    assert _json(parallel) == _json(serial)
    assert parallel.exit_code == serial.exit_code == 1
    assert [e.retrained_checkpoint.name if e.retrained_checkpoint else None
            for e in parallel.entries] == ["m.retrained-ppo-1.pt", "m.retrained-ppo-2.pt", None]
    # the after-audit names the placed checkpoint, never the worker's temporary copy
    after = parallel.entries[0].after
    assert after.spec.checkpoint == tmp_path.resolve() / "m.retrained-ppo-1.pt"
    assert after.to_dict()["policy"]["checkpoint"].endswith("m.retrained-ppo-1.pt")
    # nothing else was left in the user's folder (no temporary files or folders)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["a.toml", "b.toml", "c.toml", "m.pt", *first])


class _Recording:
    """A backend double: runs every map serially and records (function, items,
    timeouts)."""

    def __init__(self) -> None:
        self.maps: list[tuple[str, list, list]] = []

    def map(self, fn, items, timeouts=None, done=None):
        items = list(items)
        self.maps.append((fn.__name__, items, list(timeouts or [])))
        return SerialBackend().map(fn, items, None, done)


def test_the_retrains_are_one_map_on_the_backend_under_the_spec_limit(tmp_path, monkeypatch):
    rec = _Recording()
    monkeypatch.setattr(gate_mod, "make_backend", lambda *a, **k: rec)
    specs = _specs(tmp_path)
    res = run_gate(specs, retrain=True, timeout=123.0)
    # the checks (every spec, before any audit), the audits, then the retrains
    assert [m[0] for m in rec.maps] == ["_check_one", "_audit_one", "_retrain_one"], rec.maps
    assert rec.maps[0][2] == [123.0] * 3  # each check under its spec's limit
    _, items, limits = rec.maps[2]
    # the failing specs only, in spec order, each with its audit and its target path
    assert [(s.name, before.overall, t.name) for s, before, t in items] == [
        ("a", "FAIL", "m.retrained-ppo-1.pt"), ("b", "FAIL", "m.retrained-ppo-2.pt")]
    assert limits == [123.0, 123.0]  # --timeout applies to each retrain as to each audit
    assert res.entries[1].after is not None and res.entries[2].after is None


def test_a_retrain_that_raises_is_that_specs_error(tmp_path, monkeypatch):
    """A retrain raising (user code, an input error) or crashing is its spec's ERROR:
    exit 2, the others keep their verdicts and retrained checkpoints."""
    real = run_retrain

    def flaky(spec, before, target=None, *, place=True):
        if spec.name == "a":
            raise ValueError("boom in the trainer")
        return real(spec, before, target, place=place)

    monkeypatch.setattr(gate_mod, "run_retrain", flaky)
    res = run_gate(_specs(tmp_path), retrain=True)
    a, b, c = res.entries
    assert a.overall == "ERROR" and res.exit_code == 2
    assert "the retrain failed: ValueError: boom in the trainer" in a.error, a.error
    assert "ValueError: boom in the trainer" in a.traceback
    assert b.after is not None and b.overall in ("PASS", "FAIL") and c.overall == "PASS"
    assert _retrained(tmp_path).keys() == {"m.retrained-ppo-2.pt"}  # a's path stays free
    doc = res.to_dict()
    assert doc["exit_code"] == 2 and doc["specs"][0]["overall"] == "ERROR"
    assert "a: ERROR (its retrain failed; the audit: FAIL" in res.side_by_side()
    assert 'type="ValueError"' in res.to_junit()


MOD = "retrainpar_sim"
SIM = '''
import os
from dataclasses import dataclass
import numpy as np
import causalfair as cf
from causalfair.systems.simulator import StepResult


@dataclass
class St:
    x: np.ndarray
    group: np.ndarray
    t: int = 0


class Sim:
    """Audits (n = 40) run; training (256 per group) raises, but while the test makes
    the checkpoint (RETRAINPAR_SETUP set)."""
    n_groups = 2
    n_actions = 2
    baseline = 0
    feature_names = ("a",)
    horizon = 3

    def reset(self, n, group, rng):
        if n >= 200 and not os.environ.get("RETRAINPAR_SETUP"):
            raise RuntimeError("no room for %d individuals" % n)
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        return St(x=rng.normal(size=(n, 1)) + 0.5 * g[:, None], group=g)

    def observe(self, s):
        return cf.Observation(group=s.group, features=s.x, t=s.t)

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        d = np.asarray(d, dtype=np.intp)
        x = s.x.copy()
        x[:, 0] += np.array([0.0, 0.3])[d] - 0.2 * s.group + 0.1 * noise
        gain = x[:, 0] - s.x[:, 0]
        return StepResult(state=St(x=x, group=s.group, t=s.t + 1), gain=gain,
                          reward=gain - np.array([0.0, 0.1])[d])


def make():
    return Sim()
'''


def test_a_retrain_raising_in_a_worker_is_that_specs_error(tmp_path, monkeypatch):
    """User code raising in a worker's retrain: one spec's ERROR, exit 2, the lending
    spec retrained beside it as serially."""
    import causalfair as cf
    from causalfair.policies.checkpoint import save_checkpoint

    (tmp_path / f"{MOD}.py").write_text(SIM, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RETRAINPAR_SETUP", "1")
    try:
        system = cf.systems.make(f"{MOD}:make", search_path=tmp_path)
        run = cf.train.train(cf.train.TrainConfig(algo="ppo", iterations=1, n_individuals=32,
                                                  audit_n=50), out=tmp_path / "run",
                             system=system)
        pol, meta = cf.load_checkpoint(run.checkpoint)
        save_checkpoint(tmp_path / "u.pt", pol.to_torch(), architecture=meta["architecture"],
                        encoding=pol.encoding, metadata=meta["metadata"])
        shutil.rmtree(tmp_path / "run")
        monkeypatch.delenv("RETRAINPAR_SETUP")  # the gate's workers start without it
        (tmp_path / "u.toml").write_text(
            f'name = "u"\n[system]\nfactory = "{MOD}:make"\n[policy]\ncheckpoint = "u.pt"\n'
            '[engine]\nkind = "mc"\nn = 40\n[thresholds]\nabs_C = 0.0\n'
            '[retrain]\nalgo = "ppo"\niterations = 1\n', encoding="utf-8")
        specs = [tmp_path / "u.toml", *_specs(tmp_path)[:1]]
        res = run_gate(specs, retrain=True, jobs=2)
    finally:
        sys.modules.pop(MOD, None)
    u, a = res.entries
    assert res.exit_code == 2 and u.overall == "ERROR", res.side_by_side()
    assert "no room for 256 individuals" in u.error and ": the retrain failed: " in u.error, u.error
    assert u.before is not None and a.after is not None
    assert sorted(p.name for p in tmp_path.glob("*.retrained-*")) == ["m.retrained-ppo-1.pt"]


def test_run_retrain_in_python_writes_the_checkpoint_itself(tmp_path):
    """The Python door (no gate): run_retrain places the file (``place=True``) and
    unpacks as (target, after); ``place=False`` leaves the folder untouched."""
    from causalfair.audit import audit, load_spec

    spec = load_spec(_specs(tmp_path)[0])
    before = audit(spec)
    kept = run_retrain(spec, before, place=False)
    assert isinstance(kept, Retrained) and kept.data and not kept.target.exists()
    target, after = run_retrain(spec, before)
    assert target == kept.target and target.read_bytes() == kept.data
    assert after.checkpoint_sha256 == kept.after.checkpoint_sha256


def test_placing_never_overwrites_nor_leaves_a_partial_file(tmp_path):
    from causalfair.audit.retrain import place_retrained
    from causalfair.errors import OutputError

    target = tmp_path / "m.retrained-ppo-1.pt"
    place_retrained(target, b"new")
    assert target.read_bytes() == b"new"
    with pytest.raises(OutputError, match="appeared while retraining; not overwritten"):
        place_retrained(target, b"other")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == [target.name]

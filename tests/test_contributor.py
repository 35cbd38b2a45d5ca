"""A contributor extends causalfair (docs/contributing.md): the extension points work as the
page says, the page's layout and homes are the code's, and what stood in the way is fixed:
a missing checkpoint named by a path or a ``.pth`` suffix is "no such file" (it was "unknown
policy"), the checkpoint suffixes live in one place, the built-in list of
``causalfair/systems/builtin.py`` names every built-in, every built-in is made and passes
the contract check, and ``register`` refuses a default its factory does not take."""

from __future__ import annotations

import importlib
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CheckpointError, PolicyError, SystemError_

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "contributing.md"


# ----------------------------------------------------------------- missing checkpoints
@pytest.mark.parametrize("value", ["missing.pth", "runs/x/policy.pth", "runs/x/policy.pt.bak",
                                   "runs/x/model", "model.pkl"])
def test_a_missing_checkpoint_is_no_such_file(value, tmp_path, monkeypatch):
    """A file name with a checkpoint's (or a pickle's) suffix, or a path, is a checkpoint:
    missing, it is "no such file", not "unknown policy ...; allowed: always, never, ..."."""
    monkeypatch.chdir(tmp_path)
    system = cf.systems.make("lending-1")
    with pytest.raises(CheckpointError, match=re.escape(f"checkpoint {value}: no such file.")):
        cf.policies.resolve(value, system, where="--policy")


def test_builtins_and_their_typos_are_still_read_as_names():
    system = cf.systems.make("lending-1")
    assert cf.policies.resolve("uniform", system).kind == "builtin"
    assert cf.policies.resolve("threshold:0.5", system).kind == "builtin"
    with pytest.raises(PolicyError, match=r"did you mean the built-in 'threshold:0.5'"):
        cf.policies.resolve("thresold:0.5", system, where="--policy")
    with pytest.raises(PolicyError, match=r"unknown policy 'nevr'"):
        cf.policies.resolve("nevr", system, where="--policy")


def test_a_pth_file_is_read_as_the_same_checkpoint(tmp_path):
    """``.pth`` is read by load_checkpoint; resolved by name it gives the same policy."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(9, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    pt = tmp_path / "net.pt"
    arch = {"type": "mlp", "input_dim": 9, "hidden": [4], "output_dim": 1, "activation": "tanh"}
    cf.save_checkpoint(pt, net, architecture=arch, encoding=cf.FeatureEncoding("onehot", 7, 2))
    pth = tmp_path / "net.pth"
    shutil.copy(pt, pth)
    system = cf.systems.make("lending-1")
    a = cf.policies.resolve(str(pt), system)
    b = cf.policies.resolve(str(pth), system)
    assert b.kind == "checkpoint" and b.sha256 == a.sha256
    assert cf.decompose(system, b.policy).C == cf.decompose(system, a.policy).C


def test_checkpoint_suffixes_live_in_one_place():
    from causalfair.policies import checkpoint, resolver

    assert resolver.CHECKPOINT_SUFFIXES is checkpoint.CHECKPOINT_SUFFIXES
    assert ".pth" in checkpoint.CHECKPOINT_SUFFIXES
    assert "CHECKPOINT_SUFFIXES" in resolver.__all__


# ----------------------------------------------------------------- built-in systems
def _builtin_ids() -> list[str]:
    from causalfair.systems import builtin

    return list(builtin.builtin_ids())


def test_builtin_ids_are_what_register_builtin_registers():
    """builtin_ids() (read by the tests below) is the registry ``register_builtin`` fills."""
    from causalfair.systems import builtin, registry

    saved = dict(registry._REGISTRY)
    try:
        registry._REGISTRY.clear()
        builtin.register_builtin()
        assert sorted(registry._REGISTRY) == sorted(builtin.builtin_ids())
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)
    assert set(builtin.builtin_ids()) <= set(cf.systems.registered())


def test_the_builtin_docstring_names_every_builtin():
    """builtin.py's docstring is the list of built-ins a contributor extends: each id that
    ``register_builtin`` registers is in it (``gym`` was not)."""
    from causalfair.systems import builtin

    ids = _builtin_ids()
    assert "gym" in ids and len(ids) >= 13
    missing = [i for i in ids if f"``{i}``" not in builtin.__doc__]
    assert not missing, missing


@pytest.mark.parametrize("sid", [i for i in _builtin_ids() if i != "gym"])
def test_every_builtin_is_made_and_keeps_the_contract(sid):
    """A built-in whose factory is broken fails here, not in a user's first audit."""
    system = cf.systems.make(sid)
    assert isinstance(system, cf.systems.System) and system.id == sid
    assert "mc" in system.engines
    system.check_contract()


def test_gym_builtin_needs_its_env():
    with pytest.raises(SystemError_, match=r"'env'"):
        cf.systems.make("gym")


def test_register_refuses_a_default_its_factory_does_not_take():
    def make_tiny(levels: int = 3):  # never made: refused before
        raise AssertionError("not called")

    with pytest.raises(SystemError_, match=r"register\('tiny-x'\): unknown parameter 'levls'; "
                                           r"the factory accepts: levels\."):
        cf.systems.register("tiny-x", make_tiny, levls=4)
    assert "tiny-x" not in cf.systems.registered()


# ----------------------------------------------------------------- the page is the code
def _table(heading: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    part = text.split(heading, 1)[1]
    rows = [line for line in part.splitlines() if line.startswith("|")]
    out = []
    for line in rows:
        if set(line) <= set("|-: "):
            continue
        out.append([c.strip() for c in line.strip("|").split("|")])
        if not part.split(line, 1)[1].lstrip(" ").startswith("\n|"):
            break
    return out[1:]  # without the header


def test_the_floors_table_is_the_import_graph():
    """docs/contributing.md's floors are the layers tests/test_architecture.py measures."""
    sys.path.insert(0, str(ROOT))
    from tests.test_architecture import GRAPH

    measured = GRAPH.layers(module_level_only=False)
    documented = {}
    for floor, rooms in _table("## 1. The floors"):
        for room in re.findall(r"`([^`]+)`", rooms):
            documented[room] = int(floor)
    assert documented == measured
    text = DOC.read_text(encoding="utf-8")
    assert f"is {len(measured)} *rooms*" in text and f"on {max(measured.values())} floors" in text


def test_every_home_of_a_guarantee_exists():
    """Each ``module.name`` (or ``module.Class.method``) of the guarantees table exists."""
    rows = _table("## 3. One home per guarantee")
    assert len(rows) >= 12
    names = [n for _, home in rows for n in re.findall(r"`(causalfair\.[\w.]+)`", home)]
    assert len(names) >= len(rows)
    for name in names:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable module
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                assert hasattr(obj, attr), name
                obj = getattr(obj, attr)
            assert callable(obj), name
            break
        else:
            pytest.fail(f"{name}: no module")


def test_the_paths_the_page_names_exist():
    text = DOC.read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:causalfair|tests|docs)/[\w/.]+\.(?:py|md))`", text))
    paths |= set(re.findall(r"\b((?:tests|docs)/[\w/]+\.(?:py|md))\b", text))
    assert len(paths) >= 10
    assert not [p for p in paths if not (ROOT / p).exists()]


def test_the_tiers_the_page_runs_are_markers():
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    markers = {m.split(":")[0] for m in conf["tool"]["pytest"]["ini_options"]["markers"]}
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"pytest -m (\w+)", text)) | {"ray", "mlflow", "browser", "notebook"}
    assert named <= markers and "regen" in named and "slow" in named


# ----------------------------------------------------------------- a new format, in tmp_path
def test_a_new_format_needs_its_suffix_and_reader(tmp_path, monkeypatch):
    """The page's recipe for a format: its suffix in CHECKPOINT_SUFFIXES and its reader in
    load_checkpoint make every door read it (here ``.json`` weights, patched in for the
    test); without the suffix a missing file is "no such file" only by its path."""
    from causalfair.policies import checkpoint, resolver
    from causalfair.policies.nets import NumpyMLPPolicy

    rng = np.random.default_rng(0)
    W0, W1 = rng.normal(size=(4, 9)), rng.normal(size=(1, 4))
    import json

    (tmp_path / "net.json").write_text(json.dumps({"W0": W0.tolist(), "W1": W1.tolist()}),
                                       encoding="utf-8")
    enc = cf.FeatureEncoding("onehot", 7, 2)

    def load(path):
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        layers = [(np.asarray(d["W0"]), np.zeros(4)), (np.asarray(d["W1"]), np.zeros(1))]
        pol = NumpyMLPPolicy(layers, enc, name="json")
        return pol, {"format": "json", "metadata": {}, "encoding": enc.to_dict(),
                     "architecture": {"type": "mlp", "hidden": [4], "activation": "tanh"}}

    suffixes = checkpoint.CHECKPOINT_SUFFIXES + (".json",)
    monkeypatch.setattr(checkpoint, "CHECKPOINT_SUFFIXES", suffixes)
    monkeypatch.setattr(resolver, "CHECKPOINT_SUFFIXES", suffixes)
    real = resolver.load_checkpoint_for
    monkeypatch.setattr(resolver, "load_checkpoint_for", lambda p, s: load(p) if Path(
        p).suffix == ".json" and Path(p).is_file() else real(p, s))
    monkeypatch.chdir(tmp_path)
    system = cf.systems.make("lending-1")
    got = cf.policies.resolve("net.json", system)
    direct = NumpyMLPPolicy([(W0, np.zeros(4)), (W1, np.zeros(1))], enc)
    assert got.kind == "checkpoint" and got.meta["format"] == "json"
    assert cf.decompose(system, got.policy).C == pytest.approx(cf.decompose(system, direct).C,
                                                               abs=1e-12)
    with pytest.raises(CheckpointError, match="no such file"):
        cf.policies.resolve("gone.json", system)

"""Systems and the registry: registration, module:callable factories,
entry points, wrapping a plain simulator, tabular model files, and their error messages."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CausalfairError, ModelError, SystemError_
from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


@pytest.fixture
def own(tmp_path):
    """A folder with the example clinic module, as a user would have it."""
    shutil.copy(EXAMPLES / "clinic.py", tmp_path / "clinic.py")
    yield tmp_path
    sys.modules.pop("clinic", None)


def test_lending_systems_are_registered_and_match_lending_setting():
    for sid in ("lending-1", "lending-2", "lending-3"):
        s = cf.systems.make(sid)
        ref = cf.lending_setting(sid).tabular
        assert s.id == sid and s.groups == tuple(ref.group_names)
        assert np.array_equal(s.tabular.kernel, ref.kernel)
        assert s.engines == {"exact", "mc", "frontier"}
        assert s.decisions.baseline == 0 and s.n_actions == 2
    s = cf.systems.make("lending-1", levels=9, interest=0.5)
    assert s.tabular.n_levels == 9 and s.params["levels"] == 9
    assert set(cf.systems.registered()) >= {"lending-1", "lending-2", "lending-3", "delayed-impact"}


def test_unknown_id_lists_registered_ids():
    with pytest.raises(SystemError_, match=r"unknown id 'lending-9'; registered ids: .*lending-1"):
        cf.systems.make("lending-9")


def test_unknown_parameter_names_the_allowed_ones():
    with pytest.raises(SystemError_, match=r"unknown parameter 'K'; the factory accepts: levels, interest"):
        cf.systems.make("lending-1", K=3)


def test_register_and_make_a_callable(own):
    sys.path.insert(0, str(own))
    try:
        import clinic
    finally:
        sys.path.remove(str(own))
    cf.systems.register("test-clinic", clinic.make_clinic, description="test", levels=4)
    try:
        s = cf.systems.make("test-clinic")
        assert s.id == "test-clinic" and s.tabular.n_levels == 4
        assert cf.systems.make("test-clinic", levels=6).tabular.n_levels == 6
        with pytest.raises(SystemError_, match="already registered"):
            cf.systems.register("test-clinic", clinic.make_clinic)
    finally:
        cf.systems.registry._REGISTRY.pop("test-clinic")


def test_module_callable_from_the_search_path(own):
    s = cf.systems.make("clinic:make_clinic", search_path=own, levels=5)
    assert s.id == "clinic:make_clinic"
    assert s.n_actions == 3 and s.decisions.labels == ("wait", "medication", "surgery")
    assert s.features == ("severity", "distance") and s.engines == {"exact", "mc"}
    assert sys.modules["clinic"].__file__ == str(own / "clinic.py")


def test_factory_errors_are_one_line_and_name_the_fix(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    (tmp_path / "wrong.py").write_text("def make():\n    return 42\n")
    (tmp_path / "half.py").write_text(textwrap.dedent("""
        class Half:
            n_groups = 2
            def reset(self, n, group, rng): return None
        def make():
            return Half()
    """))
    cases = [
        ("nomodule:make", r"cannot import module 'nomodule' \(looked in .* and the installed packages\): No module named 'nomodule'; put nomodule.py in .* or install"),
        ("broken:make", r"importing module 'broken' raised RuntimeError: boom"),
        ("wrong:nothere", r"module 'wrong' has no attribute 'nothere'"),
        ("wrong:make", r"factory returned int 42, which is neither a causalfair System, a TabularModel nor a simulator"),
        ("half:make", r"it lacks observe, draw_noise, step"),
    ]
    try:
        for ref, pattern in cases:
            with pytest.raises(SystemError_, match=pattern) as err:
                cf.systems.make(ref, search_path=tmp_path)
            assert "\n" not in str(err.value)
    finally:
        for m in ("broken", "wrong", "half"):
            sys.modules.pop(m, None)


def test_plain_simulator_is_wrapped_with_defaults():
    sim = cf.TabularSimulator(cf.lending_setting("lending-1").tabular)
    s = cf.as_system(sim, id="mine")
    assert s.id == "mine" and s.n_actions == 2 and s.decisions.baseline == 0
    assert s.groups == ("s+", "s-") and s.n_levels == 7
    assert s.engines == {"mc"}  # a bare simulator has no tabular model


def test_system_validation_messages():
    tab = cf.lending_setting("lending-1").tabular
    with pytest.raises(SystemError_, match="groups must be at least 2 distinct names"):
        cf.System(id="x", groups=("a",), tabular=tab)
    with pytest.raises(SystemError_, match="needs a simulator or a tabular model"):
        cf.System(id="x", groups=("a", "b"))
    with pytest.raises(SystemError_, match=r"decisions.baseline: must be an action index in \[0, 2\), got 5"):
        cf.DecisionSet(baseline=5)
    with pytest.raises(SystemError_, match="the tabular model has 2 actions with baseline 0, the system's decisions 3"):
        cf.System(id="x", groups=("s+", "s-"), tabular=tab,
                  decisions=cf.DecisionSet(labels=("a", "b", "c")))


def _clinic_model(own):
    return cf.systems.make("clinic:make_clinic", search_path=own).tabular


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_tabular_file_gives_the_same_numbers_as_python(own, tmp_path, suffix):
    model = _clinic_model(own)
    path = cf.systems.save_tabular(tmp_path / f"clinic{suffix}", model)
    loaded = cf.systems.load_tabular(path)
    for f in ("kernel", "initial", "potential", "reward", "group_weights", "features"):
        assert np.array_equal(getattr(loaded, f), getattr(model, f)), f
    assert loaded.baseline == 0 and loaded.action_labels == model.action_labels
    pol = cf.TablePolicy(np.tile([0.5, 0.3, 0.2], (2, model.n_levels, 1)), n_actions=3)
    a, b = cf.decompose(model, pol, 12), cf.decompose(loaded, pol, 12)
    assert (a.C, a.DPE, a.IPE, a.SPE, a.Lambda) == (b.C, b.DPE, b.IPE, b.SPE, b.Lambda)


def test_tabular_file_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kernel": [[[[1.0]]]], "initial": [[1.0]], "potential": [0.0]}))
    with pytest.raises(ModelError, match=r"tabular model .*bad.json: kernel: expected shape \(groups, A, K, K\)"):
        cf.systems.load_tabular(bad)
    bad.write_text(json.dumps({"kernel": [], "initial": []}))
    with pytest.raises(ModelError, match=r"bad.json: missing field 'potential'"):
        cf.systems.load_tabular(bad)
    bad.write_text(json.dumps({"kernel": [], "initial": [], "potential": [], "gains": 1}))
    with pytest.raises(ModelError, match=r"bad.json: unknown field 'gains'"):
        cf.systems.load_tabular(bad)
    npz = tmp_path / "pickled.npz"
    np.savez(npz, kernel=np.array([object()], dtype=object))
    with pytest.raises(ModelError, match="cannot be read without pickle"):
        cf.systems.load_tabular(npz)
    with pytest.raises(ModelError, match=r"unknown suffix '.txt'; use .npz or .json"):
        cf.systems.load_tabular(_touch(tmp_path / "m.txt"))


def _touch(p: Path) -> Path:
    p.write_text("")
    return p


def test_entry_point_systems_are_found_on_a_registry_miss(own, tmp_path, monkeypatch):
    dist = tmp_path / "site" / "clinicplugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: clinicplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[causalfair.systems]\nclinic-ep = clinic:make_clinic\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(own))
    try:
        s = cf.systems.make("clinic-ep", levels=4)
        assert s.id == "clinic-ep" and s.tabular.n_levels == 4
        assert "clinic-ep" in cf.systems.registered()
    finally:
        cf.systems.registry._REGISTRY.pop("clinic-ep", None)


def test_import_causalfair_registers_the_gymnasium_env():
    code = ("import gymnasium as gym, causalfair; env = gym.make('causalfair/Lending-v0'); "
            "obs, _ = env.reset(seed=0); print(obs.shape)")
    out = run_cmd([sys.executable, "-c", code], expect=0)
    assert out.stdout.strip() == "(9,)"


def test_cli_systems_lists_and_describes(own):
    from causalfair.cli import main

    assert main(["systems"]) == 0
    assert main(["systems", "clinic:make_clinic", "--search-path", str(own), "--json"]) == 0


def test_cli_decompose_on_a_factory_matches_the_library(own, capsys):
    from causalfair.cli import main

    assert main(["decompose", "--system", "clinic:make_clinic", "--search-path", str(own),
                 "--param", "levels=5", "--policy", "uniform", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    system = cf.systems.make("clinic:make_clinic", search_path=own, levels=5)
    ref = cf.decompose(system.tabular, cf.parse_policy("uniform", system), system.horizon)
    assert out["C"] == ref.C and out["system"]["id"] == "clinic:make_clinic"
    assert main(["decompose", "--system", "clinic:make_clinic", "--search-path", str(own),
                 "--policy", "threshold:0.5"]) == 2


def test_errors_are_causalfair_errors():
    with pytest.raises(CausalfairError):
        cf.systems.make("module:")

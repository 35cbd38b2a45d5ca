"""audit.json pins every file the audit read besides its checkpoints (``inputs``: factory
modules, a tabular model, a log file, VecNormalize statistics), `audit --reproduce` checks
each before it audits again, and a spec key this causalfair does not know says it may be
from a newer causalfair."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair._io import to_jsonable
from causalfair._version import __version__
from causalfair.audit import load_spec
from causalfair.audit.reproduce import reproduce
from causalfair.errors import InputError, SpecError
from causalfair.systems import registry
from causalfair.systems.tabular_io import save_tabular
from tests.conftest import one_line_error, schema_errors
from tests.tri_system import tri_source

SPEC = 'name = "tri"\n[system]\nfactory = "tri:make"\n[policy]\nfactory = "tri:mixed"\n' \
       '[thresholds]\nabs_C = 1\n'


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _audit(spec: Path, out: Path) -> dict:
    """The audit.json that ``causalfair audit SPEC --out OUT`` writes (without its
    figures), written to OUT/audit.json."""
    doc = json.loads(json.dumps(to_jsonable(cf.audit(spec).to_dict()), allow_nan=False))
    out.mkdir()
    (out / "audit.json").write_text(json.dumps(doc), encoding="utf-8")
    return doc


@pytest.fixture
def tri(tmp_path, monkeypatch):
    """A spec whose system and policy come from the factory module tri.py beside it,
    audited into rep/ (from tmp_path, as the command line would)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tri.py").write_text(tri_source(3), encoding="utf-8")
    (tmp_path / "tri.toml").write_text(SPEC, encoding="utf-8")
    return _audit(tmp_path / "tri.toml", tmp_path / "rep")


# --------------------------------------------------------------- what audit.json records
def test_factory_modules_are_recorded_by_path_and_sha256(tmp_path, tri):
    sha = _sha(tmp_path / "tri.py")
    assert tri["inputs"] == [
        {"role": "system.factory", "module": "tri", "path": "tri.py", "sha256": sha},
        {"role": "policy.factory", "module": "tri", "path": "tri.py", "sha256": sha}]
    assert schema_errors(tmp_path / "rep" / "audit.json", "audit") == []


def test_a_tabular_model_and_a_log_file_are_recorded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = cf.systems.make("lending-1").tabular
    save_tabular(tmp_path / "m.npz", model)
    (tmp_path / "tab.toml").write_text('name = "tab"\nhorizon = 3\n[system]\ntabular = "m.npz"\n'
                                       '[thresholds]\nabs_C = 1\n', encoding="utf-8")
    doc = _audit(tmp_path / "tab.toml", tmp_path / "rep")
    assert doc["inputs"] == [{"role": "system.tabular", "path": "m.npz",
                              "sha256": _sha(tmp_path / "m.npz")}]
    _logs(tmp_path)
    res = cf.audit(tmp_path / "logs.toml")
    assert res.to_dict()["inputs"] == [{"role": "logs", "path": "log.csv",
                                        "sha256": _sha(tmp_path / "log.csv")}]


def _logs(folder: Path) -> None:
    from causalfair.logs import simulate_logs
    from causalfair.policies.core import TablePolicy

    model = cf.systems.make("lending-1", levels=3).tabular
    table = np.full((2, 3), 0.5)
    simulate_logs(model, TablePolicy(table), 300, 3, seed=1).to_csv(folder / "log.csv",
                                                                      index=False)
    (folder / "logs.toml").write_text('name = "lg"\n[logs]\npath = "log.csv"\nn_boot = 2\n'
                                      '[thresholds]\nabs_C = 1\n', encoding="utf-8")


def test_vecnormalize_gym_and_package_roles(tmp_path, monkeypatch):
    """The VecNormalize statistics of the policy and of the baseline, a gym env's module,
    and a module an installed package provides (by package and version, not by file);
    causalfair's own modules are not listed (provenance pins its version)."""
    from causalfair.audit.result import module_input, read_inputs

    monkeypatch.chdir(tmp_path)
    for name in ("vn.pkl", "bvn.pkl"):
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "envs.py").write_text("def make():\n    pass\n", encoding="utf-8")
    spec = load_spec({"name": "x", "system": {"id": "lending-1"}}, base_dir=tmp_path)
    assert read_inputs(spec) == []  # a registered system of causalfair's own
    envs = {"module": "envs", "path": "envs.py", "sha256": _sha(tmp_path / "envs.py")}
    monkeypatch.setitem(registry._REGISTRY, "hashes-env", registry.SystemSpec("hashes-env",
                                                                             "envs:make"))
    assert read_inputs(replace(spec, system_id="hashes-env")) == [
        {"role": "system.factory", **envs}]  # a system registered from a user's module
    assert read_inputs(replace(spec, system_id="mine")) == []  # a system object passed in
    spec = replace(spec, system_id="gym", system_params={"env": "envs:make"},
                   policy_vecnormalize=tmp_path / "vn.pkl",
                   baseline_vecnormalize=tmp_path / "bvn.pkl")
    assert read_inputs(spec) == [
        {"role": "system.gym", **envs},
        {"role": "policy.vecnormalize", "path": "vn.pkl", "sha256": _sha(tmp_path / "vn.pkl")},
        {"role": "baseline.vecnormalize", "path": "bvn.pkl",
         "sha256": _sha(tmp_path / "bvn.pkl")}]
    assert read_inputs(replace(spec, system_params={"env": "CartPole-v1"},
                               policy_vecnormalize="none", baseline_vecnormalize=None)) == []
    assert module_input("numpy", tmp_path) == {"module": "numpy", "package": "numpy",
                                               "version": np.__version__}
    assert module_input("causalfair.examples", tmp_path) is None


# --------------------------------------------------------------- what --reproduce checks
def test_a_changed_factory_module_is_named_before_the_audit(tmp_path, tri, cli_here):
    rep = reproduce(tmp_path / "rep")
    assert rep.identical, rep.summary()
    old = _sha(tmp_path / "tri.py")
    with open(tmp_path / "tri.py", "a", encoding="utf-8") as fh:
        fh.write("# edited\n")
    err = one_line_error(cli_here("audit", "--reproduce", "rep", cwd=tmp_path))
    assert f"error: tri.py: SHA-256 {_sha(tmp_path / 'tri.py')} is not the {old} that " \
           "rep/audit.json recorded (inputs: system.factory, module tri): the file changed " \
           "after the audit" in err, err


def test_a_changed_log_or_model_file_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _logs(tmp_path)
    _audit(tmp_path / "logs.toml", tmp_path / "rep")
    assert reproduce(tmp_path / "rep").identical
    old = _sha(tmp_path / "log.csv")
    text = (tmp_path / "log.csv").read_text(encoding="utf-8").splitlines(True)
    (tmp_path / "log.csv").write_text("".join(text[:-1]), encoding="utf-8")  # one row less
    with pytest.raises(InputError, match=rf"log.csv: SHA-256 [0-9a-f]{{64}} is not the {old} "
                                         r"that .* recorded \(inputs: logs\)"):
        reproduce(tmp_path / "rep")
    save_tabular(tmp_path / "m.npz", cf.systems.make("lending-1").tabular)
    (tmp_path / "tab.toml").write_text('name = "tab"\nhorizon = 3\n[system]\ntabular = "m.npz"\n',
                                       encoding="utf-8")
    _audit(tmp_path / "tab.toml", tmp_path / "rep2")
    old = _sha(tmp_path / "m.npz")
    save_tabular(tmp_path / "m.npz", cf.systems.make("lending-1", interest=0.5).tabular)
    with pytest.raises(InputError, match=rf"m.npz: SHA-256 [0-9a-f]{{64}} is not the {old} "
                                         r"that .* recorded \(inputs: system.tabular\)"):
        reproduce(tmp_path / "rep2")


def test_an_audit_json_without_inputs_is_reproduced_as_before(tmp_path, tri):
    """An audit.json written before ``inputs`` was recorded: its checkpoints only are
    checked, then the numbers compared."""
    doc = dict(tri)
    del doc["inputs"]
    (tmp_path / "old.audit").write_text(json.dumps(doc), encoding="utf-8")
    assert reproduce(tmp_path / "old.audit").identical
    with open(tmp_path / "tri.py", "a", encoding="utf-8") as fh:
        fh.write("# edited\n")
    assert reproduce(tmp_path / "old.audit").identical  # not checked: numbers only
    with pytest.raises(InputError, match=r"\(inputs: system.factory, module tri\)"):
        reproduce(tmp_path / "rep")


# --------------------------------------------------------------- a key from a newer version
def test_an_unknown_spec_key_may_be_from_a_newer_causalfair(tmp_path):
    newer = f"(written for a newer causalfair? this is causalfair {__version__})"
    for text, where in (('name = "a"\nfuture = 1\n', "future: unknown key "),
                        ('name = "a"\n[engine]\ncache = true\n', "[engine] cache: unknown key "),
                        ('name = "a"\n[thresholds]\nabs_future = 0.1\n',
                         "[thresholds] abs_future: unknown key ")):
        (tmp_path / "s.toml").write_text(text, encoding="utf-8")
        with pytest.raises(SpecError) as exc:
            load_spec(tmp_path / "s.toml")
        assert f"{where}{newer}; allowed keys: " in str(exc.value), exc.value
    # a near miss of a known key is a typo, not a newer key
    (tmp_path / "s.toml").write_text('name = "a"\n[engine]\nknd = "mc"\n', encoding="utf-8")
    with pytest.raises(SpecError, match=r"\[engine\] knd: unknown key; allowed keys: kind, n, "
                                        r"seed, alpha, pair; did you mean 'kind'\?$") as exc:
        load_spec(tmp_path / "s.toml")
    assert "newer" not in str(exc.value)


def test_a_module_recorded_from_a_package_and_now_a_file_is_named(tmp_path, tri):
    doc = dict(tri, inputs=[{"role": "system.factory", "module": "tri", "package": "tri",
                             "version": "9.0"}])
    (tmp_path / "pkg.audit").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match=r"pkg.audit: inputs: system.factory, module tri: "
                                         r"recorded tri 9.0, here the file tri.py: the input "
                                         r"changed after the audit"):
        reproduce(tmp_path / "pkg.audit")


def test_an_audit_run_with_a_system_or_policy_passed_in_is_refused(tmp_path, tri):
    """``cf.audit(spec, system=...)`` / ``policy=...``: audit.json's ``spec.parsed`` does
    not describe what ran, so --reproduce re-ran the spec's own system or policy and
    reported differing numbers (exit 1); it is now refused in one line before it runs."""
    import tri as tri_module

    from causalfair.policies.core import TablePolicy

    spec = load_spec(tmp_path / "tri.toml")
    for kw, what in ((dict(system=tri_module.make(horizon=2)), "system"),
                     (dict(policy=TablePolicy(np.full((3, 2), 0.5))), "policy")):
        doc = json.loads(json.dumps(to_jsonable(cf.audit(spec, **kw).to_dict()), allow_nan=False))
        (tmp_path / f"{what}.audit").write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(InputError, match=rf"{what}.audit: spec.resolved.\w+: recorded .*, "
                                             rf"the spec gives .*: the audit ran with a {what} "
                                             rf"passed to cf.audit\({what}=\.\.\.\)"):
            reproduce(tmp_path / f"{what}.audit")
    assert reproduce(tmp_path / "rep").identical  # the spec's own: reproduced

"""audit.json's ``inputs`` pins the files a factory's module read (``ROLE.read``): a model
or data file loaded when the module is imported or when the factory runs, and a sibling
module it imports; `audit --reproduce` names such a file when it changed or is gone,
before it audits; files the factory writes, and the Python installation's, are not
listed; the gate's workers record the same as the serial gate."""

from __future__ import annotations

import hashlib
import json
import py_compile
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair._io import to_jsonable
from causalfair.audit.reproduce import reproduce
from causalfair.errors import InputError
from causalfair.report.export import input_rows
from tests.conftest import schema_errors
from tests.tri_system import tri_source

POLICY = '''
import numpy as np
import readhelp
from causalfair.policies.core import TablePolicy

TABLE = np.load("table.npy")                 # read when the module is imported


def make(system=None, cut="cut.txt"):
    with open(cut, encoding="utf-8") as fh:  # read when the factory runs
        scale = float(fh.read())
    with open("factory.log", "w", encoding="utf-8") as fh:  # written: not an input
        fh.write("made")
    return TablePolicy(np.clip(TABLE * readhelp.SCALE * scale, 0, 1))


def chatty(system=None):
    import linecache
    import traceback

    linecache.clearcache()
    traceback.format_stack()                 # reads every caller's source: not an input
    return make(system)
'''

SPEC = ('name = "{name}"\n[system]\nfactory = "readtri:make"\n[policy]\nfactory = "readpol:make"\n'
        '[thresholds]\nabs_C = 1\n')


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A spec folder: a system module, a policy module that reads table.npy on import
    and cut.txt when called and imports readhelp.py (compiled already, as a second run finds it: its import reads
    only the .pyc, and the source is what is pinned), each audited from the folder."""
    monkeypatch.chdir(tmp_path)
    for name in ("readtri", "readpol", "readhelp"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    (tmp_path / "readtri.py").write_text(tri_source(3), encoding="utf-8")
    (tmp_path / "readpol.py").write_text(POLICY, encoding="utf-8")
    (tmp_path / "readhelp.py").write_text("SCALE = 1.0\n", encoding="utf-8")
    np.save(tmp_path / "table.npy", np.array([[0.8, 0.3], [0.5, 0.2], [0.25, 0.4]]))
    (tmp_path / "cut.txt").write_text("0.9", encoding="utf-8")
    py_compile.compile(str(tmp_path / "readhelp.py"), doraise=True)  # imported from its .pyc
    for name in ("a", "b"):
        (tmp_path / f"{name}.toml").write_text(SPEC.format(name=name), encoding="utf-8")
    yield tmp_path
    for name in ("readtri", "readpol", "readhelp"):
        sys.modules.pop(name, None)


def _reads(tmp_path: Path) -> list[dict]:
    return [{"role": "policy.factory.read", "module": "readpol", "path": name,
             "sha256": _sha(tmp_path / name)} for name in ("cut.txt", "readhelp.py", "table.npy")]


def _write(res: cf.AuditResult, out: Path) -> dict:
    doc = json.loads(json.dumps(to_jsonable(res.to_dict()), allow_nan=False))
    out.mkdir()
    (out / "audit.json").write_text(json.dumps(doc), encoding="utf-8")
    return doc


def test_files_a_factory_reads_are_pinned_after_its_module(folder):
    doc = _write(cf.audit(folder / "a.toml"), folder / "rep")
    assert doc["inputs"] == [
        {"role": "system.factory", "module": "readtri", "path": "readtri.py",
         "sha256": _sha(folder / "readtri.py")},
        {"role": "policy.factory", "module": "readpol", "path": "readpol.py",
         "sha256": _sha(folder / "readpol.py")},
        *_reads(folder)]  # not factory.log (written), nor numpy's own files
    assert (folder / "factory.log").is_file()
    assert schema_errors(folder / "rep" / "audit.json", "audit") == []
    assert input_rows(doc)[2] == ["policy.factory.read", "cut.txt (read by module readpol)",
                                  _sha(folder / "cut.txt")]
    # a second audit in the same process: the module is not imported again, and what
    # its import read is still pinned
    assert cf.audit(folder / "b.toml").inputs == doc["inputs"]


@pytest.mark.parametrize("name", ["cut.txt", "table.npy", "readhelp.py"])
def test_reproduce_names_a_read_file_that_changed_before_auditing(folder, name):
    _write(cf.audit(folder / "a.toml"), folder / "rep")
    assert reproduce(folder / "rep").identical
    old = _sha(folder / name)
    with open(folder / name, "ab") as fh:
        fh.write(b"\n")
    with pytest.raises(InputError, match=rf"^{name}: SHA-256 [0-9a-f]{{64}} is not the {old} "
                                         r"that \S+ recorded \(inputs: policy.factory.read, "
                                         r"module readpol\): the file changed after the audit"):
        reproduce(folder / "rep")


def test_reproduce_names_a_read_file_that_is_gone(folder):
    _write(cf.audit(folder / "a.toml"), folder / "rep")
    (folder / "cut.txt").unlink()
    with pytest.raises(InputError, match=r"^cut.txt: cannot be read .*recorded its SHA-256 "
                                         r"[0-9a-f]{64} \(inputs: policy.factory.read, module "
                                         r"readpol\)"):
        reproduce(folder / "rep")


def test_gate_workers_pin_the_same_reads_as_the_serial_gate(folder, cli_here):
    for jobs in ("1", "2"):
        res = cli_here("gate", "a.toml", "b.toml", "--jobs", jobs, "--reports", f"r{jobs}",
                       cwd=folder)
        assert res.returncode == 0, res.stderr
    docs = {p.relative_to(folder).as_posix(): json.loads(p.read_text(encoding="utf-8"))["inputs"]
            for p in sorted(folder.glob("r*/*/audit.json"))}
    assert sorted(docs) == ["r1/a/audit.json", "r1/b/audit.json", "r2/a/audit.json",
                            "r2/b/audit.json"]
    for inputs in docs.values():
        assert inputs[2:] == _reads(folder)


def test_source_read_for_a_traceback_is_not_an_input(folder):
    """A factory that formats its stack (torch's lazy imports do, as do warnings) makes
    linecache read every caller's source: the test file here, the ``causalfair`` launcher
    script on the command line; none of them is an input."""
    (folder / "c.toml").write_text(SPEC.format(name="c").replace("readpol:make", "readpol:chatty"),
                                   encoding="utf-8")
    res = cf.audit(folder / "c.toml")
    assert res.inputs[2:] == _reads(folder)

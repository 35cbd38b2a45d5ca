"""causalfair installed the ways users install it: from a wheel (not editable), beside the
oldest releases pyproject.toml allows. Every file the package opens next to its code (the
FICO tables, the example specs and checkpoints, the JSON Schemas the docs validate
against) is package data; the declared lower bounds leave out the releases known not to
work with the rest of the declared ranges; the suite's warning filter lets an old
matplotlib's own deprecation warnings through as warnings, not errors."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
import warnings
import zipfile
from pathlib import Path

import pytest

from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "causalfair"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: Lowest releases that work beside the rest of the declared ranges, and why.
FLOORS = {
    "stable-baselines3": ((2, 4), "before 2.4 it requires gymnasium < 0.30; causalfair "
                                  "requires gymnasium >= 1.0 (no install resolves)"),
    "pandas": ((2, 1, 2), "2.1.0 and 2.1.1 are built for numpy 1 without a numpy < 2 cap: "
                          "`pip install causalfair pandas==2.1.0` gets numpy 2 and pandas "
                          "fails to import ('numpy.dtype size changed')"),
    "statsmodels": ((0, 14, 1), "0.14.0 is built for numpy 1 without a cap (as pandas 2.1.0)"),
    "pyarrow": ((15,), "14.x is built for numpy 1 without a cap (as pandas 2.1.0)"),
    "mlflow-skinny": ((2, 16), "before 2.16 `import mlflow` needs pkg_resources, which "
                               "setuptools >= 81 no longer ships"),
    "ray": ((2, 10), "2.9's workers import pkg_resources (as mlflow-skinny < 2.16)"),
}


def _data_files() -> set[str]:
    """Every file under causalfair/ that is not Python, relative to it (links followed)."""
    return {p.relative_to(PKG).as_posix() for p in PKG.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".py", ".pyc")}


def _package_data() -> set[str]:
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["causalfair"]
    return {p.relative_to(PKG).as_posix() for g in globs for p in PKG.glob(g) if p.is_file()}


def _floors() -> dict[str, tuple[int, ...]]:
    """The ``>=`` lower bound of every requirement, core and extras, by package name."""
    project = PYPROJECT["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    out = {}
    for req in reqs:
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9.]+)", req)
        if m:
            out[m.group(1).lower()] = tuple(int(x) for x in m.group(2).strip(".").split("."))
    return out


def test_every_file_the_package_holds_is_package_data():
    missing = sorted(_data_files() - _package_data())
    assert not missing, ("files under causalfair/ that a wheel would leave out (add them to "
                         f"[tool.setuptools.package-data]): {missing}")


def test_the_json_schemas_ship_with_the_package():
    published = sorted((ROOT / "docs" / "schema").glob("*.schema.json"))
    assert len(published) >= 8, published
    shipped = _package_data()
    for doc in published:
        installed = PKG / "schema" / doc.name
        assert installed.is_file() and installed.read_bytes() == doc.read_bytes(), doc.name
        assert f"schema/{doc.name}" in shipped, doc.name


def test_the_lower_bounds_leave_out_releases_that_break():
    floors = _floors()
    for name, (lowest, why) in FLOORS.items():
        assert name in floors, f"{name}: no '>=' lower bound in pyproject.toml"
        assert floors[name] >= lowest, (
            f"{name} >= {'.'.join(map(str, floors[name]))} in pyproject.toml admits releases "
            f"that do not work: {why}")


def test_deprecation_warnings_raised_inside_matplotlib_are_not_errors():
    # matplotlib < 3.10.7 calls pyparsing names that pyparsing >= 3.3 deprecates; the
    # suite turns warnings into errors, except those raised in matplotlib's own code
    warnings.warn_explicit("'parseString' deprecated - use 'parse_string'", DeprecationWarning,
                           "_fontconfig_pattern.py", 1, module="matplotlib._fontconfig_pattern")
    with pytest.raises(DeprecationWarning):  # one from causalfair's own code still fails
        warnings.warn_explicit("old call", DeprecationWarning, "x.py", 1,
                               module="causalfair.report.figures")


@pytest.mark.slow
def test_a_wheel_holds_the_package_data_and_runs_the_readme_command(tmp_path):
    """Build a wheel from a copy of the checkout, install it (not editable) into a folder
    and run the README's first command from another folder: the copy that runs is the
    installed one, and it finds its data."""
    pytest.importorskip("setuptools.build_meta", reason="building a wheel needs setuptools")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "docs" / "schema", src / "docs" / "schema")
    shutil.copytree(PKG, src / "causalfair", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    build = "import setuptools.build_meta as b, sys; b.build_wheel(sys.argv[1])"  # as pip does
    run_cmd([sys.executable, "-c", build, dist], cwd=src, expect=0, timeout=240)
    wheel = next(dist.glob("causalfair-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(f for f in _data_files() if f"causalfair/{f}" not in names)
    assert not missing, f"{wheel.name} lacks {missing}"
    target = tmp_path / "site"  # a pure-Python wheel installs by unpacking it
    zipfile.ZipFile(wheel).extractall(target)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "OMP_NUM_THREADS": "1"}
    script = ("import causalfair as cf, pathlib, runpy, sys; p = pathlib.Path(cf.__file__).parent; "
              "print(p); assert (p / 'schema' / 'audit.schema.json').is_file(); "
              "assert cf.examples.path('lending-1-ppo.toml').is_file(); "
              "sys.argv = ['causalfair', *sys.argv[1:]]; "
              "runpy.run_module('causalfair', run_name='__main__')")
    proc = run_cmd([sys.executable, "-c", script, "decompose", "--setting", "lending-1",
                    "--policy", "threshold:0.5"], cwd=work, env=env, expect=0, timeout=120)
    assert proc.stdout.splitlines()[0] == str(target / "causalfair"), proc.stdout + proc.stderr
    assert "C    = -0.162747" in proc.stdout, proc.stdout + proc.stderr

"""The test suite and the install: the opt-in tiers and the extras in pyproject.toml, the
command helpers of tests/conftest.py (a failing test shows each command's whole output),
and the optional dependencies that a light install leaves out."""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
TIERS = ("slow", "ray", "mlflow", "browser", "notebook")
BY_HAND = ("regen",)  # opt-in tiers .ci/run leaves out (README says when to run them)
HEAVY = ("ray", "mlflow", "mlflow-skinny", "fastapi", "ipykernel", "pyarrow")  # dowhy is core


def _name(req: str) -> str:
    return re.split(r"[\s<>=!~\[;]", req, maxsplit=1)[0].lower()


def test_the_tiers_are_registered_and_left_out_by_default():
    ini = PYPROJECT["tool"]["pytest"]["ini_options"]
    registered = {m.split(":")[0] for m in ini["markers"]}
    assert set(TIERS + BY_HAND) <= registered
    selection = re.search(r"-m '([^']*)'", ini["addopts"]).group(1)
    assert selection == "not (" + " or ".join(TIERS + BY_HAND) + ")", selection
    # .ci/run runs the default selection and then every tier
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for tier in TIERS:
        assert re.search(rf"^tier {tier} ", ci, re.M), tier
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for tier in BY_HAND:
        assert not re.search(rf"^tier {tier} ", ci, re.M), tier
        assert f"python -m pytest -m {tier}" in readme, tier


def test_the_test_extra_is_light_and_dev_has_everything():
    deps = PYPROJECT["project"]["dependencies"]
    extras = PYPROJECT["project"]["optional-dependencies"]
    light = {_name(r) for r in deps + extras["test"]}
    assert {"pytest", "hypothesis"} <= light
    assert not light & set(HEAVY), light & set(HEAVY)
    (dev,) = [r for r in extras["dev"] if r.startswith("causalfair[")]
    assert set(dev[len("causalfair["):-1].split(",")) == set(extras) - {"dev"}


def test_the_readme_installs_the_test_extra_and_runs_the_default_suite():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", text, re.S).group(1).splitlines()
    assert first[0].startswith('pip install -e ".[test]" && causalfair decompose '), first
    assert first[1] == "python -m pytest", first


def test_the_dowhy_cross_check_without_dowhy_is_a_one_line_error(monkeypatch):
    from causalfair.errors import InputError
    from causalfair.logs.dowhy_check import dowhy_check

    monkeypatch.setitem(sys.modules, "dowhy", None)  # import dowhy raises ImportError
    with pytest.raises(InputError, match=r"pip install 'dowhy>=0.12'") as exc:
        dowhy_check(None, None)  # refused before it reads its inputs
    assert "\n" not in str(exc.value)


def test_the_scale_doc_makes_a_ray_token_before_ray_start():
    """`ray start` with RAY_AUTH_MODE=token refuses to start where ~/.ray/auth_token does
    not exist (a fresh machine); docs/scale.md makes one first."""
    text = (ROOT / "docs" / "scale.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "ray start" in b)
    lines = block.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("ray start"))
    assert any(ln.startswith("ray get-auth-token --generate") for ln in lines[:start]), block


FAILING = '''
import sys
from conftest import run_cmd

LONG = "BEGIN " + "x" * 20000 + " END-OF-STDERR"

def test_exit_code():
    run_cmd([sys.executable, "-c", f"import sys; sys.stderr.write({LONG!r}); sys.exit(3)"],
            expect=0)

def test_later_assertion():
    p = run_cmd([sys.executable, "-c", f"import sys; sys.stderr.write({LONG!r})"])
    assert "absent" in p.stdout

def test_timeout():
    run_cmd([sys.executable, "-c",
             "import sys, time; sys.stderr.write('PARTIAL'); sys.stderr.flush(); time.sleep(30)"],
            timeout=2)
'''


def test_a_failing_command_shows_its_whole_stderr(tmp_path):
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_cmds.py").write_text(FAILING)
    proc = run_cmd([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "--rootdir", tmp_path, tmp_path], cwd=tmp_path, timeout=120, expect=1)
    out = proc.stdout
    assert "3 failed" in out
    for test in ("test_exit_code", "test_later_assertion"):
        section = out[out.index(f"_ {test} _"):]
        # the whole stderr: its first and last words and every character between them
        assert "BEGIN " + "x" * 20000 + " END-OF-STDERR" in section, test
    timeout = out[out.index("_ test_timeout _"):]
    assert "ran past its 2 s timeout" in timeout and "PARTIAL" in timeout


def test_torch_requirement_is_a_range_that_holds_the_tested_version():
    """pyproject pinned torch==2.13.0, which cannot live beside a user's own torch: the
    requirement is a range, it holds the tested version (the one installed here), and
    the README states the same range."""
    import tomllib

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[1]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    req = Requirement(next(d for d in deps if d.split(">")[0].split("=")[0].strip() == "torch"))
    assert not any(s.operator in ("==", "===") for s in req.specifier)
    import torch

    assert torch.__version__.split("+")[0] in req.specifier
    assert "2.4.0" in req.specifier and "2.14.0" not in req.specifier
    readme = (root / "README.md").read_text()
    assert "torch >= 2.4 and < 2.14" in readme and "pinned" not in readme.split("\n\n")[1]

"""Worker processes load the modules a run loaded from users' folders (a
``module:callable`` next to a spec or in the working directory), which are not
importable from ``sys.path`` once their folder has left it: ``--jobs N`` works on
``causalfair decompose --system mymodule:make`` run from the console script."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from causalfair._usercode import load_callable, user_modules
from causalfair.backends import make_backend

from .conftest import run_cmd

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def test_a_worker_runs_a_function_of_a_module_loaded_from_a_users_folder(tmp_path):
    (tmp_path / "cf_umod_square.py").write_text("def square(x):\n    return x * x\n")
    fn = load_callable("cf_umod_square:square", search_path=tmp_path)
    assert ("cf_umod_square", str(tmp_path)) in user_modules()
    assert str(tmp_path) not in sys.path  # the folder left sys.path after loading
    assert make_backend(jobs=2, backend="process").map(fn, [2, 3, 4]) == [4, 9, 16]


def test_workers_find_modules_only_when_a_task_needs_them(tmp_path):
    """A module loaded from a folder since deleted does not break other tasks (workers
    import user modules only when a task refers to them), and a module name loaded again
    from another folder is found where it was loaded last."""
    gone, first, second = (tmp_path / k for k in ("gone", "first", "second"))
    for folder, value in ((gone, 0), (first, 1), (second, 2)):
        folder.mkdir()
        (folder / "cf_umod_which.py").write_text(f"def which(x):\n    return {value}\n")
    load_callable("cf_umod_which:which", search_path=gone)
    shutil.rmtree(gone)  # (with the __pycache__ a bytecode-writing run leaves there)
    load_callable("cf_umod_which:which", search_path=first)
    fn = load_callable("cf_umod_which:which", search_path=second)
    assert fn(0) == 2
    assert make_backend(jobs=2, backend="process").map(fn, [0, 1]) == [2, 2]
    assert make_backend(jobs=2, backend="process").map(abs, [-1, -2]) == [1, 2]


def _decompose(cwd: Path, jobs: int) -> str:
    # -P: the working directory is not on sys.path, as for the causalfair console script
    proc = run_cmd([sys.executable, "-P", "-m", "causalfair", "decompose", "--system", "gym",
                    "--param", "env=tutor_gym:make_env", "--param", 'groups=["White","Black"]',
                    "--policy", "uniform", "--n", "300", "--horizon", "3", "--jobs", jobs],
                   expect=0, cwd=cwd)
    return "\n".join(line for line in proc.stdout.splitlines() if line.lstrip()[:2] in
                     ("C ", "DP", "IP", "SP", "La"))


def test_jobs_2_audits_a_gym_env_from_the_working_directory_as_one_process(tmp_path):
    shutil.copy(EXAMPLES / "tutor_gym.py", tmp_path)
    serial = _decompose(tmp_path, 1)
    assert serial.count("\n") >= 4, serial
    assert _decompose(tmp_path, 2) == serial


def test_finding_users_modules_again_adds_no_finder(tmp_path, monkeypatch):
    """A process that runs many gates with workers (each makes the modules the workers
    loaded findable here) keeps one finder: the latest folder of a module wins, a module
    named only earlier is still found, and ``sys.meta_path`` does not grow."""
    from causalfair._usercode import _UserFolders, find_user_modules

    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    for folder, value in (("one", 1), ("two", 2)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "cf_umod_again.py").write_text(f"VALUE = {value}\n")
    (tmp_path / "one" / "cf_umod_only_one.py").write_text("VALUE = 11\n")
    others = [f for f in sys.meta_path if not isinstance(f, _UserFolders)]
    find_user_modules([("cf_umod_again", str(tmp_path / "one")),
                       ("cf_umod_only_one", str(tmp_path / "one"))])
    for _ in range(5):
        find_user_modules([("cf_umod_again", str(tmp_path / "two"))])
    assert isinstance(sys.meta_path[0], _UserFolders) and sys.meta_path[1:] == others
    monkeypatch.delitem(sys.modules, "cf_umod_again", raising=False)
    monkeypatch.delitem(sys.modules, "cf_umod_only_one", raising=False)
    import cf_umod_again
    import cf_umod_only_one

    assert (cf_umod_again.VALUE, cf_umod_only_one.VALUE) == (2, 11)
    monkeypatch.delitem(sys.modules, "cf_umod_again")
    monkeypatch.delitem(sys.modules, "cf_umod_only_one")

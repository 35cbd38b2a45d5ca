"""`causalfair --help` stays instant: the package face (`causalfair/__init__.py`) loads its
names on first use (PEP 562), and the command line imports a command's module only when that
command runs. Nothing else changes for users: every public name resolves to the object its
module defines, the help text is the one the command modules register, and `import
causalfair` still registers the Gymnasium environments."""

from __future__ import annotations

import argparse
import importlib
import json
import pickle
import sys

import pytest

import causalfair as cf
from causalfair import cli
from tests.conftest import run_cmd

#: What `causalfair --help` must not import (each costs 20-200 ms).
HEAVY = ("numpy", "pandas", "torch", "matplotlib", "gymnasium", "scipy",
         "causalfair.audit", "causalfair.engines", "causalfair.systems", "causalfair.train")


def _loaded_after(code: str) -> list[str]:
    """The HEAVY modules (or their submodules) a fresh interpreter holds after ``code``."""
    probe = (f"import sys\n{code}\n"
             f"print(sorted({{m.split('.')[0] if not m.startswith('causalfair') else m "
             f"for m in sys.modules for h in {HEAVY!r} if m == h or m.startswith(h + '.')}}))")
    out = run_cmd([sys.executable, "-c", probe], expect=0, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def _main(*argv: str) -> str:
    return ("from causalfair.cli import main\n"
            f"try:\n    main({list(argv)!r})\nexcept SystemExit:\n    pass")


def test_help_imports_nothing_heavy():
    assert _loaded_after(_main("--help")) == []


#: Commands whose --help is light too (every command's is: tests/test_fast_help2.py).
LIGHT_COMMANDS = ("audit", "gate", "gate-merge", "systems")


@pytest.mark.parametrize("command", LIGHT_COMMANDS)
def test_command_help_imports_nothing_heavy(command):
    assert _loaded_after(_main(command, "--help")) == []


def test_import_causalfair_imports_nothing_heavy():
    assert _loaded_after("import causalfair") == []


def test_a_typo_is_answered_without_importing_the_commands():
    assert _loaded_after(_main("audti")) == []
    out = run_cmd([sys.executable, "-m", "causalfair", "audti"], expect=2)
    assert "did you mean audit?" in out.stderr


def test_a_command_imports_its_own_module_only():
    code = _main("export", "--help") + "\nprint(sorted(m for m in sys.modules " \
        "if m.startswith('causalfair.commands.')))"
    out = run_cmd([sys.executable, "-c", "import sys\n" + code], expect=0, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')) == [
        "causalfair.commands.export"]


def _eager_parser() -> argparse.ArgumentParser:
    """The parser built the way it was before: every command module's ``register`` run on a
    plain argparse subparsers action, --device added where it applies."""
    parser = cli._Parser(prog="causalfair", description=cli.build_parser().description)
    lazy = cli.build_parser()
    for action in lazy._actions:
        if not isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            parser._add_action(action)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in cli.COMMANDS.values():
        importlib.import_module(module).register(sub)
    for name in cli.DEVICE_COMMANDS:
        p = sub.choices[name]
        if "--device" not in p._option_string_actions:
            p.add_argument("--device", default=None, metavar="DEVICE", help=cli.DEVICE_HELP)
    return parser


def test_help_lists_every_command_as_its_module_registers_it(capsys):
    eager = _eager_parser()
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert text == eager.format_help()
    for name in cli.COMMANDS:
        assert f"    {name}" in text, name
    sub = next(a for a in eager._actions if isinstance(a, argparse._SubParsersAction))
    assert {a.dest: a.help for a in sub._choices_actions} == cli.COMMAND_HELP


def test_each_command_help_is_the_registered_one():
    eager = next(a for a in _eager_parser()._actions
                 if isinstance(a, argparse._SubParsersAction)).choices
    lazy = next(a for a in cli.build_parser()._actions
                if isinstance(a, argparse._SubParsersAction)).choices
    assert list(lazy) == list(eager) == list(cli.COMMANDS)
    for name in cli.COMMANDS:
        assert name in lazy
        assert lazy[name].format_help() == eager[name].format_help(), name
        alone = next(a for a in cli.build_parser(commands=(name,))._actions
                     if isinstance(a, argparse._SubParsersAction)).choices
        assert list(alone) == list(cli.COMMANDS)  # the others listed, not read
        assert alone[name].format_help() == eager[name].format_help(), name


def test_every_public_name_resolves_to_its_module_object():
    import causalfair.engines.choice as choice
    import causalfair.model as model

    for name in cf.__all__:
        assert getattr(cf, name) is not None, name
        assert name in dir(cf), name
    assert cf.decompose is choice.decompose
    assert cf.TabularModel is model.TabularModel
    assert cf.model is model  # a submodule, as before
    assert cf.audit is importlib.import_module("causalfair.audit")
    assert cf.systems.make is importlib.import_module("causalfair.systems").make
    from causalfair import SETTINGS, compare, decompose_mc  # noqa: F401

    assert SETTINGS == ("lending-1", "lending-2", "lending-3")
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        cf.nosuch  # noqa: B018
    with pytest.raises(ImportError):
        from causalfair import nosuch  # noqa: F401


def test_public_objects_pickle_across_processes():
    blob = pickle.dumps((cf.decompose, cf.TabularModel, cf.SETTINGS))
    code = ("import pickle, sys\nf, cls, s = pickle.loads(sys.stdin.buffer.read())\n"
            "print(f.__module__, cls.__name__, s)")
    out = run_cmd([sys.executable, "-c", code], input=blob, text=False, expect=0)
    assert out.stdout.decode().split() == ["causalfair.engines.choice", "TabularModel",
                                           "('lending-1',", "'lending-2',", "'lending-3')"]


@pytest.mark.parametrize("order", ["causalfair first", "gymnasium first"])
def test_import_causalfair_registers_the_gymnasium_envs(order):
    imports = ("import causalfair\nimport gymnasium" if order == "causalfair first"
               else "import gymnasium\nimport causalfair")
    code = (f"{imports}\nids = sorted(e for e in gymnasium.registry if e.startswith('causalfair/'))"
            "\nenv = gymnasium.make('causalfair/Lending-v0')\n"
            "print(len(env.reset(seed=0)[0]), ids)")
    out = run_cmd([sys.executable, "-c", code], expect=0, timeout=120)
    n, ids = out.stdout.strip().split(" ", 1)
    assert int(n) > 0
    assert eval(ids) == sorted(e for e, _, _ in cf._GYM_ENVS)  # noqa: S307
    assert len(cf._GYM_ENVS) == 8 and "causalfair/Lending-v0" in ids


def test_the_gymnasium_hook_waits_once_and_without_gymnasium():
    code = ("import sys, causalfair\n"
            "hooks = [f for f in sys.meta_path if type(f).__name__ == "
            "'_RegisterWhenGymnasiumLoads']\n"
            "causalfair._register_gymnasium()\n"
            "again = [f for f in sys.meta_path if type(f).__name__ == "
            "'_RegisterWhenGymnasiumLoads']\n"
            "import gymnasium.envs.registration\n"
            "left = [f for f in sys.meta_path if type(f).__name__ == "
            "'_RegisterWhenGymnasiumLoads']\n"
            "print(len(hooks), len(again), len(left), 'gymnasium' in sys.modules)")
    out = run_cmd([sys.executable, "-c", code], expect=0, timeout=120)
    assert out.stdout.split() == ["1", "1", "0", "True"]

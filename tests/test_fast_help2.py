"""Every ``causalfair COMMAND --help`` stays light (tests/test_fast_help.py covers
``causalfair --help`` and ``import causalfair``): building a command's parser and printing
its help imports neither numpy, torch, pandas, gymnasium nor the audit, the engines, the
systems or the trainers. The names the help shows and argparse's choices check come from
:mod:`causalfair._names` (standard library only), which their owners import: one definition,
the same objects."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from causalfair import _names, cli
from tests.conftest import run_cmd

#: What no command's --help may import (a module, or any of its submodules).
HEAVY = ("numpy", "torch", "pandas", "gymnasium", "scipy", "matplotlib", "networkx",
         "causalfair.audit", "causalfair.engines", "causalfair.systems", "causalfair.train",
         "causalfair.logs")


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return next(a for a in parser._actions
                if isinstance(a, argparse._SubParsersAction)).choices[name]


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_command_help_imports_nothing_heavy(command):
    probe = (
        "import sys, json, argparse\n"
        "from causalfair.cli import build_parser, main\n"
        f"p = build_parser(commands=({command!r},))\n"
        "sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))\n"
        f"text = sub.choices[{command!r}].format_help()\n"
        "try:\n"
        f"    main([{command!r}, '--help'])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        f"heavy = sorted(m for m in sys.modules for h in {HEAVY!r} "
        "if m == h or m.startswith(h + '.'))\n"
        "print(json.dumps([code, len(text), heavy]))\n"
    )
    out = run_cmd([sys.executable, "-c", probe], expect=0, timeout=120)
    code, length, heavy = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 0 and length > 200, out.stdout[-500:]  # the help was built and printed
    assert heavy == [], f"causalfair {command} --help imported {heavy[:8]}"


def test_the_help_names_are_their_owners_names():
    import causalfair as cf
    import causalfair.engines.montecarlo as mc
    import causalfair.systems.lending.settings as lending
    import causalfair.train as T
    import causalfair.train.algorithms as algorithms
    import causalfair.train.sweep as train_sweep
    from causalfair.report.export import EXPORTS

    assert lending.SETTINGS is _names.SETTINGS and cf.SETTINGS is _names.SETTINGS
    assert _names.SETTINGS == ("lending-1", "lending-2", "lending-3")
    assert mc.BENEFIT_N is _names.BENEFIT_N == 20_000
    assert mc.benefit_size(10**6) == _names.BENEFIT_N  # the cap the help states is the one used
    assert _names.EXPORT_KINDS == tuple(EXPORTS)  # report/export.py keeps its own dict
    assert algorithms.REGISTRY is _names.REGISTRY and algorithms.names is _names.names
    assert algorithms.get is _names.get and algorithms.Algorithm is _names.Algorithm
    assert T.ALGORITHMS is _names.PPO_ALGORITHMS
    assert T.ALGORITHMS == ("ppo", "ppo-c", "ppo-cb", "a-ppo", "f-ppo-l", "f-ppo", "elbert-po")
    assert train_sweep.POPULATION is _names.POPULATION == ("r-td3", "l-ucbfair")
    assert train_sweep.SWEEP_ALGORITHMS is _names.SWEEP_ALGORITHMS
    assert _names.SWEEP_ALGORITHMS == T.ALGORITHMS + train_sweep.POPULATION
    for name in _names.PPO_ALGORITHMS:  # every PPO name the help lists is a TrainConfig algo
        assert T.TrainConfig(algo=name).algo == name


def test_the_choices_are_the_registries():
    from causalfair.report.export import EXPORTS
    from causalfair.train.algorithms import REGISTRY

    parser = cli.build_parser()
    seen = 0
    for name in cli.COMMANDS:
        sub = _subparser(parser, name)
        for action in sub._actions:
            if "--setting" in action.option_strings:
                assert tuple(action.choices) == _names.SETTINGS, name
                seen += 1
    assert seen == 5  # decompose, graph, frontier, train, simulate-logs
    algo = _subparser(parser, "train")._option_string_actions["--algo"]
    assert tuple(algo.choices) == tuple(n for n, a in REGISTRY.items() if a.cli)
    assert "ppo-lag" in REGISTRY and "ppo-lag" not in algo.choices  # cli=False: spec only
    kind = next(a for a in _subparser(parser, "export")._actions if a.dest == "kind")
    assert tuple(kind.choices) == tuple(EXPORTS)
    sweep_help = _subparser(parser, "sweep")._option_string_actions["--algo"].help
    assert "(ppo, ppo-c, ppo-cb, a-ppo, f-ppo-l, f-ppo, elbert-po)" in sweep_help
    assert "(r-td3, l-ucbfair: replicator systems); exact trains with" in sweep_help
    n_help = _subparser(parser, "decompose")._option_string_actions["--n"].help
    assert "at most 20000 of them" in n_help


@pytest.mark.parametrize("argv, message", [
    (["train", "--algo", "ppox"], "argument --algo: invalid choice: 'ppox' (choose from 'ppo', "
     "'ppo-c', 'ppo-cb', 'a-ppo', 'f-ppo-l', 'f-ppo', 'elbert-po', 'exact', 'r-td3', "
     "'l-ucbfair'); did you mean ppo?"),
    (["graph", "--setting", "lending1"], "argument --setting: invalid choice: 'lending1' "
     "(choose from 'lending-1', 'lending-2', 'lending-3'); did you mean lending-1?"),
    (["export", "ll145", "x"], "argument kind: invalid choice: 'll145' (choose from "
     "'annex-iv', 'll144'); did you mean ll144?"),
])
def test_a_bad_choice_is_refused_as_before(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"causalfair {argv[0]}: error: {message}"

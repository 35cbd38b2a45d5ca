"""What README.md and docs/*.md name is what the code has: the files of README's module
map, the options of every ``causalfair COMMAND --flag`` and ``python benchmarks/X.py
--flag`` they quote, the dotted ``causalfair.x.y`` and ``cf.x`` names, the ``CAUSALFAIR_*`` variables,
the transcripts of docs/ci-gate.md and docs/decomposition.md, whose output is printed
by today's code, the workflow files (```yaml) that use the GitHub Action, and the
simulator-check messages docs/simulators.md quotes."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

import causalfair
from causalfair.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGE = ROOT / "causalfair"


def _lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines, numbered, with shell continuations (a trailing backslash) joined
    onto the line they start."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if pending is not None:
            line = pending[1] + " " + line.strip()
            i = pending[0]
            pending = None
        if line.endswith("\\"):
            pending = (i, line[:-1])
            continue
        out.append((i, line))
    return out


def _module_map() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## Layout", 1)[1].split("```")[1]


def module_map_names() -> list[tuple[Path, str]]:
    """(folder, name) for every ``NAME.py`` and ``NAME/`` in README's layout block: the
    folder is the section the line belongs to (``causalfair/``, ``causalfair/systems``,
    ...); a name may sit in a subfolder of it (``gym/ (door.py ...)``)."""
    names: list[tuple[Path, str]] = []
    section = PACKAGE
    for line in _module_map().splitlines():
        if not line.startswith("  ") and line.strip():  # causalfair/, tests/, benchmarks/...
            section = PACKAGE if line.startswith("causalfair/") else None
            continue
        if section is None:
            continue
        sub = re.match(r"  ([a-z_]+)/\s", line)
        if sub:
            section = PACKAGE / sub.group(1)
        elif re.match(r"  \S", line):  # a module of the package's own floor
            section = PACKAGE
        for name in re.findall(r"(?<![/\w])([A-Za-z_]\w*\.py)\b", line):
            names.append((section, name))
    return names


def test_module_map_names_files_that_exist():
    names = module_map_names()
    assert len(names) > 80, names  # the parser read the block
    missing = [f"{folder.relative_to(ROOT)}: {name}" for folder, name in names
               if not any(folder.rglob(name))]
    assert not missing, f"README's module map names files that do not exist: {missing}"


def test_module_map_lists_every_module_of_the_subpackages():
    listed = {name for _, name in module_map_names()}
    unlisted = [str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("*.py"))
                if p.name not in listed and p.name not in ("__init__.py", "__main__.py")
                and "commands" not in p.parts]  # commands/: "one module per subcommand"
    assert not unlisted, f"modules missing from README's module map: {unlisted}"


def _options() -> tuple[dict[str, set[str]], set[str]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    top = {o for a in parser._actions for o in a.option_strings}
    return ({name: {o for a in p._actions for o in a.option_strings}
             for name, p in sub.choices.items()}, top)


def test_every_cli_option_quoted_in_the_docs_exists():
    commands, top = _options()
    bad = []
    for path in DOCS:
        for i, line in _lines(path):
            for m in re.finditer(r"causalfair (?:--[a-z]+ (?:\S+ )?)?([a-z][a-z-]*)\b([^`\n]*)",
                                 line):
                cmd, rest = m.group(1), m.group(2)
                if cmd not in commands:
                    continue
                rest = re.split(r"\bcausalfair |[;|&]|#|\)", rest)[0]
                for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                    if flag not in commands[cmd] | top:
                        bad.append(f"{path.name}:{i}: causalfair {cmd} {flag}")
    assert not bad, f"options the docs quote that the command does not have: {bad}"


def test_every_benchmark_option_quoted_in_the_docs_exists():
    bad = []
    for path in DOCS:
        for i, line in _lines(path):
            for m in re.finditer(r"benchmarks/(\w+\.py)([^`|;)\n]*)", line):
                script = ROOT / "benchmarks" / m.group(1)
                if not script.is_file():
                    bad.append(f"{path.name}:{i}: no {script.name}")
                    continue
                source = script.read_text(encoding="utf-8")
                for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2)):
                    if f'"{flag}"' not in source:
                        bad.append(f"{path.name}:{i}: {script.name} {flag}")
    assert not bad, f"benchmark scripts or options the docs name that do not exist: {bad}"


#: MLflow tag names (docs/scale.md), not Python names
TAGS = {"causalfair.overall", "causalfair.stage", "causalfair.verdict", "causalfair.version",
        "causalfair.retrain_error"}


def test_dotted_names_in_the_docs_resolve():
    bad = []
    for path in DOCS:
        for m in re.finditer(r"\b(causalfair(?:\.[A-Za-z_]\w*)+)(\*?)", path.read_text("utf-8")):
            name, star = m.group(1), m.group(2)
            if any(name == t or name.startswith(t + ".") for t in TAGS):
                continue
            parts = name.split(".")
            for k in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:k]))
                    break
                except ModuleNotFoundError:
                    continue
            for j, attr in enumerate(parts[k:], k + 1):
                if star and j == len(parts):  # NAME_*: some attribute starts with it
                    if not any(a.startswith(attr) for a in dir(obj)):
                        bad.append(f"{path.name}: {name}*")
                    break
                if not hasattr(obj, attr):
                    bad.append(f"{path.name}: {name}")
                    break
                obj = getattr(obj, attr)
        for m in re.finditer(r"\bcf\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)", path.read_text("utf-8")):
            obj = causalfair
            for attr in m.group(1).split("."):
                if not hasattr(obj, attr):
                    bad.append(f"{path.name}: cf.{m.group(1)}")
                    break
                obj = getattr(obj, attr)
    assert not bad, f"names the docs give that do not resolve: {sorted(set(bad))}"


def test_environment_variables_named_in_the_docs_are_read():
    code = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    named = {v for p in DOCS for v in re.findall(r"CAUSALFAIR_[A-Z_]*[A-Z]", p.read_text("utf-8"))}
    assert named, "no CAUSALFAIR_ variable found in the docs"
    unknown = sorted(v for v in named if v not in code)
    assert not unknown, f"variables the docs name that causalfair never reads: {unknown}"


def _block_after(path: Path, marker: str) -> list[str]:
    """The lines of the first fenced block of PATH that contains MARKER."""
    for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        if marker in block:
            return block.splitlines()
    raise AssertionError(f"{path.name}: no block with {marker!r}")


def test_ci_gate_transcript_is_what_the_gate_prints(tmp_path, monkeypatch, capsys):
    doc = ROOT / "docs" / "ci-gate.md"
    spec = "\n".join(_block_after(doc, "# rel.toml")) + "\n"
    (tmp_path / "rel.toml").write_text(spec, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    lines = _block_after(doc, "$ causalfair gate rel.toml")
    merge = lines.index("$ causalfair gate-merge gate.json --markdown")
    assert main(["gate", "rel.toml", "--json", "gate.json"]) == 0
    printed = [x.rstrip() for x in capsys.readouterr().out.splitlines()]
    assert printed == lines[1:merge], "\n".join(printed)
    assert main(["gate-merge", "gate.json", "--markdown"]) == 0
    printed = [x.rstrip() for x in capsys.readouterr().out.splitlines()]
    shown = [x for x in lines[merge + 1:] if x != "..."]
    assert shown and all(x in printed for x in shown), "\n".join(printed)


def test_decomposition_excerpt_is_what_decompose_prints(capsys):
    lines = _block_after(ROOT / "docs" / "decomposition.md", "$ causalfair decompose")
    args = lines[0].split()[2:]
    assert main(args) == 0
    printed = [x.rstrip() for x in capsys.readouterr().out.splitlines()]
    shown = [x.rstrip() for x in lines[1:] if x.strip()]
    assert len(shown) > 8 and all(x in printed for x in shown), "\n".join(printed)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_no_stale_module_paths_in_the_docs(path):
    """Every ``causalfair/....py`` file the docs name exists (modules move when split)."""
    text = path.read_text(encoding="utf-8")
    missing = [p for p in re.findall(r"\b((?:causalfair|benchmarks|tests)/[\w/]+\.py)\b", text)
               if not (ROOT / p).is_file()]
    assert not missing, f"{path.name} names files that do not exist: {missing}"


def test_readme_lists_every_command_and_every_doc():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    synopsis = readme.split("## Command line", 1)[1].split("```")[1]
    commands, _ = _options()
    missing = [c for c in commands if f"causalfair {c} " not in synopsis]
    assert not missing, f"commands missing from README's command-line synopsis: {missing}"
    docs = readme.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    unlisted = [p.name for p in (ROOT / "docs").glob("*.md") if f"docs/{p.name}" not in docs]
    assert not unlisted, f"docs missing from README's Documentation list: {unlisted}"


def test_workflow_examples_use_the_action_as_it_is():
    """Every ```yaml block of the docs parses; a step using the causalfair Action gives
    only inputs action.yml declares, and its ``args`` with the ``--json``/``--junit`` the
    Action adds (action.yml's gate line) are a command line ``causalfair gate`` accepts."""
    import shlex

    import yaml

    inputs = set(yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["inputs"])

    def steps(node):
        if isinstance(node, dict):
            if str(node.get("uses", "")).startswith("causalfair/causalfair@"):
                yield node
            for value in node.values():
                yield from steps(value)
        elif isinstance(node, list):
            for value in node:
                yield from steps(value)

    found = []
    for path in DOCS:
        for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            for step in steps(yaml.safe_load(block)):
                given = {k: str(v).replace("${{ matrix.k }}", "1")
                         for k, v in step.get("with", {}).items()}
                assert set(given) <= inputs, (path.name, sorted(set(given) - inputs))
                line = ["gate", "a.toml", *shlex.split(given.get("args", "")), "--json",
                        given.get("json", "gate.json"), "--junit", given.get("junit", "g.xml")]
                build_parser().parse_args(line)  # SystemExit(2) on an option gate lacks
                found.append(path.name)
    assert found.count("scale.md") == 2, found  # the shard matrix and the workflow


def test_simulator_contract_messages_are_the_codes():
    """The lines docs/simulators.md quotes for the system's own checks of its simulator
    (feature width, the tabular features table) are what the checks raise."""
    from types import SimpleNamespace

    import numpy as np

    from causalfair.systems import contract

    text = (ROOT / "docs" / "simulators.md").read_text(encoding="utf-8")
    quoted = {line for block in re.findall(r"```\n(.*?)```", text, re.S)
              for line in block.splitlines()}
    table = np.zeros((2, 5, 1))
    table[0, 4, 0] = 2 / 3
    obs = SimpleNamespace(features=np.array([[7 / 6]]), level=np.array([4]), group=np.array([0]))
    tabular = SimpleNamespace(features=table, feature_names=["f0"])
    raised = []
    for check, args in ((contract._check_tabular_features, ("MySim", obs, tabular, 1)),
                        (contract._check_feature_width,
                         ("MySim", SimpleNamespace(features=np.zeros((4, 3))), ("skill", "years")))):
        with pytest.raises(causalfair.errors.SimulatorContractError) as err:
            check(*args)
        raised.append(str(err.value))
    missing = [m for m in raised if m not in quoted]
    assert not missing, f"docs/simulators.md does not quote what the check raises: {missing}"

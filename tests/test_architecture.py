"""The package's import graph shows its architecture (docs/contributing.md).

The graph is read from the source with :mod:`ast` (nothing is imported). A *node* is a
top-level module (``causalfair/graph.py``), a sub-package with everything under it
(``causalfair/engines/``), or the package face (``causalfair/__init__.py``). A node's layer is
one above the highest node it imports at module level (a node importing nothing is on layer
1). Imports under ``if TYPE_CHECKING:`` do not run and are not edges.

- **cycles**: strongly connected groups of nodes in the graph of every import that runs
  (module level and inside functions);
- **upward imports**: imports (module level or inside a function) from a node to a node on the
  same or a higher layer - the ones that run back up the layering;
- **layers**: the number of layers of the graph of every import that runs;
- **function-level imports**: imports of the package's own modules made inside a function
  that do not keep a heavy or optional dependency (:data:`HEAVY`) off the import path, i.e.
  whose target does not import one of them at module level, itself or through its own
  module-level imports; in the command modules (``causalfair/commands/``, the path of
  ``causalfair COMMAND --help``) numpy counts as heavy too (:data:`HELP_HEAVY`).

Run ``python tests/test_architecture.py`` to print the figures and the offending imports.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "causalfair"
ROOT = "causalfair"
#: Third-party modules kept off the import path of ``import causalfair`` / ``causalfair --help``.
HEAVY = frozenset({"torch", "matplotlib", "ray", "mlflow", "dowhy", "pyarrow",
                   "stable_baselines3", "pandas", "gymnasium", "scipy", "sklearn", "networkx"})
#: ... and off the path of ``causalfair COMMAND --help``: a command module (:data:`HELP_PATH`)
#: may import, inside the function that needs it, an own module that loads one of these.
HELP_HEAVY = HEAVY | {"numpy"}
HELP_PATH = "causalfair.commands."
MAX_LAYERS = 10
MAX_LINES = 800
#: Function-level imports that break a file-level loop inside one package (the two modules
#: import each other): none is left, none may be added.
WITHIN_PACKAGE_LOOPS: frozenset[tuple[str, str]] = frozenset()
#: Private names still imported from another module, as (importing module, name); each is to
#: go (made public in the lower module, or moved to its one user), none may be added.
PRIVATE_IMPORTS_LEFT: frozenset[tuple[str, str]] = frozenset()
MAX_PRIVATE_IMPORTS = len(PRIVATE_IMPORTS_LEFT)


@dataclass
class Import:
    src: str          # importing module (dotted)
    dst: str          # imported own module (dotted), or a third-party top-level name
    lineno: int
    in_function: bool
    own: bool


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    # ------------------------------------------------------------------ nodes
    @staticmethod
    def node(module: str) -> str:
        parts = module.split(".")
        return ROOT if len(parts) == 1 else parts[1]

    def is_package(self, module: str) -> bool:
        return self.modules.get(module, Path()).name == "__init__.py"

    def edges(self, *, module_level_only: bool) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {self.node(m): set() for m in self.modules}
        for imp in self.imports:
            if not imp.own or (module_level_only and imp.in_function):
                continue
            a, b = self.node(imp.src), self.node(imp.dst)
            if a != b:
                out[a].add(b)
        return out

    # ------------------------------------------------------------------ figures
    def cycles(self) -> list[list[str]]:
        return [c for c in _sccs(self.edges(module_level_only=False)) if len(c) > 1]

    def layers(self, *, module_level_only: bool) -> dict[str, int]:
        edges = self.edges(module_level_only=module_level_only)
        comp = {}
        sccs = _sccs(edges)
        for i, c in enumerate(sccs):
            for n in c:
                comp[n] = i
        layer: dict[int, int] = {}
        for i, c in enumerate(sccs):  # Tarjan's order: every component after those it imports
            deps = {comp[d] for n in c for d in edges[n]} - {i}
            layer[i] = 1 + max((layer[d] for d in deps), default=0)
        return {n: layer[comp[n]] for n in edges}

    def upward(self) -> list[Import]:
        """Imports of a node that imports the importer (they close a cycle) and sit on the
        same or a higher layer of the module-level graph: the imports that run back up."""
        comp = {n: i for i, c in enumerate(_sccs(self.edges(module_level_only=False)))
                for n in c}
        lay = self.layers(module_level_only=True)
        out = []
        for imp in self.imports:
            a, b = self.node(imp.src), self.node(imp.dst)
            if imp.own and a != b and comp[a] == comp[b] and lay[b] >= lay[a]:
                out.append(imp)
        return out

    def heavy_modules(self, heavy_deps: frozenset[str] = HEAVY) -> set[str]:
        """Own modules whose import (module-level closure, parent packages included)
        imports a :data:`HEAVY` dependency (one of ``heavy_deps``)."""
        deps: dict[str, set[str]] = defaultdict(set)
        heavy = set()
        for imp in self.imports:
            if imp.in_function:
                continue
            if imp.own:
                deps[imp.src].add(imp.dst)
            elif imp.dst in heavy_deps:
                heavy.add(imp.src)
        for m in self.modules:  # importing a.b.c runs a/__init__ and a/b/__init__
            parts = m.split(".")
            for i in range(2, len(parts)):
                deps[m].add(".".join(parts[:i]))
        changed = True
        while changed:
            changed = False
            for m in self.modules:
                if m not in heavy and any(d in heavy for d in deps[m]):
                    heavy.add(m)
                    changed = True
        return heavy

    def function_level(self) -> list[Import]:
        """Function-level imports of own modules that keep nothing heavy off the path."""
        heavy, help_heavy = self.heavy_modules(), self.heavy_modules(HELP_HEAVY)
        return [imp for imp in self.imports if imp.own and imp.in_function
                and imp.dst not in (help_heavy if imp.src.startswith(HELP_PATH) else heavy)]

    def private_imports(self) -> list[tuple[Import, str]]:
        return [(imp, name) for imp, name in self._from_names
                if name.startswith("_") and not name.startswith("__")]

    _from_names: list = field(default_factory=list)


def _sccs(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each after the components it reaches."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _module_name(path: Path, pkg: Path) -> str:
    rel = path.relative_to(pkg.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def build(pkg: Path = PKG) -> Graph:
    g = Graph()
    for path in sorted(pkg.rglob("*.py")):
        g.modules[_module_name(path, pkg)] = path

    def resolve(mod: str) -> str:
        """The longest own module that ``mod`` names (``a.b.NAME`` -> ``a.b``)."""
        while mod and mod not in g.modules:
            mod = mod.rpartition(".")[0]
        return mod or ROOT

    for module, path in g.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]

        def add(dst: str, lineno: int, in_function: bool, module: str = module) -> None:
            own = dst == ROOT or dst.startswith(ROOT + ".")
            g.imports.append(Import(module, resolve(dst) if own else dst.split(".")[0],
                                    lineno, in_function, own))

        def walk(node: ast.AST, in_function: bool, package: str = package) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _type_checking(child):
                    for c in child.orelse:
                        walk(c, in_function)
                    continue
                fn = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
                if isinstance(child, ast.Import):
                    for a in child.names:
                        add(a.name, child.lineno, fn)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = package.split(".")
                        base = base[:len(base) - child.level + 1]
                        src = ".".join(base + ([child.module] if child.module else []))
                    else:
                        src = child.module or ""
                    targets: dict[str, list[str]] = {}
                    for a in child.names:
                        full = f"{src}.{a.name}"
                        targets.setdefault(full if full in g.modules else src, []).append(a.name)
                    for target, names in targets.items():
                        add(target, child.lineno, fn)
                        if target == src and (src == ROOT or src.startswith(ROOT + ".")):
                            g._from_names.extend((g.imports[-1], n) for n in names)
                walk(child, fn)

        walk(tree, False)
    return g


def report(g: Graph) -> str:
    lay = g.layers(module_level_only=False)
    by_layer: dict[int, list[str]] = defaultdict(list)
    for n, layer in lay.items():
        by_layer[layer].append(n)
    lines = [f"nodes: {len(lay)}   layers: {max(lay.values())}   cycles: {len(g.cycles())}   "
             f"upward imports: {len(g.upward())}   own imports: "
             f"{sum(i.own for i in g.imports)} ({sum(i.own and i.in_function for i in g.imports)}"
             f" inside functions, {len(g.function_level())} of them keep nothing heavy off the "
             f"path)   private names imported across modules: {len(g.private_imports())}"]
    for layer in sorted(by_layer):
        lines.append(f"  layer {layer:2d}: {' '.join(sorted(by_layer[layer]))}")
    for c in g.cycles():
        lines.append(f"  cycle: {' <-> '.join(c)}")
    for imp in g.upward():
        lines.append(f"  upward: {imp.src}:{imp.lineno} -> {imp.dst}")
    for imp, name in g.private_imports():
        lines.append(f"  private: {imp.src}:{imp.lineno} imports {imp.dst}.{name}")
    return "\n".join(lines)


# ---------------------------------------------------------------------- tests
GRAPH = build()


def test_no_import_cycle():
    assert not GRAPH.cycles(), report(GRAPH)


def test_no_upward_import():
    assert not GRAPH.upward(), report(GRAPH)


def test_at_most_ten_layers():
    assert max(GRAPH.layers(module_level_only=False).values()) <= MAX_LAYERS, report(GRAPH)


def test_function_level_imports_only_for_heavy_dependencies():
    bad = [i for i in GRAPH.function_level() if (i.src, i.dst) not in WITHIN_PACKAGE_LOOPS]
    assert not bad, "function-level imports of own modules that keep nothing heavy off " \
        "the import path (hoist them to the top of the module):\n" + "\n".join(
            f"  {i.src}:{i.lineno} -> {i.dst}" for i in bad)


def test_private_names_stay_in_their_module():
    found = GRAPH.private_imports()
    bad = [(i, n) for i, n in found if (i.src, n) not in PRIVATE_IMPORTS_LEFT]
    assert not bad, "private names imported from another module (make the name public in " \
        "the lower module, or move it to its one user):\n" + "\n".join(
            f"  {i.src}:{i.lineno} imports {i.dst}.{n}" for i, n in bad)
    assert len(found) <= MAX_PRIVATE_IMPORTS, report(GRAPH)


def test_results_sit_below_the_engines():
    """Every engine and door reads the result types from :mod:`causalfair.results`, a floor
    below the engines; the Monte Carlo engines and the logs audit do not import the exact
    engine for its type (their figures: :mod:`causalfair.plotting`, below them too)."""
    lay = GRAPH.layers(module_level_only=False)
    assert lay["results"] < lay["engines"], report(GRAPH)
    assert not [i for i in GRAPH.imports if i.src == "causalfair.results" and i.own
                and GRAPH.node(i.dst) not in ("errors", "_validation", "plotting", "_texttable", "_io",
                                              "_simultaneous")], report(GRAPH)
    for src in ("causalfair.engines.montecarlo", "causalfair.engines.montecarlo_coupled"):
        assert not [i for i in GRAPH.imports if i.src == src
                    and i.dst == "causalfair.engines.effects"], f"{src} imports the exact engine"
    elsewhere = [(i, n) for i, n in GRAPH._from_names if n in ("Decomposition", "BenefitResult")
                 and i.dst != "causalfair.results"]
    assert not elsewhere, "\n".join(f"{i.src}:{i.lineno} imports {n} from {i.dst}"
                                    for i, n in elsewhere)
    import causalfair as cf
    from causalfair import results

    assert cf.Decomposition is results.Decomposition
    assert cf.BenefitResult is results.BenefitResult


def test_no_module_over_800_lines():
    long = {m: n for m, p in GRAPH.modules.items()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_the_measure_sees_cycles_upward_and_lazy_imports(tmp_path):
    """The analysis itself: a made-up package with a lazy loop and an upward import."""
    pkg = tmp_path / ROOT
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from causalfair import high\n__version__ = '0'\n")
    (pkg / "low" / "__init__.py").write_text(
        "def f():\n    from causalfair import __version__\n    import causalfair.high\n")
    (pkg / "high.py").write_text("import causalfair.low\nimport torch\n")
    (pkg / "mid.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import causalfair.high\n"
        "def g():\n    import causalfair.high\n    from causalfair.low import _x\n")
    g = build(pkg)
    assert g.cycles() == [[ROOT, "high", "low"]]
    assert {(i.src, i.dst) for i in g.upward()} == {("causalfair.low", ROOT),
                                                     ("causalfair.low", "causalfair.high")}
    assert g.layers(module_level_only=True) == {ROOT: 3, "high": 2, "low": 1, "mid": 1}
    # mid -> high and low -> root keep torch off the path; mid -> low keeps nothing off it
    assert [(i.src, i.dst) for i in g.function_level()] == [("causalfair.mid", "causalfair.low")]
    assert [n for _, n in g.private_imports()] == ["_x"]


def test_the_measure_lets_commands_keep_numpy_off_help(tmp_path):
    """In a command module (the path of ``causalfair COMMAND --help``) a function-level
    import of an own module that loads numpy keeps something heavy off the path; elsewhere it
    does not."""
    pkg = tmp_path / ROOT
    (pkg / "commands").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "num.py").write_text("import numpy\n")
    (pkg / "commands" / "__init__.py").write_text("")
    (pkg / "commands" / "cmd.py").write_text("def run():\n    import causalfair.num\n")
    (pkg / "other.py").write_text("def run():\n    import causalfair.num\n")
    assert [(i.src, i.dst) for i in build(pkg).function_level()] == [
        ("causalfair.other", "causalfair.num")]


if __name__ == "__main__":
    import sys

    print(report(build(Path(sys.argv[1])) if len(sys.argv) > 1 else GRAPH))

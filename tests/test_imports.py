"""The shape of the code: no import circles between causalfair's modules (function-level
imports included), and `causalfair --help` stays light (no torch, pandas, matplotlib)."""

import ast
import sys
from pathlib import Path

from tests.conftest import run_cmd

PKG = Path(__file__).resolve().parents[1] / "causalfair"


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t in mods and t != name and t != "causalfair":
                    # importing a package's own submodule from its __init__ is re-export,
                    # and a submodule importing its package's __init__ is not allowed below
                    edges[name].add(t)
                    break
    return edges


def test_no_import_circles():
    mods = _modules()
    edges = _edges(mods)
    # packages' __init__ re-export their submodules: drop edges parent-package -> child
    for m in list(edges):
        edges[m] = {t for t in edges[m] if not t.startswith(m + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(mods):
        if m not in state:
            visit(m)
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_help_does_not_import_heavy_libraries():
    code = ("import sys, causalfair.cli as c\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'pandas', 'matplotlib', 'scipy', 'dowhy') "
            "if m in sys.modules))")
    out = run_cmd([sys.executable, "-c", code], expect=0)
    assert out.stdout.strip().splitlines()[-1] == "[]"

"""No two of the package's modules import each other, even inside one package.

:mod:`tests.test_architecture` judges the graph of nodes (top-level modules and
sub-packages); here the graph is one of files: an edge for every import that runs (module
level or inside a function), so a loop inside a sub-package (``train`` <-> ``train.generic``),
broken today by a function-level import, shows too. Importing ``a.b.c`` runs ``a/__init__``
and ``a/b/__init__`` first; those implicit parent edges are not loops and are not counted.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_architecture import PKG, _sccs, build


def file_loops(pkg: Path = PKG) -> list[list[str]]:
    g = build(pkg)
    edges: dict[str, set[str]] = {m: set() for m in g.modules}
    for imp in g.imports:
        if imp.own and imp.src != imp.dst:
            edges[imp.src].add(imp.dst)
    return [c for c in _sccs(edges) if len(c) > 1]


def test_no_two_modules_import_each_other():
    loops = file_loops()
    assert not loops, "modules that import each other (move the shared code to a module " \
        "both can import):\n" + "\n".join(f"  {' <-> '.join(c)}" for c in loops)


def test_a_loop_inside_a_package_is_found(tmp_path):
    pkg = tmp_path / "causalfair"
    (pkg / "train").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "train" / "__init__.py").write_text(
        "from causalfair.train.config import X\n\n"
        "def train():\n    from causalfair.train.generic import run\n    return run()\n")
    (pkg / "train" / "config.py").write_text("X = 1\n")
    (pkg / "train" / "generic.py").write_text("from causalfair.train import train\nrun = train\n")
    assert file_loops(pkg) == [["causalfair.train", "causalfair.train.generic"]]

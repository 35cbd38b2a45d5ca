"""Example files shipped with the package, so the analyst notebook and the docs run from
an installed causalfair, not only inside a checkout: the lending-1 audit spec of
reports/examples/ (``lending-1-ppo.toml``), its plain-PPO checkpoint and the checkpoint's
constrained repair. reports/examples/regenerate.sh writes them; a test keeps the copies
identical to reports/examples/.

>>> import causalfair as cf
>>> spec = cf.examples.path("lending-1-ppo.toml")
>>> cf.audit(spec).overall
'FAIL'
"""

from __future__ import annotations

from pathlib import Path

from causalfair.errors import InputError

__all__ = ["path", "names"]

_HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """The example files, as paths relative to the examples folder."""
    return sorted(str(p.relative_to(_HERE)) for p in _HERE.rglob("*")
                  if p.is_file() and p.suffix in (".toml", ".pt"))


def path(name: str) -> Path:
    """The path of the example file ``name`` (e.g. ``"lending-1-ppo.toml"``)."""
    if name not in names():
        raise InputError(f"examples: unknown file {name!r}; available: {', '.join(names())}.")
    return _HERE / name

"""The system registry (the Gymnasium convention): ``register(id, factory)``,
``make(id, **params)``, ``spec(id)``, ``registered()``, ``pprint_registry()``.

Ids are strings, so they can be written in audit specs and sent to worker processes.
:func:`make` resolves an id in this order:

1. the registry (built-in systems, and anything ``register``-ed at import time);
2. ``"module:callable"``: the module is imported - from ``search_path`` first (an audit
   spec's folder), then from the installed packages - and the callable is called with the
   parameters. Importing a module runs its code, like pytest's ``conftest.py``;
3. the entry-point group ``causalfair.systems`` of installed packages
   (``[project.entry-points."causalfair.systems"] clinic = "mypkg.sims:make_clinic"``),
   read only on a registry miss and never at ``import causalfair``, so a broken plugin
   affects only its own id.

A factory may return a :class:`~causalfair.systems.System`, a
:class:`~causalfair.model.TabularModel` or any simulator implementing the 4-method
protocol of :mod:`causalfair.systems.simulator` (wrapped with defaults: two actions, baseline 0).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from causalfair._usercode import (
    call_factory,
    check_params,
    importable,
    load_callable,
    missing_params,
)
from causalfair.errors import SystemError_, short
from causalfair.systems.system import System, as_system
from causalfair.workers import user_prints_to_stderr

__all__ = ["SystemSpec", "register", "make", "spec", "registered", "pprint_registry",
           "load_callable", "call_factory", "check_params", "importable", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "causalfair.systems"


@dataclass(frozen=True)
class SystemSpec:
    """A registry entry: the id, the factory (a callable or ``"module:callable"``), the
    default parameters and a one-line description."""

    id: str
    entry_point: str | Callable[..., Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def factory(self, search_path: str | Path | None = None) -> Callable[..., Any]:
        if callable(self.entry_point):
            return self.entry_point
        return load_callable(self.entry_point, search_path=search_path, what=f"system {self.id!r}")

    def to_dict(self) -> dict[str, Any]:
        ep = self.entry_point if isinstance(self.entry_point, str) else (
            f"{getattr(self.entry_point, '__module__', '?')}:"
            f"{getattr(self.entry_point, '__qualname__', repr(self.entry_point))}")
        return {"id": self.id, "entry_point": ep, "defaults": dict(self.defaults),
                "description": self.description}


_REGISTRY: dict[str, SystemSpec] = {}


def register(id: str, entry_point: str | Callable[..., Any], /, *, description: str = "",
             override: bool = False, **defaults: Any) -> None:
    """Register a system factory under ``id`` (``defaults`` are keyword arguments passed
    to it, overridable in :func:`make`). Registering an existing id raises unless
    ``override=True``, or unless the entry is the very same (the same factory, defaults
    and description) or its factory is redefined in ``__main__`` under the same name (a
    notebook cell run again: the new definition replaces the old)."""
    if not isinstance(id, str) or not id or any(c.isspace() for c in id):
        raise SystemError_(f"register: id must be a non-empty string without spaces, got {short(id)}.")
    if not (callable(entry_point) or (isinstance(entry_point, str) and ":" in entry_point)):
        raise SystemError_(
            f"register({id!r}): entry_point must be a callable or 'module:callable', got "
            f"{short(entry_point)}.")
    entry = SystemSpec(id, entry_point, dict(defaults), description)
    if id in _REGISTRY and not override and not _same_entry(_REGISTRY[id], entry):
        raise SystemError_(f"register: id {id!r} is already registered; pass override=True to replace it.")
    if callable(entry_point):  # a default the factory does not take: refused now, not at make
        check_params(entry_point, defaults, f"register({id!r})")
    _REGISTRY[id] = entry


def _same_entry(old: SystemSpec, new: SystemSpec) -> bool:
    """Whether registering ``new`` repeats ``old`` (defaults that cannot be compared, such
    as arrays, count as different), or redefines it where a notebook cell run again does:
    a factory of the interactive session (``__main__``) under the same name, which then
    replaces the old one."""
    a, b = old.entry_point, new.entry_point
    if (callable(a) and callable(b) and getattr(a, "__module__", None) == "__main__"
            and getattr(b, "__module__", None) == "__main__"
            and getattr(a, "__qualname__", 1) == getattr(b, "__qualname__", 2)):
        return True
    try:
        return bool(old == new)
    except (TypeError, ValueError):
        return False


def registered() -> tuple[str, ...]:
    """The registered ids, sorted."""
    return tuple(sorted(_REGISTRY))


def spec(id: str) -> SystemSpec:
    """The registry entry of ``id`` (entry points of installed packages included)."""
    if id in _REGISTRY:
        return _REGISTRY[id]
    ep = _entry_point(id)
    if ep is not None:
        return ep
    raise SystemError_(_unknown_message(id))


def _unknown_message(id: str, search_path: str | Path | None = None) -> str:
    known = ", ".join(registered()) or "none"
    hint = _closest(id, search_path)
    return (f"system: unknown id {short(id)}; registered ids: {known}.{hint} Did you install or "
            "import the package that registers it? A factory of your own is written "
            "'module:callable'.")


def _closest(id: str, search_path: str | Path | None) -> str:
    """``" Did you mean 'X'?"``: ``id.py`` in the search path (default: the working
    directory) with its factories (read as text, nothing run), else the nearest registered
    id, else ``""``."""
    import difflib
    import re

    path = Path(search_path if search_path is not None else ".") / f"{id}.py"
    try:
        text = path.read_text(encoding="utf-8") if id.isidentifier() and path.is_file() else ""
    except (OSError, UnicodeDecodeError):
        text = ""
    funcs = re.findall(r"^def ([A-Za-z]\w*)\s*\(", text, re.M)
    funcs = [f for f in funcs if f.startswith("make")] or funcs
    if funcs:
        return f" Did you mean {' or '.join(repr(f'{id}:{f}') for f in funcs[:3])}?"
    close = difflib.get_close_matches(id, registered(), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _entry_point(id: str) -> SystemSpec | None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == id:
            s = SystemSpec(id, ep.value, {}, f"entry point of {ep.dist.name if ep.dist else '?'}")
            _REGISTRY.setdefault(id, s)
            return s
    return None


def make(id: str, /, *, search_path: str | Path | None = None, **params: Any) -> System:
    """Build the system ``id`` (a registered id, ``"module:callable"`` or an entry-point
    name) with ``params`` overriding the registered defaults."""
    if not isinstance(id, str) or not id:
        raise SystemError_(f"system: id must be a non-empty string, got {short(id)}.")
    # what the module's import and the factory print goes to stderr: never into the JSON
    # of `decompose --json` / `audit --json`
    with user_prints_to_stderr():
        if id in _REGISTRY or (":" not in id and _entry_point(id) is not None):
            entry = _REGISTRY[id]
            fn = entry.factory(search_path)
            kwargs = {**entry.defaults, **params}
            sid = id
        elif ":" in id:
            fn = load_callable(id, search_path=search_path, what=f"system factory {id!r}")
            kwargs = dict(params)
            sid = id
        else:
            raise SystemError_(_unknown_message(id, search_path))
        what = f"system {sid!r}"
        check_params(fn, kwargs, what)
        _check_required(fn, kwargs, what)
        obj = call_factory(f"system factory {sid!r}", fn, search_path, **kwargs)
    system = as_system(obj, id=sid, params=kwargs, where=what)
    # the id it was made from names it, or the factory's refinement of that id (the
    # registered "gym" names its env: "gym:module:make_env"); make(sid, **params) rebuilds it
    keep = system.id == sid or system.id.startswith(f"{sid}:")
    if not keep or dict(system.params) != kwargs:
        system = system.with_(id=system.id if keep else sid, params=kwargs)
    return system


def _check_required(fn: Callable[..., Any], params: Mapping[str, Any], what: str) -> None:
    """Refuse, naming how to give them, the factory's parameters without a default that
    ``params`` leaves out (the call would fail as a TypeError of the factory)."""
    missing = missing_params(fn, params)
    if missing:
        name = missing[0]
        raise SystemError_(
            f"{what}: its factory needs {', '.join(map(repr, missing))} (no default); "
            f"give it: --param {name}=VALUE on the command line, params = {{ {name} = ... }} "
            f"in the spec's [system], or make(id, {name}=...) in Python (or give it a default "
            "in the factory).")


def pprint_registry(file: TextIO | None = None) -> None:
    """Print the registered ids with their descriptions."""
    out = file or sys.stdout
    for sid in registered():
        s = _REGISTRY[sid]
        defaults = ", ".join(f"{k}={v!r}" for k, v in s.defaults.items())
        out.write(f"{sid:<20} {s.description}{f'  [{defaults}]' if defaults else ''}\n")

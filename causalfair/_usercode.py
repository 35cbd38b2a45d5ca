"""User code as causalfair calls it: a user's object behind a guard.

Every call into a user's policy (``prob_d1``, ``action_probs``, ``start_batch``: the
guard of :func:`guard_policy`) or simulator (``reset``, ``observe``, ``draw_noise``,
``step``: :func:`causalfair.systems.contract.guard_simulator`, on the same
:class:`Guard` base, beside the contract it checks) goes through
:func:`~causalfair.errors.call_user`, so anything it raises - ``SystemExit`` included -
is a one-line :class:`~causalfair.errors.UserCodeError` naming the method, with the
user's traceback kept (:func:`user_traceback`) for a log file under
``.causalfair/logs/`` or stderr with ``--debug`` (:func:`keep_tracebacks`).

This module depends on :mod:`causalfair.errors` and :mod:`causalfair._io` only, so the
systems, the engines, the audit and the command line can all use it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from causalfair._io import atomic_write_text, causalfair_dir
from causalfair.errors import call_user

__all__ = ["Guard", "guard_as", "is_own", "guard_policy", "user_traceback", "keep_tracebacks"]


def is_own(cls: type) -> bool:
    """Whether ``cls`` is one of causalfair's own classes (not user code)."""
    return cls.__module__.split(".")[0] == "causalfair"


class Guard:
    """Delegates every attribute to the wrapped object (``_obj``); subclasses carry the
    wrapped class's name, so messages name the user's class."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any):
        object.__setattr__(self, "_obj", obj)

    def __getattr__(self, name: str) -> Any:
        if name == "_obj":  # during unpickling, before __init__
            raise AttributeError(name)
        return getattr(self._obj, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._obj, name, value)

    def __repr__(self) -> str:
        return repr(self._obj)


_GUARD_TYPES: dict[tuple[type, type], type] = {}


def guard_as(base: type, obj: Any) -> Any:
    """``obj`` behind the :class:`Guard` subclass ``base``, in a subclass named as
    ``obj``'s class (one per (base, class), cached)."""
    cls = type(obj)
    guard = _GUARD_TYPES.get((base, cls))
    if guard is None:
        guard = type(cls.__name__, (base,), {"__slots__": (), "__qualname__": cls.__qualname__})
        _GUARD_TYPES[(base, cls)] = guard
    return guard(obj)


class _GuardedPolicy(Guard):
    """A user's policy object: ``prob_d1``, ``action_probs`` and ``start_batch`` (those it
    has) are called through :func:`~causalfair.errors.call_user`; the engines validate
    the probabilities they return."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        attr = super().__getattr__(name)
        if name in ("prob_d1", "action_probs", "start_batch") and callable(attr):
            what = f"policy {type(self._obj).__name__}.{name}"
            return lambda *args, **kw: call_user(what, attr, *args, **kw)
        return attr

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return guard_policy, (self._obj,)


def guard_policy(policy: Any) -> Any:
    """A user's policy object (one with ``prob_d1`` or ``action_probs``) behind a guard
    that calls it as user code; causalfair's own policies, and objects the adapters
    convert (SB3 models, tables, functions), are returned as they are."""
    if isinstance(policy, Guard) or is_own(type(policy)) or not (
            callable(getattr(policy, "prob_d1", None))
            or callable(getattr(policy, "action_probs", None))):
        return policy
    return guard_as(_GuardedPolicy, policy)


def user_traceback(exc: BaseException | None) -> str:
    """The user's traceback kept by a :class:`~causalfair.errors.UserCodeError` that is
    ``exc`` or caused it ("" when there is none)."""
    seen = 0
    while exc is not None and seen < 20:
        text = getattr(exc, "traceback_text", "")
        if text:
            return str(text)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return ""


def keep_tracebacks(tracebacks: Sequence[str], command: str, debug: bool) -> str:
    """Keep the users' ``tracebacks`` (empty ones skipped): with ``debug`` write them to
    stderr and return ""; else write them to ``.causalfair/logs/COMMAND-TIME-PID.log``
    and return the note the one-line error ends with (" (traceback: PATH; --debug
    prints it)"). A log that cannot be written is skipped (the note then names
    --debug)."""
    texts = [t for t in tracebacks if t]
    if not texts:
        return ""
    if debug:
        for t in texts:
            sys.stderr.write(t if t.endswith("\n") else t + "\n")
        return ""
    try:
        path = causalfair_dir() / "logs" / (
            f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        atomic_write_text(path, "\n".join(texts))
    except OSError:
        return " (run with --debug for the traceback)"
    return f" (traceback: {path}; --debug prints it)"

"""User code as causalfair calls it: a user's object behind a guard.

Every call into a user's policy (``prob_d1``, ``action_probs``, ``start_batch``: the
guard of :func:`guard_policy`) or simulator (``reset``, ``observe``, ``draw_noise``,
``step``: :func:`causalfair.systems.contract.guard_simulator`, on the same
:class:`Guard` base, beside the contract it checks) goes through
:func:`~causalfair.errors.call_user`, so anything it raises - ``SystemExit`` included -
is a one-line :class:`~causalfair.errors.UserCodeError` naming the method, with the
user's traceback kept for a log file or ``--debug`` (:func:`user_traceback`).

This module depends on :mod:`causalfair.errors` only, so the systems, the engines and the
audit can all use it.
"""

from __future__ import annotations

from typing import Any

from causalfair.errors import call_user

__all__ = ["Guard", "guard_as", "is_own", "guard_policy", "user_traceback"]


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

"""User code as causalfair calls it: a user's simulator and policy behind guards.

Every call into a user's simulator (``reset``, ``observe``, ``draw_noise``, ``step``) or
policy (``prob_d1``, ``action_probs``, ``start_batch``) goes through
:func:`~causalfair.errors.call_user`, so anything it raises - ``SystemExit`` included -
is a one-line :class:`~causalfair.errors.UserCodeError` naming the method, with the
user's traceback kept for a log file or ``--debug``. What a simulator returns is checked
on every call by the rules of the simulator contract
(:func:`causalfair.montecarlo.check_simulator`; docs/simulators.md), so a simulator that
breaks it after the sampled check is refused instead of giving wrong numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair._contract import _check_noise, _check_observation, _check_step_result
from causalfair.errors import call_user

__all__ = ["guard_simulator", "guard_policy", "user_traceback"]


def _own(cls: type) -> bool:
    """Whether ``cls`` is one of causalfair's own classes (not user code)."""
    return cls.__module__.split(".")[0] == "causalfair"


class _Guard:
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


def _guard(base: type, obj: Any) -> Any:
    cls = type(obj)
    guard = _GUARD_TYPES.get((base, cls))
    if guard is None:
        guard = type(cls.__name__, (base,), {"__slots__": (), "__qualname__": cls.__qualname__})
        _GUARD_TYPES[(base, cls)] = guard
    return guard(obj)


class _GuardedSimulator(_Guard):
    """A user's simulator as the engines see it: the four protocol methods are called
    through :func:`~causalfair.errors.call_user` (anything they raise or exit with is a
    one-line error naming the method), and what each call returns is checked with the
    rules of :func:`causalfair.montecarlo.check_simulator` (shapes, dtypes, finite
    values, probabilities in [0, 1]) by vectorised numpy checks: O(1) Python calls per
    step, whatever the batch size. Everything else is the wrapped simulator's."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return guard_simulator, (self._obj,)

    def _call(self, method: str, *args: Any) -> Any:
        return call_user(f"simulator {type(self._obj).__name__}.{method}",
                         getattr(self._obj, method), *args)

    def reset(self, n: int, group: Any, rng: Any) -> Any:
        return self._call("reset", n, group, rng)

    def observe(self, state: Any) -> Any:
        obs = self._call("observe", state)
        group = getattr(obs, "group", None)
        _check_observation(self._obj, obs, np.shape(group)[0] if np.ndim(group) == 1 else -1,
                           "observe")
        return obs

    def draw_noise(self, n: int, rng: Any) -> Any:
        noise = self._call("draw_noise", n, rng)
        _check_noise(self._obj, noise, n)
        return noise

    def step(self, state: Any, decisions: Any, noise: Any) -> Any:
        res = self._call("step", state, decisions, noise)
        _check_step_result(self._obj, res, np.shape(decisions)[0])
        return res


def guard_simulator(sim: Any) -> Any:
    """``sim`` behind a guard that calls and checks every protocol method (see
    :class:`_GuardedSimulator`); causalfair's own simulators are returned as they are."""
    if isinstance(sim, _Guard) or _own(type(sim)):
        return sim
    return _guard(_GuardedSimulator, sim)


class _GuardedPolicy(_Guard):
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
    if isinstance(policy, _Guard) or _own(type(policy)) or not (
            callable(getattr(policy, "prob_d1", None))
            or callable(getattr(policy, "action_probs", None))):
        return policy
    return _guard(_GuardedPolicy, policy)


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

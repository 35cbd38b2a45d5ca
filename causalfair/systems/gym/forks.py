"""Snapshots and forks of a Gymnasium env for the Gymnasium door's simulator
(:mod:`causalfair.systems.gym.simulator`): what an env's state API is, which objects
copies of an env share, a fast deep copy of an env, the bookkeeping wrappers stepped
through, and the generator each step is given (:class:`StepGenerator`).

A fork runs one individual under another decision with the same random numbers (common
random numbers, method.md section 3): a copy of the env's snapshot (or its own
``get_state``/``set_state``) stepped with a generator in the state that the step's noise
names."""

from __future__ import annotations

import copy
import ctypes
import random as _pyrandom
import sys
from collections import deque
from typing import Any

import numpy as np

__all__ = ["state_api", "shared_objects", "copy_env", "unwrap_bookkeeping", "time_limit",
           "StepGenerator", "generator_state", "INC"]

INC = (0xDA3E39CB94B95BDB << 64) | 0x5851F42D4C957F2D | 1  # a fixed odd PCG64 increment
_LOW = (1 << 64) - 1
_INC_LO, _INC_HI = INC & _LOW, INC >> 64


def state_api(env: Any) -> tuple[str, str] | None:
    for get, put in (("get_state", "set_state"), ("clone_state", "restore_state")):
        if callable(getattr(env, get, None)) and callable(getattr(env, put, None)):
            return get, put
    return None


def shared_objects(env: Any) -> dict[int, Any]:
    """What copies of ``env`` share: the spaces, the env spec (a wrapper's cached one
    too, and the constructor arguments a wrapper records for it), the metadata and the
    generator (each step is given its own generator state), through the wrapper chain;
    and the global generators (``np.random``'s ``RandomState``, which scipy.stats'
    distributions hold, and ``random``'s), which a copy would turn into a generator of its
    own, in one state for every individual: shared, a step drawing from them is seen (and
    refused) as reading them."""
    memo: dict[int, Any] = {id(g): g for g in (np.random.random.__self__,
                                               _pyrandom.random.__self__)}
    e = env
    while e is not None and hasattr(e, "__dict__"):
        for attr in ("action_space", "observation_space", "_action_space", "_observation_space",
                     "spec", "_cached_spec", "_metadata", "metadata", "_np_random",
                     "_saved_kwargs"):
            v = e.__dict__.get(attr)
            if v is not None:
                memo[id(v)] = v
        e = e.__dict__.get("env")
    return memo


_ATOMIC = (int, float, bool, str, bytes, complex, type(None), np.generic)
_ATOMIC_TYPES = frozenset((int, float, bool, str, bytes, complex, type(None), np.float64,
                           np.float32, np.int64, np.int32, np.bool_))
_PLAIN: dict[type, bool] = {}


def _plain(cls: type) -> bool:
    """Whether instances of ``cls`` copy as a fresh ``__dict__`` (no ``__slots__``, no
    custom copy or pickle hooks): the fast path of :func:`copy_env`. Gymnasium's
    ``EzPickle`` hooks count as none: they pickle an env as its constructor's arguments,
    so ``copy.deepcopy`` would build a new env instead of copying this one's state (a
    fork would restart the individual)."""
    ok = _PLAIN.get(cls)
    if ok is None:
        ez = _ezpickle()
        hooks = {m: getattr(ez, m, None) if ez is not None and issubclass(cls, ez)
                 else getattr(object, m, None)
                 for m in ("__reduce_ex__", "__reduce__", "__getstate__", "__setstate__")}
        ok = _PLAIN[cls] = (
            not any(vars(k).get("__slots__") for k in cls.__mro__[:-1])
            and all(getattr(cls, m, None) is default for m, default in hooks.items())
            and not hasattr(cls, "__deepcopy__"))
    return ok


def _ezpickle() -> type | None:
    """``gymnasium.utils.EzPickle`` (None without Gymnasium)."""
    try:
        from gymnasium.utils import EzPickle
    except ImportError:  # pragma: no cover - the door needs Gymnasium anyway
        return None
    return EzPickle


def copy_env(env: Any, shared: dict[int, Any], memo: dict[int, Any] | None = None) -> Any:
    """A deep copy of ``env`` sharing ``shared``: what ``copy.deepcopy(env, dict(shared))``
    makes, faster for envs (and wrappers) that are plain objects of numbers and arrays.
    As with ``copy.deepcopy``, an object reached twice is copied once: an attribute that
    refers back to the env (a bound method ``self._get_obs = self._features``, a helper
    holding ``self.env = env``) refers to the copy, and two attributes holding one array
    hold one copy. ``memo`` is ``copy.deepcopy``'s (for the env inside a wrapper)."""
    cls = type(env)
    ok = _PLAIN.get(cls)
    if not (ok or (ok is None and _plain(cls))):
        return copy.deepcopy(env, dict(shared) if memo is None else memo)
    new = object.__new__(cls)
    if memo is not None:
        memo[id(env)] = new
    arrays: list[tuple[Any, Any]] = []  # (array, its copy) made before a memo was needed
    d = env.__dict__.copy()
    for k, v in d.items():  # values are replaced in place: the keys do not change
        if type(v) in _ATOMIC_TYPES or id(v) in shared:
            continue
        if (type(v) is np.ndarray and v.dtype.kind in "biufc") or (
                type(v) is deque and all(type(x) in _ATOMIC_TYPES for x in v)):
            # arrays of numbers, queues of numbers (RecordEpisodeStatistics'): v.copy()
            if memo is not None:
                got = memo.get(id(v))
                if got is None:
                    got = memo[id(v)] = v.copy()
                d[k] = got
                continue
            for a, c in arrays:
                if a is v:
                    d[k] = c
                    break
            else:
                d[k] = c = v.copy()
                arrays.append((v, c))
            continue
        if isinstance(v, _ATOMIC):
            continue
        if memo is None:
            memo = dict(shared)
            memo[id(env)] = new
            memo.update((id(a), c) for a, c in arrays)
        if hasattr(v, "unwrapped") and hasattr(v, "step") and _plain(type(v)):
            d[k] = copy_env(v, shared, memo)  # the env inside a wrapper
        else:
            d[k] = copy.deepcopy(v, memo)
    new.__dict__ = d
    return new


_BOOKKEEPING = frozenset(("TimeLimit", "OrderEnforcing", "PassiveEnvChecker"))


def unwrap_bookkeeping(env: Any) -> Any:
    """``env`` without the outer wrappers that ``gymnasium.make`` adds for bookkeeping
    (``TimeLimit``: truncation, which the door does not read, the horizon is its own;
    ``OrderEnforcing``: reset before step, which every snapshot is; ``PassiveEnvChecker``:
    checks of the first reset and step): the wrappers from the outside in down to the
    first other one (a user's wrapper, kept with everything under it) or to
    ``env.unwrapped``. Those wrappers change no transition, and stepping the env under
    them is a copy and a call less per layer."""
    e = env
    while hasattr(e, "env") and getattr(e, "unwrapped", e) is not e:
        cls = type(e)
        if cls.__name__ not in _BOOKKEEPING or not cls.__module__.startswith("gymnasium.wrappers"):
            return e
        e = e.env
    return e


def time_limit(env: Any) -> int | None:
    """The ``max_episode_steps`` of the outermost Gymnasium ``TimeLimit`` wrapped around
    ``env`` (one a factory adds itself, not only ``gymnasium.make``'s), or None: the
    length of its episodes when nothing else ends them."""
    e = env
    while hasattr(e, "env") and getattr(e, "unwrapped", e) is not e:
        cls = type(e)
        if cls.__name__ == "TimeLimit" and cls.__module__.startswith("gymnasium.wrappers"):
            steps = getattr(e, "_max_episode_steps", None)
            return int(steps) if isinstance(steps, int) and steps > 0 else None
        e = e.env
    return None


def generator_state(word_hi: int, word_lo: int) -> dict[str, Any]:
    """The ``bit_generator.state`` of PCG64 at the 128-bit state ``word_hi:word_lo`` with
    the fixed increment :data:`INC` (no buffered 32-bit value)."""
    return {"bit_generator": "PCG64", "state": {"state": (int(word_hi) << 64) | int(word_lo),
                                               "inc": INC}, "has_uint32": 0, "uinteger": 0}


class _PCG64State(ctypes.Structure):
    """numpy's ``pcg64_state`` (``numpy/random/src/pcg64/pcg64.h``): a pointer to the
    generator's (state, increment) words, and its buffered 32-bit value."""

    _fields_ = [("pcg_state", ctypes.c_void_p), ("has_uint32", ctypes.c_int),
                ("uinteger", ctypes.c_uint32)]


class _Buffered(ctypes.Structure):
    """:class:`_PCG64State` with its buffer flag and buffered value as one 64-bit word
    (``has_uint32`` at offset 8, ``uinteger`` at 12): zero clears both in one write."""

    _fields_ = [("pcg_state", ctypes.c_void_p), ("buffered", ctypes.c_uint64)]


class StepGenerator:
    """One PCG64 ``Generator`` (``rng``) put into the state a step's noise names before the
    step: ``set(hi, lo)`` leaves the generator exactly as ``bit_generator.state =
    generator_state(hi, lo)`` does (numpy's documented setter: it also clears a buffered
    32-bit value and resets the increment an env's ``set_state`` may have moved).

    The setter parses a dictionary and costs about a microsecond, as much as a cheap env's
    whole step, and every env step of an audit needs one. So the state is written straight
    into the generator's C state (numpy's documented ``bit_generator.ctypes.state_address``):
    :meth:`words` turns an epoch's noise into each individual's four 64-bit words (state
    and increment) as bytes in the C state's order, and ``view[:] = word; flags.buffered =
    0`` (:meth:`put`) writes one of them and clears the buffered 32-bit value, two stores.
    The words' order depends on how numpy's build stores a 128-bit integer, so it is found
    by setting a known state with the setter and reading it back; then a write is checked
    against the setter's state. A build where either check fails has ``view`` None, and
    :meth:`put` uses the setter."""

    def __init__(self) -> None:
        self.rng = np.random.Generator(np.random.PCG64(0))
        self._bitgen = self.rng.bit_generator
        self._gstate = generator_state(0, 0)
        self._word = self._gstate["state"]
        self._words: Any = None  # the four words as ctypes (None: the setter is used)
        #: the 32 bytes of the (state, increment) words, or None (the setter is used)
        self.view: memoryview | None = None
        #: the buffered 32-bit value and its flag (``flags.buffered = 0`` clears them)
        self.flags: Any = None
        self._order: tuple[int, int, int, int] = (0, 1, 2, 3)
        try:
            c = _PCG64State.from_address(self._bitgen.ctypes.state_address)
            words = (ctypes.c_uint64 * 4).from_address(c.pcg_state)
        except (AttributeError, TypeError, ValueError):  # pragma: no cover - no ctypes state
            return
        probe = (0x0123456789ABCDEF, 0xFEDCBA9876543210)
        self._setter(*probe)
        halves = {probe[1]: 0, probe[0]: 1, INC & _LOW: 2, INC >> 64: 3}  # lo, hi, inc lo, hi
        if sorted(halves.get(w, -1) for w in words) != [0, 1, 2, 3]:
            return  # pragma: no cover - an unknown layout: keep the setter
        self._order = tuple(sorted(range(4), key=lambda k: halves[words[k]]))
        self._words = words
        self.view = memoryview(words).cast("B")
        self.flags = _Buffered.from_address(self._bitgen.ctypes.state_address)
        self.rng.integers(0, 7, size=3, dtype=np.int32)  # 32-bit draws: a buffered value
        self.set(*probe[::-1])
        ref = np.random.PCG64(0)
        ref.state = generator_state(*probe[::-1])
        if self._bitgen.state != ref.state:  # pragma: no cover - keep the setter
            self._words = self.view = self.flags = None

    def _setter(self, hi: int, lo: int) -> None:
        self._word["state"] = (hi << 64) | lo
        self._bitgen.state = self._gstate

    def words(self, noise: np.ndarray) -> list[bytes]:
        """Per row of ``noise`` (n rows of two 64-bit words, ``hi, lo``, as
        :meth:`GymSimulator.draw_noise` draws them), the bytes that :meth:`put` writes:
        the state ``hi:lo`` and the increment :data:`INC`, in the C state's order."""
        noise = np.asarray(noise, dtype=np.uint64).reshape(-1, 2)
        i, j, k, m = self._order
        raw = np.empty((len(noise), 4), dtype=np.uint64)
        raw[:, i] = noise[:, 1]
        raw[:, j] = noise[:, 0]
        raw[:, k] = _INC_LO
        raw[:, m] = _INC_HI
        b = raw.tobytes()
        return [b[s:s + 32] for s in range(0, len(b), 32)]

    def put(self, word: bytes) -> None:
        """Put the generator into the state of ``word`` (a row of :meth:`words`)."""
        if self._words is None:  # a numpy build whose C state is not as expected
            lo, hi = (int.from_bytes(word[8 * s:8 * s + 8], sys.byteorder)
                      for s in self._order[:2])
            self._setter(hi, lo)
            return
        self.view[:] = word
        self.flags.buffered = 0

    def set(self, hi: int, lo: int) -> None:
        """Put the generator into the state ``hi:lo`` (two 64-bit ints)."""
        self.put(self.words(np.array([[hi, lo]], dtype=np.uint64))[0])

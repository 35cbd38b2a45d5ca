"""How a Gymnasium env is read as the numbers of its simulator
(:class:`causalfair.systems.gym.simulator.GymSimulator`): its spaces (a ``Discrete``
action space; a ``Box`` of observation vectors, else the wrapper that makes one), and one
step of an env object: its observation row, its reward and its qualification gain
(``gain = "info:KEY"``, ``"info-change:KEY"``, ``"obs:INDEX"``, ``"reward"`` or
``"module:callable"``), each one number (a reward vector is refused)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from causalfair.errors import SystemError_, call_user, short
from causalfair.systems.gym.forks import StepGenerator

__all__ = ["F64", "read_spaces", "action_meanings", "flatten_fix", "box_vector", "as_number",
           "gain_reader", "reads_obs0", "stepper", "InfoChange", "change_reader"]

F64 = np.dtype(np.float64)
#: ``run(env, action, word, obs0) -> (observation, reward, gain, ended)``: one step read
Run = Callable[[Any, int, bytes, np.ndarray | None], tuple[np.ndarray, float, float, bool]]


def read_spaces(env: Any, name: str) -> tuple[int, int, int]:
    """(actions, first action, observation width) of ``env``, the env ``name``'s factory
    made: one with reset/step (not a vector env), a ``Discrete`` action space and a ``Box``
    observation space, else a one-line refusal naming the fix."""
    if not callable(getattr(env, "step", None)) or not callable(getattr(env, "reset", None)):
        raise SystemError_(
            f"gym env {name}: the factory returned {type(env).__name__}, which has no "
            "reset/step; return a gymnasium.Env.")
    if isinstance(getattr(env, "num_envs", None), int) and (
            hasattr(env, "single_action_space") or hasattr(env, "step_async")):
        if not hasattr(env, "env_fns") and not hasattr(env, "envs"):
            raise SystemError_(
                f"gym env {name}: the factory returned a natively vectorised env "
                f"({type(env).__name__} of {env.num_envs} envs, with no env_fns to take one "
                "env from); from_gym takes one env, one individual: return a one-individual "
                "env, or write your batch simulator as causalfair's simulator protocol "
                "(reset(n, group, rng), observe, draw_noise, step over a batch; "
                "docs/simulators.md, section 1) and audit it as [system] factory.")
        raise SystemError_(
            f"gym env {name}: the factory returned a vector env ({type(env).__name__} of "
            f"{env.num_envs} envs); from_gym takes one env, one individual, and batches the "
            "copies itself: return one env from the factory (what the vector env's env_fns "
            "return, or gymnasium.make(id) for gymnasium.make_vec(id)).")
    space = getattr(env, "action_space", None)
    n = getattr(space, "n", None)
    if n is None or type(space).__name__ != "Discrete":
        raise SystemError_(
            f"gym env {name}: action_space is {short(space)}; from_gym audits "
            "Discrete action spaces (one decision among n per individual).")
    obs_space = getattr(env, "observation_space", None)
    shape = getattr(obs_space, "shape", None)
    if type(obs_space).__name__ != "Box" or shape is None:
        raise SystemError_(
            f"gym env {name}: observation_space is {short(obs_space)}; from_gym "
            f"needs a Box of observation vectors (features): {flatten_fix(obs_space)}.")
    return int(n), int(getattr(space, "start", 0)), int(np.prod(shape)) if shape else 1


def action_meanings(env: Any, n: int) -> tuple[str, ...] | None:
    """The names ``env`` gives its ``n`` actions: ``env.unwrapped.get_action_meanings()``
    (the Arcade Learning Environment's convention), when it returns ``n`` distinct non-empty
    strings; else None (the env names none, or names that do not fit its action space)."""
    fn = getattr(getattr(env, "unwrapped", env), "get_action_meanings", None)
    if not callable(fn):
        return None
    try:
        names = fn()
    except Exception:  # noqa: BLE001 - an env that cannot name its actions names none
        return None
    names = tuple(names) if isinstance(names, (list, tuple)) else ()
    if len(names) != n or not all(isinstance(a, str) and a for a in names) \
            or len(set(names)) != n:
        return None
    return names


def flatten_fix(space: Any) -> str:
    """How a factory makes ``space`` (not a Box) one: ``FlattenObservation``, after
    ``FilterObservation`` where parts of a Dict cannot be flattened (a mission string)."""
    from gymnasium.spaces import Dict
    from gymnasium.spaces.utils import flatdim

    def flat(sp: Any) -> bool:
        try:
            flatdim(sp)
        except Exception:  # noqa: BLE001 - NotImplementedError, ValueError: not flattenable
            return False
        return True

    wrap = ("return gymnasium.wrappers.FlattenObservation(env) from the factory to flatten a "
            "Dict, Tuple, Discrete or MultiBinary space into one")
    if flat(space):
        return wrap
    if isinstance(space, Dict):
        keep = [k for k, sp in space.spaces.items() if flat(sp)]
        drop = [f"{k!r} ({type(sp).__name__})" for k, sp in space.spaces.items() if not flat(sp)]
        if keep:
            return (f"its part {', '.join(drop)} cannot be flattened into numbers; return "
                    f"gymnasium.wrappers.FlattenObservation(gymnasium.wrappers.FilterObservation("
                    f"env, {keep!r})) from the factory to keep and flatten the others")
    return (f"{type(space).__name__} cannot be flattened into numbers; return a wrapper from the "
            "factory whose observation_space is a Box (a gymnasium.ObservationWrapper)")


def box_vector(obs: Any, width: int | None, name: str) -> np.ndarray:
    """``obs`` as a float64 vector, refused unless it has ``width`` values (the first
    observation's)."""
    arr = np.asarray(obs, dtype=np.float64).reshape(-1)
    if width is not None and arr.shape[0] != width:
        raise SystemError_(
            f"gym env {name}: an observation has {arr.shape[0]} values, the first had {width}; "
            "observations must be Box vectors of one width.")
    return arr


def as_number(value: Any, what: str, name: str, gain_mode: str) -> float:
    """``value`` (a step's reward or gain, ``what``, of the env ``name`` whose gain is read
    by ``gain_mode``) as a float: a number, or an array of one value; anything else (a
    multi-objective env's reward vector) is refused."""
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is not None and arr.size == 1:
        return float(arr.reshape(-1)[0])
    if what == "reward":
        raise SystemError_(
            f"gym env {name}: step's reward is {short(value)}, not one number (a "
            "multi-objective env's reward vector?); from_gym needs one reward per step: "
            "return a scalarized env from the factory (mo-gymnasium: "
            "mo_gymnasium.wrappers.LinearReward(env, weight=np.array([...])); else a "
            "gymnasium.RewardWrapper).")
    raise SystemError_(
        f"gym env {name}: gain = {gain_mode!r} gave {short(value)}, not one "
        "number; the qualification gain of a step is one number per individual (pick one "
        "value, e.g. gain = 'module:callable' returning float(info[...][k])).")


def gain_reader(mode: str, gain_fn: Callable[..., Any] | None, name: str
                ) -> Callable[[np.ndarray, int, np.ndarray, float, Any], float]:
    """``gain(obs0, action, obs1, reward, info)``: the qualification gain of one step of
    the env ``name`` as ``mode`` reads it (``gain_fn``: its loaded ``module:callable``)."""
    kind, _, key = mode.partition(":")

    def gain(obs0: np.ndarray, a: int, obs1: np.ndarray, reward: float, info: Any) -> float:
        if gain_fn is not None:
            got = call_user(f"from_gym gain {mode}", gain_fn, obs0, a, obs1, reward, info)
            return got if type(got) is float else as_number(got, "gain", name, mode)
        if mode == "reward":
            return float(reward)
        if kind == "obs":
            return float(obs1[int(key)] - obs0[int(key)])
        if not isinstance(info, Mapping) or key not in info:
            has = ", ".join(repr(k) for k in list(info)[:10]) if isinstance(info, Mapping) else ""
            raise SystemError_(
                f"gym env {name}: gain = 'info:{key}' but step's info has no key {key!r}"
                f"{f' (it has {has})' if has else ''}; return the qualification gain in "
                f"info[{key!r}] or set gain (info:KEY for a step's gain, gain = "
                "'info-change:KEY' for a level such as info['qualification'], obs:INDEX, "
                "reward, module:callable).")
        return as_number(info[key], "gain", name, mode)

    return gain


#: The info key :class:`InfoChange` writes a step's change into.
CHANGE_KEY = "causalfair.info_change"


class InfoChange:
    """``env`` whose step's ``info[CHANGE_KEY]`` is the change of ``info[key]`` over the
    step (its value after the step minus before; the first step's "before" is reset's
    ``info[key]``): ``gain = "info-change:KEY"``, for an env that reports a level (a
    qualification) rather than a per-step gain. The level before is the wrapper's own
    state, copied with the env; the env's get_state/set_state, if any, are not used."""

    def __init__(self, env: Any, key: str, name: str):
        self.env, self.key, self.name, self.level = env, key, name, 0.0
        self.action_space, self.observation_space = env.action_space, env.observation_space
        self.spec, self.metadata = getattr(env, "spec", None), getattr(env, "metadata", {})

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped

    def _read(self, info: Any, where: str) -> float:
        if not isinstance(info, Mapping) or self.key not in info:
            raise SystemError_(
                f"gym env {self.name}: gain = 'info-change:{self.key}' but {where}'s info has "
                f"no key {self.key!r}; report the level in info[{self.key!r}] on reset and on "
                "every step, or set gain (info:KEY, obs:INDEX, reward, module:callable).")
        return as_number(info[self.key], "gain", self.name, f"info-change:{self.key}")

    def reset(self, **kw: Any) -> tuple[Any, Any]:
        obs, info = self.env.reset(**kw)
        self.level = self._read(info, "reset")
        return obs, info

    def step(self, action: Any) -> tuple[Any, ...]:
        o, r, term, trunc, info = self.env.step(action)
        new = self._read(info, "step")
        gain, self.level = new - self.level, new
        return o, r, term, trunc, {**info, CHANGE_KEY: gain}


def change_reader(env: Any, mode: str, name: str) -> tuple[Any, str]:
    """(env, mode) as the simulator steps them: ``"info-change:KEY"`` is ``env`` in an
    :class:`InfoChange` read as ``"info:"`` its change; any other mode is unchanged."""
    kind, _, key = mode.partition(":")
    return (InfoChange(env, key, name), "info:" + CHANGE_KEY) if kind == "info-change" else (
        env, mode)


def reads_obs0(mode: str) -> bool:
    """Whether the gain read by ``mode`` reads the observation before the step (``obs0``
    of :func:`gain_reader`'s ``gain``): ``obs:INDEX`` and a ``module:callable`` do,
    ``info:KEY`` and ``reward`` do not (their steps may be given None for it)."""
    return not (mode == "reward" or mode.startswith("info:"))


def stepper(gen: StepGenerator, start: int, width: int, name: str, bare: bool,
            api: tuple[str, str] | None, gain_mode: str,
            gain_fn: Callable[..., Any] | None) -> Run:
    """``run(env, action, word, obs0)``: step the env object ``env`` (whose observation
    was ``obs0``; None where the gain does not read it, :func:`reads_obs0`) in place with
    ``action`` and the generator state ``word`` (a row of ``gen.words(noise)``) put into
    ``gen``; (observation, reward, gain, ended). ``start``: the first action of the action
    space; ``bare``: the env is its own ``unwrapped``; ``api``: the env's state API (its
    observation arrays are copied: the env may reuse them)."""
    rng, shape, put, view, flags = gen.rng, (width,), gen.put, gen.view, gen.flags
    key = gain_mode[5:] if gain_mode.startswith("info:") else None
    gain = gain_reader(gain_mode, gain_fn, name)
    ndarray = np.ndarray

    def number(value: Any, what: str) -> float:
        return as_number(value, what, name, gain_mode)

    def run(env: Any, action: int, word: bytes, obs0: np.ndarray | None
            ) -> tuple[np.ndarray, float, float, bool]:
        if view is not None:  # gen.put(word), inline: two stores
            view[:] = word
            flags.buffered = 0
        else:
            put(word)
        (env if bare else env.unwrapped)._np_random = rng
        o, r, term, _trunc, info = env.step(action + start)
        if api or type(o) is not ndarray or o.dtype is not F64 or o.shape != shape:
            o = np.array(box_vector(o, width, name))  # api: the env may reuse o
        try:
            r = float(r)
        except (TypeError, ValueError):  # an array: one value, else refused
            r = number(r, "reward")
        if key is not None and type(info) is dict and key in info:
            g = info[key]
            try:
                g = float(g)
            except (TypeError, ValueError):
                g = number(g, "gain")
        else:
            g = gain(obs0, action, o, r, info)
        return o, r, g, bool(term)

    return run

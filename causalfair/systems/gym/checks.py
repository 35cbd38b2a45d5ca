"""The fork check of the Gymnasium door (:func:`check_forks`): before an env is audited,
a sampled batch shows whether forks of it share random numbers, as method.md section 3
needs, and each way they would not is refused with one line naming the problem and the
fix; and the observation columns that carry the group (:func:`group_columns`). The
simulator checked is :class:`causalfair.systems.gym.simulator.GymSimulator`."""

from __future__ import annotations

import copy
import ctypes
import json
import random as _pyrandom
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from causalfair.errors import SystemError_, UserCodeError, call_user, first_line, short
from causalfair.systems.gym.forks import copy_env

__all__ = ["GymForkError", "fork_error", "check_forks", "check_one_individual",
           "group_columns", "FIX_DOC",
           "SLOW_COPY_S", "global_states", "global_read_error"]

FIX_DOC = "see docs/own-system.md, 'Audit your Gymnasium env'"


class GymForkError(SystemError_):
    """A Gymnasium env whose forks would not share random numbers (or cannot be made)."""


def fork_error(name: str, problem: str, fix: str) -> GymForkError:
    """The one-line refusal of env ``name``: its ``problem`` and the ``fix``."""
    return GymForkError(f"gym env {name}: {problem}; {fix} ({FIX_DOC}).")


def global_states(exact: bool = True) -> tuple[Any, ...]:
    """The states of the global generators (``np.random``'s and ``random``'s, and torch's
    CPU generator once torch is imported), comparable.
    ``exact=False`` reads ``np.random``'s as the bytes of its MT19937 C state (numpy's
    ``mt19937_state``: 624 32-bit words and the position, at the documented
    ``ctypes.state_address``): a few microseconds, where ``np.random.get_state`` takes
    about 30, for the comparison around every batch of steps; it misses a normal drawn
    from the one ``np.random`` keeps from its previous pair (no word is drawn for it),
    which a batch of draws does not do alone. Torch's state (about 2 us) is read only
    where a module imported torch (it is never imported here)."""
    bg = np.random.get_bit_generator()
    torch_state = _torch_state()
    if type(bg) is not np.random.MT19937:  # pragma: no cover - np.random.set_bit_generator
        return repr(np.random.get_state(legacy=False)), _pyrandom.getstate(), torch_state
    if exact:
        st = np.random.get_state(legacy=False)
        return (st["state"]["key"].tobytes(), st["state"]["pos"], st["has_gauss"], st["gauss"],
                _pyrandom.getstate(), torch_state)
    return (ctypes.string_at(bg.ctypes.state_address, 624 * 4 + 4), _pyrandom.getstate(),
            torch_state)


def _torch_state() -> bytes | None:
    """The bytes of torch's global CPU generator state, or None where torch is not
    imported (or has no such generator)."""
    torch = sys.modules.get("torch")
    gen = getattr(getattr(torch, "random", None), "default_generator", None)
    if gen is None:
        return None
    try:
        return bytes(gen.get_state().numpy().tobytes())
    except Exception:  # noqa: BLE001 - a torch build without it: nothing to compare
        return None


def global_read_error(name: str) -> GymForkError:
    """The refusal of env ``name`` whose step moved a global generator's state."""
    return fork_error(name, "step reads a global random generator (np.random, random or "
                      "torch's; scipy.stats' rvs without random_state too)",
                      "draw every random number from self.np_random")


def _generator_state(v: Any) -> Any:
    """A comparable state of a random generator (numpy's, ``random``'s, or a
    ``torch.Generator`` once torch is imported), else None."""
    if isinstance(v, np.random.RandomState):
        st = v.get_state(legacy=False)
        return st["state"]["key"].tobytes(), st["state"]["pos"], st["has_gauss"], st["gauss"]
    if isinstance(v, np.random.Generator):
        return repr(v.bit_generator.state)
    if isinstance(v, _pyrandom.Random):
        return v.getstate()
    torch_gen = getattr(sys.modules.get("torch"), "Generator", None)
    if torch_gen is not None and isinstance(v, torch_gen):
        try:
            return bytes(v.get_state().numpy().tobytes())
        except Exception:  # noqa: BLE001 - a device generator without a CPU state
            return None
    return None


def _own_generators(env: Any) -> dict[str, Any]:
    """The states of the generators an env (or a wrapper, or an object in one of their
    attributes, one level down) holds besides ``self.np_random``, by attribute path."""
    out: dict[str, Any] = {}
    e = env
    while e is not None and hasattr(e, "__dict__"):
        for k, v in vars(e).items():
            if k in ("_np_random", "np_random", "env"):
                continue
            st = _generator_state(v)
            if st is not None:
                out[k] = st
            elif hasattr(v, "__dict__") and not isinstance(v, type) and not (
                    hasattr(v, "step") and hasattr(v, "unwrapped")):  # an env: walked on
                for k2, v2 in vars(v).items():
                    st = _generator_state(v2)
                    if st is not None:
                        out[f"{k}.{k2}"] = st
        e = vars(e).get("env")
    return out


def _check_own_generators(name: str, start: Sequence[Any], end: Sequence[Any]) -> None:
    """Refuse an env whose step draws from a generator of its own (not ``self.np_random``)
    that is in one state for every individual after reset: every individual would get
    the same random numbers and the intervals would be far too narrow."""
    if len(start) < 2:
        return
    firsts = [_own_generators(e) for e in start]
    for path, st in firsts[0].items():
        if all(f.get(path) == st for f in firsts[1:]) and any(
                _own_generators(e).get(path) != st for e in end):
            raise fork_error(
                name, f"its step draws from its own generator self.{path}, in the same state "
                "for every individual after reset(seed=...), so every individual gets the same "
                "random numbers", "draw every random number from self.np_random")


def _space_states(env: Any) -> list[Any]:
    """The states of the generators of ``env``'s action and observation spaces (and
    their parts: a ``Dict``'s, a ``Tuple``'s), through the wrapper chain: ``space.sample()``
    draws from them, and ``reset(seed=...)`` does not seed them."""
    out, todo, e = [], [], env
    while e is not None and hasattr(e, "__dict__"):
        todo += [getattr(e, a, None) for a in ("action_space", "observation_space")]
        e = vars(e).get("env")
    seen: set[int] = set()
    while todo:
        sp = todo.pop()
        if sp is None or id(sp) in seen:
            continue
        seen.add(id(sp))
        gen = vars(sp).get("_np_random") if hasattr(sp, "__dict__") else None
        out.append(None if gen is None else _generator_state(gen))
        parts = getattr(sp, "spaces", None)
        todo += list(parts.values() if isinstance(parts, Mapping) else parts or ())
    return out


def _space_error(name: str, where: str) -> GymForkError:
    """The refusal of env ``name`` whose ``where`` (reset or step) drew from a space."""
    return fork_error(name, f"its {where} draws from action_space.sample() or "
                      "observation_space.sample(), whose generator reset(seed=...) does not "
                      "set and every copy of the env shares",
                      "draw every random number from self.np_random (e.g. "
                      "self.np_random.integers(n) for a Discrete(n)'s sample())")


def _check_options_pin(sim: Any, n: int, seed: int) -> None:
    """Refuse an env that ignores ``reset(options={"group": g})``: ``n`` seeds reset once
    per group give the same observations and no ``info["group"]``, so every group would
    be the same population (C = 0 whatever the policy)."""
    seeds = np.random.SeedSequence(seed).generate_state(n).tolist()
    firsts, reported = [], False
    for g in range(sim.n_groups):
        rows = []
        for s in seeds:
            env = sim._template if sim._api else copy_env(sim._template, sim._shared)
            obs, info = call_user(f"gym env {sim.name}.reset", env.reset, seed=s,
                                  options={"group": g})
            reported |= isinstance(info, Mapping) and "group" in info
            rows.append(np.asarray(obs, dtype=np.float64).reshape(-1))
        firsts.append(np.stack(rows))
    if not reported and all(np.array_equal(f, firsts[0]) for f in firsts[1:]):
        raise SystemError_(
            f"gym env {sim.name}: reset(seed=s, options={{'group': g}}) gave the same "
            "individuals for every group and no info['group'], so the groups would be one "
            "population; start an individual of group options['group'] and report it in "
            "info['group'], or set group = 'info:KEY' (the key reset reports the group in).")


def check_forks(sim: Any, *, n: int = 4, horizon: int = 3, seed: int = 0) -> None:
    """Raise :class:`GymForkError` (one line: the problem and the fix) unless forks of the
    env share random numbers: for each group, ``n`` individuals over ``horizon`` steps,
    every state forked once per action with one noise, and the first action twice.
    Refused: an env that cannot be copied; one whose copy does not continue it
    (:func:`_check_copy_continues`); one whose reset with one seed gives two individuals
    (:func:`_check_reset_seeded`); one whose reset or step draws from a space's generator
    (``action_space.sample()``: :func:`_space_states`); one that reads ``np.random`` or
    ``random`` (also
    refused while stepping, :meth:`GymSimulator._stepping`); one whose generator state
    (``self.np_random``'s, or one of its own: :func:`_own_generators`) after a step
    depends on the action (forks would lose common random numbers); one whose two forks
    with the same action differ; one whose step
    draws from a generator of its own that every individual shares
    (:func:`_check_own_generators`); with ``group =
    "options"``, one that ignores ``options["group"]`` (:func:`_check_options_pin`); one
    whose ``shared`` attributes the check's resets and steps change. A slow copy gets a
    warning naming what to share, observations normalized by running statistics one
    naming how to freeze them (:func:`_hint_running_stats`)."""
    name = sim.name
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    A = sim.n_actions
    constants = sim._constants()
    prints = {a: _fingerprint(v) for a, v in constants.items()}
    _hint_running_stats(sim)
    for g in range(sim.n_groups):
        try:
            if not sim._api:
                copy.deepcopy(sim._template, dict(sim._shared))
        except UserCodeError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to copy is the refusal
            raise fork_error(name, f"cannot be copied ({type(exc).__name__}: {exc})",
                              "make it deep-copyable (no open files, locks or handles in its "
                              "attributes) or give it get_state()/set_state(state)") from None
        if g == 0:
            _check_api(sim)
        if not sim._api:
            _check_copy_continues(sim, g, rng)
        _check_reset_seeded(sim, g, int(rng.integers(2**62)))
        state = sim.reset(n, g, rng)
        start = state.envs
        if g == 0 and not sim._api:
            _hint_slow_copy(sim, state.envs[0])
        for _t in range(horizon):
            noise = sim.draw_noise(n, rng)
            words = sim._gen.words(noise)
            for i in range(n):
                if state.done[i]:
                    continue
                outs = []
                for a in [0, *range(A)]:
                    before = global_states()
                    new, o, r, _gain, ended = call_user(f"gym env {name}.step", sim.step_one,
                                                        state.envs[i], a, words[i],
                                                        state.obs[i])
                    if before != global_states():
                        raise global_read_error(name)
                    outs.append((np.asarray(o, dtype=np.float64).copy(), r,
                                 sim._rng.bit_generator.state["state"]["state"],
                                 _own_generators(new)))
                (o1, r1, s1, g1), (o2, r2, s2, g2) = outs[0], outs[1]
                if not (np.array_equal(o1, o2) and r1 == r2 and s1 == s2 and g1 == g2):
                    raise fork_error(
                        name, "two forks of one state with the same action and random numbers "
                        "gave different transitions (its state is not copied, or it uses "
                        "randomness outside self.np_random)",
                        "keep all state in the env's attributes and draw every random number "
                        "from self.np_random")
                for path in g1:
                    if any(g.get(path) != g1[path] for *_, g in outs[2:]):
                        raise fork_error(
                            name, f"its step draws different random numbers from its own "
                            f"generator self.{path} under different actions, so forks lose "
                            "common random numbers", "draw the same random numbers whatever "
                            "the action, from self.np_random")
                if len({s for _, _, s, _ in outs[1:]}) > 1:
                    raise fork_error(
                        name, "its step draws different random numbers under different actions, "
                        "so forks lose common random numbers",
                        "draw the same random numbers whatever the action (draw them all, "
                        "then use those the action needs)")
            d = rng.integers(A, size=n)
            state = sim.step(state, d, noise).state
        if not sim._api:
            _check_own_generators(name, start, state.envs)
    if sim.group_mode == "options":
        _check_options_pin(sim, n, seed)
    for a, v in constants.items():
        if prints[a] is not None and _fingerprint(v) != prints[a]:
            raise fork_error(name, f"shared = [{a!r}, ...] but reset or step changed "
                              f"env.{a}, which every copy of the env shares",
                              f"leave {a!r} out of shared (only data that reset and step never "
                              "change may be shared)")


_NEW_API = ("return (observation, info) from reset and (observation, reward, terminated, "
            "truncated, info) from step, as Gymnasium's Env does (a gym 0.21 env: wrap it in "
            "shimmy's GymV21CompatibilityV0)")


def _check_api(sim: Any) -> None:
    """Refuse an env that does not follow Gymnasium's API where the door relies on it:
    ``reset(seed=, options=)`` returning (observation, info) and ``step`` returning five
    values (gym < 0.26 returned an observation alone and four values)."""
    env = sim._fresh()
    where = f"gym env {sim.name}"
    if sim._group_fn is not None:
        env, _ = sim._reset_one(0, 0)
    else:
        reset = env.reset
        if sim.group_mode == "options":
            import inspect

            try:
                params = inspect.signature(getattr(env, "unwrapped", env).reset).parameters
            except (TypeError, ValueError):  # pragma: no cover - a builtin reset
                params = {"options": None}
            if "options" not in params and not any(
                    p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
                raise fork_error(sim.name, "its reset takes no options, and group = 'options' "
                                 "pins an individual's group with reset(options={'group': g})",
                                 "give reset an options=None argument (Gymnasium's signature) "
                                 "and read options['group'], or use group = 'info:KEY' or "
                                 "'module:callable'")
            got = call_user(f"{where}.reset", reset, seed=0, options={"group": 0})
        else:
            got = call_user(f"{where}.reset", reset, seed=0)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise fork_error(sim.name, f"reset returned {short(got)}, not (observation, info)",
                             _NEW_API)
    got = call_user(f"{where}.step", env.step, sim._start)
    if not (isinstance(got, tuple) and len(got) == 5):
        raise fork_error(sim.name, f"step returned {len(got) if isinstance(got, tuple) else 1} "
                         "values, not (observation, reward, terminated, truncated, info)",
                         _NEW_API)


def _check_reset_seeded(sim: Any, g: int, seed: int) -> None:
    """Refuse an env whose ``reset(seed=s)`` does not fix the individual: two resets of
    group ``g`` with one seed must give the same observation, else individuals come from
    a generator the audit's seeds do not reach (``random``, ``np.random``, one of the
    env's own seeded once, or ``self.np_random`` without ``super().reset(seed=seed)``) and
    no result could be reproduced."""
    spaces = _space_states(sim._template)
    first = np.array(sim._reset_one(g, seed)[1], dtype=np.float64)
    second = np.array(sim._reset_one(g, seed)[1], dtype=np.float64)
    if not np.array_equal(first, second, equal_nan=True):
        if _space_states(sim._template) != spaces:
            raise _space_error(sim.name, "reset")
        raise fork_error(sim.name, f"two resets with one seed gave two individuals (group "
                         f"{sim.group_names[g]!r}), so reset draws from a generator its seed "
                         "does not set (random, np.random, one of its own seeded once, or "
                         "self.np_random without super().reset(seed=seed))",
                         "call super().reset(seed=seed) first in reset and draw every random "
                         "number from self.np_random")


def check_one_individual(sim: Any, horizon: int, *, n: int = 2, steps: int = 5,
                         seed: int = 0) -> None:
    """Refuse an env whose episode does not follow one individual over the audit's
    ``horizon`` steps: one whose step reports, in the info key reset reports the group in
    (``"group"``, or ``KEY`` of ``group = "info:KEY"``), another group than the
    individual's, as an env that brings a new individual at every step (a queue of
    applicants) does; its gains would be summed over individuals of every group as the
    first one's. ``n`` individuals per group, up to ``steps`` steps (the steps before the
    last of ``horizon``: the last step's info may already name the next individual)."""
    mode = sim.group_mode
    key = "group" if mode == "options" else mode.partition(":")[2] if mode.startswith(
        "info:") else None
    k_steps = min(steps, horizon - 1)
    if key is None or k_steps < 1:
        return
    rng = np.random.default_rng(seed)
    api, template = sim._api, sim._template
    saved = getattr(template, api[0])() if api else None
    try:
        for g in range(sim.n_groups):
            for _ in range(n):
                env, _obs = sim._reset_one(g, int(rng.integers(2**62)))
                for j in range(1, k_steps + 1):
                    out = call_user(f"gym env {sim.name}.step", env.step, sim._start)
                    info = out[4] if isinstance(out, tuple) and len(out) == 5 else None
                    if not isinstance(info, Mapping) or key not in info or out[2]:
                        break  # a malformed step is the fork check's; an ended episode is fine
                    got = info[key]
                    if type(got) is not int and type(got) is not str:
                        got = sim._one_group(got, key)
                    if sim.group_index(got) != g and not (mode == "options" and got == g):
                        raise fork_error(
                            sim.name, f"its step {j} reported info[{key!r}] = {short(got)} for "
                            f"an individual of group {sim.group_names[g]!r}: an episode brings "
                            "other individuals (a queue, a new one at each step), while the "
                            f"audit follows one individual over T = {horizon} steps and would "
                            "sum their gains as the first one's", "audit it with horizon=1 "
                            "(each reset one individual and its one decision), or make an "
                            "episode follow one individual")
    finally:
        if api:
            getattr(template, api[1])(saved)


def _check_copy_continues(sim: Any, g: int, rng: np.random.Generator) -> None:
    """Refuse an env whose copy does not continue from its state: one individual of group
    ``g``, copied after reset, stepped with the same action and random numbers as the env
    itself, must make the same transition. A class whose ``__getstate__``/``__reduce__``
    rebuilds it from its constructor's arguments copies as a new env (two forks would
    still agree with each other, so this is checked against the env itself)."""
    state = sim.reset(1, g, rng)
    env, obs, word = state.envs[0], state.obs[0], sim._gen.words(sim.draw_noise(1, rng))[0]
    twin = copy_env(env, sim._shared)
    before, spaces = global_states(), _space_states(env)
    mine = call_user(f"gym env {sim.name}.step", sim._run, env, 0, word, obs)
    if before != global_states():  # the twin would draw other numbers from it
        raise global_read_error(sim.name)
    if spaces != _space_states(env):  # the same: the copies share the spaces
        raise _space_error(sim.name, "step")
    try:
        theirs = sim._run(twin, 0, word, obs)
        same = (np.array_equal(np.asarray(mine[0]), np.asarray(theirs[0]))
                and mine[1:] == theirs[1:])
        why = "makes another transition than the env itself"
    except Exception as exc:  # noqa: BLE001 - the copy's step failing is the refusal
        same, why = False, f"fails where the env itself steps ({type(exc).__name__}: " \
                           f"{first_line(str(exc))[:120] if str(exc) else ''})"
    if not same:
        raise fork_error(sim.name, f"a copy of a reset env {why}, so copies do not continue an "
                         f"individual (copies are made as copy.deepcopy makes them: "
                         f"{type(getattr(env, 'unwrapped', env)).__name__}'s __getstate__ or "
                         "__reduce__ may rebuild it from its constructor's arguments)",
                         "give it get_state()/set_state(state), or a __deepcopy__ that copies "
                         "its state")


def _fingerprint(value: Any) -> bytes | None:
    """The pickled bytes of ``value`` (None where it cannot be pickled: not checked)."""
    import pickle

    try:
        return pickle.dumps(value, protocol=5)
    except Exception:  # noqa: BLE001 - e.g. a handle: the docs say it is not checked
        return None


#: A copy of one env slower than this (seconds) gets a hint to share its constant data.
SLOW_COPY_S = 0.002


def _hint_slow_copy(sim: Any, env: Any) -> None:
    """Warn when copying one env is slow (an audit copies about 0.7 envs an
    individual-step): name the attributes whose copies take most of it, which ``shared``
    can name if reset and step never change them."""
    import time
    import warnings

    t0 = time.perf_counter()
    copy_env(env, sim._shared)
    took = time.perf_counter() - t0
    if took < SLOW_COPY_S:
        return
    inner = getattr(env, "unwrapped", env)
    costs = []
    for k, v in vars(inner).items():
        if id(v) in sim._shared:
            continue
        t0 = time.perf_counter()
        try:
            copy.deepcopy(v, dict(sim._shared))
        except Exception:  # noqa: BLE001 - only a hint
            continue
        costs.append((time.perf_counter() - t0, k))
    top = [k for c, k in sorted(costs, reverse=True)[:3] if c >= 0.25 * took]
    if top:
        warnings.warn(
            f"gym env {sim.name}: copying one env takes {took * 1e3:.1f} ms, mostly "
            f"{', '.join('env.' + k for k in top)}; an audit copies about 0.7 envs per "
            f"individual-step. If reset and step never change them, pass "
            f"shared={top!r} (a spec: [system] shared = {top!r}; the command line: --param "
            f"'shared={json.dumps(top)}') and every copy shares them ({FIX_DOC}).",
            UserWarning, stacklevel=3)


def _hint_running_stats(sim: Any) -> None:
    """Warn when a wrapper of the env normalizes observations by running statistics it
    updates (Gymnasium's ``NormalizeObservation`` with ``update_running_mean``): every
    individual is a copy of the factory's env, so its statistics start afresh at each
    individual, and the policy reads observations normalized unlike in training."""
    import warnings

    e = sim._template
    while e is not None:
        if getattr(e, "update_running_mean", False) is True and hasattr(e, "obs_rms"):
            warnings.warn(
                f"gym env {sim.name}: its {type(e).__name__} wrapper updates its running "
                "mean and variance, and every individual is a copy of the factory's env, so "
                "they start afresh at each individual: the policy reads observations "
                "normalized unlike in training. In the factory, give the wrapper the "
                "training statistics (wrapper.obs_rms = ...) and set "
                f"wrapper.update_running_mean = False ({FIX_DOC}).", UserWarning, stacklevel=3)
            return
        e = getattr(e, "env", None) if getattr(e, "unwrapped", e) is not e else None


def group_columns(sim: Any, *, n: int = 8, seed: int = 0) -> list[int]:
    """The observation columns that carry the group S at reset: constant within each
    group and different between groups over ``n`` resets per group. A network reading
    one reads S (the edge ``S -> D_t`` of the temporal graph, method.md section 7)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    firsts = [sim.reset(n, g, rng).obs for g in range(sim.n_groups)]
    same = np.all([np.all(o == o[:1], axis=0) for o in firsts], axis=0)
    heads = np.stack([o[0] for o in firsts])
    return [int(j) for j in np.flatnonzero(same & np.any(heads != heads[:1], axis=0))]

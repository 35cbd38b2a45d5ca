"""A user's Gymnasium environment as a :class:`~causalfair.systems.System`:
:func:`from_gym` (``cf.systems.from_gym``) and the ``[system] gym = ...`` spec form
(registered id ``gym``, :func:`gym_system`).

One env is one individual. The simulator (:class:`GymSimulator`) holds a batch of env
copies, one per individual, and implements the four-method protocol of
docs/simulators.md:

- ``reset(n, group, rng)``: n envs reset with seeds from ``rng``, the group pinned by
  ``reset(options={"group": g})``, by rejection sampling on ``info[KEY]``, or by a
  ``module:callable``;
- ``observe(state)``: the stacked Box observations as features;
- ``draw_noise(n, rng)``: one 128-bit generator state per env;
- ``step(state, decisions, noise)``: every env of ``state`` is copied (the env's own
  ``get_state``/``set_state`` or ``clone_state``/``restore_state`` when it has them, else a
  copy of the env object), given a generator in the state drawn in ``noise`` and stepped;
  ``state`` itself is left unchanged. Two forks of one state with the same noise therefore
  use the same random numbers (common random numbers, method.md section 3), which is what
  the pi^PS fork and pi0 need; a fork that would repeat a transition already made (same
  snapshot, action and noise) reuses it. An env made by ``gymnasium.make`` is stepped
  without the bookkeeping wrappers it adds
  (:func:`~causalfair.systems.gym.forks.unwrap_bookkeeping`);
- ``step_paths(state, d, state0, d0, noise)``: the Monte Carlo engine's epoch (pi, the
  pi^PS fork, pi0) in one call, the same numbers as three ``step`` calls, with the envs of
  the two states stepped in place (the states are consumed): a copy only where pi's
  decision leaves the baseline;
- ``step_forks(state, actions, decisions, noise)``: the benefit rollout's epoch (one fork
  per action, every individual taking it, and pi's decisions) in one call, the same
  numbers as ``len(actions) + 1`` ``step`` calls, the state consumed: per individual the
  forks but the last step copies of its env and the last the env itself, and the
  decision's transition is the fork of its action.

:func:`check_forks` checks this on a sampled batch before the system is used and refuses
an env that cannot be copied, one whose reset with one seed gives two individuals, one
whose forks with the same action differ, one that reads the global generators
(``np.random``, ``random``; also refused while stepping, where a step reads them later
than the check looked), one whose generator use depends on the action, one whose step
draws from a generator of its own that every individual shares, and
(``group="options"``) one whose reset ignores the group it is asked for. A step's reward
and gain are one number each (a reward vector is refused).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._limits import check_memory, format_bytes
from causalfair.errors import SystemError_, call_user, short
from causalfair.systems.gym.checks import (
    GymForkError,
    check_forks,
    global_read_error,
    global_states,
    group_columns,
)
from causalfair.systems.gym.forks import (
    StepGenerator,
    copy_env,
    shared_objects,
    state_api,
    unwrap_bookkeeping,
)
from causalfair.systems.registry import load_callable
from causalfair.systems.system import DecisionSet, Gain, System
from causalfair.types import Observation, StepResult

__all__ = ["from_gym", "gym_system", "gym_id", "GymSimulator", "check_forks",
           "group_columns", "GymForkError"]

_F64 = np.dtype(np.float64)
#: Individuals per batch of a Gymnasium system when neither the caller nor the system says:
#: an env object per individual, so a few hundred keep them in cache (the decomposition was
#: flat from 64 to 250 on benchmarks/bench_gym.py's env, 8% slower in one batch of 2,000),
#: and n individuals make n / 256 tasks per group for ``--jobs`` and Ray.
BATCH_SIZE = 256
_tobytes = np.ndarray.tobytes


def _box_vector(obs: Any, width: int | None, name: str) -> np.ndarray:
    arr = np.asarray(obs, dtype=np.float64).reshape(-1)
    if width is not None and arr.shape[0] != width:
        raise SystemError_(
            f"gym env {name}: an observation has {arr.shape[0]} values, the first had {width}; "
            "observations must be Box vectors of one width.")
    return arr


@dataclass(frozen=True, eq=False)
class GymState:
    """A batch of env snapshots (one per individual), their observations (n, F), groups,
    whether each episode has ended, and the epoch."""

    envs: tuple[Any, ...]
    obs: np.ndarray
    group: np.ndarray
    done: np.ndarray
    t: int = 0


class GymSimulator:
    """The four-method simulator over copies of a Gymnasium env (module docstring). Not
    thread-safe (one generator and one memo per simulator): engines run it on one thread
    of a process."""

    thread_safe = False

    def __init__(self, env_factory: Callable[..., Any], *, groups: Sequence[str],
                 group: str = "options", gain: str = "info:gain", params: Mapping[str, Any] | None = None,
                 name: str = "gym", max_tries: int = 200, shared: Sequence[str] = (),
                 batch_size: int = BATCH_SIZE):
        self.env_factory = env_factory
        self.params = dict(params or {})
        self.group_names = tuple(groups)
        self.n_groups = len(self.group_names)
        self.group_mode = group
        self.gain_mode = gain
        self.name = name
        self.max_tries = int(max_tries)
        self.shared = tuple(shared)
        #: individuals per batch when the caller gives none (``engines._mc_base.batch_for``)
        self.batch_size = batch_size  # checked where it is used (batch_for), not coerced
        self._env_bytes: int | None = None  # about what one individual's env holds
        self._group_fn = load_callable(group, what="from_gym group") if _is_ref(group) else None
        self._gain_fn = load_callable(gain, what="from_gym gain") if _is_ref(gain) else None
        self._template: Any = None
        self._api: tuple[str, str] | None = None
        self._width: int | None = None
        self._n_actions = 0
        self._start = 0
        self._init()

    # pickling: env objects stay behind; a worker makes its own template
    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in ("_template", "_gen", "_rng", "_run", "_memo", "_memo_noise", "_consumed"):
            d[k] = None
        d["_shared"] = {}
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._init()

    def _init(self) -> None:
        env = call_user(f"gym env factory {self.name}", self.env_factory, **self.params)
        if not callable(getattr(env, "step", None)) or not callable(getattr(env, "reset", None)):
            raise SystemError_(
                f"gym env {self.name}: the factory returned {type(env).__name__}, which has no "
                "reset/step; return a gymnasium.Env.")
        space = getattr(env, "action_space", None)
        n = getattr(space, "n", None)
        if n is None or type(space).__name__ != "Discrete":
            raise SystemError_(
                f"gym env {self.name}: action_space is {short(space)}; from_gym audits "
                "Discrete action spaces (one decision among n per individual).")
        self._n_actions = int(n)
        self._start = int(getattr(space, "start", 0))
        obs_space = getattr(env, "observation_space", None)
        shape = getattr(obs_space, "shape", None)
        if type(obs_space).__name__ != "Box" or shape is None:
            raise SystemError_(
                f"gym env {self.name}: observation_space is {short(obs_space)}; from_gym "
                f"needs a Box of observation vectors (features): {_flatten_fix(obs_space)}.")
        self._width = int(np.prod(shape)) if shape else 1
        self._spec = getattr(env, "spec", None)
        env = unwrap_bookkeeping(env)
        self._template = env
        self._api = state_api(env)
        self._bare = getattr(env, "unwrapped", None) is env
        self._shape = (self._width,)
        self._info_key = self.gain_mode[5:] if self.gain_mode.startswith("info:") else None
        self._where_reset = f"gym env {self.name}.reset"
        # one generator, put into each step's state before the step
        self._gen = StepGenerator()
        self._rng = self._gen.rng
        self._run = self._stepper()
        self._memo: dict[tuple[int, int], tuple[Any, ...]] = {}
        self._memo_noise: Any = None
        self._consumed: weakref.WeakSet[GymState] = weakref.WeakSet()  # by step_paths
        self._shared = {**shared_objects(env), id(self._rng): self._rng,
                        **{id(v): v for v in self._constants().values()}}

    def _constants(self) -> dict[str, Any]:
        """The values of the env attributes named in ``shared`` (on the unwrapped env),
        which every copy shares: data that reset and step never change, such as a
        transition table."""
        inner = getattr(self._template, "unwrapped", self._template)
        attrs = getattr(inner, "__dict__", {})
        missing = [a for a in self.shared if a not in attrs]
        if missing:
            have = ", ".join(sorted(k for k in attrs if not k.startswith("__")))[:300]
            raise SystemError_(
                f"from_gym shared: bad value {missing[0]!r}; the env (after its factory) has "
                f"no attribute {missing[0]!r}; name attributes of env.unwrapped ({have}).")
        return {a: attrs[a] for a in self.shared}

    # ---------------------------------------------------------------- sizes
    @property
    def n_actions(self) -> int:
        return self._n_actions

    @property
    def width(self) -> int:
        return int(self._width or 0)

    @property
    def horizon_hint(self) -> int | None:
        steps = getattr(self._spec, "max_episode_steps", None)
        return int(steps) if isinstance(steps, int) and steps > 0 else None

    # ---------------------------------------------------------------- protocol
    def _fresh(self) -> Any:
        return self._template if self._api else copy_env(self._template, self._shared)

    def _reset_one(self, g: int, seed: int) -> tuple[Any, Any]:
        env = self._fresh()
        where = self._where_reset
        if self.group_mode == "options":
            obs, info = call_user(where, env.reset, seed=seed, options={"group": g})
            got = info.get("group") if isinstance(info, Mapping) else None
            if got is not None and got != g and got != self.group_names[g]:
                raise SystemError_(
                    f"gym env {self.name}: reset(options={{'group': {g}}}) reported info['group'] "
                    f"= {short(got)}; the env must start an individual of the group it is asked "
                    "for, or use group = 'info:KEY'.")
            return env, obs
        if self._group_fn is not None:
            obs, _ = call_user(f"from_gym group {self.group_mode}", self._group_fn, env, g, seed)
            return env, obs
        key = self.group_mode.partition(":")[2]
        ss = np.random.SeedSequence(seed)
        seen: list[Any] = []
        for k, s in enumerate(ss.generate_state(self.max_tries, dtype=np.uint32)):
            obs, info = call_user(where, env.reset, seed=int(s) + (k << 32))
            if not isinstance(info, Mapping) or key not in info:
                raise SystemError_(
                    f"gym env {self.name}: group = 'info:{key}' but reset's info has no key "
                    f"{key!r}; return the individual's group in info[{key!r}].")
            got = info[key]
            if got == g or got == self.group_names[g]:
                return env, obs
            if len(seen) < 5 and got not in seen:
                seen.append(got)
        if not any(v == i or v == name for v in seen for i, name in enumerate(self.group_names)):
            raise SystemError_(
                f"gym env {self.name}: reset's info[{key!r}] was {', '.join(map(short, seen))} "
                f"in {self.max_tries} resets, never a group of groups = "
                f"{list(self.group_names)} (names or indices 0..{self.n_groups - 1}); name the "
                "groups as the env reports them.")
        raise SystemError_(
            f"gym env {self.name}: group {self.group_names[g]!r} not reached in {self.max_tries} "
            f"resets (group = 'info:{key}'): too rare for rejection sampling; pin the group "
            "with reset(options={'group': g}) and group = 'options'.")

    def reset(self, n: int, group: Any, rng: np.random.Generator) -> GymState:
        g = np.broadcast_to(np.asarray(group), (n,)).astype(np.intp)
        seeds = rng.integers(0, 2**62, size=n)
        envs, obs = [], []
        api, shape, rng_ = self._api, self._shape, self._rng
        for gi, seed in zip(g.tolist(), seeds.tolist(), strict=True):
            env, o = self._reset_one(gi, seed)
            if not envs:
                self._check_batch_memory(env, n)
            if type(o) is not np.ndarray or o.shape != shape or o.dtype is not _F64:
                o = _box_vector(o, self._width, self.name)
            obs.append(o)  # copied by the stack below
            if api:
                envs.append(getattr(env, api[0])())
            else:  # each step is given its own generator state: none to copy
                (env if self._bare else env.unwrapped)._np_random = rng_
                envs.append(env)
        feats = np.stack(obs) if obs else np.zeros((0, self.width))
        return GymState(tuple(envs), feats, g.copy(), np.zeros(n, dtype=bool), 0)

    def _check_batch_memory(self, env: Any, n: int) -> None:
        """Refuse a batch of ``n`` individuals whose envs would outgrow the memory limit:
        about three envs an individual (pi's, pi0's and a fork's copy), each the size of
        ``env`` pickled without what copies share (measured once; an env that cannot be
        pickled is not measured)."""
        if self._env_bytes is None:
            self._env_bytes = _pickled_size(env, self._shared)
        if self._env_bytes:
            check_memory(3.0 * n * self._env_bytes,
                         f"gym env {self.name}: a batch of {n} individuals, about "
                         f"{format_bytes(self._env_bytes)} an env",
                         "lower the batch size (from_gym(batch_size=...), [system] batch_size "
                         "in a spec, --param batch_size=N; now "
                         f"{self.batch_size}), or share the env's constant data (shared=)")

    def observe(self, state: GymState) -> Observation:
        return Observation(group=state.group, features=state.obs, t=state.t)

    def warn_horizon(self, horizon: int, action: int = 0) -> None:
        """Warn when an episode ends by truncation before ``horizon`` steps: the door does
        not read ``truncated``, so an audit over ``horizon`` epochs would step the env past
        the end of its episodes. Probed once per horizon on one individual of the first
        group taking ``action`` (an env with a state API gets its state back)."""
        import warnings

        if horizon <= getattr(self, "_horizon_probed", 1):
            return
        self._horizon_probed = horizon
        api = self._api
        saved = getattr(self._template, api[0])() if api else None
        env, _ = self._reset_one(0, 0)
        try:
            for k in range(1, horizon):
                out = call_user(f"gym env {self.name}.step", env.step, action + self._start)
                if not isinstance(out, tuple) or len(out) != 5 or out[2]:
                    return  # a malformed step is the fork check's; an ended episode is fine
                if out[3]:
                    warnings.warn(
                        f"gym env {self.name}: its episodes end (truncated) after {k} steps, "
                        f"but the audit runs T = {horizon} epochs and does not read "
                        "truncated, so the env is stepped past the end of its episodes; give "
                        f"the audit the env's horizon (--horizon {k}, horizon = {k} in a "
                        f"spec, from_gym(horizon={k})).", UserWarning, stacklevel=2)
                    return
        finally:
            if api:
                getattr(self._template, api[1])(saved)

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, 2**64, size=(n, 2), dtype=np.uint64)

    def _gain(self, obs0: np.ndarray, a: int, obs1: np.ndarray, reward: float, info: Any) -> float:
        mode = self.gain_mode
        kind, _, key = mode.partition(":")
        if self._gain_fn is not None:
            got = call_user(f"from_gym gain {mode}", self._gain_fn, obs0, a, obs1, reward, info)
            return got if type(got) is float else self._number(got, "gain")
        if mode == "reward":
            return float(reward)
        if kind == "obs":
            return float(obs1[int(key)] - obs0[int(key)])
        if not isinstance(info, Mapping) or key not in info:
            raise SystemError_(
                f"gym env {self.name}: gain = 'info:{key}' but step's info has no key {key!r}; "
                f"return the qualification gain in info[{key!r}] or set gain (obs:INDEX, reward, "
                "module:callable).")
        return self._number(info[key], "gain")

    def _number(self, value: Any, what: str) -> float:
        """``value`` (a step's reward or gain) as a float: a number, or an array of one
        value; anything else (a multi-objective env's reward vector) is refused."""
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
                f"gym env {self.name}: step's reward is {short(value)}, not one number (a "
                "multi-objective env's reward vector?); from_gym needs one reward per step: "
                "return a scalarized env from the factory (mo-gymnasium: "
                "mo_gymnasium.wrappers.LinearReward(env, weight=np.array([...])); else a "
                "gymnasium.RewardWrapper).")
        raise SystemError_(
            f"gym env {self.name}: gain = {self.gain_mode!r} gave {short(value)}, not one "
            "number; the qualification gain of a step is one number per individual (pick one "
            "value, e.g. gain = 'module:callable' returning float(info[...][k])).")

    def _stepper(self) -> Callable[[Any, int, list[int], np.ndarray],
                                   tuple[np.ndarray, float, float, bool]]:
        """``run(env, action, word, obs0)``: step the env object ``env`` (whose observation
        was ``obs0``) in place with ``action`` and the generator state ``word`` (two 64-bit
        ints); (observation, reward, gain, ended)."""
        gen, rng, start, shape, width, name = (self._gen, self._rng, self._start, self._shape,
                                               self._width, self.name)
        bare, key, gain, api = self._bare, self._info_key, self._gain, self._api
        set_state, number = gen.set, self._number

        def run(env: Any, action: int, word: list[int], obs0: np.ndarray
                ) -> tuple[np.ndarray, float, float, bool]:
            set_state(word[0], word[1])
            (env if bare else env.unwrapped)._np_random = rng
            o, r, term, _trunc, info = env.step(action + start)
            if type(o) is not np.ndarray or o.shape != shape or o.dtype is not _F64 or api:
                o = np.array(_box_vector(o, width, name))  # api: the env may reuse o
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

    def step_one(self, snap: Any, action: int, word: list[int], obs0: np.ndarray
                 ) -> tuple[Any, np.ndarray, float, float, bool]:
        """One env of a batch: a copy of ``snap`` (whose observation was ``obs0``) stepped
        with ``action`` and the generator state ``word`` (two 64-bit ints); (new snapshot,
        observation, reward, gain, ended). ``snap`` itself is left unchanged."""
        api = self._api
        if api:
            env = self._template
            getattr(env, api[1])(snap)
        else:
            env = copy_env(snap, self._shared)
        o, r, gn, term = self._run(env, action, word, obs0)
        return (getattr(env, api[0])() if api else env), o, r, gn, term

    def _step_all(self, state: GymState, d: np.ndarray, noise: np.ndarray, envs: list[Any],
                  obs: np.ndarray) -> tuple[list[float], list[float], list[bool]]:
        """Step every live env of ``state`` into ``envs`` and ``obs``; the rewards, gains
        and ends. A transition already made from the same snapshot with the same action
        and generator state (the pi^PS fork where pi took the baseline, pi0 while its path
        is still pi's) is the same transition, which :func:`check_forks` verifies, so it
        is reused rather than stepped again; snapshots are never stepped in place, so two
        states may share one."""
        if noise is not self._memo_noise:  # the memo lives for one noise array (one epoch)
            self._memo, self._memo_noise = {}, noise
        memo, step_one = self._memo, self.step_one
        words, acts, snaps, obs0 = noise.tolist(), d.tolist(), state.envs, state.obs
        n = len(acts)
        reward, gain, done = [0.0] * n, [0.0] * n, state.done.tolist()
        for i in np.flatnonzero(~state.done).tolist():
            snap, a, w = snaps[i], acts[i], words[i]
            key = (id(snap), a)
            hit = memo.get(key)
            if hit is None or hit[0] is not snap or hit[1] != w:
                hit = memo[key] = (snap, w, *step_one(snap, a, w, obs0[i]))
            _, _, envs[i], obs[i], reward[i], gain[i], done[i] = hit
        return reward, gain, done

    def _stepping(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, a batch's steps, as user code; refused where they moved the state
        of ``np.random`` or ``random`` (a step that reads a global generator only in some
        states, later than :func:`check_forks` looked: forks would lose common random
        numbers and the numbers their seeds)."""
        before = global_states(exact=False)
        out = call_user(f"gym env {self.name}.step", fn, *args)
        if global_states(exact=False) != before:
            raise global_read_error(self.name)
        return out

    def _check_live(self, *states: GymState) -> None:
        for st in states:
            if st in self._consumed:
                raise RuntimeError("GymSimulator: a state consumed by step_paths or step_forks "
                                   "(its envs were stepped in place) was stepped again; step "
                                   "its results.")

    def step(self, state: GymState, decisions: Any, noise: np.ndarray) -> StepResult:
        self._check_live(state)
        envs = list(state.envs)
        obs = np.array(state.obs, dtype=np.float64)
        reward, gain, done = self._stepping(self._step_all, state,
                                            np.asarray(decisions).astype(np.intp), noise, envs, obs)
        return StepResult(GymState(tuple(envs), obs, state.group, np.array(done, dtype=bool),
                                   state.t + 1), np.array(reward), np.array(gain), {})

    def step_paths(self, state: GymState, decisions: Any, state0: GymState, baseline: Any,
                   noise: np.ndarray) -> tuple[StepResult, StepResult, StepResult]:
        """pi's step (``state``, ``decisions``), the pi^PS fork (``state``, ``baseline``)
        and pi0's step (``state0``, ``baseline``), all with ``noise``: what three calls of
        :meth:`step` give, bit for bit, for the Monte Carlo engine's epoch (method.md
        section 3), with fewer copies. ``state`` and ``state0`` are consumed: their envs
        are stepped in place, so neither may be stepped again. Per individual, the fork
        steps pi's env in place; pi steps a copy of it, made before, only where its
        decision is not the baseline (else pi's transition is the fork's); pi0 steps its
        own env in place, or shares the fork's transition while its env is pi's. An env
        with a state API (``get_state``/``set_state``) is stepped by :meth:`step`."""
        d = np.asarray(decisions).astype(np.intp)
        d0 = np.asarray(baseline).astype(np.intp)
        self._check_live(state, state0)
        if self._api:
            return self.step(state, d, noise), self.step(state, d0, noise), \
                self.step(state0, d0, noise)
        return self._stepping(self._paths, state, d, state0, d0, noise)

    def _paths(self, state: GymState, d: np.ndarray, state0: GymState, d0: np.ndarray,
               noise: np.ndarray) -> tuple[StepResult, StepResult, StepResult]:
        """:meth:`step_paths` over env objects (no state API)."""
        self._memo, self._memo_noise = {}, None  # envs are stepped in place from here
        self._consumed.add(state)
        self._consumed.add(state0)
        run, shared = self._run, self._shared
        words, acts, base = noise.tolist(), d.tolist(), d0.tolist()
        envs, envs0 = state.envs, state0.envs
        rows, rows0 = list(state.obs), list(state0.obs)
        done, done0 = state.done.tolist(), state0.done.tolist()
        e_pi, pi, fk, z = list(envs), [], [], []  # per path: (observation, reward, gain, ended)
        for i, (env, a, b, w) in enumerate(zip(envs, acts, base, words, strict=True)):
            if done[i]:
                out = fk_out = (rows[i], 0.0, 0.0, True)
            elif a != b:  # a branch: pi steps a copy, made first; the fork the env itself
                e_pi[i] = pi_env = copy_env(env, shared)
                out = run(pi_env, a, w, rows[i])
                fk_out = run(env, b, w, rows[i])
            else:  # pi's transition is the fork's
                out = fk_out = run(env, a, w, rows[i])
            pi.append(out)
            fk.append(fk_out)
            if done0[i]:
                z.append((rows0[i], 0.0, 0.0, True))
            elif envs0[i] is env and not done[i]:  # pi0's env is pi's: the fork's transition
                z.append(fk_out)
            else:
                z.append(run(envs0[i], b, w, rows0[i]))
        res = self._result
        return res(state, e_pi, pi), res(state, envs, fk), res(state0, envs0, z)

    def step_forks(self, state: GymState, actions: Sequence[Any], decisions: Any,
                   noise: np.ndarray) -> tuple[np.ndarray, StepResult]:
        """The benefit rollout's epoch (method.md section 4): the gain of every fork, (n,
        len(actions)), column k every individual of ``state`` taking ``actions[k]``, and the
        step of ``decisions``, all with ``noise``: what ``len(actions) + 1`` calls of
        :meth:`step` give, bit for bit. ``state`` is consumed (its envs are stepped in
        place), so it may not be stepped again. Per individual, every fork but the last
        steps a copy of its env, made before, and the last the env itself: at most
        ``len(actions) - 1`` copies; the decision's transition is the fork of its action
        (a step of its own where it took none of ``actions``). With a state API
        (``get_state``/``set_state``): one restore and step per fork, a snapshot of the
        decision's fork only."""
        acts = [int(a) for a in np.asarray(actions).reshape(-1).tolist()]
        d = np.asarray(decisions).astype(np.intp)
        self._check_live(state)
        return self._stepping(self._forks, state, acts, d, noise)

    def _forks(self, state: GymState, acts: list[int], d: np.ndarray, noise: np.ndarray
               ) -> tuple[np.ndarray, StepResult]:
        """:meth:`step_forks` with the actions as ints."""
        self._memo, self._memo_noise = {}, None  # envs are stepped in place from here
        self._consumed.add(state)
        run, shared, api = self._run, self._shared, self._api
        if api:
            tmpl = self._template
            get, put = getattr(tmpl, api[0]), getattr(tmpl, api[1])
        todo = list(dict.fromkeys(acts))  # each distinct action once; the in-place one last
        where = {a: k for k, a in enumerate(todo)}
        cols = [where[a] for a in acts]
        zeros = [0.0] * len(acts)
        words, dec, rows, done = noise.tolist(), d.tolist(), list(state.obs), state.done.tolist()
        envs, gains, outs = list(state.envs), [], []
        for i, (snap, a_d, w, row, ended) in enumerate(zip(state.envs, dec, words, rows, done,
                                                           strict=True)):
            if ended:
                gains.append(zeros)
                outs.append((row, 0.0, 0.0, True))
                continue
            steps = todo if a_d in where else [*todo, a_d]  # a decision outside them: last
            if api:
                got = []
                for a in steps:
                    put(snap)
                    got.append(run(tmpl, a, w, row))
                    if a == a_d:
                        envs[i] = get()
            else:  # the copies first, while the env is as the state left it; then the env
                forked = [copy_env(snap, shared) for _ in steps[1:]]
                forked.append(snap)
                got = []
                for e, a in zip(forked, steps, strict=True):
                    got.append(run(e, a, w, row))
                envs[i] = forked[where.get(a_d, -1)]
            outs.append(got[where.get(a_d, -1)])
            gains.append([got[c][2] for c in cols])
        return np.array(gains, dtype=np.float64).reshape(len(dec), len(acts)), \
            self._result(state, envs, outs)

    def _result(self, st: GymState, envs: Sequence[Any], outs: list[tuple[Any, ...]]
                ) -> StepResult:
        """The step from ``st`` whose per-individual (observation row, reward, gain, ended)
        are ``outs`` (every row a float64 vector of the width: a stepped env's, or the
        state's own row where the episode had ended) and whose env snapshots are ``envs``."""
        n, width = len(outs), self.width
        o, r, g, t = zip(*outs, strict=True) if outs else ((), (), (), ())
        obs = np.frombuffer(b"".join(map(_tobytes, o)), dtype=np.float64)
        return StepResult(GymState(tuple(envs), obs.reshape(n, width).copy(), st.group,
                                   np.array(t, dtype=bool), st.t + 1),
                          np.array(r, dtype=np.float64), np.array(g, dtype=np.float64), {})


def _pickled_size(env: Any, shared: Mapping[int, Any]) -> int | None:
    """Bytes of ``env`` pickled without the objects of ``shared`` (what its copies hold of
    their own); None when it cannot be pickled."""
    import io
    import pickle

    class _Sized(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return id(obj) if id(obj) in shared else None

    buf = io.BytesIO()
    try:
        _Sized(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(env)
    except Exception:  # noqa: BLE001 - any env that pickling refuses: not measured
        return None
    return buf.tell()


def _flatten_fix(space: Any) -> str:
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


def _is_ref(text: str) -> bool:
    return isinstance(text, str) and text.count(":") == 1 and not text.startswith(
        ("info:", "obs:"))


# ------------------------------------------------------------------ the door
def _check_mode(value: Any, label: str, allowed: str, kinds: Sequence[str]) -> str:
    ok = isinstance(value, str) and (value in kinds or value.startswith(
        tuple(k for k in kinds if k.endswith(":"))) and value.partition(":")[2] or _is_ref(value))
    if not ok:
        raise SystemError_(f"from_gym {label}: bad value {short(value)}; use {allowed}.")
    return value


def from_gym(env_factory: Callable[..., Any] | str, *, groups: Sequence[str], group: str = "options",
             gain: str = "info:gain", baseline: int = 0, horizon: int | None = None,
             features: Sequence[str] | None = None, params: Mapping[str, Any] | None = None,
             id: str | None = None, check: bool = True, shared: Sequence[str] = (),
             batch_size: int = BATCH_SIZE) -> System:
    """A :class:`~causalfair.systems.System` over a Gymnasium env (module docstring).

    ``env_factory``: a callable returning a ``gymnasium.Env`` (one individual per env,
    its own ``self.np_random``), ``"module:callable"``, or a registered Gymnasium id;
    called with ``params``. ``groups``: the group names, index 0 is s+. ``group``: how
    reset pins an individual's group: ``"options"`` (``reset(options={"group": g})``),
    ``"info:KEY"`` (rejection sampling on ``info[KEY]``, slower) or ``"module:callable"``
    (``fn(env, g, seed) -> (obs, info)``). ``gain``: the qualification gain of a step:
    ``"info:KEY"``, ``"obs:INDEX"`` (the change of that observation column), ``"reward"``
    or ``"module:callable"`` (``fn(obs, action, next_obs, reward, info) -> float``).
    ``baseline``: the action pi0 takes. ``horizon``: epochs (default: the env's
    ``max_episode_steps``, else 20). ``features``: names of the observation columns
    (default ``x0..xk``); the columns that carry the group (:func:`group_columns`, or one
    named ``group``) are the system's ``roles["group"]``. ``shared``: names of attributes
    of ``env.unwrapped`` that reset and step never change (a transition table, a data
    set): every copy of the env shares them instead of copying them; the fork check
    verifies that its resets and steps leave them unchanged. ``batch_size``: individuals
    simulated at once when an engine is given no batch size (default :data:`BATCH_SIZE`;
    a batch whose envs would outgrow the memory limit is refused, naming it). The id is
    ``gym:`` and the env's
    ``module:callable`` (or registered id). Forks are checked (:func:`check_forks`) unless
    ``check=False``.
    An episode that terminates early contributes zero gain and reward afterwards.
    """
    given = groups
    groups = tuple(str(x) for x in groups) if not isinstance(groups, str) else None
    if not groups or len(groups) < 2:
        raise SystemError_(
            f"from_gym groups: give a list of at least two group names, got {short(given)}: "
            "groups=['White', 'Black'] in Python, groups = [\"White\", \"Black\"] in a spec, "
            "--param 'groups=[\"White\",\"Black\"]' on the command line (JSON, double "
            "quotes); index 0 is s+.")
    _check_mode(group, "group", "'options', 'info:KEY' or 'module:callable'", ("options", "info:"))
    _check_mode(gain, "gain", "'info:KEY', 'obs:INDEX', 'reward' or 'module:callable'",
                ("reward", "info:", "obs:"))
    if gain.startswith("obs:") and not gain[4:].isdigit():
        raise SystemError_(f"from_gym gain: bad value {gain!r}; use 'obs:INDEX' with an integer index.")
    ref = env_factory if isinstance(env_factory, str) else None
    if isinstance(shared, str) or not all(isinstance(a, str) and a for a in shared):
        raise SystemError_(f"from_gym shared: bad value {short(shared)}; give a list of env "
                           "attribute names, e.g. shared=['P'].")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise SystemError_(f"from_gym batch_size: bad value {short(batch_size)}; give an "
                           f"integer >= 1 (default {BATCH_SIZE}).")
    factory = _resolve_factory(env_factory)
    sid = id or gym_id(ref or _callable_ref(env_factory))
    sim = GymSimulator(factory, groups=groups, group=group, gain=gain, params=params,
                       name=ref or getattr(env_factory, "__name__", type(env_factory).__name__),
                       shared=shared, batch_size=batch_size)
    if gain.startswith("obs:") and int(gain[4:]) >= sim.width:
        raise SystemError_(f"from_gym gain: bad value {gain!r}; the observation has {sim.width} "
                           "columns.")
    if features is not None and len(tuple(features)) != sim.width:
        raise SystemError_(f"from_gym features: {len(tuple(features))} names for {sim.width} "
                           "observation columns; give one name per column.")
    if check:
        check_forks(sim)
    A = sim.n_actions
    T = horizon if horizon is not None else (sim.horizon_hint or 20)
    names = tuple(features) if features is not None else tuple(f"x{i}" for i in range(sim.width))
    carry = sorted({names[j] for j in group_columns(sim)} | ({"group"} & set(names)))
    return System(
        id=sid, groups=groups,
        decisions=DecisionSet(labels=tuple(f"d{i}" for i in range(A)), baseline=baseline),
        features=names, roles={"group": carry} if carry else {},
        gain=Gain(description=f"from the Gymnasium env ({gain})"),
        reward="reward", horizon=T, simulator=sim,
        params={"group": group, "gain": gain, "baseline": baseline,
                **({"params": dict(params)} if params else {}),
                **({"shared": list(shared)} if shared else {}),
                **({"batch_size": int(batch_size)} if batch_size != BATCH_SIZE else {})},
        description=f"Gymnasium env {sim.name}")


def gym_id(env: str) -> str:
    """The id of the system over the env ``env`` (``"module:callable"`` or a registered
    Gymnasium id): ``gym:`` and ``env``, what audit.json, reports and MLflow name it."""
    return f"gym:{env}"


def _callable_ref(fn: Any) -> str:
    """``module:qualname`` of an env factory (its class for a callable object)."""
    obj = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{getattr(obj, '__module__', '?')}:{obj.__qualname__}"


class _MakeRegistered:
    """Picklable factory of a registered Gymnasium id (``gymnasium.make``)."""

    def __init__(self, env_id: str):
        self.env_id = env_id

    def __call__(self, **kw: Any) -> Any:
        import gymnasium

        try:
            return gymnasium.make(self.env_id, **kw)
        except gymnasium.error.UnregisteredEnv as exc:  # NameNotFound, VersionNotFound, ...
            raise SystemError_(
                f"from_gym env_factory: {self.env_id!r} is not a registered Gymnasium id "
                f"({exc}); name the module that registers it, Gymnasium's 'module:ID' form "
                f"(e.g. 'mymodule:{self.env_id.rpartition(':')[2]}'), or give 'module:callable'.") from None


def _names_id(ref: str) -> bool:
    """``"module:Name-v0"``: Gymnasium's form of an id that ``module`` registers on import
    (``gymnasium.make`` imports it), not a ``module:callable``."""
    return not all(part.isidentifier() for part in ref.partition(":")[2].split("."))


def _resolve_factory(env_factory: Any) -> Callable[..., Any]:
    if callable(env_factory):
        return env_factory
    if isinstance(env_factory, str) and _is_ref(env_factory) and not _names_id(env_factory):
        return load_callable(env_factory, what="from_gym env factory")
    if isinstance(env_factory, str) and env_factory:
        return _MakeRegistered(env_factory)
    raise SystemError_(f"from_gym env_factory: bad value {short(env_factory)}; give a callable "
                       "returning a gymnasium.Env, 'module:callable' or a registered Gymnasium id.")


def gym_system(env: str, groups: Sequence[str] = (), group: str = "options",
               gain: str = "info:gain", baseline: int = 0, horizon: int | None = None,
               features: Sequence[str] | None = None,
               params: Mapping[str, Any] | None = None, shared: Sequence[str] = (),
               batch_size: int = BATCH_SIZE) -> System:
    """The registered system ``gym``: :func:`from_gym` of ``env`` (``"module:callable"``
    or a registered Gymnasium id), what ``[system] gym = ...`` in an audit spec makes."""
    return from_gym(env, groups=groups, group=group, gain=gain, baseline=baseline,
                    horizon=horizon, features=features, params=params, id=gym_id(env),
                    shared=shared, batch_size=batch_size)

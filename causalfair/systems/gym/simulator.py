"""The simulator of a Gymnasium door system (:func:`causalfair.systems.gym.door.from_gym`):
:class:`GymSimulator` holds a batch of env copies, one per individual, and implements the
four-method protocol of docs/simulators.md:

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

:func:`~causalfair.systems.gym.checks.check_forks` checks this on a sampled batch before
the system is used; a step that reads the global generators (``np.random``, ``random``)
later than the check looked is refused while stepping. How an env's spaces and a step's
observation, reward and gain are read: :mod:`causalfair.systems.gym.readings`.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._limits import check_memory, format_bytes
from causalfair._usercode import call_factory
from causalfair.errors import SimulatorContractError, SystemError_, UserCodeError, call_user, short
from causalfair.systems.gym.checks import global_read_error, global_states
from causalfair.systems.gym.forks import (
    StepGenerator,
    copy_env,
    shared_objects,
    state_api,
    time_limit,
    unwrap_bookkeeping,
)
from causalfair.systems.gym.readings import (
    F64,
    action_meanings,
    box_vector,
    change_reader,
    read_spaces,
    reads_obs0,
    stepper,
)
from causalfair.systems.registry import load_callable
from causalfair.types import Observation, StepResult
from causalfair.workers import pickler

__all__ = ["GymSimulator", "GymState", "BATCH_SIZE", "is_callable_ref"]

#: Envs made by factories in this thread of this process, by the digest of the pickled
#: (factory, params, the factory's module file) of the simulator that made them
#: (:meth:`GymSimulator._make_env`): a simulator unpickled for each task of a worker (local
#: or Ray) calls its factory once per worker thread, not once per task. At most
#: :data:`ENV_CACHE_SIZE` of them, the oldest dropped first.
_ENVS = threading.local()
ENV_CACHE_SIZE = 4

#: Individuals per batch of a Gymnasium system when neither the caller nor the system says:
#: an env object per individual, so a few hundred keep them in cache (the decomposition was
#: flat from 64 to 250 on benchmarks/bench_gym.py's env, 8% slower in one batch of 2,000),
#: and n individuals make n / 256 tasks per group for ``--jobs`` and Ray.
BATCH_SIZE = 256
#: Resets one individual of a group = "info:KEY" system may take until ``info[KEY]`` is its
#: group, once the first ``max_tries`` (200) have reported values among the groups (values
#: none of which is a group are refused after those 200). A 3% group takes about 33 resets;
#: with 200 at most, 0.97**200 = 0.2% of its individuals were refused, so an audit of
#: thousands was refused by chance (a 6% group: about 8% of audits at n = 20,000).
RARE_TRIES = 10_000
_tobytes = np.ndarray.tobytes


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
        self._group_fn = (load_callable(group, what="from_gym group")
                          if is_callable_ref(group) else None)
        self._gain_fn = load_callable(gain, what="from_gym gain") if is_callable_ref(gain) else None
        self._template: Any = None
        self._api: tuple[str, str] | None = None
        self._width: int | None = None
        self._n_actions = 0
        self._start = 0
        self._factory_key: bytes | None = None  # made when first pickled
        self._init()

    # pickling: env objects stay behind; a worker makes its own template, once per
    # (factory, params) in each of its threads
    def __getstate__(self) -> dict[str, Any]:
        if getattr(self, "_factory_key", None) is None:
            # what makes the env: the factory (by value when it is a script's or a
            # notebook's), its params, and the file of its module (two folders' clinic.py)
            module = sys.modules.get(getattr(self.env_factory, "__module__", None) or "")
            try:
                what = pickler().dumps((self.env_factory, self.params,
                                        getattr(module, "__file__", None)))
            except Exception:  # noqa: BLE001 - pickling the task fails just after, saying why
                what = None
            self._factory_key = b"" if what is None else hashlib.sha256(what).digest()
        d = dict(self.__dict__)
        for k in ("_template", "_gen", "_rng", "_run", "_memo", "_memo_noise", "_consumed"):
            d[k] = None
        d["_shared"] = {}
        return d

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._init(self.__dict__.get("_factory_key") or None)

    def _make_env(self, key: bytes | None = None) -> Any:
        """The env of ``env_factory(**params)``; with ``key`` (the pickled factory and
        params), the one this thread made for that key before, if any. Sharing it is what
        one simulator does with its template from batch to batch: an individual is
        whatever ``reset(seed=...)`` makes of it (docs/own-system.md, checked by
        :func:`~causalfair.systems.gym.checks.check_forks`), and the template is either
        only copied or reset and stepped one individual at a time. The simulators of one
        thread that share it run one at a time (a worker runs one task at a time; a
        Gymnasium simulator is never stepped on two threads: ``thread_safe``)."""
        if key is None:  # the files the factory reads are pinned (audit.json inputs)
            return call_factory(f"gym env factory {self.name}", self.env_factory, None,
                                **self.params)
        cache = _ENVS.__dict__.setdefault("envs", {})
        env = cache.get(key)
        if env is None:  # a new one: what its factory reads is pinned too (a worker's audit)
            env = call_factory(f"gym env factory {self.name}", self.env_factory, None,
                               **self.params)
            while len(cache) >= ENV_CACHE_SIZE:
                cache.pop(next(iter(cache)))
            cache[key] = env
        return env

    def _init(self, key: bytes | None = None) -> None:
        env = self._make_env(key)
        self._n_actions, self._start, self._width = read_spaces(env, self.name)
        self._spec = getattr(env, "spec", None)
        self._limit = time_limit(env)
        env, mode = change_reader(unwrap_bookkeeping(env), self.gain_mode, self.name)
        self._template = env
        self._api = state_api(env)
        self._bare = getattr(env, "unwrapped", None) is env
        self._shape = (self._width,)
        self._where_reset = f"gym env {self.name}.reset"
        # one generator, put into each step's state before the step
        self._gen = StepGenerator()
        self._rng = self._gen.rng
        self._run = stepper(self._gen, self._start, self._width, self.name, self._bare,
                            self._api, mode, self._gain_fn)
        self._reads_obs0 = reads_obs0(mode)
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
    def action_names(self) -> tuple[str, ...] | None:
        """The names the env gives its actions (``get_action_meanings()``), or None."""
        return action_meanings(self._template, self._n_actions)

    @property
    def horizon_hint(self) -> int | None:
        steps = getattr(self._spec, "max_episode_steps", None)
        return int(steps) if isinstance(steps, int) and steps > 0 else self._limit

    # ---------------------------------------------------------------- protocol
    def _fresh(self) -> Any:
        return self._template if self._api else copy_env(self._template, self._shared)

    def _reset_one(self, g: int, seed: int) -> tuple[Any, Any]:
        env = self._fresh()
        where = self._where_reset
        if self.group_mode == "options":
            try:
                obs, info = call_user(where, env.reset, seed=seed, options={"group": g})
            except UserCodeError as exc:
                raise UserCodeError(
                    str(exc).replace(f"{where} raised", f"{where}(options={{'group': {g}}}) "
                                     f"(group {self.group_names[g]!r}, {self.n_groups} groups "
                                     "listed) raised", 1)
                    + "; if the env has fewer groups, list as many groups as the env has, in "
                    "its order", callable_name=exc.callable_name,
                    traceback_text=exc.traceback_text) from exc.__cause__
            got = info.get("group") if type(info) is dict or isinstance(info, Mapping) else None
            if type(got) is not int and got is not None:
                got = self._one_group(got, "group")
            # matched as info:KEY matches (group_index): by name first, so with groups
            # [1, 0] the label 0 is groups[1], never the index 0 as well
            if got is not None and (found := self.group_index(got)) != g:
                means = ("names no group" if found is None else
                         f"which is groups[{found}] = {self.group_names[found]!r} (a label "
                         "is matched by name first, else as an index)")
                raise SystemError_(
                    f"gym env {self.name}: reset(options={{'group': {g}}}) reported info['group'] "
                    f"= {short(got)}, {means}, not groups[{g}] = {self.group_names[g]!r}; "
                    "list groups in the env's order, with the names it reports ([engine] pair "
                    "picks the pair compared), make reset start the group it is asked for, "
                    "or use group = 'info:KEY'.")
            return env, obs
        if self._group_fn is not None:
            obs, _ = call_user(f"from_gym group {self.group_mode}", self._group_fn, env, g, seed)
            return env, obs
        key = self.group_mode.partition(":")[2]
        ss = np.random.SeedSequence(seed)
        seen: list[Any] = []
        # the first max_tries seeds, then (for a group the env does report, but rarely)
        # up to RARE_TRIES: generate_state's words are the same prefix whatever the count
        seeds = ss.generate_state(self.max_tries, dtype=np.uint32)
        k = 0
        while True:
            if k == len(seeds):
                if len(seeds) >= RARE_TRIES or not any(
                        self.group_index(v) is not None for v in seen):
                    break
                seeds = ss.generate_state(RARE_TRIES, dtype=np.uint32)
            obs, info = call_user(where, env.reset, seed=int(seeds[k]) + (k << 32))
            k += 1
            if not isinstance(info, Mapping) or key not in info:
                raise SystemError_(
                    f"gym env {self.name}: group = 'info:{key}' but reset's info has no key "
                    f"{key!r}; return the individual's group in info[{key!r}].")
            got = info[key]
            if type(got) is not int and type(got) is not str:
                got = self._one_group(got, key)
            if self.group_index(got) == g:
                return env, obs
            if len(seen) < 5 and got not in seen:
                seen.append(got)
        if not any(self.group_index(v) is not None for v in seen):
            raise SystemError_(
                f"gym env {self.name}: reset's info[{key!r}] was {', '.join(map(short, seen))} "
                f"in {self.max_tries} resets, never a group of groups = "
                f"{list(self.group_names)} (names or indices 0..{self.n_groups - 1}); name the "
                "groups as the env reports them.")
        raise SystemError_(
            f"gym env {self.name}: group {self.group_names[g]!r} not reached in {k} "
            f"resets (group = 'info:{key}'): too rare for rejection sampling; pin the group "
            "with reset(options={'group': g}) and group = 'options'.")

    def group_index(self, got: Any) -> int | None:
        """The group a label the env reports names: by name first (the label 7, True or
        "B" is the group listed as 7, True or "B", whatever its place in groups), else as an
        index 0..G-1 (an env that reports indices); None when it is neither."""
        text = str(got)
        if text in self.group_names:
            return self.group_names.index(text)
        return next((i for i in range(self.n_groups) if got == i), None)

    def _one_group(self, got: Any, key: str) -> Any:
        """The group reset reported in ``info[key]`` as one value: an array (or list) of
        one value is that value; one of several values (a one-hot vector) is refused."""
        if isinstance(got, (np.ndarray, list, tuple)):
            arr = np.asarray(got)
            if arr.size == 1:
                return arr.reshape(-1)[0].item()
            raise SystemError_(
                f"gym env {self.name}: reset's info[{key!r}] is {short(got)}, {arr.size} "
                "values; report an individual's group as one value, its index in groups or "
                "its name (for a one-hot vector v: int(np.argmax(v))).")
        return got

    def reset(self, n: int, group: Any, rng: np.random.Generator) -> GymState:
        g = np.broadcast_to(np.asarray(group), (n,)).astype(np.intp)
        seeds = rng.integers(0, 2**62, size=n)
        envs, obs = [], []
        api, shape, rng_ = self._api, self._shape, self._rng
        for gi, seed in zip(g.tolist(), seeds.tolist(), strict=True):
            env, o = self._reset_one(gi, seed)
            if not envs:
                self._check_batch_memory(env, n)
            if type(o) is not np.ndarray or o.shape != shape or o.dtype is not F64:
                o = box_vector(o, self._width, self.name)
            obs.append(o)  # copied by the stack below
            if api:
                envs.append(getattr(env, api[0])())
            else:  # each step is given its own generator state: none to copy
                (env if self._bare else env.unwrapped)._np_random = rng_
                envs.append(env)
        feats = _stack(obs, self.width)
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
        obs = state.obs
        if not np.isfinite(obs).all():  # as the contract refuses a simulator's (one pass)
            bad = ~np.isfinite(obs)
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise SimulatorContractError(
                f"gym env {self.name}: NaN states: its observation holds NaN or inf "
                f"({int(bad.sum())} entries; the first {float(obs[i, j])!r} in column {j} at "
                f"t = {state.t}), which a policy cannot read; fix the env, or replace the "
                "values in an ObservationWrapper returned by the factory.")
        return Observation(group=state.group, features=obs, t=state.t)

    def warn_horizon(self, horizon: int, action: int = 0) -> None:
        """Warn when an episode ends by truncation before ``horizon`` steps: the door does
        not read ``truncated``, so an audit over ``horizon`` epochs would step the env past
        the end of its episodes. The episode length is the env's ``max_episode_steps``
        (its spec's, else a ``TimeLimit``'s: the stepped envs are without it), else probed
        once per horizon on one individual of the first group taking ``action`` (an env
        with a state API gets its state back)."""
        import warnings

        if horizon <= getattr(self, "_horizon_probed", 1):
            return
        self._horizon_probed = horizon
        k = self.horizon_hint  # a TimeLimit's, which the stepped envs are without
        if k is None or k >= horizon:
            k = None
            api = self._api
            saved = getattr(self._template, api[0])() if api else None
            env, _ = self._reset_one(0, 0)
            try:
                for j in range(1, horizon):
                    out = call_user(f"gym env {self.name}.step", env.step, action + self._start)
                    if not isinstance(out, tuple) or len(out) != 5 or out[2]:
                        return  # a malformed step is the fork check's; an ended episode is fine
                    if out[3]:
                        k = j
                        break
            finally:
                if api:
                    getattr(self._template, api[1])(saved)
        if k is not None:
            warnings.warn(
                f"gym env {self.name}: its episodes end (truncated) after {k} steps, "
                f"but the audit runs T = {horizon} epochs and does not read "
                "truncated, so the env is stepped past the end of its episodes; give "
                f"the audit the env's horizon (--horizon {k}, horizon = {k} in a "
                f"spec, from_gym(horizon={k})).", UserWarning, stacklevel=2)

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, 2**64, size=(n, 2), dtype=np.uint64)


    def step_one(self, snap: Any, action: int, word: bytes, obs0: np.ndarray | None
                 ) -> tuple[Any, np.ndarray, float, float, bool]:
        """One env of a batch: a copy of ``snap`` stepped with ``action`` and the generator
        state ``word`` (a row of ``_gen.words(noise)``); (new snapshot, observation,
        reward, gain, ended). ``obs0``: the observation of ``snap``, None where the gain
        does not read it (:func:`~causalfair.systems.gym.readings.reads_obs0`). ``snap``
        itself is left unchanged."""
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
        words, acts, snaps, obs0 = self._gen.words(noise), d.tolist(), state.envs, state.obs
        reads = self._reads_obs0
        n = len(acts)
        reward, gain, done = [0.0] * n, [0.0] * n, state.done.tolist()
        for i in np.flatnonzero(~state.done).tolist():
            snap, a, w = snaps[i], acts[i], words[i]
            key = (id(snap), a)
            hit = memo.get(key)
            if hit is None or hit[0] is not snap or hit[1] != w:
                hit = memo[key] = (snap, w, *step_one(snap, a, w, obs0[i] if reads else None))
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
        words, acts, base = self._gen.words(noise), d.tolist(), d0.tolist()
        envs, envs0, obs, obs0 = state.envs, state0.envs, state.obs, state0.obs
        # the rows a step's gain reads (obs0 of gain = 'obs:INDEX' or a callable), else None
        rows, rows0 = (list(obs), list(obs0)) if self._reads_obs0 else ((None,) * len(acts),) * 2
        done, done0 = state.done.tolist(), state0.done.tolist()
        e_pi, pi, fk, z = [], [], [], []  # per path: (observation, reward, gain, ended)
        for i, (env, a, b, w, row, ended, env0) in enumerate(
                zip(envs, acts, base, words, rows, done, envs0, strict=True)):
            if ended:
                out = fk_out = (obs[i], 0.0, 0.0, True)
                e_pi.append(env)
            elif a != b:  # a branch: pi steps a copy, made first; the fork the env itself
                pi_env = copy_env(env, shared)
                e_pi.append(pi_env)
                out = run(pi_env, a, w, row)
                fk_out = run(env, b, w, row)
            else:  # pi's transition is the fork's
                e_pi.append(env)
                out = fk_out = run(env, a, w, row)
            pi.append(out)
            fk.append(fk_out)
            if done0[i]:
                z.append((obs0[i], 0.0, 0.0, True))
            elif env0 is env and not ended:  # pi0's env is pi's: the fork's transition
                z.append(fk_out)
            else:
                z.append(run(env0, b, w, rows0[i]))
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
        words, dec, done = self._gen.words(noise), d.tolist(), state.done.tolist()
        obs = state.obs  # its rows, where a step's gain reads them (_paths)
        rows = list(obs) if self._reads_obs0 else (None,) * len(dec)
        envs, gains, outs = list(state.envs), [], []
        for i, (snap, a_d, w, row, ended) in enumerate(zip(state.envs, dec, words, rows, done,
                                                           strict=True)):
            if ended:
                gains.append(zeros)
                outs.append((obs[i], 0.0, 0.0, True))
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
        o, r, g, t = zip(*outs, strict=True) if outs else ((), (), (), ())
        return StepResult(GymState(tuple(envs), _stack(o, self.width), st.group,
                                   np.array(t, dtype=bool), st.t + 1),
                          np.array(r, dtype=np.float64), np.array(g, dtype=np.float64), {})


def _stack(rows: Sequence[np.ndarray], width: int) -> np.ndarray:
    """The float64 vectors ``rows``, each of ``width`` values, as an (n, width) array
    (what ``np.stack`` makes, in a third of its time for short rows)."""
    obs = np.frombuffer(b"".join(map(_tobytes, rows)), dtype=np.float64)
    return obs.reshape(len(rows), width).copy()


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


def is_callable_ref(text: str) -> bool:
    """``text`` names a ``module:callable`` (not ``info:KEY``, ``info-change:KEY`` or
    ``obs:INDEX``)."""
    return isinstance(text, str) and text.count(":") == 1 and not text.startswith(
        ("info:", "info-change:", "obs:"))

"""A user's Gymnasium environment as a :class:`~causalfair.systems.System`:
:func:`from_gym` (``cf.systems.from_gym``) and the ``[system] gym = ...`` spec form
(registered id ``gym``, :func:`gym_system`).

One env is one individual. The system's simulator
(:class:`~causalfair.systems.gym.simulator.GymSimulator`) holds a batch of env copies,
one per individual, and forks them with common random numbers (method.md section 3).
:func:`check_forks` checks this on a sampled batch before the system is used and refuses
an env that cannot be copied, one whose reset with one seed gives two individuals, one
whose forks with the same action differ, one that reads the global generators
(``np.random``, ``random``, torch's; also refused while stepping, where a step reads them later
than the check looked), one whose generator use depends on the action, one whose step
draws from a generator of its own that every individual shares, and
(``group="options"``) one whose reset ignores the group it is asked for. A step's reward
and gain are one number each (a reward vector is refused).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from causalfair.errors import SystemError_, short
from causalfair.systems.gym.checks import (
    GymForkError,
    check_forks,
    check_one_individual,
    group_columns,
)
from causalfair.systems.gym.simulator import (
    BATCH_SIZE,
    GymSimulator,
    GymState,
    is_callable_ref,
)
from causalfair.systems.registry import load_callable
from causalfair.systems.system import DecisionSet, Gain, System

__all__ = ["from_gym", "gym_system", "gym_id", "GymSimulator", "GymState", "BATCH_SIZE",
           "check_forks", "group_columns", "GymForkError", "registered_module"]


def _check_mode(value: Any, label: str, allowed: str, kinds: Sequence[str]) -> str:
    ok = isinstance(value, str) and (value in kinds and not value.endswith(":") or value.startswith(
        tuple(k for k in kinds if k.endswith(":"))) and value.partition(":")[2]
        or is_callable_ref(value))
    if not ok:
        raise SystemError_(f"from_gym {label}: bad value {short(value)}; use {allowed}.")
    return value


def from_gym(env_factory: Callable[..., Any] | str, *, groups: Sequence[str], group: str = "options",
             gain: str = "info:gain", baseline: int = 0, horizon: int | None = None,
             features: Sequence[str] | None = None, params: Mapping[str, Any] | None = None,
             id: str | None = None, check: bool = True, shared: Sequence[str] = (),
             batch_size: int = BATCH_SIZE, actions: Sequence[str] | None = None,
             group_weights: Sequence[float] | None = None) -> System:
    """A :class:`~causalfair.systems.System` over a Gymnasium env (module docstring).

    ``env_factory``: a callable returning a ``gymnasium.Env`` (one individual per env,
    its own ``self.np_random``), ``"module:callable"``, or a registered Gymnasium id;
    called with ``params``. ``groups``: the group names, index 0 is s+. ``group``: how
    reset pins an individual's group: ``"options"`` (``reset(options={"group": g})``),
    ``"info:KEY"`` (rejection sampling on ``info[KEY]``, slower) or ``"module:callable"``
    (``fn(env, g, seed) -> (obs, info)``). ``gain``: the qualification gain of a step:
    ``"info:KEY"`` (``info[KEY]`` of each step is its gain), ``"info-change:KEY"`` (where
    ``info[KEY]`` is a level: its value after the step minus before, the first step's
    before read from reset's info), ``"obs:INDEX"`` (the change of that observation
    column), ``"reward"`` or ``"module:callable"`` (``fn(obs, action, next_obs, reward,
    info) -> float``).
    ``baseline``: the action pi0 takes. ``actions``: one name per action of the env's
    ``Discrete(n)`` action space, in its order, as reports print them (default: the
    env's own, ``env.unwrapped.get_action_meanings()`` when it has n distinct ones, else
    ``d0..d{n-1}``). ``group_weights``: the groups' shares of the population, one per
    group summing to 1, which weight the utility (default uniform; the audit simulates
    the same n individuals per group whatever they are). ``horizon``: epochs (default:
    the env's ``max_episode_steps``, its spec's or a ``TimeLimit``'s, else 20). ``features``: names of the observation columns
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
    if groups and len(set(groups)) != len(groups):
        twice = sorted({g for g in groups if groups.count(g) > 1})
        raise SystemError_(
            f"from_gym groups: names must be distinct, got {short(list(groups))} "
            f"({', '.join(map(repr, twice))} more than once); give one name per group of "
            "the env, in its order.")
    if not groups or len(groups) < 2:
        raise SystemError_(
            f"from_gym groups: give a list of at least two group names, got {short(given)}: "
            "groups=['White', 'Black'] in Python, groups = [\"White\", \"Black\"] in a spec, "
            "--param 'groups=[\"White\",\"Black\"]' on the command line (JSON, double "
            "quotes); index 0 is s+.")
    _check_mode(group, "group", "'options', 'info:KEY' or 'module:callable'", ("options", "info:"))
    _check_mode(gain, "gain", "'info:KEY', 'info-change:KEY', 'obs:INDEX', 'reward' or "
                "'module:callable'", ("reward", "info:", "info-change:", "obs:"))
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
    labels = _check_actions(actions)
    weights = _check_weights(group_weights, groups)
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
    A = sim.n_actions
    if labels is not None and len(labels) != A:
        raise SystemError_(
            f"from_gym actions: {len(labels)} names {short(list(labels))} for the env's "
            f"{A} actions (its action space is Discrete({A})); give one name per action, "
            "in the action space's order.")
    T = horizon if horizon is not None else (sim.horizon_hint or 20)
    if check:
        check_forks(sim)
        check_one_individual(sim, T)
    names = tuple(features) if features is not None else tuple(f"x{i}" for i in range(sim.width))
    own = sim.action_names if labels is None else None
    carry = sorted({names[j] for j in group_columns(sim)} | ({"group"} & set(names)))
    return System(
        id=sid, groups=groups,
        decisions=DecisionSet(labels=labels or own or tuple(f"d{i}" for i in range(A)),
                              baseline=baseline), group_weights=weights,
        features=names, roles={"group": carry} if carry else {},
        gain=Gain(description=f"from the Gymnasium env ({gain})"),
        reward="reward", horizon=T, simulator=sim,
        params={"group": group, "gain": gain, "baseline": baseline,
                **({"params": dict(params)} if params else {}),
                **({"shared": list(shared)} if shared else {}),
                **({"actions": list(labels)} if labels is not None else {}),
                **({"group_weights": list(weights)} if weights is not None else {}),
                **({"batch_size": int(batch_size)} if batch_size != BATCH_SIZE else {})},
        description=f"Gymnasium env {sim.name}")


def _check_actions(actions: Any) -> tuple[str, ...] | None:
    """``actions``: None, or distinct non-empty names (a list; not one string)."""
    if actions is None:
        return None
    names = tuple(actions) if isinstance(actions, (list, tuple)) else None
    if not names or not all(isinstance(a, str) and a for a in names) \
            or len(set(names)) != len(names):
        raise SystemError_(
            f"from_gym actions: bad value {short(actions)}; give a list of distinct action "
            "names, one per action: actions=['wait', 'meds'] in Python, actions = [\"wait\", "
            "\"meds\"] in a spec, --param 'actions=[\"wait\",\"meds\"]' on the command line.")
    return names


def _check_weights(weights: Any, groups: tuple[str, ...]) -> tuple[float, ...] | None:
    """``group_weights``: None, or one share >= 0 per group, summing to 1."""
    if weights is None:
        return None
    try:
        w = tuple(float(x) for x in weights) if not isinstance(weights, (str, Mapping)) else ()
    except (TypeError, ValueError):
        w = ()
    if len(w) != len(groups) or not all(np.isfinite(x) and x >= 0 for x in w) \
            or abs(sum(w) - 1.0) > 1e-9:
        raise SystemError_(
            f"from_gym group_weights: bad value {short(weights)}; give the groups' "
            f"{len(groups)} shares of the population, in the order of groups, >= 0 and "
            "summing to 1: group_weights=[0.5, 0.3, 0.14, 0.06] in Python, --param "
            "'group_weights=[0.5,0.3,0.14,0.06]' on the command line.")
    return w


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

    @property
    def reads_module(self) -> str | None:
        """The module of the user's whose ``module_reads`` the files ``gymnasium.make``
        reads belong to (:func:`causalfair._usercode.call_factory`; audit.json pins them
        as ``system.gym.read``): the module of ``"module:Env-v0"``, which gymnasium imports
        and which registers the id; for a bare id, the module of its registered entry
        point; None when it is not registered."""
        module, sep, _ = self.env_id.rpartition(":")
        if sep:
            return module
        try:
            import gymnasium

            entry = gymnasium.spec(self.env_id).entry_point
        except Exception:  # noqa: BLE001 - unregistered: make says so
            return None
        if isinstance(entry, str):
            return entry.partition(":")[0] or None
        return getattr(entry, "__module__", None)

    def __call__(self, **kw: Any) -> Any:
        import gymnasium

        try:
            return gymnasium.make(self.env_id, **kw)
        except gymnasium.error.UnregisteredEnv as exc:  # NameNotFound, VersionNotFound, ...
            raise SystemError_(
                f"from_gym env_factory: {self.env_id!r} is not a registered Gymnasium id "
                f"({exc}); name the module that registers it, Gymnasium's 'module:ID' form "
                f"(e.g. 'mymodule:{self.env_id.rpartition(':')[2]}'), or give 'module:callable'.") from None


def registered_module(env_id: str) -> str | None:
    """The module ``gymnasium.make(env_id)``'s reads are filed under (audit.json pins it
    and them as ``system.gym``; :attr:`_MakeRegistered.reads_module`)."""
    return _MakeRegistered(env_id).reads_module


def _names_id(ref: str) -> bool:
    """``"module:Name-v0"``: Gymnasium's form of an id that ``module`` registers on import
    (``gymnasium.make`` imports it), not a ``module:callable``."""
    return not all(part.isidentifier() for part in ref.partition(":")[2].split("."))


def _resolve_factory(env_factory: Any) -> Callable[..., Any]:
    if callable(env_factory):
        return env_factory
    if isinstance(env_factory, str) and is_callable_ref(env_factory) and not _names_id(env_factory):
        return load_callable(env_factory, what="from_gym env factory")
    if isinstance(env_factory, str) and env_factory:
        return _MakeRegistered(env_factory)
    raise SystemError_(f"from_gym env_factory: bad value {short(env_factory)}; give a callable "
                       "returning a gymnasium.Env, 'module:callable' or a registered Gymnasium id.")


def gym_system(env: str, groups: Sequence[str] = (), group: str = "options",
               gain: str = "info:gain", baseline: int = 0, horizon: int | None = None,
               features: Sequence[str] | None = None,
               params: Mapping[str, Any] | None = None, shared: Sequence[str] = (),
               batch_size: int = BATCH_SIZE, actions: Sequence[str] | None = None,
               group_weights: Sequence[float] | None = None) -> System:
    """The registered system ``gym``: :func:`from_gym` of ``env`` (``"module:callable"``
    or a registered Gymnasium id), what ``[system] gym = ...`` in an audit spec makes."""
    return from_gym(env, groups=groups, group=group, gain=gain, baseline=baseline,
                    horizon=horizon, features=features, params=params, id=gym_id(env),
                    shared=shared, batch_size=batch_size, actions=actions,
                    group_weights=group_weights)

"""What a policy is: the protocol, :func:`action_probs`, the built-ins and their CLI
spelling (:func:`parse_policy`), the baseline pi0 of the decomposition (method.md section 3),
and the networks and checkpoints re-exported from :mod:`causalfair.policies.checkpoint`.
How the engines evaluate a policy (its table on the (group, level) grid, pi^PS, what it
reads) is :mod:`causalfair.policies.grid`.

A policy answers one question: the probability of ``d1`` (approve / treat) for a batch
of observations (``prob_d1``), or, for a system with A > 2 actions, the distribution
over the actions 0..A-1 (``action_probs``, an array (n, A)). Observations carry the individual's level and group (for tabular
models), optionally a feature matrix (for simulators with continuous features), the
decision epoch ``t`` and any extra arrays a simulator provides.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from causalfair._validation import check_keywords
from causalfair.errors import CheckpointError, PolicyError, as_numbers, short
from causalfair.policies.sb3 import SB3Policy, is_sb3_model
from causalfair.types import Observation, check_batch_size, check_probs, check_rows

__all__ = [
    "Observation",
    "Policy",
    "PolicyError",
    "CheckpointError",
    "TablePolicy",
    "ConstantPolicy",
    "CallablePolicy",
    "TorchPolicy",
    "FeatureEncoding",
    "BaselinePolicy",
    "action_probs",
    "ActionPolicy",
    "sb3_adapted",
    "UniformPolicy",
    "parse_policy",
    "BUILTIN_POLICIES",
    "mlp",
    "save_checkpoint",
    "load_checkpoint",
    "file_sha256",
]





@runtime_checkable
class Policy(Protocol):
    """Anything with ``prob_d1(obs) -> array (n,)`` of probabilities in [0, 1] (two
    actions), or ``action_probs(obs) -> array (n, A)`` whose rows are distributions over
    the actions 0..A-1 (any number of actions). A policy with both is read through
    ``action_probs``, the general one, by every engine (:func:`action_probs`;
    :func:`causalfair.policies.grid.d1_probs` for P(d1)). Optional members the engines
    read: ``name``, ``time_dependent`` (bool), ``reads_group`` (bool),
    ``start_batch(n, group)``."""

    def prob_d1(self, obs: Observation) -> np.ndarray: ...


_SB3_ADAPTED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def sb3_adapted(policy: Any) -> Any:
    """A stable-baselines3 model (in memory, any ``Discrete(n)``) as the
    :class:`~causalfair.policies.adapters.SB3Policy` every engine evaluates it by (one per model);
    anything else unchanged."""
    if callable(getattr(policy, "action_probs", None)) or callable(getattr(policy, "prob_d1", None)):
        return policy
    if not is_sb3_model(policy):
        return policy
    try:
        return _SB3_ADAPTED[policy]
    except KeyError:
        adapted = _SB3_ADAPTED[policy] = SB3Policy(policy)
        return adapted


def action_probs(policy: Any, obs: Observation, n_actions: int, where: str | None = None,
                 *, units: int | None = None) -> np.ndarray:
    """The action distributions (n, A) of ``policy`` on ``obs``, validated: from
    ``policy.action_probs`` when it has one (also when it has ``prob_d1`` too), else
    ``[1 - p, p]`` from ``prob_d1`` (two actions only). ``units``: the units of the batch
    an engine stepped; observations of another number are the simulator's error
    (:func:`~causalfair.types.check_batch_size`), not the policy's."""
    name = where or f"policy {getattr(policy, 'name', type(policy).__name__)!r}"
    if units is not None:
        check_batch_size(obs, units, name)
    n = len(obs)
    policy = sb3_adapted(policy)
    fn = getattr(policy, "action_probs", None)
    if callable(fn):
        out = as_numbers(fn(obs))
        try:
            arr = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError):  # text, ragged lists
            raise PolicyError(f"{name}: action_probs returned {short(out)}, not numbers; return "
                              f"(n, {n_actions}) rows of probabilities.") from None
        if arr.shape != (n, n_actions):
            raise PolicyError(
                f"{name}: action_probs returned shape {arr.shape}; the system has {n_actions} "
                f"actions, so expected ({n}, {n_actions})" + (
                    f"; for chosen actions a (n,) give one-hot rows, np.eye({n_actions})[a]"
                    if arr.shape == (n,) else "") + ".")
        return check_rows(arr, f"{name}: action_probs", obs=obs)
    if not callable(getattr(policy, "prob_d1", None)):
        raise PolicyError(
            f"{name}: has neither prob_d1(obs) nor action_probs(obs); wrap a function with "
            "CallablePolicy.")
    if n_actions != 2:
        raise PolicyError(
            f"{name}: returns P(d1) only (prob_d1), but the system has {n_actions} actions; "
            "give the policy an action_probs(obs) method returning (n, A) probabilities.")
    p = _check_probs(policy.prob_d1(obs), n, name, obs)
    return np.stack([1.0 - p, p], axis=1)


_check_probs = check_probs


# ----------------------------------------------------------------------------- built-ins
@dataclass(frozen=True)
class TablePolicy:
    """pi(d1 | x, s) = table[s, x], or table[t, s, x] for a time-indexed policy. With
    ``n_actions`` A > 2 the table holds action distributions: table[s, x, a] (or
    table[t, s, x, a]). ``parsed_for``: the model or system whose score table a built-in
    (``threshold``, ``blind``) read, set by :func:`parse_policy`: the policy ``name`` means
    that model's table, and used on a model whose own ``name`` is another table it is
    evaluated as given and named ``"<name> (parsed for <model>)"``
    (:func:`causalfair.policies.resolver.resolve`); None for a table given as such."""

    table: np.ndarray
    name: str = "table"
    n_actions: int = 2
    parsed_for: str | None = None

    def __post_init__(self) -> None:
        tab = np.array(self.table, dtype=np.float64)
        A = self.n_actions
        if isinstance(A, bool) or not isinstance(A, (int, np.integer)) or A < 2:
            raise PolicyError(f"n_actions: must be an integer >= 2, got {A!r}.")
        extra = 0 if A == 2 else 1
        if tab.ndim not in (2 + extra, 3 + extra) or (extra and tab.shape[-1] != A):
            want = ("(groups, levels) or (T, groups, levels)" if A == 2 else
                    f"(groups, levels, {A}) or (T, groups, levels, {A})")
            raise PolicyError(f"table: expected shape {want}, got {tab.shape}.")
        if extra:
            tab = check_rows(tab, f"policy {self.name!r} table")
        else:
            _check_probs(tab, tab.size, f"policy {self.name!r} table")
        tab.setflags(write=False)
        object.__setattr__(self, "table", tab)

    @property
    def time_dependent(self) -> bool:
        return self.table.ndim == (3 if self.n_actions == 2 else 4)

    def action_probs(self, obs: Observation) -> np.ndarray:
        if self.n_actions == 2:
            p = self.prob_d1(obs)
            return np.stack([1.0 - p, p], axis=1)
        if obs.level is None:
            raise PolicyError(f"policy {self.name!r} reads levels, but the observation has none.")
        if not self.time_dependent:
            return self.table[obs.group, obs.level]
        if obs.t is None:
            raise PolicyError(f"policy {self.name!r} is time-indexed; the observation has no t.")
        return self.table[min(int(obs.t), self.table.shape[0] - 1), obs.group, obs.level]

    def prob_d1(self, obs: Observation) -> np.ndarray:
        if self.n_actions != 2:
            raise PolicyError(
                f"policy {self.name!r} has {self.n_actions} actions; use action_probs(obs).")
        if obs.level is None:
            raise PolicyError(f"policy {self.name!r} reads levels, but the observation has none.")
        if self.table.ndim == 2:
            return self.table[obs.group, obs.level]
        if obs.t is None:
            raise PolicyError(f"policy {self.name!r} is time-indexed; the observation needs t.")
        t = min(int(obs.t), self.table.shape[0] - 1)
        return self.table[t, obs.group, obs.level]


# a mistyped keyword: one error naming it and the fix (check_keywords)
TablePolicy.__init__ = check_keywords(TablePolicy.__init__, name="TablePolicy")  # type: ignore


@dataclass(frozen=True)
class ConstantPolicy:
    """pi(d1 | .) = q for everyone (``always`` q=1, ``never`` q=0, ``random:q``)."""

    q: float
    name: str = "constant"

    def __post_init__(self) -> None:
        q = self.q
        if isinstance(q, (bool, np.bool_)) or not isinstance(
                q, (int, float, np.integer, np.floating)) or not 0.0 <= float(q) <= 1.0:
            raise PolicyError(f"q: must be a probability in [0, 1], got {q!r}.")

    reads_group = False

    def prob_d1(self, obs: Observation) -> np.ndarray:
        return np.full(len(obs), float(self.q))


class FunctionDeclarations:
    """What a wrapped function ``self.fn`` declares of itself (attributes set on it, read
    as on a policy object: :mod:`causalfair.policies.grid`)."""

    fn: Callable[[Observation], Any]

    @property
    def reads_only_level_group(self) -> Any:
        return getattr(self.fn, "reads_only_level_group", None)

    @property
    def reads_group(self) -> Any:
        return getattr(self.fn, "reads_group", None)


@dataclass(frozen=True)
class CallablePolicy(FunctionDeclarations):
    """Wrap a plain function ``f(obs) -> probabilities`` as a policy."""

    fn: Callable[[Observation], Any]
    name: str = "callable"

    def prob_d1(self, obs: Observation) -> np.ndarray:
        return _check_probs(self.fn(obs), len(obs), f"policy {self.name!r}", obs)


# a mistyped keyword: one error naming it and the fix (check_keywords)
CallablePolicy.__init__ = check_keywords(CallablePolicy.__init__, name="CallablePolicy")  # type: ignore


@dataclass(frozen=True)
class ActionPolicy:
    """Always take action ``action`` of ``n_actions`` (e.g. the baseline)."""

    action: int
    n_actions: int = 2
    name: str = "action"

    def __post_init__(self) -> None:
        if isinstance(self.n_actions, bool) or not isinstance(self.n_actions, (int, np.integer)) \
                or self.n_actions < 2:
            raise PolicyError(f"n_actions: must be an integer >= 2, got {self.n_actions!r}.")
        if isinstance(self.action, bool) or not isinstance(self.action, (int, np.integer)) \
                or not 0 <= self.action < self.n_actions:
            raise PolicyError(
                f"action: must be an action index in [0, {self.n_actions}), got {self.action!r}.")

    reads_group = False

    def action_probs(self, obs: Observation) -> np.ndarray:
        out = np.zeros((len(obs), self.n_actions))
        out[:, self.action] = 1.0
        return out

    def prob_d1(self, obs: Observation) -> np.ndarray:
        if self.n_actions != 2:
            raise PolicyError(f"policy {self.name!r} has {self.n_actions} actions; use action_probs(obs).")
        return np.full(len(obs), float(self.action))


class BaselinePolicy(ActionPolicy):
    """pi0: the baseline of the decomposition (method.md section 3): always the baseline
    action a0 (d0, deny / no treatment, for two actions)."""

    def __init__(self, baseline: int = 0, n_actions: int = 2) -> None:
        label = "d0" if (baseline, n_actions) == (0, 2) else f"action {baseline}"
        super().__init__(action=baseline, n_actions=n_actions, name=f"pi0 (always {label})")

    @property
    def q(self) -> float:
        """P(d1) of the two-action baseline (0 for d0)."""
        return float(self.action)

    def describe(self) -> str:
        if (self.action, self.n_actions) == (0, 2):
            return "pi0: hypothetical baseline that always takes d0 (deny / no treatment)."
        return f"pi0: hypothetical baseline that always takes the baseline action {self.action}."


# ------------------------------------------------------------------------------ parsing
BUILTIN_POLICIES = {
    "always": "approve everyone (pi = 1; two-action systems whose baseline is action 0, as "
    "random, threshold and blind)",
    "never": "always the baseline action (deny; equals pi0)",
    "action:K": "always action K (0-based)",
    "uniform": "each allowed action with equal probability",
    "random:Q": "approve with probability Q, independently of the state",
    "threshold:P": "approve when p_repay(x, s) > P (needs a model with aux table p_repay)",
    "blind:P": "group-blind threshold: approve at level x when the group-weighted mean "
    "p_repay(x) > P (same decision for every group at a level)",
}


def _parse_prob(spec: str, value: str, what: str) -> float:
    try:
        q = float(value)
    except ValueError:
        raise PolicyError(
            f"policy: {spec!r} needs a number after ':' ({what}), got {value!r}."
        ) from None
    if not 0.0 <= q <= 1.0:
        raise PolicyError(f"policy: {spec!r}: {what} must be in [0, 1], got {q}.")
    return q


def _within_budget(policy: Policy, spec: str, system: Any, mass: float) -> Policy:
    """``policy`` (the built-in ``spec``, giving each unit ``mass``: its probability of a
    non-baseline action, whatever the state), refused on a system whose budget of one
    action per replica its units' probabilities would exceed (the Monte Carlo engine
    draws one categorical per replica from them: they must sum to at most 1)."""
    units = getattr(system, "units_per_replica", 1) if system is not None else 1
    if system is None or system.decisions.budget != 1 or units * mass <= 1.0 + 1e-9:
        return policy
    raise PolicyError(
        f"policy: {spec!r} gives each of the {units} units of a replica of system "
        f"{system.id!r} probability {mass:.6g} of an action other than the baseline, "
        f"{units * mass:.6g} in all, and the system's budget is one such action per replica "
        "(the probabilities must sum to at most 1); use never, a checkpoint or a factory "
        "policy that gives each unit its probability of being the one chosen.")


def check_policy_model(model: Any, where: str) -> None:
    """Refuse, naming the argument ``where``, a ``model`` a built-in policy cannot be
    built for: neither a :class:`~causalfair.systems.System` (its ``decisions``) nor a
    tabular model (its ``n_actions`` and ``baseline``)."""
    if hasattr(model, "decisions") or (hasattr(model, "n_actions")
                                       and hasattr(model, "baseline")):
        return
    got = "None" if model is None else f"{type(model).__name__} {short(model, 40)}"
    raise PolicyError(f"{where}: a built-in policy needs the system or tabular model it "
                      f"decides on (e.g. cf.systems.make('lending-1') or its .tabular), got "
                      f"{got}.")


@check_keywords
def parse_policy(spec: str, model: Any) -> Policy:
    """A built-in policy from its CLI spelling (see ``BUILTIN_POLICIES``). ``model`` is a
    :class:`~causalfair.model.TabularModel` or a :class:`~causalfair.systems.System`;
    ``threshold``/``blind`` read the score table named by the system's role ``score``
    (``p_repay`` for lending) from the tabular model."""
    allowed = ", ".join(BUILTIN_POLICIES)
    if not isinstance(spec, str):
        raise PolicyError(f"policy: expected a string such as 'threshold:0.5', got {type(spec).__name__}.")
    check_policy_model(model, "model")
    kind, _, arg = spec.partition(":")
    system = model if hasattr(model, "decisions") else None
    tab = system.tabular if system is not None else model
    if system is not None:
        A, base, allowed_acts = system.n_actions, system.decisions.baseline, system.decisions.allowed
        score_name = system.roles.get("score", "p_repay")
        mname = system.id
    else:
        A, base, allowed_acts = tab.n_actions, tab.baseline, None
        score_name = "p_repay"
        mname = tab.name
    if kind == "never" and not arg:
        return ConstantPolicy(0.0, name="never") if (A, base) == (2, 0) else \
            ActionPolicy(base, A, name="never")
    if kind == "action":
        try:
            a = int(arg)
        except ValueError:
            raise PolicyError(f"policy: {spec!r} needs an action index after ':', got {arg!r}.") from None
        if not 0 <= a < A:
            raise PolicyError(f"policy: {spec!r}: the action must be in [0, {A}), got {a}.")
        return _within_budget(ActionPolicy(a, A, name=spec), spec, system,
                              0.0 if a == base else 1.0)
    if kind == "uniform" and not arg:
        acts = list(allowed_acts) if allowed_acts is not None else list(range(A))
        row = np.zeros(A)
        row[acts] = 1.0 / len(acts)
        return _within_budget(UniformPolicy(row, name="uniform"), spec, system,
                              float(row.sum() - row[base]))
    if kind in ("always", "random", "threshold", "blind") and A != 2:
        raise PolicyError(
            f"policy: {spec!r} is a two-action policy, and system {mname!r} has {A} actions; "
            "use never, action:K, uniform, a checkpoint or a factory.")
    if kind in ("always", "random", "threshold", "blind") and base != 0:
        labels = getattr(getattr(system, "decisions", None), "labels", None) or \
            tab.action_labels or ("d0", "d1")
        raise PolicyError(
            f"policy: {spec!r} gives P(action 1 = {labels[1]!r}), and action 1 is the baseline of "
            f"system {mname!r}, so it would not mean what it says; use never (always the "
            f"baseline {labels[base]!r}), action:K, uniform, a checkpoint or a factory.")
    if kind == "always" and not arg:
        return _within_budget(ConstantPolicy(1.0, name="always"), spec, system, 1.0)
    if kind == "random":
        q = _parse_prob(spec, arg, "Q")
        return _within_budget(ConstantPolicy(q, name=spec), spec, system, q)
    if kind in ("threshold", "blind"):
        thr = _parse_prob(spec, arg, "P")
        if tab is None or score_name not in tab.aux:
            have = "no tabular model" if tab is None else (
                f"aux tables: {sorted(tab.aux) or 'none'}")
            raise PolicyError(
                f"policy: {spec!r} needs the score table {score_name!r} of a tabular model, and "
                f"system {mname!r} has none ({have}); use a checkpoint or a factory policy."
            )
        model = tab
        score = model.aux[score_name]
        if kind == "blind":
            score = np.broadcast_to(model.group_weights @ score, score.shape)
        return TablePolicy((score > thr).astype(np.float64), name=spec, parsed_for=str(mname))
    raise PolicyError(f"policy: unknown policy {spec!r}; allowed: {allowed}.")


@dataclass(frozen=True)
class UniformPolicy:
    """pi(a | .) = row[a] for everyone (the built-in ``uniform``: each allowed action with
    equal probability)."""

    row: np.ndarray
    name: str = "uniform"
    reads_group = False

    def action_probs(self, obs: Observation) -> np.ndarray:
        return np.broadcast_to(self.row, (len(obs), self.row.shape[0])).copy()

    def prob_d1(self, obs: Observation) -> np.ndarray:
        if self.row.shape[0] != 2:
            raise PolicyError("policy 'uniform' has more than two actions; use action_probs(obs).")
        return np.full(len(obs), float(self.row[1]))


# ---------------------------------------------------------- networks and checkpoints
# (defined in causalfair.policies.checkpoint; re-exported so this module names every policy)
from causalfair.policies.checkpoint import (  # noqa: E402
    FeatureEncoding,
    TorchPolicy,
    file_sha256,
    load_checkpoint,
    mlp,
    save_checkpoint,
)

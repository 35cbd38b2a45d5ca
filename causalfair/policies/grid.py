"""How the engines evaluate a policy (:mod:`causalfair.policies.core`) on a system: its
table on the (group, level) grid of a tabular model (:func:`policy_table`, the exact
engine's input), the hypothetical policy pi^PS of the decomposition whose components are
such tables (method.md section 3), what a policy reads (:func:`reads_group`, the edge
``S -> D_t`` of the temporal causal graph, method.md section 7; :func:`feature_inputs`;
:func:`reads_only_level_group`), and the policy as every Monte Carlo engine evaluates it
(:func:`engine_policy`: tabulated on the grid when it reads only (group, level), restricted
to the allowed actions), and the check both engines run once on a user's policy: rows
independent of their batch, observation left unchanged (:func:`check_row_wise`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from causalfair._validation import check_horizon, check_keywords
from causalfair.errors import ModelError, PolicyError, short
from causalfair.model import TabularModel
from causalfair.policies.allowed import AllowedOnly, refuse_forbidden_table
from causalfair.policies.core import (
    ActionPolicy,
    BaselinePolicy,
    ConstantPolicy,
    Policy,
    TablePolicy,
    UniformPolicy,
    action_probs,
)
from causalfair.policies.nets import (
    DevicePolicy,
    FeatureEncoding,
    NumpyMLPPolicy,
    TorchPolicy,
    check_model_inputs,
    on_device,
)
from causalfair.policies.sb3 import SB3Policy
from causalfair.types import Observation, check_probs, check_rows

__all__ = [
    "PathSpecificPolicy",
    "hypothetical_policies",
    "grid_observation",
    "check_policy_table",
    "policy_table",
    "group_features",
    "feature_inputs",
    "reads_group",
    "reads_only_level_group",
    "GridTabulated",
    "allowed_only",
    "engine_policy",
    "untabulated",
    "d1_probs",
    "reads_prob_d1",
    "check_row_wise",
]

_NETWORKS = (TorchPolicy, NumpyMLPPolicy, DevicePolicy, SB3Policy)  # the network policies


@dataclass(frozen=True)
class PathSpecificPolicy:
    """pi^PS: trajectories evolve under ``behaviour`` (pi), but each step's gain is the
    one the individual would have had under ``gain_policy`` (pi0, d0) from the same state.

    It is not a policy one can deploy; it is a hypothetical intervention. Its
    components are exposed for inspection: ``transition_table(model)`` gives the policy
    that drives the state distribution and ``gain_table(model)`` the one that determines
    the gain of each step.
    """

    behaviour: Policy
    gain_policy: Policy = field(default_factory=BaselinePolicy)

    @property
    def name(self) -> str:
        return f"pi^PS({getattr(self.behaviour, 'name', 'pi')})"

    def transition_table(self, model: TabularModel, horizon: int | None = None) -> np.ndarray:
        return policy_table(self.behaviour, model, horizon)

    def gain_table(self, model: TabularModel, horizon: int | None = None) -> np.ndarray:
        return policy_table(self.gain_policy, model, horizon)

    def describe(self) -> str:
        return (
            f"{self.name}: states evolve as under {getattr(self.behaviour, 'name', 'pi')} "
            "(x_{t+1} ~ P(. | x_t, d_t ~ pi)); the gain of each step is the expected gain "
            "under d0 from the same x_t, h0(x_t, s) = sum_x' P(x' | x_t, d0, s) g(x_t, x')."
        )


@check_keywords
def hypothetical_policies(policy: Policy, system: Any = None
                          ) -> tuple[BaselinePolicy, PathSpecificPolicy]:
    """(pi0, pi^PS) for a deployed policy pi; with ``system`` (a System or TabularModel)
    pi0 takes that system's baseline action."""
    if not (hasattr(policy, "prob_d1") or hasattr(policy, "action_probs")):
        hint = (f"; make one with cf.parse_policy({policy!r}, model)" if isinstance(policy, str)
                else "")
        raise PolicyError(f"policy: expected a policy object (with prob_d1 or action_probs), "
                          f"got {type(policy).__name__} {short(policy, 60)}{hint}.")
    dec = getattr(system, "decisions", None)
    if dec is not None:
        pi0 = BaselinePolicy(dec.baseline, dec.n)
    elif system is not None and hasattr(system, "baseline"):
        pi0 = BaselinePolicy(system.baseline, system.n_actions)
    else:
        pi0 = BaselinePolicy()
    return pi0, PathSpecificPolicy(behaviour=policy, gain_policy=pi0)


def grid_observation(model: TabularModel, t: int | None = None) -> Observation:
    """One observation per (group, level) cell, in row-major (s, x) order."""
    G, K = model.n_groups, model.n_levels
    feats = getattr(model, "features", None)
    return Observation(
        group=np.repeat(np.arange(G), K),
        level=np.tile(np.arange(K), G),
        features=None if feats is None else feats.reshape(G * K, -1),
        t=t,
        extras={k: v.reshape(-1) for k, v in model.aux.items()},
    )


def check_policy_table(model: TabularModel, p: Any, where: str = "policy",
                       horizon: int | None = None) -> np.ndarray:
    """A policy given as a table, validated against ``model``: two actions, (G, K) or
    (T, G, K) of pi(d1) in [0, 1]; A > 2 actions, (G, K, A) or (T, G, K, A) of action
    distributions. A time-indexed table must cover ``horizon`` epochs; a longer one is
    returned cut to its first ``horizon`` (as a :class:`TablePolicy`'s table is), so every
    engine reads the epochs t < T of it."""
    p = np.asarray(p, dtype=np.float64)
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    if A == 2:
        if p.ndim not in (2, 3) or p.shape[-2:] != (G, K):
            raise ModelError(
                f"{where}: table has shape {p.shape}; expected ({G}, {K}) or (T, {G}, {K}).")
        check_probs(p, p.size, f"{where} table")
    else:
        if p.ndim not in (3, 4) or p.shape[-3:] != (G, K, A):
            raise ModelError(
                f"{where}: table has shape {p.shape}; a model with {A} actions needs action "
                f"distributions ({G}, {K}, {A}) or (T, {G}, {K}, {A}).")
        p = check_rows(p, f"{where} table", ModelError)
    if p.ndim == (3 if A == 2 else 4) and horizon is not None and p.shape[0] < horizon:
        raise ModelError(f"{where}: time-indexed table covers {p.shape[0]} epochs, the horizon "
                         f"is {horizon}; give one row per epoch or a shorter horizon.")
    if p.ndim == (3 if A == 2 else 4) and horizon is not None:
        p = p[:horizon]
    return p


@check_keywords
def policy_table(policy: Policy | np.ndarray, model: TabularModel,
                 horizon: int | None = None) -> np.ndarray:
    """Evaluate a Markov policy on every (group, level): array (G, K), or (T, G, K) for a
    time-dependent policy (``policy.time_dependent`` true; needs ``horizon``). A table
    (an array) is validated by :func:`check_policy_table` and returned as it is.
    A table with probability on an action outside ``model.allowed`` is refused
    (:func:`~causalfair.policies.allowed.refuse_forbidden_table`)."""
    _check_model(model)
    if horizon is not None:
        horizon = check_horizon(horizon)
    table = _policy_table(policy, model, horizon)
    if not _is_pi0(policy, model.baseline):
        refuse_forbidden_table(table, model, "policy table" if isinstance(policy, np.ndarray)
                               else f"policy {getattr(policy, 'name', type(policy).__name__)!r}")
    return table


def _check_model(model: Any) -> None:
    """Refuse anything but a TabularModel, naming the fix (a System's is ``.tabular``)."""
    if isinstance(model, TabularModel):
        return
    tab = getattr(model, "tabular", None) if not isinstance(model, str) else None
    fix = ("pass its tabular model, system.tabular" if isinstance(tab, TabularModel) else
           f"for a registered system pass cf.systems.make({model!r}).tabular" if
           isinstance(model, str) else "build one with cf.TabularModel(...) or take a "
           "system's (cf.systems.make(ID).tabular)")
    raise ModelError(f"model: expected a TabularModel, got {short(model, 40)}; {fix}.")


def _is_pi0(policy: Any, baseline: int) -> bool:
    """Whether ``policy`` always takes the baseline action (pi0, the built-in ``never``):
    the decomposition's reference, which a system's allowed actions do not bind."""
    policy = untabulated(policy)
    return isinstance(policy, ActionPolicy) and int(policy.action) == int(baseline)


def _policy_table(policy: Policy | np.ndarray, model: TabularModel,
                  horizon: int | None) -> np.ndarray:
    """:func:`policy_table` before the check of the allowed actions."""
    if isinstance(policy, np.ndarray):
        return check_policy_table(model, policy, horizon=horizon)
    G, K = model.n_groups, model.n_levels
    name = getattr(policy, "name", type(policy).__name__)
    check_model_inputs(untabulated(policy), model)  # a network's inputs fit the grid
    if model.n_actions > 2:
        return _action_table(policy, model, horizon, name)
    if isinstance(policy, TablePolicy) and policy.n_actions != 2:
        raise PolicyError(
            f"policy {name!r}: has {policy.n_actions} actions, the model {model.name!r} has 2.")
    if isinstance(policy, TablePolicy):
        tab = policy.table
        if tab.shape[-2:] != (G, K):
            raise PolicyError(
                f"policy {name!r}: table has shape {tab.shape}, the model needs (..., {G}, {K})."
            )
        if tab.ndim == 3 and horizon is not None and tab.shape[0] < horizon:
            raise PolicyError(
                f"policy {name!r}: time-indexed table covers {tab.shape[0]} epochs, horizon is {horizon}."
            )
        return tab if tab.ndim == 2 or horizon is None else tab[:horizon]
    if not (callable(getattr(policy, "prob_d1", None))
            or callable(getattr(policy, "action_probs", None))):
        raise PolicyError(
            f"policy {name!r}: has neither prob_d1(obs) nor action_probs(obs); give it one, "
            "or wrap a function with CallablePolicy."
        )
    return _grid_tables(lambda obs: d1_probs(policy, obs, f"policy {name!r}"),
                        policy, model, horizon, name)


def reads_prob_d1(policy: Any) -> bool:
    """Whether P(d1) of a two-action ``policy`` is read from its own ``prob_d1`` method
    (:func:`d1_probs`): when it has no ``action_probs`` method, or is one of causalfair's
    policies whose ``prob_d1`` is column 1 of its ``action_probs`` by construction (tables,
    constants, networks, wrappers; not a subclass overriding either). A user's policy with
    both methods is read through ``action_probs``, the general one."""
    if not callable(getattr(policy, "action_probs", None)):
        return True
    return _own_evaluation(policy, _ONE_READING)


def d1_probs(policy: Any, obs: Observation, where: str | None = None) -> np.ndarray:
    """P(d1) (n,) of a two-action ``policy`` on ``obs``, validated: the one reading of a
    two-action policy by every engine (the exact engine's grid, Monte Carlo, the log
    simulator). Column 1 of :func:`~causalfair.policies.core.action_probs` (the policy's
    ``action_probs`` when it has one, else its ``prob_d1``); a policy whose ``prob_d1`` is
    that column by construction (:func:`reads_prob_d1`) is asked for it directly."""
    name = where or f"policy {getattr(policy, 'name', type(policy).__name__)!r}"
    if callable(getattr(policy, "prob_d1", None)) and reads_prob_d1(policy):
        return check_probs(policy.prob_d1(obs), len(obs), name, obs)
    return action_probs(policy, obs, 2, name)[:, 1]


#: how far a policy's output on a row may move when the rows around it change: float32
#: networks round differently in batches of different sizes (about 1e-7); a policy reading
#: its batch (a batch mean, a BatchNorm in training mode) moves by far more
BATCH_TOL = 1e-5


#: causalfair's policies whose rows are independent by construction (not checked)
_ROW_WISE = (TablePolicy, ConstantPolicy, ActionPolicy, UniformPolicy, NumpyMLPPolicy)


def _obs_rows(obs: Observation, idx: np.ndarray) -> Observation:
    """The observation of rows ``idx`` of ``obs`` (copies; per-unit extras sliced)."""
    n = len(obs)

    def take(a: Any) -> Any:
        return a[idx] if isinstance(a, np.ndarray) and a.ndim and a.shape[0] == n else a
    return replace(obs, group=take(obs.group), level=take(obs.level),
                   features=take(obs.features),
                   extras={k: take(v) for k, v in (obs.extras or {}).items()})


def _obs_arrays(obs: Observation) -> dict[str, Any]:
    """The arrays of ``obs`` a policy reads, by field name (``extras[...]`` for extras)."""
    out = {"group": obs.group, "level": obs.level, "features": obs.features}
    out.update({f"extras[{k!r}]": v for k, v in (obs.extras or {}).items()})
    return {k: v for k, v in out.items() if isinstance(v, np.ndarray)}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    except TypeError:  # object arrays
        return a.shape == b.shape and bool(np.array_equal(a, b))


def check_row_wise(policy: Any, evaluate: Callable[[Observation], np.ndarray],
                   obs: Observation, name: str, batch: str, block: int = 1) -> None:
    """Refuse a policy whose output for one individual depends on the others in the batch,
    or that changes its observation in place: the one check of both, called once per audit
    by the Monte Carlo engine (a batch of the simulator's observations) and the exact
    engine (the (group, level) grid). ``evaluate`` reads the policy's (validated)
    probabilities on an observation; it sees a copy of ``obs``, compared with ``obs`` after
    the call; then the output on the whole batch is compared, row by row, with the output
    on its first half and on a random half in shuffled order (:data:`BATCH_TOL`). ``batch``
    says what the batch is, for the message. ``block``: rows come in blocks of this many
    (the units of one world of coupled units, which a policy may compare with one another),
    and the halves are of whole blocks. Policies that keep per-batch state (``start_batch``) or
    declare ``thread_safe = False``, and causalfair's tables, constants and checkpoint
    networks (layers of rows by construction), are not checked."""
    inner = untabulated(policy)
    if callable(getattr(inner, "start_batch", None)) or getattr(inner, "thread_safe", True) \
            is False or _own_evaluation(inner, _ROW_WISE):
        return
    n = len(obs)
    given = _obs_rows(obs, np.arange(n))
    whole = np.asarray(evaluate(given), dtype=np.float64)
    before, after = _obs_arrays(obs), _obs_arrays(given)
    changed = [k for k in before if k not in after or not _same(before[k], after[k])]
    if changed:
        raise PolicyError(
            f"{name}: changed the observation it was given in place (obs.{changed[0]}, on "
            f"{batch}): the engines read the observation again after the policy, and a "
            "simulator's observe may return its state's own array, so the state would move "
            "(wrong numbers); copy before changing (x = obs.features.copy(); x -= mean), or "
            "compute into new arrays (x = obs.features - mean).")
    nb = n // block
    if nb < 2:
        return
    h = nb // 2
    perm = np.random.default_rng(0).permutation(nb)  # a fixed permutation (numpy's global
    # generator is not touched)
    def rows(blocks: np.ndarray) -> np.ndarray:  # the rows of these blocks, in their order
        return (blocks[:, None] * block + np.arange(block)).reshape(-1)

    unit = "rows" if block == 1 else f"worlds of {block} units"
    for what, idx in ((f"the first {h} {unit} alone", rows(np.arange(h))),
                      (f"{h} {unit} drawn at random, alone and shuffled", rows(perm[:h]))):
        part = np.asarray(evaluate(_obs_rows(obs, idx)), dtype=np.float64)
        ref = whole[idx]
        diff = np.abs(part - ref)
        bad = diff > BATCH_TOL * (1.0 + np.abs(ref))
        if bad.any():
            i = int(np.argwhere(bad)[0][0])
            raise PolicyError(
                f"{name}: its output for an individual depends on the other individuals in "
                f"the batch: on {batch} (n={n}), row {int(idx[i])} gets "
                f"{np.round(ref[i], 6).tolist()} in the whole batch and "
                f"{np.round(part[i], 6).tolist()} on {what} (largest difference "
                f"{float(diff.max()):.3g}); the engines evaluate a policy on batches of any size "
                "and order, so its numbers would depend on how they batch. Compute each row "
                "from that row alone: no batch mean or batch statistics (a torch BatchNorm: "
                "call model.eval(); normalise with fixed statistics), and return probabilities, "
                "not decisions sampled per call.")


def _grid_tables(evaluate: Callable[[Observation], np.ndarray], policy: Any,
                 model: TabularModel, horizon: int | None, name: str) -> np.ndarray:
    """A policy object's table on the (group, level) grid: one per epoch t < ``horizon``
    (T, G, K[, A]) when it declares ``time_dependent`` or its decisions change with the
    observation's ``t`` (a policy reading ``obs.t`` need not declare it: the Monte Carlo
    engine shows it t, so the exact engine does too), else one table (G, K[, A]).
    Policies that cannot read t (constants, networks over encoded features, a declared
    ``reads_only_level_group``) are evaluated once. The policy is first checked on the
    grid (:func:`check_row_wise`)."""
    enc = getattr(policy, "encoding", None)
    if model.features is None and getattr(enc, "name", None) == "features" \
            and getattr(policy, "obs_fn", None) is None:
        names = feature_inputs(policy, model)
        reads = f" [{', '.join(names)}]" if names else ""
        raise PolicyError(
            f"policy {name!r} reads a feature vector{reads}, and the exact engine evaluates "
            f"policies on the (group, level) grid of the tabular model {model.name!r}, which "
            "has no features table; give TabularModel(features=...) (the features of each "
            "group and level), use the Monte Carlo engine if the system's observations carry "
            "these features (engine=\"mc\"; --engine mc; [engine] kind = \"mc\"), or audit "
            "the policy on the system it was trained on.")
    declared = getattr(policy, "time_dependent", False) is True
    if declared and horizon is None:
        raise PolicyError(f"policy {name!r} is time-dependent: pass the horizon.")
    blind_to_t = not declared and (
        getattr(policy, "reads_only_level_group", None) is True
        or _own_evaluation(policy, (ConstantPolicy, ActionPolicy, UniformPolicy))
        or _own_evaluation(policy, _NETWORKS) and getattr(policy, "obs_fn", None) is None)
    G, K = model.n_groups, model.n_levels
    once = horizon is None or blind_to_t
    first = grid_observation(model) if once else grid_observation(model, 0)
    check_row_wise(policy, evaluate, first, f"policy {name!r}",
                   f"the (group, level) grid of the tabular model {model.name!r}")
    if once:
        return _cells(evaluate(first), G, K)
    tabs = [_cells(evaluate(grid_observation(model, t)), G, K) for t in range(horizon)]
    if declared or any(not np.array_equal(tab, tabs[0]) for tab in tabs[1:]):
        return np.stack(tabs)
    return tabs[0]


def _cells(rows: np.ndarray, G: int, K: int) -> np.ndarray:
    """A policy's rows on the grid (G * K[, A]) as a table (G, K[, A])."""
    return rows.reshape(G, K, *rows.shape[1:])


def _action_table(policy: Any, model: TabularModel, horizon: int | None, name: str) -> np.ndarray:
    """(G, K, A), or (T, G, K, A) for a time-dependent policy, on a model with A > 2."""
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    if isinstance(policy, TablePolicy):
        tab = policy.table
        if policy.n_actions != A or tab.shape[-3:] != (G, K, A):
            raise PolicyError(
                f"policy {name!r}: table has shape {tab.shape}, the model needs (..., {G}, {K}, {A}).")
        if tab.ndim == 4 and horizon is not None:
            if tab.shape[0] < horizon:
                raise PolicyError(
                    f"policy {name!r}: time-indexed table covers {tab.shape[0]} epochs, horizon is {horizon}.")
            return tab[:horizon]
        return tab
    return _grid_tables(lambda obs: action_probs(policy, obs, A), policy, model, horizon, name)


def group_features(source: Any) -> frozenset[str]:
    """The names of the observation features that carry the group S itself: the
    system's ``roles["group"]`` (a feature name or a list of them), else a feature named
    ``group``. ``source`` is a :class:`~causalfair.systems.System` or a tabular model."""
    roles = getattr(source, "roles", None) or {}
    declared = roles.get("group")
    if declared is None:
        return frozenset({"group"})
    if isinstance(declared, (list, tuple, set, frozenset)):
        return frozenset(str(x) for x in declared)
    return frozenset({str(declared)})


def feature_inputs(policy: Any, source: Any) -> tuple[str, ...] | None:
    """The feature names a network policy reads, from its recorded input encoding (a
    ``features`` encoding's ``names``, else every feature of the system it was checked
    against); None when the policy does not read a feature matrix through an encoding
    (one-hot level and group, a user's ``obs_fn``, a table, a plain callable)."""
    enc = getattr(policy, "encoding", None)
    if not isinstance(enc, FeatureEncoding) or enc.name != "features" \
            or getattr(policy, "obs_fn", None) is not None:
        return None
    if enc.names is not None:
        return tuple(enc.names)
    names = getattr(source, "features", None)  # a System's feature names
    if names is None or isinstance(names, np.ndarray):  # a TabularModel's features table
        names = getattr(source, "feature_names", None)
    return None if names is None else tuple(str(x) for x in names)


def reads_group(policy_or_table: Any, model: TabularModel | None = None, tol: float = 0.0, *,
                system: Any = None, table: np.ndarray | None = None,
                horizon: int | None = None) -> bool:
    """Whether the policy's decision reads the group S directly: the edge ``S -> D_t`` of
    the temporal causal graph (method.md section 7). One answer for every door (the
    ``graph`` command, report.html):

    1. a policy that declares ``reads_group`` (a bool) is taken at its word;
    2. a network over a feature matrix (a ``features`` input encoding, recorded in its
       checkpoint) reads S only if one of its input features is the group
       (:func:`group_features`); its other features describe the state ``X_t``;
    3. otherwise, with a tabular model (``model``, or ``system.tabular``): whether the
       decision differs between groups at some level (``table``, the policy's table on
       that model, when already computed; evaluated at every epoch t < ``horizon``,
       default the system's horizon, else 20);
    4. with a system but no tabular model: True, the conservative graph.
    """
    declared = getattr(policy_or_table, "reads_group", None)
    if isinstance(declared, bool):
        return declared
    if model is None and system is not None:
        model = system.tabular
    inputs = feature_inputs(policy_or_table, system if system is not None else model)
    if inputs is not None:
        return bool(set(inputs) & group_features(system if system is not None else model))
    tab = policy_or_table if isinstance(policy_or_table, np.ndarray) else table
    if tab is None:
        if model is None:
            if system is not None:
                return True
            raise PolicyError("reads_group: pass the model to evaluate a policy object.")
        tab = policy_table(policy_or_table, model,
                           horizon or getattr(system, "horizon", None) or 20)
    tab = np.asarray(tab)
    if model is not None and model.n_actions > 2:
        return bool(np.ptp(tab, axis=-3).max() > tol)
    return bool(np.ptp(tab, axis=-2).max() > tol)


def _own_evaluation(policy: Any, classes: tuple[type, ...]) -> bool:
    """Whether ``policy`` is one of ``classes`` evaluating with that class's own methods and
    encoding (a subclass overriding them may read all of the observation, ``obs.t`` too)."""
    cls = next((c for c in classes if isinstance(policy, c)), None)
    own = cls is not None and all(getattr(type(policy), m, None) is getattr(cls, m, None)
                                  for m in ("action_probs", "prob_d1", "_inputs"))
    enc = getattr(policy, "encoding", None)
    return own and (cls not in _NETWORKS or enc is None or type(enc).encode is FeatureEncoding.encode)


def reads_only_level_group(policy: Any) -> bool:
    """Whether a policy's decision is a function of (group, level) (and t for time-indexed
    tables) only, so that an engine may evaluate it once on the (group, level) grid: a
    declared ``reads_only_level_group`` (a bool), tables and constants, and networks over
    the one-hot (level, group) encoding (in-memory torch modules, checkpoints of every
    format, on a device or not, stable-baselines3 models) that read no other part of the
    observation."""
    declared = getattr(policy, "reads_only_level_group", None)
    if isinstance(declared, bool):
        return declared
    if _own_evaluation(policy, (TablePolicy, ConstantPolicy)):
        return True
    if _own_evaluation(policy, _NETWORKS):
        enc = policy.encoding
        return (enc is not None and enc.name == "onehot"
                and getattr(policy, "obs_fn", None) is None)
    return False


class GridTabulated:
    """A policy that reads only (group, level) (:func:`reads_only_level_group`), evaluated
    once per (group, level) cell - once per epoch ``t`` when it is time-dependent, else
    once - and looked up per individual: one gather instead of, e.g., an MLP forward per
    individual-step. ``action_probs``/``prob_d1`` return the rows the policy gives on the
    grid for each individual's cell; an observation without levels goes to the policy
    itself. ``policy`` is the policy evaluated."""

    def __init__(self, policy: Any, n_groups: int, n_levels: int, n_actions: int):
        self.policy = policy
        self.name = getattr(policy, "name", type(policy).__name__)
        self.G, self.K, self.A = int(n_groups), int(n_levels), int(n_actions)
        self.time_dependent = bool(getattr(policy, "time_dependent", False))
        self._where = f"policy {self.name!r}"
        self._tables: dict[int | None, np.ndarray] = {}

    def __getattr__(self, name: str) -> Any:  # name, reads_group, encoding, ... of the policy
        if name == "policy":
            raise AttributeError(name)
        return getattr(self.policy, name)

    def table(self, t: int | None) -> np.ndarray:
        """The policy's action distributions (G * K, A) on the grid at epoch ``t`` (the
        same table for every t when the policy is not time-dependent)."""
        key = int(t) if self.time_dependent and t is not None else None
        tab = self._tables.get(key)
        if tab is None:
            G, K = self.G, self.K
            grid = Observation(group=np.repeat(np.arange(G), K), level=np.tile(np.arange(K), G),
                               t=t)
            tab = action_probs(self.policy, grid, self.A, self._where)
            tab.setflags(write=False)
            self._tables[key] = tab  # (threads may both fill a key: with the same values)
        return tab

    def prepare(self, horizon: int) -> GridTabulated:
        """Fill every table the epochs 0..horizon-1 use (before threads share the policy)."""
        for t in range(horizon if self.time_dependent else 1):
            self.table(t)
        return self

    def action_probs(self, obs: Observation) -> np.ndarray:
        if obs.level is None:
            return action_probs(self.policy, obs, self.A, self._where)
        return self.table(obs.t)[np.asarray(obs.group) * self.K + np.asarray(obs.level)]

    def prob_d1(self, obs: Observation) -> np.ndarray:
        if obs.level is None:
            return action_probs(self.policy, obs, self.A, self._where)[:, 1]
        return self.table(obs.t)[:, 1][np.asarray(obs.group) * self.K + np.asarray(obs.level)]

    def __repr__(self) -> str:
        return f"GridTabulated({self.policy!r})"


#: causalfair's policies whose ``prob_d1`` is column 1 of their ``action_probs`` (read
#: directly by :func:`d1_probs` unless a subclass overrides either method).
_ONE_READING = (TablePolicy, ActionPolicy, UniformPolicy, GridTabulated, AllowedOnly, *_NETWORKS)


def allowed_only(policy: Any, decisions: Any) -> Any:
    """``policy`` as an :class:`AllowedOnly` when ``decisions`` (a
    :class:`~causalfair.systems.DecisionSet`, or None) forbids some actions; else (or when
    it is one already, or is pi0: the built-in ``never``) as it is: what every Monte Carlo
    engine evaluates (:func:`engine_policy`); the exact engine's tables are checked by
    :func:`policy_table`, both by :func:`~causalfair.policies.allowed.refuse_forbidden`."""
    allowed = getattr(decisions, "allowed", None)
    labels = tuple(getattr(decisions, "labels", ()) or ())
    if allowed is None or isinstance(policy, AllowedOnly) or isinstance(policy, np.ndarray) \
            or set(range(len(labels))) <= set(allowed) \
            or _is_pi0(policy, getattr(decisions, "baseline", 0)):
        return policy
    return AllowedOnly(policy, allowed, labels, action_probs)


def engine_policy(policy: Any, source: Any, n_actions: int, *, tabulate: bool = True,
                  horizon: int | None = None, device: str = "cpu",
                  decisions: Any = None) -> Any:
    """The policy as a simulation engine evaluates it (the one place every Monte Carlo
    engine, benefit fork and paired comparison goes through): a policy that reads only
    (group, level) (:func:`reads_only_level_group`) on a ``source`` (simulator or system)
    with integer ``n_levels`` and ``n_groups`` becomes a :class:`GridTabulated` (its
    tables filled for ``horizon`` epochs when given); any other policy, or ``tabulate``
    False, is returned as it is. The probabilities are those the policy gives on each
    cell; a network's float32 forward on the grid can round a probability's last bit
    differently from the same row in a larger batch (docs/scale.md). A network policy
    that is not tabulated runs its forward pass on ``device`` (a resolved torch device,
    :func:`causalfair.backends.engine_device`; :func:`causalfair.policies.nets.on_device`).
    On a system whose ``decisions`` (given, else ``source``'s) forbid actions, the result
    is an :class:`AllowedOnly` (:func:`allowed_only`)."""
    decisions = decisions if decisions is not None else getattr(source, "decisions", None)
    if isinstance(policy, AllowedOnly):
        policy = policy.policy
    return allowed_only(_engine_policy(policy, source, n_actions, tabulate, horizon, device),
                        decisions)


def _engine_policy(policy: Any, source: Any, n_actions: int, tabulate: bool,
                   horizon: int | None, device: str) -> Any:
    """:func:`engine_policy` before the check of the allowed actions."""
    if isinstance(policy, GridTabulated):
        return policy
    if isinstance(policy, TablePolicy) and policy.time_dependent and horizon is not None \
            and policy.table.shape[0] < horizon:  # as the exact engine (policy_table)
        raise PolicyError(f"policy {policy.name!r}: time-indexed table covers "
                          f"{policy.table.shape[0]} epochs, horizon is {horizon}.")
    K, G = getattr(source, "n_levels", None), getattr(source, "n_groups", None)
    if not (tabulate and isinstance(K, (int, np.integer)) and isinstance(G, (int, np.integer))
            and not isinstance(K, bool) and reads_only_level_group(policy)):
        return on_device(policy, device)
    tab = GridTabulated(policy, int(G), int(K), int(n_actions))
    return tab if horizon is None else tab.prepare(horizon)


def untabulated(policy: Any) -> Any:
    """The policy a :class:`GridTabulated` or :class:`AllowedOnly` evaluates; any other
    policy as it is."""
    if isinstance(policy, AllowedOnly):
        policy = policy.policy
    return policy.policy if isinstance(policy, GridTabulated) else policy

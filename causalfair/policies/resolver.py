"""One way to resolve a policy for a system (architecture.md section 2): :func:`resolve`,
called by every door - the command line's ``--policy`` / ``--checkpoint``, an audit spec's
``[policy]`` and ``[baseline]``, the engines (exact, Monte Carlo, occupancy, the logs audit)
and the Python API (:func:`as_policy`, ``cf.decompose``, ``cf.audit(policy=...)``).

What it accepts:

- a built-in name (``"threshold:0.5"``, ``"uniform"``, ...:
  :data:`~causalfair.policies.core.BUILTIN_POLICIES`);
- a checkpoint path of any format (``.npz`` network or population agent, ``.pt``, a
  stable-baselines3 ``.zip``), checked against the system
  (:func:`~causalfair.policies.checkpoint.load_checkpoint_for`);
- a factory ``"module:callable"``: the module looked up in ``search_path`` first, which stays
  importable while the factory runs (:func:`causalfair._usercode.call_factory`), called as
  user code with ``params``; what it returns is resolved as an object in memory;
- in memory: a policy object (``prob_d1(obs)`` or ``action_probs(obs)``; a user's is
  called through :func:`~causalfair._usercode.guard_policy`), a stable-baselines3 model on
  any ``Discrete(n)``, a ``torch.nn.Module`` (one logit, or one per action; its input is
  the system's features, else one-hot level and group; ``output="q"``: one Q-value per
  action, acted on greedily, :class:`GreedyQPolicy`), a table (G, K) or (T, G, K) of
  P(d1) (with A > 2 actions, a trailing axis A), or a plain function ``f(obs) ->
  probabilities``.

A stable-baselines3 policy trained behind ``VecNormalize`` is evaluated on normalized
observations when ``vecnormalize`` gives its statistics
(:func:`~causalfair.policies.vecnormalize.obs_normalization`); a ``.zip`` with a
``vecnormalize.pkl`` beside it and no ``vecnormalize`` is refused (:func:`_with_stats`).

``system`` is a :class:`~causalfair.systems.System`, a
:class:`~causalfair.model.TabularModel` or None; it is read through its attributes only
(``n_actions``, ``n_levels``, ``n_groups``, ``features``, ``tabular``, ...), so the policies
need not import the systems.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._usercode import (
    call_factory,
    call_policy,
    check_params,
    guard_policy,
    load_callable,
    missing_params,
)
from causalfair._validation import check_keywords
from causalfair.errors import CausalfairError, PolicyError, short
from causalfair.model import TabularModel
from causalfair.policies.checkpoint import (
    CHECKPOINT_SUFFIXES,
    PICKLE_SUFFIXES,
    load_checkpoint,
    load_checkpoint_for,
)
from causalfair.policies.core import (
    BUILTIN_POLICIES,
    ActionPolicy,
    CallablePolicy,
    ConstantPolicy,
    FeatureEncoding,
    FunctionDeclarations,
    Observation,
    Policy,
    TablePolicy,
    TorchPolicy,
    UniformPolicy,
    check_policy_model,
    file_sha256,
    parse_policy,
    sb3_adapted,
)
from causalfair.policies.grid import feature_inputs, reads_group, reads_only_level_group
from causalfair.policies.nets import NumpyMLPPolicy, check_policy_inputs
from causalfair.policies.sb3 import SB3Policy, greedy_probs, is_sb3_model
from causalfair.policies.vecnormalize import (
    VECNORMALIZE_NONE,
    NormalizedNetwork,
    obs_normalization,
    refuse_stats_beside,
)
from causalfair.types import check_probs, holds_complex
from causalfair.workers import user_prints_to_stderr

__all__ = ["ResolvedPolicy", "resolve", "as_policy", "callable_policy", "GreedyQPolicy",
           "CHECKPOINT_SUFFIXES", "BUILTIN_KINDS", "TORCH_OUTPUTS"]

#: How a torch module's outputs are read: ``logits`` (softmax, sigmoid for one output),
#: ``probs`` (probabilities as they are), ``q`` (Q-values: the greedy action).
TORCH_OUTPUTS = ("logits", "probs", "q")
#: The first word of every built-in policy name (``threshold`` of ``threshold:P``).
BUILTIN_KINDS = frozenset(k.partition(":")[0] for k in BUILTIN_POLICIES)


@dataclass(frozen=True, eq=False)
class ResolvedPolicy:
    """A policy resolved for a system: ``policy`` (what the engines evaluate), ``label``
    (what the spec or flag held: the built-in name, the checkpoint's file name, the
    factory reference, or the object's name), ``kind`` (``builtin``, ``checkpoint``,
    ``factory``, ``object``, ``sb3``, ``torch``, ``table``, ``callable``), a checkpoint's
    ``sha256`` and ``meta``, and the ``system`` it was checked against."""

    policy: Any
    label: str
    kind: str
    sha256: str | None = None
    meta: dict[str, Any] | None = None
    system: Any = None

    @property
    def reads_group(self) -> bool | None:
        """Whether the decision reads the group S (the edge ``S -> D_t``,
        :func:`~causalfair.policies.grid.reads_group`); None when neither the policy
        declares it nor a system was given."""
        sys_ = self.system
        if sys_ is None:
            declared = getattr(self.policy, "reads_group", None)
            return declared if isinstance(declared, bool) else None
        if hasattr(sys_, "decisions"):
            return reads_group(self.policy, system=sys_)
        return reads_group(self.policy, sys_)

    @property
    def reads_levels(self) -> bool | None:
        """Whether the decision reads the level X_t: True for tables and one-hot networks,
        False for constant policies and networks over features, None when unknown (a
        function of the whole observation)."""
        pol = self.policy
        if isinstance(pol, (ConstantPolicy, ActionPolicy, UniformPolicy)):
            return False
        if reads_only_level_group(pol):
            return True
        enc = getattr(pol, "encoding", None)
        if isinstance(enc, FeatureEncoding):
            return enc.name == "onehot"
        return None

    @property
    def features(self) -> tuple[str, ...] | None:
        """The feature names a network reads (its recorded ``features`` encoding), None
        when it does not read a feature matrix through an encoding."""
        return feature_inputs(self.policy, self.system)


def callable_policy(fn: Callable[..., Any], *, inputs: str = "obs", output: str = "prob",
                    name: str | None = None, time_dependent: bool = False,
                    n_actions: int = 2) -> Policy:
    """Wrap a plain function as a policy (called as user code).

    ``inputs``: what ``fn`` is called with: ``"obs"`` (the Observation), ``"level_group"``
    (two int arrays) or ``"features"`` (the feature matrix). ``output``: ``"prob"``
    (P(d1) per row) or ``"action"`` (0/1 decisions, i.e. a deterministic policy).
    ``time_dependent=True`` tells the exact engine to evaluate it for every t.
    ``n_actions``: the system's number of actions A; with A > 2, ``output="prob"`` reads
    (n, A) rows of action probabilities, checked as any ``action_probs`` is
    (:func:`causalfair.policies.core.action_probs`).
    """
    if inputs not in _INPUTS:
        raise PolicyError(f"inputs: unknown {inputs!r}; allowed values: {', '.join(_INPUTS)}.")
    if output not in _OUTPUTS:
        raise PolicyError(f"output: unknown {output!r}; allowed values: {', '.join(_OUTPUTS)}.")
    if isinstance(n_actions, bool) or not isinstance(n_actions, (int, np.integer)) or n_actions < 2:
        raise PolicyError(f"n_actions: must be an integer >= 2, got {n_actions!r}.")
    if not callable(fn):
        raise PolicyError(f"policy: {fn!r} is not callable.")
    label = name or getattr(fn, "__name__", "callable")
    what = f"policy {label!r}"

    def call(obs: Observation) -> Any:
        if inputs == "obs":
            return call_policy(what, fn, obs)
        if inputs == "level_group":
            if obs.level is None:
                raise PolicyError(f"policy {label!r} reads levels, but the observation has none.")
            return call_policy(what, fn, obs.level, obs.group)
        if obs.features is None:
            raise PolicyError(f"policy {label!r} reads features, but the observation has none.")
        return call_policy(what, fn, obs.features)

    declared = {k: getattr(fn, k) for k in DECLARATIONS if isinstance(getattr(fn, k, None), bool)}
    call.__dict__.update(declared)  # what the function says of itself, as an object would
    if n_actions > 2:
        if output != "prob":
            raise PolicyError(f"output: {output!r} reads 0/1 decisions of two actions; on a "
                              f"system of {n_actions} actions return (n, {n_actions}) "
                              "probabilities (one-hot rows for a deterministic policy) with "
                              "output='prob'.")
        return CallableActions(call, int(n_actions), label, bool(time_dependent))

    def wrapped(obs: Observation) -> np.ndarray:
        out = call(obs)
        if output == "prob" or out is None or holds_complex(out):  # (refused there)
            return check_probs(out, len(obs), what, obs)
        try:
            arr = np.asarray(out, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):  # text, ragged lists: one message, naming the fix
            arr = None
        if arr is not None and arr.size and not np.isin(arr, (0.0, 1.0)).all():
            bad = arr[~np.isin(arr, (0.0, 1.0))][0]
            raise PolicyError(
                f"policy {label!r}: output='action' needs decisions 0 or 1, got {bad!r}; use "
                "output='prob' for probabilities.")
        return check_probs(out, len(obs), what, obs)  # one per observation

    wrapped.__dict__.update(declared)
    pol = CallablePolicy(wrapped, name=label)
    if time_dependent:
        return _TimeDependent(pol)
    return pol


_INPUTS = ("obs", "level_group", "features")
_OUTPUTS = ("prob", "action")


#: What a plain function may declare of itself as attributes (``f.reads_group = False``),
#: read as on a policy object (:mod:`causalfair.policies.grid`).
DECLARATIONS = ("reads_only_level_group", "reads_group")


@dataclass(frozen=True)
class CallableActions(FunctionDeclarations):
    """A plain function returning (n, A) action probabilities as a policy on a system of
    A > 2 actions (:func:`callable_policy`); ``action_probs`` hands the rows to
    :func:`causalfair.policies.core.action_probs`, which checks them."""

    fn: Callable[[Observation], Any]
    n_actions: int
    name: str = "callable"
    time_dependent: bool = False

    def action_probs(self, obs: Observation) -> Any:
        return self.fn(obs)


class _TimeDependent:
    """A callable policy declared time-dependent (the exact engine evaluates every t)."""

    time_dependent = True

    def __init__(self, inner: CallablePolicy):
        self.inner = inner
        self.name = inner.name
        self.reads_only_level_group = inner.reads_only_level_group
        self.reads_group = inner.reads_group

    def prob_d1(self, obs: Observation) -> np.ndarray:
        return self.inner.prob_d1(obs)


def _is_policy_object(obj: Any) -> bool:
    return callable(getattr(obj, "prob_d1", None)) or callable(getattr(obj, "action_probs", None))


def _is_torch_module(obj: Any) -> bool:
    """A ``torch.nn.Module``, recognised without importing torch."""
    return any(c.__name__ == "Module" and c.__module__.startswith("torch.nn")
               for c in type(obj).__mro__)


def _label(pol: Any) -> str:
    """How titles, summaries and errors name a policy object: its ``name``; else a torch
    module as ``"torch <class>(<widths>)"``, the widths of its linear layers when they
    chain (``"torch Sequential(4-64-1)"``; ``"torch <class>"`` when they do not); else
    its class name."""
    name = getattr(pol, "name", None)
    if isinstance(name, str) and name:
        return name
    if not _is_torch_module(pol):
        return str(name or type(pol).__name__)
    widths: list[int] | None = []
    for m in pol.modules():
        i, o = getattr(m, "in_features", None), getattr(m, "out_features", None)
        if not (isinstance(i, int) and isinstance(o, int)):
            continue
        if widths and widths[-1] != i:  # branches (an actor and a critic): no one chain
            widths = None
            break
        widths = [*(widths or [i]), o]
    shape = f"({'-'.join(map(str, widths))})" if widths and len(widths) <= 12 else ""
    return f"torch {type(pol).__name__}{shape}"


def _check_table_cells(pol: TablePolicy, system: Any) -> None:
    """A table's (group, level) cells are the system's, before any engine reads one: the
    Monte Carlo engines look a unit's (group, level) up in it, so fewer levels crashed with
    numpy's IndexError and more groups or levels were read in part, silently."""
    G, K = getattr(system, "n_groups", None), getattr(system, "n_levels", None)
    if G is None or K is None:  # no system, or one observed through features only
        return
    cells = pol.table.shape[-3:-1] if pol.n_actions > 2 else pol.table.shape[-2:]
    if tuple(cells) != (int(G), int(K)):
        want = f"({G}, {K})" + (f" x {pol.n_actions} actions" if pol.n_actions > 2 else "")
        sid = getattr(system, "id", None)
        where = f"system {sid!r}" if isinstance(sid, str) else "the model"
        raise PolicyError(
            f"policy table: has shape {pol.table.shape}, whose (group, level) cells are "
            f"{tuple(cells)}; {where} has {G} groups and {K} levels: give a table "
            f"of {want} cells (or one such per epoch).")


def _n_actions(system: Any) -> int:
    return int(getattr(system, "n_actions", 2) or 2) if system is not None else 2


def _torch_encoding(system: Any) -> FeatureEncoding:
    """The input of an in-memory network on ``system``: its named features, else one-hot
    level and group (the default encoding without a system)."""
    if system is None:
        return FeatureEncoding()
    names = getattr(system, "features", None)
    if names is not None and not isinstance(names, np.ndarray):
        return FeatureEncoding("features", names=tuple(names))
    if isinstance(names, np.ndarray):  # a TabularModel's feature table (G, K, F)
        return FeatureEncoding("features", width_=int(names.shape[-1]),
                               names=getattr(system, "feature_names", None))
    return FeatureEncoding("onehot", int(system.n_levels), int(system.n_groups))


class GreedyQPolicy:
    """The greedy policy of a torch module that outputs one Q-value per action (a DQN
    Q-network, CleanRL's ``QNetwork``): probability 1 on the action with the largest
    Q-value, ties to the lower action, as DQN acts at evaluation (no exploration).
    ``net`` is the module read as a :class:`TorchPolicy`; its raw outputs are the
    Q-values."""

    def __init__(self, net: TorchPolicy):
        self.net = net
        self.name = net.name
        self.encoding = net.encoding

    @property
    def n_actions(self) -> int:
        return self.net.n_actions

    def action_probs(self, obs: Observation) -> np.ndarray:
        q = np.asarray(self.net._outputs(self.encoding.encode(obs)))
        if q.ndim != 2 or q.shape[1] < 2 or not np.isfinite(q).all():
            raise PolicyError(
                f"policy {self.name!r}: output='q' needs one finite Q-value per action (>= 2), "
                f"the module returned shape {q.shape}; check the module or its output.")
        return greedy_probs(q)

    def prob_d1(self, obs: Observation) -> np.ndarray:
        probs = self.action_probs(obs)
        if probs.shape[1] != 2:
            raise PolicyError(f"policy {self.name!r}: has {probs.shape[1]} actions; use "
                              "action_probs(obs).")
        return probs[:, 1]

    def __repr__(self) -> str:
        return f"GreedyQPolicy({self.net!r})"


def _torch_policy(module: Any, system: Any, output: str | None = None
                  ) -> TorchPolicy | GreedyQPolicy:
    """An in-memory ``torch.nn.Module`` as a policy on ``system``. A module without its own
    ``forward`` but with an ``actor`` module (CleanRL's PPO ``Agent``) is read through its
    actor's logits. The input width of its first layer (``in_features``) must be the
    width of the system's input (its features, else one-hot level and group). ``output``
    (:data:`TORCH_OUTPUTS`, default ``logits``) says how its outputs are read; a module
    whose class is named like a Q-network (``...QNetwork``, CleanRL's DQN) must say it,
    since softmax of Q-values is not the policy it acts by."""
    name = _label(module)
    if output is not None and output not in TORCH_OUTPUTS:
        raise PolicyError(f"policy {name!r}: output: bad value {output!r}; use one of "
                          f"{', '.join(TORCH_OUTPUTS)}.")
    if output is None and type(module).__name__.lower().endswith(("qnetwork", "qnet")):
        raise PolicyError(
            f"policy {name!r}: a Q-network's outputs are Q-values, not logits; say how to "
            "read them: output='q' acts greedily on them (as DQN does), output='logits' "
            "if they are logits (cf.as_policy(module, system, output='q'), in a spec "
            "[policy] output = \"q\"; docs/own-system.md).")
    if _is_torch_module(getattr(module, "actor", None)) and all(
            "forward" not in vars(c) for c in type(module).__mro__
            if not c.__module__.startswith("torch.nn")):
        module = module.actor
    enc = _torch_encoding(system)
    first = next((m for m in module.modules() if hasattr(m, "in_features")), None)
    if system is not None and first is not None and int(first.in_features) != enc.width:
        what = (f"{enc.width} features ({', '.join(enc.names)})" if enc.names else
                f"{enc.width} inputs ({enc.name})")
        raise PolicyError(
            f"policy {name!r}: the torch module reads {int(first.in_features)} inputs (its first "
            f"layer's in_features) but system {getattr(system, 'id', '')!r} observes {what}; "
            "train it on this system's observations.")
    if output == "q":
        return GreedyQPolicy(TorchPolicy(module, enc, output="logits", name=name))
    return TorchPolicy(module, enc, output=output or "logits", name=name)


def _in_memory(obj: Any, system: Any, what: str, output: str | None = None
               ) -> ResolvedPolicy | None:
    """An object in memory as a resolved policy, or None when it is none of the kinds;
    ``output``: how a torch module's outputs are read (:func:`_torch_policy`)."""
    if _is_policy_object(obj):
        if isinstance(obj, (TorchPolicy, NumpyMLPPolicy)) and hasattr(system, "decisions"):
            # a network in memory on a System: the checks its checkpoint would get (an SB3
            # model reads the observed features as its .zip does, whatever its encoding)
            check_policy_inputs(obj, feature_names=system.features, n_levels=system.n_levels,
                                n_groups=system.n_groups)
        if isinstance(obj, TablePolicy):  # its cells, as an array's
            _check_table_cells(obj, system)
        pol = guard_policy(_parsed_for_here(obj, system))
        return ResolvedPolicy(pol, _label(pol), "object", system=system)
    if isinstance(obj, np.ndarray):
        A = _n_actions(system)
        pol = TablePolicy(obj, n_actions=A if A > 2 and obj.ndim >= 3 and obj.shape[-1] == A
                          else 2)
        _check_table_cells(pol, system)
        return ResolvedPolicy(pol, "table", "table", system=system)
    if is_sb3_model(obj):
        pol = sb3_adapted(obj)
        return ResolvedPolicy(pol, _label(pol), "sb3", system=system)
    if _is_torch_module(obj):
        pol = _torch_policy(obj, system, output)
        return ResolvedPolicy(pol, pol.name, "torch", system=system)
    if output is not None:
        raise PolicyError(f"{what}: output={output!r} reads a torch module's outputs; "
                          f"{type(obj).__name__} is not a torch module, drop output.")
    if callable(obj):
        pol = callable_policy(obj, n_actions=_n_actions(system))
        return ResolvedPolicy(pol, pol.name, "callable", system=system)
    return None


def _parsed_for_here(obj: Any, system: Any) -> Any:
    """``obj`` as evaluated on ``system``, honestly named: a built-in parsed for one model
    (:func:`parse_policy`'s ``threshold:0.5`` holds that model's score table) used on a
    system whose own ``threshold:0.5`` is another table is evaluated as given (lending-1's
    thresholds on lending-2, or on a model fitted to a lending-1 log) and named
    ``"threshold:0.5 (parsed for lending-1)"``, never as the system's own built-in. The
    same table (the System and its tabular model, a copy) keeps its name."""
    made_for = getattr(obj, "parsed_for", None)
    if not isinstance(obj, TablePolicy) or made_for is None or system is None:
        return obj
    try:
        own = parse_policy(obj.name, system)
    except CausalfairError:
        own = None
    if isinstance(own, TablePolicy) and own.table.shape == obj.table.shape and \
            np.array_equal(own.table, obj.table):
        return obj
    return replace(obj, name=f"{obj.name} (parsed for {made_for})", parsed_for=None)


def _checkpoint(path: Path, system: Any) -> ResolvedPolicy:
    if system is not None and hasattr(system, "decisions"):
        pol, meta = load_checkpoint_for(path, system)
    else:  # a TabularModel (checked on its grid) or nothing
        pol, meta = load_checkpoint(path, system)
    return ResolvedPolicy(pol, path.name, "checkpoint", file_sha256(path), meta, system)


def _factory(ref: str, system: Any, search_path: Any, params: Mapping[str, Any] | None,
             what: str, output: str | None = None) -> ResolvedPolicy:
    with user_prints_to_stderr():  # never into the JSON of `decompose --json`
        fn = load_callable(ref, search_path=search_path, what=what)
        params = dict(params or {})
        try:
            check_params(fn, params, f"{what} {ref!r}")
        except CausalfairError as exc:
            raise PolicyError(f"{exc} Check the policy's params against the factory's "
                              "arguments.") from None
        _check_required(fn, params, f"{what} {ref!r}")
        obj = call_factory(f"{what} {ref!r}", fn, search_path, **params)
    got = None if isinstance(obj, (str, os.PathLike)) else _in_memory(obj, system, what, output)
    if got is None:
        raise PolicyError(
            f"{what} {ref!r} returned {type(obj).__name__}, which has neither prob_d1(obs) "
            "nor action_probs(obs) (nor is it a stable-baselines3 model, a torch module, a "
            "table or a function)." + _estimator_hint(obj))
    return ResolvedPolicy(got.policy, ref, "factory", system=system)


def _check_required(fn: Callable[..., Any], params: Mapping[str, Any], what: str) -> None:
    """Refuse a policy factory whose parameters without a default ``params`` leaves out
    (the call would fail as a TypeError of the factory), naming how to give them, and the
    policy function itself named where its factory belongs (``f(obs)``: one parameter)."""
    missing = missing_params(fn, params)
    if not missing:
        return
    name = getattr(fn, "__name__", "f")
    if len(missing) == 1 and not params and len(inspect.signature(fn).parameters) == 1:
        raise PolicyError(
            f"{what}: is called as a factory, with no arguments, and returns the policy; "
            f"{name}({missing[0]}) looks like the policy itself (a function of the "
            f"observations): name a factory that returns it (def make(): return {name}).")
    raise PolicyError(
        f"{what}: its factory needs {', '.join(map(repr, missing))} (no default); give it "
        f"params = {{ {missing[0]} = ... }} in the spec's [policy] (or a default in the "
        "factory).")


def _builtin_typo(kind: str, search_path: Any) -> str | None:
    """The built-in policy kind ``kind`` misspells (``thresold`` for ``threshold``), when no
    module of that name exists to make it a factory; else None."""
    import difflib
    import importlib.util

    close = difflib.get_close_matches(kind, sorted(BUILTIN_KINDS), n=1, cutoff=0.75)
    if not close or not kind.isidentifier():
        return None
    folder = Path(search_path) if search_path is not None else Path(".")
    if (folder / f"{kind}.py").exists() or (folder / kind).is_dir():
        return None
    try:
        return None if importlib.util.find_spec(kind) is not None else close[0]
    except (ImportError, ValueError):
        return close[0]


def _builtin(name: str, system: Any, where: str | None) -> ResolvedPolicy:
    if system is None:
        raise PolicyError(f"{where or 'policy'}: the built-in {name!r} needs the system (or "
                          "tabular model) it decides on.")
    check_policy_model(system, "system")
    try:
        pol = parse_policy(name, system)
    except PolicyError as exc:
        if where is None:
            raise
        msg = str(exc)
        raise PolicyError(f"{where}: {msg[len('policy: '):] if msg.startswith('policy: ') else msg}"
                          ) from None
    return ResolvedPolicy(pol, name, "builtin", system=system)


def resolved(policy: Any, system: Any) -> Any:
    """``policy`` as the engines evaluate it (:func:`resolve`'s policy), the one rule of
    every engine's door (``cf.decompose``, ``cf.benefit_fairness``, Lambda_T, Lambda by
    forks): a table on a :class:`~causalfair.model.TabularModel` stays an array, for the
    exact engine's own checks (one refusal of a table that is not probabilities, "policy
    table: returned ..."), at every exact door."""
    if isinstance(policy, np.ndarray) and isinstance(system, TabularModel):
        return policy
    return resolve(policy, system).policy


def resolve(value: Any, system: Any = None, *, search_path: str | os.PathLike[str] | None = None,
            params: Mapping[str, Any] | None = None, where: str | None = None,
            output: str | None = None, vecnormalize: Any = None,
            vecnormalize_where: str = "vecnormalize") -> ResolvedPolicy:
    """The policy ``value`` names or holds (module docstring), resolved for ``system``.

    ``search_path``: the folder searched first for a factory's module (an audit spec's
    folder, the command line's ``--search-path``); ``params``: the factory's keyword
    arguments. ``where``: what holds ``value`` (``"--policy"``, ``"spec.toml: [policy]
    factory"``), named by the errors about it. ``output``: how an in-memory torch module's
    outputs are read (:data:`TORCH_OUTPUTS`; ``"q"``: Q-values, the greedy action).
    ``vecnormalize``: the observation statistics a stable-baselines3 policy was trained
    behind (a ``vecnormalize.pkl``, ``.npz`` or ``.json`` path, a ``VecNormalize`` object,
    or ``"none"``: raw observations; :func:`~causalfair.policies.vecnormalize.obs_normalization`),
    named ``vecnormalize_where`` in errors: the option or key of the door that takes them
    (``"--vecnormalize"``, ``"audit spec X: [baseline] vecnormalize"``), which the refusal
    of a ``.zip`` with a ``vecnormalize.pkl`` beside it names
    (:func:`~causalfair.policies.vecnormalize.stats_fix`). A policy already given its
    statistics by :func:`as_policy` is refused further statistics.
    """
    if isinstance(value, ResolvedPolicy):
        if vecnormalize is not None:
            raise PolicyError(f"{vecnormalize_where}: the policy {value.label!r} is already "
                              "resolved; pass vecnormalize when resolving it.")
        return value
    got = _resolve(value, system, search_path, params, where, output)
    return _with_stats(got, vecnormalize, vecnormalize_where)


def _is_sb3(res: ResolvedPolicy) -> bool:
    """Whether a resolved policy is a stable-baselines3 model (in memory or its ``.zip``)."""
    return isinstance(res.policy, SB3Policy) or (
        isinstance(res.policy, NumpyMLPPolicy)
        and (res.meta or {}).get("format") == "stable-baselines3")


def _with_stats(res: ResolvedPolicy, vecnormalize: Any, where: str) -> ResolvedPolicy:
    """``res`` evaluated on the observations normalized by ``vecnormalize``
    (:func:`~causalfair.policies.vecnormalize.obs_normalization`). Without it, a
    stable-baselines3 ``.zip`` with a ``vecnormalize.pkl`` kept beside it is refused: its
    network was trained on normalized observations."""
    if vecnormalize is None:
        source = getattr(res.policy, "source", None)
        if res.kind == "checkpoint" and source and _is_sb3(res):
            refuse_stats_beside(source, where)
        return res
    if isinstance(vecnormalize, str) and vecnormalize.strip().lower() == VECNORMALIZE_NONE:
        return res
    if isinstance(res.policy, NormalizedNetwork) or getattr(res.policy, "obs_norm", None) \
            is not None:
        raise PolicyError(
            f"{where}: policy {res.label!r} already acts on normalized observations (it was "
            f"given its statistics by cf.as_policy(..., vecnormalize=)); drop {where}, or pass "
            "the model itself.")
    if not _is_sb3(res):  # "drop" names the key alone, not the spec a second time
        raise PolicyError(
            f"{where}: observation statistics apply to a stable-baselines3 model (a .zip or a "
            f"model in memory); policy {res.label!r} is a {res.kind} policy, so drop "
            f"{where.rpartition(': ')[2]} (a causalfair checkpoint records its normalisation "
            "in its encoding).")
    stats = obs_normalization(vecnormalize, where)
    if stats is None:  # kept with norm_obs=False: the model reads raw observations
        return res
    pol = res.policy
    if isinstance(pol, SB3Policy):
        stats.check_width(pol.width, f"{where}: policy {res.label!r}")
        pol = copy.copy(pol)  # the model's shared adapter stays on raw observations
        pol.obs_norm = stats
    else:
        stats.check_width(pol.encoding.width, f"{where}: policy {res.label!r}")
        pol = NormalizedNetwork(pol, stats)
    meta = None if res.meta is None else {
        **res.meta, "metadata": {**(res.meta.get("metadata") or {}),
                                 "vecnormalize": stats.to_dict()}}
    return ResolvedPolicy(pol, res.label, res.kind, res.sha256, meta, res.system)


def _resolve(value: Any, system: Any, search_path: Any, params: Mapping[str, Any] | None,
             where: str | None, output: str | None) -> ResolvedPolicy:
    if output is not None and (isinstance(value, os.PathLike) or isinstance(value, str) and (
            value.count(":") != 1 or value.partition(":")[0] in BUILTIN_KINDS)):
        raise PolicyError(f"{where or 'policy'}: output={output!r} reads a torch module's "
                          f"outputs; {short(value)} is not one (a checkpoint or built-in), drop "
                          "output.")
    if isinstance(value, os.PathLike):
        return _checkpoint(Path(value), system)
    if isinstance(value, str):
        kind = value.partition(":")[0]
        if kind in BUILTIN_KINDS:
            return _builtin(value, system, where)
        path = Path(value)
        if path.suffix.lower() in CHECKPOINT_SUFFIXES + PICKLE_SUFFIXES or path.is_file() or (
                ":" not in value and ("/" in value or os.sep in value)):
            # a file name or a path (no built-in holds a '/'): a missing one is "no such
            # file", not an unknown built-in; a pickle gets its refusal
            return _checkpoint(path, system)
        if ":" in value:
            close = _builtin_typo(kind, search_path)
            if close is not None:
                raise PolicyError(
                    f"{where or 'policy'}: {short(value)} is neither a built-in policy nor a "
                    f"factory (no module {kind!r}); did you mean the built-in "
                    f"'{close}:{value.partition(':')[2]}'? Built-ins: "
                    f"{', '.join(BUILTIN_POLICIES)}.")
            return _factory(value, system, search_path, params, where or "policy factory",
                            output)
        return _builtin(value, system, where)
    got = _in_memory(value, system, where or "policy", output)
    if got is None:
        raise PolicyError(
            f"{where or 'policy'}: cannot use {type(value).__name__} as a policy; pass a "
            "built-in name, a checkpoint path, a factory 'module:callable', an object with "
            "prob_d1(obs) or action_probs(obs), a stable-baselines3 model, a torch module, a "
            "table (G, K) or a function f(obs)." + _estimator_hint(value) + _table_hint(value))
    return got


def _table_hint(obj: Any) -> str:
    """For a list or a pandas object (a policy table built in a notebook): the numpy array
    a table must be, read by position (so its rows and columns must be in order first)."""
    if not (isinstance(obj, (list, tuple)) or type(obj).__module__.startswith("pandas")):
        return ""
    return (" A policy table is a numpy array pi(d1 | x, s) of shape (G, K) or (T, G, K), "
            "rows in group order and columns in level order, read by position: pass "
            "np.asarray(table) (a DataFrame's rows and columns put in the system's group "
            "and level order first, e.g. df.loc[groups, levels].to_numpy()).")


def _estimator_hint(obj: Any) -> str:
    """For an object with ``predict_proba`` / ``predict`` (a scikit-learn estimator) but no
    policy method: how to wrap it (its classes may be a score's, not the decisions)."""
    if not (callable(getattr(obj, "predict_proba", None)) or callable(getattr(obj, "predict", None))):
        return ""
    return (f" {type(obj).__name__} has predict_proba/predict (a scikit-learn model?): "
            "causalfair cannot tell whether its classes are the decisions or a score, so wrap "
            "it in a function of the observation, e.g. lambda obs: (model.predict_proba("
            "obs.features)[:, 1] >= 0.6).astype(float) for P(d1) (rows of (n, A) action "
            "probabilities with more actions; docs/own-system.md, \"A scikit-learn model\").")


@check_keywords
def as_policy(obj: Any, system: Any = None, *, output: str | None = None,
              vecnormalize: Any = None) -> Policy:
    """The policy object :func:`resolve` gives for ``obj`` (a Policy is returned as it is,
    a user's behind its guard): what the engines evaluate. ``output``: how a torch
    module's outputs are read (``"logits"``, ``"probs"``, ``"q"``: Q-values, acted on
    greedily). ``vecnormalize``: a stable-baselines3 model's observation statistics (a
    ``vecnormalize.pkl`` path, a ``VecNormalize`` object, or ``"none"``)."""
    return resolve(obj, system, output=output, vecnormalize=vecnormalize).policy

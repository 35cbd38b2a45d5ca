"""The :class:`System`: everything the engines need to know about a decision process.

A system is the unit causalfair audits, gates and repairs: a population split into
groups, a set of decisions (with the *baseline* action that pi0 takes and the pi^PS fork
uses), what a policy observes, the qualification gain and the reward, a default horizon,
the causal structure the temporal graph is drawn from, and one or both of

- a **simulator** (the batch protocol of :mod:`causalfair.systems.simulator`): Monte Carlo always
  applies;
- a **tabular model** (:class:`~causalfair.model.TabularModel`): the exact engine, the
  frontier LP and the exact benefit table apply.

Systems are usually made from the registry (:func:`causalfair.systems.make`); a user's
own simulator or tabular model becomes one with :func:`as_system`.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair._validation import check_keywords, check_labels, check_names, check_pair_names
from causalfair.errors import ModelError, SystemError_, call_user, short
from causalfair.graph import check_structure
from causalfair.model import CausalStructure, TabularModel, check_lambda_eps, departed_indices
from causalfair.systems.contract import check_protocol, check_protocol_coupled, guard_simulator
from causalfair.systems.tabular_sim import TabularSimulator

__all__ = ["DecisionSet", "Gain", "System", "as_system", "ENGINES"]

#: Engines a system can support.
ENGINES = ("exact", "mc", "frontier")

_PROTOCOL = ("reset", "observe", "draw_noise", "step")


@dataclass(frozen=True)
class DecisionSet:
    """The decisions a policy takes for one unit at one step: actions ``0..A-1``.

    ``labels``: one name per action, as reports print them (e.g. ``("deny", "approve")``).
    ``baseline``: the action a0 of the baseline policy pi0; the pi^PS fork scores each
    step's gain under it. It may lie outside ``allowed`` (e.g. "no attention anywhere"
    when the deployed policy must spend its budget).
    ``allowed``: the actions the deployed policy may choose (None: all of them); every
    engine refuses a policy that puts more than 1e-9 on another action
    (:func:`causalfair.policies.grid.allowed_only`), while pi0 and pi^PS may take the
    baseline.
    ``budget``: at most this many non-baseline actions per replica and step (None: no
    budget). Budget 1 on coupled units: the Monte Carlo engine draws one categorical per
    replica, unit v taking action a with the policy's probability for (v, a) (a replica's
    non-baseline probabilities sum to at most 1; "nobody" takes the rest). Other budgets
    are the simulator's to enforce (give None).
    """

    labels: tuple[str, ...] = ("d0", "d1")
    baseline: int = 0
    allowed: tuple[int, ...] | None = None
    budget: int | None = None

    def __post_init__(self) -> None:
        labels = tuple(str(x) for x in self.labels)
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise SystemError_(
                f"decisions.labels: need at least 2 distinct action labels, got {short(self.labels)}."
            )
        check_labels("decisions.labels", labels, SystemError_)
        object.__setattr__(self, "labels", labels)
        A = len(labels)
        if isinstance(self.baseline, bool) or not isinstance(self.baseline, (int, np.integer)) \
                or not 0 <= int(self.baseline) < A:
            raise SystemError_(
                f"decisions.baseline: must be an action index in [0, {A}), got {short(self.baseline)}."
            )
        object.__setattr__(self, "baseline", int(self.baseline))
        if self.allowed is not None:
            allowed = tuple(int(a) for a in self.allowed)
            if not allowed or any(not 0 <= a < A for a in allowed) or len(set(allowed)) != len(allowed):
                raise SystemError_(
                    f"decisions.allowed: must be distinct action indices in [0, {A}), got "
                    f"{short(self.allowed)}."
                )
            object.__setattr__(self, "allowed", allowed)
        if self.budget is not None and (isinstance(self.budget, bool) or not isinstance(
                self.budget, (int, np.integer)) or self.budget < 0):
            raise SystemError_(f"decisions.budget: must be an integer >= 0 or None, got {short(self.budget)}.")

    @property
    def n(self) -> int:
        """Number of actions A."""
        return len(self.labels)

    def to_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "baseline": self.baseline,
                "allowed": None if self.allowed is None else list(self.allowed),
                "budget": self.budget}


@dataclass(frozen=True)
class Gain:
    """What the gain measures: ``name`` (lending's "qualification gain"; a system that
    declares none: the neutral "gain", the words reports use), ``unit`` and a sentence;
    and ``lambda_eps``, the benefit resolution of Lambda in these units where a paper pins
    it (None: scale-free, ``eps = "auto"``; causalfair.engines.benefit)."""

    name: str = "gain"
    unit: str = "gain units"
    description: str = ""
    lambda_eps: float | None = None

    def __post_init__(self) -> None:  # refused here as where Lambda reads it
        object.__setattr__(self, "lambda_eps", check_lambda_eps(self.lambda_eps))


def _check_product_order(id_: str, groups: tuple[str, ...],
                         atts: Mapping[str, tuple[str, ...]]) -> None:
    """Refuse groups named from their attribute values ("F/16-24") but listed out of the
    product order ``group_attributes`` pools them in (the first attribute slowest): a
    marginal would pool the wrong groups. Names that do not hold a value of every
    attribute are not checked (their order cannot be read from them)."""
    combos = list(itertools.product(*atts.values()))
    if not all(any(v in name for v in vals) for name in groups for vals in atts.values()):
        return
    for name, combo in zip(groups, combos, strict=True):
        missing = [v for v in combo if v not in name]
        if missing:
            spelled = [next((n for n in groups if all(v in n for v in c)), None) for c in combos]
            order = (f": {', '.join(spelled)}"
                     if None not in spelled and len(set(spelled)) == len(spelled) else "")
            raise SystemError_(
                f"system {id_!r}: group_attributes: group {name!r} is "
                f"{dict(zip(atts, combo, strict=True))} in the product order of "
                f"{', '.join(atts)} (the first attribute slowest), but its name lacks "
                f"{', '.join(map(repr, missing))}: a marginal would pool it with the wrong "
                f"groups; list the groups in product order{order}.")


def _call_factory(factory: Any, what: str) -> Any:
    """A simulator from ``System.simulator``: a class or a zero-argument factory is
    called (as user code, :func:`~causalfair.errors.call_user`); an object that already
    has the protocol methods is used as it is."""
    if isinstance(factory, type) or (callable(factory) and not all(
            callable(getattr(factory, m, None)) for m in _PROTOCOL)):
        return call_user(what, factory)
    return factory


@dataclass(frozen=True, kw_only=True, eq=False)
class System:
    """A sequential decision process causalfair can audit.

    Fields
    ------
    id : str
        The id it was made from ("lending-1", "mypkg.sims:make_clinic", ...).
    groups : tuple of str
        Group names; index 0 is s+ (advantaged) where there are two.
    decisions : DecisionSet
        Actions 0..A-1 and the baseline action.
    features : tuple of str or None
        Names of the columns of ``Observation.features`` (None: the simulator observes
        no feature matrix).
    levels : tuple of str or None
        Labels of the discrete qualification levels observations carry (None: no levels).
    gain : Gain
        What the qualification gain measures.
    reward : str
        Name of the decision maker's reward (the utility).
    horizon : int
        Default number of decision epochs T.
    structure : CausalStructure
        The causal structure the temporal graph is drawn from.
    simulator : callable or simulator or None
        A zero-argument factory of a fresh simulator (or a simulator object); built from
        ``tabular`` when omitted.
    tabular : TabularModel or None
        The exact model, when one exists.
    group_weights : array or None
        P(s); when omitted the tabular model's (which is set to the system's when given),
        else uniform.
    units_per_replica : int
        Units simulated together in one replica (1: independent individuals; > 1: the
        units of one world interact, e.g. the nodes of a contact graph).
    roles : mapping
        What built-in policies and notions read: ``{"score": "p_repay"}`` (a table of the
        tabular model's ``aux``), ``{"qualified": "repay"}`` (a key of ``StepResult.info``).
    params : mapping
        The keyword arguments the system was made with (recorded in reports).
    description : str
    train_defaults : mapping
        Published hyper-parameters of the fair-RL methods on this system (TrainConfig
        fields, e.g. ``{"appo_omega": 0.05}``); the generic trainer uses them for fields
        left at TrainConfig's defaults (docs/training.md).
    group_attributes : mapping or None
        When the groups are the intersections of two or more sensitive attributes:
        attribute -> its values, the groups being their product in order (e.g.
        ``{"race": ("A", "B"), "sex": ("F", "M")}`` for groups A/F, A/M, B/F, B/M); the audit
        then adds per-attribute marginal comparisons (:mod:`causalfair.engines.groups`).
    departed : tuple of int or None
        Opt-in: the levels at which an individual has LEFT the population (discharged,
        deceased), absorbing with gain 0 under every action. Lambda's P(x | s) is then the
        visitation distribution of those present (both engines) and the selection rates
        count only those present (docs/own-system.md, "Individuals who leave"). Checked:
        indices of ``levels``; with a tabular model, absorbing there (it is copied to the
        model's ``departed_levels``; a model that declares them gives them to the system);
        the contract check (:meth:`check_contract`) refuses a simulator that moves a
        departed unit or gives it a gain. None (default): every level counts.
    """

    id: str
    groups: tuple[str, ...]
    decisions: DecisionSet = field(default_factory=DecisionSet)
    features: tuple[str, ...] | None = None
    levels: tuple[str, ...] | None = None
    gain: Gain = field(default_factory=Gain)
    reward: str = "utility"
    horizon: int = 20
    structure: CausalStructure = field(default_factory=CausalStructure)
    simulator: Any = None
    tabular: TabularModel | None = None
    group_weights: np.ndarray | None = None
    units_per_replica: int = 1
    roles: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    train_defaults: Mapping[str, Any] = field(default_factory=dict)
    group_attributes: Mapping[str, tuple[str, ...]] | None = None
    departed: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.id, str) or not self.id.strip():
            raise SystemError_(f"system id: must be a non-empty string, got {short(self.id)}.")
        if isinstance(self.groups, (str, bytes)):  # its letters are not the groups
            raise SystemError_(
                f"system {self.id!r}: groups must be a sequence of names, got the string "
                f"{short(self.groups)}; give one name per group, e.g. groups=('A', 'B').")
        try:
            groups = tuple(str(g) for g in self.groups)
        except TypeError:
            raise SystemError_(
                f"system {self.id!r}: groups must be a sequence of names, got {short(self.groups)}."
            ) from None
        if len(groups) < 2 or len(set(groups)) != len(groups):
            raise SystemError_(
                f"system {self.id!r}: groups must be at least 2 distinct names, got {short(groups)}."
            )
        check_names(f"system {self.id!r}: groups", groups, SystemError_)
        set_(self, "groups", groups)
        if self.group_attributes is not None:
            atts = {str(k): tuple(str(v) for v in vals) for k, vals in self.group_attributes.items()}
            if len(atts) < 2 or math.prod(len(v) for v in atts.values()) != len(groups) \
                    or any(len(v) < 2 for v in atts.values()):
                raise SystemError_(
                    f"system {self.id!r}: group_attributes {short(atts)} must be at least two "
                    f"attributes (two values or more each) whose product is the {len(groups)} "
                    "groups, in order.")
            for att, vals in atts.items():  # their pairs "a-b" key the marginal tables
                check_pair_names(f"system {self.id!r}: group_attributes {att!r}", vals,
                                 SystemError_)
            _check_product_order(self.id, groups, atts)
            set_(self, "group_attributes", atts)
        if not isinstance(self.decisions, DecisionSet):
            raise SystemError_(
                f"system {self.id!r}: decisions must be a causalfair.systems.DecisionSet, got "
                f"{type(self.decisions).__name__}."
            )
        for name in ("features", "levels"):
            val = getattr(self, name)
            if val is not None:
                if isinstance(val, (str, bytes)) or not hasattr(val, "__iter__"):
                    raise SystemError_(
                        f"system {self.id!r}: {name} must be a sequence of names, got {short(val)}.")
                val = tuple(str(v) for v in val)
                if not val or len(set(val)) != len(val):
                    raise SystemError_(
                        f"system {self.id!r}: {name} must be distinct names, got {short(val)}.")
                set_(self, name, val)
        if isinstance(self.horizon, bool) or not isinstance(self.horizon, (int, np.integer)) \
                or self.horizon < 1:
            raise SystemError_(
                f"system {self.id!r}: horizon must be an integer >= 1, got {short(self.horizon)}.")
        set_(self, "horizon", int(self.horizon))
        if isinstance(self.units_per_replica, bool) or not isinstance(
                self.units_per_replica, (int, np.integer)) or self.units_per_replica < 1:
            raise SystemError_(
                f"system {self.id!r}: units_per_replica must be an integer >= 1, got "
                f"{short(self.units_per_replica)}.")
        set_(self, "units_per_replica", int(self.units_per_replica))
        if not isinstance(self.structure, CausalStructure):
            raise SystemError_(
                f"system {self.id!r}: structure must be a causalfair.CausalStructure, got "
                f"{type(self.structure).__name__}.")
        G = len(groups)
        given = self.group_weights is not None
        if self.group_weights is None:
            w = np.full(G, 1.0 / G)
        else:
            w = np.asarray(self.group_weights, dtype=np.float64)
            if w.shape != (G,) or not np.isfinite(w).all() or (w < 0).any() \
                    or abs(w.sum() - 1.0) > 1e-9:
                raise SystemError_(
                    f"system {self.id!r}: group_weights must be {G} probabilities summing to 1, "
                    f"got {short(self.group_weights)}.")
        w.setflags(write=False)
        set_(self, "group_weights", w)
        set_(self, "roles", dict(self.roles))
        set_(self, "params", dict(self.params))
        tab = self.tabular
        if tab is not None:
            if not isinstance(tab, TabularModel):
                raise SystemError_(
                    f"system {self.id!r}: tabular must be a causalfair.TabularModel, got "
                    f"{type(tab).__name__}.")
            if tab.n_groups != G:
                raise SystemError_(
                    f"system {self.id!r}: the tabular model has {tab.n_groups} groups, the system "
                    f"{G} ({', '.join(groups)}).")
            if tab.n_actions != self.decisions.n or tab.baseline != self.decisions.baseline:
                raise SystemError_(
                    f"system {self.id!r}: the tabular model has {tab.n_actions} actions with "
                    f"baseline {tab.baseline}, the system's decisions {self.decisions.n} with "
                    f"baseline {self.decisions.baseline}.")
            if self.levels is None:
                set_(self, "levels", tuple(tab.level_labels))
            elif len(self.levels) != tab.n_levels:
                raise SystemError_(
                    f"system {self.id!r}: {len(self.levels)} level labels, the tabular model has "
                    f"{tab.n_levels} levels.")
            named = {"group_names": groups, "level_labels": self.levels,
                     "action_labels": self.decisions.labels}
            named = {k: v for k, v in named.items()
                     if tuple(getattr(tab, k) or (f"d{i}" for i in range(tab.n_actions))) != v}
            if not given:
                # P(s) of every engine (the exact one reads the model's, Monte Carlo the
                # system's): the system's when given, else the model's
                w = np.array(tab.group_weights, dtype=np.float64)
                w.setflags(write=False)
                set_(self, "group_weights", w)
            elif not np.array_equal(np.asarray(tab.group_weights), w):
                named["group_weights"] = w
            if tab.allowed != self.decisions.allowed:  # the exact engine's policy_table checks
                named["allowed"] = self.decisions.allowed
            if named:  # the exact engine's results name what the system names
                tab = tab.with_(**named)
                set_(self, "tabular", tab)
            if self.simulator is None:
                set_(self, "simulator", _tabular_simulator_factory(tab))
            check_structure(self.structure, tab, where=f"system {self.id!r}: structure")
        if self.simulator is None:
            raise SystemError_(
                f"system {self.id!r}: needs a simulator or a tabular model (neither given).")
        self._check_departed()

    def _check_departed(self) -> None:
        """``departed``: level indices, distinct, leaving one level present; agreed with the
        tabular model's ``departed_levels`` (which checks that they are absorbing)."""
        set_ = object.__setattr__
        tab, departed = self.tabular, self.departed
        if departed is None and tab is not None and tab.departed_levels:
            departed = tab.departed_levels
        if departed is None:
            return
        fix = ("give the indices of the levels at which an individual has left (absorbing, "
               "gain 0 under every action), or departed=None (docs/own-system.md, "
               "\"Individuals who leave\").")
        if self.levels is None:
            raise SystemError_(f"system {self.id!r}: departed={short(departed)} needs levels "
                               f"(the system declares none); {fix}")
        idx = departed_indices(departed, len(self.levels), field=f"system {self.id!r}: departed",
                               error=SystemError_, fix=fix, labels=self.levels)
        set_(self, "departed", idx)
        if tab is not None and tab.departed_levels != idx:
            if tab.departed_levels is not None:
                raise SystemError_(f"system {self.id!r}: departed={idx!r} but its tabular model "
                                   f"declares departed_levels={tab.departed_levels!r}; give "
                                   "one of them, or the same in both.")
            try:
                set_(self, "tabular", tab.with_(departed_levels=idx))
            except ModelError as exc:
                raise SystemError_(f"system {self.id!r}: departed={idx!r}: {exc}") from None

    # ----------------------------------------------------------------- sizes
    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def n_actions(self) -> int:
        return self.decisions.n

    @property
    def n_levels(self) -> int | None:
        return None if self.levels is None else len(self.levels)

    @property
    def engines(self) -> frozenset[str]:
        """Engines that apply: ``mc`` always; ``exact`` and ``frontier`` with a tabular
        model of independent units (the frontier LP handles two actions)."""
        out = {"mc"}
        if self.tabular is not None and self.units_per_replica == 1:
            out.add("exact")
            if self.n_actions == 2:
                out.add("frontier")
        return frozenset(out)

    def make_simulator(self) -> Any:
        """A fresh simulator object (the batch protocol of :mod:`causalfair.systems.simulator`);
        one of the user's is wrapped by :func:`guard_simulator`, so every engine that
        gets its simulator here checks every call, and the first one a system hands out is
        checked against the whole contract (:meth:`check_contract`)."""
        sim = _call_factory(self.simulator, f"system {self.id!r}: simulator factory")
        missing = [m for m in _PROTOCOL if not callable(getattr(sim, m, None))]
        if missing:
            raise SystemError_(
                f"system {self.id!r}: its simulator factory returned {type(sim).__name__}, which "
                f"lacks {', '.join(missing)}; a simulator needs reset, observe, draw_noise and "
                "step (docs/simulators.md).")
        self._check_sizes(sim)
        guarded = guard_simulator(sim, n_levels=self.n_levels, features=self.features)
        if guarded is not sim:  # a simulator of the user's (causalfair's own are not guarded)
            self._check_weights(sim)
            self._check_declared(sim)
        if guarded is not sim and not self.__dict__.get("_contract_checked"):
            if self.units_per_replica == 1:
                check_protocol(guarded, n=64, horizon=min(self.horizon, 3), seed=0,
                               n_actions=self.n_actions, features=self.features,
                               tabular=self.tabular, departed=self.departed)
            else:  # coupled units: replicas of units_per_replica units
                check_protocol_coupled(
                    guarded, units=self.units_per_replica, horizon=min(self.horizon, 3),
                    n_actions=self.n_actions, baseline=self.decisions.baseline,
                    budget=self.decisions.budget, features=self.features,
                    departed=self.departed)
            object.__setattr__(self, "_contract_checked", True)
        return guarded

    def _check_sizes(self, sim: Any) -> None:
        """Refuse a simulator whose declared ``n_groups`` / ``n_actions`` differ from the
        system's groups and decisions: the engines size their arrays by the simulator's
        and read the system's names, so a mismatch would crash or silently audit another
        action set."""
        for attr, have, names, fix in (
                ("n_groups", self.n_groups, self.groups,
                 "one name per group (the simulator's group_names, or System(groups=...))"),
                ("n_actions", self.n_actions, self.decisions.labels,
                 "one label per action (the simulator's action_labels, or "
                 "DecisionSet(labels=...))")):
            got = getattr(sim, attr, None)
            if isinstance(got, (int, np.integer)) and not isinstance(got, bool) \
                    and int(got) != have:
                raise SystemError_(
                    f"system {self.id!r}: its simulator {type(sim).__name__} has {attr} = "
                    f"{int(got)}, but the system has {have} ({', '.join(map(str, names))}); "
                    f"give {fix}.")

    def _check_declared(self, sim: Any) -> None:
        """Refuse a user's simulator whose declared names, baseline or level count contradict
        the system's: the engines read the system's (reports name its groups and actions,
        pi0 takes its baseline, Lambda sizes its cells by its levels), so a contradiction
        would mislabel the groups, audit another pi0 or crash after the run."""
        name = type(sim).__name__
        for attr, have, what in (("group_names", self.groups, "groups"),
                                 ("action_labels", self.decisions.labels, "actions"),
                                 ("feature_names", self.features, "features")):
            got = getattr(sim, attr, None)
            if got is None or have is None or isinstance(got, (str, bytes)):
                continue
            try:
                got = tuple(str(x) for x in got)
            except TypeError:
                continue
            if got != tuple(have):
                raise SystemError_(
                    f"system {self.id!r}: its simulator {name} has {attr} = "
                    f"({', '.join(got)}), but the system's {what} are ({', '.join(have)}); "
                    f"the engines read the system's, so give the same names in the same "
                    f"order (or drop the simulator's {attr}).")
        base = getattr(sim, "baseline", None)
        if isinstance(base, (int, np.integer)) and not isinstance(base, bool) \
                and int(base) != self.decisions.baseline:
            raise SystemError_(
                f"system {self.id!r}: its simulator {name} has baseline = {int(base)}, but the "
                f"system's DecisionSet has baseline={self.decisions.baseline} "
                f"({self.decisions.labels[self.decisions.baseline]!r}); pi0 takes the "
                "system's, so give DecisionSet(baseline=...) the simulator's (or drop the "
                "simulator's baseline).")
        K = getattr(sim, "n_levels", None)
        if isinstance(K, (int, np.integer)) and not isinstance(K, bool) \
                and self.levels is not None and int(K) != len(self.levels):
            raise SystemError_(
                f"system {self.id!r}: its simulator {name} has n_levels = {int(K)}, but the "
                f"system has {len(self.levels)} levels ({', '.join(self.levels)}); give "
                "System(levels=...) one label per level of the simulator.")

    def _check_weights(self, sim: Any) -> None:
        """Refuse a user's simulator whose declared ``group_weights`` differ from the
        system's: the population-weighted utility reads the system's, so the simulator's
        would be silently ignored."""
        got = getattr(sim, "group_weights", None)
        if got is not None:
            try:
                w = np.asarray(got, dtype=np.float64)
            except (TypeError, ValueError):
                w = np.full(1, np.nan)
            if w.shape != self.group_weights.shape or not np.allclose(w, self.group_weights,
                                                                    rtol=0.0, atol=1e-9):
                have = ", ".join(f"{g} {x:.6g}" for g, x in zip(self.groups, self.group_weights,
                                                                 strict=True))
                shown = (", ".join(f"{x:.6g}" for x in w.ravel()) if np.isfinite(w).all()
                         else short(got))
                raise SystemError_(
                    f"system {self.id!r}: its simulator {type(sim).__name__} has group_weights = "
                    f"[{shown}], but the system has {have} (uniform unless given, or the "
                    "tabular model's); the population-weighted utility reads the system's, so give "
                    "System(group_weights=...) the simulator's (or drop the simulator's).")

    def check_contract(self) -> None:
        """Check a user's simulator against the simulator contract once per system
        (:func:`causalfair.systems.contract.check_protocol`: 64 units per group over up to 3
        steps; coupled units: :func:`~causalfair.systems.contract.check_protocol_coupled`, 8
        replicas; docs/simulators.md), raising the error that names the broken method: what
        every door runs before it uses the system. causalfair's own simulators are checked
        on every call only (:func:`~causalfair.systems.contract.guard_simulator`)."""
        self.make_simulator()

    def with_(self, **changes: Any) -> System:
        """A copy with some fields replaced (re-validated). ``departed=None`` clears the
        declaration on the copy's tabular model too (its ``departed_levels``; else the model
        would give them back)."""
        kwargs = {f: getattr(self, f) for f in self.__dataclass_fields__}
        kwargs.update(changes)
        tab = kwargs.get("tabular")
        if "departed" in changes and changes["departed"] is None \
                and isinstance(tab, TabularModel) and tab.departed_levels is not None:
            kwargs["tabular"] = tab.with_(departed_levels=None)
        return System(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """A JSON description (what reports and ``causalfair systems --json`` print)."""
        return {
            "id": self.id,
            "groups": list(self.groups),
            "group_weights": [float(x) for x in self.group_weights],
            "decisions": self.decisions.to_dict(),
            "features": None if self.features is None else list(self.features),
            "levels": None if self.levels is None else list(self.levels),
            "gain": {"name": self.gain.name, "unit": self.gain.unit},
            "reward": self.reward,
            "horizon": self.horizon,
            "units_per_replica": self.units_per_replica,
            "engines": sorted(self.engines),
            "roles": dict(self.roles),
            "params": {k: _jsonable(v) for k, v in self.params.items()},
            "description": self.description,
            **({"group_attributes": {k: list(v) for k, v in self.group_attributes.items()}}
               if self.group_attributes else {}),
            **({"departed": [self.levels[k] for k in self.departed]} if self.departed else {}),
        }

    def __repr__(self) -> str:
        return (f"System(id={self.id!r}, groups={list(self.groups)}, actions="
                f"{list(self.decisions.labels)}, baseline={self.decisions.baseline}, "
                f"engines={sorted(self.engines)})")


# a mistyped keyword: one error naming it and the fix (check_keywords)
System.__init__ = check_keywords(System.__init__, name="System")  # type: ignore


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


class _TabularSimulatorFactory:
    """Picklable zero-argument factory of a TabularSimulator for one model."""

    def __init__(self, model: TabularModel):
        self.model = model

    def __call__(self) -> Any:
        return TabularSimulator(self.model)


def _tabular_simulator_factory(model: TabularModel) -> Callable[[], Any]:
    return _TabularSimulatorFactory(model)


# --------------------------------------------------------------------- wrapping
def _from_simulator(sim: Any, sid: str, params: Mapping[str, Any]) -> System:
    """Wrap a 4-method simulator with defaults: two actions, baseline 0, group names from
    the simulator (``group_names``, else s0, s1, ...)."""
    n_groups = getattr(sim, "n_groups", None)
    if isinstance(n_groups, bool) or not isinstance(n_groups, (int, np.integer)) or n_groups < 2:
        raise SystemError_(
            f"system {sid!r}: the simulator {type(sim).__name__} needs an integer attribute "
            f"n_groups >= 2, got {short(n_groups)}.")
    names = getattr(sim, "group_names", None)
    if names is None:
        names = ("s+", "s-") if n_groups == 2 else tuple(f"s{i}" for i in range(n_groups))
    labels = getattr(sim, "action_labels", None)
    if labels is None:
        labels = tuple(f"d{i}" for i in range(int(getattr(sim, "n_actions", 2))))
    decisions = DecisionSet(labels=tuple(labels), baseline=int(getattr(sim, "baseline", 0)))
    K = getattr(sim, "n_levels", None)
    levels = None
    if isinstance(K, (int, np.integer)) and not isinstance(K, bool):
        levels = tuple(getattr(sim, "level_labels", None) or (str(i + 1) for i in range(int(K))))
    structure = getattr(sim, "structure", None)
    if callable(structure):
        structure = structure()
    if structure is not None and not isinstance(structure, CausalStructure):
        raise SystemError_(  # a declaration silently replaced by the default is worse
            f"system {sid!r}: the simulator's structure must be a causalfair.CausalStructure, "
            f"got {short(structure)}; declare it as structure = cf.CausalStructure(s_to_x0=..., "
            "s_to_transition=..., exogenous={...}) (docs/graph.md).")
    model = getattr(sim, "model", None)
    tab = getattr(model, "tabular", None) if model is not None else None
    if tab is not None and not isinstance(tab, TabularModel):
        tab = None
    return System(
        id=sid,
        groups=tuple(names),
        decisions=decisions,
        features=getattr(sim, "feature_names", None),
        levels=levels,
        horizon=int(getattr(sim, "horizon", 20)),
        structure=structure if isinstance(structure, CausalStructure) else CausalStructure(),
        simulator=sim,
        tabular=tab,
        group_weights=getattr(sim, "group_weights", None),
        units_per_replica=int(getattr(sim, "units_per_replica", 1)),
        roles=dict(getattr(sim, "roles", {}) or {}),
        params=params,
        description=(inspect.getdoc(type(sim)) or "").split("\n")[0],
    )


def _from_tabular(model: TabularModel, sid: str, params: Mapping[str, Any]) -> System:
    labels = ("d0", "d1") if model.n_actions == 2 else tuple(f"d{i}" for i in range(model.n_actions))
    roles = {"score": "p_repay"} if "p_repay" in model.aux else {}
    return System(
        id=sid,
        groups=tuple(model.group_names),
        decisions=DecisionSet(labels=model.action_labels or labels, baseline=model.baseline),
        levels=tuple(model.level_labels),
        features=model.feature_names if model.features is not None else None,
        gain=Gain(lambda_eps=model.lambda_eps),  # what the model declares (None: "auto")
        structure=model.structure,
        tabular=model,
        group_weights=model.group_weights,
        roles=roles,
        params=params,
        description=f"tabular model {model.name!r}",
    )


@check_keywords
def as_system(obj: Any, *, id: str | None = None, params: Mapping[str, Any] | None = None,
              where: str = "") -> System:
    """A :class:`System` from what a factory returned: a System (as is), a
    :class:`~causalfair.model.TabularModel`, an object with a ``to_system(id=, params=)``
    method (a lending model has one), or any object implementing the 4-method
    simulator protocol (wrapped with defaults: two actions, baseline 0, group names
    from the simulator)."""
    params = dict(params or {})
    label = where or (f"system {id!r}" if id else "system")
    if isinstance(obj, System):
        return obj
    sid = id or getattr(obj, "name", None) or type(obj).__name__
    if isinstance(obj, TabularModel):
        return _from_tabular(obj, sid, params)
    to_system = getattr(obj, "to_system", None)
    if callable(to_system):  # e.g. a LendingModel knows its System
        system = call_user(f"{label}: {type(obj).__name__}.to_system", to_system, id=sid,
                           params=params)
        if not isinstance(system, System):
            raise SystemError_(f"{label}: {type(obj).__name__}.to_system() returned "
                               f"{type(system).__name__}, not a causalfair System.")
        return system
    if all(callable(getattr(obj, m, None)) for m in _PROTOCOL):
        return _from_simulator(obj, sid, params)
    missing = [m for m in _PROTOCOL if not callable(getattr(obj, m, None))]
    raise SystemError_(
        f"{label}: {'its factory returned' if where else 'got'} {type(obj).__name__} "
        f"{short(obj)}, which is neither a causalfair "
        f"System, a TabularModel nor a simulator (it lacks {', '.join(missing)}); give (or "
        "return from a factory) a System, a TabularModel, or an object with n_groups, "
        "reset, observe, draw_noise and step (docs/simulators.md; a registered name: "
        "cf.systems.make(name)).")


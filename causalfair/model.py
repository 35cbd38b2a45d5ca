"""Tabular model of a sequential decision process (method.md section 1).

A :class:`TabularModel` holds everything the exact engine needs for ``G`` groups,
``K`` discrete qualification levels and ``A >= 2`` decisions (two by default: ``d0``
deny, ``d1`` approve), one of which is the *baseline* action that pi0 takes:

- ``kernel[s, d, x, x']`` = P(x' | x, d, s)
- ``initial[s, x]`` = P(x_0 = x | s)
- ``potential[s, x]`` = f^s(x); the qualification gain is g^s(x, x') = f^s(x') - f^s(x)
- ``reward[s, d, x]`` = expected decision-maker reward r(x, d) for group s
- ``group_weights[s]`` = P(s)

Gains are stored as potentials, which makes them additive over intervals by
construction. A user who has a gain *matrix* instead calls :func:`potential_from_gain`,
which checks additivity and refuses a non-additive matrix, naming the offending triple.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._validation import check_keywords, check_pair_names, finite
from causalfair.errors import InputError, ModelError, short

__all__ = [
    "ModelError",
    "TabularModel",
    "CausalStructure",
    "potential_from_gain",
    "PROB_TOL",
]

#: Tolerance for "rows sum to one" checks.
PROB_TOL = 1e-9




def check_lambda_eps(eps: Any) -> float | None:
    """A declared benefit resolution ``lambda_eps`` (a TabularModel's, a System's
    ``Gain``'s) as a float > 0, or None (the scale-free "auto"); else the one ModelError,
    given at construction and where :func:`causalfair.engines.benefit.eps_for` reads it."""
    if eps is None:
        return None
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) \
            or not np.isfinite(eps) or eps <= 0:
        raise ModelError(f"lambda_eps: must be a number > 0 in the gain's units, or "
                         f"None for the scale-free \"auto\", got {eps!r:.40}.")
    return float(eps)


_RESERVED_NAMES = frozenset({"S", "X", "D", "G", "R"})
_NAME_RE = re.compile(r"[A-Za-z_](?:[A-Za-z0-9_]*[A-Za-z_])?")
EXOGENOUS_NAME_ERROR = (
    "structure.exogenous: name {value!r} cannot name a node; use letters, digits and "
    "underscores, not ending in a digit, and none of 'S', 'X', 'D', 'G', 'R' "
    "(e.g. 'Y' for repayment, 'U' for drift)."
)
EXOGENOUS_FLAGS_ERROR = (
    "structure.exogenous[{name!r}]: expected a pair (depends_on_s, affects_reward) of "
    "booleans, got {value!r}."
)


def exogenous_nodes(structure: Any) -> list[tuple[str, bool, bool]]:
    """Validated ``(name, depends_on_s, affects_reward)`` of a :class:`CausalStructure` in
    declaration order (and its two flags checked to be booleans): the one check of a
    declared structure, at construction and where the temporal graph reads it."""
    for key in ("s_to_x0", "s_to_transition"):
        value = getattr(structure, key)
        if value not in (True, False):
            raise InputError(f"structure.{key}: expected True or False, got {value!r}; "
                             "False only where that mechanism ignores the group.")
    try:
        exo = dict(structure.exogenous)
    except (TypeError, ValueError):
        raise InputError("structure.exogenous: expected a mapping name -> (depends_on_s, "
                         f"affects_reward), got {short(structure.exogenous, 60)}.") from None
    out = []
    for name, flags in exo.items():
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name in _RESERVED_NAMES:
            raise InputError(EXOGENOUS_NAME_ERROR.format(value=name))
        try:
            dep, rew = flags
        except (TypeError, ValueError):
            raise InputError(EXOGENOUS_FLAGS_ERROR.format(name=name, value=flags)) from None
        if dep not in (True, False) or rew not in (True, False):
            raise InputError(EXOGENOUS_FLAGS_ERROR.format(name=name, value=flags))
        out.append((name, bool(dep), bool(rew)))
    return out


@dataclass(frozen=True)
class CausalStructure:
    """What a simulator declares about its causal structure, for the temporal graph.

    ``exogenous`` maps the name of each per-step exogenous node (``"Y"`` repayment,
    ``"U"`` drift, ...) to a pair ``(depends_on_s, affects_reward)``.
    ``s_to_x0``: the initial state depends on the group.
    ``s_to_transition``: the transition depends on S directly (other than through an
    exogenous node).
    """

    exogenous: Mapping[str, tuple[bool, bool]] = field(default_factory=dict)
    s_to_x0: bool = True
    s_to_transition: bool = True

    def __post_init__(self) -> None:  # refused here as where the graph reads it
        exogenous_nodes(self)


def _as_float_array(name: str, value: Any, ndim: int, axes: str = "") -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{name}: cannot convert to a float array ({exc}).") from None
    if arr.ndim != ndim:
        raise ModelError(
            f"{name}: expected a {ndim}-d array{' ' + axes if axes else ''}, got shape {arr.shape}."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ModelError(
            f"{name}: contains NaN or inf at index {idx} (value {arr[idx]!r}); "
            "every entry must be a finite number."
        )
    arr.setflags(write=False)
    return arr


def _check_distribution(name: str, arr: np.ndarray, labels: str) -> None:
    neg = arr < 0
    if neg.any():
        idx = tuple(int(i) for i in np.argwhere(neg)[0])
        raise ModelError(
            f"{name}: negative probability {arr[idx]:.6g} at index {idx}; "
            "probabilities must be >= 0."
        )
    sums = arr.sum(axis=-1)
    off = np.abs(sums - 1.0) > PROB_TOL
    if off.any():
        idx = tuple(int(i) for i in np.argwhere(off)[0])
        raise ModelError(
            f"{name}: the distribution at {labels} = {idx} sums to {sums[idx]:.12g}, "
            f"not 1 (tolerance {PROB_TOL:g}); normalise it."
        )


@check_keywords
def potential_from_gain(gain: Any, *, tol: float = 1e-9) -> np.ndarray:
    """Turn a gain matrix ``gain[s, x, x']`` (or ``[x, x']``) into potentials ``f[s, x]``.

    The gain must be additive over intervals, g(x, z) = g(x, y) + g(y, z), which holds
    exactly when g(x, x') = f(x') - f(x). The potential is anchored at f(0) = 0 (gains
    only ever use differences, so the anchor is irrelevant). A non-additive matrix is
    refused with the first offending triple. ``tol`` is relative to the gain's scale: a
    triple is off when |g(x,z) - (g(x,0) + g(0,z))| > tol x max(1, max |g|), so an additive
    matrix in large units (a currency, 1e7) is not refused for its rounding.
    """
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)) \
            or not finite(tol) or tol < 0:  # NaN compared False: every matrix passed
        raise ModelError(f"tol: must be a finite number >= 0, got {short(tol, 40)} (default "
                         "1e-9, the largest |g(x,z) - (g(x,0) + g(0,z))| accepted, relative "
                         "to max(1, max |g|)).")
    g = np.array(gain, dtype=np.float64)
    if g.ndim == 2:
        g = g[None]
    if g.ndim != 3 or g.shape[1] != g.shape[2]:
        raise ModelError(f"gain: expected shape (groups, K, K) or (K, K), got {np.shape(gain)}.")
    if not np.isfinite(g).all():
        raise ModelError("gain: contains NaN or inf; every entry must be finite.")
    f = g[:, 0, :]  # f(x') = g(0, x') with f(0) = 0
    implied = f[:, None, :] - f[:, :, None]
    err = np.abs(implied - g)
    cut = tol * max(1.0, float(np.abs(g).max()) if g.size else 0.0)  # relative to the scale
    if (err > cut).any():
        s, x, z = (int(i) for i in np.argwhere(err > cut)[0])
        raise ModelError(
            f"gain: not additive for group {s}: g({x},{z}) = {g[s, x, z]:.10g} but "
            f"g({x},0) + g(0,{z}) = {implied[s, x, z]:.10g} (triple x={x}, y=0, z={z}); "
            "a qualification gain must satisfy g(x,z) = g(x,y) + g(y,z)."
        )
    return f


def departed_indices(departed: Any, K: int, *, field: str, error: type[Exception], fix: str,
                     labels: Sequence[str] | None = None) -> tuple[int, ...]:
    """``departed`` (level indices of those who left) as a sorted tuple, or ``error`` naming
    ``field``, the value and ``fix``: integers (not booleans), distinct, in [0, K), fewer
    than K (at least one level stays present). The one check of a TabularModel's
    ``departed_levels`` and a System's ``departed`` (``labels``: the levels' names, shown
    in the message)."""
    try:
        items = list(departed)
        if any(isinstance(k, (bool, np.bool_)) for k in items):
            raise TypeError("a boolean is not a level index")
        idx = [operator.index(k) for k in items]
    except TypeError:
        raise error(f"{field} must be a sequence of level indices (integers), got "
                    f"{departed!r:.60}; {fix}") from None
    if len(set(idx)) != len(idx) or any(not 0 <= k < K for k in idx) or len(idx) >= K:
        of = "" if labels is None else f" of levels {list(labels)}"
        raise error(f"{field}={tuple(idx)!r} must be distinct level indices in [0, {K}){of}, "
                    f"leaving at least one level present; {fix}")
    return tuple(sorted(idx))


def _check_departed(departed: Any, kernel: np.ndarray, K: int, initial: Any = None,
                    names: Sequence[str] | None = None) -> tuple[int, ...] | None:
    """``departed_levels`` as a sorted tuple of level indices (:func:`departed_indices`),
    or a ModelError naming the value and the fix; each absorbing under every action of
    every group (kernel[s, a, k, k] = 1), so the gain there is 0 under every action (the
    gain is the change of the potential)."""
    if departed is None:
        return None
    fix = ("declare only levels an individual never leaves, under every action, with gain 0 "
           "there (docs/own-system.md, \"Individuals who leave\"), or departed_levels=None.")
    idx = departed_indices(departed, K, field="departed_levels", error=ModelError, fix=fix)
    for k in idx:
        stay = kernel[:, :, k, k]
        if not np.all(np.abs(stay - 1.0) <= 1e-12):
            s, a = np.argwhere(np.abs(stay - 1.0) > 1e-12)[0]
            raise ModelError(f"departed_levels: level {k} is not absorbing: kernel[{s}, {a}, {k}, "
                             f"{k}] = {stay[s, a]:.6g}, expected 1; {fix}")
    if initial is not None:
        present = np.delete(np.asarray(initial, dtype=float), list(idx), axis=1).sum(1)
        if (present <= 0).any():
            g = int(np.flatnonzero(present <= 0)[0])
            raise ModelError(empty_group_message("departed_levels", names[g] if names else g,
                                                 idx))
    return idx


def empty_group_message(field: str, group: Any, departed: Sequence[int]) -> str:
    """The refusal of a group with nobody present at the start (every individual at a
    departed level; absorbing, so at every step): the tabular model's and the contract
    check's one wording."""
    return (f"{field}: group {str(group)!r} starts with nobody present (all of it at the "
            f"departed levels {tuple(int(k) for k in departed)!r}, which nobody leaves): its "
            "gain is 0 by construction and Lambda has nobody of it to pair, so C and Lambda "
            "would compare no one; give the group mass at a present level at the start, or "
            "leave it out of the groups.")


@dataclass(frozen=True, eq=False)
class TabularModel:
    """A finite model of the decision process, validated at construction.

    Parameters (keyword-only)
    -------------------------
    kernel : array (G, A, K, K)
        P(x' | x, d, s) for A >= 2 actions; each row over x' must sum to 1.
    initial : array (G, K)
        P(x_0 | s); each row must sum to 1.
    potential : array (G, K) or (K,)
        Gain potential f^s(x); a 1-d array is shared by all groups.
    reward : array (G, A, K) or None
        Expected reward r(x, d) per group; zeros if omitted.
    group_weights : array (G,) or None
        P(s); uniform if omitted.
    group_names, level_labels : sequences of str, optional
    aux : mapping of name -> array (G, K)
        Named per-(group, level) tables a policy or metric may read, e.g. ``p_repay``.
    structure : CausalStructure
        Declared causal structure (used by the temporal graph).
    name : str
    baseline : int
        The baseline action a0 (pi0 always takes it; the pi^PS fork scores gains under
        it); 0 by default.
    action_labels : sequence of str, optional
        One label per action (reports); ``d0, d1, ...`` by default.
    features : array (G, K, F), optional
        The feature vector a unit at level x of group s shows a policy (for systems whose
        policies read features): the exact engine evaluates such policies on it.
    feature_names : sequence of str, optional
        Names of the F features.
    lambda_eps : float > 0, optional
        The benefit resolution eps of Lambda (method.md section 4) in the gain's units,
        where the model's source pins it (the lending models: 0.1, the paper's value for
        its normalised gain). None (default): the scale-free ``eps = "auto"``. Every door
        (:func:`causalfair.decompose`, :func:`causalfair.benefit_fairness`, a System
        built from the model, audit specs) takes its default from here through
        :func:`causalfair.engines.benefit.eps_for`. A copy with a rescaled ``potential``
        keeps it: set it again (or to None) in the same copy.

    allowed : sequence of int, optional
        The actions a deployed policy may take (a System's ``DecisionSet.allowed``, which
        it copies here): the exact engine refuses a policy table that puts more than
        1e-9 on another action. None (default): all of them.
    departed_levels : sequence of int, optional
        Levels at which an individual has LEFT the population (discharged, deceased):
        absorbing under every action of every group, with expected gain 0 (checked).
        Opt-in: when set, Lambda's P(x | s) is the visitation distribution of those
        present (departed visits dropped, renormalised per group) and its worst pairs never
        list a departed level (docs/own-system.md, "Individuals who leave"). None
        (default): every level counts, as before.

    Policy tables: for two actions a table holds pi(d1 | x, s), shape (G, K) or
    (T, G, K); for A > 2 it holds the action distribution, shape (G, K, A) or
    (T, G, K, A).
    """

    kernel: np.ndarray
    initial: np.ndarray
    potential: np.ndarray
    reward: np.ndarray | None = None
    group_weights: np.ndarray | None = None
    group_names: Sequence[str] | None = None
    level_labels: Sequence[str] | None = None
    aux: Mapping[str, np.ndarray] = field(default_factory=dict)
    structure: CausalStructure = field(default_factory=CausalStructure)
    name: str = "tabular"
    baseline: int = 0
    action_labels: Sequence[str] | None = None
    features: np.ndarray | None = None
    feature_names: Sequence[str] | None = None
    lambda_eps: float | None = None
    allowed: Sequence[int] | None = None
    departed_levels: Sequence[int] | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "lambda_eps", check_lambda_eps(self.lambda_eps))
        kernel = _as_float_array("kernel", self.kernel, 4, "(groups, actions, K, K)")
        G, D, K, K2 = kernel.shape
        if D < 2 or K != K2:
            raise ModelError(
                f"kernel: expected shape (groups, A, K, K) with A >= 2 actions, got "
                f"{kernel.shape}; axis 1 is the decision and axes 2-3 the levels x, x'."
            )
        if G < 2:
            raise ModelError(f"kernel: needs at least 2 groups, got {G}.")
        if K < 2:
            raise ModelError(f"kernel: needs at least 2 levels, got {K}.")
        _check_distribution("kernel", kernel, "(s, d, x)")
        set_(self, "kernel", kernel)

        initial = _as_float_array("initial", self.initial, 2, "(groups, K)")
        if initial.shape != (G, K):
            raise ModelError(f"initial: expected shape {(G, K)} (groups, levels), got {initial.shape}.")
        _check_distribution("initial", initial, "(s,)")
        set_(self, "initial", initial)

        pot = np.array(self.potential, dtype=np.float64)
        if pot.ndim == 1:
            pot = np.broadcast_to(pot, (G, pot.shape[0])).copy()
        pot = _as_float_array("potential", pot, 2)
        if pot.shape != (G, K):
            raise ModelError(f"potential: expected shape {(G, K)} or ({K},), got {np.shape(self.potential)}.")
        set_(self, "potential", pot)

        if self.reward is None:
            reward = np.zeros((G, D, K))
            reward.setflags(write=False)
        else:
            reward = _as_float_array("reward", self.reward, 3)
            if reward.shape != (G, D, K):
                raise ModelError(f"reward: expected shape {(G, D, K)} (groups, decisions, levels), got {reward.shape}.")
        b = self.baseline
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b < D:
            raise ModelError(f"baseline: must be an action index in [0, {D}), got {b!r}.")
        set_(self, "baseline", int(b))
        if self.action_labels is not None:
            acts = tuple(str(a) for a in self.action_labels)
            if len(acts) != D or len(set(acts)) != D:
                raise ModelError(f"action_labels: expected {D} distinct labels, got {acts!r}.")
            set_(self, "action_labels", acts)
        if self.allowed is not None:
            ok = tuple(int(a) for a in self.allowed)
            if not ok or len(set(ok)) != len(ok) or any(not 0 <= a < D for a in ok):
                raise ModelError(f"allowed: expected distinct action indices in [0, {D}), "
                                 f"got {tuple(self.allowed)!r}.")
            set_(self, "allowed", ok)
        set_(self, "reward", reward)

        if self.group_weights is None:
            w = np.full(G, 1.0 / G)
            w.setflags(write=False)
        else:
            w = _as_float_array("group_weights", self.group_weights, 1)
            if w.shape != (G,):
                raise ModelError(f"group_weights: expected shape ({G},), got {w.shape}.")
            _check_distribution("group_weights", w, "()")
        set_(self, "group_weights", w)

        names = tuple(self.group_names) if self.group_names is not None else (
            ("s+", "s-") if G == 2 else tuple(f"s{i}" for i in range(G))
        )
        if len(names) != G:
            raise ModelError(f"group_names: expected {G} names, got {len(names)}: {names!r}.")
        if len(set(names)) != G:
            raise ModelError(f"group_names: names must be distinct, got {names!r}.")
        check_pair_names("group_names", names, ModelError)
        set_(self, "group_names", names)

        labels = tuple(self.level_labels) if self.level_labels is not None else tuple(
            str(i + 1) for i in range(K)
        )
        if len(labels) != K:
            raise ModelError(f"level_labels: expected {K} labels, got {len(labels)}.")
        set_(self, "level_labels", labels)

        if self.features is not None:
            feats = _as_float_array("features", self.features, 3)
            if feats.shape[:2] != (G, K):
                raise ModelError(f"features: expected shape ({G}, {K}, F), got {feats.shape}.")
            set_(self, "features", feats)
            if self.feature_names is not None:
                fn = tuple(str(x) for x in self.feature_names)
                if len(fn) != feats.shape[2] or len(set(fn)) != len(fn):
                    raise ModelError(
                        f"feature_names: expected {feats.shape[2]} distinct names, got {fn!r}.")
                set_(self, "feature_names", fn)
        elif self.feature_names is not None:
            raise ModelError("feature_names: given without a features table.")
        aux = {}
        for key, val in dict(self.aux).items():
            arr = _as_float_array(f"aux[{key!r}]", val, 2)
            if arr.shape != (G, K):
                raise ModelError(f"aux[{key!r}]: expected shape {(G, K)}, got {arr.shape}.")
            aux[key] = arr
        set_(self, "aux", aux)
        set_(self, "departed_levels", _check_departed(self.departed_levels, self.kernel, K,
                                                      self.initial, self.group_names))

    # ------------------------------------------------------------------ sizes
    @property
    def n_groups(self) -> int:
        return self.kernel.shape[0]

    @property
    def n_levels(self) -> int:
        return self.kernel.shape[2]

    @property
    def n_actions(self) -> int:
        return self.kernel.shape[1]

    @property
    def binary(self) -> bool:
        """Two actions with baseline 0: policy tables hold pi(d1 | x, s)."""
        return self.kernel.shape[1] == 2 and self.baseline == 0

    def policy_ndim(self) -> int:
        """Dimensions of a stationary policy table: 2 (G, K) for two actions, 3 (G, K, A)."""
        return 2 if self.n_actions == 2 else 3

    def baseline_table(self) -> np.ndarray | float:
        """The baseline policy pi0 as a table: P(d1) = baseline for two actions, else the
        one-hot (G, K, A) distribution on the baseline action."""
        if self.n_actions == 2:
            return float(self.baseline)
        tab = np.zeros((self.n_groups, self.n_levels, self.n_actions))
        tab[..., self.baseline] = 1.0
        return tab

    def action_table(self, p: np.ndarray) -> np.ndarray:
        """Any policy table as action distributions (..., G, K, A)."""
        p = np.asarray(p, dtype=np.float64)
        if self.n_actions == 2:
            return np.stack([1.0 - p, p], axis=-1)
        return p

    # ------------------------------------------------------------ derived arrays
    def gain(self) -> np.ndarray:
        """Gain matrix g[s, x, x'] = f^s(x') - f^s(x)."""
        return self.potential[:, None, :] - self.potential[:, :, None]

    def expected_gain(self) -> np.ndarray:
        """h[s, d, x] = sum_x' P(x' | x, d, s) g^s(x, x') (h0 and h1 of method.md)."""
        nxt = np.einsum("sdxy,sy->sdx", self.kernel, self.potential)
        return nxt - self.potential[:, None, :]

    def benefit(self) -> np.ndarray:
        """Delta[s, x] = h1(x, s) - h0(x, s), the conditional effect of d1 on the gain
        (two actions); for A > 2 actions the benefit of every action over the baseline,
        Delta[s, a, x] = h_a(x, s) - h_{a0}(x, s) (see :meth:`benefits`)."""
        h = self.expected_gain()
        if self.n_actions == 2:
            return h[:, 1] - h[:, 0]
        return h - h[:, self.baseline][:, None]

    def benefits(self) -> np.ndarray:
        """Delta[s, a, x] = h_a(x, s) - h_{a0}(x, s) for every action (zero at a0)."""
        h = self.expected_gain()
        return h - h[:, self.baseline][:, None]

    def policy_kernel(self, p_d1: np.ndarray) -> np.ndarray:
        """Markov kernel under a policy table: shape (G, K, K). ``p_d1[s, x]`` =
        pi(d1 | x, s) for two actions, the distribution (G, K, A) for more."""
        p = np.asarray(p_d1, dtype=np.float64)
        if self.n_actions > 2:
            return np.einsum("sxa,saxy->sxy", p, self.kernel)
        return self.kernel[:, 0] + p[..., None] * (self.kernel[:, 1] - self.kernel[:, 0])

    def propagate(self, p_d1: np.ndarray | float, horizon: int) -> np.ndarray:
        """State distributions mu[t, s, x] for t = 0..T under a policy table.

        ``p_d1`` is pi(d1 | x, s) as (G, K), a time-indexed (T, G, K), or a scalar.
        Vectorised over groups and levels; the loop runs over the T epochs only.
        """
        G, K = self.n_groups, self.n_levels

        # mu (T+1, G, K) plus the engines' arrays of the same size (about 12 of them)
        check_memory(8.0 * (horizon + 1) * G * K * self.n_actions * 12,
                     f"exact engine over {horizon} epochs", "use a shorter horizon")
        p = np.asarray(p_d1, dtype=np.float64)
        extra = self.policy_ndim() - 2
        stationary = p.ndim < 3 + extra
        if stationary:
            kpi = self.policy_kernel(np.broadcast_to(p, (G, K) + (self.n_actions,) * extra))
        mu = np.empty((horizon + 1, G, K))
        mu[0] = self.initial
        for t in range(horizon):
            k_t = kpi if stationary else self.policy_kernel(p[t])
            mu[t + 1] = np.matmul(mu[t][:, None, :], k_t)[:, 0, :]
        return mu

    def with_(self, **changes: Any) -> TabularModel:
        """A copy with some fields replaced (re-validated)."""
        kwargs = {
            f: getattr(self, f)
            for f in (
                "kernel", "initial", "potential", "reward", "group_weights",
                "group_names", "level_labels", "aux", "structure", "name", "baseline",
                "action_labels", "features", "feature_names", "lambda_eps", "allowed",
                "departed_levels",
            )
        }
        kwargs.update(changes)
        return TabularModel(**kwargs)

    def __repr__(self) -> str:
        return (
            f"TabularModel(name={self.name!r}, groups={list(self.group_names)}, "
            f"levels={self.n_levels}, actions={self.n_actions}, aux={sorted(self.aux)})"
        )


# a mistyped keyword: one error naming it and the fix (check_keywords)
TabularModel.__init__ = check_keywords(TabularModel.__init__, name="TabularModel")  # type: ignore

"""The individual-level lending model (lending.md section A) and its three settings.

Dynamics of one decision epoch for an individual at level ``x`` (0-based here; the
spec's levels 1..K are ``x + 1``) in group ``s``:

- decision ``d ~ pi(d | x, s)``;
- repayment ``y ~ Bernoulli(p_repay[s, x])`` (drawn whatever ``d`` is, used only if d = d1);
- drift ``u in {-1, 0, +1} ~ drift[s]``;
- next level ``x' = clip(x + u + step, 0, K - 1)`` with step +1 for (d1, repay),
  -1 for (d1, default), 0 for d0;
- reward +interest for (d1, repay), -1 for (d1, default), 0 for d0;
- gain potential ``f(x) = x^3 / (K^3 - (K-1)^3)`` on levels 1..K, the same for both groups.

Settings 1 and 3 are defined by 7-level tables. For ``K != 7`` they are interpolated
linearly over the level range: level ``k`` (0-based) sits at position ``6 k / (K - 1)`` of
the 7-level table; ``np.interp`` gives the value there and initial distributions are then
renormalised. Setting 2 is binned natively from the FICO tables for any ``K``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._names import SETTINGS  # defined there: --help lists them
from causalfair._validation import check_keywords
from causalfair.errors import InputError
from causalfair.model import CausalStructure, ModelError, TabularModel
from causalfair.systems.lending.fico import fico_initial, fico_repay
from causalfair.systems.system import DecisionSet, Gain, System
from causalfair.systems.tabular_sim import LazyArrays
from causalfair.types import Observation, StepResult

__all__ = ["LendingModel", "SETTINGS", "lending_setting", "lending_potential", "lending_system",
           "LendingSimulator", "LendingState", "LendingNoise", "LENDING_LAMBDA_EPS"]


_S1_INIT = np.array([
    [0.0, 0.1, 0.1, 0.2, 0.3, 0.3, 0.0],
    [0.1, 0.1, 0.2, 0.3, 0.3, 0.0, 0.0],
])
_S1_REPAY = np.array([0.1, 0.2, 0.45, 0.6, 0.65, 0.7, 0.7])
_DRIFT_NEUTRAL = np.array([0.1, 0.8, 0.1])
_S3_DRIFT = np.array([[0.05, 0.8, 0.15], [0.15, 0.8, 0.05]])
_GROUPS = ("s+", "s-")
_FICO_GROUPS = ("white", "black")


def lending_potential(n_levels: int) -> np.ndarray:
    """f(x) = x^3 / (K^3 - (K-1)^3) on levels x = 1..K (largest one-level gain is 1)."""
    x = np.arange(1, n_levels + 1, dtype=np.float64)
    return x**3 / (n_levels**3 - (n_levels - 1) ** 3)


def _interp_levels(table: np.ndarray, n_levels: int) -> np.ndarray:
    src = np.arange(table.shape[-1], dtype=np.float64)
    pos = np.linspace(0.0, table.shape[-1] - 1.0, n_levels)
    flat = np.atleast_2d(table)
    out = np.stack([np.interp(pos, src, row) for row in flat])
    return out if table.ndim == 2 else out[0]


#: Lambda's eps on the lending models (method.md section 4): the paper's value for its gain,
#: normalised so the largest one-level gain is 1; declared by their tabular models.
LENDING_LAMBDA_EPS = 0.1

#: Largest interest a lending model takes: the profit per unit lent on a repaid loan. A
#: bound keeps every expected reward (at most interest x horizon) finite in float64.
MAX_INTEREST = 1e6


def check_interest(interest: Any) -> float:
    """``interest`` as a float, or a ModelError naming the value and the accepted range."""
    if (isinstance(interest, bool) or not isinstance(interest, (int, float, np.floating, np.integer))
            or not 0 <= interest <= MAX_INTEREST):
        raise ModelError(f"interest: must be a number in [0, {MAX_INTEREST:g}] (the profit per "
                         f"unit lent on a repaid loan), got {interest!r}.")
    return float(interest)


def _renormalise(p: np.ndarray) -> np.ndarray:
    return p / p.sum(axis=-1, keepdims=True)


@dataclass(frozen=True, eq=False)
class LendingModel:
    """Parameters of the individual-level lending model (lending.md section A).

    All arrays are per group (index 0 = s+, advantaged; 1 = s-, disadvantaged) over
    0-based levels. Use :func:`lending_setting` for the named settings and
    :meth:`tabular` for the exact :class:`~causalfair.model.TabularModel`.
    """

    initial: np.ndarray  # (G, K)
    p_repay: np.ndarray  # (G, K)
    drift: np.ndarray  # (G, 3) = P(u = -1, 0, +1 | s)
    interest: float = 1.0
    group_weights: np.ndarray = field(default_factory=lambda: np.array([0.5, 0.5]))
    group_names: Sequence[str] = _GROUPS
    name: str = "lending"

    def __post_init__(self) -> None:
        init = np.asarray(self.initial, dtype=np.float64)
        rep = np.asarray(self.p_repay, dtype=np.float64)
        drift = np.asarray(self.drift, dtype=np.float64)
        if init.ndim != 2 or init.shape[1] < 3:
            raise ModelError(f"initial: expected shape (groups, K) with K >= 3, got {init.shape}.")
        if rep.shape != init.shape:
            raise ModelError(f"p_repay: expected shape {init.shape}, got {rep.shape}.")
        if not np.isfinite(rep).all() or (rep < 0).any() or (rep > 1).any():
            raise ModelError("p_repay: every entry must be a probability in [0, 1].")
        if drift.shape != (init.shape[0], 3):
            raise ModelError(
                f"drift: expected shape ({init.shape[0]}, 3) = P(u=-1,0,+1 | s), got {drift.shape}."
            )
        check_interest(self.interest)
        for name, arr in (("initial", init), ("p_repay", rep), ("drift", drift)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "group_weights", np.asarray(self.group_weights, dtype=np.float64))
        object.__setattr__(self, "group_names", tuple(self.group_names))
        self.tabular  # validate everything else now  # noqa: B018

    @property
    def n_levels(self) -> int:
        return self.initial.shape[1]

    @property
    def n_groups(self) -> int:
        return self.initial.shape[0]

    def kernel(self) -> np.ndarray:
        """P(x' | x, d, s) as an array (G, 2, K, K), built with array operations."""
        G, K = self.initial.shape
        x = np.arange(K)
        u = np.array([-1, 0, 1])
        ker = np.zeros((G, 2, K, K))
        s_idx = np.arange(G)[:, None, None]
        x_idx = x[None, :, None]
        # d0: x' = clip(x + u)
        tgt0 = np.clip(x[:, None] + u[None, :], 0, K - 1)  # (K, 3)
        np.add.at(
            ker[:, 0], (s_idx, x_idx, tgt0[None]), np.broadcast_to(self.drift[:, None, :], (G, K, 3))
        )
        # d1: x' = clip(x + u + step), step = +1 w.p. p_repay, -1 otherwise
        for step, prob in ((1, self.p_repay), (-1, 1.0 - self.p_repay)):
            tgt = np.clip(x[:, None] + u[None, :] + step, 0, K - 1)
            w = prob[:, :, None] * self.drift[:, None, :]
            np.add.at(ker[:, 1], (s_idx, x_idx, tgt[None]), w)
        return ker

    def expected_reward(self) -> np.ndarray:
        """r[s, d, x]: 0 for d0; interest * p - (1 - p) for d1."""
        r = np.zeros((self.n_groups, 2, self.n_levels))
        r[:, 1] = self.interest * self.p_repay - (1.0 - self.p_repay)
        return r

    def structure(self) -> CausalStructure:
        """Causal structure: S reaches Y / U only where the group's tables differ."""
        y_dep = bool(np.ptp(self.p_repay, axis=0).max() > 0)
        u_dep = bool(np.ptp(self.drift, axis=0).max() > 0)
        x0_dep = bool(np.ptp(self.initial, axis=0).max() > 0)
        return CausalStructure(
            exogenous={"Y": (y_dep, True), "U": (u_dep, False)},
            s_to_x0=x0_dep,
            s_to_transition=False,
        )

    def to_system(self, *, id: str | None = None, params: dict | None = None) -> Any:
        """This model as a :class:`~causalfair.systems.System` (simulator + tabular model)."""
        return lending_system(self, id=id, params=params)

    @cached_property
    def tabular(self) -> TabularModel:
        """The exact tabular model of these dynamics."""
        return TabularModel(
            kernel=self.kernel(),
            initial=self.initial,
            potential=lending_potential(self.n_levels),
            reward=self.expected_reward(),
            group_weights=self.group_weights,
            group_names=self.group_names,
            level_labels=[str(i + 1) for i in range(self.n_levels)],
            aux={"p_repay": self.p_repay},
            structure=self.structure(),
            name=self.name,
            lambda_eps=LENDING_LAMBDA_EPS,
        )


@check_keywords
def lending_setting(
    setting: str = "lending-1",
    *,
    n_levels: int = 7,
    interest: float = 1.0,
    group_weights: Sequence[float] = (0.5, 0.5),
) -> LendingModel:
    """One of the named lending settings (lending.md section A table)."""
    if setting not in SETTINGS:
        raise ModelError(
            f"setting: unknown value {setting!r}; allowed values: {', '.join(SETTINGS)}."
        )
    if not isinstance(n_levels, (int, np.integer)) or isinstance(n_levels, bool) or n_levels < 3:
        raise ModelError(f"n_levels: must be an integer >= 3, got {n_levels!r}.")
    n_levels = int(n_levels)

    # the kernel (G, 2, K, K) in float64, built with a few temporaries of the same size
    check_memory(8.0 * 2 * 2 * n_levels**2 * 4, f"lending setting with {n_levels} levels",
                 "use fewer levels")
    weights = np.asarray(group_weights, dtype=np.float64)
    if setting == "lending-2":
        return LendingModel(
            initial=fico_initial(n_levels),
            p_repay=fico_repay(n_levels),
            drift=np.stack([_DRIFT_NEUTRAL, _DRIFT_NEUTRAL]),
            interest=interest,
            group_weights=weights,
            group_names=_FICO_GROUPS,
            name=setting,
        )
    init1 = _S1_INIT if n_levels == 7 else _renormalise(_interp_levels(_S1_INIT, n_levels))
    repay = _S1_REPAY if n_levels == 7 else _interp_levels(_S1_REPAY, n_levels)
    repay2 = np.stack([repay, repay])
    if setting == "lending-1":
        return LendingModel(
            initial=init1,
            p_repay=repay2,
            drift=np.stack([_DRIFT_NEUTRAL, _DRIFT_NEUTRAL]),
            interest=interest,
            group_weights=weights,
            name=setting,
        )
    mean = _S1_INIT.mean(axis=0)
    init3 = mean if n_levels == 7 else _renormalise(_interp_levels(mean, n_levels))
    return LendingModel(
        initial=np.stack([init3, init3]),
        p_repay=repay2,
        drift=_S3_DRIFT,
        interest=interest,
        group_weights=weights,
        name=setting,
    )


# ------------------------------------------------------------- the individual simulator
# Vectorised individual-level lending simulator (lending.md section A).
#
# Each individual is one row of an array; a step of n individuals is a handful of numpy
# operations, whatever n is. The random numbers of a step are drawn separately
# (:meth:`LendingSimulator.draw_noise`), so forks share them.
#
# Implementation notes (what makes a step cheap):
#
# - the noise of one individual-step is a single 64-bit random word; its low 32 bits decide
#   repayment (``repays iff low < round(p_repay[s, x] * 2**32)``) and its high 32 bits the
#   drift (compared with the group's drift CDF scaled to 2**32). The two halves are
#   independent uniform integers, so repayment and drift are independent, and a probability
#   ``p`` is realised as ``round(p * 2**32) / 2**32`` (error below 1.2e-10);
# - levels are ``intp`` arrays (fastest to gather with); the next level (``clip`` of
#   x + drift + step), the gain ``f(x') - f(x)`` and the reward are lookups in three
#   (K, 9) tables at one index ``x * 9 + 3 * (step + 1) + u + 1`` with u the drift (int8
#   arithmetic until then; the index is written over the gathered repayment thresholds);
# - when a batch holds one group (what :meth:`reset` with an int group gives), per-group
#   tables are selected once per step instead of gathered per individual;
# - a step where every decision is d0 (forks, pi0) skips the repayment draw.
#
# ``LendingNoise`` also accepts float uniforms in [0, 1) for ``repay`` and ``drift`` (the
# original form): ``step`` then uses ``repay < p_repay`` and the drift CDF directly.

_TWO32 = float(2**32)
_LOW = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True)
class LendingState:
    """Levels (0-based) and groups of a batch; ``group_id`` is set when the whole batch
    belongs to one group (a fast path), else None."""

    level: np.ndarray  # int (n,), 0-based
    group: np.ndarray  # int (n,)
    t: int = 0
    group_id: int | None = None


@dataclass(frozen=True)
class LendingNoise:
    """The random numbers of one step for n individuals.

    Either ``repay`` and ``drift`` are uint32 arrays (the two halves of one 64-bit word
    per individual, what :meth:`LendingSimulator.draw_noise` returns) or float uniforms
    in [0, 1) (repays iff ``repay < p_repay[s, x]``; drift from the group's drift CDF).
    """

    repay: np.ndarray  # (n,)
    drift: np.ndarray  # (n,)
    #: drift codes already computed from this noise, by group (shared by forks)
    cache: dict = field(default_factory=dict, compare=False, repr=False)


class LendingSimulator:
    """Individual-level lending dynamics for a batch, matching ``model.tabular`` exactly
    in distribution (up to the 2**-32 resolution of the probabilities).

    Implements the :class:`~causalfair.systems.simulator.Simulator` protocol: ``reset``,
    ``observe``, ``draw_noise``, ``step``. ``step`` is a pure function of (state,
    decisions, noise): calling it twice with the same state and noise and different
    decisions is a fork (common random numbers).
    """

    def __init__(self, model: LendingModel):
        self.model = model
        self.n_groups = model.n_groups
        self.n_levels = model.n_levels
        self.group_names = tuple(model.group_names)
        self.group_weights = np.asarray(model.group_weights, dtype=np.float64)
        K = self.n_levels
        self._f = lending_potential(K)
        self._init_cdf = np.cumsum(model.initial, axis=1)
        self._drift_cdf = np.cumsum(model.drift, axis=1)
        # Integer thresholds: event iff 32-bit uniform < thr (thr = 2**32 means always);
        # int64, the dtype of the step's index array, which reuses their gathered copy
        self._repay_thr = np.round(model.p_repay * _TWO32).astype(np.int64)  # (G, K)
        dc = np.minimum(self._drift_cdf[:, :2], 1.0)
        self._drift_thr = np.round(dc * _TWO32).astype(np.uint64)  # (G, 2)
        # by j = x * 9 + 3 * (step + 1) + (u + 1), u the drift, step -1 for (d1, default),
        # 0 for d0, +1 for (d1, repay): the next level clip(x + u + step), the gain
        # f(x') - f(x) and the reward (-1, 0, +interest, with the rounding of
        # (d & repay) * (interest + 1) - d)
        step, u = np.repeat(np.arange(-1, 2), 3), np.tile(np.arange(-1, 2), 3)
        nxt = np.clip(np.arange(K)[:, None] + step + u, 0, K - 1)  # (K, 9)
        self._next = nxt.reshape(-1).astype(np.intp)
        self._gain = (self._f[nxt] - self._f[:, None]).reshape(-1)
        self._interest = float(model.interest)
        reward = np.array([-1.0, 0.0, (self._interest + 1.0) - 1.0])  # by step + 1
        self._reward = np.tile(np.repeat(reward, 3), K)

    # ------------------------------------------------------------------ protocol
    def reset(self, n: int, group: int | np.ndarray, rng: np.random.Generator) -> LendingState:
        """n individuals of ``group`` (an int, or an int array (n,)) with x0 ~ P(x0 | s)."""
        gid = None
        if np.ndim(group) == 0:
            gid = int(group)
            if not 0 <= gid < self.n_groups:
                raise InputError(f"group: must be in [0, {self.n_groups}), got {group!r}.")
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        u = rng.random(n)
        if gid is not None:
            level = np.searchsorted(self._init_cdf[gid], u, side="right")
        else:
            level = (u[:, None] >= self._init_cdf[g]).sum(axis=1)
        level = np.minimum(level, self.n_levels - 1).astype(np.intp, copy=False)
        return LendingState(level=level, group=g, t=0, group_id=gid)

    def observe(self, state: LendingState) -> Observation:
        """Group, level, epoch and (lazily) the repayment probability ``p_repay``."""
        return Observation(
            group=state.group, level=state.level, t=state.t,
            extras=LazyArrays({"p_repay": lambda: self.model.p_repay[state.group, state.level]}),
        )

    def draw_noise(self, n: int, rng: np.random.Generator) -> LendingNoise:
        """One 64-bit random word per individual, split into two independent 32-bit halves."""
        bits = rng.bit_generator.random_raw(n).view(np.uint32).reshape(n, 2)
        return LendingNoise(repay=bits[:, 0], drift=bits[:, 1])

    def step(self, state: LendingState, decisions: np.ndarray, noise: LendingNoise) -> StepResult:
        """Next levels, rewards and gains for decisions ``decisions`` (bool or 0/1, (n,))."""
        x, g, gid = state.level, state.group, state.group_id
        K = self.n_levels
        d = np.asarray(decisions)
        if d.dtype != np.bool_:
            d = d.astype(bool)
        integer = noise.repay.dtype.kind == "u"
        # the repayment thresholds (or probabilities, for float uniforms) and the entry of
        # them each individual reads
        thr = self._repay_thr if integer else self.model.p_repay
        if gid is not None:
            thr, rows = thr[gid], x
            drift = noise.cache.get(gid)
            if drift is None:  # computed once per noise and group: forks reuse it
                c0, c1 = self._drift_thr[gid] if integer else self._drift_cdf[gid, :2]
                drift = (noise.drift >= c0).view(np.int8) + (noise.drift >= c1).view(np.int8)
                noise.cache[gid] = drift
        else:
            thr, rows = thr.reshape(-1), g * K + x
            cdf = self._drift_thr if integer else self._drift_cdf[:, :2]
            drift = ((noise.drift >= cdf[g, 0]).view(np.int8)
                     + (noise.drift >= cdf[g, 1]).view(np.int8))

        def repay_fn() -> np.ndarray:
            return noise.repay < thr.take(rows)  # take: a faster gather than thr[rows]

        # drift is the code u + 1 in {0, 1, 2} (int8); the next level, gain and reward are
        # lookups at j = x * 9 + 3 * (step + 1) + drift. Few temporaries: each new array of
        # n is fresh memory, whose pages can cost as much as a pass over it
        if d.any():
            limit = thr.take(rows)
            repay = noise.repay < limit
            # j written over the thresholds when they are int64 (integer noise)
            j = np.multiply(x, 9, out=limit) if integer else x * 9
            # step + 1 in {0, 1, 2}: 1 for d0, 2 for (d1, repay), 0 for (d1, default)
            j += drift + 3 * (d.view(np.int8) * (2 * repay.view(np.int8) - 1) + 1)
            info: Mapping[str, np.ndarray] = LazyArrays({
                "repay": lambda: repay, "drift": lambda: drift.astype(np.intp) - 1})
            reward = self._reward.take(j)
        else:  # every decision d0 (forks, pi0): no repayment to decide, no reward
            j = x * 9
            j += drift + np.int8(3)
            info = LazyArrays({"repay": repay_fn, "drift": lambda: drift.astype(np.intp) - 1})
            reward = np.zeros(x.shape[0])
        nxt, gain = self._next.take(j), self._gain.take(j)
        return StepResult(
            state=LendingState(level=nxt, group=g, t=state.t + 1, group_id=gid),
            reward=reward,
            gain=gain,
            info=info,
        )


LENDING_DESCRIPTIONS = {
    "lending-1": "lending, hand-set repayment curves; groups differ in initial levels",
    "lending-2": "lending, FICO TransRisk data (white / black applicants)",
    "lending-3": "lending, same initial levels; groups differ in drift",
    "delayed-impact": "lending-1 curves without drift (ml-fairness-gym DelayedImpactEnv)",
}


class _LendingSimulatorFactory:
    """Picklable zero-argument factory of a LendingSimulator for one model."""

    def __init__(self, model: Any):
        self.model = model

    def __call__(self) -> Any:
        return LendingSimulator(self.model)


def lending_system(model: Any, *, id: str | None = None,
                   params: Mapping[str, Any] | None = None) -> Any:
    """The :class:`System` of a :class:`~causalfair.systems.lending.settings.LendingModel`: the
    individual-level simulator, the exact tabular model, decisions deny (baseline) /
    approve, roles ``score = p_repay`` and ``qualified = repay``."""
    tab = model.tabular
    sid = id or model.name
    return System(
        id=sid,
        groups=tuple(model.group_names),
        decisions=DecisionSet(labels=("deny", "approve"), baseline=0),
        levels=tuple(tab.level_labels),
        gain=Gain("qualification gain", "gain units (largest one-level gain = 1)",
                  "f(x') - f(x) with f(x) = x^3 / (K^3 - (K-1)^3)",
                  lambda_eps=tab.lambda_eps),  # the model's declaration
        reward="profit",
        horizon=20,
        structure=tab.structure,
        simulator=_LendingSimulatorFactory(model),
        tabular=tab,
        group_weights=tab.group_weights,
        roles={"score": "p_repay", "qualified": "repay"},
        params=dict(params or {}),
        description=LENDING_DESCRIPTIONS.get(sid, "lending"),
    )

"""Vectorised individual-level lending simulator (lending.md section A).

Each individual is one row of an array; a step of n individuals is a handful of numpy
operations, whatever n is. The random numbers of a step are drawn separately
(:meth:`LendingSimulator.draw_noise`), so forks share them.

Implementation notes (what makes a step cheap):

- the noise of one individual-step is a single 64-bit random word; its low 32 bits decide
  repayment (``repays iff low < round(p_repay[s, x] * 2**32)``) and its high 32 bits the
  drift (compared with the group's drift CDF scaled to 2**32). The two halves are
  independent uniform integers, so repayment and drift are independent, and a probability
  ``p`` is realised as ``round(p * 2**32) / 2**32`` (error below 1.2e-10);
- levels are ``intp`` arrays (fastest to gather with); ``clip`` is a table lookup, the
  gain ``f(x') - f(x)`` one gather in a (K * K) table;
- when a batch holds one group (what :meth:`reset` with an int group gives), per-group
  tables are selected once per step instead of gathered per individual;
- a step where every decision is d0 (forks, pi0) skips the repayment draw.

``LendingNoise`` also accepts float uniforms in [0, 1) for ``repay`` and ``drift`` (the
original form): ``step`` then uses ``repay < p_repay`` and the drift CDF directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from causalfair.errors import InputError
from causalfair.model import TabularModel
from causalfair.policy import Observation
from causalfair.sim.base import StepResult
from causalfair.sim.lending import LendingModel, lending_potential

__all__ = ["LendingSimulator", "LendingState", "LendingNoise", "LazyArrays", "TabularSimulator"]

_TWO32 = float(2**32)
_LOW = np.uint64(0xFFFFFFFF)


class LazyArrays(Mapping):
    """A read-only mapping whose values are computed (once) on first access.

    Simulators use it for ``Observation.extras`` and ``StepResult.info`` so that ground
    truth nobody reads costs nothing.
    """

    def __init__(self, makers: Mapping[str, Callable[[], np.ndarray]]):
        self._makers = dict(makers)
        self._cache: dict[str, np.ndarray] = {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._cache:
            self._cache[key] = self._makers[key]()
        return self._cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)

    def __repr__(self) -> str:
        return f"LazyArrays({sorted(self._makers)})"


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

    Implements the :class:`~causalfair.sim.base.Simulator` protocol: ``reset``,
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
        # Integer thresholds: event iff 32-bit uniform < thr (thr = 2**32 means always).
        self._repay_thr = np.round(model.p_repay * _TWO32).astype(np.uint64)  # (G, K)
        self._repay_thr_flat = self._repay_thr.reshape(-1)
        dc = np.minimum(self._drift_cdf[:, :2], 1.0)
        self._drift_thr = np.round(dc * _TWO32).astype(np.uint64)  # (G, 2)
        # next level = _next[x + u + step + 2] (clip as a lookup); gain = _gain[x * K + x'].
        self._next = np.clip(np.arange(-2, K + 2), 0, K - 1).astype(np.intp)
        self._gain = (self._f[None, :] - self._f[:, None]).reshape(-1)
        self._interest = float(model.interest)

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
        if gid is not None:
            thr = self._repay_thr[gid]

            def repay_fn() -> np.ndarray:
                if integer:
                    return noise.repay < thr[x]
                return noise.repay < self.model.p_repay[gid][x]

            drift = noise.cache.get(gid)
            if drift is None:  # computed once per noise and group: forks reuse it
                c0, c1 = self._drift_thr[gid] if integer else self._drift_cdf[gid, :2]
                drift = (noise.drift >= c0).view(np.int8) + (noise.drift >= c1).view(np.int8)
                noise.cache[gid] = drift
        else:
            flat = g * K + x

            def repay_fn() -> np.ndarray:
                if integer:
                    return noise.repay < self._repay_thr_flat[flat]
                return noise.repay < self.model.p_repay.reshape(-1)[flat]

            cdf = self._drift_thr if integer else self._drift_cdf[:, :2]
            drift = ((noise.drift >= cdf[g, 0]).view(np.int8)
                     + (noise.drift >= cdf[g, 1]).view(np.int8))
        # drift is the code u + 1 in {0, 1, 2} (int8)
        if d.any():
            repay = repay_fn()
            # step + 1 in {0, 1, 2}: 1 for d0, 2 for (d1, repay), 0 for (d1, default)
            code = drift + (d.view(np.int8) * (2 * repay.view(np.int8) - 1))
            idx = x + code  # intp: x + (u + 1) + step, then +1 more below
            nxt = self._next[idx + 1]
            # +interest for (d1, repay), -1 for (d1, default), 0 for d0 (no np.where: slow)
            reward = (d & repay) * (self._interest + 1.0) - d
            info: Mapping[str, np.ndarray] = LazyArrays({
                "repay": lambda: repay, "drift": lambda: drift.astype(np.intp) - 1})
        else:
            nxt = self._next[x + drift + 1]
            reward = np.zeros(x.shape[0])
            info = LazyArrays({"repay": repay_fn, "drift": lambda: drift.astype(np.intp) - 1})
        gain = self._gain[x * K + nxt]
        return StepResult(
            state=LendingState(level=nxt, group=g, t=state.t + 1, group_id=gid),
            reward=reward,
            gain=gain,
            info=info,
        )


class TabularSimulator:
    """Individual-level simulator of any :class:`~causalfair.model.TabularModel`.

    The next level is drawn by inverse CDF from the kernel row P(. | x, d, s) with one
    uniform per individual (the noise), so forks with other decisions share it; the
    reward of a step is the model's expected reward r[s, d, x] (a tabular model stores
    no more). Slower than :class:`LendingSimulator` (a (n, K) comparison per step) but
    works for every tabular model.
    """

    def __init__(self, model: TabularModel):
        self.model = model
        self.n_groups = model.n_groups
        self.n_levels = model.n_levels
        self.group_names = tuple(model.group_names)
        self.group_weights = np.asarray(model.group_weights, dtype=np.float64)
        self.name = model.name
        self._init_cdf = np.cumsum(model.initial, axis=1)
        cdf = np.cumsum(model.kernel, axis=-1)
        cdf[..., -1] = np.inf  # rounding: the last level catches u close to 1
        self._cdf = cdf[..., :-1]  # (G, 2, K, K - 1)
        self._f = model.potential  # (G, K)

    def reset(self, n: int, group: int | np.ndarray, rng: np.random.Generator) -> LendingState:
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        u = rng.random(n)
        level = (u[:, None] >= self._init_cdf[g]).sum(axis=1)
        level = np.minimum(level, self.n_levels - 1).astype(np.intp)
        gid = int(group) if np.ndim(group) == 0 else None
        return LendingState(level=level, group=g, t=0, group_id=gid)

    def observe(self, state: LendingState) -> Observation:
        feats = self.model.features
        return Observation(group=state.group, level=state.level, t=state.t,
                           features=None if feats is None else feats[state.group, state.level],
                           extras=LazyArrays({k: (lambda v=v: v[state.group, state.level])
                                              for k, v in self.model.aux.items()}))

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random(n)

    def step(self, state: LendingState, decisions: np.ndarray, noise: np.ndarray) -> StepResult:
        x, g = state.level, state.group
        d = np.asarray(decisions).astype(np.intp)
        nxt = (noise[:, None] >= self._cdf[g, d, x]).sum(axis=1)
        gain = self._f[g, nxt] - self._f[g, x]
        reward = self.model.reward[g, d, x]
        return StepResult(state=LendingState(level=nxt, group=g, t=state.t + 1,
                                             group_id=state.group_id),
                          reward=reward, gain=gain)

"""Individual-level simulator of any :class:`~causalfair.model.TabularModel`
(independent of the lending model, so systems can use it without importing lending)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from causalfair.errors import InputError
from causalfair.model import TabularModel
from causalfair.types import Observation, StepResult

__all__ = ["TabularSimulator", "TabularState", "LazyArrays"]


class LazyArrays(Mapping):
    """A read-only mapping whose arrays are computed on first access (simulators expose
    extras and info that most callers never read)."""

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
class TabularState:
    """Levels (0-based) and groups of a batch; ``group_id`` when the batch is one group."""

    level: np.ndarray  # int (n,)
    group: np.ndarray  # int (n,)
    t: int = 0
    group_id: int | None = None


def _guide_table(cdf: np.ndarray, buckets: int) -> np.ndarray:
    """The guide table of inverse-CDF sampling (Chen & Asau 1974; Devroye 1986, section
    III.2.4) for the rows of ``cdf`` (cells, K - 1), each nondecreasing (a cumulative sum
    of probabilities): entry ``[cell, b]`` is the count of the row's values <= u, the same
    for every u in bucket b, or -1 where a value falls strictly inside the bucket (there
    the count depends on u).

    Bucket b < ``buckets`` holds u in [b / buckets, (b + 1) / buckets) (``buckets`` is a
    power of two, so ``u * buckets`` is exact and its integer part is b); bucket 0 also
    holds every u < 0 and bucket ``buckets`` every u >= 1, so that with ``np.clip`` the
    table answers for any u exactly as counting ``u >= row`` does.
    """
    edges = np.arange(1, buckets + 1) / buckets
    lower = np.concatenate([[-np.inf], edges])  # bucket b holds lower[b] <= u < upper[b]
    upper = np.concatenate([edges, [np.inf]])
    table = np.empty((cdf.shape[0], buckets + 1), dtype=np.intp)
    for cell, row in enumerate(cdf):
        count = np.searchsorted(row, lower, side="right")  # values <= lower
        table[cell] = np.where(np.searchsorted(row, upper, side="left") > count, -1, count)
    return table


#: Buckets per level in a CDF row of the guide table: about (K - 1) / buckets of the
#: uniforms fall in a bucket that holds a CDF value; the table stays within 2**21 entries.
_GUIDE_PER_LEVEL = 64
_GUIDE_MAX_ENTRIES = 1 << 21


class TabularSimulator:
    """Individual-level simulator of any :class:`~causalfair.model.TabularModel`.

    The next level is drawn by inverse CDF from the kernel row P(. | x, d, s) with one
    uniform u per individual (the noise), so forks with other decisions share it: it is
    the number of the row's cumulative sums (``np.cumsum`` of the row, last one left out)
    that are <= u. A guide table (:func:`_guide_table`) gives that count for most u with
    one lookup; the few u that fall in a bucket holding a CDF value are counted against
    their row. The reward of a step is the model's expected reward r[s, d, x] (a tabular
    model stores no more).
    """

    def __init__(self, model: TabularModel):
        self.model = model
        self.n_groups = model.n_groups
        self.n_levels = model.n_levels
        self.group_names = tuple(model.group_names)
        self.group_weights = np.asarray(model.group_weights, dtype=np.float64)
        self.name = model.name
        self.n_actions = model.n_actions
        self.baseline = model.baseline
        self._init_cdf = np.cumsum(model.initial, axis=1)
        K = self.n_levels
        # every table is indexed by cell = (s * A + d) * K + x
        self._cdf = np.cumsum(model.kernel, axis=-1)[..., :-1].reshape(-1, K - 1)
        cells = self._cdf.shape[0]
        buckets = 1 << int(np.ceil(np.log2(_GUIDE_PER_LEVEL * K)))
        while buckets > 1 and cells * (buckets + 1) > _GUIDE_MAX_ENTRIES:
            buckets //= 2
        self._buckets = buckets
        self._guide = _guide_table(self._cdf, buckets).reshape(-1)
        self._reward = model.reward.reshape(-1)
        self._f = model.potential  # (G, K)
        # the gain f(x') - f(x) at each entry of the guide table that gives the next level
        # x' (0 at the others): one lookup per individual instead of two and a difference
        group, level = np.arange(cells) // (self.n_actions * K), np.arange(cells) % K
        guide = self._guide.reshape(cells, buckets + 1)
        gain = self._f[group[:, None], np.maximum(guide, 0)] - self._f[group, level][:, None]
        self._guide_gain = np.where(guide < 0, 0.0, gain).reshape(-1)

    def reset(self, n: int, group: int | np.ndarray, rng: np.random.Generator) -> TabularState:
        g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
        u = rng.random(n)
        level = (u[:, None] >= self._init_cdf[g]).sum(axis=1)
        level = np.minimum(level, self.n_levels - 1).astype(np.intp)
        gid = int(group) if np.ndim(group) == 0 else None
        return TabularState(level=level, group=g, t=0, group_id=gid)

    def observe(self, state: TabularState) -> Observation:
        feats = self.model.features
        return Observation(group=state.group, level=state.level, t=state.t,
                           features=None if feats is None else feats[state.group, state.level],
                           extras=LazyArrays({k: (lambda v=v: v[state.group, state.level])
                                              for k, v in self.model.aux.items()}))

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random(n)

    def _lookup(self, cell: np.ndarray, u: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next level (the count of the CDF values of row ``cell`` that are <= ``u``)
        per individual, the entry of the guide table it read, and the individuals whose
        entry gave none (their level was counted)."""
        B = self._buckets
        scaled = u * B  # exact: B is a power of two
        np.clip(scaled, 0, B, out=scaled)
        bucket = scaled.astype(np.intp)
        bucket += cell * (B + 1)
        nxt = self._guide.take(bucket)
        todo = np.flatnonzero(nxt < 0)
        if todo.size:
            nxt[todo] = (u[todo, None] >= self._cdf[cell[todo]]).sum(axis=1)
        return nxt, bucket, todo

    def _next_level(self, cell: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The count of the CDF values of row ``cell`` that are <= ``u``, per individual."""
        return self._lookup(cell, u)[0]

    def step(self, state: TabularState, decisions: np.ndarray, noise: np.ndarray) -> StepResult:
        x, g = state.level, state.group
        A, K = self.model.n_actions, self.n_levels
        d = np.asarray(decisions)
        if d.dtype != np.bool_:
            d = d.astype(np.intp, copy=False)
            if d.size and (d.min() < 0 or d.max() >= A):
                bad = d[(d < 0) | (d >= A)][0]
                raise InputError(f"decisions: must be action indices in [0, {A}), got {bad}; "
                                 "pass one action index (or bool for two actions) per "
                                 "individual.")
        s = g if state.group_id is None else state.group_id  # an int: one group
        cell = x + s * (A * K)
        cell += d * K
        nxt, bucket, todo = self._lookup(cell, np.asarray(noise, dtype=np.float64))
        gain = self._guide_gain.take(bucket)
        if todo.size:  # levels the table did not give: their gains from the potential
            row = (g[todo] if state.group_id is None else state.group_id) * K
            f = self._f.reshape(-1)
            gain[todo] = f.take(row + nxt[todo]) - f.take(row + x[todo])
        reward = self._reward.take(cell)
        return StepResult(state=TabularState(level=nxt, group=g, t=state.t + 1,
                                             group_id=state.group_id),
                          reward=reward, gain=gain)

"""Individual-level simulator of any :class:`~causalfair.model.TabularModel`
(independent of the lending model, so systems can use it without importing lending)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

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

    def step(self, state: TabularState, decisions: np.ndarray, noise: np.ndarray) -> StepResult:
        x, g = state.level, state.group
        d = np.asarray(decisions).astype(np.intp)
        nxt = (noise[:, None] >= self._cdf[g, d, x]).sum(axis=1)
        gain = self._f[g, nxt] - self._f[g, x]
        reward = self.model.reward[g, d, x]
        return StepResult(state=TabularState(level=nxt, group=g, t=state.t + 1,
                                             group_id=state.group_id),
                          reward=reward, gain=gain)

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

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from causalfair.model import CausalStructure, ModelError, TabularModel

__all__ = ["LendingModel", "SETTINGS", "lending_setting", "lending_potential"]

SETTINGS = ("lending-1", "lending-2", "lending-3")

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
        if not np.isfinite(self.interest) or self.interest < 0:
            raise ModelError(f"interest: must be a finite number >= 0, got {self.interest!r}.")
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

    def to_system(self, *, id: str | None = None, params: dict | None = None):
        """This model as a :class:`~causalfair.systems.System` (simulator + tabular model)."""
        from causalfair.systems.builtin import lending_system

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
        )


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
    weights = np.asarray(group_weights, dtype=np.float64)
    if setting == "lending-2":
        from causalfair.sim.fico import fico_initial, fico_repay

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

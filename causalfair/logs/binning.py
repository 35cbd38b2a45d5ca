"""Feature-vector states of a decision log: numeric feature columns cut into bins whose
joint bin is the level (:class:`StateBinning`, :func:`bin_states`), and a gain potential
over the binned features (:func:`linear_potential`).

Each feature is cut into bins (``bins=N`` quantile bins over all rows, or explicit cut
points); the joint bin (row-major over the features, the first feature varying slowest)
becomes the level, and the next-state features are binned with the same cut points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair.logs.errors import (
    MSG_BINS_CUTS,
    MSG_BINS_DISTINCT,
    MSG_BINS_EMPTY,
    MSG_BINS_MISSING,
    MSG_BINS_VALUE,
    MSG_EMPTY,
    MSG_MISSING_VALUES,
    MSG_NEXT_STATE_COLUMNS,
    MSG_NOT_FINITE,
    MSG_NOT_FRAME,
    MSG_STATE_AND_LEVEL,
    MSG_STATE_COLUMNS,
    LogError,
    first_row,
    not_numeric,
)

__all__ = ["StateBinning", "bin_states", "linear_potential", "feature_column"]


@dataclass(frozen=True, eq=False)
class StateBinning:
    """How feature columns become levels.

    ``columns``: the state features; ``next_columns``: their next-state columns;
    ``cuts[j]``: the increasing interior cut points of feature j (bin b holds the values
    v with cuts[b-1] < v <= cuts[b]; the outer bins are open, so every value has a bin);
    ``centers[j]``: mean of feature j over the observed values (state and next state)
    in each bin, NaN for a bin without any. The level of a row is the joint bin,
    row-major: sum_j bin_j * prod_{k > j} n_bins[k] (the first feature varies slowest).
    """

    columns: tuple[str, ...]
    next_columns: tuple[str, ...]
    cuts: tuple[np.ndarray, ...]
    centers: tuple[np.ndarray, ...]

    @property
    def n_bins(self) -> tuple[int, ...]:
        return tuple(int(c.size) + 1 for c in self.cuts)

    @property
    def n_levels(self) -> int:
        return int(np.prod(self.n_bins))

    def bin_feature(self, j: int, values: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.cuts[j], np.asarray(values, dtype=np.float64), side="left")

    def digitize(self, values: np.ndarray) -> np.ndarray:
        """Levels (n,) of feature rows ``values`` (n, F)."""
        v = np.asarray(values, dtype=np.float64).reshape(-1, len(self.columns))
        level = np.zeros(v.shape[0], dtype=np.int64)
        for j, nb in enumerate(self.n_bins):
            level = level * nb + self.bin_feature(j, v[:, j])
        return level

    def labels(self) -> tuple[str, ...]:
        """Level labels, e.g. ``income:2/debt:0`` (feature:bin, 0-based bins)."""
        grid = np.indices(self.n_bins).reshape(len(self.n_bins), -1).T
        return tuple("/".join(f"{c}:{b}" for c, b in zip(self.columns, row, strict=True))
                     for row in grid)

    def levels(self) -> Any:
        """One row per level: ``level``, ``label`` and per feature ``<f>_bin``,
        ``<f>_lower``, ``<f>_upper`` (the bin's interval, -inf / inf outside) and
        ``<f>_mean`` (the feature's mean in the bin; the interval's midpoint, or its
        finite end, for a bin without observed values)."""
        import pandas as pd

        grid = np.indices(self.n_bins).reshape(len(self.n_bins), -1).T
        out: dict[str, Any] = {"level": np.arange(self.n_levels), "label": list(self.labels())}
        for j, c in enumerate(self.columns):
            b = grid[:, j]
            edges = np.concatenate([[-np.inf], self.cuts[j], [np.inf]])
            lo, hi = edges[b], edges[b + 1]
            mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2.0,
                           np.where(np.isfinite(lo), lo, hi))
            mid = np.where(np.isfinite(mid), mid, 0.0)  # a single bin: no finite end
            mean = self.centers[j][b]
            out[f"{c}_bin"] = b
            out[f"{c}_lower"] = lo
            out[f"{c}_upper"] = hi
            out[f"{c}_mean"] = np.where(np.isnan(mean), mid, mean)
        return pd.DataFrame(out)

    def describe(self) -> list[str]:
        """One line per feature: its bins as intervals (as the summary prints them)."""
        out = []
        for j, c in enumerate(self.columns):
            cuts = [f"{v:.6g}" for v in self.cuts[j]]
            edges = ["-inf", *cuts, "inf"]
            bins = ", ".join(f"{b}: ({edges[b]}, {edges[b + 1]}{')' if b == len(cuts) else ']'}"
                             for b in range(len(edges) - 1))
            out.append(f"{c} (next: {self.next_columns[j]}): {self.n_bins[j]} bins {bins}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": list(self.columns),
            "next_state": list(self.next_columns),
            "n_bins": list(self.n_bins),
            "cuts": {c: self.cuts[j].tolist() for j, c in enumerate(self.columns)},
            "n_levels": self.n_levels,
        }


def _as_names(value: Any, what: str) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(c, str) and c for c in names):
        raise LogError(f"logs: {what} must name one or more columns, got {value!r}.")
    if len(set(names)) != len(names):
        raise LogError(f"logs: {what} names a column twice: {value!r}.")
    return names


def feature_column(df: Any, col: str) -> np.ndarray:
    """The numeric feature column ``col`` of ``df`` as float64; a non-numeric column, a
    missing or a non-finite value raises :class:`LogError` naming the column and row."""
    import pandas as pd

    s = df[col]
    if not pd.api.types.is_numeric_dtype(s.dtype):
        raise not_numeric(df, col)
    v = s.to_numpy(dtype=np.float64, na_value=np.nan)
    na = np.isnan(v)
    if na.any():
        raise LogError(MSG_MISSING_VALUES.format(column=col, count=int(na.sum()), row=first_row(na)))
    bad = ~np.isfinite(v)
    if bad.any():
        i = first_row(bad)
        raise LogError(MSG_NOT_FINITE.format(column=col, value=float(v[i]), row=i))
    return v


def _cuts_for(col: str, spec: Any, v: np.ndarray) -> np.ndarray:
    """Interior cut points of one feature from ``spec`` (int: quantile bins)."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        n = int(spec)
        if n < 1:
            raise LogError(MSG_BINS_VALUE.format(column=col, value=spec))
        uniq = np.unique(v)
        if uniq.size < n:
            raise LogError(MSG_BINS_DISTINCT.format(column=col, found=int(uniq.size), bins=n))
        if uniq.size == n:  # one bin per distinct value: cut halfway between them
            return (uniq[1:] + uniq[:-1]) / 2.0
        cuts = np.quantile(v, np.arange(1, n) / n)
        counts = np.bincount(np.searchsorted(cuts, v, side="left"), minlength=n)
        if (counts == 0).any():
            vals, cnt = np.unique(v, return_counts=True)
            k = int(np.argmax(cnt))
            raise LogError(MSG_BINS_EMPTY.format(
                column=col, bins=n, empty=np.flatnonzero(counts == 0).tolist(),
                value=float(vals[k]), share=cnt[k] / v.size))
        return cuts
    if isinstance(spec, (str, bytes)) or not np.iterable(spec):
        raise LogError(MSG_BINS_VALUE.format(column=col, value=spec))
    try:
        cuts = np.asarray(list(spec), dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise LogError(MSG_BINS_CUTS.format(column=col, value=spec)) from None
    if not np.isfinite(cuts).all() or (np.diff(cuts) <= 0).any():
        raise LogError(MSG_BINS_CUTS.format(column=col, value=list(spec)))
    return cuts


def bin_states(df: Any, state: Any, bins: Any, next_state: Any = None) -> tuple[Any, StateBinning]:
    """Levels from feature columns: returns (a copy of ``df`` with ``level`` and
    ``next_level`` added, the :class:`StateBinning`).

    ``state``: the feature column(s) of x_t; ``next_state``: their next-state columns
    (default ``next_<feature>``). ``bins``: an int N (N quantile bins for every feature,
    computed over all rows' state values; a feature with exactly N distinct values gets
    one bin per value), or a dict feature -> N or a list of increasing cut points (bin b:
    cuts[b-1] < v <= cuts[b], outer bins open). Raises :class:`LogError` naming the
    column: missing state / next-state columns, a log that also has level columns,
    non-numeric, missing or non-finite values, too few distinct values or ties that
    leave a quantile bin empty, bad cut points.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise LogError(MSG_NOT_FRAME.format(kind=type(df).__name__))
    cols = _as_names(state, "state")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise LogError(MSG_STATE_COLUMNS.format(missing=", ".join(missing),
                                                found=", ".join(map(str, df.columns))))
    nxt = [f"next_{c}" for c in cols] if next_state is None else _as_names(next_state, "next_state")
    if len(nxt) != len(cols):
        raise LogError(f"logs: next_state names {len(nxt)} column(s) for {len(cols)} state "
                       f"feature(s) {cols!r}; give one next-state column per feature, in order.")
    missing = [c for c in nxt if c not in df.columns]
    if missing:
        raise LogError(MSG_NEXT_STATE_COLUMNS.format(missing=", ".join(missing), state=cols))
    for c in ("level", "next_level"):
        if c in df.columns:
            raise LogError(MSG_STATE_AND_LEVEL.format(column=c))
    if bins is None:
        raise LogError(MSG_BINS_MISSING.format(state=cols, missing=", ".join(cols)))
    if isinstance(bins, dict):
        unknown = [k for k in bins if k not in cols]
        if unknown:
            raise LogError(f"logs: bins names {unknown!r}, which are not state features "
                           f"{cols!r}.")
        absent = [c for c in cols if c not in bins]
        if absent:
            raise LogError(MSG_BINS_MISSING.format(state=cols, missing=", ".join(absent)))
        specs = [bins[c] for c in cols]
    else:
        specs = [bins] * len(cols)
    if len(df) == 0:
        raise LogError(MSG_EMPTY)
    cur = np.column_stack([feature_column(df, c) for c in cols])
    new = np.column_stack([feature_column(df, c) for c in nxt])
    cuts = tuple(_cuts_for(c, spec, cur[:, j]) for j, (c, spec) in enumerate(zip(cols, specs, strict=True)))
    centers = []
    for j, cut in enumerate(cuts):
        allv = np.concatenate([cur[:, j], new[:, j]])
        b = np.searchsorted(cut, allv, side="left")
        cnt = np.bincount(b, minlength=cut.size + 1)
        tot = np.bincount(b, weights=allv, minlength=cut.size + 1)
        centers.append(np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan))
    binning = StateBinning(columns=tuple(cols), next_columns=tuple(nxt), cuts=cuts,
                           centers=tuple(centers))
    out = df.copy(deep=False)
    out["level"] = binning.digitize(cur)
    out["next_level"] = binning.digitize(new)
    return out, binning


def linear_potential(weights: Any) -> Any:
    """A gain potential for feature states: f(level) = sum_j weights[j] * (mean of
    feature j in the level's bin), as a callable of :meth:`StateBinning.levels` (pass it
    as ``potential=``). ``weights``: dict feature -> weight (features left out weigh
    0)."""
    w = dict(weights)
    for k, v in w.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise LogError(f"potential weights: weight of {k!r} must be a finite number, got {v!r}.")

    def potential(levels: Any) -> np.ndarray:
        feats = [c[:-5] for c in levels.columns if c.endswith("_mean")]
        unknown = [k for k in w if k not in feats]
        if unknown:
            raise LogError(f"potential weights: {unknown!r} are not state features {feats!r}.")
        f = np.zeros(len(levels))
        for k, v in w.items():
            f += float(v) * levels[f"{k}_mean"].to_numpy(dtype=np.float64)
        return f

    potential.weights = w  # type: ignore[attr-defined]
    return potential

"""Decision logs: the format, its validation, reading from files, and simulated logs.

A decision log is a pandas DataFrame with **one row per decision**:

=============  ===================================================================
column         meaning
=============  ===================================================================
``id``         individual identifier (any hashable value)
``t``          decision epoch (integer); an individual's rows are consecutive epochs
``group``      sensitive attribute S (fixed per individual)
``level``      qualification level x_t, an integer in 0..K-1 (0-based)
``decision``   D_t, 0 (deny / d0) or 1 (approve / d1)
``next_level`` x_{t+1}, integer in 0..K-1; equals the level of the individual's next row
``reward``     decision-maker reward of the step (float)
``outcome``    optional: repayment (1/0), missing (NaN) where unknown (e.g. under d0)
=============  ===================================================================

Feature-vector states: instead of ``level`` / ``next_level`` the log may carry the state
as numeric feature columns (``state=["income", "debt"]``) and their values after the
decision (``next_income``, ``next_debt``, or ``next_state=[...]``). Each feature is cut
into bins (``bins=N`` quantile bins over all rows, or explicit cut points), and the
joint bin (row-major over the features, the first feature varying slowest) becomes the
level; next-state features are binned with the same cut points. See
:class:`StateBinning`.

:func:`validate_logs` checks the frame with array operations (sort, shift, compare: no
Python loop over rows) and returns a :class:`LogData` of integer-coded arrays; problems
raise :class:`LogError` with one of the message constants of this module (``MSG_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._limits import check_memory, format_bytes, max_memory
from causalfair._validation import check_names
from causalfair.errors import InputError
from causalfair.policies.core import parse_policy
from causalfair.systems import System, as_system, make

__all__ = [
    "LogError",
    "LogData",
    "REQUIRED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "validate_logs",
    "read_logs",
    "simulate_logs",
    "StateBinning",
    "bin_states",
    "linear_potential",
    "MSG_NOT_FRAME",
    "MSG_EMPTY",
    "MSG_MISSING_COLUMNS",
    "MSG_MISSING_VALUES",
    "MSG_NOT_INTEGER",
    "MSG_NOT_NUMERIC",
    "MSG_DECISION",
    "MSG_LEVEL_RANGE",
    "MSG_DUPLICATE_T",
    "MSG_TIME_GAP",
    "MSG_LATE_START",
    "MSG_GROUP_CHANGE",
    "MSG_NEXT_LEVEL",
    "MSG_GROUPS",
    "MSG_FILE_TYPE",
    "MSG_PARQUET",
    "MSG_STATE_COLUMNS",
    "MSG_NEXT_STATE_COLUMNS",
    "MSG_STATE_AND_LEVEL",
    "MSG_NOT_FINITE",
    "MSG_BINS_MISSING",
    "MSG_BINS_VALUE",
    "MSG_BINS_DISTINCT",
    "MSG_BINS_EMPTY",
    "MSG_BINS_CUTS",
    "MSG_NEXT_STATE",
    "MSG_FEATURE_POTENTIAL",
]

REQUIRED_COLUMNS = ("id", "t", "group", "level", "decision", "next_level", "reward")
OPTIONAL_COLUMNS = ("outcome",)

# Error messages (format strings; tests compare the exact text).
MSG_NOT_FRAME = "logs: expected a pandas DataFrame, got {kind}."
MSG_EMPTY = "logs: the log has no rows; it needs one row per decision."
MSG_MISSING_COLUMNS = (
    "logs: missing column(s) {missing}; a decision log needs the columns {required} "
    "(optional: outcome)."
)
MSG_MISSING_VALUES = (
    "logs: column {column!r} has {count} missing value(s) (first at row {row}); only "
    "'outcome' may be missing."
)
MSG_NOT_INTEGER = (
    "logs: column {column!r} must hold integers, got {value!r} at row {row} (dtype {dtype})."
)
MSG_NOT_NUMERIC = "logs: column {column!r} must be numeric, got dtype {dtype}."
MSG_DECISION = "logs: column 'decision' must be 0 or 1, got {value!r} at row {row}."
MSG_LEVEL_RANGE = (
    "logs: column {column!r} must hold 0-based levels in 0..{kmax}, got {value!r} at row {row}."
)
MSG_DUPLICATE_T = "logs: individual {id!r} has more than one row at t = {t}."
MSG_TIME_GAP = (
    "logs: individual {id!r} jumps from t = {t0} to t = {t1}; an individual's rows must be "
    "consecutive time steps (a gap means missing decisions)."
)
MSG_LATE_START = (
    "logs: individual {id!r} starts at t = {t}, but the log starts at t = {t0}; every "
    "individual must be observed from the first epoch (its first level is x_0)."
)
MSG_GROUP_CHANGE = (
    "logs: individual {id!r} changes group from {g0!r} to {g1!r} at t = {t}; the group S "
    "is fixed per individual."
)
MSG_NEXT_LEVEL = (
    "logs: individual {id!r} has next_level = {nxt!r} at t = {t0}, but its row at t = {t1} "
    "has level = {lvl!r}; next_level must equal the following row's level."
)
MSG_GROUPS = (
    "logs: column 'group' has {found} distinct value(s) {values}; {need}."
)
MSG_FILE_TYPE = (
    "logs: cannot read {path}: unknown file type {suffix!r}; use .csv (or .csv.gz) or .parquet."
)
MSG_PARQUET = (
    "logs: reading {path} needs a Parquet engine (pyarrow or fastparquet), which is not "
    "installed; install pyarrow or convert the log to CSV."
)


MSG_STATE_COLUMNS = (
    "logs: state column(s) {missing} not in the log; state= names the numeric feature "
    "columns of x_t (the log has the columns {found})."
)
MSG_NEXT_STATE_COLUMNS = (
    "logs: next-state column(s) {missing} not in the log; with state={state!r} every "
    "feature needs its value after the decision in a column named next_<feature> (or "
    "name those columns with next_state=[...], CLI --next-state-cols)."
)
MSG_STATE_AND_LEVEL = (
    "logs: the log has a {column!r} column and state= was given; the level is derived from "
    "the state features, so drop the level columns or omit state=."
)
MSG_NOT_FINITE = "logs: column {column!r} has a non-finite value {value!r} at row {row}."
MSG_BINS_MISSING = (
    "logs: state={state!r} needs a binning: bins=N (N quantile bins per feature) or "
    "bins={{feature: N or [cut points]}} (CLI --bins N / --bin-cuts FEATURE=C1,C2,...); "
    "no binning for {missing}."
)
MSG_BINS_VALUE = (
    "logs: bins for state column {column!r}: expected an integer >= 1 or an increasing "
    "list of cut points, got {value!r}."
)
MSG_BINS_DISTINCT = (
    "logs: state column {column!r} has {found} distinct value(s), too few for {bins} "
    "quantile bins; pass bins={found} or fewer for it, or explicit cut points."
)
MSG_BINS_EMPTY = (
    "logs: state column {column!r}: {bins} quantile bins leave bin(s) {empty} empty (ties: "
    "the value {value!r} holds {share:.0%} of the rows); pass fewer bins or explicit cut "
    "points."
)
MSG_BINS_CUTS = (
    "logs: cut points for state column {column!r} must be finite and strictly increasing, "
    "got {value!r}."
)
MSG_NEXT_STATE = (
    "logs: individual {id!r} has {next_col} = {nxt!r} at t = {t0}, but its row at t = {t1} "
    "has {col} = {val!r}; the next-state columns must equal the following row's state."
)
MSG_FEATURE_POTENTIAL = (
    "logs: with {n} state features the gain potential f(x) over the joint bins must be "
    "given: potential=linear_potential({{feature: weight}}) (CLI --potential-weights "
    "income=1,debt=-0.5), a callable of StateBinning.levels(), or an array of {k} values; "
    "the lending default only applies to levels and single-feature bins."
)


class LogError(InputError):
    """A decision log is malformed (the message names the column/individual and the fix)."""


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


def _feature(df: Any, col: str) -> np.ndarray:
    import pandas as pd

    s = df[col]
    if not pd.api.types.is_numeric_dtype(s.dtype):
        raise LogError(MSG_NOT_NUMERIC.format(column=col, dtype=s.dtype))
    v = s.to_numpy(dtype=np.float64, na_value=np.nan)
    na = np.isnan(v)
    if na.any():
        raise LogError(MSG_MISSING_VALUES.format(column=col, count=int(na.sum()), row=_first(na)))
    bad = ~np.isfinite(v)
    if bad.any():
        i = _first(bad)
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
    cur = np.column_stack([_feature(df, c) for c in cols])
    new = np.column_stack([_feature(df, c) for c in nxt])
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


@dataclass(frozen=True, eq=False)
class LogData:
    """A validated log as integer-coded arrays, rows sorted by (individual, t).

    ``ind``: individual index 0..n-1 per row; ``g``: group index (into ``groups``);
    ``x``, ``xn``: level and next level; ``d``: decision; ``t``: epoch minus the first
    epoch; ``reward``; ``outcome`` (NaN where unknown, or None without the column);
    ``first``: mask of each individual's first row. ``ids``: the original ids.
    ``binning``: the :class:`StateBinning` when the levels come from state features.
    """

    ind: np.ndarray
    g: np.ndarray
    x: np.ndarray
    xn: np.ndarray
    d: np.ndarray
    t: np.ndarray
    reward: np.ndarray
    outcome: np.ndarray | None
    first: np.ndarray
    ids: np.ndarray
    groups: tuple[str, ...]
    n_levels: int
    t0: int
    binning: StateBinning | None = None

    @property
    def n_rows(self) -> int:
        return int(self.ind.shape[0])

    @property
    def n_individuals(self) -> int:
        return int(self.ids.shape[0])

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def horizon(self) -> int:
        """Longest observed trajectory (number of decision epochs)."""
        return int(self.t.max()) + 1


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _int_column(df: Any, col: str) -> np.ndarray:
    import pandas as pd

    s = df[col]
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.to_numpy().astype(np.int64)
    if pd.api.types.is_integer_dtype(s.dtype):
        return s.to_numpy(dtype=np.int64)
    if pd.api.types.is_float_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64)
        bad = v != np.round(v)
        if bad.any():
            i = _first(bad)
            raise LogError(MSG_NOT_INTEGER.format(column=col, value=v[i].item(), row=i, dtype=s.dtype))
        return v.astype(np.int64)
    v = s.to_numpy()
    i = 0
    raise LogError(MSG_NOT_INTEGER.format(column=col, value=v[i], row=i, dtype=s.dtype))


def validate_logs(df: Any, *, n_levels: int | None = None,
                  groups: Any = None, state: Any = None, bins: Any = None,
                  next_state: Any = None) -> LogData:
    """Check a decision log and return it as a :class:`LogData`.

    ``n_levels``: K (default: 1 + the largest level or next level in the log).
    ``groups``: the group labels in order (index 0 = s+, the advantaged group, first in
    the pair of the decomposition); default: the categories of a categorical column, or
    the sorted distinct values. Raises :class:`LogError` on the first problem found, in
    this order: not a frame, no rows, missing columns, missing values, non-integer /
    non-numeric columns, decisions not 0/1, levels out of range, unknown groups, then
    per individual (rows sorted by id, t): duplicate epochs, time gaps, late starts,
    group changes, next_level mismatches.

    ``state`` (with ``bins``, optionally ``next_state``): the state is given by numeric
    feature columns instead of ``level`` / ``next_level``; they are binned by
    :func:`bin_states` (after the check for the other required columns) and the
    next-state features must equal the following row's features.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise LogError(MSG_NOT_FRAME.format(kind=type(df).__name__))
    required = REQUIRED_COLUMNS if state is None else tuple(
        c for c in REQUIRED_COLUMNS if c not in ("level", "next_level"))
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise LogError(MSG_MISSING_COLUMNS.format(
            missing=", ".join(missing), required=", ".join(REQUIRED_COLUMNS)))
    if len(df) == 0:
        raise LogError(MSG_EMPTY)
    binning = None
    if state is not None:
        df, binning = bin_states(df, state, bins, next_state)
        if n_levels is not None and int(n_levels) != binning.n_levels:
            raise LogError(f"logs: n_levels = {n_levels} but the state binning has "
                           f"{binning.n_levels} joint bins {binning.n_bins}; omit n_levels.")
        n_levels = binning.n_levels
    elif bins is not None or next_state is not None:
        raise LogError("logs: bins= / next_state= bin feature states and need state=[...] "
                       "(the feature columns); a log with level columns needs neither.")
    for col in REQUIRED_COLUMNS:
        na = df[col].isna().to_numpy()
        if na.any():
            raise LogError(MSG_MISSING_VALUES.format(column=col, count=int(na.sum()), row=_first(na)))
    t = _int_column(df, "t")
    x = _int_column(df, "level")
    xn = _int_column(df, "next_level")
    d = _int_column(df, "decision")
    if not pd.api.types.is_numeric_dtype(df["reward"].dtype) or pd.api.types.is_bool_dtype(df["reward"].dtype):
        raise LogError(MSG_NOT_NUMERIC.format(column="reward", dtype=df["reward"].dtype))
    reward = df["reward"].to_numpy(dtype=np.float64)
    outcome = None
    if "outcome" in df.columns:
        if not pd.api.types.is_numeric_dtype(df["outcome"].dtype):
            raise LogError(MSG_NOT_NUMERIC.format(column="outcome", dtype=df["outcome"].dtype))
        outcome = df["outcome"].to_numpy(dtype=np.float64)
    bad = (d != 0) & (d != 1)
    if bad.any():
        i = _first(bad)
        raise LogError(MSG_DECISION.format(value=int(d[i]), row=i))
    K = int(max(x.max(), xn.max())) + 1 if n_levels is None else int(n_levels)
    for col, v in (("level", x), ("next_level", xn)):
        bad = (v < 0) | (v >= K)
        if bad.any():
            i = _first(bad)
            raise LogError(MSG_LEVEL_RANGE.format(column=col, kmax=K - 1, value=int(v[i]), row=i))

    gcol = df["group"]
    if groups is None:
        if isinstance(gcol.dtype, pd.CategoricalDtype):
            groups = list(gcol.cat.categories)
        else:
            groups = sorted(pd.unique(gcol).tolist(), key=lambda v: (str(type(v)), v))
    groups = list(groups)
    g = pd.Index(groups).get_indexer(gcol)
    if (g < 0).any() or len(groups) < 2:
        found = pd.unique(gcol).tolist()
        need = (f"expected only the groups {groups!r}" if (g < 0).any()
                else "a log needs at least 2 groups to compare")
        raise LogError(MSG_GROUPS.format(found=len(found), values=found, need=need))
    check_names("logs: column 'group'", groups, LogError)
    g = g.astype(np.int64)

    check_memory(_MODEL_COPIES * 8 * len(groups) * 2 * K * K,
                 f"logs: a model of {K} levels x {len(groups)} groups (the log's largest "
                 f"level is {K - 1})", "check the 'level' and 'next_level' columns or bin the "
                 "state into fewer levels (--bins)")

    ind_raw, ids = pd.factorize(df["id"], sort=False)
    order = np.lexsort((t, ind_raw))
    ind_raw, t, g, x, xn, d, reward = (a[order] for a in (ind_raw, t, g, x, xn, d, reward))
    if outcome is not None:
        outcome = outcome[order]
    ids = np.asarray(ids)
    same = ind_raw[1:] == ind_raw[:-1]
    dt = t[1:] - t[:-1]
    dup = same & (dt == 0)
    if dup.any():
        i = _first(dup)
        raise LogError(MSG_DUPLICATE_T.format(id=_py(ids[ind_raw[i]]), t=int(t[i])))
    gap = same & (dt > 1)
    if gap.any():
        i = _first(gap)
        raise LogError(MSG_TIME_GAP.format(id=_py(ids[ind_raw[i]]), t0=int(t[i]), t1=int(t[i + 1])))
    first = np.ones(t.shape[0], dtype=bool)
    first[1:] = ~same
    t0 = int(t.min())
    late = first & (t != t0)
    if late.any():
        i = _first(late)
        raise LogError(MSG_LATE_START.format(id=_py(ids[ind_raw[i]]), t=int(t[i]), t0=t0))
    chg = same & (g[1:] != g[:-1])
    if chg.any():
        i = _first(chg)
        raise LogError(MSG_GROUP_CHANGE.format(
            id=_py(ids[ind_raw[i]]), g0=_py(groups[g[i]]), g1=_py(groups[g[i + 1]]), t=int(t[i + 1])))
    if binning is not None:
        for col, ncol in zip(binning.columns, binning.next_columns, strict=True):
            cur = _feature(df, col)[order]
            new = _feature(df, ncol)[order]
            off = same & ~np.isclose(new[:-1], cur[1:], rtol=1e-12, atol=0.0)
            if off.any():
                i = _first(off)
                raise LogError(MSG_NEXT_STATE.format(
                    id=_py(ids[ind_raw[i]]), next_col=ncol, nxt=float(new[i]), t0=int(t[i]),
                    t1=int(t[i + 1]), col=col, val=float(cur[i + 1])))
    mism = same & (xn[:-1] != x[1:])
    if mism.any():
        i = _first(mism)
        raise LogError(MSG_NEXT_LEVEL.format(
            id=_py(ids[ind_raw[i]]), nxt=int(xn[i]), t0=int(t[i]), t1=int(t[i + 1]), lvl=int(x[i + 1])))
    for a in (ind_raw, t, g, x, xn, d, reward, first):
        a.setflags(write=False)
    return LogData(
        ind=ind_raw.astype(np.int64), g=g, x=x, xn=xn, d=d, t=t - t0, reward=reward,
        outcome=outcome, first=first, ids=ids, groups=tuple(str(v) for v in groups),
        n_levels=K, t0=t0, binning=binning,
    )


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


#: Most columns a CSV decision log may have (a log has eight plus its state features).
MAX_LOG_COLUMNS = 10_000
#: Float64 copies of the (groups, 2, levels, levels) table a log's fit holds at once.
_MODEL_COPIES = 4
#: Memory one row of a simulated log needs (its columns, the DataFrame and its CSV text).
_LOG_ROW_BYTES = 256

#: Memory a decision log needs per byte of CSV text (the parser's buffers and the
#: DataFrame's columns), and per uncompressed byte of Parquet data.
_CSV_FACTOR = 5
_PARQUET_FACTOR = 2


class _CappedStream:
    """A decompressing binary stream that refuses to give more than ``cap`` bytes."""

    def __init__(self, fh: Any, cap: int, path: Path):
        self.fh, self.cap, self.path, self.seen = fh, cap, path, 0

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n if n is not None and n >= 0 else 1 << 20)
        self.seen += len(data)
        if self.seen > self.cap:
            check_memory(_CSV_FACTOR * self.seen, f"logs: {self.path} (inflates past "
                         f"{self.seen} bytes of CSV)", "split the log or audit a sample of its individuals")
        return data

    def readable(self) -> bool:
        return True

    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def readline(self, n: int = -1) -> bytes:  # pragma: no cover - pandas reads in blocks
        line = self.fh.readline(n)
        self.seen += len(line)
        return line


def _check_columns(path: Path) -> None:
    """Refuse a CSV header of over :data:`MAX_LOG_COLUMNS` columns (read: its first MiB)."""
    import gzip

    with (gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")) as fh:
        n = fh.readline(1 << 20).count(b",") + 1
    if n > MAX_LOG_COLUMNS:
        raise LogError(f"logs: {path}: the header has {n} or more columns, over the limit of "
                       f"{MAX_LOG_COLUMNS}; keep the log's columns (id, t, group, level, decision, "
                       "next_level, reward, outcome and the state features) only.")


def read_logs(path: str | Path) -> Any:
    """Read a decision log from CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``).
    The memory the table needs is bounded before it is read (``CAUSALFAIR_MAX_MEMORY``,
    docs/limits.md): the CSV's size (a gzip file's as it inflates) times
    :data:`_CSV_FACTOR`, or a Parquet file's declared uncompressed size times
    :data:`_PARQUET_FACTOR`. Empty and malformed files raise :class:`LogError`."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"logs: {path}: no such file.")
    name = path.name.lower()
    size = path.stat().st_size
    if size == 0:
        raise LogError(f"logs: {path} is empty; a decision log has a header row (id, t, group, "
                       "level, decision, ...) and one row per decision (docs/logs.md).")
    if name.endswith((".csv", ".csv.gz", ".txt")):
        fix = "split the log or audit a sample of its individuals"
        try:
            _check_columns(path)
            if name.endswith(".gz"):
                import gzip

                with gzip.open(path, "rb") as fh:
                    return pd.read_csv(_CappedStream(fh, max_memory() // _CSV_FACTOR, path))
            check_memory(_CSV_FACTOR * size, f"logs: {path} ({format_bytes(size)} of CSV, about "
                         f"{_CSV_FACTOR} bytes of memory per byte)", fix)
            return pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError,
                EOFError) as exc:
            raise LogError(f"logs: {path} is not a readable CSV file ({type(exc).__name__}: "
                           f"{_first_line(exc)}).") from None
    if name.endswith((".parquet", ".pq")):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise LogError(MSG_PARQUET.format(path=path)) from None
        try:
            meta = pq.ParquetFile(path).metadata
            declared = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            check_memory(_PARQUET_FACTOR * declared,
                         f"logs: {path} ({meta.num_rows} rows, {format_bytes(declared)} "
                         "uncompressed)", "split the log or audit a sample of its individuals")
            return pd.read_parquet(path)
        except (OSError, ValueError, EOFError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise LogError(f"logs: {path} is not a readable Parquet file ({type(exc).__name__}: "
                           f"{_first_line(exc)}).") from None
    raise LogError(MSG_FILE_TYPE.format(path=path, suffix="".join(path.suffixes) or path.name))


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:160] if text else ""


def simulate_logs(system: Any, policy: Any, n_individuals: int, horizon: int,
                  seed: int = 0, *, groups: Any = None) -> Any:
    """Decision logs of ``policy`` deployed on a system's simulator (vectorised).

    ``system``: a :class:`~causalfair.systems.System` with discrete levels and two
    actions, a registered id such as ``"lending-1"``, a
    :class:`~causalfair.systems.lending.settings.LendingModel` or a
    :class:`~causalfair.model.TabularModel` (simulated from its kernel). When the
    system names a ``qualified`` role (lending: ``repay``), the log has an ``outcome``
    column (that info for d1 rows, NaN for d0 rows); otherwise it has none.
    ``policy``: any :class:`~causalfair.policies.core.Policy` (or a built-in spec such as
    ``"random:0.5"``), evaluated with the simulator's observations. Groups are drawn
    i.i.d. from the system's ``group_weights`` unless ``groups`` (an int array of length
    ``n_individuals``) is given. Returns a DataFrame in the log format, sorted by
    (t, id). Same seed, same log.
    """
    import pandas as pd

    system = make(system) if isinstance(system, str) else (
        system if isinstance(system, System) else as_system(system))
    if system.n_levels is None or system.n_actions != 2:
        raise LogError(
            f"simulate_logs: system {system.id!r} needs discrete levels and two actions for the "
            f"log format (it has {system.n_actions} actions and "
            f"{'no' if system.n_levels is None else system.n_levels} levels).")
    if isinstance(policy, str):
        policy = parse_policy(policy, system)
    n = int(n_individuals)
    T = int(horizon)
    if n < 1 or T < 1:
        raise LogError(f"simulate_logs: n_individuals and horizon must be >= 1, got {n} and {T}.")

    check_memory(_LOG_ROW_BYTES * n * T, f"simulate_logs: a log of {n} individuals x {T} "
                 "epochs", "lower n_individuals (--n) or the horizon")
    rng = np.random.default_rng(seed)
    sim = system.make_simulator()
    qualified = system.roles.get("qualified")
    if groups is None:
        g = rng.choice(system.n_groups, size=n, p=system.group_weights)
    else:
        g = np.asarray(groups, dtype=np.int64)
    state = sim.reset(n, g, rng)
    cols = {k: np.empty((T, n), dtype=dt) for k, dt in (
        ("level", np.int64), ("decision", np.int64), ("next_level", np.int64),
        ("reward", np.float64), ("outcome", np.float64))}
    if qualified is None:
        del cols["outcome"]
    for t in range(T):
        obs = sim.observe(state)
        p = np.asarray(policy.prob_d1(obs), dtype=np.float64)
        d = (rng.random(n) < p).astype(np.int64)
        res = sim.step(state, d, sim.draw_noise(n, rng))
        cols["level"][t] = obs.level
        cols["decision"][t] = d
        cols["next_level"][t] = sim.observe(res.state).level
        cols["reward"][t] = res.reward
        if qualified is not None:
            cols["outcome"][t] = np.where(d == 1, np.asarray(res.info[qualified], dtype=np.float64),
                                          np.nan)
        state = res.state
    names = np.asarray(system.groups)
    return pd.DataFrame({
        "id": np.tile(np.arange(n), T),
        "t": np.repeat(np.arange(T), n),
        "group": pd.Categorical.from_codes(np.tile(g, T), categories=list(names)),
        **{k: v.reshape(-1) for k, v in cols.items()},
    })

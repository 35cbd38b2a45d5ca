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

:func:`validate_logs` checks the frame with array operations (sort, shift, compare: no
Python loop over rows) and returns a :class:`LogData` of integer-coded arrays; problems
raise :class:`LogError` with one of the message constants of this module (``MSG_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "LogError",
    "LogData",
    "REQUIRED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "validate_logs",
    "read_logs",
    "simulate_logs",
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


class LogError(ValueError):
    """A decision log is malformed (the message names the column/individual and the fix)."""


@dataclass(frozen=True, eq=False)
class LogData:
    """A validated log as integer-coded arrays, rows sorted by (individual, t).

    ``ind``: individual index 0..n-1 per row; ``g``: group index (into ``groups``);
    ``x``, ``xn``: level and next level; ``d``: decision; ``t``: epoch minus the first
    epoch; ``reward``; ``outcome`` (NaN where unknown, or None without the column);
    ``first``: mask of each individual's first row. ``ids``: the original ids.
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
                  groups: Any = None) -> LogData:
    """Check a decision log and return it as a :class:`LogData`.

    ``n_levels``: K (default: 1 + the largest level or next level in the log).
    ``groups``: the group labels in order (index 0 = s+, the advantaged group, first in
    the pair of the decomposition); default: the categories of a categorical column, or
    the sorted distinct values. Raises :class:`LogError` on the first problem found, in
    this order: not a frame, no rows, missing columns, missing values, non-integer /
    non-numeric columns, decisions not 0/1, levels out of range, unknown groups, then
    per individual (rows sorted by id, t): duplicate epochs, time gaps, late starts,
    group changes, next_level mismatches.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise LogError(MSG_NOT_FRAME.format(kind=type(df).__name__))
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise LogError(MSG_MISSING_COLUMNS.format(
            missing=", ".join(missing), required=", ".join(REQUIRED_COLUMNS)))
    if len(df) == 0:
        raise LogError(MSG_EMPTY)
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
    g = g.astype(np.int64)

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
        n_levels=K, t0=t0,
    )


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def read_logs(path: str | Path) -> Any:
    """Read a decision log from CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``)."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"logs: {path}: no such file.")
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz", ".txt")):
        return pd.read_csv(path)
    if name.endswith((".parquet", ".pq")):
        try:
            return pd.read_parquet(path)
        except ImportError:
            raise LogError(MSG_PARQUET.format(path=path)) from None
    raise LogError(MSG_FILE_TYPE.format(path=path, suffix="".join(path.suffixes) or path.name))


def simulate_logs(lending_model: Any, policy: Any, n_individuals: int, horizon: int,
                  seed: int = 0, *, groups: Any = None) -> Any:
    """Decision logs of ``policy`` deployed on the lending simulator (vectorised).

    ``lending_model``: a :class:`~causalfair.sim.lending.LendingModel` (or a setting
    name such as ``"lending-1"``); ``policy``: any :class:`~causalfair.policy.Policy`
    (or a built-in spec such as ``"random:0.5"``), evaluated with the simulator's
    observations. Groups are drawn i.i.d. from the model's ``group_weights`` unless
    ``groups`` (an int array of length ``n_individuals``) is given. Returns a DataFrame
    in the log format (``outcome`` is the repayment for d1 rows and NaN for d0 rows),
    sorted by (t, id). Same seed, same log.
    """
    import pandas as pd

    from causalfair.policy import parse_policy
    from causalfair.sim.individual import LendingSimulator
    from causalfair.sim.lending import lending_setting

    if isinstance(lending_model, str):
        lending_model = lending_setting(lending_model)
    if isinstance(policy, str):
        policy = parse_policy(policy, lending_model.tabular)
    n = int(n_individuals)
    T = int(horizon)
    if n < 1 or T < 1:
        raise LogError(f"simulate_logs: n_individuals and horizon must be >= 1, got {n} and {T}.")
    rng = np.random.default_rng(seed)
    sim = LendingSimulator(lending_model)
    if groups is None:
        g = rng.choice(lending_model.n_groups, size=n, p=lending_model.group_weights)
    else:
        g = np.asarray(groups, dtype=np.int64)
    state = sim.reset(n, g, rng)
    cols = {k: np.empty((T, n), dtype=dt) for k, dt in (
        ("level", np.int64), ("decision", np.int64), ("next_level", np.int64),
        ("reward", np.float64), ("outcome", np.float64))}
    for t in range(T):
        p = np.asarray(policy.prob_d1(sim.observe(state)), dtype=np.float64)
        d = (rng.random(n) < p).astype(np.int64)
        res = sim.step(state, d, sim.draw_noise(n, rng))
        cols["level"][t] = state.level
        cols["decision"][t] = d
        cols["next_level"][t] = res.state.level
        cols["reward"][t] = res.reward
        cols["outcome"][t] = np.where(d == 1, res.info["repay"].astype(np.float64), np.nan)
        state = res.state
    names = np.asarray(lending_model.group_names)
    return pd.DataFrame({
        "id": np.tile(np.arange(n), T),
        "t": np.repeat(np.arange(T), n),
        "group": pd.Categorical.from_codes(np.tile(g, T), categories=list(names)),
        **{k: v.reshape(-1) for k, v in cols.items()},
    })

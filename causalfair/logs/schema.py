"""Decision logs: the format and its validation (reading a log from a file, CSV or
Parquet: :mod:`causalfair.logs.reading`, whose :func:`read_logs` this module re-exports).

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
raise :class:`LogError` with one of the message constants of this module (``MSG_*``,
defined in :mod:`causalfair.logs.errors`). Feature-vector states are binned by
:mod:`causalfair.logs.binning`; simulated logs come from :mod:`causalfair.logs.simulate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._limits import check_memory, format_bytes
from causalfair._validation import check_labels, check_names
from causalfair.errors import short
from causalfair.logs.binning import StateBinning, bin_states, feature_column, linear_potential
from causalfair.logs.errors import (
    FIX_DECIMAL_COMMA,
    FIX_NUMBER,
    FIX_THOUSANDS,
    MSG_BINS_CUTS,
    MSG_BINS_DISTINCT,
    MSG_BINS_EMPTY,
    MSG_BINS_MISSING,
    MSG_BINS_VALUE,
    MSG_BLANK_ROWS,
    MSG_CLOSE_COLUMNS,
    MSG_DECISION,
    MSG_DECISION_LABELS,
    MSG_DECISION_SIGNS,
    MSG_DUPLICATE_T,
    MSG_EMPTY,
    MSG_EMPTY_GROUP,
    MSG_FEATURE_POTENTIAL,
    MSG_FILE_TYPE,
    MSG_GROUP_CHANGE,
    MSG_GROUP_SPELLING,
    MSG_GROUPS,
    MSG_HEADER_ROW,
    MSG_INT_TEXT,
    MSG_LATE_START,
    MSG_LEVEL_RANGE,
    MSG_MISSING_COLUMNS,
    MSG_MISSING_VALUES,
    MSG_NEXT_LEVEL,
    MSG_NEXT_LEVEL_PENDING,
    MSG_NEXT_STATE,
    MSG_NEXT_STATE_COLUMNS,
    MSG_NO_SCORE,
    MSG_NOT_FINITE,
    MSG_NOT_FRAME,
    MSG_NOT_INTEGER,
    MSG_NOT_NUMERIC,
    MSG_NOT_UTF8,
    MSG_ONE_BIN,
    MSG_ONE_LEVEL,
    MSG_OUTCOME_RANGE,
    MSG_PARQUET,
    MSG_STATE_AND_LEVEL,
    MSG_STATE_COLUMNS,
    MSG_TIME_GAP,
    LogError,
    decision_labels,
    first_row,
    missing_columns,
    not_numeric,
)
from causalfair.logs.reading import read_logs
from causalfair.logs.simulate import simulate_logs

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
    "MSG_ONE_LEVEL",
    "MSG_ONE_BIN",
    "MSG_DUPLICATE_T",
    "MSG_TIME_GAP",
    "MSG_LATE_START",
    "MSG_GROUP_CHANGE",
    "MSG_NEXT_LEVEL",
    "MSG_GROUPS",
    "MSG_GROUP_SPELLING",
    "MSG_DECISION_LABELS",
    "MSG_FILE_TYPE",
    "MSG_PARQUET",
    "MSG_STATE_COLUMNS",
    "MSG_NEXT_STATE_COLUMNS",
    "MSG_STATE_AND_LEVEL",
    "MSG_NO_SCORE",
    "MSG_NOT_FINITE",
    "MSG_OUTCOME_RANGE",
    "MSG_BINS_MISSING",
    "MSG_BINS_VALUE",
    "MSG_BINS_DISTINCT",
    "MSG_BINS_EMPTY",
    "MSG_BINS_CUTS",
    "MSG_NEXT_STATE",
    "MSG_FEATURE_POTENTIAL",
    "MSG_CLOSE_COLUMNS",
    "MSG_NOT_UTF8",
    "MSG_HEADER_ROW",
    "MSG_INT_TEXT",
    "MSG_BLANK_ROWS",
    "MSG_NEXT_LEVEL_PENDING",
    "MSG_DECISION_SIGNS",
    "MSG_EMPTY_GROUP",
    "FIX_DECIMAL_COMMA",
    "FIX_NUMBER",
    "FIX_THOUSANDS",
    "check_decisions",
]

REQUIRED_COLUMNS = ("id", "t", "group", "level", "decision", "next_level", "reward")
OPTIONAL_COLUMNS = ("outcome",)
#: Memory per row that validating, fitting and bootstrapping a log needs beyond the
#: table itself (sorted integer copies of its columns, the per-individual sparse
#: statistics and their build; measured: about 270 bytes per row).
_ROW_BYTES = 320
#: Float64 copies of the (groups, 2, levels, levels) table a log's fit holds at once.
_MODEL_COPIES = 4


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

    def group_sizes(self) -> dict[str, int]:
        """Individuals per group, in group order."""
        n = np.bincount(self.g[self.first], minlength=self.n_groups)
        return {g: int(c) for g, c in zip(self.groups, n, strict=True)}

    def notes(self) -> tuple[str, ...]:
        """What the audit assumes of this log that the log does not show: individuals
        observed for fewer epochs than the longest (right-censored), and levels of
        0..K-1 that never appear (K comes from the largest level)."""
        out = []
        last = np.ones(self.n_rows, dtype=bool)
        last[:-1] = self.ind[1:] != self.ind[:-1]
        short = int((self.t[last] < self.horizon - 1).sum())
        if short:
            out.append(f"{short} of {self.n_individuals} individuals leave before the log's last "
                       f"epoch (fewer than {self.horizon} rows): their observed transitions count, "
                       "which assumes that leaving does not depend on what would have happened "
                       "next.")
        if self.binning is None:
            seen = np.bincount(np.concatenate([self.x, self.xn]), minlength=self.n_levels) > 0
            if not seen.all():
                lv = np.flatnonzero(~seen).tolist()
                out.append(f"level(s) {', '.join(map(str, lv))} of 0..{self.n_levels - 1} never "
                           f"appear in the log (K = {self.n_levels} comes from the largest level, "
                           "and the default potential spans 0..K-1); levels are 0-based: "
                           "subtract 1 from 1-based levels.")
        return tuple(out)


def _int_column(df: Any, col: str) -> np.ndarray:
    import pandas as pd

    s = df[col]
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.to_numpy().astype(np.int64)
    if pd.api.types.is_integer_dtype(s.dtype):
        return s.to_numpy(dtype=np.int64)
    if pd.api.types.is_float_dtype(s.dtype):
        v = s.to_numpy(dtype=np.float64)
        # inf and numbers past int64 are no epoch or level (cast, they would be named as
        # -9223372036854775808, a value the log does not hold)
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(v) < 2.0**63) | (v != np.round(v))
        if bad.any():
            i = first_row(bad)
            raise LogError(MSG_NOT_INTEGER.format(column=col, value=v[i].item(), row=i, dtype=s.dtype))
        return v.astype(np.int64)
    header = _header_rows(df)
    if header.any():
        i = first_row(header)
        raise LogError(MSG_HEADER_ROW.format(
            row=i, line=i + 2, count=int(header.sum()),
            values=", ".join(str(df[c].iloc[i]) for c in REQUIRED_COLUMNS if c in df.columns)))
    v = s.to_numpy()
    if not (pd.api.types.is_object_dtype(s.dtype) or pd.api.types.is_string_dtype(s.dtype)
            or isinstance(s.dtype, pd.CategoricalDtype)):  # dates, periods, durations
        raise LogError(MSG_NOT_INTEGER.format(column=col, value=v[0], row=0, dtype=s.dtype))
    num = pd.to_numeric(s.astype(object), errors="coerce").to_numpy(dtype=np.float64,
                                                                  na_value=np.nan)
    bad = ~np.isfinite(num) | (num != np.round(num))
    if not bad.any():  # '0', '1', ... as text, or integer categories (a frame built by hand)
        raise LogError(MSG_INT_TEXT.format(column=col, value=v[0], row=0, dtype=s.dtype))
    i = first_row(bad)
    raise LogError(MSG_NOT_INTEGER.format(column=col, value=v[i], row=i, dtype=s.dtype))


def _header_rows(df: Any) -> np.ndarray:
    """Rows that repeat the header (two exports joined with their header lines): each
    required column holds its own name."""
    out = np.ones(len(df), dtype=bool)
    for c in ("id", "t", "group", "decision"):
        if c in df.columns:
            out &= (df[c].astype(str).str.strip() == c).to_numpy()
    return out


def _missing_values(df: Any, col: str, na: np.ndarray) -> LogError:
    """A required column with missing values: rows empty in every column (a
    spreadsheet's trailing rows), a next_level missing only at each individual's last row
    (not known yet), else :data:`MSG_MISSING_VALUES`."""
    import pandas as pd

    blank = df.isna().all(axis=1).to_numpy()
    if blank.any():
        i = first_row(blank)
        return LogError(MSG_BLANK_ROWS.format(count=int(blank.sum()), row=i, line=i + 2))
    if col == "next_level" and pd.api.types.is_numeric_dtype(df["t"].dtype):
        last = (df["t"] == df.groupby("id", sort=False)["t"].transform("max")).to_numpy()
        if not (na & ~last).any():
            return LogError(MSG_NEXT_LEVEL_PENDING.format(count=int(na.sum()), row=first_row(na)))
    return LogError(MSG_MISSING_VALUES.format(column=col, count=int(na.sum()), row=first_row(na)))


def check_decisions(decisions: Any) -> tuple[str, str] | None:
    """``decisions``: the names of decision 0 (the baseline) and decision 1, two different
    non-empty strings, or None; else a :class:`LogError` naming the value and the fix."""
    if decisions is None:
        return None
    if isinstance(decisions, str):
        decisions = [d.strip() for d in decisions.split(",")]
    names = list(decisions) if isinstance(decisions, (list, tuple)) else None
    if (names is None or len(names) != 2 or not all(isinstance(n, str) and n.strip()
                                                    for n in names) or names[0] == names[1]):
        raise LogError(f"decisions: expected the names of decision 0 (the baseline) and "
                       f"decision 1, two different words, got {decisions!r:.80}; e.g. "
                       "decisions=['waitlist', 'place'] (CLI --decisions waitlist,place).")
    check_labels("decisions", names, LogError)
    return names[0], names[1]


def _decision_words(df: Any, names: tuple[str, str]) -> Any:
    """``df`` with a 'decision' column of the words ``names`` read as 0 and 1 (a column of
    numbers is kept); another word is a :class:`LogError` naming it, its row and both."""
    import pandas as pd

    s = df["decision"]
    if pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        return df
    text = s.astype(str)
    code = text.map({names[0]: 0, names[1]: 1})
    bad = code.isna().to_numpy() & ~s.isna().to_numpy()
    if bad.any():
        i = first_row(bad)
        raise LogError(f"logs: column 'decision' holds {s.iloc[i]!r} at row {i}, which is neither "
                       f"of the decisions {names[0]!r} (0, the baseline) and {names[1]!r} (1); "
                       "fix the row, or name the log's own words in decisions=.")
    return df.assign(decision=code.where(~s.isna()))


def validate_logs(df: Any, *, n_levels: int | None = None,
                  groups: Any = None, state: Any = None, bins: Any = None,
                  next_state: Any = None, decisions: Any = None) -> LogData:
    """Check a decision log and return it as a :class:`LogData`.

    ``n_levels``: K (default: 1 + the largest level or next level in the log).
    ``groups``: the group labels in order (index 0 = s+, the advantaged group, first in
    the pair of the decomposition); default: the categories of a categorical column, or
    the sorted distinct values. Raises :class:`LogError` on the first problem found, in
    this order: not a frame, missing columns, no rows, the memory the audit of its rows
    needs (:data:`_ROW_BYTES` per row beyond the table), missing values, non-integer /
    non-numeric columns, a non-finite reward, an outcome outside [0, 1] (it is averaged
    into p_repay), decisions not 0/1, levels out of range, a single level, unknown groups, then
    per individual (rows sorted by id, t): duplicate epochs, time gaps, late starts,
    group changes, next_level mismatches.

    ``state`` (with ``bins``, optionally ``next_state``): the state is given by numeric
    feature columns instead of ``level`` / ``next_level``; they are binned by
    :func:`bin_states` (after the check for the other required columns) and the
    next-state features must equal the following row's features.

    ``decisions``: the log's names of decision 0 (the baseline) and 1
    (:func:`check_decisions`); a 'decision' column of these words is read as 0 and 1.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise LogError(MSG_NOT_FRAME.format(kind=type(df).__name__))
    names = check_decisions(decisions)
    required = REQUIRED_COLUMNS if state is None else tuple(
        c for c in REQUIRED_COLUMNS if c not in ("level", "next_level"))
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise missing_columns(missing, list(df.columns), required)
    if len(df) == 0:
        raise LogError(MSG_EMPTY)
    held = int(df.memory_usage(index=True, deep=False).sum())
    check_memory(held + _ROW_BYTES * len(df),
                 f"logs: auditing a log of {len(df)} rows ({format_bytes(held)} as a table, "
                 f"about {_ROW_BYTES} bytes per row more to validate, fit and bootstrap it)",
                 "split the log or audit a sample of its individuals")
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
    if names is not None:
        df = _decision_words(df, names)
    for col in REQUIRED_COLUMNS:
        na = df[col].isna().to_numpy()
        if na.any():
            raise _missing_values(df, col, na)
    t = _int_column(df, "t")
    x = _int_column(df, "level")
    xn = _int_column(df, "next_level")
    words = decision_labels(df)
    if words is not None:
        raise words
    d = _int_column(df, "decision")
    if not pd.api.types.is_numeric_dtype(df["reward"].dtype) or pd.api.types.is_bool_dtype(df["reward"].dtype):
        raise not_numeric(df, "reward")
    reward = df["reward"].to_numpy(dtype=np.float64)
    bad = ~np.isfinite(reward)
    if bad.any():
        i = first_row(bad)
        raise LogError(MSG_NOT_FINITE.format(column="reward", value=float(reward[i]), row=i))
    outcome = None
    if "outcome" in df.columns:
        oc = df["outcome"]
        if not pd.api.types.is_numeric_dtype(oc.dtype):
            raise not_numeric(df, "outcome")
        outcome = oc.to_numpy(dtype=np.float64, na_value=np.nan)
        # p_repay(x, s) is the mean outcome of d1 rows: a probability needs values in [0, 1]
        bad = ~np.isnan(outcome) & ~((outcome >= 0.0) & (outcome <= 1.0))
        if bad.any():
            i = first_row(bad)
            raise LogError(MSG_OUTCOME_RANGE.format(value=float(outcome[i]), row=i))
    bad = (d != 0) & (d != 1)
    if bad.any():
        i = first_row(bad)
        if np.isin(d, (-1, 1)).all():
            raise LogError(MSG_DECISION_SIGNS.format(row=i))
        raise LogError(MSG_DECISION.format(value=int(d[i]), row=i))
    K = int(max(x.max(), xn.max())) + 1 if n_levels is None else int(n_levels)
    for col, v in (("level", x), ("next_level", xn)):
        bad = (v < 0) | (v >= K)
        if bad.any():
            i = first_row(bad)
            raise LogError(MSG_LEVEL_RANGE.format(column=col, kmax=K - 1, value=int(v[i]), row=i))
    if K < 2:  # one level: no qualification to gain
        raise LogError(MSG_ONE_LEVEL if binning is None
                       else MSG_ONE_BIN.format(state=list(binning.columns)))

    gcol = df["group"]
    given = groups
    if groups is None:
        if isinstance(gcol.dtype, pd.CategoricalDtype):
            groups = list(gcol.cat.categories)
        else:
            groups = sorted(pd.unique(gcol).tolist(), key=lambda v: (str(type(v)), v))
        _check_spellings(gcol, groups)
    else:
        groups = _given_groups(groups)
    groups = list(groups)
    g = pd.Index(groups).get_indexer(gcol)
    if (g < 0).any() or len(groups) < 2:
        found = pd.unique(gcol).tolist()
        need = (f"expected only the groups {groups!r}" if (g < 0).any()
                else "a log needs at least 2 groups to compare")
        raise LogError(MSG_GROUPS.format(found=len(found), values=found, need=need))
    check_names("logs: column 'group'", groups, LogError)
    g = g.astype(np.int64)
    empty = np.bincount(g, minlength=len(groups)) == 0
    if empty.any():  # an unused category, or a name in groups= the log does not have
        name = groups[first_row(empty)]
        cat = given is None
        raise LogError(MSG_EMPTY_GROUP.format(
            group=name, source="a category of the column 'group'" if cat else "named in groups=",
            fix="drop the unused categories, df['group'] = "
                "df['group'].cat.remove_unused_categories()" if cat
            else f"drop {name!r} from groups= (the log has {pd.unique(gcol).tolist()!r})"))

    check_memory(_MODEL_COPIES * 8 * len(groups) * 2 * K * K,
                 f"logs: a model of {K} levels x {len(groups)} groups (the log's largest "
                 f"level is {K - 1})", "check the 'level' and 'next_level' columns or bin the "
                 "state into fewer levels (--bins)")

    ind_raw, ids = _number_individuals(df["id"])
    order = np.lexsort((t, ind_raw))
    ind_raw, t, g, x, xn, d, reward = (a[order] for a in (ind_raw, t, g, x, xn, d, reward))
    if outcome is not None:
        outcome = outcome[order]
    ids = np.asarray(ids)
    same = ind_raw[1:] == ind_raw[:-1]
    dt = t[1:] - t[:-1]
    dup = same & (dt == 0)
    if dup.any():
        i = first_row(dup)
        raise _duplicate(df, ids[ind_raw[i]], int(t[i]), *sorted((int(order[i]), int(order[i + 1]))))
    gap = same & (dt > 1)
    if gap.any():
        i = first_row(gap)
        raise LogError(MSG_TIME_GAP.format(id=_py(ids[ind_raw[i]]), t0=int(t[i]), t1=int(t[i + 1]),
                                           row0=int(order[i]), row1=int(order[i + 1])))
    first = np.ones(t.shape[0], dtype=bool)
    first[1:] = ~same
    t0 = int(t.min())
    late = first & (t != t0)
    if late.any():
        i = first_row(late)
        raise LogError(MSG_LATE_START.format(id=_py(ids[ind_raw[i]]), t=int(t[i]), t0=t0,
                                             row=int(order[i])))
    chg = same & (g[1:] != g[:-1])
    if chg.any():
        i = first_row(chg)
        raise LogError(MSG_GROUP_CHANGE.format(
            id=_py(ids[ind_raw[i]]), g0=_py(groups[g[i]]), g1=_py(groups[g[i + 1]]), t=int(t[i + 1]),
            row=int(order[i + 1])))
    if binning is not None:
        for col, ncol in zip(binning.columns, binning.next_columns, strict=True):
            cur = feature_column(df, col)[order]
            new = feature_column(df, ncol)[order]
            off = same & ~np.isclose(new[:-1], cur[1:], rtol=1e-12, atol=0.0)
            if off.any():
                i = first_row(off)
                raise LogError(MSG_NEXT_STATE.format(
                    id=_py(ids[ind_raw[i]]), next_col=ncol, nxt=float(new[i]), t0=int(t[i]),
                    t1=int(t[i + 1]), col=col, val=float(cur[i + 1]), row0=int(order[i]),
                    row1=int(order[i + 1])))
    mism = same & (xn[:-1] != x[1:])
    if mism.any():
        i = first_row(mism)
        raise LogError(MSG_NEXT_LEVEL.format(
            id=_py(ids[ind_raw[i]]), nxt=int(xn[i]), t0=int(t[i]), t1=int(t[i + 1]), lvl=int(x[i + 1]),
            row0=int(order[i]), row1=int(order[i + 1])))
    for a in (ind_raw, t, g, x, xn, d, reward, first):
        a.setflags(write=False)
    return LogData(
        ind=ind_raw.astype(np.int64), g=g, x=x, xn=xn, d=d, t=t - t0, reward=reward,
        outcome=outcome, first=first, ids=ids, groups=tuple(str(v) for v in groups),
        n_levels=K, t0=t0, binning=binning,
    )


def _given_groups(groups: Any) -> list[Any]:
    """``groups=`` as a list of distinct labels, or a LogError naming the problem and the
    fix (a string is one name, not a list of its letters; a name given twice would make
    two groups of the same rows)."""
    if isinstance(groups, (str, bytes)) or not hasattr(groups, "__iter__"):
        raise LogError(f"groups: must be a list of the group labels in order, got "
                       f"{short(groups, 60)}; e.g. groups=['A', 'B'].")
    groups = list(groups)
    seen: set[Any] = set()
    for v in groups:
        try:
            twice = v in seen
            seen.add(v)
        except TypeError:  # unhashable: pandas refuses it below with its own words
            raise LogError(f"groups: bad label {short(v, 40)}; give the group labels as "
                           "strings or numbers.") from None
        if twice:
            raise LogError(f"groups: {v!r} is named twice in {short(groups, 80)}; name each of "
                           "the log's groups once.")
    return groups


def _number_individuals(col: Any) -> tuple[np.ndarray, Any]:
    """Number the individuals 0..n-1 in the order of their sorted ids, whatever the order
    of the rows (the bootstrap draws individuals by number: the same rows, seed and
    options give the same numbers, bit for bit; a log written sorted by id, or by
    :func:`~causalfair.logs.simulate.simulate_logs`, keeps its first-appearance order).
    Ids of types that do not compare (e.g. tuples beside numbers) are sorted by type name
    and text."""
    import pandas as pd

    try:
        return pd.factorize(col, sort=True)
    except TypeError:
        codes, uniq = pd.factorize(col, sort=False)
        keys = [(type(v).__name__, str(v), repr(v)) for v in uniq]
        by_key = sorted(range(len(keys)), key=keys.__getitem__)
        rank = np.empty(len(keys), dtype=np.int64)
        rank[by_key] = np.arange(len(keys))
        ids = np.empty(len(keys), dtype=object)
        ids[:] = [uniq[i] for i in by_key]
        return rank[codes], ids


def _check_spellings(gcol: Any, groups: list[Any]) -> None:
    """Refuse inferred group labels that differ only in spaces or case ("Group A" and
    "Group A ", an export's trailing space): they would be audited as two groups."""
    import pandas as pd

    present = (set(pd.unique(gcol).tolist()) if isinstance(gcol.dtype, pd.CategoricalDtype)
               else set(groups))  # not a categorical's unused categories
    seen: dict[str, Any] = {}
    for v in groups:
        if not isinstance(v, str) or v not in present:
            continue
        key = " ".join(v.split()).casefold()
        if key in seen:
            a, b = seen[key], v
            rows = np.flatnonzero((gcol == a).to_numpy()), np.flatnonzero((gcol == b).to_numpy())
            if rows[0].size < rows[1].size:  # b: the rarer spelling (the likely typo)
                a, b, rows = b, a, rows[::-1]
            raise LogError(MSG_GROUP_SPELLING.format(a=a, b=b, row=int(rows[1][0])))
        seen[key] = v


def _duplicate(df: Any, ident: Any, t: int, row0: int, row1: int) -> LogError:
    """Two rows of one individual at one epoch: exact copies (dropped by
    ``df.drop_duplicates()``) or rows that differ (which columns)."""
    import pandas as pd

    a, b = df.iloc[row0], df.iloc[row1]
    differ = [str(c) for c in df.columns
              if not (pd.isna(a[c]) and pd.isna(b[c])) and not a[c] == b[c]]
    if not differ:
        how, fix = "are exact copies", "drop the copies (pandas: df = df.drop_duplicates())"
    else:
        how = f"differ in column(s) {', '.join(differ)}"
        fix = ("two different records of one epoch must be fixed at the source (which one "
               "holds?)")
    return LogError(MSG_DUPLICATE_T.format(id=_py(ident), t=t, row0=row0, row1=row1, how=how,
                                           fix=fix))


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


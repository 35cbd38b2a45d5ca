"""The errors of a decision log: :class:`LogError` and its messages.

Each ``MSG_*`` is a format string naming the column or individual at fault and the fix
(tests compare the exact text); :mod:`causalfair.logs.schema` re-exports them all.
"""

from __future__ import annotations

import re

import numpy as np

from causalfair.errors import InputError


class LogError(InputError):
    """A decision log is malformed (the message names the column/individual and the fix)."""


def first_row(mask: np.ndarray) -> int:
    """The first row where ``mask`` holds: the row an error message names."""
    return int(np.flatnonzero(mask)[0])


def decision_labels(df: object) -> LogError | None:
    """:data:`MSG_DECISION_LABELS` for a 'decision' column of words ('waitlist', 'place'):
    the labels, the first and its row, and which fix; None for any other column."""
    import pandas as pd

    s = df["decision"]  # type: ignore[index]
    if pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        return None
    known = ~pd.isna(s).to_numpy()
    words = known & pd.to_numeric(s.where(known), errors="coerce").isna().to_numpy()
    if not words.any():
        return None
    labels = sorted({str(v) for v in s[known]})
    i = first_row(words)
    a, b = labels[0], labels[-1]
    fix = (FIX_DECISION_TWO if len(labels) == 2 else FIX_DECISION_MORE).format(a=a, b=b)
    value = s.iloc[i]
    return LogError(MSG_DECISION_LABELS.format(
        labels=", ".join(repr(v) for v in labels[:6]) + (", ..." if len(labels) > 6 else ""),
        value=value, row=i, fix=fix))


def not_numeric(df: object, column: str) -> LogError:
    """:data:`MSG_NOT_NUMERIC` for a column that is not numeric: its first value that is
    not a number (or its first value, when each reads as one), the row, and the fix (a
    decimal comma gets its own)."""
    import re

    import pandas as pd

    s = df[column]  # type: ignore[index]
    v = s.to_numpy(dtype=object)
    known = ~pd.isna(s).to_numpy()
    num = pd.to_numeric(s.where(known), errors="coerce").notna().to_numpy()
    bad = known & ~num
    i = first_row(bad) if bad.any() else (first_row(known) if known.any() else 0)
    value = v[i].item() if isinstance(v[i], np.generic) else v[i]
    comma = isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d*,\d+\s*", value) is not None
    thousands = isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d{1,3}(,\d{3})+\s*",
                                                       value) is not None
    fix = FIX_THOUSANDS if thousands else FIX_DECIMAL_COMMA if comma else FIX_NUMBER
    if not bad.any():  # numbers held in an object column (a frame built by hand)
        fix = (f"its values are numbers stored as dtype {s.dtype}: convert the column, "
               f"df[{column!r}] = pd.to_numeric(df[{column!r}])")
    return LogError(MSG_NOT_NUMERIC.format(column=column, value=value, row=i, dtype=s.dtype,
                                           fix=fix))


def _norm(name: object) -> str:
    return re.sub(r"[\s\-.]+", "_", str(name).strip().lower()).strip("_")


def close_columns(missing: list[str], columns: list[object]) -> dict[str, object]:
    """For each missing column, the log's column it is probably spelled as (none when no
    column is close): the same name up to case, spaces, ``-`` and ``.``; else the only
    column with the name as a word (``applicant_id`` for ``id``); else a near spelling
    (:func:`difflib.get_close_matches`, cutoff 0.75). A column is suggested once."""
    import difflib

    free = [c for c in columns if str(c) not in missing]
    out: dict[str, object] = {}
    for m in missing:
        left = [c for c in free if c not in out.values()]
        same = [c for c in left if _norm(c) == m]
        words = [c for c in left if m in _norm(c).split("_")]
        near = difflib.get_close_matches(m, [_norm(c) for c in left], n=1, cutoff=0.75)
        if same:
            out[m] = same[0]
        elif len(words) == 1:
            out[m] = words[0]
        elif near:
            out[m] = next(c for c in left if _norm(c) == near[0])
    return out


def missing_columns(missing: list[str], columns: list[object], required: tuple[str, ...]) -> LogError:
    """:data:`MSG_MISSING_COLUMNS`: the missing columns, the log's own, and a rename for
    those with a close match (:func:`close_columns`)."""
    shown = ", ".join(repr(c) for c in columns[:_LIST_COLUMNS])
    if len(columns) > _LIST_COLUMNS:
        shown += f" and {len(columns) - _LIST_COLUMNS} more"
    close = close_columns(missing, columns)
    if close:
        pairs = ", ".join(f"{c!r} for {m!r}" for m, c in close.items())
        rename = "{" + ", ".join(f"{c!r}: {m!r}" for m, c in close.items()) + "}"
    else:
        pairs, rename = "", "{'period': 't', 'action': 'decision'}"
    return LogError(MSG_MISSING_COLUMNS.format(
        missing=", ".join(repr(m) for m in missing), found=shown or "(none)",
        close=MSG_CLOSE_COLUMNS.format(pairs=pairs) if close else "",
        required=", ".join(required), rename=rename))


# Error messages (format strings; tests compare the exact text).
MSG_NOT_FRAME = "logs: expected a pandas DataFrame, got {kind}."
MSG_EMPTY = "logs: the log has no rows; it needs one row per decision."
MSG_MISSING_COLUMNS = (
    "logs: missing column(s) {missing}; the log has the columns {found}. {close}A decision "
    "log needs the columns {required} (optional: outcome): rename the log's columns to "
    "these names (pandas: df.rename(columns={rename}))."
)
#: The ``close`` part of :data:`MSG_MISSING_COLUMNS` when a column of the log is close to a
#: missing one (same letters up to case and spaces, the name as a word of it, or a near
#: spelling).
MSG_CLOSE_COLUMNS = "Did you mean {pairs}? "
#: Columns :data:`MSG_MISSING_COLUMNS` lists at most (then "and N more").
_LIST_COLUMNS = 20
MSG_MISSING_VALUES = (
    "logs: column {column!r} has {count} missing value(s) (first at row {row}); only "
    "'outcome' may be missing."
)
MSG_NOT_INTEGER = (
    "logs: column {column!r} must hold integers, got {value!r} at row {row} (dtype {dtype}); "
    "write it as whole numbers: t as integer epochs (dates or periods such as '2024-01' as "
    "months since the first), decision as 0/1, levels as 0..K-1."
)
MSG_NOT_NUMERIC = (
    "logs: column {column!r} must be numeric, got {value!r} at row {row} (dtype {dtype}); "
    "{fix}."
)
#: The fix :data:`MSG_NOT_NUMERIC` gives: a value with a decimal comma, any other value.
FIX_DECIMAL_COMMA = (
    "a decimal comma (a spreadsheet export in many locales): read the file with pandas, "
    "df = pd.read_csv(path, sep=';', decimal=','), and write it back with '.' "
    "(df.to_csv(path, index=False))"
)
FIX_THOUSANDS = (
    "a thousands separator ('1,000' for 1000: read the file with pandas, df = "
    "pd.read_csv(path, thousands=',')) or a decimal comma ('1,000' for 1.0, a spreadsheet "
    "export in many locales: df = pd.read_csv(path, sep=';', decimal=',')), which the audit "
    "cannot tell apart: read it the way it was written and write it back with '.' and no "
    "separators (df.to_csv(path, index=False))"
)
MSG_NOT_UTF8 = (
    "logs: {path} is not UTF-8 text: line {line} ({where}) has the byte {byte} in {text!r}, "
    "as a spreadsheet's Windows export has; save it as 'CSV UTF-8', or convert it with "
    "pandas: pd.read_csv(path, encoding='cp1252').to_csv(path, index=False) (cp1252: "
    "Windows, western Europe; name the file's own encoding for other languages)."
)
MSG_HEADER_ROW = (
    "logs: row {row} (file line {line}) repeats the header ({values}): files joined with "
    "their header lines? {count} row(s) in all; remove those lines from the file (pandas: "
    "df = df[df['id'] != 'id'], then df.to_csv(path, index=False) and read it again)."
)
MSG_INT_TEXT = (
    "logs: column {column!r} holds integers stored as dtype {dtype} (text or categories: "
    "{value!r} at row {row}); convert it, df[{column!r}] = df[{column!r}].astype(int) (a "
    "CSV read by read_logs or pandas gets numbers)."
)
MSG_BLANK_ROWS = (
    "logs: {count} row(s) empty in every column (first at row {row}, file line {line}): a "
    "spreadsheet's trailing rows? drop them (pandas: df = df.dropna(how='all'))."
)
MSG_NEXT_LEVEL_PENDING = (
    "logs: column 'next_level' has {count} missing value(s) (first at row {row}), each at "
    "its individual's last row: the level after the latest decisions is not known yet; "
    "drop those rows (pandas: df = df[df['next_level'].notna()]): those individuals then "
    "end one epoch earlier (early leavers, kept)."
)
FIX_NUMBER = (
    "write its values as numbers with a '.' decimal point (no units, thousands separators "
    "or labels)"
)
MSG_DECISION = (
    "logs: column 'decision' must be 0 or 1, got {value!r} at row {row}; a log audit covers "
    "two decisions (d0, d1): collapse the actions to the decision of interest, e.g. admit vs "
    "not: df['decision'] = (df['decision'] == ADMIT).astype(int), or audit every action "
    "through the system's simulator (causalfair decompose --system; docs/logs.md)."
)
MSG_DECISION_SIGNS = (
    "logs: column 'decision' is coded -1 and 1 (-1 at row {row}), not 0 and 1; write the "
    "baseline decision (the one that leaves things as they are) as 0: df['decision'] = "
    "(df['decision'] == 1).astype(int) if -1 is the baseline."
)
MSG_EMPTY_GROUP = (
    "logs: group {group!r} has no row in the log (it is {source}); every group compared "
    "needs individuals: {fix}."
)
MSG_DECISION_LABELS = (
    "logs: column 'decision' holds the labels {labels} (first {value!r} at row {row}), not 0 "
    "and 1; {fix}"
)
#: The fixes :data:`MSG_DECISION_LABELS` gives: two labels, more than two.
FIX_DECISION_TWO = (
    "the audit cannot tell which one is the baseline (the decision that leaves things as they "
    "are, which pi0 always takes; SPE and IPE rest on it): name them, the baseline first, "
    "e.g. decisions=[{a!r}, {b!r}] if {a!r} is the baseline (CLI --decisions {a},{b}; spec "
    "[logs] decisions), or write it as 0 and the other as 1."
)
FIX_DECISION_MORE = (
    "a log audit covers two decisions: collapse the actions to the decision of interest (1) "
    "against the baseline (0), e.g. df['decision'] = (df['decision'] == {b!r}).astype(int), or "
    "audit every action through the system's simulator (causalfair decompose --system)."
)
MSG_ONE_LEVEL = (
    "logs: columns 'level' and 'next_level' hold only level 0, so the log has K = 1 level; "
    "an audit needs at least 2 levels of the qualification x_t to measure its gains: write "
    "each row's level 0..K-1 into 'level' and 'next_level', or give the state as feature "
    "columns (state=[...] with bins=N; CLI --state-cols F1,F2 --bins N)."
)
MSG_ONE_BIN = (
    "logs: the state {state} is binned into K = 1 level; an audit needs at least 2 levels of "
    "the state to measure its gains: pass bins=N with N >= 2 (CLI --bins N) or cut points "
    "inside the values' range (--bin-cuts F=C1,C2,...)."
)
MSG_LEVEL_RANGE = (
    "logs: column {column!r} must hold 0-based levels in 0..{kmax}, got {value!r} at row {row}."
)
MSG_DUPLICATE_T = (
    "logs: individual {id!r} has more than one row at t = {t}: rows {row0} and {row1} {how}; "
    "keep one row per individual and epoch: {fix}."
)
MSG_TIME_GAP = (
    "logs: individual {id!r} jumps from t = {t0} to t = {t1} (rows {row0} and {row1}); an "
    "individual's rows must be consecutive time steps (a gap means missing decisions): add "
    "the missing rows, or give each unbroken spell its own id."
)
MSG_LATE_START = (
    "logs: individual {id!r} starts at t = {t} (row {row}), but the log starts at t = {t0}; "
    "every individual must be observed from the first epoch (its first level is x_0); if "
    "individuals enter at different times, count t from each individual's first row "
    "(pandas: df['t'] -= df.groupby('id')['t'].transform('min'))."
)
MSG_GROUP_CHANGE = (
    "logs: individual {id!r} changes group from {g0!r} to {g1!r} at t = {t} (row {row}); the "
    "group S is fixed per individual: correct that individual's group column (a typo?)."
)
MSG_NEXT_LEVEL = (
    "logs: individual {id!r} has next_level = {nxt!r} at t = {t0} (row {row0}), but its row "
    "at t = {t1} (row {row1}) has level = {lvl!r}; next_level must equal the following row's "
    "level."
)
MSG_GROUP_SPELLING = (
    "logs: column 'group' has the values {a!r} and {b!r} ({b!r} first at row {row}), "
    "which differ only in spaces or case, so they would be audited as two groups; write "
    "each group one way (pandas: df['group'] = df['group'].str.strip(), or .str.strip()"
    ".str.title() for case), or, if they are two groups, name them (Python: groups=[...])."
)
MSG_GROUPS = (
    "logs: column 'group' has {found} distinct value(s) {values}; {need}."
)
MSG_FILE_TYPE = (
    "logs: cannot read {path}: unknown file type {suffix!r}; use .csv (or .csv.gz, .tsv) or .parquet."
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
MSG_NOT_FINITE = (
    "logs: column {column!r} has a non-finite value {value!r} at row {row}; every value "
    "must be a finite number (fix or drop that individual's rows)."
)
MSG_OUTCOME_RANGE = (
    "logs: column 'outcome' must hold 1 (repaid) or 0 (not repaid), or a share in [0, 1], "
    "NaN where unknown; got {value!r} at row {row}."
)
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
    "logs: individual {id!r} has {next_col} = {nxt!r} at t = {t0} (row {row0}), but its row "
    "at t = {t1} (row {row1}) has {col} = {val!r}; the next-state columns must equal the "
    "following row's state."
)
MSG_FEATURE_POTENTIAL = (
    "logs: with {n} state features the gain potential f(x) over the joint bins must be "
    "given: potential=linear_potential({{feature: weight}}) (CLI --potential-weights "
    "income=1,debt=-0.5), a callable of StateBinning.levels(), or an array of {k} values; "
    "the lending default only applies to levels and single-feature bins."
)
MSG_NO_SCORE = (
    "logs: policy {policy!r} approves by p_repay(x, s), the mean 'outcome' of approved (d1) "
    "rows, and {why}; add an 'outcome' column (1 repaid, 0 not, NaN where unknown) with the "
    "outcomes of every group's approvals, or audit a checkpoint or factory policy."
)

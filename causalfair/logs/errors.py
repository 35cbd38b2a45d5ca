"""The errors of a decision log: :class:`LogError` and its messages.

Each ``MSG_*`` is a format string naming the column or individual at fault and the fix
(tests compare the exact text); :mod:`causalfair.logs.schema` re-exports them all.
"""

from __future__ import annotations

import numpy as np

from causalfair.errors import InputError


class LogError(InputError):
    """A decision log is malformed (the message names the column/individual and the fix)."""


def first_row(mask: np.ndarray) -> int:
    """The first row where ``mask`` holds: the row an error message names."""
    return int(np.flatnonzero(mask)[0])


# Error messages (format strings; tests compare the exact text).
MSG_NOT_FRAME = "logs: expected a pandas DataFrame, got {kind}."
MSG_EMPTY = "logs: the log has no rows; it needs one row per decision."
MSG_MISSING_COLUMNS = (
    "logs: missing column(s) {missing}; a decision log needs the columns {required} "
    "(optional: outcome): rename the log's columns to these names (pandas: "
    "df.rename(columns={{'period': 't', 'action': 'decision'}}))."
)
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
    "logs: column {column!r} must be numeric, got dtype {dtype}; write its values as "
    "numbers with a '.' decimal point (no units, thousands separators or labels)."
)
MSG_DECISION = (
    "logs: column 'decision' must be 0 or 1, got {value!r} at row {row}; a log audit covers "
    "two decisions (d0, d1): collapse the actions to the decision of interest, e.g. admit vs "
    "not: df['decision'] = (df['decision'] == ADMIT).astype(int), or audit every action "
    "through the system's simulator (causalfair decompose --system; docs/logs.md)."
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
    "logs: individual {id!r} has more than one row at t = {t}; keep one row per individual "
    "and epoch (drop exact copies; two different decisions at one epoch must be fixed at the "
    "source)."
)
MSG_TIME_GAP = (
    "logs: individual {id!r} jumps from t = {t0} to t = {t1}; an individual's rows must be "
    "consecutive time steps (a gap means missing decisions): add the missing rows, or give "
    "each unbroken spell its own id."
)
MSG_LATE_START = (
    "logs: individual {id!r} starts at t = {t}, but the log starts at t = {t0}; every "
    "individual must be observed from the first epoch (its first level is x_0); if "
    "individuals enter at different times, count t from each individual's first row "
    "(pandas: df['t'] -= df.groupby('id')['t'].transform('min'))."
)
MSG_GROUP_CHANGE = (
    "logs: individual {id!r} changes group from {g0!r} to {g1!r} at t = {t}; the group S "
    "is fixed per individual: correct that individual's group column (a typo?)."
)
MSG_NEXT_LEVEL = (
    "logs: individual {id!r} has next_level = {nxt!r} at t = {t0}, but its row at t = {t1} "
    "has level = {lvl!r}; next_level must equal the following row's level."
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
    "logs: individual {id!r} has {next_col} = {nxt!r} at t = {t0}, but its row at t = {t1} "
    "has {col} = {val!r}; the next-state columns must equal the following row's state."
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

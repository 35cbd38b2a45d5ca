"""Plain-text tables without pandas: what ``pandas.DataFrame(columns).to_string(index=False)``
prints, character for character, for the small tables the commands print (the worst
benefit pairs of ``causalfair decompose``), so that a command that prints one does not
import pandas (its import and first table took two thirds of the CPU time of the README's
first command, ``causalfair decompose --setting lending-1 --policy threshold:0.5``).

:func:`frame_text` covers the columns those tables hold: float64 arrays whose values are
NaN or 0 or between 1e-6 and 1e6 in magnitude, int64 arrays and printable ASCII strings.
Anything else (an empty table, booleans, a float pandas would print in scientific
notation, a non-ASCII or over-long label) returns None, and the caller asks pandas, so the
text is pandas' either way (tests/test_speed2.py compares the two on random tables).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from causalfair.errors import InputError

__all__ = ["frame_text", "cell_word", "cell_columns", "worst_columns", "CELL_WORDS"]

#: What the worst benefit pairs' cells are called (:func:`cell_word`).
CELL_WORDS = ("level", "state")

#: pandas' display.precision: float columns are formatted with 6 decimals, then the
#: trailing zeros every number of the column shares are trimmed.
_DIGITS = 6
#: Column labels and strings longer than this go to pandas (display.max_colwidth is 50).
_MAX_TEXT = 40
_NUMBER = re.compile(r"^\s*[+-]?[0-9]+\.[0-9]*$")


def _plain(s: Any) -> bool:
    return isinstance(s, str) and len(s) <= _MAX_TEXT and s.isascii() and s.isprintable() \
        and s == s.strip()


def _floats(arr: np.ndarray) -> list[str] | None:
    a = np.abs(arr[~np.isnan(arr)])
    if not np.isfinite(a).all() or (a > 1e6).any() or ((a > 0) & (a < 10.0 ** -_DIGITS)).any():
        return None  # inf, or pandas' scientific notation
    out = ["NaN" if np.isnan(v) else f"{v:.{_DIGITS}f}" for v in arr.tolist()]
    num = [bool(_NUMBER.match(x)) for x in out]
    while any(num) and all(x.endswith("0") for x, n in zip(out, num, strict=True) if n):
        out = [x[:-1] if n else x for x, n in zip(out, num, strict=True)]
    return [x + "0" if n and x.endswith(".") else x for x, n in zip(out, num, strict=True)]


def _column(values: Any) -> tuple[list[str], bool] | None:
    """(cell texts, numeric) of one column, or None outside the covered kinds."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            return None
        if values.dtype == np.float64:
            cells = _floats(values)
            return None if cells is None else (cells, True)
        if values.dtype == np.int64:
            return [f"{int(v):d}" for v in values.tolist()], True
        if values.dtype.kind != "U":
            return None
        values = values.tolist()
    if isinstance(values, (list, tuple)) and all(type(v) is str and _plain(v) for v in values):
        return list(values), False
    return None


def frame_text(columns: Mapping[str, Sequence[Any]]) -> str | None:
    """``pandas.DataFrame(columns).to_string(index=False)`` for ``columns`` (label -> one
    1-D column, all of one length), or None where the table holds anything outside
    the kinds the module docstring lists (then call pandas)."""
    if not columns or not all(_plain(k) for k in columns):
        return None
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1 or 0 in lengths:
        return None  # pandas prints "Empty DataFrame ..." for no rows
    strcols = []
    for label, values in columns.items():
        col = _column(values)
        if col is None:
            return None
        cells, numeric = col
        header = " " + label if numeric else label
        width = max(len(header), *(len(c) for c in cells))
        strcols.append([header.rjust(width)] + [c.rjust(width) for c in cells])
    rows = zip(*strcols, strict=True)
    return "\n".join(" ".join(row) for row in rows)


def cell_word(system: Any) -> str:
    """What the worst benefit pairs' cells are called in every table that prints them (the
    report, ``causalfair decompose``, the notebook view; docs/audit.md): ``"level"`` where
    the system declares levels (lending; no system: a log's levels), ``"state"`` (a cell of
    binned features) where it declares none."""
    return "level" if system is None or getattr(system, "levels", None) else "state"


def cell_columns(columns: Iterable[Any], word: str = "level") -> list[str]:
    """The worst benefit pairs' column names (:meth:`causalfair.results.BenefitResult.
    worst_pairs`: ``level[G]``) with their cells called ``word`` (:func:`cell_word`):
    ``state[G]`` for binned features; another word is an InputError naming it."""
    if not isinstance(word, str) or word not in CELL_WORDS:
        raise InputError(f"cells: bad value {str(word)[:40]!r}; allowed values: "
                         f"{', '.join(CELL_WORDS)} (what the pairs' cells are called).")
    return [word + c[len("level"):] if c.startswith("level[") else c for c in map(str, columns)]


def worst_columns(ben: Any, n: int) -> dict[str, Any]:
    """The columns of the ``n`` worst pairs of a
    :class:`~causalfair.results.BenefitResult` ``ben`` (its ``worst_pairs(n)``, label ->
    values, largest contribution first, never a pair with a departed level), without
    pandas: what :func:`frame_text` prints for the commands."""
    a, b = ben.pair
    K = ben.contributions.shape[0]
    order = np.argsort(-ben.contributions, axis=None, kind="stable")
    if ben.departed:  # pairs with a departed member are no pairs of people present
        ra, rb = np.unravel_index(order, (K, K))
        order = order[~(np.isin(ra, ben.departed) | np.isin(rb, ben.departed))]
    xa, xb = np.unravel_index(order[:n], (K, K))
    ga, gb = ben.groups[a], ben.groups[b]
    share = (ben.contributions[xa, xb] / ben.Lambda if ben.Lambda > 0
             else np.zeros(len(xa)))  # (a column of 0.0, as a DataFrame broadcasts)
    if ben.multi:
        def rows(arr: np.ndarray, g: int, xs: np.ndarray) -> list[list[float]]:
            return [[round(float(v), 12) for v in arr[g, x]] for x in xs]

        per = {f"Delta[{ga}]": rows(ben.delta, a, xa), f"Delta[{gb}]": rows(ben.delta, b, xb),
               f"pi[{ga}]": rows(ben.p_d1, a, xa), f"pi[{gb}]": rows(ben.p_d1, b, xb)}
    else:
        per = {f"Delta[{ga}]": ben.delta[a, xa], f"Delta[{gb}]": ben.delta[b, xb],
               f"p_d1[{ga}]": ben.p_d1[a, xa], f"p_d1[{gb}]": ben.p_d1[b, xb]}
    return {
        f"level[{ga}]": [ben.levels[i] for i in xa],
        f"level[{gb}]": [ben.levels[i] for i in xb],
        **per,
        "weight": ben.state_weights[a, xa] * ben.state_weights[b, xb],
        "contribution": ben.contributions[xa, xb],
        "share": share,
    }

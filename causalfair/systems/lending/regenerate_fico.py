"""Refit the FICO repayment model and rewrite (or check) the shipped ``lending-2`` files.

Usage::

    python -m causalfair.systems.lending.regenerate_fico           # rewrite the two files
    python -m causalfair.systems.lending.regenerate_fico --check   # compare; exit 1 if they differ

Files (in ``causalfair/systems/lending/data``): ``fico_logit.json`` (the fit, see
:func:`causalfair.systems.lending.fico.fit_fico_logit`) and ``lending2_k7.csv`` (the ``K = 7`` table,
floats written with ``repr`` so they round-trip exactly). Each file is written to a
temporary file in the same folder and moved into place with ``os.replace``, so a reader
never sees a half-written file.

``--check`` tolerances: coefficients 1e-8 relative, standard errors 1e-6 relative,
table entries 1e-10 absolute; the input files' SHA-256, the file names, the table's
columns and levels must match exactly. A different statsmodels version is reported but
is not by itself a failure.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import atomic_write_text
from causalfair.systems.lending.fico import (
    COEF_NAMES,
    DATA_DIR,
    LOGIT_FILE,
    TABLE_COLUMNS,
    TABLE_FILE,
    TABLE_K,
    fico_table,
    fit_fico_logit,
)

__all__ = [
    "COEF_RTOL",
    "SE_RTOL",
    "TABLE_ATOL",
    "check_outputs",
    "main",
    "render_json",
    "render_table",
    "write_outputs",
]

COEF_RTOL = 1e-8
SE_RTOL = 1e-6
TABLE_ATOL = 1e-10


def render_json(fit: dict[str, Any]) -> str:
    """The JSON text of a fit (floats round-trip exactly through ``json``)."""
    return json.dumps(fit, indent=2) + "\n"


def render_table(table: dict[str, np.ndarray]) -> str:
    """The CSV text of a table, floats written with ``repr`` (full precision)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(TABLE_COLUMNS)
    n = len(table["level"])
    for i in range(n):
        row = [str(int(table["level"][i]))]
        row += [repr(float(table[c][i])) for c in TABLE_COLUMNS[1:]]
        writer.writerow(row)
    return buf.getvalue()


def _compute() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    fit = fit_fico_logit()
    return fit, fico_table(TABLE_K, fit["coefficients"])


def write_outputs(directory: Path = DATA_DIR) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Refit and atomically write ``fico_logit.json`` and ``lending2_k7.csv`` to ``directory``."""
    fit, table = _compute()
    directory = Path(directory)
    atomic_write_text(directory / LOGIT_FILE, render_json(fit))
    atomic_write_text(directory / TABLE_FILE, render_table(table))
    return fit, table


def _read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], [r for r in rows[1:] if r]


def check_outputs(directory: Path = DATA_DIR) -> tuple[list[str], list[str]]:
    """Refit and compare with the files in ``directory``.

    Returns ``(differences, notes)``; the files match when ``differences`` is empty.
    """
    directory = Path(directory)
    fit, table = _compute()
    diffs: list[str] = []
    notes: list[str] = []

    json_path = directory / LOGIT_FILE
    try:
        shipped = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        diffs.append(f"{json_path}: cannot read ({exc})")
        shipped = None
    if shipped is not None:
        for key, rtol in (("coefficients", COEF_RTOL), ("std_errors", SE_RTOL)):
            have = shipped.get(key, {})
            for name in COEF_NAMES:
                new = fit[key][name]
                old = have.get(name)
                if old is None or not math.isclose(new, old, rel_tol=rtol, abs_tol=0.0):
                    diffs.append(f"{LOGIT_FILE}: {key}[{name}] shipped {old!r}, refit {new!r}")
        for key in ("data_files", "sha256", "coef_names", "groups", "score_scale"):
            if shipped.get(key) != fit[key]:
                diffs.append(f"{LOGIT_FILE}: {key} shipped {shipped.get(key)!r}, now {fit[key]!r}")
        if shipped.get("statsmodels_version") != fit["statsmodels_version"]:
            notes.append(
                f"statsmodels version: shipped {shipped.get('statsmodels_version')}, "
                f"now {fit['statsmodels_version']}"
            )

    table_path = directory / TABLE_FILE
    try:
        header, rows = _read_table(table_path)
    except (OSError, IndexError) as exc:
        diffs.append(f"{table_path}: cannot read ({exc})")
        return diffs, notes
    if tuple(header) != TABLE_COLUMNS:
        diffs.append(f"{TABLE_FILE}: columns {header}, expected {list(TABLE_COLUMNS)}")
        return diffs, notes
    if len(rows) != len(table["level"]):
        diffs.append(f"{TABLE_FILE}: {len(rows)} rows, expected {len(table['level'])}")
        return diffs, notes
    for i, row in enumerate(rows):
        if len(row) != len(TABLE_COLUMNS) or int(row[0]) != int(table["level"][i]):
            diffs.append(f"{TABLE_FILE}: row {i + 1} malformed or wrong level: {row}")
            continue
        for j, col in enumerate(TABLE_COLUMNS[1:], start=1):
            old, new = float(row[j]), float(table[col][i])
            if not abs(old - new) <= TABLE_ATOL:
                diffs.append(f"{TABLE_FILE}: level {row[0]} {col} shipped {old!r}, refit {new!r}")
    return diffs, notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m causalfair.systems.lending.regenerate_fico",
        description="Refit the FICO repayment model; rewrite or check the shipped files.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare a refit with the shipped files instead of writing; exit 1 on a difference",
    )
    args = parser.parse_args(argv)
    if args.check:
        diffs, notes = check_outputs()
        for note in notes:
            print(f"note: {note}")
        if diffs:
            print("FICO files differ from a refit:", file=sys.stderr)
            for d in diffs:
                print(f"  {d}", file=sys.stderr)
            print("run `python -m causalfair.systems.lending.regenerate_fico` to rewrite them", file=sys.stderr)
            return 1
        print(f"ok: {LOGIT_FILE} and {TABLE_FILE} match a refit")
        return 0
    fit, _ = write_outputs()
    print(f"wrote {DATA_DIR / LOGIT_FILE} and {DATA_DIR / TABLE_FILE}")
    print("coefficients: " + ", ".join(f"{k}={v!r}" for k, v in fit["coefficients"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

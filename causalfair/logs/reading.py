"""Reading a decision log from a file (:func:`read_logs`): CSV (its field separator
from the header, gzip inflated in bounded memory, a ``group`` cell read as the label
written) or Parquet (decoded batch by batch), the memory the table needs bounded while
it is read (``CAUSALFAIR_MAX_MEMORY``, docs/limits.md). The frame it returns is checked
by :func:`causalfair.logs.schema.validate_logs` (the log format); every door reads logs
through this one function."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from causalfair._limits import check_memory, format_bytes, max_memory
from causalfair._safe_read import not_a_file
from causalfair.errors import CausalfairError
from causalfair.logs.errors import MSG_FILE_TYPE, MSG_NOT_UTF8, MSG_PARQUET, LogError

__all__ = ["MAX_LOG_COLUMNS", "read_logs"]

#: Most columns a CSV decision log may have (a log has eight plus its state features).
MAX_LOG_COLUMNS = 10_000
#: Memory a decision log needs per byte of CSV text (the parser's buffers and the
#: DataFrame's columns), and per byte of decoded Parquet data (the Arrow batches and the
#: DataFrame made from them).
_CSV_FACTOR = 5
_PARQUET_FACTOR = 3
#: Rows per Arrow batch while a Parquet log is read (and its decoded size counted).
_PARQUET_BATCH = 1 << 16
#: Field separators a CSV log may use: the one its header line holds (',' unless the
#: header has none and holds ';' or a tab, as spreadsheet exports in many locales do).
_SEPARATORS = (",", ";", "\t")


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


def _csv_separator(path: Path) -> str:
    """The CSV log's field separator, from its header line (its first MiB): the most
    frequent of ',', ';' and tab outside quoted names (',' on a tie or when there is none),
    so a ';' export with a column named "income, net" is not read as two columns. Refuses
    a header of over :data:`MAX_LOG_COLUMNS` columns."""
    import gzip
    import re

    with (gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")) as fh:
        header = re.sub(rb'"(?:[^"]|"")*"', b"", fh.readline(1 << 20))
    counts = {sep: header.count(sep.encode()) for sep in _SEPARATORS}
    sep = max(_SEPARATORS, key=lambda c: (counts[c], c == ","))
    n = counts[sep] + 1
    if n > MAX_LOG_COLUMNS:
        raise LogError(f"logs: {path}: the header has {n} or more columns, over the limit of "
                       f"{MAX_LOG_COLUMNS}; keep the log's columns (id, t, group, level, decision, "
                       "next_level, reward, outcome and the state features) only.")
    return sep


def _read_parquet(path: Path) -> Any:
    """A Parquet log read in Arrow batches whose decoded size is counted as they come: a
    log past the memory limit is refused after at most one batch over it (the size a
    Parquet file declares is that of its encoded pages, which dictionary and run-length
    encoding make many times smaller than the table)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    limit, seen, batches = max_memory(), 0, []
    for batch in pf.iter_batches(batch_size=_PARQUET_BATCH):
        seen += batch.nbytes
        if _PARQUET_FACTOR * seen > limit:
            check_memory(_PARQUET_FACTOR * seen,
                         f"logs: {path} ({pf.metadata.num_rows} rows; the first "
                         f"{sum(len(b) for b in batches) + len(batch)} decode to "
                         f"{format_bytes(seen)})", "split the log or audit a sample of its individuals")
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=pf.schema_arrow).to_pandas()


def read_logs(path: str | Path) -> Any:
    """Read a decision log from CSV (``.csv``, ``.csv.gz``, ``.txt``, ``.tsv``; the field
    separator is the header's: ',' or, in a header without commas, ';' or a tab; a UTF-8
    byte-order mark is skipped; a ``group`` cell is the label written, ``NA`` or ``007``
    too: :func:`_csv_names`) or Parquet (``.parquet``, ``.pq``).
    The memory the table needs is bounded while it is read (``CAUSALFAIR_MAX_MEMORY``,
    docs/limits.md): the CSV's size (a gzip file's as it inflates) times
    :data:`_CSV_FACTOR`, or a Parquet file's decoded size, counted batch by batch, times
    :data:`_PARQUET_FACTOR`. Missing, empty and malformed files raise :class:`LogError`."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise LogError(f"logs: {path}: {not_a_file(path)}; give the path of a decision log "
                       "(CSV or Parquet, docs/logs.md).")
    name = path.name.lower()
    size = path.stat().st_size
    if size == 0:
        raise LogError(f"logs: {path} is empty; a decision log has a header row (id, t, group, "
                       "level, decision, ...) and one row per decision (docs/logs.md).")
    if name.endswith((".csv", ".csv.gz", ".txt", ".tsv")):
        fix = "split the log or audit a sample of its individuals"
        try:
            sep = _csv_separator(path)
            if name.endswith(".gz"):
                import gzip

                with gzip.open(path, "rb") as fh:
                    kw = _csv_names(pd.read_csv(fh, sep=sep, encoding="utf-8-sig", nrows=0))
                with gzip.open(path, "rb") as fh:
                    return _group_as_written(pd.read_csv(
                        _CappedStream(fh, max_memory() // _CSV_FACTOR, path), sep=sep,
                        encoding="utf-8-sig", **kw))
            check_memory(_CSV_FACTOR * size, f"logs: {path} ({format_bytes(size)} of CSV, about "
                         f"{_CSV_FACTOR} bytes of memory per byte)", fix)
            kw = _csv_names(pd.read_csv(path, sep=sep, encoding="utf-8-sig", nrows=0))
            return _group_as_written(pd.read_csv(path, sep=sep, encoding="utf-8-sig", **kw))
        except CausalfairError:
            raise
        except UnicodeDecodeError:
            raise _not_utf8(path) from None
        except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError, EOFError) as exc:
            raise LogError(f"logs: {path} is not a readable CSV file ({type(exc).__name__}: "
                           f"{_first_line(exc)}).") from None
    if name.endswith((".parquet", ".pq")):
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise LogError(MSG_PARQUET.format(path=path)) from None
        try:
            return _read_parquet(path)
        except CausalfairError:  # the memory limit (a ValueError too): its own message
            raise
        except (OSError, ValueError, EOFError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise LogError(f"logs: {path} is not a readable Parquet file ({type(exc).__name__}: "
                           f"{_first_line(exc)}).") from None
    raise LogError(MSG_FILE_TYPE.format(path=path, suffix="".join(path.suffixes) or path.name))


#: The cells pandas reads as missing by default (``pd.read_csv``'s ``na_values``); the
#: ``group`` column of a CSV log takes only the empty cell as missing (:func:`_csv_names`).
_NA_TEXT = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
            "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def _csv_names(header: Any) -> dict[str, Any]:
    """``pd.read_csv`` keywords that read a CSV log's ``group`` column (``header``: its
    columns, an empty frame) as the labels written, a group named ``NA``, ``None`` or
    ``007`` included (every other column as pandas reads it); :func:`_group_as_written`
    then reads back as numbers the labels that are numbers as written."""
    if "group" not in header.columns:
        return {}
    return {"dtype": {"group": str}, "keep_default_na": False,
            "na_values": {c: ([""] if c == "group" else list(_NA_TEXT)) for c in header.columns}}


def _group_as_written(df: Any) -> Any:
    """``df`` with its text ``group`` column as numbers when every label is a number
    written as Python writes it (``0``, ``1``, ``2.5``: a log's numeric groups keep their
    numeric order, ``2`` before ``10``, as before); else the labels as written (``007`` is
    not 7, ``1e3`` not 1000.0, ``NA`` not missing)."""
    import pandas as pd

    if "group" not in df.columns:
        return df
    col = df["group"]
    try:
        num = pd.to_numeric(col)
    except (ValueError, TypeError):
        return df
    if all(_python_number(t.strip()) for t in col[col.notna()].astype(str).unique()):
        df["group"] = num  # (int64, or float64 when a label is 2.5: as pandas read it before;
        # `` 1`` after a comma and a space too, as pandas reads a number column)
    return df


def _python_number(text: str) -> bool:
    """Whether ``text`` is a finite number as Python writes it: ``str(int(text))`` or
    ``str(float(text))`` gives it back (``10``, ``2.5``; not ``007``, ``1e3``, nor ``inf``
    or ``nan``, labels that as numbers would be an infinite group or a missing one).
    :func:`_group_as_written` strips a label's spaces first, as pandas does for numbers."""
    for kind in (int, float):
        try:
            if str(kind(text)) == text:
                return math.isfinite(kind(text))
        except ValueError:
            pass
    return False


def _not_utf8(path: Path) -> LogError:
    """:data:`MSG_NOT_UTF8`: the first line of ``path`` that is not UTF-8, its byte and text
    (read line by line, so in bounded memory)."""
    import gzip

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return LogError(MSG_NOT_UTF8.format(
                    path=path, line=n, where="the header" if n == 1 else f"row {n - 2}",
                    byte=f"0x{raw[exc.start]:02x}",
                    text=raw.decode("utf-8", "replace").strip()[:80]))
    return LogError(f"logs: {path} is not UTF-8 text; save it as 'CSV UTF-8'.")


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:160] if text else ""

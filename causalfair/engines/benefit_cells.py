"""The cells of Lambda by forks (:mod:`causalfair.engines.benefit_mc`, module docstring,
point 2): the states individuals visit, grouped so that individuals of two groups "with
the same state" are paired. The discrete level when observations carry one, otherwise
joint quantile bins of the features (edges from the pooled visits of every group, so the
groups share the cells), with a label per cell and a description of the binning. The
attribution of a change in C (:mod:`causalfair.engines.attribution`) bins by cells the
same way."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["quantile_edges", "bin_cells", "visit_cells", "distinct_rows", "bin_rows",
           "bin_labels", "LABEL_FEATURES"]


def quantile_edges(pooled: np.ndarray, bins: int
                   ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """The bins of every feature (column) of ``pooled``: the inner edges, and the values
    of a feature binned by value. A feature with at most ``bins`` distinct values gets one
    bin per value (the edges are the values but the smallest); quantiles would merge the
    values of a binary feature whose rarer value is under 1 / ``bins`` of the rows (every
    quantile on the common value: a one-hot state such as infectious' susceptible and
    recovered columns, a flattened Discrete observation). Any other feature gets ``bins``
    quantile bins (ties merged)."""
    qs = np.linspace(0, 1, bins + 1)[1:-1]
    edges: list[np.ndarray] = []
    values: list[np.ndarray | None] = []
    for j in range(pooled.shape[1]):
        col = pooled[:, j]
        few = np.unique(col[:4096])  # most features with more values show them here
        if len(few) <= bins and not np.isin(col, few).all():
            few = np.unique(col)
        if len(few) <= bins:
            edges.append(few[1:])
            values.append(few)
        else:
            edges.append(np.unique(np.quantile(col, qs)))
            values.append(None)
    return edges, values


def bin_cells(x: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
    """Joint bin index of every row of ``x`` (features in columns) on ``edges``."""
    idx = np.zeros(x.shape[0], dtype=np.intp)
    for j, e in enumerate(edges):
        idx = idx * (len(e) + 1) + np.searchsorted(e, x[:, j], side="right")
    return idx


def visit_cells(levels: list[np.ndarray] | None, feats: list[np.ndarray] | None, bins: int,
           names: tuple[str, ...] | None, n_levels: int | None,
           level_labels: tuple[str, ...] | None = None, named: dict | None = None
           ) -> tuple[list[np.ndarray], int, tuple[str, ...], str]:
    """Cell index per visit (one array per group), number of cells, labels, description.
    Features: the cells are the joint quantile bins that some visit falls in, numbered in
    the joint bins' order (:func:`bin_cells`'s, feature 0 first). An empty bin weighs 0
    in every group and adds nothing to Lambda, and there are ``bins`` to the power F
    joint bins against at most one visited bin per visit, so the cells, and the K x K
    pair terms, stay within the visits. The visited bins are found as distinct rows of
    per-feature bins, so any number of features works (a joint index would overflow 64
    bits past about 63 binary features). ``named``: as for :func:`bin_labels`."""
    if levels is not None:
        K = int(n_levels) if n_levels is not None else int(max(x.max() for x in levels)) + 1
        labels = tuple(level_labels) if level_labels is not None and len(level_labels) == K \
            else tuple(str(i + 1) for i in range(K))  # the system's own labels where it has them
        return levels, K, labels, "levels"
    edges, values = quantile_edges(np.concatenate(feats, axis=0), bins)
    rows = [bin_rows(x, edges) for x in feats]
    visited, cell = distinct_rows(np.concatenate(rows), [len(e) + 1 for e in edges])
    labels, desc = bin_labels(edges, names, visited, values, named)
    cells = np.split(cell.reshape(-1).astype(np.intp), np.cumsum([len(r) for r in rows])[:-1])
    return cells, len(labels), labels, desc


def distinct_rows(rows: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)`` for ``rows`` of per-feature bins
    (feature j's in ``range(sizes[j])``): the same distinct rows, in the same
    lexicographic order, and the same inverse. Where the joint bins fit in 2**62 each row
    is one integer (mixed radix, feature 0 most significant, so integer order is row
    order), and the distinct ones are counted by ``bincount`` where the joint bins are not
    many more than the rows, else sorted as integers: linear, or one integer sort, where
    sorting rows as records takes seconds at millions of visits."""
    F, total = rows.shape[1], math.prod(sizes)
    if F == 0 or total >= 2**62:
        return np.unique(rows, axis=0, return_inverse=True)
    key = np.zeros(rows.shape[0], dtype=np.int64)
    for j, size in enumerate(sizes):
        key *= size
        key += rows[:, j]
    if total <= 4 * rows.shape[0] + 4096:
        present = np.bincount(key, minlength=total) > 0
        keys, inverse = np.flatnonzero(present), (np.cumsum(present) - 1)[key]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
    visited = np.empty((keys.shape[0], F), dtype=rows.dtype)
    for j in reversed(range(F)):
        visited[:, j] = keys % sizes[j]
        keys = keys // sizes[j]
    return visited, inverse


def bin_rows(x: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
    """The bin of every feature (column) of every row of ``x`` on ``edges``, (n, F), in
    the smallest unsigned dtype that holds them."""
    top = max((len(e) for e in edges), default=0)
    dtype = np.uint8 if top < 255 else np.uint16 if top < 65535 else np.intp
    out = np.empty((x.shape[0], len(edges)), dtype=dtype)
    for j, e in enumerate(edges):
        out[:, j] = np.searchsorted(e, x[:, j], side="right")
    return out


#: Past this many features a cell's label names only the features off their most common
#: bin among the visited cells (a one-hot encoding: the hot column).
LABEL_FEATURES = 8


def _some(names: list[str] | tuple[str, ...]) -> str:
    """Feature names for a description: all of them, or past :data:`LABEL_FEATURES` their
    number, the first and the last."""
    if len(names) <= LABEL_FEATURES:
        return ", ".join(names)
    return f"{len(names)} features ({names[0]}, ..., {names[-1]})"


def bin_labels(edges: list[np.ndarray], names: tuple[str, ...] | None,
               rows: np.ndarray | None = None,
               values: list[np.ndarray | None] | None = None,
               named: dict[str, tuple[str, ...]] | None = None) -> tuple[tuple[str, ...], str]:
    """The label of every joint bin of :func:`bin_cells` on ``edges`` (e.g.
    ``income:q2/4 debt:q1/4``, or ``susceptible=1`` for a feature binned by its
    ``values``, :func:`quantile_edges`), or of the joint bins given as ``rows`` of
    per-feature bins (:func:`bin_rows`) only, and a description of the binning. With more
    than :data:`LABEL_FEATURES` features (``rows`` given) a label names the features off
    their most common bin only (``(most common bins)`` when none is). ``named``: feature ->
    the names of its values 0, 1, ... (the group feature's: ``group=B``, not ``group=1``)."""
    F, sizes = len(edges), [len(e) + 1 for e in edges]
    values = values or [None] * F
    fnames = names or tuple(f"f{j}" for j in range(F))
    values = [None if v is None else [nm[int(x)] for x in v] if (nm := (named or {}).get(f))
              and set(np.asarray(v).tolist()) <= set(range(len(nm))) else [f"{x:g}" for x in v]
              for f, v in zip(fnames, values, strict=True)]  # named indices: "group=B"
    short = rows is not None and F > LABEL_FEATURES and len(rows) > 0
    if rows is None:
        rows = np.array(list(np.ndindex(*sizes)), dtype=np.intp).reshape(-1, F)
    rows = np.asarray(rows)
    common = [int(np.bincount(rows[:, j].astype(np.intp)).argmax()) for j in range(F)] \
        if short else []
    labels = []
    for row in rows.tolist():
        parts = [f"{fnames[j]}:q{b + 1}/{sizes[j]}" if values[j] is None else
                 f"{fnames[j]}={values[j][b]}" for j, b in enumerate(row)
                 if not short or b != common[j]]
        labels.append(" ".join(parts) if parts else "(most common bins)")
    total = math.prod(sizes)
    by_value = [fnames[j] for j in range(F) if values[j] is not None]
    grid = "x".join(map(str, sizes)) if F <= LABEL_FEATURES else f"{F}-feature"
    if len(by_value) == F:  # no quantiles at all: a cell is a joint value
        head = f"one cell per joint value of {_some(fnames)}"
    else:
        head = f"joint quantile bins of {_some(fnames)}" + (
            f" (one bin per value of {_some(by_value)})" if by_value else "")
    desc = head + f" ({grid} cells" + (f", {len(labels)} visited" if len(labels) < total else "")
    desc += "; labels name the features off their most common bin)" if short else ")"
    return tuple(labels), desc

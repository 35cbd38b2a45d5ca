"""Real-data inputs for the ``lending-2`` setting: the FICO TransRisk tables.

The tables (``data/fico/``, see ``PROVENANCE.md`` there) come from the Federal Reserve's
2007 report to Congress on credit scoring, as tabulated for Hardt, Price & Srebro (2016)
and Liu et al. (2018). Two groups are used: ``s+`` = "Non- Hispanic white" (index 0) and
``s-`` = "Black" (index 1).

Initial distribution ``P(x0 | s)``
    The score range [0, 100] is cut into ``K`` equal-width bins with edges
    ``100 * k / K`` (:func:`bin_edges`); level ``k + 1`` is bin ``k``. The CDF table gives
    the cumulative share (%) of a group at or below each tabulated score, so the *point
    mass* at a tabulated score ``v`` is ``CDF(v) - CDF(previous tabulated score)`` and the
    first point's mass is ``CDF(0)``. Each point mass goes whole to the bin containing its
    score, bins being half-open ``[lo, hi)``: a score exactly on an inner edge goes to the
    upper bin, and score 100 goes to the last bin. The binned masses are renormalised to
    sum to one (:func:`fico_initial`). The tabulation skips scores 72.5, 77.5 and 92.5; the
    mass of a skipped score is therefore carried by the next tabulated score (73, 78, 93),
    which is all the table allows.

Repayment probability ``p_repay(x, s)``
    A logistic regression (binomial GLM, logit link, fractional response) of the repayment
    rate ``1 - bad / 100`` on ``score``, ``group`` and ``score x group``, pooling both
    groups' 198 score points, where ``score = TransRisk / 100`` (scaled to [0, 1] for
    numerical stability) and ``group = 1`` for Black. Each score point is weighted by its
    group's renormalised point mass, so each group's weights sum to one and the two groups
    weigh equally (the groups' sample sizes in ``totals.csv`` are deliberately *not* used:
    the white sample is about seven times larger and would dominate the shared
    coefficients). The fit (:func:`fit_fico_logit`, needs statsmodels) is shipped in
    ``data/fico_logit.json``; :func:`fico_repay` evaluates the shipped coefficients at each
    bin's midpoint, so loading the setting needs neither statsmodels nor a refit. The
    ``K = 7`` table is shipped as ``data/lending2_k7.csv``. Both files are rewritten (and
    checked) by ``python -m causalfair.systems.lending.regenerate_fico [--check]``.

Only numpy and the standard library are imported at module level.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import math
import operator
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from causalfair.errors import InputError

__all__ = [
    "COEF_NAMES",
    "CDF_FILE",
    "DATA_DIR",
    "FICO_DIR",
    "FicoData",
    "GROUP_COLUMNS",
    "LOGIT_FILE",
    "MIN_LEVELS",
    "PERFORMANCE_FILE",
    "SCORE_MAX",
    "TABLE_COLUMNS",
    "TABLE_FILE",
    "TABLE_K",
    "bin_edges",
    "bin_midpoints",
    "fico_initial",
    "fico_repay",
    "fico_table",
    "fit_fico_logit",
    "load_fico",
    "load_fico_logit",
    "repay_from_coefficients",
]

#: Package data folder (``causalfair/systems/lending/data``).
DATA_DIR = Path(__file__).resolve().parent / "data"
#: Folder holding the unmodified FICO tables.
FICO_DIR = DATA_DIR / "fico"
#: Cumulative share (%) at or below each score, per group.
CDF_FILE = "transrisk_cdf_by_race_ssa.csv"
#: "Bad" (90+ days delinquent) rate (%) at each score, per group.
PERFORMANCE_FILE = "transrisk_performance_by_race_ssa.csv"
#: Shipped logistic fit (relative to :data:`DATA_DIR`).
LOGIT_FILE = "fico_logit.json"
#: Shipped ``K = 7`` table (relative to :data:`DATA_DIR`).
TABLE_FILE = "lending2_k7.csv"
#: Number of levels of the shipped table.
TABLE_K = 7
#: Column names of the two groups in the FICO tables: index 0 = s+, index 1 = s-.
GROUP_COLUMNS: tuple[str, str] = ("Non- Hispanic white", "Black")
#: Names of the logistic-regression coefficients, in design-matrix order.
COEF_NAMES: tuple[str, ...] = ("const", "score", "group", "score_x_group")
#: Columns of the shipped table.
TABLE_COLUMNS: tuple[str, ...] = (
    "level",
    "score_lo",
    "score_hi",
    "p_x0_white",
    "p_x0_black",
    "p_repay_white",
    "p_repay_black",
)
#: Upper end of the TransRisk score range (the lower end is 0).
SCORE_MAX = 100.0
#: Smallest number of levels the lending model supports.
MIN_LEVELS = 3

# Scores are tabulated on a 0.5 grid; binning is done on integer half-steps so that a
# score lying exactly on a bin edge is classified exactly (no floating-point ties).
_HALF_STEPS = 200  # = SCORE_MAX / 0.5


@dataclass(frozen=True, eq=False)
class FicoData:
    """The FICO tables for the two groups, as read from the package data.

    Attributes
    ----------
    scores:
        ``(n,)`` tabulated TransRisk scores (0..100, step 0.5, a few skipped).
    pmf:
        ``(2, n)`` point mass of each group at each score (see the module docstring),
        renormalised so each row sums to one. Row 0 = white, row 1 = Black.
    repay:
        ``(2, n)`` repayment rate ``1 - bad / 100`` at each score, per group.
    groups:
        The group column names, in row order.
    """

    scores: np.ndarray
    pmf: np.ndarray
    repay: np.ndarray
    groups: tuple[str, str] = field(default=GROUP_COLUMNS)


def _check_levels(K: Any) -> int:
    """Validate the number of levels ``K`` and return it as an ``int``."""
    if isinstance(K, bool):
        raise TypeError(f"K must be an integer number of levels, got bool {K!r}")
    try:
        k = operator.index(K)
    except TypeError:
        raise TypeError(
            f"K must be an integer number of levels, got {type(K).__name__} {K!r}"
        ) from None
    if k < MIN_LEVELS:
        raise InputError(
            f"K (number of levels) must be >= {MIN_LEVELS}, got K={k}; "
            f"pass K={MIN_LEVELS} or more (the lending settings default to K={TABLE_K})"
        )
    return k


def _read_group_columns(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read ``Score`` and the two group columns of a FICO table (csv module, no pandas)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise InputError(f"{path}: empty file")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in ("Score", *GROUP_COLUMNS) if c not in header]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}; header is {header}")
    idx = [header.index(c) for c in ("Score", *GROUP_COLUMNS)]
    try:
        values = np.array([[float(r[i]) for i in idx] for r in rows[1:] if r], dtype=float)
    except (ValueError, IndexError) as exc:
        raise InputError(f"{path}: malformed row ({exc})") from exc
    return values[:, 0], values[:, 1:].T.copy()


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


@functools.lru_cache(maxsize=1)
def load_fico() -> FicoData:
    """Read the FICO CDF and performance tables for the two groups.

    The result is cached and its arrays are read-only.
    """
    scores, cdf = _read_group_columns(FICO_DIR / CDF_FILE)
    perf_scores, bad = _read_group_columns(FICO_DIR / PERFORMANCE_FILE)
    if not np.array_equal(scores, perf_scores):
        raise InputError(f"{CDF_FILE} and {PERFORMANCE_FILE} tabulate different scores")
    if scores[0] != 0.0 or scores[-1] != SCORE_MAX or np.any(np.diff(scores) <= 0):
        raise InputError(f"{CDF_FILE}: scores must increase from 0 to {SCORE_MAX:g}")
    if not np.array_equal(scores * 2, np.round(scores * 2)):
        raise InputError(f"{CDF_FILE}: scores must lie on the 0.5 grid")
    mass = np.diff(cdf, axis=1, prepend=0.0)  # first point's mass = CDF(0)
    if np.any(mass < 0):
        raise InputError(f"{CDF_FILE}: a cumulative share decreases")
    pmf = mass / mass.sum(axis=1, keepdims=True)
    if np.any((bad < 0) | (bad > 100)):
        raise InputError(f"{PERFORMANCE_FILE}: bad rates must lie in [0, 100]")
    repay = 1.0 - bad / 100.0
    return FicoData(scores=_readonly(scores), pmf=_readonly(pmf), repay=_readonly(repay))


def bin_edges(K: int) -> np.ndarray:
    """The ``K + 1`` equal-width bin edges ``100 * k / K`` over the score range [0, 100]."""
    k = _check_levels(K)
    return SCORE_MAX * np.arange(k + 1) / k


def bin_midpoints(K: int) -> np.ndarray:
    """The ``K`` bin midpoints ``100 * (k + 1/2) / K`` (TransRisk units)."""
    k = _check_levels(K)
    return SCORE_MAX * (2 * np.arange(k) + 1) / (2 * k)


def _bin_index(scores: np.ndarray, K: int) -> np.ndarray:
    """Bin of each score: half-open ``[lo, hi)`` bins, score 100 in the last bin."""
    half = np.rint(scores * 2).astype(np.int64)  # exact: scores are on the 0.5 grid
    return np.minimum(half * K // _HALF_STEPS, K - 1)


def fico_initial(K: int) -> np.ndarray:
    """``P(x0 | s)`` as a ``(2, K)`` array: each group's score mass per bin, rows sum to 1.

    Row 0 = white (s+), row 1 = Black (s-); column ``k`` = level ``k + 1``. See the module
    docstring for how each tabulated score's mass is attributed to a bin.
    """
    k = _check_levels(K)
    data = load_fico()
    idx = _bin_index(data.scores, k)
    out = np.stack([np.bincount(idx, weights=row, minlength=k) for row in data.pmf])
    return out / out.sum(axis=1, keepdims=True)


def repay_from_coefficients(
    coefficients: dict[str, float], score: np.ndarray, group: int
) -> np.ndarray:
    """Evaluate the fitted logistic model at TransRisk ``score`` (0..100) for ``group``.

    ``group`` is 0 (white) or 1 (Black). The linear predictor is
    ``const + score * s + group * g + score_x_group * s * g`` with ``s = score / 100``.
    """
    if group not in (0, 1):
        raise InputError(f"group must be 0 (white) or 1 (Black), got {group!r}")
    s = np.asarray(score, dtype=float) / SCORE_MAX
    c = coefficients
    eta = c["const"] + c["score"] * s + group * (c["group"] + c["score_x_group"] * s)
    # exp per value with the C library's exp, not numpy's: numpy dispatches exp to
    # CPU-specific SIMD kernels (AVX-512 or not) whose last bits differ, and this table
    # feeds every audit of the FICO settings (same numbers on any machine; docs/limits.md)
    e = np.array([math.exp(-v) for v in np.ravel(eta).tolist()], dtype=float)
    return 1.0 / (1.0 + e.reshape(np.shape(eta)))


@functools.lru_cache(maxsize=1)
def _shipped_logit_text() -> str:
    return (DATA_DIR / LOGIT_FILE).read_text(encoding="utf-8")


def load_fico_logit() -> dict[str, Any]:
    """The shipped logistic fit (``data/fico_logit.json``), as a fresh dict."""
    return json.loads(_shipped_logit_text())


def fico_repay(K: int, coefficients: dict[str, float] | None = None) -> np.ndarray:
    """``p_repay(x, s)`` as a ``(2, K)`` array: the logistic fit at each bin's midpoint.

    By default the shipped coefficients (``data/fico_logit.json``) are used; pass
    ``coefficients`` (a mapping with the keys of :data:`COEF_NAMES`) to use another fit.
    """
    k = _check_levels(K)
    coefs = load_fico_logit()["coefficients"] if coefficients is None else coefficients
    mid = bin_midpoints(k)
    return np.stack([repay_from_coefficients(coefs, mid, g) for g in (0, 1)])


def fico_table(
    K: int = TABLE_K, coefficients: dict[str, float] | None = None
) -> dict[str, np.ndarray]:
    """The ``lending-2`` table for ``K`` levels, as columns keyed by :data:`TABLE_COLUMNS`."""
    k = _check_levels(K)
    edges = bin_edges(k)
    initial = fico_initial(k)
    repay = fico_repay(k, coefficients)
    return {
        "level": np.arange(1, k + 1),
        "score_lo": edges[:-1],
        "score_hi": edges[1:],
        "p_x0_white": initial[0],
        "p_x0_black": initial[1],
        "p_repay_white": repay[0],
        "p_repay_black": repay[1],
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fit_fico_logit() -> dict[str, Any]:
    """Fit the repayment logistic regression with statsmodels (imported here).

    Returns the structure stored in ``data/fico_logit.json``: coefficients and standard
    errors keyed by :data:`COEF_NAMES`, the statsmodels version, the input file names and
    their SHA-256, and a description of the model.

    The response is the fractional repayment rate, so this is a quasi-likelihood
    (fractional logit) fit; statsmodels' Binomial family accepts non-integer responses in
    [0, 1] without warning. The weights are passed as ``var_weights`` (each group's point
    masses, summing to one per group), which leaves the number of observations at the
    number of rows. Because the weights sum to 2 rather than to the sample size, the
    standard errors are *nominal* (model-based, effective sample size 2): they document
    the fit and are not sampling uncertainty.

    Warnings: statsmodels' ``ConvergenceWarning`` and ``PerfectSeparationWarning`` are
    turned into a ``RuntimeError`` here, because a fit that did not converge (or separates)
    must never be shipped silently; other warnings propagate unchanged.
    """
    import statsmodels
    import statsmodels.api as sm
    from statsmodels.tools import sm_exceptions

    data = load_fico()
    s = data.scores / SCORE_MAX
    blocks = []
    for g in (0, 1):
        blocks.append(np.column_stack([np.ones_like(s), s, np.full_like(s, g), g * s]))
    exog = np.vstack(blocks)
    endog = np.concatenate(data.repay)
    weights = np.concatenate(data.pmf)

    escalate = [sm_exceptions.ConvergenceWarning]
    if hasattr(sm_exceptions, "PerfectSeparationWarning"):
        escalate.append(sm_exceptions.PerfectSeparationWarning)
    with warnings.catch_warnings():
        for category in escalate:
            warnings.simplefilter("error", category)
        try:
            model = sm.GLM(endog, exog, family=sm.families.Binomial(), var_weights=weights)
            result = model.fit(tol=1e-12, maxiter=100)
        except tuple(escalate) as exc:
            raise RuntimeError(f"FICO logistic fit is not usable: {exc}") from exc
    if not result.converged:
        raise RuntimeError("FICO logistic fit did not converge")

    params = np.asarray(result.params, dtype=float)
    bse = np.asarray(result.bse, dtype=float)
    return {
        "model": "binomial GLM, logit link, fractional response (statsmodels)",
        "formula": (
            "logit P(repay) = const + score*s + group*g + score_x_group*s*g, "
            "s = TransRisk/100, g = 1 for Black, 0 for Non- Hispanic white"
        ),
        "response": "1 - bad/100 (bad = % 90+ days delinquent at the score)",
        "weights": (
            "var_weights = each group's renormalised point mass at the score "
            "(sums to 1 per group; groups weigh equally; totals.csv not used)"
        ),
        "score_scale": SCORE_MAX,
        "groups": {"0": GROUP_COLUMNS[0], "1": GROUP_COLUMNS[1]},
        "coef_names": list(COEF_NAMES),
        "coefficients": {n: float(v) for n, v in zip(COEF_NAMES, params, strict=True)},
        "std_errors": {n: float(v) for n, v in zip(COEF_NAMES, bse, strict=True)},
        "std_errors_note": "nominal (weights sum to 2), not sampling uncertainty",
        "n_rows": int(endog.size),
        "statsmodels_version": statsmodels.__version__,
        "data_files": [f"fico/{CDF_FILE}", f"fico/{PERFORMANCE_FILE}"],
        "sha256": {
            f"fico/{CDF_FILE}": _sha256(FICO_DIR / CDF_FILE),
            f"fico/{PERFORMANCE_FILE}": _sha256(FICO_DIR / PERFORMANCE_FILE),
        },
    }

"""Lambda from decision logs: the thresholded ("pre-test") estimator, its bootstrap
replicates and its reported interval (method.md section 4; docs/logs.md, "Lambda from
logs").

:func:`threshold_lambda` gives the thresholded and plug-in Lambda of one pair of groups
and their replicates from the full-data and per-replicate (pi(d1 | x, s), Delta(x, s),
P(x | s)) arrays; :func:`estimate_lambda` applies the estimator asked for;
:func:`lambda_interval_of` is the one rule for the reported interval (always contains the
estimate it is reported with). Used by :mod:`causalfair.logs.audit` for the audited pair
and by :mod:`causalfair.logs.groups` for every pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._validation import check_alpha
from causalfair.engines.benefit_mc import lambda_hull, plugin_tangent, pretest
from causalfair.errors import InputError
from causalfair.logs.errors import LogError

__all__ = ["LambdaEstimate", "threshold_lambda", "estimate_lambda", "lambda_interval_of",
           "lambda_terms", "lambda_threshold_c", "check_lambda_estimator", "LAMBDA_ESTIMATORS",
           "INTERVAL_METHODS"]

LAMBDA_ESTIMATORS = ("thresholded", "plugin")
INTERVAL_METHODS = ("percentile", "normal")

# ------------------------------------------------------------- Lambda: the pre-test
@dataclass(frozen=True, eq=False)
class LambdaEstimate:
    """How Lambda was estimated from the logs (see :func:`threshold_lambda`).

    ``requested``: the ``lambda_estimator`` asked for; ``estimator``: the one used
    ("thresholded", or "plugin", also when thresholding was asked for but there were
    fewer than 2 bootstrap replicates to estimate standard errors with, see ``note``).
    ``value``: the reported Lambda; ``plugin`` / ``thresholded``: both estimates (the
    latter None without replicates). ``c_n``: the threshold multiplier sqrt(log n) for
    n individuals. ``zero_gap[x, x']`` / ``zero_dp[x, x']``: pairs (x in s+, x' in s-)
    whose benefit gap Delta(x,s+) - Delta(x',s-) / policy gap pi(d1|x,s+) -
    pi(d1|x',s-) was set to 0; ``se_gap`` / ``se_dp``: their bootstrap standard errors
    (K, K); ``gap`` / ``dp``: the full-data gaps (K, K). ``contributions``: per-pair
    contributions to ``value``.
    """

    requested: str
    estimator: str
    value: float
    plugin: float
    thresholded: float | None
    n: int
    c_n: float | None
    pair: tuple[int, int]
    contributions: np.ndarray
    zero_gap: np.ndarray | None = None
    zero_dp: np.ndarray | None = None
    se_gap: np.ndarray | None = None
    se_dp: np.ndarray | None = None
    gap: np.ndarray | None = None
    dp: np.ndarray | None = None
    levels: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    note: str = ""

    def zeroed_pairs(self) -> Any:
        """The pairs whose gap was set to 0, one row each: the level in s+ and in s-,
        which gap ("benefit" or "policy"), its full-data estimate and bootstrap se."""
        import pandas as pd

        ga, gb = (self.groups[i] for i in self.pair) if self.groups else ("s+", "s-")
        cols = [f"level[{ga}]", f"level[{gb}]", "gap", "estimate", "se"]
        recs = []
        if self.zero_gap is not None:
            for kind, mask, est, se in (("benefit", self.zero_gap, self.gap, self.se_gap),
                                        ("policy", self.zero_dp, self.dp, self.se_dp)):
                for xa, xb in zip(*np.nonzero(mask), strict=True):
                    recs.append(dict(zip(cols, (self.levels[xa], self.levels[xb], kind,
                                                float(est[xa, xb]), float(se[xa, xb])), strict=True)))
        return pd.DataFrame(recs, columns=cols)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requested": self.requested,
            "estimator": self.estimator,
            "value": self.value,
            "plugin": self.plugin,
            "thresholded": self.thresholded,
            "n_individuals": self.n,
            "c_n": self.c_n,
            "rule": ("thresholded: a pair's gap is set to 0 where |gap| <= c_n * bootstrap se, "
                     "c_n = sqrt(log n), in the estimate and in every bootstrap replicate"),
        }
        if self.zero_gap is not None:
            out["zeroed_benefit_gaps"] = int(self.zero_gap.sum())
            out["zeroed_policy_gaps"] = int(self.zero_dp.sum())
            out["zeroed_pairs"] = self.zeroed_pairs().to_dict(orient="records")
        if self.note:
            out["note"] = self.note
        return out

    def summary(self) -> str:
        if self.estimator == "plugin":
            text = f"Lambda estimator: plug-in (Lambda = {self.plugin:.6f})"
            return text + (f"; {self.note}" if self.note else "")
        K = self.zero_gap.shape[0]
        return (f"Lambda estimator: thresholded (pre-test, c_n = sqrt(log {self.n}) = "
                f"{self.c_n:.3f}): benefit gap set to 0 at {int(self.zero_gap.sum())} and "
                f"policy gap at {int(self.zero_dp.sum())} of {K * K} pairs; "
                f"plug-in Lambda = {self.plugin:.6f}")


def _pair_gaps(p: np.ndarray, delta: np.ndarray, pair: tuple[int, int]):
    """(policy gap, benefit gap) per pair (x in a, x' in b): arrays (..., K, K)."""
    a, b = pair
    dp = p[..., a, :, None] - p[..., b, None, :]
    gap = delta[..., a, :, None] - delta[..., b, None, :]
    return dp, gap


def lambda_terms(dp: np.ndarray, gap: np.ndarray, w: np.ndarray, pair: tuple[int, int],
                  eps: float) -> np.ndarray:
    a, b = pair
    return eps * np.abs(dp) / (eps + np.abs(gap)) * w[..., a, :, None] * w[..., b, None, :]


def threshold_lambda(p: np.ndarray, delta: np.ndarray, w: np.ndarray, boot_p: np.ndarray,
                     boot_delta: np.ndarray, boot_w: np.ndarray, *, pair: tuple[int, int],
                     eps: float, c: float) -> dict[str, np.ndarray]:
    """The thresholded ("pre-test") Lambda and its bootstrap replicates.

    ``p``, ``delta``, ``w``: the full-data pi(d1 | x, s), Delta(x, s) and P(x | s), each
    (G, K); ``boot_*``: the same in each bootstrap replicate, (B, G, K), B >= 2.

    Lambda = sum eps |dp| / (eps + |gap|) w_a w_b contains |gap| and |dp| for every pair
    (x, x'), with gap = Delta(x,s+) - Delta(x',s-) and dp = pi(d1|x,s+) - pi(d1|x',s-).
    Where a true gap is exactly 0 (a group-symmetric environment: Delta(x,s+) =
    Delta(x,s-)), |gap_hat| is biased away from 0 by the order of its standard error,
    and the percentile bootstrap of |.| does not recover that bias (|.| is not
    differentiable at 0). The pre-test removes the kink: with se(gap) the bootstrap
    standard deviation of the pair's gap, the gap is set to exactly 0 where
    |gap_hat| <= c * se(gap) (c = sqrt(log n) in :func:`audit_logs`;
    :func:`causalfair.engines.benefit_mc.pretest`, the Monte Carlo engine's test), and
    every replicate runs the **same test on its own gaps** (the same cut c * se): the
    mask is part of the estimator (with the estimate's mask held in every replicate, a
    zeroed gap added nothing to the replicates' spread, and their standard deviation
    was a third of the estimate's spread over logs on lending-harder). dp is treated the
    same way; when pi is supplied (no sampling error) se(dp) = 0 and nothing is masked. A
    pair is masked only where its se is > 0.

    The plug-in's replicates are linear in the benefit gaps
    (:func:`causalfair.engines.benefit_mc.plugin_tangent`, the Monte Carlo engine's): in each
    term eps / (eps + |gap|) is replaced by its tangent at the estimate's |gap|, the
    replicate's gap taken with the estimate's sign; |dp| and the weights are the
    replicate's. A replicate's |gap| folds at 0 and spreads less than the estimate
    where the true gaps are small but not 0, so the plug-in's interval was too short on
    the low side (lending-harder, a stochastic logged policy, 20,000 individuals x 5
    steps: the normal hull covered 0.905 over 200 logs, now 0.995; docs/logs.md).

    Returns a dict: ``value`` (thresholded Lambda), ``plugin``, ``replicates`` (B,, the
    thresholded Lambda of each replicate), ``plugin_replicates`` (B,, the plug-in's
    tangent replicates), ``contributions`` (K, K), ``zero_gap``, ``zero_dp``,
    ``se_gap``, ``se_dp``, ``gap``, ``dp`` (K, K).
    """
    boot_p, boot_delta, boot_w = (np.asarray(v, dtype=np.float64) for v in (boot_p, boot_delta, boot_w))
    if boot_delta.ndim != 3 or boot_delta.shape[0] < 2:
        raise LogError("threshold_lambda: needs at least 2 bootstrap replicates (B, G, K).")
    dp, gap = _pair_gaps(np.asarray(p, dtype=np.float64), np.asarray(delta, dtype=np.float64), pair)
    bdp, bgap = _pair_gaps(boot_p, boot_delta, pair)
    # a quantity equal in every replicate (a supplied policy table) has se exactly 0
    # (np.std of equal values can round to ~1e-17)
    se_gap = np.where(np.ptp(bgap, axis=0) > 0, bgap.std(axis=0, ddof=1), 0.0)
    se_dp = np.where(np.ptp(bdp, axis=0) > 0, bdp.std(axis=0, ddof=1), 0.0)
    cut_gap, cut_dp = c * se_gap, c * se_dp
    zero_gap = pretest(np.abs(gap), cut_gap)
    zero_dp = pretest(np.abs(dp), cut_dp)
    w = np.asarray(w, dtype=np.float64)
    contrib = lambda_terms(np.where(zero_dp, 0.0, dp), np.where(zero_gap, 0.0, gap), w, pair, eps)
    # every replicate: its own pre-test against the same cuts
    reps = lambda_terms(np.where(pretest(np.abs(bdp), cut_dp), 0.0, bdp),
                        np.where(pretest(np.abs(bgap), cut_gap), 0.0, bgap), boot_w,
                        pair, eps).sum((-2, -1))
    # the plug-in's replicates: the tangent in the benefit gap (one column, no baseline's)
    plug = plugin_tangent(gap[..., None], np.abs(gap)[..., None], None, eps)
    a, b = pair
    tv, ww = np.abs(bdp), boot_w[:, a, :, None] * boot_w[:, b, None, :]
    return {
        "value": float(contrib.sum()),
        "plugin": float(lambda_terms(dp, gap, w, pair, eps).sum()),
        "replicates": reps,
        "plugin_replicates": np.array([plug(bgap[r][..., None], tv[r], ww[r])
                                       for r in range(bgap.shape[0])]),
        "contributions": contrib,
        "zero_gap": zero_gap,
        "zero_dp": zero_dp,
        "se_gap": se_gap,
        "se_dp": se_dp,
        "gap": gap,
        "dp": dp,
    }


def check_lambda_estimator(value: Any) -> str:
    if value not in LAMBDA_ESTIMATORS:
        raise LogError(f"lambda_estimator: unknown value {value!r}; allowed values: "
                       f"{', '.join(LAMBDA_ESTIMATORS)} (default thresholded).")
    return str(value)


def lambda_threshold_c(n: int) -> float:
    """c_n = sqrt(log n): grows without bound (so a true zero gap is zeroed with
    probability -> 1) but slower than sqrt(n) (so a fixed non-zero gap, whose |gap| / se
    grows like sqrt(n), is kept with probability -> 1)."""
    return float(np.sqrt(np.log(max(int(n), 2))))


def estimate_lambda(requested: str, boot: Any, arrays: tuple, point: tuple, *, n: int,
                     pair: tuple[int, int], eps: float, plugin_value: float,
                     plugin_contrib: np.ndarray, levels: tuple[str, ...],
                     groups: tuple[str, ...]) -> LambdaEstimate:
    """Apply the requested estimator; adds the Lambda[plugin] / Lambda[thresholded]
    columns to ``boot`` (in place) and sets its Lambda column to the estimator used."""
    common = dict(requested=requested, n=int(n), pair=pair, levels=levels, groups=groups)
    if boot is None or len(boot) < 2:
        note = ("" if requested == "plugin" else
                "thresholding needs bootstrap standard errors (n_boot >= 2); plug-in reported")
        return LambdaEstimate(estimator="plugin", value=plugin_value, plugin=plugin_value,
                              thresholded=None, c_n=None, contributions=plugin_contrib,
                              note=note, **common)
    c = lambda_threshold_c(n)
    res = threshold_lambda(*point, *arrays, pair=pair, eps=eps, c=c)
    # both estimators from the same arithmetic (threshold_lambda), so that they agree
    # bit for bit where nothing is masked
    boot["Lambda[plugin]"] = res["plugin_replicates"]
    boot["Lambda[thresholded]"] = res["replicates"]
    use_thr = requested == "thresholded"
    boot["Lambda"] = res["replicates"] if use_thr else res["plugin_replicates"]
    plug = lambda_terms(res["dp"], res["gap"], np.asarray(point[2], dtype=np.float64), pair, eps)
    return LambdaEstimate(
        estimator=requested, value=res["value"] if use_thr else res["plugin"],
        plugin=res["plugin"], thresholded=res["value"], c_n=c,
        contributions=res["contributions"] if use_thr else plug,
        zero_gap=res["zero_gap"], zero_dp=res["zero_dp"], se_gap=res["se_gap"],
        se_dp=res["se_dp"], gap=res["gap"], dp=res["dp"], **common)


def lambda_interval_of(columns: Sequence[tuple[float, Any]], alpha: float,
                       method: str = "percentile") -> tuple[float, float]:
    """The reported (1 - alpha) interval of Lambda from (estimate, bootstrap replicates)
    pairs, one per estimator whose interval is hulled (thresholded and plug-in, or the
    estimator used alone), clipped to [0, 1].

    ``"normal"``: :func:`causalfair.engines.benefit_mc.lambda_hull` (estimate +- z *
    bootstrap sd, each around its own estimate; the Monte Carlo engine's rule).
    ``"percentile"``: the hull of the replicates' alpha/2 and 1 - alpha/2 quantiles **and
    of the estimates themselves**. Lambda is a sum of eps |dp| / (eps + |gap|) terms; where
    a gap is near 0, every resampled |gap*| is pushed away from 0 while the estimate is
    not, so the replicates can sit entirely on one side of the estimate and the raw
    percentile interval can exclude it (e.g. nearly equal groups, small logs). Adding
    the estimates keeps the interval honest about where the estimate is; like
    ``lambda_hull`` it always contains every estimate it is given."""
    check_alpha(alpha)
    if method not in INTERVAL_METHODS:
        raise InputError(f"method: unknown value {method!r}; allowed values: "
                         f"{', '.join(INTERVAL_METHODS)}.")
    import pandas as pd

    cols = [(float(e), r if isinstance(r, pd.Series) else pd.Series(np.asarray(r, dtype=np.float64)))
            for e, r in columns]
    if any(len(r) < 2 for _, r in cols):
        raise LogError("logs: no bootstrap replicates (n_boot < 2); rerun with n_boot >= 2.")
    if method == "normal":  # the Monte Carlo engine's rule (one function for both)
        return lambda_hull([(e, float(r.std(ddof=1))) for e, r in cols], alpha)
    lo, hi = np.inf, -np.inf
    for e, r in cols:
        q = r.quantile([alpha / 2.0, 1.0 - alpha / 2.0])
        lo, hi = min(lo, float(q.iloc[0]), e), max(hi, float(q.iloc[1]), e)
    return max(0.0, lo), min(1.0, hi)

"""``audit_logs``: the decomposition and benefit fairness estimated from decision logs.

Pipeline: validate the log -> per-individual sufficient statistics -> fitted tabular
model (count-based or ordinal logit) -> positivity check -> the exact engine
(:func:`causalfair.engines.effects.decompose`, :func:`causalfair.engines.benefit.benefit_fairness`) on
the fitted model -> bootstrap over individuals (seeded, vectorised) -> Lambda by the
thresholded ("pre-test") estimator (see :func:`threshold_lambda`) -> optional dowhy
cross-check of Delta(x, s) with refuters.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._limits import check_memory, max_memory
from causalfair._validation import check_alpha, check_int, check_keywords
from causalfair.engines.benefit import (
    benefit_fairness,
    check_eps,
    lambda_pairs,
    model_eps,
    weights_and_policy,
)
from causalfair.engines.effects import check_horizon, decompose
from causalfair.engines.groups import resolve_pair
from causalfair.engines.selection import selection_rates
from causalfair.logs.dowhy_check import dowhy_check
from causalfair.logs.errors import MSG_FEATURE_POTENTIAL, MSG_NO_SCORE, LogError
from causalfair.logs.fit import (
    DEFAULT_ALPHA,
    LogStats,
    PositivityError,
    PositivityReport,
    check_positivity,
    fit_counts,
    fit_multinomial,
    fit_ordinal,
    log_stats,
    positivity_bounds,
)
from causalfair.logs.groups import compare_log_groups
from causalfair.logs.pretest import (
    LAMBDA_ESTIMATORS,
    LambdaEstimate,
    check_lambda_estimator,
    estimate_lambda,
    lambda_interval_of,
    threshold_lambda,
)
from causalfair.logs.schema import LogData, read_logs, validate_logs
from causalfair.policies.grid import policy_table
from causalfair.policies.resolver import resolve

__all__ = ["LogAudit", "LambdaEstimate", "audit_logs", "fit_logs", "bootstrap_logs",
           "threshold_lambda", "METHODS", "ON_POSITIVITY", "LAMBDA_ESTIMATORS"]

METHODS = ("counts", "ordinal", "multinomial")
ON_POSITIVITY = ("error", "bounds")
_HEADLINE = ("C", "DPE", "IPE", "SPE", "Lambda")




@dataclass(frozen=True, eq=False)
class LogAudit:
    """Result of :func:`audit_logs`.

    ``decomposition``: the :class:`~causalfair.results.Decomposition` of the fitted model
    (``engine="logs"``, ``se`` = bootstrap standard deviations), or None when positivity
    fails and bounds were asked for. ``benefit``: the
    :class:`~causalfair.results.BenefitResult` (or None likewise). ``bootstrap``: one row
    per replicate and one column per quantity (None without replicates). ``bounds``:
    DataFrame (lower, upper, identified) when positivity fails, else None.
    ``model``: the fitted TabularModel; ``policy_table``: pi(d1 | x, s) audited.
    ``lambda_estimate``: the :class:`LambdaEstimate` (which Lambda estimator was used,
    the plug-in value next to it, the zeroed pairs); None with bounds. The reported
    ``decomposition.Lambda``, ``benefit.Lambda`` / ``contributions`` and the
    ``bootstrap["Lambda"]`` column are those of the estimator used; the bootstrap also
    holds ``Lambda[plugin]`` and ``Lambda[thresholded]``. ``binning``: the
    :class:`~causalfair.logs.schema.StateBinning` for feature-state logs, else None.
    ``replicate_arrays``: pi(d1 | x, s), Delta(x, s) and P(x | s) of every bootstrap
    replicate, (B, G, K) each, aligned with the rows of ``bootstrap`` (the inputs of every
    pair's Lambda). ``reference``: the reference group asked for (None: the first);
    ``groups``: the :class:`~causalfair.engines.groups.GroupComparison` (every group
    against the reference, every pair, the worst pair; 95% intervals; see
    :meth:`compare_groups`) with more than two groups or a reference named, else None.
    ``group_sizes``: individuals per group; ``notes``: what the audit assumes that the log
    does not show (early leavers, levels that never appear, the default potential on
    feature bins; :meth:`LogData.notes <causalfair.logs.schema.LogData.notes>`).
    ``pair``: the group indices (a, b) that C, DPE, IPE, SPE and Lambda compare (a minus
    b), the point estimates' or the bounds' (:attr:`pair_name` as ``"A-B"``).
    """

    decomposition: Any
    benefit: Any
    model: Any
    policy_table: np.ndarray
    positivity: PositivityReport
    bootstrap: Any
    bounds: Any
    dowhy: Any
    n_individuals: int
    n_rows: int
    horizon: int
    log_horizon: int
    method: str
    alpha_smooth: float
    n_boot: int
    seed: int
    policy_source: str
    lambda_estimate: Any = None
    binning: Any = None
    replicate_arrays: Any = None
    reference: Any = None
    groups: Any = None
    selection: Any = None  # the log's selection rates (engines.selection.selection_rates)
    group_sizes: Any = None  # individuals per group (LogData.group_sizes)
    notes: tuple[str, ...] = ()  # what the audit assumes that the log does not show
    pair: Any = None  # (a, b): the groups C, its parts and Lambda compare, a minus b

    @property
    def pair_name(self) -> str | None:
        """The audited pair ``"A-B"`` (the decomposition's, or the bounds' when positivity
        fails: C, DPE, IPE, SPE and Lambda compare A minus B); None when unknown."""
        if self.pair is None:
            return None
        a, b = (self.model.group_names[i] for i in self.pair)
        return f"{a}-{b}"

    @property
    def identified(self) -> bool:
        return self.positivity.ok

    def estimates(self) -> dict[str, float]:
        """Point estimates: the Decomposition's quantities, Lambda and Delta[group,level]."""
        if self.decomposition is None:
            raise LogError(
                "logs: the effects are not identified (positivity); read .bounds instead."
            )
        out = dict(self.decomposition.estimates())
        out["Lambda"] = float(self.decomposition.Lambda)
        d = self.benefit.delta
        for i, g in enumerate(self.model.group_names):
            for x, lab in enumerate(self.model.level_labels):
                out[f"Delta[{g},{lab}]"] = float(d[i, x])
        return out

    def lambda_interval(self, alpha: float = 0.05, *, method: str = "percentile"
                        ) -> tuple[float, float]:
        """The reported (1 - alpha) interval for Lambda.

        With the thresholded estimator it is the hull (union) of the thresholded and the
        plug-in intervals: the thresholded interval misses when a small non-zero gap was
        set to 0 (small logs), the plug-in interval when a gap that is exactly 0 was not
        (large logs); the hull covers in both regimes (validation study: coverage 0.97 /
        0.94 / 0.96 at 1e3 / 1e4 / 1e5 individuals, against 0.75 / 0.93 / 0.95 and
        0.93 / 0.85 / 0.80 for either interval alone). With the plug-in estimator, or
        without replicates of both, the interval of the estimator used.
        ``method``: ``"percentile"`` (bootstrap quantiles, hulled with the estimates:
        the interval always contains the reported Lambda) or ``"normal"`` (estimate +- z *
        bootstrap se, each estimator around its own estimate), clipped at 0; both by
        :func:`~causalfair.logs.pretest.lambda_interval_of`."""
        boot = self.bootstrap
        if boot is None or len(boot) < 2 or self.lambda_estimate is None:
            raise LogError("logs: no bootstrap replicates (n_boot < 2); rerun with n_boot >= 2.")
        lam = self.lambda_estimate
        cols = {"Lambda": lam.value}
        if lam.estimator == "thresholded" and "Lambda[plugin]" in boot.columns:
            cols = {"Lambda[thresholded]": lam.thresholded, "Lambda[plugin]": lam.plugin}
        return lambda_interval_of([(est, boot[col]) for col, est in cols.items()], alpha, method)

    def compare_groups(self, alpha: float = 0.05, *, reference: Any = None,
                       selection: Mapping[str, Any] | None = None) -> Any:
        """Every group against ``reference`` (default: the audit's, else the first group)
        and every pair, with bootstrap intervals at level 1 - ``alpha`` from the audit's
        replicates (no refit): a :class:`~causalfair.engines.groups.GroupComparison`
        (:func:`causalfair.logs.groups.compare_log_groups`). ``selection``: the selection
        rates observed in the log, for ``ratio_selection``."""
        check_alpha(alpha)
        return compare_log_groups(
            self.decomposition, bootstrap=self.bootstrap, benefit=self.benefit,
            lambda_estimate=self.lambda_estimate, replicate_arrays=self.replicate_arrays,
            reference=self.reference if reference is None else reference, alpha=alpha,
            selection=self.selection if selection is None else selection)

    def conf_int(self, alpha: float = 0.05) -> Any:
        """(1 - alpha) bootstrap percentile intervals, DataFrame (lower, upper) per quantity
        (for Lambda see :meth:`lambda_interval`)."""
        import pandas as pd

        check_alpha(alpha)
        if self.bootstrap is None or len(self.bootstrap) == 0:
            raise LogError("logs: no bootstrap replicates (n_boot = 0); rerun with n_boot > 0.")
        q = self.bootstrap.quantile([alpha / 2.0, 1.0 - alpha / 2.0]).T
        q.columns = ["lower", "upper"]
        if "Lambda" in q.index and len(self.bootstrap) >= 2 and self.lambda_estimate is not None:
            q.loc["Lambda"] = list(self.lambda_interval(alpha))
        est = self.estimates()
        return pd.DataFrame(q).loc[[k for k in est if k in q.index]]

    def to_frame(self, alpha: float = 0.05) -> Any:
        """estimate, bootstrap se and percentile CI, one row per quantity."""
        import pandas as pd

        est = pd.Series(self.estimates(), name="estimate")
        df = est.to_frame()
        if self.bootstrap is not None and len(self.bootstrap):
            df["se"] = self.bootstrap.std(ddof=1).reindex(df.index)
            ci = self.conf_int(alpha)
            df["ci_lower"], df["ci_upper"] = ci["lower"], ci["upper"]
        df.index.name = "quantity"
        return df

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        """JSON-safe summary: source, positivity, decomposition (or bounds), CIs, dowhy."""
        out: dict[str, Any] = {
            "source": "logs",
            "method": self.method,
            "alpha_smooth": self.alpha_smooth,
            "n_individuals": self.n_individuals,
            "n_rows": self.n_rows,
            "horizon": self.horizon,
            "log_horizon": self.log_horizon,
            "policy_source": self.policy_source,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "identified": self.identified,
            "positivity": self.positivity.to_dict(),
        }
        if self.group_sizes is not None:
            out["group_sizes"] = dict(self.group_sizes)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.binning is not None:
            out["state_binning"] = self.binning.to_dict()
        if self.decomposition is not None:
            dec = self.decomposition.to_dict()
            out.update({k: dec[k] for k in ("C", "DPE", "IPE", "SPE", "Lambda")})
            out["decomposition"] = dec
            out["benefit"] = self.benefit.to_dict()
            if self.bootstrap is not None and len(self.bootstrap):
                ci = self.conf_int(alpha)
                out["ci"] = {
                    "alpha": alpha,
                    "method": "bootstrap percentile over individuals (Lambda: hull of the "
                              "thresholded and plug-in intervals, see lambda_interval)",
                    "intervals": {k: [float(r.lower), float(r.upper)] for k, r in ci.iterrows()},
                }
        if self.groups is not None:
            out.update(self.compare_groups(alpha).to_dict())
        if self.lambda_estimate is not None:
            out["lambda_estimator"] = self.lambda_estimate.to_dict()
            if self.bootstrap is not None and len(self.bootstrap):
                for k in ("Lambda[plugin]", "Lambda[thresholded]"):
                    if k in self.bootstrap.columns:
                        q = self.bootstrap[k].quantile([alpha / 2.0, 1.0 - alpha / 2.0])
                        out["lambda_estimator"][f"ci_{k[7:-1]}"] = [float(v) for v in q]
        if self.pair is not None:  # the groups C, its parts and Lambda (or their bounds) compare
            out["pair"] = [self.model.group_names[i] for i in self.pair]
        if self.bounds is not None:
            out["bounds"] = {
                k: {"lower": float(r.lower), "upper": float(r.upper),
                    "identified": bool(r.identified)}
                for k, r in self.bounds.iterrows()
            }
        if self.dowhy is not None:
            out["dowhy"] = self.dowhy.to_dict()
        return out

    def summary(self, alpha: float = 0.05) -> str:
        lines = [
            f"Audit from logs ({self.method} fit, Dirichlet smoothing {self.alpha_smooth:g}): "
            f"{self.n_individuals} individuals, {self.n_rows} decisions, "
            f"log horizon {self.log_horizon}, audit horizon T = {self.horizon}",
            f"  policy: {self.policy_source}",
            f"  {self.positivity.message()}",
        ]
        if self.group_sizes is not None:
            lines.append("  individuals per group: " + ", ".join(
                f"{g} {n}" for g, n in self.group_sizes.items()))
        if self.binning is not None:
            lines += ["  levels are joint bins of the state features (audit.binning.levels()):",
                      *(f"    {line}" for line in self.binning.describe())]
        elif tuple(self.model.level_labels) != tuple(map(str, range(self.model.n_levels))):
            lines.append(f"  levels: the log's 0..{self.model.n_levels - 1} are labelled "
                         f"{', '.join(self.model.level_labels)} below")
        lines += [f"  note: {note}" for note in self.notes]
        lines.append("")
        if self.decomposition is not None:
            df = self.to_frame(alpha)
            has_ci = "ci_lower" in df.columns
            for k in _HEADLINE:
                row = f"  {k:<6} = {df.loc[k, 'estimate']:+.6f}"
                if has_ci:
                    row += (f"   {100 * (1 - alpha):g}% percentile CI [{df.loc[k, 'ci_lower']:+.6f}, "
                            f"{df.loc[k, 'ci_upper']:+.6f}]  ({self.n_boot} bootstrap replicates)")
                lines.append(row)
            if self.lambda_estimate is not None:
                lines.append(f"  {self.lambda_estimate.summary()}")
            if self.groups is not None:
                lines += ["", *self._pairs_table(alpha)]
            lines += ["", "The decomposition below shows normal intervals, estimate +- z * bootstrap "
                      "standard error (the intervals audit verdicts use);",
                      "the percentile intervals above come from the same replicates.", "",
                      self._decomposition_at(alpha).summary(alpha)]
        else:
            a, b = (self.model.group_names[i] for i in self.pair)
            lines.append("  NOT IDENTIFIED: bounds over the unobserved kernel rows (C, DPE, "
                         f"IPE, SPE and Lambda of pair {self.pair_name}: {a} minus {b})")
            for k in _HEADLINE:
                r = self.bounds.loc[k]
                lines.append(f"  {k:<6} in [{r.lower:+.6f}, {r.upper:+.6f}]"
                             + ("  (identified)" if r.identified else ""))
        if self.dowhy is not None:
            lines += ["", self.dowhy.summary()]
        return "\n".join(lines)

    def _decomposition_at(self, alpha: float) -> Any:
        """The decomposition with its Lambda interval at level 1 - ``alpha``."""
        d = self.decomposition
        if d.Lambda_ci is None:
            return d
        return dataclasses.replace(d, Lambda_ci=self.lambda_interval(alpha, method="normal"),
                                   Lambda_ci_level=1.0 - alpha)

    def _pairs_table(self, alpha: float) -> list[str]:
        gc = self.compare_groups(alpha)
        lines = [f"Every pair (X-Y: X minus Y; reference group {gc.reference}; worst pair "
                 f"{gc.worst}; {100 * (1 - alpha):g}% normal intervals, estimate +- z * "
                 "bootstrap sd of the pair over the replicates):",
                 f"  {'pair':<14} {'C':>10} {'C lower':>10} {'C upper':>10} {'DPE':>10} "
                 f"{'IPE':>10} {'SPE':>10} {'Lambda':>9} {'ratio_V':>8}"]
        for row in gc.rows():
            p, c, lo, hi, dpe, ipe, spe, lam, rv = row[:9]
            lines.append(f"  {p:<14} {c:>+10.6f} {lo:>+10.6f} {hi:>+10.6f} {dpe:>+10.6f} "
                         f"{ipe:>+10.6f} {spe:>+10.6f} {_cell(lam, 9, '.6f')} "
                         f"{_cell(rv, 8, '.4f')}" + ("  worst" if row[-1] else ""))
        return lines

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        if self.decomposition is None:
            return f"LogAudit(identified=False, n_individuals={self.n_individuals})"
        d = self.decomposition
        return (f"LogAudit(C={d.C:.6g}, DPE={d.DPE:.6g}, IPE={d.IPE:.6g}, SPE={d.SPE:.6g}, "
                f"Lambda={d.Lambda:.6g}, n_individuals={self.n_individuals}, n_boot={self.n_boot})")

    def _repr_html_(self) -> str:
        """Jupyter's view: the :meth:`summary` (estimates, intervals, decomposition)."""
        import html

        return f"<pre>{html.escape(self.summary())}</pre>"


def _cell(v: float | None, width: int, fmt: str) -> str:
    return f"{'-':>{width}}" if v is None else f"{v:>{width}{fmt}}"


# ----------------------------------------------------------------------------- fitting
def _fit(stats: LogStats, vec: np.ndarray, *, method: str, alpha: float, potential: Any,
         groups: tuple[str, ...], start: Any = None, levels: tuple[str, ...] | None = None):
    kernel = None
    params = None
    if method in ("ordinal", "multinomial"):
        trans = stats.unpack(vec)["trans"]
        fit = fit_ordinal if method == "ordinal" else fit_multinomial
        kernel, params = fit(trans, start=start)
    model, p_log = fit_counts(stats, vec, alpha=alpha, potential=potential, groups=groups,
                              kernel=kernel, levels=levels)
    return model, p_log, params


def _log_selection(model: Any, data: LogData, T: int) -> dict[str, Any]:
    """The selection rates the log shows (per group, epoch and non-baseline decision, with
    the counts behind them; :func:`causalfair.engines.selection.selection_rates`). Epochs
    count from the log's first (0..T-1, as in a system's audit), whatever its ``t``."""
    import pandas as pd

    frame = pd.DataFrame({"group": np.asarray(data.groups, dtype=object)[data.g],
                          "t": data.t, "decision": data.d})
    return selection_rates(model, None, None, T, source="logs", logs=frame)


def _resolve_potential(potential: Any, data: LogData) -> Any:
    """An explicit potential for feature states: a callable gets the binning's levels
    frame; several features without a potential are refused (no meaningful default)."""
    b = data.binning
    if callable(potential):
        if b is None:
            raise LogError("potential: a callable potential needs feature states (state=[...]); "
                           "for a log with levels pass an array of K values.")
        return potential(b.levels())
    if potential is None and b is not None and len(b.columns) > 1:
        raise LogError(MSG_FEATURE_POTENTIAL.format(n=len(b.columns), k=b.n_levels))
    return potential


def _level_labels(data: LogData) -> tuple[str, ...] | None:
    return data.binning.labels() if data.binning is not None else None


def fit_logs(df: Any, *, method: str = "counts", alpha: float = DEFAULT_ALPHA,
             potential: Any = None, n_levels: int | None = None, groups: Any = None,
             state: Any = None, bins: Any = None, next_state: Any = None):
    """Validate ``df`` and fit the tabular model: returns (TabularModel, logged policy
    table pi(d1 | x, s) of shape (G, K), LogData). ``state`` / ``bins`` /
    ``next_state``: feature-vector states (see :func:`~causalfair.logs.schema.bin_states`)."""
    data = df if isinstance(df, LogData) else validate_logs(
        df, n_levels=n_levels, groups=groups, state=state, bins=bins, next_state=next_state)
    _check_options(method, alpha)
    stats = log_stats(data)
    model, p_log, _ = _fit(stats, stats.total(), method=method, alpha=alpha,
                           potential=_resolve_potential(potential, data), groups=data.groups,
                           levels=_level_labels(data))
    return model, p_log, data


def _check_options(method: str, alpha: float) -> None:
    if method not in METHODS:
        raise LogError(f"method: unknown value {method!r}; allowed values: {', '.join(METHODS)}.")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha >= 0:
        raise LogError(f"alpha_smooth: must be a number >= 0, got {alpha!r} (default {DEFAULT_ALPHA}).")


def _check_score(policy: Any, data: LogData) -> None:
    """``threshold:P`` / ``blind:P`` read p_repay(x, s) from the log's outcomes: refuse a
    log that has none for some group (its p_repay would be made up)."""
    if not isinstance(policy, str) or policy.partition(":")[0] not in ("threshold", "blind"):
        return
    if data.outcome is None:
        why = "the log has no 'outcome' column"
    else:
        seen = np.bincount(data.g[(data.d == 1) & ~np.isnan(data.outcome)],
                           minlength=data.n_groups) > 0
        if seen.all():
            return
        why = (f"group(s) {', '.join(repr(g) for g, s in zip(data.groups, seen, strict=True) if not s)} "
               "have no approved row with an outcome")
    raise LogError(MSG_NO_SCORE.format(policy=policy, why=why))


def _resolve_policy(policy: Any, model: Any, p_log: np.ndarray, horizon: int) -> tuple[np.ndarray, str]:
    if policy is None:
        return p_log, "estimated from the logs"
    if isinstance(policy, np.ndarray):
        p = np.asarray(policy, dtype=np.float64)
        if p.shape[-2:] != (model.n_groups, model.n_levels):
            raise LogError(f"policy: table has shape {p.shape}, the logs need "
                           f"({model.n_groups}, {model.n_levels}).")
        return p, "supplied table"
    res = resolve(policy, model)  # anything the resolver accepts, on the fitted model
    return np.asarray(policy_table(res.policy, model, horizon)), f"supplied: {res.label}"


def _replicate(model: Any, p: np.ndarray, horizon: int, eps: float, weights: str,
               pair: tuple[int, int] | None):
    """One replicate: the row of scalar quantities and the Lambda inputs (p_bar, Delta,
    P(x | s)), each (G, K)."""
    dec = decompose(model, p, horizon, eps=eps, weights=weights, pair=pair)
    row = dec.estimates()
    row["Lambda"] = float(dec.Lambda)
    d = model.benefit()
    for i, g in enumerate(model.group_names):
        for x, lab in enumerate(model.level_labels):
            row[f"Delta[{g},{lab}]"] = float(d[i, x])
    w, p_bar = weights_and_policy(model, np.asarray(p, dtype=np.float64), horizon, weights, None)
    return row, p_bar, d, w


def _bootstrap(stats: LogStats, *, n_boot: int, seed: int, horizon: int,
               policy: np.ndarray | None, method: str, alpha: float, potential: Any,
               groups: tuple[str, ...], eps: float, weights: str, chunk: int,
               start: Any, pair: tuple[int, int] | None,
               levels: tuple[str, ...] | None = None):
    """Replicate rows (DataFrame, plug-in Lambda) and the arrays (B, G, K) of p_bar,
    Delta and P(x | s) per replicate."""
    import pandas as pd

    n = stats.n_individuals
    rng = np.random.default_rng(seed)
    chunk = _boot_chunk(chunk, n, stats.matrix.shape[1])
    rows: list[dict] = []
    arrays: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    drawn, why = 0, ""
    while len(rows) < n_boot:
        if drawn >= _MAX_REDRAWS * n_boot:  # most resamples cannot be fitted: never loop on
            raise LogError(
                f"logs: only {len(rows)} of {drawn} bootstrap resamples of the individuals "
                f"could be fitted (the others: {why}); a group or level with very few "
                "individuals is left out of most resamples: merge or drop it, or audit "
                "without intervals (n_boot=0; CLI --boot 0).")
        b = min(chunk, n_boot - len(rows))
        drawn += b
        W = np.zeros((b, n))
        for k in range(b):  # row by row: the same draws as one (b, n) call, O(n) at a time
            W[k] = np.bincount(rng.integers(0, n, size=n), minlength=n)
        tot = stats.total(W)
        del W
        for k in range(b):
            try:
                model, p_log, _ = _fit(stats, tot[k], method=method, alpha=alpha,
                                       potential=potential, groups=groups, start=start,
                                       levels=levels)
            except LogError as exc:  # e.g. a resample without some group: drawn again
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                continue
            row, *arr = _replicate(model, p_log if policy is None else policy, horizon,
                                   eps, weights, pair)
            rows.append(row)
            arrays.append(tuple(arr))
    G, K = stats.n_groups, stats.n_levels
    stacked = tuple(np.stack([a[j] for a in arrays]) if arrays else np.zeros((0, G, K))
                    for j in range(3))
    return pd.DataFrame(rows), stacked




#: Resamples drawn per replicate kept, at most, before the bootstrap gives up (a
#: resample that cannot be fitted, e.g. one without some group, is drawn again).
_MAX_REDRAWS = 20


def _boot_chunk(chunk: int, n: int, cells: int) -> int:
    """Replicates weighted at once: at most ``chunk``, fewer when their weights (B, n) and
    sums (B, cells) would take over a quarter of the memory limit (the draws are made
    replicate by replicate, so the chunk does not change the numbers); one replicate's
    arrays over the limit are refused."""
    per = 8 * (2 * n + cells)  # one replicate: weights, its draws, its cell sums
    check_memory(per, f"logs: a bootstrap replicate of {n} individuals x {cells} cells",
                 "audit a sample of the individuals or bin the state into fewer levels")
    return max(1, min(int(chunk), max_memory() // 4 // per))


def bootstrap_logs(stats: LogStats, *, n_boot: int, seed: int, horizon: int,
                   policy: np.ndarray | None, method: str = "counts",
                   alpha: float = DEFAULT_ALPHA, potential: Any = None,
                   groups: tuple[str, ...], eps: float | str | None = None,
                   weights: str = "visitation",
                   chunk: int = 50, start: Any = None, pair: tuple[int, int] | None = None,
                   lambda_estimator: str = "thresholded",
                   levels: tuple[str, ...] | None = None) -> Any:
    """Bootstrap over individuals: ``n_boot`` replicates, one row each (DataFrame).

    Replicate b draws n individuals with replacement (``rng.integers``; counts by
    ``bincount``) and refits from the weighted per-individual statistics. ``policy``:
    a fixed table to audit, or None to re-estimate the logged policy in each replicate.
    A replicate in which some group has no individual is redrawn (never happens at
    realistic sizes). Seeded: same seed, same table.

    The ``Lambda`` column holds the replicates of the ``lambda_estimator``
    ("thresholded", the default, or "plugin"); with >= 2 replicates the columns
    ``Lambda[plugin]`` and ``Lambda[thresholded]`` hold both (the thresholding mask
    comes from the full-data fit, which this function computes; see
    :func:`threshold_lambda`).
    """
    requested = check_lambda_estimator(lambda_estimator)
    if eps is not None:
        check_eps(eps)
    model, p_log, params = _fit(stats, stats.total(), method=method, alpha=alpha,
                                potential=potential, groups=groups, start=start, levels=levels)
    eps = model_eps(eps, model)[0]  # one number for every replicate
    p = p_log if policy is None else np.asarray(policy, dtype=np.float64)
    if pair is None:
        pair = decompose(model, p, horizon, eps=eps, weights=weights).pair
    boot, arrays = _bootstrap(stats, n_boot=n_boot, seed=seed, horizon=horizon, policy=policy,
                              method=method, alpha=alpha, potential=potential, groups=groups,
                              eps=eps, weights=weights, chunk=chunk,
                              start=params if start is None else start, pair=pair,
                              levels=levels)
    w, p_bar = weights_and_policy(model, p, horizon, weights, None)
    delta = model.benefit()

    contrib = lambda_pairs(p_bar, delta, w, pair, eps)
    estimate_lambda(requested, boot, arrays, (p_bar, delta, w), n=stats.n_individuals,
                     pair=pair, eps=eps, plugin_value=float(contrib.sum()),
                     plugin_contrib=contrib, levels=tuple(model.level_labels),
                     groups=tuple(model.group_names))
    return boot


@check_keywords
def audit_logs(
    df: Any,
    *,
    horizon: int | None = None,
    n_boot: int = 200,
    seed: int = 0,
    policy: Any = None,
    potential: Any = None,
    on_positivity: str = "error",
    method: str = "counts",
    alpha_smooth: float = DEFAULT_ALPHA,
    eps: float | str | None = None,
    weights: str = "visitation",
    lambda_estimator: str = "thresholded",
    n_levels: int | None = None,
    groups: Any = None,
    state: Any = None,
    bins: Any = None,
    next_state: Any = None,
    dowhy: bool = False,
    dowhy_options: dict[str, Any] | None = None,
    reference: Any = None,
    pair: Any = None,
) -> LogAudit:
    """Estimate C, DPE, IPE, SPE, Delta and Lambda of the logged policy from decision logs.

    ``df``: a decision log (DataFrame, or a CSV / Parquet path; see
    :mod:`causalfair.logs.schema`). ``horizon``: T of the
    audit (default: the longest trajectory in the log). ``policy``: None to audit the
    logged policy pi(d | x, s) estimated from the logs; or a Policy, a table (G, K), a
    built-in spec (``"threshold:0.5"``) or a loaded checkpoint, evaluated on the fitted
    model (kept fixed across bootstrap replicates). ``potential``: f^s(x) (K,) or (G, K),
    default the lending potential for K levels; with feature states also a callable of
    the binning's levels frame (see :func:`~causalfair.logs.schema.linear_potential`).
    ``state`` / ``bins`` / ``next_state``: the state as numeric feature columns, binned
    into levels (see :func:`~causalfair.logs.schema.bin_states`). ``on_positivity``: ``"error"`` raises
    :class:`PositivityError` naming the cells; ``"bounds"`` returns bounds instead of
    point estimates (see :func:`causalfair.logs.fit.positivity_bounds`).
    ``lambda_estimator``: ``"thresholded"`` (default; pairs whose benefit or policy gap
    is within sqrt(log n) bootstrap standard errors of 0 get a gap of exactly 0, in the
    estimate and in every replicate, see :func:`threshold_lambda`; needs n_boot >= 2,
    else the plug-in is reported and the fallback recorded) or ``"plugin"``; the choice
    is in ``LogAudit.lambda_estimate``. ``dowhy``: add
    the dowhy cross-check of Delta(x, s) and the refuters (slow; options in
    ``dowhy_options``, see :func:`causalfair.logs.dowhy_check.dowhy_check`).
    ``eps``: Lambda's benefit resolution (a number in the gain's units, ``"auto"``, or
    None: 0.1 with the default lending potential, "auto" with a potential of your own;
    :func:`causalfair.engines.benefit.eps_for`), fixed from the full-data fit for every
    bootstrap replicate. ``reference``: the reference group of the per-pair comparison (a group name or index;
    default the first); with more than two groups, or a reference named, the result's
    ``groups`` holds every group against it and every pair (:meth:`LogAudit.compare_groups`).
    ``pair``: the two groups compared (names, indices or ``"A-B"``;
    :func:`causalfair.engines.groups.resolve_pair`), also by the bounds when positivity
    fails; None: the largest and smallest V^pi of the fitted model (the bounds too:
    :func:`~causalfair.logs.fit.positivity_bounds`). The result's ``pair`` names it.
    """
    _check_options(method, alpha_smooth)
    check_int("seed", seed, 0)
    requested = check_lambda_estimator(lambda_estimator)
    if eps is not None:
        check_eps(eps)
    if on_positivity not in ON_POSITIVITY:
        raise LogError(f"on_positivity: unknown value {on_positivity!r}; allowed values: "
                       f"{', '.join(ON_POSITIVITY)}.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise LogError(f"n_boot: must be an integer >= 0, got {n_boot!r}.")
    if isinstance(df, (str, os.PathLike)):
        df = read_logs(df)
    data = df if isinstance(df, LogData) else validate_logs(
        df, n_levels=n_levels, groups=groups, state=state, bins=bins, next_state=next_state)
    T = data.horizon if horizon is None else check_horizon(horizon)
    ab = resolve_pair(pair, data.groups, "pair")  # the estimate's and the bounds' pair
    _check_score(policy, data)
    notes = data.notes()
    if potential is None and data.binning is not None:
        notes += ("gain potential f: the lending default over the ordered bins (not the "
                  "feature's own units); give your own with potential= (CLI "
                  "--potential-weights, spec potential_weights).",)
    potential = _resolve_potential(potential, data)
    levels = _level_labels(data)
    stats = log_stats(data)
    total = stats.total()
    model, p_log, params = _fit(stats, total, method=method, alpha=alpha_smooth,
                                potential=potential, groups=data.groups, levels=levels)
    p, source = _resolve_policy(policy, model, p_log, T)
    # one number for the estimate and every replicate: given, declared by the fitted model
    # (the lending potential's 0.1) or "auto" from the full-data benefits
    eps, eps_source = model_eps(eps, model)
    u = stats.unpack(total)
    pos = check_positivity(u["trans"], u["init"], p, T, data.groups)
    common = dict(
        model=model, policy_table=p, positivity=pos, n_individuals=data.n_individuals,
        n_rows=data.n_rows, horizon=T, log_horizon=data.horizon, method=method,
        alpha_smooth=float(alpha_smooth), seed=int(seed), policy_source=source,
        binning=data.binning, selection=_log_selection(model, data, T),
        group_sizes=data.group_sizes(), notes=notes,
    )
    if not pos.ok:
        if on_positivity == "error":  # the group sizes show a group made by a typo
            raise PositivityError(f"{pos.message()} Individuals per group: " + ", ".join(
                f"{g!r} {n}" for g, n in data.group_sizes().items()) + ".")
        unknown = u["trans"].sum(-1) == 0
        bounds = positivity_bounds(model, p, unknown, T, eps=eps, weights=weights, pair=ab)
        return LogAudit(decomposition=None, benefit=None, bootstrap=None, bounds=bounds,
                        dowhy=None, n_boot=0, pair=bounds.attrs["pair"], **common)
    dec = decompose(model, p, T, eps=eps, weights=weights, policy_name=source,
                    pair=ab)
    ben = dataclasses.replace(benefit_fairness(model, p, T, eps=eps, weights=weights,
                                               pair=dec.pair), eps_source=eps_source)
    boot = arrays = None
    if n_boot > 0:
        boot, arrays = _bootstrap(stats, n_boot=int(n_boot), seed=seed, horizon=T,
                                  policy=None if policy is None else p, method=method,
                                  alpha=alpha_smooth, potential=potential, groups=data.groups,
                                  eps=eps, weights=weights, chunk=50, start=params,
                                  pair=dec.pair, levels=levels)
    lam = estimate_lambda(requested, boot, arrays, (ben.p_d1, ben.delta, ben.state_weights),
                           n=data.n_individuals, pair=dec.pair, eps=ben.eps,
                           plugin_value=ben.Lambda, plugin_contrib=ben.contributions,
                           levels=tuple(model.level_labels), groups=tuple(model.group_names))
    if lam.estimator != "plugin":
        ben = dataclasses.replace(ben, Lambda=lam.value, contributions=lam.contributions)
    dec = dataclasses.replace(dec, engine="logs", Lambda=lam.value)
    if boot is not None and len(boot) >= 2:  # one replicate has no standard deviation
        se = boot.std(ddof=1).to_dict()
        dec = dataclasses.replace(dec, se=se, seed=int(seed))
    check = None
    if dowhy:
        check = dowhy_check(data, model.potential, model=model, seed=seed, **(dowhy_options or {}))
    out = LogAudit(decomposition=dec, benefit=ben, bootstrap=boot, bounds=None, dowhy=check,
                   n_boot=int(n_boot), lambda_estimate=lam, replicate_arrays=arrays,
                   reference=reference, pair=tuple(dec.pair), **common)
    # the decomposition's Lambda interval is the log audit's (normal: the one verdicts use),
    # not the fitted model's exact engine's point [plug-in, plug-in]
    ci = out.lambda_interval(0.05, method="normal") if n_boot >= 2 else None
    out = dataclasses.replace(out, decomposition=dataclasses.replace(
        dec, Lambda_ci=ci, Lambda_ci_level=None if ci is None else 0.95))
    if len(dec.groups) > 2 or reference is not None:  # a bad reference is refused here
        out = dataclasses.replace(out, groups=out.compare_groups())
    return out

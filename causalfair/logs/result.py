"""The result of an audit from decision logs (:func:`causalfair.logs.audit.audit_logs`):
:class:`LogAudit`, with its point estimates, bootstrap intervals (Lambda's by the
thresholded estimator's rule), the per-pair comparison and its tables, dict and text."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._io import fixed
from causalfair._simultaneous import pair_alpha, simultaneous_dict
from causalfair._validation import check_alpha, check_keywords
from causalfair.logs.errors import LogError
from causalfair.logs.fit import PositivityReport
from causalfair.logs.groups import compare_log_groups
from causalfair.logs.pretest import lambda_interval_of

__all__ = ["LogAudit"]

_HEADLINE = ("C", "DPE", "IPE", "SPE", "Lambda")


@dataclass(frozen=True, eq=False)
class LogAudit:
    """Result of :func:`~causalfair.logs.audit.audit_logs`.

    ``decomposition``: the :class:`~causalfair.results.Decomposition` of the fitted model
    (``engine="logs"``, ``se`` = bootstrap standard deviations), or None when positivity
    fails and bounds were asked for. ``benefit``: the
    :class:`~causalfair.results.BenefitResult` (or None likewise). ``bootstrap``: one row
    per replicate and one column per quantity (None without replicates). ``bounds``:
    DataFrame (lower, upper, identified) when positivity fails, else None.
    ``model``: the fitted TabularModel; ``policy_table``: pi(d1 | x, s) audited.
    ``lambda_estimate``: the :class:`~causalfair.logs.pretest.LambdaEstimate` (which Lambda
    estimator was used, the plug-in value next to it, the zeroed pairs); None with bounds.
    The reported
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
    b), the point estimates' or the bounds' (:attr:`pair_name` as ``"A-B"``);
    ``pair_named``: whether ``pair=`` named it (else the default: with more than two groups
    the largest and smallest V^pi of the fitted model, so chosen from the data).
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
    pair_named: bool = False  # pair= was given (else the default pair, chosen from the data)

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

    @check_keywords(name="LogAudit.lambda_interval")
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
        bootstrap se, each estimator around its own estimate), clipped to [0, 1]; both by
        :func:`~causalfair.logs.pretest.lambda_interval_of`."""
        boot = self.bootstrap
        if boot is None or len(boot) < 2 or self.lambda_estimate is None:
            raise LogError("logs: no bootstrap replicates (n_boot < 2); rerun with n_boot >= 2.")
        lam = self.lambda_estimate
        cols = {"Lambda": lam.value}
        if lam.estimator == "thresholded" and "Lambda[plugin]" in boot.columns:
            cols = {"Lambda[thresholded]": lam.thresholded, "Lambda[plugin]": lam.plugin}
        return lambda_interval_of([(est, boot[col]) for col, est in cols.items()], alpha, method)

    @check_keywords(name="LogAudit.compare_groups")
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

    @property
    def _replicated(self) -> bool:
        """Whether there are bootstrap replicates to make intervals from: at least two (one
        replicate has no spread; its percentile "interval" is a point that can miss the
        estimate), as ``decompose --logs --boot`` and ``[logs] n_boot`` require."""
        return self.bootstrap is not None and len(self.bootstrap) >= 2

    @check_keywords(name="LogAudit.conf_int")
    def conf_int(self, alpha: float = 0.05) -> Any:
        """(1 - alpha) bootstrap percentile intervals, DataFrame (lower, upper) per quantity
        (for Lambda see :meth:`lambda_interval`). C, DPE, IPE and SPE of a pair chosen from
        the data (the decomposition's ``simultaneous`` m > 1): the percentiles alpha/(2m) and
        1 - alpha/(2m), simultaneous over the m pairs (:mod:`causalfair._simultaneous`)."""
        import pandas as pd

        check_alpha(alpha)
        if not self._replicated:  # one replicate's "interval" is a point that can miss
            raise LogError("logs: no bootstrap replicates to make an interval from (n_boot < 2); "
                           "rerun with n_boot >= 2.")
        q = self.bootstrap.quantile([alpha / 2.0, 1.0 - alpha / 2.0]).T
        q.columns = ["lower", "upper"]
        m = getattr(self.decomposition, "simultaneous", 1)
        if m > 1:
            keys = [k for k in _HEADLINE[:4] if k in q.index]
            qm = self.bootstrap[keys].quantile([pair_alpha(alpha, m) / 2.0,
                                                1.0 - pair_alpha(alpha, m) / 2.0]).T
            q.loc[keys, "lower"], q.loc[keys, "upper"] = qm.iloc[:, 0], qm.iloc[:, 1]
        if "Lambda" in q.index and len(self.bootstrap) >= 2 and self.lambda_estimate is not None:
            q.loc["Lambda"] = list(self.lambda_interval(alpha))
        est = self.estimates()
        return pd.DataFrame(q).loc[[k for k in est if k in q.index]]

    @check_keywords(name="LogAudit.to_frame")
    def to_frame(self, alpha: float = 0.05) -> Any:
        """estimate, bootstrap se and percentile CI, one row per quantity."""
        import pandas as pd

        est = pd.Series(self.estimates(), name="estimate")
        df = est.to_frame()
        if self._replicated:  # else estimates only, as with n_boot = 0
            df["se"] = self.bootstrap.std(ddof=1).reindex(df.index)
            ci = self.conf_int(alpha)
            df["ci_lower"], df["ci_upper"] = ci["lower"], ci["upper"]
        df.index.name = "quantity"
        return df

    @check_keywords(name="LogAudit.to_dict")
    def to_dict(self, alpha: float = 0.05, n_worst: int = 10) -> dict[str, Any]:
        """JSON-safe summary: source, positivity, decomposition (or bounds), CIs, dowhy;
        ``n_worst`` worst benefit pairs (``decompose --logs --json --worst N``, as from a
        system)."""
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
            out["benefit"] = self.benefit.to_dict(n_worst=n_worst)
            if self._replicated:
                ci = self.conf_int(alpha)
                out["ci"] = {
                    "alpha": alpha,
                    "method": "bootstrap percentile over individuals (Lambda: hull of the "
                              "thresholded and plug-in intervals, see lambda_interval)",
                    "intervals": {k: [float(r.lower), float(r.upper)] for k, r in ci.iterrows()},
                }
                m = self.decomposition.simultaneous  # C, DPE, IPE, SPE: over the pairs
                if m > 1:  # where decompose --json from a system says it too (top level)
                    out["ci"]["simultaneous"] = simultaneous_dict(m, alpha)
                    out["simultaneous"] = simultaneous_dict(m, alpha)
        if self.groups is not None:  # decompose's every-pair section, as from a system
            gc = self.compare_groups(alpha)
            out.update(gc.to_dict())
            out["pairs"] = gc.pairs_dict(self.pair, named=self.pair_named)
        if self.lambda_estimate is not None:
            out["lambda_estimator"] = self.lambda_estimate.to_dict()
            if self._replicated:
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

    @check_keywords(name="LogAudit.summary")
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
                row = f"  {k:<6} = {fixed(df.loc[k, 'estimate'], sign=True)}"
                if has_ci:
                    row += (f"   {100 * (1 - alpha):g}% percentile CI "
                            f"[{fixed(df.loc[k, 'ci_lower'], sign=True)}, "
                            f"{fixed(df.loc[k, 'ci_upper'], sign=True)}]  "
                            f"({self.n_boot} bootstrap replicates)")
                lines.append(row)
            if self.lambda_estimate is not None:
                lines.append(f"  {self.lambda_estimate.summary()}")
            dec = self._decomposition_at(alpha)
            note = dec.simultaneous_note(alpha)  # said once, under the table of every pair
            if self._replicated:  # else no interval
                lines += ["", "The decomposition below shows normal intervals, estimate +- z * "
                          "bootstrap standard error (the intervals audit verdicts use);",
                          "the percentile intervals above come from the same replicates."]
            lines += ["", "\n".join(x for x in dec.summary(alpha).split("\n")
                                    if not note or x.strip() != note)]
            if self.groups is not None:  # every pair, as decompose prints it from a system
                lines += ["", *self.compare_groups(alpha).table_lines(
                    self.pair, named=self.pair_named)]
            elif note:
                lines.append(f"  {note}")
        else:
            a, b = (self.model.group_names[i] for i in self.pair)
            lines.append("  NOT IDENTIFIED: bounds over the unobserved kernel rows (C, DPE, "
                         f"IPE, SPE and Lambda of pair {self.pair_name}: {a} minus {b})")
            for k in _HEADLINE:
                r = self.bounds.loc[k]
                lines.append(f"  {k:<6} in [{fixed(r.lower, sign=True)}, "
                             f"{fixed(r.upper, sign=True)}]"
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

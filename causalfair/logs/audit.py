"""``audit_logs``: the decomposition and benefit fairness estimated from decision logs.

Pipeline: validate the log -> per-individual sufficient statistics -> fitted tabular
model (count-based or ordinal logit) -> positivity check -> the exact engine
(:func:`causalfair.effects.decompose`, :func:`causalfair.benefit.benefit_fairness`) on
the fitted model -> bootstrap over individuals (seeded, vectorised) -> optional dowhy
cross-check of Delta(x, s) with refuters.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair.logs.fit import (
    DEFAULT_ALPHA,
    LogStats,
    PositivityError,
    PositivityReport,
    check_positivity,
    fit_counts,
    fit_ordinal,
    log_stats,
    positivity_bounds,
)
from causalfair.logs.schema import LogData, LogError, read_logs, validate_logs

__all__ = ["LogAudit", "audit_logs", "fit_logs", "bootstrap_logs", "METHODS", "ON_POSITIVITY"]

METHODS = ("counts", "ordinal")
ON_POSITIVITY = ("error", "bounds")
_HEADLINE = ("C", "DPE", "IPE", "SPE", "Lambda")


@dataclass(frozen=True, eq=False)
class LogAudit:
    """Result of :func:`audit_logs`.

    ``decomposition``: the :class:`~causalfair.effects.Decomposition` of the fitted model
    (``engine="logs"``, ``se`` = bootstrap standard deviations), or None when positivity
    fails and bounds were asked for. ``benefit``: the
    :class:`~causalfair.benefit.BenefitResult` (or None likewise). ``bootstrap``: one row
    per replicate and one column per quantity (None without replicates). ``bounds``:
    DataFrame (lower, upper, identified) when positivity fails, else None.
    ``model``: the fitted TabularModel; ``policy_table``: pi(d1 | x, s) audited.
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

    def conf_int(self, alpha: float = 0.05) -> Any:
        """(1 - alpha) bootstrap percentile intervals, DataFrame (lower, upper) per quantity."""
        import pandas as pd

        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha: must be in (0, 1), got {alpha!r}.")
        if self.bootstrap is None or len(self.bootstrap) == 0:
            raise LogError("logs: no bootstrap replicates (n_boot = 0); rerun with n_boot > 0.")
        q = self.bootstrap.quantile([alpha / 2.0, 1.0 - alpha / 2.0]).T
        q.columns = ["lower", "upper"]
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
        if self.decomposition is not None:
            dec = self.decomposition.to_dict()
            out.update({k: dec[k] for k in ("C", "DPE", "IPE", "SPE", "Lambda")})
            out["decomposition"] = dec
            out["benefit"] = self.benefit.to_dict()
            if self.bootstrap is not None and len(self.bootstrap):
                ci = self.conf_int(alpha)
                out["ci"] = {
                    "alpha": alpha,
                    "method": "bootstrap percentile over individuals",
                    "intervals": {k: [float(r.lower), float(r.upper)] for k, r in ci.iterrows()},
                }
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
            f"Audit from logs ({self.method} fit, alpha = {self.alpha_smooth:g}): "
            f"{self.n_individuals} individuals, {self.n_rows} decisions, "
            f"log horizon {self.log_horizon}, audit horizon T = {self.horizon}",
            f"  policy: {self.policy_source}",
            f"  {self.positivity.message()}",
            "",
        ]
        if self.decomposition is not None:
            df = self.to_frame(alpha)
            has_ci = "ci_lower" in df.columns
            for k in _HEADLINE:
                row = f"  {k:<6} = {df.loc[k, 'estimate']:+.6f}"
                if has_ci:
                    row += (f"   {100 * (1 - alpha):g}% CI [{df.loc[k, 'ci_lower']:+.6f}, "
                            f"{df.loc[k, 'ci_upper']:+.6f}]  ({self.n_boot} bootstrap replicates)")
                lines.append(row)
            lines += ["", self.decomposition.summary()]
        else:
            lines.append("  NOT IDENTIFIED: bounds over the unobserved kernel rows")
            for k in _HEADLINE:
                r = self.bounds.loc[k]
                lines.append(f"  {k:<6} in [{r.lower:+.6f}, {r.upper:+.6f}]"
                             + ("  (identified)" if r.identified else ""))
        if self.dowhy is not None:
            lines += ["", self.dowhy.summary()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        if self.decomposition is None:
            return f"LogAudit(identified=False, n_individuals={self.n_individuals})"
        d = self.decomposition
        return (f"LogAudit(C={d.C:.6g}, DPE={d.DPE:.6g}, IPE={d.IPE:.6g}, SPE={d.SPE:.6g}, "
                f"Lambda={d.Lambda:.6g}, n_individuals={self.n_individuals}, n_boot={self.n_boot})")


# ----------------------------------------------------------------------------- fitting
def _fit(stats: LogStats, vec: np.ndarray, *, method: str, alpha: float, potential: Any,
         groups: tuple[str, ...], start: np.ndarray | None = None):
    kernel = None
    params = None
    if method == "ordinal":
        trans = stats.unpack(vec)["trans"]
        kernel, params = fit_ordinal(trans, start=start)
    model, p_log = fit_counts(stats, vec, alpha=alpha, potential=potential, groups=groups,
                              kernel=kernel)
    return model, p_log, params


def fit_logs(df: Any, *, method: str = "counts", alpha: float = DEFAULT_ALPHA,
             potential: Any = None, n_levels: int | None = None, groups: Any = None):
    """Validate ``df`` and fit the tabular model: returns (TabularModel, logged policy
    table pi(d1 | x, s) of shape (G, K), LogData)."""
    data = df if isinstance(df, LogData) else validate_logs(df, n_levels=n_levels, groups=groups)
    _check_options(method, alpha)
    stats = log_stats(data)
    model, p_log, _ = _fit(stats, stats.total(), method=method, alpha=alpha,
                           potential=potential, groups=data.groups)
    return model, p_log, data


def _check_options(method: str, alpha: float) -> None:
    if method not in METHODS:
        raise LogError(f"method: unknown value {method!r}; allowed values: {', '.join(METHODS)}.")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha >= 0:
        raise LogError(f"alpha_smooth: must be a number >= 0, got {alpha!r} (default {DEFAULT_ALPHA}).")


def _resolve_policy(policy: Any, model: Any, p_log: np.ndarray, horizon: int) -> tuple[np.ndarray, str]:
    from causalfair.policy import parse_policy, policy_table

    if policy is None:
        return p_log, "estimated from the logs"
    if isinstance(policy, str):
        pol = parse_policy(policy, model)
        return np.asarray(policy_table(pol, model, horizon)), f"supplied: {policy}"
    if isinstance(policy, np.ndarray):
        p = np.asarray(policy, dtype=np.float64)
        if p.shape[-2:] != (model.n_groups, model.n_levels):
            raise LogError(f"policy: table has shape {p.shape}, the logs need "
                           f"({model.n_groups}, {model.n_levels}).")
        return p, "supplied table"
    name = getattr(policy, "name", type(policy).__name__)
    return np.asarray(policy_table(policy, model, horizon)), f"supplied: {name}"


def _replicate_row(model: Any, p: np.ndarray, horizon: int, eps: float, weights: str) -> dict:
    from causalfair.effects import decompose

    dec = decompose(model, p, horizon, eps=eps, weights=weights)
    row = dec.estimates()
    row["Lambda"] = float(dec.Lambda)
    d = model.benefit()
    for i, g in enumerate(model.group_names):
        for x, lab in enumerate(model.level_labels):
            row[f"Delta[{g},{lab}]"] = float(d[i, x])
    return row


def bootstrap_logs(stats: LogStats, *, n_boot: int, seed: int, horizon: int,
                   policy: np.ndarray | None, method: str = "counts",
                   alpha: float = DEFAULT_ALPHA, potential: Any = None,
                   groups: tuple[str, ...], eps: float = 0.1, weights: str = "visitation",
                   chunk: int = 50, start: np.ndarray | None = None) -> Any:
    """Bootstrap over individuals: ``n_boot`` replicates, one row each (DataFrame).

    Replicate b draws n individuals with replacement (``rng.integers``; counts by
    ``bincount``) and refits from the weighted per-individual statistics. ``policy``:
    a fixed table to audit, or None to re-estimate the logged policy in each replicate.
    A replicate in which some group has no individual is redrawn (never happens at
    realistic sizes). Seeded: same seed, same table.
    """
    import pandas as pd

    n = stats.n_individuals
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    while len(rows) < n_boot:
        b = min(chunk, n_boot - len(rows))
        idx = rng.integers(0, n, size=(b, n))
        W = np.zeros((b, n))
        for k in range(b):
            W[k] = np.bincount(idx[k], minlength=n)
        del idx
        tot = stats.total(W)
        for k in range(b):
            try:
                model, p_log, _ = _fit(stats, tot[k], method=method, alpha=alpha,
                                       potential=potential, groups=groups, start=start)
            except LogError:
                continue
            rows.append(_replicate_row(model, p_log if policy is None else policy, horizon,
                                       eps, weights))
    return pd.DataFrame(rows)


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
    eps: float = 0.1,
    weights: str = "visitation",
    n_levels: int | None = None,
    groups: Any = None,
    dowhy: bool = False,
    dowhy_options: dict[str, Any] | None = None,
) -> LogAudit:
    """Estimate C, DPE, IPE, SPE, Delta and Lambda of the logged policy from decision logs.

    ``df``: a decision log (DataFrame, or a CSV / Parquet path; see
    :mod:`causalfair.logs.schema`). ``horizon``: T of the
    audit (default: the longest trajectory in the log). ``policy``: None to audit the
    logged policy pi(d | x, s) estimated from the logs; or a Policy, a table (G, K), a
    built-in spec (``"threshold:0.5"``) or a loaded checkpoint, evaluated on the fitted
    model (kept fixed across bootstrap replicates). ``potential``: f^s(x) (K,) or (G, K),
    default the lending potential for K levels. ``on_positivity``: ``"error"`` raises
    :class:`PositivityError` naming the cells; ``"bounds"`` returns bounds instead of
    point estimates (see :func:`causalfair.logs.fit.positivity_bounds`). ``dowhy``: add
    the dowhy cross-check of Delta(x, s) and the refuters (slow; options in
    ``dowhy_options``, see :func:`causalfair.logs.dowhy_check.dowhy_check`).
    """
    from causalfair.benefit import benefit_fairness
    from causalfair.effects import check_horizon, decompose

    _check_options(method, alpha_smooth)
    if on_positivity not in ON_POSITIVITY:
        raise LogError(f"on_positivity: unknown value {on_positivity!r}; allowed values: "
                       f"{', '.join(ON_POSITIVITY)}.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise LogError(f"n_boot: must be an integer >= 0, got {n_boot!r}.")
    if isinstance(df, (str, os.PathLike)):
        df = read_logs(df)
    data = df if isinstance(df, LogData) else validate_logs(df, n_levels=n_levels, groups=groups)
    T = data.horizon if horizon is None else check_horizon(horizon)
    stats = log_stats(data)
    total = stats.total()
    model, p_log, params = _fit(stats, total, method=method, alpha=alpha_smooth,
                                potential=potential, groups=data.groups)
    p, source = _resolve_policy(policy, model, p_log, T)
    u = stats.unpack(total)
    pos = check_positivity(u["trans"], u["init"], p, T, data.groups)
    common = dict(
        model=model, policy_table=p, positivity=pos, n_individuals=data.n_individuals,
        n_rows=data.n_rows, horizon=T, log_horizon=data.horizon, method=method,
        alpha_smooth=float(alpha_smooth), seed=int(seed), policy_source=source,
    )
    if not pos.ok:
        if on_positivity == "error":
            raise PositivityError(pos.message())
        unknown = u["trans"].sum(-1) == 0
        bounds = positivity_bounds(model, p, unknown, T, eps=eps, weights=weights)
        return LogAudit(decomposition=None, benefit=None, bootstrap=None, bounds=bounds,
                        dowhy=None, n_boot=0, **common)
    dec = decompose(model, p, T, eps=eps, weights=weights, policy_name=source)
    ben = benefit_fairness(model, p, T, eps=eps, weights=weights)
    boot = None
    if n_boot > 0:
        boot = bootstrap_logs(stats, n_boot=int(n_boot), seed=seed, horizon=T,
                              policy=None if policy is None else p, method=method,
                              alpha=alpha_smooth, potential=potential, groups=data.groups,
                              eps=eps, weights=weights, start=params)
        se = boot.std(ddof=1).to_dict()
        dec = dataclasses.replace(dec, engine="logs", se=se, seed=int(seed))
    else:
        dec = dataclasses.replace(dec, engine="logs")
    check = None
    if dowhy:
        from causalfair.logs.dowhy_check import dowhy_check

        check = dowhy_check(data, model.potential, seed=seed, **(dowhy_options or {}))
    return LogAudit(decomposition=dec, benefit=ben, bootstrap=boot, bounds=None, dowhy=check,
                    n_boot=int(n_boot), **common)

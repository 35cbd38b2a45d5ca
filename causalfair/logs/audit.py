"""``audit_logs``: the decomposition and benefit fairness estimated from decision logs.

Pipeline: validate the log -> per-individual sufficient statistics -> fitted tabular
model (count-based or ordinal logit) -> positivity check -> the exact engine
(:func:`causalfair.engines.effects.decompose`, :func:`causalfair.engines.benefit.benefit_fairness`) on
the fitted model -> bootstrap over individuals (seeded, vectorised) -> Lambda by the
thresholded ("pre-test") estimator (see :func:`threshold_lambda`) -> optional dowhy
cross-check of Delta(x, s) with refuters. The fit and the bootstrap are
:mod:`causalfair.logs.bootstrap`; the result, :class:`~causalfair.logs.result.LogAudit`, is
:mod:`causalfair.logs.result`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from causalfair._simultaneous import pairs_chosen_from
from causalfair._validation import check_int, check_keywords
from causalfair.engines.benefit import benefit_fairness, check_eps, model_eps
from causalfair.engines.effects import check_horizon, decompose
from causalfair.engines.groups import resolve_pair
from causalfair.engines.selection import selection_rates
from causalfair.logs.bootstrap import (
    bootstrap_replicates,
    check_boot_memory,
    check_boot_work,
    fit_model,
)
from causalfair.logs.dowhy_check import dowhy_check
from causalfair.logs.errors import MSG_FEATURE_POTENTIAL, MSG_NO_SCORE, LogError
from causalfair.logs.fit import (
    DEFAULT_ALPHA,
    PositivityError,
    check_positivity,
    log_stats,
    positivity_bounds,
)
from causalfair.logs.pretest import (
    LAMBDA_ESTIMATORS,
    LambdaEstimate,
    check_lambda_estimator,
    estimate_lambda,
    threshold_lambda,
)
from causalfair.logs.result import LogAudit
from causalfair.logs.schema import LogData, check_decisions, read_logs, validate_logs
from causalfair.policies.grid import policy_table
from causalfair.policies.resolver import resolve

__all__ = ["LambdaEstimate", "audit_logs", "fit_logs", "threshold_lambda", "METHODS",
           "ON_POSITIVITY", "LAMBDA_ESTIMATORS"]

METHODS = ("counts", "ordinal", "multinomial")
ON_POSITIVITY = ("error", "bounds")


def _log_selection(model: Any, data: LogData, T: int) -> dict[str, Any]:
    """The selection rates the log shows (per group, epoch and non-baseline decision, with
    the counts behind them; :func:`causalfair.engines.selection.selection_rates`). Epochs
    count from the log's first (0..T-1, as in a system's audit), whatever its ``t``."""
    import pandas as pd

    frame = pd.DataFrame({"group": np.asarray(data.groups, dtype=object)[data.g],
                          "t": data.t, "decision": data.d})
    return selection_rates(model, None, None, T, source="logs", logs=frame)


def _selection(model: Any, data: LogData, T: int, table: np.ndarray | None) -> dict[str, Any]:
    """The logged policy's selection rates are the log's (:func:`_log_selection`); a
    candidate's are its own on the fitted model (source "exact": no counts), not the
    decisions the log shows, which another policy took."""
    if table is None:
        return _log_selection(model, data, T)
    return selection_rates(model, table, model.propagate(table, T), T, source="exact")


def _candidate_note(policy: Any, source: str, n_boot: int) -> tuple[str, ...]:
    """What a candidate's intervals include (docs/logs.md, "Auditing a candidate policy")."""
    if policy is None:
        return ()
    return (f"policy {source.removeprefix('supplied: ')}: a candidate audited on the model "
            "fitted from the log; its decision table is fixed from the full-log fit (a "
            "threshold reads the full log's p_repay) and kept in every bootstrap replicate, "
            "so the intervals"
            + (" carry the uncertainty of the fitted transitions, initial levels and "
               "rewards, not that of the scores the table was read from."
               if n_boot else " are not computed (n_boot = 0)."),)


@dataclasses.dataclass(frozen=True)
class FittedModelPolicy:
    """A candidate policy resolved on the model :func:`audit_logs` fits from the log (a
    checkpoint or a factory, checked against the fitted model's levels and groups):
    ``audit_logs(df, policy=FittedModelPolicy(resolve))`` calls ``resolve(model)`` once,
    on its own fit, and audits what it returns (anything ``policy=`` takes), so the log
    is fitted once (``causalfair decompose --logs --audit-policy``, a ``[logs]`` spec's
    ``[policy]``)."""

    resolve: Callable[[Any], Any]


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
             state: Any = None, bins: Any = None, next_state: Any = None,
             decisions: Any = None):
    """Validate ``df`` and fit the tabular model: returns (TabularModel, logged policy
    table pi(d1 | x, s) of shape (G, K), LogData). ``state`` / ``bins`` /
    ``next_state``: feature-vector states (see :func:`~causalfair.logs.schema.bin_states`);
    ``decisions``: as :func:`audit_logs`'s."""
    names = check_decisions(decisions)
    data = df if isinstance(df, LogData) else validate_logs(
        df, n_levels=n_levels, groups=groups, state=state, bins=bins, next_state=next_state,
        decisions=names)
    _check_options(method, alpha)
    stats = log_stats(data)
    model, p_log, _ = fit_model(stats, stats.total(), method=method, alpha=alpha,
                           potential=_resolve_potential(potential, data), groups=data.groups,
                           levels=_level_labels(data))
    if names is not None:
        model = model.with_(action_labels=names)
    return model, p_log, data


def _check_options(method: str, alpha: float) -> None:
    if method not in METHODS:
        raise LogError(f"method: unknown value {method!r}; allowed values: {', '.join(METHODS)}.")
    # finite: an infinite smoothing (inf, or 1e308 times K levels) makes every kernel row
    # inf / inf, refused later as a NaN kernel that names no option
    if (isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha >= 0
            or not math.isfinite(alpha * 1e4)):
        raise LogError(f"alpha_smooth: must be a finite number >= 0 (pseudo-transitions per "
                       f"cell), got {alpha!r} (default {DEFAULT_ALPHA}).")


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
        # checked as every exact door checks a table (values, epochs: a longer one cut to T)
        return np.asarray(policy_table(p, model, horizon)), "supplied table"
    res = resolve(policy, model)  # anything the resolver accepts, on the fitted model
    return np.asarray(policy_table(res.policy, model, horizon)), f"supplied: {res.label}"


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
    decisions: Any = None,
) -> LogAudit:
    """Estimate C, DPE, IPE, SPE, Delta and Lambda of the logged policy from decision logs.

    ``df``: a decision log (DataFrame, or a CSV / Parquet path; see
    :mod:`causalfair.logs.schema`). ``horizon``: T of the
    audit (default: the longest trajectory in the log). ``policy``: None to audit the
    logged policy pi(d | x, s) estimated from the logs; or a Policy, a table (G, K), a
    built-in spec (``"threshold:0.5"``) or a loaded checkpoint, or a
    :class:`FittedModelPolicy` (resolved on the fitted model), evaluated on the fitted
    model (its table read from the full-log fit and kept fixed across bootstrap
    replicates, which refit the model: the intervals carry the fit's uncertainty, not that
    of the scores a threshold reads; its selection rates are its own on the fitted model,
    and ``notes`` says so). ``potential``: f^s(x) (K,) or (G, K) (CLI ``--potential``,
    spec ``[logs] potential``),
    default the lending potential for K levels; with feature states also a callable of
    the binning's levels frame (see :func:`~causalfair.logs.schema.linear_potential`).
    ``state`` / ``bins`` / ``next_state``: the state as numeric feature columns, binned
    into levels (see :func:`~causalfair.logs.schema.bin_states`). ``on_positivity``: ``"error"`` raises
    :class:`PositivityError` naming the cells; ``"bounds"`` returns bounds instead of
    point estimates (see :func:`causalfair.logs.fit.positivity_bounds`).
    ``lambda_estimator``: ``"thresholded"`` (default; pairs whose benefit or policy gap
    is within sqrt(log n) bootstrap standard errors of 0 get a gap of exactly 0, in the
    estimate and, by the same test on its own gaps, in every replicate, see
    :func:`threshold_lambda`; needs n_boot >= 2,
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
    ``decisions``: the log's names of decision 0 (the baseline) and decision 1 (e.g.
    ``["waitlist", "place"]``): the fitted model's action labels, so results and reports
    use them; a 'decision' column of these words is read as 0 and 1.
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
    names = check_decisions(decisions)
    data = df if isinstance(df, LogData) else validate_logs(
        df, n_levels=n_levels, groups=groups, state=state, bins=bins, next_state=next_state,
        decisions=names)
    check_boot_memory(n_boot, data.n_groups, data.n_levels)  # before the fit and the run
    T = data.horizon if horizon is None else check_horizon(horizon)
    check_boot_work(n_boot, data.n_individuals, T)
    ab = resolve_pair(pair, data.groups, "pair")  # the estimate's and the bounds' pair
    on_fit = policy if isinstance(policy, FittedModelPolicy) else None
    if on_fit is None:
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
    model, p_log, params = fit_model(stats, total, method=method, alpha=alpha_smooth,
                                potential=potential, groups=data.groups, levels=levels)
    if names is not None:
        model = model.with_(action_labels=names)
    if on_fit is not None:  # a candidate resolved on this fit (the log is fitted once)
        policy = on_fit.resolve(model)
        _check_score(policy, data)
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
        pair_named=ab is not None,
        binning=data.binning, selection=_selection(model, data, T, None if policy is None else p),
        group_sizes=data.group_sizes(), notes=notes + _candidate_note(policy, source, n_boot),
    )
    if not pos.ok:
        if on_positivity == "error":  # the group sizes show a group made by a typo
            sizes = list(data.group_sizes().items())  # the first 20 (a log may hold 10^6)
            raise PositivityError(f"{pos.message()} Individuals per group: " + ", ".join(
                f"{g!r} {n}" for g, n in sizes[:20])
                + (f" and {len(sizes) - 20} more groups" if len(sizes) > 20 else "") + ".")
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
        boot, arrays = bootstrap_replicates(stats, n_boot=int(n_boot), seed=seed, horizon=T,
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
    dec = dataclasses.replace(dec, engine="logs", Lambda=lam.value,  # m > 1: chosen from the data
                              simultaneous=pairs_chosen_from(len(dec.groups), ab is not None))
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
    # and the benefit result's (its ci, se, Lambda_ci, to_frame): estimated, not exact
    lam_se = None if ci is None else (dec.se or {}).get("Lambda")
    out = dataclasses.replace(out, decomposition=dataclasses.replace(
        dec, Lambda_ci=ci, Lambda_ci_level=None if ci is None else 0.95),
        benefit=ben if ci is None else dataclasses.replace(
            ben, ci=ci, ci_level=0.95, se=None if lam_se is None else float(lam_se)))
    if len(dec.groups) > 2 or reference is not None:  # a bad reference is refused here
        out = dataclasses.replace(out, groups=out.compare_groups())
    return out

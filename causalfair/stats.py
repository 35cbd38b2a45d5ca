"""Judging a claim "method M is better than each competitor on quantity Q" over training seeds.

Pure Python (no numpy or scipy): the t distribution comes from the regularized incomplete
beta function (continued fraction, Press et al., *Numerical Recipes*, 3rd ed., section 6.4).

- :func:`welch`: Welch's two-sample t-test (unequal variances; Welch 1947, Satterthwaite
  degrees of freedom): the difference of means ``mean(a) - mean(b)``, its two-sided p-value,
  its 1 - alpha Welch t-interval, and Hedges' g (the difference over the pooled standard
  deviation, times the small-sample correction 1 - 3 / (4 (n_a + n_b) - 9); Hedges 1981).
- :func:`holm`: Holm's step-down adjustment of a family of p-values (Holm 1979): it keeps the
  chance of any false rejection in the family at most alpha.
- :func:`collapse_floor`: the utility below which a policy counts as collapsed.
- :func:`judge`: the verdict on one claim, one of :data:`VERDICTS`.

The rule of :func:`judge` (the method M, its competitors X, per-seed values of Q, the
direction "lower is better" or "higher is better"):

1. *Collapse* (fairness claims only, ``fairness=True``): a policy whose mean utility is below
   ``utility_floor`` is collapsed. Collapsed competitors are reported and left out of the
   comparison (a fairness gain bought by giving up the decision's purpose is not a win, and a
   collapsed competitor's fairness does not refute the claim either). The scripts use
   :func:`collapse_floor`: the better of the uniform and the baseline (no-action) policy's
   utility, plus a quarter of the gain the best compared policy makes over it (a policy
   that keeps less than a quarter of the attainable gain has given up the decision's purpose:
   on lending-1 PPO-Cb at beta_Lambda = 2 keeps 0.18 of PPO's 4.28 over the no-loan policy).
2. *Same actions*: competitor X takes the same actions as M when the caller's action-agreement
   measure ``action_gap[X]`` (for example max |pi_M - pi_X| over the audited states) is at
   most ``tol``, or when the per-seed values of M and X are identical. Such a pair is not
   tested.
3. The other counted competitors are each compared with M by a two-sided Welch test; the
   p-values are Holm-adjusted across them; a comparison is significant when its adjusted
   p-value is at most alpha, and its sign says which policy is better.

Verdict, first match:

- ``refuted``: some counted competitor is significantly better than M;
- ``inconclusive``: M is collapsed, or every competitor is (nothing to compare with);
- ``indistinguishable``: some counted competitor takes the same actions as M;
- ``supported``: M is significantly better than every counted competitor;
- ``inconclusive``: otherwise (not enough evidence either way at this number of seeds).

The reported ``effect`` is mean(M) - mean(X) in Q's units for the deciding competitor X: the
significantly better one with the smallest adjusted p (refuted), the same-action one
(indistinguishable), otherwise the one with the largest adjusted p (the weakest win, or the
comparison that blocks support); ``ci`` is its (unadjusted) 1 - alpha Welch interval and
``p_value`` its Holm-adjusted p-value. Every comparison is kept in ``comparisons``, and every
verdict carries each policy's mean utility.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from causalfair._validation import check_alpha
from causalfair.errors import InputError

SUPPORTED, REFUTED, INCONCLUSIVE, INDISTINGUISHABLE = (
    "supported", "refuted", "inconclusive", "indistinguishable")
VERDICTS = (SUPPORTED, REFUTED, INCONCLUSIVE, INDISTINGUISHABLE)
#: fraction of the best compared policy's utility gain over the reference (uniform or
#: baseline) policy that a policy must keep not to count as collapsed
COLLAPSE_FRACTION = 0.25


# ---------------------------------------------------------------- the t distribution
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
           + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(q: float, df: float) -> float:
    """The q-quantile of Student's t (0.5 <= q < 1), by bisection on :func:`t_two_sided_p`."""
    target = 2.0 * (1.0 - q)  # two-sided tail mass at the quantile
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > target:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_two_sided_p(mid, df) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


# ---------------------------------------------------------------- Welch and Holm
@dataclass(frozen=True)
class Welch:
    """Welch's two-sample test of mean(a) = mean(b) (module docstring)."""

    diff: float
    """mean(a) - mean(b)."""
    t: float
    df: float
    p: float
    """Two-sided p-value."""
    ci: tuple[float, float]
    """1 - alpha Welch t-interval of ``diff``."""
    hedges_g: float
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float


def _clean(values: Sequence[float], field_name: str) -> list[float]:
    out = [float(v) for v in values if not math.isnan(float(v))]
    if len(out) < 2:
        raise InputError(f"{field_name}: needs at least 2 non-NaN values per policy for a Welch "
                         f"test, got {len(out)}; run more seeds.")
    return out


def _mean_var(x: list[float]) -> tuple[float, float]:
    """Mean and sample variance; equal values: the value and 0 exactly (fsum / n can be
    off by an ulp, which would make two constant samples "differ")."""
    if min(x) == max(x):
        return x[0], 0.0
    m = math.fsum(x) / len(x)
    return m, math.fsum((v - m) ** 2 for v in x) / (len(x) - 1)


def welch(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> Welch:
    """Welch's t-test of ``a`` against ``b`` (NaNs dropped; at least 2 values each)."""
    check_alpha(alpha)
    xa, xb = _clean(a, "welch a"), _clean(b, "welch b")
    na, nb = len(xa), len(xb)
    ma, va = _mean_var(xa)
    mb, vb = _mean_var(xb)
    diff = ma - mb
    se2 = va / na + vb / nb
    sp2 = ((na - 1) * va + (nb - 1) * vb) / (na + nb - 2)
    j = 1.0 - 3.0 / (4.0 * (na + nb) - 9.0)
    if se2 == 0.0:  # both samples constant: the difference is exact
        t = 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
        return Welch(diff, t, float(na + nb - 2), 1.0 if diff == 0.0 else 0.0, (diff, diff),
                     0.0 if diff == 0.0 else math.copysign(math.inf, diff), na, nb, ma, mb)
    df = se2 ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    se = math.sqrt(se2)
    t = diff / se
    h = t_quantile(1.0 - alpha / 2.0, df) * se
    return Welch(diff, t, df, t_two_sided_p(t, df), (diff - h, diff + h),
                 j * diff / math.sqrt(sp2), na, nb, ma, mb)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input's order (reject H_i at level alpha when the
    adjusted p_i <= alpha)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def collapse_floor(reference: float, best: float, fraction: float = COLLAPSE_FRACTION) -> float:
    """The utility below which a policy is collapsed: ``reference`` (the better of the uniform
    and the baseline policy's utility) plus ``fraction`` of the gain the best compared policy
    makes over it (just ``reference`` when no policy beats it)."""
    return reference + fraction * max(0.0, best - reference)


# ---------------------------------------------------------------- the verdict
@dataclass
class Verdict:
    """One claim's verdict (module docstring for the rule)."""

    claim: str
    method: str
    metric: str
    lower_is_better: bool
    verdict: str
    reason: str
    n_seeds: int
    versus: str | None = None
    effect: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    hedges_g: float | None = None
    utility: dict[str, float] = field(default_factory=dict)
    utility_floor: float | None = None
    collapsed: list[str] = field(default_factory=list)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    alpha: float = 0.05

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN and infinities as None)."""
        def fix(v: Any) -> Any:
            if isinstance(v, float):
                return v if math.isfinite(v) else None
            if isinstance(v, dict):
                return {k: fix(x) for k, x in v.items()}
            if isinstance(v, list | tuple):
                return [fix(x) for x in v]
            return v
        return fix(asdict(self))


def _mean(x: Sequence[float]) -> float:
    vals = [float(v) for v in x if not math.isnan(float(v))]
    return math.fsum(vals) / len(vals) if vals else math.nan


def judge(values: Mapping[str, Sequence[float]], method: str, *, lower: bool,
          utility: Mapping[str, Sequence[float]], claim: str = "", metric: str = "",
          fairness: bool = False, utility_floor: float | None = None,
          action_gap: Mapping[str, float] | None = None, tol: float = 1e-2,
          alpha: float = 0.05) -> Verdict:
    """The verdict on "``method`` is better than every other policy in ``values`` on
    ``metric``" (lower is better when ``lower``), from per-seed values (module docstring)."""
    if method not in values:
        raise InputError(f"method: {method!r} has no values; have {sorted(values)}.")
    others = [k for k in values if k != method]
    if not others:
        raise InputError(f"values: only {method!r}; a claim needs at least one competitor.")
    missing = [k for k in values if k not in utility]
    if missing:
        raise InputError(f"utility: no utility for {missing}; every verdict carries the "
                         "utility of each policy it compares.")
    util = {k: _mean(utility[k]) for k in values}
    collapsed = ([k for k in values if util[k] < utility_floor]
                 if fairness and utility_floor is not None else [])
    counted = [k for k in others if k not in collapsed]
    sign = 1.0 if lower else -1.0  # sign * diff < 0: the method is better
    comps: list[dict[str, Any]] = []
    for k in others:
        w = welch(values[method], values[k], alpha)
        gap = None if action_gap is None else action_gap.get(k)
        same = (gap is not None and gap <= tol) or (
            [float(v) for v in values[method]] == [float(v) for v in values[k]])
        comps.append({"versus": k, "mean": w.mean_b, "effect": w.diff, "ci": list(w.ci),
                      "t": w.t, "df": w.df, "p": w.p, "p_holm": None, "hedges_g": w.hedges_g,
                      "action_gap": gap, "same_actions": same, "collapsed": k in collapsed,
                      "better": ("method" if sign * w.diff < 0 else
                                 "competitor" if sign * w.diff > 0 else "neither")})
    tested = [c for c in comps if c["versus"] in counted and not c["same_actions"]]
    for c, p in zip(tested, holm([c["p"] for c in tested]), strict=True):
        c["p_holm"] = p
    n = min(len([v for v in values[k] if not math.isnan(float(v))]) for k in values)
    out = Verdict(claim=claim, method=method, metric=metric, lower_is_better=lower,
                  verdict=INCONCLUSIVE, reason="", n_seeds=n, utility=util,
                  utility_floor=utility_floor if fairness else None, collapsed=collapsed,
                  comparisons=comps, alpha=alpha)
    worse = [c for c in tested if c["p_holm"] <= alpha and c["better"] == "competitor"]
    same = [c for c in comps if c["versus"] in counted and c["same_actions"]]
    if worse:
        pick = min(worse, key=lambda c: c["p_holm"])
        out.verdict, out.reason = REFUTED, f"{pick['versus']} is significantly better"
    elif method in collapsed:
        pick = max(tested, key=lambda c: c["p_holm"]) if tested else None
        out.reason = (f"{method} is collapsed (utility {util[method]:.4g} < floor "
                      f"{utility_floor:.4g}): its {metric or 'fairness'} is not counted")
    elif not counted:
        pick = None
        out.reason = "every competitor is collapsed: nothing to compare with"
    elif same:
        pick = same[0]
        out.verdict = INDISTINGUISHABLE
        out.reason = f"{pick['versus']} takes the same actions as {method}"
    else:
        pick = max(tested, key=lambda c: c["p_holm"])
        if all(c["p_holm"] <= alpha and c["better"] == "method" for c in tested):
            out.verdict = SUPPORTED
            out.reason = f"significantly better than each of {len(tested)} (Holm, alpha {alpha:g})"
        else:
            out.reason = (f"not significantly better than {pick['versus']} "
                          f"(Holm-adjusted p {pick['p_holm']:.3g})")
    if pick is not None:
        out.versus, out.effect, out.ci = pick["versus"], pick["effect"], tuple(pick["ci"])
        out.p_value = pick["p_holm"] if pick["p_holm"] is not None else pick["p"]
        out.hedges_g = pick["hedges_g"]
    return out


def _g(v: Any, digits: int = 4) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}g}"


def verdict_table(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown lines: one row per claim entry (a :meth:`Verdict.to_dict` with ``claim``,
    ``seed_paper``, ``system`` and ``where``; or a ``"not tested"`` entry with ``reason``):
    the claim as quoted, the verdict, the deciding comparison and every policy's utility."""
    out = ["| seed | setup | claim (as the paper states it) | verdict | effect [95% CI], "
           "Holm p, vs | utility (mean) |", "|---|---|---|---|---|---|"]
    for e in entries:
        head = f"| {e['seed_paper']} | {e['system']} | \"{e['claim']}\" ({e['where']}) |"
        if e["verdict"] not in VERDICTS:
            out.append(f"{head} {e['verdict']} | {e.get('reason', '')} | |")
            continue
        ci = e.get("ci") or [None, None]
        num = (f"{e['metric']}: {_g(e.get('effect'))} [{_g(ci[0])}, {_g(ci[1])}], "
               f"p {_g(e.get('p_value'), 2)}, vs {e.get('versus')}; {e['reason']}")
        coll = f" (collapsed: {', '.join(e['collapsed'])})" if e.get("collapsed") else ""
        util = ", ".join(f"{k} {_g(u)}" for k, u in e["utility"].items()) + coll
        out.append(f"{head} **{e['verdict']}** | {num} | {util} |")
    return out

"""The utility-fairness frontier: the best utility a tabular system allows at each bound
on |C| (or |DPE|, |DP|), from the occupancy-measure LP of :mod:`causalfair.engines.occupancy`.

:func:`frontier` sweeps eps (the constraint matrix is built once per model; only the
bounds change) and :meth:`Frontier.place` measures how far any audited policy is from the
frontier. The LP's names (:func:`fair_lp`, :class:`OccupancyLP`, :class:`LPResult`,
:func:`policy_metrics`, :class:`InfeasibleError`) are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair._io import atomic_write_bytes, fixed
from causalfair._limits import check_memory
from causalfair._validation import check_flag
from causalfair.engines.benefit import check_eps, model_eps
from causalfair.engines.occupancy import (
    CONSTRAINTS,
    FEASIBILITY_TOL,
    METRIC_LABEL,
    InfeasibleError,
    LPResult,
    OccupancyLP,
    check_eps_value,
    fair_lp,
    policy_metrics,
)
from causalfair.errors import ResourceLimitError, short
from causalfair.model import ModelError, TabularModel

__all__ = ["CONSTRAINTS", "Frontier", "InfeasibleError", "LPResult", "OccupancyLP", "fair_lp",
           "frontier", "policy_metrics", "check_points", "MAX_POINTS", "MAX_LP_WORK", "lp_work"]

#: The most eps values a frontier's grid holds (fixed): each is a linear program solved
#: and audited, about 12 ms at horizon 20 on lending-1, so 10,000 take minutes.
MAX_POINTS = 10_000

#: The most LP work a frontier may ask for (fixed), in units of n x nnz (the program's
#: variables times its constraint matrix's nonzeros, :func:`lp_work`) summed over its
#: solves: HiGHS took 8-50 ns a unit on one core (lending-1 at T = 20: 2e6 units, 55 ms;
#: T = 100: 5e7, 0.39 s; a dense 50-level model at T = 20: 8.5e8, 24 s), so this is
#: about an hour of one core at most.
MAX_LP_WORK = 1.2e11

#: Solves of a frontier besides its grid: the unconstrained optimum, the least unfair of
#: the optimal policies (a second LP), its audited solve and the smallest |constraint|.
EXTRA_SOLVES = 4


def lp_work(model: TabularModel, horizon: int) -> float:
    """The work of one occupancy LP of ``model`` over ``horizon`` epochs, n x nnz: its
    n = 2 T G K variables times the nonzeros of its flow rows (n, and the kernel's
    nonzeros at every epoch but the first) and of one bound's rows (8 T K a pair of
    groups); HiGHS's time grows about as this (docs/limits.md)."""
    T = int(horizon)
    G, K = model.n_groups, model.n_levels
    n = 2.0 * T * G * K
    kernel = np.count_nonzero(np.asarray(model.kernel)[:, :2])
    nnz = n + (T - 1) * float(kernel) + 8.0 * T * K * G * (G - 1) / 2
    return n * nnz


def check_points(points: Any, model: TabularModel, horizon: int, field: str = "points") -> int:
    """``points`` (the eps values of a frontier's grid, named ``field`` in errors:
    ``--points``, ``points``, ``eps_grid``) as an int from 2 to :data:`MAX_POINTS` whose
    results (each point's policy, occupancy and audit: about 48 T G K bytes + 4 KiB) fit
    the memory limit, checked before any program is built."""
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 2:
        raise ModelError(f"{field}: must be an integer >= 2, got {points!r}.")
    if points > MAX_POINTS:
        raise ModelError(f"{field}: bad value {points}; a frontier's grid holds at most "
                         f"{MAX_POINTS:,} eps values (each a linear program solved and "
                         f"audited); give fewer, e.g. 50 (docs/limits.md).")
    T = int(horizon) if isinstance(horizon, (int, np.integer)) else 1
    check_memory(float(points) * (48.0 * T * model.n_groups * model.n_levels + 4096),
                 f"frontier of {points} eps values ({field}) over {T} epochs",
                 f"give fewer {field}")
    if T >= 1 and model.n_actions == 2:  # the LP refuses other models with its own message
        one = lp_work(model, T)
        work = (int(points) + EXTRA_SOLVES) * one
        if work > MAX_LP_WORK:
            most = int(MAX_LP_WORK // one) - EXTRA_SOLVES
            fix = (f"give at most {most:,} {field}" if most >= 2 else
                   "a shorter horizon or a smaller model (each LP alone is near the limit)")
            raise ResourceLimitError(
                f"{field}: a frontier of {points:,} eps values of model {model.name!r} over "
                f"{T} epochs is {work:.3g} units of LP work ({points:,} + {EXTRA_SOLVES} "
                f"linear programs of {one:.3g} each: variables x nonzeros), over the limit of "
                f"{MAX_LP_WORK:.3g} (fixed; about an hour of one core); {fix} "
                "(docs/limits.md).")
    return int(points)


# ------------------------------------------------------------------------ frontier
def _named_policies(policies: Any) -> list[tuple[str | None, Any]]:
    if policies is None:
        return []
    if isinstance(policies, Mapping):
        return [(str(k), v) for k, v in policies.items()]
    if isinstance(policies, (str, np.ndarray)) or hasattr(policies, "prob_d1"):
        return [(None, policies)]
    return [(None, p) for p in policies]


@dataclass(frozen=True, eq=False)
class Frontier:
    """The best utility against the fairness bound, for one model, horizon and constraint.

    ``eps``: the grid (ascending). ``points``: one :class:`LPResult` per eps.
    ``unconstrained``: the utility-optimal policy with the smallest |constraint|
    (its value is the right end of the grid). ``eps_min``: the smallest achievable
    |constraint| (the left end). ``lambda_eps``: the eps of every Lambda on it, the
    frontier's points and the policies :meth:`place` puts against it (None: what the
    model declares, else "auto"; :func:`~causalfair.engines.benefit.eps_for`).
    """

    model: TabularModel
    horizon: int
    constraint: str
    eps: np.ndarray
    points: tuple[LPResult, ...]
    unconstrained: LPResult
    eps_min: float
    lp: OccupancyLP = field(repr=False)
    lambda_eps: float | str | None = None

    @property
    def metric_label(self) -> str:
        return METRIC_LABEL[self.constraint]

    @property
    def utilities(self) -> np.ndarray:
        return np.array([r.utility for r in self.points])

    def to_frame(self) -> Any:
        """One row per eps: utility and every metric of the frontier policy (LP values and
        the exact audit of the recovered policy)."""
        import pandas as pd

        rows = []
        for e, r in zip(self.eps, self.points, strict=True):
            a = r.audit
            rows.append({
                "eps": float(e),
                "status": r.status,
                "utility": r.utility,
                "C": r.C,
                "abs_C": abs(r.C),
                "DPE": r.DPE,
                "IPE": a.IPE if a is not None else math.nan,
                "SPE": a.SPE if a is not None else math.nan,
                "DP": r.DP,
                "Lambda": r.Lambda if r.Lambda is not None else math.nan,
                "audit_C": a.C if a is not None else math.nan,
                "audit_utility": a.total_utility if a is not None else math.nan,
            })
        return pd.DataFrame(rows)

    def interpolate(self, value: float) -> float:
        """Linear interpolation of the frontier at |constraint| = value (a lower bound on
        the exact frontier, which is concave); flat beyond the right end, NaN below eps_min."""
        v = abs(float(value))
        if v < self.eps_min - FEASIBILITY_TOL:
            return math.nan
        u = self.utilities
        ok = np.isfinite(u)
        return float(np.interp(v, self.eps[ok], u[ok]))

    def utility_at(self, value: float) -> float:
        """Exact frontier value: the LP optimum at eps = |value| (NaN below eps_min)."""
        v = max(abs(float(value)), self.eps_min) + 1e-10
        res = self.lp.solve({self.constraint: v}, (self.constraint,), audit=False,
                            raise_infeasible=False)
        return res.utility if res.feasible else math.nan

    def place(self, policies: Any, names: Sequence[str] | None = None) -> Any:
        """Audit policies and report their utility gap to the frontier at equal |constraint|.

        ``policies``: one policy or a list / mapping {name: policy} of Policy objects
        (TablePolicy, TorchPolicy, ConstantPolicy, ...), tables (G, K) or (T, G, K), or
        built-in specs such as ``"threshold:0.5"``. Returns a DataFrame with one row per
        policy: its audited utility, C, DPE, DP, Lambda, the metric the frontier bounds
        (``x``), the exact frontier utility there (``frontier_utility``, an LP solve),
        the interpolated frontier (``frontier_interp``) and ``gap`` = frontier_utility -
        utility (>= 0 up to solver tolerance: no policy beats the frontier).
        """
        import pandas as pd

        items = _named_policies(policies)
        if names is not None:
            if len(names) != len(items):
                raise ModelError(f"names: got {len(names)} names for {len(items)} policies.")
            items = [(n, p) for n, (_, p) in zip(names, items, strict=True)]
        rows = []
        for name, pol in items:
            m = policy_metrics(self.model, pol, self.horizon, dp_discount=self.lp.dp_discount,
                               eps=self.lambda_eps)
            x = abs(m[self.constraint])
            fu = self.utility_at(x)
            rows.append({
                "policy": name or m["policy"],
                "utility": m["utility"],
                "C": m["C"],
                "DPE": m["DPE"],
                "IPE": m["IPE"],
                "DP": m["DP"],
                "Lambda": m["Lambda"],
                "x": x,
                "frontier_utility": fu,
                "frontier_interp": self.interpolate(x),
                "gap": fu - m["utility"],
            })
        return pd.DataFrame(rows, columns=[
            "policy", "utility", "C", "DPE", "IPE", "DP", "Lambda", "x",
            "frontier_utility", "frontier_interp", "gap",
        ])

    def plot(self, policies: Any = None, *, placed: Any = None, ax: Any = None,
             path: str | None = None) -> Any:
        """Utility against |constraint| (left) and against Lambda (right) for the frontier
        policies, with audited policies placed on both panels. Returns the figure; with
        ``path`` also saves a PNG (atomically)."""
        from matplotlib.figure import Figure  # no pyplot: no global backend state

        if placed is None and policies is not None:
            placed = self.place(policies)
        df = self.to_frame()
        if ax is None:
            fig = Figure(figsize=(11, 4.2), layout="constrained")
            axes = fig.subplots(1, 2)
        else:
            axes = np.atleast_1d(ax)
            fig = axes[0].figure
        a0 = axes[0]
        x = df["eps"].to_numpy()
        a0.plot(x, df["utility"], "-", color="C0", lw=2, label="frontier (time-indexed LP)")
        a0.fill_between(x, df["utility"].min(), df["utility"], color="C0", alpha=0.08)
        unit = "decision-rate gap, 0-1" if self.constraint == "DP" else "gain units"
        a0.set_xlabel(f"{self.metric_label} bound ({unit})")
        a0.set_ylabel("utility (expected total reward)")
        a0.set_title(f"{self.model.name}, T = {self.horizon}")
        # distinct shapes, shrinking sizes, hollow: policies at the same point stay visible
        shapes = ("o", "s", "D", "^", "v", "P", "X")

        def style(i: int) -> dict[str, Any]:
            return {"marker": shapes[i % len(shapes)], "ls": "none", "ms": max(4.0, 11.0 - 2.0 * i),
                    "mfc": "none", "mew": 2.0, "color": f"C{(i + 1) % 10}"}

        if placed is not None and len(placed):
            for i, row in enumerate(placed.itertuples(index=False)):
                a0.plot(row.x, row.utility, label=f"{row.policy} (gap {row.gap:.3g})", **style(i))
        a0.legend(fontsize=8, loc="best")
        if len(axes) > 1:
            a1 = axes[1]
            a1.plot(df["Lambda"], df["utility"], ".-", color="C0", label="frontier policies")
            if placed is not None and len(placed):
                for i, row in enumerate(placed.itertuples(index=False)):
                    a1.plot(row.Lambda, row.utility, label=str(row.policy), **style(i))
            a1.set_xlabel("Lambda (benefit fairness, probability scale 0-1)")
            a1.set_ylabel("utility (expected total reward)")
            a1.legend(fontsize=8, loc="best")
        if ax is not None and fig.get_layout_engine() is None:
            fig.tight_layout()
        if path is not None:
            atomic_write_bytes(path, lambda fh: fig.savefig(fh, format="png", dpi=120))
        return fig

    def to_dict(self) -> dict[str, Any]:
        df = self.to_frame()
        lam_eps, source = model_eps(self.lambda_eps, self.model)
        return {
            "model": self.model.name,
            "horizon": self.horizon,
            "constraint": self.constraint,
            "eps_min": self.eps_min,
            "lambda_eps": lam_eps,
            "lambda_eps_source": source,
            "unconstrained": {"utility": self.unconstrained.utility, "C": self.unconstrained.C,
                              "DPE": self.unconstrained.DPE, "DP": self.unconstrained.DP},
            "points": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                        for k, v in row.items()} for row in df.to_dict(orient="records")],
        }

    def summary(self) -> str:
        df = self.to_frame()
        cols = ["eps", "utility", "C", "DPE", "DP", "Lambda"]
        return (f"Utility-fairness frontier: model {self.model.name}, T = {self.horizon}, "
                f"constraint {self.metric_label} <= eps ({len(df)} points, smallest achievable "
                f"{self.eps_min:.6g})\n" + df[cols].to_string(index=False, float_format=fixed))

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        u = self.utilities[np.isfinite(self.utilities)]
        span = f", utility {u.min():.6g}..{u.max():.6g}" if u.size else ""
        return (f"Frontier(model={self.model.name!r}, horizon={self.horizon}, "
                f"constraint={self.constraint!r}, points={len(self.points)}, "
                f"eps {self.eps_min:.6g}..{float(self.eps[-1]):.6g}{span})")

    def _repr_html_(self) -> str:
        import html

        cols = ["eps", "status", "utility", "C", "DPE", "DP", "Lambda"]
        title = html.escape(f"Utility-fairness frontier: model {self.model.name}, T = "
                            f"{self.horizon}, {self.metric_label} <= eps")
        return (f"<div><strong>{title}</strong>" + self.to_frame()[cols].to_html(
            index=False, float_format=fixed) + "</div>")


def frontier(model: TabularModel, horizon: int, eps_grid: Iterable[float] | None = None,
             points: int | None = None, *, constraint: str = "C", dp_discount: float = 1.0,
             audit: bool = True, lambda_eps: float | str | None = None) -> Frontier:
    """Sweep eps and return the utility-fairness :class:`Frontier`.

    The default grid has ``points`` values (default 50; not with ``eps_grid``, which is the
    grid itself) evenly spaced from the smallest achievable |constraint| (0 when some
    policy is exactly fair) to the |constraint| of the
    utility-optimal policy (among utility-optimal policies, the least unfair one). The
    constraint matrix is built once; each point only changes the bound. Infeasible grid
    values (below the smallest achievable one) get ``status == "infeasible"``.
    """
    if constraint not in CONSTRAINTS:
        raise ModelError(f"constraint: unknown value {constraint!r}; allowed values: {', '.join(CONSTRAINTS)}.")
    audit = check_flag("audit", audit)
    if lambda_eps is not None:  # named as this door names it (eps_grid bounds the constraint)
        check_eps(lambda_eps, "lambda_eps")
    if eps_grid is None:  # the grid's size, bounded before any program is built
        points = 50 if points is None else points
        points = check_points(points, model, horizon) if isinstance(model, TabularModel) \
            else points
    else:
        if points is not None:  # the grid is given: a size beside it would be ignored
            raise ModelError(f"points: {short(points, 20)} given with eps_grid, which is the "
                             "grid itself; give one of them (points: that many values from "
                             "the smallest achievable |constraint| up).")
        if isinstance(eps_grid, (str, bytes)) or not isinstance(eps_grid, Iterable) \
                or (isinstance(eps_grid, np.ndarray) and eps_grid.ndim == 0):  # 0.1, "0.1"
            raise ModelError(f"eps_grid: expected a list of eps values >= 0, got "
                             f"{short(eps_grid, 40)}; e.g. [0.0, 0.05, 0.1], or [0.1] for one.")
        eps_grid = list(eps_grid)
        if isinstance(model, TabularModel) and len(eps_grid) >= 2:
            check_points(len(eps_grid), model, horizon, "eps_grid")
    lp = OccupancyLP(model, horizon, dp_discount=dp_discount)
    free = lp.solve(None, (constraint,), audit=False)
    scale = max(1.0, abs(free.utility))
    hi = lp.min_metric(constraint, utility_floor=free.utility - 1e-9 * scale)
    unc = lp.solve({constraint: hi + 1e-10}, (constraint,), audit=audit, lambda_eps=lambda_eps)
    eps_min = lp.min_metric(constraint)
    if eps_grid is None:
        grid = np.linspace(eps_min, max(hi, eps_min), int(points))
        grid[0] = eps_min + 1e-10
        grid[-1] = max(hi, eps_min) + 1e-10
        grid = np.maximum.accumulate(grid)  # hi == eps_min: one value, not 1e-10, 0, ...
    else:
        grid = np.sort(np.array([check_eps_value(constraint, e) for e in eps_grid], dtype=float))
        if grid.size == 0:
            raise ModelError("eps_grid: empty; give at least one eps >= 0.")
    results = tuple(
        lp.solve({constraint: float(e)}, (constraint,), audit=audit, raise_infeasible=False,
                 lambda_eps=lambda_eps)
        for e in grid
    )
    return Frontier(model=model, horizon=lp.horizon, constraint=constraint, eps=grid,
                    points=results, unconstrained=unc, eps_min=eps_min, lp=lp,
                    lambda_eps=lambda_eps)

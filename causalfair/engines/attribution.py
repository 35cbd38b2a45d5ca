"""Attribution of a change: why C moved between two policies on the same system.

Two policies pi (the candidate) and pi' (the baseline: the policy on main, or pi0) on one
system share its spurious part: V^pi0 does not depend on the deployed policy, so SPE cancels
and the change in C (method.md sections 2-3) is

    C(pi) - C(pi') = [DPE(pi) - DPE(pi')] + [IPE(pi) - IPE(pi')].

Each path is split further over the steps t < T and the cells (group x level for tabular
systems, group x feature bin otherwise) that carry it. With mu_t the state distribution
of a group under a policy, h_pi the expected gain of the policy's decision and h0 the
gain of the baseline action a0 (Proposition 1):

    DPE change at (t, s, x) = sign(s) * gamma^t * [mu_t(x) (h_pi - h0)(x) - mu'_t(x) (h_pi' - h0)(x)]
    IPE change at (t, s, x) = sign(s) * gamma^t * [mu_t(x) - mu'_t(x)] (h0(x) - hbar_{t,s})

with sign(s+) = +1, sign(s-) = -1 (the audited pair) and 0 for other groups, and
hbar_{t,s} = sum_x m_{t,s}(x) h0(x) the mean baseline gain under m = (mu_t + mu'_t) / 2.
Summed over (t, s, x) these give the two changes, so the steps and the cells each sum to
the observed change.

The IPE cells are centred because sum_x [mu_t(x) - mu'_t(x)] = 0 for each (t, s): a
constant added to h0 changes every uncentred cell, [mu_t - mu'_t](x) h0(x), and none of
their sums, so those cells say where people sit more than what changed. Centred, a cell reads "more (fewer) people where the baseline gain is above (below) its
average", a constant added to h0 leaves it unchanged, and the totals per step and per path
are exactly those of the uncentred formula. The reference distribution m is the average of
the two policies' so that the cells are antisymmetric in the two policies (swapping them
flips every sign). The DPE cells need no centring: mu(x) (h_pi - h0)(x) has no free
constant (the decision's effect is zero where the policy takes a0).

- **Exact** (:func:`attribute_exact`, a tabular model): the formulas above with the exact
  state distributions; the parts sum to the change to rounding (about 1e-15).
- **Monte Carlo** (:func:`attribute_mc`, any simulator of independent units): one paired
  run with common random numbers (the streams of :func:`~causalfair.engines.montecarlo.
  compare_mc`: the same units, noise and decision uniforms for both policies, and so the
  very same pi0 roll-out, whose gains cancel unit by unit). Every unit contributes its own
  per-step and per-cell differences (its direct gain, gain minus the pi^PS fork's, at the
  cell it visits under each policy; its fork gain minus the reference r_{t,s} likewise);
  the estimates are the pair's difference of group means and the intervals come from the
  per-unit paired differences (CLT). The reference r_{t,s} is the average of the two
  policies' mean fork gain at (t, s) over the run's n units per group (the estimate of
  hbar_{t,s}); every unit sits in one cell per step under each policy, so subtracting it
  from both policies' fork gains leaves each unit's steps and total unchanged. The
  reference is estimated from the same units, so a cell's standard error is that of the
  unit's influence Y(x) - sum_t D(t, x) F_t (delta method: Y its centred cell value, D the
  mean visit difference, F the unit's (f_t + f'_t) / 2); each batch centres at its own
  reference first and the fold moves the cells to the run's. Steps and cells are sums of
  the same samples, so they add up to the total change to rounding, whatever the sampling
  error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._io import fixed
from causalfair._limits import check_memory
from causalfair._simultaneous import (
    MARK,
    ci_label,
    pair_z,
    simultaneous_dict,
    simultaneous_sentence,
)
from causalfair._validation import (
    check_alpha,
    check_engine,
    check_gamma,
    check_horizon,
    check_keywords,
    check_policy_name,
    check_unit,
    engine_for,
    read_only,
)
from causalfair.engines._mc_base import (
    MOMENT_KEYS,
    Moments,
    batches,
    engine_backend,
    fold_tasks,
    mc_options,
)
from causalfair.engines.benefit_cells import bin_cells, bin_labels, quantile_edges
from causalfair.engines.groups import pair_arg
from causalfair.engines.montecarlo import paired_jobs, paired_numbers, paired_trios, simulate_batch
from causalfair.errors import InputError
from causalfair.model import TabularModel
from causalfair.plotting import check_axes, new_figure, text_only, wrap
from causalfair.policies.grid import check_policy_table, policy_table
from causalfair.policies.resolver import resolve
from causalfair.results import check_pair
from causalfair.systems import as_system

__all__ = ["Attribution", "attribute", "attribute_exact", "attribute_mc", "compare_attribute_mc",
           "PATHS"]

#: The paths a change is split into (SPE is the system's and cancels).
PATHS = ("DPE", "IPE")

#: Feature bins per feature for the cells of a system observed through features.
FEATURE_BINS = 4
#: At most this many features are binned jointly (the first ones; cells grow as bins^F).
MAX_BINNED_FEATURES = 3
#: Units per group of the pilot run whose visits fix the feature bins.
PILOT_UNITS = 1024


@dataclass(frozen=True, eq=False)
class Attribution:
    """The change in C between ``policy`` and ``baseline`` split by path, step and cell.

    ``total``: path -> (estimate, standard error) for ``C``, ``DPE``, ``IPE`` (policy minus
    baseline; se 0 for the exact engine). ``by_step``: (2, T) estimates for (DPE, IPE),
    ``by_step_se`` their standard errors. ``by_cell``: (2, 2, K) estimates for (DPE, IPE) x
    (s+, s-) x cell, ``by_cell_se`` likewise; the s- entries carry the sign of C (a gain
    for s- lowers C). ``cells``: what a cell is ("levels" or the feature binning);
    ``cell_labels`` the K labels.
    """

    engine: str
    groups: tuple[str, ...]
    pair: tuple[int, int]
    horizon: int
    policy: str
    baseline: str
    total: Mapping[str, tuple[float, float]]
    by_step: np.ndarray
    by_step_se: np.ndarray
    by_cell: np.ndarray
    by_cell_se: np.ndarray
    cells: str
    cell_labels: tuple[str, ...]
    alpha: float = 0.05
    n: int | None = None
    seed: int | None = None
    gain_unit: str | None = None  # the system's Gain.unit, on plot()'s axis
    #: m > 1: the pair was chosen from the data (an audit's default of more than two
    #: groups): every interval is simultaneous over the m pairs, z_{1 - alpha/(2m)}, as the
    #: same paired run's [baseline] differences (causalfair._simultaneous).
    simultaneous: int = 1

    def __post_init__(self) -> None:  # the names it prints (as a Decomposition's)
        check_policy_name(self.policy)
        check_policy_name(self.baseline, "baseline_name")
        read_only(self, ("by_step", "by_step_se", "by_cell", "by_cell_se"))

    def __setstate__(self, state: dict[str, Any]) -> None:  # unpickled or copied: as built
        self.__dict__.update(state)
        self.__post_init__()

    # ------------------------------------------------------------------ reading
    @property
    def change(self) -> float:
        """C(policy) - C(baseline)."""
        return float(self.total["C"][0])

    def _interval(self, est: float, se: float) -> tuple[float, float]:
        z = pair_z(self.alpha, self.simultaneous)
        return float(est - z * se), float(est + z * se)

    @check_keywords(name="Attribution.largest")
    def largest(self, n_cells: int = 3) -> dict[str, Any]:
        """The largest path, step and cells by absolute contribution (what drives the
        change), each with its estimate and interval."""
        paths = {p: self.total[p] for p in PATHS}
        path = max(PATHS, key=lambda p: abs(paths[p][0]))
        step_tot = self.by_step.sum(0)
        t = int(np.argmax(np.abs(step_tot)))
        flat = self.by_cell.sum(0)  # (2, K) both paths
        order = np.argsort(-np.abs(flat), axis=None, kind="stable")[:max(0, n_cells)]
        cells = []
        for i in order:
            gi, k = np.unravel_index(int(i), flat.shape)
            est = float(flat[gi, k])
            if est == 0.0:
                continue
            se = float(np.hypot(self.by_cell_se[0, gi, k], self.by_cell_se[1, gi, k]))
            cells.append({"group": self.groups[self.pair[gi]], "cell": self.cell_labels[k],
                          "estimate": est, "interval": list(self._interval(est, se))})
        step_se = float(np.hypot(self.by_step_se[0, t], self.by_step_se[1, t]))
        return {
            "path": path, "path_estimate": float(paths[path][0]),
            "path_interval": list(self._interval(*paths[path])),
            "step": t, "step_estimate": float(step_tot[t]),
            "step_interval": list(self._interval(float(step_tot[t]), step_se)),
            "cells": cells,
        }

    def line(self) -> str:
        """One sentence: the change and its largest path, step and cell."""
        big = self.largest(1)
        cell = big["cells"][0] if big["cells"] else None
        where = (f", cell {cell['group']} / {self.cells[:-1] if self.cells == 'levels' else 'bin'}"
                 f" {cell['cell']} ({cell['estimate']:+.3g})" if cell else "")
        return (f"C moved {self.change:+.4g} vs {self.baseline}: mostly {big['path']} "
                f"({big['path_estimate']:+.4g}), step t = {big['step']} "
                f"({big['step_estimate']:+.3g}){where}")

    def steps_frame(self) -> Any:
        """One row per step: the DPE and IPE changes, their sum, standard errors."""
        import pandas as pd

        return pd.DataFrame({"t": np.arange(self.horizon), "DPE": self.by_step[0],
                             "IPE": self.by_step[1], "C": self.by_step.sum(0),
                             "DPE_se": self.by_step_se[0], "IPE_se": self.by_step_se[1]})

    def cells_frame(self) -> Any:
        """One row per (group, cell): the DPE and IPE changes (signed as in C), their sum
        and standard errors, largest absolute sum first."""
        import pandas as pd

        K = len(self.cell_labels)
        df = pd.DataFrame({
            "group": np.repeat([self.groups[i] for i in self.pair], K),
            "cell": np.tile(self.cell_labels, 2),
            "DPE": self.by_cell[0].reshape(-1), "IPE": self.by_cell[1].reshape(-1),
            "C": self.by_cell.sum(0).reshape(-1),
            "DPE_se": self.by_cell_se[0].reshape(-1), "IPE_se": self.by_cell_se[1].reshape(-1),
        })
        return df.iloc[np.argsort(-np.abs(df["C"].to_numpy()), kind="stable")].reset_index(
            drop=True)

    @check_keywords(name="Attribution.to_dict")
    def to_dict(self, n_cells: int = 10) -> dict[str, Any]:
        """JSON-safe: totals with intervals, per-step and the largest cells."""
        def part(est: float, se: float) -> dict[str, Any]:
            return {"estimate": float(est), "se": float(se),
                    "interval": list(self._interval(est, se))}

        cf = self.cells_frame().head(n_cells)
        return {
            "engine": self.engine, "policy": self.policy, "baseline": self.baseline,
            "pair": [self.groups[i] for i in self.pair], "horizon": self.horizon,
            "alpha": self.alpha, "cells": self.cells,
            **({"n": self.n, "seed": self.seed} if self.engine == "mc" else {}),
            **({"simultaneous": {**simultaneous_dict(self.simultaneous, self.alpha),
                                 "quantities": ["C", *PATHS]}} if self.simultaneous > 1 else {}),
            "total": {k: part(*v) for k, v in self.total.items()},
            "by_step": {p: [part(e, s) for e, s in zip(self.by_step[i], self.by_step_se[i],
                                                       strict=True)]
                        for i, p in enumerate(PATHS)},
            "largest_cells": [{"group": r.group, "cell": r.cell,
                               **{p: part(getattr(r, p), getattr(r, f"{p}_se")) for p in PATHS},
                               "C": float(r.C)} for r in cf.itertuples()],
            "largest": self.largest(),
            "line": self.line(),
        }

    def summary(self) -> str:
        lines = [f"Attribution of the change in C ({self.engine}): {self.policy} vs {self.baseline}"]
        for k in ("C", *PATHS):
            e, s = self.total[k]
            lo, hi = self._interval(e, s)
            ci = "" if s == 0 else (f"   {100 * (1 - self.alpha):g}% CI [{fixed(lo, sign=True)}, "
                                    f"{fixed(hi, sign=True)}]")
            lines.append(f"  {k:<4} {fixed(e, sign=True)}{ci}")
        lines.append("  " + self.line())
        if self.simultaneous > 1 and self.engine == "mc":
            lines.append("  " + self.note())
        return "\n".join(lines)

    def note(self) -> str:
        """The one sentence (:func:`causalfair._simultaneous.simultaneous_sentence`) when
        the pair was chosen from the data (``simultaneous`` m > 1), else ""."""
        a, b = self.pair
        return "" if self.simultaneous == 1 else simultaneous_sentence(
            f"{self.groups[a]}-{self.groups[b]}", self.simultaneous, self.alpha)

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> Any:
        """The totals C, DPE, IPE (policy minus baseline), indexed (pair, quantity) as
        ``cf.benefit_fairness(...).to_frame()``: estimate, se, ci_lower, ci_upper at level
        1 - :attr:`alpha` (exact: se 0 and the point)."""
        import pandas as pd

        a, b = self.pair
        pair = f"{self.groups[a]}-{self.groups[b]}"
        keys = ("C", *PATHS)
        rows = [[float(self.total[k][0]), float(self.total[k][1]),
                 *self._interval(*self.total[k])] for k in keys]
        return pd.DataFrame(rows, columns=["estimate", "se", "ci_lower", "ci_upper"],
                            index=pd.MultiIndex.from_tuples([(pair, k) for k in keys],
                                                            names=["pair", "quantity"]))

    def _repr_html_(self) -> str:
        import html

        title = html.escape(f"Attribution of the change in C ({self.engine}): {self.policy} "
                            f"vs {self.baseline}, T = {self.horizon}")
        return (f"<div><strong>{title}</strong>"
                + self.to_frame().to_html(float_format=fixed)
                + f"<p>{html.escape(self.line())}</p></div>")

    @check_keywords(name="Attribution.plot")
    def plot(self, unit: str | None = None, *, ax: Any = None) -> Any:
        """The change in C per decision epoch t, its DPE and IPE parts side by side (the
        bars are :meth:`steps_frame`'s; Monte Carlo: error bars at level 1 - :attr:`alpha`):
        a matplotlib Figure on the Agg canvas (nothing shown or written), or, with ``ax``
        (one matplotlib Axes), drawn there and that Axes' Figure returned. ``unit``: the
        gain's unit; default :attr:`gain_unit` (the system's), else "gain units"."""
        ax = check_axes(ax)
        unit = check_unit(unit) or self.gain_unit or "gain units"
        t = np.arange(self.horizon)
        mc = bool(np.any(self.by_step_se > 0))
        z = pair_z(self.alpha, self.simultaneous)
        a, b = self.pair
        with text_only():  # group and policy names as written, never mathtext
            if ax is None:
                ax = new_figure(min(10.0, max(5.0, 2.0 + 0.5 * self.horizon)), 3.6).add_subplot()
            for i, (path, shift) in enumerate(zip(PATHS, (-0.2, 0.2), strict=True)):
                ax.bar(t + shift, self.by_step[i], 0.4, label=path, capsize=2,
                       yerr=z * self.by_step_se[i] if mc else None)
            ax.axhline(0.0, color="black", linewidth=0.8)
            ax.set_xticks(t)
            ax.set_xlabel("decision epoch t (steps)")
            ax.set_ylabel(wrap(f"change in C, {self.groups[a]} minus {self.groups[b]} "
                               f"({unit})", 36))
            m = self.simultaneous if mc else 1  # the mark, then the one sentence
            bars = "" if not mc else f" (error bars: {100 * (1 - self.alpha):g}% intervals)" \
                if m == 1 else f" (error bars: {ci_label(100 * (1 - self.alpha), m)})"
            ax.set_title(wrap(f"C moved {self.change:+.4g} from {self.baseline} to "
                              f"{self.policy}: its DPE and IPE per step{bars}", 70)
                         + ("" if m == 1 else "\n" + wrap(f"{MARK} {self.note()}", 90)),
                         fontsize=9)
            ax.legend()
        return ax.figure

    def __repr__(self) -> str:
        return (f"Attribution(engine={self.engine!r}, change={self.change:.6g}, "
                f"DPE={self.total['DPE'][0]:.6g}, IPE={self.total['IPE'][0]:.6g}, "
                f"T={self.horizon}, cells={len(self.cell_labels)})")


# ------------------------------------------------------------------------- exact
def _action_tables(model: TabularModel, p: Any, T: int) -> np.ndarray:
    """A policy table (scalar, (G, K), (T, G, K) or action distributions) as (T, G, K, A)."""
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    p = np.asarray(p, dtype=np.float64)
    if A == 2 and p.ndim < 2:
        p = np.broadcast_to(p, (G, K))
    pa = model.action_table(p)
    return np.broadcast_to(pa, (T, G, K, A))


def _table(model: TabularModel, policy: Any, T: int, system: Any,
           where: str | None = None) -> tuple[Any, str]:
    if isinstance(policy, np.ndarray):  # checked as every exact door checks a table
        return policy_table(check_policy_table(model, policy, where or "policy", horizon=T),
                            model, T), "table"
    if isinstance(policy, str) and policy == "pi0":
        return np.asarray(model.baseline_table()), "pi0"
    res = resolve(policy, system if system is not None else model, where=where)
    return policy_table(res.policy, model, T), res.label


def attribute_exact(model: TabularModel, policy: Any, baseline: Any, horizon: int = 20, *,
                    gamma: float = 1.0, pair: tuple[int, int] | None = None,
                    policy_name: str | None = None, baseline_name: str | None = None,
                    system: Any = None) -> Attribution:
    """Exact attribution of C(policy) - C(baseline) on a tabular model (module docstring).
    ``policy``/``baseline``: anything :func:`causalfair.policies.resolve` accepts, a
    policy table, or ``"pi0"`` (the baseline action everywhere). ``pair``: the audited pair (default: the pair the exact engine picks for
    ``policy``)."""
    T = check_horizon(horizon)
    gamma = check_gamma(gamma)
    p, pname = _table(model, policy, T, system)
    q, qname = _table(model, baseline, T, system, "baseline")
    h = model.expected_gain()  # (G, A, K)
    h0 = h[:, model.baseline]
    disc = (float(gamma) ** np.arange(T))[:, None, None]
    direct, mus, V = [], [], []
    for tab in (p, q):
        mu = model.propagate(tab, T)[:T]
        h_pi = np.einsum("tsxa,sax->tsx", _action_tables(model, tab, T), h)
        direct.append(disc * mu * (h_pi - h0))
        mus.append(mu)
        V.append((disc * mu * h_pi).sum((0, 2)))
    a, c = check_pair(pair, model.n_groups, V[0])
    direct = direct[0] - direct[1]  # (T, G, K)
    # h0 centred per (t, s) at its mean under the average state distribution of the two
    # policies (module docstring): sum_x (mu - mu')(x) = 0, so the totals do not move
    ref = 0.5 * (mus[0] + mus[1])
    hbar = (ref * h0).sum(2, keepdims=True) / np.maximum(ref.sum(2, keepdims=True), 1e-300)
    indirect = disc * (mus[0] - mus[1]) * (h0 - hbar)
    cell = np.stack([np.stack([x[:, a], -x[:, c]], axis=1) for x in (direct, indirect)])
    by_step = cell.sum(axis=(2, 3))  # (2, T)
    by_cell = cell.sum(axis=1)  # (2, 2, K)
    tot = {"DPE": float(by_step[0].sum()), "IPE": float(by_step[1].sum())}
    total = {"C": (tot["DPE"] + tot["IPE"], 0.0), "DPE": (tot["DPE"], 0.0),
             "IPE": (tot["IPE"], 0.0)}
    return Attribution(
        engine="exact", groups=tuple(model.group_names), pair=(a, c), horizon=T,
        policy=pname if policy_name is None else policy_name,
        baseline=qname if baseline_name is None else baseline_name, total=total,
        by_step=by_step, by_step_se=np.zeros_like(by_step), by_cell=by_cell,
        by_cell_se=np.zeros_like(by_cell), cells="levels",
        cell_labels=tuple(str(x) for x in model.level_labels),
        gain_unit=getattr(getattr(system, "gain", None), "unit", None))


# ------------------------------------------------------------------- Monte Carlo
class _Cells:
    """How a unit's observation maps to a cell: its level, joint quantile bins of (the
    first :data:`MAX_BINNED_FEATURES`) features, or one cell when it observes neither."""

    def __init__(self, system: Any, jobs: Any, n: int) -> None:
        self.edges: list[np.ndarray] | None = None
        K = system.n_levels
        if K is not None and system.levels is not None:
            self.kind, self.K = "levels", int(K)
            self.labels = tuple(str(x) for x in system.levels)
            return
        feats: list[np.ndarray] = []
        levels: list[np.ndarray] = []

        def rec(t: int, obs: Any, gain: Any, fork: Any) -> None:
            if obs.level is not None:
                levels.append(np.asarray(obs.level, dtype=np.intp))
            elif obs.features is not None:
                feats.append(np.asarray(obs.features, dtype=np.float64)[:, :MAX_BINNED_FEATURES])

        m = min(n, PILOT_UNITS)
        for job in jobs:  # a pilot over both policies' visits fixes the bins
            for g in range(int(job.sim.n_groups)):
                simulate_batch(job, g, 0, m, rec)
        if levels:
            self.kind, self.K = "levels", int(max(x.max() for x in levels)) + 1
            self.labels = tuple(str(i + 1) for i in range(self.K))
        elif feats:
            self.edges, values = quantile_edges(np.concatenate(feats), FEATURE_BINS)
            names = system.features[:MAX_BINNED_FEATURES] if system.features else None
            self.labels, self.kind = bin_labels(self.edges, names, values=values)
            self.K = len(self.labels)
        else:
            self.kind, self.K, self.labels = "one cell (no levels or features observed)", 1, ("all",)

    def of(self, obs: Any, m: int) -> np.ndarray:
        if self.edges is not None and obs.features is not None:
            return bin_cells(np.asarray(obs.features, dtype=np.float64), self.edges)
        if self.kind != "levels" or obs.level is None:
            return np.zeros(m, dtype=np.intp)
        return np.minimum(np.asarray(obs.level, dtype=np.intp), self.K - 1)


def _traced(job: Any, g: int, b: int, m: int, cells: _Cells
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Per-step, per-unit direct gains (gain - fork), fork gains and cells of one batch,
    (T, m) each (a step's values are one contiguous row), and the units' totals (A, B, Z,
    A-B, B-Z, R of :func:`simulate_batch`)."""
    T = job.T
    direct, fork_g = np.zeros((T, m)), np.zeros((T, m))
    where = np.zeros((T, m), dtype=np.intp)

    def rec(t: int, obs: Any, gain: np.ndarray, fork: np.ndarray) -> None:
        np.subtract(gain, fork, out=direct[t])
        fork_g[t] = fork
        where[t] = cells.of(obs, m)

    _, tot = simulate_batch(job, g, b, m, rec)
    return direct, fork_g, where, tot


def _per_cell(where: np.ndarray, x: np.ndarray, K: int) -> np.ndarray:
    """(K, m) from (T, m) values and cells: each unit's values summed over the steps it
    spent in each cell."""
    m = x.shape[1]
    idx = (where * m + np.arange(m)).reshape(-1)
    return np.bincount(idx, weights=x.reshape(-1), minlength=K * m).reshape(K, m)


def _visits(where: np.ndarray, K: int) -> np.ndarray:
    """(T, K) from (T, m) cells: how many units sit in each cell at each step."""
    T = where.shape[0]
    idx = (where + K * np.arange(T)[:, None]).reshape(-1)
    return np.bincount(idx, minlength=T * K).reshape(T, K).astype(np.float64)


class _Reference:
    """One group's reference fork gain r_t (the mean over units of (f_t + f'_t) / 2, the two
    policies' mean fork gain at step t) and what moving the IPE cells from each batch's own
    reference to it needs: the visit differences per (t, cell), their products with the
    batch references, and the co-moments (pooled over batches, Chan et al.) of the per-unit
    IPE cell values Y with F_t = (f_t + f'_t) / 2 and of F with itself (delta method)."""

    def __init__(self, T: int, K: int) -> None:
        self.n, self.y, self.f = 0, np.zeros(K), np.zeros(T)
        self.cyf, self.cff = np.zeros((K, T)), np.zeros((T, T))
        self.visits, self.rv = np.zeros((T, K)), np.zeros((T, K))

    def merge(self, m: int, y: np.ndarray, f: np.ndarray, visits: np.ndarray,
              cyf: np.ndarray, cff: np.ndarray) -> None:
        tot = self.n + m
        dy, df, w = y - self.y, f - self.f, self.n * m / tot
        self.cyf += cyf + w * np.outer(dy, df)
        self.cff += cff + w * np.outer(df, df)
        self.y += dy * m / tot
        self.f += df * m / tot
        self.visits += visits
        self.rv += f[:, None] * visits
        self.n = tot

    def cells(self, y_mean: np.ndarray, y_var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The IPE cells centred at this run's reference r_t, and the variance of one unit's
        influence Y(x) - sum_t D(t, x) F_t, with D(t, x) the mean visit difference."""
        n = self.n
        d = self.visits / n
        est = y_mean + (self.rv - self.f[:, None] * self.visits).sum(0) / n
        var = (y_var - 2.0 * np.einsum("tk,kt->k", d, self.cyf / (n - 1))
               + np.einsum("tk,tu,uk->k", d, self.cff / (n - 1), d))
        return est, np.maximum(var, 0.0)


def _attributed_batch(task: tuple[Any, Any, _Cells, int, int, int]
                  ) -> tuple[int, np.ndarray, np.ndarray, list[Any], tuple[np.ndarray, ...]]:
    """Batch ``b`` of group ``g`` (``m`` units) under both policies of a paired run: the
    moments (count, mean, centred second moment) of each unit's attribution parts (its IPE
    cells centred at the batch's reference, module docstring), what :class:`_Reference`
    folds, and the moments :func:`~causalfair.engines.montecarlo.compare_mc` folds (the
    same totals)."""
    job, job_b, cells, g, b, m = task
    K = cells.K
    d0, f0, w0, tot0 = _traced(job, g, b, m, cells)
    d1, f1, w1, tot1 = _traced(job_b, g, b, m, cells)
    step_d, step_i = d0 - d1, f0 - f1  # (T, m)
    F = 0.5 * (f0 + f1)
    r = F.mean(1)  # the batch's reference; every unit sits in one cell per step under each
    # policy, so subtracting r_t from both policies' fork gains leaves its steps unchanged
    x = np.vstack([(tot0[0] - tot1[0])[None], step_d.sum(0)[None], step_i.sum(0)[None],
                   step_d, step_i, _per_cell(w0, d0, K) - _per_cell(w1, d1, K),
                   _per_cell(w0, f0 - r[:, None], K) - _per_cell(w1, f1 - r[:, None], K)])
    mean = x.mean(1)
    yc, fc = x[-K:] - mean[-K:, None], F - r[:, None]
    ref = (mean[-K:], r, _visits(w0, K) - _visits(w1, K), yc @ fc.T, fc @ fc.T)
    return m, mean, ((x - mean[:, None]) ** 2).sum(1), paired_trios(tot0, tot1), ref


def compare_attribute_mc(system: Any, policy: Any, baseline: Any, horizon: int | None = None,
                         *, n: int = 100_000, seed: int = 0, alpha: float = 0.05,
                         pair: tuple[int, int] | None = None, batch_size: int | None = None,
                         policy_name: str | None = None, baseline_name: str | None = None,
                         jobs: int | str | None = "auto", simultaneous: int = 1
                         ) -> tuple[dict[str, dict[str, float]], Attribution]:
    """One paired run with common random numbers of ``policy`` and ``baseline``: the
    comparison :func:`~causalfair.engines.montecarlo.compare_mc` returns (the same numbers
    bit for bit: the same streams, totals and folds) and the attribution of
    :func:`attribute_mc`, so that a ``[baseline]`` gate simulates the pair once.
    ``jobs``: threads, as for :func:`~causalfair.engines.montecarlo.decompose_mc` (the same
    numbers whatever it is). ``simultaneous``: m > 1 when ``pair`` was chosen from the data
    (an audit's decomposition of more than two groups, no pair named): the attribution's
    intervals are then simultaneous over the m pairs (:attr:`Attribution.simultaneous`)."""
    alpha = check_alpha(alpha)  # as every door's: (0, 0.5], not a string or a bool
    pair_z(alpha, simultaneous)  # checks m (an integer >= 1) before any work
    for field, name in (("policy_name", policy_name), ("baseline_name", baseline_name)):
        if name is not None:  # (the result's check, before any run)
            check_policy_name(name, field)
    system = as_system(system)
    pjobs, n, batch, weights = paired_jobs(system, policy, baseline, horizon, n=n, seed=seed,
                                           batch_size=batch_size)
    T, G = pjobs[0].T, int(pjobs[0].sim.n_groups)
    cells = _Cells(system, pjobs, n)
    K = cells.K
    backend = engine_backend(None, jobs, pjobs[0].sim, pjobs[0].policy, pjobs[1].policy)
    m_max = min(batch, n)  # per batch in flight: both policies' traces and per-unit parts
    check_memory(8.0 * (m_max * (10 * T + 4 * (3 + 2 * T + 2 * K)) + 3 * T * K + T * T)
                 * getattr(backend, "jobs", 1),
                 f"attribution over {T} epochs and {K} cells with batches of {m_max}",
                 "use a smaller batch_size, a shorter horizon or fewer jobs")
    if pair is None and G > 2:
        names = [str(g) for g in system.groups]
        raise InputError("pair: a Monte Carlo attribution on more than two groups needs the "
                         f"audited pair; name two of the groups {', '.join(names)}, the first "
                         f"minus the second, e.g. pair={(names[0], names[-1])!r}.")
    stats = [Moments() for _ in range(G)]
    refs = [_Reference(T, K) for _ in range(G)]
    mom = {k: [[Moments() for _ in range(G)] for _ in range(3)] for k in MOMENT_KEYS}

    def fold(task: tuple[Any, ...], res: tuple[Any, ...]) -> None:
        g = task[3]  # folded in task order wherever the tasks ran: the same numbers
        stats[g].merge(*res[:3])
        refs[g].merge(res[0], *res[4])
        for key, trio in zip(MOMENT_KEYS, res[3], strict=True):
            for i in range(3):
                mom[key][i][g].merge(*trio[i])

    tasks = ((pjobs[0], pjobs[1], cells, g, b, m) for g in range(G) for b, m in batches(n, batch))
    fold_tasks(backend, _attributed_batch, tasks, G * -(-n // batch), fold,
               result_bytes=1200.0 + 16.0 * (3 + 2 * T + 2 * K) + 8.0 * (3 * T * K + T * T))
    means = np.array([s.mean for s in stats])  # (G, Q)
    var = np.array([s.var for s in stats]) / n
    a, c = check_pair(pair, G, means[:, 0])
    est = means[a] - means[c]
    se = np.sqrt(var[a] + var[c])
    total = {k: (float(est[i]), float(se[i])) for i, k in enumerate(("C", *PATHS))}
    sl = slice(3, 3 + 2 * T)
    by_step, by_step_se = est[sl].reshape(2, T), se[sl].reshape(2, T)
    cell_m, cell_v = means[:, 3 + 2 * T:].copy(), var[:, 3 + 2 * T:].copy()  # (G, 2K)
    for g in (a, c):  # the IPE cells at this run's reference; its sampling error included
        cell_m[g, K:], v = refs[g].cells(cell_m[g, K:], np.array(stats[g].var)[-K:])
        cell_v[g, K:] = v / n
    by_cell = np.stack([cell_m[a].reshape(2, K), -cell_m[c].reshape(2, K)], axis=1)
    by_cell_se = np.stack([np.sqrt(cell_v[a]).reshape(2, K),
                           np.sqrt(cell_v[c]).reshape(2, K)], axis=1)
    att = Attribution(
        engine="mc", groups=tuple(system.groups), pair=(a, c), horizon=T,
        policy=pjobs[0].name if policy_name is None else policy_name,
        baseline=pjobs[1].name if baseline_name is None else baseline_name,
        total=total, by_step=by_step, by_step_se=by_step_se, by_cell=by_cell,
        by_cell_se=by_cell_se, cells=cells.kind, cell_labels=cells.labels, alpha=alpha,
        n=n, seed=seed, gain_unit=getattr(getattr(system, "gain", None), "unit", None),
        simultaneous=simultaneous)
    return paired_numbers(mom, (a, c), n, weights), att


def attribute_mc(system: Any, policy: Any, baseline: Any, horizon: int | None = None, *,
                 n: int = 100_000, seed: int = 0, alpha: float = 0.05,
                 pair: tuple[int, int] | None = None, batch_size: int | None = None,
                 policy_name: str | None = None, baseline_name: str | None = None,
                 jobs: int | str | None = "auto") -> Attribution:
    """Monte Carlo attribution of C(policy) - C(baseline) by one paired run with common
    random numbers (module docstring); intervals at level 1 - ``alpha``
    (:func:`compare_attribute_mc`, which also gives the paired comparison)."""
    return compare_attribute_mc(system, policy, baseline, horizon, n=n, seed=seed, alpha=alpha,
                                pair=pair, batch_size=batch_size, policy_name=policy_name,
                                baseline_name=baseline_name, jobs=jobs)[1]


@check_keywords
def attribute(system: Any, policy: Any, baseline: Any, horizon: int | None = None, *,
              engine: str = "auto", n: int = 100_000, seed: int = 0, alpha: float = 0.05,
              pair: Any = None, gamma: float = 1.0,
              policy_name: str | None = None, baseline_name: str | None = None
              ) -> Attribution:
    """Why C moved from ``baseline`` to ``policy`` on ``system`` (a System, anything
    :func:`~causalfair.systems.as_system` accepts, or a TabularModel): by path, step and
    cell, exactly with a tabular model of independent units (``engine="exact"``), else by
    a paired Monte Carlo run (``engine="mc"``; ``n`` units per group, ``seed``).
    ``pair``: indices, the groups' names or ``"A-B"``, as :func:`causalfair.decompose`'s;
    ``"pi0"`` (the baseline action everywhere) is a policy or baseline on either engine."""
    check_engine(engine)
    mc_options(n, seed)  # Monte Carlo only, refused on every engine (cf.decompose's)
    alpha, gamma = check_alpha(alpha), check_gamma(gamma)  # on every engine, as n and seed
    # pair: names, "A-B", a Series, as cf.decompose takes them
    if isinstance(system, TabularModel) and engine != "mc":
        return attribute_exact(system, policy, baseline, 20 if horizon is None else horizon,
                               gamma=gamma, pair=pair_arg(pair, system.group_names),
                               policy_name=policy_name, baseline_name=baseline_name)
    sys_ = as_system(system)
    pair = pair_arg(pair, sys_.groups)
    T = sys_.horizon if horizon is None else horizon
    if engine_for(sys_, engine) == "exact":
        return attribute_exact(sys_.tabular, policy, baseline, T, gamma=gamma, pair=pair,
                               policy_name=policy_name, baseline_name=baseline_name,
                               system=sys_)
    if gamma != 1.0:
        raise InputError(f"gamma: bad value {gamma!r}; the Monte Carlo engine sums "
                         "undiscounted gains (gamma = 1).")
    # "pi0" (the exact engine's name for the baseline action everywhere) is "never" here
    named = {"policy": policy_name, "baseline": baseline_name}
    for key, pol in (("policy", policy), ("baseline", baseline)):
        if isinstance(pol, str) and pol == "pi0" and named[key] is None:
            named[key] = "pi0"
    policy, baseline = ("never" if isinstance(p, str) and p == "pi0" else p
                        for p in (policy, baseline))
    return attribute_mc(sys_, policy, baseline, T, n=n, seed=seed, alpha=alpha, pair=pair,
                        policy_name=named["policy"], baseline_name=named["baseline"])


def check_sums(att: Attribution) -> float:
    """Largest gap between the total change and the sums of its steps and of its cells
    (0 up to rounding: the parts are sums of the same numbers)."""
    tot = np.array([att.total[p][0] for p in PATHS])
    gaps = [np.abs(att.by_step.sum(1) - tot).max(), np.abs(att.by_cell.sum((1, 2)) - tot).max(),
            abs(att.total["C"][0] - tot.sum())]
    return float(max(gaps)) if all(math.isfinite(g) for g in gaps) else math.inf

"""The results every engine returns and every door reads: :class:`Decomposition`
(C = DPE + IPE + SPE per group, method.md sections 2-3; exact, Monte Carlo or from logs) and
:class:`BenefitResult` (Delta, Lambda and the worst pairs, method.md section 4). They sit
below the engines, so that an engine or the logs audit returns them without importing
another engine."""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair._io import N_COUNTS, fixed, sample_size
from causalfair._simultaneous import pair_z, simultaneous_dict, simultaneous_sentence
from causalfair._texttable import cell_columns, frame_text, worst_columns
from causalfair._validation import (
    check_alpha,
    check_int,
    check_keywords,
    check_pair,
    check_policy_name,
    check_unit,
    read_only,
    z_quantile,
)
from causalfair.errors import InputError, short
from causalfair.plotting import (
    benefit_figure,
    new_figure,
    text_only,
    waterfall,
    wrap,
)

__all__ = ["Decomposition", "BenefitResult", "DIAGNOSTIC_TOL", "LAMBDA_NEEDS", "SHARE_FLOOR",
           "check_pair", "waterfall", "new_figure", "wrap"]

#: Residual (relative to max(1, |values|)) above which an identity counts as violated.
DIAGNOSTIC_TOL = 1e-9

#: Lambda at or below which the worst pairs' shares of it are not printed: such a Lambda is
#: zero up to rounding (the exact engine gives about 1e-13 for a policy that treats equal
#: benefits alike), and a share of it is noise.
SHARE_FLOOR = 1e-9

#: Decimals of the printed worst-pairs table.
_DIGITS = 4

_EFFECTS = ("C", "DPE", "IPE", "SPE")

#: The arrays of each result, handed out read-only (:func:`causalfair._validation.read_only`).
_DEC_ARRAYS = ("V", "V_ps", "V_0", "steps", "utility_by_group", "group_weights", "decisions",
               "paired_var")
_BEN_ARRAYS = ("delta", "p_d1", "state_weights", "contributions", "visited")

#: Why a system has no Lambda, and the fix (benefit fairness pairs individuals of two
#: groups with the same level or features, method.md section 4).
LAMBDA_NEEDS = ("it declares neither levels nor feature names, and benefit fairness (Lambda) "
                "pairs individuals through them; give the simulator n_levels (observations "
                "with levels) or feature_names (one name per column of Observation.features)")


@dataclass(frozen=True, eq=False)
class Decomposition:
    """Result of a decomposition (exact or Monte Carlo); values are per group.

    ``V``, ``V_ps``, ``V_0``: expected gain under pi, pi^PS and pi0, arrays (G,).
    ``steps``: per-step expected gains, array (3, G, T) for (pi, pi^PS, pi0).
    ``utility_by_group``: expected decision-maker reward per group under pi, (G,);
    ``utility`` is the population's total (the groups' values weighted by their shares),
    as everywhere else ("utility" in audit.json, the report, the thresholds).
    ``se``: standard errors by quantity name (Monte Carlo), or None (exact).
    ``diagnostics``: residuals of the identities (exact engine) by name.
    ``notions``: other fairness notions the engine estimated alongside, by name (e.g.
    ``elbert_bias`` with ``elbert_bias_se`` and ``benefit_rate[GROUP]``, from a
    simulator that reports supply and demand; see :mod:`causalfair.engines.montecarlo`).
    ``Lambda``: benefit fairness (method.md section 4) of the pair; ``Lambda_ci``: its
    interval at level ``Lambda_ci_level`` (Monte Carlo by forks: the bootstrap interval of
    :mod:`causalfair.engines.benefit_mc`, its standard error in ``benefit.se``; exact: the
    point); ``benefit``: the :class:`BenefitResult` it came from
    (benefit table, worst pairs), when the engine computed one. ``decisions`` (Monte
    Carlo): (G, A, T) integer counts of the units of each group given each action at each
    step under pi (summed over the actions: the units of the group at that step; of a
    system that declares departed levels, those present); the selection rates of
    audit.json's ``selection`` come from them. ``gain_unit``: the unit of the system's gain
    (``System.gain.unit``, set by :func:`causalfair.decompose`), the axis unit of
    :meth:`plot`; None when not known. ``simultaneous``: m, the pairs the compared pair
    was chosen from (the default pair of more than two groups, picked from these estimates:
    m = G(G-1)/2; named or two groups: 1); with m > 1 the intervals of C, DPE, IPE and SPE
    are simultaneous over the m pairs (Bonferroni, z_{1 - alpha/(2m)};
    :mod:`causalfair._simultaneous`), so that they cover the chosen pair's true values at
    level 1 - alpha whichever pair the data picked. ``n`` (Monte Carlo) counts what
    ``n_counts`` says: ``"units_per_group"``, or ``"worlds"`` of coupled units, each of
    ``units_per_world`` units, ``group_units_per_world`` of each group when every world has
    the same (:attr:`sample_size` says it in words). ``alpha``: the engine's (the call's
    ``alpha``), the level 1 - alpha that print, :meth:`summary`, :meth:`to_frame`,
    :meth:`conf_int` and :meth:`plot` take when given none (``to_dict()``'s ``ci95``: 95%).
    ``paired_var`` (Monte Carlo on coupled units, whose groups share worlds): value (V, V_ps,
    V_0, direct, indirect, utility) -> (G, G): the variance of each pair's estimated
    difference, from its per-world differences (every pair's paired se; the compared pair's
    is ``se``'s), each group's own on the diagonal.
    """

    engine: str
    groups: tuple[str, ...]
    pair: tuple[int, int]
    horizon: int
    V: np.ndarray
    V_ps: np.ndarray
    V_0: np.ndarray
    steps: np.ndarray
    utility_by_group: np.ndarray
    group_weights: np.ndarray
    gamma: float = 1.0
    Lambda: float | None = None
    se: Mapping[str, float] | None = None
    n: int | None = None
    seed: int | None = None
    diagnostics: Mapping[str, float] = field(default_factory=dict)
    policy_name: str = "pi"
    model_name: str = "model"
    notions: Mapping[str, float] = field(default_factory=dict)
    Lambda_ci: tuple[float, float] | None = None
    Lambda_ci_level: float | None = None
    benefit: Any = None
    decisions: Any = None
    gain_unit: str | None = None  # the system's (Gain.unit), for figures; None: not known
    simultaneous: int = 1  # m: the compared pair was chosen from m pairs (Bonferroni over them)
    alpha: float = 0.05  # the engine's alpha: the level 1 - alpha its views default to
    n_counts: str = "units_per_group"  # what n counts (N_COUNTS): or worlds of coupled units
    units_per_world: int | None = None  # worlds: the units of one world
    group_units_per_world: Mapping[str, int] | None = None  # worlds: each group's, if one in all
    paired_var: Mapping[str, np.ndarray] | None = None  # coupled units: (G, G) per value

    def __post_init__(self) -> None:
        check_policy_name(self.policy_name)
        read_only(self, _DEC_ARRAYS)
        if self.n_counts not in N_COUNTS:
            raise InputError(f"n_counts: expected one of {', '.join(N_COUNTS)}, got "
                             f"{short(self.n_counts, 40)}.")

    def __setstate__(self, state: dict[str, Any]) -> None:  # unpickled or copied: checked,
        self.__dict__.update(state)  # its arrays read-only again (pickle makes them writable)
        self.__post_init__()

    # -------------------------------------------------------------- the four figures
    def _gap(self, v: np.ndarray) -> float:
        a, b = self.pair
        return float(v[a] - v[b])

    @property
    def C(self) -> float:
        """Qualification-gain disparity E[V^pi_a] - E[V^pi_b]."""
        return self._gap(self.V)

    @property
    def DPE(self) -> float:
        """Direct policy effect: gap in V^pi - V^PS."""
        return self._gap(self.V - self.V_ps)

    @property
    def IPE(self) -> float:
        """Indirect policy effect: gap in V^PS - V^pi0."""
        return self._gap(self.V_ps - self.V_0)

    @property
    def SPE(self) -> float:
        """Spurious policy effect: gap in V^pi0."""
        return self._gap(self.V_0)

    @property
    def utility(self) -> float:
        """Expected total reward of the population under pi: the groups' utilities
        weighted by their shares (per group: :attr:`utility_by_group`)."""
        return float(self.group_weights @ self.utility_by_group)

    @property
    def total_utility(self) -> float:
        """The same as :attr:`utility`."""
        return self.utility

    @property
    def sample_size(self) -> str:
        """What ``n`` is (:func:`causalfair._io.sample_size`): "200 per group", or "200 worlds of
        6 units (2 per group)" of coupled units; "" for an exact result."""
        return "" if self.n is None else sample_size(self.n, self.n_counts, self.units_per_world,
                                                     self.group_units_per_world)

    @property
    def diagnostics_ok(self) -> bool | None:
        """True when every identity holds to DIAGNOSTIC_TOL; None when the engine checks
        none (Monte Carlo: its estimates satisfy C = DPE + IPE + SPE by construction)."""
        if not self.diagnostics:
            return None
        return all(abs(v) <= DIAGNOSTIC_TOL for v in self.diagnostics.values())

    def level_alpha(self, alpha: Any = None) -> float:
        """The ``alpha`` a view was asked for, checked (:func:`check_alpha`), else
        :attr:`alpha`: every view's, an exact result's too (whose intervals are points)."""
        return self.alpha if alpha is None else check_alpha(alpha)

    # ------------------------------------------------------------- tabular views
    def estimates(self) -> dict[str, float]:
        """Every point estimate by name (the keys ``se`` and ``conf_int`` use)."""
        out = {k: getattr(self, k) for k in _EFFECTS}
        for i, g in enumerate(self.groups):
            out[f"V[{g}]"] = float(self.V[i])
            out[f"V_ps[{g}]"] = float(self.V_ps[i])
            out[f"V_0[{g}]"] = float(self.V_0[i])
            out[f"direct[{g}]"] = float(self.V[i] - self.V_ps[i])
            out[f"indirect[{g}]"] = float(self.V_ps[i] - self.V_0[i])
            out[f"utility[{g}]"] = float(self.utility_by_group[i])
        out["utility"] = self.total_utility
        return out

    @check_keywords(name="Decomposition.intervals")
    def intervals(self, alpha: float | None = None) -> dict[str, tuple[float, float]]:
        """(1 - alpha) (default :attr:`alpha`) normal-approximation interval (lower, upper) per quantity (the keys
        of :meth:`estimates`); exact results have zero-width intervals. No pandas: what a
        training worker's audits read (:meth:`conf_int` is its table). C, DPE, IPE and SPE
        of a pair chosen from the data (:attr:`simultaneous` m > 1): simultaneous over the m
        pairs, z_{1 - alpha/(2m)} (:func:`causalfair._simultaneous.pair_z`)."""
        alpha = self.level_alpha(alpha)
        z = z_quantile(alpha)
        zc = z if self.simultaneous == 1 else pair_z(alpha, self.simultaneous)
        se = self.se or {}
        return {k: (v - (zc if k in _EFFECTS else z) * se.get(k, 0.0),
                    v + (zc if k in _EFFECTS else z) * se.get(k, 0.0))
                for k, v in self.estimates().items()}

    @check_keywords(name="Decomposition.conf_int")
    def conf_int(self, alpha: float | None = None) -> Any:
        """(1 - alpha) normal-approximation intervals per quantity, as a DataFrame with
        columns ``lower`` and ``upper`` (:meth:`intervals`). Exact results have zero-width
        intervals. No ``Lambda`` row, unlike :meth:`to_frame`: these rows are audit.json's
        ``decomposition.ci95`` and ``causalfair decompose --json``'s ``ci``, whose keys stay
        as they are; Lambda's interval is not a normal one (``Lambda_ci``, the forks'
        bootstrap interval; :meth:`lambda_row` at any level)."""
        import pandas as pd

        return pd.DataFrame.from_dict(self.intervals(alpha), orient="index",
                                      columns=["lower", "upper"])

    @check_keywords(name="Decomposition.to_frame")
    def to_frame(self, alpha: float | None = None, *, pair_level: bool = False) -> Any:
        """One row per quantity (index ``quantity``): estimate, se (0 for exact), and the CI
        bounds; a ``Lambda`` row when Lambda was computed (:meth:`lambda_row`).
        ``pair_level=True``: indexed (pair, quantity) instead, the pair named ``"A-B"``
        (:attr:`pair_name`), the shape of ``BenefitResult.to_frame()`` and
        ``GroupComparison.to_frame()``, so that ``pd.concat`` stacks them."""
        import pandas as pd

        if not isinstance(pair_level, (bool, np.bool_)):
            raise InputError(f"pair_level: bad value {short(pair_level, 40)}; give True (index "
                             "(pair, quantity)) or False (index quantity).")

        est = self.estimates()
        se = self.se or {}
        ci = self.conf_int(alpha)
        df = pd.DataFrame({
            "estimate": pd.Series(est),
            "se": pd.Series({k: float(se.get(k, 0.0)) for k in est}),
        })
        df["ci_lower"] = ci["lower"]
        df["ci_upper"] = ci["upper"]
        lam = self.lambda_row(alpha)
        if lam is not None:
            df.loc["Lambda"] = list(lam)
        df.index.name = "quantity"
        if pair_level:
            df.index = pd.MultiIndex.from_product([[self.pair_name], df.index],
                                                  names=["pair", "quantity"])
        return df

    @property
    def pair_name(self) -> str:
        """The compared groups as a pair is named everywhere: ``"A-B"`` (C is A's gain
        minus B's)."""
        a, b = self.pair
        return f"{self.groups[a]}-{self.groups[b]}"

    @check_keywords(name="Decomposition.lambda_row")
    def lambda_row(self, alpha: float | None = None
                   ) -> tuple[float, float, float, float] | None:
        """Lambda as the report's metrics table has it: (estimate, se, ci_lower, ci_upper),
        None when Lambda was not computed. The interval is ``Lambda_ci`` when it is at
        level 1 - ``alpha`` (the bootstrap interval of the forks, or the log audit's), else
        estimate +- z * se floored at 0 (Lambda >= 0); an exact result's se is 0 and its
        interval the point; a Lambda computed exactly inside a Monte Carlo result (from
        the system's tabular model) has no sampling error and reads NaN (the report's
        n/a)."""
        if self.Lambda is None:
            return None
        lam, alpha = float(self.Lambda), self.level_alpha(alpha)
        ben_se = getattr(self.benefit, "se", None)
        s = ben_se if ben_se is not None else (self.se or {}).get("Lambda")
        if self.Lambda_ci is not None and self.Lambda_ci_level is not None \
                and abs(self.Lambda_ci_level - (1.0 - alpha)) < 1e-9:
            lo, hi = self.Lambda_ci
        elif s is not None:
            z = z_quantile(alpha)
            lo, hi = max(0.0, lam - z * float(s)), lam + z * float(s)
        elif not self.se:  # an exact result: the point, as its other rows
            return lam, 0.0, lam, lam
        else:
            return lam, float("nan"), float("nan"), float("nan")
        return lam, float("nan") if s is None else float(s), float(lo), float(hi)

    def groups_frame(self) -> Any:
        """Per-group values: V, V_ps, V_0, direct, indirect, spurious (= V_0), utility."""
        import pandas as pd

        return pd.DataFrame(
            {"V": self.V, "V_ps": self.V_ps, "V_0": self.V_0, "direct": self.V - self.V_ps,
             "indirect": self.V_ps - self.V_0, "spurious": self.V_0,
             "utility": self.utility_by_group}, index=pd.Index(self.groups, name="group"))

    # ------------------------------------------- fairlearn's MetricFrame vocabulary
    @property
    def by_group(self) -> Any:
        """Per-group values, one row per group (as fairlearn's ``MetricFrame.by_group``):
        V (expected total gain under pi), V_ps, V_0, direct, indirect, spurious, utility."""
        return self.groups_frame()

    @property
    def overall(self) -> Any:
        """The population's values: the groups' rows of :attr:`by_group` weighted by the
        groups' shares (a pandas Series)."""
        df = self.by_group
        return (df.mul(np.asarray(self.group_weights, dtype=float), axis=0).sum()
                / float(np.sum(self.group_weights))).rename("overall")

    @check_keywords(name="Decomposition.difference")
    def difference(self, method: str = "between_groups") -> Any:
        """Differences between groups, per column of :attr:`by_group` (a pandas Series).

        ``"between_groups"`` (fairlearn's default): largest minus smallest group value,
        never negative. ``"pair"``: the audited pair's signed difference s+ minus s-, so
        ``difference("pair")`` holds C (``V``), DPE (``direct``), IPE (``indirect``) and
        SPE (``spurious``). ``"to_overall"``: the largest absolute gap between a group and
        :attr:`overall`.
        """
        df = self.by_group
        if method == "between_groups":
            out = df.max() - df.min()
        elif method == "pair":
            a, b = self.pair
            out = df.iloc[a] - df.iloc[b]
        elif method == "to_overall":
            out = (df - self.overall).abs().max()
        else:
            raise InputError(f"difference: method: unknown value {method!r}; allowed values: "
                             "between_groups, pair, to_overall.")
        return out.rename(f"difference ({method})")

    def steps_frame(self) -> Any:
        """Per-step expected gains (long format): t, group, pi, ps, pi0, direct, indirect."""
        import pandas as pd

        G, T = self.steps.shape[1:]
        return pd.DataFrame({
            "t": np.tile(np.arange(T), G),
            "group": np.repeat(self.groups, T),
            "pi": self.steps[0].reshape(-1),
            "ps": self.steps[1].reshape(-1),
            "pi0": self.steps[2].reshape(-1),
            "direct": (self.steps[0] - self.steps[1]).reshape(-1),
            "indirect": (self.steps[1] - self.steps[2]).reshape(-1),
        })

    # ---------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (floats, strings, lists)."""
        a, b = self.pair
        se = dict(self.se) if self.se is not None else None
        groups = {}
        for i, g in enumerate(self.groups):
            groups[g] = {
                "V": float(self.V[i]),
                "V_ps": float(self.V_ps[i]),
                "V_0": float(self.V_0[i]),
                "direct": float(self.V[i] - self.V_ps[i]),
                "indirect": float(self.V_ps[i] - self.V_0[i]),
                "utility": float(self.utility_by_group[i]),
                "weight": float(self.group_weights[i]),
            }
        out: dict[str, Any] = {
            "engine": self.engine,
            "model": self.model_name,
            "policy": self.policy_name,
            "horizon": self.horizon,
            "gamma": self.gamma,
            "pair": [self.groups[a], self.groups[b]],
            "C": self.C,
            "DPE": self.DPE,
            "IPE": self.IPE,
            "SPE": self.SPE,
            "Lambda": self.Lambda,
            "Lambda_ci": None if self.Lambda_ci is None else [float(x) for x in self.Lambda_ci],
            "Lambda_ci_level": self.Lambda_ci_level,
            "Lambda_se": getattr(self.benefit, "se", None),
            "utility": self.total_utility,
            "groups": groups,
            "steps": {
                g: {
                    "pi": self.steps[0, i].tolist(),
                    "ps": self.steps[1, i].tolist(),
                    "pi0": self.steps[2, i].tolist(),
                }
                for i, g in enumerate(self.groups)
            },
            "diagnostics": {
                "tolerance": DIAGNOSTIC_TOL,
                "ok": self.diagnostics_ok,
                "residuals": {k: float(v) for k, v in self.diagnostics.items()},
            },
        }
        if se is not None:
            out["se"] = {k: float(v) for k, v in se.items()}
            out["ci95"] = {k: [float(lo), float(hi)] for k, (lo, hi) in self.intervals(0.05).items()}
            if self.simultaneous > 1:  # ci95's C, DPE, IPE, SPE: over the pairs it was chosen from
                out["simultaneous"] = simultaneous_dict(self.simultaneous, 0.05)
        if self.notions:
            out["notions"] = {k: float(v) for k, v in self.notions.items()}
        if self.n is not None:  # what it counts: units of each group, or worlds of U units
            out.update(n=self.n, n_counts=self.n_counts, **{k: v for k, v in (
                ("units_per_world", self.units_per_world),
                ("group_units_per_world", self.group_units_per_world)) if v is not None})
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    @check_keywords(name="Decomposition.summary")
    def summary(self, alpha: float | None = None) -> str:
        """Plain text: the effects with their (1 - ``alpha``; default :attr:`alpha`) normal
        intervals when there are standard errors, Lambda, utility and the per-group values."""
        (a, b), alpha = self.pair, self.level_alpha(alpha)
        lines = [
            f"Decomposition of the qualification-gain disparity ({self.engine} engine)",
            f"  model: {self.model_name}   policy: {self.policy_name}   horizon T = {self.horizon}"
            + (f"   gamma = {self.gamma:g}" if self.gamma != 1.0 else ""),
            f"  pair: {self.groups[a]} - {self.groups[b]}"
            + (f"   n = {self.sample_size}, seed = {self.seed}" if self.n is not None else ""),
            "",
        ]
        ci = self.intervals(alpha) if self.se else None  # (conf_int's numbers, no pandas)
        for k in _EFFECTS:
            v = getattr(self, k)
            row = f"  {k:<4} = {fixed(v, sign=True)}"
            if ci is not None:
                row += (f"   {100 * (1 - alpha):g}% CI [{fixed(ci[k][0], sign=True)}, "
                        f"{fixed(ci[k][1], sign=True)}]")
            lines.append(row)
        if ci is not None and self.simultaneous > 1:
            lines.append(f"  {self.simultaneous_note(alpha)}")
        if self._lambda_line():
            lines.append(f"  {self._lambda_line()}")
        lines.append(f"  utility = {fixed(self.total_utility, sign=True)}  (expected reward, "
                     "population-weighted)")
        w = max(10, *(len(str(g)) for g in self.groups))  # long group names keep the columns
        lines += ["", f"  {'group':<{w}}{'V^pi':>12}{'V^PS':>12}{'V^pi0':>12}{'direct':>12}"
                      f"{'indirect':>12}"]
        for i, g in enumerate(self.groups):
            lines.append(
                f"  {g:<{w}}" + "".join(fixed(v, width=12) for v in (
                    self.V[i], self.V_ps[i], self.V_0[i], self.V[i] - self.V_ps[i],
                    self.V_ps[i] - self.V_0[i])))
        if self.diagnostics:
            worst = max(abs(v) for v in self.diagnostics.values())
            status = "ok" if self.diagnostics_ok else "VIOLATED"
            lines += ["", f"  identities ({', '.join(self.diagnostics)}): {status}, "
                          f"largest residual {worst:.2e}"]
        return "\n".join(lines)

    @check_keywords(name="Decomposition.simultaneous_note")
    def simultaneous_note(self, alpha: float | None = None) -> str:
        """The sentence on a data-chosen pair's intervals
        (:func:`causalfair._simultaneous.simultaneous_sentence`); "" when there is none to
        say (a named pair, two groups, no standard errors)."""
        alpha = self.level_alpha(alpha)
        if self.simultaneous == 1 or not self.se:
            return ""
        return simultaneous_sentence(self.pair_name, self.simultaneous, alpha)

    def _lambda_line(self) -> str:
        """Lambda with its interval (Monte Carlo), or why a Monte Carlo result has none."""
        if self.Lambda is None:
            return (f"Lambda: not computed: {LAMBDA_NEEDS}"
                    if self.engine == "mc" and len(self.groups) >= 2 else "")
        ci_l = (f"   {100 * self.Lambda_ci_level:g}% CI [{self.Lambda_ci[0]:.6f}, "
                f"{self.Lambda_ci[1]:.6f}]" if self.Lambda_ci is not None
                and self.Lambda_ci_level is not None and self.se else "")
        return f"Lambda = {self.Lambda:.6f}{ci_l}  (benefit fairness)"

    def __str__(self) -> str:
        return self.summary()

    @check_keywords(name="Decomposition.plot")
    def plot(self, alpha: float | None = None, unit: str | None = None, *, ax: Any = None) -> Any:
        """The waterfall of C into SPE, IPE and DPE (the report's headline figure), with
        1 - ``alpha`` (default :attr:`alpha`) intervals for Monte Carlo results: a matplotlib Figure (Agg canvas;
        ``fig.savefig("waterfall.png")``; Jupyter shows it), or, with ``ax`` (a matplotlib
        Axes, e.g. one panel of a slide), drawn there and that Axes' Figure returned.
        ``unit``: the gain's unit on the axis; default :attr:`gain_unit`, else "gain
        units"."""
        with text_only():  # group names as written, never mathtext
            return waterfall(self, self.level_alpha(alpha), check_unit(unit) or self.gain_unit or "gain units",
                             ax=ax)[0]

    def __repr__(self) -> str:
        a, b = self.pair
        lam = "" if self.Lambda is None else f", Lambda={self.Lambda:.6g}"
        return (
            f"Decomposition(engine={self.engine!r}, pair=({self.groups[a]!r}, "
            f"{self.groups[b]!r}), C={self.C:.6g}, DPE={self.DPE:.6g}, IPE={self.IPE:.6g}, "
            f"SPE={self.SPE:.6g}{lam})"
        )

    def _repr_html_(self) -> str:
        df = self.to_frame()
        if not self.se:  # exact: one number per quantity
            df = df[["estimate"]].rename(columns={"estimate": "value"})
        a, b = self.pair
        title = html.escape(
            f"Decomposition ({self.engine}) - model {self.model_name}, policy "
            f"{self.policy_name}, T = {self.horizon}"
        )
        caption = html.escape(
            f"C = DPE + IPE + SPE: the gap in expected total gain, {self.groups[a]} minus "
            f"{self.groups[b]} (positive favours {self.groups[a]}); DPE the decisions' direct "
            f"effect, IPE their delayed effect, SPE the gap without decisions"
            + ("" if not self.se else f"; intervals at {100 * (1 - self.alpha):g}%") + "."
            + (f" {self.simultaneous_note()}" if self.simultaneous_note() else ""))
        lam = self._lambda_line()
        lam_html = f"<p>{html.escape(lam)}</p>" if lam else ""
        return (f"<div><strong>{title}</strong>"
                f"{df.to_html(float_format=fixed)}{lam_html}"
                f"<p style='font-size:0.85em;color:#57606a'>{caption}</p></div>")


@dataclass(frozen=True, eq=False)
class BenefitResult:
    """Benefit fairness of a policy: Delta table, Lambda and the per-pair contributions
    (views: :meth:`table`, :meth:`worst_pairs`, :meth:`to_frame`, :meth:`plot`)."""

    Lambda: float
    eps: float
    weights: str
    delta: np.ndarray  # (G, K); (G, K, A) benefit of each action over the baseline for A > 2
    p_d1: np.ndarray  # (G, K) = pi(d1 | x, s); (G, K, A) action distributions for A > 2
    state_weights: np.ndarray  # (G, K) = P(x | s)
    contributions: np.ndarray  # (K, K) for the pair
    pair: tuple[int, int]
    groups: tuple[str, ...]
    levels: tuple[str, ...]
    dpe_prop1: float  # DPE in Proposition-1 form, sum_t gap of E[pi * Delta]
    actions: tuple[str, ...] = ("d0", "d1")
    method: str = "exact"  # "exact" (tabular model) or "mc" (forks on a simulator)
    se: float | None = None  # Monte Carlo: bootstrap standard error of Lambda
    ci: tuple[float, float] | None = None  # Monte Carlo: percentile interval of Lambda
    ci_level: float | None = None
    cells: str = "levels"  # what the pairs pair: "levels", or feature bins (Monte Carlo)
    eps_source: str = "given"  # how eps was chosen (causalfair.engines.benefit.resolve_eps)
    notion: str = "Lambda"  # "Lambda_T": benefits to the horizon (engines.benefit_horizon)
    # (G, K) whether some unit of the group visits the cell (Monte Carlo; None: the exact
    # table, defined at every level): an unvisited cell has no estimate of Delta or of
    # the policy's distribution there (delta and p_d1 hold 0, with weight 0 in Lambda)
    visited: np.ndarray | None = None
    # the departed levels the system declares (individuals who left; weight 0 in Lambda):
    # never listed by worst_pairs
    departed: tuple[int, ...] = ()
    gain_unit: str | None = None  # the system's (Gain.unit), the axis unit of plot()

    def __post_init__(self) -> None:
        read_only(self, _BEN_ARRAYS)

    def __setstate__(self, state: dict[str, Any]) -> None:  # as Decomposition's
        self.__dict__.update(state)
        self.__post_init__()

    @property
    def multi(self) -> bool:
        return self.delta.ndim == 3

    @property
    def Lambda_ci(self) -> tuple[float, float] | None:
        """Lambda's interval as a Decomposition names it: ``ci`` (forks), zero width exact."""
        if self.ci is not None or self.method != "exact":
            return self.ci
        return (float(self.Lambda), float(self.Lambda))

    def table(self) -> Any:
        """Delta(x, s), pi(d1 | x, s) and P(x | s), one row per (group, level); by forks
        also whether the group visits the level (``visited``), with Delta and pi NaN
        where it does not (no estimate there)."""
        import pandas as pd

        G, K = self.delta.shape[:2]
        cols: dict[str, Any] = {"group": np.repeat(self.groups, K), "level": np.tile(self.levels, G)}
        seen = None if self.visited is None else np.asarray(self.visited, dtype=bool).reshape(-1)

        def col(arr: np.ndarray) -> np.ndarray:
            return arr.reshape(-1) if seen is None else np.where(seen, arr.reshape(-1), np.nan)

        if self.multi:
            for i, act in enumerate(self.actions):
                cols[f"Delta[{act}]"] = col(self.delta[..., i])
            for i, act in enumerate(self.actions):
                cols[f"pi[{act}]"] = col(self.p_d1[..., i])
        else:
            cols["Delta"] = col(self.delta)
            cols["p_d1"] = col(self.p_d1)
        cols["P_x"] = self.state_weights.reshape(-1)
        if seen is not None:
            cols["visited"] = seen
        return pd.DataFrame(cols)

    @check_keywords(name="BenefitResult.worst_pairs")
    def worst_pairs(self, n: int = 10) -> Any:
        """The ``n`` (x, x') pairs contributing most to Lambda, largest first (never a pair
        with a ``departed`` level)."""
        import pandas as pd

        return pd.DataFrame(self._worst_columns(n))

    def _worst_columns(self, n: int) -> dict[str, Any]:
        """:meth:`worst_pairs`' columns, label -> values (no pandas: the commands print and
        write them without it; :func:`causalfair._texttable.worst_columns`)."""
        return worst_columns(self, check_int("n", n, 0))

    @property
    def shares_meaningful(self) -> bool:
        """Whether Lambda is above :data:`SHARE_FLOOR`, so that shares of it mean something."""
        return self.Lambda > SHARE_FLOOR

    @check_keywords(name="BenefitResult.worst_pairs_table")
    def worst_pairs_table(self, n: int = 10, digits: int = _DIGITS) -> Any:
        """:meth:`worst_pairs` for reading: numbers rounded to ``digits`` decimals; with
        more than two actions one row per pair and action (the ``action`` column names it;
        the pair's weight and contribution repeat); the ``share`` column only when Lambda
        is above :data:`SHARE_FLOOR`."""
        digits = check_int("digits", digits, 0)
        df = self.worst_pairs(n)
        if self.multi:  # one row per pair and action: rectangular, every number named
            import pandas as pd

            A = len(self.actions)
            per_action = [c for c in df.columns if c.startswith(("Delta[", "pi["))]
            rows = df.loc[df.index.repeat(A)].reset_index(drop=True)
            rows.insert(2, "action", list(self.actions) * len(df))
            for c in per_action:
                rows[c] = pd.Series([float(v) for vals in df[c] for v in vals], dtype=float)
            df = rows
        if not self.shares_meaningful:
            df = df.drop(columns="share")
        return df.round(digits)

    @property
    def pair_name(self) -> str:
        """The compared groups as a pair is named everywhere: ``"A-B"``."""
        a, b = self.pair
        return f"{self.groups[a]}-{self.groups[b]}"

    @check_keywords(name="BenefitResult.to_frame")
    def to_frame(self, alpha: float | None = None) -> Any:
        """One row, indexed (pair, quantity) as
        :meth:`~causalfair.engines.groups.GroupComparison.to_frame`: the pair ``"A-B"`` and
        the notion (``Lambda``, or ``Lambda_T``) with estimate, se, ci_lower, ci_upper. Exact:
        se 0 and the point; by forks: the bootstrap se and the reported interval ``ci`` at
        its level (the default), at another level 1 - ``alpha`` estimate +- z se floored at 0
        (as :meth:`Decomposition.to_frame`); NaN where there is neither."""
        import pandas as pd

        lam = float(self.Lambda)
        if alpha is None:  # the level the result was computed at (its printed interval's)
            alpha = 0.05 if self.ci_level is None else 1.0 - float(self.ci_level)
        if self.ci is not None and self.ci_level is not None \
                and abs(self.ci_level - (1.0 - check_alpha(alpha))) < 1e-9:
            row = [lam, np.nan if self.se is None else float(self.se), *map(float, self.ci)]
        elif self.se is not None:
            z = z_quantile(alpha)
            row = [lam, float(self.se), max(0.0, lam - z * self.se), lam + z * self.se]
        else:
            check_alpha(alpha)
            row = [lam, 0.0, lam, lam] if self.method == "exact" else [lam] + [np.nan] * 3
        index = pd.MultiIndex.from_tuples([(self.pair_name, self.notion)],
                                          names=["pair", "quantity"])
        return pd.DataFrame([row], index=index,
                            columns=["estimate", "se", "ci_lower", "ci_upper"])

    @check_keywords(name="BenefitResult.plot")
    def plot(self, n_worst: int = 10, unit: str | None = None, *, action: str | None = None,
             ax: Any = None) -> Any:
        """Benefit Delta(x, s) (x axis, in ``unit``) against the probability of the
        decision (y axis) at every level of every group, marker area ~ P(x | s), the
        ``n_worst`` pairs of Lambda joined and ranked #1, #2, ... (the report's benefit
        figure): a matplotlib Figure on the Agg canvas (``fig.savefig(...)``; Jupyter shows
        it; nothing is shown or written here), or, with ``ax`` (a matplotlib Axes), drawn
        there (its legend inside it) and that Axes' Figure returned. With more than two
        actions: one panel per action whose benefit over the baseline is not 0 everywhere,
        or the one ``action`` named (a label of :attr:`actions`; with ``ax``, required).
        By forks, a level a group never visits has no estimate and no point. ``unit``: the
        gain's unit; default :attr:`gain_unit` (set by :func:`causalfair.benefit_fairness`
        from the system), else "gain units"."""
        return benefit_figure(self, n_worst, unit, action=action, ax=ax)

    @check_keywords(name="BenefitResult.no_pairs_note")
    def no_pairs_note(self, cells: str | None = None) -> str:
        """What is said instead of a table of pairs that each contribute 0 (a policy that
        never acts, or 3 actions with Lambda 0): by summary(), the notebook view and the
        report; ``cells``: what the pairs are of ("levels", "states"), when named."""
        of = f" of {cells}" if cells else ""
        return (f"no pair{of} contributes to {self.notion} ({self.notion} = "
                f"{self.Lambda:.3g}, at most {SHARE_FLOOR:g}: zero up to rounding)")

    @check_keywords(name="BenefitResult.to_dict")
    def to_dict(self, n_worst: int = 10) -> dict[str, Any]:
        worst = self._worst_columns(n_worst)  # DataFrame.to_dict("records"), without pandas
        worst_rows = [{k: v.item() if isinstance(v, np.generic) else v for k, v in row.items()}
                      for row in (dict(zip(worst, vals, strict=True))
                                  for vals in zip(*worst.values(), strict=True))]
        return {
            **({"notion": self.notion} if self.notion != "Lambda" else {}),
            "Lambda": self.Lambda,
            "eps": self.eps,
            "eps_source": self.eps_source,
            "weights": self.weights,
            "pair": [self.groups[self.pair[0]], self.groups[self.pair[1]]],  # as Decomposition's
            "DPE_prop1": self.dpe_prop1,
            **({"method": self.method, "se": self.se,
                "ci": None if self.ci is None else list(self.ci), "ci_level": self.ci_level,
                "cells": self.cells} if self.method != "exact" else {}),
            "delta": {g: self.delta[i].tolist() for i, g in enumerate(self.groups)},
            "p_d1": {g: self.p_d1[i].tolist() for i, g in enumerate(self.groups)},
            "worst_pairs": worst_rows,
        }

    @check_keywords(name="BenefitResult.summary")
    def summary(self, n_worst: int = 5, cells: str = "level") -> str:
        """``cells``: the cells' name in the worst pairs' header (``"state"``: binned
        features; :func:`causalfair._texttable.cell_word`)."""
        ci = (f", {100 * self.ci_level:g}% bootstrap CI [{self.ci[0]:.6f}, {self.ci[1]:.6f}]"
              if self.ci is not None else "")
        lines = [
            f"Benefit fairness{' over the horizon' if self.notion != 'Lambda' else ''}: "
            f"{self.notion} = {self.Lambda:.6f}{ci} (eps = {self.eps:g} in the "
            f"gain's units, {self.eps_source}; P(x | s) = {self.weights}"
            + (f"; Monte Carlo by forks, pairs of {self.cells})" if self.method == "mc" else ")"),
            f"DPE (Proposition 1 form) = {fixed(self.dpe_prop1, sign=True)}",
            f"Worst pairs: not shown: {self.no_pairs_note()}" if not self.shares_meaningful else
            "Worst pairs:\n" + self._worst_text(n_worst, cells),
        ]
        return "\n".join(lines)

    def _worst_text(self, n: int, cells: str = "level") -> str:
        """``worst_pairs_table(n).to_string(index=False)``, its cells named ``cells``,
        without importing pandas where :func:`causalfair._texttable.frame_text` covers the
        table (two actions)."""
        if not self.multi:
            cols = {k: np.round(v, _DIGITS) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                    else v for k, v in self._worst_columns(n).items()}
            if not self.shares_meaningful:
                del cols["share"]
            text = frame_text(dict(zip(cell_columns(cols, cells), cols.values(), strict=True)))
            if text is not None:
                return text
        df = self.worst_pairs_table(n)
        df.columns = cell_columns(df.columns, cells)
        return df.to_string(index=False)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        ci = ("exact" if self.ci is None else
              f"{100 * (self.ci_level or 0.95):g}% CI [{self.ci[0]:.6g}, {self.ci[1]:.6g}]")
        a, b = self.pair
        return (f"BenefitResult(Lambda={self.Lambda:.6g} ({ci}), eps={self.eps:g}, "
                f"weights={self.weights!r}, pair=({self.groups[a]!r}, {self.groups[b]!r}), "
                f"method={self.method!r}, delta{tuple(self.delta.shape)}, "
                f"contributions{tuple(self.contributions.shape)}, actions={len(self.actions)})")

    def _repr_html_(self) -> str:
        a, b = self.pair
        ci = ("" if self.ci is None else f", {100 * (self.ci_level or 0.95):g}% CI "
              f"[{self.ci[0]:.6f}, {self.ci[1]:.6f}]")
        head = html.escape(f"Benefit fairness: {self.notion} = {self.Lambda:.6f}{ci}")
        how = html.escape(f"{self.groups[a]} vs {self.groups[b]}; eps = {self.eps:g}, "
                          f"P(x | s) = {self.weights}")
        return (
            f"<div><strong>{head}</strong> ({how})"
            + (self.worst_pairs_table().to_html(index=False) if self.shares_meaningful else
               f"<p>{html.escape('Worst pairs: not shown: ' + self.no_pairs_note())}</p>")
            + "</div>"
        )

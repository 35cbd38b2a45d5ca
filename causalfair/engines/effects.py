"""Decomposition of the qualification-gain disparity (method.md sections 2-3).

For a deployed policy pi, groups s+ and s- and horizon T (undiscounted by default):

    V^pi_s  = E[ sum_{t<T} g^s(x_t, x_{t+1}) ],  x_0 ~ P(x_0 | s), x under do(pi, s)
    V^PS_s  = E[ sum_{t<T} h0(x_t, s) ],          x under pi (path-specific pi^PS)
    V^pi0_s = E[ sum_{t<T} h0(x_t, s) ],          x under pi0 (always d0)

    C   = V^pi_{s+} - V^pi_{s-}
    DPE = (V^pi - V^PS)_{s+} - (V^pi - V^PS)_{s-}       direct effect
    IPE = (V^PS - V^pi0)_{s+} - (V^PS - V^pi0)_{s-}     indirect (delayed) effect
    SPE = V^pi0_{s+} - V^pi0_{s-}                        spurious effect

The exact engine (:func:`decompose`) propagates state distributions forward (for the
estimates and per-step curves) and value functions backward (an independent second
computation); the identities of method.md are checked between the two and reported
as diagnostics. With more than two groups, C and its parts are computed for one pair
of groups: by default the pair with the largest and the smallest V^pi, so that C is
the largest pairwise gap (and still equals DPE + IPE + SPE).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._validation import check_horizon, z_quantile
from causalfair.engines.benefit import lambda_metric
from causalfair.errors import InputError
from causalfair.model import ModelError, TabularModel
from causalfair.policies.core import Policy, policy_table

__all__ = [
    "Decomposition",
    "decompose",
    "value_tables",
    "DIAGNOSTIC_TOL",
    "check_horizon",
]

#: Residual (relative to max(1, |values|)) above which an identity counts as violated.
DIAGNOSTIC_TOL = 1e-9

_EFFECTS = ("C", "DPE", "IPE", "SPE")


def _z(alpha: float) -> float:
    return z_quantile(alpha)


@dataclass(frozen=True, eq=False)
class Decomposition:
    """Result of a decomposition (exact or Monte Carlo); values are per group.

    ``V``, ``V_ps``, ``V_0``: expected gain under pi, pi^PS and pi0, arrays (G,).
    ``steps``: per-step expected gains, array (3, G, T) for (pi, pi^PS, pi0).
    ``utility``: expected decision-maker reward per group under pi, (G,).
    ``se``: standard errors by quantity name (Monte Carlo), or None (exact).
    ``diagnostics``: residuals of the identities (exact engine) by name.
    ``notions``: other fairness notions the engine estimated alongside, by name (e.g.
    ``elbert_bias`` with ``elbert_bias_se`` and ``benefit_rate[GROUP]``, from a
    simulator that reports supply and demand; see :mod:`causalfair.engines.montecarlo`).
    ``Lambda``: benefit fairness (method.md section 4) of the pair; ``Lambda_ci``: its
    interval at level ``Lambda_ci_level`` (Monte Carlo by forks: the bootstrap interval of
    :mod:`causalfair.engines.benefit_mc`, its standard error in ``benefit.se``; exact: the
    point); ``benefit``: the :class:`~causalfair.engines.benefit.BenefitResult` it came from
    (benefit table, worst pairs), when the engine computed one.
    """

    engine: str
    groups: tuple[str, ...]
    pair: tuple[int, int]
    horizon: int
    V: np.ndarray
    V_ps: np.ndarray
    V_0: np.ndarray
    steps: np.ndarray
    utility: np.ndarray
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
    def total_utility(self) -> float:
        return float(self.group_weights @ self.utility)

    @property
    def diagnostics_ok(self) -> bool | None:
        """True when every identity holds to DIAGNOSTIC_TOL; None when the engine checks
        none (Monte Carlo: its estimates satisfy C = DPE + IPE + SPE by construction)."""
        if not self.diagnostics:
            return None
        return all(abs(v) <= DIAGNOSTIC_TOL for v in self.diagnostics.values())

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
            out[f"utility[{g}]"] = float(self.utility[i])
        out["utility"] = self.total_utility
        return out

    def conf_int(self, alpha: float = 0.05) -> Any:
        """(1 - alpha) normal-approximation intervals per quantity, as a DataFrame with
        columns ``lower`` and ``upper``. Exact results have zero-width intervals."""
        import pandas as pd

        z = _z(alpha)
        est = self.estimates()
        se = self.se or {}
        rows = {k: (v - z * se.get(k, 0.0), v + z * se.get(k, 0.0)) for k, v in est.items()}
        return pd.DataFrame.from_dict(rows, orient="index", columns=["lower", "upper"])

    def to_frame(self, alpha: float = 0.05) -> Any:
        """One row per quantity: estimate, se (0 for exact), and the CI bounds."""
        import pandas as pd

        est = self.estimates()
        se = self.se or {}
        ci = self.conf_int(alpha)
        df = pd.DataFrame({
            "estimate": pd.Series(est),
            "se": pd.Series({k: float(se.get(k, 0.0)) for k in est}),
        })
        df["ci_lower"] = ci["lower"]
        df["ci_upper"] = ci["upper"]
        df.index.name = "quantity"
        return df

    def groups_frame(self) -> Any:
        """Per-group values: V, V_ps, V_0, direct, indirect, spurious (= V_0), utility."""
        import pandas as pd

        return pd.DataFrame(
            {
                "V": self.V,
                "V_ps": self.V_ps,
                "V_0": self.V_0,
                "direct": self.V - self.V_ps,
                "indirect": self.V_ps - self.V_0,
                "spurious": self.V_0,
                "utility": self.utility,
            },
            index=pd.Index(self.groups, name="group"),
        )

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
                "utility": float(self.utility[i]),
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
            ci = self.conf_int(0.05)
            out["ci95"] = {k: [float(r.lower), float(r.upper)] for k, r in ci.iterrows()}
        if self.notions:
            out["notions"] = {k: float(v) for k, v in self.notions.items()}
        if self.n is not None:
            out["n"] = self.n
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    def summary(self) -> str:
        a, b = self.pair
        lines = [
            f"Decomposition of the qualification-gain disparity ({self.engine} engine)",
            f"  model: {self.model_name}   policy: {self.policy_name}   horizon T = {self.horizon}"
            + (f"   gamma = {self.gamma:g}" if self.gamma != 1.0 else ""),
            f"  pair: {self.groups[a]} - {self.groups[b]}"
            + (f"   n = {self.n} per group, seed = {self.seed}" if self.n is not None else ""),
            "",
        ]
        ci = self.conf_int(0.05) if self.se else None
        for k in _EFFECTS:
            v = getattr(self, k)
            row = f"  {k:<4} = {v:+.6f}"
            if ci is not None:
                row += f"   95% CI [{ci.loc[k, 'lower']:+.6f}, {ci.loc[k, 'upper']:+.6f}]"
            lines.append(row)
        if self.Lambda is not None:
            ci_l = (f"   {100 * self.Lambda_ci_level:g}% CI [{self.Lambda_ci[0]:.6f}, "
                    f"{self.Lambda_ci[1]:.6f}]" if self.Lambda_ci is not None
                    and self.Lambda_ci_level is not None and self.se else "")
            lines.append(f"  Lambda = {self.Lambda:.6f}{ci_l}  (benefit fairness)")
        lines.append(f"  utility = {self.total_utility:+.6f}  (expected reward, population-weighted)")
        lines += ["", f"  {'group':<10}{'V^pi':>12}{'V^PS':>12}{'V^pi0':>12}{'direct':>12}{'indirect':>12}"]
        for i, g in enumerate(self.groups):
            lines.append(
                f"  {g:<10}{self.V[i]:>12.6f}{self.V_ps[i]:>12.6f}{self.V_0[i]:>12.6f}"
                f"{self.V[i] - self.V_ps[i]:>12.6f}{self.V_ps[i] - self.V_0[i]:>12.6f}"
            )
        if self.diagnostics:
            worst = max(abs(v) for v in self.diagnostics.values())
            status = "ok" if self.diagnostics_ok else "VIOLATED"
            lines += ["", f"  identities ({', '.join(self.diagnostics)}): {status}, "
                          f"largest residual {worst:.2e}"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (
            f"Decomposition(engine={self.engine!r}, C={self.C:.6g}, DPE={self.DPE:.6g}, "
            f"IPE={self.IPE:.6g}, SPE={self.SPE:.6g})"
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
            + ("" if not self.se else "; intervals at 95%") + ".")
        return (f"<div><strong>{title}</strong>"
                f"{df.to_html(float_format=lambda x: f'{x:.6f}')}"
                f"<p style='font-size:0.85em;color:#57606a'>{caption}</p></div>")


# ----------------------------------------------------------------------- exact engine
def _check_pair(pair: Any, n_groups: int, V: np.ndarray) -> tuple[int, int]:
    if pair is None:
        if n_groups == 2:
            return (0, 1)
        return (int(np.argmax(V)), int(np.argmin(V)))
    try:
        a, b = (int(i) for i in pair)
    except (TypeError, ValueError):
        raise ModelError(f"pair: expected two group indices, got {pair!r}.") from None
    if not (0 <= a < n_groups and 0 <= b < n_groups) or a == b:
        raise ModelError(f"pair: expected two distinct group indices in [0, {n_groups}), got {pair!r}.")
    return (a, b)


def _as_time_table(p: np.ndarray, horizon: int) -> np.ndarray:
    return p if p.ndim == 3 else np.broadcast_to(p, (horizon, *p.shape))


def _value_tables_general(model: TabularModel, p: np.ndarray, T: int,
                          gamma: float) -> dict[str, np.ndarray]:
    """Backward recursion for A actions and any baseline (``p``: action distributions)."""
    pa = model.action_table(p)
    pt = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    h = model.expected_gain()  # (G, A, K)
    b = model.baseline
    P = model.kernel  # (G, A, K, K)
    V_pi = np.zeros((T + 1, G, K))
    V_ps = np.zeros((T + 1, G, K))
    V_0 = np.zeros((T + 1, G, K))
    Q_pi = np.zeros((T, G, A, K))
    for t in range(T - 1, -1, -1):
        Q_pi[t] = h + gamma * np.einsum("saxy,sy->sax", P, V_pi[t + 1])
        V_pi[t] = np.einsum("sxa,sax->sx", pt[t], Q_pi[t])
        cont_ps = np.einsum("saxy,sy->sax", P, V_ps[t + 1])
        V_ps[t] = h[:, b] + gamma * np.einsum("sxa,sax->sx", pt[t], cont_ps)
        V_0[t] = h[:, b] + gamma * np.einsum("sxy,sy->sx", P[:, b], V_0[t + 1])
    return {"V_pi": V_pi, "V_ps": V_ps, "V_0": V_0, "Q_pi": Q_pi}


def check_policy_table(model: TabularModel, p: Any, where: str = "policy") -> np.ndarray:
    """Validate a policy table's shape against ``model`` (two actions: (G, K) or
    (T, G, K) of pi(d1); A > 2: (G, K, A) or (T, G, K, A), rows summing to 1)."""
    p = np.asarray(p, dtype=np.float64)
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    if A == 2:
        if p.ndim not in (2, 3) or p.shape[-2:] != (G, K):
            raise ModelError(
                f"{where}: table has shape {p.shape}; expected ({G}, {K}) or (T, {G}, {K}).")
        return p
    if p.ndim not in (3, 4) or p.shape[-3:] != (G, K, A):
        raise ModelError(
            f"{where}: table has shape {p.shape}; a model with {A} actions needs action "
            f"distributions ({G}, {K}, {A}) or (T, {G}, {K}, {A}).")
    if (p < 0).any() or np.abs(p.sum(-1) - 1.0).max() > 1e-9:
        raise ModelError(f"{where}: every row of an action table must be a distribution over {A} actions.")
    return p


def value_tables(model: TabularModel, policy: Policy | np.ndarray, horizon: int,
                 gamma: float = 1.0) -> dict[str, np.ndarray]:
    """Backward recursion for the gain value functions of pi, pi^PS and pi0.

    Returns arrays indexed [t, s, x]: ``V_pi``, ``V_ps``, ``V_0`` (t = 0..T, zero at T)
    and ``Q_pi`` [t, s, d, x], the gain action value under pi (the Q_g of PPO-C).
    """
    T = check_horizon(horizon)

    check_memory(8.0 * (T + 1) * model.n_groups * model.n_levels * (3 + 2 * model.n_actions),
                 f"value tables over {T} epochs", "use a shorter horizon")
    p = np.asarray(policy if isinstance(policy, np.ndarray) else policy_table(policy, model, T))
    if not model.binary:
        return _value_tables_general(model, p, T, gamma)
    pt = _as_time_table(p, T)
    G, K = model.n_groups, model.n_levels
    h = model.expected_gain()  # (G, 2, K)
    P0, P1 = model.kernel[:, 0], model.kernel[:, 1]
    V_pi = np.zeros((T + 1, G, K))
    V_ps = np.zeros((T + 1, G, K))
    V_0 = np.zeros((T + 1, G, K))
    Q_pi = np.zeros((T, G, 2, K))
    for t in range(T - 1, -1, -1):
        # Q(x, d) = h_d(x) + gamma * sum_x' P(x'|x,d) V(x')
        cont0 = np.matmul(P0, V_pi[t + 1][..., None])[..., 0]
        cont1 = np.matmul(P1, V_pi[t + 1][..., None])[..., 0]
        Q_pi[t, :, 0] = h[:, 0] + gamma * cont0
        Q_pi[t, :, 1] = h[:, 1] + gamma * cont1
        V_pi[t] = Q_pi[t, :, 0] + pt[t] * (Q_pi[t, :, 1] - Q_pi[t, :, 0])
        ps0 = np.matmul(P0, V_ps[t + 1][..., None])[..., 0]
        ps1 = np.matmul(P1, V_ps[t + 1][..., None])[..., 0]
        V_ps[t] = h[:, 0] + gamma * (ps0 + pt[t] * (ps1 - ps0))
        V_0[t] = h[:, 0] + gamma * np.matmul(P0, V_0[t + 1][..., None])[..., 0]
    return {"V_pi": V_pi, "V_ps": V_ps, "V_0": V_0, "Q_pi": Q_pi}


def decompose(
    model: TabularModel,
    policy: Policy | np.ndarray,
    horizon: int = 20,
    *,
    gamma: float = 1.0,
    pair: tuple[int, int] | None = None,
    eps: float = 0.1,
    weights: str = "visitation",
    policy_name: str | None = None,
) -> Decomposition:
    """Exact decomposition C = DPE + IPE + SPE of a policy on a tabular model, with
    Lambda (benefit fairness, method.md section 4, with ``eps`` and ``weights``:
    "visitation" or "initial").

    ``policy`` is a :class:`~causalfair.policies.core.Policy` or a table pi(d1 | x, s) of shape
    (G, K) or (T, G, K). :func:`causalfair.decompose` chooses between this engine and
    Monte Carlo from what a system supports.
    """
    if not isinstance(model, TabularModel):
        raise ModelError(f"model: expected a TabularModel, got {type(model).__name__}; for a "
                         "system use causalfair.decompose, which picks the engine it supports.")
    T = check_horizon(horizon)

    check_memory(8.0 * (T + 1) * model.n_groups * model.n_levels * model.n_actions * 12,
                 f"exact engine over {T} epochs", "use a shorter horizon")
    if not (isinstance(gamma, (int, float)) and 0.0 < gamma <= 1.0):
        raise ModelError(f"gamma: must be a number in (0, 1], got {gamma!r}.")
    if isinstance(policy, np.ndarray):
        p = check_policy_table(model, policy)
        name = policy_name or "table"
    else:
        p = policy_table(policy, model, T)
        name = policy_name or getattr(policy, "name", type(policy).__name__)
    if not model.binary:
        return _decompose_general(model, p, T, gamma, pair, eps, weights, name)
    pt = _as_time_table(p, T)
    disc = gamma ** np.arange(T)

    h = model.expected_gain()
    h0 = h[:, 0]
    delta = h[:, 1] - h0
    mu = model.propagate(p, T)  # (T+1, G, K) under pi
    nu = model.propagate(0.0, T)  # under pi0
    h_pi = h0 + pt * delta  # (T, G, K)
    step_pi = disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], h_pi)
    step_ps = disc[:, None] * np.einsum("tsx,sx->ts", mu[:T], h0)
    step_0 = disc[:, None] * np.einsum("tsx,sx->ts", nu[:T], h0)
    r = model.reward
    r_pi = r[:, 0] + pt * (r[:, 1] - r[:, 0])
    utility = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], r_pi)).sum(0)

    # Independent backward computation and the identities of method.md.
    vt = value_tables(model, p, T, gamma)
    prop_direct = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], pt * delta)).sum(0)
    prop_indirect = (disc[:, None] * np.einsum("tsx,sx->ts", mu[:T] - nu[:T], h0)).sum(0)
    return _result(model, p, T, gamma, pair, eps, weights, name, mu, vt, prop_direct,
                   prop_indirect, (step_pi, step_ps, step_0), utility)


def _result(model: TabularModel, p: np.ndarray, T: int, gamma: float, pair: Any, eps: float,
            weights: str, name: str, mu: np.ndarray, vt: dict[str, np.ndarray],
            prop_direct: np.ndarray, prop_indirect: np.ndarray,
            steps: tuple[np.ndarray, np.ndarray, np.ndarray], utility: np.ndarray
            ) -> Decomposition:
    """The exact :class:`Decomposition` from the forward pass (per-step gains), the
    backward value tables, Proposition 1's two sides and Lambda."""
    step_pi, step_ps, step_0 = steps
    V, V_ps, V_0 = step_pi.sum(0), step_ps.sum(0), step_0.sum(0)
    ab = _check_pair(pair, model.n_groups, V)
    diagnostics = _diagnostics(model, V, V_ps, V_0, vt, prop_direct, prop_indirect, mu, ab,
                               gamma, T)
    lam = lambda_metric(model, p, horizon=T, eps=eps, weights=weights, pair=ab, mu=mu)
    return Decomposition(
        engine="exact",
        groups=tuple(model.group_names),
        pair=ab,
        horizon=T,
        gamma=float(gamma),
        V=V,
        V_ps=V_ps,
        V_0=V_0,
        steps=np.stack([step_pi.T, step_ps.T, step_0.T]),
        utility=utility,
        group_weights=model.group_weights,
        Lambda=float(lam),
        Lambda_ci=(float(lam), float(lam)),
        diagnostics=diagnostics,
        policy_name=name,
        model_name=model.name,
    )


def _diagnostics(model: TabularModel, V: np.ndarray, V_ps: np.ndarray, V_0: np.ndarray,
                 vt: dict[str, np.ndarray], prop_direct: np.ndarray, prop_indirect: np.ndarray,
                 mu: np.ndarray, ab: tuple[int, int], gamma: float, T: int) -> dict[str, float]:
    Vb = np.einsum("sx,sx->s", model.initial, vt["V_pi"][0])
    Vb_ps = np.einsum("sx,sx->s", model.initial, vt["V_ps"][0])
    Vb_0 = np.einsum("sx,sx->s", model.initial, vt["V_0"][0])
    scale = max(1.0, float(np.abs(np.concatenate([V, V_ps, V_0])).max()))
    C = V[ab[0]] - V[ab[1]]
    parts = ((V - V_ps) + (V_ps - V_0) + V_0)
    out = {
        "C = DPE + IPE + SPE": float(abs(C - (parts[ab[0]] - parts[ab[1]]))) / scale,
        "proposition 1 (direct)": float(np.abs((Vb - Vb_ps) - prop_direct).max()) / scale,
        "proposition 1 (indirect)": float(np.abs((Vb_ps - Vb_0) - prop_indirect).max()) / scale,
        "forward = backward": float(
            np.abs(np.concatenate([V - Vb, V_ps - Vb_ps, V_0 - Vb_0])).max()
        ) / scale,
    }
    if gamma == 1.0:
        f = model.potential
        tele = np.einsum("sx,sx->s", mu[T], f) - np.einsum("sx,sx->s", mu[0], f)
        out["telescoping"] = float(np.abs(Vb - tele).max()) / scale
    return out


def _decompose_general(model: TabularModel, p: np.ndarray, T: int, gamma: float,
                       pair: Any, eps: float, weights: str, name: str) -> Decomposition:
    """The exact engine for A actions and any baseline action a0 (method.md section 3
    with d0 replaced by a0): Proposition 1 reads V^pi - V^PS = sum_t E[sum_a pi(a|x) Delta_a(x)]
    with Delta_a = h_a - h_{a0}."""
    pa = model.action_table(p)
    pt = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
    disc = gamma ** np.arange(T)
    h = model.expected_gain()  # (G, A, K)
    b = model.baseline
    h0 = h[:, b]
    delta = h - h0[:, None]  # (G, A, K)
    mu = model.propagate(p, T)
    nu = model.propagate(model.baseline_table(), T)
    h_pi = np.einsum("tsxa,sax->tsx", pt, h)
    step_pi = disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], h_pi)
    step_ps = disc[:, None] * np.einsum("tsx,sx->ts", mu[:T], h0)
    step_0 = disc[:, None] * np.einsum("tsx,sx->ts", nu[:T], h0)
    r_pi = np.einsum("tsxa,sax->tsx", pt, model.reward)
    utility = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], r_pi)).sum(0)
    vt = _value_tables_general(model, p, T, gamma)
    direct_t = np.einsum("tsxa,sax->tsx", pt, delta)
    prop_direct = (disc[:, None] * np.einsum("tsx,tsx->ts", mu[:T], direct_t)).sum(0)
    prop_indirect = (disc[:, None] * np.einsum("tsx,sx->ts", mu[:T] - nu[:T], h0)).sum(0)
    return _result(model, p, T, gamma, pair, eps, weights, name, mu, vt, prop_direct,
                   prop_indirect, (step_pi, step_ps, step_0), utility)

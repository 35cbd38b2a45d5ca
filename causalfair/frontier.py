"""Fair-policy linear programs and the utility-fairness frontier.

For a tabular model and horizon T, every Markov (time-indexed) policy induces, per
group s, an occupancy measure

    y[t, s, x, d] = P(x_t = x, d_t = d | s),   t < T,

and conversely every non-negative y that satisfies the flow constraints

    sum_d y[0, s, x, d]   = P(x_0 = x | s)
    sum_d y[t+1, s, x', d] = sum_{x, d} y[t, s, x, d] P(x' | x, d, s)

is the occupancy of the policy pi_t(d1 | x, s) = y[t, s, x, 1] / sum_d y[t, s, x, d].
Everything the audit measures is linear in y:

    utility   U   = sum_s P(s) sum_{t,x,d} y[t,s,x,d] r[s,d,x]          (the exact engine's utility)
    V^pi_s        = sum_{t,x,d} y[t,s,x,d] h[s,d,x]                       (so C = V_a - V_b)
    V^pi_s - V^PS_s = sum_{t,x} y[t,s,x,1] Delta[s,x]                     (so DPE)
    rho_s         = sum_t w_t sum_x y[t,s,x,1],  w_t = g^t / sum_t' g^t'  (Wen's demographic parity)

so "maximise U subject to |C| <= eps" (and/or |DPE| <= eps, |DP| <= eps) is a linear
program: the time-indexed extension of Wen, Bastani and Topcu's Algorithm 1 (AISTATS
2021) to the finite-horizon, undiscounted setting of the causal decomposition. With more
than two groups every pairwise gap is bounded, which bounds the largest gap (the C the
exact engine reports for k > 2 groups).

:func:`fair_lp` solves one program (HiGHS via :func:`scipy.optimize.linprog`) and audits
the recovered policy with :func:`causalfair.effects.decompose`; :func:`frontier` sweeps
eps (the constraint matrix is built once per model; only the bounds change) and
:meth:`Frontier.place` measures how far any audited policy is from the frontier.
:func:`wen_lp` is Wen et al.'s discounted-occupancy LP for a general finite separable MDP
and :func:`loan_belief_mdp` a small discretised version of their loan MDP.

The stationary fair problem (one table pi(d1 | x, s) for all t) is not a linear program:
the occupancy of a stationary policy is a polynomial in the table. ``fair_lp(...,
stationary=True)`` therefore returns the best stationary policy a documented local search
finds (feasible and audited, a lower bound on the stationary optimum) together with the
time-indexed optimum, an upper bound on every policy's utility at that eps.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from causalfair.errors import InputError
from causalfair.model import ModelError, TabularModel

__all__ = [
    "CONSTRAINTS",
    "InfeasibleError",
    "LPResult",
    "OccupancyLP",
    "fair_lp",
    "Frontier",
    "frontier",
    "policy_metrics",
    "WenLPResult",
    "wen_lp",
    "wen_evaluate",
    "LoanMDP",
    "loan_belief_mdp",
]

#: Fairness constraints the occupancy LP can express.
CONSTRAINTS = ("C", "DPE", "DP")

#: States whose occupancy is below this get the default decision d0 (see docs/frontier.md).
UNVISITED_MASS = 1e-12

#: A constraint counts as satisfied when the audited value is within this of eps.
FEASIBILITY_TOL = 1e-7

_METRIC_LABEL = {"C": "|C|", "DPE": "|DPE|", "DP": "|DP|"}

INFEASIBLE_MSG = (
    "no policy satisfies {what} on model {model!r} at horizon T = {T}: the smallest "
    "achievable value is {best}; raise eps to at least that."
)


class InfeasibleError(InputError):
    """No policy satisfies the fairness constraint (the LP is infeasible)."""


# ---------------------------------------------------------------------------- helpers
def _check_eps_value(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ModelError(f"eps[{name}]: must be a number >= 0, got {value!r}.")
    v = float(value)
    if math.isnan(v) or v < 0:
        raise ModelError(f"eps[{name}]: must be a number >= 0 (or inf), got {value!r}.")
    return v


def _normalise_constraints(constraint: str | Sequence[str], eps: Any) -> dict[str, float]:
    """{constraint name: eps}; inf means unconstrained."""
    names = (constraint,) if isinstance(constraint, str) else tuple(constraint)
    if not names:
        raise ModelError("constraint: give at least one of " + ", ".join(CONSTRAINTS) + ".")
    for n in names:
        if n not in CONSTRAINTS:
            raise ModelError(
                f"constraint: unknown value {n!r}; allowed values: {', '.join(CONSTRAINTS)}."
            )
    if eps is None:
        return {n: math.inf for n in names}
    if isinstance(eps, Mapping):
        extra = set(eps) - set(names)
        if extra:
            raise ModelError(f"eps: keys {sorted(extra)} are not among the constraints {list(names)}.")
        return {n: _check_eps_value(n, eps.get(n, math.inf)) for n in names}
    v = _check_eps_value(names[0], eps)
    return {n: v for n in names}


def _gap(values: np.ndarray) -> float:
    """Two groups: signed a - b; more groups: the largest pairwise gap (max - min)."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[0] == 2:
        return float(values[0] - values[1])
    return float(values.max() - values.min())


def _dp_weights(horizon: int, dp_discount: float) -> np.ndarray:
    w = float(dp_discount) ** np.arange(horizon)
    return w / w.sum()


def _check_dp_discount(dp_discount: Any) -> float:
    if isinstance(dp_discount, bool) or not isinstance(dp_discount, (int, float)) or not (
        0.0 < float(dp_discount) <= 1.0
    ):
        raise ModelError(f"dp_discount: must be a number in (0, 1], got {dp_discount!r}.")
    return float(dp_discount)


def _linprog(**kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return linprog(method="highs", **kwargs)


def _status_error(res: Any, where: str) -> RuntimeError:
    return RuntimeError(f"{where}: the LP solver stopped with status {res.status} ({res.message}).")


# ----------------------------------------------------------------- policy evaluation
def _as_table(model: TabularModel, policy: Any, horizon: int) -> tuple[np.ndarray, str]:
    """A (T, G, K) table and a name for a policy object, table, or built-in spec."""
    from causalfair.policy import parse_policy, policy_table

    if isinstance(policy, str):
        name, policy = policy, parse_policy(policy, model)
    else:
        name = getattr(policy, "name", None) or type(policy).__name__
    if isinstance(policy, np.ndarray):
        p = np.asarray(policy, dtype=np.float64)
        name = "table"
        if p.ndim not in (2, 3) or p.shape[-2:] != (model.n_groups, model.n_levels):
            raise ModelError(
                f"policy: table has shape {p.shape}; expected ({model.n_groups}, "
                f"{model.n_levels}) or (T, {model.n_groups}, {model.n_levels})."
            )
        if p.ndim == 3 and p.shape[0] < horizon:
            raise ModelError(
                f"policy: time-indexed table covers {p.shape[0]} epochs, horizon is {horizon}."
            )
    else:
        p = np.asarray(policy_table(policy, model, horizon), dtype=np.float64)
    p = p[:horizon] if p.ndim == 3 else np.broadcast_to(p, (horizon, *p.shape))
    return np.ascontiguousarray(p), str(name)


def policy_metrics(model: TabularModel, policy: Any, horizon: int, *,
                   dp_discount: float = 1.0, eps: float = 0.1) -> dict[str, Any]:
    """Exact audit of one policy: utility, C, DPE, IPE, SPE, DP, Lambda (and the
    :class:`~causalfair.effects.Decomposition` under ``"decomposition"``).

    ``policy``: a Policy object (TablePolicy, TorchPolicy, ...), a table (G, K) or
    (T, G, K), or a built-in spec such as ``"threshold:0.5"``. ``DP`` is the gap in the
    approval rate averaged over t < T with weights ``dp_discount**t`` (see docs).
    """
    from causalfair.effects import check_horizon, decompose
    from causalfair.policy import TablePolicy

    T = check_horizon(horizon)
    dp_discount = _check_dp_discount(dp_discount)
    p, name = _as_table(model, policy, T)
    dec = decompose(model, TablePolicy(p, name=name), T, eps=eps, policy_name=name)
    mu = model.propagate(p, T)
    rho = np.einsum("t,tsx,tsx->s", _dp_weights(T, dp_discount), mu[:T], p)
    if model.n_groups == 2:
        C, DPE = dec.C, dec.DPE
    else:
        C = _gap(dec.V)
        DPE = _gap(dec.V - dec.V_ps)
    return {
        "policy": name,
        "utility": dec.total_utility,
        "C": C,
        "DPE": DPE,
        "IPE": dec.IPE,
        "SPE": dec.SPE,
        "DP": _gap(rho),
        "Lambda": dec.Lambda,
        "table": p,
        "decomposition": dec,
    }


# ------------------------------------------------------------------------ LP result
@dataclass(frozen=True, eq=False)
class LPResult:
    """Solution of one fair-policy program, with the exact audit of its policy.

    ``status``: ``"optimal"`` (time-indexed LP optimum), ``"infeasible"`` (only when
    ``raise_infeasible=False``; numbers are NaN), ``"heuristic"`` (stationary variant:
    feasible, audited, not proven optimal).
    ``utility``, ``C``, ``DPE``, ``DP``: the LP's values (for ``"heuristic"``: the audit's).
    ``policy``: pi_t(d1 | x, s) as an array (T, G, K) (constant over t if stationary).
    ``occupancy``: y[t, s, x, d], array (T, G, K, 2).
    ``eps``: the bounds that were imposed, by constraint name (inf = none).
    ``audit``: the exact decomposition of ``policy`` (None if not audited).
    ``upper_bound``: for the stationary variant, the time-indexed LP optimum at the same eps.
    """

    status: str
    utility: float
    C: float
    policy: np.ndarray
    occupancy: np.ndarray
    message: str
    eps: Mapping[str, float] = field(default_factory=dict)
    horizon: int = 0
    DPE: float = math.nan
    DP: float = math.nan
    V: np.ndarray | None = None
    Lambda: float | None = None
    audit: Any = None
    stationary: bool = False
    upper_bound: float | None = None

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "heuristic")

    def table_policy(self, name: str | None = None) -> Any:
        """The recovered policy as a :class:`~causalfair.policy.TablePolicy`."""
        from causalfair.policy import TablePolicy

        tab = self.policy[0] if self.stationary else self.policy
        return TablePolicy(tab, name=name or self.default_name())

    def default_name(self) -> str:
        bounds = ", ".join(f"{_METRIC_LABEL[k]}<={v:.4g}" for k, v in self.eps.items()
                           if math.isfinite(v))
        kind = "stationary" if self.stationary else "fair-LP"
        return f"{kind}({bounds or 'unconstrained'})"

    def audit_gap(self) -> float:
        """|C(audit) - C(LP)|: zero up to solver tolerance for a time-indexed optimum."""
        if self.audit is None:
            return math.nan
        return abs(_gap(self.audit.V) - self.C) if len(self.audit.V) > 2 else abs(self.audit.C - self.C)

    def to_dict(self) -> dict[str, Any]:
        def num(x: Any) -> Any:
            return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)

        return {
            "status": self.status,
            "message": self.message,
            "eps": {k: num(v) for k, v in self.eps.items()},
            "horizon": self.horizon,
            "utility": num(self.utility),
            "C": num(self.C),
            "DPE": num(self.DPE),
            "DP": num(self.DP),
            "Lambda": num(self.Lambda),
            "stationary": self.stationary,
            "upper_bound": num(self.upper_bound),
            "audit": None if self.audit is None else {
                "C": self.audit.C, "DPE": self.audit.DPE, "IPE": self.audit.IPE,
                "SPE": self.audit.SPE, "utility": self.audit.total_utility,
            },
            "policy": self.policy.tolist() if self.feasible else None,
        }

    def __repr__(self) -> str:
        return (f"LPResult(status={self.status!r}, utility={self.utility:.6g}, C={self.C:.6g}, "
                f"eps={dict(self.eps)!r})")


# ---------------------------------------------------------------------- the program
class OccupancyLP:
    """The occupancy linear program of one model and horizon, built once.

    The equality (flow) constraints, the objective and the rows of every linear metric
    are sparse matrices built at construction; :meth:`solve` only changes the bounds.
    Variables are y[t, s, x, d] flattened in that order (n = T * G * K * 2).
    """

    def __init__(self, model: TabularModel, horizon: int, *, dp_discount: float = 1.0):
        from causalfair.effects import check_horizon

        if not isinstance(model, TabularModel):
            raise ModelError(
                f"model: the occupancy LP needs a TabularModel, got {type(model).__name__}; "
                "for a LendingModel pass its .tabular."
            )
        T = check_horizon(horizon)
        if model.n_actions != 2:
            raise ModelError(
                f"model: the occupancy LP handles two actions; {model.name!r} has "
                f"{model.n_actions} (use the exact engine or Monte Carlo for it).")
        from causalfair._limits import check_memory

        # sparse constraint matrices: ~ 2 K nonzeros per variable, HiGHS copies them
        check_memory(8.0 * 3 * T * model.n_groups * model.n_levels * 2 * (2 * model.n_levels + 8),
                     f"frontier LP over {T} epochs", "use a shorter horizon")
        self.model = model
        self.horizon = T
        self.dp_discount = _check_dp_discount(dp_discount)
        G, K = model.n_groups, model.n_levels
        self.shape = (T, G, K, 2)
        n = T * G * K * 2
        self.n = n
        idx = np.arange(n).reshape(self.shape)

        # Flow constraints: rows r(t, s, x') = (t * G + s) * K + x'.
        rows_diag = np.broadcast_to(np.arange(T * G * K).reshape(T, G, K)[..., None], self.shape)
        r_list = [rows_diag.reshape(-1)]
        c_list = [idx.reshape(-1)]
        v_list = [np.ones(n)]
        if T > 1:
            # -P[s, d, x, x'] * y[t-1, s, x, d] enters row (t, s, x'), t = 1..T-1.
            ker = np.transpose(model.kernel, (0, 2, 1, 3))  # (G, K, 2, K'): s, x, d, x'
            tt, ss, xx, dd, yy = np.nonzero(np.broadcast_to(ker != 0, (T - 1, G, K, 2, K)))
            r_list.append(((tt + 1) * G + ss) * K + yy)
            c_list.append(idx[tt, ss, xx, dd])
            v_list.append(-ker[ss, xx, dd, yy])
        self.A_eq = sp.csr_matrix(
            (np.concatenate(v_list), (np.concatenate(r_list), np.concatenate(c_list))),
            shape=(T * G * K, n),
        )
        b_eq = np.zeros((T, G, K))
        b_eq[0] = model.initial
        self.b_eq = b_eq.reshape(-1)

        h = model.expected_gain()  # (G, 2, K)
        delta = h[:, 1] - h[:, 0]
        r = model.reward  # (G, 2, K)
        w = model.group_weights
        util = np.broadcast_to((w[:, None, None] * r).transpose(0, 2, 1), self.shape)
        self.c = np.ascontiguousarray(util).reshape(-1)

        gain_coef = np.broadcast_to(h.transpose(0, 2, 1), self.shape)
        dir_coef = np.zeros(self.shape)
        dir_coef[..., 1] = delta
        dp_coef = np.zeros(self.shape)
        dp_coef[..., 1] = _dp_weights(T, self.dp_discount)[:, None, None]
        self._per_group = {
            name: self._group_rows(coef) for name, coef in
            (("C", gain_coef), ("DPE", dir_coef), ("DP", dp_coef))
        }
        self.pairs = [(a, b) for a in range(G) for b in range(a + 1, G)]
        diff = np.zeros((len(self.pairs), G))
        for i, (a, b) in enumerate(self.pairs):
            diff[i, a], diff[i, b] = 1.0, -1.0
        self._diff_rows = {
            name: sp.csr_matrix(diff) @ rows for name, rows in self._per_group.items()
        }
        self._ub_cache: dict[tuple[str, ...], sp.csr_matrix] = {}
        self._eps_min: dict[str, float] = {}

    def _group_rows(self, coef: np.ndarray) -> sp.csr_matrix:
        """Matrix (G, n) whose row s sums coef over the variables of group s."""
        T, G, K, _ = self.shape
        grp = np.broadcast_to(np.arange(G)[None, :, None, None], self.shape).reshape(-1)
        flat = np.ascontiguousarray(coef).reshape(-1)
        keep = flat != 0
        return sp.csr_matrix((flat[keep], (grp[keep], np.arange(self.n)[keep])), shape=(G, self.n))

    # -------------------------------------------------------------- evaluation of y
    def group_values(self, y: np.ndarray, name: str) -> np.ndarray:
        """Per-group value of a metric ("C" -> V^pi, "DPE" -> V^pi - V^PS, "DP" -> rho)."""
        return self._per_group[name] @ y

    def metric(self, y: np.ndarray, name: str) -> float:
        return _gap(self.group_values(y, name))

    def _ub(self, names: tuple[str, ...]) -> sp.csr_matrix:
        if names not in self._ub_cache:
            blocks = []
            for nm in names:
                blocks += [self._diff_rows[nm], -self._diff_rows[nm]]
            self._ub_cache[names] = sp.vstack(blocks, format="csr")
        return self._ub_cache[names]

    # ---------------------------------------------------------------------- solving
    def solve_raw(self, bounds: Mapping[str, float]) -> Any:
        """Run HiGHS with |metric| <= bounds[metric] for each finite bound."""
        names = tuple(k for k, v in bounds.items() if math.isfinite(v))
        kwargs: dict[str, Any] = {}
        if names:
            A = self._ub(names)
            P = len(self.pairs)
            kwargs["A_ub"] = A
            kwargs["b_ub"] = np.repeat([bounds[k] for k in names], 2 * P)
        return _linprog(c=-self.c, A_eq=self.A_eq, b_eq=self.b_eq, bounds=(0, None), **kwargs)

    def min_metric(self, name: str, *, utility_floor: float | None = None) -> float:
        """Smallest achievable |metric| (largest pairwise gap), optionally among policies
        with utility >= ``utility_floor``."""
        if name not in CONSTRAINTS:
            raise ModelError(f"constraint: unknown value {name!r}; allowed values: {', '.join(CONSTRAINTS)}.")
        if utility_floor is None and name in self._eps_min:
            return self._eps_min[name]
        R = self._diff_rows[name]
        P = R.shape[0]
        tau = sp.csr_matrix(np.ones((P, 1)))
        blocks = [sp.hstack([R, -tau]), sp.hstack([-R, -tau])]
        b = [np.zeros(2 * P)]
        if utility_floor is not None:
            blocks.append(sp.hstack([sp.csr_matrix(-self.c[None, :]), sp.csr_matrix((1, 1))]))
            b.append(np.array([-utility_floor]))
        A_ub = sp.vstack(blocks, format="csr")
        A_eq = sp.hstack([self.A_eq, sp.csr_matrix((self.A_eq.shape[0], 1))], format="csr")
        c = np.zeros(self.n + 1)
        c[-1] = 1.0
        res = _linprog(c=c, A_ub=A_ub, b_ub=np.concatenate(b), A_eq=A_eq, b_eq=self.b_eq,
                       bounds=(0, None))
        if res.status != 0:
            raise _status_error(res, f"smallest achievable {_METRIC_LABEL[name]}")
        val = max(0.0, float(res.x[-1]))
        if utility_floor is None:
            self._eps_min[name] = val
        return val

    def recover_policy(self, y: np.ndarray) -> np.ndarray:
        """pi_t(d1 | x, s) = y1 / (y0 + y1); d0 where the state is unvisited."""
        occ = np.clip(y.reshape(self.shape), 0.0, None)
        mass = occ.sum(-1)
        p = np.divide(occ[..., 1], mass, out=np.zeros(mass.shape), where=mass > UNVISITED_MASS)
        return np.clip(p, 0.0, 1.0)

    def solve(self, eps: Any = None, constraint: str | Sequence[str] = "C", *,
              audit: bool = True, raise_infeasible: bool = True, lambda_eps: float = 0.1,
              ) -> LPResult:
        """Best time-indexed policy with |constraint| <= eps (see :func:`fair_lp`)."""
        bounds = _normalise_constraints(constraint, eps)
        res = self.solve_raw(bounds)
        T = self.horizon
        if res.status == 2:
            what = " and ".join(f"{_METRIC_LABEL[k]} <= {v:g}" for k, v in bounds.items())
            best = ", ".join(
                f"{_METRIC_LABEL[k]} >= {self.min_metric(k):.6g}" for k in bounds
            )
            msg = INFEASIBLE_MSG.format(what=what, model=self.model.name, T=T, best=best)
            if raise_infeasible:
                raise InfeasibleError(msg)
            nan_tab = np.full(self.shape[:3], np.nan)
            return LPResult(status="infeasible", utility=math.nan, C=math.nan, policy=nan_tab,
                            occupancy=np.full(self.shape, np.nan), message=msg, eps=bounds,
                            horizon=T)
        if res.status != 0:
            raise _status_error(res, "fair-policy LP")
        y = np.asarray(res.x)
        p = self.recover_policy(y)
        dec = lam = None
        if audit:
            from causalfair.effects import decompose
            from causalfair.policy import TablePolicy

            pol = TablePolicy(p, name="fair-LP")
            dec = decompose(self.model, pol, T, eps=lambda_eps, policy_name=pol.name)
            lam = dec.Lambda
        return LPResult(
            status="optimal",
            utility=float(self.c @ y),
            C=self.metric(y, "C"),
            DPE=self.metric(y, "DPE"),
            DP=self.metric(y, "DP"),
            V=self.group_values(y, "C"),
            policy=p,
            occupancy=y.reshape(self.shape),
            message=str(res.message),
            eps=bounds,
            horizon=T,
            Lambda=lam,
            audit=dec,
        )


# ------------------------------------------------------------ stationary heuristic
def _stationary_values(model: TabularModel, p: np.ndarray, T: int, payoff: np.ndarray,
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per-group value sum_t E[payoff_t(x_t, d_t)] of a stationary table p (G, K) and
    its exact gradient with respect to p (G, K). ``payoff``: (T, G, 2, K)."""
    P0, P1 = model.kernel[:, 0], model.kernel[:, 1]
    G, K = p.shape
    V = np.zeros((G, K))
    adv = np.empty((T, G, K))
    for t in range(T - 1, -1, -1):
        q0 = payoff[t, :, 0] + np.matmul(P0, V[..., None])[..., 0]
        q1 = payoff[t, :, 1] + np.matmul(P1, V[..., None])[..., 0]
        adv[t] = q1 - q0
        V = q0 + p * adv[t]
    mu = model.propagate(p, T)[:T]
    return np.einsum("sx,sx->s", model.initial, V), np.einsum("tsx,tsx->sx", mu, adv)


def _stationary_search(lp: OccupancyLP, bounds: Mapping[str, float], starts: list[np.ndarray],
                       ) -> np.ndarray | None:
    """SLSQP over stationary tables from several starts; the best feasible table or None."""
    from scipy.optimize import minimize

    model, T = lp.model, lp.horizon
    G, K = model.n_groups, model.n_levels
    h = model.expected_gain()
    payoffs: dict[str, np.ndarray] = {"U": np.broadcast_to(model.reward, (T, G, 2, K))}
    payoffs["C"] = np.broadcast_to(h, (T, G, 2, K))
    d = np.zeros((T, G, 2, K))
    d[:, :, 1] = h[:, 1] - h[:, 0]
    payoffs["DPE"] = d
    dp = np.zeros((T, G, 2, K))
    dp[:, :, 1] = _dp_weights(T, lp.dp_discount)[:, None, None]
    payoffs["DP"] = dp
    w = model.group_weights
    active = [(k, v) for k, v in bounds.items() if math.isfinite(v)]

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        vals, grad = _stationary_values(model, x.reshape(G, K), T, payoffs["U"])
        return -float(w @ vals), -(w[:, None] * grad).reshape(-1)

    cons = []
    for name, bound in active:
        for a, b in lp.pairs:
            for sign in (1.0, -1.0):
                def fun(x: np.ndarray, name=name, a=a, b=b, sign=sign, bound=bound) -> float:
                    vals, _ = _stationary_values(model, x.reshape(G, K), T, payoffs[name])
                    return bound - sign * (vals[a] - vals[b])

                def jac(x: np.ndarray, name=name, a=a, b=b, sign=sign) -> np.ndarray:
                    _, grad = _stationary_values(model, x.reshape(G, K), T, payoffs[name])
                    g = np.zeros((G, K))
                    g[a], g[b] = -sign * grad[a], sign * grad[b]
                    return g.reshape(-1)

                cons.append({"type": "ineq", "fun": fun, "jac": jac})

    def violation(x: np.ndarray) -> tuple[float, np.ndarray]:
        # Phase 1: sum over bounded metrics and pairs of the squared gap.
        total, grad = 0.0, np.zeros((G, K))
        for name, _ in active:
            vals, gr = _stationary_values(model, x.reshape(G, K), T, payoffs[name])
            for a, b in lp.pairs:
                gap = vals[a] - vals[b]
                total += gap * gap
                grad[a] += 2 * gap * gr[a]
                grad[b] -= 2 * gap * gr[b]
        return total, grad.reshape(-1)

    fair_starts = []
    for x0 in starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = minimize(violation, np.clip(x0, 0, 1).reshape(-1), jac=True, method="L-BFGS-B",
                           bounds=[(0.0, 1.0)] * (G * K))
        fair_starts.append(np.clip(res.x, 0.0, 1.0))
    best, best_u = None, -math.inf
    for x0 in list(starts) + fair_starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = minimize(objective, np.clip(x0, 0, 1).reshape(-1), jac=True, method="SLSQP",
                           bounds=[(0.0, 1.0)] * (G * K), constraints=cons,
                           options={"maxiter": 300, "ftol": 1e-12})
        x = np.clip(res.x, 0.0, 1.0).reshape(G, K)
        ok = True
        for name, bound in active:
            vals, _ = _stationary_values(model, x, T, payoffs[name])
            if max(abs(vals[a] - vals[b]) for a, b in lp.pairs) > bound + FEASIBILITY_TOL:
                ok = False
        u = -objective(x.reshape(-1))[0]
        if ok and u > best_u:
            best, best_u = x, u
    return best


def _stationary(lp: OccupancyLP, bounds: Mapping[str, float], lambda_eps: float,
                raise_infeasible: bool) -> LPResult:
    bound_res = lp.solve(bounds, tuple(bounds), audit=False, raise_infeasible=raise_infeasible)
    T = lp.horizon
    if not bound_res.feasible:
        return bound_res
    G, K = lp.model.n_groups, lp.model.n_levels

    def project(res: LPResult) -> np.ndarray:
        occ = res.occupancy.sum(0)  # (G, K, 2)
        mass = occ.sum(-1)
        return np.divide(occ[..., 1], mass, out=np.zeros((G, K)), where=mass > UNVISITED_MASS)

    rng = np.random.default_rng(0)  # fixed seed: the search is deterministic
    starts = [project(bound_res), np.full((G, K), 0.5), np.zeros((G, K)), np.ones((G, K))]
    starts += [rng.uniform(size=(G, K)) for _ in range(4)]
    tight = {k: v / 2 for k, v in bounds.items()}
    try:
        starts.insert(1, project(lp.solve(tight, tuple(tight), audit=False)))
    except InfeasibleError:
        pass
    x = _stationary_search(lp, bounds, starts)
    if x is None:
        what = " and ".join(f"{_METRIC_LABEL[k]} <= {v:g}" for k, v in bounds.items())
        msg = (f"no stationary policy satisfying {what} was found by the local search on model "
               f"{lp.model.name!r} at T = {T} (this is not a proof that none exists; the "
               f"time-indexed LP is feasible with utility {bound_res.utility:.6g}).")
        if raise_infeasible:
            raise InfeasibleError(msg)
        nan_tab = np.full(lp.shape[:3], np.nan)
        return LPResult(status="infeasible", utility=math.nan, C=math.nan, policy=nan_tab,
                        occupancy=np.full(lp.shape, np.nan), message=msg, eps=dict(bounds),
                        horizon=T, stationary=True, upper_bound=bound_res.utility)
    m = policy_metrics(lp.model, x, T, dp_discount=lp.dp_discount, eps=lambda_eps)
    tab = m["table"]
    mu = lp.model.propagate(x, T)[:T]
    occ = np.stack([mu * (1 - tab), mu * tab], axis=-1)
    return LPResult(
        status="heuristic", utility=m["utility"], C=m["C"], DPE=m["DPE"], DP=m["DP"],
        V=np.asarray(m["decomposition"].V), policy=tab, occupancy=occ,
        message="stationary policy from SLSQP local search (feasible, audited; not proven optimal)",
        eps=dict(bounds), horizon=T, Lambda=m["Lambda"], audit=m["decomposition"],
        stationary=True, upper_bound=bound_res.utility,
    )


def fair_lp(model: TabularModel, horizon: int, *, eps: Any, constraint: str | Sequence[str] = "C",
            dp_discount: float = 1.0, stationary: bool = False, audit: bool = True,
            raise_infeasible: bool = True, lambda_eps: float = 0.1,
            lp: OccupancyLP | None = None) -> LPResult:
    """The highest-utility policy with |constraint| <= eps on a tabular model.

    Parameters
    ----------
    model, horizon : the tabular model and T (undiscounted, as the exact engine).
    eps : float, or a mapping {constraint: eps}; ``math.inf`` or None = unconstrained.
    constraint : ``"C"`` (qualification-gain parity), ``"DPE"`` (direct effect parity),
        ``"DP"`` (Wen's demographic parity: approval rate averaged over t < T with weights
        ``dp_discount**t``), or a sequence of them (all imposed).
    stationary : False (default): the exact time-indexed LP optimum (over all Markov
        policies, hence over all policies). True: the best stationary policy a local
        search finds; ``upper_bound`` then holds the time-indexed optimum.
    audit : audit the recovered policy with :func:`causalfair.effects.decompose`.
    raise_infeasible : raise :class:`InfeasibleError` (default) or return a result with
        ``status == "infeasible"``.
    lp : a prebuilt :class:`OccupancyLP` for this model and horizon (reuse across calls).
    """
    if lp is None:
        lp = OccupancyLP(model, horizon, dp_discount=dp_discount)
    elif lp.model is not model or lp.horizon != horizon or lp.dp_discount != dp_discount:
        raise ModelError("lp: the prebuilt OccupancyLP was built for another model, horizon or dp_discount.")
    bounds = _normalise_constraints(constraint, eps)
    if stationary:
        return _stationary(lp, bounds, lambda_eps, raise_infeasible)
    return lp.solve(bounds, tuple(bounds), audit=audit, raise_infeasible=raise_infeasible,
                    lambda_eps=lambda_eps)


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
    |constraint| (the left end).
    """

    model: TabularModel
    horizon: int
    constraint: str
    eps: np.ndarray
    points: tuple[LPResult, ...]
    unconstrained: LPResult
    eps_min: float
    lp: OccupancyLP = field(repr=False)

    @property
    def metric_label(self) -> str:
        return _METRIC_LABEL[self.constraint]

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
            m = policy_metrics(self.model, pol, self.horizon, dp_discount=self.lp.dp_discount)
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
            from causalfair._io import atomic_write_bytes

            atomic_write_bytes(path, lambda fh: fig.savefig(fh, format="png", dpi=120))
        return fig

    def to_dict(self) -> dict[str, Any]:
        df = self.to_frame()
        return {
            "model": self.model.name,
            "horizon": self.horizon,
            "constraint": self.constraint,
            "eps_min": self.eps_min,
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
                f"{self.eps_min:.6g})\n" + df[cols].to_string(index=False, float_format=lambda v: f"{v:.6f}"))

    def __str__(self) -> str:
        return self.summary()


def frontier(model: TabularModel, horizon: int, eps_grid: Iterable[float] | None = None,
             points: int = 50, *, constraint: str = "C", dp_discount: float = 1.0,
             audit: bool = True, lambda_eps: float = 0.1) -> Frontier:
    """Sweep eps and return the utility-fairness :class:`Frontier`.

    The default grid has ``points`` values evenly spaced from the smallest achievable
    |constraint| (0 when some policy is exactly fair) to the |constraint| of the
    utility-optimal policy (among utility-optimal policies, the least unfair one). The
    constraint matrix is built once; each point only changes the bound. Infeasible grid
    values (below the smallest achievable one) get ``status == "infeasible"``.
    """
    if constraint not in CONSTRAINTS:
        raise ModelError(f"constraint: unknown value {constraint!r}; allowed values: {', '.join(CONSTRAINTS)}.")
    lp = OccupancyLP(model, horizon, dp_discount=dp_discount)
    free = lp.solve(None, (constraint,), audit=False)
    scale = max(1.0, abs(free.utility))
    hi = lp.min_metric(constraint, utility_floor=free.utility - 1e-9 * scale)
    unc = lp.solve({constraint: hi + 1e-10}, (constraint,), audit=audit, lambda_eps=lambda_eps)
    eps_min = lp.min_metric(constraint)
    if eps_grid is None:
        if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 2:
            raise ModelError(f"points: must be an integer >= 2, got {points!r}.")
        grid = np.linspace(eps_min, max(hi, eps_min), int(points))
        grid[0] = eps_min + 1e-10
        grid[-1] = max(hi, eps_min) + 1e-10
    else:
        grid = np.sort(np.array([_check_eps_value(constraint, e) for e in eps_grid], dtype=float))
        if grid.size == 0:
            raise ModelError("eps_grid: empty; give at least one eps >= 0.")
    results = tuple(
        lp.solve({constraint: float(e)}, (constraint,), audit=audit, raise_infeasible=False,
                 lambda_eps=lambda_eps)
        for e in grid
    )
    return Frontier(model=model, horizon=lp.horizon, constraint=constraint, eps=grid,
                    points=results, unconstrained=unc, eps_min=eps_min, lp=lp)


# ------------------------------------------------------ Wen et al.'s discounted LP
@dataclass(frozen=True, eq=False)
class WenLPResult:
    """Solution of Wen et al.'s Algorithm 1 LP.

    ``objective``: (1 - gamma)^-1 sum lambda R (= E sum_t gamma^t R).
    ``policy``: pi[s, a] (unvisited states: uniform, Wen's fair exploration policy).
    ``occupancy``: lambda[s, a] (sums to 1). ``rho``: rho_z per group; ``gap``: largest
    pairwise |rho_a - rho_b|.
    """

    status: str
    objective: float
    policy: np.ndarray
    occupancy: np.ndarray
    rho: np.ndarray
    gap: float
    message: str


def _wen_inputs(P: Any, R: Any, D: Any, rho: Any, groups: Any, gamma: Any,
                ) -> tuple[np.ndarray, ...]:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise ModelError(f"P: expected shape (S, A, S), got {P.shape}.")
    S, A, _ = P.shape
    if (P < 0).any() or np.abs(P.sum(-1) - 1).max() > 1e-9:
        raise ModelError("P: every P[s, a, :] must be a probability distribution.")
    R = np.asarray(R, dtype=np.float64)
    if R.shape != (S, A):
        raise ModelError(f"R: expected shape {(S, A)}, got {R.shape}.")
    D = np.asarray(D, dtype=np.float64)
    if D.shape != (S,) or (D < 0).any() or abs(D.sum() - 1) > 1e-9:
        raise ModelError(f"D: expected a distribution of shape ({S},).")
    rho = np.asarray(rho, dtype=np.float64)
    if rho.ndim == 1:
        rho = np.broadcast_to(rho[:, None], (S, A))
    if rho.shape != (S, A):
        raise ModelError(f"rho: expected shape ({S}, {A}) or ({S},), got {rho.shape}.")
    g = np.asarray(groups)
    if g.shape != (S,) or not np.issubdtype(g.dtype, np.integer) or (g < 0).any():
        raise ModelError(f"groups: expected non-negative integer labels of shape ({S},).")
    if not (isinstance(gamma, (int, float)) and 0.0 < gamma < 1.0):
        raise ModelError(f"gamma: must be in (0, 1), got {gamma!r}.")
    s_, a_, t_ = np.nonzero(P)
    cross = g[s_] != g[t_]
    if cross.any():
        i = int(np.argmax(cross))
        raise ModelError(
            f"P: the MDP is not separable: P[{s_[i]}, {a_[i]}, {t_[i]}] > 0 moves group "
            f"{g[s_[i]]} to group {g[t_[i]]}; Wen's LP needs the group to be constant."
        )
    labels = np.unique(g)
    p_z = np.array([D[g == z].sum() for z in labels])
    if (p_z <= 0).any():
        z = labels[int(np.argmin(p_z))]
        raise ModelError(f"D: group {z} has no initial mass; its rho is undefined.")
    return P, R, D, rho, g, labels, p_z


def wen_evaluate(P: Any, R: Any, D: Any, rho: Any, groups: Any, gamma: float,
                 policy: Any) -> dict[str, Any]:
    """Exact evaluation of a stationary policy pi[s, a] in Wen et al.'s discounted setting,
    by a linear solve (independent of the LP): objective, rho per group, gap, occupancy."""
    P, R, D, rho, g, labels, p_z = _wen_inputs(P, R, D, rho, groups, gamma)
    pi = np.asarray(policy, dtype=np.float64)
    S, A, _ = P.shape
    if pi.shape != (S, A) or (pi < -1e-12).any() or np.abs(pi.sum(-1) - 1).max() > 1e-9:
        raise ModelError(f"policy: expected a stochastic matrix of shape ({S}, {A}).")
    P_pi = np.einsum("sa,sat->st", pi, P)
    d = (1 - gamma) * np.linalg.solve(np.eye(S) - gamma * P_pi.T, D)
    lam = d[:, None] * pi
    rz = np.array([(lam[g == z] * rho[g == z]).sum() / pz for z, pz in zip(labels, p_z, strict=True)])
    return {
        "objective": float((lam * R).sum() / (1 - gamma)),
        "rho": rz,
        "gap": float(rz.max() - rz.min()),
        "occupancy": lam,
    }


def wen_lp(P: Any, R: Any, D: Any, rho: Any, groups: Any, gamma: float, eps: float, *,
           raise_infeasible: bool = True) -> WenLPResult:
    """Wen, Bastani and Topcu's Algorithm 1: the exact eps-demographic-parity optimum of a
    finite separable MDP with discounted occupancy.

    ``P[s, a, s']``, ``R[s, a]`` (decision maker), ``D[s]`` (initial distribution),
    ``rho[s, a]`` or ``rho[s]`` (individual reward), ``groups[s]`` (integer subpopulation
    of each state; the MDP must never move between groups), ``gamma`` in (0, 1),
    ``eps`` >= 0 (``math.inf`` = unconstrained). Every pairwise
    |rho_a - rho_b| <= eps, rho_z = p_z^-1 sum_{s in z, a} lambda rho.
    """
    P, R, D, rho, g, labels, p_z = _wen_inputs(P, R, D, rho, groups, gamma)
    eps = _check_eps_value("DP", eps)
    S, A, _ = P.shape
    n = S * A
    # sum_a lam[s', a] - gamma sum_{s,a} lam[s, a] P[s, a, s'] = (1 - gamma) D[s']
    E = sp.csr_matrix((np.ones(n), (np.repeat(np.arange(S), A), np.arange(n))), shape=(S, n))
    A_eq = (E - gamma * sp.csr_matrix(P.reshape(n, S)).T).tocsr()
    b_eq = (1 - gamma) * D
    Z = len(labels)
    rows = np.zeros((Z, n))
    for i, (z, pz) in enumerate(zip(labels, p_z, strict=True)):
        mask = np.repeat(g == z, A)
        rows[i, mask] = rho.reshape(-1)[mask] / pz
    kwargs: dict[str, Any] = {}
    if math.isfinite(eps) and Z > 1:
        diff = np.array([rows[a] - rows[b] for a in range(Z) for b in range(a + 1, Z)])
        kwargs = {"A_ub": sp.csr_matrix(np.vstack([diff, -diff])),
                  "b_ub": np.full(2 * len(diff), eps)}
    res = _linprog(c=-R.reshape(-1) / (1 - gamma), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), **kwargs)
    if res.status == 2:
        msg = (f"no policy satisfies eps-demographic parity |rho_a - rho_b| <= {eps:g} on this "
               f"MDP (gamma = {gamma:g}); Wen et al.'s LP is infeasible.")
        if raise_infeasible:
            raise InfeasibleError(msg)
        nan = np.full((S, A), np.nan)
        return WenLPResult("infeasible", math.nan, nan, nan, np.full(Z, np.nan), math.nan, msg)
    if res.status != 0:
        raise _status_error(res, "Wen's LP")
    lam = np.clip(res.x, 0.0, None).reshape(S, A)
    mass = lam.sum(-1, keepdims=True)
    pi = np.where(mass > UNVISITED_MASS, lam / np.where(mass > 0, mass, 1.0), 1.0 / A)
    rz = rows @ lam.reshape(-1)
    return WenLPResult("optimal", float(-res.fun), pi, lam, rz, float(rz.max() - rz.min()),
                       str(res.message))


# ---------------------------------------------------------------- small loan MDP
@dataclass(frozen=True, eq=False)
class LoanMDP:
    """A discretised, thresholded belief loan MDP (Wen et al. section 2, App. G).

    Arrays in Wen's notation: ``P`` (S, 2, S), ``R`` (S, 2), ``D`` (S,), ``rho`` (S, 2)
    with rho = 1[a = 1] (demographic parity = equal offer rates), ``groups`` (S,)
    (0 = majority, 1 = minority), ``states`` (S, 3) = (group, alpha, beta), ``gamma``.
    """

    P: np.ndarray
    R: np.ndarray
    D: np.ndarray
    rho: np.ndarray
    groups: np.ndarray
    states: np.ndarray
    gamma: float

    def lp(self, eps: float, **kwargs: Any) -> WenLPResult:
        return wen_lp(self.P, self.R, self.D, self.rho, self.groups, self.gamma, eps, **kwargs)

    def evaluate(self, policy: Any) -> dict[str, Any]:
        return wen_evaluate(self.P, self.R, self.D, self.rho, self.groups, self.gamma, policy)


def loan_belief_mdp(*, interest: float = 0.17318629, p_minority: float = 0.29294318,
                    prior_majority: tuple[float, float] = (0.65338681, 0.20783559),
                    prior_minority: tuple[float, float] = (0.48824268, 0.48346869),
                    history: tuple[int, int] = (4, 2), risk_aversion: float = 0.01,
                    tau: float = 0.5, cap: int = 8, gamma: float = 0.8) -> LoanMDP:
    """Wen et al.'s loan MDP on a finite lattice.

    State (z, alpha, beta): alpha = alpha_z + i (i = 0..cap repaid loans), beta = beta_z +
    j * tau (j = 0..cap/tau; a default adds 1/tau units, a denial one unit, Wen's beta +=
    tau). Counts are thresholded at the cap (a move past it stays at the cap). Offer:
    repay w.p. alpha / (alpha + beta). Bank reward of an offer (code form, without the
    constant +2 offset): (I + 1) p - 1 - lambda (I + 1) sd, p and sd the mean and standard
    deviation of Beta(alpha, beta); 0 for a denial. Initial states: the prior (alpha_z,
    beta_z) (App. G values) after ``history[z]`` forced offers (paper: 10 and 7; smaller
    here to keep the lattice small). Group weights: 1 - p_minority and p_minority.
    """
    units = 1.0 / tau
    if abs(units - round(units)) > 1e-9 or units < 1:
        raise ModelError(f"tau: 1 / tau must be a positive integer, got tau = {tau!r}.")
    units = int(round(units))
    nb = cap * units
    na = cap
    G = 2
    per = (na + 1) * (nb + 1)
    S = G * per

    def sid(z: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return z * per + np.minimum(i, na) * (nb + 1) + np.minimum(j, nb)

    P = np.zeros((S, 2, S))
    R = np.zeros((S, 2))
    states = np.zeros((S, 3))
    for z, (a0, b0) in enumerate((prior_majority, prior_minority)):
        i, j = np.meshgrid(np.arange(na + 1), np.arange(nb + 1), indexing="ij")
        i, j = i.reshape(-1), j.reshape(-1)
        s = sid(z, i, j)
        alpha, beta = a0 + i, b0 + j * tau
        p = alpha / (alpha + beta)
        sd = np.sqrt(alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1)))
        states[s] = np.stack([np.full(i.shape, z), alpha, beta], axis=1)
        np.add.at(P, (s, 0, sid(z, i, j + 1)), 1.0)
        np.add.at(P, (s, 1, sid(z, i + 1, j)), p)
        np.add.at(P, (s, 1, sid(z, i, j + units)), 1.0 - p)
        R[s, 1] = (interest + 1.0) * p - 1.0 - risk_aversion * (interest + 1.0) * sd
    D = np.zeros(S)
    for z, w in enumerate((1.0 - p_minority, p_minority)):
        d = np.zeros(S)
        d[z * per] = 1.0
        for _ in range(int(history[z])):
            d = d @ P[:, 1, :]
        D += w * d
    rho = np.zeros((S, 2))
    rho[:, 1] = 1.0
    groups = np.repeat(np.arange(G), per)
    return LoanMDP(P=P, R=R, D=D, rho=rho, groups=groups, states=states, gamma=float(gamma))

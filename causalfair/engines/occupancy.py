"""Fair-policy linear programs over occupancy measures (the exact repair's engine).

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
the recovered policy with :func:`causalfair.engines.exact.exact_numbers`;
:func:`causalfair.engines.frontier.frontier` sweeps eps (the constraint matrix is built once per
model; only the bounds change).
:mod:`causalfair.engines.wen` has Wen et al.'s own discounted-occupancy LP for a general finite
separable MDP.

The stationary fair problem (one table pi(d1 | x, s) for all t) is not a linear program:
the occupancy of a stationary policy is a polynomial in the table. ``fair_lp(...,
stationary=True)`` therefore returns the best stationary policy a documented local search
finds (feasible and audited, a lower bound on the stationary optimum) together with the
time-indexed optimum, an upper bound on every policy's utility at that eps.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from causalfair._limits import check_memory
from causalfair._validation import check_flag, check_keywords
from causalfair.engines.benefit import check_eps
from causalfair.engines.effects import check_horizon
from causalfair.engines.exact import exact_numbers
from causalfair.errors import InputError
from causalfair.model import ModelError, TabularModel
from causalfair.policies.core import TablePolicy
from causalfair.policies.grid import policy_table
from causalfair.policies.resolver import resolve

__all__ = [
    "CONSTRAINTS",
    "InfeasibleError",
    "LPResult",
    "OccupancyLP",
    "fair_lp",
    "policy_metrics",
]

#: Fairness constraints the occupancy LP can express.
CONSTRAINTS = ("C", "DPE", "DP")

#: States whose occupancy is below this get the default decision d0 (see docs/frontier.md).
UNVISITED_MASS = 1e-12

#: A constraint counts as satisfied when the audited value is within this of eps.
FEASIBILITY_TOL = 1e-7

#: How each constrained metric is written in a bound ("|C|<=0.01").
METRIC_LABEL = {"C": "|C|", "DPE": "|DPE|", "DP": "|DP|"}

INFEASIBLE_MSG = (
    "no policy satisfies {what} on model {model!r} at horizon T = {T}: the smallest "
    "achievable value is {best}; raise eps to at least that."
)


class InfeasibleError(InputError):
    """No policy satisfies the fairness constraint (the LP is infeasible)."""


# ---------------------------------------------------------------------------- helpers
def check_eps_value(name: str, value: Any) -> float:
    """The bound ``eps[name]`` of a fair LP as a float >= 0 (inf: unconstrained), or a ModelError."""
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
        return {n: check_eps_value(n, eps.get(n, math.inf)) for n in names}
    v = check_eps_value(names[0], eps)
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


def highs_linprog(**kwargs: Any) -> Any:
    """scipy's ``linprog`` with the HiGHS solver, its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return linprog(method="highs", **kwargs)


#: The occupancy LP's memory: LP_BYTES T G K (2K + 8) bytes for its flow rows and
#: LP_PAIR_BYTES T K bytes for each of the G (G - 1) / 2 pairs of groups (their rows),
#: both with HiGHS's solve (docs/limits.md).
LP_BYTES = 384.0
LP_PAIR_BYTES = 2560.0


def lp_status_error(res: Any, where: str) -> RuntimeError:
    """The error for an LP the solver stopped on without a solution (a bug, not an input error)."""
    return RuntimeError(f"{where}: the LP solver stopped with status {res.status} ({res.message}).")


def _check_pairs(pairs: Any, G: int) -> list[tuple[int, int]]:
    """The pairs of groups whose gaps the LP bounds: every pair (None), or the given
    pairs (a, b) of two different groups (a gap's sign does not matter: |a - b|)."""
    if pairs is None:
        return [(a, b) for a in range(G) for b in range(a + 1, G)]
    out = []
    for ab in pairs:
        ok = isinstance(ab, (tuple, list)) and len(ab) == 2 and all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) and 0 <= i < G
            for i in ab) and ab[0] != ab[1]
        if not ok:
            raise ModelError(f"pairs: bad pair {ab!r}; give (a, b), two different group "
                             f"indices in [0, {G}).")
        out.append((int(ab[0]), int(ab[1])))
    if not out:
        raise ModelError("pairs: empty; give at least one pair (a, b), or None for every pair.")
    return out


# ----------------------------------------------------------------- policy evaluation
def _as_table(model: TabularModel, policy: Any, horizon: int) -> tuple[np.ndarray, str]:
    """A (T, G, K) table and a name for anything the policy resolver accepts
    (:func:`causalfair.policies.resolve`: a policy object, a table, a built-in name, a
    checkpoint, ...)."""
    res = resolve(policy, model)
    p = np.asarray(policy_table(res.policy, model, horizon), dtype=np.float64)
    name = res.label
    p = p[:horizon] if p.ndim == 3 else np.broadcast_to(p, (horizon, *p.shape))
    return np.ascontiguousarray(p), str(name)


def policy_metrics(model: TabularModel, policy: Any, horizon: int, *,
                   dp_discount: float = 1.0, eps: float | str | None = None) -> dict[str, Any]:
    """Exact audit of one policy: utility, C, DPE, IPE, SPE, DP, Lambda (and the
    :class:`~causalfair.results.Decomposition` under ``"decomposition"``).

    ``policy``: a Policy object (TablePolicy, TorchPolicy, ...), a table (G, K) or
    (T, G, K), or a built-in spec such as ``"threshold:0.5"``. ``DP`` is the gap in the
    approval rate averaged over t < T with weights ``dp_discount**t`` (see docs).
    """
    T = check_horizon(horizon)
    dp_discount = _check_dp_discount(dp_discount)
    p, name = _as_table(model, policy, T)
    dec = exact_numbers(model, TablePolicy(p, name=name), T, eps=eps, policy_name=name).decomposition
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
        """The recovered policy as a :class:`~causalfair.policies.core.TablePolicy`."""
        tab = self.policy[0] if self.stationary else self.policy
        return TablePolicy(tab, name=name or self.default_name())

    def default_name(self) -> str:
        bounds = ", ".join(f"{METRIC_LABEL[k]}<={v:.4g}" for k, v in self.eps.items()
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
    Variables are y[t, s, x, d] flattened in that order (n = T * G * K * 2). ``pairs``:
    the pairs of groups whose gaps a bound constrains (None: every pair, so the largest
    gap; the constrained repair's LP bound names the one pair its audit compares).
    """

    def __init__(self, model: TabularModel, horizon: int, *, dp_discount: float = 1.0,
                 pairs: Sequence[tuple[int, int]] | None = None):
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

        # sparse constraint matrices: ~ 2 K nonzeros per variable, and the rows of every pair
        # of groups, 8 T K nonzeros a pair over the three metrics; HiGHS's solve (and the
        # smallest |metric|'s) takes several times them: measured 406 MiB at G = 2, K = 100,
        # T = 50 and 4.0 GiB at G = 300 (44,850 pairs), K = 3, T = 20 (LP_BYTES, LP_PAIR_BYTES)
        G, K = model.n_groups, model.n_levels
        pairs = _check_pairs(pairs, G)
        P = len(pairs)
        check_memory(LP_BYTES * T * G * K * (2 * K + 8) + LP_PAIR_BYTES * T * K * P,
                     f"frontier LP over {T} epochs of {G} groups ({P} pairs)",
                     "use a shorter horizon or fewer groups (G groups make G(G-1)/2 pairs)")
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
        base = model.baseline  # pi0's action: V^PS scores each step's gain under it
        r = model.reward  # (G, 2, K)
        w = model.group_weights
        util = np.broadcast_to((w[:, None, None] * r).transpose(0, 2, 1), self.shape)
        self.c = np.ascontiguousarray(util).reshape(-1)

        gain_coef = np.broadcast_to(h.transpose(0, 2, 1), self.shape)
        # V^pi_s - V^PS_s = sum_{t,x,d} y[t,s,x,d] (h_d - h_base)[s,x] (Proposition 1)
        dir_coef = np.ascontiguousarray(np.broadcast_to(
            (h - h[:, base][:, None]).transpose(0, 2, 1), self.shape))
        dp_coef = np.zeros(self.shape)
        dp_coef[..., 1] = _dp_weights(T, self.dp_discount)[:, None, None]
        self._per_group = {
            name: self._group_rows(coef) for name, coef in
            (("C", gain_coef), ("DPE", dir_coef), ("DP", dp_coef))
        }
        self.pairs = pairs
        P = len(self.pairs)  # a sparse (P, G) difference: +1 at a, -1 at b (a dense one is P G)
        diff = sp.csr_matrix((np.tile([1.0, -1.0], P), np.asarray(self.pairs, dtype=np.int64
                                                                  ).reshape(-1),
                              np.arange(0, 2 * P + 1, 2)), shape=(P, G))
        self._diff_rows = {name: diff @ rows for name, rows in self._per_group.items()}
        self._ub_cache: dict[tuple[str, ...], sp.csr_matrix] = {}
        self._eps_min: dict[str, float] = {}
        # an action the model does not allow (TabularModel.allowed) has occupancy 0; a
        # state the policy never reaches gets pi0's action, else the one allowed
        allowed = tuple(range(2)) if model.allowed is None else tuple(model.allowed)
        upper = np.broadcast_to(np.array([np.inf if d in allowed else 0.0 for d in range(2)]),
                                self.shape).reshape(-1)
        self.var_bounds = np.column_stack([np.zeros(n), upper])
        self.default_action = base if base in allowed else allowed[0]

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
        return highs_linprog(c=-self.c, A_eq=self.A_eq, b_eq=self.b_eq, bounds=self.var_bounds,
                             **kwargs)

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
        res = highs_linprog(c=c, A_ub=A_ub, b_ub=np.concatenate(b), A_eq=A_eq, b_eq=self.b_eq,
                       bounds=np.vstack([self.var_bounds, [0.0, np.inf]]))
        if res.status != 0:
            raise lp_status_error(res, f"smallest achievable {METRIC_LABEL[name]}")
        val = max(0.0, float(res.x[-1]))
        if utility_floor is None:
            self._eps_min[name] = val
        return val

    def recover_policy(self, y: np.ndarray) -> np.ndarray:
        """pi_t(d1 | x, s) = y1 / (y0 + y1); pi0's action (the model's baseline, unless the
        model does not allow it) where the state is unvisited."""
        occ = np.clip(y.reshape(self.shape), 0.0, None)
        mass = occ.sum(-1)
        p = np.divide(occ[..., 1], mass, out=np.full(mass.shape, float(self.default_action)),
                      where=mass > UNVISITED_MASS)
        return np.clip(p, 0.0, 1.0)

    def solve(self, eps: Any = None, constraint: str | Sequence[str] = "C", *,
              audit: bool = True, raise_infeasible: bool = True, lambda_eps: float | str | None = None,
              ) -> LPResult:
        """Best time-indexed policy with |constraint| <= eps (see :func:`fair_lp`)."""
        bounds = _normalise_constraints(constraint, eps)
        res = self.solve_raw(bounds)
        T = self.horizon
        # HiGHS may stop on an infeasible program without saying so (status 4, model status
        # "Unknown", primal "Infeasible": 3 groups at T = 20): a bound below the smallest
        # achievable |metric| is infeasible whatever the status
        if res.status == 2 or (res.status != 0 and any(
                math.isfinite(v) and v < self.min_metric(k) for k, v in bounds.items())):
            what = " and ".join(f"{METRIC_LABEL[k]} <= {v:g}" for k, v in bounds.items())
            best = ", ".join(
                f"{METRIC_LABEL[k]} >= {self.min_metric(k):.6g}" for k in bounds
            )
            msg = INFEASIBLE_MSG.format(what=what, model=self.model.name, T=T, best=best)
            if raise_infeasible:
                raise InfeasibleError(msg)
            nan_tab = np.full(self.shape[:3], np.nan)
            return LPResult(status="infeasible", utility=math.nan, C=math.nan, policy=nan_tab,
                            occupancy=np.full(self.shape, np.nan), message=msg, eps=bounds,
                            horizon=T)
        if res.status != 0:
            raise lp_status_error(res, "fair-policy LP")
        y = np.asarray(res.x)
        p = self.recover_policy(y)
        dec = lam = None
        if audit:
            pol = TablePolicy(p, name="fair-LP")
            dec = exact_numbers(self.model, pol, T, eps=lambda_eps).decomposition
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
    ub = lp.var_bounds[: 2, 1]  # the allowed actions: p = P(d1) in [0, 1], or fixed
    box = [(0.0 if ub[0] else 1.0, 1.0 if ub[1] else 0.0)] * (G * K)
    h = model.expected_gain()
    payoffs: dict[str, np.ndarray] = {"U": np.broadcast_to(model.reward, (T, G, 2, K))}
    payoffs["C"] = np.broadcast_to(h, (T, G, 2, K))
    payoffs["DPE"] = np.broadcast_to(h - h[:, model.baseline][:, None], (T, G, 2, K))
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
                           bounds=box)
        fair_starts.append(np.clip(res.x, 0.0, 1.0))
    best, best_u = None, -math.inf
    for x0 in list(starts) + fair_starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = minimize(objective, np.clip(x0, 0, 1).reshape(-1), jac=True, method="SLSQP",
                           bounds=box, constraints=cons,
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
        what = " and ".join(f"{METRIC_LABEL[k]} <= {v:g}" for k, v in bounds.items())
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


@check_keywords
def fair_lp(model: TabularModel, horizon: int, *, eps: Any, constraint: str | Sequence[str] = "C",
            dp_discount: float = 1.0, stationary: bool = False, audit: bool = True,
            raise_infeasible: bool = True, lambda_eps: float | str | None = None,
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
    audit : audit the recovered policy with :func:`causalfair.engines.exact.exact_numbers`.
    raise_infeasible : raise :class:`InfeasibleError` (default) or return a result with
        ``status == "infeasible"``.
    lp : a prebuilt :class:`OccupancyLP` for this model and horizon (reuse across calls).
    """
    stationary, audit, raise_infeasible = (check_flag(k, v) for k, v in (
        ("stationary", stationary), ("audit", audit), ("raise_infeasible", raise_infeasible)))
    if lambda_eps is not None:  # named as this door names it (its eps bounds the constraint)
        check_eps(lambda_eps, "lambda_eps")
    if lp is None:
        lp = OccupancyLP(model, horizon, dp_discount=dp_discount)
    elif lp.model is not model or lp.horizon != horizon or lp.dp_discount != dp_discount:
        raise ModelError("lp: the prebuilt OccupancyLP was built for another model, horizon or dp_discount.")
    bounds = _normalise_constraints(constraint, eps)
    if stationary:
        return _stationary(lp, bounds, lambda_eps, raise_infeasible)
    return lp.solve(bounds, tuple(bounds), audit=audit, raise_infeasible=raise_infeasible,
                    lambda_eps=lambda_eps)

"""Constrained repair: the most profitable policy that meets an audit's thresholds.

A gate's thresholds ("|C| <= 0.05", "Lambda <= 0.14", ...) become the constraints of

    maximise  utility(pi)   subject to   q_i(pi) <= b_i   for every threshold i.

On a tabular system every q_i and the utility are differentiable functions of the policy
table (:mod:`causalfair.engines.exact_torch`), so the problem is solved on the exact numbers,
with no sampling noise, by an augmented Lagrangian (Powell-Hestenes-Rockafellar form for
inequalities, :func:`augmented_lagrangian`): the multipliers adapt between inner rounds
of Adam, and the penalty weight grows while the violation does not shrink.

- :func:`best_found` searches stationary tables pi(. | x, s) directly from several
  starts (the failing policy, the LP frontier's policy projected to a stationary table,
  constant tables, random tables); the best feasible table is the **best found**, not a
  proven optimum (the problem is not convex: Lambda is not linear in the occupancy).
- :func:`lp_bound`: the frontier LP under the thresholds that are linear in the
  occupancy measure (|C| and |DPE|) over all time-indexed policies, an **upper bound** on
  the utility of every policy that passes (it ignores Lambda and the other thresholds).
- :func:`repair_network` optimises the checkpoint's own network (its weights, through
  the table it induces on the grid) from the failing checkpoint and from the best-found
  table distilled into the same architecture, and keeps the best feasible result.

A result is feasible only if the numpy exact engine (the audit's own numbers,
:func:`causalfair.engines.exact.exact_numbers`) says every threshold holds; the optimiser aims a
little inside each bound (``margin``) so that round-off cannot tip a result over.

Thresholds over groups beyond the audit's pair (docs/decomposition.md, "More than two
groups"): a pair's constraint (``abs_C[B-A] <= 0.1``) is the same quantity of that pair
(A minus B) of the tabular model, the exact engine's numbers with ``pair=(a, b)``; an
every-pair key (``max_abs_C <= 0.1``) is one constraint per pair (:func:`expand`).

:class:`Multipliers` (re-exported from :mod:`causalfair.train.lagrangian`) is the plain
Lagrange-multiplier update of PPO-Lagrangian: lambda_i <- max(0, lambda_i + lr (q_i - b_i)).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair import _progress
from causalfair._io import fixed
from causalfair._limits import check_memory
from causalfair._validation import check_horizon, check_seed
from causalfair.engines.benefit import WEIGHTS, model_eps
from causalfair.engines.exact import exact_numbers, exact_numbers_by_pair
from causalfair.engines.exact_torch import exact_metrics, exact_metrics_by_pair
from causalfair.engines.groups import pair_names, resolve_pair, split_pair
from causalfair.errors import ConfigError, ModelError
from causalfair.model import TabularModel
from causalfair.policies.checkpoint import TorchPolicy
from causalfair.policies.grid import check_policy_table, grid_observation, policy_table
from causalfair.thresholds import (  # the one home of "quantity <= value"; re-exported
    EXACT_KEYS,
    Constraint,
    constraints_from_thresholds,
    parse_constraint,
)
from causalfair.train.adam import Adam
from causalfair.train.lagrangian import Multipliers  # re-exported
from causalfair.train.lbfgs import LBFGS

__all__ = [
    "Constraint",
    "parse_constraint",
    "constraints_from_thresholds",
    "Multipliers",
    "augmented_lagrangian",
    "ALResult",
    "Attempt",
    "RepairResult",
    "best_found",
    "check_budget",
    "lp_bound",
    "repair_network",
    "EXACT_KEYS",
    "expand",
]

#: Thresholds the frontier LP can impose (linear in the occupancy measure).
_LP_KEYS = {"abs_C": "C", "abs_DPE": "DPE"}


# ------------------------------------------------------------ augmented Lagrangian
@dataclass
class ALResult:
    """What :func:`augmented_lagrangian` ends with: the multipliers, the penalty weight,
    the number of gradient steps and the best feasible iterate's objective (or None)."""

    multipliers: np.ndarray
    rho: float
    steps: int
    best_objective: float | None
    best_state: Any = None
    history: list[tuple[float, float]] = field(default_factory=list)


def augmented_lagrangian(fn: Callable[[], tuple[Any, Any]], params: Iterable[Any], *,
                         outer: int = 30, inner: int = 60, lr: float = 0.05, rho: float = 10.0,
                         rho_max: float = 1e5, snapshot: Callable[[int], Any] | None = None,
                         tol: float = 1e-7, decay: float = 0.9,
                         project: Callable[[], None] | None = None) -> ALResult:
    """Maximise ``f`` subject to ``g <= 0`` over torch ``params``.

    ``fn()`` returns ``(f, g)``: a torch scalar to maximise and a torch vector of
    constraint values (feasible where every entry is <= 0), both differentiable in
    ``params``; or a batch of B independent problems, ``f`` of shape (B,) and ``g`` of
    shape (B, n), whose parameters do not interact (each row gets its own multipliers
    and penalty weight; Adam is elementwise, so this equals B separate runs). Inner
    rounds of ``inner`` Adam steps minimise

        -f + (1 / 2 rho) sum_i ( max(0, lambda_i + rho g_i)^2 - lambda_i^2 );

    after each round lambda_i <- max(0, lambda_i + rho g_i) and rho doubles (up to
    ``rho_max``) when the largest violation has not fallen below a quarter of the
    previous round's. Adam's step size is ``lr * decay**round`` (at least lr / 20);
    ``project()``, if given, runs after every step (e.g. to clip parameters into their
    domain: projected gradient). For each row, the iterate with the best ``f`` among those where
    every g_i <= 0 is kept through ``snapshot(row)``. Stops early when a round changes
    neither f (relative ``tol``) nor the multipliers of any row, and every row is feasible.
    """
    import torch

    params = list(params)
    opt = Adam(params, lr=lr)
    f0, g0 = fn()
    single = f0.ndim == 0
    B = 1 if single else f0.shape[0]

    def rows(f: Any, g: Any) -> tuple[Any, Any]:
        return (f.reshape(1), g.reshape(1, -1)) if single else (f, g)

    lam = torch.zeros_like(rows(f0, g0)[1].detach())
    rho_t = torch.full((B, 1), float(rho), dtype=lam.dtype)
    best_f: list[float | None] = [None] * B
    best_state: list[Any] = [None] * B
    prev_viol = torch.full((B,), math.inf, dtype=lam.dtype)
    prev_f = torch.full((B,), math.inf, dtype=lam.dtype)
    steps = 0
    history: list[tuple[float, float]] = []

    def consider(f: Any, g: Any) -> None:
        ok = (g <= 0).all(-1)
        for i in torch.nonzero(ok).flatten().tolist():
            fv = float(f[i])
            if best_f[i] is None or fv > best_f[i]:
                best_f[i] = fv
                best_state[i] = snapshot(i) if snapshot is not None else None

    prog = _progress.start(f"constrained repair ({B} start{'s' if B > 1 else ''})", outer, "rounds")
    for k in range(outer):
        for group in opt.param_groups:  # anneal: the last rounds polish (abs() is not smooth)
            group["lr"] = lr * max(0.05, decay ** k)
        for _ in range(inner):
            f, g = rows(*fn())
            consider(f.detach(), g.detach())
            pen = ((torch.clamp(lam + rho_t * g, min=0.0) ** 2 - lam ** 2) / (2.0 * rho_t)).sum()
            loss = -f.sum() + pen
            opt.zero_grad()
            loss.backward()
            opt.step()
            if project is not None:
                with torch.no_grad():
                    project()
            steps += 1
        with torch.no_grad():
            f, g = rows(*fn())
            consider(f, g)
            new_lam = torch.clamp(lam + rho_t * g, min=0.0)
            viol = torch.clamp(g, min=0.0).amax(-1) if g.shape[-1] else torch.zeros(B, dtype=lam.dtype)
            history.append((float(f.mean()), float(viol.max())))
            stalled = bool(((f - prev_f).abs() <= tol * torch.clamp(f.abs(), min=1.0)).all()) and bool(
                torch.allclose(new_lam, lam, atol=tol))
            lam = new_lam
            grow = viol > 0.25 * prev_viol
            rho_t = torch.where(grow[:, None], torch.clamp(2.0 * rho_t, max=rho_max), rho_t)
            prev_viol, prev_f = viol, f.clone()
        done = [b for b in best_f if b is not None]
        prog.update(best=f"{max(done):.4f}" if done else "none feasible yet",
                    violation=f"{float(viol.min()):.2e}")
        if stalled and bool((viol == 0).all()):
            break
    prog.close()
    finite = [b for b in best_f if b is not None]
    return ALResult(multipliers=(lam[0] if single else lam).numpy().copy(), rho=float(rho_t.max()),
                    steps=steps, best_objective=(best_f[0] if single else (max(finite) if finite else None)),
                    best_state=best_state[0] if single else best_state, history=history)


# -------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Attempt:
    """One start of the search: its name, the policy table it ended with, the audit's
    numbers for it and whether every constraint holds on them."""

    start: str
    table: np.ndarray
    metrics: Mapping[str, float]
    feasible: bool

    @property
    def utility(self) -> float:
        return float(self.metrics["utility"])

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "feasible": self.feasible,
                **{k: float(v) for k, v in self.metrics.items()}}


@dataclass
class RepairResult:
    """Outcome of a repair: the best feasible attempt (None when no start met every
    constraint), every attempt, and the reference points: the original policy's numbers,
    the best found over tables and the LP bound (tabular systems)."""

    constraints: tuple[Constraint, ...]
    attempts: list[Attempt]
    best: Attempt | None
    original: Mapping[str, float] | None = None
    best_found: Attempt | None = None
    bound: float | None = None
    bound_keys: tuple[str, ...] = ()
    wall_s: float = 0.0
    module: Any = None

    @property
    def passed(self) -> bool:
        return self.best is not None

    def best_attempt(self) -> Attempt | None:
        """The passing result, or else the attempt closest to passing (smallest largest
        relative violation), whose numbers a failed repair reports."""
        if self.best is not None:
            return self.best
        if not self.attempts:
            return None
        return min(self.attempts, key=lambda a: _violation(self.constraints, a.metrics))

    def ratios(self) -> dict[str, float | None]:
        """Utility of the repair relative to the best found, the bound and the original
        (None where the reference or the repair's utility is not positive: a ratio of
        negative utilities does not read as a fraction kept)."""
        if self.best is None:
            return {"to_best_found": None, "to_bound": None, "to_original": None}
        u = self.best.utility

        def ratio(ref: float | None) -> float | None:  # a fraction only of a positive utility
            return None if ref is None or ref <= 0 or u < 0 else u / ref

        return {
            "to_best_found": ratio(self.best_found.utility if self.best_found else None),
            "to_bound": ratio(self.bound),
            "to_original": ratio(self.original["utility"] if self.original else None),
        }

    def to_dict(self) -> dict[str, Any]:
        show = self.best_attempt()
        return {
            "constraints": [c.label for c in self.constraints],
            "passed": self.passed,
            "result": None if show is None else show.to_dict(),
            "original": None if self.original is None else dict(self.original),
            "best_found": None if self.best_found is None else self.best_found.to_dict(),
            "lp_bound": None if self.bound is None else {"utility": self.bound,
                                                        "constraints": list(self.bound_keys)},
            "ratios": self.ratios(),
            "attempts": [a.to_dict() for a in self.attempts],
            "wall_s": self.wall_s,
        }

    def summary(self) -> str:
        cons = ", ".join(c.label for c in self.constraints)
        lines = [f"Constrained repair ({cons})"]

        def row(name: str, m: Mapping[str, float] | None) -> None:
            if m is None:
                return
            lines.append(f"  {name:<12} utility {fixed(m['utility'], 4, sign=True)}   "
                         + "   ".join(f"{c.key} {fixed(c.value(m), 4)}" for c in self.constraints))

        row("original", self.original)
        if self.best is None:
            lines.append("  no passing repair found; the attempt closest to passing:")
            att = self.best_attempt()
            row("best attempt", None if att is None else att.metrics)
        elif self.module is not None:  # a repaired network, and the table search's best
            row("repair", self.best.metrics)
        if self.best_found is not None:
            row("best found", self.best_found.metrics)
        if self.bound is not None:
            lines.append(f"  {'LP bound':<12} utility {fixed(self.bound, 4, sign=True)}   "
                         "(time-indexed policies, "
                         f"{', '.join(self.bound_keys) or 'no linear threshold'} only)")
        r = self.ratios()
        if self.module is None:  # the table search alone: the best found is the result
            r.pop("to_best_found")
        parts = [f"{k.replace('to_', '').replace('_', ' ')} {v:.3f}" for k, v in r.items() if v is not None]
        if parts:
            lines.append(f"  {'repair' if self.module is not None else 'best found'} utility / "
                         + ", / ".join(parts))
        lines.append(f"  wall time {self.wall_s:.1f} s")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _violation(constraints: Sequence[Constraint], metrics: Mapping[str, float]) -> float:
    return max(0.0, max(float(c.excess(c.value(metrics))) / max(abs(c.bound), 1e-3)
                        for c in constraints))


# ------------------------------------------------------------------ pairs of groups
def expand(model: TabularModel, constraints: Sequence[Constraint]) -> tuple[Constraint, ...]:
    """``constraints`` with every ``max_*`` key as one constraint per pair of the model's
    groups; a pair that names no two groups is refused, naming the groups."""
    groups = tuple(model.group_names)
    names = [f"{groups[a]}-{groups[b]}" for a, b in pair_names(groups, 0)]
    out = tuple(one for c in constraints for one in c.for_pairs(names))
    for c in out:  # the one reading of a pair (engines.groups.resolve_pair), its key named
        if c.pair is not None:
            resolve_pair(c.pair, groups, f"constraint {c.key}")
    return out


def _pairs(model: TabularModel, constraints: Sequence[Constraint]) -> dict[str, tuple[int, int]]:
    """The explicit pairs of ``constraints`` (expanded): name -> group indices (a, b)."""
    groups = tuple(model.group_names)
    return {c.pair: split_pair(c.pair, groups) for c in constraints if c.pair is not None}


def _ratio(va: Any, vb: Any) -> Any:
    """ratio_V of a pair: min(V_a, V_b) / max(|V_a|, |V_b|) of the two groups' V^pi, written
    (s - |d|) / (|V_a| + |V_b| + ||V_a| - |V_b||) with s = V_a + V_b and d = V_a - V_b, one
    expression for numpy and torch; as :meth:`Constraint.value` reads it. Of two positive
    values it is the audit's min / max (:mod:`causalfair.engines.groups`); where either is
    <= 0, for which the audit has no ratio, it is <= 0, so a positive bound is not met
    (min / max of two negative values would exceed 1)."""
    return (va + vb - abs(va - vb)) / (abs(va) + abs(vb) + abs(abs(va) - abs(vb)))


def _add_pairs(m: dict[str, Any], pairs: Mapping[str, tuple[int, int]],
               of_pair: Callable[[tuple[int, int]], Mapping[str, Any]]) -> dict[str, Any]:
    """``m`` with ``"C[A-B]"``, ... ``"Lambda[A-B]"`` for every pair: the exact numbers of
    the pair (``of_pair((a, b))``), and ``"ratio_V[A-B]"`` (:func:`_ratio` of ``m["V"]``,
    (..., G)); as :meth:`Constraint.value` reads them."""
    for name, ab in pairs.items():
        mp = of_pair(ab)
        m.update({f"{k}[{name}]": mp[k] for k in ("C", "DPE", "IPE", "SPE", "Lambda")})
        m[f"ratio_V[{name}]"] = _ratio(m["V"][..., ab[0]], m["V"][..., ab[1]])
    return m


# --------------------------------------------------------------------- the audit side
def _attempt(model: TabularModel, start: str, table: np.ndarray, T: int, eps: float, weights: str,
             constraints: Sequence[Constraint], pair: tuple[int, int] | None = None) -> Attempt:
    """The numbers of ``table``: the plain keys (``C``, ``DPE``, ..., ``Lambda``) of
    ``pair`` (None: the engine's default pair; an audit's ``[engine] pair``, so that the
    repair reports the pair the gate judges), and ``KEY[A-B]`` for every pair the
    constraints name."""
    pairs = _pairs(model, constraints)
    if pairs:  # one decomposition; each pair's numbers as a pass of its own gives them
        ex, by_pair = exact_numbers_by_pair(model, table, T, list(pairs.values()), eps=eps,
                                            weights=weights, pair=pair)
        m = _add_pairs({**ex.scalars(), "V": np.asarray(ex.decomposition.V)}, pairs,
                       by_pair.__getitem__)
        m.pop("V")  # the per-group values served the ratios; the attempt keeps scalars
    else:
        m = exact_numbers(model, table, T, eps=eps, weights=weights, pair=pair).scalars()
    return Attempt(start, np.asarray(table), m, all(c.holds(m) for c in constraints))


def _targets(constraints: Sequence[Constraint], margin: float) -> list[tuple[Constraint, float, float]]:
    """(constraint, target, scale): aim at bound - margin * max(|bound|, 1e-3) (a ratio,
    bounded from below: bound + margin * max(|bound|, 1e-3))."""
    out = []
    for c in constraints:
        scale = max(abs(c.bound), 1e-3)
        out.append((c, c.bound + margin * scale if c.at_least else c.bound - margin * scale,
                    scale))
    return out


def _objective(model: TabularModel, T: int, eps: float, weights: str,
               constraints: Sequence[Constraint], margin: float, table_of: Callable[[], Any],
               u_scale: Any, batched: bool = False, pair: tuple[int, int] | None = None,
               ) -> Callable[[], tuple[Any, Any]]:
    """``fn() -> (f, g)`` for :func:`augmented_lagrangian`: the utility over ``u_scale`` and
    each constraint's excess over its target (:func:`_targets`) over its scale. One exact
    pass a call: the plain keys read ``pair`` (the pair :func:`_attempt` judges them on;
    None: the engine's default pair), a pair's keys the columns of
    :func:`~causalfair.engines.exact_torch.exact_metrics_by_pair` (Lambda only of the
    pairs a Lambda constraint names), each kind of pair constraint in one tensor operation."""
    import torch

    targets = _targets(constraints, margin)
    pairs = _pairs(model, constraints)
    cols = {ab: j for j, ab in enumerate(dict.fromkeys(pairs.values()))}
    lam_cols = {ab: j for j, ab in enumerate(_lambda_pairs(model, constraints))}
    ia, ic = (torch.tensor([ab[k] for ab in cols], dtype=torch.long) for k in (0, 1))
    plain = [(i, c, tgt, sc) for i, (c, tgt, sc) in enumerate(targets) if c.pair is None]
    kinds: dict[tuple[str, bool, bool], list[tuple[int, int, float, float]]] = {}
    for i, (c, tgt, sc) in enumerate(targets):
        if c.pair is not None:
            col = (lam_cols if c.metric == "Lambda" else cols)[pairs[c.pair]]
            kinds.setdefault((c.metric, c.absolute, c.at_least), []).append((i, col, tgt, sc))
    order = [i for i, *_ in plain] + [i for rows in kinds.values() for i, *_ in rows]
    perm = torch.tensor(np.argsort(order, kind="stable"), dtype=torch.long)
    columns = [(kind, torch.tensor([r[1] for r in rows], dtype=torch.long),
                torch.tensor([r[2] for r in rows], dtype=torch.float64),
                torch.tensor([r[3] for r in rows], dtype=torch.float64))
               for kind, rows in kinds.items()]

    def fn() -> tuple[Any, Any]:
        table = table_of()
        kw = dict(eps=eps, weights=weights, batched=batched, pair=pair)
        if not pairs:
            m = exact_metrics(model, table, T, **kw)
        else:
            m = exact_metrics_by_pair(model, table, T, list(cols), lambda_pairs=list(lam_cols),
                                      **kw)
            m["by_pair"]["ratio_V"] = _ratio(m["V"][..., ia], m["V"][..., ic])
        parts = [(((tgt - c.value(m)) if c.at_least else (c.value(m) - tgt)) / sc).unsqueeze(-1)
                 for _, c, tgt, sc in plain]
        for (metric, absolute, at_least), col, tgt, sc in columns:
            v = m["by_pair"][metric][..., col]
            v = v.abs() if absolute else v
            parts.append(((tgt - v) if at_least else (v - tgt)) / sc)
        g = torch.cat(parts, dim=-1)[..., perm]
        return m["utility"] / u_scale, g

    return fn


def _check_model(model: Any) -> TabularModel:
    if not isinstance(model, TabularModel):
        raise ModelError(
            f"model: the exact repair needs a tabular model, got {type(model).__name__}; a "
            "simulator-only system is repaired by the sampled trainer (causalfair train "
            "--constraint ...).")
    return model


def _logit_table(model: TabularModel, p: np.ndarray) -> np.ndarray:
    """Logits whose sigmoid (two actions) or softmax is ``p``, clipped to +-8."""
    if model.n_actions == 2:  # tables of pi(d1), any leading dimensions
        q = np.clip(p, 1e-3, 1 - 1e-3)
        return np.log(q) - np.log1p(-q)
    q = np.clip(p, 1e-4, None)
    return np.log(q / q.sum(-1, keepdims=True))


def _table_from_logits(model: TabularModel, z: Any) -> Any:
    import torch

    if model.n_actions == 2:
        return torch.sigmoid(z)
    return torch.softmax(z, dim=-1)


def _project_table(model: TabularModel, p: Any) -> None:
    """In place: clip tables of pi(d1) to [0, 1]; project action distributions onto the
    simplex (Euclidean projection, the sort-based rule of Held et al. 1974)."""
    import torch

    if model.n_actions == 2:
        p.clamp_(0.0, 1.0)
        return
    u, _ = torch.sort(p, dim=-1, descending=True)
    css = u.cumsum(-1) - 1.0
    k = torch.arange(1, p.shape[-1] + 1, dtype=p.dtype)
    rho = (u - css / k > 0).sum(-1, keepdim=True)
    theta = css.gather(-1, rho - 1) / rho.to(p.dtype)
    p.sub_(theta).clamp_(min=0.0)


def _stationary_projection(model: TabularModel, p_timed: np.ndarray, T: int) -> np.ndarray:
    """A time-indexed policy as one stationary table: each cell's decision averaged over
    t < T with the policy's own visitation (d0 where never visited)."""
    mu = model.propagate(p_timed, T)[:T]
    mass = mu.sum(0)
    if p_timed.ndim == 4:
        avg = (mu[..., None] * p_timed).sum(0)
        return np.divide(avg, mass[..., None], out=np.asarray(model.baseline_table() * np.ones_like(avg)),
                         where=mass[..., None] > 0)
    return np.divide((mu * p_timed).sum(0), mass, out=np.zeros_like(mass), where=mass > 0)


# ------------------------------------------------------------------------ LP bound
def _lp_constraints(model: TabularModel, constraints: Sequence[Constraint],
                    pair: tuple[int, int] | None) -> tuple[dict[str, float], list[tuple[int, int]] | None]:
    """The thresholds the LP can impose, {"C" | "DPE": bound}, and the pairs they bound:
    ``abs_C`` / ``abs_DPE`` of ``pair`` (two groups: their one pair; more, with a pair
    named: that pair alone). With more than two groups and no pair the audit compares the
    groups of the largest and smallest V^pi, so ``abs_C`` is the largest gap, every pair's
    bound; that pair's DPE is no linear function of the occupancy, so ``abs_DPE`` is left
    out there (the bound stays an upper bound)."""
    bounds = {_LP_KEYS[c.key]: c.bound for c in constraints if c.key in _LP_KEYS}
    if model.n_groups == 2:
        return bounds, None
    if pair is not None:
        return bounds, [tuple(pair)]
    bounds.pop("DPE", None)
    return bounds, None


def lp_bound(model: TabularModel, T: int, constraints: Sequence[Constraint],
             pair: tuple[int, int] | None = None) -> tuple[float | None, tuple[str, ...], Any]:
    """Utility of the frontier LP under the linear thresholds (|C|, |DPE| of ``pair``, the
    pair the attempts are judged on; :func:`_lp_constraints`) over all time-indexed
    policies: (utility, keys imposed, LPResult), or (None, (), None) when the LP does not
    apply (more than two actions) or is infeasible."""
    from causalfair.engines.occupancy import InfeasibleError, OccupancyLP

    if model.n_actions != 2:
        return None, (), None
    bounds, pairs = _lp_constraints(model, constraints, pair)
    lp = OccupancyLP(model, T, pairs=pairs)
    try:
        res = lp.solve(bounds or None, tuple(bounds) or "C", audit=False)
    except InfeasibleError:
        return None, tuple(k for k in bounds), None
    return float(res.utility), tuple(f"abs_{k}" for k in bounds), res


# ------------------------------------------------------------------- best found
def _starts(model: TabularModel, T: int, constraints: Sequence[Constraint],
            initial: Mapping[str, np.ndarray] | None, seed: int, n_random: int,
            lp_res: Any, pair: tuple[int, int] | None = None) -> list[tuple[str, np.ndarray]]:
    from causalfair.engines.occupancy import InfeasibleError, OccupancyLP

    G, K, A = model.n_groups, model.n_levels, model.n_actions
    shape = (G, K) if A == 2 else (G, K, A)
    if initial is not None and not isinstance(initial, Mapping):
        raise ModelError(f"initial: expected a mapping name -> policy table, got "
                         f"{type(initial).__name__}.")
    starts: list[tuple[str, np.ndarray]] = []
    for name, tab in (initial or {}).items():
        tab = check_policy_table(model, tab, f"initial[{name!r}]")  # probabilities, shape
        if tab.shape != shape:
            raise ModelError(f"initial[{name!r}]: a starting table is stationary, shape "
                             f"{shape}; got a time-indexed one of shape {tab.shape}.")
        starts.append((str(name), tab))
    if lp_res is not None:
        starts.append(("LP frontier policy", _stationary_projection(model, lp_res.policy, T)))
        lin, pairs = _lp_constraints(model, constraints, pair)
        lin = {k: v / 2 for k, v in lin.items()}
        if lin:
            try:
                tight = OccupancyLP(model, T, pairs=pairs).solve(lin, tuple(lin), audit=False)
                starts.append(("LP frontier policy (half the bounds)",
                               _stationary_projection(model, tight.policy, T)))
            except InfeasibleError:
                pass
    if A == 2:
        starts += [(f"constant {c:g}", np.full(shape, c)) for c in (0.25, 0.5, 0.75)]
    else:
        starts.append(("uniform", np.full(shape, 1.0 / A)))
    rng = np.random.default_rng(seed)
    for i in range(n_random):
        tab = rng.uniform(size=shape) if A == 2 else rng.dirichlet(np.ones(A), size=(G, K))
        starts.append((f"random {i}", tab))
    return starts


def _check_horizon_eps(T: int, eps: Any, weights: str, model: TabularModel) -> tuple[int, float]:
    """T, and eps as the number Lambda uses on ``model`` (None: what it declares, else
    "auto"; :func:`causalfair.engines.benefit.model_eps`)."""
    if weights not in WEIGHTS:
        raise ModelError(f"weights: unknown value {weights!r}; allowed values: {', '.join(WEIGHTS)}.")
    return check_horizon(T), model_eps(eps, model)[0]


def check_budget(outer: Any, n_random: Any, seed: Any,
                 error: type[Exception] = ConfigError, *, inner: Any = 150,
                 margin: Any = 1e-3) -> None:
    """The repair's budget: ``outer`` rounds of the augmented Lagrangian (an integer >= 1;
    ``causalfair train --algo exact --iterations``, a spec's ``[retrain] iterations``),
    ``inner`` gradient steps a round (an integer >= 1), ``n_random`` random starting tables
    (an integer >= 0, ``[retrain] starts``), the ``margin`` the repair aims inside each
    bound (a number in [0, 1): a share of the bound) and the ``seed``
    (:func:`causalfair._validation.check_seed`), else ``error`` naming the field: the one
    check of every door (:func:`best_found`, :func:`repair_network`,
    :func:`causalfair.train.exact.repair_checkpoint`)."""
    for name, v, low, what in (("iterations", outer, 1, "rounds of the augmented Lagrangian"),
                               ("inner", inner, 1, "gradient steps a round"),
                               ("starts", n_random, 0, "random starting tables")):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise error(f"{name}: bad value {v!r}; must be an integer >= {low} (the repair's "
                        f"{what}).")
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.floating)) \
            or not 0 <= margin < 1:  # NaN too
        raise error(f"margin: bad value {margin!r}; must be a number in [0, 1), the share of "
                    "each bound the repair aims inside it (default 1e-3).")
    check_seed(seed, "seed", error)


def _lambda_pairs(model: TabularModel, constraints: Sequence[Constraint]) -> list[tuple[int, int]]:
    """The pairs (a, b) whose Lambda a constraint reads (``Lambda[A-B]``, ``max_Lambda``)."""
    pairs = _pairs(model, constraints)
    return list(dict.fromkeys(pairs[c.pair] for c in constraints
                              if c.pair is not None and c.metric == "Lambda"))


def _check_search_memory(model: TabularModel, T: int, n_starts: int, n_lambda: int) -> None:
    """Refuse a search whose autograd graphs cannot fit, before it starts: each step is one
    exact pass (:func:`_objective`; every pair's C, DPE, IPE, SPE are differences of its
    per-group values), which keeps at least its T transition kernels of every starting
    table, (starts, G, K, K) float64 each, and the K x K Lambda terms of each pair a Lambda
    constraint names, at least A + 2 (starts, K, K) float64 a pair (the action differences
    and two products). A lower bound: what is refused could never have fit."""
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    check_memory(8.0 * n_starts * K * K * (T * G + n_lambda * (A + 2)),
                 f"the exact repair: one exact pass a step of {n_starts} starting tables, "
                 f"horizon {T}, {G} groups x {K} levels, and the Lambda terms of {n_lambda} "
                 f"pair{'' if n_lambda == 1 else 's'}",
                 "name fewer Lambda pairs (max_Lambda over G groups makes G(G-1)/2), fewer "
                 "starts ([retrain] starts) or a shorter horizon")


def best_found(model: TabularModel, horizon: int, constraints: Sequence[Constraint], *,
               eps: float | str | None = None, weights: str = "visitation",
               initial: Mapping[str, np.ndarray] | None = None, seed: int = 0,
               n_random: int = 12, margin: float = 1e-3, outer: int = 30, inner: int = 150,
               original: Mapping[str, float] | None = None,
               pair: tuple[int, int] | None = None) -> RepairResult:
    """The best stationary policy table the augmented Lagrangian finds from several
    starts (``initial``: extra named starting tables, e.g. the failing policy's), with
    the LP bound. Deterministic for a given ``seed``. ``pair``: the groups whose numbers
    the attempts report under the plain keys (None: the engine's default pair)."""
    import torch

    t0 = time.perf_counter()
    check_budget(outer, n_random, seed, inner=inner, margin=margin)
    model = _check_model(model)
    T, eps = _check_horizon_eps(horizon, eps, weights, model)
    constraints = expand(model, constraints)
    bound, bound_keys, lp_res = lp_bound(model, T, constraints, pair)
    starts = _starts(model, T, constraints, initial, seed, n_random, lp_res, pair)
    _check_search_memory(model, T, len(starts), len(_lambda_pairs(model, constraints)))
    # projected gradient on the table itself (vertices such as p = 0 or 1, where optima
    # often lie, are reached exactly; a logit parametrisation only approaches them)
    p = torch.tensor(np.stack([np.asarray(t, dtype=np.float64) for _, t in starts]),
                     requires_grad=True)
    with torch.no_grad():
        _project_table(model, p)
    u0 = torch.abs(exact_metrics(model, p.detach(), T, eps=eps, weights=weights,
                                 batched=True)["utility"]).clamp(min=1.0)
    fn = _objective(model, T, eps, weights, constraints, margin, lambda: p, u0, batched=True,
                    pair=pair)
    res = augmented_lagrangian(fn, [p], outer=outer, inner=inner, lr=0.02,
                               snapshot=lambda i: p[i].detach().clone(),
                               project=lambda: _project_table(model, p))
    attempts = []
    for i, (name, _) in enumerate(starts):
        pf = res.best_state[i] if res.best_state[i] is not None else p[i].detach()
        attempts.append(_attempt(model, name, pf.numpy().copy(), T, eps, weights, constraints,
                                 pair))
    feas = [a for a in attempts if a.feasible]
    best = max(feas, key=lambda a: a.utility) if feas else None
    return RepairResult(constraints=constraints, attempts=attempts, best=best, original=original,
                        best_found=best, bound=bound, bound_keys=bound_keys,
                        wall_s=time.perf_counter() - t0)


# ------------------------------------------------------------------ network repair
def _grid_input(model: TabularModel, encoding: Any) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(encoding.encode(grid_observation(model))))


def _net_table(model: TabularModel, net: Any, x: Any) -> Any:
    out = net(x).double()
    G, K, A = model.n_groups, model.n_levels, model.n_actions
    if out.shape[1] == 1:
        import torch

        return torch.sigmoid(out[:, 0]).reshape(G, K)
    return _table_from_logits(model, out.reshape(G, K, A))


def _distil(model: TabularModel, net: Any, x: Any, target: np.ndarray) -> None:
    """Fit ``net``'s table to ``target``: least squares on the logits (probabilities
    clipped to [1e-6, 1 - 1e-6]), full-batch L-BFGS (a few dozen grid cells: it
    converges to about 1e-7 in probability in well under a second)."""
    import torch

    if model.n_actions == 2:
        q = np.clip(target, 1e-6, 1 - 1e-6)
        goal = torch.tensor(np.log(q) - np.log1p(-q))
    else:
        q = np.clip(target, 1e-6, None)
        goal = torch.tensor(np.log(q / q.sum(-1, keepdims=True)))
    opt = LBFGS(list(net.parameters()), lr=1.0, max_iter=500, tolerance_grad=1e-12,
                tolerance_change=1e-14, history_size=50, line_search_fn="strong_wolfe")

    def closure() -> Any:
        opt.zero_grad()
        out = net(x).double()
        z = out[:, 0].reshape(goal.shape) if out.shape[1] == 1 else torch.log_softmax(
            out.reshape(goal.shape), dim=-1)
        loss = ((z - goal) ** 2).mean()
        loss.backward()
        return loss

    opt.step(closure)


def repair_network(model: TabularModel, horizon: int, net: Any, encoding: Any,
                   constraints: Sequence[Constraint], *, eps: float | str | None = None,
                   weights: str = "visitation", seed: int = 0, margin: float = 1e-3,
                   outer: int = 30, inner: int = 150, search: RepairResult | None = None,
                   n_random: int = 12, pair: tuple[int, int] | None = None) -> RepairResult:
    """Repair ``net`` (a torch module mapping ``encoding``'s features to one logit or A
    logits) on the exact objective and constraints. Starts: the network as given, and a
    copy distilled to the best-found table (:func:`best_found`, run here unless
    ``search`` is given). Returns a :class:`RepairResult` whose ``module`` is the best
    feasible network (or the attempt closest to passing). ``net`` itself is not changed.
    ``pair``: the groups the plain keys of every attempt and of ``original`` compare (an
    audit's ``[engine] pair``; None: the engine's default pair)."""
    import copy

    import torch

    t0 = time.perf_counter()
    check_budget(outer, n_random, seed, inner=inner, margin=margin)
    model = _check_model(model)
    T, eps = _check_horizon_eps(horizon, eps, weights, model)
    constraints = expand(model, constraints)
    torch.manual_seed(seed)
    x = _grid_input(model, encoding)
    with torch.no_grad():
        table0 = _net_table(model, net, x).numpy()
    original = dict(_attempt(model, "original", table0, T, eps, weights, constraints,
                             pair).metrics)
    if search is None:
        search = best_found(model, T, constraints, eps=eps, weights=weights,
                            initial={"the failing policy": table0}, seed=seed, margin=margin,
                            outer=outer, inner=inner, original=original, n_random=n_random,
                            pair=pair)
    starts: list[tuple[str, Any]] = [("the failing checkpoint", copy.deepcopy(net))]
    targets = sorted((a for a in search.attempts if a.feasible), key=lambda a: -a.utility)[:2]
    for a in targets:
        twin = copy.deepcopy(net)
        _distil(model, twin, x, a.table)
        starts.append((f"distilled from the best-found table ({a.start})", twin))
    attempts, modules = [], []
    u_scale = max(abs(original["utility"]), 1.0)
    for name, module in starts:
        module.train()
        table_of = lambda module=module: _net_table(model, module, x)  # noqa: E731
        fn = _objective(model, T, eps, weights, constraints, margin, table_of, u_scale,
                        pair=pair)
        # the starts are near a feasible point already (distilled) or saturated (the
        # failing checkpoint: sigmoid(+-16) has no gradient left), so fewer rounds
        res = augmented_lagrangian(
            fn, module.parameters(), outer=max(5, outer // 2), inner=100, lr=1e-3,
            snapshot=lambda _row, module=module: copy.deepcopy(module.state_dict()))
        if res.best_state is not None:
            module.load_state_dict(res.best_state)
        module.eval()

        tab = np.asarray(policy_table(TorchPolicy(module, encoding), model, T))
        attempts.append(_attempt(model, name, tab, T, eps, weights, constraints, pair))
        modules.append(module)
    feas = [i for i, a in enumerate(attempts) if a.feasible]
    best_i = max(feas, key=lambda i: attempts[i].utility) if feas else None
    best = None if best_i is None else attempts[best_i]
    top = search.best_found
    if best is not None and (top is None or best.utility > top.utility):
        top = best  # the network found a better policy than the table search
    result = RepairResult(constraints=constraints, attempts=attempts, best=best,
                          original=original, best_found=top, bound=search.bound,
                          bound_keys=search.bound_keys, wall_s=time.perf_counter() - t0)
    if best_i is None:
        closest = result.best_attempt()
        best_i = attempts.index(closest) if closest is not None else 0
    result.module = modules[best_i]
    return result

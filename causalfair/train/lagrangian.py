"""PPO-Lagrangian's bookkeeping (docs/training.md, "PPO-Lagrangian"): the constraints of a
sampled training run, one Lagrange multiplier each, measured on the trainer's audit, and
the best-utility audited policy that meets all of them.

- :class:`Multipliers`: lambda_i <- max(0, lambda_i + lr (q_i - b_i)), projected gradient
  ascent on the dual between policy updates.
- :class:`Lagrangian`: the constraints of :class:`causalfair.thresholds.Constraint` (a
  ``max_*`` key becomes one constraint per pair of groups, :meth:`Constraint.for_pairs`),
  each judged by the gate's rule on the audit: the audit's own pair from its row, another
  pair from the audit's :class:`causalfair.engines.groups.GroupComparison`
  (:func:`measure_groups`) through :func:`causalfair.thresholds.group_verdicts`, so the pair
  arithmetic is the audit's. Each multiplier moves on the far end of its quantity's 95% CI
  in units of |bound|; the run keeps the best passing policy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from causalfair.engines.exact import exact_numbers
from causalfair.engines.groups import compare, lambda_by_forks, pair_names, resolve_pair
from causalfair.errors import ConfigError, InputError
from causalfair.thresholds import (
    FAIL,
    PASS,
    Constraint,
    Verdict,
    group_verdicts,
    parse_constraint,
)

__all__ = ["Multipliers", "Lagrangian", "check_constraints_supported", "measure_groups", "scale"]


class Multipliers:
    """Lagrange multipliers of ``q_i <= b_i`` updated by projected gradient ascent on the
    dual, as PPO-Lagrangian does between policy updates:

        lambda_i <- max(0, lambda_i + lr * (q_i - b_i)).

    A violated constraint raises its multiplier, a slack one lowers it towards 0."""

    def __init__(self, bounds: Sequence[float], *, lr: float = 0.1, init: float = 0.0):
        if not lr > 0:
            raise InputError(f"lr: must be > 0, got {lr!r}.")
        self.bounds = np.asarray(bounds, dtype=np.float64)
        self.lr = float(lr)
        self.values = np.full(len(self.bounds), float(init))

    def update(self, measured: Sequence[float]) -> np.ndarray:
        q = np.asarray(measured, dtype=np.float64)
        self.values = np.maximum(0.0, self.values + self.lr * (q - self.bounds))
        return self.values.copy()


def scale(k: Constraint) -> float:
    """The unit a constraint's quantity and multiplier are measured in: its |bound|."""
    return max(abs(k.bound), 1e-6)


def measure_groups(system: Any, policy: Any, horizon: int, dec: Any, *, tabular: Any,
                   n: int, seed: int, eps: float, lambda_pairs: bool, coupled: bool,
                   shared: dict | None = None, alpha: float = 0.05, bins: int = 4) -> Any:
    """The :class:`~causalfair.engines.groups.GroupComparison` of the audit ``dec`` (every
    pair's C, DPE, IPE, SPE and, when ``lambda_pairs``, Lambda): the exact benefit table
    on a tabular model, else forks per pair (``n`` units per group, ``seed``), the audit's
    own pair's taken from ``dec`` (its forks, as the gate's audit reuses them). ``shared``:
    the dict ``dec``'s Lambda kept its forks' statistics in
    (:func:`~causalfair.engines.montecarlo.decompose_mc`'s ``benefit_shared``, forks of
    ``n`` units per group with ``seed``): every other pair reuses them, so the forks are made
    once per audit (default: made again, once for all the other pairs). ``alpha``: the
    intervals' level 1 - ``alpha``; ``bins``: Lambda's quantile bins per feature (the
    trainer's ``audit_alpha`` and ``audit_bins``, as ``dec`` was made with)."""
    benefit, lambda_of = None, None
    if lambda_pairs and tabular is not None:
        benefit = exact_numbers(tabular, policy, horizon, eps=eps, benefit=True).benefit
    elif lambda_pairs:
        benefit = getattr(dec, "benefit", None)
        lambda_of = lambda_by_forks(system, policy, horizon, n=n, seed=seed, eps=eps,
                                    alpha=alpha, jobs=1, shared=shared, bins=bins)
    return compare(dec, benefit=benefit, lambda_of=lambda_of, coupled=coupled, alpha=alpha)


class Lagrangian:
    """The constraints of one run (``texts``: ``"abs_C<=0.05"``, ``"abs_C[B-A]<=0.1"``,
    ``"max_abs_C<=0.1"``) over ``groups``, their multipliers and the best passing policy.
    ``pairs[i]``: the group indices (a, b) of constraint i, None for the audit's own pair."""

    def __init__(self, texts: Sequence[str], groups: Sequence[str], *, lr: float,
                 system_id: str):
        groups = tuple(str(g) for g in groups)
        names = [f"{groups[a]}-{groups[b]}" for a, b in pair_names(groups, 0)]
        self.cons: list[Constraint] = [
            one for t in texts for one in parse_constraint(t).for_pairs(names)]
        self.pairs: list[tuple[int, int] | None] = []
        for k in self.cons:
            try:  # the one reading of a pair (engines.groups.resolve_pair), its key named
                ab = None if k.pair is None else resolve_pair(k.pair, groups,
                                                              f"constraints: {k.label}")
            except InputError as exc:
                raise ConfigError(str(exc)) from None
            self.pairs.append(ab)
        self.system_id = system_id
        # a ratio (q >= b) as -q <= -b
        self.multipliers = Multipliers([(-k.bound if k.at_least else k.bound) / scale(k)
                                        for k in self.cons], lr=lr)
        self.best: tuple[float, Any, dict[str, Any]] | None = None
        # indexes read on every minibatch, built once: linear in the constraints (a max_*
        # key over G groups makes G(G-1)/2 of them; a scan per pair was quadratic)
        self._by_key: dict[tuple[str, tuple[int, int] | None], list[int]] = {}
        self._loss_pairs: dict[str, dict[tuple[int, int], None]] = {}
        for i, (k, p) in enumerate(zip(self.cons, self.pairs, strict=True)):
            self._by_key.setdefault((k.base, p), []).append(i)
            if p is not None:
                self._loss_pairs.setdefault(k.metric, {})[p] = None

    # ------------------------------------------------------------------ the loss
    def weight(self, base: str, pair: tuple[int, int] | None = None) -> float:
        """sum lambda_i / |b_i| over the constraints on key ``base`` (``abs_C``, ``C``,
        ``Lambda``) of ``pair`` (None: the audit's own pair)."""
        vals = self.multipliers.values
        return sum(float(vals[i]) / scale(self.cons[i])
                   for i in self._by_key.get((base, pair), ()))

    def loss_pairs(self, metric: str) -> list[tuple[int, int]]:
        """The explicit pairs with a constraint on ``metric`` (their own loss terms)."""
        return list(self._loss_pairs.get(metric, ()))

    @property
    def needs_groups(self) -> bool:
        """Some constraint addresses a pair other than the audit's own."""
        return any(p is not None for p in self.pairs)

    @property
    def lambda_pairs(self) -> bool:
        """Some constraint bounds Lambda of an explicit pair."""
        return any(p is not None and k.metric == "Lambda" for k, p in zip(
            self.cons, self.pairs, strict=True))

    # ------------------------------------------------------------- the selection
    def judge(self, row: dict[str, Any], groups: Any) -> list[Verdict]:
        """The gate's verdict of every constraint on the audit (its ``upper``, a ratio's
        ``lower``: the far end of the constrained quantity's interval): the audit's own
        pair from ``row``, any
        other from the comparison ``groups`` (recorded in ``row`` as ``key`` and
        ``key_ci``). A ratio the comparison has no value of (a mean gain <= 0) reads as 0
        and is not met."""
        out = []
        for k, p in zip(self.cons, self.pairs, strict=True):
            if p is None:
                m = k.metric
                if m not in row:
                    raise ConfigError(
                        f"constraints: {k.label}: the audit of system {self.system_id!r} "
                        f"measures no {m} (nothing it observes pairs individuals); drop it.")
                e = float(row[m])
                lo, hi = (float(x) for x in row.get(f"{m}_ci", (e, e)))
                qlo, qhi = k.interval(lo, hi)
                out.append(Verdict(key=k.key, threshold=k.bound, estimate=abs(e) if k.absolute
                                   else e, lower=qlo, upper=qhi, status=k.judge(lo, hi)))
                continue
            try:
                (v,) = group_verdicts({k.key: k.bound}, groups)
            except InputError:
                if not k.at_least:
                    raise
                # a ratio of mean gains of which one is <= 0 has no value: read as 0, not met
                v = Verdict(key=k.key, threshold=k.bound, estimate=0.0, lower=0.0, upper=0.0,
                            status=FAIL)
            row[k.key], row[f"{k.key}_ci"] = v.estimate, (v.lower, v.upper)
            out.append(v)
        return out

    def after_audit(self, row: dict[str, Any], groups: Any,
                    snapshot: Callable[[], Any]) -> None:
        """Judge every constraint on the audit ``row`` (CI rule), keep the policy
        (``snapshot()``) if it is the best-utility one meeting all of them, and move each
        multiplier on the far end of its quantity's CI (the batch's |C| is biased upwards by
        its noise, which would push the multiplier up for ever)."""
        judged = self.judge(row, groups)
        failed = [v.message() for v in judged if v.status != PASS]
        row["constraints_met"] = not failed
        if failed:
            row["constraints_failed"] = failed
        elif self.best is None or row["utility"] > self.best[0]:
            self.best = (row["utility"], snapshot(), dict(row))
        self.multipliers.update([(-v.lower if k.at_least else v.upper) / scale(k)
                                 for v, k in zip(judged, self.cons, strict=True)])

    def record(self, row: dict[str, Any]) -> None:
        """The row's ``lagrange_<key>`` per constraint (``lagrange_multiplier``: the
        first one's)."""
        row["lagrange_multiplier"] = float(self.multipliers.values[0])
        row.update({f"lagrange_{k.key}": float(v)
                    for k, v in zip(self.cons, self.multipliers.values, strict=True)})

    def finish(self, final: dict[str, Any], restore: Callable[[Any], None]) -> dict[str, Any]:
        """End of the run: restore the best passing policy (if any, ``restore(state)``);
        the final metrics are its audit's, with ``constraints_met`` (none passed: the last
        row's, with ``constraints_failed``, one sentence per failing constraint naming its
        value, when its last iteration was audited)."""
        if self.best is not None:
            restore(self.best[1])
            final = dict(self.best[2])
        final["constraints_met"] = self.best is not None
        return final

    @staticmethod
    def state(module: Any) -> Any:
        """A copy of ``module``'s weights (what :meth:`after_audit` keeps)."""
        return copy.deepcopy(module.state_dict())


def check_constraints_supported(system: Any) -> None:
    """Refuse (ConfigError) constraints on a system whose replicas make one choice each: the
    replica-choice policy takes no multipliers yet."""
    if system.units_per_replica > 1 and system.decisions.budget == 1:
        raise ConfigError(f"constraints: not imposed on system {system.id!r} (one choice "
                          "per replica) yet, so no [retrain] algo repairs it in a gate; "
                          "train ppo-c with beta_c and no constraint, and audit that.")

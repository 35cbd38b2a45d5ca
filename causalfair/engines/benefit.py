"""Benefit fairness (method.md section 4; Plecko & Bareinboim 2023).

The benefit of d1 for an individual at level x in group s is the conditional effect of
the decision on the expected qualification gain,

    Delta(x, s) = h1(x, s) - h0(x, s),   h_d(x, s) = sum_x' P(x' | x, d, s) g^s(x, x').

Benefit fairness asks that individuals of different groups with the same benefit get
the same chance of d1. The paper's metric is a Gini-style sum over pairs

    Lambda = sum_{x, x'} eps |pi(d1|x,s+) - pi(d1|x',s-)| / (eps + |Delta(x,s+) - Delta(x',s-)|)
             * P(x | s+) P(x' | s-).

``P(x | s)`` is either the initial distribution or (default) the visitation distribution
under pi averaged over t < T. A model that declares ``departed_levels`` (individuals who
left the population) gets the distribution of those present: departed levels weigh 0 and
the rest is renormalised per group (:func:`present_weights`). For a time-indexed policy, pi(d1 | x, s) is its
visitation-weighted average over t < T.

More than two actions (docs/decomposition.md, "Lambda with more than two actions"): with
actions 0..A-1 and baseline a0, the benefit is the vector Delta_a(x, s) = h_a - h_{a0}, and

    Lambda = sum_{x, x'} eps TV(pi(.|x,s+), pi(.|x',s-)) / (eps + max_a |Delta_a(x,s+) - Delta_a(x',s-)|)
             * P(x | s+) P(x' | s-),

TV the total-variation distance (half the L1 distance) between the two action
distributions. With two actions TV = |pi(d1|x,s+) - pi(d1|x',s-)| and the max is
|Delta(x,s+) - Delta(x',s-)|, so this is the paper's Lambda.

``eps`` (docs/decomposition.md, "eps: the benefit resolution") is in the gain's units:
benefit gaps much smaller than eps count as "same benefit", much larger ones excuse a
different treatment. A number is used as given; ``"auto"`` sets it scale-free to
``0.1 x the 90th percentile of |Delta_a(x, s)|`` over every group, level and
non-baseline action (:func:`auto_eps`), so rescaling the gain leaves Lambda unchanged. The
doors (:func:`causalfair.benefit_fairness`, :func:`causalfair.decompose`, audit specs) and
the engines called with ``eps=None`` default to the value a system or tabular model
declares (``System.gain.lambda_eps``, ``TabularModel.lambda_eps``: 0.1 for the lending
models, whose gain the paper normalises so the largest one-level gain is 1, method.md
section 4) and to ``"auto"`` where it declares none: :func:`eps_for` decides, for all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from causalfair._validation import WEIGHTS, check_horizon, check_keywords, check_weights
from causalfair.errors import short
from causalfair.model import ModelError, TabularModel, check_lambda_eps
from causalfair.policies.core import Policy
from causalfair.policies.grid import policy_table
from causalfair.results import BenefitResult, check_pair

__all__ = ["benefit_fairness", "lambda_metric", "lambda_by_pair", "lambda_pairs", "WEIGHTS", "EPS_AUTO",
           "auto_eps", "check_eps", "eps_for", "model_eps", "resolve_eps", "present_benefits"]

#: ``eps = "auto"``: ``EPS_SHARE`` x the ``EPS_QUANTILE`` quantile of |Delta|.
EPS_AUTO = "auto"
EPS_SHARE = 0.1
EPS_QUANTILE = 0.9


def check_eps(eps: Any, field: str = "eps") -> float | str:
    """``eps`` of Lambda (method.md section 4) as a float > 0 or ``"auto"``, or a ModelError
    naming ``field`` (``lambda_eps`` where the door's ``eps`` is another one: fair_lp's)."""
    if isinstance(eps, str) and eps == EPS_AUTO:
        return EPS_AUTO
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not np.isfinite(eps) or eps <= 0:
        raise ModelError(f"{field}: must be a number > 0, got {eps!r:.40}; give it in the gain's "
                         "units, or \"auto\" to scale it to the benefits (docs/decomposition.md).")
    return float(eps)


def auto_eps(delta: np.ndarray) -> tuple[float, str]:
    """The scale-free eps: ``EPS_SHARE`` x the ``EPS_QUANTILE`` quantile of |Delta| over the
    benefits ``delta`` (every group, level and non-baseline action), and how it was
    chosen. A quantile rather than the maximum keeps one extreme cell from setting it.
    Every benefit 0: Lambda does not depend on eps (all gaps are 0); eps = 1."""
    a = np.abs(np.asarray(delta, dtype=float)).ravel()
    a = a[np.isfinite(a)]
    scale = float(np.quantile(a, EPS_QUANTILE)) if a.size else 0.0
    if scale <= 0.0 and a.size:
        scale = float(a.max())
    if scale <= 0.0:
        return 1.0, "auto: every benefit is 0, so Lambda does not depend on eps (eps = 1)"
    return EPS_SHARE * scale, (f"auto: {EPS_SHARE:g} x the {100 * EPS_QUANTILE:g}th percentile "
                               f"of |Delta| ({scale:.6g})")


def resolve_eps(eps: Any, delta: np.ndarray, source: str | None = None) -> tuple[float, str]:
    """``eps`` as the number Lambda uses, and how it was chosen: ``"auto"`` from the
    benefits ``delta`` (:func:`auto_eps`), a number as ``source`` says (default "given")."""
    eps = check_eps(eps)
    if eps == EPS_AUTO:
        return auto_eps(delta)
    return float(eps), source or "given"


def eps_for(eps: Any, system: Any) -> tuple[float | str, str | None]:
    """The eps a door passes to the engines, and its source: ``eps`` when given; None: the
    value ``system`` declares (a System's ``gain.lambda_eps``, a
    :class:`~causalfair.model.TabularModel`'s ``lambda_eps``), else ``"auto"``. The one
    place a default eps is chosen: a bare model and the System built from it
    (:func:`causalfair.systems.as_system`) get the same number and source."""
    if eps is not None:
        return check_eps(eps), None
    if isinstance(system, TabularModel):
        declared, name = system.lambda_eps, system.name
    else:
        declared = getattr(getattr(system, "gain", None), "lambda_eps", None)
        if declared is None:  # a System declares through its gain, else its tabular model
            declared = getattr(getattr(system, "tabular", None), "lambda_eps", None)
        name = getattr(system, "id", "?")
    if declared is not None:  # a declared value: its constructors' check and message
        return check_lambda_eps(declared), (f"declared by system {name!r} (its gain's resolution, "
                                     "docs/decomposition.md, \"eps: the benefit resolution\")")
    return EPS_AUTO, None


def model_eps(eps: Any, model: TabularModel, source: str | None = None) -> tuple[float, str]:
    """``eps`` (a number, "auto", or None: what ``model`` declares, :func:`eps_for`) as the
    number Lambda uses on ``model``, and its source."""
    eps, declared = eps_for(eps, model)
    return resolve_eps(eps, present_benefits(model, _benefit_table(model)), source or declared)


def present_benefits(model: TabularModel, delta: np.ndarray) -> np.ndarray:
    """The benefits ``eps = "auto"`` takes its percentile over: those of the non-baseline
    actions (:func:`_nonbaseline`) at the levels of those present, a declared departed level
    (benefit 0 by definition, weight 0 in Lambda) left out, as the forks leave out its
    visits; ``delta`` (G, K) or (G, K, A), levels on axis 1."""
    delta = _nonbaseline(model, delta)
    if model.departed_levels:
        delta = np.delete(delta, list(model.departed_levels), axis=1)
    return delta


def _nonbaseline(model: TabularModel, delta: np.ndarray) -> np.ndarray:
    """The benefits of the non-baseline actions (the baseline's own is 0 by definition)."""
    return delta if model.binary else np.delete(delta, model.baseline, axis=-1)


def weights_and_policy(model: TabularModel, p: np.ndarray, horizon: int, weights: str,
                       mu: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """P(x | s) (G, K) and the (time-averaged) pi(d1 | x, s) (G, K)."""
    check_weights(weights)
    timed = p.ndim == model.policy_ndim() + 1
    if mu is None and (weights == "visitation" or timed):
        mu = model.propagate(p, horizon)
    if timed and p.ndim == 4:
        occ = mu[:horizon][..., None]
        mass = occ.sum(0)
        p_bar = np.divide((occ * p[:horizon]).sum(0), mass, out=p[0].copy(), where=mass > 0)
    elif timed:
        occ = mu[:horizon]
        mass = occ.sum(0)
        p_bar = np.divide((occ * p[:horizon]).sum(0), mass, out=p[0].copy(), where=mass > 0)
    else:
        p_bar = p
    w = model.initial if weights == "initial" else mu[:horizon].mean(0)
    return present_weights(model, w), p_bar


def present_weights(model: TabularModel, w: np.ndarray) -> np.ndarray:
    """P(x | s) over those present: with ``model.departed_levels`` declared, ``w`` (G, K)
    is 0 at the departed levels and renormalised per group (a group with no present mass
    keeps 0); undeclared, ``w`` unchanged."""
    departed = model.departed_levels
    if not departed:
        return w
    w = np.array(w, dtype=float)
    w[:, list(departed)] = 0.0
    mass = w.sum(1, keepdims=True)
    return np.divide(w, mass, out=np.zeros_like(w), where=mass > 0)


def lambda_pairs(p: np.ndarray, delta: np.ndarray, w: np.ndarray, pair: tuple[int, int],
                 eps: float) -> np.ndarray:
    """Contribution of each (x, x') pair to Lambda: array (K, K) for groups (a, b).
    Two actions: ``p`` (G, K) = pi(d1), ``delta`` (G, K). A > 2: ``p`` (G, K, A) action
    distributions, ``delta`` (G, K, A) benefits over the baseline (TV / sup-norm form)."""
    a, b = check_pair(pair, delta.shape[0], None)
    if p.ndim == 3:
        dp = 0.5 * np.abs(p[a][:, None, :] - p[b][None, :, :]).sum(-1)
        dd = np.abs(delta[a][:, None, :] - delta[b][None, :, :]).max(-1)
        return eps * dp / (eps + dd) * w[a][:, None] * w[b][None, :]
    dp = np.abs(p[a][:, None] - p[b][None, :])
    dd = np.abs(delta[a][:, None] - delta[b][None, :])
    return eps * dp / (eps + dd) * w[a][:, None] * w[b][None, :]


@check_keywords
def lambda_metric(model: TabularModel, policy: Policy | np.ndarray, horizon: int = 20, *,
                  eps: float | str | None = None, weights: str = "visitation",
                  pair: tuple[int, int] = (0, 1), mu: np.ndarray | None = None) -> float:
    """Lambda for groups ``pair`` (default s+, s-) of ``policy`` on a tabular ``model``
    over ``horizon`` epochs; ``eps`` a number, "auto" or None (what ``model`` declares,
    :func:`eps_for`). ``mu``: optionally the policy's state distributions mu[t, s, x] for
    t = 0..T, shape (T + 1, G, K), as ``model.propagate(policy_table(policy, model, T), T)``
    returns them (given to save that computation; None: computed here)."""
    return lambda_by_pair(model, policy, horizon, [pair], eps=eps, weights=weights, mu=mu)[0]


def lambda_by_pair(model: TabularModel, policy: Policy | np.ndarray, horizon: int,
                   pairs: Sequence[tuple[int, int]], *, eps: float | str | None = None,
                   weights: str = "visitation", mu: np.ndarray | None = None) -> list[float]:
    """:func:`lambda_metric` of each pair of ``pairs`` (the same numbers, bit for bit), the
    weights and the (time-averaged) policy computed once for all of them."""
    if not isinstance(model, TabularModel):
        raise ModelError(f"model: expected a TabularModel, got {type(model).__name__}; for a "
                         "system use causalfair.benefit_fairness, which picks the engine it "
                         "supports.")
    T = check_horizon(horizon)
    eps, _ = model_eps(eps, model)
    p = policy_table(policy, model, T)
    if mu is not None:
        mu = _check_mu(mu, model, T)
    w, p_bar = weights_and_policy(model, p, T, weights, mu)
    if not model.binary:
        p_bar = model.action_table(p_bar)
    delta = _benefit_table(model)
    return [float(lambda_pairs(p_bar, delta, w, ab, eps).sum()) for ab in pairs]


def _check_mu(mu: Any, model: TabularModel, T: int) -> np.ndarray:
    """``mu`` as the (T + 1, G, K) state distributions :func:`lambda_metric` takes."""
    shape = (T + 1, model.n_groups, model.n_levels)
    try:
        arr = np.asarray(mu, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.shape != shape or not np.isfinite(arr).all() or (arr < 0).any():
        got = f"shape {arr.shape}" if arr is not None and arr.shape != shape else (
            short(mu, 40) if arr is None else "negative or non-finite values")
        raise ModelError(
            f"mu: must be the state distributions mu[t, s, x] for t = 0..{T}, a finite array "
            f"of shape {shape} (model.propagate(policy_table(policy, model, {T}), {T})), got "
            f"{got}; or leave mu out (None) to have it computed.")
    return arr


def _benefit_table(model: TabularModel) -> np.ndarray:
    """Delta as (G, K) for two actions with baseline d0; otherwise (G, K, A), the
    benefit of every action over the baseline (actions last)."""
    if model.binary:
        return model.benefit()
    return np.moveaxis(model.benefits(), 1, -1)


def benefit_fairness(model: TabularModel, policy: Policy | np.ndarray, horizon: int = 20, *,
                     eps: float | str | None = None, weights: str = "visitation",
                     pair: tuple[int, int] = (0, 1), eps_source: str | None = None
                     ) -> BenefitResult:
    """Delta table, Lambda and worst pairs of ``policy`` on a tabular ``model``, exactly.
    ``eps``: a number in the gain's units (``eps_source`` says where it came from;
    default "given"), "auto" (:func:`auto_eps`) or None (what ``model`` declares,
    :func:`eps_for`).
    :func:`causalfair.benefit_fairness` chooses between this engine and forks from what a
    system supports."""
    if not isinstance(model, TabularModel):
        raise ModelError(f"model: expected a TabularModel, got {type(model).__name__}; for a "
                         "system use causalfair.benefit_fairness, which picks the engine it "
                         "supports.")
    T = check_horizon(horizon)
    eps, eps_source = model_eps(eps, model, eps_source)
    p = policy_table(policy, model, T)
    mu = model.propagate(p, T)
    w, p_bar = weights_and_policy(model, p, T, weights, mu)
    if model.binary:
        delta = model.benefit()
        contrib = lambda_pairs(p_bar, delta, w, pair, eps)
        pt = p if p.ndim == 3 else np.broadcast_to(p, (T, *p.shape))
        direct = np.einsum("tsx,tsx->s", mu[:T], pt * delta)
    else:
        delta = _benefit_table(model)  # (G, K, A)
        p_bar = model.action_table(p_bar)
        contrib = lambda_pairs(p_bar, delta, w, pair, eps)
        pa = model.action_table(p)
        pt = pa if pa.ndim == 4 else np.broadcast_to(pa, (T, *pa.shape))
        direct = np.einsum("tsx,tsxa->s", mu[:T], pt * delta)
    a, b = pair
    return BenefitResult(
        Lambda=float(contrib.sum()),
        eps=eps,
        eps_source=eps_source,
        weights=weights,
        delta=delta,
        p_d1=p_bar,
        state_weights=w,
        contributions=contrib,
        pair=(a, b),
        groups=tuple(model.group_names),
        levels=tuple(model.level_labels),
        dpe_prop1=float(direct[a] - direct[b]),
        actions=tuple(model.action_labels or (f"d{i}" for i in range(model.n_actions))),
        departed=tuple(model.departed_levels or ()),
    )

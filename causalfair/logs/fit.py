"""Fitting a tabular model to decision logs, positivity, bounds and the bootstrap.

Sufficient statistics are kept **per individual** in one sparse matrix (individuals x
cells): transition counts n(s, d, x, x'), the initial level, reward sums and outcome
counts. The full-data fit uses the column sums; a bootstrap replicate resamples
individuals with multinomial weights w (``bincount`` of uniform draws) and uses
``w @ M``, so the log is never re-grouped with pandas per replicate.

Count-based fit (``method="counts"``, the default)
    P(x_0 | s)     empirical distribution of the individuals' first levels (no smoothing)
    P(x' | x,d,s)  (n(s,d,x,x') + alpha) / (n(s,d,x) + K alpha), alpha = 0.1 by default
                   (the posterior mean under a symmetric Dirichlet(alpha) prior; a row
                   without data is uniform for alpha > 0, a self-loop for alpha = 0)
    pi(d1 | x, s)  n(s,1,x) / n(s,x); at a never-visited cell the group's pooled rate
    r(x, d, s)     mean logged reward (0 where the cell has no data)
    P(s)           share of individuals per group
    p_repay(x, s)  (with an ``outcome`` column) mean outcome of d1 rows (group mean where
                   a cell has none): lets ``threshold:P`` policies be parsed on the fit;
                   absent when some group has no d1 row with an outcome

Parametric fit (``method="ordinal"``)
    One ordinal logit per decision (statsmodels ``OrderedModel``, ``distr="logit"``) of
    the level change x' - x on (x, group dummies, x * group dummies), fitted on the
    aggregated cells with frequency weights. Levels are censored at the ends of the range
    (as in the lending simulator, x' = clip(x + change)): an observed x' = 0 counts as
    "change <= -x" and x' = K - 1 as "change >= K - 1 - x" in the likelihood, and the
    predicted probability of a change k at (x, d, s) goes to x' = clip(x + k, 0, K - 1).

Parametric fit (``method="multinomial"``)
    One multinomial logit per decision (statsmodels ``MNLogit``) of the level change
    x' - x over the changes seen in the log, on (1, x, group dummies, x * group dummies),
    with the same frequency weights and the same censoring at the ends of the range:
    an observed x' contributes log sum_k P(change k | x, d, s) over the changes k with
    clip(x + k) = x'. Unlike the ordinal logit it does not force the changes into one
    latent order, so each change gets its own dependence on (x, s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair.engines.benefit import WEIGHTS, model_eps
from causalfair.engines.effects import decompose
from causalfair.logs.errors import LogError
from causalfair.logs.schema import LogData
from causalfair.model import TabularModel
from causalfair.systems.lending.settings import LENDING_LAMBDA_EPS, lending_potential

__all__ = [
    "LogStats",
    "PositivityError",
    "PositivityReport",
    "log_stats",
    "fit_counts",
    "fit_ordinal",
    "fit_multinomial",
    "check_positivity",
    "positivity_bounds",
    "DEFAULT_ALPHA",
    "MSG_POSITIVITY",
]

#: Default additive (Dirichlet) smoothing of the transition counts.
DEFAULT_ALPHA = 0.1

MSG_POSITIVITY = (
    "logs: positivity violated: the logs never show decision {what} at {n} cell(s) the "
    "estimate needs, so the effects are not identified there: {cells}. Pass "
    "on_positivity='bounds' (CLI: --on-positivity bounds) for bounds, or audit logs of a "
    "policy that takes both decisions at every visited (level, group)."
)


class PositivityError(LogError):
    """The logged policy never takes some decision at a cell the estimate needs."""


# --------------------------------------------------------------------- statistics
@dataclass(frozen=True, eq=False)
class LogStats:
    """Per-individual sufficient statistics: ``matrix`` (individuals x cells), sparse."""

    matrix: Any
    n_groups: int
    n_levels: int
    has_outcome: bool

    @property
    def n_individuals(self) -> int:
        return int(self.matrix.shape[0])

    def offsets(self) -> dict[str, tuple[int, int]]:
        G, K = self.n_groups, self.n_levels
        sizes = {"trans": G * 2 * K * K, "init": G * K, "reward": G * 2 * K,
                 "out_n": G * K, "out_sum": G * K}
        out, pos = {}, 0
        for k, n in sizes.items():
            out[k] = (pos, pos + n)
            pos += n
        return out

    def total(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Weighted column sums: (cells,) without weights, (B, cells) for weights (B, n)."""
        if weights is None:
            return np.asarray(self.matrix.sum(axis=0)).reshape(-1)
        w = np.asarray(weights, dtype=np.float64)
        return np.asarray((self.matrix.T @ w.T).T)

    def unpack(self, vec: np.ndarray) -> dict[str, np.ndarray]:
        G, K = self.n_groups, self.n_levels
        shapes = {"trans": (G, 2, K, K), "init": (G, K), "reward": (G, 2, K),
                  "out_n": (G, K), "out_sum": (G, K)}
        return {k: vec[a:b].reshape(shapes[k]) for k, (a, b) in self.offsets().items()}


def log_stats(data: LogData) -> LogStats:
    """The per-individual sufficient statistics of a validated log (one sparse build)."""
    from scipy import sparse

    G, K = data.n_groups, data.n_levels
    stats = LogStats(None, G, K, data.outcome is not None)
    off = stats.offsets()
    cell = (data.g * 2 + data.d) * K + data.x
    rows = [data.ind, data.ind[data.first], data.ind]
    cols = [off["trans"][0] + cell * K + data.xn,
            off["init"][0] + data.g[data.first] * K + data.x[data.first],
            off["reward"][0] + cell]
    vals = [np.ones(data.n_rows), np.ones(int(data.first.sum())), data.reward]
    if data.outcome is not None:
        m = (data.d == 1) & ~np.isnan(data.outcome)
        gx = data.g[m] * K + data.x[m]
        rows += [data.ind[m], data.ind[m]]
        cols += [off["out_n"][0] + gx, off["out_sum"][0] + gx]
        vals += [np.ones(int(m.sum())), data.outcome[m]]
    n_cols = off["out_sum"][1]
    mat = sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(data.n_individuals, n_cols),
    )
    mat.sum_duplicates()
    return LogStats(mat, G, K, data.outcome is not None)


def _potential(potential: Any, G: int, K: int) -> np.ndarray:
    if potential is None:
        return np.broadcast_to(lending_potential(K), (G, K)).copy()
    try:
        f = np.asarray(potential, dtype=np.float64)
    except (TypeError, ValueError):
        raise LogError(f"potential: expected {K} numbers f(0), ..., f({K - 1}) (one per level, "
                       f"higher is better) or one such row per group, got {potential!r}; "
                       "write each value as a number.") from None
    if f.shape in ((K,), (G, K)) and not np.isfinite(f).all():
        i = tuple(int(v) for v in np.argwhere(~np.isfinite(f))[0])
        raise LogError(f"potential: the value at level {i[-1]}"
                       + (f" of group {i[0]}" if f.ndim == 2 else "")
                       + f" is {float(f[i])!r}; every f(x) must be a finite number.")
    if f.shape == (K,):
        f = np.broadcast_to(f, (G, K)).copy()
    if f.shape != (G, K):
        raise LogError(
            f"potential: expected shape ({K},) or ({G}, {K}) for {K} levels and {G} groups, "
            f"got {np.shape(potential)}: give one value per level 0..{K - 1} (the log's "
            "levels), or one such row per group."
        )
    return f


def _policy_from_counts(n: np.ndarray) -> np.ndarray:
    """pi(d1 | x, s) from counts n[s, d, x]; unvisited cells get the group's pooled rate."""
    tot = n.sum(1)
    pooled = n[:, 1].sum(1) / np.maximum(tot.sum(1), 1e-300)
    return np.where(tot > 0, n[:, 1] / np.where(tot > 0, tot, 1.0), pooled[:, None])


def _kernel_from_counts(trans: np.ndarray, alpha: float) -> np.ndarray:
    K = trans.shape[-1]
    rows = trans.sum(-1, keepdims=True)
    if alpha > 0:
        return (trans + alpha) / (rows + K * alpha)
    eye = np.broadcast_to(np.eye(K), trans.shape)
    return np.where(rows > 0, trans / np.where(rows > 0, rows, 1.0), eye)


def fit_counts(stats: LogStats, vec: np.ndarray, *, alpha: float = DEFAULT_ALPHA,
               potential: Any = None, groups: tuple[str, ...] | None = None,
               name: str = "fitted-from-logs", kernel: np.ndarray | None = None,
               levels: tuple[str, ...] | None = None):
    """Fitted :class:`~causalfair.model.TabularModel` and logged policy table (G, K)
    from a vector of (weighted) statistics. ``kernel`` replaces the count-based kernel
    (used by the parametric fits); ``levels``: level labels (feature-state logs)."""
    G, K = stats.n_groups, stats.n_levels
    u = stats.unpack(vec)
    n = u["trans"].sum(-1)  # (G, 2, K)
    init_n = u["init"].sum(-1)
    if (init_n <= 0).any():
        gname = (groups or tuple(range(G)))[int(np.flatnonzero(init_n <= 0)[0])]
        raise LogError(f"logs: group {gname!r} has no individuals; every group needs data.")
    aux = {}
    if stats.has_outcome and (u["out_n"].sum(1) > 0).all():  # a group without: no score
        on, osum = u["out_n"], u["out_sum"]
        pooled = osum.sum(1) / np.maximum(on.sum(1), 1e-300)
        aux["p_repay"] = np.where(on > 0, osum / np.where(on > 0, on, 1.0), pooled[:, None])
    model = TabularModel(
        kernel=_kernel_from_counts(u["trans"], alpha) if kernel is None else kernel,
        initial=u["init"] / init_n[:, None],
        potential=_potential(potential, G, K),
        reward=np.where(n > 0, u["reward"] / np.where(n > 0, n, 1.0), 0.0),
        group_weights=init_n / init_n.sum(),
        group_names=groups,
        level_labels=levels,
        aux=aux,
        name=name,
        # the default potential is the lending one, whose gain unit seed 003 pins eps in;
        # a potential of the user's own declares nothing (eps "auto": engines.benefit.eps_for)
        lambda_eps=LENDING_LAMBDA_EPS if potential is None else None,
    )
    return model, _policy_from_counts(n)


# ------------------------------------------------------------------ ordinal logit
def _ordinal_design(G: int, K: int) -> np.ndarray:
    """Design rows for every (s, x), row-major: columns x / (K - 1), group dummies and
    their interactions with x (no intercept: OrderedModel's thresholds play that role)."""
    s, x = (a.reshape(-1) for a in np.meshgrid(np.arange(G), np.arange(K), indexing="ij"))
    dummies = (s[:, None] == np.arange(1, G)[None, :]).astype(np.float64)
    xs = x / max(K - 1, 1)
    return np.column_stack([xs, dummies, xs[:, None] * dummies])


def fit_ordinal(trans: np.ndarray, *, start: Any = None) -> tuple[np.ndarray, list]:
    """Kernel (G, 2, K, K) from ordinal logits of the level change x' - x, one per
    decision (so d0 and d1 get their own thresholds and dispersion); returns
    (kernel, list of the two parameter vectors). ``trans``: (weighted) transition
    counts n(s, d, x, x'). A decision without any data keeps a self-loop kernel."""
    import warnings

    from statsmodels.miscmodels.ordinal_model import OrderedModel

    G, _, K, _ = trans.shape
    X = _ordinal_design(G, K)
    x_idx = np.tile(np.arange(K), G)
    change = np.arange(-(K - 1), K)  # possible x' - x
    kernel = np.broadcast_to(np.eye(K), (G, 2, K, K)).copy()
    params: list = [None, None]
    for d in (0, 1):
        counts = np.zeros((X.shape[0], change.size))
        counts[np.arange(X.shape[0])[:, None], np.arange(K)[None, :] - x_idx[:, None] + K - 1] = (
            trans[:, d].reshape(-1, K))
        used = np.flatnonzero(counts.sum(0) > 0)
        if used.size == 0:
            continue
        ker = np.zeros((X.shape[0], K))
        tgt = np.clip(x_idx[:, None] + change[used][None, :], 0, K - 1)
        if used.size == 1:
            ker[np.arange(X.shape[0]), tgt[:, 0]] = 1.0
        else:
            r, j = np.nonzero(counts[:, used])
            freq = counts[:, used][r, j]
            xn_obs = x_idx[r] + change[used][j]
            cens_lo, cens_hi = xn_obs == 0, xn_obs == K - 1

            class _Weighted(OrderedModel):
                def loglike(self, params, _freq=freq):  # frequency-weighted log-likelihood
                    return float((_freq * self.loglikeobs(params)).sum())

                def _bounds(self, params, _lo=cens_lo, _hi=cens_hi):  # censored ends
                    thresh = self.transform_threshold_params(params)
                    lo = np.where(_lo, 0, self.endog)
                    hi = np.where(_hi, self.k_levels - 1, self.endog) + 1
                    xb = self._linpred(params)
                    return thresh[lo] - xb, thresh[hi] - xb

            with warnings.catch_warnings():
                # statsmodels may warn about convergence or the numerical Hessian; the
                # probabilities are checked below, so these warnings are silenced.
                warnings.simplefilter("ignore")
                mod = _Weighted(j, X[r], distr="logit")
                st = None if start is None else start[d]
                res = mod.fit(start_params=st, method="bfgs", disp=False, maxiter=300)
                probs = np.asarray(mod.predict(res.params, exog=X), dtype=np.float64)
            if not np.isfinite(probs).all():
                raise LogError("logs: the ordinal fit did not converge to finite probabilities.")
            np.add.at(ker, (np.repeat(np.arange(X.shape[0]), used.size), tgt.reshape(-1)),
                      probs.reshape(-1))
            params[d] = np.asarray(res.params)
        kernel[:, d] = (ker / ker.sum(1, keepdims=True)).reshape(G, K, K)
    return kernel, params


# --------------------------------------------------------------- multinomial logit
def _change_counts(trans_d: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts (cells, 2K - 1) of each observed change x' - x per (s, x) cell, and x."""
    G = trans_d.shape[0]
    x_idx = np.tile(np.arange(K), G)
    counts = np.zeros((G * K, 2 * K - 1))
    counts[np.arange(G * K)[:, None], np.arange(K)[None, :] - x_idx[:, None] + K - 1] = (
        trans_d.reshape(-1, K))
    return counts, x_idx


def fit_multinomial(trans: np.ndarray, *, start: Any = None) -> tuple[np.ndarray, list]:
    """Kernel (G, 2, K, K) from multinomial logits of the level change x' - x, one per
    decision; returns (kernel, list of the two parameter vectors, None for a decision
    without data or with a single observed change).

    ``trans``: (weighted) transition counts n(s, d, x, x'). The categories are the
    changes observed for that decision; the regressors (1, x / (K - 1), group dummies,
    x / (K - 1) * group dummies). The likelihood is frequency-weighted and censored at
    the ends (an observed x' counts every change k with clip(x + k, 0, K - 1) = x'),
    and predicted changes go to x' = clip(x + k). A decision without any data keeps a
    self-loop kernel. ``start``: parameter vectors to start from (used when their size
    matches, e.g. the full-data fit for bootstrap replicates).
    """
    import warnings

    from statsmodels.discrete.discrete_model import MNLogit

    G, _, K, _ = trans.shape
    X = np.column_stack([np.ones(G * K), _ordinal_design(G, K)])
    change = np.arange(-(K - 1), K)
    kernel = np.broadcast_to(np.eye(K), (G, 2, K, K)).copy()
    params: list = [None, None]
    for d in (0, 1):
        counts, x_idx = _change_counts(trans[:, d], K)
        used = np.flatnonzero(counts.sum(0) > 0)
        if used.size == 0:
            continue
        cats = change[used]
        tgt = np.clip(x_idx[:, None] + cats[None, :], 0, K - 1)  # (cells, C)
        ker = np.zeros((G * K, K))
        if used.size == 1:
            ker[np.arange(G * K), tgt[:, 0]] = 1.0
        else:
            obs = trans[:, d].reshape(-1, K)
            r, xn = np.nonzero(obs)
            freq = obs[r, xn]
            allowed = (tgt[r] == xn[:, None]).astype(np.float64)  # changes consistent with x'
            endog = np.searchsorted(cats, xn - x_idx[r])  # the observed (uncensored) change

            class _Censored(MNLogit):
                def cdf(self, X):  # numerically stable softmax with baseline 0
                    eta = np.column_stack([np.zeros(len(X)), X])
                    eta = np.exp(eta - eta.max(1, keepdims=True))
                    return eta / eta.sum(1, keepdims=True)

                def _probs(self, params):
                    return self.cdf(self.exog @ params.reshape(self.K, -1, order="F"))

                def loglike(self, params, _f=freq, _a=allowed):
                    prob = (self._probs(params) * _a).sum(1)
                    return float((_f * np.log(np.maximum(prob, 1e-300))).sum())

                def score(self, params, _f=freq, _a=allowed):
                    p = self._probs(params)
                    num = p * _a
                    q = num / np.maximum(num.sum(1, keepdims=True), 1e-300) - p
                    return ((_f[:, None] * q)[:, 1:].T @ self.exog).reshape(-1)

            with warnings.catch_warnings():
                # statsmodels may warn about convergence; the probabilities are checked below.
                warnings.simplefilter("ignore")
                mod = _Censored(endog, X[r])
                n_par = X.shape[1] * (used.size - 1)
                st = None
                if start is not None and start[d] is not None and np.size(start[d]) == n_par:
                    st = np.asarray(start[d], dtype=np.float64).reshape(-1, order="F")
                res = mod.fit(start_params=st, method="bfgs", disp=False, maxiter=500,
                              skip_hessian=True)
                flat = np.asarray(res.params).reshape(-1, order="F")
                probs = mod.cdf(X @ flat.reshape(X.shape[1], -1, order="F"))
            if not np.isfinite(probs).all():
                raise LogError("logs: the multinomial fit did not converge to finite probabilities.")
            np.add.at(ker, (np.repeat(np.arange(G * K), used.size), tgt.reshape(-1)),
                      probs.reshape(-1))
            params[d] = flat
        kernel[:, d] = (ker / ker.sum(1, keepdims=True)).reshape(G, K, K)
    return kernel, params


# ---------------------------------------------------------------------- positivity
@dataclass(frozen=True, eq=False)
class PositivityReport:
    """Cells (group, level, decision) the estimate needs but the logs never show.

    A row of the kernel P(. | x, d, s) is *needed* when x is reachable at some t < T
    under the audited policy (both decisions: h0 enters V^PS, Delta enters Lambda) or
    under pi0 (d0). Reachability follows observed transitions only, from the observed
    initial levels. ``cells`` is a DataFrame with columns group, level, decision,
    visits (rows at that (group, level)), needed_for.
    """

    cells: Any
    n_levels: int

    @property
    def ok(self) -> bool:
        return len(self.cells) == 0

    def message(self, limit: int = 12) -> str:
        if self.ok:
            return "positivity: every needed (group, level, decision) cell has data."
        rows = self.cells.head(limit)
        listed = "; ".join(
            f"(group {r.group}, level {r.level}, d{r.decision})" for r in rows.itertuples()
        )
        if len(self.cells) > limit:
            listed += f"; and {len(self.cells) - limit} more"
        dec = sorted(set(self.cells["decision"]))
        what = " or ".join(f"d{d}" for d in dec)
        return MSG_POSITIVITY.format(what=what, n=len(self.cells), cells=listed)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "cells": self.cells.to_dict(orient="records")}


def _reach(init: np.ndarray, adj: np.ndarray, horizon: int) -> np.ndarray:
    """Cells (G, K) reachable at some t < T from init > 0 along adj[s, x, x'] > 0."""
    cur = init > 0
    seen = cur.copy()
    for _ in range(horizon - 1):
        cur = np.einsum("sx,sxy->sy", cur.astype(np.float64), adj.astype(np.float64)) > 0
        if not (cur & ~seen).any():
            break
        seen |= cur
    return seen


def check_positivity(trans: np.ndarray, init: np.ndarray, p_d1: np.ndarray, horizon: int,
                     groups: tuple[str, ...], levels: tuple[str, ...] | None = None) -> PositivityReport:
    """The :class:`PositivityReport` of counts ``trans`` (G, 2, K, K) for policy table
    ``p_d1`` (G, K) or (T, G, K)."""
    import pandas as pd

    G, _, K, _ = trans.shape
    n = trans.sum(-1)  # (G, 2, K)
    seen = trans > 0
    p = np.asarray(p_d1, dtype=np.float64)
    pmax = p.max(0) if p.ndim == 3 else p
    pmin = p.min(0) if p.ndim == 3 else p
    takes = np.stack([pmin < 1.0, pmax > 0.0], axis=1)  # (G, 2, K)
    adj_pi = (takes[..., None] & seen).any(1)
    adj_0 = seen[:, 0]
    r_pi = _reach(init, adj_pi, horizon)
    r_0 = _reach(init, adj_0, horizon)
    need = np.zeros((G, 2, K), dtype=bool)
    need[:, 0] = r_pi | r_0
    need[:, 1] = r_pi
    bad = need & (n == 0)
    s, d, x = np.nonzero(bad)
    visits = n.sum(1)
    why = np.where(d == 1, "Delta, Lambda",
                   np.where(r_pi[s, x], "V^PS, Delta, Lambda", "V^pi0"))
    cells = pd.DataFrame({
        "group": [groups[i] for i in s],
        "level": x.astype(int),
        "decision": d.astype(int),
        "visits": visits[s, x].astype(int),
        "needed_for": why,
    })
    return PositivityReport(cells=cells, n_levels=K)


# --------------------------------------------------------------------------- bounds
def _dp_bounds(model: Any, unknown: np.ndarray, q: np.ndarray, r: np.ndarray, horizon: int,
               sign: float) -> np.ndarray:
    """max (sign=+1) or min (sign=-1) over unknown rows of E[sum_t sum_d r_d h_d(x_t)]
    with x_{t+1} ~ sum_d q_d P_d: returns (G,) values from the initial distribution.

    ``q``, ``r``: (G, 2, K) weights of each decision in the transition and in the gain.
    Unknown rows (``unknown[s, d, x]``) may be any distribution, chosen per step (a
    relaxation: the bound is valid, possibly wider than the sharp one).
    """
    f = model.potential  # (G, K)
    P = model.kernel  # (G, 2, K, K)
    G, K = f.shape
    W = np.zeros((G, K))
    for _ in range(horizon):
        # known rows: r_d (P_d f - f(x)) + q_d P_d W
        val = r * (np.einsum("sdxy,sy->sdx", P, f) - f[:, None, :]) + q * np.einsum(
            "sdxy,sy->sdx", P, W)
        # unknown rows: extreme over next levels y of r_d f(y) + q_d W(y), minus r_d f(x)
        cand = r[..., None] * f[:, None, None, :] + q[..., None] * W[:, None, None, :]
        ext = cand.max(-1) if sign > 0 else cand.min(-1)
        ext = ext - r * f[:, None, :]
        W = np.where(unknown, ext, val).sum(1)
    return np.einsum("sx,sx->s", model.initial, W)


def _visitation_bounds(model: Any, unknown: np.ndarray, q: np.ndarray, horizon: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds (G, K) on Lambda's visitation weights P(x | s) = mean over
    t < T of P(x_t = x) over the unknown rows, as :func:`_dp_bounds` (each unknown row
    chosen per step: outer bounds): per level k a backward recursion of the occupancy of k."""
    P = model.kernel  # (G, 2, K, K)
    G, K = model.initial.shape
    lo, hi = np.zeros((G, K)), np.zeros((G, K))
    for k in range(K):
        here = (np.arange(K) == k) / horizon
        for out, pick in ((lo, np.min), (hi, np.max)):
            W = np.zeros((G, K))
            for _ in range(horizon):
                known = q * np.einsum("sdxy,sy->sdx", P, W)
                free = q * pick(W, axis=1)[:, None, None]  # an unknown row: any next level
                W = here + np.where(unknown, free, known).sum(1)
            out[:, k] = np.einsum("sx,sx->s", model.initial, W)
    return lo, hi


def _box_simplex(c: np.ndarray, lo: np.ndarray, hi: np.ndarray, sign: float) -> float:
    """max (sign +1) or min (-1) of c . w over w in [lo, hi] with sum w = 1: each w at its
    lower bound, the rest of the mass given greedily to the largest (smallest) c."""
    w = lo.astype(float).copy()
    left = 1.0 - w.sum()
    for i in np.argsort(-sign * c, kind="stable"):
        take = min(max(left, 0.0), hi[i] - lo[i])
        w[i] += take
        left -= take
    return float(c @ w)


def _lambda_range(terms_lo: np.ndarray, terms_hi: np.ndarray, wa: tuple[np.ndarray, ...],
                  wb: tuple[np.ndarray, ...]) -> tuple[float, float]:
    """Bounds of sum_{x, x'} F(x, x') w_a(x) w_b(x') (F in [terms_lo, terms_hi], >= 0) over
    w_a, w_b in their boxes (lo, hi) on the simplex: per x the extreme over w_b, then over
    w_a (outer bounds of the bilinear form)."""
    u = np.array([_box_simplex(row, *wb, +1.0) for row in terms_hi])
    low = np.array([_box_simplex(row, *wb, -1.0) for row in terms_lo])
    return _box_simplex(low, *wa, -1.0), _box_simplex(u, *wa, +1.0)


def positivity_bounds(model: Any, p_d1: np.ndarray, unknown: np.ndarray, horizon: int, *,
                      pair: tuple[int, int] | None = None, eps: float | str | None = None,
                      weights: str = "visitation") -> Any:
    """Bounds on every figure when the kernel rows ``unknown[s, d, x]`` are not identified.

    The identification set: the fitted model with each unknown row replaced by *any*
    probability distribution over the K levels. Per group, V^pi, V^PS, V^pi0 and the
    direct effect V^pi - V^PS are bounded by backward dynamic programming in which the
    unknown row may be chosen afresh at every step (valid outer bounds; sharp when a
    fixed row attains the extreme at every step). The indirect effect is bounded by
    interval arithmetic on V^PS - V^pi0; C, DPE, IPE, SPE by the group bounds (groups
    have separate rows). Delta(x, s) at an unknown row uses h_d in [min f - f(x),
    max f - f(x)]; Lambda is bounded termwise and over the weights P(x | s) the identification
    set allows (visitation weights bounded as the values are, :func:`_visitation_bounds`;
    those of the fitted model where no unknown row reaches them).
    Returns a DataFrame indexed by quantity with columns lower, upper, identified; its
    ``attrs["pair"]`` holds the pair (a, b) of group indices that C, its parts and Lambda
    compare (a minus b). ``pair``: those groups (indices); None: the pair the point
    estimate on the fitted model compares (:func:`causalfair.engines.effects.decompose`:
    the largest and smallest V^pi with more than two groups).
    ``eps``: Lambda's (None: what the model declares, else "auto"; engines.benefit.eps_for).
    """
    import pandas as pd

    eps = model_eps(eps, model)[0]
    K = model.n_levels
    p = np.asarray(p_d1, dtype=np.float64)
    if p.ndim == 3:
        raise LogError("logs: bounds need a stationary policy table (G, K).")
    q_pi = np.stack([1.0 - p, p], axis=1)
    q_0 = np.stack([np.ones_like(p), np.zeros_like(p)], axis=1)
    r_dir = np.stack([-p, p], axis=1)
    specs = {"V": (q_pi, q_pi), "V_ps": (q_pi, q_0), "V_0": (q_0, q_0), "direct": (q_pi, r_dir)}
    lo, hi = {}, {}
    for k, (q, r) in specs.items():
        lo[k] = _dp_bounds(model, unknown, q, r, horizon, -1.0)
        hi[k] = _dp_bounds(model, unknown, q, r, horizon, +1.0)
    lo["indirect"], hi["indirect"] = lo["V_ps"] - hi["V_0"], hi["V_ps"] - lo["V_0"]
    if weights not in WEIGHTS:
        raise LogError(f"weights: unknown value {weights!r}; allowed values: {', '.join(WEIGHTS)}.")
    a, b = decompose(model, p, horizon, eps=eps, weights=weights, pair=pair).pair
    rows = {}

    def gap(key: str) -> tuple[float, float]:
        return float(lo[key][a] - hi[key][b]), float(hi[key][a] - lo[key][b])

    rows["C"], rows["DPE"], rows["IPE"], rows["SPE"] = (gap(k) for k in ("V", "direct", "indirect", "V_0"))
    for i, g in enumerate(model.group_names):
        for k in ("V", "V_ps", "V_0", "direct", "indirect"):
            rows[f"{k}[{g}]"] = (float(lo[k][i]), float(hi[k][i]))
    # Delta bounds
    f = model.potential
    h = model.expected_gain()  # (G, 2, K)
    h_lo = np.where(unknown, f.min(1)[:, None, None] - f[:, None, :], h)
    h_hi = np.where(unknown, f.max(1)[:, None, None] - f[:, None, :], h)
    d_lo, d_hi = h_lo[:, 1] - h_hi[:, 0], h_hi[:, 1] - h_lo[:, 0]
    w = model.initial if weights == "initial" else model.propagate(p, horizon)[:horizon].mean(0)
    p_bar = p
    dp = np.abs(p_bar[a][:, None] - p_bar[b][None, :])
    dd_min = np.maximum(0.0, np.maximum(d_lo[a][:, None] - d_hi[b][None, :],
                                        d_lo[b][None, :] - d_hi[a][:, None]))
    dd_max = np.maximum(d_hi[a][:, None] - d_lo[b][None, :], d_hi[b][None, :] - d_lo[a][:, None])
    w_lo, w_hi = (w, w) if weights == "initial" else _visitation_bounds(model, unknown, q_pi,
                                                                        horizon)
    if np.abs(w_hi - w_lo).max() <= 1e-12:  # no unknown row reaches the weights: the fitted
        ww = w[a][:, None] * w[b][None, :]
        rows["Lambda"] = (float((eps * dp / (eps + dd_max) * ww).sum()),
                          float((eps * dp / (eps + dd_min) * ww).sum()))
    else:  # the weights too range over the identification set
        rows["Lambda"] = _lambda_range(eps * dp / (eps + dd_max), eps * dp / (eps + dd_min),
                                       (w_lo[a], w_hi[a]), (w_lo[b], w_hi[b]))
    for i, g in enumerate(model.group_names):
        for x in range(K):
            rows[f"Delta[{g},{model.level_labels[x]}]"] = (float(d_lo[i, x]), float(d_hi[i, x]))
    df = pd.DataFrame.from_dict(rows, orient="index", columns=["lower", "upper"])
    df["identified"] = (df["upper"] - df["lower"]).abs() <= 1e-9 * np.maximum(1.0, df["upper"].abs())
    df.index.name = "quantity"
    df.attrs["pair"] = (int(a), int(b))
    return df

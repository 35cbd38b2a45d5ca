"""Attention allocation (ml-fairness-gym, as Xu et al. ICML 2024 and Hu et al.
BigData 2023 run it): the ``attention-1`` and ``attention-harder`` systems.

K = 5 sites, each its own group; the state of site k is its incident rate lambda_k. Each
step the decision maker spreads N attention units over the sites (a_k >= 0, sum a_k = N).
Incidents occur, y_k ~ Poisson(lambda_k); the units discover seen_k = min(a_k, y_k) of
them (miss and extra-discovery probabilities are 0 in the published configs). Then the
rate moves: a site left alone gets worse, an attended one better,

    lambda_k' = lambda_k + up_k                  if a_k = 0,
    lambda_k' = max(0, lambda_k - down_k * a_k)  otherwise

(``environments/attention_allocation.py::_update_state``). The published parameters are
in :data:`ATTENTION_DEFAULTS` with their sources: ``attention-1`` has N = 6,
lambda_0 = (8, 6, 4, 3, 1.5), up = down = 0.1 at every site; ``attention-harder``
(ELBERT's harder environment) has N = 30, lambda_0 = (30, 25, 22.5, 17.5, 12.5),
up = (0.08, 0.2, 0.4, 0.8, 2), down = (0.004, 0.01, 0.016, 0.02, 0.04) (its exp(-alpha
lambda) scaling with alpha = 0 and its theta = 0 revival are identities and are left out).

As a :class:`~causalfair.systems.System`: one replica is the five sites
(``units_per_replica = 5``, one group per site). The potential is f = -lambda_k (a lower
incident rate is better off), so a site's gain is lambda_k - lambda_k'. The reward of a
site-step is the papers' zeta_0 seen_k - zeta_1 (y_k - seen_k): incidents discovered minus
a quarter of those missed on ``attention-1`` (zeta = (1, 0.25)), minus a quarter of those
missed only on ``attention-harder`` (zeta = (0, 0.25)). **Decisions**: each site gets a priority
w_k in {1, ..., W} (W = 4 by default) and the N units are placed greedily in proportion
to the priorities, one unit at a time on the site with the largest remaining share
(shares w / sum w, minus 1/N per unit placed) - the placement of the published RL
wrappers (``ppo_wrapper_env.py::process_action``), applied to priorities instead of
softmax logits. The baseline action w = 0 means "no attention": pi0 (w = 0 everywhere)
sends no unit anywhere, which the budget forbids the deployed policy
(``DecisionSet.allowed`` excludes it).

With the published parameters a site's gain under no attention is -up_k whatever its
rate, so h0 is constant: **IPE is exactly 0**, SPE = -T (up_a - up_b) (0 on
``attention-1``, where every up_k = 0.1) and all of the policy's effect is DPE. The
incidents (Poisson, drawn by inverse CDF from each site's uniform) only change what the
policy observes; the rates move deterministically given the allocation.

**The published setup** (``attention-central``, or ``policy="central"`` on either
system): one central policy over all sites, as the published RL wrappers (ELBERT,
Fairness-in-RL). Every site reads the same observation, the 8-step history of (seen,
occurred, allocation, delta) for all K sites (delta = sum seen / (sum occurred + 1) over
the 8-step window, where the published wrappers sum over the episode so far or 300 steps;
site by site, where they list all sites' seen, then occurred, ...: docs/simulators.md;
4 x 8 x K numbers, 160 for 5 sites) then a one-hot of its own index,
and emits its own logit; the logits go through a softmax and the greedy placement, as
``process_action`` does with the Box(-3, 3)^K logits. A shared network over (whole
history, own index) is one central policy whose output distribution factorises over the
sites, as SB3's diagonal Gaussian does; the departure that remains is that each logit is
one of ``logits`` (default -3, -2, ..., 3) rather than continuous. The observation has
too many columns to pair individuals, so the system declares no feature names and the
audit reports no Lambda (C, DPE, IPE and SPE are unchanged). Episodes of
``attention-central`` last 200 steps (ours; the published 1,000 / 1,024 with
``horizon=1000``), long enough for the allocation to separate policies (docs/simulators.md).

Seed 001's own variant: ``increase="f-ppo"`` (per-site increases (0.2, 0.26, 0.4, 0.6,
0.3), Fairness-in-RL ``DYNAMIC_INCREASE_RATES``) and its short-term fairness, allocation
parity (its Eq. 9, :func:`allocation_parity`); ``long_gap="observed"`` gives F-PPO-L the
training signal of seed 001's code (the occurred incidents of the last 300 steps) instead of
the true rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._validation import check_int
from causalfair.errors import SystemError_
from causalfair.model import CausalStructure
from causalfair.systems.system import DecisionSet, Gain, System
from causalfair.types import Observation, StepResult

__all__ = ["ATTENTION_DEFAULTS", "AttentionSimulator", "CENTRAL_LOGITS", "FPPO_INCREASE",
           "allocate", "allocation_parity", "central_group_columns", "make_attention",
           "make_attention_central", "make_attention_harder", "poisson_inverse"]

#: The published parameters, with their sources.
ATTENTION_DEFAULTS: dict[str, dict[str, Any]] = {
    "attention-1": {
        # pocar attention_allocation_experiment/config.py; ml-fairness-gym defaults
        "units": 6,
        "rates": (8.0, 6.0, 4.0, 3.0, 1.5),
        "increase": (0.1,) * 5,  # dynamic rate d, when a site gets no attention
        "decrease": (0.1,) * 5,  # d per attention unit
        "horizon": 20,  # ours: the published episodes last 1000 (pocar) or 1024 (ELBERT)
        # reward zeta_0 * seen - zeta_1 * missed: ZETA_0 = 1, ZETA_1 = 0.25 (ELBERT and
        # Fairness-in-RL attention configs; Xu et al. App. D, Hu et al.'s code)
        "reward_seen": 1.0,
        "reward_missed": 0.25,
    },
    "attention-harder": {
        # ELBERT attention_allocation_experiment/harder_env.py (DYNAMIC_RATE_1)
        "units": 30,
        "rates": (30.0, 25.0, 22.5, 17.5, 12.5),
        "increase": (0.08, 0.2, 0.4, 0.8, 2.0),
        "decrease": (0.004, 0.01, 0.016, 0.02, 0.04),
        "horizon": 20,
        # ELBERT harder_env: the negative sum of missed incidents, zeta_1 = 0.25 (Xu et al.
        # App. D: "negative sum of missed incidents")
        "reward_seen": 0.0,
        "reward_missed": 0.25,
    },
}
#: F-PPO's per-site increases (Fairness-in-RL allocation/config.py, DYNAMIC_INCREASE_RATES):
#: ``increase="f-ppo"`` (or the numbers) on ``make_attention`` for that variant.
FPPO_INCREASE = (0.2, 0.26, 0.4, 0.6, 0.3)
#: The central policy's logit of a site: one of these (the published Box(-3, 3) on a grid).
CENTRAL_LOGITS = (-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)
#: The central observation's history: the last 8 steps (the published ``OBS_HIST_LEN``).
HISTORY = 8
#: Seed 001's window for allocation parity (Eq. 9) and its observed long-term signal.
WINDOW = 300
#: ``attention-central``'s horizon (ours; the published episodes last 1000 / 1024 steps).
CENTRAL_HORIZON = 200

#: The fair-RL methods' published hyper-parameters on attention allocation (TrainConfig
#: fields): A-PPO (1, 0.15, 0.15), omega 0.05 and F-PPO-L beta3 = beta4 = 0.15, omega 0.1
#: (Fairness-in-RL allocation/config.py, digest-001 sections 3b and 4); ELBERT-PO alpha
#: 50 (original) / 2e4 (harder) with the soft-bias temperature beta = 20 (Xu et al. Table 3).
ATTENTION_TRAIN_DEFAULTS: dict[str, dict[str, Any]] = {
    "attention-1": {"appo_beta1": 0.15, "appo_beta2": 0.15, "appo_omega": 0.05,
                    "fppo_beta3": 0.15, "fppo_beta4": 0.15, "fppo_omega": 0.1,
                    "elbert_alpha": 50.0, "elbert_beta": 20.0},
    "attention-harder": {"appo_beta1": 0.15, "appo_beta2": 0.15, "appo_omega": 0.05,
                         "fppo_beta3": 0.15, "fppo_beta4": 0.15, "fppo_omega": 0.1,
                         "elbert_alpha": 2e4, "elbert_beta": 20.0},
}


def allocate(weights: np.ndarray, units: int) -> np.ndarray:
    """Greedy placement of ``units`` attention units in proportion to ``weights`` (m, K):
    one unit at a time on the site with the largest remaining share (shares w / sum w,
    minus 1 / units per unit placed; ties: the lowest index). Rows of zeros get nothing."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum(axis=1, keepdims=True)
    share = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    funded = total[:, 0] > 0
    every = bool(funded.all())
    share = share if every else share[funded]  # the rows that place units
    alloc = np.zeros(share.shape, dtype=np.int64)
    # the site chosen in each row as an index into the flat arrays: row start + argmax
    start = np.arange(0, share.size, share.shape[1])
    share_flat, alloc_flat = share.reshape(-1), alloc.reshape(-1)
    for _ in range(units):
        j = share.argmax(axis=1)
        j += start
        alloc_flat[j] += 1
        share_flat[j] -= 1.0 / units
    if every:
        return alloc
    out = np.zeros(w.shape, dtype=np.int64)
    out[funded] = alloc
    return out


def poisson_inverse(u: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Poisson(lam) incidents by inverse CDF of the uniforms ``u``: the smallest k with
    P(Y <= k) > u, summing the pmf p_k = p_(k-1) lam / k from p_0 = exp(-lam) (monotone in
    u, so the same uniform gives the same luck at any rate). Rates above 500, where
    exp(-lam) underflows, use scipy's quantile function.

    The sums run in place, and once at most a quarter of the entries still count, the
    arrays shrink to those (the tail of a few large counts then costs little)."""
    lam = np.asarray(lam, dtype=np.float64)
    shape = lam.shape  # of any dimensions, u broadcast to it: flat arrays below
    lam = lam.reshape(-1)
    u = np.broadcast_to(np.asarray(u, dtype=np.float64), shape).reshape(-1)
    k = np.zeros_like(lam)
    big = lam > 500.0
    pmf = np.exp(-np.where(big, 0.0, lam))
    cdf = pmf.copy()
    live = (u >= cdf) & ~big & (lam > 0)  # the entries still counting
    # the arrays being summed: at ``where`` in k (every entry until the first shrink)
    where: Any = slice(None)
    u_at, lam_at, count = u, lam, np.zeros_like(lam)
    test = np.empty_like(live)
    n, i = np.count_nonzero(live), 0
    with np.errstate(over="ignore"):  # in entries done counting, never read again
        while n:
            if 4 * n <= live.size:  # keep only the entries still counting
                k[where] = count
                keep = np.flatnonzero(live)
                where = keep if isinstance(where, slice) else where[keep]
                u_at, lam_at, pmf, cdf = u_at[keep], lam_at[keep], pmf[keep], cdf[keep]
                count, live, test = count[keep], live[keep], test[keep]
            i += 1
            pmf *= lam_at
            pmf /= i
            cdf += pmf
            count += live
            live &= np.greater_equal(u_at, cdf, out=test)
            live &= np.greater(pmf, 0.0, out=test)
            n = np.count_nonzero(live)
    k[where] = count
    if big.any():
        from scipy.stats import poisson

        k[big] = poisson.ppf(u[big], lam[big])
    return k.reshape(shape)


def allocation_parity(allocation: Any, units: int, window: int = WINDOW) -> np.ndarray:
    """Seed 001's short-term fairness on attention allocation (Hu et al. 2023, Eq. 9),
    allocation parity over the last ``window`` steps (w = 300 in its code, ``calc_delta``):

        Delta_s = max_k | sum_{t' in window} a_{k,t'} / (N w) - 1 / K |.

    ``allocation``: the units each site got per step, (T, ..., K) (time first, sites last;
    a shorter history uses all of its T steps, w = min(window, T)). Returns one value per
    replica, shape (...). 0 when every site got the same share."""
    a = np.asarray(allocation, dtype=np.float64)
    if a.ndim < 2 or a.shape[0] < 1:
        raise SystemError_(f"allocation: must be (T, ..., K) units per step and site with T >= 1, "
                           f"got shape {a.shape}.")
    if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units < 1:
        raise SystemError_(f"units: must be an integer >= 1 (attention units per step), got {units!r}.")
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise SystemError_(f"window: must be an integer >= 1 (steps), got {window!r}.")
    w = min(int(window), a.shape[0])
    share = a[-w:].sum(0) / (units * w)
    return np.abs(share - 1.0 / a.shape[-1]).max(-1)


@dataclass
class AttentionState:
    rate: np.ndarray  # (n * K,) incident rates, replica-major
    seen: np.ndarray  # (n * K,) incidents discovered at the last step
    attention: np.ndarray  # (n * K,) units the site got at the last step
    group: np.ndarray
    t: int
    # the central policy's observation: (n, HISTORY, K, 4) of (seen, occurred, allocation,
    # window delta), the latest step last
    history: np.ndarray | None = None
    # F-PPO-L's observed signal: the occurred incidents of the last WINDOW steps
    occurred: tuple[np.ndarray, ...] | None = None


class AttentionSimulator:
    """The coupled-unit simulator protocol: K units (sites) per replica; ``step`` takes one
    allocation weight per site (0 = no attention). ``action_weights`` maps action indices
    to weights (the central policy: index i >= 1 is the logit ``CENTRAL_LOGITS[i - 1]``,
    weight e^logit); None takes the actions as the weights (priorities, or the Gymnasium
    env's softmax). ``central``: observe the published history (module docstring);
    ``long_gap``: F-PPO-L's signal, ``"rates"`` (true rates) or ``"observed"``."""

    feature_names = ("rate_seen", "attention", "seen")

    def __init__(self, units: int, rates: Any, increase: Any, decrease: Any,
                 reward_seen: float = 1.0, reward_missed: float = 0.0, *,
                 action_weights: Any = None, central: bool = False, long_gap: str = "rates"):
        self.units = int(units)
        self.zeta = (float(reward_seen), float(reward_missed))
        self.rates0 = np.asarray(rates, dtype=np.float64)
        self.up = np.asarray(increase, dtype=np.float64)
        self.down = np.asarray(decrease, dtype=np.float64)
        self.K = self.rates0.shape[0]
        self.n_groups = self.K
        self.action_weights = None if action_weights is None else np.asarray(action_weights,
                                                                             dtype=np.float64)
        self.central = bool(central)
        self.long_gap_kind = long_gap

    def reset(self, n: int, group: Any, rng: np.random.Generator) -> AttentionState:
        z = np.zeros(n * self.K)
        return AttentionState(rate=np.tile(self.rates0, n), seen=z, attention=z.copy(),
                              group=np.tile(np.arange(self.K), n), t=0,
                              history=np.zeros((n, HISTORY, self.K, 4)) if self.central else None,
                              occurred=() if self.long_gap_kind == "observed" else None)

    def observe(self, s: AttentionState) -> Any:
        if self.central:  # every site: the whole history, then its own index
            n, K = s.history.shape[0], self.K
            hist = np.repeat(s.history.reshape(n, -1), K, axis=0)
            return Observation(group=s.group, features=np.concatenate(
                [hist, np.tile(np.eye(K), (n, 1))], axis=1), t=s.t)
        # what a decision maker can see: discoveries per unit of attention, and its own
        # last allocation (never the true rate)
        per_unit = np.divide(s.seen, s.attention, out=np.zeros_like(s.seen),
                             where=s.attention > 0)
        return Observation(group=s.group, features=np.stack([per_unit, s.attention, s.seen],
                                                            axis=1), t=s.t)

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random(n)  # one uniform per site: its incidents by inverse CDF

    def long_term_gap(self, s: AttentionState) -> np.ndarray:
        """F-PPO-L's long-term gap per replica. ``"rates"`` (Hu et al.'s evaluation, on the
        true rates): max_k |lambda_k - mean_k lambda|. ``"observed"`` (seed 001's training
        signal): with h_k the incidents occurred at site k over the last 300 steps,
        max_k |h_k - mean h| / max_k h (0 before any incident)."""
        if self.long_gap_kind == "observed":
            n = s.rate.shape[0] // self.K
            h = sum(s.occurred, np.zeros(n * self.K)).reshape(n, self.K)
            top = h.max(axis=1)
            dev = np.abs(h - h.mean(axis=1, keepdims=True)).max(axis=1)
            return np.divide(dev, top, out=np.zeros_like(dev), where=top > 0)
        lam = s.rate.reshape(-1, self.K)
        return np.abs(lam - lam.mean(axis=1, keepdims=True)).max(axis=1)

    def _history(self, s: AttentionState, seen: np.ndarray, y: np.ndarray, a: np.ndarray
                 ) -> np.ndarray:
        """The central observation's history after a step: the oldest entry drops out, the
        new one (seen, occurred, allocation, window delta) comes in."""
        n, K = s.history.shape[0], self.K
        new = np.stack([seen.reshape(n, K), y.reshape(n, K), a.reshape(n, K),
                        np.zeros((n, K))], axis=-1)
        h = np.concatenate([s.history[:, 1:], new[:, None]], axis=1)
        h[:, -1, :, 3] = h[:, :, :, 0].sum(1) / (h[:, :, :, 1].sum(1) + 1.0)
        return h

    def step(self, s: AttentionState, d: Any, noise: Any) -> Any:
        K = self.K
        if self.action_weights is None:
            w = np.asarray(d, dtype=np.float64).reshape(-1, K)
        else:
            w = self.action_weights[np.asarray(d, dtype=np.intp)].reshape(-1, K)
        a = allocate(w, self.units).reshape(-1).astype(np.float64)
        up, down = np.tile(self.up, w.shape[0]), np.tile(self.down, w.shape[0])
        y = poisson_inverse(noise, s.rate)
        seen = np.minimum(a, y)
        nxt = np.where(a == 0, s.rate + up, np.maximum(0.0, s.rate - down * a))
        occurred = None if s.occurred is None else s.occurred[-(WINDOW - 1):] + (y,)
        return StepResult(state=AttentionState(
                              rate=nxt, seen=seen, attention=a, group=s.group, t=s.t + 1,
                              history=None if s.history is None else self._history(s, seen, y, a),
                              occurred=occurred),
                          reward=self.zeta[0] * seen - self.zeta[1] * (y - seen),
                          gain=s.rate - nxt,
                          # ELBERT's supply and demand: incidents discovered and occurred
                          info={"incidents": y, "supply": seen, "demand": y})


def central_group_columns(K: int) -> tuple[str, ...]:
    """The names of the central observation's last ``K`` columns, the one-hot of the site's
    own index (the site is the group): ``f{j}``, the names a system without feature names
    gives its columns (``causalfair.train.encoding.system_encoding``), after the 4 x
    :data:`HISTORY` x K history columns."""
    width = 4 * HISTORY * K
    return tuple(f"f{width + k}" for k in range(K))


def _reward_text(z0: float, z1: float) -> str:
    seen = "" if z0 == 0 else "incidents discovered" if z0 == 1 else f"{z0:g} x incidents discovered"
    missed = "" if z1 == 0 else f"{z1:g} x incidents missed"
    if seen and missed:
        return f"{seen} - {missed}"
    return seen or (f"-{missed}" if missed else "0")


def _weight(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
        raise SystemError_(f"{name}: must be a finite number >= 0 (the reward's weight on "
                           f"incidents {name.split('_')[1]}), got {v!r}.")
    return float(v)


def _vector(name: str, v: Any, K: int, lo: float = 0.0) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        out = ()
    if len(out) != K or any(not np.isfinite(x) or x < lo for x in out):
        raise SystemError_(f"{name}: must be {K} finite numbers >= {lo:g}, got {v!r}.")
    return out


def _choice(name: str, v: Any, allowed: tuple[str, ...], what: str) -> str:
    if v not in allowed:
        raise SystemError_(f"{name}: bad value {v!r}; allowed: {', '.join(allowed)} ({what}).")
    return v


def make_attention(units: int | None = None, rates: Any = None, increase: Any = None,
                   decrease: Any = None, priorities: int = 4, horizon: int | None = None,
                   reward_seen: float | None = None, reward_missed: float | None = None,
                   policy: str = "site", logits: Any = None, long_gap: str = "rates",
                   *, id: str = "attention-1") -> Any:
    """The ``attention-1`` system (module docstring); ``attention-harder`` has ELBERT's
    harder parameters. ``increase``: numbers, or ``"f-ppo"`` for seed 001's per-site
    increases (:data:`FPPO_INCREASE`). ``policy``: ``"site"`` (each site picks a priority
    1..``priorities`` from its own last step) or ``"central"`` (the published central
    policy: the whole history, one logit per site from ``logits``). ``long_gap``: F-PPO-L's
    signal, ``"rates"`` or ``"observed"`` (seed 001's code)."""
    base = ATTENTION_DEFAULTS[id]
    units = base["units"] if units is None else units
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise SystemError_(f"units: must be an integer >= 1 (attention units per step), got {units!r}.")
    rates = _vector("rates", base["rates"] if rates is None else rates, 5)
    K = len(rates)
    if isinstance(increase, str):
        _choice("increase", increase, ("f-ppo",), "or 5 numbers")
        increase = FPPO_INCREASE
    inc = _vector("increase", base["increase"] if increase is None else increase, K)
    dec = _vector("decrease", base["decrease"] if decrease is None else decrease, K)
    if isinstance(priorities, bool) or not isinstance(priorities, int) or priorities < 1:
        raise SystemError_(f"priorities: must be an integer >= 1, got {priorities!r}.")
    _choice("policy", policy, ("site", "central"), "the published setup is 'central'")
    _choice("long_gap", long_gap, ("rates", "observed"), "F-PPO-L's long-term signal")
    central = policy == "central"
    if logits is not None and not central:
        raise SystemError_("logits: used only with policy='central' (the site policy picks "
                           "priorities); drop it or set policy='central'.")
    try:
        lg = tuple(float(x) for x in (CENTRAL_LOGITS if logits is None else logits))
    except (TypeError, ValueError):
        lg = ()
    if not lg or not np.isfinite(lg).all() or len(set(lg)) != len(lg):
        raise SystemError_(f"logits: must be distinct finite numbers (each site's logit "
                           f"choices, e.g. [-3, -2, -1, 0, 1, 2, 3]), got {logits!r}.")
    T = check_int("horizon", base["horizon"] if horizon is None else horizon, 1, SystemError_)
    z0, z1 = (_weight(name, base[name] if v is None else v)
              for name, v in (("reward_seen", reward_seen), ("reward_missed", reward_missed)))
    if central:
        labels = ("no attention",) + tuple(f"logit {x:+g}" for x in lg)
        weights: Any = (0.0,) + tuple(float(np.exp(x)) for x in lg)
    else:
        labels = ("no attention",) + tuple(f"priority {i}" for i in range(1, priorities + 1))
        weights = None
    params = {"units": units, "rates": list(rates), "increase": list(inc),
              "decrease": list(dec), "priorities": priorities, "horizon": int(T),
              "reward_seen": z0, "reward_missed": z1}
    if central or long_gap != "rates":  # the site systems' params stay as they were
        params.update(policy=policy, long_gap=long_gap, **({"logits": list(lg)} if central else {}))
    # the central observation ends with the one-hot of the site's own index, and the sites
    # are the groups: a network reading those columns reads S (the graph's S -> D_t)
    roles = {"group": list(central_group_columns(K))} if central else {}
    return System(
        id=id,
        groups=tuple(f"site {k + 1}" for k in range(K)),
        decisions=DecisionSet(labels=labels, baseline=0, allowed=tuple(range(1, len(labels)))),
        # the central history (4 x 8 x K + K columns) pairs no individuals: no names, no Lambda
        features=None if central else AttentionSimulator.feature_names,
        roles=roles,
        gain=Gain("incident-rate reduction", "incidents per step",
                  "lambda_k - lambda_k': how much the site's incident rate fell"),
        reward=_reward_text(z0, z1),
        horizon=int(T),
        structure=CausalStructure(exogenous={}, s_to_x0=True, s_to_transition=True),
        simulator=lambda: AttentionSimulator(units, rates, inc, dec, z0, z1,
                                             action_weights=weights, central=central,
                                             long_gap=long_gap),
        units_per_replica=K,
        params=params,
        description=f"attention allocation over {K} sites, {units} units per step "
                    f"({'one central policy, ' if central else ''}ml-fairness-gym; seeds 000, 001)",
        # the published setup: A-PPO reads the gap after the step, as both published codes
        train_defaults={**ATTENTION_TRAIN_DEFAULTS[id], **({"appo_gap": "after"} if central else {})},
    )


def make_attention_harder(**kw: Any) -> Any:
    """``attention-harder`` (ELBERT's harder attention environment)."""
    return make_attention(**kw, id="attention-harder")


def make_attention_central(harder: bool = False, horizon: int = CENTRAL_HORIZON, **kw: Any) -> Any:
    """``attention-central``: ``attention-1`` (``harder=True``: ``attention-harder``) with
    the published central policy (``policy="central"``) and episodes of
    :data:`CENTRAL_HORIZON` steps."""
    if not isinstance(harder, bool):
        raise SystemError_(f"harder: must be true or false, got {harder!r}.")
    kw.setdefault("policy", "central")
    return make_attention(horizon=horizon, **kw,
                          id="attention-harder" if harder else "attention-1")

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair.errors import SystemError_
from causalfair.model import CausalStructure
from causalfair.systems.system import DecisionSet, Gain, System
from causalfair.types import Observation, StepResult

__all__ = ["ATTENTION_DEFAULTS", "AttentionSimulator", "allocate", "make_attention",
           "make_attention_harder", "poisson_inverse"]

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
#: pass ``increase=`` to ``make_attention`` for that variant.
FPPO_INCREASE = (0.2, 0.26, 0.4, 0.6, 0.3)

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
    alloc = np.zeros(w.shape, dtype=np.int64)
    rows = np.nonzero(total[:, 0] > 0)[0]
    for _ in range(units):
        k = share[rows].argmax(axis=1)
        alloc[rows, k] += 1
        share[rows, k] -= 1.0 / units
    return alloc


def poisson_inverse(u: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Poisson(lam) incidents by inverse CDF of the uniforms ``u``: the smallest k with
    P(Y <= k) > u, summing the pmf p_k = p_(k-1) lam / k from p_0 = exp(-lam) (monotone in
    u, so the same uniform gives the same luck at any rate). Rates above 500, where
    exp(-lam) underflows, use scipy's quantile function."""
    lam = np.asarray(lam, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    k = np.zeros_like(lam)
    big = lam > 500.0
    pmf = np.exp(-np.where(big, 0.0, lam))
    cdf = pmf.copy()
    active = (u >= cdf) & ~big & (lam > 0)
    i = 0
    while active.any():
        i += 1
        pmf = pmf * lam / i
        cdf = cdf + pmf
        k += active
        active &= (u >= cdf) & (pmf > 0)
    if big.any():
        from scipy.stats import poisson

        k[big] = poisson.ppf(u[big], lam[big])
    return k


@dataclass
class AttentionState:
    rate: np.ndarray  # (n * K,) incident rates, replica-major
    seen: np.ndarray  # (n * K,) incidents discovered at the last step
    attention: np.ndarray  # (n * K,) units the site got at the last step
    group: np.ndarray
    t: int


class AttentionSimulator:
    """The coupled-unit simulator protocol: K units (sites) per replica; ``step`` takes one
    priority per site (0 = no attention)."""

    feature_names = ("rate_seen", "attention", "seen")

    def __init__(self, units: int, rates: Any, increase: Any, decrease: Any,
                 reward_seen: float = 1.0, reward_missed: float = 0.0):
        self.units = int(units)
        self.zeta = (float(reward_seen), float(reward_missed))
        self.rates0 = np.asarray(rates, dtype=np.float64)
        self.up = np.asarray(increase, dtype=np.float64)
        self.down = np.asarray(decrease, dtype=np.float64)
        self.K = self.rates0.shape[0]
        self.n_groups = self.K

    def reset(self, n: int, group: Any, rng: np.random.Generator) -> AttentionState:
        z = np.zeros(n * self.K)
        return AttentionState(rate=np.tile(self.rates0, n), seen=z, attention=z.copy(),
                              group=np.tile(np.arange(self.K), n), t=0)

    def observe(self, s: AttentionState) -> Any:
        # what a decision maker can see: discoveries per unit of attention, and its own
        # last allocation (never the true rate)
        per_unit = np.divide(s.seen, s.attention, out=np.zeros_like(s.seen),
                             where=s.attention > 0)
        return Observation(group=s.group, features=np.stack([per_unit, s.attention, s.seen],
                                                            axis=1), t=s.t)

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random(n)  # one uniform per site: its incidents by inverse CDF

    def long_term_gap(self, s: AttentionState) -> np.ndarray:
        """F-PPO-L's long-term gap per replica (Hu et al.'s evaluation, on the true rates):
        max_k |lambda_k - mean_k lambda|."""
        lam = s.rate.reshape(-1, self.K)
        return np.abs(lam - lam.mean(axis=1, keepdims=True)).max(axis=1)

    def step(self, s: AttentionState, d: Any, noise: Any) -> Any:
        K = self.K
        w = np.asarray(d, dtype=np.float64).reshape(-1, K)
        a = allocate(w, self.units).reshape(-1).astype(np.float64)
        up, down = np.tile(self.up, w.shape[0]), np.tile(self.down, w.shape[0])
        y = poisson_inverse(noise, s.rate)
        seen = np.minimum(a, y)
        nxt = np.where(a == 0, s.rate + up, np.maximum(0.0, s.rate - down * a))
        return StepResult(state=AttentionState(rate=nxt, seen=seen, attention=a, group=s.group,
                                               t=s.t + 1),
                          reward=self.zeta[0] * seen - self.zeta[1] * (y - seen),
                          gain=s.rate - nxt,
                          # ELBERT's supply and demand: incidents discovered and occurred
                          info={"incidents": y, "supply": seen, "demand": y})


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


def make_attention(units: int | None = None, rates: Any = None, increase: Any = None,
                   decrease: Any = None, priorities: int = 4, horizon: int | None = None,
                   reward_seen: float | None = None, reward_missed: float | None = None,
                   *, id: str = "attention-1") -> Any:
    """The ``attention-1`` system (module docstring); ``attention-harder`` has ELBERT's
    harder parameters."""
    base = ATTENTION_DEFAULTS[id]
    units = base["units"] if units is None else units
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise SystemError_(f"units: must be an integer >= 1 (attention units per step), got {units!r}.")
    rates = _vector("rates", base["rates"] if rates is None else rates, 5)
    K = len(rates)
    inc = _vector("increase", base["increase"] if increase is None else increase, K)
    dec = _vector("decrease", base["decrease"] if decrease is None else decrease, K)
    if isinstance(priorities, bool) or not isinstance(priorities, int) or priorities < 1:
        raise SystemError_(f"priorities: must be an integer >= 1, got {priorities!r}.")
    T = base["horizon"] if horizon is None else horizon
    z0, z1 = (_weight(name, base[name] if v is None else v)
              for name, v in (("reward_seen", reward_seen), ("reward_missed", reward_missed)))
    labels = ("no attention",) + tuple(f"priority {i}" for i in range(1, priorities + 1))
    return System(
        id=id,
        groups=tuple(f"site {k + 1}" for k in range(K)),
        decisions=DecisionSet(labels=labels, baseline=0, allowed=tuple(range(1, priorities + 1))),
        features=AttentionSimulator.feature_names,
        gain=Gain("incident-rate reduction", "incidents per step",
                  "lambda_k - lambda_k': how much the site's incident rate fell"),
        reward=_reward_text(z0, z1),
        horizon=int(T),
        structure=CausalStructure(exogenous={}, s_to_x0=True, s_to_transition=True),
        simulator=lambda: AttentionSimulator(units, rates, inc, dec, z0, z1),
        units_per_replica=K,
        params={"units": units, "rates": list(rates), "increase": list(inc),
                "decrease": list(dec), "priorities": priorities, "horizon": int(T),
                "reward_seen": z0, "reward_missed": z1},
        description=f"attention allocation over {K} sites, {units} units per step "
                    "(ml-fairness-gym; seeds 000, 001)",
        train_defaults=ATTENTION_TRAIN_DEFAULTS[id],
    )


def make_attention_harder(**kw: Any) -> Any:
    """``attention-harder`` (ELBERT's harder attention environment)."""
    return make_attention(**kw, id="attention-harder")

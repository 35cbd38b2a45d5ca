"""Replicator dynamics of a population's qualification (Yin et al. NeurIPS 2023,
Appendix A.1, after Raab & Liu 2021): the ``replicator-1`` system.

Two groups; the state of group g is its qualification rate q_g = P(Y = 1 | G = g). A
classifier accepts (Y_hat = 1) an individual whose feature clears the group's threshold
a_g; in the synthetic setting the feature is X ~ N(Y, 1) with Y in {-1, +1}, so

    TPR(a) = P(X >= a | Y = +1) = 1 - Phi(a - 1),   FPR(a) = P(X >= a | Y = -1) = 1 - Phi(a + 1).

Individuals imitate successful peers of their own group: with the utility matrix U
(rows y = -1, +1; columns y_hat = -1, +1) the fitness of label y is
W_y = U[y, +1] P(Y_hat = 1 | y) + U[y, -1] P(Y_hat = -1 | y), and

    q' = q W_+1 / (q W_+1 + (1 - q) W_-1)          (the replicator equation).

The dynamics are deterministic. The decision maker's reward (Yin et al., Eq. 8) is
r = alpha * tp + beta * tn with tp = q TPR and tn = (1 - q)(1 - FPR) (task "tp": alpha =
1, beta = 0).

As a :class:`~causalfair.systems.System`: one replica is the population, with one unit
per group (``units_per_replica = 2``); each unit observes ``(q_own, q_other)`` and
chooses its group's threshold from a grid (the paper's code uses the loci 0.1, 0.3, ...,
0.9 of a Voronoi partition of [0, 1]); the potential is q, so the qualification gain
is q' - q. The baseline action a0 = "reject all" (threshold +inf) lies outside what a
policy may choose (``DecisionSet.allowed``): with it W_y = U[y, -1], so q drifts by
imitation alone and the path-specific term h0(q) depends on q: IPE is informative.

The exact engine here is the Monte Carlo engine: the dynamics are deterministic, so for
a deterministic policy every replica follows the same path and the estimates are exact
(standard errors 0; n = 2 replicas suffice). A stochastic policy is read as a random
threshold per step for the whole group (one draw per replica), not as a randomised
classifier; its estimates carry Monte Carlo error.

**U is not published** (the paper gives only constraints): it is a validated parameter,
and a U that violates a constraint is refused, naming it. Our default U = ((0.5, 1.0),
(0.51, 0.58)) is ours, chosen to put the system in the regime the paper describes, where
short-term incentives lower qualification: the myopic threshold 0 drives q from (0.6, 0.4)
to (0.53, 0.34) in 15 steps and (0.20, 0.10) in 100, while thresholds of 0.3 and above
raise it (0.9: (0.79, 0.63) in 15 steps).

**A setting where the fairness constraint binds** (``replicator-binding``). On
``replicator-1`` the demographic-parity constraint of seed 002 (sum over the episode of
D = 1/2 (xi_1 - xi_2)^2 at most ``slack`` = 1.5, i.e. V_g >= H - 1.5, the supplementary
code's c) never binds: the two groups' acceptance rates stay close, Myopic spends 0.14
of the 1.5 in 15 steps and 0.62 in 100, and Myopic-Fair (weight 1/2 on D) equals Myopic.
``replicator-binding`` keeps replicator-1's U (the same dynamics) and starts from a
population where one group is far more qualified, q0 = (0.9, 0.1), over the supplementary
code's H = 15. There Myopic spends 2.23 > 1.5 (the constraint binds), the myopic
thresholds (0, 0) cost D = 0.13 at the first step, and Myopic-Fair raises group 1's
threshold to 0.28, trading reward (V_r 6.17 -> 5.73) for parity (V_g 12.77 -> 13.29).
The best constant grid thresholds that meet the constraint exist (regret stays defined).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._validation import check_int
from causalfair.errors import SystemError_
from causalfair.model import CausalStructure
from causalfair.systems.system import DecisionSet, Gain, System
from causalfair.types import Observation, StepResult

__all__ = ["REPLICATOR_DEFAULTS", "REPLICATOR_BINDING", "check_utility_matrix",
           "ReplicatorSimulator", "make_replicator", "make_replicator_binding", "tpr_fpr"]

#: The published parameters (Yin et al. 2023) and our choices where the paper gives none.
REPLICATOR_DEFAULTS: dict[str, Any] = {
    # ours: satisfies the three constraints of Yin et al. App. A.1 (not published), and
    # low thresholds lower q while high ones raise it (module docstring)
    "U": ((0.5, 1.0), (0.51, 0.58)),
    # the paper's code (UCB_Fair): loci of the 5 x 5 Voronoi grid, per group 0.1..0.9
    "thresholds": (0.1, 0.3, 0.5, 0.7, 0.9),
    # Yin et al., Eq. 8, task "tp"
    "alpha": 1.0,
    "beta": 0.0,
    # ours: the paper samples initial states (16 in Fig. 1); an audit needs one
    "q0": (0.6, 0.4),
    # Yin et al.: H = 100 in the synthetic experiments
    "horizon": 100,
    "group_weights": (0.5, 0.5),
}

#: ``replicator-binding``: replicator-1 with these changes (module docstring).
REPLICATOR_BINDING: dict[str, Any] = {"q0": (0.9, 0.1), "horizon": 15}


def check_utility_matrix(U: Any) -> np.ndarray:
    """Validate U (rows y = -1, +1; columns y_hat = -1, +1) against Yin et al.'s
    constraints; returns it as a (2, 2) float array."""
    try:
        u = np.array(U, dtype=np.float64)
    except (TypeError, ValueError):
        raise SystemError_(f"U: must be a 2 x 2 matrix of numbers, got {U!r}.") from None
    if u.shape != (2, 2) or not np.isfinite(u).all():
        raise SystemError_(f"U: must be a 2 x 2 matrix of finite numbers (rows y = -1, +1; "
                           f"columns y_hat = -1, +1), got {U!r}.")
    if (u <= 0).any():
        raise SystemError_(f"U: every entry must be > 0 (fitnesses divide by their mean), got {U!r}.")
    for row, y in ((0, "-1"), (1, "+1")):
        if not u[row, 1] > u[row, 0]:
            raise SystemError_(
                f"U: violates 'acceptance is always preferred' for y = {y}: U[{y},+1] = "
                f"{u[row, 1]:g} must exceed U[{y},-1] = {u[row, 0]:g}.")
    if not u[0, 1] > u[1, 1]:
        raise SystemError_(
            f"U: violates 'among the accepted, being qualified costs more': U[-1,+1] = "
            f"{u[0, 1]:g} must exceed U[+1,+1] = {u[1, 1]:g}.")
    if not u[1, 0] > u[0, 0]:
        raise SystemError_(
            f"U: violates 'no dominant strategy': with U[-1,+1] > U[+1,+1], being unqualified "
            f"would dominate unless U[+1,-1] = {u[1, 0]:g} exceeds U[-1,-1] = {u[0, 0]:g}.")
    return u


def _phi(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr(x)


def tpr_fpr(thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(X >= a | Y = +1) and P(X >= a | Y = -1) for X ~ N(Y, 1) (+inf: 0 and 0)."""
    a = np.asarray(thresholds, dtype=np.float64)
    return 1.0 - _phi(a - 1.0), 1.0 - _phi(a + 1.0)


@dataclass
class ReplicatorState:
    q: np.ndarray  # (n * 2,), replica-major: [q_g0, q_g1] per replica
    group: np.ndarray
    t: int


class ReplicatorSimulator:
    """The coupled-unit simulator protocol (docs/simulators.md): two units per replica,
    one per group; ``step`` takes one action index per unit (the last index is the
    baseline "reject all")."""

    feature_names = ("q_own", "q_other")
    n_groups = 2

    def __init__(self, U: Any, thresholds: Sequence[float], alpha: float, beta: float,
                 q0: Sequence[float]):
        self.U = check_utility_matrix(U)
        self.thresholds = np.append(np.asarray(thresholds, dtype=np.float64), np.inf)
        self.tpr, self.fpr = tpr_fpr(self.thresholds)
        self.alpha, self.beta = float(alpha), float(beta)
        self.q0 = np.asarray(q0, dtype=np.float64)

    def reset(self, n: int, group: Any, rng: np.random.Generator) -> ReplicatorState:
        return ReplicatorState(q=np.tile(self.q0, n), group=np.tile(np.arange(2), n), t=0)

    def observe(self, s: ReplicatorState) -> Any:
        other = s.q.reshape(-1, 2)[:, ::-1].reshape(-1)
        return Observation(group=s.group, features=np.stack([s.q, other], axis=1), t=s.t)

    def draw_noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.zeros((n, 0))  # deterministic dynamics

    def long_term_gap(self, s: ReplicatorState) -> np.ndarray:
        """Yin et al.'s qualification-rate parity (QR) per replica: |q_1 - q_2|, the state
        notion that a myopic decision maker cannot affect."""
        q = s.q.reshape(-1, 2)
        return np.abs(q[:, 0] - q[:, 1])

    def step(self, s: ReplicatorState, d: Any, noise: Any) -> Any:
        a = np.asarray(d, dtype=np.intp)
        tpr, fpr = self.tpr[a], self.fpr[a]
        U = self.U
        w_pos = U[1, 1] * tpr + U[1, 0] * (1.0 - tpr)
        w_neg = U[0, 1] * fpr + U[0, 0] * (1.0 - fpr)
        q = s.q
        q_next = q * w_pos / (q * w_pos + (1.0 - q) * w_neg)
        reward = self.alpha * q * tpr + self.beta * (1.0 - q) * (1.0 - fpr)
        return StepResult(state=ReplicatorState(q=q_next, group=s.group, t=s.t + 1),
                          reward=reward, gain=q_next - q)


def _numbers(values: Any) -> tuple[float, ...]:
    """A list of real numbers as floats; () (refused by the caller, naming the field) for
    anything else: a string ("0.5" is not a list of thresholds), None, a bool."""
    if isinstance(values, (str, bytes)):
        return ()
    try:
        items = tuple(values)
    except TypeError:
        return ()
    if any(isinstance(x, (bool, str, bytes)) or x is None for x in items):
        return ()
    try:
        return tuple(float(x) for x in items)
    except (TypeError, ValueError):
        return ()


def make_replicator(U: Any = REPLICATOR_DEFAULTS["U"],
                    thresholds: Sequence[float] = REPLICATOR_DEFAULTS["thresholds"],
                    alpha: float = REPLICATOR_DEFAULTS["alpha"],
                    beta: float = REPLICATOR_DEFAULTS["beta"],
                    q0: Sequence[float] = REPLICATOR_DEFAULTS["q0"],
                    horizon: int = REPLICATOR_DEFAULTS["horizon"],
                    group_weights: Sequence[float] = REPLICATOR_DEFAULTS["group_weights"],
                    *, id: str = "replicator-1") -> Any:
    """The ``replicator-1`` system (parameters: module docstring)."""
    check_utility_matrix(U)
    th = _numbers(thresholds)
    if not th or any(not math.isfinite(x) for x in th):
        raise SystemError_(f"thresholds: must be finite numbers, got {thresholds!r}.")
    q = _numbers(q0)
    if len(q) != 2 or any(not 0.0 < x < 1.0 for x in q):
        raise SystemError_(f"q0: must be two qualification rates in (0, 1), got {q0!r}.")
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise SystemError_(f"{name}: must be a number in [0, 1] (Yin et al., Eq. 8), got {v!r}.")
    horizon = check_int("horizon", horizon, 1, SystemError_)
    labels = tuple(f"a={x:g}" for x in th) + ("reject all",)
    return System(
        id=id,
        groups=("g1", "g2"),
        decisions=DecisionSet(labels=labels, baseline=len(th), allowed=tuple(range(len(th)))),
        features=ReplicatorSimulator.feature_names,
        gain=Gain("qualification rate change", "qualification rate (share of Y = +1)",
                  "q_g' - q_g: the share of qualified individuals of the group"),
        reward="alpha * true-positive rate + beta * true-negative rate (Yin et al., NeurIPS 2023, Eq. 8)",
        horizon=int(horizon),
        structure=CausalStructure(exogenous={}, s_to_x0=True, s_to_transition=False),
        simulator=lambda: ReplicatorSimulator(U, th, alpha, beta, q),
        group_weights=np.asarray(group_weights, dtype=np.float64),
        units_per_replica=2,
        params={"U": [list(r) for r in np.asarray(U, dtype=float)], "thresholds": list(th),
                "alpha": alpha, "beta": beta, "q0": list(q), "horizon": int(horizon),
                "group_weights": list(group_weights)},
        description="replicator dynamics of qualification under per-group thresholds (Yin et al., NeurIPS 2023)",
    )


def make_replicator_binding(U: Any = REPLICATOR_DEFAULTS["U"],
                            thresholds: Sequence[float] = REPLICATOR_DEFAULTS["thresholds"],
                            alpha: float = REPLICATOR_DEFAULTS["alpha"],
                            beta: float = REPLICATOR_DEFAULTS["beta"],
                            q0: Sequence[float] = REPLICATOR_BINDING["q0"],
                            horizon: int = REPLICATOR_BINDING["horizon"],
                            group_weights: Sequence[float] = REPLICATOR_DEFAULTS["group_weights"]
                            ) -> Any:
    """``replicator-binding``: replicator-1 started from q0 = (0.9, 0.1) over H = 15, where
    seed 002's parity constraint binds (module docstring)."""
    return make_replicator(U, thresholds, alpha, beta, q0, horizon, group_weights,
                           id="replicator-binding")

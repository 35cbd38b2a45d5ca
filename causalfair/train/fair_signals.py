"""A-PPO, F-PPO-L and ELBERT-PO on any system (Hu et al. 2023, Xu et al. 2024): the
supply and demand signals they read from the simulator, checked before a run writes
anything, and the advantages those signals give per replica.

The generic trainer (:mod:`causalfair.train.generic`) records the signals in its rollouts
(``StepResult.info["supply"]``, ``["demand"]``; F-PPO-L: ``simulator.long_term_gap(state)``)
and calls :func:`fair_advantage` on each iteration's batch; the objectives themselves are
the pure functions of :mod:`causalfair.train.objectives`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.errors import ConfigError
from causalfair.train.algorithms import names
from causalfair.train.config import TrainConfig
from causalfair.train.objectives import (
    appo_advantage,
    elbert_advantage,
    fppol_advantage,
    gain_to_go,
    rate_gap,
)

__all__ = ["FAIR_ADVANTAGE_ALGOS", "check_fair_signals", "fair_advantage", "signal_replicas"]

#: A-PPO, F-PPO-L and ELBERT-PO (Hu et al. 2023, Xu et al. 2024), which change the advantage
#: with supply/demand signals per replica.
FAIR_ADVANTAGE_ALGOS = names(fair_advantage=True)


def check_fair_signals(algo: str, system: Any, sim: Any) -> None:
    """A-PPO and ELBERT-PO read the supply and demand the simulator reports in
    ``StepResult.info``; F-PPO-L reads ``simulator.long_term_gap(state)`` per replica.
    Probed on two replicas with baseline-free actions before anything is written."""
    units, n_actions, base = system.units_per_replica, system.n_actions, system.decisions.baseline
    if algo == "f-ppo-l" and (units == 1 or not callable(getattr(sim, "long_term_gap", None))):
        raise ConfigError(
            f"algo: 'f-ppo-l' on system {system.id!r} needs a long-term gap per replica "
            "(a simulator method long_term_gap(state), coupled units: attention, "
            "infectious), which this system has not; on lending-1, -2 and -3 the lending "
            "trainer trains it.")
    n = 2
    state = sim.reset(n, None if units > 1 else 0, np.random.default_rng(0))
    m = n * units
    act = (system.decisions.allowed or (base,))[0]
    d = np.full(m, act) if not (n_actions == 2 and base == 0) else np.full(m, bool(act))
    info = getattr(sim.step(state, d, sim.draw_noise(m, np.random.default_rng(0))), "info", None) or {}
    missing = [k for k in ("supply", "demand") if k not in info]
    if missing:
        raise ConfigError(
            f"algo: {algo!r} needs the supply and demand of every unit at every step "
            f"(StepResult.info keys {missing} missing in system {system.id!r}); "
            "see docs/simulators.md, or use ppo / ppo-c.")


def signal_replicas(algo: str, n_units: int, units_per_replica: int) -> np.ndarray:
    """The replica of each of ``n_units`` units, as :func:`fair_advantage` aggregates their
    signals: coupled units (``units_per_replica`` U > 1) by their replica. Independent units
    (U = 1): A-PPO's short-term bias is a population quantity, the whole batch's (one
    "replica", as the lending trainer's batch gap); ELBERT-PO's returns are per episode, and
    every independent unit is one (its eta = the batch's totals over the units, its A^S_g the
    unit's supply to go minus the mean: the lending trainer's and the released code's
    per-episode normalisation). With one replica ELBERT's A^S_g and A^D_g would be 0 and its
    fairness term vanish whatever alpha."""
    if units_per_replica > 1:
        return np.arange(n_units) // units_per_replica
    if algo == "elbert-po":
        return np.arange(n_units)
    return np.zeros(n_units, dtype=np.intp)


def fair_advantage(config: TrainConfig, n_groups: int, adv: np.ndarray, b: dict[str, np.ndarray],
                   adv_rep: np.ndarray, unit_rep: np.ndarray, unit_group: np.ndarray
                   ) -> tuple[np.ndarray, dict]:
    """The advantages of A-PPO, F-PPO-L and ELBERT-PO from per-replica signals. ``adv``
    (T, columns), column j belonging to replica ``adv_rep[j]``; ``b["supply"]``,
    ``b["demand"]`` (T, units), unit i in replica ``unit_rep[i]`` and group
    ``unit_group[i]``.

    - Totals per replica and group S, D (T, replicas, G); the short-term bias of the
      papers' code (Hu et al. 2023, Xu et al. 2024), Delta_t = max_g - min_g S_g(<t) /
      (D_g(<t) + 1) over the episode so far (:func:`rate_gap`).
    - ``a-ppo``: :func:`appo_advantage` with D_t (``appo_gap="after"``: D_{t+1}, as
      the published codes) and D_{t+1} - D_t.
    - ``f-ppo-l``: :func:`fppol_advantage`, violated = Delta_{t+1} > omega (the bias with
      the step's decisions, seed 001's Delta_s(s_t, a_t)), dW = the change of the
      replica's long-term gap over the step.
    - ``elbert-po``: :func:`elbert_advantage` (soft bias with ``elbert_beta`` for more
      than two groups). eta^S_g, eta^D_g = mean per-episode totals (gamma = 1, as the
      released code); A^S_g, A^D_g = the replica's supply (demand) to go minus its
      mean over replicas at that step (Monte Carlo with a per-step baseline: ours;
      the paper fits 2G critics). A, A^S_g and A^D_g are each standardised before
      they are combined, as the released code does per minibatch."""
    c = config
    T, G = adv.shape[0], n_groups
    n_rep = int(adv_rep.max()) + 1
    idx = np.asarray(unit_rep) * G + np.asarray(unit_group)
    S, D = (np.stack([np.bincount(idx, weights=b[k][t], minlength=n_rep * G)
                      for t in range(T)]).reshape(T, n_rep, G) for k in ("supply", "demand"))
    zero = np.zeros((1, n_rep, G))
    gap = rate_gap(np.concatenate([zero, np.cumsum(S, 0)]),
                   np.concatenate([zero, np.cumsum(D, 0)]))  # (T + 1, replicas)
    cols = lambda a: a[:, adv_rep]  # noqa: E731 - replica signal -> adv columns
    # the papers' evaluation bias: max - min of sum S_g / (sum D_g + episodes)
    rates = S.sum((0, 1)) / (D.sum((0, 1)) + n_rep)
    row = {"bias_batch": float(rates.max() - rates.min())}
    if c.algo == "a-ppo":
        seen = gap[1:] if c.appo_gap == "after" else gap[:-1]  # D_{t+1} or D_t
        out = appo_advantage(adv, cols(seen), cols(gap[1:] - gap[:-1]), c.appo_beta0,
                             c.appo_beta1, c.appo_beta2, c.appo_omega)
    elif c.algo == "f-ppo-l":
        L = b["long_gap"]  # (T + 1, replicas)
        # Eq. 7 of seed 001 conditions on Delta_s(s_t, a_t), the bias with the step's
        # decisions (its code: the gap stored after env.step): Delta_{t+1}, not Delta_t
        out = fppol_advantage(adv, cols(gap[1:] > c.fppo_omega), cols(L[1:] - L[:-1]),
                              c.fppo_beta0, c.fppo_beta3, c.fppo_beta4)
        row["long_gap_batch"] = float(L[-1].mean())
    else:
        std = lambda a: (a - a.mean()) / (a.std() + 1e-8)  # noqa: E731
        eta_s, eta_d = S.sum(0).mean(0), D.sum(0).mean(0)
        def per_group(x: np.ndarray) -> np.ndarray:  # (G, T, columns)
            out = []
            for g in range(G):  # the replica's total to go, minus its mean over replicas
                left = gain_to_go(x[..., g])
                out.append(std(cols(left - left.mean(1, keepdims=True))))
            return np.stack(out)

        out = elbert_advantage(std(adv), per_group(S), per_group(D), eta_s, eta_d,
                               c.elbert_alpha, c.elbert_beta if G > 2 else None)
    return out, row

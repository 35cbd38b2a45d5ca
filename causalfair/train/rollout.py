"""Vectorised rollouts for the trainer: every array holds a whole batch, no Python loop
per individual or per environment (only over decision epochs / steps).

Two environments, one :class:`Batch` layout (arrays of shape (L, M): L steps along
axis 0, M independent individuals or environments along axis 1):

- :class:`IndividualRollout`: the paper's MDP. ``n_individuals`` individuals of both
  groups (split by P(s), largest remainder, shuffled) start at x_0 ~ P(x_0 | s) and
  take ``horizon`` decisions each through :class:`causalfair.systems.lending.settings.LendingSimulator`.
  The episode ends after T epochs (value 0 after the last), exactly what the exact audit
  measures.
- :class:`PopulationRollout`: ``n_individuals`` parallel population environments
  (:class:`causalfair.systems.gym.lending.VecLendingEnv`, DelayedImpactEnv semantics, lending.md
  section B): per-group level distributions, one applicant per step, mass ``pop_mass``
  moved per decided applicant, bank cash, episodes truncated at ``pop_max_steps`` or
  ended when cash < 1 (autoreset). Environments persist between rollouts (their state
  is part of the resume state).

The policy enters as a table pi(d1 | x, s) of shape (G, K): with one-hot (level, group)
inputs the network has G*K distinct inputs, so evaluating it once per rollout is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair.systems.lending.settings import (
    LendingModel,
    LendingNoise,
    LendingSimulator,
    lending_potential,
)
from causalfair.train import objectives as obj

__all__ = ["Batch", "IndividualRollout", "PopulationRollout", "make_rollout"]


@dataclass
class Batch:
    """One rollout. All arrays (L, M); ``p_d1`` is pi_old(d1 | x, s) of each sample."""

    level: np.ndarray
    group: np.ndarray
    t: np.ndarray
    action: np.ndarray
    p_d1: np.ndarray
    reward: np.ndarray
    gain: np.ndarray
    repay: np.ndarray
    next_level: np.ndarray
    done: np.ndarray  # episode ends after this step (no bootstrap)
    n_episodes: float  # episode starts in the batch (ELBERT's eta normalisation)
    bootstrap: dict[str, np.ndarray] | None = None  # next (level, group, t) for V at the end
    signals: dict[str, np.ndarray] = field(default_factory=dict)
    massaged: int = 0

    @property
    def size(self) -> int:
        return int(self.action.size)


def _split_counts(n: int, weights: np.ndarray) -> np.ndarray:
    raw = n * np.asarray(weights, dtype=np.float64)
    base = np.floor(raw).astype(np.int64)
    rest = n - base.sum()
    order = np.argsort(-(raw - base), kind="stable")
    base[order[:rest]] += 1
    return base


class IndividualRollout:
    """Episodes of T decision epochs for a batch of individuals (the paper's MDP)."""

    kind = "individual"

    def __init__(self, model: LendingModel, n_individuals: int, horizon: int):
        self.model = model
        self.sim = LendingSimulator(model)
        self.N = int(n_individuals)
        self.T = int(horizon)
        self.G, self.K = model.n_groups, model.n_levels
        self.counts = _split_counts(self.N, model.group_weights)

    def collect(self, table: np.ndarray, rng: np.random.Generator, *,
                massage_tau: float | None = None) -> Batch:
        T, N = self.T, self.N
        group = rng.permutation(np.repeat(np.arange(self.G), self.counts))
        state = self.sim.reset(N, group, rng)
        shape = (T, N)
        level = np.empty(shape, np.int64)
        nxt = np.empty(shape, np.int64)
        action = np.empty(shape, bool)
        p_d1 = np.empty(shape)
        reward = np.empty(shape)
        gain = np.empty(shape)
        repay = np.empty(shape, bool)
        flips = 0
        for t in range(T):
            x = state.level
            p = table[group, x]
            d = rng.random(N) < p
            u = rng.random((2, N))  # float uniforms: LendingNoise's documented float form
            noise = LendingNoise(repay=u[0], drift=u[1])
            y = u[0] < self.model.p_repay[group, x]
            if massage_tau is not None:
                flip = obj.massage_cohort(p, d, y, group, massage_tau)
                d = d ^ flip
                flips += int(flip.sum())
            res = self.sim.step(state, d, noise)
            level[t], action[t], p_d1[t], repay[t] = x, d, p, y
            reward[t], gain[t], nxt[t] = res.reward, res.gain, res.state.level
            state = res.state
        done = np.zeros(shape, bool)
        done[-1] = True
        return Batch(
            level=level, group=np.broadcast_to(group, shape).copy(),
            t=np.broadcast_to(np.arange(T)[:, None], shape).copy(), action=action,
            p_d1=p_d1, reward=reward, gain=gain, repay=repay, next_level=nxt, done=done,
            n_episodes=float(N), massaged=flips,
        )

    def signals(self, batch: Batch, pair: tuple[int, int] = (0, 1)) -> dict[str, np.ndarray]:
        """A-PPO: the state's gap D_t = the TPR gap of the rollout's decisions before epoch
        t (its history; 0 at t = 0), the same for every decision of the epoch, and each
        decision's change = gap with it - gap without it (objectives.loo_tpr_gap);
        F-PPO-L: window = one epoch's cohort: its TPR gap and each individual's effect on
        the cohort's W1. (D_t was the whole rollout's gap, one number per batch, which the
        anchors' per-batch min-max scaling turned into 0: A-PPO's beta1 term did nothing.)"""
        before, after = obj.loo_tpr_gap(batch.action, batch.repay, batch.group, pair)
        gap = obj.cohort_tpr_gap(batch.action, batch.repay, batch.group, pair)
        rates = []
        for g in pair:  # the epochs' would-repay and approved would-repay counts, cumulated
            pos = ((batch.group == g) & batch.repay).sum(1).astype(np.float64)
            tp = ((batch.group == g) & batch.repay & batch.action).sum(1).astype(np.float64)
            cp = np.concatenate([[0.0], np.cumsum(pos)])
            ct = np.concatenate([[0.0], np.cumsum(tp)])
            rates.append(np.divide(ct, cp, out=np.zeros_like(ct), where=cp > 0))
        history = np.abs(rates[0] - rates[1])  # (T + 1,): the gap of epochs < t
        shape = batch.level.shape
        return {
            "gap_state": np.broadcast_to(history[:-1, None], shape).copy(),
            "gap_state_after": np.broadcast_to(history[1:, None], shape).copy(),  # epochs <= t
            "gap_before": before, "gap_after": after,
            "cohort_gap": np.broadcast_to(np.abs(gap)[:, None], batch.level.shape).copy(),
            "dw1": obj.w1_change(batch.level, batch.next_level, batch.group, self.K, pair),
        }

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        return None


class PopulationRollout:
    """``M`` parallel population-level lending environments: a thin driver of
    :class:`causalfair.systems.gym.lending.VecLendingEnv` (lending.md section B, autoreset on), which
    shares the trainer's numpy Generator so that a run is reproducible and resumable."""

    kind = "population"

    def __init__(self, model: LendingModel, n_envs: int, steps: int, max_steps: int,
                 mass: float = 0.01, cash0: float = 10000.0):
        from causalfair.systems.gym.lending import VecLendingEnv

        self.model = model
        self.M, self.S = int(n_envs), int(steps)
        self.G, self.K = model.n_groups, model.n_levels
        self._f = lending_potential(self.K)
        self.env = VecLendingEnv(model, self.M, eps=mass, cash=cash0, max_steps=max_steps,
                                 autoreset=True)
        self._started = False

    def _w1(self) -> np.ndarray:
        c = np.cumsum(self.env.mu, axis=2)
        return np.abs(c[:, 0, :-1] - c[:, 1, :-1]).sum(1)

    def collect(self, table: np.ndarray, rng: np.random.Generator, *,
                massage_tau: float | None = None) -> Batch:
        env = self.env
        if not self._started:
            env.reset(rng=rng)
            self._started = True
        env.rng = rng
        S, M, K = self.S, self.M, self.K
        shape = (S, M)
        out = {k: np.empty(shape, np.int64) for k in ("level", "group", "next_level")}
        action = np.empty(shape, bool)
        repay = np.empty(shape, bool)
        p_d1, reward, gain, dw1 = (np.empty(shape) for _ in range(4))
        tpr_env = np.empty((S, M, self.G))  # each env's running TPR before the step
        tpr_after = np.empty((S, M, self.G))  # and after it (before an autoreset)
        done = np.empty(shape, bool)
        flips = 0
        # ELBERT-PO's eta divides by the episodes in the batch: the M under way at its first
        # step, and one more per episode that ends before its last step (an episode that
        # ends at the last step starts its successor in the next batch: counting it here
        # counted every env twice when a rollout is one episode, ELBERT's own setting)
        starts = float(M)
        for s in range(S):
            g, x, y = env.group.copy(), env.level.copy(), env.will_repay.copy()
            drift = env.drift.copy()
            p = table[g, x]
            d = rng.random(M) < p
            tpr_env[s] = tpr = env.tpr()
            if massage_tau is not None:
                flip = obj.massage_flips(p, d, y, g, tpr[:, 0] - tpr[:, 1], massage_tau)
                d = d ^ flip
                flips += int(flip.sum())
            w1_before = self._w1()
            _, r, term, trunc, info = env.step(d.astype(np.int64))
            tpr_after[s] = info["tpr"]
            end = term | trunc
            after = self._w1()
            if end.any():  # autoreset replaced the state: use the final distributions
                mu_end = info["mu"][end]
                c = np.cumsum(mu_end, axis=2)
                after[end] = np.abs(c[:, 0, :-1] - c[:, 1, :-1]).sum(1)
                if s < S - 1:  # its next episode starts in this batch (else in the next)
                    starts += float(end.sum())
            x2 = np.clip(x + drift + np.where(d, np.where(y, 1, -1), 0), 0, K - 1)
            out["level"][s], out["group"][s], out["next_level"][s] = x, g, x2
            action[s], repay[s], p_d1[s], reward[s], done[s] = d, y, p, r, end
            gain[s] = self._f[x2] - self._f[x]
            dw1[s] = after - w1_before
        return Batch(
            level=out["level"], group=out["group"], t=np.zeros(shape, np.int64), action=action,
            p_d1=p_d1, reward=reward, gain=gain, repay=repay, next_level=out["next_level"],
            done=done, n_episodes=starts, massaged=flips,
            bootstrap={"level": env.level.copy(), "group": env.group.copy(),
                       "t": np.zeros(M, np.int64)},
            signals={"dw1_env": dw1, "tpr_env": tpr_env, "tpr_after": tpr_after},
        )

    def signals(self, batch: Batch, pair: tuple[int, int] = (0, 1)) -> dict[str, np.ndarray]:
        """A-PPO: the state's gap D_t = the environment's running TPR gap before the step
        (its episode so far: carried across rollouts, restarted by its reset), each
        decision's change from loo_tpr_gap; F-PPO-L: the change of the environment's exact
        W1 at each step, violated when that running TPR gap > omega."""
        before, after = obj.loo_tpr_gap(batch.action, batch.repay, batch.group, pair)
        tpr, tpr2 = batch.signals["tpr_env"], batch.signals["tpr_after"]
        run = np.abs(tpr[..., pair[0]] - tpr[..., pair[1]])
        run_after = np.abs(tpr2[..., pair[0]] - tpr2[..., pair[1]])
        return {"gap_state": run, "gap_state_after": run_after, "gap_before": before,
                "gap_after": after, "cohort_gap": run, "dw1": batch.signals["dw1_env"]}

    _STATE = ("mu", "cash", "t", "tp", "pos", "group", "level", "will_repay", "drift")

    def get_state(self) -> dict[str, Any]:
        if not self._started:
            return {}
        return {k: getattr(self.env, k).tolist() for k in self._STATE}

    def set_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.env.reset(rng=np.random.default_rng(0))  # allocate; every field is then replaced
        for k in self._STATE:
            cur = getattr(self.env, k)
            setattr(self.env, k, np.array(state[k], dtype=cur.dtype).reshape(cur.shape))
        self._started = True


def make_rollout(config: Any, model: LendingModel) -> IndividualRollout | PopulationRollout:
    """The rollout a :class:`~causalfair.train.config.TrainConfig` asks for."""
    if config.env == "individual":
        return IndividualRollout(model, config.n_individuals, config.horizon)
    return PopulationRollout(model, config.n_individuals, config.pop_steps,
                             config.pop_max_steps, config.pop_mass)

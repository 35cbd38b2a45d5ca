"""Population-level lending environment (lending.md section B): ml-fairness-gym's
DelayedImpactEnv semantics, vectorised, plus a Gymnasium face.

State of one environment: per-group level distributions ``mu[g]`` (start: the setting's
P(x0 | s)), the bank's cash (start 10000) and the current applicant. One step:

1. the applicant of this step was drawn at the end of the previous step (or by
   ``reset``): group g ~ P(s), level x ~ mu[g], would-repay y ~ Bernoulli(p_repay[g, x])
   and drift u ~ P(u | g), all before and independently of the decision;
2. the action d in {0 (deny), 1 (approve)} updates the cash: +interest * loan for
   (d1, repay), -loan for (d1, default), 0 for d0; the reward is that change;
3. mass m = min(eps, mu[g](x)) moves from x to x' = clip(x + u + step, 0, K - 1), with
   step +1 (d1, repay), -1 (d1, default), 0 (d0) (lending.md section A's rule); at the
   edges the clip keeps mass in place, and with the drift of DelayedImpactEnv
   (P(u = 0) = 1, :func:`delayed_impact_model`) a rejection moves nothing;
4. the episode is terminated when cash < loan and truncated after ``max_steps`` steps;
5. the next applicant is drawn from the updated distributions.

Observation: one-hot level (K) then one-hot group (G), float32; with ``extras=True``
the running per-group true positive rate (approved would-repay applicants / would-repay
applicants, 0 before the first) is appended (G more entries). ``info`` carries the
ground truth of the applicant just decided (group, level, will_repay), the
distributions ``mu`` after the step, cash and the running TPR.

Mean-field link to the individual model: while no mass bound binds (every level an
applicant can come from holds at least eps), the expected one-step change of mu[g] is
eps * P(g) * (mu[g] K_pi,g - mu[g]): a lazy version of the individual chain.

:class:`VecLendingEnv` steps ``n_envs`` environments as arrays (one numpy call per
operation, no Python loop over environments, no copies of the state history);
:class:`LendingEnv` is the ``gymnasium.Env`` (registered as ``causalfair/Lending-v0``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

from causalfair.errors import InputError
from causalfair.model import ModelError
from causalfair.systems.lending.settings import SETTINGS, LendingModel, lending_setting

__all__ = [
    "VecLendingEnv",
    "LendingPopulationEnv",
    "LendingEnv",
    "delayed_impact_model",
    "ENV_ID",
]

#: Its Gymnasium id, registered with the others by ``import causalfair``
#: (``causalfair._GYM_ENVS``; a test keeps the two the same).
ENV_ID = "causalfair/Lending-v0"
_MASS_TOL = 1e-12


def delayed_impact_model(n_levels: int = 7, interest: float = 1.0) -> LendingModel:
    """Setting 1's curves with no drift (P(u = 0) = 1): ml-fairness-gym's DelayedImpactEnv."""
    base = lending_setting("lending-1", n_levels=n_levels, interest=interest)
    return dataclasses.replace(base, drift=np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]),
                               name="delayed-impact")


def _resolve_model(model: LendingModel | str | None, n_levels: int, interest: float) -> LendingModel:
    if isinstance(model, LendingModel):
        return model
    if model is None or model == "lending-1":
        return lending_setting("lending-1", n_levels=n_levels, interest=interest)
    if model == "delayed-impact":
        return delayed_impact_model(n_levels, interest)
    names = (*SETTINGS, "delayed-impact")
    if isinstance(model, str) and model in SETTINGS:
        return lending_setting(model, n_levels=n_levels, interest=interest)
    got = repr(model)[:80] if isinstance(model, str) else type(model).__name__
    raise ModelError(f"model: expected a LendingModel or a setting name ({', '.join(names)}), "
                     f"got {got}.")


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ModelError(f"{name}: must be a finite number > 0, got {repr(value)[:80]}.")
    v = float(value)
    if not np.isfinite(v) or v <= 0:
        raise ModelError(f"{name}: must be a finite number > 0, got {value!r}.")
    return v


class VecLendingEnv:
    """``n_envs`` population lending environments stepped as arrays.

    ``model``: a :class:`~causalfair.systems.lending.settings.LendingModel` or a setting name
    ("lending-1", "lending-2", "lending-3", "delayed-impact"). ``eps``: mass moved per
    applicant (0.01). ``cash``: starting cash (10000). ``loan``: loan amount (1).
    ``max_steps``: truncation (2000 for training, 10000 for evaluation in the anchors).
    ``extras``: append the running per-group TPR to the observation. ``autoreset``:
    environments that end are reset within the same ``step`` (their last observation
    goes to ``info["final_obs"]``), as stable-baselines3's VecEnv does.

    ``step(actions)`` returns ``(obs, reward, terminated, truncated, info)`` with arrays
    of length n_envs; ``info`` arrays describe the applicant just decided.
    """

    def __init__(self, model: LendingModel | str | None = "lending-1", n_envs: int = 1, *,
                 n_levels: int = 7, interest: float = 1.0, eps: float = 0.01,
                 cash: float = 10_000.0, loan: float = 1.0, max_steps: int = 2000,
                 extras: bool = False, autoreset: bool = False):
        self.model = _resolve_model(model, n_levels, interest)
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
            raise ModelError(f"n_envs: must be an integer >= 1, got {n_envs!r}.")
        if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
            raise ModelError(f"max_steps: must be an integer >= 1, got {max_steps!r}.")
        self.n_envs = int(n_envs)
        self.eps = _positive("eps", eps)
        self.cash0 = _positive("cash", cash)
        self.loan = _positive("loan", loan)
        self.max_steps = int(max_steps)
        self.extras = bool(extras)
        self.autoreset = bool(autoreset)
        m = self.model
        self.n_groups, self.n_levels = m.n_groups, m.n_levels
        self.obs_dim = self.n_levels + self.n_groups + (self.n_groups if self.extras else 0)
        self._group_cdf = np.cumsum(np.asarray(m.group_weights, dtype=np.float64))[:-1]
        self._drift_cdf = np.cumsum(m.drift, axis=1)[:, :2]
        self._p_repay = m.p_repay
        self._next = np.clip(np.arange(-2, self.n_levels + 2), 0, self.n_levels - 1)
        self._gain_repay = float(m.interest) * self.loan
        self._rows = np.arange(self.n_envs)
        self.rng = np.random.default_rng()
        self._allocated = False

    # ------------------------------------------------------------------ state
    def _alloc(self) -> None:
        E, G, K = self.n_envs, self.n_groups, self.n_levels
        self.mu = np.empty((E, G, K))
        self.cash = np.empty(E)
        self.t = np.zeros(E, dtype=np.int64)
        self.tp = np.zeros((E, G))
        self.pos = np.zeros((E, G))
        self.group = np.zeros(E, dtype=np.intp)
        self.level = np.zeros(E, dtype=np.intp)
        self.will_repay = np.zeros(E, dtype=bool)
        self.drift = np.zeros(E, dtype=np.intp)
        self._allocated = True

    def _reset_rows(self, rows: np.ndarray) -> None:
        self.mu[rows] = self.model.initial
        self.cash[rows] = self.cash0
        self.t[rows] = 0
        self.tp[rows] = 0.0
        self.pos[rows] = 0.0

    def reset(self, seed: int | None = None, *, rng: np.random.Generator | None = None
              ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Reset every environment; ``seed`` (or a Generator ``rng``) fixes all randomness."""
        if rng is not None:
            self.rng = rng
        elif seed is not None or not self._allocated:
            self.rng = np.random.default_rng(seed)
        self._alloc()
        self._reset_rows(self._rows)
        self._draw_applicants(self._rows)
        return self._obs(), self._info(None)

    def _draw_applicants(self, rows: np.ndarray) -> None:
        """Group, level, would-repay outcome and drift of the next applicant of ``rows``."""
        u = self.rng.random((4, rows.shape[0]))
        g = (u[0][:, None] >= self._group_cdf[None, :]).sum(axis=1)
        cdf = np.cumsum(self.mu[rows, g], axis=1)  # (r, K)
        x = (cdf <= (u[1] * cdf[:, -1])[:, None]).sum(axis=1)
        x = np.minimum(x, self.n_levels - 1)
        self.group[rows] = g
        self.level[rows] = x
        self.will_repay[rows] = u[2] < self._p_repay[g, x]
        self.drift[rows] = (u[3][:, None] >= self._drift_cdf[g]).sum(axis=1) - 1

    def tpr(self) -> np.ndarray:
        """Running true positive rate per environment and group (0 before any positive)."""
        return np.divide(self.tp, self.pos, out=np.zeros_like(self.tp), where=self.pos > 0)

    def _obs(self) -> np.ndarray:
        E, K = self.n_envs, self.n_levels
        out = np.zeros((E, self.obs_dim), dtype=np.float32)
        out[self._rows, self.level] = 1.0
        out[self._rows, K + self.group] = 1.0
        if self.extras:
            out[:, K + self.n_groups:] = self.tpr()
        return out

    def _info(self, decided: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> dict[str, np.ndarray]:
        info: dict[str, np.ndarray] = {
            "mu": self.mu.copy(),  # (E, G, K): small; the state history is never kept
            "cash": self.cash.copy(),
            "tpr": self.tpr(),
            "step": self.t.copy(),
        }
        if decided is None:  # after reset: the applicant to decide next
            decided = (self.group.copy(), self.level.copy(), self.will_repay.copy())
        info["group"], info["level"], info["will_repay"] = decided
        return info

    # ------------------------------------------------------------------- step
    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Decide the current applicant of every environment (actions: 0/1, (n_envs,))."""
        if not self._allocated:
            raise RuntimeError("VecLendingEnv.step: call reset() first.")
        a = np.asarray(actions).reshape(-1)
        if a.shape[0] != self.n_envs:
            raise InputError(f"actions: expected {self.n_envs} actions, got {a.shape[0]}.")
        if not np.isin(a, (0, 1)).all():
            raise InputError(f"actions: must be 0 (deny) or 1 (approve), got {a[~np.isin(a, (0, 1))][0]!r}.")
        d = a.astype(bool)
        rows, g, x, y = self._rows, self.group, self.level, self.will_repay
        decided = (g.copy(), x.copy(), y.copy())
        # 1. cash
        reward = np.where(d, np.where(y, self._gain_repay, -self.loan), 0.0)
        self.cash += reward
        self.pos[rows, g] += y
        self.tp[rows, g] += d & y
        # 2. mass shift (section A's rule; edges keep their mass via the clip)
        step = np.where(d, np.where(y, 1, -1), 0)
        nxt = self._next[x + self.drift + step + 2]
        have = self.mu[rows, g, x]
        m = np.where(have <= self.eps + _MASS_TOL, have, self.eps) * (nxt != x)
        self.mu[rows, g, x] = have - m
        self.mu[rows, g, nxt] += m
        self.t += 1
        terminated = self.cash < self.loan
        truncated = (self.t >= self.max_steps) & ~terminated
        info = self._info(decided)
        # 3. the next applicant, from the updated distributions
        self._draw_applicants(rows)
        obs = self._obs()
        done = terminated | truncated
        if self.autoreset and done.any():
            ended = np.flatnonzero(done)
            info["final_obs"] = obs[ended].copy()
            info["final_rows"] = ended
            self._reset_rows(ended)
            self._draw_applicants(ended)
            obs = self._obs()
        return obs, reward, terminated, truncated, info

    def mean_level(self) -> np.ndarray:
        """Mean 0-based level per environment and group, (n_envs, G)."""
        return self.mu @ np.arange(self.n_levels) / self.mu.sum(axis=2)


#: The batch form under its descriptive name.
LendingPopulationEnv = VecLendingEnv


class LendingEnv(gym.Env):
    """Gymnasium environment of the population lending model (id ``causalfair/Lending-v0``).

    Same arguments as :class:`VecLendingEnv` (one environment). Seed through
    ``reset(seed=...)``. Observation: Box(0, 1, (K + G [+ G],), float32); actions:
    Discrete(2) (0 deny, 1 approve); reward: change in bank cash. ``info``: group,
    level, will_repay (the applicant just decided; after reset, the one to decide),
    mu (G, K), cash, tpr (G,), step.
    """

    metadata = {"render_modes": []}

    def __init__(self, model: LendingModel | str | None = "lending-1", *, n_levels: int = 7,
                 interest: float = 1.0, eps: float = 0.01, cash: float = 10_000.0,
                 loan: float = 1.0, max_steps: int = 2000, extras: bool = False,
                 render_mode: str | None = None):
        self.vec = VecLendingEnv(model, 1, n_levels=n_levels, interest=interest, eps=eps,
                                 cash=cash, loan=loan, max_steps=max_steps, extras=extras)
        self.model = self.vec.model
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.vec.obs_dim,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    @staticmethod
    def _scalar_info(info: dict[str, np.ndarray]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group": int(info["group"][0]),
            "level": int(info["level"][0]),
            "will_repay": bool(info["will_repay"][0]),
            "mu": info["mu"][0],
            "cash": float(info["cash"][0]),
            "tpr": info["tpr"][0],
            "step": int(info["step"][0]),
        }
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs, info = self.vec.reset(rng=self.np_random)
        return obs[0], self._scalar_info(info)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action) and action not in (0, 1):
            raise InputError(f"action: must be 0 (deny) or 1 (approve), got {action!r}.")
        obs, reward, term, trunc, info = self.vec.step(np.array([int(action)]))
        return obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), self._scalar_info(info)


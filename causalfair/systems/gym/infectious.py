"""Gymnasium environments of the infectious-disease systems (ids
``causalfair/Infectious-v0`` and ``causalfair/InfectiousHarder-v0``).

:class:`VecInfectiousEnv` steps many independent graphs at once as arrays;
:class:`InfectiousEnv` is one graph with the Gymnasium API, the action space of the
published RL wrappers (ELBERT ``ppo_wrapper_env_fair.py``): ``Discrete(35)``, member index
0..33 to vaccinate, 34 = nobody. Observation: every member's health, MultiDiscrete([3] *
34) (0 susceptible, 1 infected, 2 recovered). Reward: the share of members not infected
after the step. Episodes: one burn-in step at reset, then 20 steps (truncation). Dynamics:
:mod:`causalfair.systems.infectious`. Seed through ``reset(seed=...)``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from causalfair._validation import check_int, reset_generator
from causalfair.errors import InputError
from causalfair.systems.infectious import INFECTIOUS_DEFAULTS, InfectiousSimulator

__all__ = ["InfectiousEnv", "VecInfectiousEnv"]

N_MEMBERS = 34
NOBODY = N_MEMBERS
_ONE_HOT = np.eye(N_MEMBERS + 1, N_MEMBERS, dtype=bool)  # action -> members vaccinated
_ONES = np.ones(N_MEMBERS, dtype=np.float32)


class VecInfectiousEnv:
    """``n_envs`` graphs stepped together. ``step(actions)`` takes one integer per graph
    (0..33 vaccinate that member, 34 nobody) and returns (health (n_envs, 34), reward
    (n_envs,), terminated, truncated, info); health is int8."""

    def __init__(self, n_envs: int, *, harder: bool = False, horizon: int | None = None):
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise InputError(f"n_envs: must be an integer >= 1, got {n_envs!r}.")
        d = INFECTIOUS_DEFAULTS
        loss = d["harder_immunity_loss_probability"] if harder else d["immunity_loss_probability"]
        self.sim = InfectiousSimulator(d["infection_probability"], d["recovery_probability"],
                                       loss, d["burn_in"], d["initially_infected"])
        self.n_envs = n_envs
        self.horizon = int(d["horizon"]) if horizon is None else check_int("horizon", horizon, 1)
        self.state = None
        self.rng = np.random.default_rng()

    def reset(self, rng: np.random.Generator | int | None = None, *, seed: int | None = None
              ) -> np.ndarray:
        """Reset every graph; ``rng`` (a Generator or an int seed) or ``seed`` fixes all
        randomness (the same seed, the same numbers), else the generator runs on."""
        self.rng = reset_generator(rng, seed, self.rng)
        self.state = self.sim.reset(self.n_envs, None, self.rng)
        # a copy: an observation written over (a wrapper normalising in place) must not
        # change the epidemic
        return self.state.health.reshape(self.n_envs, N_MEMBERS).copy()

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        if self.state is None:
            raise InputError("step: call reset() first.")
        a = np.asarray(actions)
        if a.shape != (self.n_envs,) or not np.issubdtype(a.dtype, np.integer) \
                or (a < 0).any() or (a > NOBODY).any():
            raise InputError(f"actions: must be {self.n_envs} integers in [0, {NOBODY}] "
                             f"(member to vaccinate, {NOBODY} = nobody), got {actions!r}.")
        vaccinate = _ONE_HOT.take(a, axis=0).reshape(-1)  # row NOBODY is all False
        res = self.sim.step(self.state, vaccinate,
                            self.sim.draw_noise(self.n_envs * N_MEMBERS, self.rng))
        self.state = res.state
        health = self.state.health.reshape(self.n_envs, N_MEMBERS).copy()  # (reset's copy)
        # per-graph counts as one small matrix product each (exact in float32); the
        # simulator's reward is 1 for every member not infected after the step
        healthy = (res.reward.reshape(self.n_envs, N_MEMBERS).astype(np.float32) @ _ONES
                   ).astype(np.int64)
        infected = N_MEMBERS - healthy
        reward = healthy / N_MEMBERS  # the share of members not infected
        newly = res.info["demand"].reshape(self.n_envs, N_MEMBERS).astype(np.float32) @ _ONES
        trunc = np.full(self.n_envs, self.state.t >= self.horizon)
        info = {"newly_infected": newly.astype(np.int64), "infected": infected,
                "step": self.state.t}
        return health, reward, np.zeros(self.n_envs, dtype=bool), trunc, info


class InfectiousEnv(gym.Env):
    """One graph (module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, harder: bool = False, horizon: int | None = None,
                 render_mode: str | None = None):
        self.vec = VecInfectiousEnv(1, harder=harder, horizon=horizon)
        self.render_mode = render_mode
        self.observation_space = gym.spaces.MultiDiscrete([3] * N_MEMBERS, dtype=np.int8)
        self.action_space = gym.spaces.Discrete(N_MEMBERS + 1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return self.vec.reset(rng=self.np_random)[0], {"step": 0}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise InputError(f"action: must be an integer in [0, {NOBODY}] (member to "
                             f"vaccinate, {NOBODY} = nobody), got {action!r}.")
        obs, r, term, trunc, info = self.vec.step(np.array([int(action)]))
        return obs[0], float(r[0]), bool(term[0]), bool(trunc[0]), {
            "newly_infected": int(info["newly_infected"][0]),
            "infected": int(info["infected"][0]), "step": int(info["step"])}

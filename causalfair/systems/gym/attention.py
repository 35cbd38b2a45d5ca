"""Gymnasium environments of the attention-allocation systems (ids
``causalfair/Attention-v0`` and ``causalfair/AttentionHarder-v0``).

:class:`VecAttentionEnv` steps many independent sets of sites at once as arrays;
:class:`AttentionEnv` is one, with the action space of the published RL wrappers (pocar /
ELBERT ``ppo_wrapper_env.py``): ``Box(-3, 3, (5,))`` logits, turned into an allocation of
the N units by a softmax and the greedy placement of
:func:`causalfair.systems.attention.allocate`. Observation: the incidents each site's
attention discovered at the last step and the units it got, ``Box(0, inf, (10,))``, or with
``history=True`` the last 8 steps (the published ``OBS_HIST_LEN``) of (seen, occurred,
allocation, delta) of every site, ``Box(0, inf, (160,))``, site by site and with delta over
those 8 steps (two departures from the published wrappers: docs/simulators.md).
``increase="f-ppo"``: seed 001's per-site increases.
Reward: the system's (attention-1: incidents discovered minus 0.25 x those missed; harder:
minus 0.25 x those missed), summed over sites. Episodes last ``max_steps`` steps (default 1000, pocar's).
Dynamics and parameters: :mod:`causalfair.systems.attention`. Seed through
``reset(seed=...)``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from causalfair._validation import check_int, reset_generator
from causalfair.errors import InputError
from causalfair.systems.attention import HISTORY, AttentionSimulator, make_attention

__all__ = ["AttentionEnv", "VecAttentionEnv"]


class VecAttentionEnv:
    """``n_envs`` sets of sites stepped together; ``step(weights)`` takes non-negative
    allocation weights (n_envs, K) and returns (obs (n_envs, 2K), reward (n_envs,),
    terminated, truncated, info)."""

    def __init__(self, n_envs: int, *, harder: bool = False, max_steps: int = 1000,
                 history: bool = False, increase: Any = None):
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise InputError(f"n_envs: must be an integer >= 1, got {n_envs!r}.")
        if not isinstance(history, bool):
            raise InputError(f"history: must be true or false, got {history!r}.")
        # the system's checks and parameters (increase="f-ppo" or numbers)
        sysm = make_attention(increase=increase, id="attention-harder" if harder else "attention-1")
        p = sysm.params
        self.history = history
        self.sim = AttentionSimulator(p["units"], p["rates"], p["increase"], p["decrease"],
                                      p["reward_seen"], p["reward_missed"], central=history)
        self.K = self.sim.K
        self.n_envs, self.max_steps = n_envs, check_int("max_steps", max_steps, 1)
        self.state = None
        self.rng = np.random.default_rng()

    def _obs(self) -> np.ndarray:
        s = self.state
        if self.history:
            return s.history.reshape(self.n_envs, -1).astype(np.float32)
        return np.concatenate([s.seen.reshape(-1, self.K), s.attention.reshape(-1, self.K)],
                              axis=1).astype(np.float32)

    def reset(self, rng: np.random.Generator | int | None = None, *, seed: int | None = None
              ) -> np.ndarray:
        """Reset every set of sites; ``rng`` (a Generator or an int seed) or ``seed`` fixes
        all randomness (the same seed, the same numbers), else the generator runs on."""
        self.rng = reset_generator(rng, seed, self.rng)
        self.state = self.sim.reset(self.n_envs, None, self.rng)
        return self._obs()

    def step(self, weights: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        if self.state is None:
            raise InputError("step: call reset() first.")
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.n_envs, self.K) or not np.isfinite(w).all() or (w < 0).any() \
                or (w.sum(1) <= 0).any():
            raise InputError(f"weights: must be ({self.n_envs}, {self.K}) non-negative numbers "
                             "with a positive sum per environment (the budget must be spent).")
        res = self.sim.step(self.state, w.reshape(-1), self.sim.draw_noise(self.n_envs * self.K,
                                                                           self.rng))
        self.state = res.state
        reward = res.reward.reshape(-1, self.K).sum(1)
        trunc = np.full(self.n_envs, self.state.t >= self.max_steps)
        info = {"rates": self.state.rate.reshape(-1, self.K),
                "incidents": res.info["incidents"].reshape(-1, self.K), "step": self.state.t}
        return self._obs(), reward, np.zeros(self.n_envs, dtype=bool), trunc, info


class AttentionEnv(gym.Env):
    """One set of sites (module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, harder: bool = False, max_steps: int = 1000,
                 render_mode: str | None = None, history: bool = False, increase: Any = None):
        self.vec = VecAttentionEnv(1, harder=harder, max_steps=max_steps, history=history,
                                   increase=increase)
        K = self.vec.K
        self.render_mode = render_mode
        width = 4 * HISTORY * K if history else 2 * K
        self.observation_space = gym.spaces.Box(0.0, np.inf, (width,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-3.0, 3.0, (K,), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return self.vec.reset(rng=self.np_random)[0], {"step": 0}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (self.vec.K,) or not np.isfinite(a).all():
            raise InputError(f"action: must be {self.vec.K} finite logits, got {action!r}.")
        z = np.exp(np.clip(a, -3.0, 3.0))
        obs, r, term, trunc, info = self.vec.step((z / z.sum())[None, :])
        return obs[0], float(r[0]), bool(term[0]), bool(trunc[0]), {
            "rates": info["rates"][0], "incidents": info["incidents"][0], "step": info["step"]}

"""A Gymnasium environment over any :class:`~causalfair.systems.System` (ids
``causalfair/System-v0`` with ``system=ID``, ``causalfair/LendingHarder-v0`` and
``causalfair/Replicator-v0``).

One episode is one replica of the system's simulator for ``horizon`` steps (the system's
default): one individual of a group drawn with the system's group weights, or one world of
``units_per_replica`` coupled units.

- Observation: the units' features (``Box``, float32, units x features flattened), or the
  one-hot (level, group) of each unit when the system observes levels only.
- Action: one action per unit among those the deployed policy may take
  (``DecisionSet.allowed``, in that order): ``Discrete(n)`` for one unit,
  ``MultiDiscrete([n] * U)`` for U coupled units.
- Reward: the units' summed reward; ``info``: their ``gain``, ``group`` and the step.

Systems with a budget per replica have their own environment (``causalfair/Infectious-v0``).
Seed through ``reset(seed=...)``: the simulator draws from the environment's generator.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from causalfair._validation import check_int
from causalfair.errors import InputError
from causalfair.systems import System, make

__all__ = ["SystemEnv"]


class SystemEnv(gym.Env):
    """One replica of a system (module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, system: Any = "lending-1", params: dict[str, Any] | None = None,
                 horizon: int | None = None, render_mode: str | None = None):
        self.system = system if isinstance(system, System) else make(str(system), **(params or {}))
        s = self.system
        if s.decisions.budget is not None:
            raise InputError(f"system {s.id!r}: a budget per replica needs its own environment "
                             "(e.g. causalfair/Infectious-v0).")
        self.sim = s.make_simulator()
        self.U = s.units_per_replica
        self.horizon = int(s.horizon) if horizon is None else check_int("horizon", horizon, 1)
        self.allowed = np.asarray(s.decisions.allowed if s.decisions.allowed is not None
                                  else range(s.n_actions), dtype=np.intp)
        self.binary = s.n_actions == 2 and s.decisions.baseline == 0
        self.render_mode = render_mode
        # features by name; else levels; else the columns its observations carry
        width = (len(s.features) if s.features is not None
                 else None if s.n_levels is not None else self._probe_width())
        self._features = width is not None
        if width is not None:
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.U * width,),
                                                    dtype=np.float32)
        elif s.n_levels is not None:
            width = s.n_levels + s.n_groups
            self.observation_space = gym.spaces.Box(0.0, 1.0, (self.U * width,), dtype=np.float32)
        else:
            raise InputError(f"system {s.id!r}: observations carry neither features nor levels.")
        n = len(self.allowed)
        self.action_space = (gym.spaces.Discrete(n) if self.U == 1
                             else gym.spaces.MultiDiscrete([n] * self.U))
        self.state = None
        self.t = 0

    def _probe_width(self) -> int | None:
        """The feature columns of a system that names none (``attention-central``'s 165):
        read from one replica's observation (a throwaway generator; the simulator's
        ``reset`` is a pure function of it), None when its observations carry no features
        (levels only)."""
        state = self.sim.reset(1, None if self.U > 1 else 0, np.random.default_rng(0))
        features = self.sim.observe(state).features
        return None if features is None else int(np.shape(features)[-1])

    def _obs(self) -> np.ndarray:
        s = self.system
        o = self.sim.observe(self.state)
        if self._features:
            x = np.asarray(o.features, dtype=np.float32)
        else:
            x = np.zeros((len(o.group), s.n_levels + s.n_groups), dtype=np.float32)
            x[np.arange(len(o.group)), np.asarray(o.level)] = 1.0
            x[np.arange(len(o.group)), s.n_levels + np.asarray(o.group)] = 1.0
        self._group = np.asarray(o.group)
        return x.reshape(-1)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        group = None
        if self.U == 1:
            w = self.system.group_weights
            group = int(self.np_random.choice(len(w), p=w))
        self.state = self.sim.reset(1, group, self.np_random)
        self.t = 0
        obs = self._obs()
        return obs, {"group": self._group.copy(), "step": 0}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.state is None:
            raise InputError("step: call reset() first.")
        if not self.action_space.contains(action):
            raise InputError(f"action: must be an element of {self.action_space}, got {action!r}.")
        d = self.allowed[np.atleast_1d(np.asarray(action, dtype=np.intp))]
        res = self.sim.step(self.state, d.astype(bool) if self.binary else d,
                            self.sim.draw_noise(self.U, self.np_random))
        self.state = res.state
        self.t += 1
        info = {"gain": np.asarray(res.gain, dtype=np.float64), "group": self._group.copy(),
                "step": self.t}
        return (self._obs(), float(np.sum(res.reward)), False, self.t >= self.horizon, info)

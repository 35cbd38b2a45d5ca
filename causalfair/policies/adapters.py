"""Adapters for policies trained elsewhere: stable-baselines3 models and plain callables.

Every adapter turns its input into a :class:`~causalfair.policies.core.Policy` (an object with
``prob_d1(obs) -> array (n,)``) that both engines accept: the exact engine through
:func:`~causalfair.policies.core.policy_table`, the Monte Carlo engine directly.

stable-baselines3 is imported lazily (only when an SB3 model is adapted), and only
models on a discrete action space with two actions (0 = d0, 1 = d1) are accepted:
PPO, A2C (probabilities from the policy's action distribution) and DQN (the greedy
action of the Q-network, as ``predict(deterministic=True)`` would take it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from causalfair.policies.core import (
    CallablePolicy,
    FeatureEncoding,
    Observation,
    Policy,
    PolicyError,
    TablePolicy,
    _check_probs,
)

__all__ = ["SB3Policy", "callable_policy", "as_policy", "is_sb3_model"]


def is_sb3_model(obj: Any) -> bool:
    """Whether ``obj`` looks like a stable-baselines3 algorithm (PPO, A2C, DQN, ...)."""
    mod = type(obj).__module__ or ""
    return mod.startswith("stable_baselines3") or (
        hasattr(obj, "policy") and hasattr(obj, "predict") and hasattr(obj, "action_space")
        and hasattr(obj, "observation_space")
    )


class SB3Policy:
    """P(d1 | observation) of a stable-baselines3 model with ``Discrete(2)`` actions.

    ``model``: a trained PPO / A2C / DQN (any ``BaseAlgorithm`` whose policy has an
    action distribution or a ``q_net``). Observations are turned into the network input
    by ``obs_fn(obs) -> float array (n, width)`` if given, else by ``encoding`` (default:
    one-hot level then one-hot group, the :class:`~causalfair.systems.gym.lending.LendingEnv`
    observation, with ``n_groups`` groups and ``n_levels`` levels; when ``n_levels`` is
    not given, the rest of the width is taken as levels, so pass it whenever the
    observation may carry extras). The Monte Carlo engine refuses an encoding whose
    number of levels differs from the simulator's.
    ``deterministic=True`` gives the greedy decision (0 or 1) instead of the
    probability; DQN models are always greedy.
    """

    def __init__(self, model: Any, *, encoding: FeatureEncoding | None = None,
                 obs_fn: Callable[[Observation], np.ndarray] | None = None,
                 deterministic: bool = False, n_groups: int = 2, n_levels: int | None = None,
                 name: str | None = None, batch_size: int = 65_536):
        import gymnasium as gym

        self.model = model
        self.name = name or f"sb3:{type(model).__name__}"
        act = getattr(model, "action_space", None)
        if not isinstance(act, gym.spaces.Discrete) or int(act.n) != 2:
            raise PolicyError(
                f"policy {self.name!r}: the SB3 model's action space is {act!r}; causalfair "
                "audits binary decisions: Discrete(2) with 0 = d0 (deny), 1 = d1 (approve).")
        space = getattr(model, "observation_space", None)
        shape = getattr(space, "shape", None)
        if not shape or len(shape) != 1:
            raise PolicyError(
                f"policy {self.name!r}: the SB3 model's observation space {space!r} is not a "
                "flat Box; pass obs_fn to build its input.")
        self.width = int(shape[0])
        if obs_fn is None and encoding is None:
            levels = self.width - n_groups if n_levels is None else int(n_levels)
            if levels < 1 or levels + n_groups != self.width:
                raise PolicyError(
                    f"policy {self.name!r}: the SB3 model's observation width is {self.width}, "
                    f"but one-hot level ({levels}) + one-hot group ({n_groups}) gives "
                    f"{levels + n_groups}; for observations with extras (e.g. LendingEnv(extras="
                    "True)) pass obs_fn to build the model's input.")
            encoding = FeatureEncoding("onehot", n_levels=levels, n_groups=n_groups)
        self.encoding = encoding
        self.obs_fn = obs_fn
        self.deterministic = bool(deterministic)
        self.batch_size = int(batch_size)
        self._dqn = hasattr(model.policy, "q_net")

    def _inputs(self, obs: Observation) -> np.ndarray:
        x = self.obs_fn(obs) if self.obs_fn is not None else self.encoding.encode(obs)
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape != (len(obs), self.width):
            raise PolicyError(
                f"policy {self.name!r}: input has shape {x.shape}; the SB3 model expects "
                f"({len(obs)}, {self.width}). Check the encoding (levels/groups) or obs_fn.")
        return x

    def prob_d1(self, obs: Observation) -> np.ndarray:
        import torch

        x = self._inputs(obs)
        pol = self.model.policy
        out = np.empty(x.shape[0])
        with torch.no_grad():
            for start in range(0, x.shape[0], self.batch_size):
                t = torch.as_tensor(x[start:start + self.batch_size], device=pol.device)
                if self._dqn:
                    q = pol.q_net(t)
                    p = (q[:, 1] > q[:, 0]).double()  # argmax; ties -> action 0, as SB3
                else:
                    probs = pol.get_distribution(t).distribution.probs
                    p = ((probs[:, 1] > probs[:, 0]).double() if self.deterministic
                         else probs[:, 1].double())
                out[start:start + t.shape[0]] = p.cpu().numpy()
        return _check_probs(out, len(obs), f"policy {self.name!r}")

    def __repr__(self) -> str:
        return f"SB3Policy({type(self.model).__name__}, deterministic={self.deterministic})"


_INPUTS = ("obs", "level_group", "features")
_OUTPUTS = ("prob", "action")


def callable_policy(fn: Callable[..., Any], *, inputs: str = "obs", output: str = "prob",
                    name: str | None = None, time_dependent: bool = False) -> Policy:
    """Wrap a plain function as a policy.

    ``inputs``: what ``fn`` is called with: ``"obs"`` (the Observation), ``"level_group"``
    (two int arrays) or ``"features"`` (the feature matrix). ``output``: ``"prob"``
    (P(d1) per row) or ``"action"`` (0/1 decisions, i.e. a deterministic policy).
    ``time_dependent=True`` tells the exact engine to evaluate it for every t.
    """
    if inputs not in _INPUTS:
        raise PolicyError(f"inputs: unknown {inputs!r}; allowed values: {', '.join(_INPUTS)}.")
    if output not in _OUTPUTS:
        raise PolicyError(f"output: unknown {output!r}; allowed values: {', '.join(_OUTPUTS)}.")
    if not callable(fn):
        raise PolicyError(f"policy: {fn!r} is not callable.")
    label = name or getattr(fn, "__name__", "callable")

    def wrapped(obs: Observation) -> np.ndarray:
        if inputs == "obs":
            out = fn(obs)
        elif inputs == "level_group":
            if obs.level is None:
                raise PolicyError(f"policy {label!r} reads levels, but the observation has none.")
            out = fn(obs.level, obs.group)
        else:
            if obs.features is None:
                raise PolicyError(f"policy {label!r} reads features, but the observation has none.")
            out = fn(obs.features)
        arr = np.asarray(out, dtype=np.float64).reshape(-1)
        if output == "action" and arr.size and not np.isin(arr, (0.0, 1.0)).all():
            bad = arr[~np.isin(arr, (0.0, 1.0))][0]
            raise PolicyError(
                f"policy {label!r}: output='action' needs decisions 0 or 1, got {bad!r}; use "
                "output='prob' for probabilities.")
        return arr

    pol = CallablePolicy(wrapped, name=label)
    if time_dependent:
        return _TimeDependent(pol)
    return pol


class _TimeDependent:
    """A callable policy declared time-dependent (the exact engine evaluates every t)."""

    time_dependent = True

    def __init__(self, inner: CallablePolicy):
        self.inner = inner
        self.name = inner.name

    def prob_d1(self, obs: Observation) -> np.ndarray:
        return self.inner.prob_d1(obs)


def as_policy(obj: Any) -> Policy:
    """A policy from: a Policy (returned as is), a stable-baselines3 model
    (:class:`SB3Policy`), a probability table (G, K) or (T, G, K), or a plain callable
    ``f(obs) -> probabilities``."""
    if hasattr(obj, "prob_d1"):
        return obj
    if isinstance(obj, np.ndarray):
        return TablePolicy(obj)
    if is_sb3_model(obj):
        return SB3Policy(obj)
    if callable(obj):
        return callable_policy(obj)
    raise PolicyError(
        f"policy: cannot use {type(obj).__name__} as a policy; pass an object with "
        "prob_d1(obs), a stable-baselines3 model, a table (G, K) or a function f(obs).")

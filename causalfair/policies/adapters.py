"""Adapters for policies trained elsewhere: stable-baselines3 models and plain callables.

Every adapter turns its input into a :class:`~causalfair.policies.core.Policy` (an object with
``prob_d1(obs) -> array (n,)``) that both engines accept: the exact engine through
:func:`~causalfair.policies.core.policy_table`, the Monte Carlo engine directly.

stable-baselines3 is imported lazily (only when an SB3 model is adapted), and models
on a ``Discrete(n)`` action space (n >= 2 actions 0..n-1) are accepted: PPO, A2C
(probabilities from the policy's action distribution) and DQN (the greedy action of the
Q-network, as ``predict(deterministic=True)`` would take it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from causalfair.policies.core import (
    CallablePolicy,
    Observation,
    Policy,
    PolicyError,
    TablePolicy,
)
from causalfair.policies.sb3 import SB3Policy, is_sb3_model  # re-exported

__all__ = ["SB3Policy", "callable_policy", "as_policy", "is_sb3_model"]


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

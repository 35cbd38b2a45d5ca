"""Adapters for policies trained elsewhere: stable-baselines3 models (:class:`SB3Policy`)
and plain callables (:func:`callable_policy`), and :func:`as_policy`, which turns anything
:func:`causalfair.policies.resolver.resolve` accepts into a
:class:`~causalfair.policies.core.Policy` (an object with ``prob_d1(obs)`` or
``action_probs(obs)``) that every engine accepts.

stable-baselines3 is imported lazily (only when an SB3 model is adapted), and models
on a ``Discrete(n)`` action space (n >= 2 actions 0..n-1) are accepted: PPO, A2C
(probabilities from the policy's action distribution) and DQN (the greedy action of the
Q-network, as ``predict(deterministic=True)`` would take it).
"""

from __future__ import annotations

from causalfair.policies.resolver import as_policy, callable_policy, resolve  # re-exported
from causalfair.policies.sb3 import SB3Policy, is_sb3_model  # re-exported

__all__ = ["SB3Policy", "callable_policy", "as_policy", "resolve", "is_sb3_model"]

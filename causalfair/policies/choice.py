"""Policies that choose at most one unit per replica (``DecisionSet(budget=1)`` on coupled
units, e.g. one vaccine per step on a contact graph).

A per-unit network scores every unit (one logit s_v from the unit's own observation); a
learned "nobody" logit b competes with them, and the replica's choice is one categorical
draw: P(unit v) = exp(s_v) / (exp(b) + sum_w exp(s_w)), P(nobody) = exp(b) / (...). As
causalfair policies they report each unit's probability of being the one chosen (a
replica's probabilities sum to at most 1), which is what the Monte Carlo engine draws
from. A checkpoint is the per-unit network (an ordinary MLP checkpoint with one output)
plus ``metadata["choice"] = {"units": U, "nobody_logit": b}``; :func:`load_checkpoint`
returns a :class:`ReplicaChoicePolicy` for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.errors import PolicyError
from causalfair.types import Observation

__all__ = ["ReplicaChoicePolicy", "choice_probabilities"]


def choice_probabilities(scores: np.ndarray, nobody: float, units: int) -> np.ndarray:
    """Per-unit probabilities of being chosen, (N,), from per-unit logits (N,) of
    replicas of ``units`` units (replica-major) and the "nobody" logit."""
    s = np.asarray(scores, dtype=np.float64)
    if s.shape[0] % units:
        raise PolicyError(f"choice policy: {s.shape[0]} observations are not whole replicas of "
                          f"{units} units.")
    z = np.concatenate([np.full((s.shape[0] // units, 1), float(nobody)),
                        s.reshape(-1, units)], axis=1)
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return (e[:, 1:] / e.sum(axis=1, keepdims=True)).reshape(-1)


class ReplicaChoicePolicy:
    """At most one unit per replica (module docstring); ``base`` is the per-unit scoring
    policy (a causalfair MLP policy with one output logit)."""

    def __init__(self, base: Any, units: int, nobody: float, name: str | None = None):
        if getattr(base, "n_actions", 2) != 2:
            raise PolicyError("choice policy: the per-unit network must have one output logit.")
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise PolicyError(f"choice policy: units must be an integer >= 1, got {units!r}.")
        self.base, self.units, self.nobody = base, units, float(nobody)
        self.encoding = base.encoding
        self.name = name or getattr(base, "name", "choice")
        self.source = getattr(base, "source", None)

    def action_probs(self, obs: Observation) -> np.ndarray:
        x = self.base.encoding.encode(obs)
        p = choice_probabilities(self.base._outputs(x)[:, 0], self.nobody, self.units)
        return np.stack([1.0 - p, p], axis=1)

    def prob_d1(self, obs: Observation) -> np.ndarray:
        return self.action_probs(obs)[:, 1]

    @property
    def n_actions(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"ReplicaChoicePolicy(name={self.name!r}, units={self.units})"

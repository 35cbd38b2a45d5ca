"""A policy held to the actions its system allows (``DecisionSet.allowed``): the check
every engine's policy goes through (:func:`causalfair.policies.grid.allowed_only`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from causalfair.errors import PolicyError
from causalfair.types import Observation

__all__ = ["AllowedOnly", "ALLOWED_TOL", "refuse_forbidden", "refuse_forbidden_table"]

#: The largest probability a policy may put on an action outside ``DecisionSet.allowed``.
ALLOWED_TOL = 1e-9


def refuse_forbidden(probs: np.ndarray, allowed: tuple[int, ...] | None,
                     labels: tuple[str, ...], name: str,
                     at: Callable[[int], str] | None = None) -> None:
    """Refuse (:class:`PolicyError`, one line) action distributions ``probs`` (..., A)
    that put more than :data:`ALLOWED_TOL` on an action outside ``allowed`` (None: all
    are allowed), naming the action, its probability, where (``at(row)`` of the flat
    row, when given) and the fix."""
    if allowed is None:
        return
    forbidden = np.array([a for a in range(len(labels)) if a not in allowed], dtype=np.intp)
    if not forbidden.size:
        return
    bad = np.asarray(probs).reshape(-1, len(labels))[:, forbidden]
    if not bad.size or not bad.max() > ALLOWED_TOL:
        return
    row, col = np.unravel_index(int(np.argmax(bad)), bad.shape)
    a = int(forbidden[col])
    ok = ", ".join(f"{i} ({labels[i]!r})" for i in allowed)
    raise PolicyError(
        f"{name}: gives action {a} ({labels[a]!r}) probability {float(bad[row, col]):.6g}"
        f"{f' ({at(int(row))})' if at is not None else ''}, and the system allows only "
        f"actions {ok} (DecisionSet.allowed); give the other actions probability 0 (mask "
        "their logits) or allow them.")


def refuse_forbidden_table(table: np.ndarray, model: Any, name: str) -> None:
    """:func:`refuse_forbidden` of a policy table on the tabular model ``model`` (its
    ``allowed``, a System's ``DecisionSet.allowed``): (G, K) or (T, G, K) of P(d1) for
    two actions, (G, K, A) or (T, G, K, A) else; rows named by step, group and level."""
    if model.allowed is None:
        return
    A, G, K = model.n_actions, model.n_groups, model.n_levels
    probs = np.stack([1.0 - table, table], axis=-1) if A == 2 else np.asarray(table)
    labels = tuple(model.action_labels or (f"d{i}" for i in range(A)))
    refuse_forbidden(probs, model.allowed, labels, name, lambda row: (
        f"group {(row // K) % G}, level {row % K}"
        + (f", step {row // (G * K)}" if probs.ndim == 4 else "")))


class AllowedOnly:
    """A policy evaluated on a system whose ``DecisionSet.allowed`` excludes some actions
    (the deployed policy may not take them; the baseline pi0 may): its action
    distributions as they are, refused (:class:`PolicyError`, one line naming the action,
    its probability and the fix, :func:`refuse_forbidden`) when a row puts more than
    :data:`ALLOWED_TOL` on a forbidden action. Every other attribute is the policy's
    own. ``evaluate``: the validated action distributions of a policy
    (:func:`causalfair.policies.core.action_probs`)."""

    def __init__(self, policy: Any, allowed: tuple[int, ...], labels: tuple[str, ...],
                 evaluate: Callable[..., np.ndarray]):
        self.policy, self.allowed, self.labels = policy, tuple(allowed), tuple(labels)
        self._evaluate = evaluate  # causalfair.policies.core.action_probs

    def __getattr__(self, name: str) -> Any:
        if name in ("policy", "_evaluate"):  # not set yet (copy, unpickling)
            raise AttributeError(name)
        return getattr(self.policy, name)

    def action_probs(self, obs: Observation) -> np.ndarray:
        name = f"policy {getattr(self.policy, 'name', type(self.policy).__name__)!r}"
        probs = self._evaluate(self.policy, obs, len(self.labels), name)
        refuse_forbidden(probs, self.allowed, self.labels, name, lambda row: (
            f"group {int(np.asarray(obs.group)[row])}, step {obs.t}"))
        return probs

    def prob_d1(self, obs: Observation) -> np.ndarray:
        return self.action_probs(obs)[:, 1]

    def __repr__(self) -> str:
        return f"AllowedOnly({self.policy!r}, allowed={self.allowed})"

"""The registry of training algorithms: each name, which trainer runs it and on which
systems (docs/training.md).

Every list of algorithm names reads this registry: :data:`causalfair.train.ALGORITHMS`
(TrainConfig's objectives), the generic trainer's, ``causalfair train --algo`` and an
audit spec's ``[retrain] algo``.

Trainers:

- ``ppo``: KL-penalty PPO with a fairness objective over a :class:`TrainConfig`
  (method.md section 5; :mod:`causalfair.train.objectives`), on the lending settings
  (:mod:`causalfair.train.core`, ``lending``) and/or any system
  (:mod:`causalfair.train.generic`, ``generic``);
- ``repair``: the constrained exact-gradient repair on a tabular model
  (:func:`causalfair.train.exact.repair_checkpoint`);
- ``population``: the population-level agents of the replicator systems
  (:mod:`causalfair.train.population`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Algorithm", "REGISTRY", "names", "get"]


@dataclass(frozen=True)
class Algorithm:
    """One training algorithm."""

    name: str
    trainer: str
    """``ppo``, ``repair`` or ``population`` (see the module docstring)."""
    systems: str
    """The systems it trains on, in words (``--help`` and error messages)."""
    lending: bool = False
    """The lending trainer implements it."""
    generic: bool = False
    """The generic trainer (any system) implements it."""
    fair_advantage: bool = False
    """It changes the advantage with per-replica supply and demand signals."""
    cli: bool = True
    """``causalfair train --algo`` offers it."""
    retrain: bool = True
    """An audit spec's ``[retrain] algo`` offers it."""
    runs_as: str = ""
    """An alias: the TrainConfig algo it runs as (``ppo-lag`` runs as ``ppo-c`` with the
    spec's thresholds as constraints)."""


_ANY = "any system"
_SIGNALS = ("systems reporting supply and demand (attention, infectious) and the lending "
            "settings (lending-1, -2, -3)")

#: name -> Algorithm, in the order names are listed.
REGISTRY: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ppo", "ppo", _ANY, lending=True, generic=True),
    Algorithm("ppo-c", "ppo", _ANY, lending=True, generic=True),
    Algorithm("ppo-cb", "ppo", _ANY, lending=True, generic=True),
    Algorithm("a-ppo", "ppo", _SIGNALS, lending=True, generic=True, fair_advantage=True),
    Algorithm("f-ppo-l", "ppo", "systems of coupled units reporting supply, demand and a "
              "long-term gap (attention, infectious) and the lending settings (lending-1, -2, "
              "-3)", lending=True, generic=True, fair_advantage=True),
    Algorithm("f-ppo", "ppo", "the lending settings (lending-1, -2, -3)", lending=True,
              retrain=False),
    Algorithm("elbert-po", "ppo", _SIGNALS, lending=True, generic=True, fair_advantage=True),
    Algorithm("exact", "repair", "systems with a tabular model"),
    Algorithm("r-td3", "population", "replicator dynamics (replicator-1, replicator-binding)",
              retrain=False),
    Algorithm("l-ucbfair", "population", "replicator dynamics (replicator-1, replicator-binding)",
              retrain=False),
    Algorithm("ppo-lag", "ppo", "any system other than the lending settings", cli=False,
              runs_as="ppo-c"),
)}


def names(**flags: object) -> tuple[str, ...]:
    """The names whose fields equal ``flags`` (e.g. ``names(generic=True)``), in
    registry order."""
    return tuple(a.name for a in REGISTRY.values()
                 if all(getattr(a, k) == v for k, v in flags.items()))


def get(name: str) -> Algorithm:
    """The registry entry of ``name`` (KeyError if none)."""
    return REGISTRY[name]

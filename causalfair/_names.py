"""Plain names that ``causalfair COMMAND --help`` shows and argparse's ``choices`` check,
defined once here with the standard library only, so that building a command's parser
imports neither numpy nor the engines, the systems or the trainers (tests/test_fast_help2.py).
Their owners import them from here: :data:`SETTINGS` is
``causalfair.systems.lending.settings.SETTINGS`` (``cf.SETTINGS``), :data:`BENEFIT_N`
``causalfair.engines.montecarlo.BENEFIT_N``, the algorithm registry
``causalfair.train.algorithms`` (its documented home), :data:`PPO_ALGORITHMS`
``causalfair.train.ALGORITHMS`` and :data:`POPULATION` / :data:`SWEEP_ALGORITHMS`
``causalfair.train.sweep``'s. :data:`EXPORT_KINDS` are the keys of
``causalfair.report.export.EXPORTS`` (a test keeps the two the same).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SETTINGS", "BENEFIT_N", "EXPORT_KINDS", "REPLICATOR_SYSTEMS", "Algorithm",
           "REGISTRY", "names", "get", "PPO_ALGORITHMS", "POPULATION", "SWEEP_ALGORITHMS"]

#: The lending settings' ids (the lending model's three settings, lending.md section A).
SETTINGS = ("lending-1", "lending-2", "lending-3")

#: Lambda's forks beside a decomposition: at most this many units per group (or worlds).
BENEFIT_N = 20_000

#: What ``causalfair export KIND`` writes (the keys of causalfair.report.export.EXPORTS).
EXPORT_KINDS = ("annex-iv", "ll144")

#: The built-in replicator systems, where r-td3 and l-ucbfair train: the ids of
#: ``causalfair.systems.builtin.BUILTINS`` whose factory is in
#: ``causalfair.systems.replicator`` (a test keeps the two the same).
REPLICATOR_SYSTEMS = ("replicator-1", "replicator-binding")


@dataclass(frozen=True)
class Algorithm:
    """One training algorithm (the registry: :mod:`causalfair.train.algorithms`)."""

    name: str
    trainer: str
    """``ppo``, ``repair`` or ``population`` (see :mod:`causalfair.train.algorithms`)."""
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
    weights: tuple[str, ...] = ()
    """The fairness weights of TrainConfig its objective uses (``beta_c``: C^2,
    ``beta_lambda``: Lambda); ``causalfair train`` refuses the others' flags."""


_ANY = "any system"
_REPLICATORS = f"replicator dynamics ({', '.join(REPLICATOR_SYSTEMS)})"
_SIGNALS = ("systems reporting supply and demand (attention, infectious) and the lending "
            "settings (lending-1, -2, -3)")

#: name -> Algorithm, in the order names are listed.
REGISTRY: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ppo", "ppo", _ANY, lending=True, generic=True),
    Algorithm("ppo-c", "ppo", _ANY, lending=True, generic=True, weights=("beta_c",)),
    Algorithm("ppo-cb", "ppo", _ANY, lending=True, generic=True,
              weights=("beta_c", "beta_lambda")),
    Algorithm("a-ppo", "ppo", _SIGNALS, lending=True, generic=True, fair_advantage=True),
    Algorithm("f-ppo-l", "ppo", "systems of coupled units reporting supply, demand and a "
              "long-term gap (attention, infectious) and the lending settings (lending-1, -2, "
              "-3)", lending=True, generic=True, fair_advantage=True),
    Algorithm("f-ppo", "ppo", "the lending settings (lending-1, -2, -3)", lending=True,
              retrain=False),
    Algorithm("elbert-po", "ppo", _SIGNALS, lending=True, generic=True, fair_advantage=True),
    Algorithm("exact", "repair", "systems with a tabular model"),
    Algorithm("r-td3", "population", _REPLICATORS, retrain=False),
    Algorithm("l-ucbfair", "population", _REPLICATORS, retrain=False),
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


#: The objectives the PPO trainers implement (``causalfair.train.ALGORITHMS``, TrainConfig's).
PPO_ALGORITHMS = names(trainer="ppo", runs_as="")
#: The population agents' names (their own configs: :mod:`causalfair.train.population`).
POPULATION = names(trainer="population")
#: Every algorithm a sweep trains: the PPO family (TrainConfig) and the population agents.
SWEEP_ALGORITHMS = PPO_ALGORITHMS + POPULATION

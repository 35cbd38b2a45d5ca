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

# defined in causalfair._names, with the standard library only: `causalfair train --help`
# and `sweep --help` list the names without importing causalfair.train
from causalfair._names import REGISTRY, Algorithm, get, names

__all__ = ["Algorithm", "REGISTRY", "names", "get"]

"""The input encoding of a policy network trained on a system (method.md section 5): the
one-hot (level, group) when the system observes levels and no features, else the feature
matrix, normalised with the mean and standard deviation of the initial states (recorded in
the checkpoint with the feature names); a warm start keeps its checkpoint's own encoding
once its inputs are checked against the system (:func:`warm_encoding`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from causalfair.errors import CheckpointError, ConfigError
from causalfair.policies.checkpoint import FeatureEncoding, check_policy_inputs

__all__ = ["system_encoding", "warm_encoding"]


def system_encoding(system: Any, sim: Any, rng: np.random.Generator) -> FeatureEncoding:
    """The input encoding of a fresh policy network on ``system``: the one-hot (level,
    group) when it observes levels and no features, else its features normalised with the
    mean and standard deviation of initial states drawn from ``sim`` with ``rng``."""
    if system.features is None and system.n_levels is not None:
        return FeatureEncoding("onehot", system.n_levels, system.n_groups)
    if system.units_per_replica > 1:  # coupled units: replicas hold every group's units
        obs = [sim.observe(sim.reset(max(2, 256 // system.units_per_replica), None, rng))]
    else:
        obs = [sim.observe(sim.reset(256, g, rng)) for g in range(system.n_groups)]
    if any(o.features is None for o in obs):
        raise ConfigError(f"system {system.id!r}: observations carry neither levels nor features; "
                          "a policy network needs one of them.")
    x = np.concatenate([np.asarray(o.features, dtype=np.float64) for o in obs])
    std = x.std(axis=0)
    names = system.features or tuple(f"f{j}" for j in range(x.shape[1]))
    return FeatureEncoding("features", names=names, mean=tuple(x.mean(axis=0)),
                           std=tuple(np.where(std > 1e-8, std, 1.0)))


def _describe(enc: FeatureEncoding) -> str:
    if enc.name == "onehot":
        return f"one-hot levels ({enc.n_levels} levels x {enc.n_groups} groups)"
    return f"features [{', '.join(enc.names)}]" if enc.names else f"{enc.width} features"


def warm_encoding(system: Any, fresh: FeatureEncoding, init: Any) -> FeatureEncoding:
    """The input encoding a run on ``system`` trains with, given the warm-start policy
    ``init`` (None: ``fresh``, the system's own, :func:`system_encoding`). The checkpoint's
    inputs must fit the system (:func:`~causalfair.policies.checkpoint.check_policy_inputs`:
    feature names in the same order, else widths; one-hot levels x groups) and be of the
    same kind as ``fresh``; a feature checkpoint then keeps its own encoding (names and
    normalisation), so the network reads its inputs as it was trained to. Every warm start
    (:func:`causalfair.train.train`, :class:`~causalfair.train.generic.SystemTrainer`
    called directly) goes through
    here, so a network reading other columns of the same width is refused, not trained."""
    enc0 = getattr(init, "encoding", None)
    if init is None or not isinstance(enc0, FeatureEncoding):
        return fresh
    source = getattr(init, "source", None) or ""
    check_policy_inputs(init, feature_names=system.features,
                        width=fresh.width if fresh.name == "features" else None,
                        n_levels=system.n_levels, n_groups=system.n_groups, source=source)
    if enc0.name != fresh.name:
        where = f"checkpoint {source}" if source else f"policy {getattr(init, 'name', '?')!r}"
        raise CheckpointError(
            f"{where}: reads {_describe(enc0)}, but a policy trained on system {system.id!r} "
            f"reads {_describe(fresh)}; warm-start from a checkpoint trained on this "
            "system's inputs, or train from scratch.")
    return enc0 if fresh.name == "features" else fresh

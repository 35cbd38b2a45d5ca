"""The constrained exact repair of a policy network on a system's tabular model (the
``exact`` algorithm of :mod:`causalfair.train.algorithms`): ``causalfair train --algo
exact`` and a spec's ``[retrain] algo = "exact"`` both call :func:`repair_checkpoint`.

The optimisation itself is :func:`causalfair.train.repair.repair_network` (an augmented
Lagrangian on the exact engine's differentiable numbers, docs/training.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from causalfair.errors import ConfigError
from causalfair.policies.checkpoint import FeatureEncoding, NumpyMLPPolicy, mlp, save_checkpoint
from causalfair.train.repair import repair_network

__all__ = ["Repaired", "repair_checkpoint", "tabular_model"]


@dataclass
class Repaired:
    """A repaired network: the repair's result and what its checkpoint records."""

    result: Any  # causalfair.train.repair.RepairResult
    architecture: Mapping[str, Any]
    encoding: Any  # causalfair.policies.checkpoint.FeatureEncoding

    def summary(self) -> dict[str, Any]:
        """The repair's summary as its checkpoint records it: without the attempts and
        the wall time, so that the file is reproducible bit for bit."""
        return {k: v for k, v in self.result.to_dict().items() if k not in ("attempts", "wall_s")}

    def save(self, path: str | os.PathLike[str], **metadata: Any) -> None:
        """Write the repaired network to ``path`` (``.npz`` or ``.pt``, atomically), its
        metadata ``metadata`` plus ``repair`` (:meth:`summary`)."""
        save_checkpoint(path, self.result.module, architecture=self.architecture,
                        encoding=self.encoding, metadata={**metadata, "repair": self.summary()})


def tabular_model(system: Any, where: str = "--algo exact",
                  error: type[Exception] = ConfigError) -> Any:
    """``system``'s tabular model of independent units, the one the exact repair optimises
    on; a system without one raises ``error``, one line naming ``where`` (the door: a
    command-line flag, a spec's ``[retrain] algo``) and the repair to use instead
    (PPO-Lagrangian, docs/training.md)."""
    model = system.tabular if "exact" in system.engines else None
    if model is None:
        raise error(f"{where}: 'exact' needs a system with a tabular model of independent "
                    f"units; {system.id!r} has none. Impose the same thresholds with "
                    "PPO-Lagrangian: causalfair train --algo ppo-c --constraint ..., or "
                    "[retrain] algo = \"ppo-lag\" in a spec.")
    return model


def repair_checkpoint(system: Any, horizon: int, constraints: Sequence[Any], *,
                      init: tuple[Any, Mapping[str, Any]] | None = None, seed: int = 0,
                      outer: int = 30, n_random: int = 12, eps: float | str | None = None,
                      weights: str = "visitation", where: str = "--algo exact",
                      error: type[Exception] = ConfigError) -> Repaired:
    """Repair the network of a loaded checkpoint ``init`` = (policy, metadata), checked
    against ``system`` (or, with none, a fresh 64-64 MLP over the one-hot (level, group)
    of a system without features) under ``constraints``
    (:class:`causalfair.thresholds.Constraint`) on ``system``'s tabular model over
    ``horizon`` epochs. ``where`` and ``error`` name the door in the errors raised (a
    system without a tabular model, a featured system without a checkpoint)."""
    import torch

    model = tabular_model(system, where, error)
    torch.manual_seed(seed)
    if init is not None:
        pol, meta = init
        net = pol.to_torch() if isinstance(pol, NumpyMLPPolicy) else pol.module
        enc, arch = pol.encoding, meta["architecture"]
    else:
        if model.features is not None:
            raise error(f"{where} on a system with features: pass the network to repair "
                        "(--init-checkpoint).")
        enc = FeatureEncoding("onehot", model.n_levels, model.n_groups)
        n_out = 1 if model.n_actions == 2 else model.n_actions
        net = mlp(enc.width, (64, 64), n_out)
        arch = {"type": "mlp", "input_dim": enc.width, "hidden": [64, 64],
                "activation": "tanh", "output_dim": n_out}
    result = repair_network(model, horizon, net, enc, constraints, eps=eps, weights=weights,
                            seed=seed, outer=outer, n_random=n_random)
    return Repaired(result=result, architecture=arch, encoding=enc)

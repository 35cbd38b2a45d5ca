"""The constrained exact repair of a policy network on a system's tabular model (the
``exact`` algorithm of :mod:`causalfair.train.algorithms`): ``causalfair train --algo
exact`` and a spec's ``[retrain] algo = "exact"`` both call :func:`repair_checkpoint`.

The optimisation itself is :func:`causalfair.train.repair.repair_network` (an augmented
Lagrangian on the exact engine's differentiable numbers, docs/training.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from causalfair.engines.benefit import model_eps
from causalfair.engines.exact import exact_numbers
from causalfair.errors import ConfigError
from causalfair.policies.checkpoint import FeatureEncoding, NumpyMLPPolicy, mlp, save_checkpoint
from causalfair.train.repair import best_found, check_budget, repair_network

__all__ = ["Repaired", "repair_checkpoint", "tabular_model"]


@dataclass
class Repaired:
    """A repaired network: the repair's result and what its checkpoint records."""

    result: Any  # causalfair.train.repair.RepairResult
    architecture: Mapping[str, Any]
    encoding: Any  # causalfair.policies.checkpoint.FeatureEncoding
    #: What the repair ran on and with (its checkpoint's ``algorithm``, ``system``,
    #: ``system_params``, ``horizon``, ``seed`` and ``config``, as a trainer's checkpoint
    #: records its run): enough to know what the constraints were met on and to rerun it.
    run: Mapping[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The repair's summary as its checkpoint records it: without the attempts and
        the wall time, so that the file is reproducible bit for bit."""
        return {k: v for k, v in self.result.to_dict().items() if k not in ("attempts", "wall_s")}

    def save(self, path: str | os.PathLike[str], **metadata: Any) -> None:
        """Write the repaired network to ``path`` (``.npz`` or ``.pt``, atomically), its
        metadata ``metadata`` plus ``repair`` (:meth:`summary`)."""
        save_checkpoint(path, self.result.module, architecture=self.architecture,
                        encoding=self.encoding,
                        metadata={**self.run, **metadata, "repair": self.summary()})


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
                      error: type[Exception] = ConfigError, hidden: Sequence[int] = (64, 64),
                      activation: str = "tanh", encoding: Any = None,
                      original: Any = None, pair: tuple[int, int] | None = None) -> Repaired:
    """Repair the network of a loaded checkpoint ``init`` = (policy, metadata), checked
    against ``system``, under ``constraints`` (:class:`causalfair.thresholds.Constraint`)
    on ``system``'s tabular model over ``horizon`` epochs. ``where`` and ``error`` name
    the door in the errors raised (a system without a tabular model, a featured system
    without a checkpoint or an encoding).

    ``init`` None: a new network from a random init (``seed``), an MLP of ``hidden``
    widths and ``activation`` over ``encoding`` (None: the one-hot (level, group) of a
    system without features; a system with features needs one). ``original`` (with
    ``init`` None): the policy table of the policy the new network replaces (a policy
    without a network: a factory's, a builtin): the table search starts from it too
    ("the failing policy", when stationary), the repair's ``original`` is its numbers
    (:func:`causalfair.engines.exact.exact_numbers`, the audit's pair), not those of the
    random network, and that network's own attempt is named "a new network (random
    init)". ``pair``: the groups (indices) whose numbers every attempt and ``original``
    report under the plain keys (``C``, ``Lambda``, ...): an audit's ``[engine] pair``
    (None: the engine's default pair, the largest and smallest V^pi)."""
    import torch

    check_budget(outer, n_random, seed, error)
    model = tabular_model(system, where, error)
    torch.manual_seed(seed)
    if init is not None:
        pol, meta = init
        net = pol.to_torch() if isinstance(pol, NumpyMLPPolicy) else pol.module
        enc, arch = pol.encoding, meta["architecture"]
    else:
        if encoding is None and model.features is not None:
            raise error(f"{where} on a system with features: pass the network to repair "
                        "(--init-checkpoint), or the input encoding of a new one.")
        enc = encoding or FeatureEncoding("onehot", model.n_levels, model.n_groups)
        n_out = 1 if model.n_actions == 2 else model.n_actions
        hidden = [int(h) for h in hidden]
        net = mlp(enc.width, tuple(hidden), n_out, activation)
        arch = {"type": "mlp", "input_dim": enc.width, "hidden": hidden,
                "activation": activation, "output_dim": n_out}
    search = None
    if init is None and original is not None:
        original = np.asarray(original, dtype=np.float64)
        if original.ndim == (2 if model.n_actions == 2 else 3):  # stationary: a start
            search = best_found(model, horizon, constraints, eps=eps, weights=weights,
                                initial={"the failing policy": original}, seed=seed,
                                n_random=n_random, outer=outer, pair=pair)
    result = repair_network(model, horizon, net, enc, constraints, eps=eps, weights=weights,
                            seed=seed, outer=outer, n_random=n_random, search=search, pair=pair)
    if init is None and original is not None:  # (causalfair train --algo exact: as before)
        _as_new_network(result, model, horizon, original, eps, weights, pair)
    groups = tuple(getattr(system, "groups", None) or model.group_names)
    run = {"algorithm": "exact", "system": getattr(system, "id", None) or model.name,
           "system_params": dict(system.to_dict().get("params") or {})
           if callable(getattr(system, "to_dict", None)) else {},
           "horizon": int(horizon), "seed": int(seed),
           "config": {"iterations": int(outer), "starts": int(n_random),
                      "constraints": [c.text for c in constraints],
                      "eps": eps if eps is None or isinstance(eps, str) else float(eps),
                      "weights": weights,
                      "pair": None if pair is None else [groups[pair[0]], groups[pair[1]]]}}
    return Repaired(result=result, architecture=arch, encoding=enc, run=run)


#: The name of the repair's start from the network as given (repair_network's), and the
#: name it has when that network is a new one (repair_checkpoint with init None).
_GIVEN, _NEW = "the failing checkpoint", "a new network (random init)"


def _as_new_network(result: Any, model: Any, horizon: int, original: Any,
                    eps: float | str | None, weights: str,
                    pair: tuple[int, int] | None = None) -> None:
    """``result`` of a repair that started from a new network: its attempt from that
    network renamed, and ``original`` the numbers of the replaced policy's table."""
    new = {id(a): replace(a, start=_NEW) for a in result.attempts if a.start == _GIVEN}
    result.attempts = [new.get(id(a), a) for a in result.attempts]
    result.best = new.get(id(result.best), result.best)
    result.best_found = new.get(id(result.best_found), result.best_found)
    result.original = exact_numbers(model, original, horizon, eps=model_eps(eps, model)[0],
                                    weights=weights, pair=pair).scalars()

"""Checkpoints of the population agents (R-TD3, L-UCBFair; Yin et al. NeurIPS 2023,
trained by :mod:`causalfair.train.population`): a ``.npz`` whose architecture type is
``population``, validated (metadata and every array) into the
:class:`~causalfair.policies.population.GridPolicy` it deploys."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from causalfair.errors import CheckpointError, short
from causalfair.policies.checkpoint_format import (
    CHECKPOINT_FORMAT,
    MAX_PARAMETERS,
    check_checkpoint_version,
)
from causalfair.policies.population import (
    GridPolicy,
    LUCBFairActor,
    PopulationAgent,
    ThresholdActor,
)

__all__ = ["population_policy"]


def population_policy(meta: dict[str, Any], arrays: dict[str, np.ndarray], path: Any
                       ) -> tuple[Any, dict[str, Any]]:
    """Validate a ``population`` checkpoint's metadata and arrays; (GridPolicy, meta)."""
    def bad(msg: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {path}: {msg}")

    if meta.get("format") != CHECKPOINT_FORMAT:
        raise bad(f"format {short(meta.get('format'))} is not {CHECKPOINT_FORMAT!r}.")
    check_checkpoint_version(meta, path)
    arch, md = meta["architecture"], meta.get("metadata")
    if not isinstance(md, dict):
        raise bad("metadata must be an object.")
    algo = arch.get("algo")
    if algo not in ("r-td3", "l-ucbfair"):
        raise bad(f"architecture.algo: bad value {short(algo)}; allowed: r-td3, l-ucbfair.")
    H = arch.get("horizon")
    if isinstance(H, bool) or not isinstance(H, int) or not 1 <= H <= 1_000_000:
        raise bad(f"architecture.horizon: bad value {short(H)}; must be an integer >= 1.")
    grid = md.get("grid")
    if not isinstance(grid, list) or not grid or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in grid):
        raise bad(f"metadata.grid: bad value {short(grid)}; must be a list of finite numbers.")
    if sum(v.size for v in arrays.values()) > MAX_PARAMETERS:
        raise bad(f"more than {MAX_PARAMETERS} numbers; refused.")
    for k, v in arrays.items():
        if v.dtype.kind != "f" or not np.isfinite(v).all():
            raise bad(f"array {k!r} must hold finite floats.")
    prefix, n_in = ("net", 3) if algo == "r-td3" else ("phi", 4)
    layers = _layers_from(arrays, prefix, n_in, path)
    known = {f"{prefix}.{i}.{k}" for i in range(len(layers)) for k in ("weight", "bias")}
    if algo == "r-td3":
        if layers[-1][0].shape[0] != 2:
            raise bad(f"the R-TD3 actor must give 2 thresholds, not {layers[-1][0].shape[0]}.")
        actor: Any = ThresholdActor(layers, H)
    else:
        d = layers[-1][0].shape[0]
        want = {"loci": None, "W_r": (H, d), "W_g": (H, d), "Linv": (H, d, d)}
        for k, shape in want.items():
            if k not in arrays:
                raise bad(f"array {k!r} is missing (an L-UCBFair agent needs loci, W_r, W_g, Linv).")
            if shape is not None and arrays[k].shape != shape:
                raise bad(f"array {k!r} has shape {arrays[k].shape}, expected {shape}.")
        if arrays["loci"].ndim != 2 or arrays["loci"].shape[1] != 2 or not len(arrays["loci"]):
            raise bad(f"array 'loci' has shape {arrays['loci'].shape}, expected (M, 2).")
        nums = {}
        for k in ("alpha", "beta", "nu"):
            v = arch.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise bad(f"architecture.{k}: bad value {short(v)}; must be a finite number.")
            nums[k] = float(v)
        actor = LUCBFairActor(layers, arrays["loci"], arrays["W_r"], arrays["W_g"],
                              arrays["Linv"], horizon=H, **nums)
        known |= set(want)
    extra = sorted(set(arrays) - known)
    if extra:
        raise bad(f"unexpected arrays {extra[:3]}.")
    name = str(md.get("name", algo))[:200]
    return GridPolicy(np.asarray(grid, dtype=np.float64), PopulationAgent(name, actor), name,
                      source=str(path)), meta


def _layers_from(arrays: dict[str, np.ndarray], prefix: str, n_in: int, path: Any
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``prefix.i.weight`` / ``prefix.i.bias`` in order, each layer's input the previous
    layer's output."""
    layers, width, i = [], n_in, 0
    while f"{prefix}.{i}.weight" in arrays:
        W, b = arrays[f"{prefix}.{i}.weight"], arrays.get(f"{prefix}.{i}.bias")
        if b is None or W.ndim != 2 or W.shape[1] != width or b.shape != (W.shape[0],):
            raise CheckpointError(
                f"checkpoint {path}: layer {prefix}.{i} has shapes {W.shape} / "
                f"{None if b is None else b.shape}, expected ({{out}}, {width}) / ({{out}},).")
        layers.append((W, b))
        width, i = W.shape[0], i + 1
    if not layers:
        raise CheckpointError(f"checkpoint {path}: no layers {prefix}.0.weight / bias.")
    return layers

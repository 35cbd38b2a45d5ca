"""The simulator contract as checks on what one call returns (docs/simulators.md): an
observation's shapes, dtypes and finite values, a step result's gains and rewards
(numpy arrays of numbers, one per unit, finite), probabilities named ``p_*``/``prob*``
inside [0, 1], one noise row per unit. :func:`causalfair.montecarlo.check_simulator`
applies them (with reproducibility, determinism and no in-place change) on a sampled
batch; :mod:`causalfair._usercode` applies them on every call of a user's simulator.
Every check is a few vectorised numpy operations."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from causalfair.errors import SimulatorContractError
from causalfair.types import Observation, StepResult


def _leaves(obj: Any, prefix: str = "") -> list[tuple[str, np.ndarray]]:
    """Every array-like leaf of a state / noise / observation object, with a path."""
    if obj is None:
        return []
    if isinstance(obj, np.ndarray) or np.isscalar(obj):
        return [(prefix or "value", np.asarray(obj))]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = []
        for f in dataclasses.fields(obj):
            out += _leaves(getattr(obj, f.name), f"{prefix}.{f.name}" if prefix else f.name)
        return out
    if isinstance(obj, Mapping):
        out = []
        for k in obj:
            out += _leaves(obj[k], f"{prefix}[{k!r}]")
        return out
    if isinstance(obj, (tuple, list)):
        out = []
        for i, v in enumerate(obj):
            out += _leaves(v, f"{prefix}[{i}]")
        return out
    try:
        return [(prefix or "value", np.asarray(obj))]
    except Exception:  # noqa: BLE001 - opaque object: nothing to compare
        return []


def _same(a: Any, b: Any) -> str | None:
    """None when a and b hold the same arrays, else the path of the first difference."""
    la, lb = _leaves(a), _leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return "structure"
    for (path, x), (_, y) in zip(la, lb, strict=True):
        if x.shape != y.shape:
            return path
        if x.dtype.kind in "fc":
            if not np.array_equal(x, y, equal_nan=True):
                return path
        elif x.dtype.kind in "biu":
            if not np.array_equal(x, y):
                return path
    return None


def _frozen(obj: Any) -> dict[str, np.ndarray]:
    """Copies of every array leaf (so later in-place changes show up as differences)."""
    return {path: np.array(arr, copy=True) for path, arr in _leaves(obj)}


def _is_prob_name(name: str) -> bool:
    low = str(name).lower()
    return low.startswith("p_") or low.startswith("prob")


def _check_observation(sim: Any, obs: Any, n: int, where: str) -> None:
    w = f"simulator {type(sim).__name__}.{where}"
    if not isinstance(obs, Observation):
        raise SimulatorContractError(
            f"{w}: returned {type(obs).__name__}; expected a causalfair.policy.Observation."
        )
    group = np.asarray(obs.group)
    if group.shape != (n,):
        raise SimulatorContractError(
            f"{w}: wrong shape: Observation.group has shape {group.shape}, expected ({n},) "
            f"for a batch of {n}.")
    if obs.level is not None:
        level = np.asarray(obs.level)
        if level.shape != (n,):
            raise SimulatorContractError(
                f"{w}: wrong shape: Observation.level has shape {level.shape}, expected ({n},).")
        if level.dtype.kind == "f" and not np.isfinite(level).all():
            raise SimulatorContractError(f"{w}: NaN states: Observation.level has NaN or inf.")
        if level.dtype.kind not in "iub":
            raise SimulatorContractError(
                f"{w}: Observation.level has dtype {level.dtype}; levels are integer indices "
                "(use features for continuous states).")
        K = getattr(sim, "n_levels", None)
        if K is not None and n and (level.min() < 0 or level.max() >= K):
            raise SimulatorContractError(
                f"{w}: Observation.level outside [0, {K}) (min {level.min()}, max {level.max()}).")
    if obs.features is not None:
        feats = np.asarray(obs.features)
        if feats.ndim != 2 or feats.shape[0] != n:
            raise SimulatorContractError(
                f"{w}: wrong shape: Observation.features has shape {feats.shape}, expected "
                f"({n}, F).")
        if not np.isfinite(feats).all():
            raise SimulatorContractError(
                f"{w}: NaN states: Observation.features contains NaN or inf "
                f"({int((~np.isfinite(feats)).sum())} entries).")
    _check_named_arrays(sim, obs.extras, n, f"{where} (Observation.extras)")


def _check_named_arrays(sim: Any, arrays: Mapping[str, Any], n: int, where: str) -> None:
    w = f"simulator {type(sim).__name__}.{where}"
    for key in arrays:
        arr = np.asarray(arrays[key])
        if arr.ndim == 0 or arr.shape[0] != n:
            raise SimulatorContractError(
                f"{w}: wrong shape: {key!r} has shape {arr.shape}, expected ({n}, ...).")
        if _is_prob_name(key) and arr.dtype.kind in "fiub":
            a = arr.astype(np.float64)
            if not np.isfinite(a).all() or (a < 0).any() or (a > 1).any():
                bad = a[~(np.isfinite(a) & (a >= 0) & (a <= 1))][0]
                raise SimulatorContractError(
                    f"{w}: probability {key!r} outside [0, 1] (e.g. {float(bad)!r}); entries named "
                    "p_* or prob* are probabilities.")


def _check_step_result(sim: Any, res: Any, n: int) -> None:
    w = f"simulator {type(sim).__name__}.step"
    if not isinstance(res, StepResult):
        raise SimulatorContractError(
            f"{w}: returned {type(res).__name__}; expected causalfair.sim.base.StepResult.")
    for field_name in ("gain", "reward"):
        arr = getattr(res, field_name)
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiub":
            what = f"a {type(arr).__name__}" if not isinstance(arr, np.ndarray) else \
                f"an array of dtype {arr.dtype}"
            raise SimulatorContractError(
                f"{w}: StepResult.{field_name} is {what}; return a numpy array of numbers "
                f"(np.asarray(..., dtype=float)) with one entry per unit.")
        if arr.shape != (n,):
            raise SimulatorContractError(
                f"{w}: wrong shape: StepResult.{field_name} has shape {arr.shape}, expected ({n},).")
        if not np.isfinite(arr).all():
            raise SimulatorContractError(
                f"{w}: StepResult.{field_name} contains NaN or inf "
                f"({int((~np.isfinite(arr)).sum())} of {n}).")
    _check_named_arrays(sim, res.info, n, "step (StepResult.info)")


def _check_noise(sim: Any, noise: Any, n: int) -> None:
    for path, arr in _leaves(noise):
        if arr.ndim >= 1 and arr.shape[0] != n:
            raise SimulatorContractError(
                f"simulator {type(sim).__name__}.draw_noise: wrong shape: {path} has shape {arr.shape}, "
                f"expected {n} rows.")

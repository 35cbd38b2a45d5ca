"""Tabular models as data files (no code): ``.npz`` or ``.json``.

Both formats hold the same fields (docs/own-system.md, "A tabular model from a file"):

=================  ===============  ==========================================
field              shape            meaning
=================  ===============  ==========================================
kernel             (G, A, K, K)     P(x' | x, a, s), rows sum to 1
initial            (G, K)           P(x_0 | s)
potential          (G, K) or (K,)   gain potential f^s(x); gain = f(x') - f(x)
reward             (G, A, K)        expected reward r(x, a) (optional, zeros)
group_weights      (G,)             P(s) (optional, uniform)
features           (G, K, F)        features a policy reads per level (optional)
feature_names      [str] * F        optional
aux                {name: (G, K)}   tables built-in policies read, e.g. p_repay
group_names        [str] * G        optional
level_labels       [str] * K        optional
action_labels      [str] * A        optional
baseline           int              the baseline action a0 (optional, 0)
name               str              optional
lambda_eps         float > 0        the eps of Lambda in the gain's units (optional)
departed_levels    [int]            levels of those who left (optional; absorbing)
structure          {exogenous: {NAME: [depends_on_s, affects_reward]},
                    s_to_x0: bool, s_to_transition: bool}   optional
=================  ===============  ==========================================

In ``.npz`` files the arrays are stored under their names (``aux`` tables as
``aux.NAME``) and everything else as one JSON string under ``meta``; files are read with
``allow_pickle=False``. In ``.json`` files every field is a key (arrays as nested lists).
``lambda_eps`` and ``departed_levels`` (:class:`~causalfair.model.TabularModel`'s) are
written only when the model sets them; a file without them gives a model without them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import atomic_write_bytes
from causalfair._safe_read import not_a_file, read_json, read_json_file, read_npz
from causalfair.errors import ModelError, short
from causalfair.model import CausalStructure, TabularModel

__all__ = ["load_tabular", "save_tabular", "TABULAR_FORMAT"]

TABULAR_FORMAT = "causalfair-tabular"
_ARRAYS = ("kernel", "initial", "potential", "reward", "group_weights", "features")
_META = ("group_names", "level_labels", "action_labels", "baseline", "name", "structure",
         "feature_names", "lambda_eps", "departed_levels")
_MAX_BYTES = 2 << 30  # files larger than this are refused before reading
#: Memory a tabular model needs per byte of its ``.npz`` arrays (the arrays read, their
#: float64 copies and the validation's temporaries), checked before any array is read.
_NPZ_FACTOR = 3
_FIX = "use fewer levels or actions"


def _structure_from(d: Any, path: Path) -> CausalStructure:
    if d is None:
        return CausalStructure()
    if not isinstance(d, dict):
        raise ModelError(f"tabular model {path}: structure must be an object, got {type(d).__name__}.")
    unknown = set(d) - {"exogenous", "s_to_x0", "s_to_transition"}
    if unknown:
        raise ModelError(
            f"tabular model {path}: structure has unknown key {sorted(unknown)[0]!r}; allowed: "
            "exogenous, s_to_x0, s_to_transition.")
    exo = d.get("exogenous", {})
    if not isinstance(exo, dict) or not all(
            isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(b, bool) for b in v)
            for v in exo.values()):
        raise ModelError(
            f"tabular model {path}: structure.exogenous must map names to [depends_on_s, "
            "affects_reward] booleans.")
    for key in ("s_to_x0", "s_to_transition"):
        if key in d and not isinstance(d[key], bool):
            raise ModelError(f"tabular model {path}: structure.{key} must be true or false.")
    return CausalStructure(exogenous={k: tuple(v) for k, v in exo.items()},
                           s_to_x0=d.get("s_to_x0", True),
                           s_to_transition=d.get("s_to_transition", True))


def _build(fields: dict[str, Any], path: Path) -> TabularModel:
    unknown = set(fields) - set(_ARRAYS) - set(_META) - {"aux", "format", "version"}
    if unknown:
        raise ModelError(
            f"tabular model {path}: unknown field {sorted(unknown)[0]!r}; allowed: "
            f"{', '.join(_ARRAYS + _META)}, aux.")
    for key in ("kernel", "initial", "potential"):
        if key not in fields:
            raise ModelError(f"tabular model {path}: missing field {key!r} (needed: kernel, initial, potential).")
    fmt = fields.get("format", TABULAR_FORMAT)
    if fmt != TABULAR_FORMAT:
        raise ModelError(f"tabular model {path}: format {short(fmt)} is not {TABULAR_FORMAT!r}.")
    aux = fields.get("aux", {})
    if not isinstance(aux, dict):
        raise ModelError(f"tabular model {path}: aux must map names to (G, K) tables.")
    baseline = fields.get("baseline", 0)
    if isinstance(baseline, bool) or not isinstance(baseline, (int, np.integer)):
        raise ModelError(f"tabular model {path}: baseline must be an integer, got {short(baseline)}.")
    for key in ("group_names", "level_labels", "action_labels"):
        v = fields.get(key)
        if v is not None and (not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v)):
            raise ModelError(f"tabular model {path}: {key} must be a list of strings.")
    name = fields.get("name", path.stem)
    if not isinstance(name, str):
        raise ModelError(f"tabular model {path}: name must be a string.")
    try:
        return TabularModel(
            kernel=fields["kernel"], initial=fields["initial"], potential=fields["potential"],
            reward=fields.get("reward"), group_weights=fields.get("group_weights"),
            group_names=fields.get("group_names"), level_labels=fields.get("level_labels"),
            aux=aux, structure=_structure_from(fields.get("structure"), path), name=name,
            baseline=int(baseline), action_labels=fields.get("action_labels"),
            features=fields.get("features"), feature_names=fields.get("feature_names"),
            lambda_eps=fields.get("lambda_eps"), departed_levels=fields.get("departed_levels"),
        )
    except ModelError as exc:
        raise ModelError(f"tabular model {path}: {exc}") from None


def load_tabular(path: str | os.PathLike[str]) -> TabularModel:
    """Read a tabular model from ``.npz`` or ``.json`` (see the module docstring),
    validated with the same messages as :class:`~causalfair.model.TabularModel`, each
    prefixed with the file."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"tabular model {path}: {not_a_file(path)}.")
    size = path.stat().st_size
    if size > _MAX_BYTES:
        raise ModelError(f"tabular model {path}: {size} bytes is over the {_MAX_BYTES >> 30} GiB limit.")
    suffix = path.suffix.lower()
    if suffix == ".json":
        fields = read_json_file(path, f"tabular model {path}", ModelError, fix=_FIX)
        if not isinstance(fields, dict):
            raise ModelError(f"tabular model {path}: expected a JSON object with the model's fields.")
        return _build(fields, path)
    if suffix == ".npz":
        arrays = read_npz(path, f"tabular model {path}", ModelError, factor=_NPZ_FACTOR,
                          fix=_FIX, pickle_fix="save it with causalfair.systems.save_tabular")
        fields: dict[str, Any] = {}
        aux: dict[str, Any] = {}
        for key, arr in arrays.items():
            if key == "meta":
                if arr.dtype.kind != "U" or arr.ndim != 0:
                    raise ModelError(f"tabular model {path}: field meta must be one JSON string, "
                                     f"got an array of shape {arr.shape} and dtype {arr.dtype}.")
                meta = read_json(str(arr), f"tabular model {path}: field meta", ModelError)
                if not isinstance(meta, dict):
                    raise ModelError(f"tabular model {path}: field meta must be a JSON object.")
                fields.update(meta)
            elif key.startswith("aux."):
                aux[key[4:]] = arr
            else:
                fields[key] = arr
        if aux:
            fields["aux"] = aux
        return _build(fields, path)
    raise ModelError(f"tabular model {path}: unknown suffix {path.suffix!r}; use .npz or .json.")


def _structure_dict(s: CausalStructure) -> dict[str, Any]:
    return {"exogenous": {k: list(v) for k, v in s.exogenous.items()},
            "s_to_x0": s.s_to_x0, "s_to_transition": s.s_to_transition}


def save_tabular(path: str | os.PathLike[str], model: TabularModel) -> Path:
    """Write ``model`` to ``path`` (``.npz`` or ``.json``), atomically."""
    path = Path(path)
    meta = {"format": TABULAR_FORMAT, "version": 1, "group_names": list(model.group_names),
            "level_labels": list(model.level_labels), "baseline": model.baseline,
            "action_labels": None if model.action_labels is None else list(model.action_labels),
            "name": model.name, "structure": _structure_dict(model.structure)}
    if meta["action_labels"] is None:
        del meta["action_labels"]
    arrays = {"kernel": model.kernel, "initial": model.initial, "potential": model.potential,
              "reward": model.reward, "group_weights": model.group_weights}
    if model.lambda_eps is not None:
        meta["lambda_eps"] = model.lambda_eps
    if model.departed_levels is not None:
        meta["departed_levels"] = list(model.departed_levels)
    if model.features is not None:
        arrays["features"] = model.features
        if model.feature_names is not None:
            meta["feature_names"] = list(model.feature_names)
    suffix = path.suffix.lower()
    if suffix == ".json":
        doc = {**meta, **{k: v.tolist() for k, v in arrays.items()},
               "aux": {k: v.tolist() for k, v in model.aux.items()}}
        return atomic_write_bytes(path, lambda fh: fh.write(json.dumps(doc).encode()))
    if suffix == ".npz":
        payload = {**arrays, **{f"aux.{k}": v for k, v in model.aux.items()},
                   "meta": np.array(json.dumps(meta))}
        return atomic_write_bytes(path, lambda fh: np.savez(fh, **payload))
    raise ModelError(f"tabular model {path}: unknown suffix {path.suffix!r}; use .npz or .json.")

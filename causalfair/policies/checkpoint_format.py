"""What a causalfair checkpoint file is (:mod:`causalfair.policies.checkpoint` saves and
loads them; docs/checkpoints.md): the format tag and version, the limits on its size, the
validation of its JSON metadata (architecture, input encoding) and of its weights' shapes
against that declaration, and the size check of a torch archive made before any of its
members is inflated."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causalfair._limits import check_memory, format_bytes
from causalfair._safe_read import open_zip
from causalfair._version import __version__
from causalfair.errors import CheckpointError, PolicyError, ResourceLimitError, short
from causalfair.policies.nets import ACTIVATIONS, FeatureEncoding

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "MAX_PARAMETERS", "MAX_PTH_BYTES",
           "NPZ_FACTOR", "check_checkpoint_version", "validate_meta", "check_shapes",
           "check_torch_archive"]

CHECKPOINT_FORMAT = "causalfair-checkpoint"
CHECKPOINT_VERSION = 2
#: Largest network a checkpoint may declare (parameters), checked before building it.
MAX_PARAMETERS = 50_000_000
_MAX_WIDTH = 1 << 16
#: Memory a checkpoint needs per byte of its arrays (read, then copied into the evaluator).
NPZ_FACTOR = 2
#: Largest torch archive (bytes uncompressed): :data:`MAX_PARAMETERS` float64 numbers.
MAX_PTH_BYTES = 8 * MAX_PARAMETERS


def check_checkpoint_version(meta: Mapping[str, Any], path: Any) -> None:
    """Refuse a checkpoint whose metadata ``version`` is newer than
    :data:`CHECKPOINT_VERSION` (written by a newer causalfair, whose fields may mean
    other things) or not an integer; a checkpoint without one is version 1."""
    v = meta.get("version", 1)
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= CHECKPOINT_VERSION:
        fix = ("written by a newer causalfair: upgrade causalfair (`pip install -U causalfair`) "
               "to read it" if isinstance(v, int) and not isinstance(v, bool) and v > 1
               else "save it again with causalfair.save_checkpoint")
        raise CheckpointError(f"checkpoint {path}: metadata version {short(v)}: causalfair "
                              f"{__version__} reads checkpoint versions 1 to "
                              f"{CHECKPOINT_VERSION}; {fix}.")


def _field(d: Any, key: str, kind: type | tuple[type, ...], path: Path, where: str,
           default: Any = ...) -> Any:
    if not isinstance(d, Mapping):
        raise CheckpointError(f"checkpoint {path}: metadata {where} must be an object, got "
                              f"{type(d).__name__}.")
    if key not in d or d[key] is None:
        if default is ...:
            raise CheckpointError(f"checkpoint {path}: metadata {where}.{key} is missing; "
                                  "save the file with causalfair.save_checkpoint.")
        return default
    v = d[key]
    if isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise CheckpointError(f"checkpoint {path}: metadata {where}.{key}: bad value {short(v)}.")
    if not isinstance(v, kind):
        raise CheckpointError(
            f"checkpoint {path}: metadata {where}.{key}: bad value {short(v)} (expected "
            f"{getattr(kind, '__name__', kind)}).")
    return v


def validate_meta(meta: Any, path: Path) -> tuple[dict[str, Any], list[int], str, int,
                                                   FeatureEncoding]:
    """(architecture, layer sizes [in, h1, ..., out], activation, n_out, encoding)."""
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path}: metadata must be a JSON object.")
    fmt = meta.get("format")
    if fmt != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path}: format {short(fmt)} is not {CHECKPOINT_FORMAT!r}.")
    check_checkpoint_version(meta, path)
    arch = _field(meta, "architecture", dict, path, "")
    if arch.get("type") != "mlp":
        raise CheckpointError(
            f"checkpoint {path}: architecture type {short(arch.get('type'))} is unknown; allowed: "
            "mlp (and population, the R-TD3 / L-UCBFair agents, in .npz files). For other "
            "architectures "
            "build the module yourself and wrap it in TorchPolicy.")
    ind = _field(arch, "input_dim", int, path, "architecture")
    hidden = _field(arch, "hidden", (list, tuple), path, "architecture", [64, 64])
    out = _field(arch, "output_dim", int, path, "architecture", 1)
    act = _field(arch, "activation", str, path, "architecture", "tanh")
    sizes = [ind, *hidden, out]
    if not all(isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= _MAX_WIDTH
               for h in sizes):
        raise CheckpointError(
            f"checkpoint {path}: metadata architecture: layer sizes {short(sizes)} must be "
            f"integers in [1, {_MAX_WIDTH}].")
    n_params = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))
    if n_params > MAX_PARAMETERS:
        raise CheckpointError(
            f"checkpoint {path}: declares {n_params} parameters, over the limit of "
            f"{MAX_PARAMETERS}; refused before building the network.")
    if act not in ACTIVATIONS:
        raise CheckpointError(f"checkpoint {path}: metadata architecture.activation: bad value "
                              f"{short(act)}; allowed values: tanh, relu.")
    enc_d = _field(meta, "encoding", dict, path, "")
    name = _field(enc_d, "name", str, path, "encoding")
    try:
        if name == "onehot":
            enc = FeatureEncoding("onehot", _field(enc_d, "n_levels", int, path, "encoding"),
                                  _field(enc_d, "n_groups", int, path, "encoding"))
        elif name == "features":
            names = _field(enc_d, "names", list, path, "encoding", None)
            enc = FeatureEncoding("features", width_=_field(enc_d, "width", int, path, "encoding"),
                                  names=names, mean=_field(enc_d, "mean", list, path, "encoding", None),
                                  std=_field(enc_d, "std", list, path, "encoding", None))
        else:
            raise CheckpointError(f"checkpoint {path}: metadata encoding.name: bad value "
                                  f"{short(name)}; allowed values: onehot, features.")
    except (PolicyError, TypeError, ValueError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"checkpoint {path}: metadata encoding: {exc}") from None
    if enc.width != ind:
        raise CheckpointError(
            f"checkpoint {path}: wrong input width: the network takes {ind} inputs but the "
            f"encoding gives {enc.width}.")
    meta["metadata"] = _field(meta, "metadata", dict, path, "", {})
    return arch, sizes, act, out, enc


def check_shapes(weights: Mapping[str, Any], sizes: list[int], path: Path,
                  prefix: str = "") -> list[tuple[Any, Any]]:
    """[(W, b), ...] in layer order, after comparing every shape with the declaration."""
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        wk, bk = f"{prefix}{2 * i}.weight", f"{prefix}{2 * i}.bias"
        if wk not in weights or bk not in weights:
            raise CheckpointError(
                f"checkpoint {path}: weights do not match the declared architecture (missing "
                f"{wk if wk not in weights else bk}).")
        W, B = weights[wk], weights[bk]
        if tuple(W.shape) != (b, a) or tuple(B.shape) != (b,):
            raise CheckpointError(
                f"checkpoint {path}: weights do not match the declared architecture ({wk} has "
                f"shape {tuple(W.shape)}, declared {(b, a)}).")
        layers.append((W, B))
    extra = set(weights) - {f"{prefix}{2 * i}.{k}" for i in range(len(sizes) - 1)
                            for k in ("weight", "bias")}
    if extra:
        raise CheckpointError(f"checkpoint {path}: unexpected weights {sorted(extra)[:3]}.")
    return layers


def check_torch_archive(src: Any, where: str) -> None:
    """Refuse a torch file (a zip archive, as ``torch.save`` writes) whose members declare
    more than :data:`MAX_PARAMETERS` float64 numbers, before any of them is inflated."""
    with open_zip(src, where, CheckpointError) as zf:
        declared = sum(i.file_size for i in zf.infolist())
    if declared > MAX_PTH_BYTES:
        raise ResourceLimitError(
            f"{where}: declares {declared} bytes uncompressed, over the limit of "
            f"{MAX_PTH_BYTES} bytes ({MAX_PARAMETERS} parameters); refused before "
            "inflating it.")
    check_memory(NPZ_FACTOR * declared, f"{where}: {format_bytes(declared)} of tensors",
                 "use a smaller network")

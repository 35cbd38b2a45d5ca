"""Checkpoints: files holding a policy network (:mod:`causalfair.policies.nets`) that never run
code (docs/checkpoints.md).

Formats :func:`load_checkpoint` reads:

- ``.npz`` (written by :func:`save_checkpoint` for a ``.npz`` path): the weights as arrays
  plus a JSON metadata block, read with ``allow_pickle=False`` and evaluated in numpy
  (:class:`NumpyMLPPolicy`): loading and auditing import no torch at all;
- ``.pt`` (a ``.pt`` path): a torch ``state_dict`` plus the same metadata, read without
  torch by :func:`causalfair.policies.torchzip.load_weights` (the weights-only subset of
  torch's format; ``torch.load(weights_only=True)`` for anything outside it);
- ``.zip``: a stable-baselines3 model. Only its ``policy.pth`` weights (read the same way)
  and the plain JSON fields of its ``data`` file are read, never its pickled fields; the
  architecture comes from the weights' shapes.

Every format loads as a :class:`NumpyMLPPolicy`: one evaluator for all checkpoints, and on
CPUs about 3x faster than torch's forward pass for tanh networks (numpy's vectorised tanh;
``benchmarks/bench_mc_features.py``). :class:`TorchPolicy` wraps a module you hold in memory.

The metadata records the architecture, the input encoding (one-hot levels x groups, or
named features with an optional normalisation), the number of actions and free-form
``metadata``. Every field is validated, declared shapes are compared with the file's
arrays, and the size is capped (:data:`MAX_PARAMETERS`) before any network is built.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import atomic_write_bytes
from causalfair._limits import check_memory, format_bytes
from causalfair._safe_read import open_zip, read_json, read_member, read_npz
from causalfair._version import __version__
from causalfair.errors import CheckpointError, PolicyError, ResourceLimitError, short
from causalfair.policies.choice import ReplicaChoicePolicy
from causalfair.policies.nets import (  # the networks checkpoints hold, re-exported
    ACTIVATIONS,
    FeatureEncoding,
    NumpyMLPPolicy,
    TorchPolicy,
    check_policy_inputs,
    mlp,
)
from causalfair.policies.population import (
    GridPolicy,
    LUCBFairActor,
    PopulationAgent,
    ThresholdActor,
)
from causalfair.policies.torchzip import (
    TorchZipError,
    TorchZipUnsupported,
    load_weights,
    read_torch_zip,
)
from causalfair.types import Observation

__all__ = ["FeatureEncoding", "mlp", "TorchPolicy", "NumpyMLPPolicy", "save_checkpoint",
           "load_checkpoint", "file_sha256", "check_policy_inputs", "CHECKPOINT_FORMAT",
           "MAX_PARAMETERS", "load_checkpoint_for"]

CHECKPOINT_FORMAT = "causalfair-checkpoint"
CHECKPOINT_VERSION = 2
#: Largest network a checkpoint may declare (parameters), checked before building it.
MAX_PARAMETERS = 50_000_000
_MAX_WIDTH = 1 << 16
#: Memory a checkpoint needs per byte of its arrays (read, then copied into the evaluator).
_NPZ_FACTOR = 2

# ------------------------------------------------------------------------ saving
def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_checkpoint(path: str | os.PathLike[str], module: Any, *, architecture: Mapping[str, Any],
                    encoding: FeatureEncoding, metadata: Mapping[str, Any] | None = None) -> None:
    """Save ``module``'s weights with a JSON metadata block, atomically: ``.npz`` (read
    back without torch or pickle) or ``.pt`` (a torch state_dict).

    ``architecture``: e.g. ``{"type": "mlp", "input_dim": 9, "hidden": [64, 64],
    "activation": "tanh", "output_dim": 1}``.
    """
    meta = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "architecture": dict(architecture),
        "encoding": encoding.to_dict(),
        "metadata": dict(metadata or {}),
    }
    where = Path(path)
    _, sizes, act, _, _ = _validate_meta(json.loads(json.dumps(meta)), where)
    state = _mlp_state(module, sizes, act, where)
    if Path(path).suffix.lower() == ".npz":
        write_npz(path, {k: v.numpy() for k, v in state.items()}, meta)
        return
    import torch

    payload = {"meta_json": json.dumps(meta, sort_keys=True), "state_dict": state}
    atomic_write_bytes(path, lambda fh: torch.save(payload, fh))


def _mlp_state(module: Any, sizes: list[int], activation: str, path: Path) -> dict[str, Any]:
    """``module``'s weights under the names of :func:`mlp` (``0.weight``, ``0.bias``,
    ``2.weight``, ...), after checking that ``module(x)`` is the declared MLP.

    A module of your own (``fc1``, ``fc2``, ...) is renamed when its state_dict holds
    exactly the declared layers' weights and biases, in layer order. Either way its
    forward pass on 64 random inputs is compared with the MLP the file will describe,
    so a layer order, an activation or an extra operation the architecture does not
    declare is refused here rather than audited as another network."""
    import torch

    raw = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    names = [f"{2 * i}.{k}" for i in range(len(sizes) - 1) for k in ("weight", "bias")]
    if set(raw) == set(names):
        state = raw
    else:
        shapes = [s for a, b in zip(sizes[:-1], sizes[1:], strict=False) for s in ((b, a), (b,))]
        if [tuple(v.shape) for v in raw.values()] != shapes:
            raise CheckpointError(
                f"checkpoint {path}: weights do not match the declared architecture: the "
                f"module's state_dict holds {short({k: tuple(v.shape) for k, v in raw.items()})}, "
                f"the architecture (sizes {sizes}) declares weight and bias shapes {shapes} in "
                "layer order; declare the module's own layers, or copy its weights into "
                "cf.policies.checkpoint.mlp(...) with load_state_dict.")
        state = dict(zip(names, raw.values(), strict=True))
    layers = _check_shapes(state, sizes, path)
    dtype = next(iter(raw.values())).dtype if raw else torch.float32
    x = np.random.default_rng(0).normal(size=(64, sizes[0]))
    h = x
    for i, (W, b) in enumerate(layers):
        h = h @ W.double().numpy().T + b.double().numpy()
        if i < len(layers) - 1:
            h = np.tanh(h) if activation == "tanh" else np.maximum(h, 0.0)
    training = _set_training(module, False)  # dropout off, as an audit evaluates it
    try:
        with torch.no_grad():
            got = module(torch.as_tensor(x, dtype=dtype, device=_device_of(module)))
        got = np.asarray(got.detach().cpu().double().numpy())
    except Exception as exc:  # noqa: BLE001 - user code: named in the refusal
        raise CheckpointError(
            f"checkpoint {path}: cannot check that the module is the declared MLP: "
            f"module(x) on a (64, {sizes[0]}) float tensor raised "
            f"{type(exc).__name__}: {str(exc)[:200]}; save a module whose forward takes a batch "
            "of any size of the encoded features and returns the logits.") from None
    finally:
        if training is not None:
            _set_training(module, training)
    finite = np.abs(h[np.isfinite(h)])
    tol = max(1e-4, 50 * float(torch.finfo(dtype).eps)) * (1.0 + float(finite.max(initial=0.0)))
    # non-finite weights give NaN on both sides: the loader refuses them in its own words
    if got.shape != h.shape or not np.all((np.abs(got - h) <= tol)
                                          | (~np.isfinite(got) & ~np.isfinite(h))):
        diff = (f"outputs of shape {got.shape}, expected {h.shape}" if got.shape != h.shape
                else f"outputs differing by up to {float(np.abs(got - h).max()):.3g}")
        raise CheckpointError(
            f"checkpoint {path}: the module is not the declared MLP (sizes {sizes}, "
            f"activation {activation!r}): module(x) gives {diff} from Linear-{activation}-...-"
            "Linear on the same weights; declare its activation, or save a module whose "
            "forward is exactly that (logits out, no softmax).")
    return state


def _device_of(module: Any) -> Any:
    """The device of ``module``'s first parameter (a network trained on a GPU is checked
    there); None (torch's default, the CPU) for a module without parameters."""
    try:
        return next(iter(module.parameters())).device
    except (AttributeError, StopIteration, TypeError):
        return None


def _set_training(module: Any, mode: bool) -> bool | None:
    """Set ``module``'s training mode; its former mode, or None where it has none (an
    ``ExportedProgram``'s module refuses ``train()``)."""
    before = getattr(module, "training", None)
    try:
        module.train(mode)
    except Exception:  # noqa: BLE001 - no mode to set: evaluated as it is
        return None
    return before if isinstance(before, bool) else None


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray],
              meta: Mapping[str, Any]) -> None:
    """A checkpoint ``.npz``: the arrays plus the JSON metadata block, written atomically
    (read back with ``allow_pickle=False``)."""
    out = {k: np.asarray(v) for k, v in arrays.items()}
    out["meta_json"] = np.array(json.dumps(meta, sort_keys=True))
    atomic_write_bytes(path, lambda fh: np.savez(fh, **out))


# ------------------------------------------------------------------------ loading
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


def _validate_meta(meta: Any, path: Path) -> tuple[dict[str, Any], list[int], str, int,
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


def _check_shapes(weights: Mapping[str, Any], sizes: list[int], path: Path,
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


def _grid_check(policy: Any, model: Any, path: Path) -> None:
    G, K = model.n_groups, model.n_levels
    feats = getattr(model, "features", None)
    obs = Observation(group=np.repeat(np.arange(G), K), level=np.tile(np.arange(K), G),
                      features=None if feats is None else feats.reshape(G * K, -1))
    try:
        policy.action_probs(obs)
    except PolicyError as exc:
        raise CheckpointError(str(exc)) from None


#: Suffixes of pickle files (scikit-learn's joblib.dump, pickle.dump): never loaded.
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".sav", ".pck")


def _refuse_pickle(path: Path) -> None:
    """Refuse a pickle / joblib file given as a checkpoint (a scikit-learn model): loading
    it would run whatever code it names, and a checkpoint never runs code."""
    if path.suffix.lower() in (".pt", ".pth", ".npz", ".zip", ".safetensors"):
        return  # the formats read below (a legacy pickled .pt gets _load_pt's own message)
    if path.suffix.lower() not in PICKLE_SUFFIXES:
        try:
            with open(path, "rb") as fh:
                head = fh.read(2)
        except OSError:
            return
        if len(head) < 2 or head[0] != 0x80 or not 2 <= head[1] <= 5:  # pickle protocol 2-5
            return
    raise CheckpointError(
        f"checkpoint {path}: is a pickle (joblib/pickle) file, such as a scikit-learn model; "
        "loading it would run the code it names, and a checkpoint never runs code. Load it "
        "in a policy factory you trust and return a function f(obs) of its predictions: "
        "[policy] factory = \"mypolicy:make\" in a spec, --policy mypolicy:make on the "
        "command line (docs/own-system.md, \"A scikit-learn model\").")


def load_checkpoint(path: str | os.PathLike[str], model: Any = None, *,
                    activation: str = "tanh") -> tuple[Any, dict[str, Any]]:
    """Load a checkpoint (``.npz``, ``.pt`` or a stable-baselines3 ``.zip``; see the module
    docstring): (policy, metadata). No file runs code. With ``model`` (a TabularModel),
    also check the input width and that the policy yields probabilities on every
    (group, level). ``activation``: the hidden activation of an SB3 model (its
    ``policy_kwargs`` are pickled, so they are not read; SB3's default is tanh)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: " + (
            "is a folder; give the checkpoint file in it (e.g. checkpoint.pt)"
            if path.is_dir() else "no such file") + ".")
    _refuse_pickle(path)
    suffix = path.suffix.lower()
    if suffix == ".zip":
        policy, meta = _load_sb3_zip(path, activation)
    elif suffix == ".npz":
        policy, meta = _load_npz(path)
    else:
        policy, meta = _load_pt(path)
    choice = (meta.get("metadata") or {}).get("choice")
    if choice is not None:  # one unit per replica (causalfair.policies.choice)

        try:
            policy = ReplicaChoicePolicy(policy, int(choice["units"]),
                                         float(choice["nobody_logit"]), name=policy.name)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {path}: malformed metadata 'choice' ({exc}).") from None
    if model is not None:
        check_policy_inputs(policy, n_levels=model.n_levels, n_groups=model.n_groups,
                            feature_names=getattr(model, "feature_names", None),
                            width=None if getattr(model, "features", None) is None
                            else model.features.shape[2], source=str(path))
        _grid_check(policy, model, path)
    return policy, meta


def _load_npz(path: Path) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    where = f"checkpoint {path}"
    arrays = read_npz(path, where, CheckpointError, factor=_NPZ_FACTOR,
                      fix="use a smaller network",
                      pickle_fix="save the file with causalfair.save_checkpoint")
    if "meta_json" not in arrays:
        raise CheckpointError(f"{where}: not a causalfair checkpoint (no meta_json); save it "
                              "with causalfair.save_checkpoint.")
    raw = arrays.pop("meta_json")
    if raw.dtype.kind != "U" or raw.ndim != 0:
        raise CheckpointError(f"{where}: meta_json must be one JSON string, got an array of "
                              f"shape {raw.shape} and dtype {raw.dtype}.")
    meta = read_json(str(raw), f"{where}: meta_json", CheckpointError)
    if isinstance(meta, dict) and isinstance(meta.get("architecture"), dict) \
            and meta["architecture"].get("type") == "population":
        return _population_policy(meta, arrays, path)
    arch, sizes, act, n_out, enc = _validate_meta(meta, path)
    layers = _check_shapes(arrays, sizes, path)
    for W, b in layers:
        if W.dtype.kind not in "fiu" or b.dtype.kind not in "fiu":
            raise CheckpointError(f"{where}: weights must be numeric arrays, got "
                                  f"{W.dtype} / {b.dtype}.")
        if not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise CheckpointError(f"{where}: weights contain NaN or inf.")
    name = meta["metadata"].get("name", path.stem)
    return NumpyMLPPolicy(layers, enc, activation=act, name=str(name)[:200],
                          source=str(path)), meta


def _check_torch_archive(src: Any, where: str) -> None:
    """Refuse a torch file (a zip archive, as ``torch.save`` writes) whose members declare
    more than :data:`MAX_PARAMETERS` float64 numbers, before any of them is inflated."""
    with open_zip(src, where, CheckpointError) as zf:
        declared = sum(i.file_size for i in zf.infolist())
    if declared > _MAX_PTH_BYTES:
        raise ResourceLimitError(
            f"{where}: declares {declared} bytes uncompressed, over the limit of "
            f"{_MAX_PTH_BYTES} bytes ({MAX_PARAMETERS} parameters); refused before "
            "inflating it.")
    check_memory(_NPZ_FACTOR * declared, f"{where}: {format_bytes(declared)} of tensors",
                 "use a smaller network")


#: How to turn a torch module into a checkpoint causalfair reads (the end of every
#: refusal of a ``.pt`` file that is not one).
_RESAVE = ("save the module with cf.save_checkpoint(path, module, architecture=..., "
           "encoding=...) (docs/checkpoints.md).")


def _program_archive(path: Path) -> tuple[str, str] | None:
    """What a torch archive holding a program is (TorchScript, ``torch.jit.save``; an
    ExportedProgram, ``torch.export.save``), or None for any other file."""
    try:
        with open_zip(path, str(path), CheckpointError) as zf:
            parts = [n.split("/", 1)[-1] for n in zf.namelist()]
    except CheckpointError:
        return None
    if "constants.pkl" in parts or any(p.startswith("code/") for p in parts):
        return "a TorchScript archive (torch.jit.save)", "torch.jit.load"
    if "archive_format" in parts or any(p.startswith("models/") for p in parts):
        return "an ExportedProgram archive (torch.export.save)", "torch.export.load(path).module()"
    return None


def _pickled_module(path: Path) -> str | None:
    """``"a pickled torch module ..."`` when the archive at ``path`` is ``torch.save(module)``
    (its pickle names a ``torch.nn`` class, which a weights-only load refuses), else None."""
    try:
        read_torch_zip(str(path), cap=_MAX_PTH_BYTES, where=str(path))
    except TorchZipUnsupported as exc:
        name = str(exc)
        if name.startswith("torch.nn."):
            return (f"a whole pickled torch module, {name.rsplit('.', 1)[-1]}, as "
                    "torch.save(model) writes; only its weights can be read safely")
    except Exception:  # noqa: BLE001 - any other failure: the caller's own message
        return None
    return None


def _load_pt(path: Path) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    with open(path, "rb") as fh:
        is_zip = fh.read(4) == b"PK\x03\x04"
    if not is_zip:  # torch's legacy format allocates what its pickle declares
        what = ("is a safetensors file: weights without the architecture and input encoding"
                if path.suffix.lower() == ".safetensors" else
                "cannot be loaded safely (not the zip archive torch.save writes)")
        raise CheckpointError(f"checkpoint {path}: {what}; " + _RESAVE)
    _check_torch_archive(path, f"checkpoint {path}")

    try:
        payload = load_weights(str(path), cap=_MAX_PTH_BYTES, where=f"checkpoint {path}")
    except TorchZipError as exc:
        program = _program_archive(path)
        if program is not None:
            raise CheckpointError(
                f"checkpoint {path}: is {program[0]}: it holds a program, which a checkpoint "
                f"never runs; load it yourself with {program[1]} and " + _RESAVE) from None
        raise CheckpointError(f"checkpoint {path}: cannot be loaded safely "
                              f"({_pickled_module(path) or exc}); causalfair loads checkpoints "
                              "with weights_only=True; " + _RESAVE) from None
    if not isinstance(payload, dict) or "meta_json" not in payload or "state_dict" not in payload:
        bare = isinstance(payload, dict) and payload and all(
            isinstance(v, np.ndarray) for v in payload.values())
        raise CheckpointError(
            f"checkpoint {path}: not a causalfair checkpoint (" + (
                f"a bare state_dict of {len(payload)} tensors, without the architecture and "
                "input encoding" if bare else "expected keys meta_json and state_dict")
            + "); " + _RESAVE)
    if not isinstance(payload["meta_json"], str):
        raise CheckpointError(f"checkpoint {path}: malformed metadata (meta_json is a "
                              f"{type(payload['meta_json']).__name__}, not a JSON string).")
    meta = read_json(payload["meta_json"], f"checkpoint {path}: meta_json", CheckpointError)
    arch, sizes, act, n_out, enc = _validate_meta(meta, path)
    state = payload["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        raise CheckpointError(f"checkpoint {path}: state_dict must map names to tensors.")
    layers = [(W.astype(np.float32, copy=False), b.astype(np.float32, copy=False))
              for W, b in _check_shapes(state, sizes, path)]
    for W, b in layers:
        if not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise CheckpointError(f"checkpoint {path}: weights contain NaN or inf.")
    name = meta["metadata"].get("name", path.stem)
    return NumpyMLPPolicy(layers, enc, activation=act, name=str(name)[:200],
                          source=str(path)), meta


def _load_sb3_zip(path: Path, activation: str) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    """A stable-baselines3 PPO/A2C policy with a Discrete action space, read without
    unpickling: the weights of ``policy.pth`` (``weights_only``, its inner archive's sizes
    checked first) and the plain JSON fields of ``data`` (the observation shape), each
    member's declared size checked before it is inflated; the network is built by
    :func:`sb3_network`."""
    where = f"checkpoint {path}"
    with open_zip(path, where, CheckpointError) as zf:
        names = set(zf.namelist())
        if "policy.pth" not in names:
            raise CheckpointError(f"{where}: not a stable-baselines3 model (no policy.pth in the "
                                  "archive).")
        raw = read_member(zf, "policy.pth", where, CheckpointError, cap=_MAX_PTH_BYTES,
                          fix="use a smaller network")
        data = read_json(read_member(zf, "data", where, CheckpointError, cap=_MAX_DATA_BYTES),
                         f"{where}: member data", CheckpointError) if "data" in names else {}
    _check_torch_archive(io.BytesIO(raw), f"{where}: member policy.pth")
    try:
        state = load_weights(io.BytesIO(raw), cap=_MAX_PTH_BYTES, where=f"{where}: member policy.pth")
    except TorchZipError as exc:
        raise CheckpointError(
            f"{where}: cannot be read as a stable-baselines3 model without unpickling "
            f"({exc}).") from None
    space = data.get("observation_space") if isinstance(data, dict) else None
    shape = space.get("_shape", space.get("shape")) if isinstance(space, dict) else None
    return sb3_network(state, shape, activation, where=where, name=path.stem, source=str(path))


_MAX_PTH_BYTES = 8 * MAX_PARAMETERS
_MAX_DATA_BYTES = 64 << 20
_SB3_PRE = "mlp_extractor.policy_net."


def sb3_network(state: Any, obs_shape: Any, activation: str, *, where: str, name: str,
                source: str | None = None) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    """The action network of a stable-baselines3 ``MlpPolicy`` on a ``Discrete(n)`` action
    space, from its ``state_dict``: the ``mlp_extractor.policy_net`` layers then
    ``action_net`` (logits over the n actions, softmax as SB3's categorical distribution),
    as a :class:`NumpyMLPPolicy` reading ``prod(obs_shape)`` features. The one reader of
    SB3 weights: a saved ``.zip`` and a model in memory
    (:class:`causalfair.policies.adapters.SB3Policy`) give the same network. Every key, dtype and
    shape is checked, and ``obs_shape`` (None: not checked) against the input width. The
    weights are numpy arrays (read from a file) or torch tensors (a model in memory)."""
    if not isinstance(state, Mapping) or not all(isinstance(k, str) for k in state):
        raise CheckpointError(f"{where}: policy.pth is not a state dict (names to tensors).")
    extractor = sorted(k for k in state if "features_extractor." in k)
    if extractor:
        raise CheckpointError(
            f"{where}: the policy has its own features extractor ({short(extractor[0])}); "
            "causalfair reads MlpPolicy networks only; audit the model in memory with "
            "causalfair.policies.adapters.SB3Policy(model).")
    idx = set()
    for k in state:
        if k.startswith(_SB3_PRE):
            i, _, kind = k[len(_SB3_PRE):].partition(".")
            if not i.isdigit() or kind not in ("weight", "bias"):
                raise CheckpointError(
                    f"{where}: unexpected key {short(k)} in policy.pth (expected "
                    f"{_SB3_PRE}<integer>.weight / .bias).")
            idx.add(int(i))
    keys = [f"{_SB3_PRE}{i}" for i in sorted(idx)] + ["action_net"]
    if "action_net.weight" not in state and any(k.startswith("q_net.") for k in state):
        raise CheckpointError(
            f"{where}: a DQN model (its q_net gives Q-values, not action probabilities); "
            "audit the model in memory, acting greedily as DQN does: a [policy] factory "
            "returning stable_baselines3.DQN.load(path), or cf.as_policy(DQN.load(path), "
            "system).")
    if "action_net.weight" not in state:
        raise CheckpointError(f"{where}: no action_net in policy.pth (a Discrete action space "
                              "is needed).")
    layers, width, prev = [], None, "the input"
    for key in keys:
        W, b = state.get(f"{key}.weight"), state.get(f"{key}.bias")
        for part, t in (("weight", W), ("bias", b)):
            if t is None:
                raise CheckpointError(f"{where}: policy.pth has no {key}.{part}.")
            kind = _weight_kind(t)
            if kind:
                raise CheckpointError(f"{where}: policy.pth {key}.{part} is {kind}; expected "
                                      "a floating-point tensor.")
        if W.ndim != 2 or tuple(b.shape) != (W.shape[0],):
            raise CheckpointError(
                f"{where}: policy.pth {key} has shapes {tuple(W.shape)} / {tuple(b.shape)}; "
                "expected (out, in) / (out,).")
        if width is not None and W.shape[1] != width:
            raise CheckpointError(
                f"{where}: policy.pth {key} takes {W.shape[1]} inputs, but {prev} gives {width}.")
        layers.append((W, b))
        width, prev = int(W.shape[0]), key
    sizes = [int(layers[0][0].shape[1])] + [int(W.shape[0]) for W, _ in layers]
    n_params = sum((a + 1) * o for a, o in zip(sizes[:-1], sizes[1:], strict=False))
    if n_params > MAX_PARAMETERS:
        raise CheckpointError(f"{where}: {n_params} parameters, over the limit of "
                              f"{MAX_PARAMETERS}.")
    if sizes[-1] < 2:
        raise CheckpointError(f"{where}: action_net gives {sizes[-1]} action(s); a decision "
                              "needs at least 2.")
    if obs_shape is not None:
        if not isinstance(obs_shape, (list, tuple)) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in obs_shape):
            raise CheckpointError(f"{where}: observation_space shape: bad value {short(obs_shape)}; "
                                  "expected a list of integers.")
        if math.prod(obs_shape) != sizes[0]:
            raise CheckpointError(
                f"{where}: the observation space has shape {tuple(obs_shape)} "
                f"({math.prod(obs_shape)} inputs), but the network takes {sizes[0]} inputs.")
    arrays = [(_float32(W), _float32(b)) for W, b in layers]
    if not all(np.isfinite(W).all() and np.isfinite(b).all() for W, b in arrays):
        raise CheckpointError(f"{where}: weights contain NaN or inf.")
    enc = FeatureEncoding("features", width_=sizes[0])
    meta = {"format": "stable-baselines3", "architecture": {
        "type": "mlp", "input_dim": sizes[0], "hidden": sizes[1:-1], "output_dim": sizes[-1],
        "activation": activation}, "encoding": enc.to_dict(),
        "metadata": {"name": name, "n_actions": sizes[-1]}}
    return NumpyMLPPolicy(arrays, enc, activation=activation, name=name, source=source), meta


def _is_tensor(t: Any) -> bool:
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    return torch is not None and isinstance(t, torch.Tensor)


def _weight_kind(t: Any) -> str:
    """'' for a floating-point array or tensor, else what ``t`` is (for the message)."""
    if isinstance(t, np.ndarray):
        return "" if t.dtype.kind == "f" else f"a torch.{t.dtype} tensor"
    if _is_tensor(t):
        return "" if t.is_floating_point() else f"a {t.dtype} tensor"
    return type(t).__name__


def _float32(t: Any) -> np.ndarray:
    if _is_tensor(t):
        return t.detach().cpu().float().numpy()
    return t.astype(np.float32, copy=False)


# ------------------------------------ population agents (Yin et al. NeurIPS 2023)
def _population_policy(meta: dict[str, Any], arrays: dict[str, np.ndarray], path: Any
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


def load_checkpoint_for(path: str | os.PathLike[str], system: Any) -> tuple[Any, dict[str, Any]]:
    """Load a checkpoint (any format) for ``system`` and check that its inputs fit it: levels x groups for
    one-hot encodings; feature names (both lists named in the error), or widths where
    either side has none. A stable-baselines3 model whose width is levels + groups on a
    system without features reads the one-hot (level, group) observation of
    ``causalfair/Lending-v0`` (docs/checkpoints.md)."""
    pol, meta = load_checkpoint(path)
    enc = getattr(pol, "encoding", None)
    if (meta.get("format") == "stable-baselines3" and system.features is None
            and system.n_levels is not None and enc is not None
            and enc.width == system.n_levels + system.n_groups):
        pol.encoding = FeatureEncoding("onehot", system.n_levels, system.n_groups)
        meta = {**meta, "encoding": pol.encoding.to_dict()}
    check_policy_inputs(pol, feature_names=system.features, n_levels=system.n_levels,
                        n_groups=system.n_groups, source=str(path))
    if callable(getattr(pol, "check_system", None)):  # population policies
        pol.check_system(system)
    return pol, meta

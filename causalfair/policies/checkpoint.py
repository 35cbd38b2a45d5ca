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
arrays, and the size is capped (:data:`~causalfair.policies.checkpoint_format.MAX_PARAMETERS`)
before any network is built: :mod:`causalfair.policies.checkpoint_format` says what a
checkpoint file is; :mod:`causalfair.policies.checkpoint_sb3` reads stable-baselines3
models and :mod:`causalfair.policies.checkpoint_population` the population agents' files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import atomic_write_bytes
from causalfair._safe_read import NOT_REGULAR, open_zip, read_json, read_npz
from causalfair._validation import check_keywords
from causalfair.errors import CheckpointError, PolicyError, short
from causalfair.policies.checkpoint_format import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    MAX_PTH_BYTES,
    NPZ_FACTOR,
    check_shapes,
    check_torch_archive,
    validate_meta,
)
from causalfair.policies.checkpoint_population import population_policy
from causalfair.policies.checkpoint_sb3 import (  # sb3_network: documented here, re-exported
    load_sb3_zip,
    sb3_network,
)
from causalfair.policies.choice import ReplicaChoicePolicy
from causalfair.policies.nets import (  # the networks checkpoints hold, re-exported
    FeatureEncoding,
    NumpyMLPPolicy,
    TorchPolicy,
    check_model_inputs,
    check_policy_inputs,
    mlp,
)
from causalfair.policies.torchzip import (
    TorchZipError,
    TorchZipUnsupported,
    load_weights,
    read_torch_zip,
)
from causalfair.types import Observation

__all__ = ["FeatureEncoding", "mlp", "TorchPolicy", "NumpyMLPPolicy", "save_checkpoint",
           "load_checkpoint", "file_sha256", "check_policy_inputs", "load_checkpoint_for",
           "read_pt", "sb3_network", "CHECKPOINT_SUFFIXES", "PICKLE_SUFFIXES"]


# ------------------------------------------------------------------------ saving
def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@check_keywords
def save_checkpoint(path: str | os.PathLike[str], module: Any, *, architecture: Mapping[str, Any],
                    encoding: FeatureEncoding, metadata: Mapping[str, Any] | None = None) -> None:
    """Save ``module``'s weights with a JSON metadata block, atomically: ``.npz`` (read
    back without torch or pickle) or ``.pt`` (a torch state_dict).

    ``architecture``: e.g. ``{"type": "mlp", "input_dim": 9, "hidden": [64, 64],
    "activation": "tanh", "output_dim": 1}``.
    """
    where = Path(path)
    if not isinstance(encoding, FeatureEncoding) or not callable(getattr(module, "state_dict",
                                                                           None)):
        bad = ("encoding", encoding) if not isinstance(encoding, FeatureEncoding) else (
            "module", module)
        raise CheckpointError(f"checkpoint {where}: {bad[0]}: bad value {short(bad[1], 60)}; "
                              "give a torch module and a cf.FeatureEncoding (docs/checkpoints.md).")
    meta = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "architecture": dict(architecture),
        "encoding": encoding.to_dict(),
        "metadata": dict(metadata or {}),
    }
    try:
        text = json.dumps(meta)
    except (TypeError, ValueError) as exc:  # an object JSON cannot write: nothing written
        raise CheckpointError(f"checkpoint {where}: metadata: {exc}; give JSON values (text, "
                              "numbers, lists, dicts).") from None
    _, sizes, act, _, _ = validate_meta(json.loads(text), where)
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
        buffers = [k for k, _ in module.named_buffers() if k in raw]
        params = [tuple(v.shape) for k, v in raw.items() if k not in buffers]
        if buffers and params == shapes:  # the layers are right; the extra state is not
            raise CheckpointError(
                f"checkpoint {path}: the module holds buffers {short(buffers)} besides the "
                "declared layers' weights; a forward that normalises its input "
                "((x - mean) / std) declares that step in the encoding instead, "
                "FeatureEncoding(\"features\", names=..., mean=..., std=...) (std = the "
                "square root of a variance), with a module whose forward starts at its first "
                "Linear; other state (a BatchNorm's statistics) is not a checkpoint: audit the "
                "module in memory (cf.TorchPolicy, or a [policy] factory that returns it).")
        if [tuple(v.shape) for v in raw.values()] != shapes:
            raise CheckpointError(
                f"checkpoint {path}: weights do not match the declared architecture: the "
                f"module's state_dict holds {short({k: tuple(v.shape) for k, v in raw.items()})}, "
                f"the architecture (sizes {sizes}) declares weight and bias shapes {shapes} in "
                "layer order; declare the module's own layers, or copy its weights into "
                "cf.policies.checkpoint.mlp(...) with load_state_dict.")
        state = dict(zip(names, raw.values(), strict=True))
    layers = check_shapes(state, sizes, path)
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
            "forward is exactly that (logits out, no softmax); a forward that normalises its "
            "input first ((x - mean) / std) declares that step in the encoding instead, "
            "FeatureEncoding(\"features\", names=..., mean=..., std=...).")
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
#: The file suffixes :func:`load_checkpoint` reads (a new format adds its suffix here, and
#: its reader to :func:`load_checkpoint`); the policy resolver reads a value with one of
#: them as a checkpoint path.
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".npz", ".zip", ".safetensors")


def _refuse_pickle(path: Path) -> None:
    """Refuse a pickle / joblib file given as a checkpoint (a scikit-learn model): loading
    it would run whatever code it names, and a checkpoint never runs code."""
    if path.suffix.lower() in CHECKPOINT_SUFFIXES:
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


@check_keywords
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
            if path.is_dir() else f"{NOT_REGULAR}; give the checkpoint file" if path.exists()
            else "no such file") + ".")
    try:
        _refuse_pickle(path)
        suffix = path.suffix.lower()
        if suffix == ".zip":
            policy, meta = load_sb3_zip(path, activation)
        elif suffix == ".npz":
            policy, meta = _load_npz(path)
        else:
            policy, meta = _load_pt(path)
    except OSError as exc:  # a file that stat()s but does not read (permissions, EIO)
        raise CheckpointError(f"checkpoint {path}: cannot be read "
                              f"({exc.strerror or type(exc).__name__}).") from None
    choice = (meta.get("metadata") or {}).get("choice")
    if choice is not None:  # one unit per replica (causalfair.policies.choice)

        try:
            policy = ReplicaChoicePolicy(policy, int(choice["units"]),
                                         float(choice["nobody_logit"]), name=policy.name)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {path}: malformed metadata 'choice' ({exc}).") from None
    if model is not None:
        check_model_inputs(policy, model, source=str(path))
        _grid_check(policy, model, path)
    return policy, meta


def _load_npz(path: Path) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    where = f"checkpoint {path}"
    arrays = read_npz(path, where, CheckpointError, factor=NPZ_FACTOR,
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
        return population_policy(meta, arrays, path)
    arch, sizes, act, n_out, enc = validate_meta(meta, path)
    layers = check_shapes(arrays, sizes, path)
    for W, b in layers:
        if W.dtype.kind not in "fiu" or b.dtype.kind not in "fiu":
            raise CheckpointError(f"{where}: weights must be numeric arrays, got "
                                  f"{W.dtype} / {b.dtype}.")
        if not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise CheckpointError(f"{where}: weights contain NaN or inf.")
    name = meta["metadata"].get("name", path.stem)
    return NumpyMLPPolicy(layers, enc, activation=act, name=str(name)[:200],
                          source=str(path)), meta


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
        read_torch_zip(str(path), cap=MAX_PTH_BYTES, where=str(path))
    except TorchZipUnsupported as exc:
        name = str(exc)
        if name.startswith("torch.nn."):
            return (f"a whole pickled torch module, {name.rsplit('.', 1)[-1]}, as "
                    "torch.save(model) writes; only its weights can be read safely")
    except Exception:  # noqa: BLE001 - any other failure: the caller's own message
        return None
    return None


def read_pt(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The state_dict (numpy arrays) and metadata of a causalfair ``.pt`` checkpoint
    (``save_checkpoint``'s: a torch zip archive with ``state_dict`` and ``meta_json``),
    read within the limits of docs/limits.md and without running code
    (:func:`~causalfair.policies.torchzip.load_weights`); a :class:`CheckpointError`
    naming the file for anything else."""
    path = Path(path)
    with open(path, "rb") as fh:
        is_zip = fh.read(4) == b"PK\x03\x04"
    if not is_zip:  # torch's legacy format allocates what its pickle declares
        what = ("is a safetensors file: weights without the architecture and input encoding"
                if path.suffix.lower() == ".safetensors" else
                "cannot be loaded safely (not the zip archive torch.save writes)")
        raise CheckpointError(f"checkpoint {path}: {what}; " + _RESAVE)
    check_torch_archive(path, f"checkpoint {path}")

    try:
        payload = load_weights(str(path), cap=MAX_PTH_BYTES, where=f"checkpoint {path}")
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
            + "); " + (_RESAVE[:-1] + ", or audit your module in memory through a [policy] "
                       "factory = \"module:make\" (--policy module:make) whose make() builds "
                       "it, calls load_state_dict on this file and returns "
                       "cf.TorchPolicy(module, encoding)." if bare else _RESAVE))
    if not isinstance(payload["meta_json"], str):
        raise CheckpointError(f"checkpoint {path}: malformed metadata (meta_json is a "
                              f"{type(payload['meta_json']).__name__}, not a JSON string).")
    meta = read_json(payload["meta_json"], f"checkpoint {path}: meta_json", CheckpointError)
    state = payload["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        raise CheckpointError(f"checkpoint {path}: state_dict must map names to tensors.")
    return state, meta


def _load_pt(path: Path) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    state, meta = read_pt(path)
    arch, sizes, act, n_out, enc = validate_meta(meta, path)
    layers = [(W.astype(np.float32, copy=False), b.astype(np.float32, copy=False))
              for W, b in check_shapes(state, sizes, path)]
    for W, b in layers:
        if not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise CheckpointError(f"checkpoint {path}: weights contain NaN or inf.")
    name = meta["metadata"].get("name", path.stem)
    return NumpyMLPPolicy(layers, enc, activation=act, name=str(name)[:200],
                          source=str(path)), meta


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
    # its outputs, as its inputs: a network over another action set is refused here, at
    # every door, not when an engine first evaluates it (and never drawn by `graph`)
    have, want = getattr(pol, "n_actions", None), getattr(system, "n_actions", None)
    if isinstance(have, int) and isinstance(want, int) and have != want:
        raise CheckpointError(
            f"checkpoint {path}: chooses among {have} actions, but the system has {want} "
            f"({', '.join(map(str, getattr(getattr(system, 'decisions', None), 'labels', ())))}"
            "); a checkpoint trained on another setting of the system (its actions: e.g. "
            "--param logits, priorities, thresholds) runs only on that setting.")
    return pol, meta

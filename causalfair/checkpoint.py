"""Networks and checkpoints: MLP policies, their input encodings, and files that never
run code (docs/checkpoints.md).

Formats :func:`load_checkpoint` reads:

- ``.npz`` (written by :func:`save_checkpoint` for a ``.npz`` path): the weights as arrays
  plus a JSON metadata block, read with ``allow_pickle=False`` and evaluated in numpy
  (:class:`NumpyMLPPolicy`): loading and auditing import no torch at all;
- ``.pt`` (a ``.pt`` path): a torch ``state_dict`` plus the same metadata, read with
  ``torch.load(weights_only=True)``;
- ``.zip``: a stable-baselines3 model. Only its ``policy.pth`` weights (``weights_only``)
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
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import atomic_write_bytes
from causalfair.errors import CheckpointError, PolicyError
from causalfair.types import Observation, check_probs

__all__ = ["FeatureEncoding", "mlp", "TorchPolicy", "NumpyMLPPolicy", "save_checkpoint",
           "load_checkpoint", "file_sha256", "check_policy_inputs", "CHECKPOINT_FORMAT",
           "MAX_PARAMETERS"]

CHECKPOINT_FORMAT = "causalfair-checkpoint"
CHECKPOINT_VERSION = 2
#: Largest network a checkpoint may declare (parameters), checked before building it.
MAX_PARAMETERS = 50_000_000
_MAX_WIDTH = 1 << 16
_ACTIVATIONS = ("tanh", "relu")


def _cap(v: Any, n: int = 80) -> str:
    t = repr(v)
    return t if len(t) <= n else t[: n - 3] + "..."


# ------------------------------------------------------------------------- encodings
@dataclass(frozen=True)
class FeatureEncoding:
    """How an observation becomes the network input.

    ``onehot``: one-hot level (K) then one-hot group (G); width K + G.
    ``features``: the observation's feature matrix; width ``width_``; ``names`` the
    feature names it expects (recorded in checkpoints and checked against the system),
    ``mean``/``std`` an optional normalisation applied before the network,
    ``(x - mean) / std``.
    """

    name: str = "onehot"
    n_levels: int = 7
    n_groups: int = 2
    width_: int | None = None
    names: tuple[str, ...] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.name not in ("onehot", "features"):
            raise PolicyError(
                f"encoding: unknown name {_cap(self.name)}; allowed values: onehot, features.")
        if self.names is not None:
            object.__setattr__(self, "names", tuple(str(x) for x in self.names))
            if self.width_ is None:
                object.__setattr__(self, "width_", len(self.names))
        for key in ("mean", "std"):
            v = getattr(self, key)
            if v is not None:
                arr = tuple(float(x) for x in v)
                if self.width_ is not None and len(arr) != self.width_:
                    raise PolicyError(f"encoding {key}: expected {self.width_} values, got {len(arr)}.")
                if key == "std" and any(not x > 0 for x in arr):
                    raise PolicyError("encoding std: every value must be > 0.")
                object.__setattr__(self, key, arr)

    @property
    def width(self) -> int:
        if self.name == "onehot":
            return self.n_levels + self.n_groups
        if self.width_ is None:
            raise PolicyError("encoding 'features' needs width_ (number of features).")
        return self.width_

    def encode(self, obs: Observation) -> np.ndarray:
        if self.name == "onehot":
            if obs.level is None:
                raise PolicyError("encoding 'onehot' needs observation levels; the observation has none.")
            n = len(obs)
            out = np.zeros((n, self.width), dtype=np.float32)
            out[np.arange(n), obs.level] = 1.0
            out[np.arange(n), self.n_levels + np.asarray(obs.group)] = 1.0
            return out
        if obs.features is None:
            raise PolicyError("encoding 'features' needs observation features; the observation has none.")
        x = np.asarray(obs.features, dtype=np.float32)
        if self.mean is not None:
            x = x - np.asarray(self.mean, dtype=np.float32)
        if self.std is not None:
            x = x / np.asarray(self.std, dtype=np.float32)
        return x

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "n_levels": self.n_levels,
                             "n_groups": self.n_groups, "width": self.width}
        for key in ("names", "mean", "std"):
            if getattr(self, key) is not None:
                d[key] = list(getattr(self, key))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FeatureEncoding:
        return cls(name=d["name"], n_levels=int(d.get("n_levels", 7)),
                   n_groups=int(d.get("n_groups", 2)),
                   width_=int(d["width"]) if d.get("name") == "features" else None,
                   names=d.get("names"), mean=d.get("mean"), std=d.get("std"))


def check_policy_inputs(policy: Any, *, feature_names: Sequence[str] | None = None,
                        width: int | None = None, n_levels: int | None = None,
                        n_groups: int | None = None, source: str = "") -> None:
    """Refuse a policy whose inputs do not fit a system: one-hot encodings need the same
    levels x groups; feature encodings the same feature names (both lists named), or,
    where either side has no names, the same width."""
    enc = getattr(policy, "encoding", None)
    if not isinstance(enc, FeatureEncoding):
        return
    where = f"checkpoint {source}" if source else f"policy {getattr(policy, 'name', '?')!r}"
    if enc.name == "onehot":
        if n_levels is None:
            raise CheckpointError(
                f"{where}: reads one-hot levels ({enc.n_levels} levels x {enc.n_groups} groups), "
                f"but the system observes no levels (features: "
                f"{', '.join(feature_names) if feature_names else 'none'}); train a policy on "
                "the system's features.")
        if (enc.n_levels, enc.n_groups) != (n_levels, n_groups):
            raise CheckpointError(
                f"{where}: wrong input width: encoded for {enc.n_levels} levels x {enc.n_groups} "
                f"groups (width {enc.width}), but the system has {n_levels} levels x "
                f"{n_groups} groups (width {n_levels + (n_groups or 0)}).")
        return
    sys_width = len(feature_names) if feature_names is not None else width
    if enc.names is not None and feature_names is not None:
        if tuple(enc.names) != tuple(feature_names):
            raise CheckpointError(
                f"{where}: reads features [{', '.join(enc.names)}] but the system gives "
                f"[{', '.join(feature_names)}]; retrain or wrap the policy to map one onto "
                "the other.")
    elif sys_width is not None and enc.width != sys_width:
        raise CheckpointError(
            f"{where}: reads {enc.width} features but the system gives {sys_width}"
            f"{' (' + ', '.join(feature_names) + ')' if feature_names else ''}.")


# ---------------------------------------------------------------------- networks
def mlp(input_dim: int, hidden: Sequence[int] = (64, 64), output_dim: int = 1,
        activation: str = "tanh"):
    """The MLP architecture checkpoints describe: Linear-act-...-Linear(output_dim)."""
    import torch.nn as nn

    acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
    if activation not in acts:
        raise PolicyError(f"activation: unknown {_cap(activation)}; allowed values: tanh, relu.")
    layers: list[Any] = []
    prev = input_dim
    for h in hidden:
        layers += [nn.Linear(prev, int(h)), acts[activation]()]
        prev = int(h)
    layers.append(nn.Linear(prev, output_dim))
    return nn.Sequential(*layers)


def _probs_from_outputs(out: np.ndarray, output: str, where: str) -> np.ndarray:
    """(n, A) action distributions from network outputs (float64)."""
    if out.ndim == 1:
        out = out[:, None]
    if out.shape[1] == 1:
        p = out[:, 0] if output == "probs" else 1.0 / (1.0 + np.exp(-out[:, 0]))
        return np.stack([1.0 - p, p], axis=1)
    if output == "probs":
        return out
    z = out - out.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


class _MLPPolicyBase:
    encoding: FeatureEncoding
    output: str
    name: str
    source: str | None

    def _where(self) -> str:
        return f"checkpoint {self.source}" if self.source else f"policy {self.name!r}"

    def _outputs(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def action_probs(self, obs: Observation) -> np.ndarray:
        x = self.encoding.encode(obs)
        probs = _probs_from_outputs(self._outputs(x), self.output, self._where())
        if not np.isfinite(probs).all():
            raise PolicyError(f"{self._where()}: returned NaN or inf probabilities.")
        return probs

    @property
    def n_actions(self) -> int:
        return max(2, self._n_out)

    def prob_d1(self, obs: Observation) -> np.ndarray:
        probs = self.action_probs(obs)
        if probs.shape[1] != 2:
            raise PolicyError(
                f"{self._where()}: has {probs.shape[1]} actions; use action_probs(obs).")
        return check_probs(probs[:, 1], len(obs), self._where())


class TorchPolicy(_MLPPolicyBase):
    """Adapter for a ``torch.nn.Module`` mapping encoded features to one logit
    (P(d1) = sigmoid), or A logits (softmax over actions); ``output="probs"`` when the
    module already returns probabilities."""

    def __init__(self, module: Any, encoding: FeatureEncoding | None = None, *,
                 output: str = "logits", name: str = "torch", source: str | None = None):
        if output not in ("logits", "probs"):
            raise PolicyError(f"output: unknown {output!r}; allowed values: logits, probs.")
        self.module = module
        self.encoding = encoding or FeatureEncoding()
        self.output = output
        self.name = name
        self.source = source
        last = [m for m in getattr(module, "modules", lambda: [])() if hasattr(m, "out_features")]
        self._n_out = int(last[-1].out_features) if last else 1

    def _outputs(self, x: np.ndarray) -> np.ndarray:
        import torch

        t = torch.from_numpy(np.ascontiguousarray(x))
        try:
            with torch.no_grad():
                out = self.module(t)
        except RuntimeError as exc:
            raise PolicyError(
                f"{self._where()}: the network rejected input of width {x.shape[1]} "
                f"(encoding {self.encoding.name!r}): {str(exc).splitlines()[0]}") from None
        return out.double().numpy()

    def __repr__(self) -> str:
        return f"TorchPolicy(name={self.name!r}, encoding={self.encoding.name!r})"


#: Rows per block of :class:`NumpyMLPPolicy`'s forward pass. Each block is one product with
#: one BLAS thread, and blocks run on the process's BLAS thread count: OpenBLAS's
#: multi-threaded sgemm rounds some rows differently from its one-thread kernel, so this
#: is what keeps the outputs bit-identical whatever the thread count (tests/test_checkpoint.py).
_BLOCK_ROWS = 8192
_BLAS: list[Any] = []  # the threadpoolctl controller, made on first use (200 us)


def _run_blocks(fn: Any, starts: range) -> None:
    """``fn(start)`` for every block, on as many Python threads as BLAS may use (numpy
    releases the GIL in products and ufuncs), each with one BLAS thread."""
    from threadpoolctl import ThreadpoolController

    if not _BLAS:
        _BLAS.append(ThreadpoolController())
    blas = _BLAS[0].select(user_api="blas")
    threads = min(len(starts), max([i["num_threads"] for i in blas.info()] + [1]))
    with blas.limit(limits=1):
        if threads <= 1:
            for s in starts:
                fn(s)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(fn, starts))


class NumpyMLPPolicy(_MLPPolicyBase):
    """An MLP evaluated in numpy (float32 products, as torch's): weights ``[(W, b), ...]``
    with ``W`` of shape (out, in); ``activation`` between layers."""

    def __init__(self, layers: Sequence[tuple[np.ndarray, np.ndarray]], encoding: FeatureEncoding,
                 *, activation: str = "tanh", output: str = "logits", name: str = "mlp",
                 source: str | None = None):
        if activation not in _ACTIVATIONS:
            raise PolicyError(f"activation: unknown {_cap(activation)}; allowed values: tanh, relu.")
        self.layers = [(np.ascontiguousarray(W.T, dtype=np.float32),
                        np.asarray(b, dtype=np.float32)) for W, b in layers]
        self.encoding, self.activation, self.output = encoding, activation, output
        self.name, self.source = name, source
        self._n_out = int(self.layers[-1][0].shape[1])

    def _outputs(self, x: np.ndarray) -> np.ndarray:
        if x.shape[1] != self.layers[0][0].shape[0]:
            raise PolicyError(
                f"{self._where()}: the network takes {self.layers[0][0].shape[0]} inputs, the "
                f"encoding gave {x.shape[1]}.")
        x = np.asarray(x, dtype=np.float32)
        out = np.empty((len(x), self._n_out), dtype=np.float32)
        last = len(self.layers) - 1

        def forward(start: int) -> None:
            h = x[start:start + _BLOCK_ROWS]
            for i, (Wt, b) in enumerate(self.layers):
                h = h @ Wt
                h += b
                if i < last:
                    if self.activation == "tanh":
                        np.tanh(h, out=h)
                    else:
                        np.maximum(h, 0.0, out=h)
            out[start:start + len(h)] = h

        _run_blocks(forward, range(0, len(x), _BLOCK_ROWS))
        return out.astype(np.float64)

    def outputs(self, x: np.ndarray) -> np.ndarray:
        """The network's raw outputs (n, out) as float64, for inputs x (n, in)."""
        return self._outputs(np.asarray(x))

    def to_torch(self) -> Any:
        """The same network as a ``torch.nn.Sequential`` (for training)."""
        import torch

        hidden = [Wt.shape[1] for Wt, _ in self.layers[:-1]]
        net = mlp(self.layers[0][0].shape[0], hidden, self._n_out, self.activation)
        lin = [m for m in net if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            for m, (Wt, b) in zip(lin, self.layers, strict=True):
                m.weight.copy_(torch.from_numpy(Wt.T.copy()))
                m.bias.copy_(torch.from_numpy(b.copy()))
        return net

    def __repr__(self) -> str:
        return f"NumpyMLPPolicy(name={self.name!r}, encoding={self.encoding.name!r})"


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
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    if Path(path).suffix.lower() == ".npz":
        arrays = {k: v.numpy() for k, v in state.items()}
        arrays["meta_json"] = np.array(json.dumps(meta, sort_keys=True))
        atomic_write_bytes(path, lambda fh: np.savez(fh, **arrays))
        return
    import torch

    payload = {"meta_json": json.dumps(meta, sort_keys=True), "state_dict": state}
    atomic_write_bytes(path, lambda fh: torch.save(payload, fh))


# ------------------------------------------------------------------------ loading
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
        raise CheckpointError(f"checkpoint {path}: metadata {where}.{key}: bad value {_cap(v)}.")
    if not isinstance(v, kind):
        raise CheckpointError(
            f"checkpoint {path}: metadata {where}.{key}: bad value {_cap(v)} (expected "
            f"{getattr(kind, '__name__', kind)}).")
    return v


def _validate_meta(meta: Any, path: Path) -> tuple[dict[str, Any], list[int], str, int,
                                                   FeatureEncoding]:
    """(architecture, layer sizes [in, h1, ..., out], activation, n_out, encoding)."""
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path}: metadata must be a JSON object.")
    fmt = meta.get("format")
    if fmt != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path}: format {_cap(fmt)} is not {CHECKPOINT_FORMAT!r}.")
    arch = _field(meta, "architecture", dict, path, "")
    if arch.get("type") != "mlp":
        raise CheckpointError(
            f"checkpoint {path}: architecture type {_cap(arch.get('type'))} is unknown; allowed: "
            "mlp (and population, seed 002's agents, in .npz files). For other architectures "
            "build the module yourself and wrap it in TorchPolicy.")
    ind = _field(arch, "input_dim", int, path, "architecture")
    hidden = _field(arch, "hidden", (list, tuple), path, "architecture", [64, 64])
    out = _field(arch, "output_dim", int, path, "architecture", 1)
    act = _field(arch, "activation", str, path, "architecture", "tanh")
    sizes = [ind, *hidden, out]
    if not all(isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= _MAX_WIDTH
               for h in sizes):
        raise CheckpointError(
            f"checkpoint {path}: metadata architecture: layer sizes {_cap(sizes)} must be "
            f"integers in [1, {_MAX_WIDTH}].")
    n_params = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))
    if n_params > MAX_PARAMETERS:
        raise CheckpointError(
            f"checkpoint {path}: declares {n_params} parameters, over the limit of "
            f"{MAX_PARAMETERS}; refused before building the network.")
    if act not in _ACTIVATIONS:
        raise CheckpointError(f"checkpoint {path}: metadata architecture.activation: bad value "
                              f"{_cap(act)}; allowed values: tanh, relu.")
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
                                  f"{_cap(name)}; allowed values: onehot, features.")
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


def load_checkpoint(path: str | os.PathLike[str], model: Any = None, *,
                    activation: str = "tanh") -> tuple[Any, dict[str, Any]]:
    """Load a checkpoint (``.npz``, ``.pt`` or a stable-baselines3 ``.zip``; see the module
    docstring): (policy, metadata). No file runs code. With ``model`` (a TabularModel),
    also check the input width and that the policy yields probabilities on every
    (group, level). ``activation``: the hidden activation of an SB3 model (its
    ``policy_kwargs`` are pickled, so they are not read; SB3's default is tanh)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path}: no such file.")
    suffix = path.suffix.lower()
    if suffix == ".zip":
        policy, meta = _load_sb3_zip(path, activation)
    elif suffix == ".npz":
        policy, meta = _load_npz(path)
    else:
        policy, meta = _load_pt(path)
    choice = (meta.get("metadata") or {}).get("choice")
    if choice is not None:  # one unit per replica (causalfair.choice)
        from causalfair.choice import ReplicaChoicePolicy

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
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as z:
            if "meta_json" not in z.files:
                raise CheckpointError(f"checkpoint {path}: not a causalfair checkpoint (no "
                                      "meta_json); save it with causalfair.save_checkpoint.")
            meta = json.loads(str(z["meta_json"]))
            arrays = {k: z[k] for k in z.files if k != "meta_json"}
            if isinstance(meta, dict) and isinstance(meta.get("architecture"), dict) \
                    and meta["architecture"].get("type") == "population":
                from causalfair.train.population import policy_from_checkpoint

                return policy_from_checkpoint(meta, arrays, path)
            arch, sizes, act, n_out, enc = _validate_meta(meta, path)
            shapes = arrays
    except CheckpointError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, AttributeError,
            TypeError) as exc:
        raise CheckpointError(
            f"checkpoint {path}: cannot be read without pickle ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:120] if str(exc) else ''}).") from None
    layers = _check_shapes(shapes, sizes, path)
    for W, b in layers:
        if not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise CheckpointError(f"checkpoint {path}: weights contain NaN or inf.")
    name = meta["metadata"].get("name", path.stem)
    return NumpyMLPPolicy(layers, enc, activation=act, name=str(name)[:200],
                          source=str(path)), meta


def _load_pt(path: Path) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    import torch

    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot load"
        raise CheckpointError(
            f"checkpoint {path}: cannot be loaded safely ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:120] if str(exc) else ''}); causalfair loads checkpoints "
            "with weights_only=True and reads files written by causalfair.save_checkpoint.") from None
    if not isinstance(payload, dict) or "meta_json" not in payload or "state_dict" not in payload:
        raise CheckpointError(
            f"checkpoint {path}: not a causalfair checkpoint (expected keys meta_json and "
            "state_dict); save it with causalfair.save_checkpoint.")
    try:
        meta = json.loads(payload["meta_json"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path}: malformed metadata ({exc}).") from None
    arch, sizes, act, n_out, enc = _validate_meta(meta, path)
    state = payload["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"checkpoint {path}: state_dict must map names to tensors.")
    layers = [(W.detach().to(torch.float32).numpy(), b.detach().to(torch.float32).numpy())
              for W, b in _check_shapes(state, sizes, path)]
    for W, b in layers:
        if not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise CheckpointError(f"checkpoint {path}: weights contain NaN or inf.")
    name = meta["metadata"].get("name", path.stem)
    return NumpyMLPPolicy(layers, enc, activation=act, name=str(name)[:200],
                          source=str(path)), meta


def _load_sb3_zip(path: Path, activation: str) -> tuple[NumpyMLPPolicy, dict[str, Any]]:
    """A stable-baselines3 PPO/A2C policy with a Discrete action space: the weights of
    ``policy.pth`` (weights_only) through ``mlp_extractor.policy_net`` and ``action_net``;
    the plain JSON fields of ``data`` for the observation and action space sizes."""
    import torch

    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            if "policy.pth" not in names:
                raise CheckpointError(f"checkpoint {path}: not a stable-baselines3 model (no "
                                      "policy.pth in the archive).")
            info = zf.getinfo("policy.pth")
            if info.file_size > 8 * MAX_PARAMETERS:
                raise CheckpointError(f"checkpoint {path}: policy.pth is too large "
                                      f"({info.file_size} bytes).")
            raw = io.BytesIO(zf.read("policy.pth"))
            state = torch.load(raw, map_location="cpu", weights_only=True)
            data = json.loads(zf.read("data").decode("utf-8")) if "data" in names else {}
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken archive
        raise CheckpointError(
            f"checkpoint {path}: cannot be read as a stable-baselines3 model without unpickling "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}).") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path}: policy.pth is not a state dict.")
    pre = "mlp_extractor.policy_net."
    idx = sorted({int(k[len(pre):].split(".")[0]) for k in state if k.startswith(pre)})
    layers = [(state[f"{pre}{i}.weight"], state[f"{pre}{i}.bias"]) for i in idx]
    if "action_net.weight" not in state:
        raise CheckpointError(f"checkpoint {path}: no action_net in policy.pth (a Discrete "
                              "action space is needed).")
    layers.append((state["action_net.weight"], state["action_net.bias"]))
    sizes = [int(layers[0][0].shape[1])] + [int(W.shape[0]) for W, _ in layers]
    n_params = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))
    if n_params > MAX_PARAMETERS:
        raise CheckpointError(f"checkpoint {path}: {n_params} parameters, over the limit of "
                              f"{MAX_PARAMETERS}.")
    for (W, b), (a, o) in zip(layers, zip(sizes[:-1], sizes[1:], strict=False), strict=True):
        if tuple(W.shape) != (o, a) or tuple(b.shape) != (o,):
            raise CheckpointError(f"checkpoint {path}: inconsistent layer shapes in policy.pth.")
    obs_space = data.get("observation_space", {}) if isinstance(data, dict) else {}
    shape = obs_space.get("_shape") or obs_space.get("shape") if isinstance(obs_space, dict) else None
    if shape is not None and int(np.prod(shape)) != sizes[0]:
        raise CheckpointError(f"checkpoint {path}: observation space {shape} does not match the "
                              f"network's {sizes[0]} inputs.")
    enc = FeatureEncoding("features", width_=sizes[0])
    meta = {"format": "stable-baselines3", "architecture": {
        "type": "mlp", "input_dim": sizes[0], "hidden": sizes[1:-1], "output_dim": sizes[-1],
        "activation": activation}, "encoding": enc.to_dict(),
        "metadata": {"name": path.stem, "n_actions": sizes[-1]}}
    return NumpyMLPPolicy([(W.numpy(), b.numpy()) for W, b in layers], enc, activation=activation,
                          name=path.stem, source=str(path)), meta

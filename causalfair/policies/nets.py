"""The policy networks behind checkpoints: input encodings, the MLP architecture, and
two evaluators (:class:`TorchPolicy` for a module in memory, :class:`NumpyMLPPolicy` for
weights as arrays, bit-identical under any thread count). :mod:`causalfair.policies.checkpoint`
saves and loads them (docs/checkpoints.md)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causalfair._validation import check_keywords
from causalfair.errors import CheckpointError, PolicyError, ResourceLimitError, first_line, short
from causalfair.types import Observation, check_probs

__all__ = ["FeatureEncoding", "mlp", "TorchPolicy", "NumpyMLPPolicy", "DevicePolicy", "on_device",
           "check_policy_inputs", "check_model_inputs"]

ACTIVATIONS = ("tanh", "relu")


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
                f"encoding: unknown name {short(self.name)}; allowed values: onehot, features.")
        for key in ("n_levels", "n_groups", "width_"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                  or v < 1):
                raise PolicyError(f"encoding {key}: must be an integer >= 1, got {short(v)}.")
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
                raise PolicyError(
                    "encoding 'onehot' needs observation levels; the observation has none: a "
                    "network over the observation's features takes cf.FeatureEncoding("
                    "\"features\", names=(...)), the system's feature names in order.")
            n = len(obs)
            out = np.zeros((n, self.width), dtype=np.float32)
            out[np.arange(n), obs.level] = 1.0
            out[np.arange(n), self.n_levels + np.asarray(obs.group)] = 1.0
            return out
        if obs.features is None:
            reads = f" [{', '.join(self.names)}]" if self.names else ""
            raise PolicyError(
                f"the policy reads a feature vector{reads} (encoding 'features'), but the "
                "system's observations carry no features (only groups and levels); audit it "
                "on the system it was trained on, or use a policy over levels (a one-hot "
                "checkpoint, a built-in).")
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


# a mistyped keyword: one error naming it and the fix (check_keywords)
FeatureEncoding.__init__ = check_keywords(FeatureEncoding.__init__, name="FeatureEncoding")  # type: ignore


def check_policy_inputs(policy: Any, *, feature_names: Sequence[str] | None = None,
                        width: int | None = None, n_levels: int | None = None,
                        n_groups: int | None = None, source: str = "",
                        target: str = "system") -> None:
    """Refuse a policy whose inputs do not fit a system: one-hot encodings need the same
    levels x groups; feature encodings the same feature names (both lists named), or,
    where either side has no names, the same width."""
    enc = getattr(policy, "encoding", None)
    if not isinstance(enc, FeatureEncoding):
        return
    where = f"checkpoint {source}" if source else f"policy {getattr(policy, 'name', '?')!r}"
    if enc.name == "onehot":
        if n_levels is None:
            names = ", ".join(f'"{x}"' for x in feature_names or ()) + (
                "," if feature_names and len(feature_names) == 1 else "")
            fix = (f"train a policy on the {target}'s features" if source or not feature_names else
                   f'a network over them takes cf.FeatureEncoding("features", names=({names}))')
            raise CheckpointError(
                f"{where}: reads one-hot levels ({enc.n_levels} levels x {enc.n_groups} groups), "
                f"but the {target} observes no levels (features: "
                f"{', '.join(feature_names) if feature_names else 'none'}); {fix}.")
        if (enc.n_levels, enc.n_groups) != (n_levels, n_groups):
            raise CheckpointError(
                f"{where}: wrong input width: encoded for {enc.n_levels} levels x {enc.n_groups} "
                f"groups (width {enc.width}), but the {target} has {n_levels} levels x "
                f"{n_groups} groups (width {n_levels + (n_groups or 0)}).")
        return
    sys_width = len(feature_names) if feature_names is not None else width
    if enc.names is not None and feature_names is not None:
        if tuple(enc.names) != tuple(feature_names):
            raise CheckpointError(
                f"{where}: reads features [{', '.join(enc.names)}] but the {target} gives "
                f"[{', '.join(feature_names)}]; retrain or wrap the policy to map one onto "
                "the other.")
    elif sys_width is not None and enc.width != sys_width:
        raise CheckpointError(
            f"{where}: reads {enc.width} features but the {target} gives {sys_width}"
            f"{' (' + ', '.join(feature_names) + ')' if feature_names else ''}.")


def check_model_inputs(policy: Any, model: Any, source: str = "") -> None:
    """:func:`check_policy_inputs` against a tabular model's grid (its levels x groups, and
    its features where it has them): what the exact engine, :func:`policy_table` and a
    checkpoint loaded for a model check, as a System's policy is checked."""
    feats = getattr(model, "features", None)
    check_policy_inputs(policy, n_levels=model.n_levels, n_groups=model.n_groups,
                        feature_names=getattr(model, "feature_names", None),
                        width=None if feats is None else feats.shape[2], source=source,
                        target="model")


# ---------------------------------------------------------------------- networks
def mlp(input_dim: int, hidden: Sequence[int] = (64, 64), output_dim: int = 1,
        activation: str = "tanh"):
    """The MLP architecture checkpoints describe: Linear-act-...-Linear(output_dim)."""
    import torch.nn as nn

    acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
    if activation not in acts:
        raise PolicyError(f"activation: unknown {short(activation)}; allowed values: tanh, relu.")
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
        p = out[:, 0]
        if output != "probs":  # 1 / (1 + exp(-x)), in one array
            p = np.negative(p)
            np.exp(p, out=p)
            p += 1.0
            np.divide(1.0, p, out=p)
        probs = np.empty((len(p), 2), dtype=np.result_type(p, 1.0))
        probs[:, 1] = p
        np.subtract(1.0, p, out=probs[:, 0])
        return probs
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

    def spec_label(self) -> str:
        return f"checkpoint {self.source}" if self.source else f"policy {self.name!r}"

    def _outputs(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def action_probs(self, obs: Observation) -> np.ndarray:
        x = self.encoding.encode(obs)
        probs = _probs_from_outputs(self._outputs(x), self.output, self.spec_label())
        if not np.isfinite(probs).all():
            raise PolicyError(f"{self.spec_label()}: returned NaN or inf probabilities.")
        return probs

    @property
    def n_actions(self) -> int:
        return max(2, self._n_out)

    def prob_d1(self, obs: Observation) -> np.ndarray:
        probs = self.action_probs(obs)
        if probs.shape[1] != 2:
            raise PolicyError(
                f"{self.spec_label()}: has {probs.shape[1]} actions; use action_probs(obs).")
        return check_probs(probs[:, 1], len(obs), self.spec_label())


def _last_layer(module: Any) -> Any:
    """The layer a ``torch.nn.Sequential`` (nested ones followed to their end) applies
    last; None for any other module, whose forward may apply its layers in any order."""
    if type(module).__name__ != "Sequential":
        return None
    while type(module).__name__ == "Sequential" and len(module):
        module = module[-1]
    return None if type(module).__name__ == "Sequential" else module


def _training_mode_layer(module: Any) -> str | None:
    """The class name of a layer of ``module`` in training mode whose output is then random
    or depends on the batch (dropout, batch normalisation), or None."""
    nn = getattr(sys.modules.get("torch"), "nn", None)
    modules = getattr(module, "modules", None)
    if nn is None or not callable(modules):
        return None
    kinds = tuple(k for k in (getattr(nn.modules.dropout, "_DropoutNd", None),
                              getattr(nn.modules.batchnorm, "_BatchNorm", None)) if k)
    for m in modules():
        if getattr(m, "training", False) and isinstance(m, kinds):
            return type(m).__name__
    return None


class TorchPolicy(_MLPPolicyBase):
    """Adapter for a ``torch.nn.Module`` mapping encoded features to one logit
    (P(d1) = sigmoid), or A logits (softmax over actions); ``output="probs"`` when the
    module already returns probabilities."""

    @check_keywords(name="TorchPolicy")
    def __init__(self, module: Any, encoding: FeatureEncoding | None = None, *,
                 output: str = "logits", name: str = "torch", source: str | None = None):
        if output not in ("logits", "probs"):
            raise PolicyError(f"output: unknown {output!r}; allowed values: logits, probs.")
        if not callable(module):
            raise PolicyError(f"policy {name!r}: module: got {type(module).__name__} "
                              f"{short(module)}, not a torch module (or a callable on a "
                              "float32 tensor of encoded observations).")
        last = _last_layer(module)
        if output == "logits" and type(last).__name__ in ("Sigmoid", "Softmax"):
            raise PolicyError(
                f"policy {name!r}: the module ends in {type(last).__name__}, so its outputs are "
                "probabilities, not logits (read as logits they would be squashed twice); "
                "say so: output='probs' (cf.as_policy(module, system, output='probs'), in a "
                "spec [policy] output = \"probs\").")
        random = _training_mode_layer(module)
        if random is not None:
            raise PolicyError(
                f"policy {name!r}: the module is in training mode and has a {random} layer, "
                "which then draws random numbers (or reads the batch) at every call: the "
                "same seed would give other numbers; call module.eval() before auditing it "
                "(the deployed policy's behaviour).")
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
        param = next(iter(getattr(self.module, "parameters", lambda: ())()), None)
        if param is not None and param.device.type != "cpu":  # a module left on a GPU
            t = t.to(param.device)
        try:
            with torch.no_grad():
                out = self.module(t)
        except RuntimeError as exc:
            raise PolicyError(
                f"{self.spec_label()}: the network rejected input of width {x.shape[1]} "
                f"(encoding {self.encoding.name!r}): {first_line(str(exc))}") from None
        return out.double().cpu().numpy()

    def __repr__(self) -> str:
        return f"TorchPolicy(name={self.name!r}, encoding={self.encoding.name!r})"


#: Rows per block of :class:`NumpyMLPPolicy`'s forward pass. Each block is one product with
#: one BLAS thread, and blocks run on the process's BLAS thread count: OpenBLAS's
#: multi-threaded sgemm rounds some rows differently from its one-thread kernel, so this
#: is what keeps the outputs bit-identical whatever the thread count
#: (tests/policies/test_checkpoint.py).
_BLOCK_ROWS = 8192
_BLAS: list[Any] = []  # threadpoolctl's controller of BLAS, made on first use (200 us)


def _run_blocks(fn: Any, starts: range) -> None:
    """``fn(start)`` for every block, on as many Python threads as BLAS may use (numpy
    releases the GIL in products and ufuncs), each with one BLAS thread (where BLAS runs
    one thread already, as in the engines' tasks, without setting it again)."""
    if not _BLAS:
        from threadpoolctl import ThreadpoolController

        _BLAS.append(ThreadpoolController().select(user_api="blas"))
    blas = _BLAS[0]
    most = max([c.num_threads for c in blas.lib_controllers] + [1])
    if most <= 1:
        for s in starts:
            fn(s)
        return
    threads = min(len(starts), most)
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
        if activation not in ACTIVATIONS:
            raise PolicyError(f"activation: unknown {short(activation)}; allowed values: tanh, relu.")
        self.layers = [(np.ascontiguousarray(W.T, dtype=np.float32),
                        np.asarray(b, dtype=np.float32)) for W, b in layers]
        self.encoding, self.activation, self.output = encoding, activation, output
        self.name, self.source = name, source
        self._n_out = int(self.layers[-1][0].shape[1])

    def _outputs(self, x: np.ndarray) -> np.ndarray:
        if x.shape[1] != self.layers[0][0].shape[0]:
            raise PolicyError(
                f"{self.spec_label()}: the network takes {self.layers[0][0].shape[0]} inputs, the "
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

    def to_torch(self, n_out: int | None = None) -> Any:
        """The same network as a ``torch.nn.Sequential`` (for training); ``n_out=1`` of a
        network with two logits (an SB3 policy over Discrete(2)) gives the one logit of
        P(d1), l1 - l0 (softmax of [l0, l1] is sigmoid(l1 - l0))."""
        import torch

        layers = self.layers
        if n_out == 1 and self._n_out == 2:
            Wt, b = layers[-1]
            layers = [*layers[:-1], (Wt[:, 1:] - Wt[:, :1], b[1:] - b[:1])]
        hidden = [Wt.shape[1] for Wt, _ in layers[:-1]]
        net = mlp(layers[0][0].shape[0], hidden, layers[-1][0].shape[1], self.activation)
        lin = [m for m in net if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            for m, (Wt, b) in zip(lin, layers, strict=True):
                m.weight.copy_(torch.from_numpy(Wt.T.copy()))
                m.bias.copy_(torch.from_numpy(b.copy()))
        return net

    def __repr__(self) -> str:
        return f"NumpyMLPPolicy(name={self.name!r}, encoding={self.encoding.name!r})"


#: Most float32 values (64 MiB) one layer's activations may hold in one forward chunk of
#: :class:`DevicePolicy`: a batch is cut into chunks of this many values' worth of rows of
#: the network's widest layer (at least 1024 rows), so device memory and each thread's
#: pinned host buffer stay bounded whatever the engine's batch size (the default batch
#: of 65,536 through a 256-wide MLP is one chunk).
_DEVICE_CHUNK_VALUES = 1 << 24


class DevicePolicy(_MLPPolicyBase):
    """An MLP policy (:class:`TorchPolicy` or :class:`NumpyMLPPolicy`) whose forward pass
    runs on a torch device (a GPU): a copy of its network lives there, each chunk of
    encoded inputs goes through one host buffer per thread (pinned memory for a GPU) and
    crosses once, and the outputs come back once. On ``"cpu"`` the same code runs with
    an unpinned buffer (what the tests exercise where there is no GPU). The simulator
    stays on the CPU. Outputs agree with the CPU's to float32 rounding and repeat run to
    run on the same device; ``base`` is the policy it was made from (what it pickles as)."""

    def __init__(self, policy: TorchPolicy | NumpyMLPPolicy, device: str):
        import copy
        import threading

        import torch

        self.base = policy
        self.encoding, self.output = policy.encoding, policy.output
        self.name, self.source, self._n_out = policy.name, policy.source, policy._n_out
        # a checkpoint's MLP is float32 whatever torch's default dtype; a module keeps its own
        net = policy.to_torch().float() if isinstance(policy, NumpyMLPPolicy) else \
            copy.deepcopy(policy.module)
        self.device = torch.device(device)
        self.module = net.to(self.device).eval()
        widest = max([1] + [int(getattr(m, a, 0)) for m in self.module.modules()
                            for a in ("in_features", "out_features")])
        #: rows per forward chunk (:data:`_DEVICE_CHUNK_VALUES`)
        self.chunk_rows = max(1024, _DEVICE_CHUNK_VALUES // widest)
        self._local = threading.local()

    def _buffer(self, rows: int, shape: tuple[int, ...]) -> Any:
        """This thread's host buffer of at least ``rows`` float32 rows of ``shape`` (pinned
        for a GPU), made on first use and when a batch outgrows it."""
        import torch

        buf = getattr(self._local, "buf", None)
        if buf is None or buf.shape[0] < rows or tuple(buf.shape[1:]) != shape:
            buf = torch.empty((max(rows, 1), *shape), dtype=torch.float32,
                              pin_memory=self.device.type == "cuda")
            self._local.buf = buf
        return buf

    def _outputs(self, x: np.ndarray) -> np.ndarray:
        import torch

        x = np.ascontiguousarray(x, dtype=np.float32)
        n, step = x.shape[0], self.chunk_rows
        buf = self._buffer(min(n, step), tuple(x.shape[1:]))
        parts = []
        for start in range(0, max(n, 1), step):
            rows = x[start:start + step]
            host = buf[:len(rows)]
            host.numpy()[...] = rows
            try:
                with torch.inference_mode():
                    out = self.module(host.to(self.device, non_blocking=True))
                # a blocking copy back: it waits for the stream, so the host-to-device copy
                # has finished and the buffer may be refilled by the next chunk (double()
                # makes a new tensor, also on the CPU where an output may view the buffer)
                parts.append(out.double().to("cpu").numpy())
            except torch.cuda.OutOfMemoryError as exc:
                raise ResourceLimitError(
                    f"{self.spec_label()}: the network's forward on {self.device} ran out of "
                    f"device memory for {len(rows):,} rows ({first_line(str(exc))[:120]}); "
                    "free the GPU (other processes, e.g. gate --jobs workers, hold their own "
                    "copies), use fewer jobs, or --device cpu.") from None
            except RuntimeError as exc:
                raise PolicyError(
                    f"{self.spec_label()}: the network rejected input of width {x.shape[1]} on "
                    f"{self.device} (encoding {self.encoding.name!r}): "
                    f"{first_line(str(exc))}") from None
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def __reduce__(self) -> tuple[Any, tuple[Any, str]]:
        return on_device, (self.base, str(self.device))

    def __repr__(self) -> str:
        return f"DevicePolicy({self.base!r}, device={str(self.device)!r})"


def on_device(policy: Any, device: str = "cpu") -> Any:
    """``policy`` with its forward pass on ``device`` (a resolved torch device name,
    :func:`causalfair.backends.resolve_device`): a :class:`DevicePolicy` for a
    :class:`TorchPolicy` or :class:`NumpyMLPPolicy` and a device other than the CPU; any
    other policy, or ``"cpu"``, as it is (the CPU path is unchanged)."""
    if str(device) == "cpu" or isinstance(policy, DevicePolicy) \
            or not isinstance(policy, (TorchPolicy, NumpyMLPPolicy)) \
            or getattr(policy, "obs_fn", None) is not None:
        return policy
    return DevicePolicy(policy, device)

"""A torch-free reader of the weights-only subset of torch's checkpoint format: what
``torch.save`` writes for a dict of tensors (a ``state_dict``) and plain Python values, read
into numpy arrays with the guarantee of ``torch.load(weights_only=True)`` (docs/checkpoints.md).

The format: a zip archive of ``<prefix>/data.pkl`` (a pickle), ``<prefix>/data/<key>`` (each
storage's raw bytes) and ``<prefix>/byteorder`` (``little``/``big``; absent: little). The
pickle's globals map to stand-ins (:data:`_ALLOWED`): ``collections.OrderedDict``,
``torch._utils._rebuild_tensor_v2`` / ``_rebuild_parameter``, storage classes and dtypes,
``builtins.set``, ``_codecs.encode``. Storages come as persistent ids ``('storage', <type>,
key, location, numel)``, each read when first named; a tensor is the ``(offset, size,
stride)`` view of its storage, copied (C order, native byte order; bfloat16 widened to
float32, exactly). Nothing else is imported or called: a name outside torch (``os.system``,
``builtins.eval``) is refused (:class:`TorchZipError`); a torch name outside this subset
(``torch.Size``, complex, quantised or sparse tensors) makes :func:`load_weights` fall back
to ``torch.load(weights_only=True)`` and its own allow-list.
"""

from __future__ import annotations

import io
import math
import pickle
import zipfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from causalfair._limits import check_memory
from causalfair._safe_read import open_zip, read_member
from causalfair.errors import CheckpointError, ResourceLimitError

__all__ = ["TorchZipError", "TorchZipUnsupported", "read_torch_zip", "load_weights"]

#: numpy element type of each torch element type (storage class stem and dtype name);
#: bfloat16 is read as its 16-bit pattern and widened to float32.
_TYPES = {"Double": "f8", "Float": "f4", "Half": "f2", "BFloat16": "u2", "Long": "i8",
          "Int": "i4", "Short": "i2", "Char": "i1", "Byte": "u1", "Bool": "?"}
_DTYPE_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half",
                "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                "int8": "Char", "uint8": "Byte", "bool": "Bool"}
#: Names torch's weights-only loader allows that this reader leaves to it.
_TORCH_ALSO = frozenset({"builtins.bytearray", "builtins.complex", "collections.Counter"})


class TorchZipError(Exception):
    """A file the reader refuses: malformed, or naming a global outside the allowed set."""


class TorchZipUnsupported(Exception):
    """A torch construct outside the subset read here (torch.load may still read it)."""


class _OrderedDict(dict):
    """``collections.OrderedDict`` (dicts keep their order); its pickled attribute state (a
    module state_dict's ``_metadata``) is checked to be a dict and dropped."""

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise TorchZipError(f"an OrderedDict with state of type {type(state).__name__}")


class _Type:
    """Stand-in for a storage class or dtype: the element type of a storage."""

    def __init__(self, stem: str) -> None:
        self.dtype = np.dtype(_TYPES[stem])
        self.bf16 = stem == "BFloat16"


class _Storage:
    def __init__(self, array: np.ndarray, kind: _Type) -> None:
        self.array, self.kind = array, kind


def _int(v: Any, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise TorchZipError(f"{what} is {v!r}, not a non-negative integer")
    return v


def _encode(text: Any, encoding: Any) -> bytes:  # protocol 2's form of a bytes object
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise TorchZipError("_codecs.encode is allowed for latin1 text only")
    return text.encode("latin1")


def _parameter(data: Any, requires_grad: Any = False, hooks: Any = None) -> np.ndarray:
    if not isinstance(data, np.ndarray):
        raise TorchZipError("a Parameter whose data is not a tensor")
    return data


_ALLOWED: dict[str, Any] = {
    "collections.OrderedDict": _OrderedDict, "builtins.set": set, "_codecs.encode": _encode,
    "torch._utils._rebuild_parameter": _parameter,
    "torch.storage.UntypedStorage": _Type("Byte"), "torch.UntypedStorage": _Type("Byte"),
    **{f"torch.{stem}Storage": _Type(stem) for stem in _TYPES},
    **{f"torch.{name}": _Type(stem) for name, stem in _DTYPE_NAMES.items()},
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, read: Callable[[str], bytes], order: str, cap: int,
                 where: str) -> None:
        super().__init__(io.BytesIO(data))
        self._read, self._order, self._cap, self._used, self._where = read, order, cap, 0, where
        self._storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        full = f"{'builtins' if module == '__builtin__' else module}.{name}"  # protocol 2
        if full == "torch._utils._rebuild_tensor_v2":
            return self._tensor
        if full in _ALLOWED:
            return _ALLOWED[full]
        if full in _TORCH_ALSO or module == "torch" or module.startswith("torch."):
            raise TorchZipUnsupported(full)
        raise TorchZipError(f"the pickle names {full}, which a weights-only load refuses")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise TorchZipError("a persistent id other than ('storage', type, key, location, "
                                "numel)")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, _Type) or not isinstance(key, str):
            raise TorchZipError(f"a storage of type {type(kind).__name__} under key {key!r}")
        if key not in self._storages:
            dt, n = kind.dtype.newbyteorder(self._order), _int(numel, "a storage's numel")
            raw = self._read(key)
            if len(raw) < n * dt.itemsize:
                raise TorchZipError(f"data/{key} holds {len(raw)} bytes, the pickle declares "
                                    f"{n} x {dt.itemsize}")
            self._storages[key] = _Storage(np.frombuffer(raw, dtype=dt, count=n), kind)
        return self._storages[key]

    def _tensor(self, storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any,
                hooks: Any, metadata: Any = None) -> np.ndarray:
        """``torch._utils._rebuild_tensor_v2``: the (offset, size, stride) view, copied."""
        if not isinstance(storage, _Storage):
            raise TorchZipError("a tensor whose storage is not a storage")
        if hooks or metadata:
            raise TorchZipUnsupported("a tensor with backward hooks or metadata")
        if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)):
            raise TorchZipError(f"a tensor with size {size!r} and stride {stride!r}")
        off = _int(offset, "a tensor's storage offset")
        size = tuple(_int(s, "a tensor's size") for s in size)
        stride = tuple(_int(s, "a tensor's stride") for s in stride)
        arr, n = storage.array, math.prod(size)
        if n and off + sum((s - 1) * st for s, st in zip(size, stride, strict=True)) >= arr.size:
            raise TorchZipError(f"a tensor of size {size}, stride {stride} and offset {off} "
                                f"runs past its storage of {arr.size} elements")
        self._used += n * arr.itemsize * (2 if storage.kind.bf16 else 1)
        if self._used > self._cap:
            raise ResourceLimitError(f"{self._where}: its tensors hold more than {self._cap} "
                                     "bytes, the limit for the archive; use a smaller network.")
        check_memory(self._used, f"{self._where}: its tensors", "use a smaller network")
        out = np.empty(size, arr.dtype) if not n else np.lib.stride_tricks.as_strided(
            arr[off:], shape=size, strides=[st * arr.itemsize for st in stride],
            writeable=False).copy()
        if storage.kind.bf16:
            return (out.astype(np.uint32) << 16).view(np.float32)
        return out.astype(out.dtype.newbyteorder("="), copy=False)


def read_torch_zip(src: str | IO[bytes], *, cap: int, where: str) -> Any:
    """The object ``torch.save`` wrote to ``src`` (a path or a binary file), its tensors as
    numpy arrays; tensors together at most ``cap`` bytes. Raises :class:`TorchZipError`
    for a malformed or refused file, :class:`TorchZipUnsupported` outside the subset."""
    try:
        with open_zip(src, where, CheckpointError) as zf:
            names = set(zf.namelist())
            pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
            if len(pkl) != 1:
                raise TorchZipError(f"{len(pkl)} <prefix>/data.pkl members, expected one")
            prefix = pkl[0][:-len("data.pkl")]

            def read(name: str) -> bytes:
                if prefix + name not in names:
                    raise TorchZipError(f"no member {prefix + name}")
                return read_member(zf, prefix + name, where, CheckpointError, cap=cap)

            order = read("byteorder") if prefix + "byteorder" in names else b"little"
            if order not in (b"little", b"big"):
                raise TorchZipError(f"byteorder {order[:20]!r}, expected little or big")
            return _Unpickler(read("data.pkl"), lambda key: read(f"data/{key}"),
                              "<" if order == b"little" else ">", cap, where).load()
    except (TorchZipError, TorchZipUnsupported, ResourceLimitError, CheckpointError):
        raise
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, TypeError, ValueError,
            AttributeError, IndexError, KeyError, OverflowError, RecursionError,
            MemoryError) as exc:
        raise TorchZipError(_one_line(exc)) from None


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()
    return f"{type(exc).__name__}: {text[0][:120] if text else ''}"


def _tensors_to_numpy(obj: Any, torch: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    if isinstance(obj, dict):
        return {k: _tensors_to_numpy(v, torch) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_tensors_to_numpy(v, torch) for v in obj)
    return obj


def load_weights(src: str | IO[bytes], *, cap: int, where: str) -> Any:
    """:func:`read_torch_zip`, or for a file outside its subset torch's weights-only load
    (``weights_only=True``) with its tensors as numpy arrays (bfloat16 widened to float32).
    Raises :class:`TorchZipError` for what neither reads."""
    try:
        return read_torch_zip(src, cap=cap, where=where)
    except TorchZipUnsupported:
        pass
    if hasattr(src, "seek"):
        src.seek(0)
    try:
        import torch

        return _tensors_to_numpy(torch.load(src, map_location="cpu", weights_only=True), torch)
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot load"
        raise TorchZipError(_one_line(exc)) from None

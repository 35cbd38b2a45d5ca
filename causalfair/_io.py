"""Atomic file writes: a reader never sees a half-written file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_text"]


def _default_mode() -> int:
    """0o666 less the process umask: what ``open(path, "w")`` would have given
    (``mkstemp`` creates 0o600 files, which would hide reports from other users)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str | os.PathLike[str], writer: Callable[[Any], None]) -> Path:
    """Call ``writer(fh)`` on a binary temporary file in the same folder as ``path``, then
    rename it over ``path``. On any error (or interrupt) the temporary file is removed
    and ``path`` is left as it was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            writer(fh)
        os.chmod(tmp, _default_mode())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


def to_jsonable(x: Any) -> Any:
    """``x`` with numpy arrays and scalars, paths and tuples turned into JSON types
    (non-finite floats become None)."""
    import math
    from collections.abc import Mapping
    from pathlib import Path

    import numpy as np

    if isinstance(x, Mapping):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, Path):
        return str(x)
    return x

"""Resource limits: what one request may ask for (docs/limits.md).

Every engine estimates the memory a request needs *before* allocating it and refuses a
request above the limit with :class:`~causalfair.errors.ResourceLimitError` (exit code 2
on the command line), naming what is too big and how to proceed. The limit defaults to
:data:`DEFAULT_MAX_MEMORY` and is overridden with the environment variable
``CAUSALFAIR_MAX_MEMORY`` (bytes, or a number with a K, M, G or T suffix, e.g. ``8G``).
"""

from __future__ import annotations

import os
import sys

from causalfair.errors import InputError, ResourceLimitError, UsageError, short

__all__ = ["DEFAULT_MAX_MEMORY", "ENV", "max_memory", "check_memory", "format_bytes",
           "set_threads"]

#: Default memory one request may need: 4 GiB.
DEFAULT_MAX_MEMORY = 4 << 30
#: Environment variable overriding the limit.
ENV = "CAUSALFAIR_MAX_MEMORY"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def max_memory() -> int:
    """The limit in bytes (``CAUSALFAIR_MAX_MEMORY`` or the default)."""
    text = os.environ.get(ENV, "").strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        return DEFAULT_MAX_MEMORY
    unit = text[-1] if text[-1] in _UNITS else ""
    try:
        value = float(text[: -1] if unit else text)
    except ValueError:
        raise InputError(
            f"{ENV}: bad value {os.environ[ENV][:40]!r}; give bytes or a number with K, M, G "
            "or T, e.g. 8G.") from None
    if not value > 0:
        raise InputError(f"{ENV}: must be > 0, got {os.environ[ENV][:40]!r}.")
    if not value * _UNITS[unit] <= 1000000 * _UNITS["T"]:  # inf, 1e400: no machine has it
        raise InputError(f"{ENV}: bad value {os.environ[ENV][:40]!r}; give a finite size of at "
                         "most 1000000T, e.g. 8G.")
    return int(value * _UNITS[unit])


def format_bytes(n: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < scale << 20 else f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


def check_memory(nbytes: float, what: str, fix: str) -> None:
    """Refuse a request needing ``nbytes`` over the limit, before anything is allocated."""
    limit = max_memory()
    if nbytes > limit:
        raise ResourceLimitError(
            f"{what}: needs about {format_bytes(nbytes)} of memory, over the limit of "
            f"{format_bytes(limit)}; {fix}, or raise the limit with {ENV} (docs/limits.md).")


#: Most threads ``--threads`` / ``CAUSALFAIR_THREADS`` may ask torch and BLAS for.
MAX_THREADS = 1024
#: Environment variables that cap the threads a process may use, in order of precedence,
#: and their values when this module was first imported, before :func:`set_threads`
#: writes OMP_NUM_THREADS and its kin (what ``jobs="auto"`` honours:
#: :func:`causalfair.backends.available_cores`).
THREAD_CAPS = ("CAUSALFAIR_JOBS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
THREAD_CAPS_AT_START = {var: os.environ.get(var) for var in THREAD_CAPS}


def set_threads(n: int | None = None) -> int:
    """Use ``n`` threads for torch and BLAS (None: ``CAUSALFAIR_THREADS``, else 1). Sets
    OMP_NUM_THREADS / MKL_NUM_THREADS for libraries imported later, limits the BLAS
    already loaded (threadpoolctl, when installed) and torch if it is imported."""
    field = "--threads"
    if n is None:
        env = os.environ.get("CAUSALFAIR_THREADS", "1")
        field = "CAUSALFAIR_THREADS"
        try:
            n = int(env)
        except ValueError:
            raise UsageError(f"CAUSALFAIR_THREADS: bad value {env[:20]!r}; give an integer >= 1.") from None
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_THREADS:
        raise UsageError(f"{field}: must be an integer from 1 to {MAX_THREADS}, got "
                         f"{short(n, 40)}.")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        pass
    else:
        threadpool_limits(n)
    if "torch" in sys.modules:  # limit torch only where it is already imported
        sys.modules["torch"].set_num_threads(n)
    return n

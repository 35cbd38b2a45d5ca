"""Resource limits: what one request may ask for (docs/limits.md).

Every engine estimates the memory a request needs *before* allocating it and refuses a
request above the limit with :class:`~causalfair.errors.ResourceLimitError` (exit code 2
on the command line), naming what is too big and how to proceed. The limit defaults to
:data:`DEFAULT_MAX_MEMORY` and is overridden with the environment variable
``CAUSALFAIR_MAX_MEMORY`` (bytes, or a number with a K, M, G or T suffix, e.g. ``8G``).
"""

from __future__ import annotations

import math
import numbers
import os
import sys

from causalfair.errors import InputError, ResourceLimitError, UsageError, short

__all__ = ["DEFAULT_MAX_MEMORY", "ENV", "max_memory", "check_memory", "format_bytes",
           "set_threads", "check_timeout", "MAX_TIMEOUT_S", "env_count"]

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


def env_count(env: str, default: int, unit: str, example: str) -> int:
    """A ceiling counted in ``unit`` (unit-steps, pair terms): the whole number >= 1 in the
    environment variable ``env`` (``_`` allowed, ``1e12`` too), else ``default``."""
    text = os.environ.get(env, "").strip().replace("_", "")
    if not text:
        return default
    try:
        value = int(float(text)) if "e" in text.lower() else int(text)
    except (ValueError, OverflowError):
        value = 0
    if value < 1:
        raise InputError(f"{env}: bad value {text[:40]!r}; give a whole number of {unit} >= 1, "
                         f"e.g. {example}.")
    return value


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


#: The largest time limit (seconds, about 31 years) of ``--timeout`` and a spec's
#: ``timeout``: larger values overflow the operating system's timers (docs/limits.md).
MAX_TIMEOUT_S = 10**9


def check_timeout(value: object, field: str) -> float | None:
    """``value`` as a time limit in seconds (None: no limit), or an InputError naming
    ``field`` (``--timeout``, ``timeout``), the value and the fix: a number > 0 and at most
    :data:`MAX_TIMEOUT_S`. Every door of a time limit calls it: ``gate`` and ``audit``'s
    ``--timeout``, a spec's ``timeout`` key, :func:`causalfair.audit.gate.run_gate` and
    :func:`causalfair.audit.gate.audit_within`."""
    if value is None:
        return None
    # numbers' classes: numpy's scalars too, without importing numpy (the --help path)
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real)
    big = ok and isinstance(value, numbers.Integral) and value > MAX_TIMEOUT_S
    try:
        ok = ok and 0 < float(value) < math.inf
    except OverflowError:  # an int too large for a float
        ok = False
    if big or (ok and float(value) > MAX_TIMEOUT_S):
        raise InputError(f"{field}: bad value {short(value)}; the most is {MAX_TIMEOUT_S:.0e} "
                         f"seconds (about 31 years); give fewer seconds, e.g. 600, or no "
                         f"{field} for no limit.")
    if not ok:
        raise InputError(f"{field}: bad value {short(value)}; give a number of seconds > 0, "
                         "e.g. 600.")
    return float(value)

"""glibc's malloc thresholds, fixed once per process: large audits stop faulting in pages.

glibc's malloc maps every block of 128 KiB or more with ``mmap`` and unmaps it when it is
freed; each freed mapped block then raises that threshold to its own size (up to 32 MiB)
and the heap's trim threshold to twice it. Until a large enough block has been freed, a
Monte Carlo audit's temporaries (about 1 MiB at a batch of 65,536) are mapped, or carved
from a heap whose top is trimmed back to the system after every batch, so each new array
takes fresh zeroed pages: at n = 200,000 the first audit of a process took about 700,000
minor page faults and 2-3 s of system CPU (docs/scale.md, "Measured").

:func:`tune` fixes both from the start: the mmap threshold at :data:`MMAP_THRESHOLD`
(32 MiB, the ceiling of glibc's own growth), so blocks under 32 MiB come from the heap,
and the trim threshold at :data:`TRIM_THRESHOLD` (32 MiB, half the 64 MiB glibc's growth
ends at), so each arena keeps at most 32 MiB of freed memory at its top. Measured
(docs/scale.md): the first audit's faults fall from about 685,000 to 18,000, and the
memory a process holds after its audits is no more than under glibc's defaults (a 64 MiB
trim threshold removed a further 10,000 faults an audit but held 100 MB more with two
threads: one arena each).

It is called once, when :mod:`causalfair.engines._mc_base` is imported (every Monte Carlo
engine, in every process that runs their tasks: the caller's, ``--jobs`` workers, Ray
workers). It does nothing off glibc (musl, macOS, Windows), when the environment already sets glibc's
malloc parameters (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_TOP_PAD_``, ``MALLOC_MMAP_MAX_``, or ``glibc.malloc.*`` in ``GLIBC_TUNABLES``:
those stay), or with ``CAUSALFAIR_MALLOC=off``. Allocation changes no arithmetic: the
numbers are the same bit for bit (tests/test_faults.py).
"""

from __future__ import annotations

import os
from typing import Any

from causalfair.errors import InputError

__all__ = ["ENV", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "state", "tune"]

#: Blocks from this size up are mapped with ``mmap`` (glibc's DEFAULT_MMAP_THRESHOLD_MAX
#: on 64-bit systems: where its dynamic threshold stops growing).
MMAP_THRESHOLD = 32 << 20
#: Freed memory at the top of an arena over this size goes back to the system (glibc's
#: dynamic adjustment grows it to twice the mmap threshold, up to 64 MiB).
TRIM_THRESHOLD = 32 << 20
#: ``CAUSALFAIR_MALLOC=off`` keeps glibc's own defaults.
ENV = "CAUSALFAIR_MALLOC"
#: Environment variables by which a user sets glibc's malloc parameters (then left alone).
GLIBC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
             "MALLOC_MMAP_MAX_")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
_ON, _OFF = ("", "on", "1", "yes", "true"), ("off", "0", "no", "false")

#: What :func:`tune` did in this process (None: not called yet): "set", "off" (the
#: switch), "environment" (the user's own glibc settings), "not glibc", "refused" (glibc
#: refused a value).
_STATE: list[str | None] = [None]


def state() -> str | None:
    """What :func:`tune` did in this process, or None before its first call."""
    return _STATE[0]


def _glibc() -> bool:
    """Whether this process runs on glibc (``confstr(CS_GNU_LIBC_VERSION)``; musl, macOS
    and Windows have none)."""
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, ValueError, OSError):
        return False


def _libc() -> Any:
    """The C library of this process (its ``mallopt``), through ctypes."""
    import ctypes

    return ctypes.CDLL(None)


def _decide() -> str | None:
    """Why :func:`tune` leaves the allocator alone ("off", "environment", "not glibc"), or
    None to set the thresholds. A bad ``CAUSALFAIR_MALLOC`` is an :class:`InputError`."""
    text = os.environ.get(ENV, "").strip().lower()
    if text in _OFF:
        return "off"
    if text not in _ON:
        raise InputError(f"{ENV}: bad value {os.environ[ENV][:40]!r}; give off (glibc's own "
                         "malloc thresholds) or on (the default: docs/scale.md).")
    if any(k in os.environ for k in GLIBC_ENV) or "glibc.malloc." in os.environ.get(
            "GLIBC_TUNABLES", ""):
        return "environment"
    if not _glibc():
        return "not glibc"
    return None


def tune() -> str:
    """Set glibc's mmap threshold to :data:`MMAP_THRESHOLD` and its trim threshold to
    :data:`TRIM_THRESHOLD`, once per process (later calls return what the first did);
    returns :func:`state`."""
    if _STATE[0] is not None:
        return _STATE[0]
    why = _decide()
    if why is None:
        libc = _libc()
        # the trim threshold only once the mmap threshold is set: setting either fixes
        # both (no dynamic adjustment), which with glibc's 128 KiB would map more, not less
        ok = (libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
              and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
        why = "set" if ok else "refused"
    _STATE[0] = why
    return why

"""Where the traceback of user code that failed goes: a log file under
``.causalfair/logs/`` (the one-line error names it), or stderr with ``--debug``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from causalfair._io import atomic_write_text
from causalfair.commands.audit import causalfair_dir


def keep_tracebacks(tracebacks: Sequence[str], command: str, debug: bool) -> str:
    """Keep the users' ``tracebacks`` (empty ones skipped): with ``debug`` write them to
    stderr and return ""; else write them to ``.causalfair/logs/COMMAND-TIME-PID.log``
    and return the note the one-line error ends with (" (traceback: PATH; --debug
    prints it)"). A log that cannot be written is skipped (the note then names
    --debug)."""
    texts = [t for t in tracebacks if t]
    if not texts:
        return ""
    if debug:
        for t in texts:
            sys.stderr.write(t if t.endswith("\n") else t + "\n")
        return ""
    import os
    import time

    try:
        path = causalfair_dir() / "logs" / (
            f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        atomic_write_text(path, "\n".join(texts))
    except OSError:
        return " (run with --debug for the traceback)"
    return f" (traceback: {path}; --debug prints it)"

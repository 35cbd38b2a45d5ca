"""The ``causalfair`` command line. Thin: parses, calls the library, sets exit codes.

Each subcommand lives in ``causalfair/commands/<name>.py`` and exposes
``register(subparsers)`` (argparse only: keep imports there light so ``--help`` is
instant) and ``run(args) -> int``. Exit codes: 0 success, 1 a failed check (gates),
2 usage or input errors (one-line message on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser", "COMMANDS", "UsageError"]

#: Subcommand name -> module implementing it.
COMMANDS: dict[str, str] = {
    "decompose": "causalfair.commands.decompose",
    "graph": "causalfair.commands.graph",
    "frontier": "causalfair.commands.frontier",
    "audit": "causalfair.commands.audit",
    "gate": "causalfair.commands.gate",
    "train": "causalfair.commands.train",
    "systems": "causalfair.commands.systems",
    "simulate-logs": "causalfair.commands.simulate_logs",
    "gate-merge": "causalfair.commands.gate_merge",
    "sweep": "causalfair.commands.sweep",
}


from causalfair.errors import CausalfairError  # noqa: E402  (leaf module, no heavy imports)


class UsageError(CausalfairError, ValueError):
    """Bad command-line input: reported on one line, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    from causalfair import __version__

    parser = argparse.ArgumentParser(
        prog="causalfair",
        description=(
            "Audit decision policies for long-term fairness: decompose the "
            "qualification-gain disparity C into direct (DPE), indirect (IPE) and "
            "spurious (SPE) effects, measure benefit fairness, and repair policies."
        ),
    )
    parser.add_argument("--version", action="version", version=f"causalfair {__version__}")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="threads for torch and BLAS (default: CAUSALFAIR_THREADS, else 1: "
                        "causalfair's networks are small, and on a busy machine more threads "
                        "cost 5-12x; see docs/limits.md)")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of user code that failed (a factory, a "
                        "simulator, a policy) on stderr; without it the traceback goes to "
                        ".causalfair/logs/ and the error stays one line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).register(sub)
    return parser


#: Most threads ``--threads`` / ``CAUSALFAIR_THREADS`` may ask torch and BLAS for.
MAX_THREADS = 1024


def set_threads(n: int | None = None) -> int:
    """Use ``n`` threads for torch and BLAS (None: ``CAUSALFAIR_THREADS``, else 1). Sets
    OMP_NUM_THREADS / MKL_NUM_THREADS for libraries imported later, limits the BLAS
    already loaded (threadpoolctl, when installed) and torch if it is imported."""
    import os

    field = "--threads"
    if n is None:
        env = os.environ.get("CAUSALFAIR_THREADS", "1")
        field = "CAUSALFAIR_THREADS"
        try:
            n = int(env)
        except ValueError:
            raise UsageError(f"CAUSALFAIR_THREADS: bad value {env[:20]!r}; give an integer >= 1.") from None
    if not 1 <= n <= MAX_THREADS:
        raise UsageError(f"{field}: must be an integer from 1 to {MAX_THREADS}, got {str(n)[:20]}.")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        pass
    else:
        threadpool_limits(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    return n


def _sigterm_as_interrupt() -> None:
    """SIGTERM ends the command like Ctrl-C: temporary files are removed on the way out."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from causalfair import _progress

    was = _progress.enabled()
    _progress.enable(not getattr(args, "no_progress", False))  # long runs report on stderr
    try:
        set_threads(args.threads)
        _sigterm_as_interrupt()
        return int(args.run(args) or 0)
    except (CausalfairError, FileNotFoundError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        from causalfair._usercode import user_traceback
        from causalfair.commands._tracebacks import keep_tracebacks

        msg += keep_tracebacks([user_traceback(exc)], args.command, args.debug)
        print(f"causalfair {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"causalfair {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        _progress.enable(was)


def entry() -> int:
    """Console-script entry point (``causalfair``, ``python -m causalfair``)."""
    return main()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(entry())

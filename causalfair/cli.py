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
}


def report_jobs() -> int:
    """Processes the CLI uses to draw a report: 2 on Linux where this process may use two
    or more cores (half of the figures are drawn in a forked copy, see
    causalfair.report.write_report; fork is not safe enough on macOS), else 1; 1 when the
    environment sets CAUSALFAIR_SERIAL (see causalfair._prefetch)."""
    import os

    from causalfair._prefetch import enabled

    if not enabled() or not sys.platform.startswith("linux"):
        return 1
    return 2 if len(os.sched_getaffinity(0)) >= 2 else 1


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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except (CausalfairError, FileNotFoundError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"causalfair {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"causalfair {args.command}: interrupted", file=sys.stderr)
        return 130


def entry() -> int:
    """Console-script entry point (``causalfair``, ``python -m causalfair``): :func:`main`,
    then move every live object to the permanent GC generation so the interpreter's
    exit does not walk them all (saves ~0.2 s after an audit; nothing runs after it).
    Call :func:`main` to use the CLI in-process."""
    code = main()
    import gc

    gc.freeze()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(entry())

"""The ``causalfair`` command line. Thin: parses, calls the library, sets exit codes.

Each subcommand lives in ``causalfair/commands/<name>.py`` and exposes
``register(subparsers)`` (argparse only: keep imports there light so ``--help`` is
instant) and ``run(args) -> int``. ``causalfair --help`` imports no command module (it
lists :data:`COMMAND_HELP`); :func:`main` imports the module of the command it runs only
(``build_parser(commands=...)``). Exit codes: 0 success, 1 a failed check (gates), 2 usage or input
errors (one-line message on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from causalfair import _progress
from causalfair._limits import set_threads
from causalfair._usercode import keep_tracebacks, refuse_os_exit, user_traceback
from causalfair._version import __version__
from causalfair.backends import DEVICE_ENV, resolve_device
from causalfair.errors import CausalfairError, UsageError, first_line, one_line, terminal_text
from causalfair.workers import reader_may_leave, signal_interrupt, watch_interrupts

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
    "export": "causalfair.commands.export",
}


#: Subcommand name -> its line in ``causalfair --help`` (the ``help`` its module's
#: ``register`` gives; tests/test_fast_help.py keeps the two the same): the top-level help
#: lists the commands without importing them.
COMMAND_HELP: dict[str, str] = {
    "decompose": "decompose C into DPE + IPE + SPE and measure benefit fairness",
    "graph": "build, summarise and export the temporal causal graph",
    "frontier": "exact utility-fairness frontier (fair-policy LP) with policies placed on it",
    "audit": "run an audit spec (TOML) and write report.html, report.md, audit.json",
    "gate": "CI fairness gate: exit 0 when every spec passes, 1 otherwise",
    "train": "train a policy (PPO, PPO-C, PPO-Cb, A-PPO, F-PPO-L, F-PPO, ELBERT-PO; R-TD3, "
             "L-UCBFair on replicator systems) or repair one under constraints (--algo exact)",
    "systems": "list the registered systems (ids for --system and [system] id)",
    "simulate-logs": "write a decision log of a policy deployed on a system (CSV or Parquet)",
    "gate-merge": "merge sharded `causalfair gate --shard K/N` outputs into one verdict",
    "sweep": "train algorithms x seeds (x systems) and tabulate means and CIs over seeds",
    "export": "write annex-iv.md or ll144.md + ll144.csv from an audit's audit.json",
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors name the closest valid choice ("did you mean ...?",
    as ``suggest_on_error`` does from Python 3.14 on)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, and on the top-level parser ``given``: the destinations of the
        options the command line gave (:func:`given_options`)."""
        ns, extras = super().parse_known_args(args, namespace)
        if self._subparsers is not None and not getattr(self, "probing", False):
            ns.given = given_options(self, sys.argv[1:] if args is None else list(args))
        return ns, extras

    def error(self, message: str) -> Any:  # type: ignore[override]
        import re

        m = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
        if m:
            message += _did_you_mean(m.group(1), re.findall(r"'(.*?)'", m.group(2)))
        usage = self.format_usage().strip()
        if "\n" in usage:  # a long usage would bury the one line that names the fix
            usage = f"usage: {self.prog} [OPTIONS] (every option: {self.prog} --help)"
        # usage, one line; exit 2 (the user's word through terminal_text, as every error)
        self.exit(2, f"{usage}\n{self.prog}: error: {terminal_text(message)}\n")


def given_options(parser: Any, argv: list[str]) -> frozenset[str]:
    """The destinations of the options (and positionals) ``argv`` gives, top-level and of
    its command, told from the defaults the parser fills in (``--seed 0`` is given,
    ``--seed`` left out is not): ``argv`` parsed again with every default suppressed.
    Commands read it as ``args.given``, through
    :func:`causalfair.commands._system.flag_given`, so that a setting named twice (a flag
    and ``--set FIELD=`` or ``--param KEY=``) is judged by one rule (docs/limits.md,
    "One setting, two sources")."""
    parsers = [parser]
    sub_action = parser._subparsers._group_actions[0]
    command = next((a for a in argv if a in sub_action.choices), None)
    if command is not None:
        parsers.append(sub_action.choices[command])
    saved = [(a, a.default) for p in parsers for a in p._actions]
    saved_defaults = [(p, dict(p._defaults)) for p in parsers]
    try:
        parser.probing = True
        for a, _ in saved:
            a.default = argparse.SUPPRESS
        for p, _ in saved_defaults:
            p._defaults.clear()
        ns, _ = parser.parse_known_args(argv)
    finally:
        parser.probing = False
        for a, default in saved:
            a.default = default
        for p, defaults in saved_defaults:
            p._defaults.update(defaults)
    dests = {a.dest for p in parsers for a in p._actions if a.dest != argparse.SUPPRESS}
    return frozenset(d for d in dests if d != "command" and hasattr(ns, d))


def _did_you_mean(word: str, valid: Sequence[str]) -> str:
    """``"; did you mean X?"`` for the valid string closest to ``word``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(valid), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _refuse_unknown(parser: argparse.ArgumentParser, args: Any, extras: list[str]) -> None:
    """End with the usage of the subcommand and one line naming the first argument it
    does not know, and the closest option it does (argparse alone printed the top-level
    usage and no suggestion)."""
    sub = parser._subparsers._group_actions[0].choices.get(args.command) if args.command else None
    target = sub or parser
    bad = next((a for a in extras if a.startswith("-")), extras[0])
    word, hint = bad.split("=", 1)[0], ""
    if bad.startswith("-"):
        hint = _did_you_mean(word, [o for o in target._option_string_actions if o[:2] == "--"])
        if not hint and sub is not None and _did_you_mean(word, parser._option_string_actions):
            hint = (_did_you_mean(word, parser._option_string_actions)[:-1] + ", an option of "
                    f"causalfair itself, given before {args.command}?")
    target.error(f"unrecognized argument {bad}{hint} (see causalfair "
                 f"{args.command + ' ' if sub else ''}--help)")


def _empty_argument(parser: argparse.ArgumentParser, args: Any) -> str | None:
    """The error of the first argument of the command given as an empty string (``--json
    ""``, ``--checkpoint "$UNSET"``, ``gate ""``), else None: every path, id and name of
    every command is checked here, once, rather than falling back to its default (an
    unset variable in CI would audit or write something else, exit 0)."""
    sub = parser._subparsers._group_actions[0].choices.get(args.command)
    for action in (sub._actions if sub is not None else ()):
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        if "" not in values or value == action.default:
            continue
        name = "/".join(action.option_strings) or str(action.metavar or action.dest)
        what = action.metavar or action.dest.upper()
        what = " ".join(what) if isinstance(what, tuple) else what
        drop = (f", or drop {action.option_strings[0]}" if action.option_strings
                and not action.required else "")
        return (f"{name}: empty value; give the {what}{drop} (an unset shell variable gives "
                "an empty value).")
    return None


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``causalfair`` parser; ``commands``: the commands whose options it reads (their
    modules imported; default: every command), the others listed by name and help only."""
    parser = _Parser(
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
    for name, module in COMMANDS.items():
        if commands is None or name in commands:
            importlib.import_module(module).register(sub)
        else:  # listed by name and help only: its module (numpy, the engines) not imported
            sub.add_parser(name, help=COMMAND_HELP[name], add_help=False)
    for name in DEVICE_COMMANDS:  # the same option on every command that runs Monte Carlo
        p = sub.choices.get(name)
        if (commands is None or name in commands) and "--device" not in p._option_string_actions:
            p.add_argument("--device", default=None, metavar="DEVICE", help=DEVICE_HELP)
    return parser


def _named_command(argv: Sequence[str] | None) -> tuple[str, ...]:
    """The command ``argv`` names (its first argument that is one), or none: the commands
    whose parsers :func:`main` builds in full."""
    args = sys.argv[1:] if argv is None else argv
    return next(((a,) for a in args if a in COMMANDS), ())


#: Commands whose Monte Carlo engine and benefit forks take ``--device``.
DEVICE_COMMANDS = ("decompose", "audit", "gate")
DEVICE_HELP = ("where network policies run their forward pass in Monte Carlo and benefit "
               "forks: cpu (default), cuda, cuda:N, or auto (the GPU when torch sees one); "
               "simulators stay on the CPU (docs/scale.md)")


def _signals_as_interrupt() -> dict[int, Any]:
    """SIGTERM, and SIGINT, end the command like Ctrl-C (KeyboardInterrupt: temporary
    files removed, workers killed, exit 130), also where SIGINT came ignored from the
    parent (``nohup causalfair ... &`` in a script: Python then installs no handler of its
    own, and ``kill -INT`` would do nothing). The handler
    (:func:`causalfair.workers.signal_interrupt`) notes the signal, so a KeyboardInterrupt
    that user code raises itself is an error of its task, not an interrupt (where SIGINT
    is ours: a caller's own handler is kept, and every KeyboardInterrupt is then one).
    Returns the handlers replaced (none off the main thread), for :func:`_restore_signals`."""
    import signal
    import threading

    old: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        old[signal.SIGTERM] = signal.signal(signal.SIGTERM, signal_interrupt)
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL,
                                               signal.default_int_handler):
            old[signal.SIGINT] = signal.signal(signal.SIGINT, signal_interrupt)
            watch_interrupts(True)
    return old


def _restore_signals(old: dict[int, Any]) -> None:
    """Put back the handlers :func:`_signals_as_interrupt` replaced (``main`` called from
    Python leaves the caller's handlers as they were)."""
    import signal

    if signal.SIGINT in old:
        watch_interrupts(False)
    for sig, handler in old.items():
        if handler is not None:  # (None: a handler not set from Python, which cannot go back)
            signal.signal(sig, handler)


def _warnings_as_lines(command: str) -> Any:
    """A ``warnings.showwarning`` that prints causalfair's own warnings as one line,
    ``causalfair COMMAND: warning: ...`` (no file, line or source), and others as Python
    does."""
    import warnings

    home, python_way = os.path.dirname(os.path.abspath(__file__)), warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        if os.path.abspath(filename).startswith(home + os.sep):
            print(one_line(command, "warning", str(message)),
                  file=sys.stderr if file is None else file)
        else:
            python_way(message, category, filename, lineno, file, line)
    return show


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    handlers = _signals_as_interrupt()
    try:
        parser = build_parser(commands=_named_command(argv))
        args, extras = parser.parse_known_args(argv)
        if extras:
            _refuse_unknown(parser, args, extras)
        if args.command is None:
            parser.print_help()
            return 2
        # refused before the command prints or writes anything (by _run; the gate's run,
        # which writes its --junit for a refused option, raises it itself)
        args.empty_argument = _empty_argument(parser, args)
        # a reader that goes away (`| head`) neither stops the command nor changes its
        # exit code, its error line included
        with warnings.catch_warnings(), reader_may_leave():
            warnings.showwarning = _warnings_as_lines(args.command)
            return _run(args)
    except KeyboardInterrupt:  # while the commands' modules load, before one runs
        print("causalfair: interrupted", file=sys.stderr)
        return 130
    finally:
        _restore_signals(handlers)


def _run(args: Any) -> int:

    was, device_was = _progress.enabled(), os.environ.get(DEVICE_ENV)
    _progress.enable(not getattr(args, "no_progress", False))  # long runs report on stderr
    try:
        set_threads(args.threads)
        if getattr(args, "device", None) is not None:  # inherited by gate workers
            os.environ[DEVICE_ENV] = resolve_device(args.device, "--device")
        empty = getattr(args, "empty_argument", None)  # (main: _empty_argument)
        if empty and not getattr(args, "refuses_empty_itself", False):
            raise UsageError(empty)
        with refuse_os_exit():  # user code's os._exit(0): an error, never a silent exit 0
            return int(args.run(args) or 0)
    except (CausalfairError, FileNotFoundError) as exc:
        msg = first_line(str(exc)) if str(exc) else type(exc).__name__
        msg += keep_tracebacks([user_traceback(exc)], args.command, args.debug)
        print(one_line(args.command, "error", msg), file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # its notes: what was kept (e.g. gate --retrain)
        notes = "; ".join(getattr(exc, "__notes__", None) or ())
        print(f"causalfair {args.command}: interrupted"  # notes may name files: escaped
              + (f"; {terminal_text(notes)}" if notes else ""),
              file=sys.stderr)
        return 130
    finally:
        _progress.enable(was)
        if device_was is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = device_was


#: Seconds the process waits at its exit for threads that user code left running.
THREAD_GRACE_S = 3.0


def entry() -> int:
    """Console-script entry point (``causalfair``, ``python -m causalfair``)."""
    code = main()
    _exit_past_threads(code)
    return code


def _exit_past_threads(code: int) -> None:
    """Where a thread that Python waits for at exit is still running (user code started
    it: a non-daemon thread that never ends would keep the command from ever exiting), a
    daemon watchdog ends the process with ``code`` if it is still running after
    :data:`THREAD_GRACE_S` seconds, saying so on stderr; threads that end by then (an
    executor shut down at exit) end as usual."""
    import threading

    if not any(not t.daemon and t is not threading.main_thread() and t.is_alive()
               for t in threading.enumerate()):
        return

    def watchdog() -> None:
        import time

        time.sleep(THREAD_GRACE_S)
        left = [t.name for t in threading.enumerate()
                if not t.daemon and t is not threading.main_thread() and t.is_alive()]
        print(f"causalfair: warning: {len(left)} thread(s) that user code started still "
              f"running after {THREAD_GRACE_S:g} s ({', '.join(left[:3])}); exiting without "
              "them", file=sys.stderr)
        for fh in (sys.stdout, sys.stderr):
            try:
                fh.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    threading.Thread(target=watchdog, name="causalfair_exit", daemon=True).start()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(entry())

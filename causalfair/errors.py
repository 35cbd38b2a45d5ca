"""The error tree of causalfair (one root, so callers and the CLI can tell bad input
from bugs).

Every error that means "the input is wrong" derives from :class:`CausalfairError`; the
command line reports those on one line with exit code 2. Anything else that escapes is a
bug in causalfair and keeps its traceback. The concrete classes also derive from
``ValueError`` (or ``OSError`` for output paths) so that code written against earlier
releases, which caught ``ValueError``, keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "CausalfairError",
    "InputError",
    "ModelError",
    "PolicyError",
    "CheckpointError",
    "SpecError",
    "SystemError_",
    "SimulatorContractError",
    "ConfigError",
    "OutputError",
    "ResourceLimitError",
    "UsageError",
    "UserCodeError",
    "FairnessAuditWarning",
    "INTERRUPT_SIGNAL",
    "as_numbers",
    "call_user",
    "first_line",
    "one_line",
    "short",
    "terminal_text",
    "unicode_text",
    "user_interrupt",
]


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for one-line error messages (a 50 MB bad
    value gives a short message without building its whole repr)."""
    text = repr(value) if len(str(value)) < 10 * limit else repr(str(value)[: 2 * limit])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unicode_text(text: str) -> str:
    """``text`` with every lone surrogate (a byte that is not UTF-8 in a file name, as
    ``os.fsdecode`` gives it) written as its escape, ``\\udcff``, as JUnit writes it: text
    every UTF-8 writer and JSON reader takes (a log file, a report, gate-merge, jq)."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


#: What a terminal would act on rather than show: control characters (ESC starts the
#: sequences that move the cursor, clear the screen or recolour the text; BEL, BS, DEL,
#: the C1 controls), the bidirectional overrides that reorder what is shown, and the
#: line and paragraph separators U+2028 and U+2029.
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """``text`` for a terminal: each character a terminal would act on (:data:`_TERMINAL`)
    written as its escape (``\\x1b``, ``\\u202e``), so a user string in a message (a
    simulator's error text, a file name) cannot move the cursor, clear the screen, recolour
    what follows or reorder the line; tabs stay."""
    return _TERMINAL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


_LINE_BREAK = re.compile("\r\n|\r|\n")


def first_line(text: str) -> str:
    """``text`` up to its first line break (LF, CR or CRLF; "" for ""): the line an error
    message is cut to. Not ``str.splitlines``, which also breaks at a form feed, the
    separators 0x1c-0x1e, NEL and U+2028/U+2029, so a file name or a user message holding
    one cut the message there (``audit spec a`` of ``a<U+2028>b.toml: [engine] kind: ...``)."""
    return _LINE_BREAK.split(text, maxsplit=1)[0]


def one_line(command: str, kind: str, message: str) -> str:
    """The line the command line prints for an error or a warning of ``command``:
    ``causalfair COMMAND: KIND: MESSAGE``, the message's :func:`first_line` through
    :func:`terminal_text` (every door's one-line errors: cli, gate, gate-merge)."""
    return f"causalfair {command}: {kind}: {terminal_text(first_line(message))}"


class CausalfairError(Exception):
    """Root of every error causalfair raises on purpose (bad input, refused request)."""


class InputError(CausalfairError, ValueError):
    """A value given to causalfair is invalid (generic; prefer a specific subclass)."""


class ModelError(InputError):
    """A tabular model (or one of its arrays) is malformed."""


class PolicyError(InputError):
    """A policy is malformed or returned something that is not a probability."""


class CheckpointError(PolicyError):
    """A checkpoint file cannot be loaded or does not fit the system."""


class SpecError(InputError):
    """An audit spec is invalid: the message names the file, the key and the fix."""


class SystemError_(InputError):  # noqa: N801 - ``SystemError`` is a Python builtin
    """A system cannot be found, built, or does not satisfy the System contract."""


class SimulatorContractError(InputError):
    """A simulator breaks the documented protocol (the message names the method)."""


class ConfigError(InputError):
    """A training configuration field has a bad value."""


class OutputError(CausalfairError, OSError):
    """An output path cannot be used (not writable, below a file, not ours to replace)."""


class UsageError(CausalfairError, ValueError):
    """Bad command-line input: reported on one line, exit code 2."""


class ResourceLimitError(InputError):
    """A request would need more memory or work than the documented limit allows."""


class UserCodeError(InputError):
    """User code (a factory, a simulator method, a policy) raised or exited.

    The message is one line naming the callable and the exception; ``traceback_text``
    keeps the user's traceback for a log file or ``--debug``. ``SystemExit`` and every
    other ``BaseException`` except an interrupt become this error, so a ``sys.exit(0)``
    in user code can never end a run as a success.
    """

    def __init__(self, message: str, *, callable_name: str = "", traceback_text: str = ""):
        super().__init__(message)
        self.callable_name = callable_name
        self.traceback_text = traceback_text


#: Whether an interrupt signal (SIGINT, SIGTERM) came: None while nothing watches (causalfair
#: called from Python: every KeyboardInterrupt is an interrupt); False while the command
#: line, or a worker process, watches and none came; True once one came
#: (:func:`causalfair.workers.signal_interrupt`).
INTERRUPT_SIGNAL: list[bool | None] = [None]


def user_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a KeyboardInterrupt that user code raised itself: no interrupt
    signal came while they are watched (:data:`INTERRUPT_SIGNAL`)."""
    return isinstance(exc, KeyboardInterrupt) and INTERRUPT_SIGNAL[0] is False


def as_numbers(p: Any) -> Any:
    """What user code returned (a policy's probabilities), as numpy reads it: a torch
    tensor's values as float64 (detached from the autograd graph, on the CPU; bfloat16
    included), a tensor without values (on the ``meta`` device) left as it is, to be
    read as "not numbers"; anything else unchanged."""
    if type(p).__module__.split(".")[0] == "torch" and callable(getattr(p, "detach", None)):
        try:
            return p.detach().cpu().double().numpy()
        except Exception:  # noqa: BLE001 - no values to read: the caller names the type
            return p
    return p


def call_user(what: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Call user code ``fn(*args, **kwargs)``; turn anything it raises into
    :class:`UserCodeError` naming ``what`` (for example ``"[policy] factory 'm:f'"``).

    A :class:`CausalfairError` raised inside (user code calling causalfair with bad input)
    passes through unchanged; ``KeyboardInterrupt`` and ``GeneratorExit`` are never caught,
    but for a KeyboardInterrupt user code raised itself (:func:`user_interrupt`).
    """
    try:
        return fn(*args, **kwargs)
    except (CausalfairError, KeyboardInterrupt, GeneratorExit) as exc:
        if not user_interrupt(exc):
            raise
        import traceback

        raise UserCodeError(f"{what} raised KeyboardInterrupt itself (no Ctrl-C or SIGTERM "
                            "came); user code must return, not raise it", callable_name=what,
                            traceback_text=traceback.format_exc()) from exc
    except BaseException as exc:  # noqa: BLE001 - SystemExit from user code is an error too
        import traceback

        detail = first_line(str(exc))[:200]
        kind = type(exc).__name__
        msg = f"{what} raised {kind}" + (f": {detail}" if detail else "")
        if isinstance(exc, SystemExit):
            msg = f"{what} called sys.exit({exc.code!r}); user code must return, not exit"
        # what user code says may hold a file name's undecodable byte: written as its escape
        raise UserCodeError(unicode_text(msg), callable_name=what,
                            traceback_text=unicode_text(traceback.format_exc())) from exc


class FairnessAuditWarning(UserWarning):
    """Doubtful but accepted input (few units per group, positivity near its limit)."""

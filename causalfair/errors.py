"""The error tree of causalfair (one root, so callers and the CLI can tell bad input
from bugs).

Every error that means "the input is wrong" derives from :class:`CausalfairError`; the
command line reports those on one line with exit code 2. Anything else that escapes is a
bug in causalfair and keeps its traceback. The concrete classes also derive from
``ValueError`` (or ``OSError`` for output paths) so that code written against earlier
releases, which caught ``ValueError``, keeps working.
"""

from __future__ import annotations

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
    "FairnessAuditWarning",
]


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


class ResourceLimitError(InputError):
    """A request would need more memory or work than the documented limit allows."""


class FairnessAuditWarning(UserWarning):
    """Doubtful but accepted input (few units per group, positivity near its limit)."""

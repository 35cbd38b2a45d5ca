"""Auditing from decision logs (no simulator needed).

- :mod:`causalfair.logs.schema`: the log format, :func:`validate_logs`, :func:`read_logs`,
  :func:`simulate_logs` (logs of a policy on the lending simulator);
- :mod:`causalfair.logs.fit`: sufficient statistics, count-based and ordinal-logit fits,
  positivity check and bounds;
- :mod:`causalfair.logs.audit`: :func:`audit_logs` -> :class:`LogAudit` (decomposition,
  benefit fairness, bootstrap CIs, positivity, optional dowhy cross-check);
- :mod:`causalfair.logs.dowhy_check`: the dowhy cross-check of Delta(x, s) (imports dowhy
  lazily).
"""

from causalfair.logs.audit import LogAudit, audit_logs, bootstrap_logs, fit_logs
from causalfair.logs.fit import (
    DEFAULT_ALPHA,
    PositivityError,
    PositivityReport,
    check_positivity,
    log_stats,
    positivity_bounds,
)
from causalfair.logs.schema import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    LogData,
    LogError,
    read_logs,
    simulate_logs,
    validate_logs,
)

__all__ = [
    "DEFAULT_ALPHA",
    "LogAudit",
    "LogData",
    "LogError",
    "OPTIONAL_COLUMNS",
    "PositivityError",
    "PositivityReport",
    "REQUIRED_COLUMNS",
    "audit_logs",
    "bootstrap_logs",
    "check_positivity",
    "fit_logs",
    "log_stats",
    "positivity_bounds",
    "read_logs",
    "simulate_logs",
    "validate_logs",
]

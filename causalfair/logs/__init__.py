"""Auditing from decision logs (no simulator needed).

- :mod:`causalfair.logs.schema`: the log format, :func:`validate_logs`;
- :mod:`causalfair.logs.reading`: :func:`read_logs` (CSV or Parquet, in bounded memory);
- :mod:`causalfair.logs.errors`: :class:`LogError` and its messages (``MSG_*``);
- :mod:`causalfair.logs.binning`: feature-vector states (:func:`bin_states`,
  :class:`StateBinning`, :func:`linear_potential`);
- :mod:`causalfair.logs.simulate`: :func:`simulate_logs` (logs of a policy on a system's
  simulator);
- :mod:`causalfair.logs.fit`: sufficient statistics, count-based, ordinal-logit and
  multinomial-logit fits, positivity check and bounds;
- :mod:`causalfair.logs.audit`: :func:`audit_logs` -> :class:`LogAudit` (decomposition,
  benefit fairness with the thresholded Lambda estimator, bootstrap CIs, positivity,
  optional dowhy cross-check); the result is :mod:`causalfair.logs.result`;
- :mod:`causalfair.logs.bootstrap`: the model fit of a (weighted) log and the bootstrap
  over individuals (:func:`bootstrap_logs`);
- :mod:`causalfair.logs.pretest`: the thresholded Lambda estimator and its interval;
- :mod:`causalfair.logs.groups`: every group against a reference and every pair, from the
  bootstrap replicates (:func:`compare_log_groups`);
- :mod:`causalfair.logs.dowhy_check`: the dowhy cross-check of Delta(x, s) (imports dowhy
  lazily).
"""

from causalfair.logs.audit import (
    LAMBDA_ESTIMATORS,
    LambdaEstimate,
    audit_logs,
    fit_logs,
    threshold_lambda,
)
from causalfair.logs.binning import StateBinning, bin_states, linear_potential
from causalfair.logs.bootstrap import bootstrap_logs
from causalfair.logs.errors import LogError
from causalfair.logs.fit import (
    DEFAULT_ALPHA,
    PositivityError,
    PositivityReport,
    check_positivity,
    log_stats,
    positivity_bounds,
)
from causalfair.logs.groups import compare_log_groups
from causalfair.logs.result import LogAudit
from causalfair.logs.schema import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    LogData,
    read_logs,
    validate_logs,
)
from causalfair.logs.simulate import simulate_logs

__all__ = [
    "DEFAULT_ALPHA",
    "LAMBDA_ESTIMATORS",
    "LambdaEstimate",
    "LogAudit",
    "LogData",
    "LogError",
    "OPTIONAL_COLUMNS",
    "PositivityError",
    "PositivityReport",
    "REQUIRED_COLUMNS",
    "StateBinning",
    "audit_logs",
    "bin_states",
    "bootstrap_logs",
    "check_positivity",
    "compare_log_groups",
    "fit_logs",
    "linear_potential",
    "log_stats",
    "positivity_bounds",
    "read_logs",
    "simulate_logs",
    "threshold_lambda",
    "validate_logs",
]

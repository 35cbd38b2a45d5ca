"""MLflow logging of audits (extra ``causalfair[mlflow]``; docs/scale.md).

One MLflow run per audit, in the experiment ``experiment`` of the tracking URI MLflow is
configured with (``MLFLOW_TRACKING_URI``, or ``tracking_uri=``):

- **params**: spec name, system, policy, engine, horizon, n, seed, alpha, checkpoint
  sha256 (and the baseline's, with ``[baseline]``);
- **metrics**: every quantity's estimate (``C``, ``DPE``, ``IPE``, ``SPE``, ``utility``,
  ``Lambda``, the other notions) with its CI bounds as ``KEY.lower`` / ``KEY.upper``,
  and one ``verdict.KEY.estimate`` per threshold;
- **tags**: ``causalfair.overall`` (PASS / FAIL / INCONCLUSIVE), one
  ``causalfair.verdict.KEY`` per threshold, ``causalfair.stage`` (``audit``, or
  ``before`` / ``after`` retraining in the gate) and the causalfair version;
- **artifacts**: ``audit.json``, and the report folder when one was written.

Only the driver logs (after the results are back), so it works with every backend.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causalfair._io import to_jsonable
from causalfair._version import __version__
from causalfair.errors import InputError

__all__ = ["log_audit", "open_experiment"]

_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")


def _key(text: str) -> str:
    """An MLflow-safe metric or tag name (letters, digits, _ - . space /)."""
    return _BAD.sub("_", text.replace("<=", "le"))


def import_mlflow() -> Any:
    """The ``mlflow`` module, or an InputError saying how to install the extra."""
    try:
        import mlflow
    except ImportError:
        raise InputError("--mlflow: MLflow is not installed; install the extra with "
                         "pip install 'causalfair[mlflow]'.") from None
    return mlflow


def open_experiment(experiment: str = "causalfair", tracking_uri: str | None = None) -> Any:
    """The ``mlflow`` module with ``experiment`` set on the tracking store (of
    ``tracking_uri``, else ``MLFLOW_TRACKING_URI``), or an InputError naming the store and
    the fix. The commands call it before any audit runs, so a store that cannot be used
    fails the command at once rather than after every audit."""
    mlflow = import_mlflow()
    if tracking_uri is not None:
        mlflow.set_tracking_uri(tracking_uri)
    try:
        mlflow.set_experiment(experiment)
    except Exception as exc:  # noqa: BLE001 - the store's own error, e.g. a bad URI
        uri = str(mlflow.get_tracking_uri())
        fix = ("; to log to a folder set MLFLOW_ALLOW_FILE_STORE=true (docs/scale.md, MLflow)"
               if "://" not in uri or uri.startswith("file:") else
               "; set MLFLOW_TRACKING_URI to a store you can use (docs/scale.md, MLflow)")
        raise InputError(f"--mlflow: cannot use the tracking store {uri!r} "
                         f"({str(exc).splitlines()[0][:200]}){fix}.") from None
    return mlflow


def log_audit(result: Any, *, experiment: str = "causalfair", tracking_uri: str | None = None,
              report_dir: str | os.PathLike[str] | None = None, stage: str = "audit",
              run_name: str | None = None) -> str:
    """Log one :class:`~causalfair.audit.AuditResult` as an MLflow run; return its id."""
    mlflow = open_experiment(experiment, tracking_uri)
    spec = result.spec
    doc = to_jsonable(result.to_dict())
    params = {"spec": spec.name, "system": spec.system_label, "policy": spec.policy_label,
              "engine": spec.engine, "horizon": spec.horizon, "n": spec.n, "seed": spec.seed,
              "alpha": spec.alpha, "checkpoint_sha256": result.checkpoint_sha256 or ""}
    base = (result.extra or {}).get("baseline")
    if isinstance(base, Mapping):
        params["baseline"] = base.get("policy") or ""
        params["baseline_sha256"] = base.get("checkpoint_sha256") or ""
    metrics: dict[str, float] = {}
    for key, (est, lo, hi, _se) in result.quantities.items():
        metrics[_key(key)] = float(est)
        if lo != hi:
            metrics[f"{_key(key)}.lower"] = float(lo)
            metrics[f"{_key(key)}.upper"] = float(hi)
    for v in result.verdicts:
        metrics[f"verdict.{_key(v.key)}.estimate"] = float(v.estimate)
    tags = {"causalfair.overall": result.overall, "causalfair.stage": stage,
            "causalfair.version": __version__}
    for v in result.verdicts:
        tags[f"causalfair.verdict.{_key(v.label)}"] = v.status
    with mlflow.start_run(run_name=run_name or f"{spec.name} ({stage})") as run:
        mlflow.log_params({k: str(v) for k, v in params.items()})
        mlflow.log_metrics({k: v for k, v in metrics.items() if v == v})  # NaN: not logged
        mlflow.set_tags(tags)
        with tempfile.TemporaryDirectory(prefix="causalfair-mlflow-") as tmp:
            path = Path(tmp) / "audit.json"
            path.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
            mlflow.log_artifact(str(path))
        if report_dir is not None and Path(report_dir).is_dir():
            mlflow.log_artifacts(str(report_dir), artifact_path="report")
        return run.info.run_id

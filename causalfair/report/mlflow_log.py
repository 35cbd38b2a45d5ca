"""MLflow logging of audits (extra ``causalfair[mlflow]``; docs/scale.md).

One MLflow run per audit, in the experiment ``experiment`` of the tracking URI MLflow is
configured with (``MLFLOW_TRACKING_URI``, or ``tracking_uri=``):

- **params**: spec name, system (a log audit: its log), policy, engine, horizon, alpha,
  checkpoint sha256 (and the baseline's, with ``[baseline]``), as audit.json records
  them; Monte Carlo: ``n`` and ``seed``; a log audit: ``n_boot`` and ``seed`` (its
  bootstrap's); the exact engine, which samples nothing: neither (:func:`run_params`);
- **metrics**: every quantity's estimate (``C``, ``DPE``, ``IPE``, ``SPE``, ``utility``,
  ``Lambda``, the other notions) with its CI bounds as ``KEY.lower`` / ``KEY.upper``,
  and one ``verdict.KEY.estimate`` per threshold;
- **tags**: ``causalfair.overall`` (PASS / FAIL / INCONCLUSIVE), one
  ``causalfair.verdict.KEY`` per threshold, ``causalfair.stage`` (``audit``, or
  ``before`` / ``after`` retraining in the gate), the causalfair version, and
  ``causalfair.retrain_error`` for the audit of a spec whose retrain then failed (the
  gate's ERROR; no ``after`` run);
- **artifacts**: ``audit.json``, and the report folder when one was written.

Only the driver logs (after the results are back), so it works with every backend.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causalfair._io import to_jsonable
from causalfair._version import __version__
from causalfair.backends import reachable
from causalfair.errors import InputError, OutputError, first_line, short

__all__ = ["log_audit", "open_experiment"]

_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")


def _key(text: str) -> str:
    """An MLflow-safe metric or tag name (letters, digits, _ - . space /)."""
    return _BAD.sub("_", text.replace("<=", "le").replace(">=", "ge"))


def _keys(texts: list[str]) -> list[str]:
    """:func:`_key` of each of ``texts``, distinct for distinct texts: a name another
    text already took (groups named only by characters MLflow refuses, "Анна" and "Бори",
    both ``____``) takes the first free ``NAME_2``, ``NAME_3``, ... in order, so no
    verdict's metric or tag overwrites another's."""
    out: list[str] = []
    taken: dict[str, str] = {}
    for text in texts:
        name, i = _key(text), 1
        while taken.get(name, text) != text:
            i += 1
            name = f"{_key(text)}_{i}"
        taken[name] = text
        out.append(name)
    return out


def import_mlflow() -> Any:
    """The ``mlflow`` module, or an InputError saying how to install the extra."""
    try:
        import mlflow
    except ImportError:
        raise InputError("--mlflow: MLflow is not installed; install the extra with "
                         "pip install 'causalfair[mlflow]'.") from None
    return mlflow


#: MLflow's limit on an experiment name's length.
MAX_EXPERIMENT = 500
#: The longest tag value logged (MLflow's limit on a tag value's length).
MAX_TAG = 5000
#: Tracking-URI schemes of database stores (the full ``mlflow`` package, not
#: ``mlflow-skinny``, which has no SQLAlchemy).
_DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")


def _first(exc: BaseException) -> str:
    return first_line(str(exc).strip())[:200] if str(exc).strip() else type(exc).__name__


def open_experiment(experiment: str = "causalfair", tracking_uri: str | None = None) -> Any:
    """The ``mlflow`` module with ``experiment`` set on the tracking store (of
    ``tracking_uri``, else ``MLFLOW_TRACKING_URI``), or an InputError naming the store (or
    the experiment name) and the fix. The commands call it before any audit runs, so a
    store that cannot be used fails the command at once rather than after every audit; a
    server where nothing answers is refused after a TCP connection of at most 5 s (MLflow
    itself would retry for minutes), and the check asks the server once, without retries."""
    if not isinstance(experiment, str) or not experiment.strip() or \
            len(experiment) > MAX_EXPERIMENT:
        raise InputError(f"--mlflow-experiment: bad value {short(experiment)}; give a "
                         f"non-empty name of at most {MAX_EXPERIMENT} characters.")
    mlflow = import_mlflow()
    if tracking_uri is not None:
        mlflow.set_tracking_uri(tracking_uri)
    uri = str(mlflow.get_tracking_uri())
    scheme = uri.partition("://")[0].partition("+")[0].lower() if "://" in uri else "file"
    if scheme in ("http", "https"):
        from urllib.parse import urlsplit

        where = urlsplit(uri)
        try:
            port = where.port or (443 if scheme == "https" else 80)
        except ValueError:
            port = None
        why = reachable(where.hostname or "", port) if port else "no port"
        if why is not None:
            raise InputError(f"--mlflow: nothing answers at the tracking server {uri!r} "
                             f"({why}); start it, or set MLFLOW_TRACKING_URI to a store you "
                             "can use (docs/scale.md, MLflow).")
    retries = os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    try:
        mlflow.set_experiment(experiment)
    except Exception as exc:  # noqa: BLE001 - the store's own error, e.g. a bad URI
        if scheme in _DB_SCHEMES and importlib.util.find_spec("sqlalchemy") is None:
            fix = ("; a database store needs the full MLflow package (pip install mlflow; "
                   "this one is mlflow-skinny)")
        elif scheme == "file" and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() \
                not in ("1", "true"):
            fix = "; to log to a folder set MLFLOW_ALLOW_FILE_STORE=true (docs/scale.md, MLflow)"
        else:
            fix = "; set MLFLOW_TRACKING_URI to a store you can use (docs/scale.md, MLflow)"
        raise InputError(f"--mlflow: cannot use the tracking store {uri!r} "
                         f"(experiment {short(experiment)}: {_first(exc)}){fix}.") from None
    finally:
        if retries is None:  # the audits' own logging keeps MLflow's retries
            os.environ.pop("MLFLOW_HTTP_REQUEST_MAX_RETRIES", None)
    return mlflow


def run_params(result: Any, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The params of an audit's run: what ran, as audit.json (``doc``, its
    ``to_jsonable(result.to_dict())``) records it: the system (a log audit: its log), the
    policy's label (the logged policy, a candidate), the engine, the horizon used (a
    log's length, a system's default), the sample: Monte Carlo ``n`` and ``seed``, a log
    audit's bootstrap ``n_boot`` and ``seed``, none for the exact engine (no sampling)."""
    spec = result.spec
    resolved, given = doc["spec"]["resolved"], doc["spec"]["parsed"].get("logs")
    log = given.get("path") if isinstance(given, Mapping) else None  # as the report names it
    params = {"spec": spec.name, "system": resolved["system"] if spec.source == "model"
              else f"logs {log or resolved['logs']}",
              "policy": doc["policy"]["label"], "engine": spec.engine,
              "horizon": doc["decomposition"]["horizon"]}
    if spec.source == "logs":
        params.update(n_boot=spec.n_boot, seed=spec.logs_seed)
    elif spec.engine == "mc":
        params.update(n=spec.n, seed=spec.seed)
    params.update(alpha=spec.alpha, checkpoint_sha256=result.checkpoint_sha256 or "")
    return params


def log_audit(result: Any, *, experiment: str = "causalfair", tracking_uri: str | None = None,
              report_dir: str | os.PathLike[str] | None = None, stage: str = "audit",
              run_name: str | None = None, retrain_error: str | None = None) -> str:
    """Log one :class:`~causalfair.audit.AuditResult` as an MLflow run; return its id.
    ``retrain_error``: the gate's one-line error of a retrain that failed after this audit
    (the tag ``causalfair.retrain_error``)."""
    mlflow = open_experiment(experiment, tracking_uri)
    spec = result.spec
    doc = to_jsonable(result.to_dict())
    params = run_params(result, doc)
    base = (result.extra or {}).get("baseline")
    if isinstance(base, Mapping):
        params["baseline"] = base.get("policy") or ""
        params["baseline_sha256"] = base.get("checkpoint_sha256") or ""
    metrics: dict[str, float] = {}
    for key, (est, lo, hi, se) in result.quantities.items():
        metrics[_key(key)] = float(est)
        if lo != hi or se is not None:  # an estimate's interval, zero-wide or not
            metrics[f"{_key(key)}.lower"] = float(lo)
            metrics[f"{_key(key)}.upper"] = float(hi)
    for v, name in zip(result.verdicts, _keys([v.key for v in result.verdicts]), strict=True):
        metrics[f"verdict.{name}.estimate"] = float(v.estimate)
    tags = {"causalfair.overall": result.overall, "causalfair.stage": stage,
            "causalfair.version": __version__}
    for v, name in zip(result.verdicts, _keys([v.label for v in result.verdicts]), strict=True):
        tags[f"causalfair.verdict.{name}"] = v.status
    if retrain_error:  # (MLflow keeps tag values up to 5,000 characters)
        tags["causalfair.retrain_error"] = retrain_error[:MAX_TAG]
    try:  # a run that fails part-way is ended as FAILED (by start_run's context), never
        # left FINISHED with half its record
        with mlflow.start_run(run_name=run_name or f"{spec.name} ({stage})") as run:
            mlflow.log_params({k: str(v) for k, v in params.items()})
            mlflow.log_metrics({k: v for k, v in metrics.items() if v == v})  # NaN: not logged
            mlflow.set_tags(tags)
            with tempfile.TemporaryDirectory(prefix="causalfair-mlflow-") as tmp:
                path = Path(tmp) / "audit.json"
                path.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n",
                                encoding="utf-8")
                mlflow.log_artifact(str(path))
            if report_dir is not None and Path(report_dir).is_dir():
                mlflow.log_artifacts(str(report_dir), artifact_path="report")
            return run.info.run_id
    except Exception as exc:  # noqa: BLE001 - the store's own error, mid-way
        raise OutputError(f"--mlflow: logging the audit of {short(spec.name)} ({stage}) to the "
                          f"tracking store {str(mlflow.get_tracking_uri())!r} failed "
                          f"({_first(exc)}); its run is marked FAILED, the audits logged "
                          "before it are kept; rerun once the store works.") from None

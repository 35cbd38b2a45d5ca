"""Audit specs, verdicts, the CI fairness gate and retrain-on-fail.

An *audit spec* is a TOML file kept under version control next to the policy it audits
(see docs/audit.md for every key)::

    name = "lending-1-ppo"
    horizon = 20

    [system]
    id = "lending-1"                # a registered id (causalfair systems), or
    # factory = "mysim:make"        # module:callable (mysim.py next to the spec), or
    # tabular = "model.npz"         # a tabular model file
    params = { levels = 7 }         # keyword arguments of the system's factory

    [policy]
    checkpoint = "ppo.pt"           # relative to the spec file; or builtin = "threshold:0.5"
                                    # or factory = "mypolicy:make" (+ params = {...})

    [engine]
    kind = "auto"                   # auto (exact when the system has a tabular model) | exact | mc
    alpha = 0.05

    [thresholds]                    # every threshold reads "quantity <= value"
    abs_C = 0.05
    Lambda = 0.1

    [retrain]
    algo = "ppo-cb"
    iterations = 50
    betas = { C = 1.0, Lambda = 0.5 }
    seed = 0

:func:`load_spec` validates a spec and refuses a bad one with an error naming the key,
the bad value and the allowed values. :func:`audit` runs it and returns an
:class:`AuditResult` (pandas tables, matplotlib figures, ``_repr_html_`` for notebooks).

Verdicts follow the CI rule: a threshold ``q <= v`` PASSES only when the whole
(1 - alpha) confidence interval of ``q`` lies inside it (upper bound <= v), FAILS when
the whole interval lies outside (lower bound > v) and is INCONCLUSIVE when the interval
straddles ``v``. Exact results have zero-width intervals, so they are never
inconclusive. ``abs_X`` thresholds use the interval of ``|X|`` implied by that of ``X``.
The overall verdict is FAIL if any threshold fails, else INCONCLUSIVE if any is
inconclusive, else PASS.

:func:`run_gate` evaluates several specs for CI (exit codes, JSON, JUnit XML) and can
retrain a failing checkpoint (``[retrain]``), warm-started from it, writing the new
checkpoint beside the old one (never overwriting) and re-auditing it.
"""

from __future__ import annotations

import html
import math
import os
import re
import sys
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from causalfair.errors import InputError, SpecError

__all__ = [
    "AuditSpec",
    "AuditResult",
    "SpecError",
    "Verdict",
    "GateEntry",
    "GateResult",
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "THRESHOLD_KEYS",
    "METRICS",
    "load_spec",
    "audit",
    "judge",
    "overall_verdict",
    "abs_interval",
    "compare",
    "run_gate",
    "retrained_checkpoint_path",
    "provenance",
]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"

SETTINGS = ("lending-1", "lending-2", "lending-3")
ENGINES = ("auto", "exact", "mc")
WEIGHTS = ("visitation", "initial")

#: Quantities a spec can report (``metrics``) and threshold.
METRICS: tuple[str, ...] = (
    "C", "DPE", "IPE", "SPE", "Lambda", "utility",
    "tpr_gap", "elbert_bias", "w1_final", "dp_gap",
)
#: Threshold keys: every one reads "quantity <= value".
THRESHOLD_KEYS: tuple[str, ...] = (
    "abs_C", "abs_DPE", "abs_IPE", "abs_SPE", "C", "DPE", "IPE", "SPE",
    "Lambda", "tpr_gap", "elbert_bias", "w1_final", "dp_gap",
)
RETRAIN_ALGOS = ("ppo", "ppo-c", "ppo-cb", "a-ppo", "f-ppo-l", "elbert-po")
TOP_KEYS = ("name", "horizon", "metrics", "system", "model", "logs", "policy", "engine",
            "benefit", "thresholds", "retrain")
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "system": ("id", "factory", "tabular", "params"),
    "model": ("setting", "levels", "interest"),
    "logs": ("path", "n_boot", "seed", "fit", "lambda_estimator", "state", "next_state",
             "bins", "potential_weights", "dowhy"),
    "policy": ("builtin", "checkpoint", "factory", "params"),
    "engine": ("kind", "n", "seed", "alpha"),
    "benefit": ("eps", "weights", "worst"),
    "retrain": ("algo", "iterations", "betas", "seed"),
}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")




# ---------------------------------------------------------------------------- the spec
@dataclass(frozen=True)
class AuditSpec:
    """A validated audit spec (see the module docstring and docs/audit.md).

    Paths (``checkpoint``, ``logs_path``, ``system_tabular``) are absolute, resolved
    against the spec file's folder. ``raw`` keeps the parsed TOML for the report. The
    system is ``system_id`` (a registered id or ``module:callable``, made with
    ``system_params``; ``module`` is looked up in ``base_dir`` first) or the tabular
    model file ``system_tabular``; the legacy ``[model] setting/levels/interest`` fill
    ``system_id`` and ``system_params`` too.
    """

    name: str
    horizon: int | None
    setting: str | None = "lending-1"
    levels: int = 7
    interest: float = 1.0
    logs_path: Path | None = None
    n_boot: int = 200
    logs_seed: int = 0
    logs_options: Mapping[str, Any] = field(default_factory=dict)
    builtin: str | None = "threshold:0.5"
    checkpoint: Path | None = None
    engine: str = "exact"
    n: int = 20000
    seed: int = 0
    alpha: float = 0.05
    eps: float = 0.1
    weights: str = "visitation"
    worst: int = 5
    metrics: tuple[str, ...] = METRICS
    thresholds: Mapping[str, float] = field(default_factory=dict)
    retrain: Mapping[str, Any] | None = None
    path: Path | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    system_id: str | None = None
    system_params: Mapping[str, Any] = field(default_factory=dict)
    system_tabular: Path | None = None
    policy_factory: str | None = None
    policy_params: Mapping[str, Any] = field(default_factory=dict)
    base_dir: Path | None = None

    @property
    def source(self) -> str:
        return "logs" if self.logs_path is not None else "model"

    @property
    def policy_label(self) -> str:
        if self.checkpoint is not None:
            return f"checkpoint {self.checkpoint.name}"
        if self.policy_factory is not None:
            return f"factory {self.policy_factory}"
        return f"builtin {self.builtin}"

    @property
    def system_label(self) -> str:
        if self.system_tabular is not None:
            return f"tabular {self.system_tabular.name}"
        return str(self.system_id)

    def with_policy(self, *, checkpoint: str | os.PathLike[str] | None = None,
                    builtin: str | None = None) -> AuditSpec:
        """A copy auditing another policy (a checkpoint path or a built-in)."""
        if (checkpoint is None) == (builtin is None):
            raise SpecError("with_policy: pass exactly one of checkpoint= or builtin=.")
        if checkpoint is not None:
            return replace(self, checkpoint=Path(checkpoint).resolve(), builtin=None,
                           policy_factory=None, policy_params={})
        return replace(self, builtin=str(builtin), checkpoint=None, policy_factory=None,
                       policy_params={})


def _where(path: Path | None) -> str:
    return f"audit spec {path}" if path is not None else "audit spec"


def _fail(path: Path | None, key: str, value: Any, allowed: str) -> SpecError:
    return SpecError(f"{_where(path)}: {key}: bad value {value!r}; allowed values: {allowed}.")


def _get_int(sec: Mapping[str, Any], key: str, label: str, path: Path | None, *,
             minimum: int, default: int | None) -> int | None:
    if key not in sec:
        return default
    v = sec[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise _fail(path, label, v, f"an integer >= {minimum}")
    return int(v)


def _get_float(sec: Mapping[str, Any], key: str, label: str, path: Path | None, *,
               default: float, lo: float, hi: float = math.inf, lo_open: bool = False,
               hi_open: bool = False) -> float:
    if key not in sec:
        return default
    v = sec[key]
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    if ok:
        ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        lo_s = f"> {lo:g}" if lo_open else f">= {lo:g}"
        hi_s = "" if hi == math.inf else (f" and < {hi:g}" if hi_open else f" and <= {hi:g}")
        raise _fail(path, label, v, f"a number {lo_s}{hi_s}")
    return float(v)


def _names(sec: Mapping[str, Any], key: str, path: Path | None) -> list[str] | None:
    if key not in sec:
        return None
    v = sec[key]
    v = [v] if isinstance(v, str) else v
    if (not isinstance(v, list) or not v
            or not all(isinstance(c, str) and c for c in v) or len(set(v)) != len(v)):
        raise _fail(path, f"[logs] {key}", sec[key], "a column name or a list of distinct "
                    "column names of the log")
    return list(v)


def _logs_options(sec: Mapping[str, Any], path: Path | None) -> dict[str, Any]:
    """The [logs] keys passed on to causalfair.logs.audit_logs (validated here by type;
    the log itself is checked when it is read)."""
    from causalfair.logs.audit import LAMBDA_ESTIMATORS, METHODS

    out: dict[str, Any] = {}
    fit = sec.get("fit", "counts")
    if fit not in METHODS:
        raise _fail(path, "[logs] fit", fit, ", ".join(METHODS))
    out["method"] = fit
    est = sec.get("lambda_estimator", "thresholded")
    if est not in LAMBDA_ESTIMATORS:
        raise _fail(path, "[logs] lambda_estimator", est, ", ".join(LAMBDA_ESTIMATORS))
    out["lambda_estimator"] = est
    dw = sec.get("dowhy", False)
    if not isinstance(dw, bool):
        raise _fail(path, "[logs] dowhy", dw, "true, false")
    out["dowhy"] = dw
    state, nxt = _names(sec, "state", path), _names(sec, "next_state", path)
    feature_keys = [k for k in ("next_state", "bins", "potential_weights") if k in sec]
    if state is None:
        if feature_keys:
            raise SpecError(f"{_where(path)}: [logs] {feature_keys[0]}: only used with feature "
                            "states; add [logs] state = [\"feature\", ...] or remove it.")
        return out
    if nxt is not None and len(nxt) != len(state):
        raise _fail(path, "[logs] next_state", sec["next_state"],
                    f"one column per state feature ({len(state)}: {', '.join(state)})")
    bins = sec.get("bins")

    def bad_bins() -> SpecError:
        return _fail(path, "[logs] bins", bins, "an integer >= 2 (quantile bins per feature), "
                     "or a table feature -> integer >= 2 or list of increasing cut points")

    def one_bin(v: Any) -> Any:
        if isinstance(v, bool):
            raise bad_bins()
        if isinstance(v, int):
            if v < 2:
                raise bad_bins()
            return v
        if (isinstance(v, list) and v and all(isinstance(c, (int, float))
                                               and not isinstance(c, bool) for c in v)):
            return [float(c) for c in v]
        raise bad_bins()

    if bins is None:
        raise SpecError(f"{_where(path)}: [logs] bins: missing; feature states need a binning "
                        "into levels: an integer (quantile bins per feature) or a table "
                        "feature -> integer or list of cut points.")
    if isinstance(bins, Mapping):
        unknown = [k for k in bins if k not in state]
        if unknown:
            raise _fail(path, "[logs] bins", bins, f"keys among the state features {state}")
        out["bins"] = {k: one_bin(v) for k, v in bins.items()}
    else:
        out["bins"] = one_bin(bins)
    out["state"] = state
    if nxt is not None:
        out["next_state"] = nxt
    if "potential_weights" in sec:
        pw = sec["potential_weights"]
        if (not isinstance(pw, Mapping) or not pw or any(k not in state for k in pw)
                or any(isinstance(v, bool) or not isinstance(v, (int, float))
                       or not math.isfinite(v) for v in pw.values())):
            raise _fail(path, "[logs] potential_weights", pw,
                        f"a table state feature -> number (features: {', '.join(state)})")
        out["potential_weights"] = {k: float(v) for k, v in pw.items()}
    elif len(state) > 1:
        raise SpecError(f"{_where(path)}: [logs] potential_weights: missing; with several state "
                        "features the gain potential f(x) must be given, e.g. "
                        "potential_weights = { income = 1.0 } (f = sum of weight x the bin's "
                        "mean feature value).")
    return out


def _system_section(sec: Any, path: Path | None, base: Path) -> dict[str, Any]:
    sec = _check_keys(sec, "system", SECTION_KEYS["system"], path)
    given = [k for k in ("id", "factory", "tabular") if k in sec]
    if len(given) != 1:
        raise SpecError(
            f"{_where(path)}: [system]: give exactly one of id (a registered system, see "
            "`causalfair systems`), factory ('module:callable') or tabular (a model file); "
            f"got {', '.join(given) or 'none'}.")
    params = sec.get("params", {})
    if not isinstance(params, Mapping):
        raise _fail(path, "[system] params", params, "a table such as { levels = 7 }")
    out: dict[str, Any] = {"setting": None, "system_params": dict(params)}
    if "tabular" in sec:
        tp = sec["tabular"]
        if not isinstance(tp, str) or not tp:
            raise _fail(path, "[system] tabular", tp, "a path to a .npz or .json tabular model")
        tpath = (base / tp).resolve()
        if not tpath.is_file():
            raise SpecError(f"{_where(path)}: [system] tabular: bad value {tp!r}; no such file {tpath}.")
        if params:
            raise SpecError(f"{_where(path)}: [system] params: not used with [system] tabular.")
        out.update(system_tabular=tpath, system_id=f"tabular:{tpath.name}")
        return out
    key = given[0]
    sid = sec[key]
    if not isinstance(sid, str) or not sid.strip():
        raise _fail(path, f"[system] {key}", sid,
                    "a registered id such as 'lending-1'" if key == "id" else "'module:callable'")
    if key == "factory" and (sid.count(":") != 1 or sid.startswith(":") or sid.endswith(":")):
        raise _fail(path, "[system] factory", sid,
                    "'module:callable' (module.py next to the spec, or installed)")
    out["system_id"] = sid
    if sid in SETTINGS:
        out["setting"] = sid
        out["levels"] = params.get("levels", 7)
        out["interest"] = params.get("interest", 1.0)
    return out


def _check_keys(sec: Any, name: str, allowed: Sequence[str], path: Path | None) -> Mapping:
    if not isinstance(sec, Mapping):
        raise _fail(path, f"[{name}]", sec, f"a table with keys {', '.join(allowed)}")
    for k in sec:
        if k not in allowed:
            raise SpecError(
                f"{_where(path)}: [{name}] {k}: unknown key; allowed keys: {', '.join(allowed)}."
            )
    return sec


def load_spec(spec: str | os.PathLike[str] | Mapping[str, Any], *,
              base_dir: str | os.PathLike[str] | None = None) -> AuditSpec:
    """Read and validate an audit spec: a TOML file path, or an already parsed mapping
    (relative paths then resolve against ``base_dir``, default the working directory).

    Raises :class:`SpecError` naming the key, the bad value and the allowed values.
    """
    import tomllib

    path: Path | None = None
    if isinstance(spec, Mapping):
        raw = dict(spec)
        base = Path(base_dir or ".").resolve()
    else:
        path = Path(spec)
        if not path.is_file():
            raise SpecError(f"audit spec {path}: no such file.")
        try:
            with open(path, "rb") as fh:
                raw = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"audit spec {path}: not valid TOML ({exc}).") from None
        base = path.resolve().parent
    for k in raw:
        if k not in TOP_KEYS:
            raise SpecError(f"{_where(path)}: {k}: unknown key; allowed keys: {', '.join(TOP_KEYS)}.")

    # name
    if "name" not in raw:
        raise SpecError(f"{_where(path)}: name: missing; give the audit a name (letters, digits, . _ -).")
    name = raw["name"]
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _fail(path, "name", name, "a string of letters, digits, '.', '_' or '-'")

    kw: dict[str, Any] = {"name": name, "path": path.resolve() if path else None, "raw": raw}

    # source: [model] (+ [policy]) or [logs]
    if "logs" in raw and ("model" in raw or "policy" in raw):
        raise SpecError(
            f"{_where(path)}: [logs]: cannot be combined with [model] or [policy]; a log "
            "audit reads the deployed policy from the logs. Keep one of them."
        )
    if "logs" in raw:
        sec = _check_keys(raw["logs"], "logs", SECTION_KEYS["logs"], path)
        lp = sec.get("path")
        if not isinstance(lp, str) or not lp:
            raise _fail(path, "[logs] path", lp, "a path to a CSV file (relative to the spec file)")
        logs_path = (base / lp).resolve()
        if not logs_path.is_file():
            raise SpecError(f"{_where(path)}: [logs] path: bad value {lp!r}; no such file {logs_path}.")
        kw.update(logs_path=logs_path, setting=None, builtin=None,
                  n_boot=_get_int(sec, "n_boot", "[logs] n_boot", path, minimum=2, default=200),
                  logs_seed=_get_int(sec, "seed", "[logs] seed", path, minimum=0, default=0),
                  logs_options=_logs_options(sec, path))
    else:
        kw["base_dir"] = base
        if "system" in raw and "model" in raw:
            raise SpecError(
                f"{_where(path)}: [model]: cannot be combined with [system]; [model] is the "
                "older spelling of [system] id = \"lending-N\". Keep [system].")
        if "system" in raw:
            kw.update(_system_section(raw["system"], path, base))
        else:
            sec = _check_keys(raw.get("model", {}), "model", SECTION_KEYS["model"], path)
            setting = sec.get("setting", "lending-1")
            if setting not in SETTINGS:
                raise _fail(path, "[model] setting", setting, ", ".join(SETTINGS))
            levels = _get_int(sec, "levels", "[model] levels", path, minimum=3, default=7)
            interest = _get_float(sec, "interest", "[model] interest", path, default=1.0, lo=0.0)
            kw.update(setting=setting, levels=levels, interest=interest, system_id=setting,
                      system_params={"levels": levels, "interest": interest})
        sec = _check_keys(raw.get("policy", {}), "policy", SECTION_KEYS["policy"], path)
        given = [k for k in ("builtin", "checkpoint", "factory") if k in sec]
        if len(given) > 1:
            raise SpecError(
                f"{_where(path)}: [policy]: {'both ' if len(given) == 2 else ''}"
                f"{' and '.join(given)} are set; keep one."
            )
        if "params" in sec and "factory" not in sec:
            raise SpecError(f"{_where(path)}: [policy] params: only used with [policy] factory.")
        if "factory" in sec:
            fac = sec["factory"]
            if not isinstance(fac, str) or fac.count(":") != 1 or fac.startswith(":") \
                    or fac.endswith(":"):
                raise _fail(path, "[policy] factory", fac,
                            "'module:callable' (module.py next to the spec, or installed)")
            pp = sec.get("params", {})
            if not isinstance(pp, Mapping):
                raise _fail(path, "[policy] params", pp, "a table such as { threshold = 0.5 }")
            kw.update(policy_factory=fac, policy_params=dict(pp), builtin=None)
        elif "checkpoint" in sec:
            ck = sec["checkpoint"]
            if not isinstance(ck, str) or not ck:
                raise _fail(path, "[policy] checkpoint", ck,
                            "a path to a causalfair checkpoint (relative to the spec file)")
            ck_path = (base / ck).resolve()
            if not ck_path.is_file():
                raise SpecError(
                    f"{_where(path)}: [policy] checkpoint: bad value {ck!r}; no such file {ck_path}."
                )
            kw.update(checkpoint=ck_path, builtin=None)
        else:
            from causalfair.policy import BUILTIN_POLICIES

            b = sec.get("builtin", "threshold:0.5")
            kind = b.partition(":")[0] if isinstance(b, str) else None
            if kind not in {k.partition(":")[0] for k in BUILTIN_POLICIES}:
                raise _fail(path, "[policy] builtin", b, ", ".join(BUILTIN_POLICIES))
            kw["builtin"] = b

    # horizon
    if "horizon" in raw:
        h = raw["horizon"]
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            raise _fail(path, "horizon", h, "an integer >= 1")
        kw["horizon"] = int(h)
    elif "logs" in raw or "system" in raw:
        kw["horizon"] = None  # from the logs, or the system's default horizon
    else:
        kw["horizon"] = 20

    # engine
    sec = _check_keys(raw.get("engine", {}), "engine", SECTION_KEYS["engine"], path)
    kind = sec.get("kind", "auto" if "system" in raw else "exact")
    if kind not in ENGINES:
        raise _fail(path, "[engine] kind", kind, ", ".join(ENGINES))
    if "logs" in raw and "kind" in sec:
        raise SpecError(
            f"{_where(path)}: [engine] kind: not used with [logs] (log audits bootstrap the "
            "logs; set [logs] n_boot and seed instead). Remove it."
        )
    kw.update(
        engine=kind if "logs" not in raw else "logs",
        n=_get_int(sec, "n", "[engine] n", path, minimum=2, default=20000),
        seed=_get_int(sec, "seed", "[engine] seed", path, minimum=0, default=0),
        alpha=_get_float(sec, "alpha", "[engine] alpha", path, default=0.05, lo=0.0, hi=1.0,
                         lo_open=True, hi_open=True),
    )

    # benefit
    sec = _check_keys(raw.get("benefit", {}), "benefit", SECTION_KEYS["benefit"], path)
    weights = sec.get("weights", "visitation")
    if weights not in WEIGHTS:
        raise _fail(path, "[benefit] weights", weights, ", ".join(WEIGHTS))
    kw.update(
        eps=_get_float(sec, "eps", "[benefit] eps", path, default=0.1, lo=0.0, lo_open=True),
        weights=weights,
        worst=_get_int(sec, "worst", "[benefit] worst", path, minimum=1, default=5),
    )

    # metrics
    if "metrics" in raw:
        m = raw["metrics"]
        if not isinstance(m, list) or not m:
            raise _fail(path, "metrics", m, f"a non-empty list of {', '.join(METRICS)}")
        for item in m:
            if item not in METRICS:
                raise _fail(path, "metrics", item, ", ".join(METRICS))
        kw["metrics"] = tuple(dict.fromkeys(m))

    # thresholds
    sec = raw.get("thresholds", {})
    if not isinstance(sec, Mapping):
        raise _fail(path, "[thresholds]", sec, "a table such as { abs_C = 0.05 }")
    thr: dict[str, float] = {}
    for k in sec:
        if k not in THRESHOLD_KEYS:
            raise SpecError(
                f"{_where(path)}: [thresholds] {k}: unknown key; allowed keys: "
                f"{', '.join(THRESHOLD_KEYS)} (each reads 'quantity <= value')."
            )
        signed = k in ("C", "DPE", "IPE", "SPE")
        thr[k] = _get_float(sec, k, f"[thresholds] {k}", path, default=0.0,
                            lo=-math.inf if signed else 0.0)
    kw["thresholds"] = thr

    # retrain
    if "retrain" in raw:
        sec = _check_keys(raw["retrain"], "retrain", SECTION_KEYS["retrain"], path)
        algo = sec.get("algo", "ppo-cb")
        if algo not in RETRAIN_ALGOS:
            raise _fail(path, "[retrain] algo", algo, ", ".join(RETRAIN_ALGOS))
        betas = sec.get("betas", {})
        if not isinstance(betas, Mapping):
            raise _fail(path, "[retrain] betas", betas, "a table such as { C = 1.0, Lambda = 0.5 }")
        clean_b: dict[str, float] = {}
        for bk in betas:
            if bk not in ("C", "Lambda", "KL"):
                raise SpecError(
                    f"{_where(path)}: [retrain] betas {bk}: unknown key; allowed keys: C, Lambda, KL."
                )
            clean_b[bk] = _get_float(betas, bk, f"[retrain] betas {bk}", path, default=0.0, lo=0.0)
        kw["retrain"] = {
            "algo": algo,
            "iterations": _get_int(sec, "iterations", "[retrain] iterations", path, minimum=1,
                                   default=50),
            "betas": clean_b,
            "seed": _get_int(sec, "seed", "[retrain] seed", path, minimum=0, default=0),
        }
    return AuditSpec(**kw)


# ---------------------------------------------------------------------------- verdicts
def abs_interval(lower: float, upper: float) -> tuple[float, float]:
    """The interval of |X| implied by an interval [lower, upper] of X."""
    if lower >= 0:
        return lower, upper
    if upper <= 0:
        return -upper, -lower
    return 0.0, max(-lower, upper)


def judge(lower: float, upper: float, threshold: float) -> str:
    """Verdict of "q <= threshold" given an interval [lower, upper] of q (the CI rule)."""
    if upper <= threshold:
        return PASS
    if lower > threshold:
        return FAIL
    return INCONCLUSIVE


def overall_verdict(statuses: Sequence[str]) -> str:
    """FAIL if any FAIL, else INCONCLUSIVE if any INCONCLUSIVE, else PASS."""
    if FAIL in statuses:
        return FAIL
    if INCONCLUSIVE in statuses:
        return INCONCLUSIVE
    return PASS


@dataclass(frozen=True)
class Verdict:
    """One threshold's verdict: ``quantity <= threshold`` judged on the CI [lower, upper]."""

    key: str
    threshold: float
    estimate: float
    lower: float
    upper: float
    status: str

    @property
    def label(self) -> str:
        return f"{self.key} <= {self.threshold:g}"

    def message(self) -> str:
        if self.lower == self.upper:
            where = f"{self.estimate:.6g}"
        else:
            where = f"{self.estimate:.6g} (CI [{self.lower:.6g}, {self.upper:.6g}])"
        rel = {PASS: "within", FAIL: "outside", INCONCLUSIVE: "straddles"}[self.status]
        return f"{self.key} = {where}: {self.status} ({rel} threshold {self.threshold:g})"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "threshold": self.threshold, "estimate": self.estimate,
                "lower": self.lower, "upper": self.upper, "status": self.status}


# ---------------------------------------------------------------------------- the result
@dataclass(eq=False)
class AuditResult:
    """Everything an audit produced. Tables are pandas DataFrames, figures matplotlib
    Figures (built on first use). ``str(result)`` is a text summary; in Jupyter the
    result renders as HTML."""

    spec: AuditSpec
    decomposition: Any  # causalfair.effects.Decomposition
    benefit: Any  # causalfair.benefit.BenefitResult
    notions: dict[str, Any]
    quantities: dict[str, tuple[float, float, float, float | None]]  # est, lo, hi, se
    verdicts: list[Verdict]
    model: Any = None  # TabularModel (None for log audits without one)
    policy: Any = None
    policy_table: np.ndarray | None = None
    mu_pi: np.ndarray | None = None  # (T+1, G, K)
    mu_0: np.ndarray | None = None
    checkpoint_sha256: str | None = None
    checkpoint_meta: dict[str, Any] | None = None
    system: Any = None  # causalfair.systems.System (None for log audits)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    _figures: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def overall(self) -> str:
        return overall_verdict([v.status for v in self.verdicts])

    @property
    def passed(self) -> bool:
        return self.overall == PASS

    @property
    def name(self) -> str:
        return self.spec.name

    # ----------------------------------------------------------------- tables
    def verdicts_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(
            [v.to_dict() for v in self.verdicts],
            columns=["key", "threshold", "estimate", "lower", "upper", "status"],
        ).set_index("key")

    def quantities_frame(self) -> Any:
        """The reported metrics: estimate, se (None when exact), CI bounds."""
        import pandas as pd

        rows = {k: {"estimate": e, "se": s, "ci_lower": lo, "ci_upper": hi}
                for k, (e, lo, hi, s) in self.quantities.items() if k in self.spec.metrics}
        df = pd.DataFrame.from_dict(rows, orient="index",
                                    columns=["estimate", "se", "ci_lower", "ci_upper"])
        df.index.name = "quantity"
        return df

    def decomposition_frame(self) -> Any:
        return self.decomposition.to_frame(self.spec.alpha)

    def groups_frame(self) -> Any:
        return self.decomposition.groups_frame()

    def steps_frame(self) -> Any:
        return self.decomposition.steps_frame()

    def worst_pairs(self, n: int | None = None) -> Any:
        if self.benefit is None:
            import pandas as pd

            return pd.DataFrame()
        return self.benefit.worst_pairs(self.spec.worst if n is None else n)

    def notions_frame(self) -> Any:
        """Other notions (TPR gap, ELBERT bias, W1, DP gap, utility), one row each."""
        import pandas as pd

        flat = {k: v for k, v in self.notions.items() if isinstance(v, (int, float)) or v is None}
        return pd.Series(flat, name="value", dtype=float).to_frame()

    # ----------------------------------------------------------------- figures
    def figures(self) -> dict[str, Any]:
        """The report's figures, name -> matplotlib Figure (built once, then cached)."""
        if self._figures is None:
            from causalfair.report import make_figures

            self._figures = make_figures(self)
        return self._figures

    def write_report(self, out: str | os.PathLike[str] | None = None, *,
                     before: AuditResult | None = None, jobs: int = 1) -> Path:
        """Write report.html, report.md, audit.json and the PNGs to ``out`` (default
        reports/NAME), atomically. Returns the folder. ``jobs=2``: draw half of the
        figures in a forked process (see :func:`causalfair.report.write_report`)."""
        from causalfair.report import write_report

        return write_report(self, out if out is not None else Path("reports") / self.name,
                            before=before, jobs=jobs)

    # ----------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe content: spec, verdicts, estimates, decomposition, benefit, notions,
        provenance."""
        spec = self.spec
        return {
            "name": spec.name,
            "overall": self.overall,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "quantities": {k: {"estimate": e, "ci_lower": lo, "ci_upper": hi, "se": s}
                           for k, (e, lo, hi, s) in self.quantities.items()},
            "spec": _spec_dict(spec),
            "policy": {
                "label": spec.policy_label if spec.source == "model" else f"logs {spec.logs_path}",
                "checkpoint": _display_path(spec.checkpoint),
                "checkpoint_sha256": self.checkpoint_sha256,
                "checkpoint_metadata": (self.checkpoint_meta or {}).get("metadata"),
            },
            "decomposition": self.decomposition.to_dict(),
            "benefit": (_json_safe(self.benefit.to_dict(n_worst=spec.worst))
                        if self.benefit is not None else None),
            "notions": _json_safe(self.notions),
            "seeds": {"engine": spec.seed if spec.engine == "mc" else None,
                      "logs_bootstrap": spec.logs_seed if spec.source == "logs" else None,
                      "retrain": (spec.retrain or {}).get("seed")},
            "seconds": self.seconds,
            "provenance": provenance(),
            **({"system": self.system.to_dict()} if self.system is not None else {}),
            **({"extra": _json_safe(self.extra)} if self.extra else {}),
        }

    def summary(self) -> str:
        spec = self.spec
        lines = [
            f"Audit {spec.name}: {self.overall}",
            f"  source: {spec.system_label if spec.source == 'model' else spec.logs_path}   policy: "
            f"{spec.policy_label if spec.source == 'model' else 'from logs'}   "
            f"T = {self.decomposition.horizon}   engine: {spec.engine}",
        ]
        if self.checkpoint_sha256:
            lines.append(f"  checkpoint sha256: {self.checkpoint_sha256}")
        lines.append("")
        for v in self.verdicts:
            lines.append(f"  [{v.status:<12}] {v.message()}")
        if not self.verdicts:
            lines.append("  (no thresholds: nothing to judge)")
        lines.append("")
        for k in spec.metrics:
            if k in self.quantities:
                e, lo, hi, s = self.quantities[k]
                ci = f"   CI [{lo:+.6f}, {hi:+.6f}]" if s is not None else ""
                lines.append(f"  {k:<12} {e:+.6f}{ci}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"AuditResult(name={self.spec.name!r}, overall={self.overall!r})"

    def _repr_html_(self) -> str:
        from causalfair.report import figure_png_base64

        colour = {PASS: "#1a7f37", FAIL: "#cf222e", INCONCLUSIVE: "#9a6700"}[self.overall]
        parts = [
            f"<div><h3>Audit {html.escape(self.spec.name)}: "
            f"<span style='color:{colour}'>{self.overall}</span></h3>",
            self.verdicts_frame().to_html(float_format=lambda x: f"{x:.6f}") if self.verdicts
            else "<p>No thresholds.</p>",
            "<h4>Metrics</h4>",
            self.quantities_frame().to_html(float_format=lambda x: f"{x:.6f}", na_rep="-"),
            "<h4>Worst benefit pairs</h4>",
            self.worst_pairs().to_html(index=False, float_format=lambda x: f"{x:.4f}"),
        ]
        for name, fig in self.figures().items():
            parts.append(f"<img alt='{name}' src='data:image/png;base64,{figure_png_base64(fig)}'/>")
        parts.append("</div>")
        return "\n".join(parts)


def _display_path(p: str | os.PathLike[str] | None) -> str | None:
    """A path relative to the working directory when it lies below it, else absolute."""
    if p is None:
        return None
    p = Path(p).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _json_safe(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, np.ndarray):
        return _json_safe(x.tolist())
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, Path):
        return str(x)
    return x


def _spec_dict(spec: AuditSpec) -> dict[str, Any]:
    return _json_safe({
        "file": _display_path(spec.path),
        "parsed": dict(spec.raw),
        "resolved": {
            "name": spec.name, "horizon": spec.horizon, "setting": spec.setting,
            "levels": spec.levels, "interest": spec.interest,
            "system": spec.system_label if spec.source == "model" else None,
            "system_params": dict(spec.system_params),
            "policy_factory": spec.policy_factory, "policy_params": dict(spec.policy_params),
            "logs": _display_path(spec.logs_path), "logs_options": dict(spec.logs_options),
            "builtin": spec.builtin, "checkpoint": _display_path(spec.checkpoint),
            "engine": spec.engine, "n": spec.n, "seed": spec.seed, "alpha": spec.alpha,
            "eps": spec.eps, "weights": spec.weights, "metrics": list(spec.metrics),
            "thresholds": dict(spec.thresholds), "retrain": dict(spec.retrain or {}),
        },
    })


_PROVENANCE_PACKAGES = ("numpy", "pandas", "scipy", "networkx", "matplotlib", "torch",
                        "statsmodels", "gymnasium", "dowhy")


def provenance() -> dict[str, Any]:
    """Python, platform, causalfair and dependency versions (from package metadata,
    without importing the packages)."""
    import platform
    from importlib import metadata

    from causalfair import __version__

    deps = {}
    for pkg in _PROVENANCE_PACKAGES:
        try:
            deps[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            deps[pkg] = None
    return {"causalfair": __version__, "python": sys.version.split()[0],
            "platform": platform.platform(), "dependencies": deps}


# ---------------------------------------------------------------------------- running
def _resolve_spec(spec_or_path: Any) -> AuditSpec:
    if isinstance(spec_or_path, AuditSpec):
        return spec_or_path
    return load_spec(spec_or_path)


def _resolve_policy(spec: AuditSpec, model: Any, policy: Any, prefetched: Any = None):
    """(policy, name, sha256, checkpoint meta). ``prefetched``: the spec's checkpoint
    already loaded and tabulated by :mod:`causalfair._prefetch` (used only when it is
    that very file)."""
    from causalfair.policy import TablePolicy, file_sha256, load_checkpoint, parse_policy

    if (policy is None and prefetched is not None and spec.checkpoint is not None
            and Path(prefetched.path) == spec.checkpoint):
        pname = (prefetched.meta.get("metadata") or {}).get("name", spec.checkpoint.stem)
        return (TablePolicy(prefetched.table, name=pname), spec.checkpoint.name,
                prefetched.sha256, prefetched.meta)

    if policy is not None:
        if isinstance(policy, str):
            p = Path(policy)
            if p.suffix == ".pt" or p.is_file():
                pol, meta = load_checkpoint(p, model)
                return pol, p.name, file_sha256(p), meta
            return parse_policy(policy, model), policy, None, None
        return policy, getattr(policy, "name", type(policy).__name__), None, None
    if spec.checkpoint is not None:
        pol, meta = load_checkpoint(spec.checkpoint, model)
        return pol, spec.checkpoint.name, file_sha256(spec.checkpoint), meta
    return parse_policy(spec.builtin, model), spec.builtin, None, None


def _quantities(spec: AuditSpec, dec: Any, notions: Mapping[str, Any],
                lam_se: float | None = None) -> dict[str, tuple[float, float, float, float | None]]:
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1.0 - spec.alpha / 2.0)
    est = dec.estimates()
    se = dict(dec.se) if dec.se else None
    out: dict[str, tuple[float, float, float, float | None]] = {}
    names = ["C", "DPE", "IPE", "SPE", "utility"]
    for k in names:
        e = float(est[k])
        s = float(se[k]) if se is not None and k in se else None
        out[k] = (e, e - z * s, e + z * s) + (s,) if s is not None else (e, e, e, None)
    lam = dec.Lambda
    if lam is not None:
        s = lam_se if lam_se is not None else (float(se["Lambda"]) if se and "Lambda" in se else None)
        out["Lambda"] = (lam, max(0.0, lam - z * s), lam + z * s, s) if s is not None else (
            lam, lam, lam, None)
    for k in ("tpr_gap", "elbert_bias", "w1_final", "dp_gap"):
        v = notions.get(k)
        if isinstance(v, (int, float)) and v is not None:
            s = notions.get(f"{k}_se")
            if isinstance(s, (int, float)):
                out[k] = (float(v), max(0.0, v - z * s), v + z * s, float(s))
            else:
                out[k] = (float(v), float(v), float(v), None)
    return out


def _verdicts(spec: AuditSpec, q: Mapping[str, tuple[float, float, float, float | None]]
              ) -> list[Verdict]:
    out = []
    for key, thr in spec.thresholds.items():
        base = key[4:] if key.startswith("abs_") else key
        if base not in q:
            raise SpecError(
                f"{_where(spec.path)}: [thresholds] {key}: the quantity {base!r} is not "
                f"available for this audit (available: {', '.join(sorted(q))})."
            )
        e, lo, hi, _ = q[base]
        if key.startswith("abs_"):
            lo, hi = abs_interval(lo, hi)
            e = abs(e)
        out.append(Verdict(key=key, threshold=float(thr), estimate=float(e), lower=float(lo),
                           upper=float(hi), status=judge(lo, hi, thr)))
    return out


def build_system(spec: AuditSpec) -> Any:
    """The :class:`~causalfair.systems.System` a spec names: ``[system] id`` /
    ``factory`` (made with ``params``; a factory module is looked up in the spec's folder
    first) or ``tabular`` (a model file), or the legacy ``[model] setting``."""
    from causalfair.errors import CausalfairError
    from causalfair.systems import as_system, load_tabular, make

    try:
        if spec.system_tabular is not None:
            return as_system(load_tabular(spec.system_tabular), id=spec.system_id or "tabular")
        return make(spec.system_id or "lending-1", search_path=spec.base_dir,
                    **dict(spec.system_params))
    except CausalfairError as exc:
        raise type(exc)(f"{_where(spec.path)}: [system]: {exc}") from None


def resolve_policy(spec: AuditSpec, system: Any, policy: Any = None
                   ) -> tuple[Any, str, str | None, dict[str, Any] | None]:
    """(policy, label, checkpoint sha256, checkpoint metadata) for ``spec`` on
    ``system``; ``policy`` overrides the spec's ``[policy]`` (a built-in name, a
    checkpoint path or a policy object)."""
    from causalfair.policy import file_sha256, parse_policy

    if policy is not None:
        if isinstance(policy, (str, os.PathLike)):
            p = Path(policy)
            if p.suffix in (".pt", ".npz", ".zip", ".safetensors") or p.is_file():
                pol, meta = _load_checkpoint_for(p, system)
                return pol, p.name, file_sha256(p), meta
            return parse_policy(str(policy), system), str(policy), None, None
        return policy, getattr(policy, "name", type(policy).__name__), None, None
    if spec.checkpoint is not None:
        pol, meta = _load_checkpoint_for(spec.checkpoint, system)
        return pol, spec.checkpoint.name, file_sha256(spec.checkpoint), meta
    if spec.policy_factory is not None:
        from causalfair.errors import PolicyError
        from causalfair.systems import load_callable

        fn = load_callable(spec.policy_factory, search_path=spec.base_dir,
                           what=f"{_where(spec.path)}: [policy] factory")
        try:
            pol = fn(**dict(spec.policy_params))
        except TypeError as exc:
            raise PolicyError(
                f"{_where(spec.path)}: [policy] factory {spec.policy_factory!r}: {exc}; check "
                "[policy] params against the factory's arguments.") from None
        if not (callable(getattr(pol, "prob_d1", None)) or callable(getattr(pol, "action_probs", None))):
            raise PolicyError(
                f"{_where(spec.path)}: [policy] factory {spec.policy_factory!r} returned "
                f"{type(pol).__name__}, which has neither prob_d1(obs) nor action_probs(obs).")
        return pol, spec.policy_factory, None, None
    return parse_policy(spec.builtin, system), spec.builtin, None, None


def _load_checkpoint_for(path: Path, system: Any) -> tuple[Any, dict[str, Any]]:
    """Load a checkpoint and check that its inputs fit ``system`` (levels x groups for
    one-hot encodings; feature names, or widths where either side has none)."""
    from causalfair.policy import load_checkpoint

    tab = system.tabular
    pol, meta = load_checkpoint(path, tab if tab is not None and system.features is None else None)
    try:
        from causalfair.checkpoint import check_policy_inputs
    except ImportError:  # pragma: no cover - until the checkpoint module lands
        return pol, meta
    check_policy_inputs(pol, feature_names=system.features, n_levels=system.n_levels,
                        n_groups=system.n_groups, source=str(path))
    return pol, meta


def choose_engine(spec: AuditSpec, system: Any) -> str:
    """The engine an audit runs: ``exact`` needs a tabular model of independent units."""
    kind = spec.engine
    if kind == "auto":
        return "exact" if "exact" in system.engines else "mc"
    if kind == "exact" and "exact" not in system.engines:
        raise SpecError(
            f"{_where(spec.path)}: [engine] kind: bad value 'exact'; system {system.id!r} has no "
            "tabular model of independent units, so only the Monte Carlo engine applies "
            "(kind = \"mc\" or \"auto\").")
    return kind


def audit(spec_or_path: str | os.PathLike[str] | AuditSpec | Mapping[str, Any], *,
          policy: Any = None, system: Any = None, prefetched: Any = None) -> AuditResult:
    """Run an audit spec and return an :class:`AuditResult`.

    ``spec_or_path``: a TOML file, a parsed mapping or an :class:`AuditSpec`.
    ``policy``: optional override of the spec's ``[policy]``: a built-in name
    (``"threshold:0.7"``), a checkpoint path or a policy object; handy to compare
    policies under the same spec in a notebook. ``system``: optional override of the
    spec's ``[system]`` (a :class:`~causalfair.systems.System`, or anything
    :func:`~causalfair.systems.as_system` accepts, such as your simulator object).
    """
    t0 = time.perf_counter()
    spec = _resolve_spec(spec_or_path)
    if spec.source == "logs":
        return _audit_logs(spec, t0)
    from causalfair.systems import as_system

    system = build_system(spec) if system is None else as_system(system)
    pol, pname, sha, meta = resolve_policy(spec, system, policy)
    if policy is not None:
        spec = replace(spec, builtin=pname if isinstance(policy, str) else None,
                       checkpoint=None, policy_factory=None if isinstance(policy, str) else pname)
    T = spec.horizon if spec.horizon is not None else system.horizon
    engine = choose_engine(spec, system)
    spec = replace(spec, engine=engine, horizon=T)
    model = system.tabular if "exact" in system.engines else None
    res = _run_engines(spec, system, model, pol, pname, T, engine)
    res.checkpoint_sha256, res.checkpoint_meta = sha, meta
    res.seconds = time.perf_counter() - t0
    return res


def _run_engines(spec: AuditSpec, system: Any, model: Any, pol: Any, pname: str, T: int,
                 engine: str) -> AuditResult:
    from causalfair.benefit import benefit_fairness
    from causalfair.effects import decompose
    from causalfair.metrics import other_notions
    from causalfair.policy import policy_table

    table = mu_pi = mu_0 = exact = ben = None
    notions: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    if model is not None:
        table = policy_table(pol, model, T)
        exact = decompose(model, table, T, eps=spec.eps, weights=spec.weights, policy_name=pname)
        ben = benefit_fairness(model, table, T, eps=spec.eps, weights=spec.weights)
        notions = other_notions(model, table, T)
        mu_pi, mu_0 = model.propagate(table, T), model.propagate(model.baseline_table(), T)
    lam_se = None
    if engine == "mc":
        from causalfair.montecarlo import decompose_mc

        dec = decompose_mc(system.make_simulator(), pol, T, n=spec.n, seed=spec.seed,
                           policy_name=pname)
        if exact is not None:
            dec = replace(dec, Lambda=exact.Lambda)
            extra["exact"] = {k: getattr(exact, k) for k in ("C", "DPE", "IPE", "SPE")}
        else:
            ben, lam_se = _benefit_mc(spec, system, pol, T)
            if ben is not None:
                dec = replace(dec, Lambda=ben.Lambda)
    else:
        dec = exact
    q = _quantities(spec, dec, notions, lam_se=lam_se)
    res = AuditResult(
        spec=spec, decomposition=dec, benefit=ben, notions=notions, quantities=q,
        verdicts=_verdicts(spec, q), model=model, policy=pol, policy_table=table,
        mu_pi=mu_pi, mu_0=mu_0, system=system,
    )
    res.extra.update(extra)
    if ben is None:
        res.extra["benefit"] = ("not computed: benefit fairness needs a tabular model or the "
                                "Monte Carlo benefit estimator")
    return res


def _benefit_mc(spec: AuditSpec, system: Any, pol: Any, T: int) -> tuple[Any, float | None]:
    """Benefit fairness by forks on a simulator-only system (causalfair.benefit_mc)."""
    try:
        from causalfair.benefit_mc import benefit_fairness_mc
    except ImportError:  # pragma: no cover - until the Monte Carlo benefit estimator lands
        return None, None
    ben = benefit_fairness_mc(system, pol, T, n=spec.n, seed=spec.seed, eps=spec.eps,
                              alpha=spec.alpha)
    return ben, getattr(ben, "se", None)


def _audit_logs(spec: AuditSpec, t0: float) -> AuditResult:
    from causalfair.logs import audit_logs, read_logs
    from causalfair.metrics import other_notions

    df = read_logs(spec.logs_path)
    opts = dict(spec.logs_options)
    weights = opts.pop("potential_weights", None)
    if weights is not None:
        from causalfair.logs import linear_potential

        opts["potential"] = linear_potential(weights)
    la = audit_logs(df, horizon=spec.horizon, n_boot=spec.n_boot, seed=spec.logs_seed,
                    eps=spec.eps, weights=spec.weights, **opts)
    dec, ben = la.decomposition, la.benefit
    if dec is None or ben is None:
        raise SpecError(
            f"{_where(spec.path)}: [logs] path: the logs {spec.logs_path.name} do not identify "
            "the decomposition (positivity fails: some (group, level) never got one of the "
            "decisions); see causalfair.logs.audit_logs for bounds."
        )
    model, table = la.model, la.policy_table
    T = dec.horizon
    notions = other_notions(model, table, T)
    if dec.Lambda is None:
        dec = replace(dec, Lambda=ben.Lambda)
    q = _quantities(spec, dec, notions)
    if "Lambda" in q and la.lambda_estimate is not None and la.n_boot >= 2:
        # Lambda's interval: the hull of the thresholded and plug-in intervals
        # (LogAudit.lambda_interval; reports/logs_validation shows why)
        lo, hi = la.lambda_interval(spec.alpha, method="normal")
        q["Lambda"] = (q["Lambda"][0], lo, hi, q["Lambda"][3])
    res = AuditResult(spec=spec, decomposition=dec, benefit=ben, notions=notions, quantities=q,
                      verdicts=_verdicts(spec, q), model=model, policy_table=table,
                      mu_pi=model.propagate(table, T), mu_0=model.propagate(0.0, T))
    res.extra["logs"] = {"rows": la.n_rows, "individuals": la.n_individuals,
                         "n_boot": la.n_boot, "seed": la.seed, "policy_source": la.policy_source,
                         "fit": la.method}
    if la.lambda_estimate is not None:
        res.extra["logs"]["lambda_estimator"] = la.lambda_estimate.to_dict()
    if la.binning is not None:
        res.extra["logs"]["state_binning"] = la.binning.to_dict()
    if la.dowhy is not None:
        res.extra["logs"]["dowhy"] = la.dowhy.to_dict()
    res.seconds = time.perf_counter() - t0
    return res


def compare(*results: AuditResult, names: Sequence[str] | None = None) -> Any:
    """Side-by-side table of several audits (columns), one row per metric and verdict."""
    import pandas as pd

    cols = {}
    for i, r in enumerate(results):
        col = names[i] if names else (
            r.decomposition.policy_name if len({x.name for x in results}) == 1 else r.name)
        data: dict[str, Any] = {k: e for k, (e, _, _, _) in r.quantities.items()}
        for v in r.verdicts:
            data[f"verdict {v.label}"] = v.status
        data["overall"] = r.overall
        cols[col] = pd.Series(data, dtype=object)
    return pd.DataFrame(cols)


# ---------------------------------------------------------------------------- the gate
def retrained_checkpoint_path(checkpoint: str | os.PathLike[str], algo: str) -> Path:
    """``NAME.retrained-<algo>-<n>.pt`` beside ``checkpoint``, with the first n >= 1 not
    taken: an existing file is never overwritten."""
    ck = Path(checkpoint)
    stem = ck.name[: -len(".pt")] if ck.name.endswith(".pt") else ck.stem
    n = 1
    while True:
        cand = ck.with_name(f"{stem}.retrained-{algo}-{n}.pt")
        if not cand.exists():
            return cand
        n += 1


@dataclass(eq=False)
class GateEntry:
    """One spec's gate outcome: the audit, and the re-audit after retraining if any."""

    spec: AuditSpec
    before: AuditResult
    after: AuditResult | None = None
    retrained_checkpoint: Path | None = None
    retrain_error: str | None = None
    report: Path | None = None

    @property
    def final(self) -> AuditResult:
        return self.after if self.after is not None else self.before

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.spec.name,
            "spec": _display_path(self.spec.path),
            "overall": self.final.overall,
            "verdicts": [v.to_dict() for v in self.final.verdicts],
            "checkpoint_sha256": self.before.checkpoint_sha256,
        }
        if self.after is not None or self.retrain_error:
            d["before"] = {"overall": self.before.overall,
                           "verdicts": [v.to_dict() for v in self.before.verdicts]}
            d["retrained_checkpoint"] = _display_path(self.retrained_checkpoint)
            if self.after is not None:
                d["after"] = {"overall": self.after.overall,
                              "checkpoint_sha256": self.after.checkpoint_sha256,
                              "verdicts": [v.to_dict() for v in self.after.verdicts]}
            if self.retrain_error:
                d["retrain_error"] = self.retrain_error
        if self.report is not None:
            d["report"] = _display_path(self.report)
        return d


@dataclass(eq=False)
class GateResult:
    """Outcome of :func:`run_gate`: entries per spec and the exit code."""

    entries: list[GateEntry]
    inconclusive: str = "fail"

    @property
    def exit_code(self) -> int:
        bad = {FAIL} if self.inconclusive == "pass" else {FAIL, INCONCLUSIVE}
        return 1 if any(e.final.overall in bad for e in self.entries) else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "inconclusive": self.inconclusive,
            "specs": [e.to_dict() for e in self.entries],
        }

    def side_by_side(self) -> str:
        """Text table: one line per threshold, before and (if retrained) after."""
        lines = []
        for e in self.entries:
            lines.append(f"{e.spec.name}: {e.final.overall}")
            after = {v.key: v for v in e.after.verdicts} if e.after else {}
            for v in e.before.verdicts:
                row = f"  {v.label:<22} {v.estimate:>11.6f} {v.status:<12}"
                if e.after is not None:
                    a = after[v.key]
                    row += f" -> {a.estimate:>11.6f} {a.status}"
                lines.append(row)
            if e.retrained_checkpoint:
                lines.append(f"  retrained checkpoint: {_display_path(e.retrained_checkpoint)}")
            if e.retrain_error:
                lines.append(f"  retrain failed: {e.retrain_error}")
        return "\n".join(lines)

    def to_junit(self, *, inconclusive_as: str = "failure") -> str:
        """JUnit XML: one <testsuite> per spec, one <testcase> per threshold; FAIL is a
        <failure>, INCONCLUSIVE a <failure> or <skipped> (``inconclusive_as``)."""
        import xml.etree.ElementTree as ET

        if inconclusive_as not in ("failure", "skipped"):
            raise InputError(
                f"inconclusive_as: bad value {inconclusive_as!r}; allowed values: failure, skipped."
            )
        root = ET.Element("testsuites", name="causalfair gate")
        tot_t = tot_f = tot_s = 0
        for e in self.entries:
            res = e.final
            suite = ET.SubElement(root, "testsuite", name=e.spec.name)
            n_f = n_s = 0
            for v in res.verdicts:
                tc = ET.SubElement(suite, "testcase", classname=f"causalfair.gate.{e.spec.name}",
                                   name=v.label, time=f"{res.seconds / max(1, len(res.verdicts)):.4f}")
                if v.status == FAIL or (v.status == INCONCLUSIVE and inconclusive_as == "failure"):
                    n_f += 1
                    f = ET.SubElement(tc, "failure", message=v.message(), type=v.status)
                    f.text = v.message()
                elif v.status == INCONCLUSIVE:
                    n_s += 1
                    ET.SubElement(tc, "skipped", message=v.message())
                out = [f"{res.summary()}"]
                if e.after is not None:
                    b = next(x for x in e.before.verdicts if x.key == v.key)
                    out.append(f"before retraining: {b.message()}")
                ET.SubElement(tc, "system-out").text = "\n".join(out) if e.after else v.message()
            suite.set("tests", str(len(res.verdicts)))
            suite.set("failures", str(n_f))
            suite.set("errors", "0")
            suite.set("skipped", str(n_s))
            tot_t += len(res.verdicts)
            tot_f += n_f
            tot_s += n_s
        root.set("tests", str(tot_t))
        root.set("failures", str(tot_f))
        root.set("errors", "0")
        root.set("skipped", str(tot_s))
        ET.indent(root)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _retrain(spec: AuditSpec, before: AuditResult) -> tuple[Path, AuditResult]:
    """Run the spec's [retrain] warm-started from its checkpoint; return the new
    checkpoint path and its audit."""
    if spec.retrain is None:
        raise SpecError(f"{_where(spec.path)}: [retrain]: missing; --retrain needs a [retrain] "
                        "section (algo, iterations, betas, seed).")
    if spec.checkpoint is None:
        raise SpecError(f"{_where(spec.path)}: [policy] checkpoint: --retrain needs a checkpoint "
                        f"to warm-start from; the spec audits builtin {spec.builtin!r}.")
    from causalfair.train import train
    from causalfair.train.config import TrainConfig

    r = spec.retrain
    target = retrained_checkpoint_path(spec.checkpoint, r["algo"])
    config = _train_config(TrainConfig, spec, r, (before.checkpoint_meta or {}).get("architecture"))
    import tempfile

    with tempfile.TemporaryDirectory(prefix=f".{spec.name}.retrain-", dir=target.parent) as tmp:
        result = train(config, out=tmp, init_checkpoint=str(spec.checkpoint))
        produced = _train_checkpoint(result, Path(tmp))
        # never overwrite: link-or-copy into a fresh name, failing if it appeared meanwhile
        data = produced.read_bytes()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    after = audit(spec.with_policy(checkpoint=target))
    after.extra["retrained_from"] = {"checkpoint": _display_path(spec.checkpoint),
                                     "sha256": before.checkpoint_sha256, "retrain": dict(r)}
    return target, after


def _train_config(TrainConfig: Any, spec: AuditSpec, r: Mapping[str, Any],
                  arch: Mapping[str, Any] | None = None) -> Any:
    """Map the spec's [retrain] (and the checkpoint's architecture, for the warm start)
    onto TrainConfig's fields (only those it has)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(TrainConfig)}
    kw: dict[str, Any] = {}
    cand = {
        "algo": r["algo"], "algorithm": r["algo"],
        "iterations": r["iterations"], "seed": r["seed"],
        "setting": spec.setting, "n_levels": spec.levels, "levels": spec.levels,
        "interest": spec.interest, "horizon": spec.horizon,
    }
    if arch:
        if "hidden" in arch:
            cand["hidden"] = tuple(int(h) for h in arch["hidden"])
        if "activation" in arch:
            cand["activation"] = arch["activation"]
    for k, v in cand.items():
        if k in names:
            kw[k] = v
    for bk, v in r["betas"].items():
        for fname in (f"beta_{bk}", f"beta_{bk.lower()}"):
            if fname in names:
                kw[fname] = v
                break
        else:
            raise SpecError(f"{_where(spec.path)}: [retrain] betas {bk}: the trainer has no "
                            f"field beta_{bk}.")
    return TrainConfig(**kw)


def _train_checkpoint(result: Any, out: Path) -> Path:
    for attr in ("checkpoint", "checkpoint_path", "path"):
        p = getattr(result, attr, None)
        if p is not None and Path(p).is_file():
            return Path(p)
    found = sorted(out.rglob("*.pt"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise RuntimeError(f"retraining wrote no checkpoint under {out}.")
    return found[-1]


def run_gate(specs: Sequence[str | os.PathLike[str] | AuditSpec], *, inconclusive: str = "fail",
             retrain: bool = False, reports: str | os.PathLike[str] | None = None,
             jobs: int = 1) -> GateResult:
    """Audit every spec (all are validated first: a broken one raises :class:`SpecError`
    before anything runs). With ``retrain``, a spec whose verdict is not PASS is
    retrained from its checkpoint and re-audited. With ``reports``, each spec's report
    is written to ``reports/NAME`` (after retraining: the new policy beside the old);
    ``jobs`` as in :meth:`AuditResult.write_report`."""
    if inconclusive not in ("pass", "fail"):
        raise InputError(f"inconclusive: bad value {inconclusive!r}; allowed values: pass, fail.")
    loaded = [_resolve_spec(s) for s in specs]
    names = [s.name for s in loaded]
    dup = {n for n in names if names.count(n) > 1}
    if dup and reports is not None:
        raise SpecError(f"audit spec name: bad value {sorted(dup)[0]!r}; names must be unique "
                        "when reports are written.")
    if retrain:
        for s in loaded:
            if s.retrain is None:
                raise SpecError(f"{_where(s.path)}: [retrain]: missing; --retrain needs a "
                                "[retrain] section (algo, iterations, betas, seed).")
    entries = []
    for s in loaded:
        before = audit(s)
        entry = GateEntry(spec=s, before=before)
        bad = {FAIL} if inconclusive == "pass" else {FAIL, INCONCLUSIVE}
        if retrain and before.overall in bad:
            entry.retrained_checkpoint, entry.after = _retrain(s, before)
        if reports is not None:
            entry.report = entry.final.write_report(
                Path(reports) / s.name, before=before if entry.after is not None else None,
                jobs=jobs)
        entries.append(entry)
    return GateResult(entries=entries, inconclusive=inconclusive)


# ``causalfair.audit`` is both this module and, called, the :func:`audit` function:
# ``causalfair.audit("audits/lending-1.toml")`` runs an audit while
# ``causalfair.audit.load_spec`` and ``import causalfair.audit as m`` keep working.
class _CallableModule(types.ModuleType):
    def __call__(self, spec_or_path: Any, *, policy: Any = None) -> AuditResult:
        return audit(spec_or_path, policy=policy)


sys.modules[__name__].__class__ = _CallableModule

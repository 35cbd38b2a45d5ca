"""The schema of an audit spec (docs/audit.md): the keys of the spec and of each section,
and the readers that validate each value and each section into the fields of
:class:`~causalfair.audit.spec.AuditSpec`, with messages that name the file, the key, the
bad value and the allowed values."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from causalfair._safe_read import not_a_file
from causalfair._validation import (  # ENGINES: the engines' one home
    ENGINES,
    check_weight,
    unknown_key,
)
from causalfair.engines.benefit import WEIGHTS  # Lambda's weightings' one home
from causalfair.errors import SpecError, short
from causalfair.logs.audit import LAMBDA_ESTIMATORS, METHODS
from causalfair.logs.schema import LogError, check_decisions
from causalfair.policies.core import BUILTIN_POLICIES
from causalfair.policies.resolver import TORCH_OUTPUTS
from causalfair.policies.vecnormalize import VECNORMALIZE_NONE
from causalfair.systems.lending.settings import SETTINGS  # the lending settings' one home
from causalfair.thresholds import (  # their one home
    MAX_PAIR_KEYS,
    MIN_RATIO_KEYS,
    OTHER_NOTIONS,
    PAIR_KEYS,
    PPO_LAG_KEYS,
    SIGNED_KEYS,
    THRESHOLD_KEYS,
    group_key_error,
    is_repair_key,
    split_key,
)
from causalfair.train.algorithms import names as _algorithm_names

__all__ = ["ENGINES", "WEIGHTS", "METRICS", "RETRAIN_ALGOS", "TOP_KEYS", "RELATIVE_KEYS",
           "SECTION_KEYS", "GYM_KEYS", "spec_label", "bad_value", "read_int", "read_float",
           "check_keys", "logs_section", "logs_policy_section", "system_section",
           "model_section", "policy_section", "thresholds_section", "baseline_section", "retrain_section"]


#: Quantities a spec can report (``metrics``) and threshold.
METRICS: tuple[str, ...] = (
    "C", "DPE", "IPE", "SPE", "Lambda", "utility", *OTHER_NOTIONS,
)
#: [retrain] algo values (the registry of causalfair.train.algorithms).
RETRAIN_ALGOS = _algorithm_names(retrain=True)
#: [retrain] init values: warm-start from the [policy] checkpoint's network (the default),
#: or train a new network from a random init (any policy: a factory's, a builtin).
RETRAIN_INITS = ("checkpoint", "scratch")
#: [retrain] activation values (TrainConfig's, and the exact repair's networks').
RETRAIN_ACTIVATIONS = ("tanh", "relu")
TOP_KEYS = ("name", "horizon", "timeout", "metrics", "system", "model", "logs", "policy",
            "engine", "benefit", "thresholds", "baseline", "retrain", "reference")
#: Keys of [baseline.thresholds]: "quantity(policy) - quantity(baseline) <= value" (no
#: worse than the baseline by more than value); ``utility`` reads "utility(baseline) -
#: utility(policy) <= value" (utility may drop by at most value).
RELATIVE_KEYS: tuple[str, ...] = THRESHOLD_KEYS + ("utility",)
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "system": ("id", "factory", "tabular", "gym", "params", "groups", "group", "gain",
               "baseline", "features", "shared", "batch_size", "actions", "group_weights"),
    "model": ("setting", "levels", "interest"),
    "logs": ("path", "n_boot", "seed", "fit", "lambda_estimator", "state", "next_state",
             "bins", "potential_weights", "potential", "dowhy", "decisions"),
    "policy": ("builtin", "checkpoint", "factory", "params", "output", "vecnormalize"),
    "engine": ("kind", "n", "seed", "alpha", "pair"),
    "benefit": ("eps", "weights", "worst", "horizon_benefit", "horizon_n", "bins"),
    "retrain": ("algo", "iterations", "betas", "seed", "starts", "eval_every", "audit_n",
                "min_utility", "allow_worse", "init", "hidden", "activation"),
    "baseline": ("checkpoint", "builtin", "vecnormalize", "thresholds"),
}
GYM_KEYS = ("groups", "group", "gain", "baseline", "features", "shared", "batch_size",
            "actions", "group_weights")


def spec_label(path: Path | None) -> str:
    """How messages name a spec: "audit spec PATH", or "audit spec" for one built in Python."""
    return f"audit spec {path}" if path is not None else "audit spec"


def bad_value(path: Path | None, key: str, value: Any, allowed: str) -> SpecError:
    """The refusal of ``value`` at ``key`` of the spec at ``path``, naming the ``allowed``."""
    return SpecError(f"{spec_label(path)}: {key}: bad value {short(value)}; allowed values: "
                     f"{allowed}.")


def read_int(sec: Mapping[str, Any], key: str, label: str, path: Path | None, *,
             minimum: int, default: int | None) -> int | None:
    """``sec[key]`` (named ``label`` in messages): an integer >= ``minimum``, else ``default``
    when absent."""
    if key not in sec:
        return default
    v = sec[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise bad_value(path, label, v, f"an integer >= {minimum}")
    return int(v)


def read_float(sec: Mapping[str, Any], key: str, label: str, path: Path | None, *,
               default: float, lo: float, hi: float = math.inf, lo_open: bool = False,
               hi_open: bool = False) -> float:
    """``sec[key]`` (named ``label`` in messages): a finite number in the interval from
    ``lo`` to ``hi`` (open at an end where asked), else ``default`` when absent."""
    if key not in sec:
        return default
    v = sec[key]
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    if ok:
        ok = (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        lo_s = "" if lo == -math.inf else (f" > {lo:g}" if lo_open else f" >= {lo:g}")
        hi_s = "" if hi == math.inf else (f" and < {hi:g}" if hi_open else f" and <= {hi:g}")
        raise bad_value(path, label, v, f"a number{lo_s}{hi_s}" if lo_s else "a finite number")
    return float(v)


def _absent(p: Path) -> str:
    """Why the input file ``p`` is not read: "no such file P", or "P is a folder" / "P is
    not a regular file (...)" (:func:`causalfair._safe_read.not_a_file`)."""
    why = not_a_file(p)
    return f"no such file {p}" if why == "no such file" else f"{p} {why}"


def missing_file(path: Path | None, key: str, given: str, where: Path, base: Path) -> SpecError:
    """The error of ``key`` naming a file that is not there: the path as the spec wrote it
    (``given``, relative to the spec's folder ``base``) and the folder it was looked in."""
    folder = where.parent
    spec_dir = ("the spec's folder" if path is not None
                else "the base folder (base_dir, default the working directory)")
    why = not_a_file(where)  # a FIFO or a folder is there: "no such file" would be false
    what = f"no such file {where.name!r} in {folder}" if why == "no such file" else f"{where} {why}"
    return SpecError(f"{spec_label(path)}: {key}: bad value {given!r}; {what}"
                     + ("" if folder == base.resolve()
                        else f" ({given!r} is relative to {spec_dir} {base})")
                     + f"; give its path relative to {spec_dir}.")


def check_keys(sec: Any, name: str, allowed: Sequence[str], path: Path | None, *,
               where: str | None = None, note: str = "") -> Mapping:
    """The table ``sec`` of section ``[name]`` (named ``where`` in messages when given:
    "" for the spec's top level, "[retrain] betas"), refused unless a table of
    ``allowed`` keys. An unknown key is named with the key it most likely means, or as
    one a newer causalfair may know (:func:`causalfair._validation.unknown_key`), then
    the allowed keys and ``note``."""
    where = f"[{name}]" if where is None else where
    if not isinstance(sec, Mapping):
        if isinstance(sec, str) and "id" in allowed:  # system = "NAME" for [system] id
            raise bad_value(path, where, sec, f"a table: write {where} on its own line, then "
                            f"id = \"{sec}\" (keys: {', '.join(allowed)})")
        raise bad_value(path, where, sec, f"a table with keys {', '.join(allowed)}")
    for k in sec:
        if k not in allowed:
            raise SpecError(f"{spec_label(path)}: {where + ' ' if where else ''}"
                            f"{short(k)[1:-1]}: " + (misplaced(k, where) or
                            f"{unknown_key(k, allowed, ', '.join(allowed) + note)}"))
    return sec


#: The spec's top-level keys that are values, not sections.
_TOP_VALUES = tuple(k for k in TOP_KEYS if k not in SECTION_KEYS and k != "thresholds")


def misplaced(key: str, where: str) -> str | None:
    """The refusal of a key written in the wrong place, when it is one of another place:
    a top-level value under a section (TOML reads every key after a ``[section]`` header
    as that section's), or a section's key at the top level; else None."""
    if where.startswith("[") and where.endswith("]") and key in _TOP_VALUES:
        return (f"unknown key here: {key!r} is a top-level key of the spec, and TOML reads every "
                f"key after the {where} header as one of that section; move "
                f"'{key} = ...' above the first [section] header.")
    if where == "":
        owners = [f"[{name}]" for name, keys in SECTION_KEYS.items() if key in keys]
        if owners:
            return (f"unknown top-level key: {key!r} is a key of {' or '.join(owners)}; "
                    f"write it under that section's header ({owners[0]} on its own line, "
                    f"then {key} = ...).")
    return None


def logs_section(sec: Any, base: Path, path: Path | None) -> dict[str, Any]:
    """``[logs]``: the log file (relative to the spec), its bootstrap and how it is read
    (:func:`causalfair.logs.audit_logs`)."""
    sec = check_keys(sec, "logs", SECTION_KEYS["logs"], path)
    lp = sec.get("path")
    if not isinstance(lp, str) or not lp:
        raise bad_value(path, "[logs] path", lp, "a path to a CSV file (relative to the spec file)")
    logs_path = (base / lp).resolve()
    if not logs_path.is_file():
        raise SpecError(f"{spec_label(path)}: [logs] path: bad value {lp!r}; {_absent(logs_path)}.")
    return dict(logs_path=logs_path, setting=None, builtin=None,
                n_boot=read_int(sec, "n_boot", "[logs] n_boot", path, minimum=2, default=200),
                logs_seed=read_int(sec, "seed", "[logs] seed", path, minimum=0, default=0),
                logs_options=_logs_options(sec, path))


def logs_policy_section(sec: Any, base: Path, path: Path | None,
                        logs_options: dict[str, Any]) -> dict[str, Any]:
    """``[policy]`` beside ``[logs]``: a candidate policy audited on the model fitted from
    the log instead of the logged one (``audit_logs(policy=)``: the same fit, bootstrap and
    engine). A ``builtin`` goes into ``logs_options["policy"]``; a ``checkpoint`` or a
    ``factory`` (with its params, output and vecnormalize) is resolved on the fitted model
    when the audit runs (causalfair.audit.run). One of them is required here: an empty
    [policy] would audit threshold:0.5 unasked."""
    kw = policy_section(sec, base, path)  # the [policy] checks of a system's audit
    if not any(k in sec for k in ("builtin", "checkpoint", "factory")):
        raise SpecError(f"{spec_label(path)}: [policy] builtin: missing; beside [logs], [policy] "
                        "names the candidate to audit on the model fitted from the log, e.g. "
                        "builtin = \"threshold:0.6\", checkpoint = \"policy.pt\" or factory = "
                        "\"module:make\" (without [policy] the logged policy is audited).")
    if kw.get("builtin") is not None:
        logs_options["policy"] = kw["builtin"]
    return kw


def _names(sec: Mapping[str, Any], key: str, path: Path | None) -> list[str] | None:
    if key not in sec:
        return None
    v = sec[key]
    v = [v] if isinstance(v, str) else v
    if (not isinstance(v, list) or not v
            or not all(isinstance(c, str) and c for c in v) or len(set(v)) != len(v)):
        raise bad_value(path, f"[logs] {key}", sec[key], "a column name or a list of distinct "
                        "column names of the log")
    return list(v)


def _potential_values(f: Any, path: Path | None) -> list[Any]:
    """``[logs] potential``: f(0), ..., f(K-1) (numbers, one per level of the log, higher is
    better), or one such list per group in the log's group order; K is checked against
    the log when it is read (causalfair.logs.fit)."""
    def row(v: Any) -> bool:
        return (isinstance(v, list) and len(v) >= 2 and all(
            isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c)
            for c in v))

    if row(f):
        return [float(c) for c in f]
    if isinstance(f, list) and len(f) >= 2 and all(row(r) for r in f) \
            and len({len(r) for r in f}) == 1:
        return [[float(c) for c in r] for r in f]
    raise bad_value(path, "[logs] potential", f, "a list of finite numbers f(0), ..., f(K-1), "
                    "one per level of the log (higher is better), or one such list per group "
                    "in the log's group order")


def _logs_options(sec: Mapping[str, Any], path: Path | None) -> dict[str, Any]:
    """The [logs] keys passed on to causalfair.logs.audit_logs (validated here by type;
    the log itself is checked when it is read)."""
    out: dict[str, Any] = {}
    fit = sec.get("fit", "counts")
    if fit not in METHODS:
        raise bad_value(path, "[logs] fit", fit, ", ".join(METHODS))
    out["method"] = fit
    est = sec.get("lambda_estimator", "thresholded")
    if est not in LAMBDA_ESTIMATORS:
        raise bad_value(path, "[logs] lambda_estimator", est, ", ".join(LAMBDA_ESTIMATORS))
    out["lambda_estimator"] = est
    dw = sec.get("dowhy", False)
    if not isinstance(dw, bool):
        raise bad_value(path, "[logs] dowhy", dw, "true, false")
    out["dowhy"] = dw
    if "decisions" in sec:
        dn = sec["decisions"]
        try:  # the logs' own check (causalfair.logs.schema.check_decisions), a list here
            if not isinstance(dn, list):
                raise LogError("not a list")
            out["decisions"] = list(check_decisions(dn))
        except LogError:
            raise bad_value(path, "[logs] decisions", dn, "the log's names of decision 0 (the "
                            "baseline) and decision 1, e.g. [\"waitlist\", \"place\"]") from None
    if "potential" in sec:  # f(x) per level (or one row per group), as audit_logs(potential=)
        if "potential_weights" in sec:
            raise SpecError(f"{spec_label(path)}: [logs] potential: not with potential_weights "
                            "(both give the gain potential f); keep one of them.")
        out["potential"] = _potential_values(sec["potential"], path)
    state, nxt = _names(sec, "state", path), _names(sec, "next_state", path)
    feature_keys = [k for k in ("next_state", "bins", "potential_weights") if k in sec]
    if state is None:
        if feature_keys:
            raise SpecError(f"{spec_label(path)}: [logs] {feature_keys[0]}: only used with feature "
                            "states; add [logs] state = [\"feature\", ...] or remove it.")
        return out
    if nxt is not None and len(nxt) != len(state):
        raise bad_value(path, "[logs] next_state", sec["next_state"],
                        f"one column per state feature ({len(state)}: {', '.join(state)})")
    bins = sec.get("bins")

    def bad_bins() -> SpecError:
        return bad_value(path, "[logs] bins", bins, "an integer >= 2 (quantile bins per feature), "
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
        raise SpecError(f"{spec_label(path)}: [logs] bins: missing; feature states need a binning "
                        "into levels: an integer (quantile bins per feature) or a table "
                        "feature -> integer or list of cut points.")
    if isinstance(bins, Mapping):
        unknown = [k for k in bins if k not in state]
        if unknown:
            raise bad_value(path, "[logs] bins", bins, f"keys among the state features {state}")
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
            raise bad_value(path, "[logs] potential_weights", pw,
                            f"a table state feature -> number (features: {', '.join(state)})")
        out["potential_weights"] = {k: float(v) for k, v in pw.items()}
    elif len(state) > 1 and "potential" not in out:
        raise SpecError(f"{spec_label(path)}: [logs] potential_weights: missing; with several state "
                        "features the gain potential f(x) must be given, e.g. "
                        "potential_weights = { income = 1.0 } (f = sum of weight x the bin's "
                        "mean feature value).")
    return out


def system_section(sec: Any, base: Path, path: Path | None) -> dict[str, Any]:
    """``[system]``: one of id (a registered system), factory (``module:callable``),
    tabular (a model file relative to the spec) or gym (a Gymnasium env), with params."""
    sec = check_keys(sec, "system", SECTION_KEYS["system"], path)
    given = [k for k in ("id", "factory", "tabular", "gym") if k in sec]
    if len(given) != 1:
        raise SpecError(
            f"{spec_label(path)}: [system]: give exactly one of id (a registered system, see "
            "`causalfair systems`), factory ('module:callable'), tabular (a model file) or gym "
            f"(a Gymnasium env); got {', '.join(given) or 'none'}.")
    params = sec.get("params", {})
    if not isinstance(params, Mapping):
        raise bad_value(path, "[system] params", params, "a table such as { levels = 7 }")
    if "gym" in sec:
        return _gym_section(sec, path)
    for key in GYM_KEYS:
        if key in sec:
            raise SpecError(f"{spec_label(path)}: [system] {key}: only used with [system] gym.")
    out: dict[str, Any] = {"setting": None, "system_params": dict(params)}
    if "tabular" in sec:
        tp = sec["tabular"]
        if not isinstance(tp, str) or not tp:
            raise bad_value(path, "[system] tabular", tp, "a path to a .npz or .json tabular model")
        tpath = (base / tp).resolve()
        if not tpath.is_file():
            raise SpecError(f"{spec_label(path)}: [system] tabular: bad value {tp!r}; {_absent(tpath)}.")
        if params:
            raise SpecError(f"{spec_label(path)}: [system] params: not used with [system] tabular.")
        out.update(system_tabular=tpath, system_id=f"tabular:{tpath.name}")
        return out
    key = given[0]
    sid = sec[key]
    if not isinstance(sid, str) or not sid.strip():
        raise bad_value(path, f"[system] {key}", sid,
                        "a registered id such as 'lending-1'" if key == "id" else "'module:callable'")
    if key == "factory" and (sid.count(":") != 1 or sid.startswith(":") or sid.endswith(":")):
        raise bad_value(path, "[system] factory", sid,
                        "'module:callable' (module.py next to the spec, or installed)")
    out["system_id"] = sid
    if sid in SETTINGS:
        out["setting"] = sid
        out["levels"] = params.get("levels", 7)
        out["interest"] = params.get("interest", 1.0)
    return out


def _gym_section(sec: Mapping[str, Any], path: Path | None) -> dict[str, Any]:
    """``[system] gym = "module:callable" | "Registered-v0"`` with its keys: the
    registered system ``gym`` (:func:`causalfair.systems.gym.door.gym_system`)."""
    env = sec["gym"]
    if not isinstance(env, str) or not env.strip():
        raise bad_value(path, "[system] gym", env,
                        "'module:make_env' (module.py next to the spec) or a registered Gymnasium id")
    if "groups" not in sec:
        raise SpecError(f"{spec_label(path)}: [system] groups: missing; list the env's groups "
                        "in its order, e.g. groups = [\"White\", \"Black\"] (index 0 is s+).")
    groups = sec["groups"]
    if isinstance(groups, list) and all(isinstance(g, (str, int)) for g in groups):
        groups = [str(g) for g in groups]  # [1, 0] is ["1", "0"], as from_gym reads it
    if not isinstance(groups, list) or len(groups) < 2 or len(set(map(str, groups))) != len(
            groups) or not all(isinstance(g, str) and g for g in groups):
        raise bad_value(path, "[system] groups", sec["groups"],
                        "at least two distinct group names such as [\"White\", \"Black\"] "
                        "(index 0 is s+), or the values the env reports, such as [1, 0] or "
                        "[true, false] (read as from_gym reads them: the names \"1\" and \"0\")")
    gp: dict[str, Any] = {"env": env, "groups": groups, "params": dict(sec.get("params", {}))}
    for key in ("group", "gain"):
        if key in sec:
            if not isinstance(sec[key], str) or not sec[key]:
                raise bad_value(path, f"[system] {key}", sec[key], "a string (docs/own-system.md)")
            gp[key] = sec[key]
    if "baseline" in sec:
        gp["baseline"] = read_int(sec, "baseline", "[system] baseline", path, minimum=0,
                                  default=0)
    for key, what in (("features", "a list of observation column names"),
                      ("shared", "a list of env attribute names that reset and step never "
                                 "change, such as [\"P\"]"),
                      ("actions", "a list of action names, one per action of the env, such "
                                  "as [\"wait\", \"meds\", \"surgery\"]")):
        if key in sec:  # lists of non-empty names
            f = sec[key]
            if not isinstance(f, list) or not all(isinstance(c, str) and c for c in f):
                raise bad_value(path, f"[system] {key}", f, what)
            gp[key] = list(f)
    if "batch_size" in sec:
        gp["batch_size"] = read_int(sec, "batch_size", "[system] batch_size", path, minimum=1,
                                    default=None)
    if "group_weights" in sec:  # checked by from_gym (one share per group, summing to 1)
        w = sec["group_weights"]
        if not isinstance(w, list) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in w):
            raise bad_value(path, "[system] group_weights", w,
                            "the groups' shares of the population, one number per group "
                            "summing to 1, such as [0.5, 0.3, 0.14, 0.06]")
        gp["group_weights"] = [float(x) for x in w]
    return {"setting": None, "system_id": "gym", "system_params": gp}


def model_section(sec: Any, path: Path | None) -> dict[str, Any]:
    """``[model] setting/levels/interest``: the older spelling of ``[system] id =
    "lending-N"``."""
    sec = check_keys(sec, "model", SECTION_KEYS["model"], path)
    setting = sec.get("setting", "lending-1")
    if setting not in SETTINGS:
        raise bad_value(path, "[model] setting", setting, ", ".join(SETTINGS))
    levels = read_int(sec, "levels", "[model] levels", path, minimum=3, default=7)
    interest = read_float(sec, "interest", "[model] interest", path, default=1.0, lo=0.0)
    return dict(setting=setting, levels=levels, interest=interest, system_id=setting,
                system_params={"levels": levels, "interest": interest})


def policy_section(sec: Any, base: Path, path: Path | None) -> dict[str, Any]:
    """``[policy]``: one of builtin (the default ``threshold:0.5``), checkpoint (relative
    to the spec) or factory (with its params and output), and its vecnormalize."""
    sec = check_keys(sec, "policy", SECTION_KEYS["policy"], path)
    kw: dict[str, Any] = {}
    given = [k for k in ("builtin", "checkpoint", "factory") if k in sec]
    if len(given) > 1:
        raise SpecError(
            f"{spec_label(path)}: [policy]: {'both ' if len(given) == 2 else ''}"
            f"{' and '.join(given)} are set; keep one."
        )
    for key in ("params", "output"):
        if key in sec and "factory" not in sec:
            raise SpecError(f"{spec_label(path)}: [policy] {key}: only used with [policy] "
                            "factory.")
    if "factory" in sec:
        fac = sec["factory"]
        if not isinstance(fac, str) or fac.count(":") != 1 or fac.startswith(":") \
                or fac.endswith(":"):
            raise bad_value(path, "[policy] factory", fac,
                            "'module:callable' (module.py next to the spec, or installed)")
        pp = sec.get("params", {})
        if not isinstance(pp, Mapping):
            raise bad_value(path, "[policy] params", pp, "a table such as { threshold = 0.5 }")
        out = sec.get("output")
        if out is not None and out not in TORCH_OUTPUTS:
            raise bad_value(path, "[policy] output", out, ", ".join(map(repr, TORCH_OUTPUTS)) +
                            " (how the factory's torch module's outputs are read)")
        kw.update(policy_factory=fac, policy_params=dict(pp), policy_output=out,
                  builtin=None)
    elif "checkpoint" in sec:
        ck = sec["checkpoint"]
        if not isinstance(ck, str) or not ck:
            raise bad_value(path, "[policy] checkpoint", ck,
                            "a path to a causalfair checkpoint (relative to the spec file)")
        ck_path = (base / ck).resolve()
        if not ck_path.is_file():
            raise missing_file(path, "[policy] checkpoint", ck, ck_path, base)
        kw.update(checkpoint=ck_path, builtin=None)
    if "vecnormalize" in sec:
        kw["policy_vecnormalize"] = _vecnormalize(sec["vecnormalize"], given, base, path)
    if "factory" not in sec and "checkpoint" not in sec:
        b = sec.get("builtin", "threshold:0.5")
        kind = b.partition(":")[0] if isinstance(b, str) else None
        if kind not in {k.partition(":")[0] for k in BUILTIN_POLICIES}:
            raise bad_value(path, "[policy] builtin", b, ", ".join(BUILTIN_POLICIES))
        kw["builtin"] = b
    return kw


def _vecnormalize(value: Any, given: list[str], base: Path, path: Path | None,
                  section: str = "policy") -> Path | str:
    """``[section] vecnormalize`` (``[policy]`` or ``[baseline]``): the statistics file
    (relative to the spec) or "none"; ``given`` holds the section's policy keys."""
    key = f"[{section}] vecnormalize"
    if not given or given[0] == "builtin":
        models = "checkpoint or factory" if section == "policy" else "checkpoint"
        raise SpecError(f"{spec_label(path)}: {key}: only used with [{section}] {models} (a "
                        "stable-baselines3 model).")
    if not isinstance(value, str) or not value:
        raise bad_value(path, key, value,
                        "a vecnormalize.pkl (or .npz/.json) path relative to the spec file, or "
                        f"{VECNORMALIZE_NONE!r}")
    if value.strip().lower() == VECNORMALIZE_NONE:
        return VECNORMALIZE_NONE
    stats = (base / value).resolve()
    if not stats.is_file():
        raise SpecError(f"{spec_label(path)}: {key}: bad value {value!r}; {_absent(stats)}.")
    return stats


def thresholds_section(sec: Any, path: Path | None) -> dict[str, float]:
    """``[thresholds]``: "quantity <= value" by key (causalfair.thresholds), a table
    ``[thresholds.KEY]`` of pairs ``"A-B" = value`` flattened to ``KEY[A-B]``."""
    if not isinstance(sec, Mapping):
        raise bad_value(path, "[thresholds]", sec, "a table such as { abs_C = 0.05 }")
    thr: dict[str, float] = {}
    spelt: dict[str, str] = {}  # each key as the spec wrote it: a key given twice is refused
    for k in sec:
        if k in PAIR_KEYS and isinstance(sec[k], Mapping):  # [thresholds.abs_C] "A-B" = 0.1
            for pr in sec[k]:
                _once(spelt, f"{k}[{pr}]", f"[thresholds.{k}] {_toml_key(pr)} = "
                      f"{short(sec[k][pr])}", path)
                thr[f"{k}[{pr}]"] = _threshold_value(sec[k], pr, f"[thresholds.{k}] {pr}", k, path)
            continue
        why = group_key_error(k) if k not in THRESHOLD_KEYS else None
        if why is not None:
            listed = (f"{', '.join(THRESHOLD_KEYS)} (each reads 'quantity <= value'), over "
                      f"groups {', '.join(MAX_PAIR_KEYS)} (largest over the pairs <= value), "
                      f"{', '.join(MIN_RATIO_KEYS)} (smallest ratio >= value), and KEY[A-B] "
                      "for one pair")
            raise SpecError(f"{spec_label(path)}: [thresholds] {k}: " + (  # the key's own
                misplaced(k, "[thresholds]") or
                unknown_key(k, (*THRESHOLD_KEYS, *MAX_PAIR_KEYS, *MIN_RATIO_KEYS), listed)
                if why == "unknown key" else why))  # fix: what can address a pair, and how
        _once(spelt, k, f"[thresholds] {_toml_key(k)} = {short(sec[k])}", path)
        thr[k] = _threshold_value(sec, k, f"[thresholds] {k}", split_key(k)[0], path)
    return thr


def _once(spelt: dict[str, str], key: str, how: str, path: Path | None) -> None:
    """Record threshold ``key`` spelt ``how``; refuse it when another spelling gave it
    already (``"abs_C[A-B]" = 0.1`` and ``[thresholds.abs_C] "A-B" = 0.3`` are one
    threshold: which would hold is not for the reader to guess)."""
    if key in spelt:
        raise SpecError(f"{spec_label(path)}: [thresholds] {key}: given twice, as "
                        f"{spelt[key]} and as {how} (the same threshold); keep one of them.")
    spelt[key] = how


def _toml_key(key: Any) -> str:
    """``key`` as TOML writes it: bare when it can be, else in double quotes."""
    k = str(key)
    return k if k and all(c.isalnum() or c in "_-" for c in k) and k.isascii() else \
        '"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _threshold_value(sec: Mapping[str, Any], key: str, label: str, base: str,
                     path: Path | None) -> float:
    """A [thresholds] value: any number for a signed effect, in [0, 1] for a ratio, else >= 0."""
    lo = -math.inf if base in SIGNED_KEYS else 0.0
    return read_float(sec, key, label, path, default=0.0, lo=lo,
                      hi=1.0 if base in MIN_RATIO_KEYS else math.inf)


def baseline_section(sec: Any, base: Path, path: Path | None) -> dict[str, Any]:
    """``[baseline]``: another policy to compare with (e.g. the checkpoint on main): its
    checkpoint or builtin, vecnormalize, and ``[baseline.thresholds]`` (optional: without
    it, the audit only says why C moved from the baseline)."""
    sec = check_keys(sec, "baseline", SECTION_KEYS["baseline"], path)
    kw: dict[str, Any] = {}
    given = [k for k in ("checkpoint", "builtin") if k in sec]
    if len(given) != 1:
        raise SpecError(f"{spec_label(path)}: [baseline]: give exactly one of checkpoint (e.g. "
                        "the checkpoint on main) or builtin; got "
                        f"{' and '.join(given) or 'neither'}.")
    if "checkpoint" in sec:
        ck = sec["checkpoint"]
        if not isinstance(ck, str) or not ck:
            raise bad_value(path, "[baseline] checkpoint", ck, "a path relative to the spec file")
        ck_path = (base / ck).resolve()
        if not ck_path.is_file():
            raise missing_file(path, "[baseline] checkpoint", ck, ck_path, base)
        kw["baseline_checkpoint"] = ck_path
    else:
        b = sec["builtin"]
        kind = b.partition(":")[0] if isinstance(b, str) else None
        if kind not in {k.partition(":")[0] for k in BUILTIN_POLICIES}:
            raise bad_value(path, "[baseline] builtin", b, ", ".join(BUILTIN_POLICIES))
        kw["baseline_builtin"] = b
    if "vecnormalize" in sec:
        kw["baseline_vecnormalize"] = _vecnormalize(sec["vecnormalize"], given, base, path,
                                                    "baseline")
    rel = sec.get("thresholds", {})  # none: the comparison only (why C moved from it)
    if not isinstance(rel, Mapping) or ("thresholds" in sec and not rel):
        raise SpecError(f"{spec_label(path)}: [baseline.thresholds]: empty or not a table; give "
                        "e.g. abs_C = 0.01 (no worse than the baseline by more than 0.01), or "
                        "remove the table to compare with the baseline without verdicts.")
    kw["baseline_thresholds"] = {}
    check_keys(rel, "baseline.thresholds", RELATIVE_KEYS, path,
               note=" (each reads 'quantity - baseline's <= value'; utility: 'baseline's "
                    "utility - utility <= value')")
    for k in rel:
        kw["baseline_thresholds"][k] = read_float(rel, k, f"[baseline.thresholds] {k}",
                                                  path, default=0.0, lo=-math.inf)
    return kw


def retrain_section(sec: Any, thresholds: Mapping[str, float],
                    policy_vecnormalize: Path | str | None, path: Path | None) -> dict[str, Any]:
    """``[retrain]``: how a failing policy is repaired (the algorithm, its iterations,
    betas, seed and starts; a trainer's ``eval_every`` and ``audit_n``, kept only when
    given) and the repair's guards, checked against the spec's ``thresholds`` and
    ``[policy] vecnormalize``."""
    sec = check_keys(sec, "retrain", SECTION_KEYS["retrain"], path)
    if (policy_vecnormalize is not None and policy_vecnormalize != VECNORMALIZE_NONE
            and sec.get("init") != "scratch"):
        raise SpecError(
            f"{spec_label(path)}: [retrain]: not with [policy] vecnormalize: a repair "
            "warm-starts from the network and trains it on raw observations, so it would "
            "not be the policy audited; set [retrain] init = \"scratch\" (a new network "
            "of its own inputs, audited without the statistics), drop [retrain], or audit "
            "on raw observations (vecnormalize = \"none\").")
    algo = sec.get("algo", "ppo-cb")
    if algo not in RETRAIN_ALGOS:
        raise bad_value(path, "[retrain] algo", algo, ", ".join(RETRAIN_ALGOS))
    betas = sec.get("betas", {})
    if not isinstance(betas, Mapping):
        raise bad_value(path, "[retrain] betas", betas, "a table such as { C = 1.0, Lambda = 0.5 }")
    clean_b: dict[str, float] = {}
    check_keys(betas, "retrain", ("C", "Lambda", "KL"), path, where="[retrain] betas")
    for bk in betas:  # TrainConfig's check of its weights (beta_c, beta_lambda, beta_kl)
        clean_b[bk] = check_weight(betas[bk], f"{spec_label(path)}: [retrain] betas {bk}",
                                   SpecError)
    if algo in ("exact", "ppo-lag") and clean_b:
        raise SpecError(f"{spec_label(path)}: [retrain] betas: algo {algo!r} imposes the "
                        "[thresholds] as constraints and takes no betas; remove betas, or "
                        "choose algo 'ppo-cb' for the fixed-beta objective.")
    if algo == "ppo-lag":
        bad = [k for k in thresholds if not is_repair_key(k)]
        if bad:
            raise SpecError(
                f"{spec_label(path)}: [thresholds] {bad[0]}: [retrain] algo 'ppo-lag' imposes "
                f"only {', '.join(PPO_LAG_KEYS)} (each also as KEY[A-B] for one pair and "
                "max_KEY for every pair); drop the threshold.")
        if not thresholds:
            raise SpecError(f"{spec_label(path)}: [thresholds]: [retrain] algo 'ppo-lag' needs "
                            "a threshold to impose, such as abs_C = 0.05.")
    if algo != "exact" and "starts" in sec:
        raise SpecError(f"{spec_label(path)}: [retrain] starts: only algo 'exact' takes "
                        f"starts (random starting tables); algo is {algo!r}.")
    out: dict[str, Any] = {
        "algo": algo,
        "iterations": read_int(sec, "iterations", "[retrain] iterations", path, minimum=1,
                               default=30 if algo == "exact" else 50),
        "betas": clean_b,
        "seed": read_int(sec, "seed", "[retrain] seed", path, minimum=0, default=0),
    }
    if algo == "exact":
        out["starts"] = read_int(sec, "starts", "[retrain] starts", path, minimum=0, default=12)
    out.update(_trainer_audits(sec, algo, out["iterations"], path))
    out.update(_repair_guards(sec, thresholds, path))
    out.update(_new_network(sec, path))
    return out


def _new_network(sec: Mapping[str, Any], path: Path | None) -> dict[str, Any]:
    """``[retrain] init``: ``"checkpoint"`` (the default: warm-start from the network of
    the ``[policy] checkpoint``) or ``"scratch"`` (a new network from a random init, for a
    policy without one: a factory's, a builtin; on a checkpoint policy its weights are
    ignored), and, with ``"scratch"`` only, the new network's ``hidden`` widths and
    ``activation`` (absent: the trainer's, 64-64 tanh). Kept only when given (``init``
    only when ``"scratch"``), so a warm-starting spec reads as before."""
    init = sec.get("init", "checkpoint")
    if not isinstance(init, str) or init not in RETRAIN_INITS:
        raise bad_value(path, "[retrain] init", init, "\"checkpoint\" (warm-start from the "
                        "[policy] checkpoint's network, the default) or \"scratch\" (train a "
                        "new network from a random init)")
    out: dict[str, Any] = {"init": init} if init == "scratch" else {}
    for key in ("hidden", "activation"):
        if key in sec and init != "scratch":
            raise SpecError(f"{spec_label(path)}: [retrain] {key}: a warm start trains the "
                            "[policy] checkpoint's own network; set [retrain] init = "
                            f"\"scratch\" to train a new one of this {key}, or remove {key}.")
    if "hidden" in sec:
        h = sec["hidden"]
        if not isinstance(h, list) or not h or not all(
                isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= 4096 for w in h):
            raise bad_value(path, "[retrain] hidden", h, "a non-empty list of layer widths, "
                            "integers from 1 to 4096, e.g. [64, 64]")
        out["hidden"] = [int(w) for w in h]
    if "activation" in sec:
        if sec["activation"] not in RETRAIN_ACTIVATIONS:
            raise bad_value(path, "[retrain] activation", sec["activation"],
                            ", ".join(RETRAIN_ACTIVATIONS))
        out["activation"] = sec["activation"]
    return out


def _trainer_audits(sec: Mapping[str, Any], algo: str, iterations: int,
                    path: Path | None) -> dict[str, Any]:
    """``[retrain] eval_every`` (the trainer audits the policy every this many iterations and
    at the last; PPO-Lagrangian's multipliers move and the kept policy is chosen only at
    those audits) and ``audit_n`` (units per group of those audits when by Monte Carlo),
    integers >= 1 kept only when given (absent: ``TrainConfig``'s 5 and, with imposed
    thresholds, the spec's ``[engine] n``). Refused with algo ``exact`` (no trainer) and an
    ``eval_every`` above ``iterations`` (only the last iteration would be audited: the
    multipliers would never act on the training)."""
    out: dict[str, Any] = {}
    for key in ("eval_every", "audit_n"):
        if key not in sec:
            continue
        if algo == "exact":
            raise SpecError(f"{spec_label(path)}: [retrain] {key}: algo 'exact' optimises on "
                            "the exact engine and has no trainer audits; remove it, or choose "
                            "a PPO-family algo.")
        out[key] = read_int(sec, key, f"[retrain] {key}", path, minimum=1, default=None)
    if out.get("eval_every", 0) > iterations:
        raise bad_value(path, "[retrain] eval_every", out["eval_every"],
                        f"an integer from 1 to iterations ({iterations}): the trainer audits "
                        "every eval_every iterations and at the last, so above iterations only "
                        "the last is audited and PPO-Lagrangian's multipliers, moved at audits, "
                        "never act on the training; lower eval_every or raise iterations")
    return out


def _repair_guards(sec: Mapping[str, Any], thresholds: Mapping[str, float],
                   path: Path | None) -> dict[str, Any]:
    """``[retrain] min_utility`` (a number, ``-inf`` allowed; absent: the better of the
    baseline policy pi0 and the uniform policy) and ``allow_worse`` (threshold keys a
    repair may make worse), kept only when given, as the gate reads them
    (docs/ci-gate.md, "An honest repair")."""
    out: dict[str, Any] = {}
    if "min_utility" in sec:
        v = sec["min_utility"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v == math.inf:
            raise bad_value(path, "[retrain] min_utility", v, "a number or -inf (no floor; TOML "
                            "writes it unquoted: min_utility = -inf); leave it out for the better "
                            "of the baseline and the uniform policy's utility")
        out["min_utility"] = float(v)
    if "allow_worse" in sec:
        v = sec["allow_worse"]
        v = [v] if isinstance(v, str) else v
        if not isinstance(v, list) or not all(isinstance(k, str) for k in v):
            raise bad_value(path, "[retrain] allow_worse", sec["allow_worse"],
                            "a list of [thresholds] keys, e.g. [\"Lambda\"]")
        bad = [k for k in v if k not in thresholds]
        if bad:
            raise bad_value(path, "[retrain] allow_worse", bad[0], "keys of this spec's [thresholds]"
                            f" ({', '.join(thresholds) or 'none'})")
        out["allow_worse"] = list(dict.fromkeys(v))
    return out

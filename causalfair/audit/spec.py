"""Audit specs: :class:`AuditSpec` and :func:`load_spec`, which reads a TOML spec
(docs/audit.md) section by section with the readers of its schema
(:mod:`causalfair.audit.spec_sections`), validated with messages that name the file, the
key, the bad value and the allowed values."""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from causalfair._limits import check_memory, check_timeout, format_bytes
from causalfair._safe_read import TOML_BYTES_FACTOR, not_a_file, read_file, read_toml
from causalfair.audit.spec_sections import (
    ENGINES,
    GYM_KEYS,
    METRICS,
    RELATIVE_KEYS,
    RETRAIN_ALGOS,
    SECTION_KEYS,
    TOP_KEYS,
    WEIGHTS,
    bad_value,
    baseline_section,
    check_keys,
    logs_policy_section,
    logs_section,
    model_section,
    policy_section,
    read_float,
    read_int,
    retrain_section,
    spec_label,
    system_section,
    thresholds_section,
)
from causalfair.errors import InputError, SpecError
from causalfair.systems.gym.door import gym_id  # the gym system's id: its one home
from causalfair.systems.lending.settings import SETTINGS  # the lending settings' one home
from causalfair.thresholds import THRESHOLD_KEYS

__all__ = ["AuditSpec", "SpecError", "load_spec", "read_spec_file", "check_spec_size", "spec_file", "spec_label", "METRICS",
           "THRESHOLD_KEYS", "ENGINES", "SETTINGS", "RETRAIN_ALGOS", "TOP_KEYS", "SECTION_KEYS",
           "RELATIVE_KEYS", "GYM_KEYS", "WEIGHTS"]

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # used with fullmatch: no trailing newline
_NAME_MAX = 100


def is_valid_name(name: Any) -> bool:
    """Whether ``name`` is a valid spec ``name`` (the rule :func:`load_spec` applies)."""
    return isinstance(name, str) and len(name) <= _NAME_MAX and bool(_NAME_RE.fullmatch(name))


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
    #: Lambda's eps: a number in the gain's units, "auto" (scale-free), or None: the value
    #: the system declares, else "auto" (causalfair.engines.benefit.eps_for).
    eps: float | str | None = None
    #: Also compute Lambda_T (causalfair.engines.benefit_horizon), reported as a notion.
    horizon_benefit: bool = False
    #: Individuals per group of Lambda_T's forks (Monte Carlo only); None: min(n, 2000).
    horizon_n: int | None = None
    weights: str = "visitation"
    worst: int = 5
    #: Lambda by forks on features: quantile bins per feature of its cells.
    benefit_bins: int = 4
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
    #: How the factory's torch module's outputs are read (causalfair.policies.TORCH_OUTPUTS;
    #: None: logits, refused for a Q-network).
    policy_output: str | None = None
    #: The observation statistics a stable-baselines3 policy was trained behind (an
    #: absolute path, or "none": raw observations; causalfair.policies.vecnormalize).
    policy_vecnormalize: Path | str | None = None
    base_dir: Path | None = None
    policy_object: str | None = None  # name of a policy object passed to audit(policy=...)
    baseline_checkpoint: Path | None = None
    baseline_builtin: str | None = None
    #: The observation statistics of the [baseline] checkpoint, as policy_vecnormalize.
    baseline_vecnormalize: Path | str | None = None
    baseline_thresholds: Mapping[str, float] = field(default_factory=dict)
    timeout: float | None = None  # seconds the gate gives this spec's audit (None: no limit)
    #: The reference group of the per-group comparisons (None: the system's first group;
    #: causalfair.engines.groups).
    reference: str | None = None
    #: The two groups every engine compares (``[engine] pair``): two names, or ``"A-B"``
    #: (checked against the system's groups by causalfair.engines.groups.resolve_pair);
    #: None: the engines' default (the largest and smallest V^pi with more than two groups).
    pair: tuple[str, str] | str | None = None
    #: The spec file as given (on the command line, or to :func:`load_spec`), relative to the
    #: working directory when below it: how messages, the gate's JSON and its JUnit name it
    #: (docs/ci-gate.md), never made absolute.
    given_path: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # a spec built in Python (or by ``replace``) is held to the file's limit too
        check_timeout(self.timeout, f"{self.label}: timeout")

    @property
    def file_shown(self) -> str | None:
        """The spec file as messages and the gate's outputs name it: as given, else (a spec
        made by ``replace`` from one without it) its path; None for a spec built in Python."""
        return self.given_path if self.given_path is not None else (
            None if self.path is None else str(self.path))

    @property
    def label(self) -> str:
        """How messages name this spec: "audit spec FILE" (:attr:`file_shown`), or "audit
        spec" for one built in Python (:func:`spec_label`)."""
        return spec_label(self.file_shown)

    @property
    def baseline_label(self) -> str | None:
        if self.baseline_checkpoint is not None:
            return f"checkpoint {self.baseline_checkpoint.name}"
        return f"builtin {self.baseline_builtin}" if self.baseline_builtin else None

    @property
    def source(self) -> str:
        return "logs" if self.logs_path is not None else "model"

    @property
    def logs_candidate(self) -> bool:
        """A ``[logs]`` spec with a ``[policy]``: a candidate audited on the model fitted
        from the log (not the logged policy)."""
        return self.source == "logs" and (self.builtin is not None or self.checkpoint is not None
                                          or self.policy_factory is not None
                                          or self.policy_object is not None)

    @property
    def policy_label(self) -> str:
        if self.policy_object is not None:
            return f"policy object {self.policy_object}"
        if self.checkpoint is not None:
            return f"checkpoint {self.checkpoint.name}"
        if self.policy_factory is not None:
            return f"factory {self.policy_factory}"
        return f"builtin {self.builtin}"

    @property
    def system_label(self) -> str:
        if self.system_tabular is not None:
            return f"tabular {self.system_tabular.name}"
        if self.system_id == "gym" and "env" in self.system_params:
            return gym_id(self.system_params["env"])
        return str(self.system_id)

    def with_policy(self, *, checkpoint: str | os.PathLike[str] | None = None,
                    builtin: str | None = None) -> AuditSpec:
        """A copy auditing another policy (a checkpoint path or a built-in)."""
        if (checkpoint is None) == (builtin is None):
            raise SpecError("with_policy: pass exactly one of checkpoint= or builtin=.")
        if checkpoint is not None:
            return replace(self, checkpoint=Path(checkpoint).resolve(), builtin=None,
                           policy_factory=None, policy_params={}, policy_output=None,
                           policy_vecnormalize=None)
        return replace(self, builtin=str(builtin), checkpoint=None, policy_factory=None,
                       policy_params={}, policy_output=None, policy_vecnormalize=None)


def spec_file(spec: str | os.PathLike[str]) -> Path:
    """The path of an audit spec file, or a SpecError when there is no such file (or
    ``spec`` is no path at all)."""
    if isinstance(spec, bytes) or not isinstance(spec, (str, os.PathLike)):
        raise SpecError(f"audit spec: got {type(spec).__name__} {str(spec)[:40]!r}; give a spec "
                        "file's path (a str or a pathlib.Path), the spec as a dict, or an "
                        "AuditSpec (cf.audit.load_spec).")
    path = Path(spec)
    if (path / "audit.json").is_file() or (path.suffix.lower() == ".json" and path.is_file()):
        raise SpecError(f"audit spec {path}: is {'an audit folder' if path.is_dir() else 'JSON'}"
                        f", not a spec (TOML); an audit is re-run from its audit.json with "
                        f"`causalfair audit --reproduce {shlex.quote(str(path))}`; or give a spec file.")
    if path.is_dir():
        raise SpecError(f"audit spec {path}: is a folder; give its spec files, e.g. "
                        f"{path / '*.toml'} (the shell expands the pattern).")
    if not path.is_file():
        raise SpecError(f"audit spec {path}: {not_a_file(path)}.")
    return path


def read_spec_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The TOML table of the audit spec file ``path``, parsed within the limits of
    docs/limits.md (:func:`causalfair._safe_read.read_toml`; a :class:`SpecError` naming
    the file): the audit's and ``--reproduce``'s one reading of a spec file."""
    where = f"audit spec {path}"
    return read_toml(read_file(path, where, SpecError,
                               check=lambda size: check_spec_size(size, where)),
                     where, SpecError)


def check_spec_size(size: int, where: str) -> None:
    """Refuse a spec file of ``size`` bytes over what its parsing may take (docs/limits.md):
    :func:`read_spec_file`'s check, and the gate's before it hashes a spec for its shards."""
    check_memory(TOML_BYTES_FACTOR * size, f"{where}: {format_bytes(size)} of TOML",
                 "use a smaller spec (a spec is a few kB)")


def _as_given(path: Path) -> str:
    """How messages name the spec file ``path`` (docs/ci-gate.md): relative to the working
    directory when it lies below it (a path given absolute included), else as given."""
    if path.is_absolute():
        try:
            return str(path.resolve().relative_to(Path.cwd().resolve()))
        except (ValueError, OSError):
            return str(path)
    return str(path)


def load_spec(spec: str | os.PathLike[str] | Mapping[str, Any], *,
              base_dir: str | os.PathLike[str] | None = None) -> AuditSpec:
    """Read and validate an audit spec: a TOML file path, or an already parsed mapping
    (relative paths then resolve against ``base_dir``, default the working directory).

    Raises :class:`SpecError` naming the key, the bad value and the allowed values.
    """
    path: Path | None = None
    if isinstance(spec, Mapping):
        raw = dict(spec)
        base = Path(base_dir or ".").resolve()
    else:
        path = spec_file(spec)
        raw = read_spec_file(path)
        base = path.resolve().parent
    check_keys(raw, "", TOP_KEYS, path, where="")

    # name
    if "name" not in raw:
        raise SpecError(f"{spec_label(path)}: name: missing; give the audit a name (letters, digits, . _ -).")
    name = raw["name"]
    if not isinstance(name, str) or len(name) > _NAME_MAX or not _NAME_RE.fullmatch(name):
        raise bad_value(path, "name", name, f"a string of at most {_NAME_MAX} letters, digits, "
                        "'.', '_' or '-' (starting with a letter or digit)")

    kw: dict[str, Any] = {"name": name, "path": path.resolve() if path else None, "raw": raw,
                          "given_path": _as_given(path) if path else None}

    # source: [model] (+ [policy]) or [logs]
    if "logs" in raw and "model" in raw:
        raise SpecError(
            f"{spec_label(path)}: [logs]: cannot be combined with [model]; a log audit fits "
            "its model to the logs. Keep one of them."
        )
    if "logs" in raw:
        kw["base_dir"] = base  # where a candidate's checkpoint or factory module is found
        kw.update(logs_section(raw["logs"], base, path))
        if "policy" in raw:  # a candidate on the fitted model (docs/logs.md)
            kw.update(logs_policy_section(raw["policy"], base, path, kw["logs_options"]))
    else:
        kw["base_dir"] = base
        if "system" in raw and "model" in raw:
            raise SpecError(
                f"{spec_label(path)}: [model]: cannot be combined with [system]; [model] is the "
                "older spelling of [system] id = \"lending-N\". Keep [system].")
        if "system" in raw:
            kw.update(system_section(raw["system"], base, path))
        else:
            kw.update(model_section(raw.get("model", {}), path))
        kw.update(policy_section(raw.get("policy", {}), base, path))

    # horizon
    if "horizon" in raw:
        kw["horizon"] = read_int(raw, "horizon", "horizon", path, minimum=1, default=None)
    elif "logs" in raw or "system" in raw:
        kw["horizon"] = None  # from the logs, or the system's default horizon
    else:
        kw["horizon"] = 20

    # timeout (the gate stops the spec's audit after it: causalfair.backends)
    if "timeout" in raw:
        try:  # the one check of every time limit (flags, keys, Python)
            kw["timeout"] = check_timeout(raw["timeout"], "timeout")
        except InputError as exc:
            raise SpecError(f"{spec_label(path)}: {exc}") from None
    if "reference" in raw:  # the reference group (checked against the system's groups)
        ref = raw["reference"]
        if not isinstance(ref, str) or not ref:
            raise bad_value(path, "reference", ref, "a group name such as \"White\"")
        kw["reference"] = ref

    # engine
    sec = check_keys(raw.get("engine", {}), "engine", SECTION_KEYS["engine"], path)
    kind = sec.get("kind", "auto" if "system" in raw else "exact")
    if kind not in ENGINES:
        raise bad_value(path, "[engine] kind", kind, ", ".join(ENGINES))
    if "logs" in raw and "kind" in sec:
        raise SpecError(
            f"{spec_label(path)}: [engine] kind: not used with [logs] (log audits bootstrap the "
            "logs; set [logs] n_boot and seed instead). Remove it."
        )
    kw.update(
        engine=kind if "logs" not in raw else "logs",
        n=read_int(sec, "n", "[engine] n", path, minimum=2, default=20000),
        seed=read_int(sec, "seed", "[engine] seed", path, minimum=0, default=0),
        alpha=read_float(sec, "alpha", "[engine] alpha", path, default=0.05, lo=0.0, hi=0.5,
                         lo_open=True),  # the error level: 0.95 would ask for 5% intervals
    )
    for key in ("n", "seed"):  # keys that would change nothing: refused, not ignored
        if key not in sec:
            continue
        if "logs" in raw:
            raise SpecError(
                f"{spec_label(path)}: [engine] {key}: not used with [logs] (a log audit runs "
                "no Monte Carlo: its intervals bootstrap the logs); set [logs] "
                f"{'n_boot (the bootstrap replicates)' if key == 'n' else 'seed (the bootstrap seed)'}"
                " instead, or remove it.")
        if sec.get("kind") == "exact":  # not written: the system's engine (choose_engine)
            raise SpecError(
                f"{spec_label(path)}: [engine] {key}: not used by the exact engine (kind = "
                "\"exact\": it computes the numbers from the tabular model, no sampling); "
                f"remove it, or set [engine] kind = \"mc\" to audit by Monte Carlo with this "
                f"{key}.")
    if "pair" in sec:  # the compared groups (names checked against the system's when run)
        pr = sec["pair"]
        if isinstance(pr, list) and len(pr) == 2 and all(isinstance(g, str) and g for g in pr) \
                and pr[0] != pr[1]:
            kw["pair"] = (pr[0], pr[1])
        elif isinstance(pr, str) and "-" in pr.strip("-"):
            kw["pair"] = pr
        else:
            raise bad_value(path, "[engine] pair", pr, "two different group names such as "
                            "[\"B\", \"A\"] (C = B's gain minus A's), or \"B-A\"")

    # benefit
    sec = check_keys(raw.get("benefit", {}), "benefit", SECTION_KEYS["benefit"], path)
    weights = sec.get("weights", "visitation")
    if weights not in WEIGHTS:
        raise bad_value(path, "[benefit] weights", weights, ", ".join(WEIGHTS))
    eps = sec.get("eps")
    if "eps" in sec and eps != "auto" and (
            isinstance(eps, bool) or not isinstance(eps, (int, float))
            or not math.isfinite(eps) or eps <= 0):
        raise bad_value(path, "[benefit] eps", eps, "a number > 0 (in the gain's units) or "
                        "\"auto\" (scale-free; docs/decomposition.md)")
    kw.update(
        eps=("auto" if eps == "auto" else None if eps is None else float(eps)),
        weights=weights,
        worst=read_int(sec, "worst", "[benefit] worst", path, minimum=1, default=5),
        benefit_bins=read_int(sec, "bins", "[benefit] bins", path, minimum=1, default=4),
    )
    if "horizon_benefit" in sec:
        if not isinstance(sec["horizon_benefit"], bool):
            raise bad_value(path, "[benefit] horizon_benefit", sec["horizon_benefit"], "true or false")
        kw["horizon_benefit"] = sec["horizon_benefit"]
    if "horizon_n" in sec:
        if not kw.get("horizon_benefit"):
            raise bad_value(path, "[benefit] horizon_n", sec["horizon_n"], "an integer >= 2 "
                            "together with horizon_benefit = true (set it, or remove horizon_n)")
        kw["horizon_n"] = read_int(sec, "horizon_n", "[benefit] horizon_n", path, minimum=2,
                                   default=None)

    # metrics
    if "metrics" in raw:
        m = raw["metrics"]
        if not isinstance(m, list) or not m:
            raise bad_value(path, "metrics", m, f"a non-empty list of {', '.join(METRICS)}")
        for item in m:
            if item not in METRICS:
                raise bad_value(path, "metrics", item, ", ".join(METRICS))
        kw["metrics"] = tuple(dict.fromkeys(m))

    # thresholds
    kw["thresholds"] = thresholds_section(raw.get("thresholds", {}), path)

    # baseline: thresholds relative to another policy (e.g. the checkpoint on main)
    if "baseline" in raw:
        if "logs" in raw:
            raise SpecError(f"{spec_label(path)}: [baseline]: not used with [logs]; compare two "
                            "policies on a system ([system] or [model]).")
        kw.update(baseline_section(raw["baseline"], base, path))

    # retrain
    if "retrain" in raw:
        kw["retrain"] = retrain_section(raw["retrain"], kw["thresholds"],
                                        kw.get("policy_vecnormalize"), path)
    return AuditSpec(**kw)

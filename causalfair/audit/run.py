"""Running an audit: the system and policy a spec names, the engines that apply, the
quantities and verdicts."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from causalfair._simultaneous import WIDENED, pair_z, simultaneous_dict
from causalfair._validation import check_keywords, engine_for, z_quantile
from causalfair.audit.result import AuditResult, display_path
from causalfair.audit.spec import GYM_KEYS, AuditSpec, load_spec
from causalfair.engines.attribution import attribute_exact, compare_attribute_mc
from causalfair.engines.benefit import eps_for
from causalfair.engines.benefit_horizon import lambda_horizon
from causalfair.engines.exact import exact_numbers
from causalfair.engines.groups import check_pairs, lambda_by_forks, resolve_pair, wanted
from causalfair.engines.groups import compare as compare_groups
from causalfair.engines.montecarlo import decompose_mc
from causalfair.engines.notions import other_notions
from causalfair.engines.selection import counted_selection, selection_rates
from causalfair.errors import (
    CausalfairError,
    InputError,
    SpecError,
    UserCodeError,
    short,
)
from causalfair.logs import PositivityError, audit_logs, linear_potential, read_logs
from causalfair.logs.audit import FittedModelPolicy
from causalfair.logs.schema import check_decisions, validate_logs
from causalfair.policies.grid import policy_table
from causalfair.policies.resolver import ResolvedPolicy, resolve
from causalfair.systems import as_system, load_tabular, make
from causalfair.thresholds import (
    OTHER_NOTIONS,
    THRESHOLD_KEYS,
    Verdict,
    abs_interval,
    group_verdicts,
    is_group_key,
    judge,
    name_pairs,
    split_key,
)

__all__ = ["audit", "run_audit", "build_system", "resolve_policy", "choose_engine", "in_spec"]

def as_spec(spec_or_path: Any) -> AuditSpec:
    """An :class:`AuditSpec` as it is, anything else read by :func:`load_spec`."""
    if isinstance(spec_or_path, AuditSpec):
        return spec_or_path
    return load_spec(spec_or_path)


def _quantities(spec: AuditSpec, dec: Any, notions: Mapping[str, Any],
                lam_se: float | None = None) -> dict[str, tuple[float, float, float, float | None]]:
    z = z_quantile(spec.alpha)
    est, ci = dec.estimates(), dec.intervals(spec.alpha)  # the result's own intervals
    se = dict(dec.se) if dec.se else None
    out: dict[str, tuple[float, float, float, float | None]] = {}
    for k in ("C", "DPE", "IPE", "SPE", "utility"):
        e = float(est[k])
        s = float(se[k]) if se is not None and k in se else None
        out[k] = (e, *ci[k], s) if s is not None else (e, e, e, None)
    lam = dec.Lambda
    if lam is not None:
        s = lam_se if lam_se is not None else (float(se["Lambda"]) if se and "Lambda" in se else None)
        out["Lambda"] = (lam, max(0.0, lam - z * s), lam + z * s, s) if s is not None else (
            lam, lam, lam, None)
    for k in OTHER_NOTIONS:
        v = notions.get(k)
        if isinstance(v, (int, float)) and v is not None:
            s = notions.get(f"{k}_se")
            if isinstance(s, (int, float)):
                out[k] = (float(v), max(0.0, v - z * s), v + z * s, float(s))
            else:
                out[k] = (float(v), float(v), float(v), None)
    return out


def _verdicts(spec: AuditSpec, q: Mapping[str, tuple[float, float, float, float | None]],
              groups: Any = None) -> list[Verdict]:
    out = []
    for key, thr in spec.thresholds.items():
        if is_group_key(key):  # over groups beyond the pair (causalfair.engines.groups)
            if groups is None:
                raise SpecError(f"{spec.label}: [thresholds] {key}: thresholds over "
                                "groups need an audit of a system or model with groups.")
            try:
                out += group_verdicts({key: thr}, groups)
            except CausalfairError as exc:
                raise SpecError(f"{spec.label}: [thresholds] {exc}") from None
            continue
        base = key[4:] if key.startswith("abs_") else key
        if base not in q:
            raise SpecError(
                f"{spec.label}: [thresholds] {key}: the quantity {base!r} is not "
                f"available for this audit; remove it (available: "
                f"{', '.join(k for k in THRESHOLD_KEYS if k.removeprefix('abs_') in q)})."
            )
        e, lo, hi, _ = q[base]
        if key.startswith("abs_"):
            lo, hi = abs_interval(lo, hi)
            e = abs(e)
        out.append(Verdict(key=key, threshold=float(thr), estimate=float(e), lower=float(lo),
                           upper=float(hi), status=judge(lo, hi, thr)))
    return out


def in_spec(exc: CausalfairError, where: str) -> CausalfairError:
    """``exc`` with ``where`` (the spec and its section) in front of its message, of the
    same class; a :class:`UserCodeError` keeps the user's traceback."""
    msg = f"{where}: {exc}"
    if isinstance(exc, UserCodeError):
        return UserCodeError(msg, callable_name=exc.callable_name,
                             traceback_text=exc.traceback_text)
    try:
        return type(exc)(msg)
    except TypeError:  # a subclass with another signature
        return SpecError(msg)


def build_system(spec: AuditSpec) -> Any:
    """The :class:`~causalfair.systems.System` a spec names: ``[system] id`` /
    ``factory`` (made with ``params``; a factory module is looked up in the spec's folder
    first) or ``tabular`` (a model file), or the legacy ``[model] setting``."""
    try:
        if spec.system_tabular is not None:
            return as_system(load_tabular(spec.system_tabular), id=spec.system_id or "tabular")
        return make(spec.system_id or "lending-1", search_path=spec.base_dir,
                    **dict(spec.system_params))
    except CausalfairError as exc:
        key = None if isinstance(exc, UserCodeError) else _gym_key(spec, str(exc))
        if key is not None:  # a [system] key of a gym spec: named as the spec writes it
            raise SpecError(f"{spec.label}: [system] {key}: "
                            f"{str(exc).partition(': ')[2]}") from exc
        raise in_spec(exc, f"{spec.label}: [system]") from exc


def _gym_key(spec: AuditSpec, message: str) -> str | None:
    """The ``[system]`` key of a gym spec that ``message`` of ``from_gym`` (``"from_gym
    KEY: ..."``, or the decisions' ``"decisions.baseline: ..."``) is about, else None."""
    if spec.system_id != "gym":
        return None
    head = message.partition(": ")[0]
    key = {"decisions.baseline": "baseline"}.get(head, head.removeprefix("from_gym "))
    return key if key in GYM_KEYS and key in spec.raw.get("system", {}) else None


def resolve_policy(spec: AuditSpec, system: Any, policy: Any = None,
                   vecnormalize: Any = None) -> ResolvedPolicy:
    """The spec's ``[policy]`` (a checkpoint, a factory with its params, or a built-in)
    resolved for ``system`` (:func:`causalfair.policies.resolve`), with the statistics of
    ``[policy] vecnormalize``; ``policy`` overrides it with anything the resolver accepts
    (a factory is looked up in the spec's folder first), with the statistics of
    ``vecnormalize`` (the spec's belong to the spec's policy, never to another)."""
    where = spec.label
    if policy is not None:
        return resolve(policy, system, search_path=spec.base_dir, where="policy",
                       vecnormalize=vecnormalize)
    if vecnormalize is not None:
        raise SpecError(f"{where}: vecnormalize: goes with policy= (the statistics of the "
                        "policy passed in); the spec's own policy takes its statistics from "
                        "[policy] vecnormalize.")
    stats = {"vecnormalize": spec.policy_vecnormalize,
             "vecnormalize_where": f"{where}: [policy] vecnormalize"}
    if spec.checkpoint is not None:
        return resolve(spec.checkpoint, system, **stats)
    if spec.policy_factory is not None:
        return resolve(spec.policy_factory, system, search_path=spec.base_dir,
                       params=spec.policy_params, where=f"{where}: [policy] factory",
                       output=spec.policy_output, **stats)
    return resolve(spec.builtin, system, where=f"{where}: [policy] builtin")


def choose_engine(spec: AuditSpec, system: Any) -> str:
    """The engine an audit runs (:func:`causalfair._validation.engine_for`, as every door
    chooses it): ``exact`` needs a tabular model of independent units; ``[engine] kind``
    not written is ``auto``."""
    kind = spec.engine
    engine_sec = spec.raw.get("engine") if isinstance(spec.raw, Mapping) else None
    if not (isinstance(engine_sec, Mapping) and "kind" in engine_sec):
        kind = "auto"  # not chosen in the spec: whatever the system supports
    return engine_for(system, kind, field=f"{spec.label}: [engine] kind",
                      error=SpecError, check=False)  # the contract: in run_prepared


@check_keywords
def audit(spec_or_path: str | os.PathLike[str] | AuditSpec | Mapping[str, Any], *,
          policy: Any = None, system: Any = None, baseline: Any = None,
          baseline_where: str = "baseline", vecnormalize: Any = None,
          baseline_vecnormalize: Any = None) -> AuditResult:
    """Run an audit spec and return an :class:`AuditResult`.

    ``spec_or_path``: a TOML file, a parsed mapping or an :class:`AuditSpec`.
    ``policy``: optional override of the spec's ``[policy]``: a built-in name
    (``"threshold:0.7"``), a checkpoint path or a policy object; handy to compare
    policies under the same spec in a notebook. ``system``: optional override of the
    spec's ``[system]`` (a :class:`~causalfair.systems.System`, or anything
    :func:`~causalfair.systems.as_system` accepts, such as your simulator object).
    ``baseline``: a policy to compare with (anything the resolver accepts; overrides the
    spec's ``[baseline]``): the result's ``attribution`` then says why C moved from it
    (:mod:`causalfair.engines.attribution`). ``baseline_where``: what the errors about a
    bad ``baseline`` name (the command line: ``--baseline``).

    ``vecnormalize`` / ``baseline_vecnormalize``: the observation statistics of a
    stable-baselines3 ``policy`` / ``baseline`` trained behind ``VecNormalize`` (a
    ``vecnormalize.pkl``, ``.npz`` or ``.json`` path, a ``VecNormalize`` object, or
    ``"none"``; :func:`causalfair.policies.resolve`). The spec's ``[policy]
    vecnormalize`` and ``[baseline] vecnormalize`` belong to the spec's own policies: a
    policy passed in brings its own statistics (these keywords, or a policy already
    made by ``cf.as_policy(model, vecnormalize=...)``), and each keyword is refused
    without the policy it goes with.
    """
    t0 = time.perf_counter()
    spec = as_spec(spec_or_path)
    if spec.source == "logs":
        if baseline is not None:
            raise SpecError(f"{spec.label}: {baseline_where}: an audit from logs has "
                            "no policy to compare on a system; audit a [system] spec instead.")
        if system is not None:
            raise SpecError(f"{spec.label}: system: an audit from logs fits its "
                            "model to the logs; audit a [system] spec to pass a system.")
        return _audit_logs(spec, t0, policy, vecnormalize)
    return run_prepared(prepare(spec, system=system, policy=policy, baseline=baseline,
                                baseline_where=baseline_where, vecnormalize=vecnormalize,
                                baseline_vecnormalize=baseline_vecnormalize), t0=t0)


def _with_policy(spec: AuditSpec, policy: Any, res: ResolvedPolicy) -> AuditSpec:
    """``spec`` naming ``policy`` (passed to :func:`audit`, resolved as ``res``) instead of
    its own [policy]: what the report and provenance name."""
    spec = replace(spec, policy_vecnormalize=None)  # the spec's statistics: its policy's
    if res.kind == "checkpoint":
        return replace(spec, checkpoint=Path(policy).resolve(), builtin=None,
                       policy_factory=None)
    if res.kind in ("builtin", "factory"):
        return replace(spec, builtin=policy if res.kind == "builtin" else None,
                       checkpoint=None, policy_factory=policy if res.kind == "factory"
                       else None, policy_params={}, policy_output=None)
    return replace(spec, builtin=None, checkpoint=None, policy_factory=None,
                   policy_object=res.label)


class Prepared:
    """A spec with its system built and its policy resolved (:func:`prepare`): what the
    gate checks for every spec before it audits any."""

    __slots__ = ("spec", "system", "policy", "label", "sha256", "meta", "baseline")

    def __init__(self, spec: AuditSpec, system: Any, policy: Any, label: str,
                 sha256: str | None, meta: dict[str, Any] | None,
                 baseline: tuple[Any, str, str | None] | None = None):
        self.spec, self.system, self.policy = spec, system, policy
        self.label, self.sha256, self.meta = label, sha256, meta
        self.baseline = baseline  # (policy, label, checkpoint sha256) of [baseline]


def prepare(spec: AuditSpec, *, system: Any = None, policy: Any = None,
            baseline: Any = None, baseline_where: str = "baseline", vecnormalize: Any = None,
            baseline_vecnormalize: Any = None) -> Prepared:
    """Build the spec's system and resolve its policy (every input error surfaces here,
    before any engine runs); ``system``/``policy``/``baseline`` override the spec's (an
    error about ``baseline`` names ``baseline_where``), ``vecnormalize`` /
    ``baseline_vecnormalize`` are the statistics of ``policy`` / ``baseline``
    (:func:`audit`)."""
    if baseline_vecnormalize is not None and baseline is None:
        raise SpecError(f"{spec.label}: {_keyword(baseline_where, 'vecnormalize')}: "
                        f"goes with {baseline_where} (the statistics of the baseline passed in); "
                        "the spec's [baseline] takes its statistics from [baseline] "
                        "vecnormalize.")
    if system is None:
        system = build_system(spec)
    else:  # the report and provenance name the system actually audited
        system = as_system(system)
        spec = replace(spec, system_id=system.id, system_tabular=None,
                       system_params=dict(system.params),
                       setting=system.id if spec.setting == system.id else None)
    res = resolve_policy(spec, system, policy, vecnormalize)
    pol, pname, sha, meta = res.policy, res.label, res.sha256, res.meta
    if policy is not None:  # the report and provenance name the policy actually computed
        spec = _with_policy(spec, policy, res)
    explicit = isinstance(spec.raw, Mapping) and "horizon" in spec.raw
    T = spec.horizon if spec.horizon is not None and explicit else system.horizon
    spec = replace(spec, engine=choose_engine(spec, system), horizon=T)
    check_on_system(spec, system)
    override, baseline = baseline, None
    if spec.baseline_thresholds or spec.baseline_label is not None or override is not None:
        paired_keys = {"C", "DPE", "IPE", "SPE", "utility"}
        if "exact" not in system.engines:
            bad = [k for k in spec.baseline_thresholds
                   if (k[4:] if k.startswith("abs_") else k) not in paired_keys]
            if bad:
                raise SpecError(
                    f"{spec.label}: [baseline.thresholds] {bad[0]}: needs the exact value "
                    f"on both sides, and system {system.id!r} has no tabular model; on a "
                    "simulator, relative thresholds take C, DPE, IPE, SPE (abs_ too) and utility.")
        if spec.engine == "mc" and system.units_per_replica != 1:
            raise SpecError(
                f"{spec.label}: [baseline]: the paired Monte Carlo comparison needs "
                f"independent units, and system {system.id!r} couples them "
                f"({system.units_per_replica} units per world; it has no exact engine either), "
                "so a baseline (the spec's "
                "[baseline], --baseline) does not apply to it; drop it and compare two audits: "
                "cf.compare(cf.audit(SPEC), cf.audit(SPEC, policy=BASELINE)).")
        where = (baseline_where if override is not None
                 else f"{spec.label}: [baseline]")
        # the statistics of the baseline compared with: passed with it, else the spec's
        stats = ({"vecnormalize": baseline_vecnormalize,
                  "vecnormalize_where": _keyword(baseline_where, "vecnormalize")}
                 if override is not None else
                 {"vecnormalize": spec.baseline_vecnormalize,
                  "vecnormalize_where": "[baseline] vecnormalize"})
        try:
            b = resolve(override if override is not None else spec.baseline_checkpoint
                        if spec.baseline_checkpoint is not None else spec.baseline_builtin,
                        system, search_path=spec.base_dir, **stats)
            baseline = (b.policy, b.label, b.sha256)
        except CausalfairError as exc:  # a bad policy, checkpoint or factory: name where
            raise in_spec(exc, where) from None
    return Prepared(spec, system, pol, pname, sha, meta, baseline)


def unavailable(system: Any) -> dict[str, str]:
    """The quantities an audit of ``system`` cannot produce, whatever its policy, each with
    why (what :func:`_quantities` will lack): the notions tpr_gap, w1_final and dp_gap need a
    tabular model (:func:`causalfair.engines.notions.other_notions`), tpr_gap and
    elbert_bias its ``p_repay`` table and two actions (elbert_bias also comes from coupled
    units' Monte Carlo), Lambda a system with levels or features to pair individuals
    (:func:`causalfair.engines.benefit_mc.system_benefit`)."""
    out: dict[str, str] = {}
    model = system.tabular if "exact" in system.engines else None
    if model is None:
        for k in ("tpr_gap", "w1_final", "dp_gap"):
            out[k] = f"it needs a tabular model, and system {system.id!r} has none"
        if system.units_per_replica == 1:
            out["elbert_bias"] = (f"it needs a tabular model, or coupled units, and system "
                                  f"{system.id!r} has neither")
        if system.n_levels is None and system.features is None:
            out["Lambda"] = (f"it needs levels or features to pair individuals, and system "
                             f"{system.id!r} declares neither")
    elif not (model.binary and "p_repay" in model.aux):
        for k in ("tpr_gap", "elbert_bias"):
            out[k] = (f"it needs the p_repay table of a two-action tabular model, and system "
                      f"{system.id!r}'s has {'no such table' if model.binary else 'more actions'}")
    return out


def available_keys(missing: Mapping[str, Any]) -> str:
    """The [thresholds] keys (:data:`~causalfair.thresholds.THRESHOLD_KEYS`) whose quantity
    is not among ``missing``, as a refusal lists them."""
    return ", ".join(k for k in THRESHOLD_KEYS if k.removeprefix("abs_") not in missing)


def check_on_system(spec: AuditSpec, system: Any) -> None:
    """What ``spec`` asks of ``system``, refused before any engine runs (:func:`prepare`:
    the audit, ``--baseline``, the gate's check of every spec): ``[engine] pair`` and
    ``reference`` name groups of the system, each ``[thresholds] KEY[A-B]`` two of them,
    and each threshold's quantity is one this audit can produce (:func:`unavailable`)."""
    check_groups(spec, system.groups)
    missing = unavailable(system)
    for key in spec.thresholds:
        metric = split_key(key)[0].removeprefix("min_").removeprefix("max_").removeprefix("abs_")
        if metric in missing:
            raise SpecError(
                f"{spec.label}: [thresholds] {key}: the quantity {metric!r} is not available "
                f"for this audit ({missing[metric]}); remove it, or audit a system that has it "
                f"(available: {available_keys(missing)}).")


def check_groups(spec: AuditSpec, groups: Any) -> None:
    """The groups ``spec`` names, refused as the spec's unless they are among ``groups``
    (a system's, or those of a [logs] spec's log, checked before its fit and bootstrap):
    ``[engine] pair``, ``reference`` and each ``[thresholds] KEY[A-B]``."""
    where = spec.label
    groups = tuple(str(g) for g in groups)
    _spec_pair(spec, groups)
    if spec.reference is not None and spec.reference not in groups:
        raise SpecError(f"{where}: reference: bad value {short(spec.reference, 60)}; name one "
                        f"of the groups {', '.join(groups)} (default: the first).")
    for key in spec.thresholds:
        pair = split_key(key)[1]
        if pair is not None:
            try:
                resolve_pair(pair, groups, key)
            except InputError as exc:
                raise SpecError(f"{where}: [thresholds] {exc}") from None


def _keyword(where: str, suffix: str) -> str:
    """The companion of the option or keyword ``where``: ``--baseline`` gives
    ``--baseline-vecnormalize``, ``baseline`` gives ``baseline_vecnormalize``."""
    return f"{where}-{suffix}" if where.startswith("--") else f"{where}_{suffix}"


def run_prepared(prep: Prepared, *, t0: float | None = None) -> AuditResult:
    """Run the engines of a :func:`prepare`-d spec."""
    t0 = time.perf_counter() if t0 is None else t0
    spec, system = prep.spec, prep.system
    model = system.tabular if "exact" in system.engines else None
    try:
        # the simulator contract, checked before the engines run, as every door checks it;
        # here, not in prepare: it runs the user's simulator, which a gate runs in a worker
        # under the spec's time limit, and a spec that breaks it is that spec's error only
        system.check_contract()
        res = _run_engines(spec, system, model, prep.policy, prep.label, spec.horizon,
                           spec.engine)
        if prep.baseline is not None:
            _judge_against_baseline(res, prep.baseline)
        res.verdicts = name_pairs(res.verdicts, res.decomposition.groups, res.decomposition.pair)
    except CausalfairError as exc:  # the simulator or the policy broke while running
        where = spec.label
        if str(exc).startswith(where):
            raise
        raise in_spec(exc, f"{where}: the audit failed") from exc
    res.checkpoint_sha256, res.checkpoint_meta = prep.sha256, prep.meta
    res.seconds = time.perf_counter() - t0
    return res


def _run_engines(spec: AuditSpec, system: Any, model: Any, pol: Any, pname: str, T: int,
                 engine: str) -> AuditResult:
    table = mu_pi = mu_0 = exact = ben = None
    notions: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    eps, eps_source = eps_for(spec.eps, system)  # given, declared by the system, or "auto"
    if model is not None:
        table = policy_table(pol, model, T)
        mu_pi, mu_0 = model.propagate(table, T), model.propagate(model.baseline_table(), T)
    lam_se = None
    pair = _spec_pair(spec, system.groups)
    if wanted(len(system.groups), spec.reference, spec.thresholds):  # every pair: before any run
        check_pairs(len(system.groups), spec.label, coupled=system.units_per_replica != 1)
    forks: dict = {}  # Lambda's forks (rollout, cells, replicates'): made once, every pair's
    if engine == "mc":
        dec = decompose_mc(system, pol, T, n=spec.n, seed=spec.seed, policy_name=pname,
                           eps=eps, alpha=spec.alpha, benefit_n=spec.n,
                           benefit_bins=spec.benefit_bins, pair=pair, benefit_shared=forks,
                           # its Lambda is the audit's only without a model (else exact below)
                           weights=spec.weights if model is None else "visitation")
    if model is not None:  # Lambda and the notions of the pair C compares (with more than
        # two groups, Monte Carlo picks it from its own estimates)
        nums = exact_numbers(model, table, T, eps=eps, weights=spec.weights,
                             pair=dec.pair if engine == "mc" else pair,
                             policy_name=pname, benefit=True, notions=True)
        exact, ben, notions = nums.decomposition, nums.benefit, nums.notions
    if engine == "mc":
        if exact is not None:
            dec = replace(dec, Lambda=exact.Lambda, Lambda_ci=exact.Lambda_ci,
                          Lambda_ci_level=None, benefit=ben)
            extra["exact"] = {k: getattr(exact, k) for k in ("C", "DPE", "IPE", "SPE")}
        else:  # Lambda by forks, with its bootstrap interval (causalfair.engines.benefit_mc)
            ben = dec.benefit
            lam_se = ben.se if ben is not None else None
    else:
        dec = exact
    dec = replace(dec, gain_unit=system.gain.unit)  # its plot() and the groups' say the unit
    for k, v in (getattr(dec, "notions", None) or {}).items():  # e.g. ELBERT's bias by MC
        notions.setdefault(k, v)
    if ben is not None and eps_source is not None:
        ben = replace(ben, eps_source=eps_source)
    if ben is not None:  # its plot() says the system's unit, as the report does
        ben = replace(ben, gain_unit=system.gain.unit)
    if spec.horizon_benefit:  # Lambda_T beside Lambda (exact from the model, else forks)
        n_t = spec.horizon_n or min(spec.n, 2000)  # forks cost O(T^2 A n) steps per group
        lt = lambda_horizon(system, pol, T, engine="exact" if model is not None else "mc",
                            eps=eps, weights=spec.weights, n=n_t, pair=dec.pair,
                            seed=spec.seed, alpha=spec.alpha, eps_source=eps_source,
                            bins=spec.benefit_bins)
        notions["Lambda_T"] = lt.Lambda
        extra["Lambda_T"] = {"estimate": lt.Lambda, "ci": None if lt.ci is None else list(lt.ci),
                             "eps": lt.eps, "eps_source": lt.eps_source, "engine": lt.method,
                             **({"n": n_t} if model is None else {})}
    q = _quantities(spec, dec, notions, lam_se=lam_se)
    if ben is not None and getattr(ben, "ci", None) is not None and "Lambda" in q:
        q["Lambda"] = (q["Lambda"][0], ben.ci[0], ben.ci[1], ben.se)  # bootstrap hull interval
    selection = selection_rates(model, table, mu_pi, T, source="exact",
                                labels=system.decisions.labels) if model is not None else (
        counted_selection(dec.decisions, dec.groups, system.decisions.labels,
                          system.decisions.baseline,
                          worlds=dec.n if system.units_per_replica != 1 else None)
        if getattr(dec, "decisions", None) is not None else None)
    groups = None
    if wanted(len(dec.groups), spec.reference, spec.thresholds):
        lambda_of = None if ben is None or ben.method == "exact" else lambda_by_forks(
            system, pol, T, n=spec.n, seed=spec.seed, eps=ben.eps, alpha=spec.alpha,
            bins=spec.benefit_bins, shared=forks)
        try:
            groups = compare_groups(dec, reference=spec.reference, alpha=spec.alpha,
                                    benefit=ben, lambda_of=lambda_of, selection=selection,
                                    attributes=getattr(system, "group_attributes", None),
                                    coupled=system.units_per_replica != 1)
        except InputError as exc:  # a reference that is not a group: the spec's
            raise in_spec(exc, spec.label) from None
    res = AuditResult(
        spec=spec, decomposition=dec, benefit=ben, notions=notions, quantities=q,
        verdicts=_verdicts(spec, q, groups), model=model, policy=pol, policy_table=table,
        mu_pi=mu_pi, mu_0=mu_0, system=system,
    )
    res.extra.update(extra)
    res.group_comparison = groups
    res.selection = selection
    if ben is None:
        res.extra["benefit"] = ("not computed: benefit fairness needs a tabular model or the "
                                "Monte Carlo benefit estimator")
    return res


def _spec_pair(spec: AuditSpec, groups: Any) -> tuple[int, int] | None:
    """The spec's ``[engine] pair`` as group indices of ``groups`` (None: the engines'
    default), refused as the spec's when it names no two of them."""
    try:
        return resolve_pair(spec.pair, groups, "[engine] pair")
    except InputError as exc:
        raise SpecError(f"{spec.label}: {exc}") from None


def _judge_against_baseline(res: AuditResult, baseline: tuple[Any, str, str | None]) -> None:
    """Add the verdicts of ``[baseline.thresholds]`` to ``res``: each quantity of the
    audited policy minus the baseline's (for utility: the baseline's minus the policy's)
    judged by the same CI rule. Exact engine: exact differences. Monte Carlo: a paired
    run with common random numbers (the numbers of
    :func:`~causalfair.engines.montecarlo.compare_mc`, from the run that also gives the
    attribution: :func:`~causalfair.engines.attribution.compare_attribute_mc`); Lambda
    and the other notions need the exact engine's numbers (a tabular system). The result's
    ``attribution`` says why C moved from the baseline. A pair the decomposition chose from
    the data (its ``simultaneous`` m > 1) stays chosen here, though the paired run is given
    it: the differences of C, DPE, IPE and SPE (and their abs_) are judged on intervals
    simultaneous over the m pairs, z_{1 - alpha/(2m)} (:mod:`causalfair._simultaneous`)."""
    spec, system, model = res.spec, res.system, res.model
    bpol, blabel, bsha = baseline
    T = spec.horizon
    z = z_quantile(spec.alpha)
    m = int(getattr(res.decomposition, "simultaneous", 1))
    zc = z if m == 1 else pair_z(spec.alpha, m)  # the data-chosen pair's, over its m pairs
    paired = attribution = None
    if spec.engine == "mc":  # one paired run gives the comparison and the attribution
        paired, attribution = compare_attribute_mc(
            system, res.policy, bpol, T, n=spec.n, seed=spec.seed, alpha=spec.alpha,
            pair=res.decomposition.pair, policy_name=res.decomposition.policy_name,
            baseline_name=blabel, simultaneous=m)
    qb: Mapping[str, Any] = {}
    if model is not None:  # the baseline's exact numbers (all quantities)
        # of the audited policy's pair, as the paired run and the attribution compare
        b = _run_engines(replace(spec, thresholds={}, pair=tuple(res.decomposition.pair)),
                         system, model, bpol, blabel, T, "exact")
        qb = b.quantities
    q = res.quantities
    verdicts, numbers = [], {}
    for key, thr in spec.baseline_thresholds.items():
        base = key[4:] if key.startswith("abs_") else key
        if paired is not None and base in paired:
            p = paired[base]
            if key.startswith("abs_"):
                e, s_ = p["abs_diff"], p["abs_se"]
            elif base == "utility":
                e, s_ = -p["diff"], p["se"]
            else:
                e, s_ = p["diff"], p["se"]
            zk = zc if base in WIDENED else z
            lo, hi = e - zk * s_, e + zk * s_
            mine, theirs = p["policy"], p["baseline"]
        elif base in q and base in qb and q[base][3] is None:  # exact numbers on both sides
            mine, theirs = float(q[base][0]), float(qb[base][0])
            if key.startswith("abs_"):
                e = abs(mine) - abs(theirs)
            elif base == "utility":
                e = theirs - mine
            else:
                e = mine - theirs
            lo = hi = e
        else:
            raise SpecError(
                f"{spec.label}: [baseline.thresholds] {key}: not available for this "
                "audit; relative thresholds on Lambda and the other notions need a system with "
                "a tabular model (their exact values), on C, DPE, IPE, SPE and utility any.")
        label = "utility drop vs baseline" if base == "utility" else f"{key} vs baseline"
        verdicts.append(Verdict(key=label, threshold=float(thr), estimate=float(e),
                                lower=float(lo), upper=float(hi), status=judge(lo, hi, thr)))
        numbers[key] = {"policy": float(mine), "baseline": float(theirs), "difference": float(e),
                        "lower": float(lo), "upper": float(hi)}
    res.verdicts = list(res.verdicts) + verdicts
    res.attribution = attribution if attribution is not None else attribute_exact(
        model, res.policy_table, b.policy_table, T, pair=res.decomposition.pair,
        policy_name=res.decomposition.policy_name, baseline_name=blabel)
    res.extra["baseline"] = {"policy": blabel, "checkpoint_sha256": bsha,
                             "paired_monte_carlo": paired is not None, "quantities": numbers}
    if paired is not None and m > 1:  # C, DPE, IPE, SPE differences: over the m pairs
        res.extra["baseline"]["simultaneous"] = simultaneous_dict(m, spec.alpha)


#: The ``[logs]`` options that say how to read the log (:func:`causalfair.logs.schema.validate_logs`).
LOG_COLUMNS_KEYS = ("n_levels", "groups", "state", "bins", "next_state")


def read_spec_log(spec: AuditSpec) -> Any:
    """A ``[logs]`` spec's log read and checked before its fit and bootstrap: its columns
    (:func:`causalfair.logs.schema.validate_logs`, with the spec's options) and the groups
    the spec names (:func:`check_groups`). Returns the :class:`~causalfair.logs.schema.LogData`."""
    opts = spec.logs_options
    try:
        data = validate_logs(read_logs(spec.logs_path),
                             decisions=check_decisions(opts.get("decisions")),
                             **{k: opts[k] for k in LOG_COLUMNS_KEYS if k in opts})
    except CausalfairError as exc:  # which spec's log, in a gate of many
        raise in_spec(exc, f"{spec.label}: [logs] path {display_path(spec.logs_path)}"
                      ) from None
    check_groups(spec, data.groups)
    return data


def check_spec(spec: AuditSpec) -> Prepared | None:
    """Every input error of ``spec`` knowable before its engines run, the one check of a
    gate's specs: a model's spec :func:`prepare`-d (returned, for its audit), a [logs]
    spec's log read and checked (:func:`read_spec_log`; None: its audit reads it again)."""
    if spec.source == "logs":
        read_spec_log(spec)
        return None
    return prepare(spec)


def _audit_logs(spec: AuditSpec, t0: float, policy: Any = None,
                vecnormalize: Any = None) -> AuditResult:
    """The audit of a [logs] spec: of the logged policy, or of a candidate (the spec's
    [policy], or ``policy`` passed to :func:`audit`) on the model fitted from the log."""
    df = read_spec_log(spec)  # read and checked once (the LogData audit_logs would make)
    opts = {k: v for k, v in spec.logs_options.items() if k not in LOG_COLUMNS_KEYS}
    weights = opts.pop("potential_weights", None)
    if weights is not None:
        opts["potential"] = linear_potential(weights)
    resolved: list[Any] = []
    if policy is not None or vecnormalize is not None or spec.checkpoint is not None \
            or spec.policy_factory is not None:
        # the candidate's checkpoint or factory (or the policy passed in), resolved (and
        # checked) on the model audit_logs fits from the log, as a system's audit resolves it
        def on_fit(model: Any) -> Any:
            rp = resolve_policy(spec, model, policy, vecnormalize)
            resolved.append(rp)
            return policy if policy is not None and rp.kind == "builtin" else rp.policy

        opts["policy"] = FittedModelPolicy(on_fit)
    try:
        la = audit_logs(df, horizon=spec.horizon, n_boot=spec.n_boot, seed=spec.logs_seed,
                        eps=spec.eps, weights=spec.weights, pair=spec.pair, **opts)
    except PositivityError as exc:  # a spec judges point estimates: bounds are elsewhere
        raise PositivityError(
            f"{spec.label}: [logs] path: {exc} An audit spec has no bounds option "
            "(its thresholds judge point estimates): for bounds on this log run `causalfair "
            f"decompose --logs {shlex.quote(str(display_path(spec.logs_path)))} --on-positivity "
            "bounds`, or "
            "audit_logs(df, on_positivity=\"bounds\") in Python (docs/logs.md, "
            "\"Positivity and bounds\").") from None
    except InputError as exc:  # [engine] pair names no two of the logged groups
        if spec.pair is None or not str(exc).startswith("pair: "):
            raise
        raise SpecError(f"{spec.label}: [engine] {exc}") from None
    sha = meta = None
    if resolved:
        rp = resolved[0]
        sha, meta = rp.sha256, rp.meta
        if policy is not None:  # the report and provenance name the policy passed in
            spec = _with_policy(spec, policy, rp)
            spec = replace(spec, logs_options={
                **{k: v for k, v in spec.logs_options.items() if k != "policy"},
                **({"policy": policy} if rp.kind == "builtin" else {})})
    dec, ben = la.decomposition, la.benefit
    if dec is None or ben is None:
        raise SpecError(
            f"{spec.label}: [logs] path: the logs {spec.logs_path.name} do not identify "
            "the decomposition (positivity fails: some (group, level) never got one of the "
            "decisions); see causalfair.logs.audit_logs for bounds."
        )
    model, table = la.model, la.policy_table
    T = dec.horizon
    notions = other_notions(model, table, T, pair=dec.pair)  # the gaps of the pair C compares
    if dec.Lambda is None:
        dec = replace(dec, Lambda=ben.Lambda)
    q = _quantities(spec, dec, notions)
    if "Lambda" in q and la.lambda_estimate is not None and la.n_boot >= 2:
        # Lambda's interval: the hull of the thresholded and plug-in intervals
        # (LogAudit.lambda_interval; reports/logs_validation shows why)
        lo, hi = la.lambda_interval(spec.alpha, method="normal")
        q["Lambda"] = (q["Lambda"][0], lo, hi, q["Lambda"][3])
        dec = replace(dec, Lambda_ci=(lo, hi), Lambda_ci_level=1.0 - spec.alpha)
    mu_pi = model.propagate(table, T)
    selection = la.selection
    groups = None
    if wanted(len(dec.groups), spec.reference, spec.thresholds):  # pairs from the replicates
        try:
            groups = la.compare_groups(spec.alpha, reference=spec.reference, selection=selection)
        except InputError as exc:  # a reference that is not a group: the spec's
            raise in_spec(exc, spec.label) from None
    res = AuditResult(spec=spec, decomposition=dec, benefit=ben, notions=notions, quantities=q,
                      verdicts=name_pairs(_verdicts(spec, q, groups), dec.groups, dec.pair),
                      model=model, policy_table=table, mu_pi=mu_pi, mu_0=model.propagate(0.0, T))
    res.selection = selection
    res.group_comparison = groups
    res.checkpoint_sha256, res.checkpoint_meta = sha, meta  # a candidate checkpoint's
    res.extra["logs"] = {"rows": la.n_rows, "individuals": la.n_individuals,
                         "n_boot": la.n_boot, "seed": la.seed, "policy_source": la.policy_source,
                         "fit": la.method, "group_sizes": la.group_sizes,
                         "notes": list(la.notes)}
    if la.lambda_estimate is not None:
        res.extra["logs"]["lambda_estimator"] = la.lambda_estimate.to_dict()
    if la.binning is not None:
        res.extra["logs"]["state_binning"] = la.binning.to_dict()
    if la.dowhy is not None:
        res.extra["logs"]["dowhy"] = la.dowhy.to_dict()
    res.seconds = time.perf_counter() - t0
    return res




run_audit = audit

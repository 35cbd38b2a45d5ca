"""Retrain-on-fail for the gate: train a new policy from the spec's ``[retrain]``,
warm-started from the failing checkpoint (or, with ``[retrain] init = "scratch"``, a new
network from a random init: :func:`from_scratch`), re-audit it, and judge the repair
honestly (:func:`repair_check`: no threshold made worse, utility above a floor).

What a repair imposes while it trains is decided in one place, :func:`imposed_constraints`:
every threshold of the spec, for every algo except on the lending settings' own trainer
(docs/ci-gate.md, "Which thresholds a repair imposes"); and of which pair of groups: the
spec's ``[engine] pair`` when it names one (``TrainConfig.pair`` for a trainer, the same
keys of that pair for the exact repair), so the repair optimises the pair the gate judges;
without one, on more than two groups, the trainer starts from the pair the gate's audit of
the failing policy compared (``TrainConfig.start_pair``). The trainer's audits use the
spec's ``[benefit] bins`` and ``[engine] alpha`` and ``[retrain] eval_every`` /
``audit_n`` when given."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import atomic_write_bytes
from causalfair.audit.result import AuditResult, display_path
from causalfair.audit.run import as_spec, audit, build_system, prepare, run_prepared
from causalfair.audit.spec import AuditSpec, read_spec_file
from causalfair.engines.benefit import eps_for, model_eps
from causalfair.engines.groups import resolve_pair
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import (
    CausalfairError,
    ConfigError,
    InputError,
    OutputError,
    SpecError,
)
from causalfair.policies.checkpoint import (
    FeatureEncoding,
    load_checkpoint_for,
    read_pt,
    write_npz,
)
from causalfair.policies.grid import policy_table
from causalfair.policies.vecnormalize import sibling_stats
from causalfair.thresholds import (
    MIN_RATIO_KEYS,
    Constraint,
    constraint_key_error,
    constraints_from_thresholds,
    split_key,
)
from causalfair.train import train
from causalfair.train.algorithms import get
from causalfair.train.config import TrainConfig
from causalfair.train.exact import repair_checkpoint, tabular_model
from causalfair.train.lagrangian import check_constraints_supported

__all__ = ["retrained_checkpoint_path", "check_retrain", "repair_check", "imposed_constraints",
           "Retrained", "run_retrain", "place_retrained", "floor_utilities", "retrain_target",
           "from_scratch", "scratch_encoding"]


def retrained_checkpoint_path(checkpoint: str | os.PathLike[str], algo: str,
                              taken: Collection[Path] = ()) -> Path:
    """``NAME.retrained-<algo>-<n>.npz`` (for a ``.npz`` checkpoint) or ``.pt`` (for a
    ``.pt`` one, and for an SB3 ``.zip``, which causalfair does not write) beside
    ``checkpoint``, with the first n >= 1 not taken (no such file, and not in ``taken``:
    paths already given to other retrains of the same gate): an existing file is never
    overwritten."""
    ck = Path(checkpoint)
    suffix = ".npz" if ck.suffix.lower() == ".npz" else ".pt"
    stem = ck.name[: -len(ck.suffix)] if ck.suffix.lower() in (".pt", ".npz") else ck.stem
    n = 1
    while True:
        cand = ck.with_name(f"{stem}.retrained-{algo}-{n}{suffix}")
        if not cand.exists() and cand not in taken:
            return cand
        n += 1


def from_scratch(spec: AuditSpec) -> bool:
    """Whether the spec's ``[retrain]`` trains a new network from a random init
    (``init = "scratch"``) instead of warm-starting from its ``[policy] checkpoint``."""
    return (spec.retrain or {}).get("init") == "scratch"


def retrain_target(spec: AuditSpec, taken: Collection[Path] = ()) -> Path:
    """Where the retrained checkpoint of ``spec`` goes: beside its ``[policy] checkpoint``
    in its format (:func:`retrained_checkpoint_path`); for a policy without one (a
    factory's, a builtin, trained from scratch) beside the spec file, as
    ``SPECSTEM.retrained-ALGO-N.pt`` (the format both trainers write; a spec built in
    Python: ``NAME.retrained-ALGO-N.pt`` in its ``base_dir``), under the same
    never-overwrite rule."""
    algo = (spec.retrain or {})["algo"]
    if spec.checkpoint is not None:
        return retrained_checkpoint_path(spec.checkpoint, algo, taken)
    if spec.path is not None:
        beside = spec.path.with_name(f"{spec.path.stem}.pt")
    else:
        beside = Path(spec.base_dir or ".").resolve() / f"{spec.name}.pt"
    return retrained_checkpoint_path(beside, algo, taken)


def retrain_targets(loaded: Sequence[AuditSpec], redo: Sequence[int],
                    whole: Sequence[Any] | None = None) -> list[Path]:
    """The paths of the retrained checkpoints of ``loaded[i]`` for ``i`` in ``redo`` (the
    specs a gate retrains), chosen in the order of the gate's whole spec list ``whole``
    (default ``loaded``; the list a sharded gate is one shard of: specs or their files;
    one that does not load is its own shard's error): every spec with ``[retrain]`` takes the next free name
    beside its checkpoint (:func:`retrain_target`), whether or not it fails, so two specs
    sharing a checkpoint get -1 and -2 in list order, in one gate as in its shards (each
    shard on its own runner names its repairs as the unsharded gate does, and no two
    shards write one name)."""
    order: list[AuditSpec | None] = list(loaded)
    if whole is not None:
        order = []
        for x in whole:
            try:
                order.append(as_spec(x))
            except CausalfairError:
                order.append(None)
    def key(s: AuditSpec) -> tuple[Path | None, str]:
        return (s.path.resolve() if s.path is not None else None, s.name)

    mine = {key(s): i for i, s in enumerate(loaded)}
    wanted = set(redo)
    taken: list[Path] = []
    chosen: dict[int, Path] = {}
    for s in order:
        if s is None or s.retrain is None or "algo" not in s.retrain:
            continue
        i = mine.get(key(s))
        if i is None:  # another shard's spec: its name is reserved
            try:
                taken.append(retrain_target(s, taken))
            except (OSError, ValueError):
                pass
            continue
        taken.append(retrain_target(loaded[i], taken))
        if i in wanted:
            chosen[i] = taken[-1]
    return [chosen[i] for i in redo]


def any_retrain(specs: Sequence[Any] | None) -> bool:
    """Whether a spec of ``specs`` (the whole list of a sharded gate) has a ``[retrain]``
    section; a spec that does not read is its own shard's error, not counted here
    (``gate --retrain --shard``: a shard none of whose specs has one gates them as
    without --retrain when another spec of the list has one)."""
    for s in specs or ():
        if isinstance(s, AuditSpec):
            if s.retrain is not None:
                return True
            continue
        try:
            if "retrain" in read_spec_file(s):
                return True
        except CausalfairError:
            continue
    return False


@dataclass(frozen=True, eq=False)
class Retrained:
    """A retrain's outcome: the path its checkpoint goes to (``target``, beside the
    audited one), the re-audit of that checkpoint (``after``), and the checkpoint's bytes
    (``data``; None once :func:`place_retrained` wrote them, or when there are none to
    write). Unpacks as ``target, after``."""

    target: Path
    after: AuditResult
    data: bytes | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.target, self.after))


def place_retrained(target: Path, data: bytes) -> None:
    """Write ``data`` at ``target``, which must not exist, atomically and without ever
    replacing a file (:func:`causalfair._io.atomic_write_bytes` with ``new``): a file that
    appeared at ``target`` meanwhile, or a folder that cannot be written, is an
    :class:`OutputError`."""
    try:
        atomic_write_bytes(target, lambda fh: fh.write(data), new=True)
    except FileExistsError:
        raise OutputError(f"{display_path(target)}: appeared while retraining; not "
                          "overwritten. Run the gate again.") from None


def check_retrain(spec: AuditSpec, system: Any = None) -> None:
    """Refuse, before anything is audited, a spec that ``gate --retrain`` cannot retrain:
    no ``[retrain]``, a policy that is not a checkpoint (a builtin or a factory has no
    network to warm-start from) unless ``[retrain] init = "scratch"``, a trainer's warm
    start from a checkpoint kept with a ``vecnormalize.pkl`` (the trainer refuses it),
    ``exact`` on a system without a tabular model or with thresholds it cannot impose.
    ``system``: the spec's system when already built."""
    where = spec.label
    if spec.retrain is None:
        raise SpecError(f"{where}: [retrain]: missing; --retrain needs a [retrain] section, "
                        "e.g. algo = \"exact\" (the most profitable policy that meets "
                        "[thresholds], tabular systems) or algo = \"ppo-cb\" with betas.")
    if spec.source == "logs":
        raise SpecError(f"{where}: [retrain]: a [logs] spec audits decisions already made, which "
                        "--retrain cannot change; to repair a policy, save the model fitted "
                        "from the logs (causalfair.logs.audit_logs(...).model, "
                        "causalfair.systems.tabular_io.save_tabular) and gate a spec of the "
                        "policy on it ([system] tabular = \"fitted.npz\") with [retrain]; or "
                        "run the gate without --retrain.")
    if spec.checkpoint is None and not from_scratch(spec):
        if spec.policy_object is not None:
            holds = f"the policy object {spec.policy_object!r} passed to audit()"
            key = "[policy]"
        elif spec.policy_factory is not None:
            holds = f"a factory {spec.policy_factory!r}, whose policy is any object"
            key = "[policy] factory"
        else:
            holds = f"the builtin policy {spec.builtin!r}"
            key = "[policy] builtin"
        raise SpecError(f"{where}: {key}: --retrain warm-starts from the network in a "
                        f"[policy] checkpoint; the spec's policy is {holds}, which cannot be "
                        "retrained. Set [retrain] init = \"scratch\" to train a new network "
                        "from a random init instead (its layers from [retrain] hidden; "
                        "docs/ci-gate.md), train one yourself (causalfair train) and audit its "
                        "checkpoint, or run the gate without --retrain.")
    near = (sibling_stats(spec.checkpoint) if spec.checkpoint is not None
            and not from_scratch(spec) and spec.retrain["algo"] != "exact" else None)
    if near is not None:  # the trainer's refusal (refuse_warm_start), in the spec's words
        raise SpecError(f"{where}: [retrain]: {near} is kept with the [policy] checkpoint: "
                        "its network was trained on normalized observations and a retrain "
                        "trains on raw ones, so it cannot warm-start from it; set [retrain] "
                        "init = \"scratch\" (a new network of its own inputs), or algo = "
                        "\"exact\" on a tabular system.")
    if spec.retrain["algo"] == "exact":
        if system is None:
            system = build_system(spec)
        tabular_model(system, f"{where}: [retrain] algo", SpecError)
    if imposed_constraints(spec) and spec.retrain["algo"] != "exact":
        try:  # the trainer's own refusal, before anything is audited
            check_constraints_supported(system if system is not None else build_system(spec))
        except ConfigError as exc:
            raise SpecError(f"{where}: [retrain] algo {spec.retrain['algo']!r}: {exc}") from None


def imposed_constraints(spec: AuditSpec, before: AuditResult | None = None) -> list[Constraint]:
    """The constraints a repair of ``spec`` imposes while it trains: **every** threshold of
    the spec (one pair's ``abs_C[A-B]``, every pair's ``max_abs_C`` and ``min_ratio_V``
    included; with ``before``, the audit that failed, its ``[baseline.thresholds]`` too, as
    absolute bounds from the baseline's audited numbers: :func:`baseline_constraints`), for
    ``algo = "exact"`` (on the tabular model) and for every PPO-family algo on the generic
    trainer (PPO-Lagrangian: a multiplier per threshold on top of the algo's own penalty,
    the best passing audited iteration kept); none on the lending settings, whose trainer
    takes only its betas (the gate still judges the result). A threshold no repair can
    impose is refused, naming the key and what to use instead (SpecError)."""
    r = spec.retrain or {}
    if r.get("algo") != "exact" and spec.setting is not None and not get(r["algo"]).runs_as:
        return []
    where = spec.label
    who = ("the exact repair" if r.get("algo") == "exact"
           else f"[retrain] algo {r.get('algo')!r} (PPO-Lagrangian)")
    relative = baseline_constraints(spec, before, who)
    if not spec.thresholds:  # gated only against its baseline, or not at all:
        later = spec.baseline_thresholds and before is None  # known after its audit
        if relative or later or r.get("algo") != "exact":
            return relative  # (PPO trains on its own objective without any)
        # the exact repair with nothing to impose: refused below ("nothing to repair")
    try:
        return constraints_from_thresholds(spec.thresholds, f"{where}: [thresholds]",
                                           who) + relative
    except InputError as exc:  # a key no repair imposes, a bound that can never hold
        raise SpecError(str(exc)) from None


def baseline_constraints(spec: AuditSpec, before: AuditResult | None,
                         who: str = "the repair") -> list[Constraint]:
    """``[baseline.thresholds]`` as the absolute bounds a repair imposes: "KEY(policy) -
    KEY(baseline) <= v" is KEY <= KEY(baseline) + v (``abs_*``: |X| <= |X_baseline| + v),
    the baseline's number read from ``before``'s audit (``extra["baseline"]``; exact on a
    tabular system, else the paired run's estimate). Keys no repair imposes (utility, whose
    drop the repair's utility floor bounds; the Monte Carlo and log metrics) are left to the
    gate's re-audit. None before the audit (``before`` None)."""
    if before is None or not spec.baseline_thresholds:
        return []
    numbers = ((before.extra or {}).get("baseline") or {}).get("quantities") or {}
    out = []
    for key, thr in spec.baseline_thresholds.items():
        if key not in numbers or constraint_key_error(key) is not None:
            continue
        theirs = float(numbers[key]["baseline"])
        base = abs(theirs) if key.startswith("abs_") else theirs
        q = f"|{key[4:]}|" if key.startswith("abs_") else key
        bound = base + float(thr)
        try:
            out.append(Constraint(key, bound))
        except InputError:
            raise SpecError(f"{spec.label}: [baseline.thresholds] {key} = {thr:g}: {who} "
                            f"cannot meet it: it asks {q} <= {base:.6g} (the baseline's) "
                            f"{thr:+g} = {bound:.6g} < 0, which no policy meets; loosen the "
                            "threshold.") from None
    return out


def run_retrain(spec: AuditSpec, before: AuditResult, target: Path | None = None, *,
                place: bool = True) -> Retrained:
    """Run the spec's [retrain] warm-started from its checkpoint (``init = "scratch"``: a
    new network) and re-audit the result: the new checkpoint (in the checkpoint's own
    format; ``.pt`` without one) is built and re-audited in a temporary folder of this
    process's own, then goes to ``target`` (default: :func:`retrain_target`, the first
    free :func:`retrained_checkpoint_path`): written there now with ``place``
    (:func:`place_retrained`), else returned as bytes for the caller to write (the gate's
    driver, when this ran in a worker; docs/scale.md: only the driver writes files)."""
    system = build_system(spec)
    check_retrain(spec, system)
    r = spec.retrain
    if target is None:
        target = retrain_target(spec)
    with tempfile.TemporaryDirectory(prefix=f"causalfair-{spec.name}.retrain-") as tmp:
        built = Path(tmp) / "out" / target.name  # the name it will have: its audit names it
        built.parent.mkdir()
        if r["algo"] == "exact":
            after = _repair_exact(spec, before, system, built)
        else:
            after = _retrain_trained(spec, before, system, built, Path(tmp) / "train")
        data = built.read_bytes()
    after.spec = after.spec.with_policy(checkpoint=target)
    if place:
        place_retrained(target, data)
        return Retrained(target, after)
    return Retrained(target, after, data)


def _retrain_trained(spec: AuditSpec, before: AuditResult, system: Any, built: Path,
                     work: Path) -> AuditResult:
    """[retrain] with a trainer (every algo but ``exact``): train in ``work``, the
    checkpoint to ``built`` in the checkpoint's format, and its re-audit."""
    r = spec.retrain or {}
    scratch = from_scratch(spec)
    arch = ({k: r[k] for k in ("hidden", "activation") if k in r} if scratch
            else (before.checkpoint_meta or {}).get("architecture"))
    config = _train_config(TrainConfig, spec, r, arch, before)
    if before.benefit is not None:  # Lambda (penalty, constraint) at the gate's eps
        config = config.replace(lambda_eps=float(before.benefit.eps))
    if spec.setting is None:  # any system: the generic trainer, on the spec's own system
        config = config.replace(system=spec.system_id or "", system_params=dict(spec.system_params))
        dec = before.decomposition
        if spec.pair is None and len(system.groups) > 2 and dec is not None:
            # the pair the gate's audit compared, penalised from the first iteration (the
            # trainer's audits then pick their own, as the gate's re-audit will)
            config = config.replace(start_pair=tuple(system.groups[int(g)] for g in dec.pair))
    else:
        system = None  # the lending trainer, on config.setting
    # the kept policy is judged by the spec's own audit below, not by the trainer's own
    result = train(config, out=str(work), system=system, evaluate=False,
                   init_checkpoint=None if scratch else str(spec.checkpoint))
    produced = _train_checkpoint(result, work)
    if built.suffix == ".npz":
        _pt_to_npz(produced, built)
    else:
        built.write_bytes(produced.read_bytes())
    after = _reaudit(spec, before, built)
    if config.constraints:  # what the training imposed, and whether it met it
        check = after.extra["repair_check"]
        check["imposed"] = list(config.constraints)
        check["constraints_met"] = bool(result.metrics.get("constraints_met"))
        if not check["constraints_met"]:
            failed = result.metrics.get("constraints_failed") or ["no audited iteration"]
            check["problems"].append(
                f"{r['algo']} repair met its thresholds on none of its audited iterations "
                f"(last audit: {'; '.join(failed)}); the retrained checkpoint is its last "
                "policy")
    return after


def _reaudit(spec: AuditSpec, before: AuditResult, target: Path) -> AuditResult:
    """The spec's audit of the retrained checkpoint ``target``, with where it came from
    and the honesty check of the repair (``extra["repair_check"]``, :func:`repair_check`)."""
    after = audit(spec.with_policy(checkpoint=target))
    after.extra["retrained_from"] = {**_replaced(spec, before),
                                     "retrain": dict(spec.retrain or {})}
    after.extra["repair_check"] = repair_check(spec, before, after)
    return after


def _replaced(spec: AuditSpec, before: AuditResult) -> dict[str, Any]:
    """The policy a retrain replaces, as the new checkpoint and its audit record it: the
    checkpoint and its SHA-256; a policy without one (trained from scratch) as None and
    ``policy``, its builtin or factory."""
    out: dict[str, Any] = {"checkpoint": None if spec.checkpoint is None
                           else display_path(spec.checkpoint),
                           "sha256": before.checkpoint_sha256}
    if spec.checkpoint is None:
        out["policy"] = (spec.builtin if spec.builtin is not None else spec.policy_factory
                         or spec.policy_object)
    return out


def utility_of(result: AuditResult) -> float:
    """The audited policy's expected utility (decision-maker reward, group-weighted)."""
    return float(result.decomposition.total_utility)


def floor_utilities(spec: AuditSpec) -> dict[str, float]:
    """The utilities of the baseline policy pi0 (``never``) and of the uniform policy, each
    the number the spec's own audit of that policy reports (its engine, ``n``, ``seed``
    and pair), as ``{"baseline": u0, "uniform": uu}``. Nothing is judged (a threshold
    such as ``min_ratio_V`` has no value where pi0's mean gain is <= 0, and the floor
    needs none), and by Monte Carlo only the decomposition is run: a utility needs no
    group comparison, whose forks for Lambda of every pair are most of an audit's time on
    several groups."""
    out = {}
    for name, builtin in (("baseline", "never"), ("uniform", "uniform")):
        bare = replace(spec.with_policy(builtin=builtin), thresholds={}, baseline_thresholds={},
                       baseline_checkpoint=None, baseline_builtin=None,
                       baseline_vecnormalize=None)
        prep = prepare(bare)
        s = prep.spec
        if s.engine != "mc":  # the exact audit: cheap, and its utility is the model's
            out[name] = utility_of(run_prepared(prep))
            continue
        pair = resolve_pair(s.pair, prep.system.groups, f"{s.label}: [engine] pair")
        dec = decompose_mc(prep.system, prep.policy, s.horizon, n=s.n, seed=s.seed,
                           policy_name=prep.label, pair=pair)
        out[name] = float(dec.total_utility)
    return out


def repair_check(spec: AuditSpec, before: AuditResult, after: AuditResult,
                 floor: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Is the repair ``after`` of ``before`` honest? Two rules (docs/ci-gate.md, "An
    honest repair"):

    - no threshold gets worse: a threshold key not in ``[retrain] allow_worse`` whose
      interval after lies wholly above its interval before (for the exact engine, whose
      intervals are points: a larger value; for a ratio bounded from below,
      ``min_ratio_*``: wholly below, a smaller value) is a problem;
    - the utility after is at least ``[retrain] min_utility``; without it, at least the
      better of the baseline policy pi0 (``never``: always the baseline action) and the
      uniform policy, both audited on the spec's own system and engine (``floor``: their
      utilities, {"baseline": u0, "uniform": uu}, when already known).

    Returns utilities before and after, the floor and where it came from, and
    ``problems``: one sentence per broken rule naming the numbers (empty: honest)."""
    r = spec.retrain or {}
    allow = set(r.get("allow_worse", ()))
    u_before, u_after = utility_of(before), utility_of(after)
    out: dict[str, Any] = {"utility_before": u_before, "utility_after": u_after}
    if "min_utility" in r:
        out["min_utility"] = float(r["min_utility"])
        out["min_utility_from"] = "[retrain] min_utility"
    else:
        if floor is None:
            floor = floor_utilities(spec)
        out["baseline_utility"] = float(floor["baseline"])
        out["uniform_utility"] = float(floor["uniform"])
        best = max(("baseline", "uniform"), key=lambda k: floor[k])
        out["min_utility"] = float(floor[best])
        out["min_utility_from"] = (f"the {best} policy's utility (the better of the baseline "
                                   "policy pi0 and the uniform policy)")
    problems = []
    if u_after < out["min_utility"] and out["min_utility"] > -math.inf:
        problems.append(f"utility {u_after:.6g} after repair is below min_utility "
                        f"{out['min_utility']:.6g} ({out['min_utility_from']}; before: "
                        f"{u_before:.6g}); set [retrain] min_utility to accept it")
    old = {v.key: v for v in before.verdicts}
    worse = []
    for v in after.verdicts:
        b = old.get(v.key)
        if b is None or v.key in allow:
            continue
        if split_key(v.key)[0] in MIN_RATIO_KEYS:  # "ratio >= bound": worse is lower
            if not v.upper < b.lower - 1e-12 * max(1.0, abs(b.lower)):
                continue
        elif not v.lower > b.upper + 1e-12 * max(1.0, abs(b.upper)):
            continue
        worse.append(v.key)
        problems.append(f"{v.key} worse after repair: {b.estimate:.6g} -> {v.estimate:.6g} "
                        f"(threshold {v.threshold:g}); add \"{v.key}\" to [retrain] allow_worse "
                        "to accept it")
    out["worse"] = worse
    out["allow_worse"] = sorted(allow)
    out["problems"] = problems
    return out


def _pt_to_npz(produced: Path, out: Path) -> Path:
    """The ``.pt`` checkpoint ``produced`` (written by the trainer) as the ``.npz``
    checkpoint ``out``: the same weights and metadata, read as every checkpoint is
    (:func:`causalfair.policies.checkpoint.read_pt`)."""
    state, meta = read_pt(produced)
    write_npz(out, state, meta)
    return out


def _repair_exact(spec: AuditSpec, before: AuditResult, system: Any, built: Path) -> AuditResult:
    """The constrained exact-gradient repair (:func:`causalfair.train.exact.repair_checkpoint`):
    the checkpoint's own network (``init = "scratch"``: a new one, :func:`_scratch_network`),
    optimised on the exact engine's numbers under the spec's thresholds, saved to
    ``built``; its re-audit."""
    r = spec.retrain or {}
    where = spec.label
    T = spec.horizon or system.horizon
    constraints = _on_spec_pair(imposed_constraints(spec, before), spec, system.groups)
    pair = resolve_pair(spec.pair, system.groups, f"{where}: [engine] pair")
    start: dict[str, Any] = (_scratch_network(spec, before, system, T) if from_scratch(spec)
                             else {"init": load_checkpoint_for(spec.checkpoint, system)})
    rep = repair_checkpoint(system, T, constraints, seed=r.get("seed", 0),
                            outer=r.get("iterations", 30), n_random=r.get("starts", 12),
                            eps=model_eps(eps_for(spec.eps, system)[0], system.tabular)[0],
                            weights=spec.weights, pair=pair,
                            where=f"{where}: [retrain] algo", error=SpecError, **start)
    rep.save(built, name=built.stem, repaired_from=_replaced(spec, before))
    after = _reaudit(spec, before, built)
    summary = rep.summary()
    summary["tables"] = {"original": before.policy_table, "best found": (
        rep.result.best_found.table if rep.result.best_found is not None else None)}
    after.extra["repair"] = summary
    after.extra["repair_wall_s"] = rep.result.wall_s
    return after


def _scratch_network(spec: AuditSpec, before: AuditResult, system: Any,
                     horizon: int) -> dict[str, Any]:
    """``repair_checkpoint``'s arguments for a new network (``init = "scratch"``): its
    layers (``[retrain] hidden`` and ``activation``, else TrainConfig's 64-64 tanh), its
    inputs (:func:`scratch_encoding`) and the table of the policy it replaces (the audit's,
    else the spec's policy evaluated on the model's grid; None for a policy object passed
    to audit(), which a worker cannot rebuild)."""
    r = spec.retrain or {}
    table = before.policy_table
    if table is None and spec.policy_object is None:
        prep = prepare(spec)
        table = np.asarray(policy_table(prep.policy, system.tabular, horizon))
    return {"hidden": tuple(r.get("hidden", TrainConfig.hidden)),
            "activation": r.get("activation", TrainConfig.activation),
            "encoding": scratch_encoding(system), "original": table}


def scratch_encoding(system: Any) -> Any:
    """The inputs of a new network for the exact repair on ``system``: the one-hot
    (level, group) of a system without features (what ``causalfair train`` uses), else the
    system's feature columns by name, standardised over the cells of its tabular model
    (the grid the exact repair evaluates: mean 0 and standard deviation 1 per column, a
    constant column left unscaled)."""
    model = system.tabular
    if model.features is None:
        return FeatureEncoding("onehot", model.n_levels, model.n_groups)
    x = np.asarray(model.features, dtype=np.float64).reshape(-1, model.features.shape[-1])
    std = x.std(axis=0)
    names = tuple(system.features or (f"f{j}" for j in range(x.shape[1])))
    return FeatureEncoding("features", names=names, mean=tuple(x.mean(axis=0)),
                           std=tuple(np.where(std > 1e-8, std, 1.0)))


def _train_config(TrainConfig: Any, spec: AuditSpec, r: Mapping[str, Any],
                  arch: Mapping[str, Any] | None = None,
                  before: AuditResult | None = None) -> Any:
    """Map the spec's [retrain] (and the checkpoint's architecture, for the warm start)
    onto TrainConfig's fields (only those it has): its ``eval_every`` and ``audit_n``
    (absent: the trainer's 5, and the spec's ``[engine] n`` when thresholds are imposed);
    on the generic trainer the spec's ``[benefit] bins`` and ``[engine] alpha`` for its
    audits."""
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

    runs_as = get(r["algo"]).runs_as
    if runs_as:  # ppo-lag: PPO-Lagrangian alone, the multipliers in place of any beta
        cand["algo"] = cand["algorithm"] = runs_as
        cand["beta_c"] = cand["beta_lambda"] = 0.0
    imposed = imposed_constraints(spec, before)
    if imposed:  # every threshold, on top of the algo's own penalty
        cand["constraints"] = tuple(k.text for k in imposed)
        cand["audit_n"] = spec.n
    cand["audit_n"] = r.get("audit_n", cand.get("audit_n"))  # [retrain] audit_n first
    cand["eval_every"] = r.get("eval_every")
    if spec.setting is None:  # the generic trainer's audits measure what the gate's does
        cand["audit_bins"], cand["audit_alpha"] = spec.benefit_bins, spec.alpha
    cand["pair"] = spec.pair  # the pair the gate judges is the pair the repair optimises
    for k, v in cand.items():
        if k in names and v is not None:
            kw[k] = v
    for bk, v in r["betas"].items():
        for fname in (f"beta_{bk}", f"beta_{bk.lower()}"):
            if fname in names:
                kw[fname] = v
                break
        else:
            raise SpecError(f"{spec.label}: [retrain] betas {bk}: the trainer has no "
                            f"field beta_{bk}.")
    return TrainConfig(**kw)


def _on_spec_pair(constraints: list[Constraint], spec: AuditSpec,
                  groups: Any) -> list[Constraint]:
    """``constraints`` with each key of the audit's own pair (``abs_C``, ``Lambda``, ...)
    as the same key of the spec's ``[engine] pair`` (``abs_C[B-A]``), so that the exact
    repair, whose plain keys are its engine's default pair, meets the pair the gate
    judges; unchanged without a pair."""
    ab = resolve_pair(spec.pair, groups, f"{spec.label}: [engine] pair")
    if ab is None:
        return constraints
    name = f"{groups[ab[0]]}-{groups[ab[1]]}"
    return [Constraint(f"{k.key}[{name}]", k.bound) if k.pair is None and not k.every_pair
            else k for k in constraints]


def _train_checkpoint(result: Any, out: Path) -> Path:
    for attr in ("checkpoint", "checkpoint_path", "path"):
        p = getattr(result, attr, None)
        if p is not None and Path(p).is_file():
            return Path(p)
    found = sorted(out.rglob("*.pt"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise RuntimeError(f"retraining wrote no checkpoint under {out}.")
    return found[-1]



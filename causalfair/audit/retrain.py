"""Retrain-on-fail for the gate: train a new policy from the spec's ``[retrain]``,
warm-started from the failing checkpoint, and re-audit it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causalfair.audit.result import AuditResult, _display_path
from causalfair.audit.run import audit
from causalfair.audit.spec import AuditSpec, _where
from causalfair.errors import SpecError
from causalfair.policies.checkpoint import NumpyMLPPolicy, load_checkpoint_for, save_checkpoint
from causalfair.train import train
from causalfair.train.config import TrainConfig
from causalfair.train.repair import constraints_from_thresholds, repair_network

__all__ = ["retrained_checkpoint_path"]


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


def _retrain(spec: AuditSpec, before: AuditResult) -> tuple[Path, AuditResult]:
    """Run the spec's [retrain] warm-started from its checkpoint; return the new
    checkpoint path and its audit."""
    if spec.retrain is None:
        raise SpecError(f"{_where(spec.path)}: [retrain]: missing; --retrain needs a [retrain] "
                        "section (algo, iterations, betas, seed).")
    if spec.checkpoint is None:
        raise SpecError(f"{_where(spec.path)}: [policy] checkpoint: --retrain needs a checkpoint "
                        f"to warm-start from; the spec audits builtin {spec.builtin!r}.")

    r = spec.retrain
    if r["algo"] == "exact":
        return _repair_exact(spec, before)
    target = retrained_checkpoint_path(spec.checkpoint, r["algo"])
    config = _train_config(TrainConfig, spec, r, (before.checkpoint_meta or {}).get("architecture"))
    import tempfile

    system = None
    if spec.setting is None:  # any system: the generic trainer, on the spec's own system
        from causalfair.audit.run import build_system

        system = build_system(spec)
        config = config.replace(system=spec.system_id or "", system_params=dict(spec.system_params))
    with tempfile.TemporaryDirectory(prefix=f".{spec.name}.retrain-", dir=target.parent) as tmp:
        result = train(config, out=tmp, init_checkpoint=str(spec.checkpoint), system=system)
        _place_new(_train_checkpoint(result, Path(tmp)), target)
    after = audit(spec.with_policy(checkpoint=target))
    after.extra["retrained_from"] = {"checkpoint": _display_path(spec.checkpoint),
                                     "sha256": before.checkpoint_sha256, "retrain": dict(r)}
    return target, after


def _place_new(produced: Path, target: Path) -> None:
    """Copy ``produced`` to ``target``, which must not exist: an existing file is never
    overwritten (O_EXCL fails if it appeared meanwhile)."""
    data = produced.read_bytes()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _repair_exact(spec: AuditSpec, before: AuditResult) -> tuple[Path, AuditResult]:
    """The constrained exact-gradient repair (:mod:`causalfair.train.repair`): the checkpoint's
    own network, optimised on the exact engine's numbers under the spec's thresholds."""
    from causalfair.audit.run import build_system

    r = spec.retrain or {}
    system = build_system(spec)
    model = getattr(system, "tabular", None)
    if model is None:
        raise SpecError(f"{_where(spec.path)}: [retrain] algo: 'exact' needs a system with a "
                        f"tabular model; {system.id!r} has none. Use a sampled algo such as "
                        "'ppo-cb'.")
    constraints = constraints_from_thresholds(spec.thresholds, f"{_where(spec.path)}: [thresholds]")
    pol, meta = load_checkpoint_for(spec.checkpoint, system)
    net = pol.to_torch() if isinstance(pol, NumpyMLPPolicy) else pol.module
    result = repair_network(model, spec.horizon, net, pol.encoding, constraints, eps=spec.eps,
                            weights=spec.weights, seed=r.get("seed", 0),
                            outer=r.get("iterations", 30), n_random=r.get("starts", 12))
    target = retrained_checkpoint_path(spec.checkpoint, "exact")
    summary = result.to_dict()
    summary.pop("attempts")
    wall = summary.pop("wall_s")  # files stay bit-for-bit reproducible; the gate prints it
    info = {"name": target.stem, "repair": summary,
            "repaired_from": {"checkpoint": _display_path(spec.checkpoint),
                              "sha256": before.checkpoint_sha256}}
    import tempfile

    with tempfile.TemporaryDirectory(prefix=f".{spec.name}.repair-", dir=target.parent) as tmp:
        produced = Path(tmp) / target.name
        save_checkpoint(produced, result.module, architecture=meta["architecture"],
                        encoding=pol.encoding, metadata=info)
        _place_new(produced, target)
    after = audit(spec.with_policy(checkpoint=target))
    after.extra["retrained_from"] = {"checkpoint": _display_path(spec.checkpoint),
                                     "sha256": before.checkpoint_sha256, "retrain": dict(r)}
    summary["tables"] = {"original": before.policy_table, "best found": (
        result.best_found.table if result.best_found is not None else None)}
    after.extra["repair"] = summary
    after.extra["repair_wall_s"] = wall
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
    if r["algo"] == "ppo-lag":  # PPO-Lagrangian: the thresholds are the constraints
        cand["algo"] = cand["algorithm"] = "ppo-c"
        cand["constraints"] = tuple(f"{k}<={v!r}" for k, v in spec.thresholds.items())
        cand["audit_n"] = spec.n
    for k, v in cand.items():
        if k in names and v is not None:
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



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
    from causalfair.train import train
    from causalfair.train.config import TrainConfig

    r = spec.retrain
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



"""What :func:`causalfair.train.train` returns: the trained policy, its checkpoint, the
per-iteration history and the final exact audit (method.md section 5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causalfair.train.config import TrainConfig

__all__ = ["TrainResult"]


@dataclass
class TrainResult:
    """What :func:`causalfair.train.train` returns."""

    policy: Any  # TorchPolicy
    checkpoint: Path | None
    history: Any  # pandas DataFrame, one row per iteration
    metrics: dict[str, Any]  # the final exact audit (C, DPE, IPE, SPE, Lambda, ...)
    config: TrainConfig
    table: Any = None  # pi(d1 | x, s) as a (G, K) array
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # one line (the dataclass default prints the whole history DataFrame)
        rows = 0 if self.history is None else len(self.history)
        shown = ", ".join(f"{k}={self.metrics[k]:.6g}" for k in ("C", "Lambda", "utility")
                          if isinstance(self.metrics.get(k), (int, float)))
        return (f"TrainResult(algo={getattr(self.config, 'algo', None)!r}, "
                f"iterations={rows}, checkpoint={None if self.checkpoint is None else str(self.checkpoint)!r}"
                + (f", {shown}" if shown else "") + f", wall_s={self.wall_s:.3g})")

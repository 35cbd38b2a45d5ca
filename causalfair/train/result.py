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
    #: pandas DataFrame, one row per iteration; given the trainer's rows (a list of dicts),
    #: it is made from them when first read (a training worker never imports pandas)
    history: Any
    metrics: dict[str, Any]  # the final exact audit (C, DPE, IPE, SPE, Lambda, ...)
    config: TrainConfig
    table: Any = None  # pi(d1 | x, s) as a (G, K) array
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # one line (the dataclass default prints the whole history DataFrame)
        rows = 0 if self.__dict__["_history"] is None else len(self.__dict__["_history"])
        shown = ", ".join(f"{k}={self.metrics[k]:.6g}" for k in ("C", "Lambda", "utility")
                          if isinstance(self.metrics.get(k), (int, float)))
        return (f"TrainResult(algo={getattr(self.config, 'algo', None)!r}, "
                f"iterations={rows}, checkpoint={None if self.checkpoint is None else str(self.checkpoint)!r}"
                + (f", {shown}" if shown else "") + f", wall_s={self.wall_s:.3g})")

    def history_rows(self) -> list[dict[str, Any]] | Any:
        """The history as the trainer gave it: its rows (a list of dicts) while
        :attr:`history` has not been read, else the DataFrame."""
        return self.__dict__["_history"]


def _history(self: TrainResult) -> Any:
    h = self.__dict__["_history"]
    if isinstance(h, list):
        import pandas as pd

        h = self.__dict__["_history"] = pd.DataFrame(h)
    return h


def _set_history(self: TrainResult, value: Any) -> None:
    self.__dict__["_history"] = value


TrainResult.history = property(_history, _set_history,  # type: ignore[assignment]
                               doc="The per-iteration history, a pandas DataFrame.")

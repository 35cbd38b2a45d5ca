"""Verdicts: a threshold "quantity <= value" judged on an estimate and its interval
(PASS / FAIL / INCONCLUSIVE by the CI rule of :mod:`causalfair.thresholds`), and the
overall verdict of several."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from causalfair.thresholds import FAIL, INCONCLUSIVE, PASS, abs_interval, judge

__all__ = ["PASS", "FAIL", "INCONCLUSIVE", "abs_interval", "judge", "overall_verdict", "Verdict"]

# the CI rule lives in causalfair.thresholds (its one home); re-exported here


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



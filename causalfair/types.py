"""What flows between the layers (a leaf module: numpy only): the observation a policy
sees and the result of one simulator step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalfair.errors import PolicyError, SimulatorContractError, as_numbers, short

__all__ = ["Observation", "StepResult", "check_probs", "check_rows", "ROW_TOL"]


@dataclass(frozen=True)
class Observation:
    """A batch of observations of ``n`` individuals.

    ``level``: int array (n,) of 0-based levels, or None for simulators without levels.
    ``group``: int array (n,) of group indices.
    ``features``: float array (n, F) or None (continuous simulators).
    ``t``: the decision epoch, or None when the policy is evaluated for all epochs.
    ``extras``: further named arrays (n, ...) a simulator exposes (history, etc.).
    """

    group: np.ndarray
    level: np.ndarray | None = None
    features: np.ndarray | None = None
    t: int | None = None
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(np.shape(self.group)[0])


@dataclass(frozen=True)
class StepResult:
    """What one step returns for a batch of n individuals."""

    state: Any
    reward: np.ndarray  # (n,)
    gain: np.ndarray  # (n,)
    info: Mapping[str, np.ndarray] = field(default_factory=dict)


def check_batch_size(obs: Observation, n: int, where: str) -> None:
    """Refuse observations of another number of units than the batch of ``n`` whose policy
    ``where`` answers them: the simulator's state changed size (a step or an observe that
    adds or drops units), not the policy's doing."""
    if len(obs) != n:
        raise SimulatorContractError(
            f"simulator: its observe gave {len(obs)} observations for a batch of {n} units "
            f"(read by {where}): reset(n, ...) gives n units and every step keeps them, so "
            "StepResult.state and observe(state) must hold the same units as the input state.")


def check_probs(p: Any, n: int, where: str, obs: Observation | None = None, *,
                rows: bool = False) -> np.ndarray:
    """``p`` as a float64 array of ``n`` probabilities, or PolicyError naming ``where`` and
    the first bad entry: its index in ``p`` (a table's cell), or with ``obs`` (the
    observations ``p`` answers) the group, level and epoch it answers. A torch tensor is
    read as its values (:func:`as_numbers`). None, complex numbers and, for one P(d1) per
    observation, a shape other than (n,) or (n, 1) are refused. ``rows``: ``p`` holds rows
    of action probabilities (:func:`check_rows`; the hint names a softmax)."""
    if obs is not None and not rows:
        check_batch_size(obs, n, where)
    p = as_numbers(p)
    if p is None:
        raise PolicyError(f"{where}: returned None, not probabilities (a function without a "
                          f"return?); return one P(d1) per observation, an array of shape ({n},).")
    if holds_complex(p):
        first = np.asarray(p, dtype=complex).reshape(-1)[:1]
        raise PolicyError(f"{where}: returned complex numbers (e.g. {complex(first[0])!r}), whose "
                          "imaginary part a probability cannot have; return real "
                          f"probabilities in [0, 1]" + ("." if rows else
                                                         f", an array of shape ({n},)."))
    try:
        arr = np.asarray(p, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise PolicyError(f"{where}: returned {type(p).__name__} {short(p, 40)}, not numbers; "
                          f"return one P(d1) per observation, an array of shape ({n},).") from None
    shape = np.shape(p)
    if obs is not None and n == len(obs) and len(shape) >= 2 and shape != (n, 1) \
            and arr.shape[0] == n:
        raise PolicyError(f"{where}: returned shape {shape} for {n} observations; return one "
                          f"P(d1) per observation, an array of shape ({n},) (one row per "
                          "observation: (n,) or (n, 1)).")
    if arr.shape[0] != n and np.ndim(p) == 2 and np.shape(p)[0] == n:
        raise PolicyError(f"{where}: returned shape {np.shape(p)}, {np.shape(p)[1]} columns per "
                          f"observation; a two-action policy returns one P(d1) per observation, "
                          f"shape ({n},): e.g. column 1 of predict_proba's (n, 2) or the 0/1 "
                          "decision of a cut-off (rows of action probabilities come from an "
                          "action_probs(obs) method).")
    if arr.shape[0] != n:
        raise PolicyError(f"{where}: returned {arr.shape[0]} probabilities for {n} observations; "
                          f"return one P(d1) per observation, an array of shape ({n},) (a "
                          "constant: np.full(len(obs), p)).")
    if arr.size and not (arr.min() >= 0.0 and arr.max() <= 1.0):  # a NaN fails it too
        if not np.isfinite(arr).all():
            i = int(np.argmin(np.isfinite(arr)))
            raise PolicyError(f"{where}: returned NaN or inf probabilities ({float(arr[i])} at "
                              f"{_index(p, i, obs)}); every entry must be a probability in "
                              "[0, 1].")
        i = int(np.argmax((arr < 0) | (arr > 1)))
        raise PolicyError(
            f"{where}: returned a value outside [0, 1] ({arr[i]:.6g} at {_index(p, i, obs)}); "
            + ("rows must be action probabilities, e.g. apply a softmax to logits." if rows
               else "a policy must return P(d1), e.g. apply a sigmoid to logits."))
    return arr


def holds_complex(p: Any) -> bool:
    """Whether ``p`` holds complex numbers (which a float cast would drop the imaginary
    part of, with only a warning)."""
    try:
        return bool(np.iscomplexobj(p)) or (
            isinstance(p, (list, tuple)) and any(isinstance(v, complex) for v in p))
    except (TypeError, ValueError):
        return False


#: How far from 1 a row of action probabilities may sum (a float32 softmax's rounding):
#: rows within it are renormalised, others refused (:func:`check_rows`).
ROW_TOL = 1e-6


def check_rows(p: Any, where: str, error: type[Exception] = PolicyError,
               obs: Observation | None = None) -> np.ndarray:
    """``p`` (..., A) as rows of action probabilities (float64): refused with a NaN, inf or
    entry outside [0, 1] (:func:`check_probs`, naming the cell) or a row summing to more
    than :data:`ROW_TOL` away from 1 (naming the row); rows off by more than 1e-12 are
    renormalised (exact distributions). The one check of action distributions, from a
    policy's ``action_probs`` or a table."""
    arr = check_probs(p, int(np.size(p)), where, obs, rows=True).reshape(np.shape(p))
    off = np.abs(arr.sum(-1) - 1.0)
    if off.size and off.max() > ROW_TOL:
        row = tuple(int(i) for i in np.unravel_index(int(np.argmax(off)), off.shape))
        at = f"row {row[0] if len(row) == 1 else row}" if obs is None else \
            f"the row of {_index(off, int(np.argmax(off)), obs)}"
        raise error(f"{where}: rows must be probabilities summing to 1 over the "
                    f"{arr.shape[-1]} actions; {at} sums to "
                    f"{float(arr[row].sum())!r} (more than {ROW_TOL:g} from 1); normalise "
                    "it (x / x.sum(-1, keepdims=True)) or apply a softmax to logits.")
    if off.size and off.max() > 1e-12:
        arr = arr / arr.sum(-1, keepdims=True)
    return arr


def _index(p: Any, i: int, obs: Observation | None = None) -> str:
    """Where entry ``i`` of the flattened ``p`` is: its index in ``p`` (a table's cell), or
    with ``obs`` (one row of ``p`` per observation) the group, level and epoch of its row."""
    shape = np.shape(p)
    idx = tuple(int(j) for j in np.unravel_index(i, shape)) if len(shape) > 1 else (i,)
    if obs is None or not 0 <= idx[0] < len(obs):
        return f"index {idx if len(idx) > 1 else idx[0]}"
    r = idx[0]
    level = "" if obs.level is None else f", level {int(np.asarray(obs.level)[r])}"
    return (f"group {int(np.asarray(obs.group)[r])}{level}"
            + ("" if obs.t is None else f", t {obs.t}")
            + ("" if len(idx) == 1 else f", action {idx[1]}"))

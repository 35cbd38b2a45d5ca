"""Run folders: audit checkpoints, resume state and metric logs, all written atomically.

A run folder ``OUT`` holds:

- ``checkpoint.pt``: the latest policy in the format the audit loads
  (:func:`causalfair.policies.core.save_checkpoint`; ``causalfair decompose --checkpoint``);
  metadata: algorithm, config, setting, seed, iteration, env_steps, metrics (the last
  exact audit), name;
- ``state.pt``: everything ``--resume`` needs (both networks, Adam state, beta_KL, numpy
  and torch RNG states, the population environments, the history), loaded with
  ``weights_only=True``;
- ``metrics.jsonl``: one JSON object per iteration (appended as the run goes; rewritten
  from the resume state on resume), and ``metrics.csv`` (the same rows, at every checkpoint);
- ``config.json``: the TrainConfig;
- ``.causalfair-run``: the mark of a folder causalfair made (:func:`prepare_run_folder`), the
  only non-empty folder it writes into.

Order of writes at a checkpoint: ``state.pt`` first, then ``checkpoint.pt``, each through
a temporary file and ``os.replace``; a run killed at any moment leaves a loadable pair.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from causalfair._io import atomic_write_bytes, check_output_file
from causalfair._safe_read import check_zip_sizes, read_json
from causalfair.errors import OutputError, first_line
from causalfair.policies.core import CheckpointError, save_checkpoint

__all__ = [
    "CHECKPOINT_NAME",
    "STATE_NAME",
    "checkpoint_due",
    "write_checkpoint",
    "read_state",
    "append_jsonl",
    "write_metrics",
    "last_metrics",
    "metrics_csv",
    "RUN_MARK",
    "RUN_OUTPUTS",
    "prepare_run_folder",
]

CHECKPOINT_NAME = "checkpoint.pt"
STATE_NAME = "state.pt"
#: The mark of a run folder causalfair made (it may write there again).
RUN_MARK = ".causalfair-run"


#: The files a run writes into its folder, whichever trainer (the lending and generic
#: trainers, the exact repair, the population agents): a new run in a folder of an earlier
#: one removes that run's (:func:`prepare_run_folder`), so the folder never mixes two runs
#: (a repair's checkpoint beside another run's config.json and state.pt).
RUN_OUTPUTS = ("checkpoint.pt", "checkpoint.npz", STATE_NAME, "metrics.jsonl", "metrics.csv",
               "config.json", "repair.json")


def prepare_run_folder(out: Path, resume: bool) -> None:
    """Create the run folder, or reuse one causalfair made (it holds :data:`RUN_MARK`);
    a file, or a non-empty folder of the user's, raises OutputError untouched. A new run
    (``resume`` False) in a folder of an earlier run removes that run's
    :data:`RUN_OUTPUTS`, and nothing else."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: is a file, not a run folder; choose another --out.")
    ours = (out / RUN_MARK).exists() or (resume and (out / STATE_NAME).exists())
    if out.is_dir() and any(out.iterdir()) and not ours:
        raise OutputError(
            f"{out}: is an existing folder causalfair did not write (no {RUN_MARK}); choose "
            "another --out (causalfair never writes into a folder of yours).")
    check_output_file(out / RUN_MARK)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / RUN_MARK).touch()
        if not resume:  # the earlier run's files: none may stand beside this run's
            for name in RUN_OUTPUTS:
                if (out / name).is_file():
                    (out / name).unlink()
    except OSError as exc:
        raise OutputError(f"{out}: cannot write here ({exc.strerror}); choose another --out.") from None


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def last_metrics(history: list[dict[str, Any]]) -> dict[str, Any]:
    """The most recent exact audit (``exact/*`` keys) in a history, without the prefix."""
    for row in reversed(history):
        ex = {k[6:]: _finite(v) for k, v in row.items() if k.startswith("exact/")}
        if ex:
            ex["iteration"] = row["iteration"]
            return ex
    return {}


def checkpoint_due(iteration: int, config: Any) -> bool:
    """Whether a run writes its checkpoint after ``iteration`` (counted from 1): every
    ``config.checkpoint_every`` iterations and after the last (``config.iterations``); the
    one rule of the lending and the generic trainer."""
    return iteration % config.checkpoint_every == 0 or iteration == config.iterations


def write_checkpoint(out: str | os.PathLike[str], trainer: Any) -> Path:
    """Write ``state.pt`` then ``checkpoint.pt`` into ``out``; return the checkpoint path."""
    import torch

    out = Path(out)
    state = trainer.state_dict()

    def dump(fh: Any) -> None:
        buf = io.BytesIO()
        torch.save(state, buf)
        fh.write(buf.getvalue())

    atomic_write_bytes(out / STATE_NAME, dump)
    c = trainer.config
    meta = {
        "algorithm": c.algo,
        "config": c.to_dict(),
        "setting": c.setting,
        "seed": c.seed,
        "iteration": trainer.iteration,
        "env_steps": trainer.env_steps,
        "metrics": last_metrics(trainer.history),
        "name": c.name or f"{c.algo}-{c.setting}-seed{c.seed}",
        "horizon": c.horizon,
    }
    path = out / CHECKPOINT_NAME
    save_checkpoint(path, trainer.policy_net, architecture=trainer.architecture(),
                    encoding=trainer.encoding, metadata=meta)
    return path


def read_state(out: str | os.PathLike[str]) -> dict[str, Any]:
    """Load ``OUT/state.pt`` (weights_only=True)."""
    import torch

    path = Path(out) / STATE_NAME
    if not path.is_file():
        raise CheckpointError(
            f"resume: {path} does not exist; start the run without --resume (or point "
            "--out at the folder of the run to continue)."
        )
    check_zip_sizes(path, f"resume: {path}", CheckpointError)  # before torch inflates it
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot resume"
        raise CheckpointError(f"resume: cannot load {path} ({type(exc).__name__}: "
                              f"{first_line(str(exc))[:200] if str(exc) else ''}).") from None
    _check_state(state, path)
    return state


#: What ``Trainer.state_dict`` writes into ``state.pt``: its top-level keys, and those of
#: its ``json`` block.
_STATE_KEYS = ("policy", "value", "optimizer", "torch_rng", "json")
_STATE_JSON_KEYS = ("config", "iteration", "env_steps", "beta_kl", "rng", "rollout", "history")


def _check_state(state: Any, path: Path) -> None:
    """Refuse a ``state.pt`` that is not the resume state of a lending training run (a
    ``checkpoint.pt`` renamed, a state of another causalfair version), naming the first
    missing key: ``--resume`` would otherwise fail on it half-way through loading."""
    fix = ("it is not the resume state of a `causalfair train` run of this causalfair "
           "version; start a new run folder (or resume with the causalfair that wrote it).")
    if not isinstance(state, dict):
        raise CheckpointError(f"resume: {path}: holds a {type(state).__name__}, not the "
                              f"trainer's state; {fix}")
    missing = [k for k in _STATE_KEYS if k not in state]
    if not missing:
        try:  # untrusted text: read within the limits of every JSON causalfair reads
            meta = (read_json(state["json"], f"resume: {path}: json", CheckpointError)
                    if isinstance(state["json"], str) else None)
        except CheckpointError:
            meta = None
        missing = (["json"] if not isinstance(meta, dict)
                   else [f"json.{k}" for k in _STATE_JSON_KEYS if k not in meta])
        if not missing and not isinstance(meta["config"], dict):
            missing = ["json.config"]
    if missing:
        raise CheckpointError(f"resume: {path}: {missing[0]} is missing or malformed; {fix}")


def append_jsonl(path: str | os.PathLike[str], row: dict[str, Any]) -> None:
    """Append one row to a JSONL log (flushed; NaN written as null)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({k: _finite(v) for k, v in row.items()}) + "\n")
        fh.flush()


def write_metrics(out: str | os.PathLike[str], history: list[dict[str, Any]]) -> None:
    """Rewrite ``metrics.jsonl`` and ``metrics.csv`` (:func:`metrics_csv`) from a history,
    atomically."""
    out = Path(out)
    text = "".join(json.dumps({k: _finite(v) for k, v in r.items()}) + "\n" for r in history)
    atomic_write_bytes(out / "metrics.jsonl", lambda fh: fh.write(text.encode()))
    csv = metrics_csv(history)
    atomic_write_bytes(out / "metrics.csv", lambda fh: fh.write(csv.encode()))


_MISSING = object()  # a row without the column's key


def _csv_kind(values: list[Any]) -> str | None:
    """The dtype pandas gives a column of these cells, when :func:`metrics_csv` writes it
    the same way: ``bool``; ``object`` (booleans with a gap); ``int64``; ``float64`` (numbers
    with a float or a gap); None for any other column (pandas writes it)."""
    present = [v for v in values if v is not _MISSING]
    gaps = len(present) < len(values)
    if all(type(v) is bool for v in present):
        return "object" if gaps else "bool"
    if any(type(v) not in (int, float, np.float64) or (type(v) is int and not
                                                       -2**63 <= v < 2**63) for v in present):
        return None  # booleans among numbers, None, strings, other numpy scalars, huge ints
    return "int64" if not gaps and all(type(v) is int for v in present) else "float64"


def _csv_cell(v: Any, kind: str) -> str:
    if v is _MISSING:
        return ""
    if kind != "float64":
        return str(v)
    f = float(v)
    return "" if f != f else repr(f)  # numpy's float64 -> str is Python's shortest repr


def metrics_csv(history: list[dict[str, Any]]) -> str:
    """The rows of ``history`` as CSV text, byte for byte what
    ``pandas.DataFrame(history).to_csv(index=False)`` writes: columns in the order their
    keys first appear, an absent or NaN cell empty, a column of integers with a gap or a
    float written as floats (pandas' float64 column), booleans as True/False. Rows of
    ints, floats and booleans (what the trainers log) are written here, so a training
    run never imports pandas; any other cell (a string, None, a numpy scalar other than
    float64) goes to pandas itself."""
    import csv

    columns = list(dict.fromkeys(k for row in history for k in row))
    cols = [[row.get(c, _MISSING) for row in history] for c in columns]
    kinds = [_csv_kind(v) for v in cols]
    if not columns or any(not row for row in history) or None in kinds:
        import pandas as pd

        return pd.DataFrame(history).to_csv(index=False)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_csv_cell(v, kind) for v, kind in zip(cells, kinds, strict=True)]
                     for cells in zip(*cols, strict=True))
    return buf.getvalue()

"""Load an audit spec's checkpoint in a second interpreter while this one does the rest.

A cold ``causalfair audit`` spends most of its time importing: torch (about 0.9 s here,
needed only because checkpoints are read with ``torch.load(..., weights_only=True)``)
and the report's libraries (matplotlib, scipy, pandas, networkx: about 0.9 s together).
The audit itself needs from the checkpoint only the policy evaluated on every (group,
level), a few hundred numbers. So the CLI starts a second interpreter at once
(:meth:`CheckpointPrefetch.start`; by hand: ``python -m causalfair._prefetch JOB``),
which imports torch, loads and validates the checkpoint exactly as
:func:`causalfair.policy.load_checkpoint` does, tabulates it with
:func:`causalfair.policy.policy_table` and writes the table (``.npz``, no pickle) to
stdout; meanwhile the CLI imports the report's libraries and solves the frontier LP. On
two cores the two halves overlap.

The prefetch only ever speeds things up, it never changes a result or an error:

- the child runs the same functions on the same inputs, so the table is the same array
  (bit for bit; the tests compare the CLI's audit.json with an in-process audit);
- any failure in the child (a missing or unsafe checkpoint, a wrong input width, a crash)
  makes :meth:`CheckpointPrefetch.result` return ``None`` and the caller loads the
  checkpoint itself, raising the usual error;
- the parent hashes the checkpoint file itself and uses the child's table only when the
  child hashed the same bytes before loading them.

Set ``CAUSALFAIR_SERIAL=1`` to load in-process (one core, or to debug); it also turns off
the CLI's forked figure drawing (:func:`causalfair.cli.report_jobs`).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CheckpointPrefetch", "PrefetchedCheckpoint", "ENV_DISABLE"]

#: Environment variable that keeps the CLI in one process (no prefetch, no forked
#: drawing; any non-empty value but "0").
ENV_DISABLE = "CAUSALFAIR_SERIAL"


@dataclass(frozen=True)
class PrefetchedCheckpoint:
    """What the audit needs from a checkpoint: the tabulated policy and its provenance."""

    path: Path
    sha256: str
    table: np.ndarray
    name: str
    meta: dict[str, Any]


def _job(spec: Any) -> dict[str, Any] | None:
    """The child's arguments, or None when the spec has no checkpoint to prefetch."""
    if getattr(spec, "source", None) != "model" or getattr(spec, "checkpoint", None) is None:
        return None
    return {"checkpoint": str(spec.checkpoint), "setting": spec.setting,
            "levels": int(spec.levels), "interest": float(spec.interest),
            "horizon": int(spec.horizon)}


def enabled() -> bool:
    return os.environ.get(ENV_DISABLE, "") in ("", "0")


class CheckpointPrefetch:
    """Start loading ``spec``'s checkpoint in a child interpreter (see the module doc).

    ``CheckpointPrefetch.start(spec)`` returns None when there is nothing to prefetch
    (built-in policy, logs source, prefetch disabled) or the child cannot be started.
    """

    def __init__(self, job: dict[str, Any], proc: subprocess.Popen[bytes]) -> None:
        self._job = job
        self._proc = proc
        self._result: PrefetchedCheckpoint | None = None
        self._done = False

    @classmethod
    def start(cls, spec: Any) -> CheckpointPrefetch | None:
        job = _job(spec)
        if job is None or not enabled():
            return None
        # The child imports this very causalfair (not whatever the working directory
        # would put first on sys.path).
        root = str(Path(__file__).resolve().parent.parent)
        code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "from causalfair._prefetch import run_child; run_child(sys.argv[2:])")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", code, root, json.dumps(job)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return None
        return cls(job, proc)

    def result(self) -> PrefetchedCheckpoint | None:
        """Wait for the child; the prefetched checkpoint, or None if anything went wrong
        (the caller then loads the checkpoint in-process and reports the error)."""
        if self._done:
            return self._result
        self._done = True
        try:
            out, _ = self._proc.communicate()
        except BaseException:
            self.close()
            raise
        if self._proc.returncode != 0:
            return None
        try:
            with np.load(io.BytesIO(out), allow_pickle=False) as z:
                table = np.array(z["table"], dtype=np.float64)
                info = json.loads(str(z["info"]))
        except (ValueError, KeyError, OSError):
            return None
        from causalfair.policy import file_sha256

        path = Path(self._job["checkpoint"])
        try:
            if info.get("sha256") != file_sha256(path):
                return None  # the file changed after the child read it
        except OSError:
            return None
        table.setflags(write=False)
        self._result = PrefetchedCheckpoint(path=path, sha256=info["sha256"], table=table,
                                            name=info["name"], meta=info["meta"])
        return self._result

    def close(self) -> None:
        """Stop the child if it is still running (on an interrupt or an early error)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None and not self._proc.stdout.closed:
            self._proc.stdout.close()
        self._done = True


def _child(job: dict[str, Any]) -> bytes:
    from causalfair.policy import file_sha256, load_checkpoint, policy_table
    from causalfair.sim.lending import lending_setting

    model = lending_setting(job["setting"], n_levels=job["levels"],
                            interest=job["interest"]).tabular
    path = Path(job["checkpoint"])
    sha = file_sha256(path)
    pol, meta = load_checkpoint(path, model)
    table = policy_table(pol, model, job["horizon"])
    info = {"sha256": sha, "name": path.name, "meta": meta}
    buf = io.BytesIO()
    np.savez(buf, table=np.asarray(table, dtype=np.float64), info=np.array(json.dumps(info)))
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m causalfair._prefetch JOB_JSON (internal to causalfair audit)",
              file=sys.stderr)
        return 2
    try:
        payload = _child(json.loads(args[0]))
    except Exception as exc:  # noqa: BLE001 - the parent reloads in-process and reports it
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(payload)
    sys.stdout.buffer.flush()
    return 0


def run_child(argv: list[str] | None = None) -> None:
    """:func:`main`, then exit at once: the interpreter's teardown (unloading torch takes
    ~0.2 s) is skipped; there is nothing to clean up (the payload is flushed)."""
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run_child()

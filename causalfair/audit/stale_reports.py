"""The report folders ``causalfair gate --reports DIR`` wrote, recorded in ``DIR`` so that a
later gate in the same workspace (a Jenkins or GitLab shell runner reuses it) removes the
folders of specs it no longer gates: a CI artefact never shows the report of a spec that
was removed, or renamed, as this run's.

Only what the gate wrote goes: a folder is removed when the record (:data:`INDEX`, written
by the gate) names it and it still holds causalfair's manifest
(:data:`causalfair._io.MANIFEST`, which every report folder holds); a user's folder or
file, and a report written by ``causalfair audit --out DIR/NAME``, are never touched. The
specs of a gate's whole list count as gated (its shards, in one folder, keep each other's
reports), so a reports folder belongs to one gate: give two gates two folders.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from causalfair._io import MANIFEST, atomic_write_bytes, foreign_entries
from causalfair.audit.gate import spec_file_name
from causalfair.audit.spec import is_valid_name
from causalfair.errors import OutputError

__all__ = ["INDEX", "gated_names", "sweep_reports"]

#: The record, in the reports folder, of the report folders a gate wrote there.
INDEX = ".causalfair-gate-reports.json"
_KIND = "gate-reports"


def gated_names(specs: Sequence[str | os.PathLike[str]]) -> set[str]:
    """The ``name`` of each spec file of a gate's list (read as the gate reads it; a file
    that does not read as a spec with a valid name has none: a report of it is stale)."""
    return {n for n in map(spec_file_name, specs) if n is not None}


def sweep_reports(reports: str | os.PathLike[str], gated: Iterable[str],
                  mine: Iterable[str]) -> list[Path]:
    """In the reports folder ``reports``: remove each report folder an earlier gate
    recorded there whose name is not in ``gated`` (the names of the gate's whole spec
    list) and that still holds causalfair's manifest, then record those of ``mine`` (the
    names this run writes) that are report folders (hold the manifest) beside those that
    stay; no record is written into a folder that has none while there is nothing to
    record (a refused gate leaves nothing in a folder of yours). Called before a gate
    audits and again once it is done (a folder written meanwhile gets its record). Nothing
    is done while ``reports`` is not a folder; shards of one gate sharing it take turns (a lock on it).
    Returns the folders removed."""
    import fcntl

    folder = Path(reports)
    if folder.is_symlink() or not folder.is_dir():
        return []
    gated, removed = set(gated), []
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # unreadable: the gate's own writes there say why
        return []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        kept = set()
        for name in _recorded(folder):
            target = folder / name
            if name in gated:
                kept.add(name)
            elif (not target.is_symlink() and target.is_dir()
                  and (target / MANIFEST).is_file() and not foreign_entries(target)):
                shutil.rmtree(target, ignore_errors=True)
                if target.exists():  # could not go (permissions): tried again next time
                    kept.add(name)
                else:
                    removed.append(target)
        # a name of this run is recorded once its folder is a report (a refused or
        # interrupted run, or a user's folder of that name, records nothing)
        ours = {n for n in mine if not (folder / n).is_symlink()
                and (folder / n / MANIFEST).is_file()}
        names = sorted(kept | ours)
        doc = {"written_by": "causalfair", "kind": _KIND, "reports": names}
        data = (json.dumps(doc, indent=1) + "\n").encode("utf-8")
        try:
            if names or (folder / INDEX).is_file():
                atomic_write_bytes(folder / INDEX, lambda fh: fh.write(data))
        except (OSError, OutputError):  # a read-only folder: its reports fail to write with their own error
            pass
    finally:
        os.close(fd)
    return removed


def _recorded(folder: Path) -> list[str]:
    """The folder names the record in ``folder`` lists (none when it is missing, or is
    not a record causalfair wrote)."""
    path = folder / INDEX
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 24:
            return []
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable: not a record of ours
        return []
    if not (isinstance(doc, dict) and doc.get("written_by") == "causalfair"
            and doc.get("kind") == _KIND and isinstance(doc.get("reports"), list)):
        return []
    return [n for n in doc["reports"] if is_valid_name(n)]  # a plain name: never a path

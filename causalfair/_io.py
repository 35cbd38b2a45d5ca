"""Atomic file writes: a reader never sees a half-written file, and causalfair never
replaces what it did not write.

- :func:`atomic_write_bytes` writes one file through a temporary file and a rename.
- :func:`write_folder` writes a whole output folder (a report) the same way. The folder
  holds a manifest, :data:`MANIFEST`; an existing folder is replaced only when it has
  one (causalfair wrote it), never a user's folder or file. Writers of the same folder
  take turns (a lock on the parent folder), and temporary folders left by a killed
  process are removed by the next write beside them.
- Every failure to write an output raises :class:`~causalfair.errors.OutputError`
  (one line, exit code 2 on the command line).
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from causalfair._version import __version__
from causalfair.errors import InputError, OutputError, unicode_text

__all__ = ["escape_chars", "csv_text", "fixed", "as_given", "beside", "atomic_write_bytes", "atomic_write_text", "write_folder",
           "check_output_file", "check_output_folder", "output_path", "check_distinct_outputs",
           "MANIFEST", "foreign_entries", "to_jsonable", "versioned", "check_document", "DOCUMENT_KINDS",
           "AUDIT_SCHEMA_VERSION", "DECOMPOSE_SCHEMA_VERSION",
           "FRONTIER_SCHEMA_VERSION", "SYSTEMS_SCHEMA_VERSION", "TRAIN_SCHEMA_VERSION",
           "REPAIR_SCHEMA_VERSION", "N_COUNTS", "sample_size", "sample_size_of"]

#: The file marking a folder causalfair wrote (and may therefore replace).
MANIFEST = ".causalfair-report.json"


def _default_mode() -> int:
    """0o666 less the process umask: what ``open(path, "w")`` would have given
    (``mkstemp`` creates 0o600 files, which would hide reports from other users)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _dir_mode() -> int:
    """0o777 less the process umask: what ``mkdir`` would have given."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


def atomic_write_bytes(path: str | os.PathLike[str], writer: Callable[[Any], None], *,
                       new: bool = False) -> Path:
    """Call ``writer(fh)`` on a binary temporary file in the same folder as ``path``, then
    rename it over ``path``. On any error (or interrupt) the temporary file is removed
    and ``path`` is left as it was. ``new``: ``path`` must not exist, and a file that
    appears there meanwhile is never replaced (:class:`FileExistsError`): the temporary
    file is hard-linked to ``path`` (renamed, where the filesystem has no hard links)."""
    target = check_output_file(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_files(target.parent, target.name)
        # the pid in the name: a killed writer's file is known as such (and removed) later
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}_", suffix=".tmp",
                                   dir=target.parent)
    except OSError as exc:
        raise _output_error(target, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            writer(fh)
        os.chmod(tmp, _default_mode())
        if new:
            _link_new(tmp, target)
        else:
            os.replace(tmp, target)
    except FileExistsError:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise _output_error(target, exc) from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target


def _remove_stale_files(parent: Path, name: str) -> None:
    """Remove ``.NAME.PID_*.tmp`` files beside ``NAME`` whose process is gone: the
    half-written temporary file of a writer killed outright (SIGKILL, the OOM killer),
    which no handler could remove."""
    pat = re.compile(rf"\.{re.escape(name)}\.(\d+)_\w+\.tmp")
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        m = pat.fullmatch(entry.name)
        if m and entry.is_file(follow_symlinks=False) and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def _link_new(tmp: str, target: Path) -> None:
    """Give the file ``tmp`` the name ``target``, which must not exist
    (:class:`FileExistsError`, ``tmp`` kept for the caller to remove)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:  # no hard links on this filesystem
        if os.path.lexists(target):
            raise FileExistsError(target) from None
        os.replace(tmp, target)
    else:
        os.unlink(tmp)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


#: Version of the audit.json format (docs/schema/audit.schema.json; CHANGELOG.md), also
#: ``causalfair.audit.result.AUDIT_SCHEMA_VERSION``: the minor number grows when keys
#: are added, the major when a key changes or goes.
AUDIT_SCHEMA_VERSION = "1.0"
#: The format of the JSON ``causalfair decompose --json`` prints, from a system or from a
#: decision log (docs/schema/decompose.schema.json; changes are listed in CHANGELOG.md).
DECOMPOSE_SCHEMA_VERSION = "1.0"
#: The format of ``frontier.json`` that ``causalfair frontier`` writes
#: (docs/schema/frontier.schema.json).
FRONTIER_SCHEMA_VERSION = "1.1"
#: The format of ``causalfair systems --json`` (the registry list, or one system's
#: description with ID; docs/schema/systems.schema.json).
SYSTEMS_SCHEMA_VERSION = "1.0"
#: The format of ``causalfair train --json``, one shape per trainer of
#: :mod:`causalfair.train.algorithms` (docs/schema/train.schema.json).
TRAIN_SCHEMA_VERSION = "1.0"
#: The format of ``repair.json`` that ``causalfair train --algo exact`` writes
#: (docs/schema/repair.schema.json).
REPAIR_SCHEMA_VERSION = "1.0"


def versioned(version: str, doc: Any) -> dict[str, Any]:
    """The JSON document ``doc`` (a mapping) with ``schema_version`` = ``version`` as its
    first key (``"MAJOR.MINOR"``, docs/schema/README.md): how a document causalfair writes
    names its format."""
    return {"schema_version": version, **{k: v for k, v in doc.items() if k != "schema_version"}}


#: The documents causalfair writes, told apart by keys only that kind has at its top
#: level: kind -> (keys, the command that writes it).
DOCUMENT_KINDS: dict[str, tuple[frozenset[str], str]] = {
    "audit.json": (frozenset({"decomposition", "quantities"}), "causalfair audit --out DIR"),
    "gate summary": (frozenset({"specs", "exit_code"}), "causalfair gate --json FILE"),
    "decomposition": (frozenset({"C", "DPE", "IPE", "SPE"}), "causalfair decompose --json"),
    "frontier.json": (frozenset({"constraint", "eps_min", "points"}), "causalfair frontier"),
    "training result": (frozenset({"trainer", "algo", "checkpoint"}), "causalfair train --json"),
    "repair.json": (frozenset({"constraints", "passed", "lp_bound"}),
                    "causalfair train --algo exact"),
    "systems list": (frozenset({"systems"}), "causalfair systems --json"),
}


def check_document(doc: Any, where: str, kind: str, current: str, redo: str, *,
                   absent: str | None = None) -> str:
    """The ``schema_version`` of ``doc``, a parsed causalfair document of ``kind`` (a key of
    :data:`DOCUMENT_KINDS`) read from ``where``, whose format this causalfair writes at
    version ``current``; else one :class:`~causalfair.errors.InputError` line naming
    ``where``: ``doc`` is not a JSON object, is another kind of causalfair document, or
    has another major version (docs/schema/README.md: a ``MAJOR.MINOR`` of the same major
    is read, the keys a newer minor added being ignored; a newer major needs a newer
    causalfair, an older or malformed one ``redo``, the command that writes the document
    again). ``absent``: the version of a document without ``schema_version`` (None:
    refused). The one check of every reader of causalfair's own JSON documents."""
    import re

    if not isinstance(doc, dict):
        shown = {list: "a JSON list", str: "a JSON string"}.get(type(doc), "a JSON value")
        raise InputError(f"{where}: is {shown}, not {_a(kind)} (a JSON object written by "
                         f"`{DOCUMENT_KINDS[kind][1]}`).")
    for other, (keys, writer) in DOCUMENT_KINDS.items():
        if other != kind and keys <= doc.keys() and not DOCUMENT_KINDS[kind][0] <= doc.keys():
            raise InputError(f"{where}: is {_a(other)} (written by `{writer}`), not {_a(kind)}; "
                             f"give {_a(kind)} (written by `{DOCUMENT_KINDS[kind][1]}`).")
    version = doc.get("schema_version", absent)
    major = current.split(".")[0]
    found = re.fullmatch(r"([0-9]{1,9})\.[0-9]{1,9}", version) if isinstance(version, str) else None
    if found and found.group(1) == major:
        return version
    newer = found is not None and int(found.group(1)) > int(major)
    fix = ("written by a newer causalfair: upgrade causalfair (`pip install -U causalfair`) to "
           "read it" if newer else f"write it again with this causalfair (`{redo}`)")
    shown = repr(version) if not isinstance(version, str) or len(version) <= 20 else \
        repr(version[:20]) + "..."
    raise InputError(f"{where}: schema_version: must be {major}.x, got {shown} (causalfair "
                     f"{__version__} reads the {kind} format {major}.x and writes {current}); {fix}.")


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def to_jsonable(x: Any) -> Any:
    """``x`` with numpy arrays and scalars, paths and tuples turned into JSON types
    (non-finite floats become None, lone surrogates in text their escape:
    :func:`unicode_text`)."""
    import math
    from collections.abc import Mapping
    from pathlib import Path

    import numpy as np

    if isinstance(x, Mapping):
        return {unicode_text(str(k)): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (str, Path)):
        return unicode_text(str(x))
    return x


def _output_error(path: Path, exc: OSError) -> OutputError:
    reason = exc.strerror or type(exc).__name__
    return OutputError(f"{path}: cannot write here ({reason}); choose another output path.")


def _file_ancestor(path: Path) -> Path | None:
    """The first existing ancestor of ``path`` that is a file (so nothing can go below)."""
    for parent in path.parents:
        if parent.exists():
            return parent if not parent.is_dir() else None
    return None


def output_path(path: Any) -> Path:
    """``path`` (a str or an os.PathLike) as a Path, else an InputError naming it: what
    every writer (:func:`check_output_file`, :func:`write_folder`) reads its path with."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise InputError(f"path: expected a file or folder path (a str or a pathlib.Path), "
                         f"got {type(path).__name__} {str(path)[:40]!r}.")
    return Path(path)


def check_output_file(path: str | os.PathLike[str],
                      inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """``path`` as a Path if a file can be written there, else :class:`OutputError`; also
    refused when it is one of ``inputs`` (the files the command reads)."""
    target = output_path(path)
    for src in inputs:
        if target.exists() and Path(src).exists() and os.path.samefile(target, src):
            raise OutputError(f"{target}: is also an input of this command ({src}); causalfair "
                              "never writes over its input. Choose another output path.")
    if target.is_dir():
        raise OutputError(f"{target}: is a folder; give a file name (e.g. "
                          f"{target / ('out' + target.suffix)}).")
    blocker = _file_ancestor(target)
    if blocker is not None:
        raise OutputError(f"{target}: cannot write below {blocker}, which is a file; choose "
                          "another output path.")
    return target


def check_distinct_outputs(outputs: Mapping[str, str | os.PathLike[str] | None]) -> None:
    """Refuse two output options (``{"--json": path, "--junit": path}``) naming the same
    file: the second write would replace the first (a JUnit file holding JSON)."""
    seen: dict[str, str] = {}
    for flag, path in outputs.items():
        if path is None or str(path) == "-":
            continue
        key = os.path.normcase(os.path.realpath(path))
        if key in seen:
            raise OutputError(f"{flag}: {path} is also the file of {seen[key]}; give each output "
                              "its own file.")
        seen[key] = flag


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(parent: Path, name: str) -> None:
    """Remove ``.NAME.tmp-PID-*`` / ``.NAME.old-PID-*`` folders whose process is gone."""
    import re
    import shutil

    pat = re.compile(rf"^\.{re.escape(name)}\.(tmp|old)-(\d+)-")
    for entry in parent.iterdir():
        m = pat.match(entry.name)
        if m and entry.is_dir() and not _pid_alive(int(m.group(2))):
            shutil.rmtree(entry, ignore_errors=True)


def write_folder(path: str | os.PathLike[str], fill: Callable[[Path], None], *,
                 kind: str = "report") -> Path:
    """Create (or replace) the output folder ``path`` atomically: ``fill(tmp)`` writes the
    files into a temporary folder beside it, a manifest listing them is added, and the
    folder is renamed into place. An existing ``path`` is replaced only if it is a folder
    causalfair wrote (it holds :data:`MANIFEST`); a file, or a folder of the user's,
    raises :class:`OutputError` and is left untouched."""
    import fcntl
    import json
    import shutil

    target = output_path(path)
    _check_replaceable(target)
    blocker = _file_ancestor(target)
    if blocker is not None:
        raise OutputError(f"{target}: cannot write below {blocker}, which is a file; choose "
                          "another --out.")
    parent = target.resolve().parent
    # this thread's temporary folders: an interrupt that lands before mkdtemp's result is
    # bound still finds (and removes) the folder it made
    prefix = f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}-"
    try:
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _remove_stale(parent, target.name)
            tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        except OSError as exc:
            raise _output_error(target, exc) from None
        os.chmod(tmp, _dir_mode())  # mkdtemp gives 0o700; a report is for reviewers
        fill(tmp)
        files = sorted(p.name for p in tmp.iterdir())
        (tmp / MANIFEST).write_text(json.dumps(
            {"written_by": "causalfair", "kind": kind, "files": files}, indent=1) + "\n",
            encoding="utf-8")
        lock = os.open(parent, os.O_RDONLY)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent writers of this parent take turns
            _check_replaceable(target)  # a user's folder may have appeared meanwhile
            if target.exists():
                old = parent / f".{target.name}.old-{os.getpid()}-{tmp.name[-8:]}"
                os.rename(target, old)
                try:
                    os.rename(tmp, target)
                except BaseException:  # an error or an interrupt: the old folder goes back
                    os.rename(old, target)
                    raise
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, target)
        finally:
            os.close(lock)
    except OutputError:  # already says why (not wrapped again as "cannot write (OutputError)")
        _discard(parent, prefix)
        raise
    except OSError as exc:
        _discard(parent, prefix)
        raise _output_error(target, exc) from None
    except BaseException:
        _discard(parent, prefix)
        raise
    return target


def _discard(parent: Path, prefix: str) -> None:
    """Remove the temporary folders named ``prefix...`` in ``parent`` (one thread's)."""
    import glob
    import shutil

    for entry in parent.glob(glob.escape(prefix) + "*"):
        shutil.rmtree(entry, ignore_errors=True)


def foreign_entries(folder: str | os.PathLike[str]) -> list[str]:
    """The entries of the output folder ``folder`` (one holding :data:`MANIFEST`) that its
    manifest does not list: files a user added after causalfair wrote it (notes beside a
    report), which replacing or removing the folder would lose. All of them when the
    manifest cannot be read."""
    import json

    folder = Path(folder)
    names = sorted(p.name for p in folder.iterdir() if p.name != MANIFEST)
    try:
        if (folder / MANIFEST).stat().st_size > 1 << 20:  # (a manifest is a few hundred bytes)
            return names
        listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
        listed = {x for x in listed if isinstance(x, str)}
    except (OSError, ValueError, KeyError, TypeError):
        return names
    return [n for n in names if n not in listed]


def _check_replaceable(target: Path, flag: str = "--out") -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise OutputError(f"{target}: exists and is not a folder causalfair wrote; causalfair "
                          f"never replaces it. Choose another {flag} or remove it yourself.")
    if target.is_dir() and not (target / MANIFEST).is_file():
        if any(target.iterdir()):
            raise OutputError(
                f"{target}: is an existing folder causalfair did not write (no {MANIFEST}); "
                f"causalfair never replaces it. Choose another {flag} or remove it yourself.")
    if target.is_dir() and (foreign := foreign_entries(target)):
        raise OutputError(
            f"{target}: holds {foreign[0]!r}, which causalfair did not write there (its "
            f"{MANIFEST} does not list it); causalfair never replaces the folder: move the "
            f"file out, or choose another {flag}.")


def check_output_folder(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """``path`` as a Path if :func:`write_folder` may write the folder there (it is absent,
    empty or a folder causalfair wrote, below no file), else :class:`OutputError` naming
    the option ``flag`` (``--reports``) and writing nothing: the check a command makes
    before it runs."""
    target = Path(path)
    blocker = _file_ancestor(target)
    if blocker is not None:
        raise OutputError(f"{target}: cannot write below {blocker}, which is a file; choose "
                          f"another {flag}.")
    _check_replaceable(target, flag)
    return target


def causalfair_dir() -> Path:
    """``.causalfair/`` under the working directory, for reports and logs; it gets a
    ``.gitignore`` of ``*`` when causalfair creates it, so they never dirty a repository."""
    base = Path(".causalfair")
    if not base.exists():
        atomic_write_text(base / ".gitignore", "# written by causalfair: reports are not sources\n*\n")
    return base


def escape_chars(pattern: Any, text: str) -> str:
    """``text`` with every character ``pattern`` (a compiled regex of single characters)
    matches written as its Python escape, ``\\xNN`` below U+0100, else ``\\uNNNN`` (a
    control character or lone surrogate in a spec's file name, shown in JUnit XML or a
    job log instead of breaking it)."""
    return pattern.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                  else f"\\u{ord(m.group()):04x}"), text)


def csv_text(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows and never evaluates: a leading
    apostrophe before a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return (a group named ``=HYPERLINK(...)`` in a decision log; OWASP's "CSV
    injection"), unless the cell is a plain number (``-1``). Every text cell causalfair
    writes to a CSV file of its own goes through it (ll144.csv, a sweep's runs.csv and
    table.csv)."""
    if text[:1] in ("=", "+", "-", "@", "\t", "\r") and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def fixed(x: float, digits: int = 6, *, sign: bool = False, width: int = 0) -> str:
    """How the text outputs print a number: ``digits`` decimals (``sign``: a leading + on
    non-negative values; ``width``: right-aligned), and never a negative zero: a value
    that rounds to zero, such as rounding noise of -4.4e-16, prints as 0.000000 (+0.000000
    with ``sign``; Python's "z" format option), as the report and its sentences print it."""
    return format(float(x), f"{'+' if sign else ''}z{width or ''}.{digits}f")


#: What a Monte Carlo decomposition's ``n`` counts (``Decomposition.n_counts``, ``n_counts``
#: in its JSON): units of each group (independent units), or worlds of coupled units
#: (``System.units_per_replica`` > 1), each holding units of every group.
N_COUNTS = ("units_per_group", "worlds")


def sample_size(n: int, n_counts: str = "units_per_group", units_per_world: int | None = None,
                group_units: Mapping[str, int] | None = None, *, simulated: bool = False) -> str:
    """What ``n`` of a Monte Carlo decomposition is, as the text outputs print it after
    "n = ": "200 per group" (units of each group), "200 worlds of 6 units (2 per group)"
    (coupled units; the units of each group in every world when they are the same in all
    worlds, "(A: 15, B: 19)" when the groups' differ), "200 worlds of 6 units" when not
    known by group, "200 worlds" when the world's size is not known either. ``simulated``: "200 simulated
    units per group", "200 simulated worlds of ..." (the report's words)."""
    sim = "simulated " * simulated
    if n_counts != "worlds":
        return f"{n} {sim}units per group" if simulated else f"{n} per group"
    if not units_per_world:
        return f"{n} {sim}worlds"
    text = f"{n} {sim}worlds of {units_per_world} unit{'s' * (units_per_world != 1)}"
    sizes = sorted(set((group_units or {}).values()))
    if len(sizes) == 1:
        return f"{text} ({sizes[0]} per group)"
    if sizes:
        return f"{text} ({', '.join(f'{g}: {k}' for g, k in group_units.items())})"
    return text


def sample_size_of(dec: Mapping[str, Any], system: Mapping[str, Any] | None = None,
                   n: Any = None, *, simulated: bool = False) -> str | None:
    """:func:`sample_size` of a decomposition's JSON (``Decomposition.to_dict``: ``n``,
    ``n_counts``, ``units_per_world``, ``group_units_per_world``), or of ``n`` when it has
    none; None without either. A document written before ``n_counts`` was recorded reads
    as worlds when its ``system`` (audit.json's) has ``units_per_replica`` > 1."""
    n = dec.get("n", n)
    if n is None:
        return None
    upr = (system or {}).get("units_per_replica")
    counts = dec.get("n_counts") or ("worlds" if isinstance(upr, int) and upr > 1
                                     else "units_per_group")
    return sample_size(n, counts, dec.get("units_per_world") or (upr if counts == "worlds"
                                                                  else None),
                       dec.get("group_units_per_world"), simulated=simulated)


def as_given(x: float) -> str:
    """A threshold as the spec gives it: ``:g`` (``0.05``, ``4e-05``) where that reads back
    as the same number, else the shortest text that does (``0.1234567``, which ``:g``
    would print as 0.123457)."""
    short = format(float(x), "g")
    return short if float(short) == float(x) else repr(float(x))


def beside(x: float, ref: float, digits: int = 4, *, significant: bool = False) -> str:
    """``x`` with ``digits`` decimals (:func:`fixed`; ``significant``: ``digits``
    significant figures, ``:g``), or as many more as it takes to print it on the same side
    of ``ref`` (a threshold) as it is: a value just above its threshold never prints equal
    to it, or below it."""
    x, ref = float(x), float(ref)
    side = (x > ref) - (x < ref)
    for d in range(digits, 18):
        text = format(x, f".{d}g") if significant else fixed(x, d)
        shown = float(text)
        if (shown > ref) - (shown < ref) == side:
            return text
    return repr(x)

"""Bounded reading of files causalfair did not write (docs/limits.md, "Memory and sizes").

Every reader here learns the size of what it is about to build from what the file
declares - a zip archive's entry count and members' sizes, a ``.npy`` header's shape and
dtype, a JSON text's length and nesting depth - and refuses a file over the limit
*before* inflating or allocating it, with one line naming the file, the member or field,
the size and the limit (and the variable that raises it):

- :func:`read_file`: a regular file's bytes, its size checked before it is read (a FIFO,
  a device or a folder refused, never waited on);
- :func:`read_json` / :func:`read_json_file`: JSON bounded by length (about
  :data:`JSON_BYTES_FACTOR` bytes of memory per byte of text, plus every container) against
  ``CAUSALFAIR_MAX_MEMORY`` and by nesting depth (:data:`MAX_JSON_DEPTH`), both measured by
  a vectorised scan before ``json.loads``;
- :func:`open_zip` / :func:`read_member`: an archive with at most :data:`MAX_ZIP_MEMBERS`
  entries (counted in its end record, whose directory size, at most
  :data:`MAX_ZIP_DIRECTORY` bytes, bounds what is parsed; counted again once parsed), a member
  read by streamed decompression that stops at a cap;
- :func:`read_npz`: ``.npz`` arrays whose ``.npy`` headers (shape, dtype) are read first,
  object arrays (pickle) refused, their declared bytes checked against the memory limit
  and against what the member actually holds, and only then read.

Malformed input raises the caller's error class (a :class:`~causalfair.errors.CausalfairError`
subclass, e.g. ``ModelError`` or ``CheckpointError``); input over a limit raises
:class:`~causalfair.errors.ResourceLimitError`.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zipfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from causalfair._limits import check_memory, format_bytes
from causalfair.errors import CausalfairError, ResourceLimitError

__all__ = ["MAX_JSON_DEPTH", "JSON_BYTES_FACTOR", "MAX_ZIP_MEMBERS", "MAX_ZIP_DIRECTORY",
           "json_shape", "read_json", "read_json_file", "read_option_value", "read_toml",
           "TOML_BYTES_FACTOR", "NOT_REGULAR", "not_a_file", "read_file", "open_zip",
           "check_zip_sizes", "read_member", "read_npz"]

#: Deepest JSON nesting accepted (causalfair's own files nest at most 5 deep; Python's
#: parser fails with a RecursionError near 1,000).
MAX_JSON_DEPTH = 100
#: Memory per byte of JSON text assumed when parsing it (Python floats, lists and the
#: decoded text), in addition to 64 bytes per list or object.
JSON_BYTES_FACTOR = 10
_CONTAINER_BYTES = 64
#: Most entries a zip archive (``.npz``, stable-baselines3 ``.zip``) may hold.
MAX_ZIP_MEMBERS = 4096
#: Largest central directory (bytes) an archive may declare: 512 bytes per entry allowed
#: (an entry takes 46 bytes plus its name; causalfair's and torch's names are short). It
#: bounds what is parsed when the end record understates the entry count, which
#: ``zipfile`` does not use.
MAX_ZIP_DIRECTORY = 512 * MAX_ZIP_MEMBERS
_MAX_NPY_HEADER = 10_000  # numpy's own default cap on a .npy header
_SCAN_CHUNK = 1 << 20

ErrorType = type[CausalfairError]

# bracket steps: +1 for [ {, -1 for ] }, 0 otherwise
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


# ------------------------------------------------------------------------------ JSON
def json_shape(data: bytes, stop_at: int = MAX_JSON_DEPTH) -> tuple[int, int]:
    """(deepest nesting, number of lists and objects) of the JSON text ``data``, counting
    brackets outside strings (a quote after an odd run of backslashes is escaped).

    Vectorised over 1 MiB chunks; stops early once the depth exceeds ``stop_at``. On text
    that is not valid JSON the counts agree with the parser up to its first error, which
    is where the parser stops, so a depth the parser would reach is always seen here.
    """
    b = np.frombuffer(data, dtype=np.uint8)
    depth = deepest = containers = 0
    in_string = 0  # parity of the real quotes seen so far
    bs_carry = 0  # backslashes ending the previous chunk
    for start in range(0, len(b), _SCAN_CHUNK):
        c = b[start:start + _SCAN_CHUNK]
        n = len(c)
        bs = c == 92
        qpos = np.flatnonzero(c == 34)
        if qpos.size and (bs_carry or bs.any()):
            last_plain = np.maximum.accumulate(np.where(bs, -1, np.arange(n)))
            prev = qpos - 1
            lp = np.where(prev >= 0, last_plain[np.maximum(prev, 0)], -1)
            run = prev - lp + np.where(lp == -1, bs_carry, 0)
            qpos = qpos[run % 2 == 0]
        bpos = np.flatnonzero(_STEP[c])
        if bpos.size:
            steps = _STEP[c[bpos]].astype(np.int64)
            inside = (np.searchsorted(qpos, bpos) + in_string) % 2 == 1
            steps[inside] = 0
            level = depth + np.cumsum(steps)
            deepest = max(deepest, int(level.max()))
            containers += int((steps > 0).sum())
            depth = int(level[-1])
            if deepest > stop_at:
                break
        in_string = (in_string + len(qpos)) % 2
        tail = n - 1 - (int(np.flatnonzero(~bs)[-1]) if (~bs).any() else -1)
        bs_carry = tail + (bs_carry if tail == n else 0)
    return deepest, containers


def read_json(data: bytes | str, where: str, error: ErrorType, *, fix: str = "") -> Any:
    """Parse untrusted JSON ``data`` after checking its memory (length and containers,
    against ``CAUSALFAIR_MAX_MEMORY``) and nesting depth (:data:`MAX_JSON_DEPTH`).
    ``where`` starts every message (e.g. ``"tabular model m.json"``)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    _check_json_length(len(raw), where, fix)
    containers = _check_depth(raw, where, error)
    check_memory(JSON_BYTES_FACTOR * len(raw) + _CONTAINER_BYTES * containers,
                 f"{where}: {format_bytes(len(raw))} of JSON with {containers} lists and objects",
                 fix or "use a smaller file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start}); save the file as UTF-8.") from None
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or an integer over Python's 4300 digits
        raise error(f"{where}: not valid JSON ({str(exc)[:120]}).") from None
    except RecursionError:  # pragma: no cover - the depth scan refuses first
        raise error(f"{where}: JSON nested too deep to parse.") from None


def _check_depth(raw: bytes, where: str, error: ErrorType, kind: str = "JSON") -> int:
    """Refuse JSON (or TOML) nested over :data:`MAX_JSON_DEPTH`; its number of containers."""
    deepest, containers = json_shape(raw)
    if deepest > MAX_JSON_DEPTH:
        raise error(f"{where}: {kind} nested more than {MAX_JSON_DEPTH} deep (a fixed limit; "
                    "causalfair's files nest at most 5 deep); refused before parsing.")
    return containers


def read_option_value(text: str, where: str, error: ErrorType) -> Any:
    """The value ``V`` of a ``K=V`` command-line option (``--param``, ``--set``): JSON
    where it parses (nesting bounded by :data:`MAX_JSON_DEPTH`), else the text itself."""
    _check_depth(text.encode("utf-8", "surrogatepass"), where, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
    except ValueError:  # an integer over Python's 4300 digits
        raise error(f"{where}: bad value {text[:20]!r}... ({len(text)} characters); give a "
                    "number of at most 4300 digits.") from None


#: Memory per byte of a TOML file assumed when parsing it (an audit spec), checked from
#: the file's size before it is read.
TOML_BYTES_FACTOR = 20
#: Most parts a dotted TOML key or table header may have (``a.b.c`` has 3).
MAX_TOML_KEY_PARTS = 100
_DOTTED = re.compile(r"(?<![\w\"'-])(?:[\w\"'-]++[ \t]*+\.[ \t]*+)"
                     f"{{{MAX_TOML_KEY_PARTS}}}")


def read_toml(data: bytes, where: str, error: ErrorType) -> dict[str, Any]:
    """Parse untrusted TOML ``data`` (a UTF-8 byte-order mark is skipped) after bounding
    its nesting: arrays and inline tables at most :data:`MAX_JSON_DEPTH` deep and dotted
    keys of at most :data:`MAX_TOML_KEY_PARTS` parts (the parser's memory grows with their
    square)."""
    import tomllib

    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start}: "
                    f"{data[exc.start:exc.start + 1]!r}); save the spec as UTF-8.") from None
    _check_depth(data, where, error, "TOML")
    if _DOTTED.search(text):
        raise error(f"{where}: a dotted key or table name has more than {MAX_TOML_KEY_PARTS} "
                    "parts (a fixed limit); refused before parsing.")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: not valid TOML ({exc}).") from None
    except (ValueError, RecursionError):  # an integer over Python's 4300 digits
        raise error(f"{where}: not valid TOML (a number of more than 4300 digits, or nesting "
                    "too deep to parse).") from None


def _check_json_length(n: int, where: str, fix: str) -> None:
    check_memory(JSON_BYTES_FACTOR * n,
                 f"{where}: {format_bytes(n)} of JSON (about {JSON_BYTES_FACTOR} bytes of memory "
                 "per byte)", fix or "use a smaller file")


def read_json_file(path: str | os.PathLike[str], where: str, error: ErrorType, *,
                   fix: str = "") -> Any:
    """:func:`read_json` of a file, its length checked from the file system before it is
    read (:func:`read_file`)."""
    raw = read_file(path, where, error, check=lambda n: _check_json_length(n, where, fix))
    return read_json(raw, where, error, fix=fix)


#: What every reader says of an input path that exists but is not a regular file.
NOT_REGULAR = "is not a regular file (a device, a FIFO or a socket)"


def not_a_file(path: str | os.PathLike[str]) -> str:
    """Why ``path``, which is no regular file, cannot be read, in the words every reader of an
    input file uses: "no such file", "is a folder", or :data:`NOT_REGULAR` (a FIFO or a
    device exists: "no such file" would be false)."""
    if os.path.isdir(path):
        return "is a folder"
    return NOT_REGULAR if os.path.exists(path) else "no such file"  # (a dangling link: none)


def read_file(path: str | os.PathLike[str], where: str, error: ErrorType, *,
              check: Callable[[int], None] | None = None) -> bytes:
    """The bytes of the regular file at ``path``: opened without waiting (a FIFO is never
    waited on) and refused unless it is a regular file (a device such as /dev/zero would
    never end), ``check(size)`` called with its size before it is read, and at most that
    size read (a file that grows meanwhile is read as it was). ``error`` names ``where``
    for a file that cannot be opened or read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise error(f"{where}: cannot be read ({exc.strerror or type(exc).__name__}).") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{where}: " + ("is not a regular file (a folder)"
                                        if stat.S_ISDIR(info.st_mode) else NOT_REGULAR)
                        + "; give the file itself.")
        if check is not None:
            check(info.st_size)
        chunks, left = [], info.st_size
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 24))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{where}: cannot be read ({exc.strerror or type(exc).__name__}).") from None
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------- zip
def open_zip(src: str | os.PathLike[str] | IO[bytes], where: str, error: ErrorType
             ) -> zipfile.ZipFile:
    """The zip archive at ``src`` (a path or a seekable binary file), after checking from
    its end record (before the central directory is parsed) that it holds at most
    :data:`MAX_ZIP_MEMBERS` entries."""
    try:
        if hasattr(src, "read"):
            end = zipfile._EndRecData(src)  # type: ignore[attr-defined]
        else:
            with open(src, "rb") as fh:
                end = zipfile._EndRecData(fh)  # type: ignore[attr-defined]
        if end is None:
            raise error(f"{where}: not a zip archive (no end-of-archive record).")
        entries = int(end[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]
        if entries > MAX_ZIP_MEMBERS:
            raise ResourceLimitError(
                f"{where}: the archive declares {entries} entries, over the limit of "
                f"{MAX_ZIP_MEMBERS} (a fixed limit); refused before reading its directory.")
        size = int(end[zipfile._ECD_SIZE])  # type: ignore[attr-defined]
        if size > MAX_ZIP_DIRECTORY:
            raise ResourceLimitError(
                f"{where}: the archive's directory declares {size} bytes, over the limit of "
                f"{MAX_ZIP_DIRECTORY} ({MAX_ZIP_MEMBERS} entries, a fixed limit); refused "
                "before reading it.")
        zf = zipfile.ZipFile(src)
        if len(zf.filelist) > MAX_ZIP_MEMBERS:  # an end record that understates its count
            n = len(zf.filelist)
            zf.close()
            raise ResourceLimitError(
                f"{where}: the archive holds {n} entries (its end record declares "
                f"{entries}), over the limit of {MAX_ZIP_MEMBERS} (a fixed limit); refused.")
        return zf
    except CausalfairError:
        raise
    except (OSError, EOFError, zipfile.BadZipFile, ValueError, NotImplementedError) as exc:
        raise error(f"{where}: not a readable zip archive ({type(exc).__name__}: "
                    f"{_first_line(exc)}).") from None


def check_zip_sizes(src: str | os.PathLike[str] | IO[bytes], where: str,
                    error: ErrorType) -> None:
    """Refuse the archive at ``src`` (as :func:`open_zip` does, and) when its members
    declare more bytes uncompressed than ``CAUSALFAIR_MAX_MEMORY`` allows: a check
    before a reader that inflates every member (``torch.load``; a deflated member of
    zeros inflates a thousandfold) is called on it."""
    with open_zip(src, where, error) as zf:
        declared = sum(i.file_size for i in zf.infolist())
    check_memory(declared, f"{where}: {format_bytes(declared)} uncompressed",
                 "use a smaller file")


def read_member(zf: zipfile.ZipFile, name: str, where: str, error: ErrorType, *,
                cap: int, fix: str = "") -> bytes:
    """Member ``name`` of ``zf``, refused when its declared size is over ``cap`` bytes
    (or over the memory limit) and read by streamed decompression that stops at ``cap``."""
    info = zf.getinfo(name)
    _check_member_size(info.file_size, cap, f"{where}: member {name}", fix)
    out = bytearray()
    try:
        with zf.open(info) as fh:
            while chunk := fh.read(1 << 20):
                out += chunk
                if len(out) > cap:
                    raise ResourceLimitError(
                        f"{where}: member {name} inflates past {format_bytes(cap)}, the limit "
                        "for it; refused.")
    except CausalfairError:
        raise
    except (OSError, EOFError, zipfile.BadZipFile, ValueError, NotImplementedError) as exc:
        raise error(f"{where}: member {name} cannot be read ({type(exc).__name__}: "
                    f"{_first_line(exc)}).") from None
    return bytes(out)


def _check_member_size(size: int, cap: int, what: str, fix: str) -> None:
    if size > cap:
        raise ResourceLimitError(
            f"{what} declares {format_bytes(size)} uncompressed, over the limit of "
            f"{format_bytes(cap)} for this member (fixed); refused before inflating it.")
    check_memory(size, f"{what} ({format_bytes(size)} uncompressed)", fix or "use a smaller file")


# ------------------------------------------------------------------------------- npz
def _npy_header(fh: IO[bytes], name: str, where: str, error: ErrorType
                ) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) of the ``.npy`` stream ``fh``."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(fh, max_header_size=_MAX_NPY_HEADER)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = fmt.read_array_header_2_0(fh, max_header_size=_MAX_NPY_HEADER)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, SyntaxError, TypeError) as exc:
        raise error(f"{where}: member {name} is not a .npy array ({type(exc).__name__}: "
                    f"{_first_line(exc)}).") from None
    return tuple(int(d) for d in shape), dtype, fh.tell()


def read_npz(path: str | os.PathLike[str], where: str, error: ErrorType, *,
             factor: float = 1.0, fix: str = "", pickle_fix: str = "") -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file ``path`` (``{name: array}``, names without
    ``.npy``), read without pickle. Before any array is read, every member's ``.npy``
    header is read; object arrays are refused, and the declared bytes times ``factor``
    (the memory the caller will need per byte read) are checked against
    ``CAUSALFAIR_MAX_MEMORY``, and each array's declared bytes against its member's size."""
    with open_zip(path, where, error) as zf:
        headers = []
        for info in zf.infolist():
            name = info.filename
            if not name.endswith(".npy"):
                raise error(f"{where}: member {name[:80]!r} is not a .npy array; an .npz file "
                            "holds arrays only.")
            try:
                with zf.open(info) as fh:
                    shape, dtype, head = _npy_header(fh, name, where, error)
            except CausalfairError:
                raise
            except (OSError, EOFError, zipfile.BadZipFile, ValueError, NotImplementedError) as exc:
                raise error(f"{where}: member {name} cannot be read ({type(exc).__name__}: "
                            f"{_first_line(exc)}).") from None
            if dtype.hasobject:
                raise error(f"{where}: member {name} holds Python objects, which cannot be read "
                            f"without pickle; {pickle_fix or 'save plain numeric arrays'}.")
            nbytes = math.prod(shape) * dtype.itemsize
            headers.append((info, name, shape, dtype, head, nbytes))
        for info, name, shape, dtype, head, nbytes in sorted(headers, key=lambda h: -h[-1]):
            check_memory(factor * nbytes, f"{where}: member {name} declares shape {shape} of "
                         f"{dtype} ({format_bytes(nbytes)})", fix or "use a smaller file")
            if head + nbytes > info.file_size:
                raise error(f"{where}: member {name} declares shape {shape} of {dtype} "
                            f"({nbytes} bytes) but holds only {info.file_size - head} bytes of "
                            "data; the file is truncated or corrupt.")
        total = sum(h[-1] for h in headers)
        check_memory(factor * total, f"{where}: arrays of {format_bytes(total)} in all",
                     fix or "use a smaller file")
        out = {}
        for info, name, *_ in headers:
            try:
                with zf.open(info) as fh:
                    out[name[:-4]] = np.lib.format.read_array(
                        fh, allow_pickle=False, max_header_size=_MAX_NPY_HEADER)
            except (OSError, EOFError, zipfile.BadZipFile, ValueError) as exc:
                raise error(f"{where}: member {name} cannot be read ({type(exc).__name__}: "
                            f"{_first_line(exc)}).") from None
        return out


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:120] if text else ""

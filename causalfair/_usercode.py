"""User code as causalfair calls it: a user's object behind a guard.

Every call into a user's policy (``prob_d1``, ``action_probs``, ``start_batch``: the
guard of :func:`guard_policy`) or simulator (``reset``, ``observe``, ``draw_noise``,
``step``: :func:`causalfair.systems.contract.guard_simulator`, on the same
:class:`Guard` base, beside the contract it checks) goes through
:func:`~causalfair.errors.call_user`, so anything it raises - ``SystemExit`` included -
is a one-line :class:`~causalfair.errors.UserCodeError` naming the method, with the
user's traceback kept (:func:`user_traceback`) for a log file under
``.causalfair/logs/`` or stderr with ``--debug`` (:func:`keep_tracebacks`).

A user's ``"module:callable"`` (a system or policy factory) is loaded here too
(:func:`load_callable`: the module looked up in a search folder first) and called with that
folder importable (:func:`call_factory`), so the systems and the policies resolve factories
the same way.

This module depends on :mod:`causalfair.errors` and :mod:`causalfair._io` only, so the
systems, the policies, the engines, the audit and the command line can all use it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import importlib.util
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from causalfair._io import atomic_write_text, causalfair_dir
from causalfair.errors import (
    PolicyError,
    SystemError_,
    UserCodeError,
    as_numbers,
    call_user,
    short,
    unicode_text,
)

__all__ = ["Guard", "guard_as", "is_own", "guard_policy", "call_policy", "call_watching_np",
           "np_global_state",
           "MEANWHILE", "user_traceback", "keep_tracebacks",
           "short", "load_callable", "call_factory", "check_params", "missing_params",
           "importable",
           "user_modules", "find_user_modules", "refuse_os_exit", "OSExitCalled", "module_file",
           "module_reads", "reads_owner"]


def is_own(cls: type) -> bool:
    """Whether ``cls`` is one of causalfair's own classes (not user code)."""
    return cls.__module__.split(".")[0] == "causalfair"


class Guard:
    """Delegates every attribute to the wrapped object (``_obj``); subclasses carry the
    wrapped class's name, so messages name the user's class."""

    __slots__ = ("_obj",)

    def __init__(self, obj: Any):
        object.__setattr__(self, "_obj", obj)

    def __getattr__(self, name: str) -> Any:
        if name == "_obj":  # during unpickling, before __init__
            raise AttributeError(name)
        return getattr(self._obj, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._obj, name, value)

    def __repr__(self) -> str:
        return repr(self._obj)


_GUARD_TYPES: dict[tuple[type, type], type] = {}


def guard_as(base: type, obj: Any) -> Any:
    """``obj`` behind the :class:`Guard` subclass ``base``, in a subclass named as
    ``obj``'s class (one per (base, class), cached)."""
    cls = type(obj)
    guard = _GUARD_TYPES.get((base, cls))
    if guard is None:
        guard = type(cls.__name__, (base,), {"__slots__": (), "__qualname__": cls.__qualname__})
        _GUARD_TYPES[(base, cls)] = guard
    return guard(obj)


class _GuardedPolicy(Guard):
    """A user's policy object: ``prob_d1``, ``action_probs`` and ``start_batch`` (those it
    has) are called through :func:`~causalfair.errors.call_user`; the engines validate
    the probabilities they return (a torch tensor as its values,
    :func:`~causalfair.errors.as_numbers`)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        attr = super().__getattr__(name)
        if name in ("prob_d1", "action_probs") and callable(attr):
            what = f"policy {type(self._obj).__name__}.{name}"
            return lambda *args, **kw: call_policy(what, attr, *args, **kw)
        if name == "start_batch" and callable(attr):
            what = f"policy {type(self._obj).__name__}.{name}"
            return lambda *args, **kw: call_user(what, attr, *args, **kw)
        return attr

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return guard_policy, (self._obj,)


def np_global_state() -> bytes | None:
    """The bytes of numpy's global generator's C state (``np.random``'s MT19937: 624
    words and the position, at numpy's documented ``ctypes.state_address``; about 0.6
    us), to tell whether user code drew from it; None where numpy is not imported (nobody
    drew from it) or ``np.random`` was given another bit generator."""
    np = sys.modules.get("numpy")
    if np is None:
        return None
    bg = np.random.get_bit_generator()
    if bg is not _NP_STATE[0]:  # the first call, or np.random.set_bit_generator since
        if type(bg) is not np.random.MT19937:
            return None
        _NP_STATE[:] = [bg, bg.ctypes.state_address]
    return ctypes.string_at(_NP_STATE[1], 624 * 4 + 4)


#: numpy's global bit generator and the address of its C state, read once (kept alive
#: here, so the address stays valid).
_NP_STATE: list[Any] = [None, 0]


#: Why numpy's global generator may have moved during a call on one of several threads.
MEANWHILE = ("or, on another thread, user code running at the same time (the policy, the "
             "simulator) drew from it meanwhile")


def call_watching_np(what: str, fn: Callable[..., Any], /, *args: Any,
                     **kwargs: Any) -> tuple[Any, bool]:
    """``fn(*args, **kwargs)`` called as user code (:func:`~causalfair.errors.call_user`),
    and whether numpy's global generator moved during the call (:func:`np_global_state`):
    what a policy's and a simulator's guards refuse."""
    before = np_global_state()
    out = call_user(what, fn, *args, **kwargs)
    return out, before is not None and np_global_state() != before


def call_policy(what: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """A user's policy function or method ``fn`` called as user code
    (:func:`~causalfair.errors.call_user`), its output read as numbers
    (:func:`~causalfair.errors.as_numbers`); refused when numpy's global generator moved
    during the call (a policy that samples its decisions with ``np.random``)."""
    out, moved = call_watching_np(what, fn, *args, **kwargs)
    if moved:
        raise PolicyError(
            f"{what}: drew from numpy's global generator (np.random.random, ...: its state "
            f"moved during the call; {MEANWHILE}), so the audit would not be reproducible; "
            "a policy returns probabilities, and the engines draw the decisions from them "
            "with their own seeded streams: return the probabilities your sampling used.")
    return as_numbers(out)


def guard_policy(policy: Any) -> Any:
    """A user's policy object (one with ``prob_d1`` or ``action_probs``) behind a guard
    that calls it as user code; causalfair's own policies, and objects the adapters
    convert (SB3 models, tables, functions), are returned as they are."""
    if isinstance(policy, Guard) or is_own(type(policy)) or not (
            callable(getattr(policy, "prob_d1", None))
            or callable(getattr(policy, "action_probs", None))):
        return policy
    return guard_as(_GuardedPolicy, policy)


def user_traceback(exc: BaseException | None) -> str:
    """The user's traceback kept by a :class:`~causalfair.errors.UserCodeError` that is
    ``exc`` or caused it ("" when there is none)."""
    seen = 0
    while exc is not None and seen < 20:
        text = getattr(exc, "traceback_text", "")
        if text:
            return str(text)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return ""


def keep_tracebacks(tracebacks: Sequence[str], command: str, debug: bool) -> str:
    """Keep the users' ``tracebacks`` (empty ones skipped): with ``debug`` write them to
    stderr and return ""; else write them to ``.causalfair/logs/COMMAND-TIME-PID.log``
    and return the note the one-line error ends with (" (traceback: PATH; --debug
    prints it)"). A log that cannot be written is skipped (the note then names
    --debug)."""
    texts = [t for t in tracebacks if t]
    if not texts:
        return ""
    if debug:
        for t in texts:
            sys.stderr.write(t if t.endswith("\n") else t + "\n")
        return ""
    try:
        path = causalfair_dir() / "logs" / (
            f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        atomic_write_text(path, unicode_text("\n".join(texts)))  # a file name's byte
    except OSError:
        return " (run with --debug for the traceback)"
    return f" (traceback: {path}; --debug prints it)"


# ------------------------------------------------- a user's module:callable
def module_in_folder(module: str, search_path: Path | None) -> Path | None:
    """The ``module.py`` (or package ``__init__.py``) of ``module`` in ``search_path``."""
    if search_path is not None:
        rel = Path(*module.split("."))
        for cand in (search_path / rel.with_suffix(".py"), search_path / rel / "__init__.py"):
            if cand.is_file():
                return cand
    return None


def module_file(module: str, search_path: str | Path | None = None) -> Path | None:
    """The file :func:`load_callable` imports ``module`` from: its ``.py`` in
    ``search_path`` first, else the module loaded in this process, else the one
    ``sys.path`` finds (None when there is none, or it is not a file)."""
    cand = module_in_folder(module, Path(search_path) if search_path is not None else None)
    if cand is not None:
        return cand
    file = getattr(sys.modules.get(module), "__file__", None)
    if file is None:
        try:  # (a dotted name imports its parent packages: user code)
            found = call_user(f"finding module {module!r}", importlib.util.find_spec, module)
        except UserCodeError as exc:
            if not isinstance(exc.__cause__, (ImportError, ValueError)):
                raise
            found = None
        file = getattr(found, "origin", None)
    return Path(file) if file and Path(file).is_file() else None


# ------------------------------------------------- the files a user's module reads
#: Files opened for reading while a user's module was imported by :func:`load_callable`
#: or one of its factories ran (:func:`call_factory`), by the module's file (resolved):
#: absolute paths as opened, unfiltered (:func:`module_reads` filters them). Kept for the
#: process, so a module imported once still names what its import read.
_READS: dict[str, set[str]] = {}
_RECORDING = threading.local()
_HOOKED = [False]
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _on_audit_event(event: str, args: tuple[Any, ...]) -> None:
    """The ``sys.addaudithook`` hook: an ``open`` for reading on a thread that records
    (:func:`_recording_into`) is added to each of its records. Never raises."""
    if event != "open":
        return
    try:
        stack = getattr(_RECORDING, "stack", None)
        if not stack or len(args) < 3 or isinstance(args[0], int):
            return
        path, mode, flags = args[0], args[1], args[2]
        if isinstance(mode, str):
            if any(c in mode for c in "wax+"):
                return
        elif isinstance(flags, int) and flags & _WRITE_FLAGS:
            return
        frame = sys._getframe(1)
        for _ in range(4):  # source lines read for a traceback or a warning: not an input
            if frame is None:
                break
            if frame.f_globals.get("__name__") in ("linecache", "tokenize"):
                return
            frame = frame.f_back
        full = os.path.abspath(os.fsdecode(path))
        for rec in stack:
            rec.add(full)
    except Exception:  # an audit hook that raises would break the user's open()
        return


@contextlib.contextmanager
def _recording_into(rec: set[str]) -> Iterator[None]:
    """Inside the block, every file this thread opens for reading is added to ``rec``."""
    if not _HOOKED[0]:
        sys.addaudithook(_on_audit_event)  # once per process; cannot be removed
        _HOOKED[0] = True
    stack = _RECORDING.__dict__.setdefault("stack", [])
    stack.append(rec)
    try:
        yield
    finally:  # by identity: nested records holding the same files are equal sets
        del stack[next(i for i in range(len(stack) - 1, -1, -1) if stack[i] is rec)]


def _module_key(module: Any) -> str | None:
    """The key of ``module`` (a module, or its name) in ``_READS``: its resolved file."""
    if isinstance(module, str):
        module = sys.modules.get(module)
    file = getattr(module, "__file__", None)
    try:
        return str(Path(file).resolve()) if file else None
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=1)
def _install_roots() -> tuple[Path, ...]:
    """Folders whose files are the Python installation's, not the user's: the standard
    library, site-packages, include and scripts folders, and causalfair's own package (not the
    whole prefix: a project may live below it, as /usr/local/app does)."""
    import site
    import sysconfig

    keys = ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude", "scripts")
    roots = {*(sysconfig.get_paths().get(k) for k in keys),
             *getattr(site, "getsitepackages", list)(), site.getusersitepackages(),
             str(Path(__file__).parent)}
    out = []
    for r in roots:
        with contextlib.suppress(OSError, ValueError, TypeError):
            if r:
                out.append(Path(r).resolve())
    return tuple(out)


def module_reads(file: str | Path) -> list[Path]:
    """The user's files the module whose file is ``file`` read while :func:`load_callable`
    imported it or one of its factories ran (:func:`call_factory`) in this process: every
    regular file opened for reading then (data, a model file, a sibling module's source:
    for a module imported from its compiled file in ``__pycache__``, the source it was
    compiled from), sorted, except the module's own file, system
    folders (``/dev``, ``/proc``, ``/sys``) and the Python installation's files
    (:func:`_install_roots`). Files read later (by a simulator while it runs) are not
    seen."""
    try:
        own = Path(file).resolve()
    except (OSError, ValueError):
        return []
    seen = _READS.get(str(own))
    if not seen:
        return []
    roots = _install_roots()
    out: set[Path] = set()
    for name in seen:
        p = Path(name)
        if p.parts[1:2] and p.parts[1] in ("dev", "proc", "sys"):
            continue
        try:
            if "__pycache__" in p.parts:  # a module imported from its compiled file: its source
                p = Path(importlib.util.source_from_cache(name))
            p = p.resolve()
            if p == own or not p.is_file() or any(p.is_relative_to(r) for r in roots):
                continue
        except (OSError, ValueError, NotImplementedError):
            continue
        out.add(p)
    return sorted(out)


def _import_from(module: str, search_path: Path | None) -> Any:
    """Import ``module`` (:func:`_import_new`), adding what its import read to its
    :func:`module_reads` (nothing when it was imported already)."""
    rec: set[str] = set()
    with _recording_into(rec):
        mod = _import_new(module, search_path)
    own = _module_key(mod)
    if own is not None and rec:
        _READS.setdefault(own, set()).update(rec)
    return mod


def _import_new(module: str, search_path: Path | None) -> Any:
    """Import ``module``; a ``module.py`` (or package) in ``search_path`` wins."""
    cand = module_in_folder(module, search_path)
    if cand is not None:
        loaded = sys.modules.get(module)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() \
                == cand.resolve():
            return loaded
        spec_ = importlib.util.spec_from_file_location(
            module, cand,
            submodule_search_locations=[str(cand.parent)] if cand.name == "__init__.py" else None)
        mod = importlib.util.module_from_spec(spec_)
        sys.modules[module] = mod  # before exec: dataclasses and pickling need it
        if "." not in module:
            _USER_MODULES[module] = str(search_path)
        # the folder is importable while the module runs, so it can import its
        # siblings (as pytest makes a conftest.py's folder importable)
        try:
            with importable(search_path):
                spec_.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(module, None)
            raise
        return mod
    return importlib.import_module(module)


@contextlib.contextmanager
def importable(folder: str | Path | None) -> Iterator[None]:
    """``folder`` is on ``sys.path`` inside the block (first), and removed after it: a
    factory module, and the factory while it runs, can import its sibling modules."""
    if folder is None:
        yield
        return
    entry = str(folder)
    before = set(sys.modules)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        try:
            sys.path.remove(entry)
        except ValueError:
            pass
        _note_user_modules(entry, [m for m in list(sys.modules) if m not in before])


#: Modules of users' folders loaded in this process, name -> the folder they were found
#: in. Such a module is not importable from ``sys.path`` once its folder has left it, so
#: a worker process (:mod:`causalfair.backends`) is told where they are
#: (:func:`find_user_modules`) before it unpickles a task that may refer to them.
_USER_MODULES: dict[str, str] = {}


def _note_user_modules(folder: str, names: Sequence[str]) -> None:
    """Record the top-level modules of ``names`` whose file lies in ``folder``."""
    root = Path(folder).resolve()
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if "." not in name and file and Path(file).resolve().is_relative_to(root):
            _USER_MODULES[name] = folder


def user_modules() -> list[tuple[str, str]]:
    """(module name, folder) of every top-level module loaded from a user's folder in this
    process (a ``module:callable`` next to a spec or in the working directory)."""
    return list(_USER_MODULES.items())


class _UserFolders:
    """A ``sys.meta_path`` finder for the modules of :func:`user_modules` of another
    process: each is found in its own folder, ahead of ``sys.path`` (as that process
    found it), and only when something imports it."""

    def __init__(self, modules: Sequence[tuple[str, str]]):
        self.where = dict(modules)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        folder = self.where.get(name)
        if folder is None:
            return None
        from importlib.machinery import PathFinder

        return PathFinder.find_spec(name, [folder])


def find_user_modules(modules: Sequence[tuple[str, str]]) -> None:
    """Make the modules of ``modules`` (:func:`user_modules` of another process)
    importable here from the folders that process found them in. One finder serves every
    call (a process that runs many gates adds none per gate): a module named again is
    found where the latest call says, and the finder stays first on ``sys.meta_path``."""
    if not modules:
        return
    finder = next((f for f in sys.meta_path if isinstance(f, _UserFolders)), None)
    if finder is None:
        finder = _UserFolders(())
    else:
        sys.meta_path.remove(finder)
    finder.where.update(modules)
    sys.meta_path.insert(0, finder)


def call_factory(what: str, fn: Callable[..., Any], search_path: str | Path | None = None,
                 /, **kwargs: Any) -> Any:
    """Call a user factory ``fn(**kwargs)`` (a ``[system]``/``[policy] factory``, a
    ``--system``/``--policy module:callable``) with its search folder importable during
    the call; anything it raises or exits with becomes a one-line
    :class:`~causalfair.errors.UserCodeError` naming ``what``
    (:func:`~causalfair.errors.call_user`). The files it reads are added to the
    :func:`module_reads` of its module (:func:`reads_owner`), also when it raises."""
    rec: set[str] = set()
    try:
        with importable(search_path), _recording_into(rec):
            return call_user(what, fn, **kwargs)
    finally:  # the owner after the call: a registered Gymnasium id imports its module then
        own = _module_key(reads_owner(fn))
        if own is not None and rec:
            _READS.setdefault(own, set()).update(rec)


def reads_owner(fn: Any) -> Any:
    """The module (or its name) whose :func:`module_reads` the files read by a call of
    ``fn`` go to: ``fn.reads_module`` when ``fn`` stands for a module of the user's (the
    factory of a registered Gymnasium id: the module that registers it), else ``fn``'s
    own ``__module__``."""
    try:
        owner = getattr(fn, "reads_module", None)
    except Exception:  # noqa: BLE001 - a property of the user's object: fall back
        owner = None
    return owner if owner else getattr(fn, "__module__", None)


def _near_callable(obj: Any, part: str, prefix: str) -> str:
    """``"; did you mean 'PREFIXname'?"`` for the public callable of ``obj`` closest to the
    missing ``part`` (difflib ratio >= 0.6), else ``"."``."""
    import difflib

    try:
        names = [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None))]
    except Exception:  # noqa: BLE001 - a user's object with an odd __dir__: no suggestion
        return "."
    near = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
    return f"; did you mean '{prefix}{near[0]}'?" if near else "."


def load_callable(ref: str, *, search_path: str | Path | None = None, what: str = "factory"
                  ) -> Callable[..., Any]:
    """The callable named by ``"module:attr"`` (``attr`` may be dotted)."""
    mod_name, sep, attr = str(ref).partition(":")
    if not sep or not mod_name or not attr:
        raise SystemError_(f"{what}: {short(ref)} is not of the form 'module:callable'.")
    path = Path(search_path) if search_path is not None else None
    try:
        mod = call_user(f"{what}: importing module {mod_name!r}", _import_from, mod_name, path)
    except UserCodeError as exc:
        cause = exc.__cause__
        if isinstance(cause, ModuleNotFoundError):
            missing = cause.name or ""
            if missing and not (mod_name == missing or mod_name.startswith(missing + ".")):
                raise SystemError_(  # the module exists; something it imports does not
                    f"{what}: module {mod_name!r} imports {missing!r}, which is not installed "
                    f"({cause}); install it (pip install ...) or fix the import in "
                    f"{mod_name}.") from None
            where = f" (looked in {path} and the installed packages)" if path else ""
            put = (f"put {_file_of(mod_name)} in "
                   f"{'the working directory' if str(path) == '.' else path}" if path else
                   f"put {_file_of(mod_name)} on Python's import path (sys.path)")
            raise SystemError_(
                f"{what}: cannot import module {mod_name!r}{where}: {cause}; {put} or install "
                "the package that provides it.") from None
        if isinstance(cause, SyntaxError):
            raise SystemError_(f"{what}: module {mod_name!r} has a syntax error: {cause}.") from None
        raise SystemError_(f"{exc}.") from exc  # the cause keeps the user's traceback
    obj: Any = mod
    parts = attr.split(".")
    for i, part in enumerate(parts):
        if not hasattr(obj, part):
            raise SystemError_(
                f"{what}: module {mod_name!r} has no attribute {attr!r} (from {short(ref)})"
                + _near_callable(obj, part, f"{mod_name}:" + "".join(p + "." for p in parts[:i])))
        obj = getattr(obj, part)
    if not callable(obj):
        raise SystemError_(f"{what}: {short(ref)} is a {type(obj).__name__}, not a callable.")
    return obj


def check_params(fn: Callable[..., Any], params: Mapping[str, Any], what: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    ps = sig.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in ps):
        return
    names = [p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    bad = [k for k in params if k not in names]
    if bad:
        raise SystemError_(
            f"{what}: unknown parameter {bad[0]!r}; the factory accepts: "
            f"{', '.join(names) or 'no parameters'}.")


def missing_params(fn: Callable[..., Any], params: Mapping[str, Any]) -> list[str]:
    """The parameters of ``fn`` without a default that ``params`` leaves out (a call with
    ``params`` would fail as a TypeError of the user's code); [] when its signature is not
    readable."""
    try:
        ps = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in ps if p.default is p.empty and p.name not in params
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


class OSExitCalled(BaseException):
    """User code called ``os._exit`` while :func:`refuse_os_exit` was in force."""


#: The guard of :func:`refuse_os_exit`, shared by every command running in this process
#: (``main`` called on several threads, or within itself): ``os._exit`` is replaced when
#: the first one starts and put back when the last one ends, whatever order they end in.
_EXIT_GUARD: dict[str, Any] = {"pid": None, "depth": 0, "real": None}
_EXIT_LOCK = threading.Lock()


def _refused_exit(code: int) -> None:
    """``os._exit`` while :func:`refuse_os_exit` is in force."""
    real = _EXIT_GUARD["real"]
    if os.getpid() != _EXIT_GUARD["pid"] and real is not None:  # a forked child: as it asks
        real(code)
    raise OSExitCalled(f"os._exit({code!r}) called; user code must return, not exit")


@contextlib.contextmanager
def refuse_os_exit() -> Iterator[None]:
    """While a command runs user code in this process, ``os._exit(code)`` called in this
    process raises :class:`OSExitCalled` instead of ending it: no exception handler sees a
    real ``os._exit``, so a policy calling ``os._exit(0)`` would end a gate with exit 0 and
    no output, read by CI as a pass. Through :func:`~causalfair.errors.call_user` it
    becomes an error of the user code that called it (exit 2). A process forked from this
    one (``multiprocessing`` in a user's simulator) exits as it asked; worker processes are
    interpreters of their own, untouched. Guards may overlap (commands on several threads)
    and end in any order: the real ``os._exit`` is back when the last one ends."""
    with _EXIT_LOCK:
        if _EXIT_GUARD["pid"] != os.getpid():  # first here, or a forked child's own command
            _EXIT_GUARD.update(pid=os.getpid(), depth=0)
        if _EXIT_GUARD["depth"] == 0:
            if os._exit is not _refused_exit:  # (a forked child keeps the real one it holds)
                _EXIT_GUARD["real"] = os._exit
            os._exit = _refused_exit  # type: ignore[assignment]
        _EXIT_GUARD["depth"] += 1
    try:
        yield
    finally:
        with _EXIT_LOCK:
            _EXIT_GUARD["depth"] -= 1
            if _EXIT_GUARD["depth"] == 0:
                os._exit = _EXIT_GUARD["real"]


def _file_of(mod_name: str) -> str:
    """The file a module name is read from, relative to a search path
    (``pkg.sim`` -> ``pkg/sim.py``, in a folder ``pkg`` with an ``__init__.py``)."""
    if "." not in mod_name:
        return f"{mod_name}.py"
    return f"{mod_name.replace('.', '/')}.py (in a package folder {mod_name.split('.')[0]}/)"

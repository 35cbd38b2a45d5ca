"""Command-line options that name a system and a policy (shared by several commands)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalfair._names import SETTINGS  # (the lending settings, without the systems)
from causalfair.backends import resolve_jobs
from causalfair.errors import InputError, UsageError, short

if TYPE_CHECKING:
    from causalfair.policies.resolver import ResolvedPolicy


@contextlib.contextmanager
def as_flag_error(only: Iterable[str] | None = None) -> Iterator[None]:
    """The library's refusal inside, ``InputError("FIELD: ...")``, as the same refusal named
    as the command's flag: ``UsageError("--FIELD: ...")`` (exit 2, the flag's words; every
    command's one form). ``only``: the fields whose refusals are the flags' (another field's
    propagates as it is); None: every one."""
    only = None if only is None else tuple(only)
    try:
        yield
    except InputError as exc:
        if only is not None and not any(str(exc).startswith(f"{f}: ") for f in only):
            raise
        raise UsageError(f"--{exc}") from None


def flag_given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the command line gave the option of ``dest`` (``--seed 0`` is given,
    ``--seed`` left out is not): ``args.given``, which causalfair's parser fills in
    (:func:`causalfair.cli.given_options`); a namespace made otherwise counts a value other
    than None, an empty list or False as given."""
    given = getattr(args, "given", None)
    if given is None:
        return getattr(args, dest, None) not in (None, [], False)
    return dest in given


def _plain(value: Any) -> Any:
    """``value`` with its lists as tuples and its dicts as sorted tuples, for comparing."""
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _plain(v)) for k, v in value.items()))
    return value


def one_setting(*sources: tuple[str, bool, Any]) -> Any:
    """The rule of every command for one setting that several sources name (a flag,
    ``--set FIELD=VALUE``, ``--param KEY=VALUE``, the global ``--threads``), each
    ``(words, given, value)``: a source that was not given never overrides one that was,
    and two given sources with different values are refused (exit 2, naming both) rather
    than the later one winning silently; given with the same value they are one. Returns
    the given value (None when no source was given: the command's default applies).
    docs/limits.md, "One setting, two sources"."""
    given = [(words, value) for words, on, value in sources if on]
    for wb, vb in given[1:]:
        wa, va = given[0]
        if _plain(va) != _plain(vb):
            raise UsageError(f"{wb}: given with {wa} as well ({short(vb, 30)} and "
                             f"{short(va, 30)}); keep one.")
    return given[0][1] if given else None


def add_system_arguments(p: argparse.ArgumentParser, *, horizon_default: int | None = None) -> None:
    """--system ID|module:callable, --param K=V (repeatable), --search-path DIR, and the
    lending shorthands --setting/--levels/--interest."""
    p.add_argument("--system", metavar="ID",
                   help="the system to audit: a registered id (`causalfair systems` lists them) "
                   "or a factory 'module:callable' of your own (default: lending-1)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="a keyword argument for the system's factory; V is read as JSON when it "
                   "parses (numbers, true/false, lists), else as a string; repeatable")
    p.add_argument("--search-path", metavar="DIR", default=".",
                   help="folder searched first for the module of a 'module:callable' factory "
                   "(default: the working directory)")
    p.add_argument("--setting", choices=SETTINGS, default=None,
                   help="shorthand for --system lending-N")
    p.add_argument("--levels", type=int, default=None, metavar="K",
                   help="lending: number of qualification levels K >= 3 (default: 7)")
    p.add_argument("--interest", type=float, default=None,
                   help="lending: bank profit on a repaid loan (default: 1.0)")
    p.add_argument("--horizon", type=int, default=horizon_default, metavar="T",
                   help="decision epochs T (default: the system's horizon; 20 for lending)"
                   if horizon_default is None else f"decision epochs T (default: {horizon_default})")


#: The policy of a command whose --policy is not given (:func:`load_policy`).
DEFAULT_POLICY = "threshold:0.5"
#: What --policy holds, on every command that takes it (:func:`load_policy`).
POLICY_HELP = ("a built-in policy: always, never, random:Q, threshold:P, blind:P, action:K, "
               f"uniform (default: {DEFAULT_POLICY}; README, 'Command line'), a checkpoint path, "
               "or a factory 'module:callable' of your own (looked up in --search-path first)")
#: What --checkpoint holds.
CHECKPOINT_HELP = ("a checkpoint (.npz, .pt or a stable-baselines3 .zip) instead of --policy "
                   "(not with it)")
#: What --vecnormalize holds.
VECNORMALIZE_HELP = ("a stable-baselines3 policy trained behind VecNormalize: its observation "
                     "statistics (vecnormalize.pkl as VecNormalize.save writes it, read without "
                     "running code, or .npz/.json with mean, var, epsilon, clip_obs); the policy "
                     "then acts on normalized observations. 'none': audit on raw observations "
                     "although a vecnormalize.pkl is next to the .zip (refused otherwise)")


def add_vecnormalize_argument(p: argparse.ArgumentParser, flag: str = "--vecnormalize",
                              applies: str = "") -> None:
    """``flag`` PATH|none, the statistics of a stable-baselines3 policy (:func:`load_policy`
    reads --vecnormalize); ``applies`` says which policies they go with, where a command
    takes several."""
    p.add_argument(flag, metavar="PATH|none", help=VECNORMALIZE_HELP + (
        f"; {applies}" if applies else ""))


def parse_params(items: list[str]) -> dict[str, Any]:
    from causalfair._safe_read import read_option_value

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"--param: expected K=V with K a Python identifier, got {item[:80]!r}.")
        out[key] = read_option_value(value, f"--param {key}", UsageError)
    return out


def jobs_for_backend(jobs: Any, backend: str | None) -> int | None:
    """--jobs resolved (None: not given), refused with --backend serial unless it is 1:
    a serial backend runs every task in this process, so its workers would be ignored."""
    n = None if jobs is None else resolve_jobs(jobs, "--jobs")
    if backend == "serial" and n is not None and (n > 1 or str(jobs).strip().lower() == "auto"):
        raise UsageError(f"--jobs {jobs} and --backend serial: a serial backend runs every task "
                         "in this process, one at a time; drop --backend serial (more than one "
                         "job: local worker processes) or drop --jobs.")
    return n


def make_system(sid: str, search_path: Any, params: dict[str, Any],
                given: Iterable[str] | None = None) -> Any:
    """``causalfair.systems.make(sid, **params)``; a factory's refusal of a keyword,
    ``InputError("KEY: ...")``, names it as the user wrote it: ``--param KEY: ...`` for
    the keys of --param (``given``; None: every key), ``--KEY: ...`` for the others (the
    shorthands --levels, --interest)."""
    from causalfair.systems import make

    given = set(params) if given is None else set(given)
    try:
        return make(sid, search_path=search_path, **params)
    except InputError as exc:
        key = str(exc).partition(": ")[0]
        if key in given:
            raise UsageError(f"--param {exc}") from None
        if key in params:
            raise UsageError(f"--{exc}") from None
        raise


def load_system(args: argparse.Namespace) -> Any:
    """The :class:`~causalfair.systems.System` the options name."""
    from causalfair._validation import check_horizon, check_int

    if args.setting and args.system and args.system != args.setting:
        raise UsageError(f"--setting {args.setting} and --system {args.system}: give one of them.")
    sid = args.system or args.setting or "lending-1"
    params = parse_params(args.param)
    given = set(params)  # the keys of --param; "levels"/"interest" below: their own flags
    for key in ("levels", "interest", "horizon"):  # one setting, two flags: the one rule
        one_setting((f"--{key}", flag_given(args, key), getattr(args, key)),
                    (f"--param {key}", key in params, params.get(key)))
    with as_flag_error():  # the library's checks (the lending model's levels, every engine's horizon)
        if args.levels is not None:
            params["levels"] = check_int("levels", args.levels, 3)
        if args.horizon is not None:
            check_horizon(args.horizon)
    if args.interest is not None:
        params["interest"] = args.interest
    given -= {k for k in ("levels", "interest") if getattr(args, k) is not None}
    system = make_system(sid, args.search_path, params, given)
    system.check_contract()
    return system


def horizon(args: argparse.Namespace, system: Any) -> int:
    return args.horizon if args.horizon is not None else system.horizon


def load_policy(args: argparse.Namespace, system: Any) -> ResolvedPolicy:
    """The policy of --checkpoint, else of --policy (a built-in, a checkpoint path or a
    factory 'module:callable' looked up in --search-path first; not given:
    :data:`DEFAULT_POLICY`), with the observation statistics of --vecnormalize, resolved
    for ``system``
    (a System or a tabular model) by :func:`causalfair.policies.resolve`."""
    from causalfair.policies.resolver import resolve

    ck = getattr(args, "checkpoint", None)
    stats = {"vecnormalize": getattr(args, "vecnormalize", None),
             "vecnormalize_where": "--vecnormalize"}
    if ck:
        if getattr(args, "policy", None) is not None:  # one of them would be ignored
            raise UsageError(f"--policy {args.policy} and --checkpoint {ck}: give one policy "
                             "to audit (--checkpoint PATH, or --policy with a built-in, a "
                             "checkpoint path or a factory).")
        return resolve(Path(ck), system, **stats)
    spec, where = args.policy, "--policy"
    if spec is None:  # a refusal then says the user gave no policy (one is needed here)
        spec, where = DEFAULT_POLICY, "--policy (not given: the default)"
    return resolve(spec, system, search_path=getattr(args, "search_path", "."), where=where,
                   **stats)


def policy_reads_group(policy: Any, system: Any) -> bool:
    """Whether the policy reads S on ``system`` (:func:`causalfair.policies.grid.reads_group`)."""
    from causalfair.policies.grid import reads_group

    return reads_group(policy, system=system)

"""A sweep's folder (docs/scale.md, "Training sweeps"; :mod:`causalfair.train.sweep`
trains and tabulates): its layout, a run folder's files and :data:`RESULT`, what a resumed
sweep reads back (:func:`finished_run`), the lock and the checks before a sweep writes, and
the table of means and t-intervals over seeds (:func:`tabulate`)::

    OUT/.causalfair-sweep            marks the folder as causalfair's
    OUT/runs.csv                     one row per run: system, params, algo, seed, pair,
                                     checkpoint (its file, relative to OUT), wall_s,
                                     metrics
    OUT/table.csv, OUT/table.md      mean and t-interval over seeds per (system, algo), the
                                     interval's level (ci_level) and the pairs of groups its
                                     runs compare
    OUT/runs/SYSTEM/ALGO/seed-K/     checkpoint.pt (population agents: checkpoint.npz),
                                     metrics.csv (or .jsonl), config.json (PPO family),
                                     result.json (final metrics, pair, wall time,
                                     configuration)

A run's ``pair`` is written as the two group names, a JSON list (``["s+", "s-"]``;
:func:`pair_text`); a resumed sweep reads an earlier sweep's ``"A-B"`` by the system's
groups, and refuses it in one line when it names two pairs. runs.csv and table.csv are
written by :func:`csv_table` (a text cell a spreadsheet would read as a formula, such as a
system id ``=HYPERLINK(...)``, after an apostrophe; the JSON ``pair`` and ``params`` cells
as they are).

A sweep folder that already holds a sweep is refused unless ``existing="resume"`` or
``existing="force"``; a ``runs`` that is a file or a symbolic link, or holds one, is
refused; one sweep at a time writes a folder (``OUT/.causalfair-sweep.lock``, an
exclusive ``flock``: :func:`lock_out`). A ``--param`` goes to the systems whose factory
takes it (:func:`system_params`); runs.csv's and table.csv's ``params`` (:func:`params_cell`)
and table.md (:func:`params_label`) name each system's. The names here are also importable
from :mod:`causalfair.train.sweep`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from causalfair._io import atomic_write_bytes, atomic_write_text, csv_text, to_jsonable
from causalfair._safe_read import read_json_file
from causalfair._validation import check_alpha, did_you_mean
from causalfair.errors import CausalfairError, ConfigError, InputError, OutputError
from causalfair.systems.registry import load_callable, registered, spec
from causalfair.workers import user_prints_to_stderr

__all__ = ["LOCK", "MARK", "RESULT", "RUN_FILES", "check_runs_folder", "check_runs_removable",
           "config_doc",
           "csv_table",
           "finished_run", "json_pair", "lock_out", "pair_key", "pair_text", "param_text",
           "params_cell", "params_label", "prepare_out", "run_dir", "system_params",
           "check_sweep_alpha", "pairs_cell", "t_interval", "tabulate", "update_result",
           "write_run"]

MARK = ".causalfair-sweep"
#: The lock a sweep holds on its folder while it writes it (module docstring).
LOCK = ".causalfair-sweep.lock"
#: Files of a run folder handed back to the driver.
RUN_FILES = ("checkpoint.pt", "checkpoint.npz", "metrics.csv", "metrics.jsonl", "config.json")
#: A finished run's final metrics, wall time and configuration (what a resumed sweep reuses).
RESULT = "result.json"


def pair_text(pair: Sequence[str]) -> str:
    """A pair of group names as a sweep writes it (runs.csv, table.csv): the JSON list of
    the two names, ``["s+", "s-"]`` (module docstring)."""
    return json.dumps([str(g) for g in pair], ensure_ascii=False)


def pair_key(cell: Any) -> Any:
    """A ``pair`` cell of a runs table as what identifies the pair: the two names (a list
    or tuple, or its JSON text as runs.csv holds it) as a tuple; another string (a
    ``"A-B"`` of your own rows) as it is; None when it names nothing."""
    if isinstance(cell, str) and cell.startswith("["):
        try:
            cell = json.loads(cell)
        except ValueError:
            return cell
    if isinstance(cell, (list, tuple)) and len(cell) == 2:
        return tuple(str(g) for g in cell)
    return cell if isinstance(cell, str) and cell else None


def csv_table(frame: Any) -> str:
    """runs.csv's or table.csv's text of ``frame`` (a DataFrame): ``frame.to_csv(index=False)``
    with every text cell, column names included, through
    :func:`causalfair._io.csv_text`, so a system id such as ``=HYPERLINK(...)`` is shown
    and never evaluated by a spreadsheet. A ``pair`` (:func:`pair_text`, ``["s+", "s-"]``)
    or ``params`` (:func:`params_cell`, ``{...}``) cell is JSON and never starts with a
    formula's character: it is written as it is, whatever the names in it."""
    text = frame.rename(columns=lambda c: csv_text(c) if isinstance(c, str) else c)
    for col in text.columns:
        if text[col].dtype.kind not in "biufcmM":  # text (object or str): numbers as they are
            text[col] = text[col].map(lambda v: csv_text(v) if isinstance(v, str) else v)
    return str(text.to_csv(index=False))


def write_run(folder: Path, result: Mapping[str, Any], config: Any = None) -> None:
    """Write a run's files (from :func:`train_many`) into ``folder``, atomically; with its
    ``config``, also :data:`RESULT` (last: a run folder holding it is finished)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in result["files"].items():
        atomic_write_bytes(folder / name, lambda fh, d=data: fh.write(d))
    if config is not None:
        asked = config_doc(config)
        used = result["files"].get("config.json")
        if used is None and (folder / "config.json").is_file():  # the trainer's own file
            used = read_json_file(folder / "config.json", str(folder / "config.json"), OutputError)
        # config: what the run trained with (the trainer's config.json: a system's published
        # hyper-parameters and horizon filled in); requested: what the sweep asked, which a
        # resumed sweep compares
        doc = {"metrics": {k: v for k, v in result["metrics"].items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool)},
               "pair": json_pair(result.get("pair")), "wall_s": result["wall_s"],
               "config": (json.loads(used) if isinstance(used, bytes) else used) if used is not None
               else asked, "requested": asked}
        atomic_write_text(folder / RESULT, json.dumps(doc, indent=1) + "\n")


def update_result(folder: Path, metrics: Mapping[str, Any]) -> None:
    """Replace the final metrics in ``folder``'s :data:`RESULT` (atomically; the rest of it
    kept)."""
    doc = read_result(folder)
    doc["metrics"] = dict(metrics)
    atomic_write_text(folder / RESULT, json.dumps(doc, indent=1) + "\n")


def read_result(folder: Path) -> Any:
    """``folder``'s :data:`RESULT`, read as every file causalfair reads back (a regular
    file, its size and depth bounded: :func:`causalfair._safe_read.read_json_file`); a
    :class:`~causalfair.errors.CausalfairError` names it otherwise."""
    return read_json_file(folder / RESULT, str(folder / RESULT), OutputError)


def json_pair(cell: Any) -> Any:
    """A run's pair as result.json holds it: the list of the two group names."""
    key = pair_key(cell)
    return list(key) if isinstance(key, tuple) else key


def run_dir(out: Path, sysid: str, algo: str, seed: int) -> Path:
    return out / "runs" / sysid.replace(":", "_") / algo / f"seed-{seed}"


def config_doc(config: Any) -> dict[str, Any]:
    import dataclasses

    return json.loads(json.dumps(to_jsonable(dataclasses.asdict(config))))


def finished_run(folder: Path, config: Any, groups: Sequence[str] = ()) -> dict[str, Any] | None:
    """The result of the run in ``folder`` when it finished with ``config`` (its
    :data:`RESULT`), None when it did not finish; a run of another configuration raises
    :class:`OutputError` (a resumed sweep never mixes two configurations), and so does a
    pair that is not two of ``groups`` (the system's), an earlier sweep's ``"A-B"`` read
    by them. A :data:`RESULT` that is no result causalfair writes (a metric that is no
    number, a pair that is no two distinct names) is a run to train again (None)."""
    try:
        doc = read_result(folder)
        metrics, wall_s = dict(doc["metrics"]), float(doc["wall_s"])
        then = dict(doc.get("requested", doc["config"]))  # (earlier sweeps: config only)
        pair = _result_pair(doc.get("pair"))
    except (CausalfairError, KeyError, TypeError, ValueError, AttributeError):
        return None  # not finished (or not readable, e.g. nested too deep): trained again
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics.values()):
        return None  # a hand-edited metric that is no number: trained again, not tabulated
    now = config_doc(config)
    diff = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
    if diff:
        k = "system_params" if "system_params" in diff else diff[0]  # (then setting, system)
        flag = " (--param)" if k == "system_params" else ""
        raise OutputError(f"--resume: {folder} was trained with {k}={then.get(k)!r}{flag}, this "
                          f"sweep asks {k}={now.get(k)!r}; use --force to train every run again, or "
                          "choose another --out.")
    if isinstance(pair, str):  # written before pairs were lists
        splits = [(pair[:i], pair[i + 1:]) for i, ch in enumerate(pair) if ch == "-"
                  and pair[:i] in groups and pair[i + 1:] in groups and pair[:i] != pair[i + 1:]]
        if len(splits) != 1:
            how = ("names no two of its groups " if not splits else "names two pairs, " + " or ".join(
                pair_text(p) for p in splits) + ",") + f" ({', '.join(groups)})"
            raise OutputError(f"--resume: {folder / RESULT} (an earlier causalfair's) gives its "
                              f"pair as {pair!r}, which {how}; use --force to train every run "
                              "again, or choose another --out.")
        pair = splits[0]
    elif pair is not None and groups and not (pair[0] in groups and pair[1] in groups):
        raise OutputError(f"--resume: {folder / RESULT} gives its pair as {pair_text(pair)}, "
                          f"which names no two of its system's groups ({', '.join(groups)}); "
                          "use --force to train every run again, or choose another --out.")
    return {"metrics": metrics, "wall_s": wall_s, "files": {}, "history": None,
            "pair": None if pair is None else pair_text(pair)}


def _result_pair(cell: Any) -> Any:
    """:data:`RESULT`'s ``pair``: the two group names (a list, or its JSON text), an earlier
    sweep's ``"A-B"`` string (read by :func:`finished_run`), or None; anything else (three
    names, a number, a ``[`` text that is no JSON list of two names) raises ValueError,
    which :func:`finished_run` reads as a run to train again."""
    if isinstance(cell, str) and cell.startswith("["):
        cell = json.loads(cell)  # (ValueError when it is no JSON)
        if not isinstance(cell, list):
            raise ValueError(cell)
    if cell is None or isinstance(cell, str) and cell:
        return cell
    if (isinstance(cell, list) and len(cell) == 2 and all(isinstance(g, str) for g in cell)
            and cell[0] != cell[1]):
        return tuple(cell)
    raise ValueError(cell)


def prepare_out(out: Path, existing: str) -> int | None:
    """Check and mark the sweep folder ``out``, then take it (:func:`lock_out`) before
    looking at its earlier sweep; returns the lock's descriptor, for the caller to close
    when the sweep ends."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: is a file, not a sweep folder; choose another --out.")
    if out.is_dir() and any(out.iterdir()) and not (out / MARK).exists():
        raise OutputError(f"{out}: is an existing folder causalfair did not write (no {MARK}); "
                          "choose another --out (causalfair never writes into a folder of yours).")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / MARK).touch()
    except OSError as exc:
        raise OutputError(f"{out}: cannot write here ({exc.strerror}); choose another --out.") from None
    fd = lock_out(out)
    try:
        check_runs_folder(out / "runs")
        earlier = any((out / name).exists() for name in ("runs", "runs.csv", "table.csv"))
        if earlier and existing == "refuse":
            raise OutputError(f"{out}: holds an earlier sweep; add --resume to train only the "
                              "runs it lacks (its finished runs are kept), or --force to train "
                              "every run again and replace them, or choose another --out.")
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return fd


def lock_out(out: Path) -> int | None:
    """Take the sweep folder ``out`` for this process: an exclusive ``flock`` on
    ``out/LOCK`` (the kernel releases it when the descriptor returned is closed or the
    process dies: no stale lock), with this process's id written in it. A folder another
    sweep holds is an :class:`OutputError` naming that sweep's process id. None where
    there is no ``flock`` (not POSIX)."""
    import time

    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OutputError(f"{out / LOCK}: cannot open the sweep's lock ({exc.strerror}); "
                          "choose another --out.") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        other = b""
        for _ in range(50):  # (the other sweep writes its pid just after taking the lock)
            other = os.pread(fd, 32, 0).strip()
            if other:
                break
            time.sleep(0.01)
        os.close(fd)
        pid = other.decode("ascii", "replace") or "unknown"
        raise OutputError(f"{out}: another sweep (pid {pid}) is writing this folder; wait for "
                          "it to end, or choose another --out.") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def check_runs_removable(runs: Path) -> None:
    """Before ``existing="force"`` removes an earlier sweep's ``runs``: refuse one holding
    a file that is not a run's (:data:`RUN_FILES`, :data:`RESULT`, or an interrupted atomic
    write's temporary file, in ``runs/SYSTEM/ALGO/seed-K/``), such as a user's notes,
    which causalfair did not create and never removes."""
    if not runs.is_dir():
        return
    ours = (*RUN_FILES, RESULT)
    for top, _dirs, files in os.walk(runs):
        for name in files:
            rel = Path(top, name).relative_to(runs)
            tmp = re.fullmatch(r"\.(.+)\.\w+\.tmp", name)  # an atomic write's, of ours?
            if (len(rel.parts) != 4 or not re.fullmatch(r"seed-\d+", rel.parts[2])
                    or (tmp.group(1) if tmp else name) not in ours):
                raise OutputError(f"{runs / rel}: is no file of a sweep's run (runs/SYSTEM/ALGO/"
                                  "seed-K/); --force removes the earlier runs, and never a file "
                                  "causalfair did not create: move it out, or choose another "
                                  "--out.")


def check_runs_folder(runs: Path) -> None:
    """Refuse a sweep's ``runs`` that is not a plain folder of folders and files, as
    causalfair makes it: a symbolic link (there or anywhere below it: a sweep never writes,
    reads or removes through a link out of its folder) or a file."""
    if not os.path.lexists(runs):
        return
    links = [runs] if runs.is_symlink() else []
    if not links and runs.is_dir():
        for top, dirs, files in os.walk(runs):  # (links are listed, not followed)
            links += [Path(top, n) for n in dirs + files if Path(top, n).is_symlink()]
            if links:
                break
    if links:
        raise OutputError(f"{links[0]}: is a symbolic link (to {os.readlink(links[0])}), not "
                          "part of the runs folder causalfair made; a sweep never follows a link "
                          "out of its folder: remove the link, or choose another --out.")
    if not runs.is_dir():
        raise OutputError(f"{runs}: is a file, not the runs folder causalfair made; remove it, "
                          "or choose another --out.")


def _factory_takes(sysid: str, search_path: Any) -> list[str] | None:
    """The keyword parameters the factory of system ``sysid`` takes (None: any, a
    ``**kwargs`` factory or one without a signature), as :func:`causalfair.systems.make`
    would call it (a registered id or an entry point, else ``module:callable``)."""
    import inspect

    with user_prints_to_stderr():
        fn = (load_callable(sysid, search_path=search_path, what=f"system factory {sysid!r}")
              if ":" in sysid and sysid not in registered() else spec(sysid).factory(search_path))
    try:
        ps = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in ps):
        return None
    return [p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def param_text(key: str, value: Any) -> str:
    """``KEY=VALUE`` as ``--param`` takes it (a string as it is, anything else as JSON)."""
    return f"{key}={value if isinstance(value, str) else json.dumps(value, default=repr)}"


def system_params(systems: Sequence[str], params: Mapping[str, Any],
                  search_path: Any = ".") -> dict[str, dict[str, Any]]:
    """Each system's factory parameters: a parameter of ``params`` goes to every system of
    the sweep whose factory takes it (a ``**kwargs`` factory takes every one), so
    ``--system lending-1,attention-1 --param horizon=5`` gives attention-1 horizon 5 and
    lending-1 its own; a parameter that no system takes is refused (a typo would otherwise
    train every run without it)."""
    params = dict(params)
    if not params:
        return {sy: {} for sy in systems}
    takes = {sy: _factory_takes(sy, search_path) for sy in systems}
    out = {sy: {k: v for k, v in params.items() if t is None or k in t}
           for sy, t in takes.items()}
    for key, value in params.items():
        if not any(key in p for p in out.values()):
            known = sorted({n for t in takes.values() for n in t or ()})
            what = "; ".join(f"{sy} takes {', '.join(t) or 'no parameters'}"
                             for sy, t in takes.items())
            raise ConfigError(
                f"params: --param {param_text(key, value)} is a parameter of no system of this "
                f"sweep ({what}); drop it, or add a system whose factory takes {key!r} to "
                "--system (a parameter goes to every system that takes it)"
                + (f"; {did_you_mean(key, known).strip()}" if did_you_mean(key, known) else "."))
    return out


def params_cell(params: Mapping[str, Any]) -> str:
    """A run's ``params`` cell (runs.csv, table.csv): the factory parameters its system was
    given, a JSON object (``{}``: none, the system's defaults)."""
    return json.dumps(dict(params), ensure_ascii=False, default=repr)


def params_label(cell: Any) -> str:
    """What table.md writes after a system's id for its ``params`` cell (:func:`params_cell`):
    `` (increase="f-ppo", horizon=5)``; nothing for ``{}``."""
    try:
        doc = json.loads(cell) if isinstance(cell, str) else {}
    except ValueError:
        return f" ({cell})"
    if not isinstance(doc, dict) or not doc:
        return ""
    return " (" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}"
                            for k, v in doc.items()) + ")"


#: The columns of a runs table that say which run a row is, not what it measured (every
#: other column is a metric :func:`tabulate` averages).
RUN_COLUMNS = ("system", "params", "algo", "seed", "pair", "checkpoint", "wall_s")


def pairs_cell(pairs: Sequence[Any]) -> str:
    """The ``pairs`` cell of a table row: the runs' pairs (:func:`pair_text`) in order of
    appearance, each with its count of runs when they differ (``'["C", "A"] (2), ["B",
    "C"] (1)'``); "n/a" when none is known."""
    seen: dict[Any, int] = {}
    for p in pairs:
        if (key := pair_key(p)) is not None:
            seen[key] = seen.get(key, 0) + 1

    def text(key: Any) -> str:
        return pair_text(key) if isinstance(key, tuple) else str(key)

    if len(seen) <= 1:
        return next((text(k) for k in seen), "n/a")
    return ", ".join(f"{text(p)} ({n})" for p, n in seen.items())


def check_sweep_alpha(alpha: Any) -> None:
    """The library's one rule for alpha (:func:`causalfair._validation.check_alpha`: in
    (0, 0.5], the error level), as a sweep's ConfigError."""
    try:
        check_alpha(alpha)
    except InputError as exc:
        raise ConfigError(str(exc)) from None


def t_interval(x: Sequence[float], alpha: float = 0.05) -> tuple[float, float, float]:
    """(mean, lower, upper): the 1 - alpha t-interval of the mean over runs (NaNs dropped;
    NaN bounds with fewer than two runs)."""
    import numpy as np

    a = np.asarray([v for v in x if v == v], dtype=np.float64)
    if a.size == 0:
        return math.nan, math.nan, math.nan
    m = float(a.mean())
    if a.size < 2:
        return m, math.nan, math.nan
    from scipy.special import stdtrit  # = scipy.stats.t.ppf (its _ppf), without scipy.stats

    h = float(stdtrit(a.size - 1, 1 - alpha / 2) * a.std(ddof=1) / math.sqrt(a.size))
    return m, m - h, m + h


def tabulate(runs: Any, alpha: float = 0.05) -> Any:
    """The sweep's table of ``runs`` (a DataFrame, one row per run: ``system``, ``algo``,
    ``seed``, optionally ``params``, ``pair``, ``checkpoint`` and ``wall_s``
    (:data:`RUN_COLUMNS`), and one column per metric): per system (and its ``params``, a
    column of the table too when the runs have it), algorithm and metric the number of
    runs ``n`` that measured it (a NaN is no measurement), the ``mean`` and its 1 - ``alpha`` t-interval over them (``lower``, ``upper``; :func:`t_interval`), that level
    (``ci_level`` = 1 - ``alpha``, e.g. 0.95) and the ``pairs`` its runs compare. :func:`sweep` makes its table.csv with it; runs of your own method,
    audited as the built-ins' checkpoints are, tabulate the same way (docs/training.md,
    "Your own method")."""
    import pandas as pd

    check_sweep_alpha(alpha)
    missing = [c for c in ("system", "algo", "seed") if c not in runs.columns]
    if missing and not runs.empty:
        raise ConfigError(f"runs: column(s) {missing} missing; tabulate needs one row per run "
                          "with system, algo, seed and the metrics.")
    metrics = [c for c in runs.columns if c not in RUN_COLUMNS]
    keys = ["system", "params", "algo"] if "params" in runs.columns else ["system", "algo"]
    table_rows = []
    if not runs.empty:
        for key, g in runs.groupby(keys, sort=False):
            pairs = pairs_cell(g["pair"].tolist() if "pair" in g else [])
            for m in metrics:
                vals = g[m].tolist()
                mean, lo, hi = t_interval(vals, alpha)
                n = sum(1 for v in vals if v == v)  # the runs the mean and interval are over
                table_rows.append({**dict(zip(keys, key, strict=True)), "metric": m,
                                   "n": n, "mean": mean, "lower": lo, "upper": hi,
                                   "ci_level": 1.0 - alpha, "pairs": pairs})
    return pd.DataFrame(table_rows, columns=[*keys, "metric", "n", "mean", "lower", "upper",
                                             "ci_level", "pairs"])

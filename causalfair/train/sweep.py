"""Training sweeps (docs/scale.md): every (system, algorithm, seed) is one task, run here, in
local worker processes or on Ray (:mod:`causalfair.backends`), and the results are
tabulated with means and confidence intervals over seeds.

A task trains exactly what ``causalfair train --system S --algo A --seed K`` trains (the
same :class:`~causalfair.train.TrainConfig`), so its numbers equal a separate run's. The
worker trains into a private temporary folder; a run on this machine (this process or
local worker processes) then writes its run folder itself, atomically and
:data:`RESULT` last, as soon as it finishes, so an interrupted sweep keeps the runs it
finished and ``existing="resume"`` skips them. A worker elsewhere (Ray) hands back the
files' bytes and the driver writes them when the sweep ends (the folder's layout:
:mod:`causalfair.train.sweep_io`).

The PPO family trains with a :class:`~causalfair.train.TrainConfig`, the population agents
(r-td3, l-ucbfair) with their own config (:func:`causalfair.train.population.make_config`,
what ``causalfair train`` makes): a run of either is the run ``causalfair train --system S
--algo A --seed K`` trains, bit for bit.

A run's ``pair`` names the groups its C, DPE, IPE, SPE and Lambda compare, the first minus
the second: with more than two groups the largest and smallest V^pi of its final audit,
which may differ from seed to seed; a table row whose runs compare different pairs lists
them all in its ``pairs`` column (its means then mix pairs). It is written as the two group
names, a JSON list (``["s+", "s-"]``, as a result's ``to_dict`` writes it and
:func:`~causalfair.engines.groups.resolve_pair` reads it): ``"A-B"`` is ambiguous when a
group's name holds a ``-``. A resumed sweep reads an earlier sweep's ``"A-B"`` by the
system's groups, and refuses it in one line when it names two pairs.

A sweep folder that already holds a sweep is refused unless ``existing="resume"`` (train
only the runs without a ``result.json`` of the same configuration, tabulate them with the
finished ones) or ``existing="force"`` (train every run again; ``OUT/runs/`` is removed
before the first run starts). A ``runs`` that is a file or a symbolic link, or holds one, is
refused: a sweep never follows a link out of its folder. One sweep at a time writes a
folder: a sweep holds ``OUT/.causalfair-sweep.lock`` (an exclusive ``flock``, released
when it ends or its process dies; its process id inside) from before it looks at the
folder's earlier sweep until its tables are written, and a second sweep started on the
same folder meanwhile (two ``--force`` runs of a CI matrix) is refused, naming the first
one's pid, before it removes or writes anything. The folder, resume and IO part (the
layout's names, :func:`write_run`, the resume check, the lock) is
:mod:`causalfair.train.sweep_io`; its names are importable from here too.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causalfair._io import atomic_write_bytes, fixed
from causalfair._markdown import md_escape
from causalfair._names import (  # defined there: `causalfair sweep --help` lists them
    POPULATION,  # the population agents' names (their own configs: train.population)
    SWEEP_ALGORITHMS,  # every algorithm a sweep trains: the PPO family and POPULATION
)
from causalfair._validation import check_weight, did_you_mean
from causalfair.backends import (
    ProcessBackend,
    SerialBackend,
    TaskError,
    available_cores,
    make_backend,
)
from causalfair.engines._mc_base import is_serial
from causalfair.errors import CausalfairError, ConfigError, OutputError, short
from causalfair.systems import make
from causalfair.systems.lending.settings import SETTINGS
from causalfair.train import TrainConfig, train
from causalfair.train import population as P
from causalfair.train.algorithms import REGISTRY, names
from causalfair.train.checkpoint import CHECKPOINT_NAME, prepare_run_folder
from causalfair.train.config import KL_FIELDS, LENDING_FIELDS
from causalfair.train.sweep_io import (  # the folder, resume, IO and table part
    LOCK,  # noqa: F401 - (re-exported: importable from here, as before the split)
    MARK,  # noqa: F401
    RESULT,
    RUN_FILES,
    check_runs_removable,
    check_sweep_alpha,
    csv_table,
    finished_run,
    pair_key,
    pair_text,
    param_text,
    params_cell,
    params_label,
    prepare_out,
    read_result,
    run_dir,
    system_params,
    t_interval,
    tabulate,
    update_result,
    write_run,
)

__all__ = ["SweepResult", "parse_seeds", "sweep", "system_params", "t_interval", "tabulate",
           "train_many", "write_run"]

#: What :func:`sweep` does with a folder holding an earlier sweep.
EXISTING = ("refuse", "resume", "force")
#: At most this many runs per sweep (a typo such as --seeds 0-100000 is refused).
MAX_RUNS = 10_000


def parse_seeds(text: str) -> list[int]:
    """``"0-19"``, ``"0,3,5-7"`` -> the seeds in order (duplicates refused)."""
    out: list[int] = []
    for part in str(text).split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a = int(lo)
            b = int(hi) if dash else a
        except ValueError:
            a = b = -1
        if a < 0 or b < a:
            raise ConfigError(f"seeds: bad value {part.strip()[:40]!r} in {short(text, 60)}; "
                              "expected seeds such as 0-19 or 0,3,5-7 (integers >= 0).")
        if len(out) + (b - a + 1) > MAX_RUNS:  # counted before the seeds are listed
            raise ConfigError(
                f"seeds: {short(text, 60)} names {len(out) + (b - a + 1)} seeds or more, over "
                f"the limit of {MAX_RUNS} runs per sweep; give a smaller range, e.g. 0-19 "
                "(docs/limits.md).")
        out.extend(range(a, b + 1))
    if len(set(out)) != len(out):
        raise ConfigError(f"seeds: {short(text, 60)} names a seed twice.")
    return out


def _fields(algo: str) -> set[str]:
    """The config fields a run of ``algo`` takes (``iterations`` for every algorithm)."""
    import dataclasses

    if algo in POPULATION:
        cls = P.RTD3Config if algo == "r-td3" else P.LUCBFairConfig
        return {f.name for f in dataclasses.fields(cls)} | {"iterations"}
    return {f.name for f in dataclasses.fields(TrainConfig)}


def _config(system: str, params: Mapping[str, Any], algo: str, seed: int,
            overrides: Mapping[str, Any], made: Any = None) -> Any:
    """The config of one run, as ``causalfair train`` makes it: a TrainConfig for the PPO
    family, a :class:`~causalfair.train.population.PopulationRun` for a population agent
    (``made``: the system, made). ``overrides`` go to the runs whose config has the field."""
    mine = _fields(algo)
    kw = {k: v for k, v in overrides.items() if k in mine}
    if algo in POPULATION:
        iterations = kw.pop("iterations", None)
        config = P.make_config(algo, seed, made.horizon, iterations, kw)
        return P.PopulationRun(algo, system, config, dict(made.params))
    if system not in SETTINGS:  # the lending trainer's fields go to the lending runs only
        kw = {k: v for k, v in kw.items() if k not in LENDING_FIELDS + KL_FIELDS}
    kw.update(algo=algo, seed=seed)
    if system in SETTINGS and not params:
        kw["setting"] = system
    else:
        kw.update(system=system, system_params=dict(params))
    return TrainConfig(**kw)


def _why_not(algo: str, system: Any) -> str | None:
    """Why ``algo`` does not train on ``system`` (None: it does), checked as the trainer
    checks it before a run writes anything. ``system`` None or a lending setting: the
    lending trainer, which trains every algorithm of the PPO family; the population agents
    train on replicator systems only (:class:`~causalfair.train.population.PopulationEnv`)."""
    if algo in POPULATION:
        reason = (f"{algo} trains on {REGISTRY[algo].systems} only (a population agent: one "
                  "threshold per group on the replicator equation)")
        if system is None or system.id in SETTINGS:
            return reason
        try:
            P.PopulationEnv(system)
        except ConfigError:
            return reason
        except Exception:  # noqa: BLE001 - a simulator that breaks: its run fails and says so
            return None
        return None
    if system is None or system.id in SETTINGS:
        return None
    if algo not in names(generic=True):
        return (f"{algo} trains on {REGISTRY[algo].systems} only (the lending trainer, which "
                f"reads lending's ground truth: the qualified role and the lending population)")
    if algo == "ppo-cb":  # its Lambda term needs features to pair units by
        from causalfair.train.generic import no_features_for_lambda

        try:
            why = no_features_for_lambda("ppo-cb", system)
        except Exception:  # noqa: BLE001 - a system that breaks: its run fails and says so
            why = None
        if why is not None:
            return why.removeprefix("algo: ").rstrip(".")
    if REGISTRY[algo].fair_advantage:
        from causalfair.train.fair_signals import check_fair_signals

        try:
            check_fair_signals(algo, system, system.make_simulator())
        except ConfigError as exc:
            return str(exc).removeprefix("algo: ").rstrip(".")
        except Exception:  # noqa: BLE001 - a simulator that breaks: its run fails and says so
            return None
    return None


def _check_one_horizon(overrides: Mapping[str, Any], pairs: Sequence[tuple[str, str]],
                       made: Mapping[str, Any]) -> None:
    """Refuse a ``horizon`` override that the population agents of the sweep would not
    take: it is a :class:`~causalfair.train.TrainConfig` field, while R-TD3 and L-UCBFair
    train and are audited over their system's horizon, so one table would compare
    utilities and effects summed over different horizons."""
    T = overrides.get("horizon")
    if T is None:
        return
    for sy, a in pairs:
        if a in POPULATION and made[sy] is not None and made[sy].horizon != T:
            raise ConfigError(
                f"overrides: horizon={T} goes to the PPO family only (a TrainConfig field), "
                f"while {a} on {sy} trains and is audited over the system's horizon "
                f"({made[sy].horizon}): the table's utility, C, DPE, IPE and SPE would sum "
                f"different horizons; give every run the horizon with --param horizon={T} "
                "(the system's own), or sweep the population agents separately.")


def _seed_list(seeds: Sequence[int]) -> str:
    """Seeds as ``--seeds`` takes them: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    runs: list[list[int]] = []
    for k in sorted(set(seeds)):
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _train_config(task: tuple[Any, ...]) -> dict[str, Any]:
    """One run (``task``: its config, the search path and optionally the run folder to
    write), in a private temporary folder; returns its final metrics, wall time, history
    (the trainer's rows, one per iteration: :func:`train_many` makes the DataFrame, so a
    worker never imports pandas) and files' bytes. Given a run folder, it writes
    the run there as it finishes (:func:`write_run`) and hands back no bytes
    (``written``: True)."""
    import tempfile

    config, search_path, *rest = task
    dest = rest[0] if rest else None
    system = None
    if config.system:
        system = make(config.system, search_path=search_path, **dict(config.system_params))
    with tempfile.TemporaryDirectory(prefix="causalfair-sweep-") as tmp:
        run = Path(tmp) / "run"
        if isinstance(config, P.PopulationRun):  # what causalfair train runs for it
            prepare_run_folder(run, resume=False)
            res = P.run_agent(config, system, run)
            done = {"metrics": dict(res["metrics"]), "wall_s": float(res["wall_s"]),
                    "history": res["history"], "pair": pair_text(res["pair"])}
        else:
            res = train(config, out=run, system=system)
            done = {"metrics": dict(res.metrics), "wall_s": float(res.wall_s),
                    "history": res.history_rows(), "pair": _pair_of(res, config, system)}
        files = {name: (run / name).read_bytes() for name in RUN_FILES
                 if (run / name).is_file()}
    out = {**done, "files": files}
    if dest is not None:  # this run lands now: an interrupt later does not lose it
        write_run(Path(dest), out, config)
        out.update(files={}, written=True)
    return out


def run_pair(res: Any, config: Any, system: Any) -> tuple[str, ...]:
    """The pair of groups a run's final metrics compare, as two names: the generic
    trainer's (its audit's pair), else (the lending trainer) the system's two groups in
    order; what a sweep's runs.csv and `causalfair train` name."""
    # (its "pair", "A-B", is ambiguous: a "-" in a name)
    pair = (getattr(res, "extra", None) or {}).get("pair_groups")
    if pair is None:
        pair = (system if system is not None else make(config.setting)).groups[:2]
    return tuple(str(g) for g in pair)


def _pair_of(res: Any, config: Any, system: Any) -> str:
    """:func:`run_pair` as :func:`pair_text` writes it."""
    return pair_text(run_pair(res, config, system))


def _backend(backend: Any) -> Any:
    """The backend object of ``backend`` (None: this process; a name or an object)."""
    if is_serial(backend):
        return SerialBackend()
    if isinstance(backend, str):
        return make_backend(available_cores() if backend == "process" else 1, backend)
    return backend


def train_many(configs: Sequence[Any], *, backend: Any = None,
               search_path: str | os.PathLike[str] = ".",
               folders: Sequence[str | os.PathLike[str] | None] | None = None) -> list[Any]:
    """Train each :class:`~causalfair.train.TrainConfig` as one task on ``backend`` (None:
    this process; a name or a :mod:`causalfair.backends` object; ``"process"``: one worker
    per core this process may use, :func:`causalfair.backends.available_cores`). Returns, in the
    configs' order, ``{"metrics", "wall_s", "history", "files"}`` per run (``files``: the
    bytes of checkpoint.pt, metrics and config.json, for the caller to write), or a
    :class:`~causalfair.backends.TaskError` for a run that raised. ``folders`` (one per
    config, None for none; for tasks on this machine): each run writes its files and
    :data:`RESULT` there itself as it finishes (:func:`write_run`), and its ``files``
    come back empty with ``written`` True."""
    backend = _backend(backend)
    dests = [None] * len(configs) if folders is None else [
        None if f is None else str(Path(f).resolve()) for f in folders]
    results = backend.map(_train_config, [(c, str(search_path), d)
                                          for c, d in zip(configs, dests, strict=True)])
    for r in results:
        if isinstance(r, dict) and isinstance(r.get("history"), list):
            import pandas as pd

            r["history"] = pd.DataFrame(r["history"])
    return results


@dataclass
class SweepResult:
    """What :func:`sweep` returns: ``runs`` (one row per run) and ``table`` (mean, CI
    lower and upper over seeds per system, algorithm and metric, and the ``pairs`` of groups
    its runs compare), both pandas DataFrames; ``failed``: (system, algo, seed, message) of
    the runs that raised."""

    runs: Any
    table: Any
    failed: list[tuple[str, str, int, str]] = field(default_factory=list)
    out: Path | None = None
    alpha: float = 0.05
    #: How many runs a resumed sweep took from the earlier sweep (not trained again).
    reused: int = 0
    #: (system, algo, why) of the algorithms that do not train on a system of the sweep
    #: (checked before any run: no run, no failure; listed under table.md).
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    #: A resumed sweep: the folders of finished runs under ``out/runs`` that this sweep does
    #: not ask for (other seeds, algorithms or systems), left out of its tables.
    left_out: list[Path] = field(default_factory=list)
    #: Each system's factory parameters (:func:`system_params`; runs.csv's ``params``).
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    def params_note(self) -> str | None:
        """One line naming the parameters that went to some systems of the sweep only
        (:func:`system_params`); None if every parameter went to every system."""
        keys = dict.fromkeys(k for p in self.params.values() for k in p)
        parts = []
        for key in keys:
            to = [sy for sy, p in self.params.items() if key in p]
            if len(to) < len(self.params):
                not_to = [sy for sy in self.params if sy not in to]
                parts.append(f"--param {param_text(key, self.params[to[0]][key])} went to "
                             f"{', '.join(to)} only ({', '.join(not_to)}: not a parameter of "
                             "its factory)")
        return "; ".join(parts) + "." if parts else None

    def left_out_note(self) -> str | None:
        """One line naming the finished runs a resumed sweep left out of its tables, and the
        ``--seeds`` (``--algo``, ``--system``) that would tabulate them too; None if none."""
        if not self.left_out:
            return None
        asked = self.runs if not self.runs.empty else None
        seeds = set() if asked is None else set(int(k) for k in asked["seed"])
        algos = [] if asked is None else list(dict.fromkeys(asked["algo"]))
        systems = [] if asked is None else list(dict.fromkeys(asked["system"]))
        for folder in self.left_out:
            try:
                doc = read_result(folder)
                cfg = doc.get("requested", doc["config"])
                sysid = cfg.get("system") or cfg.get("setting")
            except (CausalfairError, KeyError, TypeError, ValueError, AttributeError):
                sysid = None
            seeds.add(int(folder.name.removeprefix("seed-")))
            algos += [folder.parent.name] if folder.parent.name not in algos else []
            if sysid and sysid not in systems:
                systems.append(sysid)
        n = len(self.left_out)
        return (f"{n} finished run{'s' if n > 1 else ''} in {self.out / 'runs'} "
                f"{'are' if n > 1 else 'is'} not asked for by this sweep and left out of its "
                f"tables (e.g. {self.left_out[0].relative_to(self.out)}); to tabulate "
                f"{'them' if n > 1 else 'it'} with this sweep's runs (without training "
                f"{'them' if n > 1 else 'it'} again), resume with --algo {','.join(algos)} "
                f"--seeds {_seed_list(seeds)} --system {','.join(systems)}.")

    def to_markdown(self, metrics: Sequence[str] = ("utility", "C", "DPE", "IPE", "SPE",
                                                    "Lambda")) -> str:
        level = f"{100 * (1 - self.alpha):g}%"
        lines = ["| system | algo | seeds | " + " | ".join(
            f"{m} (mean [{level} t-interval])" for m in metrics) + " | pairs |",
                 "|---|---|---|" + "---|" * len(metrics) + "---|"]
        mixed = False
        keys = ["system", "params", "algo"] if "params" in self.table else ["system", "algo"]
        for key, g in self.table.groupby(keys, sort=False):
            sysid, algo = key[0], key[-1]
            label = sysid + params_label(key[1] if len(key) == 3 else "{}")
            cells = []
            for m in metrics:
                row = g[g["metric"] == m]
                if row.empty:
                    cells.append("n/a")
                    continue
                r = row.iloc[0]
                ci = ("" if math.isnan(r["lower"]) else
                      f" [{fixed(r['lower'], 4)}, {fixed(r['upper'], 4)}]")
                cells.append(f"{fixed(r['mean'], 4)}{ci}")
            pairs = str(g["pairs"].iloc[0]) if "pairs" in g else "n/a"
            if "pair" in self.runs:
                runs = self.runs[(self.runs["system"] == sysid) & (self.runs["algo"] == algo)
                                 & ((self.runs["params"] == key[1]) if len(key) == 3 else True)]
                mixed = mixed or len({pair_key(p) for p in runs["pair"]}) > 1
            lines.append(f"| {md_escape(label)} | {algo} | {int(g['n'].iloc[0])} | "  # user text:
                         + " | ".join(cells) + f" | {md_escape(pairs)} |")  # md_escape'd
        lines += ["", f"Each cell: the mean over the training seeds (one run per seed) and the "
                  f"{level} t-interval of that mean over the seeds (runs audited by Monte "
                  "Carlo: their audit noise included).", "",
                  "pairs: the two groups each run's C, DPE, IPE, SPE and Lambda compare, "
                  "[first, second]: the first minus the second (runs.csv names each run's)."
                  + (" A row listing several pairs averages runs that compare different "
                     "pairs (with more than two groups a run compares its largest and smallest "
                     "V^pi): read its C per run in runs.csv." if mixed else "")]
        if self.skipped:
            lines += ["", "Not trained (the algorithm does not apply to the system; checked "
                      "before any run):", ""]
            lines += ["- " + md_escape(f"{a} on {sy}: {why}.") for sy, a, why in self.skipped]
        if self.failed:  # (the folder is what an unattended sweep leaves: not stderr only)
            lines += ["", "Failed (left out of the table; --resume trains them again):", ""]
            lines += ["- " + md_escape(f"{algo} seed {seed} on {sysid}: {msg}")
                      for sysid, algo, seed, msg in self.failed]
        return "\n".join(lines) + "\n"


def sweep(algos: Sequence[str], seeds: Sequence[int], systems: Sequence[str] = ("lending-1",), *,
          params: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None,
          out: str | os.PathLike[str] | None = None, backend: Any = None, alpha: float = 0.05,
          search_path: str | os.PathLike[str] = ".", existing: str = "refuse") -> SweepResult:
    """Train every (system, algorithm, seed); tabulate the final metrics.

    An algorithm or system named twice is trained once (its runs are not counted as two
    seeds' runs); a seed named twice is refused (:func:`parse_seeds`).

    ``params``: keyword arguments of the systems' factories, each for every system whose
    factory takes it (:func:`system_params`; one that no system takes is refused); a run's
    system parameters are part of its configuration (runs.csv's ``params``; a resumed run
    trained with others is refused).

    ``overrides``: further config fields (e.g. ``{"iterations": 50}``), each for the runs
    whose config has it (:class:`~causalfair.train.TrainConfig` for the PPO family,
    :class:`~causalfair.train.population.RTD3Config` / ``LUCBFairConfig`` for r-td3 /
    l-ucbfair, whose ``iterations`` are training episodes, as on ``causalfair train``); a
    field no run of the sweep has is refused. ``backend``: None (this process), a name ("process",
    "ray") or a :mod:`causalfair.backends` object. ``out``: the sweep folder (module
    docstring); None writes nothing. Runs that raise are listed in ``failed`` (the
    others still finish and are tabulated). ``alpha``: the t-intervals' level 1 - alpha.
    ``existing``: what an ``out`` holding an earlier sweep gets (module docstring):
    ``"refuse"`` (:class:`OutputError`), ``"resume"`` or ``"force"``.
    """
    algos = list(algos)
    bad = [a for a in algos if a not in SWEEP_ALGORITHMS]
    if not algos or bad:
        other = (f" ({bad[0]} is trained one run at a time: causalfair train --algo {bad[0]} "
                 "--seed K)") if bad and bad[0] in REGISTRY else ""
        raise ConfigError(f"algos: bad value {bad[0] if bad else algos!r}; allowed values: "
                          f"{', '.join(SWEEP_ALGORITHMS)}{other}.")
    algos = list(dict.fromkeys(algos))  # named twice: trained once, as a system named twice
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ConfigError("seeds: give at least one seed, e.g. 0-4.")
    if not systems:
        raise ConfigError("systems: give at least one system id, e.g. lending-1.")
    check_sweep_alpha(alpha)
    if existing not in EXISTING:
        raise ConfigError(f"existing: bad value {existing!r}; allowed values: "
                          f"{', '.join(EXISTING)}.")
    systems = list(dict.fromkeys(systems))
    n_runs = len(algos) * len(seeds) * len(systems)
    if n_runs > MAX_RUNS:
        raise ConfigError(f"sweep: {n_runs} runs is more than {MAX_RUNS}; split the sweep.")
    overrides = dict(overrides or {})
    for key in ("algo", "seed", "setting", "system", "system_params"):
        if key in overrides:
            raise ConfigError(f"overrides: {key!r} is set by the sweep itself; use the "
                              "algos, seeds and systems arguments.")
    fields = set().union(*(_fields(a) for a in algos))
    for key in ("beta_c", "beta_lambda"):  # a weight no objective of the sweep has
        if key in overrides and not any(key in REGISTRY[a].weights for a in algos):
            check_weight(overrides[key], key, ConfigError)  # a bad value first, as train
            takes = [a for a in SWEEP_ALGORITHMS if key in REGISTRY[a].weights]
            raise ConfigError(
                f"overrides: {key!r} weighs a penalty that none of this sweep's algorithms "
                f"({', '.join(algos)}) has; it is used by {' and '.join(takes)}: drop it, "
                "or sweep one of those (as causalfair train refuses it).")
    for key in overrides:  # each field goes to the runs whose config has it
        if key not in fields:
            raise ConfigError(
                f"overrides: {key!r} is a field of no config of this sweep's algorithms "
                f"({', '.join(algos)}); {did_you_mean(key, sorted(fields))}"
                f"fields: {', '.join(sorted(fields))}.")
    lending_only = [k for k in overrides if k in LENDING_FIELDS + KL_FIELDS]
    if lending_only and not any(sy in SETTINGS for sy in systems):
        raise ConfigError(
            f"overrides: {lending_only[0]!r} is a field of the lending trainer only (lending-1, "
            f"lending-2, lending-3), and no system of this sweep ({', '.join(systems)}) is one "
            "of them: drop it (a run on another system would not read it).")
    given = system_params(systems, params or {}, search_path)  # each system's own
    skipped: list[tuple[str, str, str]] = []
    made: dict[str, Any] = {}  # the systems (the population agents' configs read them)
    for sysid in systems:  # every system and configuration is checked before any run starts
        system = None
        if sysid not in SETTINGS or given[sysid]:
            system = make(sysid, search_path=search_path, **given[sysid])
        made[sysid] = system
        if overrides.get("constraints") and (system is None or system.id in SETTINGS):
            raise ConfigError(  # (train() refuses it too, once per run)
                f"constraints: {sysid} is a lending setting, trained without constraints "
                f"(its fixed betas only); the lending settings are tabular: repair under "
                f"{', '.join(map(str, overrides['constraints']))} with the exact constrained "
                "repair (causalfair train --algo exact --constraint ..., one run), or sweep "
                "without --set constraints.")
        for a in algos:
            why = _why_not(a, system)  # a method that does not apply: one line, no runs
            if why is not None:
                skipped.append((sysid, a, why))
                continue
            try:
                _config(sysid, given[sysid], a, seeds[0], overrides, system)
            except TypeError as exc:
                raise ConfigError(f"overrides: {exc}") from None
    if len(skipped) == len(algos) * len(systems):
        raise ConfigError("sweep: no algorithm of this sweep trains on its systems: " + "; ".join(
            f"{a} on {sy}: {why}" for sy, a, why in skipped) + ".")
    off = {(sy, a) for sy, a, _ in skipped}
    combos = [(s, a, k) for s in systems for a in algos for k in seeds if (s, a) not in off]
    _check_one_horizon(overrides, [(sy, a) for sy in systems for a in algos
                                   if (sy, a) not in off], made)
    out_path = Path(out) if out is not None else None
    configs = [_config(sy, given[sy], a, k, overrides, made[sy]) for sy, a, k in combos]
    groups = {sy: tuple((sys_ or make(sy)).groups) for sy, sys_ in made.items()}
    lock = prepare_out(out_path, existing) if out_path is not None else None
    try:  # the folder is this sweep's until its tables are written
        return _sweep_into(out_path, existing, combos, configs, backend, search_path, alpha,
                           skipped, groups, given)
    finally:
        if lock is not None:
            os.close(lock)


def _checkpoint(folder: Path, algo: str) -> Path:
    """The checkpoint file of run folder ``folder``: a population agent's ``checkpoint.npz``,
    else the PPO family's ``checkpoint.pt`` (:data:`RUN_FILES`)."""
    return folder / ("checkpoint.npz" if algo in POPULATION else CHECKPOINT_NAME)


def _with_utility(folder: Path, config: Any, result: dict[str, Any],
                  search_path: Any) -> dict[str, Any]:
    """A finished run's ``result`` (:func:`finished_run`), with the ``utility`` and
    ``Lambda`` of a population run an earlier causalfair finished without them (its
    ``result.json`` had the agent's own metrics only): its ``checkpoint.npz`` audited as
    :func:`~causalfair.train.population.run_agent` audits (the same numbers), written back
    into ``result.json``, so the table's utility column is every algorithm's. A run whose
    checkpoint cannot be read keeps its n/a."""
    if not isinstance(config, P.PopulationRun) or "utility" in result["metrics"]:
        return result
    try:
        system = make(config.system, search_path=search_path, **dict(config.system_params))
        audited = P.audit_checkpoint(_checkpoint(folder, config.algo), system)
    except (CausalfairError, OSError):
        return result
    result = {**result, "metrics": {**result["metrics"], **audited}}
    update_result(folder, result["metrics"])
    return result


def _sweep_into(out_path: Path | None, existing: str, combos: list[tuple[str, str, int]],
                configs: list[Any], backend: Any, search_path: Any,
                alpha: float, skipped: list[tuple[str, str, str]],
                groups: Mapping[str, Sequence[str]],
                given: Mapping[str, Mapping[str, Any]]) -> SweepResult:
    """:func:`sweep` once its arguments are checked and its folder (if any) is taken."""
    done: dict[int, dict[str, Any]] = {}
    left_out: list[Path] = []
    if out_path is not None and existing == "resume":
        for i, ((sy, a, k), c) in enumerate(zip(combos, configs, strict=True)):
            folder = run_dir(out_path, sy, a, k)
            if r := finished_run(folder, c, groups[sy]):
                done[i] = _with_utility(folder, c, r, search_path)
        mine = {run_dir(out_path, *c) for c in combos}
        left_out = sorted(f.parent for f in (out_path / "runs").glob(f"*/*/seed-*/{RESULT}")
                          if f.parent not in mine)

    todo = [i for i in range(len(combos)) if i not in done]
    if out_path is not None and existing == "force" and (out_path / "runs").exists():
        import shutil  # the earlier sweep's runs go (no link below: prepare_out; no file of
        # the user's: check_runs_removable)

        check_runs_removable(out_path / "runs")

        try:
            shutil.rmtree(out_path / "runs")
        except OSError as exc:
            raise OutputError(f"{exc.filename or out_path / 'runs'}: cannot remove the earlier "
                              f"sweep's runs ({exc.strerror}); remove them yourself, or choose "
                              "another --out.") from None
    backend = _backend(backend)
    # a run on this machine writes its folder as it finishes (an interrupted sweep keeps
    # it for --resume); a worker elsewhere hands its files back, written below
    local = out_path is not None and isinstance(backend, (SerialBackend, ProcessBackend))
    trained = iter(train_many([configs[i] for i in todo], backend=backend,
                              search_path=search_path, folders=[
                                  run_dir(out_path, *combos[i]) if local else None
                                  for i in todo]))
    results = [done[i] if i in done else next(trained) for i in range(len(combos))]
    import pandas as pd  # (after the runs: workers start without waiting for it)

    rows, failed = [], []
    for i, ((sysid, algo, seed), r) in enumerate(zip(combos, results, strict=True)):
        if isinstance(r, TaskError):
            # an input error (user code included) says what broke itself; a crash keeps its kind
            failed.append((sysid, algo, seed,
                           r.message if r.input_error else f"{r.kind}: {r.message}"))
            continue
        where = {} if out_path is None else {  # the file this row's numbers are of
            "checkpoint": _checkpoint(run_dir(Path("."), sysid, algo, seed), algo).as_posix()}
        rows.append({"system": sysid, "params": params_cell(given[sysid]), "algo": algo,
                     "seed": seed, "pair": r.get("pair"),
                     **where, "wall_s": r["wall_s"],
                     **{k: v for k, v in r["metrics"].items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)}})
        if out_path is not None and i not in done and not r.get("written"):
            write_run(run_dir(out_path, sysid, algo, seed), r, configs[i])
    runs = pd.DataFrame(rows)
    table = tabulate(runs, alpha)
    res = SweepResult(runs=runs, table=table, failed=failed, out=out_path, alpha=alpha,
                      reused=len(done), skipped=skipped, left_out=left_out,
                      params={sy: dict(p) for sy, p in given.items()})
    if out_path is not None:
        for name, text in (("runs.csv", csv_table(runs)),
                           ("table.csv", csv_table(table)),
                           ("table.md", res.to_markdown())):
            atomic_write_bytes(out_path / name, lambda fh, s=text: fh.write(s.encode("utf-8")))
    return res

"""``causalfair train``: retrain a policy with PPO or one of its fair variants."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from causalfair._io import (
    REPAIR_SCHEMA_VERSION,
    TRAIN_SCHEMA_VERSION,
    atomic_write_bytes,
    fixed,
    to_jsonable,
    versioned,
)
from causalfair._names import (  # (light: off the trainers)
    REPLICATOR_SYSTEMS,
    SETTINGS,
    get,
    names,
)
from causalfair.backends import resolve_device
from causalfair.commands._system import flag_given, make_system, one_setting, parse_params
from causalfair.errors import ConfigError, UsageError
from causalfair.thresholds import parse_constraint

ALGOS = names(cli=True)  # the registry of causalfair.train.algorithms


# The trainers and the systems load when a command runs, not for `causalfair train --help`:
# these two are looked up here at each call (tests replace them).
def train(config: Any, **kwargs: Any) -> Any:
    """:func:`causalfair.train.train`."""
    from causalfair.train import train as run_training

    return run_training(config, **kwargs)


def metrics_pair(res: Any, config: Any, system: Any) -> tuple[str, ...]:
    """:func:`causalfair.train.sweep.run_pair`: the groups a run's metrics compare."""
    from causalfair.train.sweep import run_pair

    return run_pair(res, config, system)


def make(sid: str, search_path: Any = ".", **params: Any) -> Any:
    """:func:`causalfair.systems.make`, a refusal of a --param key named ``--param KEY``."""
    return make_system(sid, search_path, params)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a policy (PPO, PPO-C, PPO-Cb, A-PPO, F-PPO-L, F-PPO, ELBERT-PO; R-TD3, "
             "L-UCBFair on replicator systems) or repair one under constraints (--algo exact)",
        description=(
            "Train a policy on any system (lending-1 by default) with PPO (KL-penalty PPO on "
            "lending-1/2/3, clipped PPO on the others) and a fairness objective, writing checkpoints the audit loads (causalfair decompose "
            "--checkpoint OUT/checkpoint.pt) and per-iteration metrics (OUT/metrics.jsonl; "
            "on lending-1/2/3 also metrics.csv and the resume state) with C, DPE, IPE, "
            "SPE (and Lambda) every "
            "--eval-every iterations: from the exact engine on tabular systems, by Monte "
            "Carlo on the others. "
            "--algo exact with --constraint instead maximises utility subject to the "
            "constraints on the exact engine's numbers (tabular systems; docs/training.md). "
            "--algo r-td3 / l-ucbfair train the population agents of Yin et al. (NeurIPS 2023) "
            f"on any replicator system ({', '.join(REPLICATOR_SYSTEMS)}) "
            "(one threshold per group; OUT/checkpoint.npz, per-episode OUT/metrics.jsonl)."
        ),
        epilog=(
            "Example: causalfair train --setting lending-1 --algo ppo-cb --seed 0 "
            "--iterations 100 --out runs/ppo-cb-s0   (continue a killed run of lending-1/2/3: "
            "add --resume)\n"
            "Repair: causalfair train --setting lending-1 --algo exact --constraint abs_C<=0.05 "
            "--constraint Lambda<=0.14 --init-checkpoint ck.pt --out runs/repair\n"
            f"Population agents: causalfair train --system {REPLICATOR_SYSTEMS[0]} "
            "--algo l-ucbfair --iterations 300 "
            "--out runs/lucb   (their config fields: --set FIELD=VALUE)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--system", metavar="ID",
                   help="system to train on: a registered id or your 'module:callable' factory "
                   "(default: lending-1). ppo, ppo-c and ppo-cb train on any system (ppo-cb's "
                   "benefits by forks without a two-action tabular model), a-ppo, f-ppo-l and "
                   "elbert-po on systems reporting supply and "
                   "demand (attention, infectious), r-td3 and l-ucbfair on any replicator "
                   f"system ({', '.join(REPLICATOR_SYSTEMS)})")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="keyword argument for the system's factory (repeatable)")
    p.add_argument("--search-path", metavar="DIR", default=".",
                   help="folder searched first for a 'module:callable' factory (default: .)")
    p.add_argument("--setting", choices=SETTINGS, default=None,
                   help="shorthand for --system lending-N")
    p.add_argument("--algo", choices=ALGOS, default="ppo-c", help="objective (default: ppo-c)")
    p.add_argument("--constraint", action="append", default=[], metavar="Q<=V",
                   help="with --algo exact, or any PPO algo on a non-lending system "
                   "(PPO-Lagrangian on top of the algo's own penalty, as a spec's [retrain] "
                   "imposes its thresholds): a threshold to meet, e.g. abs_C<=0.05 or "
                   "Lambda<=0.14 (repeatable; quantities as in an audit spec's [thresholds])")
    p.add_argument("--pair", metavar="A-B", default=None,
                   help="the two groups the run compares, e.g. B-A (the first minus the "
                   "second): its audits, its C and Lambda penalties and its constraints on "
                   "plain keys (abs_C<=...) are of that pair (default: each audit's own, with "
                   "more than two groups the largest and smallest V^pi; as an audit spec's "
                   "[engine] pair, which gate --retrain passes on). The lending settings take "
                   "their two groups in either order (same training). Also --set pair=...")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--iterations", type=int, default=None, metavar="N",
                   help="policy iterations (default: 100); with --algo exact the rounds of "
                   "the augmented Lagrangian (default: 30); with r-td3 / l-ucbfair training "
                   "episodes (r-td3 rounds it up to whole rounds of its --set envs=E "
                   "populations; defaults: 20,000 steps / 500 episodes)")
    p.add_argument("--out", required=True, metavar="DIR", help="run folder")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its last checkpoint (lending-1, "
                        "lending-2, lending-3; refused on other systems, whose runs hold no "
                        "resume state: run again, same seed, same weights)")
    p.add_argument("--init-checkpoint", metavar="PATH",
                   help="warm start the policy from a causalfair checkpoint: its own network "
                   "(hidden sizes, activation) is trained; its inputs and actions must be the "
                   "system's")
    p.add_argument("--env", choices=("individual", "population"), default="individual",
                   help="training environment (default: individual, the paper's MDP)")
    p.add_argument("--horizon", type=int, default=None, metavar="T",
                   help="decision epochs per episode and audit horizon (default: the "
                   "system's own, 20 on the lending settings; with r-td3 / l-ucbfair set it "
                   "by --param horizon=T)")
    p.add_argument("--levels", type=int, default=7, metavar="K", help="levels (default: 7)")
    p.add_argument("--individuals", type=int, default=None, metavar="N",
                   help="individuals (or population envs) per rollout (default: 512)")
    p.add_argument("--beta-c", type=float, default=None,
                   help="PPO-C/Cb weight of C^2, a number >= 0 (refused with another --algo)")
    p.add_argument("--beta-lambda", type=float, default=None,
                   help="PPO-Cb weight of Lambda, a number >= 0 (refused with another --algo)")
    p.add_argument("--eval-every", type=int, default=None, metavar="K",
                   help="audit every K iterations: exact on a tabular system, else Monte "
                        "Carlo with audit_n per group (default: 5)")
    p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                   help="write OUT/checkpoint.pt every N iterations and at the end "
                        "(default: 10); Ctrl-C leaves the last one")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any other TrainConfig field, VALUE parsed as JSON (repeatable)")
    p.add_argument("--device", default="cpu", metavar="DEV",
                   help="where the PPO networks train: cpu (default), cuda (cuda:N) or auto "
                   "(the GPU when torch sees one, except for the lending trainer, whose "
                   "networks are evaluated on the (group, level) grid: the CPU); the simulator "
                   "stays numpy on the CPU and each iteration's batch moves to the GPU once "
                   "(docs/training.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    p.add_argument("--json", action="store_true",
                   help="print the final metrics as JSON (docs/schema/train.schema.json; "
                   "'trainer' names its shape: ppo, repair or population)")
    p.set_defaults(run=run)


def parse_set(items: list[str], config: Any = None) -> dict[str, Any]:
    """``--set FIELD=VALUE`` options as keyword arguments of the dataclass ``config``
    (default: TrainConfig) or of any of a tuple of them (a sweep's algorithms' configs),
    JSON values where they parse, else strings; a name that is not one of its fields is
    refused, naming the closest field and all of them."""
    import dataclasses
    import difflib

    from causalfair._safe_read import read_option_value
    from causalfair.train import TrainConfig

    config = TrainConfig if config is None else config
    classes = config if isinstance(config, tuple) else (config,)
    fields = list(dict.fromkeys(f.name for c in classes for f in dataclasses.fields(c)))
    out: dict[str, Any] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"--set: expected FIELD=VALUE, got {item!r}.")
        name = name.strip()
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(f"--set {name[:40]}: not a field of "
                             f"{' or '.join(c.__name__ for c in classes)}; {hint}"
                             f"fields: {', '.join(fields)}.")
        out[name] = read_option_value(value, f"--set {name[:40]}", UsageError)
    return out


#: TrainConfig's fields that a flag of ``causalfair train`` sets: errors name the flag.
FIELD_FLAGS = {"algo": "--algo", "setting": "--setting", "seed": "--seed",
               "iterations": "--iterations", "env": "--env", "horizon": "--horizon",
               "n_levels": "--levels", "n_individuals": "--individuals", "beta_c": "--beta-c",
               "beta_lambda": "--beta-lambda", "eval_every": "--eval-every",
               "checkpoint_every": "--checkpoint-every", "pair": "--pair"}
#: Every config field a flag of ``train`` or ``sweep`` also names, as (flag, its dest):
#: FIELD_FLAGS', the global ``--threads``, and ``train``'s --constraint, --system, --param.
SETTING_FLAGS = {**{field: (flag, flag[2:].replace("-", "_")) for field, flag in
                    FIELD_FLAGS.items()},
                 "n_levels": ("--levels", "levels"), "n_individuals": ("--individuals",
                                                                       "individuals"),
                 "threads": ("--threads", "threads"), "constraints": ("--constraint",
                                                                      "constraint"),
                 "system": ("--system", "system"), "system_params": ("--param", "param")}


def flag_value(args: argparse.Namespace, field: str) -> Any:
    """The value the flag of ``field`` (:data:`SETTING_FLAGS`) gave, as the field's."""
    dest = SETTING_FLAGS[field][1]
    value = getattr(args, dest, None)
    if field == "constraints":
        return list(value or ())
    if field == "system_params":
        return parse_params(value or [])
    return value


def refuse_given_twice(args: argparse.Namespace, sets: dict[str, Any],
                       fields: Any = None) -> dict[str, Any]:
    """The one rule (:func:`causalfair.commands._system.one_setting`) for every config
    field of ``sets`` (``--set FIELD=``) that a flag also names (``fields``: those of
    :data:`SETTING_FLAGS` the command has; default: all), in ``train`` and ``sweep``: a
    flag the user gave and ``--set`` with another value are refused (the last word used to
    win silently: ``--seed 3 --set seed=5`` trained seed 5, ``--iterations 1 --set
    iterations=3`` 3); a flag left at its default never overrides ``--set``. Returns the
    fields the flags gave (given by the user), for the config."""
    out: dict[str, Any] = {}
    for field in (SETTING_FLAGS if fields is None else fields):
        flag, dest = SETTING_FLAGS[field]
        if not hasattr(args, dest) or not flag_given(args, dest):
            if field in sets:
                one_setting((f"--set {field}", True, sets[field]))
            continue
        out[field] = one_setting((flag, True, flag_value(args, field)),
                                 (f"--set {field}", field in sets, sets.get(field)))
    return out


def check_weight_flags(args: argparse.Namespace, algo: str, sets: dict[str, Any]) -> None:
    """``--beta-c`` / ``--beta-lambda`` (or ``--set beta_c=...``): a weight >= 0 (the check
    of TrainConfig and of a spec's [retrain] betas), and one that ``algo``'s objective uses
    (``ppo`` ignores both, ``ppo-c`` ``--beta-lambda``): refused otherwise, as the flags
    that a population agent does not use are."""
    from causalfair._validation import check_weight

    for field, flag in (("beta_c", "--beta-c"), ("beta_lambda", "--beta-lambda")):
        for given, value in ((flag, getattr(args, field)), (f"--set {field}", sets.get(field))):
            if value is None:
                continue
            check_weight(value, field if given.startswith("--set") else given, UsageError)
            if field not in get(algo).weights:
                takes = [a for a in ALGOS if field in get(a).weights]
                raise UsageError(f"{given}: not used by --algo {algo} (its objective has no "
                                 f"such penalty); it weighs the penalty of "
                                 f"{' and '.join(takes)}: drop it, or choose one of those.")


def build_config(args: argparse.Namespace):
    """The TrainConfig the command line describes; an invalid value is one line naming
    the flag that gave it (``--individuals``, not ``n_individuals``; ``--set FIELD``'s
    errors name FIELD)."""
    from causalfair.train import TrainConfig

    kw = {"algo": args.algo, "setting": args.setting or "lending-1", "seed": args.seed,
          "iterations": 100 if args.iterations is None else args.iterations,
          "env": args.env, "horizon": args.horizon, "n_levels": args.levels}
    opt = {"n_individuals": args.individuals, "beta_c": args.beta_c,
           "beta_lambda": args.beta_lambda, "eval_every": args.eval_every,
           "checkpoint_every": args.checkpoint_every, "pair": args.pair}
    kw.update({k: v for k, v in opt.items() if v is not None})
    sets = parse_set(args.set)
    flags = refuse_given_twice(args, sets)
    if "threads" in flags:  # `causalfair --threads N train`: TrainConfig.threads, the one
        kw["threads"] = flags["threads"]  # count training uses (it was left at 1)
    # the lending settings' levels and interest: also a --param of the system's factory
    params = parse_params(args.param)
    one_setting(("--levels", flag_given(args, "levels"), args.levels),
                ("--set n_levels", "n_levels" in sets, sets.get("n_levels")),
                ("--param levels", "levels" in params, params.get("levels")))
    one_setting(("--horizon", flag_given(args, "horizon"), args.horizon),
                ("--set horizon", "horizon" in sets, sets.get("horizon")),
                ("--param horizon", "horizon" in params, params.get("horizon")))
    one_setting(("--set interest", "interest" in sets, sets.get("interest")),
                ("--param interest", "interest" in params, params.get("interest")))
    for flag, field in (("--system", "setting"), ("--setting", "system")):  # the same
        one_setting((flag, flag_given(args, flag[2:]), getattr(args, flag[2:])),  # system
                    (f"--set {field}", field in sets, sets.get(field)))
    algo = sets.get("algo", args.algo)  # --set algo= (never with another --algo given)
    check_weight_flags(args, algo if isinstance(algo, str) and algo in ALGOS else args.algo,
                       sets)
    kw.update(sets)
    try:
        return TrainConfig(**kw)
    except TypeError as exc:
        raise UsageError(f"--set: {exc}") from None
    except ConfigError as exc:
        msg = str(exc)
        field = msg.partition(":")[0]
        if field in sets:  # named as --set names it, as sweep --set does
            raise
        if field in FIELD_FLAGS and flag_given(args, SETTING_FLAGS[field][1]):  # its flag's
            raise UsageError(FIELD_FLAGS[field] + msg[len(field):]) from None
        raise


def print_json(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Print what ``causalfair train --json`` prints: ``doc`` as a versioned document
    (docs/schema/train.schema.json) whose ``trainer`` (``ppo``, ``repair`` or
    ``population``, :mod:`causalfair.train.algorithms`) names its shape, and ``algo``."""
    head = {"trainer": get(args.algo).trainer, "algo": args.algo}
    json.dump(versioned(TRAIN_SCHEMA_VERSION, to_jsonable({**head, **doc})), sys.stdout, indent=2,
              allow_nan=False)
    sys.stdout.write("\n")


def run_exact(args: argparse.Namespace) -> int:
    """``--algo exact``: the constrained repair (:func:`causalfair.train.exact.repair_checkpoint`)."""
    from pathlib import Path

    from causalfair.policies.checkpoint import load_checkpoint_for
    from causalfair.train import prepare_run_folder
    from causalfair.train.exact import repair_checkpoint

    if not args.constraint:
        raise UsageError("--algo exact: give at least one --constraint, e.g. --constraint abs_C<=0.05.")
    if args.pair is not None:
        raise UsageError(f"--pair {args.pair[:40]}: --algo exact takes its pair in each "
                         "constraint's key; name it there, e.g. --constraint "
                         f"'abs_C[{args.pair[:40]}]<=0.05'.")
    if args.resume:
        raise UsageError("--resume: the exact repair has no run to continue; run it again.")
    unused = [flag for flag, v in (
        ("--beta-c", args.beta_c is not None), ("--beta-lambda", args.beta_lambda is not None),
        ("--individuals", args.individuals is not None),
        ("--eval-every", args.eval_every is not None),
        ("--checkpoint-every", args.checkpoint_every is not None), ("--set", args.set),
        ("--env", args.env != "individual")) if v]
    if unused:  # the PPO trainers' flags: they used to be ignored without a word
        raise UsageError(f"{', '.join(unused)}: not used by --algo exact (the repair on the "
                         "tabular model: --system/--setting, --param, --levels, --horizon, "
                         "--constraint, --init-checkpoint, --seed, --iterations).")
    if args.system and args.setting:
        raise UsageError(f"--setting {args.setting} and --system {args.system}: give one of "
                         "them.")
    cons = [parse_constraint(c) for c in args.constraint]
    sid = args.system or args.setting or "lending-1"
    params = parse_params(args.param)
    if not args.system:  # the lending shorthand's levels, as the PPO trainers read them
        params.setdefault("levels", args.levels)
    system = make(sid, search_path=args.search_path, **params)
    horizon = system.horizon if args.horizon is None else args.horizon
    init = None
    if args.init_checkpoint:
        init = load_checkpoint_for(Path(args.init_checkpoint), system)
    out = Path(args.out)
    created = not out.exists()
    prepare_run_folder(out, resume=False)  # a folder of the user's is refused untouched
    try:
        rep = repair_checkpoint(system, horizon, cons, init=init, seed=args.seed,
                                outer=30 if args.iterations is None else args.iterations,
                                error=UsageError)
    except BaseException:  # an error or Ctrl-C before anything was written: no folder left
        if created:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        raise
    res = rep.result
    summary = res.to_dict()
    ck = out / "checkpoint.pt"
    rep.save(ck, name=f"{sid}-exact-repair")
    doc = json.dumps(versioned(REPAIR_SCHEMA_VERSION, to_jsonable(summary)), indent=2,
                     allow_nan=False).encode()
    atomic_write_bytes(out / "repair.json", lambda fh: fh.write(doc))
    if args.json:
        print_json(args, {"checkpoint": str(ck), **summary})
    else:
        print(res.summary())
        print(f"  checkpoint: {ck}" + ("" if res.passed else " (fails the constraints)"))
    return 0 if res.passed else 1


def run_population(args: argparse.Namespace) -> int:
    """``--algo r-td3 | l-ucbfair``: the population agents of Yin et al. (NeurIPS 2023) on
    replicator-1, saved as a ``population`` checkpoint the audit loads."""
    from pathlib import Path

    from causalfair.train import population as P
    from causalfair.train import prepare_run_folder

    unused = [flag for flag, v in (
        ("--setting", args.setting), ("--resume", args.resume),
        ("--init-checkpoint", args.init_checkpoint), ("--constraint", args.constraint),
        ("--horizon", args.horizon), ("--beta-c", args.beta_c),
        ("--beta-lambda", args.beta_lambda), ("--individuals", args.individuals),
        ("--eval-every", args.eval_every), ("--checkpoint-every", args.checkpoint_every),
        ("--pair", args.pair), ("--levels", args.levels != 7),
        ("--env", args.env != "individual")) if v]
    if unused:
        horizon = (f" Their horizon is the system's: --param horizon={args.horizon}."
                   if args.horizon else "")
        raise UsageError(f"{', '.join(unused)}: not used by --algo {args.algo} (population "
                         f"agents: --system {REPLICATOR_SYSTEMS[0]}, --param, --seed, "
                         "--iterations, --set)." + horizon)
    params = parse_params(args.param)
    sid = args.system or REPLICATOR_SYSTEMS[0]
    system = make(sid, search_path=args.search_path, **params)
    env = P.PopulationEnv(system)  # refuses other systems
    if args.iterations is not None and args.iterations < 1:
        raise UsageError(f"--iterations: bad value {args.iterations}; must be >= 1.")
    fields = parse_set(args.set, P.RTD3Config if args.algo == "r-td3" else P.LUCBFairConfig)
    # --seed, --threads and their --set fields: the one rule (a given flag and --set with
    # another value refused; --seed left at its default never overrides --set seed)
    fields.update(refuse_given_twice(args, fields, ("seed", "threads")))
    # the one config a sweep's run of this algorithm trains with too
    config = P.make_config(args.algo, args.seed, env.H, args.iterations, fields)
    out = Path(args.out)
    created = not out.exists()
    prepare_run_folder(out, resume=False)
    try:  # run_agent writes the folder's files when the agent is trained and audited
        res = P.run_agent(P.PopulationRun(args.algo, sid, config, dict(system.params)), system,
                          out)
    except BaseException:  # an error or Ctrl-C before anything was written: no folder left
        if created:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        raise
    m, wall, ck = res["metrics"], res["wall_s"], res["checkpoint"]
    if args.json:
        print_json(args, {"checkpoint": str(ck), "wall_s": wall, "metrics": m})
    else:
        print(f"trained {args.algo} on {sid} (seed {config.seed}, {m['episodes']} episodes) "
              f"in {wall:.1f} s")

        print("  from the system's q0: " + "  ".join(
            f"{k}={fixed(v, 4, sign=True)}" for k, v in m.items() if k != "episodes"))
        print(f"  checkpoint: {ck}   (per-episode V_r, V_g: {out / 'metrics.csv'})")
        print(f"  audit it:   {audit_hint(args, sid, ck)} --n 2"
              "   (deterministic dynamics: 2 replicas are exact)")
    return 0


def audit_hint(args: argparse.Namespace, system: str, checkpoint: Any) -> str:
    """The ``causalfair decompose`` command line that audits ``checkpoint`` on the system it
    was trained on (its ``--param`` and ``--search-path`` values, quoted for a shell)."""
    words = ["causalfair", "decompose", "--system", str(system)]
    for p in args.param:
        words += ["--param", p]
    if args.system and getattr(args, "search_path", ".") not in (None, "."):
        words += ["--search-path", str(args.search_path)]
    words += ["--checkpoint", str(checkpoint)]
    return shlex.join(words)


def metrics_line(m: dict[str, Any]) -> str:
    """The final metrics on one line; a Monte Carlo C or Lambda (``C_ci``, ``Lambda_ci``:
    the 95% intervals of the generic trainer's audit) is printed with its interval."""

    parts = []
    for k, v in m.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{k}={fixed(v, 4, sign=True)}")
            ci = m.get(f"{k}_ci")
            if k in ("C", "Lambda") and ci is not None and ci[0] != ci[1]:
                parts[-1] += f" (95% CI [{fixed(ci[0], 4, sign=True)}, {fixed(ci[1], 4, sign=True)}])"
    return "  ".join(parts)


def run(args: argparse.Namespace) -> int:
    from causalfair.policies.vecnormalize import refuse_warm_start

    if args.init_checkpoint:
        refuse_warm_start(args.init_checkpoint, "--init-checkpoint")
    cpu_only = get(args.algo).trainer in ("repair", "population")
    # checked here (a GPU named where torch sees none is an input error before anything
    # runs); train() resolves it again, "auto" per trainer
    device = resolve_device(args.device, "--device", grid=cpu_only)
    if device != "cpu" and cpu_only:
        raise UsageError(f"--device: {args.device!r} applies to the PPO trainers; --algo "
                         f"{args.algo} runs on the CPU (leave --device out).")
    if get(args.algo).trainer == "repair":
        return run_exact(args)
    if get(args.algo).trainer == "population":
        return run_population(args)
    config = build_config(args)
    args.algo = config.algo  # --set algo=...: what the summary and --json name
    if args.constraint:
        config = config.replace(constraints=tuple(args.constraint))
    system = None
    if args.system and args.setting:
        raise UsageError(f"--setting {args.setting} and --system {args.system}: give one of them.")
    if args.param and not args.system:  # --param is the system's (lending-N's levels too)
        args.system, args.setting = args.setting or "lending-1", None
    if args.system:
        system = make(args.system, search_path=args.search_path, **parse_params(args.param))
        config = config.replace(system=args.system, system_params=dict(system.params))
    progress = not args.no_progress  # a bar on a terminal, steady lines in a log
    res = train(config, out=args.out, resume=args.resume,
                init_checkpoint=args.init_checkpoint, progress=progress, system=system,
                device=args.device)
    m = res.metrics
    pair = metrics_pair(res, config, system)
    if args.json:
        print_json(args, {"checkpoint": str(res.checkpoint), "wall_s": res.wall_s, "metrics": m,
                          "pair": list(pair)})
    else:
        print(f"trained {config.algo} on {args.system or config.setting} (seed {config.seed}, "
              f"{config.iterations} iterations, T = {res.config.horizon}) in {res.wall_s:.1f} s")
        print("  " + metrics_line(m))
        n_groups = len(system.groups) if system is not None else 2
        if n_groups > 2:  # the audit's pair, chosen from its numbers (a sweep's runs.csv: pair)
            print(f"  pair: {pair[0]} - {pair[1]} (C, DPE, IPE, SPE and Lambda above: "
                  f"{pair[0]}'s minus {pair[1]}'s; the largest and smallest V^pi of the "
                  f"{n_groups} groups in the training's audit)")
        # a Monte Carlo audit with other random numbers than those the policy was selected on
        sampled = system is not None and "exact" not in system.engines
        if config.constraints:
            if not m.get("constraints_met"):
                verdict = ("NOT met by any audited policy (the last policy is saved; its last "
                           "training audit: "
                           f"{'; '.join(m.get('constraints_failed') or ['none'])})")
            elif sampled:
                verdict = (f"met on the training's audits (the selection stream of seed "
                           f"{config.seed}, n = {config.audit_n} per group: the best-utility "
                           "audited policy that meets them, chosen on those numbers; the "
                           "metrics above are that policy audited again on the run's "
                           "evaluation stream; confirm it with the independent audit below)")
            else:
                verdict = "met on the exact audit (the best-utility audited policy that meets them)"
            print(f"  constraints {', '.join(config.constraints)}: {verdict}")
        print(f"  checkpoint: {res.checkpoint}")
        fresh = f" --n {config.audit_n} --seed {config.seed + 1}" if config.constraints and sampled else ""
        print(f"  audit it:   {audit_hint(args, args.system or config.setting, res.checkpoint)}"
              f" --horizon {res.config.horizon}{fresh}")
    return 1 if config.constraints and not m.get("constraints_met") else 0

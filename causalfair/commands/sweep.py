"""``causalfair sweep``: train algorithms x seeds x systems, one task per run, and tabulate
the final metrics with means and confidence intervals over seeds."""

from __future__ import annotations

import argparse
import sys

from causalfair._names import POPULATION, PPO_ALGORITHMS, SWEEP_ALGORITHMS, names
from causalfair.backends import resolve_jobs
from causalfair.commands._system import parse_params
from causalfair.commands.decompose import backend_from_args
from causalfair.commands.train import parse_set, refuse_given_twice
from causalfair.errors import UsageError, one_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="train algorithms x seeds (x systems) and tabulate means and CIs over seeds",
        description=(
            "Train every (system, algorithm, seed) exactly as `causalfair train` would (the "
            "same numbers as separate runs), in this process, in --jobs local workers or on "
            "Ray, and write OUT/runs.csv (one row per run, with the pair of groups its "
            "numbers compare, written as the two group names: [\"s+\", \"s-\"]), "
            "OUT/table.csv and OUT/table.md (mean and t-interval over seeds, the "
            "interval's level, and the pairs its runs compare) and each run's checkpoint under "
            "OUT/runs/. The population agents R-TD3 and L-UCBFair train as `causalfair train "
            "--algo r-td3|l-ucbfair` trains them (OUT/runs/.../checkpoint.npz). An algorithm "
            "that does not apply to a system (A-PPO, F-PPO-L and ELBERT-PO need supply and "
            "demand signals, F-PPO lending, R-TD3 and L-UCBFair replicator dynamics) is not "
            "trained there: "
            "one line on stderr and under table.md says why, checked before any run. Exit "
            "code 0 when every run finished, 2 when a run failed (named on stderr and under "
            "table.md; the others are still tabulated). Rerunning into a sweep folder needs --resume or "
            "--force: a rerun never replaces finished runs silently. One sweep at a time "
            "writes a folder: a second sweep started on it meanwhile is refused (exit 2), "
            "naming the first one's pid."
        ),
        epilog="Example: causalfair sweep --algo ppo,ppo-c,ppo-cb --seeds 0-19 --system "
               "lending-1 --out runs/sweep --jobs 2. Seed 002's agents beside PPO: "
               "causalfair sweep --algo ppo,r-td3,l-ucbfair --seeds 0-2 --system "
               "replicator-1 --out runs/yin (docs/training.md, \"A paper's table\"). "
               "See docs/scale.md.",
    )
    p.add_argument("--algo", required=True, metavar="A,B,...",
                   help="algorithms, comma-separated (one named twice is trained once): the PPO family of causalfair train "
                        f"({', '.join(PPO_ALGORITHMS)}) and the population agents "
                        f"({', '.join(POPULATION)}: replicator systems); "
                        f"{', '.join(a for a in names(cli=True) if a not in SWEEP_ALGORITHMS)} "
                        "trains with causalfair train only")
    p.add_argument("--seeds", required=True, metavar="SEEDS", help="e.g. 0-19 or 0,3,5-7")
    p.add_argument("--system", action="append", default=None, metavar="ID,...",
                   help="systems, comma-separated or repeated: registered ids or "
                        "'module:callable' (default: lending-1)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="keyword argument for the factory of every system of the sweep that "
                        "takes K (one that no system takes is refused); runs.csv's params "
                        "column and table.md name each system's (repeatable)")
    p.add_argument("--search-path", metavar="DIR", default=".",
                   help="folder searched first for a 'module:callable' factory (default: .)")
    p.add_argument("--iterations", type=int, default=None, metavar="N",
                   help="training iterations per run, as causalfair train --iterations "
                        "(default: the trainer's: 100 PPO iterations; r-td3 and l-ucbfair: "
                        "training episodes, default 20,000 steps / 500 episodes)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any other config field, for every run whose config has it: "
                        "TrainConfig (the PPO family; the lending trainer's own fields, such "
                        "as env and n_levels, to the lending runs only), RTD3Config (r-td3), "
                        "LUCBFairConfig (l-ucbfair); a field none of the sweep's runs reads "
                        "is refused (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="sweep folder: a new or empty one, or one holding an earlier sweep "
                        "with --resume or --force (a folder of yours is never written into)")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="--out holds an earlier sweep: train only the runs it lacks (e.g. "
                            "new seeds, runs that failed, or those an interrupt stopped: a "
                            "run's folder is written as it finishes) and tabulate them with "
                            "its finished runs of the --algo, --seeds and --system given (to "
                            "add seed 3 to seeds 0-2: --seeds 0-3; finished runs not asked "
                            "for are named on stderr); a finished run of another "
                            "configuration is refused")
    again.add_argument("--force", action="store_true",
                       help="--out holds an earlier sweep: train every run again and replace "
                            "its runs and tables")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="t-intervals of level 1 - alpha over seeds (default: 0.05; "
                        "table.csv's ci_level column and table.md's header say the level)")
    p.add_argument("--backend", choices=("serial", "process", "ray"), default=None,
                   help="where the runs go: serial (default), process (--jobs local workers) "
                        "or ray (--address, $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--jobs", default=None, metavar="N|auto",
                   help="local worker processes (implies --backend process when > 1); auto: "
                        "one per core this process may use (affinity, cgroup quota, "
                        "OMP_NUM_THREADS); each worker trains with TrainConfig.threads torch "
                        "threads (default 1; causalfair --threads N or --set threads=N)")
    p.add_argument("--address", metavar="ADDR", help="with --backend ray: the cluster")
    p.set_defaults(run=run)


def set_configs(algos: list[str]) -> tuple[type, ...]:
    """The configs whose fields --set may name: those of the sweep's algorithms (TrainConfig
    for the PPO family, RTD3Config, LUCBFairConfig for r-td3, l-ucbfair), TrainConfig when
    it names none of them (sweep() then refuses the algorithm)."""
    from causalfair.train import TrainConfig
    from causalfair.train import population as P

    out: list[type] = []
    if any(a not in POPULATION for a in algos) or not algos:
        out.append(TrainConfig)
    if any(a in POPULATION for a in algos):
        out += [P.RTD3Config] if "r-td3" in algos else []
        out += [P.LUCBFairConfig] if "l-ucbfair" in algos else []
    return tuple(out)


def run(args: argparse.Namespace) -> int:
    from causalfair.train.sweep import parse_seeds, sweep

    if args.jobs is not None:
        args.jobs = resolve_jobs(args.jobs, "--jobs")
    overrides = {}
    if args.iterations is not None:
        if args.iterations < 1:
            raise UsageError(f"--iterations: must be an integer >= 1, got {args.iterations}.")
        overrides["iterations"] = args.iterations
    algos = [a.strip() for a in args.algo.split(",") if a.strip()]
    sets = parse_set(args.set, set_configs(algos))
    # --iterations, the global --threads and their --set fields: the one rule of train
    overrides.update(refuse_given_twice(args, sets, ("iterations", "threads")))
    overrides.update(sets)
    systems = [s.strip() for item in args.system or ["lending-1"] for s in item.split(",")
               if s.strip()]
    res = sweep(algos, parse_seeds(args.seeds), systems, params=parse_params(args.param),
                overrides=overrides, out=args.out, backend=backend_from_args(args),
                alpha=args.alpha, search_path=args.search_path,
                existing="resume" if args.resume else "force" if args.force else "refuse")
    print(res.to_markdown(), end="")
    kept = f"; {res.reused} kept from the earlier sweep" if res.reused else ""
    print(f"{len(res.runs)} runs written to {args.out} (runs.csv, table.csv, table.md, "
          f"runs/{kept})")
    # every line through one_line: a user system's text (its error message, its id) is
    # shown with the characters a terminal acts on escaped, as every one-line error
    for sysid, algo, why in res.skipped:
        print(one_line("sweep", "note", f"{algo} on {sysid}: not trained, it does not apply: "
                       f"{why}."), file=sys.stderr)
    for note in (res.params_note(), res.left_out_note()):
        if note:
            print(one_line("sweep", "note", note), file=sys.stderr)
    for sysid, algo, seed, msg in res.failed:
        print(one_line("sweep", "error", f"run {algo} seed {seed} on {sysid} failed: "
                       + " ".join(str(msg).split())),
              file=sys.stderr)
    return 2 if res.failed else 0

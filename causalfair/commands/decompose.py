"""``causalfair decompose``: the decomposition and benefit fairness of one policy."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from causalfair._io import DECOMPOSE_SCHEMA_VERSION, fixed, versioned
from causalfair._names import BENEFIT_N
from causalfair._simultaneous import simultaneous_dict
from causalfair._width import ljust, text_width
from causalfair.backends import make_backend, resolve_jobs
from causalfair.commands._system import (
    CHECKPOINT_HELP,
    POLICY_HELP,
    add_system_arguments,
    add_vecnormalize_argument,
    as_flag_error,
    horizon,
    jobs_for_backend,
    load_policy,
    load_system,
)
from causalfair.commands.logs import add_logs_arguments, check_logs_only, run_logs
from causalfair.errors import UsageError
from causalfair.workers import user_prints_to_stderr


def exact_numbers(*args: Any, **kwargs: Any) -> Any:
    """:func:`causalfair.engines.exact.exact_numbers`, imported when a decomposition runs
    (the engines stay off the path of ``causalfair decompose --help``)."""
    from causalfair.engines.exact import exact_numbers as numbers

    return numbers(*args, **kwargs)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """Options that pick the system (shared by several subcommands)."""
    add_system_arguments(p)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "decompose",
        help="decompose C into DPE + IPE + SPE and measure benefit fairness",
        description=(
            "Compute the qualification-gain disparity C of a policy on a system (a "
            "registered one such as lending-1, or your own 'module:callable' factory) "
            "and its decomposition C = DPE + IPE + SPE (direct, indirect, spurious "
            "effects), per-group values V^pi, V^PS, V^pi0, benefit fairness Lambda and "
            "the worst benefit pairs. The exact engine (the default on a system with a "
            "tabular model) checks the identities of the method and reports them as "
            "diagnostics; --engine mc (the default on any other system) estimates the "
            "same figures by Monte Carlo with confidence intervals; --logs estimates "
            "them from a decision log with bootstrap intervals."
        ),
        epilog=(
            "policies: always | never | random:Q | threshold:P (approve when "
            "p_repay(x, s) > P) | blind:P (group-blind threshold on the group-weighted "
            "mean p_repay) | action:K | uniform. Examples: causalfair decompose --system "
            "lending-1 --policy threshold:0.5 --horizon 10 --json; causalfair decompose "
            "--system mysim:make --param levels=5 --checkpoint policy.pt"
        ),
    )
    add_model_arguments(p)
    p.add_argument("--policy", help=POLICY_HELP)
    p.add_argument("--checkpoint", metavar="PATH", help=CHECKPOINT_HELP)
    add_vecnormalize_argument(p)
    p.add_argument("--eps", default=None,
                   help="Lambda's eps: a number > 0 in the gain's units, or 'auto' (0.1 x the "
                        "90th percentile of |Delta|, scale-free); default: the value the system or "
                        "its tabular model declares (0.1 on lending and on logs with the default "
                        "potential), else auto")
    p.add_argument("--weights", choices=("visitation", "initial"), default="visitation",
                   help="P(x | s) in Lambda (default: visitation under pi, averaged over t < T)")
    p.add_argument("--pair", default=None, metavar="A-B",
                   help="the two groups compared, named as thresholds name a pair: C is A's "
                        "gain minus B's, and Lambda and the worst benefit pairs are of the same "
                        "groups (default: the largest and smallest V^pi; with two groups the "
                        "first minus the second); also with --logs; with more than two groups a "
                        "table of every pair follows its decomposition")
    p.add_argument("--reference", metavar="GROUP",
                   help="the reference group of the table of every pair (default: the first "
                        "group); with more than two groups, or a reference named, every group "
                        "against it and every pair are printed, with the worst pair; from a "
                        "system and with --logs")
    p.add_argument("--worst", type=int, default=5, metavar="N",
                   help="number of worst benefit pairs to print (default: 5)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of the text summary")
    p.add_argument("--engine", choices=("auto", "exact", "mc"), default="auto",
                   help="exact (tabular propagation), mc (Monte Carlo on the system's "
                   "simulator, with standard errors and CIs) or auto (default: exact when "
                   "the system has a tabular model, else mc)")
    p.add_argument("--n", type=int, default=None,
                   help="mc only (refused with the exact engine): individuals simulated per "
                   "group (default: 100000), or worlds on a system of coupled units (default: "
                   f"2000); Lambda's forks run on at most {BENEFIT_N} of them, as "
                   "cf.decompose's")
    p.add_argument("--benefit-bins", type=int, default=None, metavar="N",
                   help="mc only: Lambda by forks on a system observed through features pairs "
                        "individuals in the joint cells of N quantile bins per feature "
                        "(default: 4; fewer bins, fewer cells: N^F for F features)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the Monte Carlo run or of the log bootstrap (default: 0)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="confidence level 1 - alpha of the printed CIs (Monte Carlo and "
                        "--logs; default: 0.05)")
    p.add_argument("--backend", choices=("serial", "process", "ray"), default=None,
                   help="mc: where the (group, batch) tasks run: this process (default: on "
                        "threads, one per core it may use; for a long run of a simulator that "
                        "cannot share threads, such as a Gymnasium env, worker processes; "
                        "serial: one thread), process "
                        "(--jobs local workers) or ray (--address, $RAY_ADDRESS, else a local "
                        "Ray); the numbers are the same bit for bit (docs/scale.md)")
    p.add_argument("--jobs", default=None, metavar="N|auto",
                   help="mc: local worker processes (implies --backend process when > 1); "
                        "auto: one per core this process may use (affinity, cgroup quota, "
                        "OMP_NUM_THREADS), also the default with --backend process")
    p.add_argument("--address", metavar="ADDR",
                   help="mc, --backend ray: the cluster, 'auto' or HOST:PORT")

    add_logs_arguments(p)
    p.set_defaults(run=run)


def load_system_and_policy(args: argparse.Namespace):
    """The system and the policy named on the command line (horizon filled in)."""
    system = load_system(args)
    args.horizon = horizon(args, system)
    return system, load_policy(args, system).policy


def load_model_and_policy(args: argparse.Namespace):
    """The tabular model and the policy named on the command line (systems with a
    tabular model only)."""
    system, policy = load_system_and_policy(args)
    if system.tabular is None:
        raise UsageError(f"--system {system.id}: has no tabular model; this needs one.")
    return system.tabular, policy


def run(args: argparse.Namespace) -> int:
    from causalfair._validation import check_alpha

    if args.worst < 1:
        raise UsageError(f"--worst: must be an integer >= 1, got {args.worst}.")
    with as_flag_error():  # the library's rule for every engine and the logs (exact prints alpha in --json)
        check_alpha(args.alpha)
    if args.eps is not None and args.eps != "auto":
        try:
            value = float(args.eps)
        except ValueError:
            value = -1.0
        if not 0 < value < float("inf"):
            raise UsageError(f"--eps: must be a number > 0 (in the gain's units) or 'auto', "
                             f"got {str(args.eps)[:40]!r}.")
        args.eps = value
    if getattr(args, "logs", None):
        return run_logs(args)
    check_logs_only(args)
    with user_prints_to_stderr():  # what the simulator or policy prints: never into stdout
        system, eps_source, result, benefit, groups = _compute(args)
    return _print(args, system, eps_source, result, benefit, groups)


def _compute(args: argparse.Namespace):
    """The system, eps's source, the decomposition, the benefit result of ``args`` and,
    with more than two groups, every pair (:func:`_every_pair`)."""
    from causalfair._validation import engine_for
    from causalfair.engines._mc_base import mc_options
    from causalfair.engines.benefit import eps_for
    from causalfair.engines.groups import check_pairs, resolve_pair

    system, policy = load_system_and_policy(args)
    if len(system.groups) > 2 or args.reference is not None:  # every pair: before any run
        check_pairs(len(system.groups), "decompose", coupled=system.units_per_replica != 1)
    args.pair = resolve_pair(args.pair, system.groups, "--pair")
    if args.reference is not None and args.reference not in system.groups:  # before any run
        raise UsageError(f"--reference: bad value {args.reference[:60]!r}; name one of the "
                         f"groups {', '.join(system.groups)} (default: the first).")
    args.eps, eps_source = eps_for(args.eps, system)
    n_given = args.n is not None
    if args.n is None:  # worlds of coupled units are U units each
        args.n = 2000 if system.units_per_replica > 1 else 100_000

    with as_flag_error():
        engine = engine_for(system, args.engine)
    model = system.tabular if "exact" in system.engines else None
    with as_flag_error(["seed"]):  # --seed: checked whatever the engine (mc_options)
        mc_options(seed=args.seed)
    if engine != "mc" and (args.backend or args.jobs or args.address or n_given
                           or args.benefit_bins is not None):
        raise UsageError("--n/--backend/--jobs/--address/--benefit-bins: only with the Monte "
                         "Carlo engine "
                         "(--engine mc); the exact engine is one quick computation with no "
                         "sample.")
    forks: dict = {}  # Lambda's forks (rollout, cells, replicates'): every pair's
    if engine == "mc":  # Lambda as decompose_mc gives it: exact where the model answers
        with as_flag_error(["n"]):  # e.g. a sample that holds nobody present of a group
            result = _decompose_mc(args, policy, system, forks)
        benefit = result.benefit
    else:
        nums = exact_numbers(model, policy, args.horizon, eps=args.eps, weights=args.weights,
                             benefit=True, pair=args.pair)
        result, benefit = nums.decomposition, nums.benefit
    groups = _every_pair(args, system, policy, result, benefit, forks)
    return system, eps_source, result, benefit, groups


def _every_pair(args: argparse.Namespace, system, policy, result, benefit, forks: dict):
    """With more than two groups or ``--reference``, every pair of ``result``'s groups
    against the reference (:func:`causalfair.engines.groups.compare`, as an audit's and
    ``decompose --logs``'; Lambda per pair: exact from the benefit table, else by the forks
    the decomposition's Lambda made, shared); None with two groups and no reference
    (their output keeps its form)."""
    if len(result.groups) <= 2 and args.reference is None:
        return None
    from causalfair.engines.choice import every_pair

    one = args.jobs is not None and resolve_jobs(args.jobs, "--jobs") == 1
    with as_flag_error(["reference"]):
        return every_pair(result, benefit, system, policy, n=args.n, seed=args.seed,
                          alpha=args.alpha, jobs=1 if one else "auto", bins=_bins(args),
                          forks=forks, reference=args.reference)


def _pairs_text(args: argparse.Namespace, result, groups) -> str | None:
    """The every-pair table printed under the compared pair's decomposition (None with two
    groups): :meth:`GroupComparison.table_lines`, the table of ``decompose --logs`` too."""
    if groups is None:
        return None
    return "\n".join(groups.table_lines(result.pair, named=args.pair is not None))


def _print(args: argparse.Namespace, system, eps_source, result, benefit, groups=None) -> int:
    """Print the results of :func:`_compute`: text, or JSON with ``--json``; the worst
    benefit pairs' cells named as the report names them (``state[G]``: binned features)."""
    from causalfair._texttable import cell_word

    if benefit is not None and eps_source is not None:
        benefit = replace(benefit, eps_source=eps_source)
    if result.engine == "mc" and not args.json:
        print(_mc_text(result, args.alpha))
        print()
        if groups is not None:
            print(_pairs_text(args, result, groups))
            print()
        if benefit is not None:
            if benefit.method != "mc":
                print("Benefit fairness below is exact, from the system's tabular model (its "
                      "DPE in Proposition-1 form is the exact value the Monte Carlo DPE above "
                      "estimates).")
            print(benefit.summary(args.worst, cell_word(system)))
        print(READING)
        return 0
    if args.json:
        out = versioned(DECOMPOSE_SCHEMA_VERSION, result.to_dict())
        out["setting"] = system.id
        out["system"] = system.to_dict()
        if result.engine == "mc":
            out["alpha"] = args.alpha
            out["ci"] = {k: [float(lo), float(hi)]  # conf_int's numbers, without pandas
                         for k, (lo, hi) in result.intervals(args.alpha).items()}
            if result.simultaneous > 1:  # ci's C, DPE, IPE, SPE: over the pairs (a data-chosen pair)
                out["simultaneous"] = simultaneous_dict(result.simultaneous, args.alpha)
        out["benefit"] = benefit.to_dict(n_worst=args.worst) if benefit is not None else None
        if groups is not None:  # every pair, as decompose --logs --json gives them
            out["pairs"] = groups.pairs_dict(result.pair, named=args.pair is not None)
        json.dump(out, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(result.summary())
        print()
        if groups is not None:
            print(_pairs_text(args, result, groups))
            print()
        print(benefit.summary(args.worst, cell_word(system)))
        print(READING)
    return 0


#: What the text output's numbers mean, printed after them (nothing else says it there).
READING = (
    "\nReading it: C is the pair's gap (first group minus second) in expected gain over the "
    "horizon;\nDPE the part decisions cause directly in each step's gain, IPE the delayed part "
    "(through\nthe states they lead to), SPE the part with no policy at all (the baseline pi0);"
    " Lambda is\n0 when people of both groups with the same benefit Delta get the same "
    "decisions, and the\nworst pairs are its largest terms. Nothing written (--json prints "
    "every number);\ndocs/decomposition.md explains each one.")


def _bins(args: argparse.Namespace) -> int:
    """--benefit-bins, default 4."""
    return 4 if args.benefit_bins is None else args.benefit_bins


def _decompose_mc(args: argparse.Namespace, policy, system, forks: dict | None = None):
    """Monte Carlo decomposition on the system's simulator (``forks``: its Lambda's forks'
    statistics kept for the other pairs)."""
    if args.n < 2:
        raise UsageError(f"--n: must be an integer >= 2, got {args.n}.")
    bins = _bins(args)
    if bins < 1:
        raise UsageError(f"--benefit-bins: must be an integer >= 1, got {bins}.")
    from causalfair.engines.montecarlo import decompose_mc

    one = args.jobs is not None and resolve_jobs(args.jobs, "--jobs") == 1  # this thread
    return decompose_mc(system, policy, args.horizon, n=args.n, seed=args.seed,
                        backend=backend_from_args(args), jobs=1 if one else "auto",
                        eps=args.eps, alpha=args.alpha, benefit_bins=bins, pair=args.pair,
                        benefit_shared=forks, weights=args.weights)


def backend_from_args(args: argparse.Namespace):
    """The backend of --backend / --jobs / --address (None: this process)."""
    jobs = jobs_for_backend(args.jobs, args.backend)
    if args.address is not None and args.backend != "ray":
        raise UsageError("--address: only with --backend ray.")
    if args.backend is None and jobs in (None, 1):
        return None
    if jobs is None:
        jobs = resolve_jobs("auto") if args.backend == "process" else 1
    return make_backend(jobs, args.backend, args.address)


def _mc_text(result, alpha: float) -> str:
    """Estimates with standard errors and (1 - alpha) confidence intervals."""

    a, b = result.pair
    level = f"{100 * (1 - alpha):g}%"
    lines = [
        "Decomposition of the qualification-gain disparity (mc engine)",
        f"  model: {result.model_name}   policy: {result.policy_name}   horizon T = "
        f"{result.horizon}",
        f"  pair: {result.groups[a]} - {result.groups[b]}   n = {result.sample_size}, "
        f"seed = {result.seed}, common random numbers",
        "",
    ]
    # to_frame(alpha)'s rows but Lambda's (printed below), without pandas
    est, se, ci = result.estimates(), result.se or {}, result.intervals(alpha)
    w = max(18, *(text_width(str(k)) for k in est))  # "indirect[<a long group name>]"
    lines.append(f"  {'quantity':<{w}}{'estimate':>12}{'se':>11}   {level} CI")
    for k, v in est.items():
        lines.append(f"  {ljust(str(k), w)}{fixed(v, sign=True, width=12)}"
                     f"{fixed(se.get(k, 0.0), width=11)}   "
                     f"[{fixed(ci[k][0], sign=True)}, {fixed(ci[k][1], sign=True)}]")
    return "\n".join(lines)

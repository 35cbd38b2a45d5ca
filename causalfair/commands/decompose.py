"""``causalfair decompose``: the decomposition and benefit fairness of one policy."""

from __future__ import annotations

import argparse
import json
import sys

SETTINGS = ("lending-1", "lending-2", "lending-3")


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """Options that pick the lending setting (shared by several subcommands)."""
    p.add_argument("--setting", choices=SETTINGS, default="lending-1",
                   help="built-in lending setting (default: lending-1)")
    p.add_argument("--levels", type=int, default=7, metavar="K",
                   help="number of qualification levels K >= 3 (default: 7)")
    p.add_argument("--interest", type=float, default=1.0,
                   help="bank profit on a repaid loan (default: 1.0)")
    p.add_argument("--horizon", type=int, default=20, metavar="T",
                   help="decision epochs T (default: 20)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "decompose",
        help="decompose C into DPE + IPE + SPE and measure benefit fairness",
        description=(
            "Compute the qualification-gain disparity C of a policy on a lending setting "
            "and its decomposition C = DPE + IPE + SPE (direct, indirect, spurious "
            "effects), per-group values V^pi, V^PS, V^pi0, benefit fairness Lambda and "
            "the worst benefit pairs. The exact engine (default) checks the identities "
            "of the method and reports them as diagnostics; --engine mc estimates the "
            "same figures by Monte Carlo with confidence intervals; --logs estimates "
            "them from a decision log with bootstrap intervals."
        ),
        epilog=(
            "policies: always | never | random:Q | threshold:P (approve when "
            "p_repay(x, s) > P) | blind:P (group-blind threshold on the group-weighted "
            "mean p_repay). Example: causalfair decompose --setting lending-1 "
            "--policy threshold:0.5 --horizon 10 --json"
        ),
    )
    add_model_arguments(p)
    p.add_argument("--policy", default="threshold:0.5",
                   help="built-in policy (default: threshold:0.5); ignored with --checkpoint")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="a causalfair checkpoint (torch state_dict + metadata) to audit")
    p.add_argument("--eps", type=float, default=0.1, help="Lambda's eps > 0 (default: 0.1)")
    p.add_argument("--weights", choices=("visitation", "initial"), default="visitation",
                   help="P(x | s) in Lambda (default: visitation under pi, averaged over t < T)")
    p.add_argument("--worst", type=int, default=5, metavar="N",
                   help="number of worst benefit pairs to print (default: 5)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead of the text summary")
    p.add_argument("--engine", choices=("exact", "mc"), default="exact",
                   help="exact (tabular propagation, default) or mc (Monte Carlo on the "
                   "individual-level simulator, with standard errors and CIs)")
    p.add_argument("--n", type=int, default=100_000,
                   help="mc: individuals simulated per group (default: 100000)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the Monte Carlo run or of the log bootstrap (default: 0)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="mc: confidence level 1 - alpha of the printed CIs (default: 0.05)")
    from causalfair.commands.logs import add_logs_arguments

    add_logs_arguments(p)
    p.set_defaults(run=run)


def load_model_and_policy(args: argparse.Namespace):
    """The tabular model and the policy named on the command line."""
    from causalfair.cli import UsageError
    from causalfair.policy import load_checkpoint, parse_policy
    from causalfair.sim.lending import lending_setting

    if args.levels < 3:
        raise UsageError(f"--levels: must be >= 3, got {args.levels}.")
    if args.horizon < 1:
        raise UsageError(f"--horizon: must be >= 1, got {args.horizon}.")
    model = lending_setting(args.setting, n_levels=args.levels, interest=args.interest).tabular
    if getattr(args, "checkpoint", None):
        policy, _ = load_checkpoint(args.checkpoint, model)
    else:
        policy = parse_policy(args.policy, model)
    return model, policy


def run(args: argparse.Namespace) -> int:
    from causalfair.benefit import benefit_fairness
    from causalfair.effects import decompose

    if getattr(args, "logs", None):
        from causalfair.commands.logs import run_logs

        return run_logs(args)
    model, policy = load_model_and_policy(args)
    if getattr(args, "engine", "exact") == "mc":
        result = _decompose_mc(args, policy)
    else:
        result = decompose(model, policy, args.horizon, eps=args.eps, weights=args.weights)
    benefit = benefit_fairness(model, policy, args.horizon, eps=args.eps, weights=args.weights)
    if result.engine == "mc" and not args.json:
        print(_mc_text(result, args.alpha))
        print()
        print(benefit.summary(args.worst))
        return 0
    if args.json:
        out = result.to_dict()
        out["setting"] = args.setting
        if result.engine == "mc":
            out["alpha"] = args.alpha
            ci = result.conf_int(args.alpha)
            out["ci"] = {k: [float(r.lower), float(r.upper)] for k, r in ci.iterrows()}
        out["benefit"] = benefit.to_dict(n_worst=args.worst)
        json.dump(out, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(result.summary())
        print()
        print(benefit.summary(args.worst))
    return 0


def _decompose_mc(args: argparse.Namespace, policy):
    """Monte Carlo decomposition on the individual-level lending simulator."""
    from causalfair.cli import UsageError
    from causalfair.montecarlo import decompose_mc
    from causalfair.sim.individual import LendingSimulator
    from causalfair.sim.lending import lending_setting

    if args.n < 2:
        raise UsageError(f"--n: must be an integer >= 2, got {args.n}.")
    if args.seed < 0:
        raise UsageError(f"--seed: must be >= 0, got {args.seed}.")
    if not 0.0 < args.alpha < 1.0:
        raise UsageError(f"--alpha: must be in (0, 1), got {args.alpha}.")
    lm = lending_setting(args.setting, n_levels=args.levels, interest=args.interest)
    return decompose_mc(LendingSimulator(lm), policy, args.horizon, n=args.n, seed=args.seed)


def _mc_text(result, alpha: float) -> str:
    """Estimates with standard errors and (1 - alpha) confidence intervals."""
    a, b = result.pair
    level = f"{100 * (1 - alpha):g}%"
    lines = [
        "Decomposition of the qualification-gain disparity (mc engine)",
        f"  model: {result.model_name}   policy: {result.policy_name}   horizon T = "
        f"{result.horizon}",
        f"  pair: {result.groups[a]} - {result.groups[b]}   n = {result.n} per group, "
        f"seed = {result.seed}, common random numbers",
        "",
        f"  {'quantity':<18}{'estimate':>12}{'se':>11}   {level} CI",
    ]
    frame = result.to_frame(alpha)
    for k, row in frame.iterrows():
        lines.append(f"  {k:<18}{row['estimate']:>+12.6f}{row['se']:>11.6f}   "
                     f"[{row['ci_lower']:+.6f}, {row['ci_upper']:+.6f}]")
    return "\n".join(lines)

"""``causalfair decompose --logs FILE``: the audit from decision logs (helpers).

Not a subcommand of its own: :func:`add_logs_arguments` adds the options to
``decompose`` and :func:`run_logs` runs it when ``--logs`` is given. With ``--logs``
the model is fitted from the log (``--setting``, ``--levels``, ``--interest`` are not
used); ``--horizon`` defaults to the log's length; ``--policy`` / ``--checkpoint`` are
used only with ``--audit-policy`` (default: audit the logged policy estimated from the
log).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_logs_arguments", "run_logs"]


class _DefaultHorizon(int):
    """The default value of --horizon (behaves as the int it wraps)."""


def add_logs_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("audit from logs")
    g.add_argument("--logs", metavar="FILE",
                   help="decision log (CSV or Parquet; one row per decision with columns "
                        "id, t, group, level, decision, next_level, reward[, outcome]); the "
                        "model is fitted from it instead of --setting")
    g.add_argument("--boot", type=int, default=200, metavar="N",
                   help="bootstrap replicates over individuals (default: 200; 0 = none)")
    if "--seed" not in p._option_string_actions:  # decompose may already define --seed
        g.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    g.add_argument("--alpha-smooth", type=float, default=0.1, metavar="A",
                   help="Dirichlet smoothing of the transition counts (default: 0.1)")
    g.add_argument("--fit", choices=("counts", "ordinal"), default="counts",
                   help="kernel estimator: counts (default) or ordinal logit (statsmodels)")
    g.add_argument("--on-positivity", choices=("error", "bounds"), default="error",
                   help="when a needed decision is never logged: refuse (default) or report bounds")
    g.add_argument("--audit-policy", action="store_true",
                   help="with --logs: audit --policy/--checkpoint on the fitted model instead "
                        "of the logged policy")
    g.add_argument("--dowhy", action="store_true",
                   help="with --logs: add the dowhy cross-check of Delta and its refuters (slow)")
    # With --logs the horizon defaults to the log's own length; an int subclass marks the
    # untouched default of --horizon so that an explicit --horizon still wins.
    default = p.get_default("horizon")
    if isinstance(default, int) and not isinstance(default, _DefaultHorizon):
        p.set_defaults(horizon=_DefaultHorizon(default))


def run_logs(args: argparse.Namespace) -> int:
    from causalfair.cli import UsageError
    from causalfair.logs import audit_logs, read_logs

    if args.boot < 0:
        raise UsageError(f"--boot: must be >= 0, got {args.boot}.")
    if args.horizon < 1:
        raise UsageError(f"--horizon: must be >= 1, got {args.horizon}.")
    df = read_logs(args.logs)
    policy = None
    if args.audit_policy:
        policy = args.policy
        if getattr(args, "checkpoint", None):
            from causalfair.logs import fit_logs
            from causalfair.policy import load_checkpoint

            model, _, _ = fit_logs(df, alpha=args.alpha_smooth, method=args.fit)
            policy, _ = load_checkpoint(args.checkpoint, model)
    audit = audit_logs(
        df, horizon=None if isinstance(args.horizon, _DefaultHorizon) else int(args.horizon), n_boot=args.boot,
        seed=args.seed if args.seed is not None else 0, policy=policy, on_positivity=args.on_positivity, method=args.fit,
        alpha_smooth=args.alpha_smooth, eps=args.eps, weights=args.weights, dowhy=args.dowhy,
    )
    if args.json:
        out = audit.to_dict()
        out["logs"] = str(args.logs)
        json.dump(out, sys.stdout, indent=2, allow_nan=False, default=str)
        sys.stdout.write("\n")
    else:
        print(audit.summary())
        if audit.benefit is not None:
            print()
            print(audit.benefit.summary(args.worst))
    return 0

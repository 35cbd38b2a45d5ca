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
import dataclasses
import json
import sys

from causalfair._io import DECOMPOSE_SCHEMA_VERSION, versioned
from causalfair.commands._system import as_flag_error, load_policy
from causalfair.errors import UsageError

__all__ = ["add_logs_arguments", "check_logs_only", "run_logs"]


class _DefaultHorizon(int):
    """The default value of --horizon (behaves as the int it wraps)."""


def add_logs_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("audit from logs")
    g.add_argument("--logs", metavar="FILE",
                   help="decision log (CSV or Parquet; one row per decision with columns "
                        "id, t, group, level, decision, next_level, reward[, outcome]); the "
                        "model is fitted from it instead of --setting")
    g.add_argument("--boot", type=int, default=200, metavar="N",
                   help="bootstrap replicates over individuals (default: 200; 0 = no intervals; "
                        "else at least 2)")
    if "--seed" not in p._option_string_actions:  # decompose may already define --seed
        g.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    g.add_argument("--alpha-smooth", type=float, default=0.1, metavar="A",
                   help="Dirichlet smoothing of the transition counts (default: 0.1)")
    g.add_argument("--fit", choices=("counts", "ordinal", "multinomial"), default="counts",
                   help="kernel estimator: counts (default), ordinal or multinomial logit of "
                        "the level change (statsmodels)")
    g.add_argument("--lambda-estimator", choices=("thresholded", "plugin"),
                   default="thresholded",
                   help="Lambda from logs: thresholded (default; gaps within sqrt(log n) "
                        "bootstrap standard errors of 0 are set to 0, which fixes the "
                        "plug-in's bias at exact ties) or plugin")
    g.add_argument("--state-cols", metavar="F1,F2,...",
                   help="the state is these numeric feature columns (instead of level / "
                        "next_level), binned into levels with --bins / --bin-cuts")
    g.add_argument("--next-state-cols", metavar="F1,F2,...",
                   help="with --state-cols: the next-state columns (default next_<feature>)")
    g.add_argument("--bins", type=int, metavar="N",
                   help="with --state-cols: N quantile bins per feature (over all rows)")
    g.add_argument("--bin-cuts", action="append", default=[], metavar="F=C1,C2,...",
                   help="with --state-cols: explicit increasing cut points for feature F "
                        "(repeatable; overrides --bins for F)")
    g.add_argument("--potential-weights", metavar="F1=W1,F2=W2",
                   help="with --state-cols: gain potential f = sum_j W_j * (mean of feature "
                        "j in the bin); required with several features")
    g.add_argument("--potential", metavar="F0,F1,...",
                   help="the gain potential f of the log's levels 0..K-1 (K numbers, higher is "
                        "better; default: the lending potential); one such list per group "
                        "separated by ';' for a potential per group")
    g.add_argument("--decisions", metavar="D0,D1",
                   help="the log's names of decision 0 (the baseline) and decision 1, e.g. "
                        "waitlist,place: results use them, and a decision column of these "
                        "words is read as 0 and 1")
    g.add_argument("--on-positivity", choices=("error", "bounds"), default="error",
                   help="when a needed decision is never logged: refuse (default) or report bounds")
    g.add_argument("--audit-policy", action="store_true",
                   help="with --logs: audit --policy/--checkpoint on the fitted model instead "
                        "of the logged policy")
    g.add_argument("--dowhy", action="store_true",
                   help="with --logs: add the dowhy cross-check of Delta and its refuters (slow)")
    # the options above apply only with --logs; decompose refuses them without it
    p.set_defaults(logs_only=tuple((a.dest, a.option_strings[0], a.default)
                                   for a in g._group_actions
                                   if a.dest not in ("logs", "seed")))
    # With --logs the horizon defaults to the log's own length; an int subclass marks the
    # untouched default of --horizon so that an explicit --horizon still wins.
    default = p.get_default("horizon")
    if isinstance(default, int) and not isinstance(default, _DefaultHorizon):
        p.set_defaults(horizon=_DefaultHorizon(default))


def check_logs_only(args: argparse.Namespace) -> None:
    """Refuse the options of the audit from logs given without ``--logs`` (they would be
    ignored)."""
    given = [flag for dest, flag, default in getattr(args, "logs_only", ())
             if getattr(args, dest, default) != default]
    if given and not getattr(args, "logs", None):
        raise UsageError(f"{', '.join(given)}: only with --logs FILE (the audit from a decision "
                         "log); a system's audit does not use "
                         f"{'them' if len(given) > 1 else 'it'}: remove "
                         f"{'them' if len(given) > 1 else 'it'} or add --logs.")


def _names(text: str, option: str) -> list[str]:
    names = [c.strip() for c in text.split(",")]
    if not all(names):
        raise UsageError(f"{option}: expected comma-separated column names, got {text!r}.")
    return names


def _state_options(args: argparse.Namespace) -> dict:
    """state / bins / next_state / potential keyword arguments from the CLI options."""
    used = [o for o, v in (("--next-state-cols", args.next_state_cols), ("--bins", args.bins),
                           ("--bin-cuts", args.bin_cuts),
                           ("--potential-weights", args.potential_weights)) if v]
    if not args.state_cols:
        if used:
            raise UsageError(f"{', '.join(used)}: only with --state-cols (feature states).")
        return {}
    out: dict = {"state": _names(args.state_cols, "--state-cols")}
    if args.next_state_cols:
        out["next_state"] = _names(args.next_state_cols, "--next-state-cols")
    bins: dict = {c: args.bins for c in out["state"]} if args.bins is not None else {}
    for item in args.bin_cuts:
        col, sep, cuts = item.partition("=")
        try:
            values = [float(v) for v in cuts.split(",")] if sep and cuts.strip() else None
        except ValueError:
            values = None
        if not col.strip() or values is None:
            raise UsageError(f"--bin-cuts: expected FEATURE=C1,C2,... (numbers), got {item!r}.")
        bins[col.strip()] = values
    out["bins"] = bins or None
    if args.potential_weights:
        weights = {}
        for item in args.potential_weights.split(","):
            col, sep, w = item.partition("=")
            try:
                weights[col.strip()] = float(w)
            except ValueError:
                sep = ""
            if not sep or not col.strip():
                raise UsageError(f"--potential-weights: expected F1=W1,F2=W2 (numbers), "
                                 f"got {args.potential_weights!r}.")
        from causalfair.logs import linear_potential

        out["potential"] = linear_potential(weights)
    return out


def _potential(text: str) -> list:
    """``--potential F0,F1,...`` (or rows separated by ';'): the numbers, as audit_logs's
    potential= (its shape is checked against the log's levels and groups there)."""
    rows = []
    for part in text.split(";"):
        try:
            rows.append([float(v) for v in part.split(",")])
        except ValueError:
            raise UsageError(f"--potential: expected numbers F0,F1,... (one per level 0..K-1 of "
                             f"the log; rows per group separated by ';'), got {text!r}.") from None
    return rows[0] if len(rows) == 1 else rows


def run_logs(args: argparse.Namespace) -> int:
    from causalfair.logs import audit_logs, read_logs
    from causalfair.logs.audit import FittedModelPolicy
    from causalfair.policies.resolver import BUILTIN_KINDS

    system_flags = [flag for flag, dest in (("--system", "system"), ("--param", "param"),
                                            ("--setting", "setting"), ("--levels", "levels"),
                                            ("--interest", "interest"))
                    if getattr(args, dest, None) not in (None, [])]
    if system_flags:  # they would be ignored: the model is fitted to the log
        raise UsageError(f"{', '.join(system_flags)}: not with --logs FILE (the audit from a "
                         "decision log fits its model to the log); remove "
                         f"{'them' if len(system_flags) > 1 else 'it'}, or drop --logs to "
                         "audit the system.")
    engine_flags = [f"{flag} {getattr(args, dest)}" for flag, dest, default in (
        ("--engine", "engine", "auto"), ("--n", "n", None), ("--backend", "backend", None),
        ("--jobs", "jobs", None), ("--address", "address", None),
        ("--benefit-bins", "benefit_bins", None)) if getattr(args, dest, default) != default]
    if engine_flags:  # they would be ignored: the log's estimate simulates nothing
        raise UsageError(f"{', '.join(engine_flags)}: not with --logs FILE (the audit from a "
                         "decision log estimates from the log, its intervals by --boot "
                         "replicates; no engine simulates); remove "
                         f"{'them' if len(engine_flags) > 1 else 'it'}, or drop --logs to "
                         "audit the system.")
    if not args.audit_policy:  # the logged policy is audited: a policy named would be ignored
        policy_flags = [flag for flag, dest in (("--policy", "policy"),
                                                ("--checkpoint", "checkpoint"),
                                                ("--vecnormalize", "vecnormalize"))
                        if getattr(args, dest, None) is not None]
        if policy_flags:
            raise UsageError(f"{', '.join(policy_flags)}: with --logs FILE the logged policy "
                             "is audited; add --audit-policy to audit "
                             f"{'these' if len(policy_flags) > 1 else 'this'} on the model "
                             "fitted to the log, or remove "
                             f"{'them' if len(policy_flags) > 1 else 'it'}.")
    if args.boot < 0 or args.boot == 1:
        raise UsageError(f"--boot: must be 0 (no intervals) or >= 2 (one replicate has no "
                         f"spread), got {args.boot}.")
    alpha = getattr(args, "alpha", 0.05)  # decompose's --alpha, checked there: the intervals' level
    if args.horizon is not None:  # the library's rule, named as the flag
        from causalfair._validation import check_horizon

        with as_flag_error():
            check_horizon(args.horizon)
    state_kw = _state_options(args)
    if args.potential is not None:
        if "potential" in state_kw:
            raise UsageError("--potential, --potential-weights: both give the gain potential f; "
                             "keep one of them.")
        state_kw["potential"] = _potential(args.potential)
    df = read_logs(args.logs)
    policy = None
    if args.audit_policy:
        policy = args.policy
        if getattr(args, "checkpoint", None) or str(policy).partition(":")[0] not in BUILTIN_KINDS:
            # a checkpoint or a factory, resolved (and checked) on the model audit_logs fits
            policy = FittedModelPolicy(lambda model: load_policy(args, model).policy)
    pair = getattr(args, "pair", None)  # decompose's --pair: the groups compared
    # --pair names no two of the logged groups, a bad --potential: the flag's refusal
    with as_flag_error(o for o, given in (("pair", pair), ("potential", args.potential),
                                          ("reference", args.reference)) if given is not None):
        audit = audit_logs(
            df, horizon=None if args.horizon is None or isinstance(args.horizon, _DefaultHorizon)
            else int(args.horizon), n_boot=args.boot,
            seed=args.seed if args.seed is not None else 0, policy=policy,
            on_positivity=args.on_positivity, method=args.fit,
            alpha_smooth=args.alpha_smooth, eps=args.eps, weights=args.weights,
            dowhy=args.dowhy, lambda_estimator=args.lambda_estimator, reference=args.reference,
            pair=pair, decisions=args.decisions, **state_kw,
        )
    if args.json:
        out = versioned(DECOMPOSE_SCHEMA_VERSION, audit.to_dict(alpha, n_worst=args.worst))
        out["logs"] = str(args.logs)
        json.dump(out, sys.stdout, indent=2, allow_nan=False, default=str)
        sys.stdout.write("\n")
    else:
        print(audit.summary(alpha))
        if audit.benefit is not None:
            ben = audit.benefit  # its interval at the level asked for (the audit's: 95%)
            if ben.ci is not None and abs(alpha - 0.05) > 1e-12:
                ben = dataclasses.replace(ben, ci=audit.lambda_interval(alpha, method="normal"),
                                          ci_level=1.0 - alpha)
            print()
            print(ben.summary(args.worst))
    return 0

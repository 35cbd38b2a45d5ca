"""``causalfair simulate-logs``: a sample decision log, to try ``decompose --logs``."""

from __future__ import annotations

import argparse

from causalfair._io import atomic_write_bytes, check_output_file
from causalfair.commands._system import (
    POLICY_HELP,
    add_system_arguments,
    add_vecnormalize_argument,
    horizon,
    load_policy,
    load_system,
)
from causalfair.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate-logs",
        help="write a decision log of a policy deployed on a system (CSV or Parquet)",
        description=(
            "Simulate a policy on a system with discrete levels and two actions and write "
            "the decisions in the log format that `causalfair decompose --logs` and "
            "`[logs] path` read: one row per decision with id, t, group, level, decision, "
            "next_level, reward (and outcome where the system has one)."
        ),
        epilog="Example: causalfair simulate-logs --system lending-1 --policy random:0.5 "
               "--n 1000 --out logs.csv && causalfair decompose --logs logs.csv",
    )
    add_system_arguments(p)
    p.add_argument("--policy",
                   help=f"the policy that made the decisions: {POLICY_HELP}")
    add_vecnormalize_argument(p)
    p.add_argument("--n", type=int, default=1000, metavar="N",
                   help="individuals in the log (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="the log to write: FILE.csv, FILE.csv.gz (gzip) or FILE.parquet "
                        "(not overwritten)")
    p.set_defaults(run=run)


SUFFIXES = (".csv", ".csv.gz", ".parquet")  # what --out writes (and --logs reads)
_EXISTS = ("--out: {out} exists; causalfair does not overwrite a file it did not create in "
           "this run (choose another name or delete it).")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from causalfair.logs.simulate import potential_note, simulate_logs

    if args.n < 1:
        raise UsageError(f"--n: must be an integer >= 1, got {args.n}.")
    if args.seed < 0:
        raise UsageError(f"--seed: must be >= 0, got {args.seed}.")
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out: {out} is a folder; give a file name (e.g. "
                         f"{out / 'logs.csv'}).")
    kind = next((k for k in SUFFIXES if out.name.lower().endswith(k)), None)
    if kind is None:
        raise UsageError(f"--out: unknown suffix {out.suffix or '(none)'!r}; use "
                         f"{', '.join(SUFFIXES)}.")
    if out.exists() or out.is_symlink():
        raise UsageError(_EXISTS.format(out=out))
    check_output_file(out)  # below a file: refused before the simulation, not after it
    system = load_system(args)
    pol = load_policy(args, system)
    df = simulate_logs(system, pol.policy, args.n, horizon(args, system), args.seed)
    if kind == ".csv":
        def write(fh):
            fh.write(df.to_csv(index=False).encode())
    elif kind == ".csv.gz":  # (mtime 0: the same log, the same bytes)
        import gzip

        def write(fh):
            fh.write(gzip.compress(df.to_csv(index=False).encode(), mtime=0))
    else:
        def write(fh):
            df.to_parquet(fh, index=False)
    try:  # new: a file that appeared at --out while the log was simulated is never replaced
        atomic_write_bytes(out, write, new=True)
    except FileExistsError:
        raise UsageError(_EXISTS.format(out=out)) from None
    print(f"wrote {out}: {len(df)} decisions of {args.n} individuals over "
          f"{int(df['t'].max()) + 1} epochs ({system.id}, policy {pol.label}, seed {args.seed})")
    note = potential_note(system)
    if note:
        print(f"note: {note}")
    return 0

"""``causalfair frontier``: the exact utility-fairness frontier of a lending setting."""

from __future__ import annotations

import argparse
import json

from causalfair._io import (
    FRONTIER_SCHEMA_VERSION,
    check_output_folder,
    fixed,
    versioned,
    write_folder,
)
from causalfair.commands._system import add_vecnormalize_argument, horizon, load_system
from causalfair.commands.decompose import add_model_arguments
from causalfair.errors import UsageError

DEFAULT_POLICIES = ("threshold:0.5", "always")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "frontier",
        help="exact utility-fairness frontier (fair-policy LP) with policies placed on it",
        description=(
            "Solve the occupancy linear program 'maximise expected utility subject to "
            "|C| <= eps' (or |DPE|, or Wen's demographic parity |DP|) over all time-indexed "
            "policies, for a grid of eps, audit every frontier policy with the exact engine, "
            "and place audited policies (built-ins, checkpoints) against the frontier at "
            "equal |C| (at equal |DPE| or |DP| with --constraint DPE or DP: the printed "
            "tables then show that quantity). Writes frontier.csv, frontier.json and "
            "frontier.png into --out."
        ),
        epilog=(
            "Example: causalfair frontier --setting lending-1 --horizon 20 --points 50 "
            "--policy threshold:0.5 always --checkpoint runs/ppo-c.pt"
        ),
    )
    add_model_arguments(p)
    p.add_argument("--points", type=int, default=50, metavar="N",
                   help="number of eps values on the grid, 2 to 10000 (default: 50)")
    p.add_argument("--constraint", choices=("C", "DPE", "DP"), default="C",
                   help="the bounded disparity: eps bounds it, the placed policies' "
                        "gap is at equal |value| of it (default: C)")
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: ./frontier-<system id>, e.g. ./frontier-lending-1)")
    p.add_argument("--policy", nargs="+", action="extend", metavar="P",
                   help="policies to place, each a built-in, a checkpoint path or a factory "
                        "'module:callable' (looked up in --search-path first; default: "
                        "threshold:0.5 always when neither --policy nor --checkpoint is given)")
    p.add_argument("--checkpoint", nargs="+", action="extend", metavar="PATH",
                   help="checkpoints (.npz, .pt or stable-baselines3 .zip) to place on the "
                        "frontier")
    add_vecnormalize_argument(p, applies="one set for the run, given to every placed policy "
                              "that is not a built-in (the --checkpoint ones, checkpoint paths "
                              "and factories in --policy)")
    p.add_argument("--no-plot", action="store_true", help="skip frontier.png")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from causalfair.engines.frontier import check_points, frontier
    from causalfair.policies.resolver import BUILTIN_KINDS, resolve

    system = load_system(args)
    args.horizon = horizon(args, system)
    if args.points < 2:
        raise UsageError(f"--points: must be >= 2, got {args.points}.")
    if "frontier" not in system.engines:
        raise UsageError(
            f"--system {system.id}: the frontier LP needs a tabular model with two actions "
            f"(this system's engines: {', '.join(sorted(system.engines))}).")
    model = system.tabular
    check_points(args.points, model, args.horizon, "--points")  # up front, as the LP's size
    args.setting = system.id
    out = Path(args.out or f"frontier-{args.setting}")
    check_output_folder(out)  # before the LP: a folder that cannot be written wastes none
    specs = list(args.policy or [])
    ckpts = list(args.checkpoint or [])
    if not specs and not ckpts:
        specs = list(DEFAULT_POLICIES)
    stats = {"vecnormalize": args.vecnormalize, "vecnormalize_where": "--vecnormalize"}
    builtin = {spec: spec.partition(":")[0] in BUILTIN_KINDS for spec in specs}
    if args.vecnormalize is not None and not ckpts and all(builtin.values()):
        raise UsageError(f"--vecnormalize {args.vecnormalize}: goes with a stable-baselines3 "
                         "checkpoint (--checkpoint PATH), and only built-ins are placed; drop it.")
    policies: dict[str, object] = {}
    for spec in specs:  # statistics go with models, never with a built-in
        policies[spec] = resolve(spec, system, search_path=args.search_path, where="--policy",
                                 **({} if builtin[spec] else stats)).policy
    for path in ckpts:
        pol = resolve(Path(path), system, **stats).policy
        policies[f"{pol.name} ({Path(path).name})"] = pol

    front = frontier(model, args.horizon, points=args.points, constraint=args.constraint)
    placed = front.place(policies)

    table = front.to_frame()
    doc = versioned(FRONTIER_SCHEMA_VERSION, front.to_dict())
    doc["setting"] = args.setting
    doc["placed"] = json.loads(placed.to_json(orient="records"))

    def fill(tmp: Path) -> None:
        (tmp / "frontier.csv").write_text(table.to_csv(index=False), encoding="utf-8")
        (tmp / "frontier.json").write_text(json.dumps(doc, indent=2, allow_nan=False),
                                           encoding="utf-8")
        if not args.no_plot:
            front.plot(placed=placed, path=str(tmp / "frontier.png"))

    out = write_folder(out, fill, kind="frontier")
    print(front.summary())
    print()
    print("Policies against the frontier (gap = frontier utility at equal "
          f"{front.metric_label} - policy utility):")
    # the bounded quantity, whose |value| the gap is measured at, is always a column
    cols = ["policy", "utility", "C", "DPE", *(["DP"] if front.constraint == "DP" else []),
            "Lambda", "frontier_utility", "gap"]
    print(placed[cols].to_string(index=False, float_format=fixed))
    print(f"\nwrote {out / 'frontier.csv'}, {out / 'frontier.json'}"
          + ("" if args.no_plot else f", {out / 'frontier.png'}"))
    return 0

"""``causalfair graph``: the temporal causal graph of a setting and policy."""

from __future__ import annotations

import argparse

from causalfair._io import check_output_file
from causalfair.commands._system import (
    CHECKPOINT_HELP,
    POLICY_HELP,
    add_system_arguments,
    add_vecnormalize_argument,
    policy_reads_group,
)
from causalfair.commands.decompose import load_system_and_policy
from causalfair.errors import UsageError

FORMATS = (".png", ".svg", ".pdf", ".dot", ".gv", ".graphml", ".gml", ".json")
#: The suffixes of --out that draw the graph (the others export it as text).
DRAWINGS = (".png", ".svg", ".pdf")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "graph",
        help="build, summarise and export the temporal causal graph",
        description=(
            "Build the temporal causal graph (S, X_t, D_t, exogenous Y_t / U_t, G_t, R_t) "
            "unrolled over T epochs for the deployed policy (pi), the baseline (pi0) or "
            "the path-specific policy (ps); count the causal paths from S to the gains "
            "(policy-mediated vs spurious), list the edges each effect switches, and "
            "export the graph (PNG/SVG/PDF drawing of at most 60 epochs, DOT, GraphML, GML or "
            "JSON by the suffix of --out; docs/graph.md)."
        ),
    )
    add_system_arguments(p, horizon_default=2)  # two epochs: a graph one can read
    p.add_argument("--policy",
                   help=f"the deployed policy (decides whether S -> D_t exists): {POLICY_HELP}")
    p.add_argument("--checkpoint", metavar="PATH", help=CHECKPOINT_HELP)
    add_vecnormalize_argument(p)
    p.add_argument("--variant", choices=("pi", "pi0", "ps"), default="pi",
                   help="which graph (default: pi)")
    p.add_argument("--out", metavar="FILE", help=f"export to FILE; suffix one of {', '.join(FORMATS)}")
    p.add_argument("--paths", metavar="SOURCE",
                   help="list the causal paths from SOURCE (S or D0, D1, ...) to the gains")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from causalfair.graph import check_drawable, classify_paths, effect_edges, temporal_graph

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in FORMATS:
        raise UsageError(f"--out: unknown suffix {out.suffix.lower() or '(none)'!r} in "
                         f"{str(out)!r}; use one of {', '.join(FORMATS)}.")
    if out is not None:  # a folder, or below a file: before any work or output
        check_output_file(out)
    if out is not None and out.suffix.lower() in DRAWINGS:  # before any work or output
        check_drawable(args.horizon)
    system, policy = load_system_and_policy(args)
    reads_s = policy_reads_group(policy, system)
    # the system itself, not only its declared structure: its tabular model is checked
    # against the declaration and shows where the gain or reward reads S
    g = temporal_graph(system, args.horizon, policy_reads_s=reads_s, variant=args.variant)
    # the summary is printed once the paths are listed and the export written: a bad
    # --paths or --out is one line on stderr, with nothing on stdout before it
    lines = [f"temporal causal graph: {system.id}, policy {getattr(policy, 'name', 'pi')} "
             f"(reads S: {'yes' if reads_s else 'no'}), variant {args.variant}, "
             f"T = {args.horizon}",
             f"  {g.graph.number_of_nodes()} nodes, {g.graph.number_of_edges()} edges"]
    if args.variant == "pi":
        lines.append("  " + str(classify_paths(g)).replace("\n", "\n  "))
    for name, eff in effect_edges(args.horizon, system, policy_reads_s=reads_s).items():
        shown = ", ".join(f"{u}->{v}" for u, v in eff.edges[:6])
        more = f" (+{len(eff.edges) - 6} more)" if len(eff.edges) > 6 else ""
        lines.append(f"  {name}: switches {shown}{more}")
    if args.paths:
        lines += ["  " + " -> ".join(path) for path in g.paths(args.paths)]
    if out is not None:
        suffix = out.suffix.lower()
        if suffix in (".dot", ".gv"):
            g.to_dot(out)
        elif suffix == ".graphml":
            g.to_graphml(out)
        elif suffix == ".gml":
            g.to_gml(out)
        elif suffix == ".json":
            g.to_json(out)
        else:
            g.draw(out)
        lines.append(f"  wrote {out}")
    print("\n".join(lines))
    return 0

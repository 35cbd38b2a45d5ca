"""``causalfair systems``: list the registered systems."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from causalfair._io import SYSTEMS_SCHEMA_VERSION, to_jsonable, versioned
from causalfair._usercode import load_callable
from causalfair.commands._system import make_system, parse_params
from causalfair.errors import CausalfairError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "systems",
        help="list the registered systems (ids for --system and [system] id)",
        description=(
            "List the systems causalfair can make by id: the built-in ones, those registered "
            "with causalfair.systems.register, and those installed packages declare in the "
            "entry-point group 'causalfair.systems'. With ID, describe that system (groups, "
            "actions and baseline, features, engines)."
        ),
    )
    p.add_argument("id", nargs="?", help="describe this system (a registered id or module:callable)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="keyword argument for the system's factory (with ID; repeatable)")
    p.add_argument("--search-path", metavar="DIR", default=".",
                   help="folder searched first for a 'module:callable' factory (default: .)")
    p.add_argument("--json", action="store_true",
                   help="print JSON (docs/schema/systems.schema.json): an object with "
                   "schema_version and the list 'systems', or with ID that system's description")
    p.set_defaults(run=run)


def print_json(doc: dict[str, Any]) -> None:
    """Print ``doc`` as the versioned document of ``causalfair systems --json``."""
    json.dump(versioned(SYSTEMS_SCHEMA_VERSION, to_jsonable(doc)), sys.stdout, indent=2,
              allow_nan=False)
    sys.stdout.write("\n")


def _factory_doc(args: argparse.Namespace) -> str:
    """The first line of the docstring of a ``module:callable`` factory (a system of the
    user's whose simulator class has none), else ``""``."""
    import inspect

    if ":" not in args.id:
        return ""
    try:
        fn = load_callable(args.id, search_path=args.search_path, what=f"system factory {args.id!r}")
    except CausalfairError:  # (not a callable: the system was made some other way)
        return ""
    return (inspect.getdoc(fn) or "").split("\n")[0].strip()


def run(args: argparse.Namespace) -> int:
    from causalfair.systems import registered, spec

    if args.id is None:
        rows = [spec(i).to_dict() for i in registered()]
        if args.json:
            print_json({"systems": rows})
        else:
            for r in rows:
                print(f"{r['id']:<20} {r['description']}")
        return 0
    system = make_system(args.id, args.search_path, parse_params(args.param))
    d = system.to_dict()
    if args.json:
        print_json(d)
        return 0
    dec = d["decisions"]
    print(f"{d['id']}: {d['description'] or _factory_doc(args) or '(no description)'}")
    print(f"  groups: {', '.join(d['groups'])} (weights {', '.join(f'{w:g}' for w in d['group_weights'])})")
    print(f"  actions: {', '.join(dec['labels'])}; baseline (pi0): {dec['labels'][dec['baseline']]}")
    if d["features"]:
        print(f"  features: {', '.join(d['features'])}")
    if d["levels"]:
        print(f"  levels: {len(d['levels'])}")
    print(f"  gain: {d['gain']['name']} ({d['gain']['unit']}); reward: {d['reward']}")
    print(f"  horizon: {d['horizon']}; units per replica: {d['units_per_replica']}")
    print(f"  engines: {', '.join(d['engines'])}")
    return 0

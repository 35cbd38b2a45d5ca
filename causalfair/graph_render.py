"""Pictures and exports of a temporal causal graph (method.md section 7): Graphviz DOT
text, GraphML, the edge table and a matplotlib drawing.

Each function reads a :class:`causalfair.graph.TemporalGraph` (the methods of that class
call them) and computes nothing about the causal structure: node ids, kinds and
attributes are those the graph module documents. Files are written atomically.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from causalfair._io import atomic_write_bytes, atomic_write_text, check_output_file
from causalfair.errors import InputError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import networkx as nx
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["DRAW_FORMAT_ERROR", "MAX_DRAW_EPOCHS", "UnrolledGraph", "check_drawable", "to_dot", "to_graphml",
           "to_gml", "to_json", "to_frame", "layout", "draw", "math_label"]

_VARIANT_TITLES = {
    "pi": r"deployed policy $\pi$",
    "pi0": r"baseline $\pi_0$ (always $d_0$)",
    "ps": r"path-specific $\pi^{PS}$",
}

_KIND_COLOURS = {
    "sensitive": "#f4a6a6",
    "state": "#a6c8f4",
    "counterfactual_state": "#e3edfb",
    "decision": "#f9d38c",
    "exogenous": "#d9d9d9",
    "gain": "#a8e0a0",
    "reward": "#d7b8ec",
}

_DOT_SHAPES = {
    "sensitive": "doublecircle",
    "state": "ellipse",
    "counterfactual_state": "ellipse",
    "decision": "box",
    "exogenous": "ellipse",
    "gain": "diamond",
    "reward": "hexagon",
}

_DRAW_FORMATS = ("png", "svg", "pdf")

DRAW_FORMAT_ERROR = (
    "draw: cannot tell the image format of {path!r} from its suffix; use one of "
    ".png, .svg, .pdf."
)


#: Most epochs one drawing shows: the figure is at most 60 inches wide, one inch per epoch.
MAX_DRAW_EPOCHS = 60

DRAW_HORIZON_ERROR = (
    "draw: a graph over {horizon} epochs cannot be drawn readably (at most {most}, one inch "
    "each); draw its first epochs, temporal_graph(..., {most}) (--horizon {most}), or export "
    "the whole graph as text: to_dot / to_graphml / to_gml / to_json (--out FILE.dot)."
)


class UnrolledGraph(Protocol):
    """What the renderers read of a temporal graph (:class:`causalfair.graph.TemporalGraph`)."""

    @property
    def graph(self) -> nx.DiGraph: ...

    @property
    def horizon(self) -> int: ...

    @property
    def variant(self) -> str: ...

    def nodes(self, kind: str | None = None) -> list[str]: ...

    def edges(self) -> list[tuple[str, str]]: ...


# ------------------------------------------------------------------ export
def to_dot(tg: UnrolledGraph, path: str | os.PathLike[str] | None = None) -> str:
    """DOT text of ``tg`` (:meth:`causalfair.graph.TemporalGraph.to_dot`), written to
    ``path`` atomically when given."""
    g = tg.graph
    lines = [
        f'digraph "causalfair_{tg.variant}_T{tg.horizon}" {{',
        f'  graph [rankdir=LR, labelloc=t, label="temporal causal graph, variant '
        f'{tg.variant}, T={tg.horizon}", fontname="Helvetica"];',
        '  node [fontname="Helvetica", style=filled];',
    ]

    def node_line(n: str) -> str:
        data = g.nodes[n]
        kind = data["kind"]
        label = data["label"] + (" := d0" if data.get("intervened") else "")
        style = "filled,dashed" if kind == "counterfactual_state" else "filled"
        return (
            f'    "{n}" [label="{label}", class="{kind}", shape={_DOT_SHAPES[kind]}, '
            f'style="{style}", fillcolor="{_KIND_COLOURS[kind]}"];'
        )

    by_t: dict[int, list[str]] = {}
    for n in tg.nodes():
        t = g.nodes[n]["t"]
        if t is None:
            lines.append(node_line(n)[2:])
        else:
            by_t.setdefault(t, []).append(n)
    for t, members in by_t.items():
        lines.append(f'  subgraph "cluster_t{t}" {{')
        lines.append(f'    label="t = {t}"; color="#bbbbbb"; style=rounded;')
        lines.extend(node_line(n) for n in members)
        lines.append("  }")
    rank = {n: i for i, n in enumerate(tg.nodes())}  # the natural node order
    edges = sorted(g.edges(), key=lambda e: (rank[e[0]], rank[e[1]]))
    for u, v in edges:
        dashed = "counterfactual_state" in (g.nodes[u]["kind"], g.nodes[v]["kind"])
        lines.append(f'  "{u}" -> "{v}"' + (" [style=dashed]" if dashed else "") + ";")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    if path is not None:
        atomic_write_text(path, text)
    return text


def _without_none(tg: UnrolledGraph) -> nx.DiGraph:
    """A copy of ``tg.graph`` in natural node order with None-valued attributes left out
    (GraphML and GML have no null)."""
    import networkx as nx  # (lazy: only the exports need it)

    g = nx.DiGraph()
    g.graph.update({k: v for k, v in tg.graph.graph.items() if v is not None})
    for n in tg.nodes():
        g.add_node(n, **{k: v for k, v in tg.graph.nodes[n].items() if v is not None})
    g.add_edges_from(tg.edges())
    return g


def to_graphml(tg: UnrolledGraph, path: str | os.PathLike[str]) -> None:
    """Write ``tg`` as GraphML, atomically, None-valued attributes left out
    (:meth:`causalfair.graph.TemporalGraph.to_graphml`)."""
    import networkx as nx

    g = _without_none(tg)
    atomic_write_bytes(path, lambda fh: nx.write_graphml(g, fh))


def to_gml(tg: UnrolledGraph, path: str | os.PathLike[str] | None = None) -> str:
    """GML text of ``tg`` (None-valued attributes left out, booleans as 0/1), written to
    ``path`` atomically when given (:meth:`causalfair.graph.TemporalGraph.to_gml`)."""
    import networkx as nx

    text = "\n".join(nx.generate_gml(_without_none(tg))) + "\n"
    if path is not None:
        atomic_write_text(path, text)
    return text


def to_dict(tg: UnrolledGraph) -> dict[str, Any]:
    """The JSON form of ``tg`` (:meth:`causalfair.graph.TemporalGraph.to_dict`): the graph's
    attributes, ``nodes`` (each ``{"id": ..., **attributes}``, natural order; ``kind`` is
    the node's role) and ``edges`` (``[source, target]`` pairs, sorted)."""
    g = tg.graph
    return {"format": "causalfair-temporal-graph", "version": 1, **g.graph,
            "nodes": [{"id": n, **g.nodes[n]} for n in tg.nodes()],
            "edges": [list(e) for e in tg.edges()]}


def to_json(tg: UnrolledGraph, path: str | os.PathLike[str] | None = None) -> str:
    """JSON text of ``tg`` (:meth:`causalfair.graph.TemporalGraph.to_json`): :func:`to_dict`,
    written to ``path`` atomically."""
    import json

    text = json.dumps(to_dict(tg), indent=1) + "\n"
    if path is not None:
        atomic_write_text(path, text)
    return text


def to_frame(tg: UnrolledGraph) -> pd.DataFrame:
    """The edge table of ``tg`` (:meth:`causalfair.graph.TemporalGraph.to_frame`)."""
    import pandas as pd

    kind = tg.graph.nodes
    rows = [(u, v, kind[u]["kind"], kind[v]["kind"]) for u, v in tg.edges()]
    return pd.DataFrame(rows, columns=["source", "target", "source_kind", "target_kind"])


# ------------------------------------------------------------------ drawing
def layout(tg: UnrolledGraph) -> dict[str, tuple[float, float]]:
    """Layered layout: x = time (3 units per epoch), one row per kind, S on the left.

    Rows from the top: rewards, decisions, states, gains (between X_t and X_{t+1}),
    counterfactual states, then one row per exogenous variable.
    """
    exo_rows = {
        name: i
        for i, name in enumerate(
            dict.fromkeys(d["variable"] for _, d in tg.graph.nodes(data=True)
                          if d["kind"] == "exogenous")
        )
    }
    pos: dict[str, tuple[float, float]] = {}
    for n, data in tg.graph.nodes(data=True):
        kind, t = data["kind"], data["t"]
        if kind == "sensitive":
            pos[n] = (-2.0, 0.5)
        elif kind == "state":
            pos[n] = (3.0 * t, 0.0)
        elif kind == "decision":
            pos[n] = (3.0 * t + 1.0, 1.0)
        elif kind == "reward":
            pos[n] = (3.0 * t + 2.0, 2.0)
        elif kind == "gain":
            pos[n] = (3.0 * t + 1.5, -0.9)
        elif kind == "counterfactual_state":
            pos[n] = (3.0 * t - 0.6, -1.8)
        else:  # exogenous
            pos[n] = (3.0 * t + 0.9, -2.6 - 0.8 * exo_rows[data["variable"]])
    return pos


def check_drawable(horizon: int) -> None:
    """Refuse a drawing of over :data:`MAX_DRAW_EPOCHS` epochs (an :class:`InputError`):
    what :func:`draw` checks, and the command line before any work."""
    if horizon > MAX_DRAW_EPOCHS:
        raise InputError(DRAW_HORIZON_ERROR.format(horizon=horizon, most=MAX_DRAW_EPOCHS))


def draw(
    tg: UnrolledGraph, path: str | os.PathLike[str] | None = None, ax: Axes | None = None
) -> Figure:
    """The matplotlib Figure of ``tg`` (:meth:`causalfair.graph.TemporalGraph.draw`),
    saved atomically to ``path`` (PNG, SVG or PDF from the suffix) when given."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    check_drawable(tg.horizon)
    fmt = None
    if path is not None:
        fmt = check_output_file(path).suffix.lower().lstrip(".")
        if fmt not in _DRAW_FORMATS:
            raise InputError(DRAW_FORMAT_ERROR.format(path=str(path)))
    n_exo = len(tg.nodes("exogenous")) // tg.horizon
    if ax is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        width = min(3.0 + 1.9 * tg.horizon, 60.0)
        fig = Figure(figsize=(width, 3.2 + 0.55 * n_exo), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    else:
        fig = ax.figure

    g, pos = tg.graph, layout(tg)
    for u, v in sorted(g.edges()):
        kinds = (g.nodes[u]["kind"], g.nodes[v]["kind"])
        cf = "counterfactual_state" in kinds
        colour = "#d9822b" if kinds[1] == "decision" else ("#8a8a8a" if cf else "#444444")
        ax.annotate(
            "", xy=pos[v], xytext=pos[u],
            arrowprops={
                "arrowstyle": "-|>", "color": colour, "lw": 0.8, "shrinkA": 11,
                "shrinkB": 11, "linestyle": "--" if cf else "-",
                "connectionstyle": "arc3,rad=0.12" if u == "S" else "arc3,rad=0.0",
            },
            zorder=1,
        )
    for n in tg.nodes():
        data = g.nodes[n]
        label = math_label(data)
        ax.text(
            *pos[n], label, ha="center", va="center", fontsize=9, zorder=3,
            parse_math=label.startswith("$"),  # ours; user names stay plain text
            bbox={
                "boxstyle": "round,pad=0.3", "fc": _KIND_COLOURS[data["kind"]], "ec": "#333333",
                "ls": "--" if data["kind"] == "counterfactual_state" else "-",
            },
        )
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(min(ys) - 0.8, max(ys) + 0.6)
    ax.set_axis_off()
    ax.set_title(f"Temporal causal graph: {_VARIANT_TITLES[tg.variant]}, T = {tg.horizon}",
                 parse_math=True)
    present = {d for _, d in g.nodes(data="kind")}
    handles: list[Any] = [
        Patch(
            facecolor=_KIND_COLOURS[k], edgecolor="#333333", label=k.replace("_", " "),
            linestyle="--" if k == "counterfactual_state" else "-",
        )
        for k in _KIND_COLOURS  # the kinds in their natural order
        if k in present
    ]
    if any(g.nodes[v]["kind"] == "decision" for _, v in g.edges()):
        handles.append(Line2D([], [], color="#d9822b", label="policy edge"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              fontsize=8, frameon=False)
    if path is not None:
        atomic_write_bytes(path, lambda fh: fig.savefig(fh, format=fmt, bbox_inches="tight"))
    return fig


def math_label(data: Mapping[str, Any]) -> str:
    """Mathtext label, e.g. ``$X^{*}_{1}$`` for the node labelled ``X*_1``."""
    base, _, t = data["label"].rpartition("_")
    if not base or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*\*?", base) or not t.isdigit():
        return data["label"]  # a name mathtext cannot take as it is: shown as plain text
    if base == "X*":
        base = "X^{*}"
    elif len(base) > 1:
        base = r"\mathrm{" + base.replace("_", r"\_") + "}"
    text = f"{base}_{{{t}}}"
    if data.get("intervened"):
        text += r" = d_0"
    return f"${text}$"

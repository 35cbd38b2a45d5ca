"""The temporal causal graph of the decision process (method.md section 7).

The decision process is unrolled over ``T`` decision epochs into a directed acyclic graph
(a :class:`networkx.DiGraph`). Each node is one random variable of one individual's
episode; each edge says which variables a mechanism reads:

- ``S`` the sensitive attribute (hard-intervened on, ``do(s)``, in every value V);
- ``X_t`` the qualification state, ``t = 0..T``; ``P(x_0 | s)`` reads S when the structure
  declares ``s_to_x0``;
- ``D_t`` the decision drawn from the deployed policy ``pi(d | x_t, s)`` (reads S only if
  the policy does);
- one node per declared exogenous variable and step (``Y_t`` repayment, ``U_t`` drift...),
  read by the transition and, where declared, by the reward; it reads S where its law
  depends on the group;
- ``X_{t+1}`` produced by the transition ``P(x' | x_t, d_t, s)`` from ``(X_t, D_t, E_t)``
  (and S directly when ``s_to_transition``);
- ``G_t = g^s(X_t, X_{t+1})`` the qualification gain (it reads S too when a tabular
  model's potential f^s differs between groups) and ``R_t`` the reward, read from
  ``(D_t, X_t)`` and the reward-relevant exogenous nodes.

A declaration is checked against a tabular model's tables where there is one
(:func:`check_structure`); a black-box simulator's declaration is taken at its word.

Three variants give the graphs of Avin et al.'s path-specific decomposition used by the
reference paper (Fig. 1 and Fig. 2, method.md section 3):

``"pi"``
    the deployed policy, as above.
``"pi0"``
    the baseline ``do(D_t := d0)`` for every ``t``: a hard intervention, so every edge
    into ``D_t`` is cut (``X_t -> D_t`` and ``S -> D_t``).
``"ps"``
    the path-specific policy ``pi^PS``: the trajectory evolves as under ``pi`` (all edges
    into ``X_{t+1}`` stay), but each gain reads a counterfactual next state ``X*_{t+1}``,
    the state the individual would reach under ``d0`` from the same ``X_t`` with the same
    exogenous draws. ``G_t`` reads ``(X_t, X*_{t+1})`` instead of ``(X_t, X_{t+1})``.

Comparing the graphs tells which edges each effect switches (:func:`effect_edges`): the
DPE (``pi`` vs ``pi^PS``) switches the gains' input ``X_{t+1} -> G_t`` to
``X*_{t+1} -> G_t``; the IPE (``pi^PS`` vs ``pi0``) switches the decision mechanism
(``X_t -> D_t``, ``S -> D_t``); the SPE is the value under ``pi0``, carried by the paths
from S that avoid every decision.

Node ids are plain strings: ``"S"``, ``"X0"``, ``"D0"``, ``"G0"``, ``"R0"``, ``"Y0"``,
``"X*1"``. Node attributes: ``kind`` (one of :data:`NODE_KINDS`), ``t`` (int; ``None`` for
S), ``label`` (``"X_1"``), ``intervened`` on decisions (with ``value="d0"`` under
``pi0``), ``variable`` / ``depends_on_s`` / ``affects_reward`` on exogenous nodes and
``under="d0"`` on counterfactual states.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from causalfair import graph_render
from causalfair._limits import check_memory
from causalfair._validation import check_keywords
from causalfair.errors import InputError, ModelError, ResourceLimitError, short
from causalfair.graph_render import DRAW_FORMAT_ERROR as DRAW_FORMAT_ERROR  # re-exported
from causalfair.graph_render import check_drawable as check_drawable  # re-exported
from causalfair.model import EXOGENOUS_FLAGS_ERROR as EXOGENOUS_FLAGS_ERROR  # re-exported
from causalfair.model import EXOGENOUS_NAME_ERROR as EXOGENOUS_NAME_ERROR  # re-exported
from causalfair.model import CausalStructure, TabularModel, exogenous_nodes

if TYPE_CHECKING:  # pragma: no cover - typing only
    import networkx as nx
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "NODE_KINDS",
    "VARIANTS",
    "TemporalGraph",
    "EffectEdges",
    "PathClassification",
    "temporal_graph",
    "hypothetical_graphs",
    "effect_edges",
    "classify_paths",
    "check_structure",
]

#: Graph variants: deployed policy, baseline always-d0, path-specific pi^PS.
VARIANTS: tuple[str, ...] = ("pi", "pi0", "ps")

#: Node kinds, in the order used to sort the nodes of one epoch.
NODE_KINDS: tuple[str, ...] = (
    "sensitive",
    "state",
    "counterfactual_state",
    "decision",
    "exogenous",
    "gain",
    "reward",
)

_TABLE_TOL = 1e-12  # group differences below this are rounding, not a dependence

# ------------------------------------------------------------------ error messages
HORIZON_ERROR = (
    "horizon must be an int >= 1 (the number of decision epochs T), got {value!r}; "
    "pass a positive integer, e.g. horizon=5."
)
VARIANT_ERROR = (
    "variant must be one of 'pi' (deployed policy), 'pi0' (always d0) or 'ps' "
    "(path-specific pi^PS), got {value!r}."
)
STRUCTURE_ERROR = (
    "{where}: expected a TabularModel, a CausalStructure or a simulator with a `structure`, "
    "got {value}; pass e.g. cf.systems.make('lending-1') or its .tabular."
)
UNKNOWN_NODE_ERROR = (
    "{role} {value!r} is not a node of this graph (variant {variant!r}, horizon "
    "{horizon}); use 'S' or a node id such as 'D0', 'X1', 'G{last}'."
)
TOO_MANY_PATHS_ERROR = (
    "{count} causal paths lead from {source!r} to {target}, more than "
    "max_paths={max_paths}; the number grows like 2^T: count them with "
    "count_paths({source!r}) (`causalfair graph` prints the count), list them over fewer "
    "epochs (--horizon), or raise max_paths to list them all."
)
MAX_EPOCHS = 5000
MAX_PATHS_ERROR = "max_paths must be an int >= 0, got {value!r}."


# ------------------------------------------------------------------ validation
def _check_horizon(horizon: Any) -> int:
    if isinstance(horizon, bool) or not isinstance(horizon, numbers.Integral) or horizon < 1:
        raise InputError(HORIZON_ERROR.format(value=horizon))

    # the fixed limit first: raising CAUSALFAIR_MAX_MEMORY would not lift it
    if horizon > MAX_EPOCHS:  # path counts are integers of about T bits at every node
        raise ResourceLimitError(f"temporal graph over {horizon} epochs: at most {MAX_EPOCHS} "
                                 "epochs (its causal paths number about 2^T); draw fewer "
                                 "epochs (--horizon).")
    # about 8 nodes and 16 edges per epoch, ~1 KiB each in networkx
    check_memory(24.0 * 1024 * int(horizon), f"temporal graph over {horizon} epochs",
                 "draw fewer epochs (--horizon)")
    return int(horizon)


def _check_variant(variant: Any) -> str:
    if not isinstance(variant, str) or variant not in VARIANTS:
        raise InputError(VARIANT_ERROR.format(value=variant))
    return variant


def _resolve(obj: Any, where: str = "model_or_structure"
             ) -> tuple[CausalStructure, frozenset[str]]:
    """The declared structure of ``obj`` and the edges its tabular model adds.

    With a tabular model (a :class:`TabularModel`, or a system whose ``tabular`` is one)
    the declaration is checked against the tables (:func:`check_structure`), and the
    returned set names the mechanisms that read S although no declaration can say so:
    ``"gain"`` when the potential f^s differs between groups (``S -> G_t``), ``"reward"``
    when the reward r(s, d, x) does and no exogenous variable carries S to it
    (``S -> R_t``).
    """
    model = obj if isinstance(obj, TabularModel) else getattr(obj, "tabular", None)
    if isinstance(obj, CausalStructure):
        return obj, frozenset()
    if isinstance(obj, TabularModel):
        structure = obj.structure
    else:
        structure = getattr(obj, "structure", None)
        if callable(structure):  # e.g. LendingModel.structure()
            structure = structure()
        if not isinstance(structure, CausalStructure):
            raise InputError(STRUCTURE_ERROR.format(where=where, value=short(obj, 60)))
    if not isinstance(model, TabularModel):
        return structure, frozenset()
    return structure, check_structure(structure, model)


def _first_difference(table: Any, what: str, axes: str) -> str | None:
    """Where ``table[s, ...]`` differs between groups most (beyond rounding), in words;
    ``axes`` names the index after the group's."""
    arr = np.asarray(table, dtype=np.float64)
    gap = np.abs(arr - arr[:1]).max(axis=0)
    if gap.max(initial=0.0) <= _TABLE_TOL:
        return None
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(gap)), gap.shape))
    return f"{what} differs between groups by {gap[idx]:.3g} at ({axes}) = {idx}"


def check_structure(
    structure: CausalStructure, model: TabularModel, where: str = "structure"
) -> frozenset[str]:
    """Refuse a declared structure that the tabular model's own tables contradict.

    A declaration may claim more than the tables show (a mechanism that could read S but
    happens not to), never less: an initial distribution P(x_0 | s) that differs between
    groups needs ``s_to_x0``; a kernel P(x' | x, d, s) that differs needs
    ``s_to_transition`` or an exogenous variable whose law depends on S. A refusal is a
    :class:`~causalfair.errors.ModelError` naming the field and the fix. Returns the
    mechanisms that read S beyond the declaration's vocabulary (see :func:`_resolve`).
    """
    exo = exogenous_nodes(structure)
    # the tables are compared only where the declaration says S is not read (the kernel
    # is the largest array a model has)
    found = None if structure.s_to_x0 else _first_difference(
        model.initial, "the initial distribution P(x_0 | s)", "level")
    if found:
        raise ModelError(f"{where}.s_to_x0 is False, but {found}; set s_to_x0=True (S -> X_0) "
                         "or give the groups the same initial distribution.")
    carried = structure.s_to_transition or any(dep for _, dep, _ in exo)
    found = None if carried else _first_difference(
        model.kernel, "the transition kernel P(x' | x, d, s)", "action, level, next level")
    if found:
        raise ModelError(
            f"{where}.s_to_transition is False and no exogenous variable depends on S, but "
            f"{found}; set s_to_transition=True (S -> X_t+1) or "
            "declare the exogenous variable that carries S, e.g. exogenous={'Y': (True, True)}.")
    extra = set()
    if _first_difference(model.potential, "the potential f^s", "level"):
        extra.add("gain")
    if _first_difference(model.reward, "the reward", "action, level") and not any(d and r for _, d, r in exo):
        extra.add("reward")
    return frozenset(extra)


# ------------------------------------------------------------------ building
def _build(
    structure: CausalStructure, horizon: int, policy_reads_s: bool, variant: str,
    reads_s: frozenset[str] = frozenset(),
) -> nx.DiGraph:
    """The graph itself: the one place its nodes and edges are made. ``reads_s``: the
    mechanisms a tabular model shows to read S beyond the declaration (:func:`_resolve`)."""
    if not isinstance(policy_reads_s, (bool, np.bool_)):  # (1 == True: not a flag)
        raise InputError(f"policy_reads_s: expected True or False, got {policy_reads_s!r}; "
                         "causalfair.policies.grid.reads_group(policy, system=...) tells.")
    import networkx as nx  # (lazy: a process that builds no graph never loads it)

    exo = exogenous_nodes(structure)
    g = nx.DiGraph(horizon=horizon, variant=variant, policy_reads_s=bool(policy_reads_s))
    g.add_node("S", kind="sensitive", t=None, label="S")
    for t in range(horizon + 1):
        g.add_node(f"X{t}", kind="state", t=t, label=f"X_{t}")
    if structure.s_to_x0:
        g.add_edge("S", "X0")

    for t in range(horizon):
        x, x_next, d, gain, r = f"X{t}", f"X{t + 1}", f"D{t}", f"G{t}", f"R{t}"
        # decision: the policy mechanism, or the constant do(D_t := d0) under pi0
        if variant == "pi0":
            g.add_node(d, kind="decision", t=t, label=f"D_{t}", intervened=True, value="d0")
        else:
            g.add_node(d, kind="decision", t=t, label=f"D_{t}", intervened=False)
            g.add_edge(x, d)
            if policy_reads_s:
                g.add_edge("S", d)
        g.add_node(gain, kind="gain", t=t, label=f"G_{t}")
        g.add_node(r, kind="reward", t=t, label=f"R_{t}")
        if "gain" in reads_s:  # g^s(x, x') = f^s(x') - f^s(x) with group-specific f^s
            g.add_edge("S", gain)
        if "reward" in reads_s:
            g.add_edge("S", r)

        # transition of the trajectory (identical in all three variants)
        g.add_edges_from([(x, x_next), (d, x_next)])
        if structure.s_to_transition:
            g.add_edge("S", x_next)
        for name, dep, rew in exo:
            e = f"{name}{t}"
            g.add_node(
                e, kind="exogenous", t=t, label=f"{name}_{t}", variable=name,
                depends_on_s=dep, affects_reward=rew,
            )
            g.add_edge(e, x_next)
            if dep:
                g.add_edge("S", e)
            if rew:
                g.add_edge(e, r)

        # gain: reads the realised next state, or the d0 counterfactual one under pi^PS
        if variant == "ps":
            cf = f"X*{t + 1}"
            g.add_node(cf, kind="counterfactual_state", t=t + 1, label=f"X*_{t + 1}", under="d0")
            g.add_edge(x, cf)
            g.add_edges_from((f"{name}{t}", cf) for name, _, _ in exo)
            if structure.s_to_transition:
                g.add_edge("S", cf)
            g.add_edges_from([(x, gain), (cf, gain)])
        else:
            g.add_edges_from([(x, gain), (x_next, gain)])

        # reward: as under the deployed process in every variant
        g.add_edges_from([(d, r), (x, r)])
    return g


def _node_key(graph: nx.DiGraph, node: str) -> tuple[int, int, str]:
    """Natural order: S first, then by epoch, kind (NODE_KINDS order) and id."""
    data = graph.nodes[node]
    t = data.get("t")
    return (-1 if t is None else int(t), NODE_KINDS.index(data["kind"]), node)


def _path_counts(
    graph: nx.DiGraph, source: str, avoid: frozenset[str] = frozenset()
) -> dict[str, int]:
    """n(v): the number of directed paths from ``source`` to each node v avoiding ``avoid``.

    Dynamic programming over a topological order: n(source) = 1, n(v) = sum of n(u) over
    the parents u of v; exact (Python ints) and linear in the size of the graph.
    """
    import networkx as nx

    counts = {source: 1}
    for v in nx.topological_sort(graph):
        n = counts.get(v)
        if not n:
            continue
        for w in graph.successors(v):
            if w not in avoid:
                counts[w] = counts.get(w, 0) + n
    return counts


# ------------------------------------------------------------------ the graph object
@dataclass(frozen=True, eq=False)
class TemporalGraph:
    """The causal graph of one variant of the decision process, unrolled over T epochs.

    Build it with :func:`temporal_graph` or :func:`hypothetical_graphs`.

    Attributes
    ----------
    graph : networkx.DiGraph
        The DAG; node ids and attributes are described in the module docstring. Treat it
        as read-only.
    horizon : int
        T, the number of decision epochs (states X_0..X_T).
    variant : {"pi", "pi0", "ps"}
        Deployed policy, baseline do(D_t := d0), or path-specific pi^PS.
    """

    graph: nx.DiGraph
    horizon: int
    variant: str

    def __post_init__(self) -> None:
        import networkx as nx

        if not isinstance(self.graph, nx.DiGraph):
            raise TypeError(f"graph: expected a networkx.DiGraph, got {type(self.graph).__name__}.")
        object.__setattr__(self, "horizon", _check_horizon(self.horizon))
        _check_variant(self.variant)

    def __repr__(self) -> str:
        return (
            f"TemporalGraph(variant={self.variant!r}, horizon={self.horizon}, "
            f"nodes={self.graph.number_of_nodes()}, edges={self.graph.number_of_edges()})"
        )

    # -------------------------------------------------------------- listing
    @check_keywords(name="TemporalGraph.nodes")
    def nodes(self, kind: str | None = None) -> list[str]:
        """Node ids in natural order (S, then by epoch and kind), optionally of one kind."""
        if kind is not None and kind not in NODE_KINDS:
            raise InputError(f"kind must be one of {', '.join(NODE_KINDS)}, got {kind!r}.")
        nodes = (n for n, k in self.graph.nodes(data="kind") if kind is None or k == kind)
        return sorted(nodes, key=lambda n: _node_key(self.graph, n))

    def edges(self) -> list[tuple[str, str]]:
        """All edges ``(u, v)``, sorted (plain string order, so stable across runs)."""
        return sorted(self.graph.edges())

    def _check_node(self, node: Any, role: str) -> str:
        if not isinstance(node, str) or node not in self.graph:
            raise InputError(
                UNKNOWN_NODE_ERROR.format(
                    role=role, value=node, variant=self.variant, horizon=self.horizon,
                    last=self.horizon - 1,
                )
            )
        return node

    def _targets(self, target: str | None) -> list[str]:
        if target is None:
            return self.nodes("gain")
        return [self._check_node(target, "target")]

    # -------------------------------------------------------------- paths
    @check_keywords(name="TemporalGraph.count_paths")
    def count_paths(self, source: str, target: str | None = None) -> int:
        """Number of causal (directed) paths from ``source`` to the gains, or to ``target``.

        Exact for any horizon: dynamic programming over the DAG in topological order,
        O(nodes + edges), so T = 200 (about 2^200 paths from S) takes milliseconds. A
        path that reaches ``target`` counts once; ``source == target`` counts the
        trivial path.
        """
        self._check_node(source, "source")
        counts = _path_counts(self.graph, source)
        return sum(counts.get(t, 0) for t in self._targets(target))

    def paths(
        self, source: str, target: str | None = None, *, max_paths: int = 10000
    ) -> list[list[str]]:
        """The causal paths from ``source`` (``"S"`` or a decision ``"Dt"``) to the gains.

        Each path is a list of node ids, e.g. ``["D0", "X1", "G1"]``; with ``target``
        only paths ending there. The paths are sorted (by their natural node order).
        Their number grows like 2^T, so more than ``max_paths`` raises a ValueError
        pointing at :meth:`count_paths`.
        """
        if isinstance(max_paths, bool) or not isinstance(max_paths, numbers.Integral) or max_paths < 0:
            raise InputError(MAX_PATHS_ERROR.format(value=max_paths))
        targets = self._targets(target)
        count = self.count_paths(source, target)
        if count > max_paths:
            raise InputError(
                TOO_MANY_PATHS_ERROR.format(
                    count=_count(count), source=source, max_paths=max_paths,
                    target="the gains" if target is None else repr(target),
                )
            )
        target_set = set(targets)
        useful, frontier = set(target_set), list(target_set)  # nodes that reach a target
        while frontier:
            for u in self.graph.predecessors(frontier.pop()):
                if u not in useful:
                    useful.add(u)
                    frontier.append(u)
        out: list[list[str]] = []
        stack = [[source]] if source in useful else []
        while stack:
            path = stack.pop()
            if path[-1] in target_set:
                out.append(path)
                continue
            for w in self.graph.successors(path[-1]):
                if w in useful:
                    stack.append([*path, w])
        return sorted(out, key=lambda p: [_node_key(self.graph, n) for n in p])

    # -------------------------------------------------------------- export and drawing
    @check_keywords(name="TemporalGraph.to_dot")
    def to_dot(self, path: str | os.PathLike[str] | None = None) -> str:
        """The graph as Graphviz DOT text (no graphviz needed to produce it).

        Time runs left to right; the nodes of epoch t sit in a cluster labelled
        ``t = <t>``; kinds
        have their own shape and colour, counterfactual states are dashed, intervened
        decisions show ``:= d0``. One edge per line (``"u" -> "v";``), in natural order.
        With ``path``, the text is also written there atomically.
        """
        return graph_render.to_dot(self, path)

    @check_keywords(name="TemporalGraph.to_graphml")
    def to_graphml(self, path: str | os.PathLike[str]) -> None:
        """Write the graph as GraphML (networkx), atomically.

        GraphML has no null: attributes whose value is None (``t`` of S) are left out of
        that node, so :func:`networkx.read_graphml` gives them back as missing.
        """
        graph_render.to_graphml(self, path)

    @check_keywords(name="TemporalGraph.to_gml")
    def to_gml(self, path: str | os.PathLike[str] | None = None) -> str:
        """The graph as GML text (networkx; attributes whose value is None, ``t`` of S, left
        out, booleans written 0/1); with ``path``, also written there atomically."""
        return graph_render.to_gml(self, path)

    @check_keywords(name="TemporalGraph.to_json")
    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """The graph as JSON text: its attributes (``horizon``, ``variant``,
        ``policy_reads_s``), ``nodes`` (``{"id": ..., "kind": ..., "t": ..., ...}``, natural
        order) and ``edges`` (sorted ``[source, target]`` pairs); with ``path``, also
        written there atomically."""
        return graph_render.to_json(self, path)

    def to_dict(self) -> dict[str, Any]:
        """The graph as a JSON-safe dict, what :meth:`to_json` writes: its attributes,
        ``nodes`` (``{"id": ..., "kind": ..., "t": ..., ...}``: ``kind`` is the node's role,
        one of :data:`NODE_KINDS`) and ``edges`` (sorted
        ``[source, target]`` pairs; an edge's role is its two nodes' kinds, as
        :meth:`to_frame` lists them)."""
        return graph_render.to_dict(self)

    def to_frame(self) -> pd.DataFrame:
        """The edges as a pandas DataFrame: source, target, source_kind, target_kind."""
        return graph_render.to_frame(self)

    def _repr_svg_(self) -> str | None:
        """Jupyter draws the graph inline (SVG; the figure widens with T); a graph too long
        to draw (:data:`causalfair.graph_render.MAX_DRAW_EPOCHS`) shows its repr instead."""
        import io

        if self.horizon > graph_render.MAX_DRAW_EPOCHS:
            return None

        buf = io.StringIO()
        self.draw().savefig(buf, format="svg")
        return buf.getvalue()

    @check_keywords(name="TemporalGraph.draw")
    def draw(
        self, path: str | os.PathLike[str] | None = None, ax: Axes | None = None
    ) -> Figure:
        """Draw the graph with matplotlib and return the Figure.

        Time runs along the x axis (S on the left); kinds are colour-coded, counterfactual
        states are dashed, edges into decisions are orange. Without ``ax`` a new Figure
        on the Agg canvas is made (pyplot's global state is not touched); with ``path``
        it is saved (PNG, SVG or PDF from the suffix), atomically. Meant for small T
        (say T <= 10): the figure widens with T.
        """
        return graph_render.draw(self, path, ax)


# ------------------------------------------------------------------ builders
@check_keywords
def temporal_graph(
    model_or_structure: TabularModel | CausalStructure | Any,
    horizon: int,
    *,
    policy_reads_s: bool = True,
    variant: str = "pi",
) -> TemporalGraph:
    """The causal graph of the decision process under ``do(pi)``, ``do(pi0)`` or ``pi^PS``.

    Parameters
    ----------
    model_or_structure : TabularModel, CausalStructure, or a simulator with ``structure``
        What the model declares about S -> X_0, S -> transition and the exogenous nodes.
    horizon : int >= 1
        T, the number of decision epochs.
    policy_reads_s : bool
        Whether the deployed policy reads S (adds ``S -> D_t``); an S-unaware policy
        cuts those edges, but S still reaches decisions through ``X_t``. To derive it
        from a policy: ``cf.temporal_graph(system, T, policy=pol)``
        (:func:`causalfair.engines.choice.temporal_graph`).
    variant : {"pi", "pi0", "ps"}
        See the module docstring (reference paper, Fig. 1 and Fig. 2).
    """
    structure, reads_s = _resolve(model_or_structure)
    horizon = _check_horizon(horizon)
    variant = _check_variant(variant)
    return TemporalGraph(
        graph=_build(structure, horizon, policy_reads_s, variant, reads_s), horizon=horizon,
        variant=variant,
    )


@check_keywords
def hypothetical_graphs(
    model: TabularModel | CausalStructure | Any, horizon: int, policy_reads_s: bool = True
) -> dict[str, TemporalGraph]:
    """The graphs of the deployed policy and of both hypothetical policies.

    Returns ``{"pi": ..., "pi0": ..., "ps": ...}``: the three processes whose values
    V^pi, V^pi0 and V^PS give C = DPE + IPE + SPE (method.md section 3).
    """
    _resolve(model, "model")  # a model that is none: refused naming this argument
    return {
        v: temporal_graph(model, horizon, policy_reads_s=policy_reads_s, variant=v)
        for v in VARIANTS
    }


# ------------------------------------------------------------------ effects and paths
@dataclass(frozen=True)
class EffectEdges:
    """The edges one term of C = DPE + IPE + SPE switches between two graphs.

    ``compares`` names the variants whose values are subtracted (``("pi", "ps")`` for
    V^pi - V^PS); ``edges`` are present in the first graph and absent from the second,
    ``replaced_by`` are the edges of the second graph that take their place. The SPE is
    a single value (V^pi0), so its ``edges`` are those carrying it: the edges of the pi0
    graph on a path from S to a gain that avoids every decision.
    """

    effect: str
    compares: tuple[str, ...]
    explanation: str
    edges: tuple[tuple[str, str], ...]
    replaced_by: tuple[tuple[str, str], ...] = ()


def effect_edges(
    horizon: int,
    structure: CausalStructure | TabularModel | Any,
    *,
    policy_reads_s: bool = True,
) -> dict[str, EffectEdges]:
    """Which edges each effect of the decomposition switches, for T = ``horizon``.

    - ``"DPE"`` (V^pi - V^PS): the gain's input ``X_{t+1} -> G_t`` under pi becomes
      ``X*_{t+1} -> G_t`` under pi^PS for every t, so only the decision's instantaneous
      path ``D_t -> X_{t+1} -> G_t`` is switched off; the trajectory is unchanged.
    - ``"IPE"`` (V^PS - V^pi0): the decision mechanism ``X_t -> D_t`` and ``S -> D_t``
      (present under pi^PS's trajectory) is cut by do(D_t := d0); what changes are the
      delayed paths ``D_t -> X_{t+1} -> ... -> G_t'``, t' > t.
    - ``"SPE"`` (V^pi0): the paths from S that avoid every D_t.
    """
    horizon = _check_horizon(horizon)
    T = range(horizon)
    dpe = tuple((f"X{t + 1}", f"G{t}") for t in T)
    dpe_new = tuple((f"X*{t + 1}", f"G{t}") for t in T)
    ipe = tuple(
        e for t in T for e in ((f"X{t}", f"D{t}"), ("S", f"D{t}")) if policy_reads_s or e[0] != "S"
    )
    pi0 = temporal_graph(structure, horizon, policy_reads_s=policy_reads_s, variant="pi0").graph
    no_d = pi0.subgraph(n for n, k in pi0.nodes(data="kind") if k != "decision")
    import networkx as nx

    from_s = nx.descendants(no_d, "S") | {"S"}
    gains = [n for n, k in no_d.nodes(data="kind") if k == "gain"]
    to_gain = set(gains)  # the gains and their ancestors: one backward search, O(graph)
    while gains:
        for u in no_d.predecessors(gains.pop()):
            if u not in to_gain:
                to_gain.add(u)
                gains.append(u)
    spe = tuple(sorted((u, v) for u, v in no_d.edges() if u in from_s and v in to_gain))
    return {
        "DPE": EffectEdges(
            "DPE", ("pi", "ps"),
            "direct effect, V^pi - V^PS: each gain G_t reads the realised next state "
            "X_{t+1} (pi) instead of the d0 counterfactual X*_{t+1} (pi^PS); the "
            "trajectory is the same, so only the instantaneous path D_t -> X_{t+1} -> G_t "
            "is switched.",
            dpe, dpe_new,
        ),
        "IPE": EffectEdges(
            "IPE", ("ps", "pi0"),
            "indirect effect, V^PS - V^pi0: the decision mechanism X_t -> D_t (and S -> D_t "
            "if the policy reads S) drives pi^PS's trajectory and is cut by do(D_t := d0) "
            "under pi0; it carries the delayed paths D_t -> X_{t+1} -> ... -> G_t', t' > t.",
            ipe,
        ),
        "SPE": EffectEdges(
            "SPE", ("pi0",),
            "spurious effect, V^pi0: what the environment alone yields; carried by the "
            "paths from S to the gains that avoid every decision D_t.",
            spe,
        ),
    }


@dataclass(frozen=True)
class PathClassification:
    """Counts of the causal paths from ``source`` to the gains, split by mediation.

    ``policy_mediated`` paths pass through some decision node D_t (the policy's part:
    DPE and IPE); ``spurious`` paths avoid every decision (the SPE's part).
    ``by_gain`` maps each gain node to ``(policy_mediated, spurious)``.
    """

    source: str
    variant: str
    total: int
    policy_mediated: int
    spurious: int
    by_gain: Mapping[str, tuple[int, int]]

    def to_frame(self) -> pd.DataFrame:
        """One row per gain: gain, policy_mediated, spurious, total."""
        import pandas as pd

        rows = [(g, m, s, m + s) for g, (m, s) in self.by_gain.items()]
        return pd.DataFrame(rows, columns=["gain", "policy_mediated", "spurious", "total"])

    def __str__(self) -> str:
        return (
            f"paths from {self.source} to the gains ({self.variant}): {_count(self.total)} = "
            f"{_count(self.policy_mediated)} through a decision + {_count(self.spurious)} "
            "avoiding all decisions"
        )


def _count(n: int) -> str:
    """An exact path count in words: the digits up to 15 of them, else ``~1.23e+1505``
    (a count of about 2^T paths has T / 3.3 digits)."""
    digits = str(n)
    if len(digits) <= 15:
        return digits
    return f"~{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"


def classify_paths(graph_pi: TemporalGraph, source: str = "S") -> PathClassification:
    """Count the paths from ``source`` to each gain through / avoiding the decisions.

    Both counts come from dynamic programming (:meth:`TemporalGraph.count_paths`), so
    they are exact for any horizon. On the pi graph the decision-avoiding paths from S
    are the spurious channel (S -> X_0, S -> Y_t / U_t -> X_{t+1}, ...); on the pi0
    graph every path from S avoids the (intervened) decisions.
    """
    graph_pi._check_node(source, "source")
    g = graph_pi.graph
    decisions = frozenset(graph_pi.nodes("decision"))
    total = _path_counts(g, source)
    avoiding = {} if source in decisions else _path_counts(g, source, decisions)
    by_gain = {}
    for gain in graph_pi.nodes("gain"):
        spurious = avoiding.get(gain, 0)
        by_gain[gain] = (total.get(gain, 0) - spurious, spurious)
    mediated = sum(m for m, _ in by_gain.values())
    spurious = sum(s for _, s in by_gain.values())
    return PathClassification(
        source=source, variant=graph_pi.variant, total=mediated + spurious,
        policy_mediated=mediated, spurious=spurious, by_gain=by_gain,
    )

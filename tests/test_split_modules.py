"""The temporal graph's renderers, the decision-log errors, binning and simulation, and the
generic trainer's fair-advantage signals and replica-choice steps live in modules of their
own; the names they had keep their old import paths, and the renderers keep the graph's
natural order (kinds in NODE_KINDS order, edges by node order)."""

from __future__ import annotations

import re

import pytest

import causalfair as cf
from causalfair import graph, graph_render
from causalfair.errors import ConfigError
from causalfair.logs import binning, errors, schema, simulate
from causalfair.model import CausalStructure
from causalfair.train import fair_signals, generic, replica_choice

LENDING = CausalStructure(
    exogenous={"Y": (True, True), "U": (True, False)}, s_to_x0=True, s_to_transition=False
)


def test_old_import_paths_name_the_same_objects():
    assert graph.DRAW_FORMAT_ERROR is graph_render.DRAW_FORMAT_ERROR
    assert schema.LogError is errors.LogError is cf.logs.LogError
    assert schema.simulate_logs is simulate.simulate_logs is cf.logs.simulate_logs
    for name in ("StateBinning", "bin_states", "linear_potential"):
        assert getattr(schema, name) is getattr(binning, name) is getattr(cf.logs, name)
    msgs = {n for n in dir(errors) if n.startswith("MSG_")}
    assert msgs and msgs <= set(schema.__all__)
    assert all(getattr(schema, n) is getattr(errors, n) for n in msgs)
    assert generic.FAIR_ADVANTAGE_ALGOS == fair_signals.FAIR_ADVANTAGE_ALGOS
    assert issubclass(generic.SystemTrainer, replica_choice.ReplicaChoiceTraining)


def test_the_legend_lists_the_kinds_in_their_natural_order():
    pytest.importorskip("matplotlib")
    for variant in graph.VARIANTS:
        fig = graph.temporal_graph(LENDING, 2, variant=variant).draw()
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        kinds = [k.replace("_", " ") for k in graph.NODE_KINDS]
        shown = [lab for lab in labels if lab in kinds]
        assert shown == sorted(shown, key=kinds.index), (variant, labels)
        assert ("counterfactual state" in shown) == (variant == "ps")


def test_dot_lists_edges_in_the_natural_node_order():
    tg = graph.temporal_graph(LENDING, 3, variant="ps")
    order = {n: i for i, n in enumerate(tg.nodes())}
    edges = re.findall(r'^  "([^"]+)" -> "([^"]+)"', tg.to_dot(), re.M)
    assert sorted(edges) == tg.edges()
    assert edges == sorted(edges, key=lambda e: (order[e[0]], order[e[1]]))


def test_fair_signals_are_checked_without_a_trainer():
    system = cf.systems.make("attention-1")
    fair_signals.check_fair_signals("elbert-po", system, system.make_simulator())  # has them
    other = cf.systems.make("replicator-1")
    missing = r"StepResult.info keys \['supply', 'demand'\] missing in system 'replicator-1'"
    with pytest.raises(ConfigError, match=missing):
        fair_signals.check_fair_signals("f-ppo-l", other, other.make_simulator())

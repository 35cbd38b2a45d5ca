"""The temporal causal graph as a causal-inference researcher uses it (docs/graph.md):
its paths against networkx's own enumeration, declarations checked against a tabular
model, the gain's dependence on S, exports read back by networkx, bounded drawing and
bounded time at the largest horizon."""

from __future__ import annotations

import json
import time

import networkx as nx
import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import InputError, ModelError
from causalfair.graph import (
    classify_paths,
    effect_edges,
    hypothetical_graphs,
    temporal_graph,
)
from causalfair.systems.system import as_system

FULL = cf.CausalStructure(exogenous={"Y": (True, True), "U": (True, False)}, s_to_x0=True,
                          s_to_transition=True)


def _simple_paths(tg):
    return {tuple(p) for p in nx.all_simple_paths(tg.graph, "S", tg.nodes("gain"))}


def test_paths_match_networkx_and_the_dpe_claim():
    """count/classify agree with nx.all_simple_paths; the paths pi has and pi^PS lacks are
    exactly those ending D_t -> X_{t+1} -> G_t (docs/graph.md, DPE); every other path of
    pi reappears in pi^PS with X*_{t+1} as the gain's input."""
    graphs = hypothetical_graphs(FULL, 3)
    pi, ps = _simple_paths(graphs["pi"]), _simple_paths(graphs["ps"])
    cls = classify_paths(graphs["pi"])
    assert cls.total == graphs["pi"].count_paths("S") == len(pi)
    assert cls.spurious == sum(not any(n.startswith("D") for n in p) for p in pi)

    def rerouted(p):
        x, g = p[-2], p[-1]
        if x.startswith("X") and int(x[1:]) == int(g[1:]) + 1:
            return (*p[:-2], "X*" + x[1:], g)
        return p

    cut = {p for p in pi if rerouted(p) not in ps}
    assert cut and all(p[-3].startswith("D") for p in cut)
    assert {rerouted(p) for p in pi - cut} == ps


def test_structure_contradicting_the_tabular_model_is_refused():
    m = cf.lending_setting("lending-2").tabular  # kernel and initial differ between groups
    no_trans = m.with_(structure=cf.CausalStructure(exogenous={"Y": (False, True)},
                                                    s_to_transition=False))
    with pytest.raises(ModelError, match=r"s_to_transition is False.*set s_to_transition=True"):
        temporal_graph(no_trans, 2)
    with pytest.raises(ModelError, match=r"system 'x': structure\.s_to_transition"):
        as_system(no_trans, id="x")
    no_x0 = m.with_(structure=cf.CausalStructure(exogenous={"Y": (True, True)}, s_to_x0=False,
                                                 s_to_transition=False))
    with pytest.raises(ModelError, match=r"s_to_x0 is False.*initial distribution"):
        effect_edges(2, no_x0)
    # a declaration that claims more than the tables show is fine
    assert temporal_graph(m.with_(structure=FULL), 1).graph.has_edge("S", "X1")


def test_group_specific_potential_draws_s_to_gain():
    """g^s(x, x') = f^s(x') - f^s(x) reads S when f^s differs between groups (method.md
    section 1): the graph has S -> G_t and the SPE carries it; shared potentials do not."""
    m = cf.lending_setting("lending-1").tabular
    assert not temporal_graph(m, 2).graph.has_edge("S", "G0")
    pot = np.array([np.arange(7.0), 2.0 * np.arange(7.0)])
    m2 = m.with_(potential=pot)
    g = temporal_graph(m2, 2)
    assert g.graph.has_edge("S", "G0") and g.graph.has_edge("S", "G1")
    assert ("S", "G1") in effect_edges(2, m2)["SPE"].edges
    # the system door draws the same graph as the model door
    assert temporal_graph(as_system(m2, id="pot"), 2).edges() == g.edges()


def test_exports_gml_json_read_back(tmp_path):
    g = hypothetical_graphs(FULL, 2)["ps"]
    gml = g.to_gml(tmp_path / "g.gml")
    back = nx.read_gml(tmp_path / "g.gml")  # GML's label is the node id
    assert gml.startswith("graph [") and set(back.nodes) == set(g.nodes())
    assert sorted(back.edges) == g.edges()
    assert back.nodes["X*1"]["kind"] == "counterfactual_state"
    doc = json.loads(g.to_json(tmp_path / "g.json"))
    assert (tmp_path / "g.json").read_text() == json.dumps(doc, indent=1) + "\n"
    assert [n["id"] for n in doc["nodes"]] == g.nodes()
    assert [tuple(e) for e in doc["edges"]] == g.edges()
    assert doc["nodes"][0] == {"id": "S", "kind": "sensitive", "t": None, "label": "S"}
    assert (doc["variant"], doc["horizon"]) == ("ps", 2)


def test_long_horizon_drawing_refused_and_counts_short(tmp_path):
    big = temporal_graph(FULL, 61)
    with pytest.raises(InputError, match=r"61 epochs.*at most 60.*--horizon 60"):
        big.draw(tmp_path / "big.png")
    assert not (tmp_path / "big.png").exists()
    assert big._repr_svg_() is None  # Jupyter falls back to the repr, no traceback
    text = str(classify_paths(temporal_graph(FULL, 100)))  # 2^100 paths: not 31 digits
    assert "e+" in text and len(text) < 200


def test_effect_edges_linear_in_the_horizon():
    """It was quadratic (one ancestor search per gain): 13 s at T = 1000 on 2 cores."""
    t0 = time.perf_counter()
    spe = effect_edges(1500, FULL)["SPE"].edges
    assert time.perf_counter() - t0 < 5.0
    assert ("X1500", "G1499") in spe


def test_cli_exports_json_of_the_system_and_refuses_bad_suffix_first(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["graph", "--system", "lending-1", "--horizon", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert "14 nodes, 21 edges" in printed and len(doc["nodes"]) == 14
    assert len(doc["edges"]) == 21
    assert main(["graph", "--system", "lending-1", "--out", str(tmp_path / "g.txt")]) == 2
    captured = capsys.readouterr()
    assert "temporal causal graph" not in captured.out  # refused before any work
    assert "--out: unknown suffix '.txt'" in captured.err and ".gml" in captured.err


class _DictStructureSim:
    n_groups = 2
    structure = {"s_to_x0": False}  # not a CausalStructure: was silently replaced

    def reset(self, n, group, rng):
        return np.zeros(n)

    def observe(self, state):
        return cf.Observation(group=np.zeros(len(state), dtype=int), level=None,
                              features=state[:, None], t=0)

    def draw_noise(self, n, rng):
        return np.zeros(n)

    def step(self, state, decisions, noise):
        return cf.StepResult(state=state, reward=noise, gain=noise, info={})


def test_malformed_declarations_refused():
    with pytest.raises(cf.errors.SystemError_, match=r"structure must be a causalfair\."
                                                      r"CausalStructure, got \{'s_to_x0'"):
        as_system(_DictStructureSim(), id="dict")
    with pytest.raises(InputError, match=r"structure\.s_to_x0: expected True or False, got 'no'"):
        temporal_graph(cf.CausalStructure(s_to_x0="no"), 2)
    with pytest.raises(InputError, match=r"policy_reads_s: expected True or False, got 'no'"):
        effect_edges(2, FULL, policy_reads_s="no")  # was read as truthy: S -> D_t drawn

"""Tests for causalfair.graph: the temporal causal graph and its pi0 / pi^PS variants."""

from __future__ import annotations

import re
from itertools import pairwise

import networkx as nx
import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import InputError
from causalfair.graph import (
    DRAW_FORMAT_ERROR,
    EXOGENOUS_FLAGS_ERROR,
    EXOGENOUS_NAME_ERROR,
    HORIZON_ERROR,
    VARIANT_ERROR,
    TemporalGraph,
    classify_paths,
    effect_edges,
    hypothetical_graphs,
    temporal_graph,
)
from causalfair.model import CausalStructure, TabularModel

LENDING = CausalStructure(
    exogenous={"Y": (True, True), "U": (True, False)}, s_to_x0=True, s_to_transition=False
)

# ---- T = 2, written out by hand from the causal story (not generated) ----------------
PI_EDGES_T2 = {
    ("S", "X0"),
    # epoch 0
    ("S", "D0"), ("X0", "D0"),
    ("S", "Y0"), ("S", "U0"),
    ("X0", "X1"), ("D0", "X1"), ("Y0", "X1"), ("U0", "X1"),
    ("X0", "G0"), ("X1", "G0"),
    ("D0", "R0"), ("X0", "R0"), ("Y0", "R0"),
    # epoch 1
    ("S", "D1"), ("X1", "D1"),
    ("S", "Y1"), ("S", "U1"),
    ("X1", "X2"), ("D1", "X2"), ("Y1", "X2"), ("U1", "X2"),
    ("X1", "G1"), ("X2", "G1"),
    ("D1", "R1"), ("X1", "R1"), ("Y1", "R1"),
}  # fmt: skip

PI0_EDGES_T2 = {
    ("S", "X0"),
    ("S", "Y0"), ("S", "U0"),
    ("X0", "X1"), ("D0", "X1"), ("Y0", "X1"), ("U0", "X1"),
    ("X0", "G0"), ("X1", "G0"),
    ("D0", "R0"), ("X0", "R0"), ("Y0", "R0"),
    ("S", "Y1"), ("S", "U1"),
    ("X1", "X2"), ("D1", "X2"), ("Y1", "X2"), ("U1", "X2"),
    ("X1", "G1"), ("X2", "G1"),
    ("D1", "R1"), ("X1", "R1"), ("Y1", "R1"),
}  # fmt: skip

PS_EDGES_T2 = {
    ("S", "X0"),
    ("S", "D0"), ("X0", "D0"),
    ("S", "Y0"), ("S", "U0"),
    ("X0", "X1"), ("D0", "X1"), ("Y0", "X1"), ("U0", "X1"),
    ("X0", "X*1"), ("Y0", "X*1"), ("U0", "X*1"),
    ("X0", "G0"), ("X*1", "G0"),
    ("D0", "R0"), ("X0", "R0"), ("Y0", "R0"),
    ("S", "D1"), ("X1", "D1"),
    ("S", "Y1"), ("S", "U1"),
    ("X1", "X2"), ("D1", "X2"), ("Y1", "X2"), ("U1", "X2"),
    ("X1", "X*2"), ("Y1", "X*2"), ("U1", "X*2"),
    ("X1", "G1"), ("X*2", "G1"),
    ("D1", "R1"), ("X1", "R1"), ("Y1", "R1"),
}  # fmt: skip


@pytest.fixture(scope="module")
def graphs_t2():
    return hypothetical_graphs(LENDING, 2)


@pytest.mark.parametrize(
    "variant, expected",
    [("pi", PI_EDGES_T2), ("pi0", PI0_EDGES_T2), ("ps", PS_EDGES_T2)],
)
def test_edges_match_hand_written_lists(graphs_t2, variant, expected):
    tg = graphs_t2[variant]
    assert set(tg.edges()) == expected
    assert len(tg.edges()) == len(expected)  # no duplicates
    assert tg.edges() == sorted(tg.edges())
    assert nx.is_directed_acyclic_graph(tg.graph)


def test_node_attributes(graphs_t2):
    pi, pi0, ps = graphs_t2["pi"], graphs_t2["pi0"], graphs_t2["ps"]
    assert pi.graph.nodes["S"] == {"kind": "sensitive", "t": None, "label": "S"}
    assert pi.graph.nodes["X1"]["kind"] == "state" and pi.graph.nodes["X1"]["label"] == "X_1"
    assert pi.graph.nodes["Y0"]["kind"] == "exogenous" and pi.graph.nodes["Y0"]["t"] == 0
    assert pi.graph.nodes["G1"]["kind"] == "gain" and pi.graph.nodes["R1"]["kind"] == "reward"
    assert pi.graph.nodes["D0"]["intervened"] is False
    assert pi0.graph.nodes["D1"]["intervened"] is True and pi0.graph.nodes["D1"]["value"] == "d0"
    assert ps.graph.nodes["X*2"]["kind"] == "counterfactual_state"
    assert ps.graph.nodes["X*2"]["t"] == 2 and ps.graph.nodes["X*2"]["label"] == "X*_2"
    assert pi.nodes("decision") == ["D0", "D1"]
    assert ps.nodes("counterfactual_state") == ["X*1", "X*2"]
    assert pi.nodes()[0] == "S"
    assert pi0.graph.in_degree("D0") == 0


def test_policy_unaware_removes_exactly_s_to_d():
    for variant, full in (("pi", PI_EDGES_T2), ("pi0", PI0_EDGES_T2), ("ps", PS_EDGES_T2)):
        blind = temporal_graph(LENDING, 2, policy_reads_s=False, variant=variant)
        assert full - set(blind.edges()) == ({("S", "D0"), ("S", "D1")} if variant != "pi0" else set())
        assert set(blind.edges()) <= full


def test_structure_flags():
    s = CausalStructure(exogenous={"Y": (False, True)}, s_to_x0=False, s_to_transition=True)
    pi = temporal_graph(s, 1)
    assert set(pi.edges()) == {
        ("S", "D0"), ("X0", "D0"), ("X0", "X1"), ("D0", "X1"), ("Y0", "X1"), ("S", "X1"),
        ("X0", "G0"), ("X1", "G0"), ("D0", "R0"), ("X0", "R0"), ("Y0", "R0"),
    }  # fmt: skip
    ps = temporal_graph(s, 1, variant="ps")
    assert {(u, v) for u, v in ps.edges() if v == "X*1"} == {("X0", "X*1"), ("Y0", "X*1"), ("S", "X*1")}


def test_accepts_tabular_model_and_simulator():
    k = np.array([[0.8, 0.2], [0.3, 0.7]])
    model = TabularModel(
        kernel=np.broadcast_to(k, (2, 2, 2, 2)),
        initial=[[0.5, 0.5], [0.7, 0.3]],
        potential=[0.0, 1.0],
        structure=LENDING,
    )
    assert set(temporal_graph(model, 2).edges()) == PI_EDGES_T2
    assert set(hypothetical_graphs(model, 2)["ps"].edges()) == PS_EDGES_T2

    class Sim:  # a simulator declaring its structure through a method
        def structure(self):
            return LENDING

    assert set(temporal_graph(Sim(), 2, variant="pi0").edges()) == PI0_EDGES_T2
    with pytest.raises(InputError, match="model_or_structure: expected a TabularModel"):
        temporal_graph(object(), 2)
    for bad in (None, 2, "lending-1"):  # a causalfair error naming the argument, not TypeError
        with pytest.raises(InputError, match="^model_or_structure: expected a TabularModel"):
            cf.temporal_graph(bad, 2)
        with pytest.raises(InputError, match="^model: expected a TabularModel"):
            hypothetical_graphs(bad, 2)


def test_paths_from_decision_listed_by_hand(graphs_t2):
    assert graphs_t2["pi"].paths("D0") == [
        ["D0", "X1", "G0"],
        ["D0", "X1", "D1", "X2", "G1"],
        ["D0", "X1", "G1"],
        ["D0", "X1", "X2", "G1"],
    ]
    # pi^PS: G0 reads the counterfactual X*1, which D0 cannot reach; X2 feeds no gain
    assert {tuple(p) for p in graphs_t2["ps"].paths("D0")} == {
        ("D0", "X1", "G1"),
        ("D0", "X1", "X*2", "G1"),
    }
    # pi0: D1 is intervened, so the path through D1 is gone
    assert {tuple(p) for p in graphs_t2["pi0"].paths("D0")} == {
        ("D0", "X1", "G0"),
        ("D0", "X1", "G1"),
        ("D0", "X1", "X2", "G1"),
    }
    assert graphs_t2["pi"].paths("D1") == [["D1", "X2", "G1"]]
    assert graphs_t2["pi"].paths("D0", "G0") == [["D0", "X1", "G0"]]
    assert graphs_t2["pi"].paths("R0") == []


@pytest.mark.parametrize("horizon", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("variant", ["pi", "pi0", "ps"])
def test_count_paths_equals_listing(horizon, variant):
    tg = temporal_graph(LENDING, horizon, variant=variant)
    for source in ("S", "D0", f"X{horizon - 1}"):
        listed = tg.paths(source)
        assert tg.count_paths(source) == len(listed)
        assert len({tuple(p) for p in listed}) == len(listed)
        assert all(p[0] == source and p[-1].startswith("G") for p in listed)
        assert all(tg.graph.has_edge(u, v) for p in listed for u, v in pairwise(p))
        # against networkx's own enumeration
        ref = sum(len(list(nx.all_simple_paths(tg.graph, source, g))) for g in tg.nodes("gain"))
        assert len(listed) == ref
    assert tg.count_paths("S", "G0") == len(tg.paths("S", "G0"))


def _paths_from_s_lending(T: int) -> int:
    """Independent recurrence for the pi graph of LENDING (policy reads S).

    a_t = number of paths S -> X_t. a_0 = 1 (S -> X0). X_{t+1} is reached from X_t
    directly (a_t), through D_t (a_t paths via X_t -> D_t, plus S -> D_t) and through
    each of the two exogenous nodes (S -> Y_t, S -> U_t): a_{t+1} = 2 a_t + 3.
    G_t reads X_t and X_{t+1}, so it ends a_t + a_{t+1} paths.
    """
    a = [1]
    for _ in range(T):
        a.append(2 * a[-1] + 3)
    return sum(a[t] + a[t + 1] for t in range(T))


def test_count_paths_large_horizon_closed_form():
    T = 200
    tg = temporal_graph(LENDING, T)
    n_s = tg.count_paths("S")
    # Closed form: a_t + 3 doubles each step, so a_t = 4 * 2^t - 3 and
    # sum_{t<T} (a_t + a_{t+1}) = 4 (2^T - 1) + 8 (2^T - 1) - 6T = 12 (2^T - 1) - 6T.
    assert n_s == 12 * (2**T - 1) - 6 * T == _paths_from_s_lending(T)
    # From D0: b_t = paths D0 -> X_t (t >= 1), b_1 = 1, b_{t+1} = 2 b_t (direct or via D_t),
    # so b_t = 2^(t-1); G0 ends b_1 = 1 path, G_t (t >= 1) ends b_t + b_{t+1} = 3 * 2^(t-1):
    # total 1 + 3 (2^(T-1) - 1) = 3 * 2^(T-1) - 2.
    assert tg.count_paths("D0") == 3 * 2 ** (T - 1) - 2
    # Paths avoiding every decision: c_t = paths S -> X_t without D, c_{t+1} = c_t + 2,
    # c_t = 2t + 1; sum_{t<T} (c_t + c_{t+1}) = sum (4t + 4) = 2T^2 + 2T.
    split = classify_paths(tg)
    assert split.spurious == 2 * T**2 + 2 * T
    assert split.policy_mediated == n_s - split.spurious
    with pytest.raises(ValueError, match=r"use count_paths|count them with count_paths"):
        tg.paths("S")


def test_too_many_paths_message():
    tg = temporal_graph(LENDING, 5)
    n = tg.count_paths("S")
    assert n == 12 * (2**5 - 1) - 30
    with pytest.raises(ValueError) as err:
        tg.paths("S", max_paths=10)
    assert f"{n} causal paths lead from 'S'" in str(err.value)
    assert "count_paths('S')" in str(err.value)
    assert len(tg.paths("S", max_paths=n)) == n


def test_unknown_source_and_target():
    tg = temporal_graph(LENDING, 2)
    with pytest.raises(ValueError, match=r"source 'D7' is not a node of this graph"):
        tg.paths("D7")
    with pytest.raises(ValueError, match=r"target 'G9' is not a node"):
        tg.count_paths("S", "G9")


def test_classify_paths_t2(graphs_t2):
    split = classify_paths(graphs_t2["pi"])
    # by hand: S -> G0 ends a_0 + a_1 = 1 + 5 = 6 paths; avoiding D0 leaves S->X0->G0,
    # S->X0->X1->G0, S->Y0->X1->G0, S->U0->X1->G0 (4); policy-mediated S->D0->X1->G0,
    # S->X0->D0->X1->G0 (2).
    assert split.by_gain["G0"] == (2, 4)
    assert (split.total, split.policy_mediated, split.spurious) == (24, 12, 12)
    assert list(split.to_frame().columns) == ["gain", "policy_mediated", "spurious", "total"]
    assert "24 = 12 through a decision + 12 avoiding" in str(split)
    # under pi0 nothing reaches a gain through a decision from S
    assert classify_paths(graphs_t2["pi0"]).policy_mediated == 0
    assert classify_paths(graphs_t2["pi"], "D0").spurious == 0


def test_effect_edges_match_graphs(graphs_t2):
    eff = effect_edges(2, LENDING)
    pi, pi0, ps = (set(graphs_t2[v].edges()) for v in ("pi", "pi0", "ps"))
    assert set(eff["DPE"].edges) == {("X1", "G0"), ("X2", "G1")} == pi - ps
    assert set(eff["DPE"].replaced_by) == {("X*1", "G0"), ("X*2", "G1")}
    assert set(eff["DPE"].replaced_by) <= ps - pi
    assert eff["DPE"].compares == ("pi", "ps")
    assert set(eff["IPE"].edges) == {("X0", "D0"), ("S", "D0"), ("X1", "D1"), ("S", "D1")}
    assert set(eff["IPE"].edges) == ps - pi0 - {e for e in ps if "X*" in e[0] + e[1]}
    assert set(eff["IPE"].edges) == pi - pi0
    assert eff["SPE"].compares == ("pi0",)
    assert set(effect_edges(1, LENDING)["SPE"].edges) == {
        ("S", "X0"), ("S", "Y0"), ("S", "U0"), ("X0", "X1"), ("Y0", "X1"), ("U0", "X1"),
        ("X0", "G0"), ("X1", "G0"),
    }  # fmt: skip
    blind = effect_edges(2, LENDING, policy_reads_s=False)
    assert set(blind["IPE"].edges) == {("X0", "D0"), ("X1", "D1")}
    # no S-dependence anywhere but the policy: nothing carries a spurious effect
    no_env = CausalStructure(exogenous={"Y": (False, True)}, s_to_x0=False, s_to_transition=False)
    assert effect_edges(3, no_env)["SPE"].edges == ()
    assert classify_paths(temporal_graph(no_env, 3)).spurious == 0


def test_to_dot_parses_back(tmp_path, graphs_t2):
    for tg in graphs_t2.values():
        out = tmp_path / f"{tg.variant}.dot"
        text = tg.to_dot(out)
        assert out.read_text() == text == tg.to_dot()  # stable
        edge_lines = re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', text, flags=re.M)
        assert len([ln for ln in text.splitlines() if "->" in ln]) == len(tg.edges())
        assert set(edge_lines) == set(tg.edges())
        assert text.count('subgraph "cluster_t') == tg.horizon + 1
        assert text.startswith("digraph") and text.rstrip().endswith("}")
    assert ":= d0" in graphs_t2["pi0"].to_dot()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


def test_graphml_round_trip(tmp_path, graphs_t2):
    for tg in graphs_t2.values():
        out = tmp_path / f"{tg.variant}.graphml"
        tg.to_graphml(out)
        back = nx.read_graphml(out)
        assert set(back.edges()) == set(tg.edges())
        assert set(back.nodes()) == set(tg.graph.nodes())
        assert back.nodes["S"]["kind"] == "sensitive" and "t" not in back.nodes["S"]
        assert back.nodes["X1"]["t"] == 1
        assert back.graph["variant"] == tg.variant and back.graph["horizon"] == 2
    back = nx.read_graphml(tmp_path / "pi0.graphml")
    assert back.nodes["D0"]["intervened"] is True and back.nodes["D0"]["value"] == "d0"


def test_to_frame(graphs_t2):
    df = graphs_t2["ps"].to_frame()
    assert list(df.columns) == ["source", "target", "source_kind", "target_kind"]
    assert len(df) == len(PS_EDGES_T2)
    row = df[(df.source == "X*1") & (df.target == "G0")].iloc[0]
    assert (row.source_kind, row.target_kind) == ("counterfactual_state", "gain")


def test_draw_png_and_svg(tmp_path, graphs_t2):
    png, svg = tmp_path / "g.png", tmp_path / "g.svg"
    fig = graphs_t2["ps"].draw(png)
    graphs_t2["pi0"].draw(svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert "<svg" in svg.read_text()
    assert fig.axes and fig.axes[0].get_title().startswith("Temporal causal graph")
    with pytest.raises(ValueError) as err:
        graphs_t2["pi"].draw(tmp_path / "g.jpeg")
    assert str(err.value) == DRAW_FORMAT_ERROR.format(path=str(tmp_path / "g.jpeg"))


def test_draw_on_given_axes():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    assert temporal_graph(LENDING, 1).draw(ax=ax) is fig
    labels = [t.get_text() for t in ax.texts if t.get_text()]  # arrows are empty annotations
    assert len(labels) == temporal_graph(LENDING, 1).graph.number_of_nodes()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3", None])
def test_bad_horizon(bad):
    msg = re.escape(HORIZON_ERROR.format(value=bad))
    with pytest.raises(ValueError, match=msg):
        temporal_graph(LENDING, bad)
    with pytest.raises(ValueError, match=msg):
        effect_edges(bad, LENDING)
    with pytest.raises(ValueError, match=msg):
        TemporalGraph(graph=nx.DiGraph(), horizon=bad, variant="pi")
    assert "horizon" in HORIZON_ERROR and "horizon=5" in HORIZON_ERROR


@pytest.mark.parametrize("bad", ["pips", "PI", "", None])
def test_bad_variant(bad):
    with pytest.raises(ValueError) as err:
        temporal_graph(LENDING, 2, variant=bad)
    assert str(err.value) == VARIANT_ERROR.format(value=bad)
    assert all(v in str(err.value) for v in ("'pi'", "'pi0'", "'ps'"))


@pytest.mark.parametrize("name", ["X", "D", "Y2", "", "a-b"])
def test_bad_exogenous_name(name):
    with pytest.raises(ValueError) as err:
        temporal_graph(CausalStructure(exogenous={name: (True, True)}), 2)
    assert str(err.value) == EXOGENOUS_NAME_ERROR.format(value=name)


@pytest.mark.parametrize("kw", [{"exogenous": {"U": (1, 2, 3)}}, {"exogenous": {"Y": (True,)}},
                                {"exogenous": {"X": (True, True)}}, {"s_to_x0": "yes"},
                                {"exogenous": 5}])
def test_a_bad_structure_is_refused_when_built(kw):
    """CausalStructure(exogenous={"U": (1, 2, 3)}) was accepted and refused only when a
    graph read it; now when built, by the same check (causalfair.model.exogenous_nodes)."""
    with pytest.raises(InputError, match=r"^structure\.") as err:
        CausalStructure(**kw)
    if "exogenous" in kw and kw["exogenous"] != 5:
        name = next(iter(kw["exogenous"]))
        assert str(err.value) in (EXOGENOUS_NAME_ERROR.format(value=name),
                                  EXOGENOUS_FLAGS_ERROR.format(name=name,
                                                               value=kw["exogenous"][name]))


def test_bad_exogenous_flags():
    with pytest.raises(ValueError, match=r"expected a pair \(depends_on_s, affects_reward\)"):
        temporal_graph(CausalStructure(exogenous={"Y": (True,)}), 2)

"""The graph command exports what the library builds."""

import networkx as nx

import causalfair as cf
from causalfair.cli import main


def test_graph_command_exports_graphml_and_lists_paths(tmp_path, capsys):
    out = tmp_path / "g.graphml"
    assert main(["graph", "--setting", "lending-1", "--horizon", "2", "--paths", "D0", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    m = cf.lending_setting("lending-1").tabular
    expected = cf.temporal_graph(m, 2, policy_reads_s=False)
    assert sorted(nx.read_graphml(out).edges()) == expected.edges()
    # threshold:0.5 ignores S on lending-1 (same p_repay for both groups): no S -> D edge
    assert ("S", "D0") not in expected.edges()
    assert "D0 -> X1 -> G0" in text and "reads S: no" in text


def test_graph_command_bad_suffix(tmp_path, capsys):
    assert main(["graph", "--out", str(tmp_path / "g.txt")]) == 2
    assert "--out: unknown suffix '.txt'" in capsys.readouterr().err

"""Small defects, each with a test that fails without its fix: the log's dowhy graph from
causalfair.graph, a Monte Carlo task its worker cannot unpickle, the heading of one shard's
job summary, the graph's epoch limit before its memory one, the words of
min_ratio_selection with more than two actions, the benefit figure's panel of an action
with no benefit, and a plain function of (n, A) probabilities on an A-action system."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

import causalfair as cf
from causalfair.engines import _mc_base
from causalfair.errors import PolicyError, ResourceLimitError, UserCodeError
from causalfair.logs.dowhy_check import one_step_graph
from causalfair.model import CausalStructure

# ------------------------------------------------------------------ 1. the log's graph
LOG_EDGES = {("S", "X_t"), ("S", "D_t"), ("X_t", "D_t"), ("S", "X_next"), ("X_t", "X_next"),
             ("D_t", "X_next"), ("X_t", "gain"), ("X_next", "gain")}


def _model(potential: np.ndarray, K: int = 3) -> cf.TabularModel:
    kernel = np.zeros((2, 2, K, K))
    x = np.arange(K)
    for g in range(2):
        for a in range(2):
            up = 0.1 + 0.3 * a - 0.05 * g
            kernel[g, a, x, np.minimum(x + 1, K - 1)] += up
            kernel[g, a, x, x] += 1 - up
    return cf.TabularModel(kernel=kernel, initial=np.full((2, K), 1 / K), potential=potential)


def test_log_graph_is_the_temporal_graph_over_one_epoch():
    """one_step_graph drew S -> gain (and S -> D_t) by hand whatever the model; it is now
    temporal_graph(model, 1) restricted to the log's columns: S -> gain only where the
    potential f^s differs between groups, S -> X_t only where the structure declares it."""
    same = one_step_graph(_model(np.arange(3.0)))
    assert set(same.edges()) == LOG_EDGES
    differs = one_step_graph(_model(np.stack([np.arange(3.0), 2 * np.arange(3.0)])))
    assert set(differs.edges()) == LOG_EDGES | {("S", "gain")}
    no_x0 = one_step_graph(CausalStructure(s_to_x0=False, exogenous={"Y": (True, True)},
                                           s_to_transition=False))
    # S reaches X_next through the exogenous Y (projected out: the log does not record it)
    assert set(no_x0.edges()) == LOG_EDGES - {("S", "X_t")}
    assert nx.is_directed_acyclic_graph(same)


def test_dowhy_check_uses_the_fitted_model_s_graph_and_a_fixed_adjustment_order():
    pytest.importorskip("dowhy")
    from causalfair.logs import audit_logs, simulate_logs
    from causalfair.systems.lending.settings import lending_setting

    df = simulate_logs(lending_setting("lending-1"), "random:0.5", 300, 3, seed=4)
    res = audit_logs(df, n_boot=0, dowhy=True,  # the pooled estimate only: no stratum, no refuter
                     dowhy_options={"refuters": (), "min_per_arm": 10**6})
    out = res.dowhy.to_dict()
    g = nx.parse_gml(out["graph_gml"])
    assert set(g.edges()) == LOG_EDGES  # the lending potential is the same for both groups
    assert out["adjustment"] == ["X_t", "S"]
    assert "backdoor on {X_t, S}" in res.dowhy.summary()


# ------------------------------------------------------------------ 2. unpicklable task
class _RemoteBackend:
    """Runs each task as a worker does (workers.run_pickled) on a payload naming a module
    that is not importable there."""

    def map(self, fn, tasks):
        from causalfair.workers import run_pickled

        payload = b"cleftovers3_missing_module\nPolicy\n."  # a pickle of a class by reference
        return [run_pickled([payload])[0] for _ in tasks]


def test_a_task_the_worker_cannot_unpickle_is_one_line_naming_the_module():
    with pytest.raises(UserCodeError) as info:
        _mc_base._run_tasks(_RemoteBackend(), len, [(0,), (1,)])
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert "module 'leftovers3_missing_module'" in msg and "importable by every worker" in msg
    assert "ModuleNotFoundError" in info.value.traceback_text


NODE_POLICY = """
import sys
import numpy as np
if sys.argv[0] == "-c":  # a causalfair worker: as on a node that lacks the package
    raise ModuleNotFoundError("No module named 'nodepkg'", name="nodepkg")


class Half:
    name = "half"

    def prob_d1(self, obs):
        return np.full(len(obs.group), 0.5)


def make(system=None):
    return Half()
"""


def test_the_cli_ends_an_unpicklable_task_with_exit_2_and_one_line(tmp_path):
    import os

    from tests.conftest import one_line_error, run_cli

    (tmp_path / "nodepol.py").write_text(NODE_POLICY)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    err = one_line_error(run_cli("decompose", "--engine", "mc", "--n", "2000", "--horizon",
                                 "2", "--backend", "process", "--jobs", "2", "--policy",
                                 "nodepol:make", cwd=tmp_path, env=env, timeout=120))
    assert "make module 'nodepkg' importable by every worker" in err, err


# ------------------------------------------------------------------ 3. one shard's summary
SPEC = ('name = "{n}"\nhorizon = 3\n[system]\nid = "lending-1"\n[policy]\nbuiltin = '
        '"threshold:0.{i}"\n[engine]\nkind = "exact"\n[thresholds]\nabs_C = 1.0\n')


def test_a_partial_summary_s_heading_names_its_shards(tmp_path, capsys):
    from causalfair.cli import main

    specs = []
    for i in range(3):
        p = tmp_path / f"s{i}.toml"
        p.write_text(SPEC.format(n=f"s{i}", i=i + 3))
        specs.append(str(p))
    for k in (1, 2):
        assert main(["gate", *specs, "--shard", f"{k}/2", "--json",
                     str(tmp_path / f"sh{k}.json")]) == 0
    capsys.readouterr()
    assert main(["gate-merge", str(tmp_path / "sh1.json"), "--markdown", "--partial"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "### causalfair gate, shard 1/2: passed (2 specs)", out
    assert main(["gate-merge", str(tmp_path / "sh1.json"), str(tmp_path / "sh2.json"),
                 "--markdown"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "### causalfair gate: passed (3 specs)"


# ------------------------------------------------------------------ 4. the epoch limit
def test_the_graph_s_fixed_epoch_limit_comes_before_the_memory_limit(monkeypatch):
    monkeypatch.delenv("CAUSALFAIR_MAX_MEMORY", raising=False)
    with pytest.raises(ResourceLimitError) as info:
        cf.graph.temporal_graph(CausalStructure(), 1_000_000)
    assert "at most 5000 epochs" in str(info.value)
    assert "CAUSALFAIR_MAX_MEMORY" not in str(info.value)


# ------------------------------------------------- 5, 6, 7: a system of three actions
K3 = 3


def _three_actions() -> cf.System:
    """Actions wait (the baseline), small, same: 'same' moves as 'wait' does, so its
    benefit is 0 for every group and level."""
    kernel = np.zeros((2, 3, K3, K3))
    x = np.arange(K3)
    for g in range(2):
        for a, up in enumerate((0.1, 0.4 - 0.1 * g, 0.1)):
            kernel[g, a, x, np.minimum(x + 1, K3 - 1)] += up
            kernel[g, a, x, x] += 1 - up
    model = cf.TabularModel(kernel=kernel, initial=np.full((2, K3), 1 / K3),
                            potential=np.arange(K3, dtype=float), baseline=0,
                            group_names=("a", "b"), action_labels=("wait", "small", "same"))
    return cf.System(id="three", groups=("a", "b"),
                     decisions=cf.DecisionSet(labels=("wait", "small", "same"), baseline=0),
                     levels=tuple("LMH"), horizon=3, tabular=model)


def three_probs(obs):
    """A plain function of (n, 3) action probabilities that reads the group."""
    g = np.asarray(obs.group, dtype=float)
    return np.stack([0.5 - 0.2 * g, 0.3 + 0.2 * g, np.full(len(obs), 0.2)], 1)


class ThreeProbs:
    name = "three_probs"

    def action_probs(self, obs):
        return three_probs(obs)


@pytest.fixture(scope="module")
def three_audit():
    return cf.audit({"name": "three", "horizon": 3,
                     "thresholds": {"min_ratio_selection": 0.5}},
                    system=_three_actions(), policy=ThreeProbs())


def test_a_plain_function_of_action_probabilities_audits_an_a_action_system(three_audit):
    res = cf.audit({"name": "three", "horizon": 3}, system=_three_actions(), policy=three_probs)
    probs = np.asarray(res.benefit.p_d1)
    assert probs.shape == (2, K3, 3)
    np.testing.assert_allclose(probs[1, 0], [0.3, 0.5, 0.2])
    assert res.decomposition.C == three_audit.decomposition.C  # as the action_probs object
    # the same validation as action_probs: a row that does not sum to 1 is refused
    with pytest.raises(PolicyError, match="summing to 1"):
        cf.decompose(_three_actions().tabular, lambda obs: np.full((len(obs), 3), 0.5),
                     horizon=3)
    with pytest.raises(PolicyError, match="not numbers"):
        cf.decompose(_three_actions().tabular, lambda obs: "abc", horizon=3)


def test_min_ratio_selection_says_what_its_selection_rate_is(three_audit):
    from causalfair.report.explain import sentences

    doc = json.loads(json.dumps(three_audit.to_dict(), default=str))
    (said,) = [s.text for s in sentences(doc) if s.topic == "threshold:min_ratio_selection"]
    assert "share given any action other than the baseline" in said, said
    assert "per-action ratios in ll144.md" in said, said


def test_the_benefit_figure_keeps_the_panel_of_an_action_with_no_benefit(three_audit):
    from causalfair.report.figures import _fig_benefit

    assert not np.any(three_audit.benefit.delta[..., 2])  # 'same' has no benefit
    fig, data = _fig_benefit(three_audit)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["action small", "action same"], titles
    notes = [t.get_text() for t in fig.axes[1].texts]
    assert any("benefit 0" in t for t in notes), notes
    assert data["actions"] == ["wait", "small", "same"]

"""dowhy cross-check of the log-based Delta(x, s) (causalfair.logs.dowhy_check)."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from causalfair.logs import audit_logs, simulate_logs
from causalfair.logs.dowhy_check import REFUTERS, one_step_graph
from causalfair.systems.lending.settings import lending_setting

LM = lending_setting("lending-1")


@pytest.fixture(scope="module")
def audit():
    pytest.importorskip("dowhy", reason="dowhy comes with the dowhy extra")
    df = simulate_logs(LM, "random:0.5", 1500, 10, seed=21)
    return audit_logs(df, n_boot=100, seed=3, dowhy=True,
                      dowhy_options={"n_simulations": 5, "max_rows": 5000})


def test_graph_backdoor_set():
    g = one_step_graph()
    assert nx.is_directed_acyclic_graph(g)
    assert set(g.predecessors("D_t")) == {"X_t", "S"}
    assert set(g.successors("D_t")) == {"X_next"}


def test_dowhy_delta_agrees_with_model_delta_within_ci(audit):
    check = audit.dowhy
    cmp = check.compare(audit.benefit.delta, audit.model.group_names)
    ci = audit.conf_int(0.05)
    assert cmp["delta_dowhy"].notna().all()
    for r in cmp.itertuples():
        key = f"Delta[{r.group},{audit.model.level_labels[r.level]}]"
        lo, hi = ci.loc[key, "lower"], ci.loc[key, "upper"]
        assert lo <= r.delta_dowhy <= hi, (key, r.delta_dowhy, lo, hi)
        # and dowhy's own OLS interval covers the model-based Delta
        assert r.ci_lower <= r.delta_model <= r.ci_upper
    # the two are independent computations of nearly the same difference of means:
    # they differ only by the Dirichlet smoothing of the kernel
    assert np.abs(cmp["difference"]).max() < 0.02


def test_refuters_in_output(audit):
    refs = {r["name"]: r for r in audit.dowhy.refuters}
    assert set(refs) == set(REFUTERS)
    # a permuted placebo treatment has (almost) no effect; adding a random common cause
    # or dropping 20% of the rows leaves the estimate nearly unchanged
    est = audit.dowhy.pooled
    assert abs(refs["placebo_treatment_refuter"]["new_effect"]) < 0.25 * abs(est)
    assert refs["random_common_cause"]["new_effect"] == pytest.approx(est, rel=0.05)
    assert refs["data_subset_refuter"]["new_effect"] == pytest.approx(est, rel=0.2)
    out = audit.to_dict()
    json.dumps(out, allow_nan=False)
    assert {"graph_gml", "delta", "refuters", "estimand"} <= set(out["dowhy"])
    assert "backdoor" in out["dowhy"]["estimand"].lower()


def test_dowhy_seeded(audit):
    df = simulate_logs(LM, "random:0.5", 300, 5, seed=2)
    a = audit_logs(df, n_boot=0, seed=5, dowhy=True, dowhy_options={"n_simulations": 3})
    b = audit_logs(df, n_boot=0, seed=5, dowhy=True, dowhy_options={"n_simulations": 3})
    assert a.dowhy.refuters == b.dowhy.refuters


def test_spec_dowhy_refuters_reach_the_report(tmp_path):
    pytest.importorskip("dowhy", reason="dowhy comes with the dowhy extra")
    from causalfair.audit import audit

    df = simulate_logs(lending_setting("lending-1"), "random:0.5", 1500, 5, seed=3)
    df.to_csv(tmp_path / "log.csv", index=False)
    spec = tmp_path / "s.toml"
    spec.write_text('name = "dw"\n[logs]\npath = "log.csv"\nn_boot = 10\ndowhy = true\n',
                    encoding="utf-8")
    r = audit(spec)
    dw = r.extra["logs"]["dowhy"]
    assert {f["name"] for f in dw["refuters"]} == {
        "placebo_treatment_refuter", "random_common_cause", "data_subset_refuter"}
    out = r.write_report(tmp_path / "rep")
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "dowhy cross-check and refuters" in md and "placebo_treatment_refuter" in md
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["extra"]["logs"]["dowhy"]["pooled_effect"] == dw["pooled_effect"]
    spec.write_text('name = "dw"\n[logs]\npath = "log.csv"\ndowhy = "yes"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[logs\] dowhy: bad value 'yes'"):
        audit(spec)

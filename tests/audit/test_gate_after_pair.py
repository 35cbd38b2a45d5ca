"""The gate's text table names the pair of a repaired `max_*` verdict when it is not the
pair of the original's (h8sys F3): the row's label names the original's pair, and the
repaired value printed beside it was another pair's (the JSON and JUnit named both)."""

from __future__ import annotations

import textwrap

import causalfair.audit.gate as gate_mod
from causalfair.audit import audit, run_gate
from causalfair.audit.retrain import repair_check

HIRING = textwrap.dedent('''
    import numpy as np
    import causalfair as cf


    def make():
        K, G = 4, 3
        kernel = np.zeros((G, 2, K, K))
        for s in range(G):
            for x in range(K):
                for a, (u, dn) in enumerate([(0.05, 0.15 + 0.05 * s),
                                             (0.2 + 0.05 * x - 0.05 * s, 0.15 + 0.05 * s)]):
                    u, dn = (0.0 if x == K - 1 else u), (0.0 if x == 0 else dn)
                    kernel[s, a, x, x] = 1 - u - dn
                    if x + 1 < K:
                        kernel[s, a, x, x + 1] = u
                    if x > 0:
                        kernel[s, a, x, x - 1] = dn
        p_ok = 0.3 + 0.2 * np.arange(K)
        reward = np.zeros((G, 2, K))
        reward[:, 1] = p_ok - 0.8 * (1 - p_ok)
        model = cf.TabularModel(
            kernel=kernel, potential=np.arange(K, dtype=float), reward=reward,
            initial=np.array([[.1, .2, .4, .3], [.2, .3, .3, .2], [.35, .35, .2, .1]]),
            group_names=("A", "B", "C"), action_labels=("reject", "hire"),
            aux={"p_ok": np.tile(p_ok, (G, 1))}, name="hiring-tab")
        return cf.System(id="hiring-tab", groups=("A", "B", "C"),
                         decisions=cf.DecisionSet(labels=("reject", "hire"), baseline=0),
                         levels=("junior", "mid", "senior", "lead"), horizon=5,
                         tabular=model, roles={"score": "p_ok"})
''')


def test_a_repaired_verdict_of_another_pair_is_named(tmp_path, monkeypatch):
    (tmp_path / "hiring_tab.py").write_text(HIRING, encoding="utf-8")
    spec = tmp_path / "s.toml"
    spec.write_text('name = "h"\n[system]\nfactory = "hiring_tab:make"\n[policy]\n'
                    'builtin = "threshold:0.4"\n[thresholds]\nmax_Lambda = 0.1\n'
                    '[retrain]\nalgo = "exact"\ninit = "scratch"\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    def run_retrain(spec, before, *_, **__):  # the repair: a fixed policy, re-audited
        after = audit(spec.with_policy(builtin="threshold:0.8"))
        after.extra["repair_check"] = repair_check(spec, before, after)
        return tmp_path / "r.pt", after

    monkeypatch.setattr(gate_mod, "run_retrain", run_retrain)
    res = run_gate([str(spec)], retrain=True, accept_repaired=True)
    e = res.entries[0]
    before, after = e.before.verdicts[0], e.after.verdicts[0]
    assert (before.pair, before.status, after.pair, after.status) == \
        ("B-C", "FAIL", "C-A", "PASS")
    row = next(r for r in res.side_by_side().splitlines() if "max_Lambda" in r)
    assert row.startswith("  max_Lambda <= 0.1 (pair B-C)"), row
    assert row.endswith("PASS (pair C-A)"), row

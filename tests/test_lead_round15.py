"""Small fixes found while reviewing the fifteenth session's helpers' work: each test fails
on the code before it."""

from __future__ import annotations

import numpy as np

import causalfair as cf
from causalfair.logs import audit_logs, simulate_logs


def _three_groups(names):
    rng = np.random.default_rng(3)
    K = 4
    return cf.TabularModel(
        kernel=rng.dirichlet(np.ones(K), size=(3, 2, K)),
        initial=rng.dirichlet(np.ones(K), size=3),
        potential=np.tile(np.arange(K, dtype=float), (3, 1)),
        reward=rng.normal(size=(3, 2, K)),
        group_names=names,
    )


def test_log_pairs_table_columns_line_up_with_long_group_names():
    """The log audit's every-pair table widens its pair column to the longest pair name:
    every row's C column starts where the header's does (names of 20+ characters used to
    push the numbers right)."""
    names = ["first-time applicants", "returning customers", "small businesses"]
    model = _three_groups(names)
    df = simulate_logs(model, "random:0.5", 300, 3, seed=1)
    lines = audit_logs(df, n_boot=5, seed=0).summary().splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("pair "))
    c_end = lines[head].index(" C ") + 2  # the header's "C" ends its right-aligned cell
    rows = lines[head + 1:head + 4]
    assert all(any(n in r for n in names) for r in rows), rows
    for r in rows:  # each row's C value ends where the header's "C" ends
        cell = r[c_end - 10:c_end]
        assert cell.strip()[:1] in ("+", "-") and r[c_end] == " ", (r, lines[head])


def test_exact_decompose_of_a_system_names_the_system_not_tabular(tmp_path, monkeypatch):
    """An exact decomposition of a System whose tabular model was left unnamed carries the
    system's id as its model name, as the Monte Carlo engine's does (it said "tabular")."""
    base = cf.systems.make("lending-1")
    sys_ = base.with_(id="mybank", tabular=base.tabular.with_(name="tabular"))
    exact = cf.decompose(sys_, "threshold:0.5", engine="exact")
    mc = cf.decompose(sys_, "threshold:0.5", engine="mc", n=200, seed=0)
    assert exact.model_name == mc.model_name == "mybank"
    named = cf.decompose(sys_.tabular.with_(name="own"), "threshold:0.5")
    assert named.model_name == "own"  # a bare model keeps its own name


def test_report_benefit_figure_leaves_out_cells_a_group_never_visits():
    """The report's benefit figure, as BenefitResult.plot(), draws no point for a level a
    group never visits in a Monte Carlo audit (it drew them at (0, 0), an estimate that
    does not exist); its data file keeps every cell."""
    import matplotlib

    matplotlib.use("Agg")
    from causalfair.report.figures import _fig_benefit
    from tests.test_analyst_user import _cutoff
    from tests.test_results_views import _credit_system, _scatters

    r = cf.audit({"name": "credit", "system": {"id": "lending-1"},
                  "policy": {"builtin": "threshold:0.5"},
                  "engine": {"kind": "mc", "n": 400, "seed": 0}},
                 system=_credit_system(), policy=_cutoff)
    seen = np.asarray(r.benefit.visited, dtype=bool)
    assert not seen.all()
    fig, data = _fig_benefit(r)
    for i, pts in enumerate(_scatters(fig.axes[0])):
        np.testing.assert_array_equal(~np.isnan(pts).any(axis=1), seen[i])
    assert [len(v) for v in data["delta"].values()] == [seen.shape[1]] * seen.shape[0]

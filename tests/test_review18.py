"""Review of session 18's morning changes (Review18): each test failed on the tree as the
helpers left it and pins the smallest fix."""

from __future__ import annotations

import pytest


# ------------------------------------------------- 1. logs: numeric group labels, int and float
@pytest.mark.parametrize("cells, groups", [
    (["10", "2.5"], ["2.5", "10.0"]),   # decf834: float64 (2.5, 10.0), numeric order
    (["1", "0.5"], ["0.5", "1.0"]),
    (["0", "2.5"], ["0.0", "2.5"]),
    ([" 2", " 1"], ["1", "2"]),   # written after ", ": numbers, as decf834 read them
])
def test_mixed_int_and_float_group_labels_keep_decf834s_numbers_and_order(tmp_path, cells, groups):
    """`_group_as_written` promises that labels written as Python writes numbers (0, 1,
    2.5) stay numbers; a column holding both 10 and 2.5 was read as text, so the groups
    came out as ("10", "2.5"): the first group, hence the sign of a two-group C, flipped."""
    from causalfair.logs.schema import read_logs, validate_logs

    rows = ["id,t,group,level,decision,next_level,reward"]
    rows += [f"{i},0,{cells[i % 2]},{i % 3},{i % 2},{(i + 1) % 3},0.0" for i in range(8)]
    (tmp_path / "log.csv").write_text("\n".join(rows) + "\n")
    df = read_logs(tmp_path / "log.csv")
    assert df["group"].dtype == ("float64" if "." in "".join(cells) else "int64")
    assert list(validate_logs(df).groups) == groups


# ------------------------------------------------- 2. reproduce: a verdict deleted from audit.json
def test_a_verdict_deleted_from_audit_json_is_a_difference_not_a_later_key(tmp_path, cli_here):
    """The lead's `added` note (keys a later causalfair writes are no difference) also took
    a verdict the recorded audit.json lacks: deleting a FAIL verdict from audit.json then
    reproduced as "every number identical" (exit 0). Verdicts follow the spec's thresholds,
    which reproduce checks against spec.parsed: a verdict the record lacks was removed. A
    key a later causalfair adds (benefit.pair) stays a note."""
    import json
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shutil.copy(root / "audits" / "lending-1.toml", tmp_path / "spec.toml")
    proc = cli_here("audit", "spec.toml", "--no-report", "--json", cwd=tmp_path)
    doc = json.loads(proc.stdout)  # audit.json's document
    keys = [v["key"] for v in doc["verdicts"]]
    assert "tpr_gap" in keys and doc["overall"] == "FAIL"
    gone = dict(doc, verdicts=[v for v in doc["verdicts"] if v["key"] != "tpr_gap"])
    (tmp_path / "gone.audit").write_text(json.dumps(gone, indent=2), encoding="utf-8")
    proc = cli_here("audit", "--reproduce", "gone.audit", cwd=tmp_path)
    assert proc.returncode == 1 and "verdicts.tpr_gap: recorded None" in proc.stdout, proc.stdout
    # a key a later causalfair writes (benefit.pair, session 18) that the record of an
    # earlier version lacks: a note (from the same version: tests/test_reproduce_rows.py)
    older = dict(doc, benefit={k: v for k, v in doc["benefit"].items() if k != "pair"},
                 provenance=dict(doc["provenance"], causalfair="0.0.1"))
    (tmp_path / "older.audit").write_text(json.dumps(older, indent=2), encoding="utf-8")
    proc = cli_here("audit", "--reproduce", "older.audit", cwd=tmp_path)
    assert proc.returncode == 0 and "every number identical" in proc.stdout, proc.stdout
    assert "(written by a later causalfair): benefit.pair" in proc.stdout, proc.stdout


# ------------------------------------------------- 3. cf.compare's new orientation: the notebook
def test_the_analyst_notebooks_compare_cell_reads_the_table_compare_returns():
    """cf.compare now returns one row per audit (Notebook2); docs/notebooks/analyst.ipynb
    still read ``table.loc["C"]`` (a KeyError). Its notebook test runs only with
    ``-m notebook``, so the suite did not see it: here the cell runs on a compare table of
    two audits (the exact engine, fast), and prints the numbers of each audit."""
    import contextlib
    import io
    import json
    from pathlib import Path

    import causalfair as cf
    from causalfair.audit import compare

    root = Path(__file__).resolve().parents[1]
    cells = ["".join(c["source"]) for c in json.loads(
        (root / "docs" / "notebooks" / "analyst.ipynb").read_text(encoding="utf-8"))["cells"]
        if c["cell_type"] == "code"]
    cell = next(c for c in cells if "table.loc" in c or "table[" in c)
    spec = root / "audits" / "lending-1.toml"
    a, b = cf.audit(spec), cf.audit(spec, policy="blind:0.5")
    table = compare(a, b, names=["ppo", "blind:0.5"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(cell, {"table": table})  # noqa: S102 - the notebook's own cell
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and lines[0].split()[0] == "C:", lines
    assert lines[0] == f"       C: {a.quantities['C'][0]:+.4f} -> {b.quantities['C'][0]:+.4f}"


# ------------------------------------------------- lead: a notebook cell that defines and registers
def test_a_notebook_cell_run_again_replaces_its_factory_and_another_module_still_refuses():
    """Running a cell that defines a factory and registers it makes a new function object
    each time: the same name in ``__main__`` replaces the entry (the new definition wins);
    a factory of another module under that id is still refused without override=True."""
    import causalfair as cf
    from causalfair.errors import CausalfairError
    from causalfair.systems import registry

    def cell(gain):
        def make_nb_cell_system(**kw):  # what a notebook cell defines, once per run
            return gain
        make_nb_cell_system.__module__ = "__main__"
        make_nb_cell_system.__qualname__ = "make_nb_cell_system"
        return make_nb_cell_system

    first, second = cell(1), cell(2)
    try:
        cf.systems.register("nb-cell-rerun", first)
        cf.systems.register("nb-cell-rerun", second)  # the cell run again
        assert registry.spec("nb-cell-rerun").entry_point is second
        other = cell(3)
        other.__module__ = "somewhere_else"
        with pytest.raises(CausalfairError, match="already registered"):
            cf.systems.register("nb-cell-rerun", other)
    finally:
        registry._REGISTRY.pop("nb-cell-rerun", None)


# ------------------------------------------------- lead: Lambda's interval stays in [0, 1]
def test_lambda_hull_is_clipped_to_where_lambda_lies():
    """Lambda is a weighted mean of total variations (weights summing to 1, each at most
    1), so its interval never leaves [0, 1]; the tangent replicates of a tiny log gave an
    upper end of 1.74."""
    from statistics import NormalDist

    from causalfair.engines.benefit_mc import lambda_hull

    z = NormalDist().inv_cdf(0.975)
    lo, hi = lambda_hull([(0.9, 0.2), (0.8, 0.1)], 0.05)
    assert lo == pytest.approx(0.9 - z * 0.2, rel=1e-15) and hi == 1.0
    lo, hi = lambda_hull([(0.05, 0.1)], 0.05)
    assert lo == 0.0 and hi == pytest.approx(0.05 + z * 0.1, rel=1e-15)

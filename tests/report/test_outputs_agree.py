"""The outputs of one audit agree with each other and with the docs: a log audit's report
quotes its log as the spec gives it (so the folder reproduces elsewhere), the failure
drivers name the baseline the spec gave, an exactly computed value reads n/a in every
interval column, a threshold reads the same everywhere, and the CLI's decompose labels
the cells of Lambda's worst pairs as the report does."""

from __future__ import annotations

import shutil

import pytest

from causalfair.logs import simulate_logs

REPORT_FILES = ("report.md", "report.html", "card.md", "annex-iv.md", "audit.json")


# ------------------------------------------ a log audit moved to another folder reproduces
@pytest.mark.parametrize("policy", ["", '[policy]\nbuiltin = "threshold:0.6"\n'],
                         ids=["logged-policy", "candidate"])
def test_a_logs_audit_moved_elsewhere_reproduces(tmp_path, cli_here, policy):
    """report.md and report.html (and, without a candidate, the policy label of every
    output) quoted the log's absolute path, so ``--reproduce`` of the same folder moved
    elsewhere found differing files (exit 1)."""
    first = tmp_path / "first"
    (first / "data").mkdir(parents=True)
    df = simulate_logs("lending-1", "random:0.5", 200, 3, seed=1)
    df["group"] = df["group"].astype(str)
    df.to_csv(first / "data" / "log.csv", index=False)
    (first / "l.toml").write_text(f'name = "l"\n[logs]\npath = "data/log.csv"\nn_boot = 4\n'
                                  f'{policy}[thresholds]\nabs_C = 0.1\n')
    done = cli_here("audit", "l.toml", "--out", "rep", cwd=first)
    assert done.returncode in (0, 1), done.stderr
    for name in REPORT_FILES:
        text = (first / "rep" / name).read_text(encoding="utf-8")
        assert str(tmp_path) not in text, name
    assert "source: data/log.csv;" in (first / "rep" / "report.md").read_text(encoding="utf-8")
    moved = tmp_path / "elsewhere" / "moved"
    shutil.copytree(first, moved)
    again = cli_here("audit", "--reproduce", "rep", cwd=moved)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "report files identical" in again.stdout, again.stdout

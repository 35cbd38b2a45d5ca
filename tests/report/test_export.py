"""Exports from audit.json (causalfair.report.export, ``causalfair export``): the LL144
table's rates, impact ratios and counts are audit.json's numbers; the Annex IV skeleton
fills in what the audit knows and marks the rest; card.md's model-index block carries the
quantities and their intervals; the command refuses what it cannot do with one line."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import tomllib
from pathlib import Path

import pytest
import yaml

from causalfair.audit import audit
from causalfair.cli import main
from causalfair.report.card import card_markdown
from causalfair.report.export import PLACEHOLDER, annex_iv, ll144_rows
from tests.conftest import SMALL_SPEC, one_line_error, run_cli


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def save(folder: Path, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "audit.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def exact_doc():
    """audit.json content of a small exact audit (lending-1, horizon 5)."""
    return json.loads(json.dumps(audit(tomllib.loads(SMALL_SPEC)).to_dict()))


@pytest.fixture(scope="module")
def logs_audit(tmp_path_factory):
    """(audit.json content, the log) of a log audit of 300 individuals over 3 steps."""
    from causalfair.logs import simulate_logs

    d = tmp_path_factory.mktemp("logs")
    df = simulate_logs("lending-1", "random:0.5", 300, 3, seed=0)
    df.to_csv(d / "log.csv", index=False)
    (d / "spec.toml").write_text('name = "lg"\n[logs]\npath = "log.csv"\nn_boot = 2\n')
    return json.loads(json.dumps(audit(d / "spec.toml").to_dict())), df


# ------------------------------------------------------------------------------- LL144
def test_ll144_rates_are_the_audits_selection_and_approval_rates(exact_doc):
    sel = exact_doc["selection"]
    assert sel["source"] == "exact" and sel["actions"] == ["approve"] and sel["steps"] == 5
    rows = ll144_rows(exact_doc)
    assert len(rows) == (1 + 5) * 2  # (episode + 5 steps) x 2 groups
    for r in rows:
        rates = (sel["rate_overall"] if r["step"] == "all"
                 else {g: v["approve"][r["step"]] for g, v in sel["rate"].items()})
        rate = rates[r["group"]][r["action"]] if r["step"] == "all" else rates[r["group"]]
        assert r["selection_rate"] == rate
        top = max(sel["rate_overall"][g]["approve"] if r["step"] == "all"
                  else sel["rate"][g]["approve"][r["step"]] for g in sel["groups"])
        assert r["impact_ratio"] == pytest.approx(rate / top, rel=1e-15)
        assert r["n"] is None and r["selected"] is None  # a model has no individuals
    # the episode's selection rate is the approval rate of the other notions
    for g, v in exact_doc["notions"]["approval_rate"].items():
        assert sel["rate_overall"][g]["approve"] == pytest.approx(v, abs=1e-12)


def test_ll144_counts_are_the_logs_decisions(logs_audit, tmp_path):
    doc, df = logs_audit
    sel = doc["selection"]
    assert sel["source"] == "logs" and sel["t"] == [0, 1, 2]
    for g in sel["groups"]:
        part = df[df["group"] == g]
        assert sum(sel["n"][g]) == len(part)
        assert sum(sel["count"][g]["d1"]) == int((part["decision"] == 1).sum())
    folder = save(tmp_path / "a", doc)
    rc, out, err = cli("export", "ll144", str(folder))
    assert rc == 0, err
    table = list(csv.DictReader(io.StringIO((folder / "ll144.csv").read_text())))
    for row in table:
        n, k = int(row["n"]), int(row["selected"])
        assert float(row["selection_rate"]) == pytest.approx(k / n, rel=1e-15)
    top = max(float(r["selection_rate"]) for r in table if r["step"] == "all")
    for r in (r for r in table if r["step"] == "all"):
        assert float(r["impact_ratio"]) == pytest.approx(float(r["selection_rate"]) / top)
    assert "| all | d1 |" in (folder / "ll144.md").read_text()


def test_ll144_impact_ratio_against_the_highest_of_three_groups(exact_doc):
    doc = dict(exact_doc)
    doc["selection"] = {"source": "exact", "baseline_action": "none", "actions": ["a", "b"],
                        "groups": ["x", "y", "z"], "steps": 1, "n": None, "count": None,
                        "rate": {"x": {"a": [0.2], "b": [0.5]}, "y": {"a": [0.4], "b": [0.1]},
                                 "z": {"a": [0.1], "b": [0.25]}},
                        "rate_overall": {"x": {"a": 0.2, "b": 0.5}, "y": {"a": 0.4, "b": 0.1},
                                         "z": {"a": 0.1, "b": 0.25}}}
    rows = {(r["step"], r["action"], r["group"]): r for r in ll144_rows(doc)}
    assert rows[(0, "a", "x")]["impact_ratio"] == 0.5 and rows[(0, "a", "z")]["impact_ratio"] == 0.25
    assert rows[(0, "a", "x")]["highest_rate_group"] == "y"
    assert rows[("all", "b", "y")]["impact_ratio"] == pytest.approx(0.2)
    assert rows[("all", "b", "y")]["highest_rate_group"] == "x"


# ---------------------------------------------------------------------------- Annex IV
def test_annex_iv_fills_what_the_audit_knows_and_marks_the_rest(exact_doc, tmp_path):
    folder = save(tmp_path / "a", exact_doc)
    rc, out, err = cli("export", "annex-iv", str(folder), "--out", str(tmp_path / "ex"))
    assert rc == 0 and "wrote" in out, err
    text = (tmp_path / "ex" / "annex-iv.md").read_text()
    assert text == annex_iv(exact_doc, hashlib.sha256(
        (folder / "audit.json").read_bytes()).hexdigest())
    for what in ("intended purpose", "human oversight", "monitoring"):
        assert PLACEHOLDER.format(what) in text
    prov = exact_doc["provenance"]
    assert f"causalfair {prov['causalfair']}" in text and f"Python {prov['python']}" in text
    assert hashlib.sha256((folder / "audit.json").read_bytes()).hexdigest() in text
    c = exact_doc["quantities"]["C"]["estimate"]
    assert f"| C | {c:.6g} | n/a | n/a |" in text  # exact: no interval
    assert "- seeds: " in text and "None" not in text and "Exact engine" in text  # seeds, assumptions
    assert [p.name for p in (tmp_path / "ex").iterdir()] == ["annex-iv.md"]


# ------------------------------------------------------------------ card.md model-index
@pytest.mark.parametrize("kind", ["exact", "logs"])
def test_card_model_index_carries_the_quantities(kind, request):
    doc = (request.getfixturevalue("exact_doc") if kind == "exact"
           else request.getfixturevalue("logs_audit")[0])
    meta = yaml.safe_load(card_markdown(doc, "x").split("---\n")[1])
    (entry,) = meta["model-index"]
    assert entry["name"] == doc["policy"]["label"]
    (result,) = entry["results"]
    assert result["dataset"]["type"] == (doc.get("system") or {}).get("id", "logs")
    metrics = {m["type"]: m for m in result["metrics"]}
    assert set(metrics) == set(doc["quantities"])
    for k, q in doc["quantities"].items():
        m = metrics[k]
        assert m["value"] == q["estimate"] and m["verified"] is False
        if kind == "exact":
            assert "ci_lower" not in m
        elif q["se"] is not None and q["ci_lower"] != q["ci_upper"]:
            assert (m["ci_lower"], m["ci_upper"], m["se"]) == (q["ci_lower"], q["ci_upper"],
                                                                q["se"])
            assert m["ci_level"] == 0.95


# ------------------------------------------------------------------------- the command
def test_export_refuses_an_audit_json_without_what_it_needs(exact_doc, tmp_path):
    old = save(tmp_path / "old", {k: v for k, v in exact_doc.items() if k != "selection"})
    rc, _, err = cli("export", "ll144", str(old))
    assert rc == 2 and "old/audit.json: selection: missing" in err, err
    unversioned = save(tmp_path / "v0", {k: v for k, v in exact_doc.items()
                                         if k != "schema_version"})
    rc, _, err = cli("export", "annex-iv", str(unversioned))
    assert rc == 2 and "v0/audit.json: schema_version: must be 1.x, got None" in err, err
    rc, _, err = cli("export", "annex-iv", str(tmp_path / "nowhere"))
    assert rc == 2 and "no such file" in err, err
    assert sorted(p.name for p in old.iterdir()) == ["audit.json"]  # nothing written


def test_export_never_overwrites_other_content_without_force(exact_doc, tmp_path):
    folder = save(tmp_path / "a", exact_doc)
    mine = folder / "ll144.csv"
    mine.write_text("my own table\n")
    rc, _, err = cli("export", "ll144", str(folder))
    assert rc == 2 and "ll144.csv: exists with other content" in err and "--force" in err, err
    assert mine.read_text() == "my own table\n" and not (folder / "ll144.md").exists()
    rc, out, err = cli("export", "ll144", str(folder), "--force")
    assert rc == 0 and mine.read_text().startswith("step,action,group"), err
    rc, out, err = cli("export", "ll144", str(folder))  # the same bytes: left as they are
    assert rc == 0 and out.count("unchanged") == 2, out


def test_export_error_is_one_line_with_exit_2(exact_doc, tmp_path):
    folder = save(tmp_path / "a", {k: v for k, v in exact_doc.items() if k != "selection"})
    err = one_line_error(run_cli("export", "ll144", folder))
    assert "selection: missing" in err and "re-run the audit" in err

"""The outputs of one audit agree with each other and with the docs: a log audit's report
quotes its log as the spec gives it (so the folder reproduces elsewhere), the failure
drivers name the baseline the spec gave, an exactly computed value reads n/a in every
interval column, a threshold reads the same everywhere, and the CLI's decompose labels
the cells of Lambda's worst pairs as the report does."""

from __future__ import annotations

import json
import shutil

import pytest

import causalfair as cf
from causalfair._io import to_jsonable
from causalfair.logs import simulate_logs
from causalfair.report import render
from causalfair.report.card import card_markdown
from causalfair.report.export import annex_iv
from causalfair.report.render import md_escape

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


# ----------------------------------------- the failure drivers and the [baseline] given
def _drivers(spec_text: str, tmp_path) -> list[str]:
    (tmp_path / "s.toml").write_text(spec_text, encoding="utf-8")
    res = cf.audit(tmp_path / "s.toml")
    doc = json.loads(json.dumps(to_jsonable(res.to_dict())))
    md = render.render_markdown(res, doc, {})
    summary = md.split("## Summary", 1)[1].split("## Details", 1)[0].split("\n\n")
    return [p.strip() for p in summary if p.startswith(("What drives", "Also failing"))]


BASE = 'name = "d"\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "threshold:0.5"\n'


def test_an_absolute_failure_with_a_baseline_given_does_not_say_none_was_given(tmp_path):
    """abs_C fails and a [baseline] is given: the report said "against the baseline policy
    pi0 (no [baseline] given; ...)"."""
    drivers = _drivers(BASE + '[thresholds]\nabs_C = 0.05\n[baseline]\n'
                       'builtin = "threshold:0.3"\n', tmp_path)
    assert len(drivers) == 1, drivers
    assert "no \\[baseline\\] given" not in drivers[0], drivers
    assert drivers[0].startswith("What drives the failure of abs_C, against the baseline "
                                 "policy pi0 (an absolute threshold, not judged against the "
                                 "\\[baseline\\] policy threshold:0.3; C = "), drivers


def test_absolute_and_relative_failures_are_each_explained_against_their_reference(tmp_path):
    """docs/audit.md: a failing `vs baseline` threshold is explained against the baseline,
    a failing absolute one (abs_DPE) against pi0 with a tabular model. Once any `vs
    baseline` threshold failed, every failing threshold was explained against the
    baseline."""
    drivers = _drivers(BASE + '[thresholds]\nabs_DPE = 0.001\n[baseline]\n'
                       'builtin = "threshold:0.3"\n[baseline.thresholds]\nDPE = -0.01\n',
                       tmp_path)
    assert [d.split(", against", 1)[0] for d in drivers] == [
        "What drives the failure of abs_DPE", "What drives the failure of DPE vs baseline"
    ], drivers
    assert drivers[0].split(", against ", 1)[1].startswith("the baseline policy pi0 ("), drivers
    assert drivers[1].split(", against ", 1)[1].startswith(
        "the baseline policy threshold:0.3:"), drivers


# ------------------------------------ an exactly computed value reads n/a in every output
MC_EXACT = """name = "m"
horizon = 5
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[engine]
kind = "mc"
n = 400
[benefit]
horizon_benefit = true
[thresholds]
abs_C = 0.2
Lambda = 0.2
min_ratio_selection = 0.8
"""


@pytest.fixture(scope="module")
def mc_exact(tmp_path_factory):
    """A Monte Carlo audit of a system with a tabular model: C sampled, Lambda and the
    selection rates computed exactly (no se)."""
    folder = tmp_path_factory.mktemp("mc_exact")
    (folder / "m.toml").write_text(MC_EXACT, encoding="utf-8")
    res = cf.audit(folder / "m.toml")
    return res, json.loads(json.dumps(to_jsonable(res.to_dict())))


def test_an_exact_selection_ratio_reads_n_a_in_every_interval_column(mc_exact):
    """docs/audit.md (Details): a value computed exactly reads n/a in the interval columns.
    The verdict row of min_ratio_selection printed a zero-width interval (x | x | x) in
    report.md, report.html and annex-iv.md, while Lambda's read n/a."""
    res, doc = mc_exact
    row = next(v for v in doc["verdicts"] if v["key"] == "min_ratio_selection")
    pair = row["pair"]
    assert doc["pairs"]["values"][pair]["ratio_selection"]["se"] is None
    md = render.render_markdown(res, doc, {})
    html = render.render_html(res, doc, {})
    annex = annex_iv(doc)
    for key in ("min_ratio_selection \\>= 0.8", "Lambda \\<= 0.2"):  # one escaping: both
        for text in (md, annex):
            line = next(x for x in text.splitlines() if x.startswith(f"| {key}"))
            assert line.split(" | ")[2:4] == ["n/a", "n/a"], line
    cells = html.split("<td>min_ratio_selection &gt;= 0.8", 1)[1].split("</tr>", 1)[0]
    assert cells.count("<td>n/a</td>") == 2, cells
    line = next(x for x in md.splitlines() if x.startswith("| abs_C \\<= 0.2"))
    assert "n/a" not in line, line  # a sampled value keeps its interval
    card = card_markdown(doc)
    sentence = next(x for x in card.splitlines() if x.startswith("- min_ratio_selection"))
    assert "CI" not in sentence, sentence


def test_lambda_t_has_a_unit_in_other_notions(mc_exact):
    res, doc = mc_exact
    md = render.render_markdown(res, doc, {})
    line = next(x for x in md.splitlines() if x.startswith("| Lambda_T |"))
    assert line.endswith("| probability (0 to 1) |"), line


def _doc(row):
    return {"quantities": {"Lambda": {"estimate": 0.1, "ci_lower": 0.1, "ci_upper": 0.1,
                                      "se": None}},
            "pairs": {"values": {"A-B": {"ratio_selection": row, "C": row}}}}


@pytest.mark.parametrize("key", ["min_ratio_selection", "abs_C[A-B]", "max_abs_C"])
def test_an_interval_is_shown_when_the_value_has_a_standard_error(key):
    """Whether a verdict has an interval depends on its value's standard error, not on the
    quantity: a Monte Carlo selection rate with an se keeps its interval (even one of zero
    width), one computed exactly (se None, zero width) has none."""
    from causalfair.report.explain import verdict_has_interval

    sampled = {"estimate": 0.7, "ci_lower": 0.7, "ci_upper": 0.7, "se": 0.0}
    exact = {"estimate": 0.7, "ci_lower": 0.7, "ci_upper": 0.7, "se": None}
    v = {"key": key, "estimate": 0.7, "lower": 0.7, "upper": 0.7, "pair": "A-B"}
    assert verdict_has_interval(_doc(sampled), v)
    assert not verdict_has_interval(_doc(exact), v)
    wide = dict(v, lower=0.6, upper=0.8)
    assert verdict_has_interval(_doc(exact), wide)
    assert not verdict_has_interval(_doc(sampled), {"key": "Lambda vs baseline", "estimate": 0.0,
                                                    "lower": 0.0, "upper": 0.0})


# ---------------------------------------------------- a threshold reads the same everywhere
def test_a_threshold_and_its_pair_read_the_same_in_every_output(tmp_path):
    """docs/audit.md: a threshold reads the same in every output. card.md and annex-iv.md
    printed `C <= 0.0` where the report (and the gate, JUnit) print `C <= 0`; card.md's
    verdict of one pair's key (abs_C[s--s+]) did not name the pair audit.json names."""
    (tmp_path / "t.toml").write_text(
        BASE + '[thresholds]\nC = 0.0\nLambda = 0.25\n"abs_C[s--s+]" = 0.3\n', encoding="utf-8")
    res = cf.audit(tmp_path / "t.toml")
    doc = json.loads(json.dumps(to_jsonable(res.to_dict())))
    labels = [v.label for v in res.verdicts]
    assert labels == ["C <= 0", "Lambda <= 0.25", "abs_C[s--s+] <= 0.3"], labels
    md = render.render_markdown(res, doc, {})
    card, annex = card_markdown(doc), annex_iv(doc)
    for label in labels:
        assert f"| {md_escape(label)} |" in md, label
        assert f'threshold: "{label}"' in card, label
        assert f"| {md_escape(label)} |" in annex, label  # as in report.md
    row = next(v for v in doc["verdicts"] if v["key"] == "abs_C[s--s+]")
    assert row["pair"] == "s--s+"
    line = next(x for x in card.splitlines() if 'threshold: "abs_C[s--s+]' in x)
    assert line.endswith(', pair: "s--s+"}'), line


# ------------------------------- the worst benefit pairs' cells: decompose and the report
CELLS_SIM = """
import numpy as np
import causalfair as cf


class Sim:
    n_groups = 2
    group_names = ("A", "B")
    feature_names = ("skill",)
    horizon = 3

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(float)
        return np.stack([g, rng.normal(1.0 - 0.5 * g, 0.3)], axis=1)

    def observe(self, state):
        return cf.Observation(group=state[:, 0].astype(int), features=state[:, 1:2])

    def draw_noise(self, n, rng):
        return rng.normal(0, 0.1, size=n)

    def step(self, state, decisions, noise):
        gain = 0.1 * np.asarray(decisions) * (1.2 - 0.8 * state[:, 0]) + noise
        new = state.copy()
        new[:, 1] += gain
        return cf.StepResult(state=new, reward=0.1 * gain, gain=gain, info={})


def make():
    return Sim()


class Pol:
    def prob_d1(self, obs):
        return np.where(np.asarray(obs.group) == 0, 0.8, 0.2) * (np.asarray(obs.features)[:, 0] > 0.7)


def policy():
    return Pol()
"""


def test_decompose_and_the_report_name_binned_feature_cells_alike(tmp_path, cli_here):
    """docs/audit.md: the worst benefit pairs' cells read `state[G]` (binned features)
    where the system declares no levels. The report did; `causalfair decompose` printed
    `level[G]` for the same cells."""
    (tmp_path / "cells_sim.py").write_text(CELLS_SIM, encoding="utf-8")
    done = cli_here("decompose", "--system", "cells_sim:make", "--policy", "cells_sim:policy",
                    "--n", "300", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header = done.stdout.split("Worst pairs:\n", 1)[1].splitlines()[0].split()
    assert header[:2] == ["state[A]", "state[B]"], header
    (tmp_path / "f.toml").write_text('name = "f"\n[system]\nfactory = "cells_sim:make"\n'
                                     '[policy]\nfactory = "cells_sim:policy"\n'
                                     '[engine]\nn = 300\n', encoding="utf-8")
    res = cf.audit(tmp_path / "f.toml")
    md = render.render_markdown(res, json.loads(json.dumps(to_jsonable(res.to_dict()))), {})
    row = next(x for x in md.splitlines() if x.startswith("| state"))
    assert row.startswith("| state\\[A\\] | state\\[B\\] |"), row
    assert "state[A]" in res._repr_html_()


def test_the_n_a_note_says_exact_only_where_a_tabular_model_computed_it():
    """A Monte Carlo audit of a simulator alone has no tabular model: a value there without
    an interval was not 'computed exactly on the tabular model'."""
    from types import SimpleNamespace as NS

    from causalfair.report.render import _exact_note

    mc = NS(decomposition=NS(engine="mc"))
    assert "no interval computed" in _exact_note(NS(**vars(mc), system=NS(tabular=None)))
    assert "tabular model" in _exact_note(NS(**vars(mc), system=NS(tabular=object())))
    assert "fitted to the logs" in _exact_note(NS(decomposition=NS(engine="logs"), system=None))

"""The audit report read as an auditor reads it, on systems that are not lending: four
groups, three actions and continuous features (an admissions simulator), and two groups
with two actions that are not "deny" / "approve". Every label, caption and sentence names
the system's gain, actions, states and the audited pair; lending keeps its words."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import types

import pytest

from causalfair.audit import audit, load_spec
from causalfair.audit.gate import SpecFailure, _error_entry
from causalfair.report.explain import glossary, sentences
from causalfair.report.figures import build_figures, figure_titles
from causalfair.report.render import render_report, retrain_failed_text

MODULE = '''
import numpy as np
import causalfair as cf

class Sim:
    def __init__(self, G, labels):
        self.n_groups, self.n_actions = G, len(labels)
        self.mean = np.linspace(0.3, -0.4, G)

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group, dtype=int), (n,)).copy()
        return {"q": rng.normal(self.mean[g], 1.0), "g": g, "t": 0}

    def observe(self, s):
        return cf.Observation(group=s["g"], features=np.column_stack([s["q"], s["q"] ** 2]),
                              t=s["t"])

    def draw_noise(self, n, rng):
        return rng.normal(size=n)

    def step(self, s, d, noise):
        q = s["q"] + 0.2 * np.asarray(d) + 0.1 * noise
        return cf.StepResult(state={"q": q, "g": s["g"], "t": s["t"] + 1},
                             reward=np.where(np.asarray(d) > 0, s["q"] - 0.1, 0.0),
                             gain=q - s["q"], info={})

def make(groups=("A", "B", "C", "D"), labels=("reject", "waitlist", "admit")):
    groups, labels = tuple(groups), tuple(labels)
    return cf.System(
        id="adm4", groups=groups, decisions=cf.DecisionSet(labels=labels, baseline=0),
        features=("test_score", "gpa"), gain=cf.Gain("readiness gain", "sd"),
        reward="expected success of admitted minus cost", horizon=3,
        simulator=lambda: Sim(len(groups), labels))

class Policy:
    name = "score"
    def action_probs(self, obs):
        A = self.A
        z = obs.features[:, 0]
        logits = np.column_stack([k * z for k in range(A)])
        p = np.exp(logits - logits.max(1, keepdims=True))
        return p / p.sum(1, keepdims=True)

def policy3():
    p = Policy(); p.A = 3; return p

def policy2():
    p = Policy(); p.A = 2; return p
'''


def _spec(tmp_path, name: str, params: str, policy: str) -> str:
    (tmp_path / "report4_adm.py").write_text(MODULE, encoding="utf-8")
    spec = tmp_path / f"{name}.toml"
    spec.write_text(textwrap.dedent(f"""\
        name = "{name}"
        [system]
        factory = "report4_adm:make"
        params = {params}
        [policy]
        {policy}
        [engine]
        kind = "mc"
        n = 120
        [thresholds]
        max_abs_C = 0.01
        max_Lambda = 0.01
        """), encoding="utf-8")
    return str(spec)


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """The audit and the rendered report files of 4 groups and 3 actions."""
    tmp = tmp_path_factory.mktemp("report4")
    sys.modules.pop("report4_adm", None)
    r = audit(load_spec(_spec(tmp, "adm4", "{}", 'factory = "report4_adm:policy3"')))
    files = {k: v.decode("utf-8") for k, v in render_report(r).items() if not k.endswith(".png")}
    return r, files, json.loads(files["audit.json"])


def _visible(files: dict[str, str]) -> str:
    """What a reader sees: report.md, report.html without its embedded images, card.md,
    annex-iv.md and ll144.md."""
    html = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", files["report.html"])
    return "\n".join([files["report.md"], html, files["card.md"], files["annex-iv.md"],
                      files["ll144.md"]])


def test_no_lending_words_in_a_report_of_another_system(four):
    r, files, doc = four
    seen = _visible(files)
    for word in ("approval", "approve", "qualification", "bank", "lending-1", "p_repay",
                 "loan", "repay", "credit"):
        assert word not in seen.lower(), word
    assert not re.search(r"level\\?\[", seen)  # its cells are states of binned features
    assert "state\\[A\\] | state\\[D\\]" in files["report.md"]
    titles = {k: v["title"] for k, v in doc["figures"].items()}
    assert titles["decomposition"] == "Decomposition of the readiness-gain disparity, per group"
    assert titles["benefit"] == "Benefit fairness: Delta vs action probability"
    assert "![Benefit fairness: Delta vs action probability](benefit.png)" in files["report.md"]
    assert "alt='Decomposition of the readiness-gain disparity, per group'" in files["report.html"]
    assert "sit in different states or benefit differently from the same decision." in seen
    assert "over the T decisions, weighted by the groups' shares." in seen


def test_the_pair_is_named_wherever_a_number_is_of_one_pair(four):
    r, files, doc = four
    a, b = (r.decomposition.groups[i] for i in r.decomposition.pair)
    said = {s.topic: s.text for s in sentences(doc)}
    assert said["benefit"].startswith(f"Benefit fairness between {a} and {b}: Lambda = ")
    md = files["report.md"]
    assert (f"### Metrics (C, DPE, IPE, SPE and Lambda: pair {a}-{b}, {a}'s value minus "
            f"{b}'s; every pair: Pairs of groups below)") in md
    assert (f"C, DPE, IPE, SPE and Lambda above compare the pair {a}-{b} (C: {a}'s value "
            f"minus {b}'s)") in files["annex-iv.md"]
    # the worst pairs table says that its per-pair numbers repeat on each action's row
    assert "a row per pair and action: weight, contribution" in md
    # max_Lambda fails at D-A, the audited pair A-D named the other way round (Lambda is
    # symmetric): its worst pairs are the table shown, not an audit still to run
    lam = next(v for v in r.verdicts if v.key == "max_Lambda")
    assert (lam.pair, lam.status) == ("D-A", "FAIL") and lam.estimate == pytest.approx(r.benefit.Lambda)
    assert "need an audit of that pair" not in md and f"Worst benefit pairs of groups {a} and {b}" in md


def test_the_utility_sentence_says_expected_once(four):
    r, files, doc = four
    said = {s.topic: s.text for s in sentences(doc)}
    assert said["utility"].startswith("The decision maker's expected total success of "
                                      "admitted minus cost over the T decisions is ")
    assert "expected total expected" not in _visible(files)


def test_a_monte_carlo_audit_says_why_no_notions(four):
    r, files, doc = four
    assert ("Other fairness notions: no other notions: TPR, ELBERT, W1 and DP are computed on "
            "a tabular model, and report4_adm:make has none (Monte Carlo audit)") in files["report.md"]


def test_two_actions_that_are_not_approval(tmp_path):
    sys.modules.pop("report4_adm", None)
    r = audit(load_spec(_spec(tmp_path, "adm2", '{ groups = ["X", "Y"], labels = ["wait", '
                              '"treat"] }', 'builtin = "uniform"')))
    assert figure_titles(r)["benefit"] == "Benefit fairness: Delta vs the probability of treat"
    fig, _ = build_figures(r, ["benefit"])["benefit"]
    ax = fig.axes[0]
    assert ax.get_title().startswith("Benefit vs P(treat) (Lambda = ")
    assert ax.get_ylabel() == "P(treat | x, s) (probability)"
    # a uniform policy treats everyone alike: Lambda is 0 and no pair is marked as worst
    assert r.benefit.Lambda == 0
    assert not [t for t in ax.texts if t.get_text().startswith("#")]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[-1] == "worst pairs of Lambda (none: every pair adds 0)", labels


def test_lending_keeps_its_words():
    lend = types.SimpleNamespace(gain=types.SimpleNamespace(name="qualification gain"),
                                 decisions=types.SimpleNamespace(labels=("deny", "approve"),
                                                                 baseline=0))
    titles = figure_titles(types.SimpleNamespace(system=lend, benefit=None))
    assert titles["decomposition"] == ("Decomposition of the qualification-gain disparity, "
                                       "per group")
    assert titles["benefit"] == "Benefit fairness: Delta vs approval probability"
    words = glossary(("s+", "s-"), "gain units")
    assert words["DPE"][0].endswith("whenever the groups sit at different levels or benefit "
                                    "differently from the same decision (approve-everyone has "
                                    "DPE +0.044 on lending-1).")
    assert "(different starting levels, different dynamics)" in words["SPE"][0]
    assert "a weighted sum over pairs of levels of" in words["Lambda"][0]
    assert "(for example the bank's profit), weighted" in words["utility"][0]


def test_an_error_joined_with_its_step_has_one_full_stop():
    spec = types.SimpleNamespace(path=None, name="adm")
    msg = "audit spec adm.toml: no room for 64 individuals (64 of 64)."
    e = _error_entry(spec, SpecFailure(msg, "InputError"), "retrain")
    assert e.error == ("audit spec adm.toml: the retrain failed: no room for 64 individuals "
                       "(64 of 64)."), e.error
    assert ".)." not in retrain_failed_text(e.error) and ". (" not in e.error
    assert retrain_failed_text(e.error).startswith(
        "The gate's verdict is ERROR: this spec's retrain failed (audit spec adm.toml: the "
        "retrain failed: no room for 64 individuals (64 of 64)). This report")

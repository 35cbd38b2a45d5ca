"""Small items: one PPO minibatch update for the per-unit and the replica-choice trainer;
``Decomposition.to_frame()``'s Lambda row (the report's numbers); a gate's ERROR spec gets
a report folder stating its error; the report glossary in the system's own words for its
gain; a sweep keeps the runs it finished when it is interrupted."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.report.explain import doc_glossary, glossary
from causalfair.train import TrainConfig
from tests.test_user_code_errors import SIM, SPEC

TINY = dict(n_individuals=32, horizon=4, hidden=(8,), n_epochs=1, iterations=5, eval_every=5)


@pytest.fixture
def user_spec(tmp_path, monkeypatch):
    """A spec on a user's simulator (features, no tabular model, no declared gain): its
    Lambda comes from forks with a bootstrap interval; ``mode`` as in
    tests/test_user_code_errors.py."""
    before = set(sys.modules)
    monkeypatch.chdir(tmp_path)

    def write(name: str, mode: str = "") -> Path:
        module = f"m_left_{name}"
        (tmp_path / f"{module}.py").write_text(SIM.format(mode=mode))
        spec = tmp_path / f"{name}.toml"
        spec.write_text(SPEC.format(name=name, module=module))
        return spec

    yield write
    for m in set(sys.modules) - before:
        if m.startswith("m_left_"):
            sys.modules.pop(m, None)


# ------------------------------------------------------------- one PPO minibatch update
def test_the_per_unit_and_the_replica_choice_trainers_share_one_ppo_update(monkeypatch):
    from causalfair.train import generic

    calls = []
    real = generic.SystemTrainer._ppo_epochs

    def spy(self, n, *args):
        calls.append((self.choice, n))
        return real(self, n, *args)

    monkeypatch.setattr(generic.SystemTrainer, "_ppo_epochs", spy)
    for sid, algo in (("delayed-impact", "ppo-c"), ("infectious-1", "ppo-c")):
        tr = generic.SystemTrainer(cf.systems.make(sid), TrainConfig(algo=algo, **TINY))
        w0 = [p.detach().clone() for p in tr.policy_net.parameters()]
        row = tr.step()
        assert np.isfinite(row["C_hat"]), row  # the C term ran in the shared update
        assert any(not (p.detach() == q).all() for p, q in zip(tr.policy_net.parameters(), w0,
                                                               strict=True))
    T = TINY["horizon"]
    n_rep = max(2, TINY["n_individuals"] // cf.systems.make("infectious-1").units_per_replica)
    assert calls == [(False, T * TINY["n_individuals"]), (True, T * n_rep)]


# ------------------------------------------------------------ to_frame's Lambda row
def test_to_frame_has_lambda_as_the_report_has_it(user_spec):
    from causalfair.audit import audit

    r = audit(user_spec("lam"))
    dec = r.decomposition
    assert dec.benefit is not None and dec.benefit.method == "mc"
    row = dec.to_frame(r.spec.alpha).loc["Lambda"]
    est, lo, hi, se = r.quantities["Lambda"]  # the report's (and audit.json's) Lambda
    assert (row["estimate"], row["ci_lower"], row["ci_upper"], row["se"]) == (est, lo, hi, se)
    assert lo < est < hi
    # the glossary in this system's words: it declares no gain, so the neutral "gain"
    assert r.system.gain.name == "gain"
    folder = r.write_report(Path("rep"))
    md = (folder / "report.md").read_text()
    glossary_md = md.split("## Glossary", 1)[1].split("## Assumptions", 1)[0]
    assert "Gain disparity: the expected total gain of group" in glossary_md, glossary_md
    assert "qualification" not in glossary_md.lower(), glossary_md


def test_to_frame_lambda_row_exact_absent_and_other_levels():
    m = cf.lending_setting("lending-1").tabular
    ex = cf.decompose(m, cf.parse_policy("threshold:0.5", m), 10)
    assert list(ex.to_frame().loc["Lambda"]) == [ex.Lambda, 0.0, ex.Lambda, ex.Lambda]
    assert "Lambda" not in replace(ex, Lambda=None).to_frame().index
    assert ex.lambda_row() is not None and replace(ex, Lambda=None).lambda_row() is None
    # a Monte Carlo result: its bootstrap interval at its level, else +- z se floored at 0
    mc = replace(ex, se={k: 0.01 for k in ex.estimates()}, Lambda=0.02,
                 Lambda_ci=(0.011, 0.031), Lambda_ci_level=0.95,
                 benefit=SimpleNamespace(se=0.005))
    assert tuple(mc.to_frame(0.05).loc["Lambda"]) == (0.02, 0.005, 0.011, 0.031)
    z = 1.6448536269514722
    lam = mc.to_frame(0.1).loc["Lambda"]
    assert lam["ci_lower"] == pytest.approx(0.02 - z * 0.005)
    assert lam["ci_upper"] == pytest.approx(0.02 + z * 0.005)
    wide = replace(mc, benefit=SimpleNamespace(se=0.05)).to_frame(0.1).loc["Lambda"]
    assert wide["ci_lower"] == 0.0  # Lambda >= 0
    # exact on the tabular model inside a Monte Carlo result: no sampling error (n/a)
    inner = replace(mc, Lambda_ci=(0.02, 0.02), Lambda_ci_level=None, benefit=None)
    assert np.isnan(inner.to_frame().loc["Lambda", ["se", "ci_lower", "ci_upper"]]).all()


# ------------------------------------------------------- a gate's ERROR spec's report
def test_an_error_spec_gets_a_report_folder_stating_its_error(user_spec, capsys):
    bad = user_spec("pr", "policy_raises")
    assert main(["gate", str(bad), "--reports", "reps", "--json", "g.json"]) == 2
    err = capsys.readouterr().err
    folder = Path("reps") / "pr"
    assert sorted(p.name for p in folder.iterdir()) == [
        ".causalfair-report.json", "error.json", "report.html", "report.md"], err
    doc = json.loads((folder / "error.json").read_text())
    assert doc["overall"] == "ERROR" and doc["name"] == "pr", doc
    assert "policy FeatPolicy.prob_d1 raised RuntimeError: policy boom" in doc["error"], doc
    assert doc["error"] in err, err  # the line the gate printed
    html_text = (folder / "report.html").read_text()
    md = (folder / "report.md").read_text()
    for text in (md, html_text):
        assert "ERROR" in text and "policy boom" in text and "pr.toml" in text, text
    assert "Traceback" not in md and "estimate" not in md, md
    entry = json.loads(Path("g.json").read_text())["specs"][0]
    assert entry["overall"] == "ERROR" and entry["report"].endswith("pr"), entry
    # a rerun replaces the folder (causalfair wrote it): no earlier report stays behind
    assert main(["gate", str(bad), "--reports", "reps"]) == 2
    assert (folder / "report.md").read_text() == md


# ----------------------------------------------------------- the glossary's gain words
def test_the_glossary_says_the_systems_own_gain():
    words = glossary(("A", "B"), "members not infected", None, "health change")
    assert words["C"][0].startswith("Health-change disparity: the expected total health "
                                    "change of group A")
    assert "qualification" not in " ".join(w[0] for w in words.values()).lower()
    lend = glossary(("s+", "s-"), "gain units")  # lending keeps its words
    assert lend["C"][0].startswith("Qualification-gain disparity: the expected total "
                                   "qualification gain of group s+")
    assert "other qualification levels" in lend["IPE"][0]
    doc = {"decomposition": {"groups": ["A", "B"], "pair": [0, 1]},
           "system": {"gain": {"name": "incident-rate reduction", "unit": "incidents"}}}
    assert "expected total incident-rate reduction" in doc_glossary(doc)["C"][0]
    del doc["system"]  # no system (a log audit): the neutral gain
    assert doc_glossary(doc)["C"][0].startswith("Gain disparity: the expected total gain")


# ----------------------------------------------------- an interrupted sweep keeps runs
def test_an_interrupted_sweep_keeps_the_runs_it_finished(tmp_path, monkeypatch):
    from causalfair.train import sweep as sw

    real, calls, interrupt = sw.train, [], [True]

    def train(config, **kw):
        calls.append(config.seed)
        if len(calls) == 2 and interrupt and interrupt.pop():  # Ctrl-C in the 2nd run, once
            raise KeyboardInterrupt
        return real(config, **kw)

    monkeypatch.setattr(sw, "train", train)
    tiny = dict(n_individuals=32, horizon=4, hidden=(8,), n_epochs=1, iterations=1)
    out = tmp_path / "sweep"
    with pytest.raises(KeyboardInterrupt):
        sw.sweep(["ppo"], [0, 1, 2], out=out, overrides=tiny)
    runs = out / "runs" / "lending-1" / "ppo"
    assert (runs / "seed-0" / sw.RESULT).is_file() and (runs / "seed-0" / "checkpoint.pt").is_file()
    assert not (runs / "seed-1").exists() and not (out / "runs.csv").exists()
    first = json.loads((runs / "seed-0" / sw.RESULT).read_text())["metrics"]
    calls.clear()
    res = sw.sweep(["ppo"], [0, 1, 2], out=out, overrides=tiny, existing="resume")
    assert not res.failed, res.failed
    assert calls == [1, 2] and res.reused == 1 and list(res.runs["seed"]) == [0, 1, 2]
    assert res.runs.iloc[0]["C"] == first["C"]
    assert all((runs / f"seed-{k}" / sw.RESULT).is_file() for k in range(3))

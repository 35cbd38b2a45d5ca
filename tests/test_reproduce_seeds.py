"""reports/reproduce_seeds.py and reports/reproduce_paper.py: the verdicts on hand-made runs
(each of the four verdicts, collapse, the same-actions rule), and a quick run end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import run_cmd

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "reports" / "reproduce_seeds.py"
PAPER = ROOT / "reports" / "reproduce_paper.py"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _runs(sid: str, cells: dict[str, tuple[list[float], list[float]]]) -> pd.DataFrame:
    """One row per (algo, seed): (per-seed metric values, per-seed utilities)."""
    rows = []
    for algo, (vals, util) in cells.items():
        for s, (v, u) in enumerate(zip(vals, util, strict=True)):
            rows.append({"system": sid, "algo": algo, "seed": s, "elbert_bias": v,
                         "long_term_gap": v, "utility": u})
    return pd.DataFrame(rows)


LOW = [0.10, 0.12, 0.11, 0.09, 0.10, 0.13, 0.08, 0.11, 0.10, 0.12]
HIGH = [0.50, 0.55, 0.52, 0.49, 0.51, 0.53, 0.48, 0.50, 0.54, 0.52]
U = [5.0] * 10


def _by_claim(entries, sid, text):
    return next(e for e in entries if e["system"] == sid and e["claim"].startswith(text))


def test_seed_verdicts_on_hand_made_runs():
    mod = _load(SEEDS)
    rng = np.random.default_rng(0)
    p_same = rng.dirichlet(np.ones(2), size=40)
    # infectious-harder: ELBERT-PO lowest bias -> supported; attention-harder: ELBERT-PO's
    # lowest bias bought with a collapsed utility -> inconclusive, and PPO's reward
    # significantly higher -> refuted
    runs = pd.concat([
        _runs("infectious-harder", {"elbert-po": (LOW, U), "ppo": (HIGH, U), "a-ppo": (HIGH, U)}),
        _runs("attention-harder", {"elbert-po": (LOW, [0.5] * 10), "ppo": (HIGH, U),
                                   "a-ppo": (HIGH, U)}),
        _runs("infectious-1", {"f-ppo-l": (LOW, U), "ppo": (HIGH, U), "a-ppo": (LOW, U),
                               "elbert-po": (HIGH, U)}),
    ])
    probs = {}
    for (sid, algo, seed) in runs[["system", "algo", "seed"]].itertuples(index=False):
        same = sid == "infectious-1" and algo in ("f-ppo-l", "a-ppo")
        probs[(sid, algo, seed)] = p_same if same else rng.dirichlet(np.ones(2), size=40)
    ref = {"infectious-harder": 0.0, "attention-harder": 0.0, "infectious-1": 0.0}
    out = mod.verdicts(runs, probs, ref)
    e = _by_claim(out, "infectious-harder", "(2) Infectious")
    assert e["verdict"] == "supported" and e["n_seeds"] == 10 and e["p_value"] < 1e-6
    assert e["effect"] == pytest.approx(np.mean(LOW) - np.mean(HIGH)) and e["ci"][1] < 0
    assert e["utility"] == {"elbert-po": 5.0, "ppo": 5.0, "a-ppo": 5.0}
    e = next(x for x in out if x["system"] == "attention-harder" and x["metric"] == "elbert_bias")
    assert e["verdict"] == "inconclusive" and e["collapsed"] == ["elbert-po"]
    e = next(x for x in out if x["system"] == "attention-harder" and x["metric"] == "utility")
    assert e["verdict"] == "refuted"
    # F-PPO-L and A-PPO act alike on the audited states: indistinguishable, not supported
    e = _by_claim(out, "infectious-1", "F-PPO achieves")
    assert e["verdict"] == "indistinguishable" and e["versus"] == "a-ppo"
    gap = {c["versus"]: c["action_gap"] for c in e["comparisons"]}
    assert gap["a-ppo"] == 0.0 and gap["ppo"] > mod.SAME_ACTIONS_TOL
    # attention-central was not run: not tested, named as such
    assert _by_claim(out, "attention-central", "Our F-PPO")["verdict"] == "not tested"
    assert any("not tested" in line for line in mod.verdict_table(out))


def test_paper_sweep_verdict_does_not_count_a_collapsed_policy():
    mod = _load(PAPER)
    rows = []
    for beta, lam, util in ((0.5, HIGH, [3.0] * 10), (8.0, [0.0] * 10, [0.0] * 10)):
        for s in range(10):
            rows.append({"setting": "lending-1", "variant": f"ppo-cb(beta_Lambda={beta:g})",
                         "beta_lambda": beta, "seed": s, "Lambda": lam[s], "DPE": lam[s],
                         "utility": util[s]})
    sweep = pd.DataFrame(rows)
    empty = pd.DataFrame(columns=["setting", "variant", "seed", "utility", "abs_C"])
    curves = pd.DataFrame(columns=["setting", "variant", "iteration"])
    out = mod.paper_verdicts(empty, curves, sweep, {}, {"lending-1": 0.0})
    assert [e["metric"] for e in out] == ["Lambda", "DPE"]
    for e in out:  # Lambda 0 at utility 0: a collapse, not a fairness gain
        assert e["verdict"] == "inconclusive" and "collapsed" in e["reason"]
        assert e["utility"]["ppo-cb(beta_Lambda=8)"] == 0.0 and e["utility_floor"] == 0.75
    # the same numbers at a kept utility: supported
    sweep.loc[sweep.beta_lambda == 8.0, "utility"] = 2.9
    assert all(e["verdict"] == "supported"
               for e in mod.paper_verdicts(empty, curves, sweep, {}, {"lending-1": 0.0}))


@pytest.mark.slow
def test_quick_run_writes_every_file(tmp_path):
    run_cmd([sys.executable, SEEDS, "--quick", "--out", tmp_path / "o"], timeout=600,
            env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT, expect=0)
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    assert set(runs.algo) == {"ppo", "a-ppo", "f-ppo-l", "elbert-po"}
    central = runs.system == "attention-central"  # seed 001's published setup, no Lambda
    assert set(runs[central].algo) == {"ppo", "a-ppo", "f-ppo-l"}
    assert runs[central].Lambda.isna().all() and runs[central].allocation_parity.notna().all()
    assert (runs[~central].Lambda >= 0).all() and runs.elbert_bias.notna().all()
    entries = json.loads((tmp_path / "o" / "verdicts.json").read_text())
    keys = {"claim", "seed_paper", "n_seeds", "effect", "ci", "p_value", "utility", "verdict"}
    tested = [e for e in entries if e["verdict"] != "not tested"]
    assert tested and all(keys <= set(e) for e in tested)
    assert {e["seed_paper"] for e in tested} == {"000", "001", "002"}
    # seed 001's attention claims ran on the central system and say so
    att = [e for e in tested if e["seed_paper"] == "001" and e["system"].startswith("attention")]
    assert len(att) == 2 and all(e["system"] == "attention-central" for e in att)
    assert all(e["system_params"]["increase"] == "f-ppo" for e in att)
    readme = (tmp_path / "o" / "README.md").read_text()
    assert "| seed | setup | claim (as the paper states it) | verdict |" in readme
    assert "Machine:" in readme


def test_seed_001_attention_claims_run_on_the_published_central_setup():
    # the published agents are one central policy over all sites (issue 29): each seed 001
    # attention claim's system is the central one, with seed 001's own per-site increases
    import causalfair as cf
    from causalfair.systems.attention import FPPO_INCREASE

    mod = _load(SEEDS)
    att = [c for c in mod.CLAIMS if c[0] == "001" and c[1].startswith("attention")]
    assert len(att) == 2
    for claim in att:
        params, algos = mod.CELLS[claim[1]]
        assert {claim[2], *claim[3]} <= set(algos)
        system = cf.systems.make(claim[1], **params)
        sim = system.make_simulator()
        assert sim.central and system.features is None and system.horizon >= 200
        assert tuple(sim.up) == FPPO_INCREASE
    # the per-run numbers: 20 iterations of 32 worlds x 200 steps (README "Departures")
    b = mod.BUDGETS["default"]
    assert mod.worlds_for("attention-central", b) == 32 and b["seeds"] >= 10


def test_same_actions_sums_over_a_replicas_units():
    # one vaccine per 100-member graph spread evenly, against no vaccine at all: each unit's
    # distance is 0.01 (under the tolerance), the graph's is 1 - not the same actions
    mod = _load(SEEDS)
    spread = np.tile([0.99, 0.01], (8, 100, 1))
    never = np.tile([1.0, 0.0], (8, 100, 1))
    probs = {("s", "m", 0): spread, ("s", "x", 0): never, ("s", "y", 0): spread.copy()}
    gaps = mod.action_gaps(probs, "s", "m", ("x", "y"))
    assert gaps["x"] == pytest.approx(1.0) and gaps["x"] > mod.SAME_ACTIONS_TOL
    assert gaps["y"] == 0.0


@pytest.mark.parametrize("opt, value", [("--iterations", "0"), ("--seeds", "0"),
                                        ("--eval-n", "0"), ("--eval-n", "1"),
                                        ("--jobs", "-1")])
def test_bad_counts_are_refused_before_any_work(tmp_path, opt, value, capsys):
    """h6hunt2 F5: --iterations 0 and --seeds 0 ended in tracebacks, --eval-n 0 only after
    every training run; --jobs -1 was taken as 1."""
    mod = _load(SEEDS)
    with pytest.raises(SystemExit) as exc:
        mod.main(["--quick", opt, value, "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert f"{opt}: must be an integer >= " in capsys.readouterr().err
    assert not (tmp_path / "o").exists()

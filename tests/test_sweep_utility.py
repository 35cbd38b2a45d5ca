"""One utility column for every algorithm of a sweep: the population agents' rows (r-td3,
l-ucbfair) carry ``utility`` and ``Lambda`` from the audit their C, DPE, IPE, SPE come
from (the policy their checkpoint.npz loads as), as the PPO rows do; and sweep.py split
(its folder, resume and IO part in train/sweep_io.py), its public names unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.checkpoint import load_checkpoint
from causalfair.train.sweep import sweep

#: Population agents small enough for a test (a second or two a run).
LUCB = {"phi_samples": 500, "phi_epochs": 1}
RTD3 = {"hidden": [8, 8], "batch": 16, "learning_starts": 16, "envs": 2}
#: The keys a population run's checkpoint metadata held before this change (its bytes
#: must not change, so it gains none).
OLD_KEYS = ["V_r", "V_g", "q1_final", "q2_final", "C", "DPE", "IPE", "SPE", "episodes"]


def _audit(ck: Path):
    """The audit of the policy the checkpoint loads as, as the run audits it (MC, 2
    replicas, seed 0; the dynamics are deterministic)."""
    system = cf.systems.make("replicator-1")
    return decompose_mc(system, load_checkpoint(ck)[0], n=2, seed=0)


@pytest.mark.parametrize("algo,sets", [("l-ucbfair", LUCB), ("r-td3", RTD3)])
def test_a_population_rows_utility_is_its_checkpoints_audited_utility(tmp_path, algo, sets):
    res = sweep([algo], [1], ["replicator-1"], overrides={**sets, "iterations": 2},
                out=tmp_path / "sw")
    assert not res.failed, res.failed
    row = res.runs.iloc[0]
    ck = tmp_path / "sw" / "runs" / "replicator-1" / algo / "seed-1" / "checkpoint.npz"
    d = _audit(ck)
    assert row["utility"] == float(d.total_utility)
    assert row["Lambda"] == float(d.Lambda)
    assert row["C"] == float(d.C)  # the same audit as its C
    # cf.decompose (the engine a user calls, same n and seed) agrees
    dd = cf.decompose(cf.systems.make("replicator-1"), str(ck), n=2, seed=0)
    assert row["utility"] == pytest.approx(float(dd.total_utility), rel=1e-12, abs=1e-12)
    assert row["Lambda"] == pytest.approx(float(dd.Lambda), rel=1e-12, abs=1e-12)
    # the agent's own return is another quantity: not what the utility column holds
    assert row["utility"] != row["V_r"]
    # table.md: a number in the utility and Lambda columns, not n/a
    line = next(ln for ln in res.to_markdown().splitlines() if f"| {algo} |" in ln)
    cells = [c.strip() for c in line.split("|")[4:10]]  # utility, C, DPE, IPE, SPE, Lambda
    assert "n/a" not in cells, line
    assert float(cells[0]) == pytest.approx(row["utility"], abs=5e-5)
    # result.json keeps the metrics; the checkpoint's metadata gains nothing (same bytes)
    doc = json.loads((ck.parent / "result.json").read_text())
    meta = json.loads(str(np.load(ck)["meta_json"]))["metadata"]
    assert sorted(meta["metrics"]) == sorted(OLD_KEYS)
    assert doc["metrics"]["utility"] == row["utility"]
    assert {k: doc["metrics"][k] for k in OLD_KEYS} == meta["metrics"]


def test_train_json_of_a_population_agent_gains_utility_and_lambda(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--system", "replicator-1", "--algo", "l-ucbfair", "--seed", "1",
                 "--iterations", "2", "--out", str(out), "--no-progress", "--json",
                 *[f"--set={k}={json.dumps(v)}" for k, v in LUCB.items()]]) == 0
    doc = json.loads(capsys.readouterr().out)
    m = doc["metrics"]
    assert list(m)[:len(OLD_KEYS)] == OLD_KEYS  # additive: the old keys first, unchanged
    d = _audit(out / "checkpoint.npz")
    assert m["utility"] == float(d.total_utility) and m["Lambda"] == float(d.Lambda)


def test_sweep_io_is_split_out_and_the_public_names_stay():
    import causalfair.train.sweep as S
    import causalfair.train.sweep_io as IO

    for name in ("MARK", "LOCK", "RESULT", "RUN_FILES", "write_run"):  # public, as before
        assert getattr(S, name) is getattr(IO, name), name
    for name in IO.__all__:
        assert callable(getattr(IO, name)) or isinstance(getattr(IO, name), (str, tuple)), name
    for name in S.__all__:
        assert hasattr(S, name), name
    lines = Path(S.__file__).read_text(encoding="utf-8").count("\n")
    assert lines < 700, lines  # room under the 800-line limit (tests/test_architecture.py)

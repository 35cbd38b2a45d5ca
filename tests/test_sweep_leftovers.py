"""The researcher's loose ends in sweep and frontier: the population agents in a sweep
(the run `causalfair train` trains, bit for bit), the interval's level in table.csv, the
pair written as two names (not "A-B"), and frontier --constraint DP tabulating |DP|."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.errors import ConfigError, OutputError
from causalfair.train.sweep import sweep, tabulate
from causalfair.train.sweep_io import finished_run as _finished
from causalfair.train.sweep_io import pairs_cell

#: A population agent small enough for a test (fractions of a second a run).
LUCB = {"phi_samples": 500, "phi_epochs": 1}
RTD3 = {"hidden": [8, 8], "batch": 16, "learning_starts": 16, "envs": 2}


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------- 1. population agents
def test_a_sweep_trains_the_population_agents_as_train_does_bit_for_bit(tmp_path, capsys):
    out = tmp_path / "sw"
    code = main(["sweep", "--algo", "l-ucbfair,r-td3", "--seeds", "1", "--system",
                 "replicator-1", "--iterations", "3", "--out", str(out),
                 *[f"--set={k}={json.dumps(v)}" for k, v in {**LUCB, **RTD3}.items()]])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    runs = pd.read_csv(out / "runs.csv")
    assert list(zip(runs["algo"], runs["seed"], strict=True)) == [("l-ucbfair", 1), ("r-td3", 1)]
    for algo, seed, sets in (("l-ucbfair", 1, LUCB), ("r-td3", 1, RTD3)):
        single = tmp_path / f"single-{algo}"
        assert main(["train", "--system", "replicator-1", "--algo", algo, "--seed", str(seed),
                     "--iterations", "3", "--out", str(single), "--no-progress",
                     *[f"--set={k}={json.dumps(v)}" for k, v in sets.items()]]) == 0
        run = out / "runs" / "replicator-1" / algo / f"seed-{seed}"
        for name in ("checkpoint.npz", "metrics.csv", "metrics.jsonl"):
            assert sha(run / name) == sha(single / name), (algo, name)
        doc = json.loads((run / "result.json").read_text())
        meta = json.loads(str(np.load(single / "checkpoint.npz")["meta_json"]))["metadata"]
        # result.json: the checkpoint's metrics, plus the audit's utility and Lambda (not in
        # the checkpoint, whose bytes are train's: tests/test_sweep_utility.py)
        assert {k: doc["metrics"][k] for k in meta["metrics"]} == meta["metrics"]
        assert set(doc["metrics"]) - set(meta["metrics"]) == {"utility", "Lambda"}
        assert doc["pair"] == ["g1", "g2"]
        row = runs[(runs["algo"] == algo) & (runs["seed"] == seed)].iloc[0]
        assert row["C"] == meta["metrics"]["C"]
    # r-td3's --iterations are episodes, as on train: 3, in whole rounds of 2 envs -> 4
    assert set(runs[runs["algo"] == "r-td3"]["episodes"]) == {4}
    # resumed: nothing is trained again, the same table
    table = (out / "table.csv").read_text()
    assert main(["sweep", "--algo", "l-ucbfair,r-td3", "--seeds", "1", "--system",
                 "replicator-1", "--iterations", "3", "--out", str(out), "--resume",
                 *[f"--set={k}={json.dumps(v)}" for k, v in {**LUCB, **RTD3}.items()]]) == 0
    assert "2 kept from the earlier sweep" in capsys.readouterr().out
    assert (out / "table.csv").read_text() == table


def test_a_population_agent_on_lending_is_one_line_not_a_failure(tmp_path):
    res = sweep(["l-ucbfair"], [0], ["replicator-1", "lending-1"],
                overrides={"iterations": 2, **LUCB})
    assert not res.failed and list(res.runs["system"]) == ["replicator-1"]
    assert [(s, a) for s, a, _ in res.skipped] == [("lending-1", "l-ucbfair")]
    assert "replicator" in res.skipped[0][2]
    assert "- l-ucbfair on lending-1: l-ucbfair trains on replicator" in res.to_markdown()
    with pytest.raises(ConfigError, match="no algorithm of this sweep trains"):
        sweep(["r-td3"], [0], ["lending-1"])


def test_a_set_field_goes_to_the_runs_that_have_it_and_no_field_is_lost(tmp_path):
    # phi_samples is L-UCBFair's only; n_epochs the PPO family's only: both in one sweep
    res = sweep(["l-ucbfair", "ppo"], [0], ["replicator-1"],
                overrides={"iterations": 1, "n_epochs": 1, "n_individuals": 16, "audit_n": 64,
                           **LUCB})
    assert not res.failed, res.failed
    with pytest.raises(ConfigError, match="'phi_sample' is a field of no config.*phi_samples"):
        sweep(["l-ucbfair"], [0], ["replicator-1"], overrides={"phi_sample": 10})
    with pytest.raises(ConfigError, match="'n_epochs' is a field of no config"):
        sweep(["l-ucbfair"], [0], ["replicator-1"], overrides={"n_epochs": 1})


def test_a_failing_population_run_is_reported_not_hidden(tmp_path, capsys):
    # alpha="x" passes the CLI but not the config: refused before any run, one line
    with pytest.raises(ConfigError, match="alpha: bad value 'x'"):
        sweep(["l-ucbfair"], [0], ["replicator-1"], overrides={"alpha": "x"})
    # a run that raises while training is listed, the others tabulated (exit 2)
    code = main(["sweep", "--algo", "l-ucbfair", "--seeds", "0-1", "--system", "replicator-1",
                 "--iterations", "1", "--set", "phi_samples=500", "--set", "phi_epochs=1",
                 "--set", "d=100000", "--out", str(tmp_path / "sw")])
    err = capsys.readouterr().err
    assert code == 2 and "run l-ucbfair seed 0 on replicator-1 failed" in err, err
    assert "Failed" in (tmp_path / "sw" / "table.md").read_text()


# ----------------------------------------------------------------- 2. the interval's level
def test_table_csv_says_the_level_of_its_intervals():
    runs = pd.DataFrame({"system": ["s"] * 3, "algo": ["a"] * 3, "seed": [0, 1, 2],
                         "C": [1.0, 2.0, 3.0]})
    for alpha, level in ((0.05, 0.95), (0.1, 0.9)):
        t = tabulate(runs, alpha)
        assert list(t.columns) == ["system", "algo", "metric", "n", "mean", "lower", "upper",
                                   "ci_level", "pairs"]
        assert t["ci_level"].tolist() == [pytest.approx(level, abs=1e-15)]
    # the 90% interval is narrower than the 95% one (the level is not decoration)
    assert tabulate(runs, 0.1)["upper"][0] < tabulate(runs, 0.05)["upper"][0]


# ----------------------------------------------------------------- 3. the pair's written form
def test_a_sweep_writes_its_pairs_as_two_names(tmp_path):
    out = tmp_path / "sw"
    sweep(["ppo"], [0], overrides={"iterations": 1, "n_individuals": 16, "n_epochs": 1},
          out=out)
    doc = json.loads((out / "runs" / "lending-1" / "ppo" / "seed-0" / "result.json").read_text())
    assert doc["pair"] == ["s+", "s-"]  # was "s+-s-"
    assert pd.read_csv(out / "runs.csv")["pair"].tolist() == ['["s+", "s-"]']
    assert pd.read_csv(out / "table.csv")["pairs"].unique().tolist() == ['["s+", "s-"]']
    assert '| \\["s+", "s-"\\] |' in (out / "table.md").read_text()


def test_pairs_are_two_names_so_a_dash_in_a_group_name_cannot_mix_them():
    from types import SimpleNamespace

    from causalfair.train.sweep import _pair_of

    # ("a-b", "c") and ("a", "b-c") are both "a-b-c" as "A-B": written, they stay two pairs
    two = [_pair_of(SimpleNamespace(extra={"pair": "a-b-c", "pair_groups": p}), None, None)
           for p in (("a-b", "c"), ("a", "b-c"))]
    assert two == ['["a-b", "c"]', '["a", "b-c"]']
    runs = pd.DataFrame({"system": ["s"] * 2, "algo": ["x"] * 2, "seed": [0, 1],
                         "pair": two, "C": [0.1, 0.2]})
    cell = tabulate(runs)["pairs"][0]
    assert cell == '["a-b", "c"] (1), ["a", "b-c"] (1)'
    assert pairs_cell([["s+", "s-"], ("s+", "s-"), '["s+", "s-"]']) == '["s+", "s-"]'
    # your own rows with "A-B" strings still tabulate (as labels)
    assert pairs_cell(["B-A", "B-A"]) == "B-A"


def test_resume_reads_an_earlier_sweeps_dash_pair_by_the_groups_or_refuses_it(tmp_path):
    from causalfair.train import TrainConfig

    cfg = TrainConfig(algo="ppo", setting="lending-1", seed=0, iterations=1)
    run = tmp_path / "seed-0"
    run.mkdir()
    from causalfair.train.sweep_io import config_doc as _config_doc

    def write(pair):
        (run / "result.json").write_text(json.dumps({
            "metrics": {"C": 0.5}, "wall_s": 1.0, "pair": pair, "config": _config_doc(cfg),
            "requested": _config_doc(cfg)}))

    write("s+-s-")  # what sweeps before this change wrote
    assert _finished(run, cfg, ("s+", "s-"))["pair"] == '["s+", "s-"]'
    write(["s+", "s-"])
    assert _finished(run, cfg, ("s+", "s-"))["pair"] == '["s+", "s-"]'
    write("a-b-c")  # two readings: refused in one line
    with pytest.raises(OutputError, match=r'names two pairs, \["a", "b-c"\] or \["a-b", "c"\]'):
        _finished(run, cfg, ("a", "a-b", "b-c", "c"))


# ----------------------------------------------------------------- 4. frontier --constraint DP
FACTORY = """import numpy as np

def group_a_only():
    # approve every applicant of the first group, none of the second: DP = 1 - 0 = 1
    return np.array([[1.0] * 7, [0.0] * 7])
"""


def test_frontier_dp_tabulates_the_bounded_dp(tmp_path, capsys):
    (tmp_path / "pols.py").write_text(FACTORY)
    code = main(["frontier", "--setting", "lending-1", "--horizon", "3", "--points", "2",
                 "--constraint", "DP", "--policy", "pols:group_a_only", "always",
                 "--search-path", str(tmp_path), "--out", str(tmp_path / "f"), "--no-plot"])
    out = capsys.readouterr().out
    assert code == 0
    table = out[out.index("Policies against the frontier"):].splitlines()
    assert "at equal |DP|" in table[0]
    header = table[1].split()
    assert "DP" in header, table
    rows = {r.split()[0]: dict(zip(header, r.split(), strict=True)) for r in table[2:4]}
    assert float(rows["pols:group_a_only"]["DP"]) == 1.0  # by hand: rates 1 and 0
    assert float(rows["always"]["DP"]) == 0.0             # both groups approved: no gap

"""causalfair sweep: each run's numbers equal a separate `train` run's, on
any backend; the table's intervals are the t-intervals of the runs; failures are named."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from scipy import stats

from causalfair.cli import main
from causalfair.errors import ConfigError
from causalfair.train import TrainConfig, train
from causalfair.train.sweep import parse_seeds, sweep
from tests.conftest import failing_simulator, run_cmd


def test_seeds_parse_ranges_and_lists():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("0,3,5-7") == [0, 3, 5, 6, 7]
    for bad in ("3-1", "a", "-2", "0,0", ""):
        with pytest.raises(ConfigError, match="seeds"):
            parse_seeds(bad)


@pytest.mark.slow
def test_each_run_equals_a_separate_train_run_and_the_table_is_its_t_interval(tmp_path, capsys):
    # two PPO epochs a batch (not 10): the runs need only be the same, not good
    code = main(["sweep", "--algo", "ppo,ppo-c", "--seeds", "0-2", "--iterations", "2",
                 "--set", "n_epochs=2", "--out", str(tmp_path / "sw"), "--jobs", "2"])
    assert code == 0
    runs = pd.read_csv(tmp_path / "sw" / "runs.csv")
    assert len(runs) == 6 and list(runs["algo"]) == ["ppo"] * 3 + ["ppo-c"] * 3
    for algo, seed in (("ppo", 1), ("ppo-c", 2)):
        res = train(TrainConfig(algo=algo, setting="lending-1", seed=seed, iterations=2,
                                n_epochs=2), out=tmp_path / f"single-{algo}-{seed}")
        row = runs[(runs["algo"] == algo) & (runs["seed"] == seed)].iloc[0]
        for k in ("C", "DPE", "IPE", "SPE", "Lambda", "utility"):
            assert row[k] == res.metrics[k], (algo, seed, k)  # bit for bit (CSV keeps 17 digits)
        mine = torch.load(tmp_path / "sw" / "runs" / "lending-1" / algo / f"seed-{seed}" /
                          "checkpoint.pt", weights_only=True)
        theirs = torch.load(res.checkpoint, weights_only=True)
        assert mine.keys() == theirs.keys()
        sd_a, sd_b = mine["state_dict"], theirs["state_dict"]
        assert all(torch.equal(sd_a[k], sd_b[k]) for k in sd_b)
    table = pd.read_csv(tmp_path / "sw" / "table.csv")
    x = runs[runs["algo"] == "ppo-c"]["C"].to_numpy()
    h = stats.t.ppf(0.975, 2) * x.std(ddof=1) / math.sqrt(3)
    row = table[(table["algo"] == "ppo-c") & (table["metric"] == "C")].iloc[0]
    assert row["n"] == 3 and row["mean"] == pytest.approx(x.mean(), abs=1e-15)
    assert (row["lower"], row["upper"]) == pytest.approx((x.mean() - h, x.mean() + h), abs=1e-15)
    assert "| lending-1 | ppo-c | 3 |" in (tmp_path / "sw" / "table.md").read_text()
    # the same sweep in this process gives the same table
    serial = sweep(["ppo", "ppo-c"], [0, 1, 2], overrides={"iterations": 2, "n_epochs": 2})
    assert serial.table.equals(table)


BROKEN = failing_simulator('raise RuntimeError("the simulator broke in training")', cls="Sim")


def test_a_failing_run_is_named_and_the_others_are_tabulated(tmp_path, capsys):
    (tmp_path / "brk.py").write_text(BROKEN)
    code = main(["sweep", "--algo", "ppo", "--seeds", "0", "--iterations", "1",
                 "--system", "lending-1,brk:make", "--search-path", str(tmp_path),
                 "--out", str(tmp_path / "sw"), "--jobs", "2"])
    assert code == 2
    err = capsys.readouterr().err
    assert ("run ppo seed 0 on brk:make failed: simulator Sim.step raised RuntimeError: the "
            "simulator broke in training") in err
    runs = pd.read_csv(tmp_path / "sw" / "runs.csv")
    assert list(runs["system"]) == ["lending-1"]


def test_a_failed_runs_error_line_escapes_what_a_terminal_acts_on(tmp_path, capsys):
    # before: the sweep printed "causalfair sweep: error: run ... failed: MSG" itself, the
    # simulator's ESC [2J (clear the screen) and ESC [31m (red) raw to stderr
    (tmp_path / "esc.py").write_text(failing_simulator(
        'raise RuntimeError("\\x1b[2J\\x1b[31mboom\\u202e")', cls="Sim"))
    code = main(["sweep", "--algo", "ppo", "--seeds", "0", "--iterations", "1",
                 "--system", "esc:make", "--search-path", str(tmp_path),
                 "--out", str(tmp_path / "sw")])
    assert code == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err, err
    assert ("causalfair sweep: error: run ppo seed 0 on esc:make failed: simulator Sim.step "
            "raised RuntimeError: \\x1b[2J\\x1b[31mboom\\u202e") in err


def test_bad_input_is_refused_before_anything_runs(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    cases = [
        (["--algo", "ppo,nope", "--seeds", "0"], "algos: bad value 'nope'"),
        (["--algo", "ppo", "--seeds", "0-x"], "seeds: bad value '0-x'"),
        (["--algo", "ppo", "--seeds", "0", "--system", "no-such-system"], "no-such-system"),
        (["--algo", "ppo", "--seeds", "0", "--set", "lr=oops"], "lr"),
        (["--algo", "ppo", "--seeds", "0", "--out", str(tmp_path / "mine")],
         "causalfair did not write"),
    ]
    for extra, msg in cases:
        args = ["sweep", *extra]
        if "--out" not in extra:
            args += ["--out", str(tmp_path / "new")]
        assert main(args) == 2, extra
        assert msg in capsys.readouterr().err, extra
    assert not (tmp_path / "new").exists()
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_the_paper_reproduction_gives_the_same_runs_in_worker_processes(tmp_path):
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    tables = []
    for jobs in ("1", "2"):
        out = tmp_path / f"paper-{jobs}"
        run_cmd([sys.executable, root / "reports" / "reproduce_paper.py", "--quick",
                 "--jobs", jobs, "--out", out], timeout=600, expect=0,
                env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
        tables.append(pd.read_csv(out / "runs.csv").drop(columns=["wall_s"]))
    t = tables[0]  # --quick: lending-1, 2 seeds, the same runs for each seed
    assert sorted(set(t["seed"])) == [0, 1] and len(t) == 2 * int((t["seed"] == 0).sum()) >= 10
    assert t.equals(tables[1])


def test_lending_trainer_fields_go_to_lending_runs_only(tmp_path, capsys):
    """The generic trainer reads none of the lending trainer's fields (env, n_levels,
    pop_steps, ...): a run on another system that sets one is refused (it trained as if
    it were not given: ``--env population`` on attention-1 was per-site training, and its
    config.json did not record it), in Python and on every command; a sweep gives such a
    field to its lending runs only, and refuses one no system of the sweep reads."""
    from causalfair.train.population import ALGOS

    tiny = {"iterations": 1, "n_individuals": 20, "horizon": 2, "n_epochs": 1, "audit_n": 8}
    for field, value in (("env", "population"), ("n_levels", 5), ("pop_steps", 3)):
        with pytest.raises(ConfigError, match=f"^{field}.*lending trainer only.*'attention-1'"):
            train(TrainConfig(algo="ppo", system="attention-1", **{field: value}, **tiny))
    assert main(["train", "--system", "attention-1", "--env", "population", "--iterations",
                 "1", "--out", str(tmp_path / "t1")]) == 2
    assert "env (--env): bad value 'population'" in capsys.readouterr().err
    assert not (tmp_path / "t1").exists()
    assert main(["train", "--system", "replicator-1", "--algo", ALGOS[1], "--levels", "3",
                 "--out", str(tmp_path / "t2")]) == 2
    assert "--levels: not used by --algo l-ucbfair" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="'pop_steps' is a field of the lending trainer only"):
        sweep(["ppo"], [0], ["attention-1"], overrides={**tiny, "pop_steps": 3})
    res = sweep(["ppo"], [0], ["lending-1", "attention-1"],
                overrides={**tiny, "pop_mass": 0.02})
    assert not res.failed and len(res.runs) == 2


def test_table_n_counts_the_runs_its_mean_is_over():
    """A metric a run did not measure (NaN) is left out of the mean and its interval, and
    out of ``n`` too: n said 3 beside a mean and t-interval over 2 runs."""
    from causalfair.train.sweep import t_interval, tabulate

    runs = pd.DataFrame({"system": ["s"] * 3, "algo": ["a"] * 3, "seed": [0, 1, 2],
                         "C": [0.1, math.nan, 0.3], "utility": [1.0, 2.0, 3.0]})
    t = tabulate(runs).set_index("metric")
    assert t.loc["C", "n"] == 2 and t.loc["utility", "n"] == 3
    assert (t.loc["C", "mean"], t.loc["C", "lower"], t.loc["C", "upper"]) == t_interval(
        [0.1, 0.3])
    lo = 0.2 - stats.t.ppf(0.975, 1) * 0.1 * math.sqrt(2) / math.sqrt(2)
    assert t.loc["C", "lower"] == pytest.approx(lo)


def test_table_md_escapes_group_names_and_messages_as_every_markdown_writer():
    # before: the pairs cell and the Failed list were written raw: a group named "a|b" split
    # the row into one cell more, "*x*" rendered emphasised, "<b>" as HTML
    from causalfair.report.explain import md_escape
    from causalfair.train.sweep import SweepResult, tabulate

    runs = pd.DataFrame({"system": ["m:make"] * 2, "algo": ["ppo"] * 2, "seed": [0, 1],
                         "C": [0.1, 0.2], "utility": [1.0, 1.1],
                         "pair": ['["a|b", "*x*"]'] * 2})
    res = SweepResult(runs=runs, table=tabulate(runs),
                      failed=[("m:make", "ppo", 2, "simulator raised: <b>bad</b> *x*\nmore")])
    text = res.to_markdown(("utility", "C"))
    row = next(ln for ln in text.splitlines() if ln.startswith("| m:make |"))
    assert row.replace("\\|", "").count("|") == 7, row  # 6 cells: system, algo, seeds, 2 metrics, pairs
    assert md_escape('["a|b", "*x*"]') in row
    assert "- ppo seed 2 on m:make: simulator raised: \\<b\\>bad\\</b\\> \\*x\\* more" in text


def test_kl_penalty_fields_are_refused_where_training_is_clipped_ppo(tmp_path, capsys):
    """The generic trainer (every system but lending-1/2/3) updates with PPO's clipped
    surrogate: beta_kl and kl_target, the lending trainer's KL penalty's, trained as if not
    given there; now refused in one line, and a sweep gives them to its lending runs only."""
    tiny = {"iterations": 1, "n_individuals": 20, "horizon": 2, "n_epochs": 1, "audit_n": 8}
    for field, value in (("beta_kl", 5.0), ("kl_target", 0.03)):
        with pytest.raises(ConfigError, match=f"^{field}: .*clipped surrogate"):
            train(TrainConfig(algo="ppo", system="attention-1", **{field: value}, **tiny))
    assert main(["train", "--system", "attention-1", "--set", "beta_kl=5", "--iterations",
                 "1", "--out", str(tmp_path / "k")]) == 2
    assert "beta_kl: bad value 5" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="'kl_target' is a field of the lending trainer only"):
        sweep(["ppo"], [0], ["attention-1"], overrides={**tiny, "kl_target": 0.03})
    res = sweep(["ppo"], [0], ["lending-1", "attention-1"], overrides={**tiny, "beta_kl": 2.0})
    assert not res.failed and len(res.runs) == 2

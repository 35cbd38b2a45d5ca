"""A researcher's walkthrough of `causalfair sweep` / `train` (docs/training.md, docs/scale.md):
a paper's table over the published methods x their environments x seeds, extended by a
seed, whose runs say exactly how they were trained."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.errors import ConfigError
from causalfair.train.sweep import sweep

#: the smallest runs: the workflow is checked, not the science
TINY_LENDING = ["--iterations", "1", "--set", "n_individuals=16", "--set", "horizon=3",
                "--set", "hidden=[4]", "--set", "n_epochs=1", "--set", "eval_every=1"]
TINY = TINY_LENDING + ["--set", "audit_n=8"]


def _tiny() -> dict:
    """TINY as sweep()'s overrides."""
    out = {}
    for a, b in zip(TINY[::2], TINY[1::2], strict=True):
        if a == "--iterations":
            out["iterations"] = int(b)
        else:
            k, v = b.split("=")
            out[k] = json.loads(v)
    return out


def test_a_method_that_does_not_apply_is_one_line_before_any_run_not_a_failure(tmp_path, capsys):
    # the published methods x a published environment: A-PPO, F-PPO-L and ELBERT-PO need
    # supply and demand, which the replicator has not; F-PPO trains on lending only
    code = main(["sweep", "--algo", "ppo,a-ppo,f-ppo,elbert-po", "--seeds", "0-1",
                 "--system", "replicator-1", *TINY, "--out", str(tmp_path / "sw")])
    err = capsys.readouterr().err
    for algo, why in (("a-ppo", "supply"), ("f-ppo", "lending"), ("elbert-po", "supply")):
        lines = [ln for ln in err.splitlines() if f" {algo} " in ln or f"'{algo}'" in ln]
        assert len(lines) == 1, (algo, err)  # one line, not one per seed
        assert "replicator-1" in lines[0] and why in lines[0] and "not trained" in lines[0]
        assert not (tmp_path / "sw" / "runs" / "replicator-1" / algo).exists()
    assert "failed" not in err
    assert code == 0  # not applicable is not a failed run
    runs = pd.read_csv(tmp_path / "sw" / "runs.csv")
    assert list(runs["algo"]) == ["ppo", "ppo"]
    md = (tmp_path / "sw" / "table.md").read_text()
    assert "Not trained" in md and "a-ppo on replicator-1" in md


def test_a_sweep_where_nothing_applies_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="f-ppo on attention-1: .*lending"):
        sweep(["f-ppo"], [0], ["attention-1"], overrides=_tiny(), out=tmp_path / "sw")
    assert not (tmp_path / "sw").exists()


def test_f_ppo_l_on_a_lending_system_without_the_lending_trainer_says_what_is_missing(tmp_path):
    # lending-harder is tabular lending, but not one the lending trainer trains: the line
    # must not send the user to "the lending settings' own trainer" for it
    res = sweep(["ppo", "f-ppo-l"], [0], ["lending-harder"], overrides=_tiny())
    (sysid, algo, why), = res.skipped
    assert (sysid, algo) == ("lending-harder", "f-ppo-l")
    assert "long_term_gap" in why and "have their own trainer" not in why
    # and where it applies the registry says so: infectious-1 has a long-term gap
    from causalfair.train.algorithms import get
    assert "infectious" in get("f-ppo-l").systems
    assert sweep(["f-ppo-l"], [0], ["infectious-1"], overrides=_tiny()).skipped == []


def test_extending_by_a_seed_names_the_finished_runs_it_leaves_out_of_the_table(tmp_path, capsys):
    out = str(tmp_path / "sw")
    assert main(["sweep", "--algo", "ppo", "--seeds", "0-1", *TINY_LENDING, "--out", out]) == 0
    capsys.readouterr()
    # "another seed": only seed 2 asked; seeds 0 and 1 are finished in the folder
    assert main(["sweep", "--algo", "ppo", "--seeds", "2", *TINY_LENDING, "--out", out,
                 "--resume"]) == 0
    cap = capsys.readouterr()
    runs = pd.read_csv(tmp_path / "sw" / "runs.csv")
    assert list(runs["seed"]) == [2]
    assert "2 finished runs" in cap.err and "--seeds 0-2" in cap.err, cap.err
    # asked with every seed, the table has them all and nothing is trained again
    assert main(["sweep", "--algo", "ppo", "--seeds", "0-2", *TINY_LENDING, "--out", out,
                 "--resume"]) == 0
    cap = capsys.readouterr()
    assert "3 kept from the earlier sweep" in cap.out and "finished runs" not in cap.err
    assert list(pd.read_csv(tmp_path / "sw" / "runs.csv")["seed"]) == [0, 1, 2]


def test_result_json_records_the_hyper_parameters_the_run_used(tmp_path):
    # attention-1 carries its seed's published A-PPO values (omega 0.05, betas 0.15): the
    # configuration a paper quotes from result.json must be those, as config.json says
    res = sweep(["a-ppo"], [0], ["attention-1"], overrides=_tiny(), out=tmp_path / "sw")
    assert not res.failed
    run = tmp_path / "sw" / "runs" / "attention-1" / "a-ppo" / "seed-0"
    used = json.loads((run / "config.json").read_text())
    doc = json.loads((run / "result.json").read_text())
    assert used["appo_omega"] == 0.05 and used["appo_beta1"] == 0.15
    for k, v in used.items():
        assert doc["config"][k] == v, k
    assert doc["config"]["horizon"] == 3
    # and a resumed sweep still recognises the run as this configuration's
    again = sweep(["a-ppo"], [0], ["attention-1"], overrides=_tiny(), out=tmp_path / "sw",
                  existing="resume")
    assert again.reused == 1


def test_every_trainer_s_checkpoint_names_its_algorithm_seed_and_configuration(tmp_path):
    import causalfair as cf

    res = sweep(["ppo", "ppo-c"], [3], ["lending-1", "attention-1"], overrides=_tiny(),
                out=tmp_path / "sw")
    assert not res.failed
    for sysid in ("lending-1", "attention-1"):
        for algo in ("ppo", "ppo-c"):
            run = tmp_path / "sw" / "runs" / sysid / algo / "seed-3"
            _, meta = cf.load_checkpoint(run / "checkpoint.pt")
            md = meta["metadata"]
            assert md["algorithm"] == algo and md["seed"] == 3, (sysid, md)
            assert md["config"]["beta_c"] == 2.0 and md["config"]["horizon"] == 3, sysid
    # the population agents too (causalfair train --algo l-ucbfair)
    out = tmp_path / "lucb"
    assert main(["train", "--system", "replicator-1", "--algo", "l-ucbfair", "--seed", "4",
                 "--iterations", "2", "--set", "phi_samples=100", "--set", "phi_epochs=1",
                 "--out", str(out), "--no-progress"]) == 0
    _, meta = cf.load_checkpoint(out / "checkpoint.npz")
    assert meta["metadata"]["algorithm"] == "l-ucbfair" and meta["metadata"]["seed"] == 4


def test_your_own_method_tabulates_beside_the_built_ins_as_the_sweep_does(tmp_path):
    """docs/training.md, "Your own method": the sweep's checkpoints re-audited give the
    sweep's numbers, and tabulate() is the sweep's own table (hand-computed t-interval)."""
    import math

    import causalfair as cf
    from causalfair.train.sweep import tabulate

    res = sweep(["ppo"], [0, 1], overrides=_tiny(), out=tmp_path / "sw")
    system = cf.systems.make("lending-1")
    rows = []
    for k in (0, 1):
        pol, _ = cf.load_checkpoint(tmp_path / "sw" / "runs" / "lending-1" / "ppo" / f"seed-{k}"
                                    / "checkpoint.pt")
        d = cf.decompose(system, pol, horizon=3).to_dict()
        mine = res.runs[res.runs["seed"] == k].iloc[0]
        for q in ("C", "DPE", "IPE", "SPE", "Lambda", "utility"):
            assert d[q] == pytest.approx(mine[q], abs=1e-8), (k, q)
        rows.append({"system": "lending-1", "algo": "ppo", "seed": k, "pair": "-".join(d["pair"]),
                     **{q: d[q] for q in ("C", "Lambda")}})
    for k, t in ((0, 0.4), (1, 0.6), (2, 0.5)):
        d = cf.decompose(system, cf.parse_policy(f"threshold:{t}", system.tabular),
                         horizon=3).to_dict()
        rows.append({"system": "lending-1", "algo": "mine", "seed": k,
                     "pair": "-".join(d["pair"]), "C": d["C"], "Lambda": d["Lambda"]})
    table = tabulate(pd.DataFrame(rows))
    # the sweep's own table of its runs is tabulate's of its runs.csv
    assert tabulate(res.runs).equals(res.table)
    c = [r["C"] for r in rows if r["algo"] == "mine"]
    m = sum(c) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in c) / 2)
    from scipy import stats

    h = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    row = table[(table.algo == "mine") & (table.metric == "C")].iloc[0]
    assert row["n"] == 3 and row["pairs"] == "s+-s-"
    assert (row["mean"], row["lower"], row["upper"]) == pytest.approx((m, m - h, m + h), abs=1e-12)
    with pytest.raises(ConfigError, match=r"runs: column\(s\) \['seed'\] missing"):
        tabulate(pd.DataFrame([{"system": "s", "algo": "a", "C": 0.1}]))


def test_a_failed_run_is_written_under_the_table_not_only_on_stderr(tmp_path):
    # a sweep left running overnight: its stderr is gone, its folder is what is read
    from tests.conftest import failing_simulator

    (tmp_path / "brk.py").write_text(failing_simulator('raise RuntimeError("broke")'))
    res = sweep(["ppo"], [0, 1], ["lending-1", "brk:make"], overrides=_tiny(),
                out=tmp_path / "sw", search_path=tmp_path)
    assert len(res.failed) == 2 and len(res.runs) == 2
    md = (tmp_path / "sw" / "table.md").read_text()
    assert "Failed (left out of the table; --resume trains them again)" in md
    assert "- ppo seed 0 on brk:make: " in md and "broke" in md
    assert "- ppo seed 1 on brk:make: " in md


def test_a_simulator_that_breaks_in_the_applicability_check_is_still_a_named_failed_run(tmp_path):
    from tests.conftest import failing_simulator

    (tmp_path / "brk.py").write_text(failing_simulator('raise RuntimeError("broke")'))
    res = sweep(["a-ppo"], [0], ["brk:make"], overrides=_tiny(), search_path=tmp_path)
    (sysid, algo, seed, msg), = res.failed
    assert (sysid, algo, seed) == ("brk:make", "a-ppo", 0) and "broke" in msg
    assert res.skipped == []


def test_constraints_on_the_lending_trainer_are_refused_before_any_run(tmp_path):
    # they were one failed run per (algo, seed), an empty table, after the folder was made
    with pytest.raises(ConfigError, match=r"constraints: .*lending-1.*--algo exact"):
        sweep(["ppo", "ppo-c"], [0, 1], ["lending-1"],
              overrides={**_tiny(), "constraints": ["abs_C<=0.05"]}, out=tmp_path / "sw")
    assert not (tmp_path / "sw").exists()


# ------------------------------------------------------------------ second walkthrough
POP_TINY = {"iterations": 1, "phi_samples": 100, "phi_epochs": 1, "envs": 1}


def test_a_resumed_sweep_audits_population_runs_an_earlier_causalfair_left_without_utility(
        tmp_path):
    # result.json of a population run written before utility and Lambda were recorded: the
    # resumed table's utility column must not be n/a for R-TD3 / L-UCBFair (it is the one
    # column every algorithm shares), and the numbers are the uninterrupted sweep's
    out = tmp_path / "sw"
    first = sweep(["l-ucbfair", "r-td3"], [0], ["replicator-1"], overrides=POP_TINY, out=out)
    assert not first.failed
    for algo in ("l-ucbfair", "r-td3"):
        f = out / "runs" / "replicator-1" / algo / "seed-0" / "result.json"
        doc = json.loads(f.read_text())
        for k in ("utility", "Lambda"):
            del doc["metrics"][k]  # as an earlier causalfair wrote it
        f.write_text(json.dumps(doc))
    again = sweep(["l-ucbfair", "r-td3"], [0], ["replicator-1"], overrides=POP_TINY, out=out,
                  existing="resume")
    assert again.reused == 2
    for algo in ("l-ucbfair", "r-td3"):
        new = again.runs[again.runs.algo == algo].iloc[0]
        old = first.runs[first.runs.algo == algo].iloc[0]
        for k in ("utility", "Lambda", "C", "V_r"):
            assert new[k] == old[k], (algo, k)  # the same audit, bit for bit
        doc = json.loads((out / "runs" / "replicator-1" / algo / "seed-0" / "result.json")
                         .read_text())
        assert doc["metrics"]["utility"] == old["utility"]  # written back: audited once
    assert again.table.equals(first.table)
    assert "n/a" not in (out / "table.md").read_text().split("Not trained")[0]


def test_ppo_cb_on_a_system_without_features_is_refused_up_front_naming_a_fix(tmp_path, capsys):
    # attention-central (the published central policy) observes no features: PPO-Cb's
    # Lambda has nothing to pair units by. The sweep says so before any run (not a failed
    # run after the others trained), and train's message names what to use instead.
    res = sweep(["ppo", "ppo-cb"], [0], ["attention-central"], overrides=_tiny())
    assert not res.failed
    (sysid, algo, why), = res.skipped
    assert (sysid, algo) == ("attention-central", "ppo-cb") and "features" in why
    code = main(["train", "--system", "attention-central", "--algo", "ppo-cb", *TINY,
                 "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "observes none" in err and "train ppo-c there" in err, err
    assert not (tmp_path / "r").exists()


def test_a_horizon_set_for_the_ppo_family_only_is_refused_when_population_agents_share_the_table(
        tmp_path):
    # --set horizon=3 reached the PPO runs (TrainConfig) but not R-TD3 / L-UCBFair, which
    # train and audit over the system's horizon (100 on replicator-1): one table, one
    # utility column, 3 steps against 100, nothing said
    over = {**_tiny(), "envs": 1}
    with pytest.raises(ConfigError, match=r"horizon.*r-td3 on replicator-1.*100.*--param horizon=3"):
        sweep(["ppo", "r-td3"], [0], ["replicator-1"], overrides=over, out=tmp_path / "sw")
    assert not (tmp_path / "sw").exists()
    # the system's own horizon for every run: --param horizon=3
    del over["horizon"]
    res = sweep(["ppo", "r-td3"], [0], ["replicator-1"], params={"horizon": 3}, overrides=over,
                out=tmp_path / "sw")
    assert not res.failed
    for algo in ("ppo", "r-td3"):
        doc = json.loads((tmp_path / "sw" / "runs" / "replicator-1" / algo / "seed-0"
                          / "result.json").read_text())
        h = doc["config"].get("horizon")
        if h is None:  # a population agent: the system's
            import causalfair as cf

            _, meta = cf.load_checkpoint(tmp_path / "sw" / "runs" / "replicator-1" / algo
                                         / "seed-0" / "checkpoint.npz")
            h = meta["architecture"]["horizon"]
        assert h == 3, algo


def test_train_refusing_horizon_for_a_population_agent_names_the_param_that_sets_it(
        tmp_path, capsys):
    code = main(["train", "--system", "replicator-1", "--algo", "r-td3", "--horizon", "5",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "--horizon" in err and "--param horizon=5" in err, err


def test_runs_csv_names_the_checkpoint_each_row_comes_from(tmp_path):
    # a paper's table cites its checkpoints: each row of runs.csv names its file (relative
    # to the sweep folder), which loads as that row's algorithm and seed
    import causalfair as cf

    out = tmp_path / "sw"
    res = sweep(["ppo", "l-ucbfair"], [0, 1], ["replicator-1"],
                params={"horizon": 3}, overrides={**_tiny(), **{
                    k: v for k, v in POP_TINY.items() if k != "envs"}}, out=out)
    assert not res.failed
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4
    for _, row in runs.iterrows():
        ck = out / row["checkpoint"]
        assert ck.is_file(), row["checkpoint"]
        assert ck.suffix == (".npz" if row["algo"] == "l-ucbfair" else ".pt")
        md = cf.load_checkpoint(ck)[1]["metadata"]
        assert (md["algorithm"], md["seed"]) == (row["algo"], row["seed"])
    assert "checkpoint" not in set(res.table["metric"])
    # a resumed sweep names them too
    again = sweep(["ppo", "l-ucbfair"], [0, 1], ["replicator-1"], params={"horizon": 3},
                  overrides={**_tiny(), **{k: v for k, v in POP_TINY.items() if k != "envs"}},
                  out=out, existing="resume")
    assert again.reused == 4
    assert pd.read_csv(out / "runs.csv")["checkpoint"].tolist() == runs["checkpoint"].tolist()

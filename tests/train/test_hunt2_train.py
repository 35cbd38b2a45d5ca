"""hunt2_train: bad training inputs refused in one line (exit 2) by the one check every door
calls, before anything is trained or written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import causalfair as cf
from causalfair.errors import ConfigError, InputError
from causalfair.train import TrainConfig
from causalfair.train import population as P
from causalfair.train.exact import repair_checkpoint
from tests.conftest import run_cmd

HUGE_SEED = 99999999999999999999999  # above 2**64: torch.manual_seed overflowed


@pytest.mark.parametrize("make", [
    lambda s: TrainConfig(seed=s),
    lambda s: P.RTD3Config(seed=s),
    lambda s: P.LUCBFairConfig(seed=s),
])
@pytest.mark.parametrize("seed", [HUGE_SEED, 2**64, -1])
def test_a_seed_outside_0_to_2_64_is_refused_by_every_trainer(make, seed):
    with pytest.raises(ConfigError, match="seed: bad value .*below 2\\*\\*64"):
        make(seed)
    make(2**64 - 1)  # the largest seed torch takes


def test_the_exact_repair_refuses_a_huge_seed_before_anything_runs():
    system = cf.systems.make("lending-1")
    with pytest.raises(InputError, match="seed: bad value"):
        repair_checkpoint(system, 20, [cf.train.repair.Constraint("abs_C", 0.05)],
                          seed=HUGE_SEED)


def test_cli_huge_seed_is_exit_2_and_writes_nothing(tmp_path, cli_here):
    for extra in ([], ["--system", "replicator-1", "--algo", "r-td3"],
                  ["--algo", "exact", "--constraint", "abs_C<=0.05"]):
        out = tmp_path / "run"
        p = cli_here("train", "--no-progress", "--iterations", "1", "--seed", str(HUGE_SEED),
                     "--out", out, *extra, cwd=tmp_path)
        assert p.returncode == 2, (extra, p.stderr)
        assert "seed: bad value" in p.stderr and "Traceback" not in p.stderr
        assert not out.exists()


@pytest.mark.parametrize("make", [lambda v: TrainConfig(lr=v), lambda v: P.RTD3Config(lr=v)])
@pytest.mark.parametrize("lr", [1e300, 10**400, 1.5, 0, -1e-3, float("inf"), float("nan")])
def test_a_learning_rate_outside_0_1_is_refused_by_every_trainer(make, lr):
    with pytest.raises(ConfigError, match="lr: bad value .*(> 0 and <= 1|finite)"):
        make(lr)
    make(1.0)


def test_cli_huge_learning_rate_is_exit_2_not_an_adam_overflow(tmp_path, cli_here):
    for extra in ([], ["--system", "replicator-1", "--algo", "r-td3"]):
        p = cli_here("train", "--no-progress", "--iterations", "1", "--set", "lr=1e300",
                     "--out", tmp_path / "run", *extra, cwd=tmp_path)
        assert p.returncode == 2, (extra, p.stderr)
        assert "lr: bad value" in p.stderr and "Traceback" not in p.stderr
        assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("field, value", [("max_grad_norm", -1.0), ("max_grad_norm", 0.0),
                                          ("vf_coef", -0.5)])
def test_a_gradient_clip_or_value_weight_that_would_train_uphill_is_refused(field, value):
    # clip_grad_norm_ multiplies the gradients by max_norm / norm: < 0 flipped every one
    # (one iteration of lending-1 PPO fell to utility -1.14), 0 zeroed them
    with pytest.raises(ConfigError, match=f"{field}: bad value"):
        TrainConfig(**{field: value})
    TrainConfig(max_grad_norm=1e-3, vf_coef=0.0)


@pytest.mark.parametrize("cls, field, value", [
    (P.RTD3Config, "hidden", (-5,)), (P.RTD3Config, "hidden", (0,)),
    (P.RTD3Config, "hidden", ("64",)), (P.RTD3Config, "tau", 5.0),
    (P.RTD3Config, "gamma", 5.0), (P.RTD3Config, "gamma", 0.0),
    (P.RTD3Config, "action_noise", -1.0), (P.RTD3Config, "action_noise", float("nan")),
    (P.RTD3Config, "noise_clip", -1.0), (P.RTD3Config, "target_noise", float("inf")),
    (P.RTD3Config, "tau", 10**400),
    (P.LUCBFairConfig, "phi_hidden", (-1,)), (P.LUCBFairConfig, "chi", float("nan")),
    (P.LUCBFairConfig, "chi", float("inf")), (P.LUCBFairConfig, "beta", float("inf")),
    (P.LUCBFairConfig, "alpha", float("inf")),
])
def test_population_agent_configs_refuse_bad_fields_naming_them(cls, field, value):
    with pytest.raises(ConfigError, match=f"^{field}: bad value"):
        cls(**{field: value})


@pytest.mark.parametrize("cls, field, value", [
    (P.RTD3Config, "hidden", (10**8,)), (P.LUCBFairConfig, "phi_hidden", (10**8,)),
    (P.LUCBFairConfig, "d", 10**9), (P.LUCBFairConfig, "phi_samples", 10**12),
])
def test_population_agent_networks_over_the_memory_limit_are_refused(cls, field, value):
    with pytest.raises(InputError, match=f"{field}.*over the limit"):
        cls(**{field: value})


def test_population_agent_configs_keep_their_defaults_and_lists():
    assert P.RTD3Config(hidden=[64, 32], gamma=1.0, action_noise=0.0).hidden == (64, 32)
    assert P.LUCBFairConfig(chi=0.0, alpha="paper").phi_hidden == (64, 64)


@pytest.mark.parametrize("algo, sets", [
    ("r-td3", ["hidden=[-5]"]), ("r-td3", ["tau=5"]), ("r-td3", ["action_noise=-1"]),
    ("l-ucbfair", ["phi_hidden=[-1]"]), ("l-ucbfair", ["chi=NaN"]),
    ("l-ucbfair", ["d=300000"]),  # refused by train_lucbfair's own memory check
])
def test_cli_refused_population_run_is_exit_2_and_leaves_no_folder(tmp_path, cli_here, algo,
                                                                     sets):
    out = tmp_path / "run"
    args = [a for s in sets for a in ("--set", s)]
    p = cli_here("train", "--no-progress", "--system", "replicator-1", "--algo", algo,
                 "--iterations", "1", *args, "--out", out, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "bad value" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()  # not even the .causalfair-run marker


@pytest.mark.parametrize("kw, field", [({"outer": 0}, "iterations"), ({"outer": -3}, "iterations"),
                                       ({"outer": 2.5}, "iterations"),
                                       ({"n_random": -1}, "starts")])
def test_the_repair_refuses_a_budget_of_no_rounds_at_every_door(kw, field):
    # outer <= 0 ran range(outer): no round of the table search, and still "passed"
    from causalfair.train.repair import Constraint, best_found, repair_network

    system = cf.systems.make("lending-1")
    cons = [Constraint("abs_C", 0.05)]
    with pytest.raises(InputError, match=f"^{field}: bad value"):
        repair_checkpoint(system, 20, cons, **kw)
    with pytest.raises(InputError, match=f"^{field}: bad value"):
        best_found(system.tabular, 20, cons, **kw)
    with pytest.raises(InputError, match=f"^{field}: bad value"):
        repair_network(system.tabular, 20, None, None, cons, **kw)


def test_cli_exact_repair_with_no_rounds_is_exit_2_and_leaves_no_folder(tmp_path, cli_here):
    ck = Path(cf.__file__).parent / "examples" / "checkpoints" / "lending-1-ppo.pt"
    for n in ("0", "-3"):
        p = cli_here("train", "--no-progress", "--algo", "exact", "--constraint", "abs_C<=0.05",
                     "--init-checkpoint", ck, "--iterations", n, "--out", tmp_path / "rep",
                     cwd=tmp_path)
        assert p.returncode == 2, p.stdout + p.stderr
        assert f"iterations: bad value {n}" in p.stderr
        assert not (tmp_path / "rep").exists()


def test_resume_with_fewer_iterations_than_done_is_refused_untouched(tmp_path):
    # it rewrote checkpoint.pt, config.json and state.pt as a 2-iteration run of a policy
    # trained 3 iterations, and printed "2 iterations"
    from causalfair.train import train

    cfg = TrainConfig(algo="ppo", iterations=3, n_individuals=64, horizon=5, hidden=(16,),
                      n_epochs=2, n_minibatches=2, eval_every=2, checkpoint_every=2)
    train(cfg, out=tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError, match="iterations: bad value 2; .*trained 3 iterations"):
        train(cfg.replace(iterations=2), out=tmp_path, resume=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    res = train(cfg, out=tmp_path, resume=True)  # the same total: nothing to train
    assert res.checkpoint is not None


def test_a_new_run_in_an_earlier_runs_folder_leaves_none_of_its_files(tmp_path):
    # an exact repair written into a PPO run's folder stood beside the PPO run's config.json,
    # state.pt and metrics (and --resume then continued the PPO run under repair.json)
    from causalfair.train import train
    from causalfair.train.checkpoint import RUN_MARK, prepare_run_folder

    cfg = TrainConfig(algo="ppo", iterations=1, n_individuals=64, horizon=5, hidden=(16,),
                      n_epochs=1, n_minibatches=2)
    train(cfg, out=tmp_path)
    (tmp_path / "repair.json").write_text("{}")  # as an earlier exact repair left it
    (tmp_path / "notes.txt").write_text("mine")  # not a run's output: kept
    prepare_run_folder(tmp_path, resume=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [RUN_MARK, "notes.txt"]


@pytest.mark.slow  # an exact repair: about 18 s on 2 cores
def test_cli_exact_repair_into_a_ppo_run_folder_is_the_repair_alone(tmp_path, cli_here):
    ck = Path(cf.__file__).parent / "examples" / "checkpoints" / "lending-1-ppo.pt"
    out = tmp_path / "run"
    p = cli_here("train", "--no-progress", "--iterations", "1", "--individuals", "64",
                 "--horizon", "5", "--out", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (out / "state.pt").is_file()
    p = cli_here("train", "--no-progress", "--algo", "exact", "--constraint", "abs_C<=0.05",
                 "--init-checkpoint", ck, "--iterations", "1", "--out", out, cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert sorted(q.name for q in out.iterdir()) == [".causalfair-run", "checkpoint.pt",
                                                     "repair.json"]
    p = cli_here("train", "--no-progress", "--iterations", "2", "--out", out, "--resume",
                 cwd=tmp_path)  # no PPO state left to continue under the repair's name
    assert p.returncode == 2 and "state.pt does not exist" in p.stderr


@pytest.mark.parametrize("cmd", [["train", "--no-progress"],
                                 ["sweep", "--algo", "ppo", "--seeds", "0"]])
def test_a_field_given_by_set_and_by_its_flag_is_refused(tmp_path, cli_here, cmd):
    """``--iterations 1 --set iterations=3`` trained 3 iterations (the last word won)."""
    out = tmp_path / "run"
    p = cli_here(*cmd, "--iterations", "1", "--set", "iterations=3",
                 "--out", out, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "--set iterations: given with --iterations as well (3 and 1); keep one." in p.stderr
    assert not out.exists()


@pytest.mark.parametrize("flags", [["--beta-c", "3"], ["--beta-lambda", "1"],
                                   ["--individuals", "7"], ["--eval-every", "2"],
                                   ["--checkpoint-every", "3"], ["--set", "lr=0.1"],
                                   ["--env", "population"]])
def test_cli_exact_repair_refuses_the_ppo_flags_it_does_not_use(tmp_path, cli_here, flags):
    # h6hunt1 F3: they were ignored without a word (exit 0)
    p = cli_here("train", "--no-progress", "--algo", "exact", "--constraint", "abs_C<=0.05",
                 "--iterations", "1", "--out", tmp_path / "rep", *flags, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{flags[0]}: not used by --algo exact" in p.stderr
    assert not (tmp_path / "rep").exists()


def test_cli_exact_repair_reads_levels_of_the_lending_shorthand(tmp_path, cli_here,
                                                               monkeypatch):
    # h6hunt1 F3: --setting lending-1 --levels 9 repaired the 7-level model (PPO: 9 levels)
    import causalfair.train.exact as ex

    seen = []

    def stop(system, *a, **k):
        seen.append(system.tabular.n_levels)
        raise InputError("stop: seen")

    monkeypatch.setattr(ex, "repair_checkpoint", stop)
    for extra, k in (([], 7), (["--levels", "9"], 9), (["--param", "levels=5"], 5)):
        p = cli_here("train", "--no-progress", "--algo", "exact", "--constraint",
                     "abs_C<=0.05", "--setting", "lending-1", "--out", tmp_path / "rep",
                     *extra, cwd=tmp_path)
        assert p.returncode == 2 and "stop: seen" in p.stderr, p.stderr
        assert seen[-1] == k


@pytest.mark.slow  # about 11 s: one repair's search
def test_the_exact_repair_checkpoint_records_its_run(tmp_path):
    # h6hunt1 F5: it recorded only its name and the repair's numbers (no system, levels,
    # horizon, seed or constraints), unlike a trainer's checkpoint
    import json

    from causalfair.policies.checkpoint import read_pt
    from causalfair.thresholds import Constraint

    system = cf.systems.make("lending-1", levels=5)
    rep = repair_checkpoint(system, 3, [Constraint("abs_C[s--s+]", 0.05)], seed=5, outer=1,
                            n_random=0, pair=(1, 0))
    rep.save(tmp_path / "r.pt", name="r")
    md = read_pt(tmp_path / "r.pt")[1]["metadata"]
    assert {k: md[k] for k in ("algorithm", "system", "system_params", "horizon", "seed",
                               "name")} == {"algorithm": "exact", "system": "lending-1",
                                            "system_params": {"levels": 5}, "horizon": 3,
                                            "seed": 5, "name": "r"}
    assert md["config"] == {"iterations": 1, "starts": 0, "constraints": ["abs_C[s--s+]<=0.05"],
                            "eps": None, "weights": "visitation", "pair": ["s-", "s+"]}
    json.dumps(md)  # JSON all through


@pytest.mark.parametrize("text,why", [("Lambda<=-0.1", "Lambda \\(a sum of absolute values\\)"),
                                      ("max_Lambda<=-0.1", "Lambda \\(a sum"),
                                      ("min_ratio_V>=1.5", "a ratio min / max")])
def test_a_constraint_that_can_never_hold_is_refused_before_the_repair(text, why, tmp_path,
                                                                        cli_here):
    # h6hunt1 F8: Lambda >= 0 and min / max <= 1: the repair ran every round, then "fails
    # the constraints" (exit 1)
    from causalfair.thresholds import parse_constraint

    with pytest.raises(InputError, match=f"can never hold for {why}"):
        parse_constraint(text)
    p = cli_here("train", "--no-progress", "--algo", "exact", "--constraint", text,
                 "--out", tmp_path / "rep", cwd=tmp_path)
    assert p.returncode == 2 and "can never hold" in p.stderr
    assert not (tmp_path / "rep").exists()
    parse_constraint("min_ratio_V>=1")  # equal groups: it can hold
    parse_constraint("Lambda<=0")


@pytest.mark.parametrize("kw,field", [({"inner": 0}, "inner"), ({"inner": "x"}, "inner"),
                                      ({"margin": -1.0}, "margin"),
                                      ({"margin": float("nan")}, "margin"),
                                      ({"margin": "x"}, "margin"),
                                      ({"initial": {"a": [[0.5] * 7] * 3}}, "initial\\['a'\\]"),
                                      ({"initial": {"a": [[2.0] * 7] * 2}}, "initial\\['a'\\]"),
                                      ({"initial": {"a": [[[0.5] * 7] * 2] * 3}},
                                       "initial\\['a'\\]"),
                                      ({"initial": [1, 2]}, "initial")])
def test_best_found_checks_its_inner_steps_margin_and_starting_tables(kw, field):
    # h6hunt1 F9: inner 0 ran no step, margin -1 aimed outside every bound (a "repair" at
    # a tenth of the utility), NaN found nothing, a table of another shape crashed in numpy
    from causalfair.errors import CausalfairError
    from causalfair.thresholds import Constraint
    from causalfair.train.repair import best_found

    model = cf.systems.make("lending-1").tabular
    with pytest.raises(CausalfairError, match=f"^{field}( table)?: "):
        best_found(model, 3, [Constraint("abs_C", 0.01)], outer=1, n_random=0,
                   **{"inner": 5, **kw})


@pytest.mark.parametrize("field,value,why", [
    ("elbert_alpha", -1.0, "a negative one would reward"),
    ("appo_beta1", -1.0, "a negative one would reward"),
    ("appo_beta2", -0.5, "a negative one would reward"),
    ("fppo_beta3", -2.0, "a negative one would reward"),
    ("fppo_beta0", -1.0, "a negative one would reward"),
    ("ent_coef", -5.0, "a negative one would reward"),
    ("appo_omega", -1.0, "always exceeded"),
    ("fppo_omega", -0.1, "always exceeded"),
    ("elbert_beta", 0.0, "temperature"),
    ("elbert_beta", -20.0, "temperature"),
    ("massage_tau_s", -1.0, r"\[0, 0.5\]"),
    ("massage_tau_s", 0.7, r"\[0, 0.5\]"),
    ("massage_decay", 5.0, r"\(0, 1\]"),
    ("massage_decay", 0.0, r"\(0, 1\]"),
    ("massage_start", -5, ">= 0"),
])
def test_the_published_methods_fields_are_range_checked(field, value, why):
    """A-PPO's, F-PPO(-L)'s and ELBERT-PO's weights, tolerances, temperature and F-PPO's
    massaging schedule: out of range, each trained silently (elbert_alpha=-1 trained for
    bias, massage_tau_s=-1 flipped every candidate, massage_decay=5 none); now refused in
    one line naming the field, as beta_c and beta_lambda are."""
    with pytest.raises(ConfigError, match=f"^{field}: bad value .*{why}"):
        TrainConfig(**{field: value})
    TrainConfig(**{field: 0.5 if isinstance(value, float) else 0})  # in range


@pytest.mark.parametrize("value", ["False", "false", 0, 1, "maybe", None])
def test_rtd3_fair_must_be_a_bool(value):
    """R-TD3's ``fair`` switches the constraint: ``--set fair=False`` (a string) was truthy
    and trained the constrained R-TD3 (``fair=0`` the unconstrained TD3), exit 0."""
    with pytest.raises(ConfigError, match="^fair: bad value .*true .* or false"):
        P.RTD3Config(fair=value)
    assert P.RTD3Config(fair=False).fair is False


def test_cli_rtd3_fair_capitalised_is_refused(tmp_path):
    r = run_cmd([sys.executable, "-m", "causalfair", "train", "--system", "replicator-1",
                 "--algo", "r-td3", "--iterations", "1", "--set", "fair=False",
                 "--out", tmp_path / "o"], expect=2)
    assert "fair: bad value" in r.stderr and not (tmp_path / "o" / "checkpoint.npz").exists()


@pytest.mark.parametrize("algo,field", [("r-td3", "steps"), ("l-ucbfair", "episodes")])
def test_population_iterations_and_their_field_given_together_are_refused(algo, field):
    """``--iterations 2 --set steps=5`` (train and sweep, through make_config): iterations
    won silently and the --set value was dropped, exit 0."""
    with pytest.raises(ConfigError, match=f"^{field}: given as a field .*iterations"):
        P.make_config(algo, 0, 15, 2, {field: 30})
    assert getattr(P.make_config(algo, 0, 15, None, {field: 30}), field) == 30


@pytest.mark.parametrize("cmd", ["train", "sweep"])
def test_cli_population_iterations_with_steps_is_refused(tmp_path, cmd):
    seeds = ["--seeds", "0"] if cmd == "sweep" else []
    r = run_cmd([sys.executable, "-m", "causalfair", cmd, "--system", "replicator-1", "--algo",
                 "r-td3", *seeds, "--iterations", "1", "--set", "steps=5",
                 "--out", tmp_path / "o"], expect=2)
    assert "steps: given as a field" in r.stderr and not (tmp_path / "o").exists()

"""hunt_a F4: a negative fairness weight (which rewards the disparity) is refused on the
command line as the spec's [retrain] betas refuses it (one check:
causalfair._validation.check_weight, also TrainConfig's), and a weight given to an
algorithm whose objective ignores it is refused, as the flags a population agent does not
use are."""

from __future__ import annotations

import pytest

from causalfair.errors import ConfigError, SpecError

FAST = ["--iterations", "1", "--horizon", "2", "--individuals", "16", "--no-progress"]


@pytest.mark.parametrize("algo, flags, said", [
    ("ppo-cb", ["--beta-lambda", "-5"], "--beta-lambda: bad value -5.0; give a finite number >= 0"),
    ("ppo-c", ["--beta-c", "-1"], "--beta-c: bad value -1.0; give a finite number >= 0"),
    ("ppo-c", ["--set", "beta_c=-3"], "beta_c: bad value -3; give a finite number >= 0"),
    ("ppo", ["--beta-c", "5"], "--beta-c: not used by --algo ppo (its objective has no such "
                               "penalty); it weighs the penalty of ppo-c and ppo-cb"),
    ("ppo-c", ["--beta-lambda", "1"], "--beta-lambda: not used by --algo ppo-c"),
    ("ppo", ["--set", "beta_lambda=1"], "--set beta_lambda: not used by --algo ppo"),
])
def test_train_refuses_a_negative_or_unused_weight(tmp_path, cli_here, algo, flags, said):
    proc = cli_here("train", "--algo", algo, *flags, *FAST, "--out", tmp_path / "run",
                    cwd=tmp_path)
    assert proc.returncode == 2, proc
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"causalfair train: error: {said}"), line
    assert not (tmp_path / "run").exists()


def test_sweep_refuses_a_negative_weight_and_one_no_algorithm_uses(tmp_path, cli_here):
    base = ["sweep", "--seeds", "0", "--iterations", "1", "--out", tmp_path / "sw"]
    proc = cli_here(*base, "--algo", "ppo-c", "--set", "beta_c=-3", cwd=tmp_path)
    assert proc.returncode == 2 and "beta_c: bad value -3; give a finite" in proc.stderr
    proc = cli_here(*base, "--algo", "ppo", "--set", "beta_c=3", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert "'beta_c' weighs a penalty that none of this sweep's algorithms (ppo)" in proc.stderr
    assert not (tmp_path / "sw").exists()


def test_the_config_and_the_spec_share_the_check(tmp_path):
    from causalfair.audit.spec import load_spec
    from causalfair.train import TrainConfig

    for field in ("beta_c", "beta_lambda", "beta_kl"):
        with pytest.raises(ConfigError, match=f"^{field}: bad value -1; give a finite number"):
            TrainConfig(**{field: -1})
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\n[system]\nid = "lending-1"\n[thresholds]\nabs_C = 0.1\n'
                    '[retrain]\nalgo = "ppo-cb"\nbetas = { C = -1.0 }\n')
    with pytest.raises(SpecError, match=r"s\.toml: \[retrain\] betas C: bad value -1\.0; give "
                                        "a finite number >= 0"):
        load_spec(spec)


def test_train_names_the_flag_not_the_field(tmp_path, cli_here):
    # before: "n_individuals: bad value 2; ..." (hunt_a F9c)
    proc = cli_here("train", "--individuals", "2", "--out", tmp_path / "run", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith("causalfair train: error: --individuals: bad value 2;")

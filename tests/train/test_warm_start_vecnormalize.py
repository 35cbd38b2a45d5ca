"""Training never starts from a stable-baselines3 checkpoint kept with a
``vecnormalize.pkl``: its network reads normalized observations and causalfair trains on
raw ones (``policies.vecnormalize.refuse_warm_start``, from Python and the command line)."""

from __future__ import annotations

import pytest

from causalfair.errors import PolicyError
from causalfair.train import TrainConfig, train

from ..conftest import one_line_error, run_cli


@pytest.fixture
def zip_with_stats(tmp_path):
    (tmp_path / "vecnormalize.pkl").write_bytes(b"not read")
    ck = tmp_path / "ppo.zip"
    ck.write_bytes(b"not read either: refused before it is opened")
    return ck


def test_train_refuses_a_warm_start_from_a_normalized_policy(zip_with_stats, tmp_path):
    with pytest.raises(PolicyError, match=r"^init_checkpoint .*ppo\.zip: .*vecnormalize\.pkl "
                       r"next to the checkpoint: .*\(leave init_checkpoint out\)"):
        train(TrainConfig(iterations=1, n_individuals=8, horizon=2), out=tmp_path / "run",
              init_checkpoint=zip_with_stats)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("algo", ["ppo", "exact"])
def test_the_command_line_refuses_it_in_one_line(zip_with_stats, tmp_path, algo):
    err = one_line_error(run_cli("train", "--algo", algo, "--init-checkpoint", zip_with_stats,
                                 "--out", tmp_path / "run"))
    assert "--init-checkpoint" in err and "normalized observations" in err, err
    assert not (tmp_path / "run").exists()

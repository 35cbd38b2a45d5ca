"""h8bound F6: training's size is refused against the work limit before it starts.
`causalfair train --iterations 100000000000` was accepted and ran (its progress line said
about 4e10 s left), and a sweep of such runs too; TrainConfig, which every door builds
(train, sweep, gate --retrain, causalfair.train), checked memory only."""

from __future__ import annotations

import pytest

from causalfair.errors import ResourceLimitError
from causalfair.train.config import TrainConfig
from tests.conftest import one_line_error, run_cli


def test_iterations_over_the_work_limit_are_refused():
    TrainConfig(iterations=100, horizon=20)  # 1e6 unit-steps: fine
    with pytest.raises(ResourceLimitError, match=r"training of 100000000000 iterations x 512 "
                       r"individuals x 20 epochs: 1.02e\+15 unit-steps.*over the limit of "
                       r"1e\+12; lower iterations \(--iterations\)"):
        TrainConfig(iterations=10**11, horizon=20)
    with pytest.raises(ResourceLimitError, match="environments x 64 steps"):
        TrainConfig(iterations=10**11, env="population")


def test_the_limit_is_the_work_limit(monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_UNIT_STEPS", "100000")
    TrainConfig(iterations=10, n_individuals=500, horizon=20)  # 100,000
    with pytest.raises(ResourceLimitError):
        TrainConfig(iterations=11, n_individuals=500, horizon=20)


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_every_door_refuses_before_writing(tmp_path, command):
    out = tmp_path / "out"
    extra = ["--algo", "ppo", "--seeds", "0-1"] if command == "sweep" else []
    err = one_line_error(run_cli(command, "--setting" if command == "train" else "--system",
                                 "lending-1", "--iterations", "100000000000", "--out",
                                 str(out), *extra, expect=2, timeout=120))
    assert "100000000000 iterations x 512 individuals" in err
    assert not out.exists()

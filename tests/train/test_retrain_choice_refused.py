"""A PPO repair on a system whose replicas make one choice each is refused before
anything is audited (the trainer's own check, causalfair.train.lagrangian), not after the
first audit when the trainer starts."""

from __future__ import annotations

import pytest

import causalfair as cf
from causalfair.audit import load_spec
from causalfair.audit.retrain import check_retrain
from causalfair.errors import ConfigError, SpecError
from causalfair.train import TrainConfig
from causalfair.train.generic import SystemTrainer
from causalfair.train.lagrangian import check_constraints_supported

SPEC = '''name = "att"
[system]
id = "infectious-1"
[policy]
checkpoint = "ck.pt"
[thresholds]
abs_C = 0.1
[retrain]
algo = "ppo-cb"
'''


def test_the_gate_refuses_before_auditing(tmp_path):
    (tmp_path / "ck.pt").write_bytes(b"")  # only the spec is read
    (tmp_path / "s.toml").write_text(SPEC)
    with pytest.raises(SpecError) as info:
        check_retrain(load_spec(tmp_path / "s.toml"))
    msg = str(info.value)
    assert "\n" not in msg and "one choice per replica" in msg and "'ppo-cb'" in msg, msg


def test_the_trainer_and_the_gate_share_one_check():
    system = cf.systems.make("infectious-1")
    with pytest.raises(ConfigError, match="one choice per replica"):
        check_constraints_supported(system)
    with pytest.raises(ConfigError, match="one choice per replica"):
        SystemTrainer(system, TrainConfig(algo="ppo-c", iterations=1,
                                          constraints=("abs_C<=0.1",)))
    check_constraints_supported(cf.systems.make("lending-1"))  # independent units: fine

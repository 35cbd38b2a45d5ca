"""The checkpoint loader, the generic trainer and the logs audit are split into modules of
their own (the format and its checks, SB3 files, population files; the input encoding, the
fairness terms, the run folder; the result, the fit and the bootstrap); the names the docs
give by their old module path stay importable there and are the same objects."""

from __future__ import annotations

import causalfair as cf
from causalfair import logs
from causalfair.logs import audit, bootstrap, result
from causalfair.policies import (
    checkpoint,
    checkpoint_format,
    checkpoint_population,
    checkpoint_sb3,
    sb3,
)
from causalfair.train import encoding, fair_terms, generic, system_run


def test_documented_paths_name_the_moved_objects():
    # docs/simulators.md: causalfair.policies.checkpoint.sb3_network
    assert checkpoint.sb3_network is checkpoint_sb3.sb3_network is sb3.sb3_network
    # docs/training.md: causalfair.train.generic.warm_encoding / selection_seed / evaluation_seed
    assert generic.warm_encoding is encoding.warm_encoding
    assert generic.selection_seed(3) >= 2**64 and generic.evaluation_seed(3) >= 2**64
    # the package faces: cf.logs.LogAudit, cf.logs.bootstrap_logs, cf.load_checkpoint
    assert logs.LogAudit is result.LogAudit and logs.bootstrap_logs is bootstrap.bootstrap_logs
    assert cf.load_checkpoint is checkpoint.load_checkpoint
    assert {"LogAudit", "bootstrap_logs"} <= set(logs.__all__)


def test_one_home_per_name():
    # the loader and the format share one version and one validation
    assert checkpoint.CHECKPOINT_VERSION is checkpoint_format.CHECKPOINT_VERSION
    assert checkpoint.validate_meta is checkpoint_format.validate_meta
    assert checkpoint.population_policy is checkpoint_population.population_policy
    # the trainer carries the fairness terms; the run drives that trainer
    assert issubclass(generic.SystemTrainer, fair_terms.FairnessTerms)
    assert system_run.SystemTrainer is generic.SystemTrainer
    assert not hasattr(generic, "train_system")
    # audit_logs fits with the bootstrap's fit and returns the result module's type
    assert audit.fit_model is bootstrap.fit_model and audit.LogAudit is result.LogAudit

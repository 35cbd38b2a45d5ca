"""Training picks Lambda's eps by the rule every door uses (engines.benefit.eps_for): the
number the system declares, else "auto" fixed once for the run, so the PPO-Cb penalty, a
Lambda constraint and the trainer's audits agree with the gate's audit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.engines.benefit import model_eps
from causalfair.train import TrainConfig
from causalfair.train.generic import SystemTrainer
from tests.conftest import clinic_module

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def clinic():
    with clinic_module("clinic_eps") as mod:
        yield mod.make_clinic()


def _cfg(**kw):
    return TrainConfig(iterations=1, n_individuals=16, horizon=3, **kw)


def test_a_declared_eps_is_used():
    tr = SystemTrainer(cf.systems.make("lending-1"), _cfg(algo="ppo-cb", system="lending-1"))
    assert tr.eps == 0.1


def test_an_undeclared_tabular_system_gets_the_auto_eps_of_its_model(clinic):
    assert clinic.gain.lambda_eps is None and clinic.tabular.lambda_eps is None
    tr = SystemTrainer(clinic, _cfg(algo="ppo-cb"))
    auto = model_eps("auto", clinic.tabular)[0]
    assert tr.eps == auto and auto != 0.1  # the old default was 0.1 whatever the units
    assert SystemTrainer(clinic, _cfg(algo="ppo-cb", lambda_eps=0.3)).eps == 0.3


def test_a_simulator_only_system_fixes_auto_from_its_first_benefits(clinic):
    sim_only = dataclasses.replace(clinic, tabular=None, id="clinic-sim")
    tr = SystemTrainer(sim_only, _cfg(algo="ppo-cb", audit_n=50, eval_every=1))
    assert tr.eps is None  # nothing seen yet
    tr.step()
    first = tr.eps
    assert isinstance(first, float) and np.isfinite(first) and first > 0
    tr.step()
    assert tr.eps == first  # one number for the run

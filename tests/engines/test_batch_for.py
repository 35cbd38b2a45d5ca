"""The batch a Monte Carlo run uses (``engines._mc_base.batch_for``): the caller's
``batch_size``, else the simulator's own ``batch_size`` attribute, else the default; a
Gymnasium system declares 256, and Lambda's rollout by forks is then split into batches
(one task each) too."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.backends import make_backend
from causalfair.engines import benefit_forks
from causalfair.engines.montecarlo import decompose_mc
from causalfair.errors import SimulatorContractError
from causalfair.policies.adapters import callable_policy
from causalfair.policies.core import TablePolicy
from causalfair.systems.lending.settings import LendingSimulator, lending_setting

from ..systems.gym_students import Student

LOGISTIC = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                           name="logistic")


class Declares(LendingSimulator):
    batch_size = 3


def _sizes(monkeypatch, cls) -> list[int]:
    seen: list[int] = []
    real = cls.reset

    def spy(self, n, group, rng):
        seen.append(int(n))
        return real(self, n, group, rng)

    monkeypatch.setattr(cls, "reset", spy)
    return seen


def test_a_declared_batch_size_is_the_batch_when_the_caller_gives_none(monkeypatch):
    lm = lending_setting("lending-1")
    policy = TablePolicy(np.full((lm.tabular.n_groups, lm.tabular.n_levels), 0.6))
    seen = _sizes(monkeypatch, LendingSimulator)
    own = decompose_mc(Declares(lm), policy, 4, n=7, seed=2, check=False)
    assert seen == [3, 3, 1] * 2  # per group: batches of 3, 3 and 1
    same = decompose_mc(LendingSimulator(lm), policy, 4, n=7, seed=2, check=False, batch_size=3)
    assert own.estimates() == same.estimates() and own.se == same.se
    seen.clear()
    decompose_mc(Declares(lm), policy, 4, n=7, seed=2, check=False, batch_size=5)
    assert seen == [5, 2] * 2  # the caller's batch_size wins


@pytest.mark.parametrize("bad", [0, -4, 2.5, "8", True])
def test_a_bad_declared_batch_size_is_refused_naming_it(bad):
    lm = lending_setting("lending-1")
    sim = LendingSimulator(lm)
    sim.batch_size = bad
    policy = TablePolicy(np.full((lm.tabular.n_groups, lm.tabular.n_levels), 0.6))
    with pytest.raises(SimulatorContractError, match=r"LendingSimulator: batch_size must be an "
                       r"integer >= 1 .* got " + repr(bad).replace(".", r"\.")):
        decompose_mc(sim, policy, 4, n=7, check=False)


def test_a_gym_system_runs_in_batches_of_256_by_default():
    system = cf.systems.from_gym(Student, groups=["a", "b"], horizon=2)
    own = decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2)
    same = decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2, batch_size=256)
    other = decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2, batch_size=300)
    assert own.estimates() == same.estimates() and own.se == same.se
    assert own.estimates() != other.estimates()  # the batches key the streams


def test_lambda_rollout_of_a_declared_batch_size_runs_in_batches(monkeypatch):
    """Each individual of a group is visited once per epoch under its own number (the
    bootstrap resamples individuals), batches have the declared size, and worker
    processes give the serial numbers with one task per batch."""
    system = cf.systems.from_gym(Student, groups=["a", "b"], horizon=3, batch_size=5)
    seen = _sizes(monkeypatch, type(system.simulator))
    serial = benefit_forks.rollout_units(system, LOGISTIC, 3, 12, 7, "logistic", jobs=1)
    assert seen == [5, 5, 2] * 2
    for units in serial[4]:
        assert np.array_equal(np.bincount(units), np.full(12, 3))
    tasks = []
    real = benefit_forks.fold_tasks

    def spy(backend, fn, items, *args, **kw):
        items = list(items)
        tasks.append(len(items))
        return real(backend, fn, items, *args, **kw)

    monkeypatch.setattr(benefit_forks, "fold_tasks", spy)
    procs = benefit_forks.rollout_units(system, LOGISTIC, 3, 12, 7, "logistic",
                                        backend=make_backend(jobs=2, backend="process"))
    assert tasks == [6]
    for a, b in zip(serial, procs, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


class HeavyStudent(Student):
    """A student holding 2 MB of its own (a buffer its steps could change)."""

    def reset(self, *, seed=None, options=None):
        self.buffer = np.zeros(250_000)
        return super().reset(seed=seed, options=options)


def test_a_gym_system_takes_its_batch_size_from_every_door():
    from causalfair.audit.spec import load_spec
    from causalfair.errors import SystemError_
    from causalfair.systems import make

    system = cf.systems.from_gym(Student, groups=["a", "b"], horizon=2, batch_size=100)
    assert system.simulator.batch_size == 100 and system.params["batch_size"] == 100
    own = decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2)
    same = decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2, batch_size=100)
    assert own.estimates() == same.estimates()
    spec = load_spec({"name": "x", "system": {"gym": "m:f", "groups": ["a", "b"],
                                              "batch_size": 64}})
    assert spec.system_params["batch_size"] == 64
    made = make("gym", env=f"{Student.__module__}:Student", groups=["a", "b"], batch_size=32)
    assert made.simulator.batch_size == 32
    for bad in (0, 2.5, True):
        with pytest.raises(SystemError_, match=r"from_gym batch_size: bad value"):
            cf.systems.from_gym(Student, groups=["a", "b"], batch_size=bad)
    from causalfair.engines._mc_base import batch_for
    from causalfair.systems.gym.door import GymSimulator

    with pytest.raises(SimulatorContractError, match=r"got 2\.5"):  # not truncated to 2
        batch_for(GymSimulator(Student, groups=["a", "b"], batch_size=2.5), None)


def test_a_batch_of_envs_over_the_memory_limit_is_refused_naming_the_batch_size(monkeypatch):
    """256 envs of 2 MB each, three per individual, against a 1 GB limit: refused before the
    batch is made, naming every door's batch_size; 32 of them pass."""
    from causalfair.errors import ResourceLimitError

    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", str(10**9))
    system = cf.systems.from_gym(HeavyStudent, groups=["a", "b"], horizon=2)
    made = []
    real = HeavyStudent.reset

    def counted(self, **kw):
        made.append(1)
        return real(self, **kw)

    monkeypatch.setattr(HeavyStudent, "reset", counted)
    with pytest.raises(ResourceLimitError, match=r"gym env HeavyStudent: a batch of 256 "
                       r"individuals, about 1\.9 MiB an env: needs about 1\.4 GiB .*"
                       r"from_gym\(batch_size=\.\.\.\), \[system\] batch_size in a spec, "
                       r"--param batch_size=N; now 256"):
        decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2, check=False)
    assert len(made) == 1  # refused after one env, before the batch
    small = cf.systems.from_gym(HeavyStudent, groups=["a", "b"], horizon=2, batch_size=32)
    assert decompose_mc(small, LOGISTIC, n=40, seed=1, benefit_n=2, check=False).n == 40


def test_lambda_t_forks_run_in_the_declared_batches(monkeypatch):
    """Lambda_T's forks to the horizon run in the batches a simulator declares, each unit
    once per epoch under its own number, as Lambda's rollout does."""
    from causalfair.engines import benefit_horizon

    system = cf.systems.from_gym(Student, groups=["a", "b"], horizon=3, batch_size=5)
    seen = _sizes(monkeypatch, type(system.simulator))
    out = benefit_horizon._rollout_horizon(system, LOGISTIC, 3, 12, 7, "logistic")
    assert seen == [5, 5, 2] * 2
    for units in out[4]:
        assert np.array_equal(np.bincount(units), np.full(12, 3))
    lam = cf.benefit_fairness(system, LOGISTIC, n=12, seed=7, horizon_benefit=True)
    assert lam.notion == "Lambda_T" and np.isfinite(lam.Lambda)


class _Locked:
    """A policy holding a lock: it cannot be pickled."""

    name = "locked"

    def __init__(self):
        import threading

        self.lock = threading.Lock()

    def prob_d1(self, obs):
        return np.full(len(obs.features), 0.5)


def test_a_long_run_of_a_gym_system_goes_to_worker_processes_by_default(monkeypatch):
    """jobs="auto" (or N > 1) on a simulator that cannot share threads: worker processes
    from PROCESS_WORK unit-steps on, this thread below it, and the numbers of one thread
    either way; an object that cannot be pickled keeps the run here."""
    from causalfair.backends import ProcessBackend, ThreadBackend
    from causalfair.engines import _mc_base

    system = cf.systems.from_gym(Student, groups=["a", "b"], horizon=2)
    sim = system.simulator
    assert isinstance(_mc_base.engine_backend(None, 2, sim, LOGISTIC, work=10**6),
                      ProcessBackend)
    small = _mc_base.engine_backend(None, 2, sim, LOGISTIC, work=10**6 - 1)
    assert isinstance(small, ThreadBackend) and small.jobs == 1
    assert _mc_base.engine_backend(None, 2, sim, _Locked(), work=10**6).jobs == 1
    monkeypatch.setattr(_mc_base, "PROCESS_WORK", 2 * 300 * 2)  # this run: processes
    seen = []
    real = _mc_base.fold_tasks
    monkeypatch.setattr("causalfair.engines.montecarlo.fold_tasks",
                        lambda backend, *a, **k: seen.append(type(backend).__name__)
                        or real(backend, *a, **k))
    procs = decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2, jobs=2)
    assert seen == ["ProcessBackend"]
    serial = decompose_mc(system, LOGISTIC, n=300, seed=1, benefit_n=2, jobs=1)
    assert procs.estimates() == serial.estimates() and procs.se == serial.se

"""Lambda's rollouts by forks on worker processes: with a process backend, each group's
rollout is a task (also for a simulator that is not thread-safe, such as a Gymnasium
env's), and the numbers are those of one process, bit for bit."""

from __future__ import annotations

import numpy as np

import causalfair as cf
from causalfair.backends import make_backend
from causalfair.engines import benefit_forks
from causalfair.engines.montecarlo import decompose_mc
from causalfair.policies.adapters import callable_policy

from .gym_students import Student

POLICY = callable_policy(lambda f: 1.0 / (1.0 + np.exp(-2.0 * f[:, 0])), inputs="features",
                         name="logistic")


def test_lambda_rollouts_on_two_processes_are_the_serial_numbers(monkeypatch):
    system = cf.systems.from_gym(Student, groups=["a", "b"], horizon=3)
    serial = decompose_mc(system, POLICY, n=300, seed=4, benefit_n=200)
    seen = []
    real = benefit_forks.fold_tasks

    def spy(backend, *args, **kw):
        seen.append(backend)
        return real(backend, *args, **kw)

    monkeypatch.setattr(benefit_forks, "fold_tasks", spy)
    procs = decompose_mc(system, POLICY, n=300, seed=4, benefit_n=200,
                         backend=make_backend(jobs=2, backend="process"))
    assert [type(b).__name__ for b in seen] == ["ProcessBackend"]  # the rollout's two tasks
    assert procs.estimates() == serial.estimates() and procs.se == serial.se
    assert (procs.Lambda, procs.Lambda_ci) == (serial.Lambda, serial.Lambda_ci)
    assert np.array_equal(procs.benefit.delta, serial.benefit.delta)

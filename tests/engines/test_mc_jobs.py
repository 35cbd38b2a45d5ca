"""The Monte Carlo engine and benefit forks on several threads: the same numbers, bit for
bit, for 1, 2 and ``auto`` jobs (keyed streams, results folded in task order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from causalfair import backends
from causalfair.backends import available_cores, resolve_jobs
from causalfair.engines._mc_base import engine_backend
from causalfair.engines.benefit_mc import benefit_fairness_mc
from causalfair.engines.montecarlo import compare_mc, decompose_mc
from causalfair.errors import InputError
from causalfair.policies.resolver import resolve
from causalfair.systems.registry import make

CKPT = Path(__file__).resolve().parents[2] / "causalfair/examples/checkpoints/lending-1-ppo.pt"


@pytest.fixture(scope="module")
def system():
    return make("lending-1")


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(backends, "available_cores", lambda: 2)


def _numbers(dec):
    return (dec.V.tolist(), dec.V_ps.tolist(), dec.V_0.tolist(), dec.steps.tolist(),
            np.asarray(dec.utility).tolist(), dec.se, dec.Lambda, dec.Lambda_ci)


def test_decompose_same_numbers_for_1_2_and_auto_jobs(system, two_cores):
    # the checkpoint's network untabulated: a numpy forward on every individual-step
    pol = resolve(str(CKPT), system).policy
    runs = [decompose_mc(system, pol, 5, n=1500, seed=4, batch_size=300, tabulate=False,
                         benefit_n=300, jobs=j) for j in (1, 2, "auto")]
    assert _numbers(runs[0]) == _numbers(runs[1]) == _numbers(runs[2])


def test_paired_comparison_same_numbers_for_1_and_2_jobs(system):
    a, b = (compare_mc(system, "threshold:0.5", "blind:0.5", 4, n=2000, seed=2,
                       batch_size=300, jobs=j) for j in (1, 2))
    assert a == b


def test_benefit_forks_same_numbers_for_1_2_and_auto_jobs(system, two_cores):
    runs = [benefit_fairness_mc(system, resolve("threshold:0.5", system).policy,
                                5, n=1500, seed=3, n_boot=30, jobs=j) for j in (1, 2, "auto")]
    for r in runs[1:]:
        assert r.Lambda == runs[0].Lambda and r.ci == runs[0].ci and r.se == runs[0].se
        assert np.array_equal(r.delta, runs[0].delta)


def test_threads_are_used_by_default_on_several_cores(two_cores):
    assert engine_backend(None, "auto").jobs == 2
    assert engine_backend(None, 1).jobs == 1
    assert engine_backend("serial", 2) == "serial"


class Stateful:
    name = "stateful"

    def start_batch(self, n, group):
        self.seen = np.zeros(n)

    def prob_d1(self, obs):
        return np.full(len(obs), 0.5)


class Unsafe:
    thread_safe = False


def test_stateful_or_unsafe_objects_run_serially(two_cores):
    assert engine_backend(None, 2, Stateful()).jobs == 1
    assert engine_backend(None, 2, Unsafe()).jobs == 1
    assert engine_backend(None, 2, object()).jobs == 2


def test_available_cores_honours_affinity_quota_and_caps(monkeypatch):
    monkeypatch.setattr(backends.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(backends, "_cgroup_cpus", lambda: None)
    monkeypatch.setattr(backends, "_CAPS_AT_IMPORT", {})
    assert available_cores() == 6
    monkeypatch.setattr(backends, "_cgroup_cpus", lambda: 2.5)  # cpu.max 250000 100000
    assert available_cores() == 3
    monkeypatch.setattr(backends, "_CAPS_AT_IMPORT", {"OMP_NUM_THREADS": "2"})
    assert available_cores() == 2
    monkeypatch.setattr(backends, "_CAPS_AT_IMPORT", {"CAUSALFAIR_JOBS": "1",
                                                      "OMP_NUM_THREADS": "8"})
    assert available_cores() == 1


def test_cgroup_quota_is_read(monkeypatch, tmp_path):
    real_open = open
    files = {"/sys/fs/cgroup/cpu.max": "150000 100000\n"}

    def fake_open(path, *a, **k):
        if str(path) in files:
            p = tmp_path / "f"
            p.write_text(files[str(path)])
            return real_open(p, *a, **k)
        if str(path).startswith("/sys/fs/cgroup"):
            raise OSError(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    assert backends._cgroup_cpus() == 1.5
    files["/sys/fs/cgroup/cpu.max"] = "max 100000\n"
    assert backends._cgroup_cpus() is None


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5, True])
def test_bad_jobs_is_one_line_input_error(bad):
    with pytest.raises(InputError, match=r"^jobs: bad value .*'auto'"):
        resolve_jobs(bad)
    assert resolve_jobs("3") == 3


def test_coupled_units_same_numbers_for_1_and_2_jobs():
    system = make("attention-1")  # 5 sites sharing a budget: replicas of coupled units
    a, b = (decompose_mc(system, "action:4", None, n=400, seed=0, batch_size=100,
                         benefit_n=50, jobs=j) for j in (1, 2))
    assert _numbers(a) == _numbers(b) and a.notions == b.notions

"""The same seed gives the same numbers (docs/limits.md, "Reproducibility"): a few cells of
the door x condition matrix kept as tests (hash seed, working directory, threads, jobs,
a second run in the same process), and the CPU kernels audit.json records so
that an audit can be re-run bit for bit on another machine."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.result import kernels, provenance
from causalfair.engines.montecarlo import decompose_mc
from tests.conftest import describe, run_cli, run_cmd

SIM = '''
from dataclasses import dataclass
import numpy as np
import causalfair as cf


@dataclass
class S:
    x: np.ndarray
    group: np.ndarray


class Drift:
    n_groups = 2
    group_names = ("north", "south")
    feature_names = ("skill", "debt", "age")

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).copy()
        x = rng.standard_normal((n, 3)).astype(np.float32) + (0.5 * (1 - g))[:, None]
        return S(x=x, group=g)

    def observe(self, s):
        return cf.Observation(group=s.group, features=s.x)

    def draw_noise(self, n, rng):
        return rng.standard_normal((n, 3), dtype=np.float32)

    def step(self, s, d, noise):
        x = 0.9 * s.x + 0.1 * (np.asarray(d, dtype=np.float32) - 0.5)[:, None] + 0.2 * noise
        gain = (x[:, 0] - s.x[:, 0]).astype(np.float64)
        return cf.StepResult(state=S(x=x, group=s.group), reward=gain, gain=gain)


def make():
    return Drift()


class NumpyMLP:
    """An MLP over the features in numpy (a user's own policy object)."""

    def __init__(self):
        r = np.random.default_rng(7)
        self.w1, self.w2 = r.standard_normal((3, 16)), r.standard_normal(16)

    def prob_d1(self, obs):
        h = np.tanh(np.asarray(obs.features, dtype=np.float64) @ self.w1)
        return 1.0 / (1.0 + np.exp(-(h @ self.w2)))


def np_mlp():
    return NumpyMLP()


def mlp():
    import torch
    g = torch.Generator().manual_seed(7)
    net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return net
'''

# what records the run rather than its numbers (docs/limits.md, "Reproducibility")
RUN_FIELDS = {"seconds", "wall_s", "provenance"}


def _numbers(doc):
    if isinstance(doc, dict):
        return {k: _numbers(v) for k, v in doc.items() if k not in RUN_FIELDS}
    if isinstance(doc, list):
        return [_numbers(v) for v in doc]
    return doc


def _avx2() -> bool:
    try:
        return " avx2 " in f" {Path('/proc/cpuinfo').read_text()} ".replace("\n", " ")
    except OSError:
        return False


def test_provenance_records_the_blas_kernel_that_rounds_the_numbers():
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not blas:
        pytest.skip("numpy's BLAS is not visible to threadpoolctl here")
    got = provenance()["kernels"]
    assert got == kernels()
    assert got["blas"].split()[0] in {i["internal_api"] for i in blas}, got
    assert got["blas"].split()[-1] in {str(i.get("architecture")) for i in blas}, got
    # the field is plain JSON (audit.json holds it as written)
    assert json.loads(json.dumps(got)) == got


@pytest.mark.skipif(not _avx2(), reason="the pinned AVX2 kernel needs a CPU with AVX2")
def test_another_blas_kernel_is_recorded_and_moves_only_the_last_bits(tmp_path):
    """The documented exception: OpenBLAS's kernel (pinned by OPENBLAS_CORETYPE) is
    recorded, and the exact audit of the example checkpoint moves by at most a few units
    in the last place on it."""
    from threadpoolctl import threadpool_info

    if not any(i.get("internal_api") == "openblas" for i in threadpool_info()):
        pytest.skip("numpy does not use OpenBLAS here")
    ck = Path(cf.__file__).parent / "examples" / "checkpoints" / "lending-1-ppo.pt"
    code = ("import json, causalfair as cf; from causalfair.audit.result import kernels; "
            f"d = cf.decompose(cf.systems.make('lending-1'), {str(ck)!r}); "
            "print(json.dumps({'kernels': kernels(), 'est': d.estimates()}))")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_CORETYPE": "Haswell"}
    proc = run_cmd([sys.executable, "-c", code], expect=0, env=env, cwd=tmp_path)
    other = json.loads(proc.stdout)
    assert other["kernels"]["blas"].endswith(" Haswell"), describe(proc, 0)
    here = cf.decompose(cf.systems.make("lending-1"), str(ck)).estimates()
    assert set(here) == set(other["est"])
    for k, v in here.items():
        w = other["est"][k]
        if isinstance(v, float) and math.isfinite(v):
            assert abs(v - w) <= 1e-14 * max(1.0, abs(v)), (k, v, w)


def test_hash_seed_working_directory_threads_and_jobs_change_no_number(tmp_path):
    """A user's module:make system observed through features, its own policy object, Lambda by
    forks in feature bins with a bootstrap interval: PYTHONHASHSEED 1 in one folder with
    one thread and one job, against PYTHONHASHSEED 2 in another folder with --threads 2
    and the engine's tasks on threads (``--jobs auto`` under OMP_NUM_THREADS=2)."""
    (tmp_path / "drift_sim.py").write_text(SIM, encoding="utf-8")
    args = ["decompose", "--system", "drift_sim:make", "--search-path", tmp_path,
            "--policy", "drift_sim:np_mlp", "--engine", "mc", "--n", "1000", "--horizon", "3",
            "--benefit-bins", "3", "--seed", "5", "--json"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    base.pop("CAUSALFAIR_JOBS", None)
    one = run_cli(*args, "--jobs", "1", expect=0, cwd=tmp_path / "a",
                  env={**base, "PYTHONHASHSEED": "1", "OMP_NUM_THREADS": "1"})
    two = run_cli("--threads", "2", *args, "--jobs", "auto", expect=0,
                  cwd=tmp_path / "b", env={**base, "PYTHONHASHSEED": "2",
                                            "OMP_NUM_THREADS": "2"})
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a["Lambda_ci"][0] < a["Lambda_ci"][1], describe(one, 0)  # a bootstrap ran
    assert _numbers(a) == _numbers(b), describe(two, 0)


def test_a_second_run_in_the_same_process_gives_the_same_numbers(tmp_path, monkeypatch):
    """Nothing left over from a first run (caches, tabulations, module-level state)
    changes a later one: run A, another audit, then A again."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "drift_sim2.py").write_text(SIM, encoding="utf-8")
    import drift_sim2

    system = cf.as_system(drift_sim2.make())
    policy = cf.as_policy(drift_sim2.mlp(), system)

    def run():
        d = decompose_mc(system, policy, 3, n=800, seed=2, jobs=1, benefit_bins=2)
        return d.to_dict()

    first = run()
    decompose_mc(cf.systems.make("lending-1"), "threshold:0.5", 5, n=500, seed=9, jobs=2)
    cf.decompose(cf.systems.make("lending-1"), "threshold:0.5")
    again = run()
    assert json.dumps(first, sort_keys=True, default=str) == json.dumps(
        again, sort_keys=True, default=str)
    assert np.isfinite(first["C"])

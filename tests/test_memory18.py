"""Where a large Monte Carlo audit's peak memory goes (session 18, Memory): Lambda by forks'
bootstrap (its Poisson weights and the (cell, unit) pairs of ``benefit_mc._replicates``) sets the
peak of a Monte Carlo decomposition, and no memory check counted those arrays together, so
a request under ``CAUSALFAIR_MAX_MEMORY`` could need far more (docs/scale.md, docs/limits.md).
:func:`causalfair.engines.benefit_forks.forks_bytes` estimates the stage's peak;
``decompose_mc`` checks it before the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

import causalfair as cf
from causalfair._limits import format_bytes
from causalfair.engines.benefit_forks import forks_bytes
from causalfair.errors import ResourceLimitError

#: Bytes per bootstrap weight in ``benefit_mc._cell_stats`` (uint8).
WEIGHT = 1


def _system(A=2, G=2, U=1, features=None, n_levels=None):
    return SimpleNamespace(n_actions=A, n_groups=G, units_per_replica=U, features=features,
                           n_levels=n_levels)


def test_forks_bytes_by_hand():
    # 2 feature columns, no levels, 2 actions, 2 groups; n = 1000 per group, T = 5:
    # 10,000 visits; a visit row 8 x (2 features + 2 benefits + 2 probabilities + unit) = 56
    # bytes, held twice: 1,120,000; a cell index per visit 80,000; one group's 5,000 visits
    # as 5 columns 200,000; weights WEIGHT x 2 groups x 10 replicates x 1000 and one group's
    # again (transposed); one group's (cell, unit) pairs: key, inverse and pairs, 3 x 8 x
    # 5,000 = 120,000
    sys2 = _system(features=("a", "b"))
    assert forks_bytes(sys2, 1000, 5, 10) == \
        1_120_000 + 80_000 + 200_000 + WEIGHT * 30_000 + 120_000
    # no bootstrap: no weights, no pairs
    assert forks_bytes(sys2, 1000, 5, 0) == 1_120_000 + 80_000 + 200_000
    # levels (7), no features, 3 actions: row 8 x (0 + 6 + 1 + 1) = 64 bytes, no cell index
    # (the levels are the cells); 1 + 2A = 7 columns
    lev = _system(A=3, n_levels=7)
    assert forks_bytes(lev, 100, 4, 2) == (
        2 * 800 * 64 + 8 * 400 * 7 + WEIGHT * 3 * 2 * 100 + 24 * 400)
    # coupled units (3 per world, 50 worlds): visits 150 x T, one weight per world (and
    # again transposed); the pairs of every unit's visits
    cpl = _system(U=3, features=("a",))
    visits = 150 * 2
    assert forks_bytes(cpl, 50, 2, 4) == (
        2 * visits * 8 * 6 + 8 * visits + 8 * visits * 5 + WEIGHT * 2 * 4 * 50 + 24 * visits)


def test_forks_bytes_pairs_grow_with_the_visits_not_the_cells():
    # the bootstrap's pairs are at most one per visit, whatever the number of cells (10
    # features in 4 bins: up to a million cells): no array of units x cells
    many = _system(features=tuple("abcdefghij"))
    n, T = 100_000, 3
    assert forks_bytes(many, n, T, 5) == forks_bytes(many, n, T, 0) + WEIGHT * 3 * 5 * n + \
        24 * n * T


@dataclass
class _State:
    x: np.ndarray
    group: np.ndarray
    t: int


class _Drift:
    """bench_mc_features' system, small: 4 continuous features, two actions."""

    n_groups = 2
    feature_names = ("f0", "f1", "f2", "f3")
    largest = 0  # the most units stepped at once (a probe steps a few)

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).copy()
        x = rng.standard_normal((n, 4)) + (0.5 * (1 - g))[:, None]
        return _State(x=x, group=g, t=0)

    def observe(self, s):
        return cf.Observation(group=s.group, features=s.x, t=s.t)

    def draw_noise(self, n, rng):
        return rng.standard_normal((n, 4))

    def step(self, s, d, noise):
        type(self).largest = max(type(self).largest, len(d))
        x = 0.9 * s.x + 0.1 * (np.asarray(d, dtype=float) - 0.5)[:, None] + 0.2 * noise
        gain = x[:, 0] - s.x[:, 0]
        return cf.StepResult(state=_State(x=x, group=s.group, t=s.t + 1), reward=gain, gain=gain)


def _policy(obs):
    return 1.0 / (1.0 + np.exp(-obs.features[:, 0]))


def test_decompose_mc_refuses_lambdas_forks_before_the_run(monkeypatch):
    # n = 16,000 per group, 3 bins: the stage needs about 121 MiB (forks_bytes); the checks
    # before forks_bytes counted its arrays one at a time, so under a 100M limit the audit
    # ran (at n = 12,000 then); now it is refused before the simulator steps a batch of the run
    system = cf.as_system(_Drift(), id="drift")
    need = forks_bytes(system, 16_000, 20, 200)
    assert need > 100 << 20
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "100M")
    _Drift.largest = 0
    with pytest.raises(ResourceLimitError, match=re.escape(
            "Lambda by forks of 16000 units per group over 20 epochs (200 bootstrap replicates)"
            f": needs about {format_bytes(need)} of memory, over the limit of 100.0 MiB")):
        cf.decompose_mc(system, cf.CallablePolicy(_policy), 20, n=16_000, seed=0, check=False,
                        benefit_bins=3, jobs=1)
    assert _Drift.largest <= 64
    # benefit_n is what the forks use: a smaller one fits
    dec = cf.decompose_mc(system, cf.CallablePolicy(_policy), 3, n=2_000, seed=0, check=False,
                          benefit_bins=3, jobs=1, benefit_n=500)
    assert dec.Lambda is not None


def test_exact_lambda_is_not_counted(monkeypatch):
    # Lambda from the tabular model: no forks, so a limit far below their estimate passes
    setting = cf.lending_setting("lending-1")
    system = cf.as_system(setting, id="lending-1")
    policy = cf.parse_policy("threshold:0.5", setting.tabular)
    assert forks_bytes(system, 20_000, 20, 200) > 1 << 20
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "1M")
    dec = cf.decompose_mc(system, policy, 20, n=2_000, seed=0, jobs=1, batch_size=1_000)
    assert dec.Lambda is not None and dec.benefit.ci is None  # exact: no interval


_MEASURE = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, os.environ["TESTS_DIR"])
    import causalfair as cf
    from causalfair.engines.benefit_forks import forks_bytes
    from test_memory18 import _Drift, _policy
    system = cf.as_system(_Drift(), id="drift")
    pol = cf.CallablePolicy(_policy)
    n = int(sys.argv[1])
    def peak():  # VmHWM: ru_maxrss starts at the parent's peak when the child was vforked
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmHWM:"))
    cf.decompose_mc(system, pol, 3, n=200, seed=1, check=False, jobs=1)  # warm: imports, caches
    before = peak()
    need = forks_bytes(system, n, 20, 200)
    os.environ["CAUSALFAIR_MAX_MEMORY"] = str(int(need * 1.01))  # just over the estimate
    cf.decompose_mc(system, pol, 20, n=n, seed=0, check=False, jobs=1, benefit_bins=3)
    after = peak()
    print(json.dumps({"need": need, "grew": after - before}))
""")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM: Linux")
def test_the_estimate_covers_the_measured_peak():
    # a fresh process; its peak RSS grows by the stage's arrays plus the allocator's slack
    # (measured with the (cell, unit) pairs: 36.7 MB of growth against an estimate of 79.6 MB
    # at n = 10,000 and 3 bins, 86.7 against 159.2 MB at n = 20,000; before them, with an
    # array of units x cells: 137 against 133 MB, docs/scale.md)
    env = dict(os.environ, TESTS_DIR=os.path.dirname(__file__), OMP_NUM_THREADS="1")
    env.pop("CAUSALFAIR_MAX_MEMORY", None)
    out = subprocess.run([sys.executable, "-c", _MEASURE, "10000"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["grew"] <= 1.3 * got["need"], got
    assert got["need"] <= 2.5 * got["grew"], got

"""Resource bounds (causalfair._limits): a request whose memory is over the limit is refused
before anything is allocated, with one line naming the limit and CAUSALFAIR_MAX_MEMORY,
which raises it."""

from __future__ import annotations

import os
import resource
import time

import pytest

from tests.conftest import SMALL_SPEC, one_line_error, run_cli


def cli(*args, cwd, limit_mb=None, env=None):
    def cap():  # pragma: no cover - runs in the child
        if limit_mb:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    e = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", **(env or {})}
    return run_cli(*args, cwd=cwd, preexec_fn=cap, env=e, timeout=300)


MEMORY_LIMIT = ("over the limit of", "CAUSALFAIR_MAX_MEMORY")


@pytest.mark.parametrize(("args", "expected"), [
    (["decompose", "--horizon", "1000000000"], MEMORY_LIMIT),
    (["decompose", "--levels", "1000000"], MEMORY_LIMIT),
    (["decompose", "--engine", "mc", "--horizon", "1000000000", "--n", "100"], MEMORY_LIMIT),
    # the graph's fixed epoch limit, which CAUSALFAIR_MAX_MEMORY would not lift, comes first
    (["graph", "--horizon", "100000000"], ("at most 5000 epochs", "--horizon")),
    (["frontier", "--horizon", "100000000", "--out", "f"], MEMORY_LIMIT),
])
def test_huge_requests_are_refused_before_allocating(tmp_path, args, expected):
    t0 = time.time()
    err = one_line_error(cli(*args, cwd=tmp_path, limit_mb=1500))
    assert all(part in err for part in expected), err
    if expected != MEMORY_LIMIT:
        assert "CAUSALFAIR_MAX_MEMORY" not in err, err
    assert time.time() - t0 < 30


def test_huge_horizon_in_a_spec_is_refused(tmp_path):
    p = tmp_path / "big.toml"
    p.write_text(SMALL_SPEC.replace("horizon = 5", "horizon = 1000000000"))
    err = one_line_error(cli("audit", p, "--no-report", cwd=tmp_path, limit_mb=1500))
    assert "exact engine over 1000000000 epochs" in err


def test_the_memory_limit_can_be_raised(tmp_path):
    err = one_line_error(cli("decompose", "--horizon", "5000000", cwd=tmp_path,
                             env={"CAUSALFAIR_MAX_MEMORY": "1M"}))
    assert "limit of 1.0 MiB" in err
    assert cli("decompose", "--horizon", "50", cwd=tmp_path,
               env={"CAUSALFAIR_MAX_MEMORY": "1G"}).returncode == 0

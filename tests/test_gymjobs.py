"""The Gymnasium door on worker processes (``--jobs``): the benchmark's ``--jobs`` part
(benchmarks/bench_gym.py) runs the audit on one core and on workers with estimates
identical to serial, and reports the scaling net of start-up as two measured times'
ratio."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def _bench():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gym.py"
    spec = importlib.util.spec_from_file_location("bench_gym_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_jobs_part_measures_the_scaling_net_of_start_up():
    t = _bench().jobs_part(300, 3, 2)
    assert t["identical"] is True, t
    assert t["speedup_net"] == pytest.approx(t["serial"] / t["started"]), t
    assert t["speedup"] == pytest.approx(t["serial"] / t["audit_new"]), t
    assert t["serial"] == pytest.approx(t["dec_serial"] + t["lam_serial"]), t
    assert t["started"] == pytest.approx(t["dec_started"] + t["lam_started"]), t
    assert min(t[k] for k in ("start", "dec_started", "lam_started", "audit_new")) > 0, t

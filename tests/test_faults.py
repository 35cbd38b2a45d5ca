"""glibc's malloc thresholds (causalfair._malloc, issue 28): set once per process by the
Monte Carlo engines' shared module (32 MiB mmap threshold, the ceiling of glibc's own
growth; 32 MiB trim threshold), nowhere else, never off glibc, never over the user's own settings or
with CAUSALFAIR_MALLOC=off; the memory an arena keeps stays under the trim threshold; and
the numbers are the same bit for bit with and without it, on one thread and two."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from causalfair import _malloc
from causalfair.errors import InputError
from tests.conftest import one_line_error, run_cli

ROOT = Path(__file__).resolve().parents[1]
GLIBC_VARS = (*_malloc.GLIBC_ENV, "GLIBC_TUNABLES", _malloc.ENV)


class FakeLibc:
    """A C library whose mallopt records its calls (and accepts every value)."""

    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def fresh(monkeypatch):
    """_malloc as in a new process on glibc, with no malloc variable set; the fake libc."""
    for var in GLIBC_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(_malloc, "_STATE", [None])
    monkeypatch.setattr(_malloc, "_glibc", lambda: True)
    libc = FakeLibc()
    monkeypatch.setattr(_malloc, "_libc", lambda: libc)
    return libc


def test_tune_sets_the_ceiling_thresholds_once(fresh):
    assert _malloc.state() is None
    assert _malloc.tune() == "set"
    assert _malloc.tune() == "set"  # the second call does nothing
    assert fresh.calls == [(-3, 32 << 20), (-1, 32 << 20)]  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
    assert _malloc.state() == "set"


def test_a_refused_mmap_threshold_leaves_the_trim_threshold_alone(fresh):
    fresh.answer = 0  # setting the trim threshold alone would fix the mmap one at 128 KiB
    assert _malloc.tune() == "refused"
    assert fresh.calls == [(-3, 32 << 20)]


@pytest.mark.parametrize(("env", "why"), [
    ({"CAUSALFAIR_MALLOC": "off"}, "off"),
    ({"CAUSALFAIR_MALLOC": " OFF "}, "off"),
    ({"CAUSALFAIR_MALLOC": "0"}, "off"),
    ({"MALLOC_TRIM_THRESHOLD_": "1073741824"}, "environment"),
    ({"MALLOC_MMAP_THRESHOLD_": "33554432"}, "environment"),
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000000"}, "environment"),
])
def test_the_switch_and_the_users_own_settings_leave_malloc_alone(fresh, monkeypatch, env, why):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _malloc.tune() == why
    assert fresh.calls == []


def test_on_and_unrelated_tunables_still_set(fresh, monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MALLOC", "on")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F")
    assert _malloc.tune() == "set"
    assert len(fresh.calls) == 2


def test_a_bad_switch_value_names_the_variable_and_the_fix(fresh, monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MALLOC", "bogus")
    with pytest.raises(InputError, match=r"CAUSALFAIR_MALLOC: bad value 'bogus'; give off"):
        _malloc.tune()
    assert fresh.calls == [] and _malloc.state() is None


def test_a_bad_switch_value_is_one_line_on_the_command_line(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CAUSALFAIR_MALLOC": "bogus"}
    err = one_line_error(run_cli("decompose", "--engine", "mc", "--n", "100", cwd=tmp_path,
                                 env=env, timeout=120))
    assert "CAUSALFAIR_MALLOC: bad value 'bogus'" in err


def test_no_op_off_glibc(fresh, monkeypatch):
    monkeypatch.setattr(_malloc, "_glibc", lambda: False)
    assert _malloc.tune() == "not glibc"
    assert fresh.calls == []


@pytest.mark.parametrize("confstr", ["missing", "unknown name", "no value"])
def test_glibc_is_told_by_confstr(monkeypatch, confstr):
    """musl answers None, macOS has no CS_GNU_LIBC_VERSION (ValueError), Windows no confstr."""
    def fake(name):
        if confstr == "unknown name":
            raise ValueError("unrecognized configuration name")
        return None

    if confstr == "missing":
        monkeypatch.delattr(os, "confstr")
    else:
        monkeypatch.setattr(os, "confstr", fake)
    assert _malloc._glibc() is False


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in GLIBC_VARS}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**clean, "OMP_NUM_THREADS": "1", **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_set_once_by_the_monte_carlo_engines_and_not_by_import_causalfair():
    code = """
from causalfair import _malloc
calls = []
real = _malloc._libc
class Counting:
    def mallopt(self, p, v):
        calls.append((p, v))
        return real().mallopt(p, v)
_malloc._libc = Counting
import causalfair, causalfair.cli
before = _malloc.state()
import causalfair.engines.montecarlo, causalfair.engines.montecarlo_coupled
import causalfair.engines.benefit_mc, causalfair.engines.benefit_forks
import causalfair.engines.attribution, causalfair.engines.choice
print(before, _malloc.state(), calls == [(-3, 32 << 20), (-1, 32 << 20)] if calls else calls)
"""
    expect = "None set True" if _malloc._glibc() else "None not glibc []"
    assert _python(code) == expect


MALLINFO2 = """
import ctypes, json
import causalfair.engines._mc_base
from causalfair import _malloc
libc = ctypes.CDLL(None)
class Info(ctypes.Structure):
    _fields_ = [(k, ctypes.c_size_t) for k in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
MiB = 1 << 20
out = {"state": _malloc.state()}
mapped = libc.mallinfo2().hblks  # blocks mapped before (imports)
p = libc.malloc(20 * MiB)
out["mapped_20"] = libc.mallinfo2().hblks - mapped
libc.free(p)
blocks = [libc.malloc(8 * MiB) for _ in range(12)]  # 96 MiB from the heap, then freed
out["mapped_8"] = libc.mallinfo2().hblks - mapped
for b in reversed(blocks[9:]):  # 24 MiB freed at the top: kept
    libc.free(b)
out["kept_24"] = libc.mallinfo2().keepcost
for b in reversed(blocks[:9]):  # 96 MiB in all: over 32, trimmed
    libc.free(b)
info = libc.mallinfo2()
out["kept_96"], out["heap_96"] = info.keepcost, info.arena
print(json.dumps(out))
"""


@pytest.mark.skipif(not _malloc._glibc() or not hasattr(ctypes.CDLL(None), "mallinfo2"),
                    reason="glibc >= 2.33 (mallinfo2) only")
def test_blocks_under_32_mib_come_from_the_heap_which_keeps_at_most_32_mib():
    MiB = 1 << 20
    on = json.loads(_python(MALLINFO2))
    assert on["state"] == "set"
    assert on["mapped_20"] == 0 and on["mapped_8"] == 0  # no mmap: no fresh pages
    assert on["kept_24"] >= 24 * MiB  # freed, kept for the next batch
    assert on["kept_96"] < _malloc.TRIM_THRESHOLD  # bounded: the top went back at 32 MiB
    assert on["heap_96"] < _malloc.TRIM_THRESHOLD + 8 * MiB
    off = json.loads(_python(MALLINFO2, CAUSALFAIR_MALLOC="off"))
    assert off["state"] == "off"
    assert off["mapped_20"] == 1  # glibc's 128 KiB threshold: mapped, fresh pages
    assert off["mapped_8"] == 0  # then its free raised the threshold to 20 MiB (dynamic)


LENDING = """
import hashlib
import causalfair as cf
from causalfair import _malloc
sim = cf.LendingSimulator(cf.lending_setting("lending-1"))
pol = cf.parse_policy("threshold:0.5", cf.lending_setting("lending-1").tabular)
out = []
for jobs in (1, 2):
    res = cf.decompose_mc(sim, pol, 20, n=150_000, seed=0, jobs=jobs, check=False)
    out.append(hashlib.sha256(repr((res.V.tolist(), res.steps.tolist(), res.se, res.Lambda,
                                    res.C, res.DPE)).encode()).hexdigest())
print(_malloc.state(), " ".join(out))
"""

MLP = """
import hashlib, sys
sys.path.insert(0, "benchmarks")
import bench_mc_features as b
from causalfair import _malloc
out = []
for jobs in (1, 2):
    res = b.audit(8_000, 1, 2_048, jobs=jobs)[1]
    out.append(hashlib.sha256(repr((res.V.tolist(), res.steps.tolist(), res.se, res.Lambda,
                                    res.C, res.DPE)).encode()).hexdigest())
print(_malloc.state(), " ".join(out))
"""


def _same_with_and_without(code: str) -> None:
    on = _python(code).split()
    off = _python(code, CAUSALFAIR_MALLOC="off").split()
    assert on[0] == ("set" if _malloc._glibc() else "not glibc") and off[0] == "off"
    assert len(set(on[1:] + off[1:])) == 1, (on, off)


def test_the_numbers_are_the_same_with_and_without_it_on_one_thread_and_two():
    """lending-1's simulator, n = 150,000 per group in batches of 65,536 (512 KiB arrays:
    mapped under glibc's defaults until its threshold grows, from the heap with the
    setting)."""
    _same_with_and_without(LENDING)


@pytest.mark.slow
def test_the_mlp_audits_numbers_are_the_same_with_and_without_it():
    """The per-row MLP audit of benchmarks/bench_mc_features.py (batches of 2,048: its
    hidden layers' 512 KiB arrays), the workload whose faults the setting removes."""
    _same_with_and_without(MLP)

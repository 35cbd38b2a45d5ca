"""Worker processes of sweeps and gates: ``sweep --jobs auto`` gives the serial sweep's
runs bit for bit, and idle workers are stopped together, without waiting for each
interpreter's teardown in turn (seconds per worker once torch is loaded)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import causalfair.backends as B
import causalfair.commands.decompose as D
import causalfair.workers as W
from causalfair.cli import main


def _linger(_: int) -> int:
    """A task that leaves a non-daemon thread behind (a slow interpreter teardown)."""
    import threading

    threading.Thread(target=time.sleep, args=(5.0,)).start()
    return 1


def test_idle_workers_are_stopped_together_without_their_teardown():
    pickle = B.pickler()
    workers = [W.Worker() for _ in range(2)]
    try:
        for w in workers:
            assert w.send(pickle.dumps((_linger, 0)))
        assert [w.receive() for w in workers] == [1, 1]
        t0 = time.perf_counter()
        W.stop_workers(workers, graceful=True)
        took = time.perf_counter() - t0
    finally:
        for w in workers:
            w.kill()
    # a teardown would wait 5 s for the thread (then the driver kills the worker)
    assert took < 3.0, f"stopping 2 idle workers took {took:.1f} s"
    assert [w.proc.returncode for w in workers] == [0, 0]


@pytest.mark.slow  # two worker processes start (torch imports): about 6 s here
def test_sweep_jobs_auto_gives_the_serial_runs(tmp_path, capsys, monkeypatch):
    args = ["sweep", "--algo", "ppo-c", "--seeds", "0-1", "--iterations", "2",
            "--set", "n_individuals=32", "--set", "horizon=4", "--set", "hidden=[8]",
            "--set", "n_epochs=1"]
    assert main([*args, "--out", str(tmp_path / "serial")]) == 0, capsys.readouterr().err
    # auto = the cores this process may use: two here, whatever the test machine has
    monkeypatch.setattr(B, "available_cores", lambda: 2)
    made = []
    real = D.make_backend
    monkeypatch.setattr(D, "make_backend", lambda *a, **k: made.append(a) or real(*a, **k))
    assert main([*args, "--jobs", "auto", "--out", str(tmp_path / "auto")]) == 0, \
        capsys.readouterr().err
    assert made and made[0][0] == 2  # two worker processes ran the runs
    a, b = (pd.read_csv(tmp_path / d / "runs.csv").drop(columns="wall_s")
            for d in ("serial", "auto"))
    pd.testing.assert_frame_equal(a, b)
    for seed in (0, 1):
        run = f"runs/lending-1/ppo-c/seed-{seed}/checkpoint.pt"
        assert (tmp_path / "serial" / run).read_bytes() == (tmp_path / "auto" / run).read_bytes()

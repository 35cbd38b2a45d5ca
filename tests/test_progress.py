"""Long runs are not silent in a log: training, the gate's repair, Monte Carlo
runs and the dowhy refuters print progress lines on standard error at a steady rate when
standard error is not a terminal (before, training showed a bar only on a terminal and the
others nothing)."""

from __future__ import annotations

import io
import re

import pytest

from causalfair import _progress
from causalfair.cli import main


class _Clock:
    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now


def test_lines_at_a_steady_rate_not_per_update():
    clock = _Clock(3.0)
    out = io.StringIO()  # not a terminal
    t = _progress.Task("job", 10, "steps", out, interval=10.0, clock=clock)
    for _ in range(10):
        clock.now += 3.0
        t.update(1, loss="0.5")
    t.close()
    lines = out.getvalue().splitlines()
    # at 12 s and 24 s (every 10 s at most), then the closing line
    assert [ln.split(": ")[1].split(",")[0] for ln in lines] == [
        "4/10 steps (40%)", "8/10 steps (80%)", "10/10 steps (100%)"]
    assert lines[0] == "[job] running: 4/10 steps (40%), about 18 s left, 12.0 s elapsed, loss 0.5"
    assert lines[-1].startswith("[job] done:")


def test_short_runs_print_nothing():
    clock = _Clock(0.0)
    out = io.StringIO()
    t = _progress.Task("job", 3, "steps", out, interval=10.0, clock=clock)
    for _ in range(3):
        clock.now += 1.0
        t.update()
    t.close()
    assert out.getvalue() == ""


def test_library_calls_stay_silent(capsys):
    with _progress.task("job", 2) as t:
        t.update()
    assert capsys.readouterr().err == ""


def test_train_prints_progress_lines_to_a_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(_progress.ENV, "0")
    assert main(["train", "--setting", "lending-1", "--iterations", "3", "--out",
                 str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^\[train ppo-c lending-1 seed 0\] running: 1/3 iterations", err, re.M)
    assert re.search(r"^\[train ppo-c lending-1 seed 0\] done: 3/3 iterations \(100%\)", err, re.M)
    assert not _progress.enabled()  # the CLI restores the library default
    assert main(["train", "--setting", "lending-1", "--iterations", "2", "--no-progress",
                 "--out", str(tmp_path / "quiet")]) == 0
    assert "[train" not in capsys.readouterr().err


def test_monte_carlo_prints_progress_lines(monkeypatch, capsys):
    monkeypatch.setenv(_progress.ENV, "0")
    assert main(["decompose", "--setting", "lending-1", "--policy", "threshold:0.5",
                 "--engine", "mc", "--n", "3000", "--seed", "1"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^\[monte carlo .*\] done: \d+/\d+ batches \(100%\)", err, re.M), err


def test_dowhy_refuters_print_progress_lines(capsys):
    pytest.importorskip("dowhy")
    from causalfair.logs import audit_logs, simulate_logs
    from causalfair.systems.lending.settings import lending_setting

    df = simulate_logs(lending_setting("lending-1"), "random:0.5", 300, 5, seed=2)
    _progress.enable(True)
    import os

    os.environ[_progress.ENV] = "0"
    try:
        audit_logs(df, n_boot=0, seed=1, dowhy=True, dowhy_options={"n_simulations": 2})
    finally:
        _progress.enable(False)
        del os.environ[_progress.ENV]
    err = capsys.readouterr().err
    assert "[dowhy refuters] done: 3/3 refuters (100%)" in err

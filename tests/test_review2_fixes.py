"""Defects found by a review of the pipe reader, the workers' warnings, the trainer's
selection seed, sweeps, policies, the system checks and the decision-log reader; each test
fails on the code before its fix."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import describe


def _closed_reader(cmd: list[str], merge_stderr: bool) -> subprocess.CompletedProcess:
    """Run ``cmd`` with stdout (and stderr too with merge_stderr) into a pipe whose reader
    has gone, block-buffered as a user's shell gives it (no PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    r, w = os.pipe()
    os.close(r)  # the reader left before the first line (`| head -0`)
    try:
        proc = subprocess.run(cmd, stdout=w, stderr=w if merge_stderr else subprocess.PIPE,
                              env=env, timeout=120, text=True)
    finally:
        os.close(w)
    return proc


def test_a_buffered_stdout_whose_reader_left_keeps_the_exit_code_and_no_noise():
    # the output sat in stdout's buffer until the interpreter's last flush, which failed on
    # the gone pipe: exit code 120 and "Exception ignored ... BrokenPipeError"
    proc = _closed_reader([sys.executable, "-m", "causalfair", "systems"], False)
    assert proc.returncode == 0, describe(proc, 0)
    assert "BrokenPipe" not in proc.stderr and "Exception ignored" not in proc.stderr, \
        describe(proc)


def test_an_input_error_whose_reader_left_still_exits_2():
    # `causalfair audit missing.toml 2>&1 | head -0`: the error line was printed after the
    # streams were put back, so it raised BrokenPipeError
    proc = _closed_reader([sys.executable, "-m", "causalfair", "audit",
                           "/nonexistent/spec.toml"], True)
    assert proc.returncode == 2, describe(proc, 2)


def test_a_semicolon_log_with_a_comma_in_a_column_name_reads_as_the_comma_csv(tmp_path):
    # any ',' in the header made the reader take ',' as the separator: the ';' export was
    # read as two columns ("id;t;...;income" and " net") and refused as missing every one
    import pandas as pd

    from causalfair.logs import read_logs, simulate_logs

    df = simulate_logs("lending-1", "random:0.5", 20, 2, seed=1)
    df["income, net"] = 1.5
    df.to_csv(tmp_path / "log.csv", index=False)
    df.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    df.to_csv(tmp_path / "tab.tsv", index=False, sep="\t")
    ref = read_logs(tmp_path / "log.csv")
    assert "income, net" in ref.columns
    for name in ("semi.csv", "tab.tsv"):
        pd.testing.assert_frame_equal(read_logs(tmp_path / name), ref)


def test_a_log_bootstrap_whose_resamples_cannot_be_fitted_stops_with_one_line(monkeypatch):
    """The log bootstrap draws a resample again when it cannot be fitted (e.g. one without
    some group); when nearly none can, it must stop and say why, not draw forever."""
    import pytest

    from causalfair.logs import audit as la
    from causalfair.logs import bootstrap as lb
    from causalfair.logs.errors import LogError
    from causalfair.logs.simulate import simulate_logs

    df = simulate_logs("lending-1", "random:0.5", 200, 3, seed=0)
    calls = {"n": 0}
    real = lb.fit_model

    def failing(*a, **k):
        calls["n"] += 1
        if calls["n"] > 1:  # the point fit passes; every resample fails
            raise LogError("logs: group 'b' has no individuals; every group needs data.")
        return real(*a, **k)

    monkeypatch.setattr(la, "fit_model", failing)  # the point fit
    monkeypatch.setattr(lb, "fit_model", failing)  # the resamples' fits
    with pytest.raises(LogError, match=r"only 0 of 100 bootstrap resamples .* group 'b'"):
        la.audit_logs(df, n_boot=5, seed=0)
    assert calls["n"] == 101  # the point fit and 20 draws per replicate kept


def test_graph_refuses_a_long_drawing_before_any_work_or_output(tmp_path):
    """`causalfair graph --horizon 61 --out g.png` printed the whole summary, then exited 2:
    the drawing's epoch limit is checked first (graph_render.check_drawable, which draw uses)."""
    from tests.conftest import one_line_error, run_cli

    proc = run_cli("graph", "--setting", "lending-1", "--horizon", "61", "--out",
                   tmp_path / "g.png")
    err = one_line_error(proc)
    assert "at most 60" in err and proc.stdout == "", proc.stdout
    assert not (tmp_path / "g.png").exists()


def test_a_one_spec_summary_says_spec():
    from causalfair.audit.shards import markdown

    doc = {"exit_code": 0, "specs": [{"name": "a", "overall": "PASS", "verdicts": []}]}
    assert "passed (1 spec)" in markdown(doc)

"""hunt_a F2: `frontier --points N` is bounded up front (a fixed most, then the memory its
results keep), one line naming --points, the value and the limit, exit 2: never a
7.45 GiB allocation and a MemoryError traceback, nor an hours-long run."""

from __future__ import annotations

import pytest

from causalfair.engines.frontier import MAX_POINTS, check_points, frontier
from causalfair.errors import InputError, ResourceLimitError


@pytest.mark.parametrize("points", ["1000000000", "100000", str(MAX_POINTS + 1)])
def test_too_many_points_are_refused_up_front(tmp_path, cli_here, points):
    proc = cli_here("frontier", "--horizon", "3", "--points", points, "--out", tmp_path / "fr",
                    cwd=tmp_path)
    assert proc.returncode == 2, proc
    (line,) = proc.stderr.strip().splitlines()
    assert line == (f"causalfair frontier: error: --points: bad value {points}; a frontier's "
                    "grid holds at most 10,000 eps values (each a linear program solved and "
                    "audited); give fewer, e.g. 50 (docs/limits.md).")
    assert not (tmp_path / "fr").exists() and proc.stdout == ""


def test_points_over_the_memory_limit_are_refused(tmp_path, cli_here, monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "10M")
    proc = cli_here("frontier", "--points", "2000", "--out", tmp_path / "fr", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert "frontier of 2000 eps values (--points) over 20 epochs: needs about" in proc.stderr
    assert "give fewer --points" in proc.stderr and not (tmp_path / "fr").exists()


def test_the_python_door_checks_points_and_grids():
    from causalfair.systems.lending.settings import lending_setting

    model = lending_setting("lending-1")
    model = getattr(model, "tabular", model)
    assert check_points(50, model, 3) == 50
    with pytest.raises(InputError, match="points: bad value 10001"):
        frontier(model, 3, points=10001)
    with pytest.raises(InputError, match="eps_grid: bad value 10001"):
        frontier(model, 3, eps_grid=[0.1] * 10001)
    with pytest.raises(ResourceLimitError, match="points"):
        check_points(10000, model, 10**5)

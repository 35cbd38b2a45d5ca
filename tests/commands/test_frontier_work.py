"""A frontier's time is bounded up front: its grid's LPs (each about n x nnz units of work,
measured 8-50 ns a unit) are refused over MAX_LP_WORK, one line naming the field, the
work and the most points that fit, exit 2; a frontier within it runs (h8repair F5)."""

from __future__ import annotations

import numpy as np
import pytest

from causalfair.engines.frontier import MAX_LP_WORK, check_points, frontier, lp_work
from causalfair.errors import ResourceLimitError
from causalfair.model import TabularModel

SYSTEM = '''
import numpy as np
from causalfair.model import TabularModel
from causalfair.systems import System

def make(horizon=20, levels=50):
    rng = np.random.default_rng(0)
    m = TabularModel(kernel=rng.dirichlet(np.ones(levels), size=(2, 2, levels)),
                     initial=rng.dirichlet(np.ones(levels), size=2),
                     potential=np.linspace(0, 1, levels), name="dense")
    return System(id="dense", groups=("s+", "s-"), tabular=m, horizon=horizon,
                  levels=tuple(str(i) for i in range(levels)))
'''


def dense(K: int) -> TabularModel:
    rng = np.random.default_rng(0)
    return TabularModel(kernel=rng.dirichlet(np.ones(K), size=(2, 2, K)),
                        initial=rng.dirichlet(np.ones(K), size=2),
                        potential=np.linspace(0, 1, K), name="dense")


def test_lp_work_counts_variables_times_nonzeros():
    m = dense(50)  # 4,000 variables, 204,000 flow nonzeros at T = 20: 24 s an LP measured
    assert lp_work(m, 20) == pytest.approx(4000 * (4000 + 19 * 2 * 2 * 50 * 50 + 8 * 20 * 50))


def test_a_frontier_of_hours_is_refused_before_any_lp():
    m = dense(50)
    with pytest.raises(ResourceLimitError) as err:
        frontier(m, 20, points=10_000)  # was accepted: about 66 hours
    msg = str(err.value)
    assert msg.startswith("points: a frontier of 10,000 eps values of model 'dense' over 20 "
                          "epochs is ")
    most = int(MAX_LP_WORK // lp_work(m, 20)) - 4
    assert f"give at most {most:,} points" in msg and "(docs/limits.md)" in msg
    assert check_points(most, m, 20) == most
    with pytest.raises(ResourceLimitError, match="eps_grid: a frontier of"):
        frontier(m, 20, eps_grid=np.linspace(0, 1, most + 1))


def test_lending_grids_stay_within_the_work():
    from causalfair.systems.lending.settings import lending_setting

    model = lending_setting("lending-1")
    model = getattr(model, "tabular", model)
    assert check_points(10_000, model, 20) == 10_000  # about 9 minutes


def test_the_command_refuses_it_in_one_line(tmp_path, cli_here):
    (tmp_path / "dense_w.py").write_text(SYSTEM)
    proc = cli_here("frontier", "--system", "dense_w:make", "--search-path", tmp_path,
                    "--points", "10000", "--out", tmp_path / "fr", cwd=tmp_path)
    assert proc.returncode == 2, proc
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("causalfair frontier: error: --points: a frontier of 10,000 eps "
                           "values of model 'dense' over 20 epochs is ")
    assert not (tmp_path / "fr").exists() and proc.stdout == ""

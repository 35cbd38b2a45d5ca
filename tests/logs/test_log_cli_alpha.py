"""`decompose --logs` prints its intervals at `--alpha`, and refuses `--boot 1` (one
replicate has no spread: its "interval" was a point that could miss the estimate)."""

from __future__ import annotations

import json

import numpy as np

import causalfair as cf
from causalfair.logs import simulate_logs
from causalfair.policies.core import TablePolicy
from tests.conftest import one_line_error, run_cli


def _log(tmp_path):
    model = cf.systems.make("lending-1", levels=3).tabular
    df = simulate_logs(model, TablePolicy(np.full((2, 3), 0.5)), 200, 2, seed=1)
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    return path


def test_alpha_sets_the_level_of_the_printed_and_json_intervals(tmp_path):
    log = _log(tmp_path)
    text = run_cli("decompose", "--logs", log, "--boot", "8", "--alpha", "0.2", expect=0).stdout
    assert "80% percentile CI" in text and "95%" not in text
    doc = json.loads(run_cli("decompose", "--logs", log, "--boot", "8", "--alpha", "0.2",
                             "--json", expect=0).stdout)
    assert doc["ci"]["alpha"] == 0.2


def test_one_bootstrap_replicate_is_refused(tmp_path):
    err = one_line_error(run_cli("decompose", "--logs", _log(tmp_path), "--boot", "1"))
    assert "--boot" in err and ">= 2" in err


def test_infinite_alpha_smooth_refused_naming_the_option(tmp_path):
    """--alpha-smooth inf (or 1e308, inf once times K) is refused as the option, not later as
    a NaN kernel with a warning before it."""
    log = _log(tmp_path)
    for value in ("inf", "1e308"):
        err = one_line_error(run_cli("decompose", "--logs", log, "--boot", "0",
                                     "--alpha-smooth", value))
        assert "alpha_smooth: must be a finite number >= 0" in err, err

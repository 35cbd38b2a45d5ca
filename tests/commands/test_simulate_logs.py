"""`causalfair simulate-logs` writes the log simulate_logs gives, which decompose --logs reads."""

import numpy as np
import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.logs.schema import simulate_logs


def test_simulate_logs_command_matches_the_library(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate-logs", "--system", "lending-2", "--policy", "random:0.3", "--n", "200",
                 "--horizon", "6", "--seed", "3", "--out", "logs.csv"]) == 0
    got = pd.read_csv(tmp_path / "logs.csv")
    ref = simulate_logs("lending-2", "random:0.3", 200, 6, 3)
    assert got[["id", "t", "level", "decision", "next_level"]].equals(
        ref[["id", "t", "level", "decision", "next_level"]].astype("int64"))
    assert list(got["group"]) == [str(g) for g in ref["group"]]
    assert got["reward"].tolist() == pytest.approx(ref["reward"].tolist())
    capsys.readouterr()
    assert main(["decompose", "--logs", "logs.csv", "--boot", "5", "--json"]) == 0
    # an existing file is never overwritten
    assert main(["simulate-logs", "--n", "10", "--out", "logs.csv"]) == 2
    assert "does not overwrite" in capsys.readouterr().err


def test_simulate_logs_refuses_systems_without_levels_or_with_three_actions(tmp_path):
    import causalfair as cf
    from causalfair.logs.schema import LogError

    m = cf.lending_setting("lending-1").tabular
    three = m.with_(kernel=np.concatenate([m.kernel, m.kernel[:, :1]], axis=1),
                    reward=np.concatenate([m.reward, m.reward[:, :1]], axis=1))
    with pytest.raises(LogError, match=r"needs discrete levels and two actions .*audit the "
                       r"system itself instead \(causalfair decompose --system .*docs/logs.md"):
        simulate_logs(three, "never", 10, 3)

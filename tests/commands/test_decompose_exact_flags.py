"""`decompose --n` on a run the exact engine answers is refused (it used to be ignored)."""

from __future__ import annotations

from causalfair.cli import main


def test_n_without_the_monte_carlo_engine_is_refused(capsys):
    assert main(["decompose", "--system", "lending-1", "--horizon", "2", "--n", "500"]) == 2
    err = capsys.readouterr().err
    assert "--n/" in err and "--engine mc" in err
    assert main(["decompose", "--system", "lending-1", "--horizon", "2", "--n", "500",
                 "--engine", "mc", "--json"]) == 0

"""hunt_a F3: `sweep --algo ppo,ppo` trains ppo once, as a system named twice is, instead of
counting one run as two seeds (two identical runs.csv rows, a zero-width interval)."""

from __future__ import annotations


def test_an_algorithm_named_twice_is_trained_once(tmp_path, cli_here):
    proc = cli_here("sweep", "--algo", "ppo,ppo", "--seeds", "0", "--iterations", "1",
                    "--set", "horizon=3", "--set", "n_individuals=16",
                    "--system", "lending-1,lending-1", "--out", tmp_path / "sw", cwd=tmp_path)
    assert proc.returncode == 0, proc
    runs = (tmp_path / "sw" / "runs.csv").read_text().strip().splitlines()
    assert len(runs) == 2, runs  # the header and one run
    assert "| lending-1 | ppo | 1 |" in (tmp_path / "sw" / "table.md").read_text()
    assert "1 runs written" in proc.stdout

"""A tiny alpha, or Bonferroni's alpha / m over very many pairs, is a number, not a crash
(h8bound F2): 1 - alpha / (2m) rounded to 1.0 and NormalDist.inv_cdf raised
StatisticsError, a traceback and exit 1 from `causalfair decompose --alpha 1e-300`."""

import subprocess
import sys
from statistics import NormalDist

import pytest

from causalfair._simultaneous import pair_z
from causalfair._validation import z_quantile


@pytest.mark.parametrize("alpha, m", [(1e-300, 1), (1e-10, 10**6), (1e-17, 1), (5e-324, 7)])
def test_tiny_levels_have_a_quantile(alpha, m):
    z = pair_z(alpha, m)
    assert 8.0 < z < 40.0
    p = max(alpha / m / 2.0, 5e-324)
    assert z == -NormalDist().inv_cdf(p)


def test_ordinary_levels_keep_their_bits():
    for alpha, m in [(0.05, 1), (0.05, 3), (0.01, 45), (0.5, 1), (1e-15, 1)]:
        assert pair_z(alpha, m) == NormalDist().inv_cdf(1.0 - alpha / m / 2.0)
    assert z_quantile(1e-300) == pair_z(1e-300)


def test_cli_tiny_alpha_is_not_a_traceback(tmp_path):
    out = subprocess.run([sys.executable, "-m", "causalfair", "decompose", "--engine", "mc",
                          "--n", "50", "--horizon", "2", "--alpha", "1e-300", "--json"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr

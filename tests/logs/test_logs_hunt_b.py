"""audit_logs fixes from the hunt_b report: a huge n_boot refused before the run (1), the
same rows give the same numbers whatever their order (2), a repeated group name (8) and a
missing file (11) refused with a LogError naming them."""

import numpy as np
import pandas as pd
import pytest

from causalfair.errors import CausalfairError, ResourceLimitError
from causalfair.logs import audit_logs, read_logs, simulate_logs
from causalfair.logs.errors import LogError


@pytest.fixture(scope="module")
def df():
    return simulate_logs("lending-1", "random:0.5", n_individuals=300, horizon=3, seed=1)


def test_huge_n_boot_refused_before_the_run(df):
    with pytest.raises(ResourceLimitError) as exc:
        audit_logs(df, n_boot=10**9)
    msg = str(exc.value)
    assert "n_boot=1000000000" in msg and "TiB" in msg and "lower n_boot" in msg


def test_n_boot_limit_follows_the_memory_limit(df, monkeypatch):
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "1M")  # about 6.6 KiB a replicate here
    with pytest.raises(ResourceLimitError, match="n_boot=1000 "):
        audit_logs(df, n_boot=1000)
    assert audit_logs(df, n_boot=3).n_boot == 3


def test_row_order_does_not_change_the_numbers(df):
    a = audit_logs(df, n_boot=20, seed=0)
    for rs in (0, 1):
        b = audit_logs(df.sample(frac=1, random_state=rs), n_boot=20, seed=0)
        assert b.decomposition.Lambda == a.decomposition.Lambda
        pd.testing.assert_frame_equal(b.bootstrap, a.bootstrap, check_exact=True)
    # a log written sorted by id keeps the numbers it had (first appearance = sorted)
    c = audit_logs(df.sort_values(["id", "t"]), n_boot=20, seed=0)
    pd.testing.assert_frame_equal(c.bootstrap, a.bootstrap, check_exact=True)


def test_row_order_ids_of_mixed_types(df):
    ids = np.where(df["id"] % 2 == 0, df["id"].astype(str), df["id"]).astype(object)
    mixed = df.assign(id=[(i,) if isinstance(i, str) else i for i in ids])
    a = audit_logs(mixed, n_boot=5, seed=0)
    b = audit_logs(mixed.iloc[::-1], n_boot=5, seed=0)
    pd.testing.assert_frame_equal(b.bootstrap, a.bootstrap, check_exact=True)


def test_repeated_group_name_refused(df):
    with pytest.raises(LogError) as exc:
        audit_logs(df, n_boot=0, groups=["s-", "s-"])
    assert "groups" in str(exc.value) and "'s-'" in str(exc.value)


def test_missing_log_file_is_a_causalfair_error(tmp_path):
    path = tmp_path / "missing.csv"
    with pytest.raises(CausalfairError) as exc:
        read_logs(path)
    assert str(path) in str(exc.value)
    with pytest.raises(CausalfairError):
        audit_logs(str(path))

"""The worker processes of a ``ProcessBackend`` serve every map of that backend (an
audit's decomposition, then its Lambda rollout: one start-up per run), are replaced when
the driver's search path or users' modules changed, and exit when the backend closes."""

from __future__ import annotations

import os
import time

from causalfair._usercode import load_callable
from causalfair.backends import make_backend


def _pid(_: int) -> int:
    time.sleep(0.05)  # both workers take a task
    return os.getpid()


def test_two_maps_of_one_backend_use_the_same_workers_and_close_ends_them(tmp_path):
    backend = make_backend(jobs=2, backend="process")
    first = set(backend.map(_pid, range(4)))
    assert len(first) == 2 and os.getpid() not in first
    assert set(backend.map(_pid, range(4))) == first
    procs = [w.proc for w in backend._pool]
    assert sorted(p.pid for p in procs) == sorted(first)
    (tmp_path / "cf_pool_mod.py").write_text("def one(_):\n    return 1\n")
    fn = load_callable("cf_pool_mod:one", search_path=tmp_path)  # the users' modules change
    assert backend.map(fn, range(2)) == [1, 1]
    assert not first & {w.proc.pid for w in backend._pool}  # new workers, which find it
    assert all(p.poll() is not None for p in procs)  # the old ones exited
    procs = [w.proc for w in backend._pool]
    backend.close()
    assert backend._pool == [] and all(p.poll() is not None for p in procs)

"""The ray tier's clusters stop alone: a Ray head started by a test (tests/ray_head.py,
`ray start --head --block` on a port and temp dir of its own) is stopped by terminating its
own process, which leaves no process of it behind and leaves any other Ray cluster of the
machine (a user's, another engineer's test session) running. `ray stop` would stop them
all."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path

import pytest

from tests.conftest import describe, run_cmd
from tests.ray_head import RAY_ENV, answers, ray_cli, ray_head, session_pids

if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray comes with the dev extra (pip install -e '.[dev]')", allow_module_level=True)

pytestmark = pytest.mark.ray


def test_a_test_cluster_stops_alone_and_leaves_another_running(ray_session_head):
    # the session's head, started before: it stands for a cluster of the user's
    users = ray_session_head
    assert users.alive(), users.output()
    env = {**os.environ, **RAY_ENV}
    with ray_head(env, num_cpus=1) as mine:
        assert mine.alive() and mine.port != users.port, mine.output()
        # its GCS server and raylet run in its session (so they are stopped with it)
        names = set()
        for pid in session_pids(mine.proc.pid):
            with contextlib.suppress(OSError):  # a process that exited meanwhile
                names.add(Path(f"/proc/{pid}/comm").read_text().strip())
        assert {"gcs_server", "raylet"} <= names, (names, mine.output())
    # stopped on SIGTERM by itself (nothing had to be killed), nothing of it is left
    assert mine.proc.returncode is not None and mine.left == [], mine.output()
    assert session_pids(mine.proc.pid) == [] and not answers(mine.port)
    assert not os.path.exists(mine.temp_dir)
    # the other cluster still answers: its process, its port, and Ray's own status
    assert users.alive(), users.output()
    proc = run_cmd([ray_cli(), "status", "--address", users.address], env=env, timeout=120)
    assert proc.returncode == 0 and "Node status" in proc.stdout, describe(proc)

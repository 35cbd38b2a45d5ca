"""Defects found by a review of the guards around user code and the command line's
plumbing; each test fails on the code before its fix."""

from __future__ import annotations

import os
import threading

import pytest


def test_overlapping_os_exit_guards_put_the_real_os_exit_back():
    # two commands on two threads (main() called from a user's program): A starts, B
    # starts, A ends, B ends. Each guard used to put back what it found, so B restored
    # A's replacement and os._exit stayed refused for the rest of the process
    from causalfair._usercode import OSExitCalled, refuse_os_exit

    real = os._exit
    a, b = refuse_os_exit(), refuse_os_exit()
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    try:
        assert os._exit is not real  # B's command still runs: still refused (the old code
        with pytest.raises(OSExitCalled):  # had put the real one back: no call to it here)
            os._exit(3)
    finally:
        b.__exit__(None, None, None)
        restored = os._exit
        os._exit = real
    assert restored is real


def test_os_exit_guards_on_threads_end_with_the_real_os_exit():
    # the same on real threads: this thread's command starts first and ends first
    from causalfair._usercode import refuse_os_exit

    real = os._exit
    entered, release = threading.Event(), threading.Event()

    def other_command() -> None:
        with refuse_os_exit():
            entered.set()
            release.wait(timeout=10)

    slow = threading.Thread(target=other_command)
    with refuse_os_exit():
        slow.start()
        assert entered.wait(timeout=10)
    release.set()
    slow.join(timeout=10)
    restored, os._exit = os._exit, real
    assert restored is real


def test_shards_on_runners_with_other_checkout_folders_are_one_gate(tmp_path, monkeypatch):
    # the same specs, listed in the same order by absolute path, on two runners whose
    # checkouts lie in different folders (GitLab's /builds/<runner>/<n>/...): the shards'
    # digests used to differ (the path as given was hashed), so gate-merge refused them
    from causalfair.audit.shards import select_shard

    records = []
    for runner in ("builds-a", "builds-b"):
        audits = tmp_path / runner / "repo" / "audits"
        audits.mkdir(parents=True)
        for name in ("one.toml", "two.toml"):
            (audits / name).write_text(f'name = "{name[:-5]}"\n', encoding="utf-8")
        monkeypatch.chdir(audits.parent)
        specs = [str(audits / "one.toml"), str(audits / "two.toml")]
        chosen, rec = select_shard(specs, "1/2")
        assert chosen == specs[:1]
        records.append(rec)
        # the same runner listing them relatively, from its checkout
        assert select_shard(["audits/one.toml", "audits/two.toml"], "2/2")[1][
            "specs_sha256"] == rec["specs_sha256"]
    assert records[0]["specs_sha256"] == records[1]["specs_sha256"]
    # what the digest is for still holds: other contents or another order differ
    (tmp_path / "builds-b" / "repo" / "audits" / "two.toml").write_text('name = "2"\n')
    assert select_shard(specs, "1/2")[1]["specs_sha256"] != records[0]["specs_sha256"]
    assert select_shard(specs[::-1], "1/2")[1]["specs_sha256"] != records[0]["specs_sha256"]


def _verdict(status: str):
    from types import SimpleNamespace as NS

    return NS(key="C", label="C <= 0.1", status=status, message=lambda: f"C is {status}",
              to_dict=lambda: {"key": "C", "status": status})


def _audit(status: str):
    from types import SimpleNamespace as NS

    return NS(verdicts=[_verdict(status)], seconds=1.0, overall=status, summary=lambda: "C",
              extra={}, decomposition=NS(total_utility=1.0), checkpoint_sha256=None,
              attribution=None)


def test_an_inconclusive_original_shown_as_skipped_is_not_a_passing_junit_case():
    # gate --retrain --inconclusive fail --junit-inconclusive skipped: the original
    # checkpoint is INCONCLUSIVE, its repair passes and is not accepted, so the gate exits
    # 1; its JUnit file used to show every case passing (no failure, no skipped), green to
    # CI, and gate-merge then refused the gate's own JUnit as greener than its JSON
    import xml.etree.ElementTree as ET
    from types import SimpleNamespace as NS

    from causalfair.audit.gate import GateEntry, GateResult
    from causalfair.audit.shards import check_junit_matches
    from causalfair.thresholds import INCONCLUSIVE, PASS

    entry = GateEntry(spec=NS(name="lend", path=None, file_shown=None), before=_audit(INCONCLUSIVE),
                      after=_audit(PASS))
    gate = GateResult([entry], inconclusive="fail")
    assert gate.exit_code == 1
    root = ET.fromstring(gate.to_junit(inconclusive_as="skipped").encode("utf-8"))
    assert root[0].get("skipped") == "1" and root.get("failures") == "0"
    check_junit_matches(gate.to_dict(), list(root), ["gate.xml"])  # no InputError
    # shown as a failure, it stays one
    root = ET.fromstring(gate.to_junit(inconclusive_as="failure").encode("utf-8"))
    assert root.get("failures") == "1" and root[0].get("skipped") == "0"


def test_a_simulator_holding_a_cyclic_structure_is_fingerprinted_not_a_recursion_error():
    # the shared-state check walks a user simulator's (or policy's) attributes; a tree with
    # parent links or a dict holding itself used to end the command with a RecursionError
    import numpy as np

    from causalfair.errors import SimulatorContractError
    from causalfair.systems.contract import attribute_prints, check_shared_state

    class Sim:
        def __init__(self):
            self.tree = {"weights": np.arange(3.0)}
            self.tree["root"] = self.tree
            self.nodes = [self.tree, self.tree]

    sim = Sim()
    base = attribute_prints(sim)
    assert "['tree']['weights']" in base
    check_shared_state("simulator Sim", sim, base)  # unchanged: passes
    sim.tree["weights"][0] = 7.0  # a change inside the cycle is still seen
    with pytest.raises(SimulatorContractError, match=r"between calls \(nodes, tree\)"):
        check_shared_state("simulator Sim", sim, base)

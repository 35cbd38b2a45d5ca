"""h8cli F2, F3: ``decompose --logs`` refuses a policy it would not audit (--policy,
--checkpoint, --vecnormalize without --audit-policy: the logged policy was audited, exit 0,
a missing checkpoint file included), and its JSON lists ``--worst N`` benefit pairs, as
``decompose --json`` from a system does (it listed 10 whatever --worst said)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import causalfair as cf
from causalfair.logs import simulate_logs
from causalfair.policies.core import TablePolicy


def _log(tmp_path):
    model = cf.systems.make("lending-1", levels=3).tabular
    df = simulate_logs(model, TablePolicy(np.full((2, 3), 0.5)), 200, 2, seed=1)
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("words", [["--policy", "always"], ["--checkpoint", "nope.pt"],
                                   ["--vecnormalize", "none"]])
def test_a_policy_without_audit_policy_is_refused(tmp_path, cli_here, words):
    p = cli_here("decompose", "--logs", _log(tmp_path), "--boot", "0", *words, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{words[0]}: with --logs FILE the logged policy is audited; add --audit-policy" \
        in p.stderr and p.stdout == ""


def test_audit_policy_still_audits_the_named_policy(tmp_path, cli_here):
    p = cli_here("decompose", "--logs", _log(tmp_path), "--boot", "0", "--audit-policy",
                 "--policy", "always", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["policy_source"] == "supplied: always"


@pytest.mark.parametrize("worst", [1, 3])
def test_json_lists_worst_pairs(tmp_path, cli_here, worst):
    p = cli_here("decompose", "--logs", _log(tmp_path), "--boot", "0", "--json", "--worst",
                 str(worst), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)["benefit"]["worst_pairs"]) <= worst

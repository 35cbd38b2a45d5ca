"""A command run without --policy uses its default (threshold:0.5); where that default
cannot act on the system, the one-line refusal says that --policy was not given, rather
than quoting a value the user never typed."""

from __future__ import annotations

import pytest

from causalfair.cli import main
from causalfair.commands._system import DEFAULT_POLICY


@pytest.mark.parametrize("argv", [
    ["decompose", "--system", "infectious-1", "--engine", "mc", "--n", "50"],
    ["graph", "--system", "attention-1"],
])
def test_missing_policy_is_named_as_not_given(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--policy (not given: the default)" in err, err
    assert f"'{DEFAULT_POLICY}'" in err, err


def test_given_policy_is_quoted_as_given(capsys):
    assert main(["graph", "--system", "attention-1", "--policy", "threshold:0.5"]) == 2
    err = capsys.readouterr().err
    assert "--policy: 'threshold:0.5' is a two-action policy" in err and "not given" not in err


def test_default_still_audits_a_tabular_system(capsys):
    assert main(["decompose", "--system", "lending-1", "--horizon", "2", "--json"]) == 0
    assert f'"policy": "{DEFAULT_POLICY}"' in capsys.readouterr().out

"""Group names that reports, JUnit XML and CSV cannot carry are refused where they enter:
a System's groups and a decision log's group column (one check, causalfair._validation)."""

import pandas as pd
import pytest

from causalfair.errors import CausalfairError
from causalfair.logs.schema import LogError, validate_logs
from causalfair.systems import make
from causalfair.systems.system import System


def _log(groups):
    rows = []
    for i, g in enumerate(groups * 2):
        rows.append({"id": i, "t": 0, "group": g, "level": 1, "decision": 1, "next_level": 1,
                     "reward": 0.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("bad,why", [("Bl\x00ack", "control character"), ("  ", "empty"),
                                     ("x" * 201, "201 characters"),
                                     # before: accepted; 0x9b is CSI (ESC [) to a terminal,
                                     # U+202E showed the rest of "pair White-RED..." reversed
                                     ("RED\x9b31m", "control character '\\\\x9b'"),
                                     ("RED\u202eevil", "bidirectional control character"),
                                     ("\u2066iso", "bidirectional control character"),
                                     # before: accepted; the report crashed encoding it
                                     ("A\udcffB", "lone surrogate '\\\\udcff'")])
def test_system_groups_refuse_unprintable_names(bad, why):
    base = make("lending-1")
    with pytest.raises(CausalfairError, match=why) as err:
        System(id="t", groups=("White", bad), decisions=base.decisions,
               structure=base.structure, tabular=base.tabular)
    assert "groups" in str(err.value) and "printable" in str(err.value)


def test_log_group_with_nul_refused_naming_the_column():
    with pytest.raises(LogError, match=r"column 'group'.*control character '\\x00'"):
        validate_logs(_log(["White", "Bl\x00ack"]), n_levels=4)


def test_log_group_with_a_bidi_override_refused_naming_the_column():
    with pytest.raises(LogError, match=r"column 'group'.*bidirectional.*'\\u202e'"):
        validate_logs(_log(["White", "Bl\u202eack"]), n_levels=4)


def test_right_to_left_and_emoji_names_still_read():
    fit = validate_logs(_log(["\u05e2\u05d1\u05e8\u05d9\u05ea", "\U0001f600 \u0639\u0631\u0628\u064a"]),
                        n_levels=4)
    assert len(fit.groups) == 2


def test_log_with_printable_groups_still_reads():
    fit = validate_logs(_log(["White", "Black"]), n_levels=4)
    assert set(fit.groups) == {"White", "Black"}
    assert sorted(set(fit.g.tolist())) == [0, 1]


@pytest.mark.parametrize("bad,why", [("ap\x00prove", "control character"), (" ", "empty"),
                                     ("go\x1b[2J", "control character '\\\\x1b'"),
                                     ("x\u202ey", "bidirectional")])
def test_action_labels_refuse_what_group_names_refuse(bad, why):
    # before: a simulator's action_labels ("ye\x00s\x1b[2J") and a log's decisions= were
    # taken as given and written raw to ll144.md / ll144.csv, the report and the console
    from causalfair.systems.system import DecisionSet

    with pytest.raises(CausalfairError, match=f"decisions.labels: bad label.*{why}"):
        DecisionSet(labels=("deny", bad))
    with pytest.raises(LogError, match="decisions: " + ("expected" if why == "empty" else
                                                          f"bad label.*{why}")):
        validate_logs(_log(["White", "Black"]), n_levels=4, decisions=["no", bad])
    assert DecisionSet(labels=("\u05dc\u05d0", "\u05db\u05df \U0001f600")).labels[1] == \
        "\u05db\u05df \U0001f600"

"""One answer shape for "how do the groups compare?" at every door that decomposes over
more than two groups: `causalfair decompose` on a system (exact and Monte Carlo) and
`causalfair decompose --logs` print the compared pair's decomposition, then one table of
every pair (GroupComparison.table_lines) saying which pair was compared and how it was
chosen; --json adds the same `pairs` section (GroupComparison.pairs_dict) at both doors.
Before, the system door printed the default (worst) pair alone, and neither door said that
the default pair is chosen from the data."""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main

# three groups on two levels (docs/decomposition.md, "More than two groups"); T = 1:
# from "low" d0 moves up with probability r, d1 with q; P(low) = m; pi(d1 | low) = p
TRI = textwrap.dedent('''
    import numpy as np
    import causalfair as cf

    M, Q, R = np.array([0.5, 0.8, 1.0]), np.array([0.6, 0.5, 0.4]), np.array([0.2, 0.1, 0.0])
    P = np.array([1.0, 0.5, 0.25])

    def model():
        kernel = np.zeros((3, 2, 2, 2))
        for s in range(3):
            kernel[s, 0, 0], kernel[s, 1, 0] = [1 - R[s], R[s]], [1 - Q[s], Q[s]]
            kernel[s, :, 1] = [0, 1]
        return cf.TabularModel(kernel=kernel, initial=np.stack([M, 1 - M], 1),
                               potential=np.array([0.0, 1.0]), group_names=["A", "B", "C"])

    def make():
        return cf.System(id="tri", groups=("A", "B", "C"), tabular=model(), horizon=1)

    def policy():
        return lambda obs: np.where(np.asarray(obs.level) == 0,
                                    P[np.asarray(obs.group)], 0.0)
''')
M, Q, R, P = (np.array([0.5, 0.8, 1.0]), np.array([0.6, 0.5, 0.4]),
              np.array([0.2, 0.1, 0.0]), np.array([1.0, 0.5, 0.25]))
V = M * (P * Q + (1 - P) * R)  # by hand: 0.3, 0.24, 0.1 (A, B, C)
V0 = M * R                     # the baseline d0: 0.1, 0.08, 0.0
PAIRS = {"B-A": (1, 0), "C-A": (2, 0), "B-C": (1, 2)}  # reference A first, then the rest


@pytest.fixture
def tri(tmp_path, monkeypatch):
    (tmp_path / "pairs_doors_tri.py").write_text(TRI)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _run(capsys, *args):
    code = main(["decompose", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _table(text):
    """The every-pair table's rows (name -> the numbers and marks) and its closing line."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("Every pair (X-Y"))
    rows = {}
    for ln in lines[head + 2:]:
        if not ln.startswith("  "):
            return lines[head], rows, ln, head
        name, *cells = ln.split()
        rows[name] = cells
    raise AssertionError(text)


def test_the_system_door_prints_every_pair_by_hand_and_says_how_the_pair_was_chosen(
        tri, capsys):
    text = _run(capsys, "--system", "pairs_doors_tri:make", "--policy", "pairs_doors_tri:policy")
    header, rows, closing, head = _table(text)
    assert list(rows) == list(PAIRS)
    for name, (a, b) in PAIRS.items():
        c, lo, hi, dpe, ipe, spe = (float(x) for x in rows[name][:6])
        assert c == lo == hi == pytest.approx(V[a] - V[b], abs=1e-6)  # exact: a point
        assert spe == pytest.approx(V0[a] - V0[b], abs=1e-6) and ipe == 0.0  # T = 1
        assert dpe == pytest.approx(c - spe, abs=2e-6)
    # the default pair is A-C (largest and smallest V), the worst pair's row, sign flipped
    assert "  pair: A - C" in text.splitlines()[:head]  # the decomposition above the table
    assert " ".join(rows["C-A"][8:]) == "worst, compared above (as A-C)"
    assert "exact values, no sampling error" in header and "reference group A" in header
    assert closing.startswith("The decomposition above compares A-C, the default: the pair "
                              "with the largest |C|") and "covers less" not in closing
    # Lambda of each pair: the benefit engine run on that pair
    model = cf.systems.make("pairs_doors_tri:make").tabular
    for name in PAIRS:
        lam = cf.benefit_fairness(model, np.stack([P, np.zeros(3)], 1), 1, pair=name).Lambda
        assert float(rows[name][6]) == pytest.approx(lam, abs=1e-6)
    named = _run(capsys, "--system", "pairs_doors_tri:make", "--policy",
                 "pairs_doors_tri:policy", "--pair", "B-A")
    _, rows, closing, _ = _table(named)
    assert rows["B-A"][8:] == ["compared", "above"] and rows["C-A"][8:] == ["worst"]
    assert closing == ("The decomposition above compares B-A, the pair named (--pair; pair= "
                       "in Python).")
    two = _run(capsys, "--setting", "lending-1", "--policy", "threshold:0.5", "--horizon", "3")
    assert "Every pair" not in two and "compared above" not in two  # two groups: as before


def test_the_monte_carlo_system_door_gives_every_pair_with_its_interval(tri, capsys):
    base = ["--system", "pairs_doors_tri:make", "--policy", "pairs_doors_tri:policy",
            "--engine", "mc", "--n", "400"]
    doc = json.loads(_run(capsys, *base, "--json"))
    pairs = doc["pairs"]
    assert (pairs["compared"], pairs["compared_by"], pairs["worst"]) == ("A-C", "largest_abs_C",
                                                                         "C-A")
    assert (pairs["reference"], pairs["ci_level"], pairs["engine"]) == ("A", 0.95, "mc")
    z = 1.959963984540054
    z3 = 2.393979799818510  # the compared (data-chosen) pair: simultaneous over 3 pairs
    assert pairs["simultaneous"]["pair"] == "C-A" and pairs["simultaneous"]["pairs"] == 3
    g, se = doc["groups"], doc["se"]
    for name, (a, b) in PAIRS.items():
        ga, gb = "ABC"[a], "ABC"[b]
        c = pairs["values"][name]["C"]
        assert c["estimate"] == pytest.approx(g[ga]["V"] - g[gb]["V"], abs=1e-12)
        s = math.hypot(se[f"V[{ga}]"], se[f"V[{gb}]"])  # independent groups
        assert c["se"] == pytest.approx(s, rel=1e-9)
        zz = z3 if name == "C-A" else z
        assert c["ci_lower"] == pytest.approx(c["estimate"] - zz * s, rel=1e-6)
    # the compared pair's row is the decomposition's C, its interval flipped
    c = pairs["values"]["C-A"]["C"]
    assert c["estimate"] == pytest.approx(-doc["C"], abs=1e-12)
    assert [-c["ci_upper"], -c["ci_lower"]] == pytest.approx(doc["ci"]["C"], abs=1e-12)
    text = _run(capsys, *base)
    header, rows, closing, _ = _table(text)
    assert "95% normal intervals, estimate +- z * sqrt(se_X^2 + se_Y^2)" in header
    assert float(rows["C-A"][0]) == pytest.approx(c["estimate"], abs=1e-6)
    assert "chosen from these same estimates" in closing and "simultaneous over the 3 pairs" \
        in closing and "--pair A-B" in closing


def _log(tmp_path):
    from causalfair.logs import simulate_logs
    from causalfair.policies.core import TablePolicy

    model = cf.systems.make("pairs_doors_tri:make").tabular
    logged = TablePolicy([[0.7, 0.4], [0.5, 0.5], [0.3, 0.6]])  # both decisions everywhere
    df = simulate_logs(model, logged, 600, 2, seed=3)
    path = tmp_path / "tri.csv"
    df.to_csv(path, index=False)
    return str(path)


def test_the_log_door_prints_the_same_table_after_the_decomposition(tri, capsys):
    log = _log(tri)
    base = ["--logs", log, "--potential", "0,1", "--boot", "20", "--seed", "1"]
    text = _run(capsys, *base)
    header, rows, closing, head = _table(text)
    lines = text.splitlines()
    assert lines.index("Decomposition of the qualification-gain disparity (logs engine)") < head
    assert "bootstrap sd of the pair over the replicates" in header
    assert list(rows) == list(PAIRS) and "compared above" in " ".join(
        " ".join(r[8:]) for r in rows.values())
    assert "chosen from these same estimates" in closing and "simultaneous over the 3 pairs" \
        in closing
    system = _run(capsys, "--system", "pairs_doors_tri:make", "--policy",
                  "pairs_doors_tri:policy")
    assert _table(system)[0].split("; ")[:2] == header.split("; ")[:2]  # one header
    assert text.splitlines()[head + 1] == system.splitlines()[_table(system)[3] + 1]
    named = _run(capsys, *base, "--pair", "B-C")
    assert _table(named)[2].startswith("The decomposition above compares B-C, the pair named")


def test_both_doors_json_carry_the_same_pairs_section(tri, capsys):
    log = _log(tri)
    logs = json.loads(_run(capsys, "--logs", log, "--potential", "0,1", "--boot", "20",
                           "--json", "--pair", "B-C"))
    system = json.loads(_run(capsys, "--system", "pairs_doors_tri:make", "--policy",
                             "pairs_doors_tri:policy", "--json", "--pair", "B-C"))
    assert set(logs["pairs"]) == set(system["pairs"])
    for doc, engine in ((logs, "logs"), (system, "exact")):
        p = doc["pairs"]
        assert (p["compared"], p["compared_by"], p["engine"]) == ("B-C", "named", engine)
        assert list(p["values"]) == list(PAIRS)
        assert p["values"]["B-C"]["C"]["estimate"] == pytest.approx(doc["C"], abs=1e-12)
    from tests.conftest import schema_errors  # the published schema holds both doors' pairs

    for name, doc in (("logs", logs), ("system", system)):
        (tri / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    assert schema_errors(tri / "logs.json", "decompose") == []
    assert schema_errors(tri / "system.json", "decompose") == []
    from pathlib import Path

    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "schema"
                         / "decompose.schema.json").read_text(encoding="utf-8"))
    bad = dict(system, pairs=dict(system["pairs"], compared_by="worst"))
    errors = jsonschema.Draft202012Validator(schema).iter_errors(bad)
    assert [list(e.absolute_path) for e in errors] == [["pairs", "compared_by"]]


def test_a_log_audit_knows_whether_its_pair_was_named(tri):
    import pandas as pd

    from causalfair.logs import audit_logs

    df = pd.read_csv(_log(tri))
    default = audit_logs(df, n_boot=10, seed=0, potential=[0.0, 1.0])
    named = audit_logs(df, n_boot=10, seed=0, potential=[0.0, 1.0], pair=default.pair_name)
    assert default.pair == named.pair  # the same groups, chosen two ways
    assert (default.pair_named, named.pair_named) == (False, True)
    assert "the default: the pair with the largest |C|" in default.summary()
    assert "the pair named" in named.summary()
    assert default.to_dict()["pairs"]["compared_by"] == "largest_abs_C"

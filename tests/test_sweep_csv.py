"""A sweep's runs.csv and table.csv never carry a spreadsheet formula: every text cell
(column names included) goes through the one rule of ll144.csv,
:func:`causalfair._io.csv_text` (OWASP "CSV injection"), and a resumed sweep still
matches its runs by pair and params exactly."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from causalfair._io import csv_text
from causalfair.report import export
from causalfair.systems import registry
from causalfair.train.sweep import sweep
from causalfair.train.sweep_io import csv_table, pair_text, params_cell

EVIL_GROUP = '=HYPERLINK("http://x","y")'
EVIL_ID = '=HYPERLINK("x","y")'  # (a registered id: no space; no "/", it names a folder)
EVIL_PARAM = "=cmd|' /C calc'!A0"


def test_the_one_rule_is_ll144s():
    assert export.csv_text is csv_text  # (moved below report and train; one function)
    assert [csv_text(t) for t in ("=1+1", "+x", "-x", "@x", "\tx", "\rx", "-1", "+2.5e3",
                                  "a=b", "[\"=A\"]", "{}", "")] == [
        "'=1+1", "'+x", "'-x", "'@x", "'\tx", "'\rx", "-1", "+2.5e3", "a=b", "[\"=A\"]",
        "{}", ""]


def test_csv_table_escapes_text_cells_and_names_and_nothing_else():
    frame = pd.DataFrame({"system": [EVIL_ID, "lending-1", None], "seed": [0, 1, 2],
                          "C": [-0.5, float("nan"), 1e-9], "@metric": [1.0, 2.0, 3.0],
                          "pair": [pair_text([EVIL_GROUP, "-B"]), '["s+", "s-"]', None]})
    text = csv_table(frame)
    assert text.splitlines()[0] == "system,seed,C,'@metric,pair"
    back = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert back["system"].tolist() == ["'" + EVIL_ID, "lending-1", ""]
    # numbers (a negative one included) and the JSON pair are written as pandas writes them
    plain = frame.rename(columns={"@metric": "'@metric"}).assign(system=["'" + EVIL_ID,
                                                                          "lending-1", None])
    assert text == plain.to_csv(index=False)
    assert back["pair"].tolist()[:2] == [pair_text([EVIL_GROUP, "-B"]), '["s+", "s-"]']
    # a frame without formula text: byte for byte what the sweep wrote before
    ok = frame.assign(system=["a", "b", None]).rename(columns={"@metric": "m"})
    assert csv_table(ok) == ok.to_csv(index=False)


def _evil_system(tag: str = "t") -> object:
    """Two groups, one named as a formula, on the tri model's kernel (tests/tri_system.py)."""
    from causalfair.model import TabularModel
    from causalfair.systems import System

    k = np.zeros((2, 2, 2, 2))
    for s, (q, r) in enumerate(((0.6, 0.2), (0.4, 0.0))):
        k[s, 0, 0] = [1 - r, r]
        k[s, 1, 0] = [1 - q, q]
        k[s, :, 1] = [0, 1]
    reward = np.zeros((2, 2, 2))
    reward[:, 1, 0] = 1.0
    groups = [EVIL_GROUP, "-B"]
    m = TabularModel(kernel=k, initial=np.array([[0.5, 0.5], [0.8, 0.2]]),
                     potential=np.array([0.0, 1.0]), reward=reward, group_names=groups,
                     name="evil")
    return System(id=EVIL_ID, groups=tuple(groups), tabular=m, horizon=3,
                  levels=("low", "high"))


def test_a_sweep_writes_a_formula_system_as_text_and_resumes_by_pair_and_params(
        tmp_path, monkeypatch):
    # was: runs.csv and table.csv held the cell =HYPERLINK("x","y") raw (a spreadsheet
    # evaluates it); the pair (group names) and params cells are JSON, written as before
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register(EVIL_ID, _evil_system)
    out = tmp_path / "sw"
    kw = {"params": {"tag": EVIL_PARAM}, "overrides": {"iterations": 1}, "out": out}
    res = sweep(["ppo"], [0], [EVIL_ID], **kw)
    assert not res.failed and res.runs["system"].tolist() == [EVIL_ID]  # (the frame: the id)
    raw = {n: (out / n).read_bytes() for n in ("runs.csv", "table.csv")}
    runs = pd.read_csv(out / "runs.csv", keep_default_na=False)
    table = pd.read_csv(out / "table.csv", keep_default_na=False)
    assert runs["system"].tolist() == ["'" + EVIL_ID]
    assert set(table["system"]) == {"'" + EVIL_ID}
    assert not any(c.startswith(("=", "+", "-", "@")) for f in (runs, table)
                   for c in [*f.columns, *f.select_dtypes(exclude="number").stack()]
                   if not _number(c))
    doc = json.loads((out / "runs" / EVIL_ID / "ppo" / "seed-0" / "result.json").read_text())
    assert runs["pair"].tolist() == [pair_text(doc["pair"])]
    assert sorted(json.loads(runs["pair"][0])) == sorted([EVIL_GROUP, "-B"])
    assert runs["params"].tolist() == [params_cell({"tag": EVIL_PARAM})]
    assert set(table["params"]) == {params_cell({"tag": EVIL_PARAM})}
    assert set(table["pairs"]) == {runs["pair"][0]}
    # resumed: the run is matched (system, params, pair) and reused; the files are the same
    again = sweep(["ppo"], [0], [EVIL_ID], existing="resume", **kw)
    assert again.reused == 1 and not again.failed
    assert {n: (out / n).read_bytes() for n in raw} == raw
    assert again.runs["pair"].tolist() == res.runs["pair"].tolist()


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", [EVIL_GROUP, "-B", "@x", "+1", "\tA"])
def test_pair_and_params_cells_never_start_a_formula_whatever_the_names(name):
    # (so csv_text leaves them as they are, and a resumed sweep reads the same text)
    for cell in (pair_text([name, "B"]), params_cell({name: name})):
        assert csv_text(cell) == cell

"""Spec errors found before anything runs, each named as the user wrote it: a threshold given
twice, a pair of groups the system lacks, a quantity the audit cannot produce, a built-in
policy the system's budget forbids, [engine] keys that would do nothing; the gate's invalid
specs in command-line order and named as given (the tester's report hunt_c)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from causalfair.audit import load_spec
from causalfair.cli import main
from causalfair.errors import SpecError

HEAD = 'name="x"\n[system]\nid="lending-1"\n[policy]\nbuiltin="threshold:0.5"\n'


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# ------------------------------------------------------------- a threshold given twice
@pytest.mark.parametrize("cmd", ["audit", "gate"])
def test_a_pair_threshold_in_both_forms_is_refused(tmp_path, monkeypatch, capsys, cmd):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "dup.toml", HEAD + '[thresholds]\n"abs_C[s+-s-]" = 0.1\n'
           '[thresholds.abs_C]\n"s+-s-" = 0.3\n')
    args = [cmd, "dup.toml"] + (["--out", "o"] if cmd == "audit" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert 'given twice, as [thresholds] "abs_C[s+-s-]" = 0.1 and as [thresholds.abs_C] ' \
           '"s+-s-" = 0.3' in err and "keep one of them" in err, err
    assert not (tmp_path / "o").exists()


def test_a_pair_threshold_in_one_form_is_kept():
    spec = load_spec({"name": "x", "thresholds": {"abs_C[s+-s-]": 0.1,
                                                   "abs_C": {"s--s+": 0.3}}})
    assert spec.thresholds == {"abs_C[s+-s-]": 0.1, "abs_C[s--s+]": 0.3}


# ------------------------------------------------------------- [engine] keys with no effect
@pytest.mark.parametrize("key,fix", [("n", "[logs] n_boot"), ("seed", "[logs] seed")])
def test_engine_n_and_seed_are_refused_with_logs(tmp_path, key, fix):
    (tmp_path / "log.csv").write_text("t,id,group,level,decision,next_level\n")
    with pytest.raises(SpecError, match=rf"\[engine\] {key}: not used with \[logs\].*"
                                        rf"{re.escape(fix)}"):
        load_spec({"name": "x", "logs": {"path": "log.csv"}, "engine": {key: 3}},
                  base_dir=tmp_path)


@pytest.mark.parametrize("engine,why", [
    ({"kind": "exact", "n": 100}, 'kind = "exact":'),
    ({"kind": "exact", "seed": 3}, 'kind = "exact":'),
    ({"n": 100}, 'the default with [model]'),
])
def test_engine_n_and_seed_are_refused_on_the_exact_engine(engine, why):
    raw = {"name": "x", "engine": engine} | ({"system": {"id": "lending-1"}}
                                             if "kind" in engine else {"model": {}})
    with pytest.raises(SpecError) as err:
        load_spec(raw)
    msg = str(err.value)
    assert why in msg and 'set [engine] kind = "mc"' in msg and "not used by the exact" in msg


def test_engine_n_and_seed_are_kept_where_they_count():
    spec = load_spec({"name": "x", "system": {"id": "lending-1"},
                      "engine": {"kind": "mc", "n": 100, "seed": 3}})
    assert (spec.n, spec.seed) == (100, 3)
    spec = load_spec({"name": "x", "system": {"id": "lending-1"}, "engine": {"n": 100}})
    assert spec.n == 100  # auto: Monte Carlo on a system without a tabular model


# ------------------------------------------------------------- gym groups
@pytest.mark.parametrize("groups,names", [([1, 0], ["1", "0"]), ([True, False], ["True", "False"]),
                                          (["1", "0"], ["1", "0"])])
def test_gym_groups_may_be_the_values_the_env_reports(groups, names):
    spec = load_spec({"name": "x", "system": {"gym": "m:make", "groups": groups}})
    assert spec.system_params["groups"] == names  # as from_gym reads them (str of each)


def test_gym_groups_missing_or_bad_are_named():
    with pytest.raises(SpecError, match=r"\[system\] groups: missing; list the env's groups"):
        load_spec({"name": "x", "system": {"gym": "m:make"}})
    with pytest.raises(SpecError, match=r"\[system\] groups: bad value \[1, 1\].*such as \[1, 0\]"):
        load_spec({"name": "x", "system": {"gym": "m:make", "groups": [1, 1]}})


def test_the_error_docs_audit_md_quotes_is_the_one_printed(tmp_path, monkeypatch, capsys):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text("utf-8")
    quoted = next(line for line in doc.splitlines()
                  if line.startswith("causalfair audit: error: audit spec audits/x.toml"))
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "audits" / "x.toml", HEAD + '[engine]\nkind = "exactly"\n')
    assert main(["audit", "audits/x.toml", "--no-report"]) == 2
    assert capsys.readouterr().err.strip() == quoted

"""A corpus of small hostile inputs, one case each: every case must end with exit code 2
and one line on stderr naming the field (or the documented behaviour), never a
traceback, a memory blow-up before the refusal, or a touched input file.

The cases run in-process through ``causalfair.cli.main`` (fast); see docs/limits.md for
the limits they exercise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from causalfair.cli import main

SPEC = """name = "t"
horizon = 3
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
C = 0.5
"""

LOG_HEADER = "id,t,group,level,decision,next_level,reward,outcome"


def _log(tmp: Path, name: str, rows: list[str], header: str = LOG_HEADER) -> str:
    path = tmp / name
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def _good_rows() -> list[str]:
    rows = []
    for i, g in enumerate(["s-", "s+"] * 4):
        for t in range(2):
            rows.append(f"{i},{t},{g},{2 + t},{(i + t) % 2},{3 + t},1.0,1.0")
    return rows


def _spec(tmp: Path, text: str, name: str = "s.toml", encoding: str = "utf-8") -> str:
    path = tmp / name
    path.write_text(text, encoding=encoding)
    return str(path)


# each case: (argv builder, environment, words the one-line error must contain)
def _case_env_memory_inf(tmp):
    return ["decompose", "--system", "lending-1", "--horizon", "3"], \
        {"CAUSALFAIR_MAX_MEMORY": "inf"}, ["CAUSALFAIR_MAX_MEMORY", "'inf'", "8G"]


def _case_env_memory_1e400(tmp):
    return ["decompose", "--system", "lending-1", "--horizon", "3"], \
        {"CAUSALFAIR_MAX_MEMORY": "1e400T"}, ["CAUSALFAIR_MAX_MEMORY", "1e400T"]


def _case_env_threads_zero(tmp):
    return ["systems"], {"CAUSALFAIR_THREADS": "0"}, ["CAUSALFAIR_THREADS", "got 0"]


def _case_env_threads_huge(tmp):
    return ["systems"], {"CAUSALFAIR_THREADS": str(10**30)}, ["CAUSALFAIR_THREADS", "1024"]


def _case_flag_threads_huge(tmp):
    return ["--threads", str(10**30), "systems"], {}, ["--threads", "1024"]


def _case_param_deep_json(tmp):
    return ["decompose", "--system", "lending-1", "--horizon", "3",
            "--param", "levels=" + "[" * 100_000], {}, ["--param levels", "nested", "100"]


def _case_param_huge_int(tmp):
    return ["systems", "lending-1", "--param", "levels=" + "9" * 5000], {}, \
        ["--param levels", "4300 digits"]


def _case_set_deep_json(tmp):
    return ["train", "--system", "lending-1", "--set", "lr=" + "[" * 100_000,
            "--iterations", "1", "--out", str(tmp / "run")], {}, ["--set lr", "nested"]


def _case_set_huge_int(tmp):
    return ["train", "--system", "lending-1", "--set", "lr=" + "9" * 5000,
            "--iterations", "1", "--out", str(tmp / "run")], {}, ["--set lr", "4300 digits"]


def _case_log_level_huge(tmp):
    rows = _good_rows()
    rows[0] = "0,0,s-,1000000000,0,3,1.0,1.0"
    return ["decompose", "--logs", _log(tmp, "l.csv", rows), "--boot", "2"], {}, \
        ["logs", "1000000001 levels", "level", "CAUSALFAIR_MAX_MEMORY"]


def _case_log_wide_header(tmp):
    header = LOG_HEADER + "," + ",".join(f"c{i}" for i in range(20_000))
    rows = [r + "," + ",".join("0" * 20_000) for r in _good_rows()]
    return ["decompose", "--logs", _log(tmp, "wide.csv", rows, header), "--boot", "2"], {}, \
        ["logs", "columns", "10000"]


def _case_simulate_logs_huge_n(tmp):
    return ["simulate-logs", "--system", "lending-1", "--horizon", "3", "--n", str(10**12),
            "--out", str(tmp / "out.csv")], {}, ["simulate_logs", "--n", "CAUSALFAIR_MAX_MEMORY"]


def _case_spec_deep_array(tmp):
    text = SPEC + "[retrain]\nbetas = " + "[" * 100_000 + "]" * 100_000 + "\n"
    return ["audit", _spec(tmp, text), "--no-report"], {}, ["TOML nested more than 100"]


def _case_spec_dotted_key(tmp):
    text = SPEC + "[extra]\n" + ".".join(["a"] * 5000) + " = 1\n"
    return ["audit", _spec(tmp, text), "--no-report"], {}, ["dotted key", "100 parts"]


def _case_spec_huge_int(tmp):
    text = SPEC.replace("horizon = 3", "horizon = " + "9" * 5000)
    return ["audit", _spec(tmp, text), "--no-report"], {}, ["not valid TOML", "4300 digits"]


def _case_spec_nan_signed_threshold(tmp):
    text = SPEC.replace("C = 0.5", "DPE = -inf")
    return ["audit", _spec(tmp, text), "--no-report"], {}, \
        ["[thresholds] DPE", "-inf", "allowed values: a finite number."]


def _case_graph_huge_horizon(tmp):
    return ["graph", "--system", "lending-1", "--horizon", "100000"], {}, \
        ["100000 epochs", "5000", "--horizon"]


CASES = {
    "graph --horizon 100000": _case_graph_huge_horizon,
    "env MAX_MEMORY=inf": _case_env_memory_inf,
    "env MAX_MEMORY=1e400T": _case_env_memory_1e400,
    "env THREADS=0": _case_env_threads_zero,
    "env THREADS=1e30": _case_env_threads_huge,
    "--threads 1e30": _case_flag_threads_huge,
    "--param 100000-deep JSON": _case_param_deep_json,
    "--param 5000-digit int": _case_param_huge_int,
    "train --set 100000-deep JSON": _case_set_deep_json,
    "train --set 5000-digit int": _case_set_huge_int,
    "log level 1e9": _case_log_level_huge,
    "log 20000 columns": _case_log_wide_header,
    "simulate-logs --n 1e12": _case_simulate_logs_huge_n,
    "spec 100000-deep array": _case_spec_deep_array,
    "spec 5000-part dotted key": _case_spec_dotted_key,
    "spec 5000-digit int": _case_spec_huge_int,
    "spec signed threshold -inf": _case_spec_nan_signed_threshold,
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_hostile_input_is_one_line_exit_2(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv, env, words = CASES[case](tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("causalfair "), err
    assert "Traceback" not in err, err
    for word in words:
        assert word in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "an output was written"


def test_spec_with_byte_order_mark_is_read(tmp_path, monkeypatch, capsys):
    """A spec saved with a UTF-8 byte-order mark (Windows editors) audits like without."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, SPEC, encoding="utf-8-sig")
    assert Path(spec).read_bytes().startswith(b"\xef\xbb\xbf")
    code = main(["audit", spec, "--no-report"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "C" in out


@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_gate_output_equal_to_its_spec_is_refused(flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, SPEC)
    code = main(["gate", spec, flag, "./s.toml"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "is also an input" in err and "s.toml" in err, err
    assert Path(spec).read_text(encoding="utf-8") == SPEC


def test_gate_merge_output_equal_to_a_shard_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, SPEC)
    assert main(["gate", spec, "--json", "g.json"]) == 0, capsys.readouterr().err
    shard = (tmp_path / "g.json").read_bytes()
    json.loads(shard)
    capsys.readouterr()
    code = main(["gate-merge", "g.json", "--json", "g.json"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "g.json: is also an input" in err, err
    assert (tmp_path / "g.json").read_bytes() == shard

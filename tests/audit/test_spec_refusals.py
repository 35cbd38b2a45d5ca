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


@pytest.mark.parametrize("engine", [{"kind": "exact", "n": 100}, {"kind": "exact", "seed": 3}])
@pytest.mark.parametrize("section", [{"system": {"id": "lending-1"}}, {"model": {}}])
def test_engine_n_and_seed_are_refused_on_the_exact_engine(engine, section):
    with pytest.raises(SpecError) as err:
        load_spec({"name": "x", "engine": engine} | section)
    msg = str(err.value)
    assert 'not used by the exact engine (kind = "exact":' in msg, msg
    assert 'set [engine] kind = "mc" to audit by Monte Carlo with this' in msg, msg


def test_engine_n_and_seed_are_kept_where_they_count():
    spec = load_spec({"name": "x", "system": {"id": "lending-1"},
                      "engine": {"kind": "mc", "n": 100, "seed": 3}})
    assert (spec.n, spec.seed) == (100, 3)
    for section in ({"system": {"id": "lending-1"}}, {"model": {}}):  # kind not written:
        spec = load_spec({"name": "x", "engine": {"n": 100}} | section)  # the system's
        assert spec.n == 100  # engine (Monte Carlo on a system passed to cf.audit(system=))


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


# ------------------------------------------------------------- the gate's invalid specs
GOOD = 'name="c"\n[system]\nid="lending-1"\n[thresholds]\nabs_C = 0.5\n'
BAD = {  # each found before any audit: its message
    "sub/h.toml": ('name="h"\n[system]\nid="lending-1"\n[thresholds]\n"abs_C[a-b]" = 0.5\n',
                   "audit spec sub/h.toml: [thresholds] abs_C[a-b]: 'a-b' names no two groups"),
    "sub/f.toml": ('name="f"\n[system]\nid="lending-1"\n[policy]\nbuiltin="threshold:2"\n'
                   '[thresholds]\nabs_C = 0.5\n', "audit spec sub/f.toml: [policy] builtin: "),
    "d.toml": ('name="d"\n[system]\nid="lending-1"\n',
               "audit spec d.toml: [thresholds]: missing"),
    "b.toml": ('name="b"\n[system]\nid="lending-1"\n[thresholds]\nabs_c = 0.5\n',
               "audit spec b.toml: [thresholds] abs_c: unknown key"),
}


def test_the_gate_lists_invalid_specs_in_order_named_as_given(tmp_path, monkeypatch, capsys):
    """Build-time errors (a pair the system lacks, a bad built-in) and parse-time errors
    (no [thresholds], an unknown key) are listed in the order of the command line, each spec
    named as given (relative), none as 'the audit failed', before any spec is audited."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "c.toml", GOOD)
    for f, (text, _) in BAD.items():
        _write(tmp_path / f, text)
    assert main(["gate", "c.toml", *BAD, "--json", "g.json", "--junit", "g.xml"]) == 2
    err = capsys.readouterr().err
    assert f"4 of 5 specs are invalid; the first: {BAD['sub/h.toml'][1]}" in err, err
    assert str(tmp_path) not in err and "the audit failed" not in err, err
    lines = err.strip().splitlines()
    assert [line.split(": error: ", 1)[1][:len(msg)] for line, msg in
            zip(lines[1:], [m for _, m in BAD.values()][1:], strict=True)] == \
        [m for _, m in BAD.values()][1:], lines
    doc = json.loads((tmp_path / "g.json").read_text())
    assert [(e["spec"], e["name"]) for e in doc["specs"]] == [(f, f.split("/")[-1][0])
                                                             for f in BAD]
    for e, (_, msg) in zip(doc["specs"], BAD.values(), strict=True):
        assert e["error"].startswith(msg) and str(tmp_path) not in e["error"], e
    xml = (tmp_path / "g.xml").read_text()
    assert str(tmp_path) not in xml
    assert [xml.index(f'message="{m}') for _, m in BAD.values()] == sorted(
        xml.index(f'message="{m}') for _, m in BAD.values())


def test_the_unsharded_json_of_invalid_specs_is_the_merge_of_its_shards(tmp_path, monkeypatch):
    """docs/scale.md: gate-merge reproduces the unsharded gate's JSON bit for bit; a spec
    invalid when built (a.toml) before one invalid when parsed (b.toml) included."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "a.toml", 'name="a"\n[system]\nid="lending-1"\n[policy]\n'
                                'builtin="threshold:2"\n[thresholds]\nabs_C = 0.1\n')
    _write(tmp_path / "b.toml", 'name="b"\n[system]\nid="lending-1"\n[thresholds]\nabs_c = 0.1\n')
    specs = ["a.toml", "b.toml"]
    assert main(["gate", *specs, "--json", "g.json"]) == 2
    for k in (1, 2):
        assert main(["gate", *specs, "--shard", f"{k}/2", "--json", f"s{k}.json", "--junit",
                     f"s{k}.xml"]) == 2
    assert main(["gate-merge", "s1.json", "s2.json", "--junit-in", "s1.xml", "s2.xml",
                 "--json", "m.json"]) == 2
    assert [e["name"] for e in json.loads((tmp_path / "g.json").read_text())["specs"]] == ["a", "b"]
    assert (tmp_path / "g.json").read_bytes() == (tmp_path / "m.json").read_bytes()


# ------------------------------------------------------------- known before the audit runs
INF = 'name="i"\nhorizon=3\n[system]\nid="infectious-1"\n[policy]\nbuiltin="{policy}"\n' \
      '[engine]\nn=20\n[thresholds]\n{thr}\n'


@pytest.mark.parametrize("policy,thr,words", [
    ("never", "tpr_gap = 0.1", ["[thresholds] tpr_gap: the quantity 'tpr_gap' is not available",
                                "needs a tabular model", "available: abs_C,", "elbert_bias)"]),
    ("uniform", "abs_C = 0.1", ["[policy] builtin: 'uniform' gives each of the 34 units",
                                "17 in all", "budget is one such action per replica",
                                "use never, a checkpoint or a factory"]),
    ("never", '"abs_C[a-b]" = 0.1', ["[thresholds] abs_C[a-b]: 'a-b' names no two groups"]),
])
def test_the_audit_refuses_before_its_monte_carlo(tmp_path, monkeypatch, capsys, policy, thr,
                                                    words):
    import causalfair.audit.run as run

    def no_run(*_a, **_k):
        raise AssertionError("the Monte Carlo run started")
    monkeypatch.setattr(run, "decompose_mc", no_run)
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "s" / "i.toml", INF.format(policy=policy, thr=thr))
    assert main(["audit", "s/i.toml", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("causalfair audit: error: audit spec s/i.toml: "), err
    assert all(w in err for w in words) and "utility" not in err and "failed" not in err, err


def test_a_reference_that_is_no_group_is_refused_before_the_audit(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "r.toml", 'name="r"\nreference="nobody"\n' + GOOD.split("\n", 1)[1])
    assert main(["gate", "r.toml"]) == 2
    assert "audit spec r.toml: reference: bad value 'nobody'; name one of the groups s+, s-" \
        in capsys.readouterr().err


def test_an_unavailable_quantity_after_the_run_lists_only_threshold_keys():
    from types import SimpleNamespace

    from causalfair.audit.run import _verdicts
    spec = SimpleNamespace(thresholds={"tpr_gap": 0.1}, path=None, label="audit spec")
    q = {k: (0.0, 0.0, 0.0, None) for k in ("C", "DPE", "IPE", "SPE", "utility")}
    with pytest.raises(SpecError, match=r"\(available: abs_C, abs_DPE, abs_IPE, abs_SPE, C, "
                                        r"DPE, IPE, SPE\)\.$"):
        _verdicts(spec, q)


# ------------------------------------------------------------- messages
def test_messages_name_the_field_the_value_and_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cases = {
        '[thresholds]\n"tpr_gap[s+-s-]" = 0.1\n':
            "[thresholds] tpr_gap[s+-s-]: 'tpr_gap' cannot address a pair; keys that can: "
            "abs_C, abs_DPE, abs_IPE, abs_SPE, C, DPE, IPE, SPE, Lambda, min_ratio_V, "
            "min_ratio_selection (write key[A-B], or a table [thresholds.KEY] with \"A-B\" = "
            "value).",
        "[benefit]\neps = -1\n":
            "[benefit] eps: bad value -1; allowed values: a number > 0 (in the gain's units) "
            "or \"auto\" (scale-free; docs/decomposition.md).",
    }
    for extra, msg in cases.items():
        _write(tmp_path / "m.toml", HEAD + extra)
        assert main(["audit", "m.toml", "--no-report"]) == 2
        assert capsys.readouterr().err.strip() == f"causalfair audit: error: audit spec m.toml: {msg}"


def test_a_missing_module_names_the_folder_looked_in_not_an_option(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "rel.toml", HEAD + "[thresholds]\nabs_C = 0.5\n")
    assert main(["audit", "rel.toml", "--baseline", "nonsense:1", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "--search-path" not in err and f"put nonsense.py in {tmp_path} or install" in err, err


def test_a_gym_key_the_env_refuses_is_named_as_the_spec_writes_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "envs.py", """
        import gymnasium as gym
        import numpy as np

        class Env(gym.Env):
            observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
            action_space = gym.spaces.Discrete(2)

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.g = (options or {}).get("group", 0)
                return np.zeros(1, dtype=np.float32), {"group": self.g}

            def step(self, action):
                return np.zeros(1, dtype=np.float32), 0.0, False, False, {"gain": 0.0}

        def make():
            return Env()
        """)
    _write(tmp_path / "g.toml", 'name="g"\nhorizon=2\n[system]\ngym="envs:make"\n'
                                'groups=["a","b"]\nbaseline=5\n[thresholds]\nabs_C=1\n')
    assert main(["audit", "g.toml", "--no-report"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("causalfair audit: error: audit spec g.toml: [system] baseline: must be an "
                   "action index in [0, 2), got 5."), err


@pytest.mark.parametrize("line,words", [
    ('"abs_C[s+-sX]" = 0.5', "[thresholds] abs_C[s+-sX]: 's+-sX' names no two groups; name "
                              "two of the groups s+, s-"),
    ('reference = "nobody"', "reference: bad value 'nobody'; name one of the groups s+, s-"),
])
def test_a_logs_spec_naming_no_group_of_its_log_is_refused_before_the_fit(
        tmp_path, monkeypatch, capsys, line, words):
    """The groups a [logs] spec names are checked against its log before the fit and the
    bootstrap (which took 8 s on 3,000 individuals and 2,000 replicates before the refusal)."""
    import causalfair.audit.run as run
    from causalfair.logs import simulate_logs
    from causalfair.systems import make

    simulate_logs(make("lending-1"), "random:0.5", 200, 3, seed=0).to_csv(
        tmp_path / "log.csv", index=False)

    def no_fit(*_a, **_k):
        raise AssertionError("the log audit started")
    monkeypatch.setattr(run, "audit_logs", no_fit)
    monkeypatch.chdir(tmp_path)
    top, rest = (line + "\n", "") if line.startswith("reference") else ("", line + "\n")
    _write(tmp_path / "l.toml", f'name = "l"\n{top}[logs]\npath = "log.csv"\nn_boot = 20\n'
                                f"[thresholds]\n{rest}")
    assert main(["audit", "l.toml", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("causalfair audit: error: audit spec l.toml: "), err
    assert words in err, err


def test_the_commands_an_error_suggests_quote_their_paths(tmp_path):
    # before: "`causalfair audit --reproduce my dir`" and "`causalfair decompose --logs my
    # logs.csv ...`": pasted into a shell, the path split into two arguments
    import shlex

    from tests.conftest import one_line_error, run_cli

    (tmp_path / "my dir").mkdir()
    (tmp_path / "my dir" / "audit.json").write_text("{}", encoding="utf-8")
    err = one_line_error(run_cli("audit", "my dir", cwd=tmp_path))
    assert "`causalfair audit --reproduce 'my dir'`" in err, err
    run_cli("simulate-logs", "--setting", "lending-1", "--n", "200", "--horizon", "2",
            "--out", "my logs.csv", cwd=tmp_path, expect=0)  # threshold:0.5: positivity fails
    (tmp_path / "s.toml").write_text('name = "l"\n[logs]\npath = "my logs.csv"\nn_boot = 5\n',
                                     encoding="utf-8")
    err = one_line_error(run_cli("audit", "s.toml", "--no-report", cwd=tmp_path))
    cmd = err.split("for bounds on this log run `", 1)[1].split("`", 1)[0]
    assert shlex.split(cmd)[:4] == ["causalfair", "decompose", "--logs", "my logs.csv"], cmd

"""User code can never pass or crash a gate: a factory, a simulator method or a policy
that raises or exits is a one-line error naming the spec and the callable (exit 2, a
JUnit <error>, an ERROR entry in the JSON, the other specs' verdicts kept), its traceback
in .causalfair/logs/ or on stderr with --debug; a simulator that breaks the contract
after the sampled check is refused; factories may import their siblings lazily; a spec
that is not UTF-8 is a one-line error."""

from __future__ import annotations

import json
import os
import pickle
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.cli import main
from causalfair.errors import SimulatorContractError, UserCodeError
from tests.conftest import describe, run_cli

ROOT = Path(__file__).resolve().parents[1]

SIM = '''
import sys
import numpy as np
from causalfair.policies.core import Observation
from causalfair.systems.simulator import StepResult

MODE = {mode!r}


class State:
    def __init__(self, x, g, t):
        self.x, self.g, self.t = x, g, t


class Sim:
    n_groups = 2
    feature_names = ("x",)
    horizon = 8

    def reset(self, n, group, rng):
        return State(rng.random(n) + 0.2 * np.asarray(group), np.full(n, group), 0)

    def observe(self, s):
        f = s.x[:, None].copy()
        if MODE == "late_nan" and s.t >= 5:
            f[:] = np.nan
        return Observation(group=s.g, features=f, t=s.t)

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, noise):
        if MODE == "step_raises":
            raise ValueError("boom in step")
        gain = 0.1 * d + 0.01 * noise
        nxt = State(s.x + gain, s.g, s.t + 1)
        if MODE == "lists":
            return StepResult(state=nxt, gain=list(gain), reward=list(d * 1.0))
        return StepResult(state=nxt, gain=gain, reward=d * 1.0)


def make():
    if MODE == "factory_exits":
        sys.exit(0)
    if MODE == "factory_kills":  # tests/audit/test_gate_checks.py
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    if MODE == "factory_hangs":
        import time
        time.sleep(120)
    return Sim()


class FeatPolicy:
    name = "feat"

    def prob_d1(self, obs):
        if MODE == "policy_raises":
            raise RuntimeError("policy boom")
        return (obs.features[:, 0] > 0.5).astype(float)


def policy():
    if MODE == "policy_factory_exits":
        sys.exit(0)
    if MODE == "policy_factory_raises":
        raise ValueError("bad policy factory")
    return FeatPolicy()
'''

SPEC = '''name = "{name}"
[system]
factory = "{module}:make"
[policy]
factory = "{module}:policy"
[engine]
kind = "mc"
n = 60
[thresholds]
abs_C = 5.0
'''


def write(folder: Path, name: str, mode: str = "") -> Path:
    """A spec ``name.toml`` whose system and policy come from a module ``m_name`` in
    ``folder`` behaving as ``mode`` says."""
    module = f"m_{name}_{abs(hash(str(folder))) % 10**8}"
    (folder / f"{module}.py").write_text(SIM.format(mode=mode))
    spec = folder / f"{name}.toml"
    spec.write_text(SPEC.format(name=name, module=module))
    return spec


@pytest.fixture
def work(tmp_path, monkeypatch):
    """Specs in tmp_path/specs; the working directory is tmp_path/run (not the specs'
    folder, so nothing is importable by accident)."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")
    before = set(sys.modules)
    yield tmp_path
    for m in set(sys.modules) - before:
        if m.startswith(("m_", "sib_")):
            sys.modules.pop(m, None)


def gate(*args: str) -> list[str]:
    return ["gate", *args]


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("causalfair ")]


def check_junit_error(path: Path, spec_name: str) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.get("errors") == "1", ET.tostring(root, encoding="unicode")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    erred = [n for n, s in suites.items() if s.find("testcase/error") is not None]
    # named by the spec's name, as when it runs (CI keys a test's history on it)
    assert [n.removeprefix("spec ") for n in erred] == [spec_name], \
        ET.tostring(root, encoding="unicode")
    return root


def test_sys_exit_in_a_system_factory_is_exit_2_with_junit_and_json(work):
    """The process as CI runs it: exit 2 (never 0), one line naming the spec and the
    factory, a JUnit <error> and the JSON summary."""
    spec = write(work / "specs", "ex", "factory_exits")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = run_cli("gate", spec, "--junit", "g.xml", "--json", "g.json", cwd=work / "run",
                   env=env, timeout=120, expect=2)
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, describe(proc)
    assert str(spec) in lines[0] and "system factory" in lines[0], describe(proc)
    assert "called sys.exit(0)" in lines[0], describe(proc)
    check_junit_error(work / "run" / "g.xml", "ex")
    doc = json.loads((work / "run" / "g.json").read_text())
    assert doc["exit_code"] == 2 and doc["specs"][0]["overall"] == "ERROR", doc


@pytest.mark.parametrize("mode,needle", [
    ("policy_factory_exits", "[policy] factory 'm_"),
    ("policy_factory_raises", "raised ValueError: bad policy factory"),
])
def test_a_policy_factory_that_exits_or_raises_is_an_error_of_its_spec(work, capsys, mode,
                                                                      needle):
    spec = write(work / "specs", "pf", mode)
    assert main(gate(str(spec), "--junit", "g.xml", "--json", "g.json")) == 2
    err = capsys.readouterr().err
    lines = error_lines(err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"causalfair gate: error: audit spec {spec}: [policy] factory"), err
    assert needle in lines[0], err
    check_junit_error(work / "run" / "g.xml", "pf")
    assert json.loads(Path("g.json").read_text())["specs"][0]["overall"] == "ERROR"


def test_a_module_running_argparse_at_import_is_never_a_pass(work, capsys):
    spec = write(work / "specs", "ap")
    mod = spec.read_text().split('factory = "')[1].split(":")[0]
    (work / "specs" / f"{mod}.py").write_text(
        "import argparse\nargparse.ArgumentParser(prog='tool').parse_args(['--help'])\n")
    assert main(gate(str(spec), "--junit", "g.xml")) == 2
    err = capsys.readouterr().err
    assert "called sys.exit(0)" in error_lines(err)[-1], err
    check_junit_error(work / "run" / "g.xml", "ap")


def test_a_policy_that_raises_when_called_keeps_the_other_specs_verdicts(work, capsys):
    ok = write(work / "specs", "ok")
    bad = write(work / "specs", "pr", "policy_raises")
    assert main(gate(str(ok), str(bad), "--junit", "g.xml", "--json", "g.json")) == 2
    err = capsys.readouterr().err
    lines = error_lines(err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"audit spec {bad}" in lines[0] and "policy FeatPolicy.prob_d1 raised RuntimeError: " \
        "policy boom" in lines[0], err
    doc = json.loads(Path("g.json").read_text())
    assert [(s["name"], s["overall"]) for s in doc["specs"]] == [("ok", "PASS"), ("pr", "ERROR")]
    assert doc["specs"][0]["verdicts"] and doc["exit_code"] == 2
    root = check_junit_error(work / "run" / "g.xml", "pr")
    assert root.get("tests") == "2"


def test_with_two_jobs_a_crashed_spec_keeps_the_others_verdicts(work, capsys):
    ok = write(work / "specs", "ok2")
    bad = write(work / "specs", "sr", "step_raises")
    assert main(gate(str(ok), str(bad), "--jobs", "2", "--junit", "g.xml",
                     "--json", "g.json")) == 2
    err = capsys.readouterr().err
    assert "simulator Sim.step raised ValueError: boom in step" in err, err
    doc = json.loads(Path("g.json").read_text())
    assert [(s["name"], s["overall"]) for s in doc["specs"]] == [("ok2", "PASS"), ("sr", "ERROR")]
    assert doc["specs"][0]["verdicts"][0]["key"] == "abs_C"
    check_junit_error(work / "run" / "g.xml", "sr")


def test_a_step_that_raises_under_audit_and_decompose_is_one_line(work, capsys):
    spec = write(work / "specs", "au", "step_raises")
    assert main(["audit", str(spec), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"audit spec {spec}" in err and "simulator Sim.step raised ValueError" in err, err
    log = Path(err.split("(traceback: ")[1].split(";")[0])
    assert 'raise ValueError("boom in step")' in log.read_text()
    mod = spec.read_text().split('factory = "')[1].split(":")[0]
    args = ["decompose", "--system", f"{mod}:make", "--search-path", str(work / "specs"),
            "--policy", "always", "--n", "50"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "simulator Sim.step raised ValueError: boom in step" in err, err
    assert main(["--debug", *args]) == 2  # --debug prints the user's traceback
    err = capsys.readouterr().err
    assert 'raise ValueError("boom in step")' in err and "Traceback" in err, err


def test_a_step_that_returns_lists_is_refused_naming_the_field(work, capsys):
    spec = write(work / "specs", "li", "lists")
    assert main(["audit", str(spec), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "simulator Sim.step: StepResult.gain is a list; return a numpy array" in err, err


def test_a_contract_broken_after_the_sampled_check_is_refused(work, capsys):
    """Observations turn NaN at step 5 (the sampled check runs 3 steps): refused, not
    silently audited."""
    spec = write(work / "specs", "late", "late_nan")
    assert main(["audit", str(spec), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "simulator Sim.observe: NaN states: Observation.features" in err, err


def test_the_guard_checks_every_call_pickles_and_keeps_the_numbers(work):
    spec = write(work / "specs", "gd")
    mod = spec.read_text().split('factory = "')[1].split(":")[0]
    system = cf.systems.make(f"{mod}:make", search_path=work / "specs")
    sim = system.make_simulator()
    assert type(sim).__name__ == "Sim" and sim.feature_names == ("x",)
    again = pickle.loads(pickle.dumps(sim))
    assert type(again).__name__ == "Sim"
    raw = sys.modules[mod].Sim()
    state = sim.reset(5, 0, np.random.default_rng(1))
    state.g = state.g[:4]
    with pytest.raises(SimulatorContractError, match=r"Sim.observe: wrong shape: "
                       r"Observation.features has shape \(5, 1\), expected \(4, F\)"):
        sim.observe(state)
    pol = sys.modules[mod].FeatPolicy()
    a = cf.decompose_mc(system, pol, 4, n=40, seed=3)
    b = cf.decompose_mc(cf.as_system(raw, id="raw"), pol, 4, n=40, seed=3)
    assert a.C == b.C and a.se == b.se


def test_factories_may_import_their_siblings_lazily(work, capsys):
    specs = work / "specs"
    (specs / "sib_helpers.py").write_text(SIM.format(mode=""))
    (specs / "lazyf.py").write_text(textwrap.dedent("""
        def make():
            import sib_helpers
            return sib_helpers.Sim()

        def policy():
            import sib_helpers
            return sib_helpers.FeatPolicy()
    """))
    (specs / "lz.toml").write_text(SPEC.format(name="lz", module="lazyf"))
    try:
        system = cf.systems.make("lazyf:make", search_path=specs)
        assert system.features == ("x",)
        assert str(specs) not in sys.path
        sys.modules.pop("sib_helpers", None)
        assert main(["audit", str(specs / "lz.toml"), "--no-report"]) == 0, \
            capsys.readouterr().err
    finally:
        sys.modules.pop("lazyf", None)


def test_a_spec_that_is_not_utf8_is_one_line_naming_the_byte(work, capsys):
    spec = work / "specs" / "latin.toml"
    spec.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    for cmd in (["audit", str(spec), "--no-report"], ["gate", str(spec)]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert f"audit spec {spec}: not UTF-8 text (byte 11" in err, err


def test_user_code_error_from_the_api_keeps_the_traceback(work):
    spec = write(work / "specs", "api", "policy_factory_raises")
    with pytest.raises(UserCodeError, match=r"\[policy\] factory 'm_api_\d+:policy' raised "
                       r"ValueError: bad policy factory") as err:
        cf.audit(spec)
    assert 'raise ValueError("bad policy factory")' in err.value.traceback_text

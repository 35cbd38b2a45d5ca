"""A newcomer's first hour (README, docs/own-system.md): the mistakes one makes writing a
first simulator each give one line naming the fix, and the README/docs say what a newcomer
needs to read the numbers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.systems.simulator import StepResult

ROOT = Path(__file__).resolve().parents[1]


class _Sim:
    """A first simulator as docs/own-system.md asks for it: four levels, two groups."""

    n_groups = 2
    group_names = ("A", "B")
    n_levels = 4
    horizon = 3

    def reset(self, n, group, rng):
        g = np.broadcast_to(np.asarray(group), (n,)).astype(int)
        return {"lvl": rng.integers(0, 4, n), "g": g, "t": 0}

    def observe(self, s):
        return cf.Observation(group=s["g"], level=s["lvl"], t=s["t"])

    def draw_noise(self, n, rng):
        return rng.random(n)

    def step(self, s, d, u):
        up = (u < 0.3 + 0.4 * np.asarray(d)).astype(int)
        lvl = np.clip(s["lvl"] + 2 * up - 1, 0, 3)
        return StepResult(state={"lvl": lvl, "g": s["g"], "t": s["t"] + 1},
                          reward=np.asarray(d, float) * (2 * up - 1),
                          gain=(lvl - s["lvl"]).astype(float), info={})


class _NamesInObserve(_Sim):
    """The mistake: the group's name where causalfair wants its index."""

    def observe(self, s):
        return cf.Observation(group=np.array(self.group_names)[s["g"]], level=s["lvl"], t=s["t"])


class _NamesInState(_Sim):
    """The same mistake made in reset: the state keeps names."""

    def reset(self, n, group, rng):
        g = np.array(self.group_names)[np.broadcast_to(np.asarray(group), (n,))]
        return {"lvl": rng.integers(0, 4, n), "g": g, "t": 0}


def test_first_simulator_audits():
    res = cf.decompose(_Sim(), "random:0.5", n=2000, seed=0)
    assert res.C == pytest.approx(res.DPE + res.IPE + res.SPE, abs=1e-12)


@pytest.mark.parametrize("sim", [_NamesInObserve(), _NamesInState()], ids=["observe", "reset"])
def test_groups_as_strings_name_the_fix(sim):
    """Groups given by name (the strings 'A', 'B') were refused as 'observations of other
    groups', which does not say what to change."""
    from causalfair.engines.montecarlo import check_simulator
    from causalfair.systems.contract import SimulatorContractError

    with pytest.raises(SimulatorContractError) as exc:
        check_simulator(sim)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "Observation.group" in msg and "'A'" in msg
    assert "integer" in msg and "group_names" in msg


def _readme_before_quick_start() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[: text.index("## Quick start")]


@pytest.mark.parametrize("term", ["pi0", "pi^PS", "DPE", "IPE", "SPE", "Delta", "Lambda",
                                  "pair", "gain"])
def test_readme_explains_each_term_before_the_quick_start_uses_it(term):
    """The quick start and the CLI's output use pi0, pi^PS, pair, Lambda; the README named
    them without saying what they are (pi0, pi^PS and pair not at all)."""
    head = _readme_before_quick_start()
    m = re.search(r"^\*\*Terms\*\*.*?(?=^$)", head, re.S | re.M)
    assert m, "README: a **Terms** paragraph before the quick start"
    terms = m.group(0)
    assert re.search(rf"(^|[\s(*]){re.escape(term)}\b(\(x, s\))?.{{0,3}}[:=]", terms), term
    assert "docs/decomposition.md" in terms


def test_main_job_says_what_the_numbers_mean(capsys):
    """README's first command printed C, DPE, IPE, SPE and Lambda bare: a newcomer could
    not tell which is the direct effect, nor where they are explained."""
    from causalfair.cli import main

    assert main(["decompose", "--setting", "lending-1", "--policy", "threshold:0.5"]) == 0
    out = capsys.readouterr().out
    tail = out[out.index("Worst pairs"):]
    for word in ("DPE", "IPE", "SPE", "Lambda", "docs/decomposition.md"):
        assert word in tail, word
    assert "wrote" not in out  # it writes nothing, and says so
    assert "nothing written" in out.lower()


@pytest.mark.parametrize("argv,hint", [
    (["decompose", "--horzon", "3"], "did you mean --horizon?"),
    (["decompose", "--setting", "lendng-1"], "did you mean lending-1?"),
    (["graph", "--sytem", "lending-1"], "did you mean --system?"),
    (["decompos"], "did you mean decompose?"),
])
def test_a_typo_costs_two_lines_not_a_screen(capsys, argv, hint):
    """A misspelled flag printed the command's whole usage (25 lines for decompose) above
    the one line that says what to fix."""
    from causalfair.cli import main

    with pytest.raises(SystemExit) as ex:
        main(argv)
    assert ex.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"usage: causalfair {argv[0] if argv[0] != 'decompos' else ''}")
    assert "--help" in lines[0] or argv[0] == "decompos"
    assert lines[1].startswith("causalfair") and hint in lines[1], lines


def test_a_module_named_without_its_factory_names_the_factory(tmp_path, monkeypatch):
    """`--system clinic` with clinic.py right there said only 'unknown id' and the 13
    registered ids; the fix is one word away."""
    (tmp_path / "clinic.py").write_text(
        "import causalfair\n\ndef _helper():\n    pass\n\ndef make_clinic(levels=5):\n"
        "    raise RuntimeError('not called: the message reads the file, it runs nothing')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cf.SystemError_) as exc:
        cf.systems.make("clinic")
    assert "Did you mean 'clinic:make_clinic'?" in str(exc.value)
    with pytest.raises(cf.SystemError_) as exc:
        cf.systems.make("lendng-1")
    assert "Did you mean 'lending-1'?" in str(exc.value)


def test_a_factory_parameter_left_out_names_how_to_give_it(tmp_path, monkeypatch):
    """A factory `make(levels)` called without levels said only 'raised TypeError: make()
    missing 1 required positional argument', as if the factory were broken."""
    (tmp_path / "req.py").write_text(
        "def make(levels, *, rate=0.5):\n    raise RuntimeError('not reached')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cf.SystemError_) as exc:
        cf.systems.make("req:make", search_path=tmp_path)
    msg = str(exc.value)
    assert "'levels'" in msg and "--param levels=" in msg and "params" in msg, msg
    assert "rate" not in msg.split("needs")[-1].split(";")[0], msg  # rate has a default
    assert "\n" not in msg


def test_docs_quote_the_string_group_refusal_as_raised():
    from causalfair.systems.contract import SimulatorContractError, check_observation

    MySim = type("MySim", (), {"n_groups": 2})
    obs = cf.Observation(group=np.array(["A", "B"]), level=np.array([0, 1]))
    with pytest.raises(SimulatorContractError) as exc:
        check_observation(MySim(), obs, 2, "observe")
    text = (ROOT / "docs" / "simulators.md").read_text(encoding="utf-8")
    assert str(exc.value) in text.splitlines()


@pytest.mark.parametrize("page", ["graph.md", "simulators.md", "own-system.md", "limits.md"])
def test_newcomer_pages_point_at_what_the_repository_ships(page):
    """docs/graph.md and docs/simulators.md sent the reader to 'method.md' and 'lending.md',
    the team's spec files, which the repository does not contain; docs/decomposition.md
    holds the definitions."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    for name in ("method.md", "lending.md", "architecture.md", "style.md"):
        assert name not in text or (ROOT / "docs" / name).is_file(), (page, name)


@pytest.mark.parametrize("command", ["decompose", "graph"])
def test_policy_help_names_the_built_ins(capsys, command):
    """`--policy` said 'a built-in policy (...; causalfair.policies.core.BUILTIN_POLICIES)':
    a Python dict a command-line user cannot read; now the names themselves."""
    from causalfair.cli import main
    from causalfair.policies.core import BUILTIN_POLICIES

    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    help_ = out[out.index("--policy POLICY"):]
    for name in BUILTIN_POLICIES:
        assert name in help_, name
    assert "BUILTIN_POLICIES" not in out

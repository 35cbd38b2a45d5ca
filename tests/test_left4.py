"""Four review defects: network subclasses that read ``obs.t``, worker output to a gone
reader, ``sweep --force`` over a ``runs`` that is not a folder, ``DecisionSet.allowed``
in docs/own-system.md."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from causalfair import cli
from causalfair.engines import effects
from causalfair.policies.core import FeatureEncoding, Observation, TorchPolicy
from causalfair.policies.grid import GridTabulated, engine_policy, grid_observation, policy_table
from causalfair.systems.registry import make
from tests.conftest import failing_simulator

T = 5


def _net_policy(cls):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m = make("lending-1").tabular
    enc = FeatureEncoding("onehot", n_levels=m.n_levels, n_groups=m.n_groups)
    return cls(torch.nn.Linear(m.n_levels + m.n_groups, 1), enc)


class LateFlip(TorchPolicy):
    """A user's network policy that reads t: the network's decision before t = 2, the
    other decision from then on."""

    def action_probs(self, obs):
        p = super().action_probs(obs)
        return p if (obs.t or 0) < 2 else p[:, ::-1].copy()


def test_network_subclass_reading_t_is_evaluated_at_every_epoch():
    system = make("lending-1")
    m = system.tabular
    pol = _net_policy(LateFlip)
    by_t = np.stack([pol.prob_d1(grid_observation(m, t)).reshape(m.n_groups, m.n_levels)
                     for t in range(T)])
    assert not np.allclose(by_t[0], by_t[3])  # the policy does read t
    assert np.array_equal(policy_table(pol, m, T), by_t)
    a, b = effects.decompose(m, pol, T), effects.decompose(m, by_t, T)
    assert (a.C, a.DPE, a.IPE, a.SPE) == (b.C, b.DPE, b.IPE, b.SPE)
    # the Monte Carlo engine shows it t too (not one table filled at the first epoch)
    ev = engine_policy(pol, system, 2, horizon=T)
    cells = Observation(group=np.repeat(np.arange(m.n_groups), m.n_levels),
                        level=np.tile(np.arange(m.n_levels), m.n_groups), t=0)
    ev.prob_d1(cells)
    later = Observation(group=cells.group, level=cells.level, t=3)
    assert np.allclose(ev.prob_d1(later), by_t[3].ravel(), atol=1e-7)


def test_network_class_itself_is_still_evaluated_once():
    system = make("lending-1")
    pol = _net_policy(TorchPolicy)
    assert policy_table(pol, system.tabular, T).shape == (2, 7)
    assert isinstance(engine_policy(pol, system, 2), GridTabulated)


# ------------------------------------------------ a worker's prints, its reader gone

CHATTY_STEP = '''
print("stepping", flush=True)
print("stepping on stderr", file=__import__("sys").stderr)
up = (d == 1) * (noise < 0.5)
return cf.StepResult(state=(np.minimum(s[0] + up, 2), s[1]), reward=1.0 * up, gain=1.0 * up)
'''


def test_worker_prints_to_a_gone_reader_are_dropped_not_an_error(tmp_path):
    """``causalfair gate A B --jobs 2 2>&1 | head -1`` with a simulator that prints: the
    workers' output goes to the driver's stderr, whose reader has gone."""
    (tmp_path / "chatty.py").write_text(failing_simulator(CHATTY_STEP, cls="Chatty"))
    specs = []
    for name in ("a", "b"):
        spec = tmp_path / f"{name}.toml"
        spec.write_text(f'name = "{name}"\nhorizon = 3\n[system]\nfactory = "chatty:make"\n'
                        '[policy]\nbuiltin = "random:0.5"\n[engine]\nkind = "mc"\nn = 200\n'
                        'seed = 0\n[thresholds]\nabs_C = 1.0\n')
        specs.append(str(spec))
    out = tmp_path / "gate.json"
    proc = subprocess.Popen([sys.executable, "-m", "causalfair", "gate", *specs, "--jobs", "2",
                             "--json", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=tmp_path)
    proc.stdout.close()  # the reader leaves before the first line: `2>&1 | head -0`
    rc = proc.wait(timeout=120)
    doc = out.read_text() if out.is_file() else "(no JSON written)"
    # (the command's stdout and stderr went to the closed pipe: its JSON is what it said)
    assert rc == 0, f"exit {rc}; --json: {doc}"
    assert [s["overall"] for s in json.loads(doc)["specs"]] == ["PASS", "PASS"], doc


# ------------------------------------------------ sweep --force over a runs that is not a folder


def _sweep_folder(tmp_path, runs_kind):
    """A sweep folder (marked as causalfair's) whose ``runs`` is RUNS_KIND: a link to a
    folder outside it, a file, or a real folder holding a link to the outside."""
    out, outside = tmp_path / "sweep", tmp_path / "mine"
    out.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("a user's file")
    (out / ".causalfair-sweep").touch()
    (out / "runs.csv").write_text("system,algo,seed,wall_s\n")
    if runs_kind == "link":
        (out / "runs").symlink_to(outside, target_is_directory=True)
    elif runs_kind == "file":
        (out / "runs").write_text("not a folder")
    else:
        (out / "runs").mkdir()
        (out / "runs" / "lending-1").symlink_to(outside, target_is_directory=True)
    return out, outside


@pytest.mark.parametrize(("runs_kind", "mode"), [("link", "--force"), ("file", "--force"),
                                                 ("nested", "--resume")])
def test_sweep_refuses_a_runs_that_is_not_its_folder(tmp_path, capsys, runs_kind, mode):
    out, outside = _sweep_folder(tmp_path, runs_kind)
    rc = cli.main(["sweep", "--algo", "ppo", "--seeds", "0", "--iterations", "1",
                   "--out", str(out), mode])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "\n" not in err and "Traceback" not in err, err
    assert ("is a file" if runs_kind == "file" else "is a symbolic link") in err, err
    assert "choose another --out" in err, err
    assert (outside / "keep.txt").read_text() == "a user's file"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]  # nothing written there
    assert (out / "runs").is_symlink() == (runs_kind == "link")


# ------------------------------------------------ DecisionSet.allowed in docs/own-system.md


def test_own_system_doc_states_the_allowed_refusal_as_the_engines_give_it():
    """docs/own-system.md gives the refusal's shape (NAME, A, LABEL, P, WHERE, ...
    placeholders); the exact and Monte Carlo engines' messages have that shape."""
    import dataclasses
    import re
    from pathlib import Path

    import causalfair as cf

    text = (Path(__file__).resolve().parents[1] / "docs" / "own-system.md").read_text()
    shape = re.search(r"`(policy 'NAME': gives action .*?)`", " ".join(text.split()))
    assert shape, "docs/own-system.md does not give the DecisionSet.allowed refusal"
    holes = {"NAME": r"[^']+", "LABEL": r"[^']+", "WHERE": r"[^)]+", "...": r".+",
             "A": r"\d+", "P": r"[0-9.e-]+"}
    parts = re.split(r"(NAME|LABEL|WHERE|\.\.\.|\bA\b|\bP\b)", shape.group(1))
    pattern = "".join(holes[p] if i % 2 else re.escape(p) for i, p in enumerate(parts))
    system = make("lending-1")
    held = dataclasses.replace(system, decisions=dataclasses.replace(system.decisions,
                                                                     allowed=(0,)))
    for engine in ("exact", "mc"):
        with pytest.raises(cf.PolicyError) as info:
            cf.decompose(held, "random:0.5", 3, engine=engine, n=200)
        assert re.fullmatch(pattern, str(info.value)), (pattern, str(info.value))


def test_pi0_itself_is_audited_on_a_system_whose_allowed_actions_exclude_the_baseline():
    """`never` is pi0, the decomposition's reference: a system's allowed actions bind the
    deployed policy, not the baseline (attention-1 allows actions 1..7 only; its baseline
    0 is 'no attention'). reports/reproduce_seeds.py audits `never` there as a reference."""
    import causalfair as cf
    from causalfair.policies.core import parse_policy

    system = cf.systems.make("attention-1")
    assert system.decisions.baseline not in system.decisions.allowed
    res = cf.decompose_mc(system, parse_policy("never", system), n=64, horizon=3, seed=0)
    assert res.DPE == 0.0 and res.IPE == 0.0 and res.C == res.SPE  # pi = pi0: all spurious

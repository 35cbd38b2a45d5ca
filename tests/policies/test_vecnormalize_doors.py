"""The observation statistics of a stable-baselines3 policy trained behind VecNormalize
reach it through every door that takes a policy besides decompose/graph/simulate-logs
(tests/policies/test_vecnormalize.py): ``causalfair frontier --vecnormalize``, a spec's
``[baseline] vecnormalize``, ``causalfair audit --baseline-vecnormalize``, and
``cf.audit(spec, policy=..., vecnormalize=...)`` / ``baseline_vecnormalize=``. Through each
the numbers are those of ``cf.as_policy(..., vecnormalize=...)``, they differ without the
statistics, a ``.zip`` with a ``vecnormalize.pkl`` beside it is refused naming the option
of that door, and a bad value names its field."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import causalfair as cf
from causalfair.audit.spec import load_spec
from causalfair.cli import main
from causalfair.errors import CausalfairError, PolicyError, SpecError
from tests.policies import test_vecnormalize as vn_tests

#: The SB3 PPO behind VecNormalize on a gym env (folder with ppo.zip, vecnormalize.pkl and
#: the env's module), the fixture of tests/policies/test_vecnormalize.py.
trained = vn_tests.trained

pytest.importorskip("stable_baselines3")

QUANTITIES = ("C", "DPE", "IPE", "SPE", "utility")


# ----------------------------------------------------------------------------- frontier
@pytest.fixture(scope="module")
def lending_zip(tmp_path_factory):
    """(folder, zip, stats.npz): an SB3 PPO on lending's Gymnasium view (9 one-hot inputs),
    untrained with its action logits scaled up so that its decisions depend on the input,
    and statistics under which those inputs read differently; a vecnormalize.pkl sits
    beside the .zip, as SB3 users keep it."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO

    folder = tmp_path_factory.mktemp("vn_lending")
    model = PPO("MlpPolicy", gym.make("causalfair/Lending-v0"), n_steps=16, batch_size=16,
                seed=0, device="cpu", policy_kwargs={"net_arch": [8]})
    with torch.no_grad():
        model.policy.action_net.weight.mul_(300.0)
    model.save(folder / "ppo.zip")
    rng = np.random.default_rng(1)
    np.savez(folder / "stats.npz", mean=rng.uniform(0.0, 1.0, 9), var=rng.uniform(0.01, 0.2, 9),
             epsilon=1e-8, clip_obs=10.0)
    (folder / "vecnormalize.pkl").write_bytes(b"kept beside the model")
    return folder, folder / "ppo.zip", folder / "stats.npz"


def _frontier(capsys, tmp, *args):
    capsys.readouterr()
    rc = main(["frontier", "--setting", "lending-1", "--horizon", "3", "--points", "2",
               "--no-plot", "--out", str(tmp), *map(str, args)])
    err = capsys.readouterr().err
    if rc != 0:
        return rc, err.strip()
    return rc, json.loads((tmp / "frontier.json").read_text())["placed"]


def test_frontier_places_a_normalized_checkpoint_as_the_python_api_does(lending_zip, tmp_path,
                                                                         capsys):
    from causalfair.engines.frontier import frontier

    folder, zip_, npz = lending_zip
    system = cf.systems.make("lending-1")
    rc, placed = _frontier(capsys, tmp_path / "a", "--checkpoint", zip_, "--policy", "always",
                           "--vecnormalize", npz)
    assert rc == 0, placed
    front = frontier(system.tabular, 3, points=2)
    want = front.place({"vn": cf.as_policy(zip_, system, vecnormalize=npz),
                        "raw": cf.as_policy(zip_, system, vecnormalize="none")})
    row = next(r for r in placed if "ppo.zip" in r["policy"])
    for k in ("utility", "C", "DPE"):
        assert row[k] == pytest.approx(want[k].iloc[0], abs=1e-7), k  # json: 8 decimals
    assert abs(want["C"].iloc[0] - want["C"].iloc[1]) > 1e-3  # the statistics matter here
    assert next(r for r in placed if r["policy"] == "always")["C"] == pytest.approx(
        front.place({"always": "always"})["C"].iloc[0], abs=1e-7)  # a built-in takes no statistics
    # without statistics the .zip is refused, naming the option frontier has
    rc, err = _frontier(capsys, tmp_path / "b", "--checkpoint", zip_)
    assert rc == 2 and "\n" not in err, err
    assert "vecnormalize.pkl next to the checkpoint" in err
    assert "pass --vecnormalize PATH, or --vecnormalize none" in err
    rc, err = _frontier(capsys, tmp_path / "c", "--policy", zip_)  # a path in --policy too
    assert rc == 2 and "pass --vecnormalize PATH" in err, err
    rc, raw = _frontier(capsys, tmp_path / "d", "--checkpoint", zip_, "--vecnormalize", "none")
    assert rc == 0 and raw[0]["C"] == pytest.approx(want["C"].iloc[1], abs=1e-7)
    rc, err = _frontier(capsys, tmp_path / "e", "--checkpoint", zip_, "--vecnormalize",
                        folder / "missing.npz")
    assert rc == 2 and "--vecnormalize" in err and "missing.npz: no such file" in err, err
    rc, err = _frontier(capsys, tmp_path / "f", "--policy", "always", "--vecnormalize", npz)
    assert rc == 2 and "--vecnormalize" in err and "only built-ins are placed" in err, err


# ------------------------------------------------------------------ specs and cf.audit
SPEC = """
name = "vn-doors"
horizon = 2
[system]
gym = "vn_scaled:make_env"
groups = ["a", "b"]
[policy]
{policy}
[engine]
kind = "mc"
n = 40
{baseline}
"""
THRESHOLDS = "[baseline.thresholds]\nabs_C = 1.0\nutility = 10.0\n"


def _spec(folder, name, policy='builtin = "always"', baseline=""):
    path = folder / name
    path.write_text(textwrap.dedent(SPEC).format(policy=policy, baseline=baseline))
    return path


def _paired(res):
    """The baseline side of the paired comparison (audit.json's extra.baseline)."""
    return {k: v["baseline"] for k, v in res.extra["baseline"]["quantities"].items()}


def test_a_spec_baseline_takes_its_statistics(trained, capsys, tmp_path):
    folder, *_ = trained
    zip_, pkl = folder / "ppo.zip", folder / "vecnormalize.pkl"
    base = f'[baseline]\ncheckpoint = "ppo.zip"\n{{}}\n{THRESHOLDS}'
    spec = _spec(folder, "b_vn.toml", baseline=base.format('vecnormalize = "vecnormalize.pkl"'))
    res = cf.audit(spec)
    got = _paired(res)
    # the gate reads the spec the same way
    assert main(["gate", str(spec), "--json", str(tmp_path / "gate.json")]) == 0
    gate = json.loads((tmp_path / "gate.json").read_text())["specs"][0]["verdicts"]
    assert [v["estimate"] for v in gate] == [v.estimate for v in res.verdicts]
    bare = _spec(folder, "b_obj.toml", baseline='[baseline]\nbuiltin = "never"\n' + THRESHOLDS)
    want = _paired(cf.audit(bare, baseline=cf.as_policy(zip_, vecnormalize=pkl)))
    assert got == want
    # the same through the Python keyword and through the command line
    assert _paired(cf.audit(bare, baseline=zip_, baseline_vecnormalize=pkl)) == want
    capsys.readouterr()
    assert main(["audit", str(bare), "--no-report", "--json", "--baseline", str(zip_),
                 "--baseline-vecnormalize", str(pkl)]) == 0
    doc = json.loads(capsys.readouterr().out)
    cli = {k: v["baseline"] for k, v in doc["extra"]["baseline"]["quantities"].items()}
    assert cli == pytest.approx(want, abs=1e-12)
    raw = _paired(cf.audit(_spec(folder, "b_raw.toml",
                                 baseline=base.format('vecnormalize = "none"'))))
    assert abs(raw["utility"] - want["utility"]) > 1e-3  # another policy without them
    # without statistics each door refuses, naming its own option
    with pytest.raises(CausalfairError, match=r"\[baseline\]: checkpoint \S*ppo.zip: .*next to the "
                       r"checkpoint.*set \[baseline\] vecnormalize = \"PATH\" in the spec"):
        cf.audit(_spec(folder, "b_bare.toml", baseline=base.format("")))
    with pytest.raises(PolicyError, match="pass baseline_vecnormalize=PATH"):
        cf.audit(bare, baseline=zip_)
    capsys.readouterr()
    assert main(["audit", str(bare), "--no-report", "--baseline", str(zip_)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pass --baseline-vecnormalize PATH, or " \
        "--baseline-vecnormalize none" in err, err


def test_a_policy_passed_to_an_audit_brings_its_own_statistics(trained):
    folder, *_ = trained
    zip_, pkl = folder / "ppo.zip", folder / "vecnormalize.pkl"
    spec = _spec(folder, "p_vn.toml", policy='checkpoint = "ppo.zip"\n'
                 'vecnormalize = "vecnormalize.pkl"')
    own = cf.audit(spec).quantities
    assert cf.audit(spec, policy=zip_, vecnormalize=pkl).quantities == own
    assert cf.audit(spec, policy=cf.as_policy(zip_, vecnormalize=pkl)).quantities == own
    raw = cf.audit(spec, policy=zip_, vecnormalize="none").quantities
    assert abs(raw["utility"][0] - own["utility"][0]) > 1e-3
    # the spec's statistics are its own policy's: a .zip passed in without its own is refused
    with pytest.raises(PolicyError, match="next to the checkpoint.*Python: vecnormalize= of "
                       "cf.as_policy or cf.audit"):
        cf.audit(spec, policy=zip_)
    with pytest.raises(PolicyError, match="already acts on normalized observations"):
        cf.audit(spec, policy=cf.as_policy(zip_, vecnormalize=pkl), vecnormalize=pkl)


def test_bad_statistics_name_the_field(trained, tmp_path):
    folder, *_ = trained
    raw = {"name": "x", "system": {"id": "lending-1"}, "policy": {"builtin": "always"},
           "baseline": {"checkpoint": "ppo.zip", "thresholds": {"abs_C": 1.0}}}
    for value, why in ((3, r"\[baseline\] vecnormalize: bad value 3"),
                       ("gone.pkl", r"\[baseline\] vecnormalize: bad value 'gone.pkl'; no such "
                        "file")):
        raw["baseline"]["vecnormalize"] = value
        with pytest.raises(SpecError, match=why):
            load_spec(raw, base_dir=folder)
    raw["baseline"] = {"builtin": "never", "vecnormalize": "none", "thresholds": {"abs_C": 1.0}}
    with pytest.raises(SpecError, match=r"\[baseline\] vecnormalize: only used with \[baseline\] "
                       "checkpoint"):
        load_spec(raw, base_dir=folder)
    del raw["baseline"]
    spec = load_spec(raw, base_dir=folder)
    with pytest.raises(SpecError, match="vecnormalize: goes with policy="):
        cf.audit(spec, vecnormalize="none")
    with pytest.raises(SpecError, match="baseline_vecnormalize: goes with baseline"):
        cf.audit(spec, baseline_vecnormalize="none")
    with pytest.raises(PolicyError, match=r"vecnormalize: observation statistics apply to a "
                       "stable-baselines3 model"):
        cf.audit(spec, policy="threshold:0.5", vecnormalize=folder / "vecnormalize.pkl")

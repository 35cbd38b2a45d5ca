"""Rough edges a new user meets on the command line: a sweep rerun into its own folder,
warnings raised in gate workers, a mistyped option, ``--junit -``, two specs of one name
in a gate, and the one-line messages of ``systems``, ``simulate-logs`` and a policy's
VecNormalize file."""

from __future__ import annotations

import io
import textwrap

import pytest

from causalfair.cli import main

GYM_ENV = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class Truncating(gym.Env):
        """One individual per env; its episodes end (truncated) after 3 steps."""

        observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,))
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.g = int((options or {}).get("group", 0))
            self.x, self.t = float(self.np_random.normal(-0.5 * self.g)), 0
            return np.array([self.x]), {"group": self.g}

        def step(self, action):
            change = (0.3 if action == 1 else 0.0) + 0.1 * float(self.np_random.normal())
            self.x += change
            self.t += 1
            return np.array([self.x]), 0.0, False, self.t >= 3, {"gain": change}


    def make_env():
        return Truncating()
''')

GYM_SPEC = """name = "{name}"
horizon = 6

[system]
gym = "trunc_env:make_env"
groups = ["a", "b"]
group = "options"
gain = "info:gain"

[policy]
builtin = "uniform"

[engine]
kind = "mc"
n = 8

[thresholds]
C = 50.0
"""

LENDING_SPEC = ('name = "{name}"\nhorizon = 3\n[system]\nid = "lending-1"\n[policy]\n'
                'builtin = "never"\n[thresholds]\nabs_C = 1.0\n')


@pytest.mark.filterwarnings("default")
def test_gate_worker_warnings_come_out_as_the_command_line_s_one_line(tmp_path, monkeypatch,
                                                                     capfd):
    """`gate --jobs 2`: a warning raised in a worker reached the terminal in Python's
    two-line format (file:line: UserWarning: ..., then the source line), not as
    `causalfair gate: warning: ...` as the same audit in this process says it."""
    pytest.importorskip("gymnasium")
    (tmp_path / "trunc_env.py").write_text(GYM_ENV)
    specs = []
    for name in ("one", "two"):
        (tmp_path / f"{name}.toml").write_text(GYM_SPEC.format(name=name))
        specs.append(str(tmp_path / f"{name}.toml"))
    monkeypatch.chdir(tmp_path)
    assert main(["gate", *specs, "--jobs", "2"]) == 0, capfd.readouterr().err
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "truncated" in line]
    assert lines and all(line.startswith("causalfair gate: warning: gym env ") for line in lines), err
    assert "UserWarning" not in err and "warnings.warn(" not in err, err
    assert len(lines) == 1, err  # shown once, as the same warning raised here would be


def test_a_mistyped_option_names_the_command_and_the_closest_option(capsys):
    """`decompose --sytem x` printed the top-level usage and `unrecognized arguments:
    --sytem x`, no command, no suggestion."""
    with pytest.raises(SystemExit) as ex:
        main(["decompose", "--sytem", "x"])
    err = capsys.readouterr().err
    assert ex.value.code == 2, err
    assert err.startswith("usage: causalfair decompose "), err
    last = err.strip().splitlines()[-1]
    assert last == ("causalfair decompose: error: unrecognized argument --sytem; did you mean "
                    "--system? (see causalfair decompose --help)"), err
    with pytest.raises(SystemExit):
        main(["decompse"])
    assert "did you mean decompose?" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["gate", "SPEC", "--junit", "-"],
    ["gate-merge", "in.json", "--junit-in", "in.xml", "--junit", "-"],
])
def test_junit_dash_is_refused_not_written_to_a_file_named_dash(tmp_path, monkeypatch, capsys,
                                                                argv):
    """`--junit -` wrote a file literally named `-` (only `--json -` means stdout)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(LENDING_SPEC.format(name="s"))
    argv = [a.replace("SPEC", "spec.toml") for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"causalfair {argv[0]}: error: --junit: bad value '-'; JUnit XML is written to a " \
           "file" in err, err
    assert not (tmp_path / "-").exists()


def test_gate_merge_json_dash_is_stdout(tmp_path, monkeypatch, capsys):
    """`gate-merge --json -` wrote a file named `-`; as in `gate`, it means stdout."""
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(LENDING_SPEC.format(name="s"))
    assert main(["gate", "spec.toml", "--json", "g.json"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["gate-merge", "g.json", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["specs"][0]["name"] == "s"
    assert not (tmp_path / "-").exists()


def test_two_specs_of_one_name_are_refused_without_reports_too(tmp_path, monkeypatch, capsys):
    """Without --reports, two specs named alike gave a JSON and a JUnit with two entries of
    that name (and gate-merge later refused them as "in two shards")."""
    monkeypatch.chdir(tmp_path)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "spec.toml").write_text(LENDING_SPEC.format(name="same"))
    code = main(["gate", "a/spec.toml", "b/spec.toml", "--json", "g.json"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert "audit spec name: bad value 'same' in a/spec.toml, b/spec.toml" in err, err
    assert "give each spec its own name" in err, err


def test_a_sweep_rerun_needs_resume_or_force_and_resume_trains_only_the_missing_runs(
        tmp_path, capsys):
    """`sweep --out DIR` into its own earlier sweep trained every run again and replaced
    the folder's runs, silently."""
    import pandas as pd

    out = tmp_path / "sw"
    base = ["sweep", "--algo", "ppo", "--iterations", "1", "--set", "n_individuals=64",
            "--set", "audit_n=200", "--out", str(out)]
    assert main([*base, "--seeds", "0"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    first = (out / "runs.csv").read_bytes()
    ck0 = out / "runs" / "lending-1" / "ppo" / "seed-0" / "checkpoint.pt"
    stamp = ck0.stat().st_mtime_ns

    assert main([*base, "--seeds", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"causalfair sweep: error: {out}: holds an earlier sweep; add --resume to "
                   "train only the runs it lacks (its finished runs are kept), or --force to "
                   "train every run again and replace them, or choose another --out."), err
    assert (out / "runs.csv").read_bytes() == first and ck0.stat().st_mtime_ns == stamp

    changed = [a if a != "1" else "2" for a in base]  # --iterations 2: another configuration
    assert main([*changed, "--seeds", "0", "--resume"]) == 2
    assert "was trained with iterations=1, this sweep asks iterations=2" in \
        capsys.readouterr().err

    assert main([*base, "--seeds", "0,1", "--resume"]) == 0, capsys.readouterr().err
    assert "2 runs written" in capsys.readouterr().out
    assert ck0.stat().st_mtime_ns == stamp  # seed 0 kept, not trained again
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs["seed"]) == [0, 1]
    pd.testing.assert_frame_equal(runs.iloc[:1], pd.read_csv(io.BytesIO(first)))

    assert main([*base, "--seeds", "1", "--force"]) == 0, capsys.readouterr().err
    assert not ck0.exists()  # the earlier sweep's runs are replaced
    again = pd.read_csv(out / "runs.csv")
    cols = [c for c in again.columns if c != "wall_s"]
    pd.testing.assert_frame_equal(again[cols], runs[cols].iloc[1:].reset_index(drop=True))


def test_sweep_force_never_removes_a_file_it_did_not_create(tmp_path, capsys):
    # before: `--force` removed the whole earlier runs/ folder, a user's notes in it too
    out = tmp_path / "sw"
    base = ["sweep", "--algo", "ppo", "--iterations", "1", "--set", "n_individuals=32",
            "--set", "horizon=4", "--set", "hidden=[8]", "--set", "n_epochs=1",
            "--seeds", "0", "--out", str(out)]
    assert main(base) == 0, capsys.readouterr().err
    seed = out / "runs" / "lending-1" / "ppo" / "seed-0"
    for mine in (out / "runs" / "notes.txt", seed / "analysis.ipynb"):
        mine.write_text("mine")
        capsys.readouterr()
        assert main([*base, "--force"]) == 2
        err = capsys.readouterr().err
        assert f"{mine}: is no file of a sweep's run" in err and err.count("\n") == 1, err
        assert mine.read_text() == "mine" and (seed / "checkpoint.pt").is_file()
        mine.unlink()
    (seed / ".metrics.csv.k2_x9a.tmp").write_text("")  # an interrupted write's: removed
    assert main([*base, "--force"]) == 0, capsys.readouterr().err
    assert not (seed / ".metrics.csv.k2_x9a.tmp").exists()


USER_SYSTEM = textwrap.dedent('''
    import numpy as np
    import causalfair as cf


    class Hiring:
        n_groups = 2
        group_names = ("A", "B")
        n_actions = 2
        action_labels = ("reject", "hire")
        feature_names = ("skill",)
        horizon = 2

        def reset(self, n, group, rng):
            g = np.broadcast_to(np.asarray(group, dtype=np.intp), (n,)).copy()
            return {"skill": rng.normal(-0.3 * g, 1.0), "g": g, "t": 0}

        def observe(self, s):
            return cf.Observation(group=s["g"], features=s["skill"][:, None], t=s["t"])

        def draw_noise(self, n, rng):
            return rng.normal(size=n)

        def step(self, s, d, noise):
            gain = np.where(np.asarray(d) == 1, 0.3, -0.05) + 0.1 * noise
            return cf.StepResult(state={"skill": s["skill"] + gain, "g": s["g"], "t": s["t"] + 1},
                                 reward=np.zeros(len(gain)), gain=gain, info={})


    def bare():
        return Hiring()


    def documented():
        """Hiring whose skill grows when hired.

        More words."""
        return Hiring()
''')


def test_systems_describes_a_user_system_by_its_factory_or_says_it_has_none(tmp_path, capsys):
    """`causalfair systems mymod:make` printed `mymod:make: ` with nothing after it."""
    (tmp_path / "hiring_sys.py").write_text(USER_SYSTEM)
    where = ["--search-path", str(tmp_path)]
    assert main(["systems", "hiring_sys:documented", *where]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "hiring_sys:documented: Hiring whose skill grows when hired.")
    assert main(["systems", "hiring_sys:bare", *where]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "hiring_sys:bare: (no description)"


def test_the_gate_table_prints_a_zero_without_a_sign():
    """The gate's table printed `utility drop vs baseline -0.000000` for a difference that
    rounds to zero from below."""
    from causalfair.audit import gate

    assert [gate._fixed(x) for x in (-1e-9, -0.0, 0.0, -0.5, 2.25)] == [
        "0.000000", "0.000000", "0.000000", "-0.500000", "2.250000"]


def test_the_vecnormalize_refusal_names_the_checkpoint_as_given(tmp_path, monkeypatch):
    """The refusal of an SB3 .zip kept with a vecnormalize.pkl named `checkpoint ppo.zip`,
    without the folder the user gave."""
    from causalfair.errors import PolicyError
    from causalfair.policies.vecnormalize import refuse_stats_beside

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "ppo.zip").write_bytes(b"zip")
    (tmp_path / "models" / "vecnormalize.pkl").write_bytes(b"pkl")
    with pytest.raises(PolicyError, match=r"^checkpoint models/ppo\.zip: models/vecnormalize\.pkl "
                       "next to the checkpoint"):
        refuse_stats_beside("models/ppo.zip", "--vecnormalize")

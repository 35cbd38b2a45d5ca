"""Review of session 17's first wave (0c72afb): defects found and fixed, each test failing
on the code before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from tests.test_groups_walk import _LeavingSim


class _MostlyLeftSim(_LeavingSim):
    """Group c starts 99.8% at the departed level 'left': 0.2% present (about 40 of
    20,000), a legal group that a sample of 64 often holds nobody of."""

    def __init__(self, share_left: float):
        super().__init__(False)
        initial = self.model.initial.copy()
        initial[2] = [share_left, 1.0 - share_left, 0.0]
        self.model = cf.TabularModel(kernel=self.model.kernel, initial=initial,
                                     potential=np.arange(3.0), group_names=("a", "b", "c"))


def _system(share_left: float) -> cf.System:
    return cf.System(id="mostly-left", groups=("a", "b", "c"), levels=("left", "low", "high"),
                     simulator=lambda: _MostlyLeftSim(share_left), departed=(0,), horizon=3)


def test_a_group_with_few_present_at_the_start_is_audited_not_refused():
    """Old code: the contract check refused group c as "starts with nobody present"
    because its 64 sampled units were all at the departed level, though 0.2% of it (about
    40 of the 20,000 the audit samples) is present; the tabular model of the same
    dynamics is accepted. Both engines now audit it and agree."""
    share = 0.998
    mc = cf.decompose(_system(share), "always", engine="mc", n=20_000, seed=1)
    sim = _MostlyLeftSim(share)
    exact = cf.decompose(cf.TabularModel(kernel=sim.model.kernel, initial=sim.model.initial,
                                         potential=np.arange(3.0), group_names=("a", "b", "c"),
                                         departed_levels=(0,)), "always", 3)
    assert abs(mc.C - exact.C) < 4 * 0.01  # a few standard errors of 20,000 units


def test_a_group_with_nobody_present_is_still_refused_by_the_contract():
    with pytest.raises(cf.CausalfairError, match="group 'c' starts with nobody present"):
        cf.decompose(_system(1.0), "always", engine="mc", n=200)


def _named_potential(potential: np.ndarray) -> list[str]:
    """The words of the --potential flag that simulate-logs' note names for a system of
    that potential, as a shell splits them."""
    import re
    import shlex

    from causalfair.logs.simulate import potential_note

    kernel = np.zeros((2, 2, 3, 3))
    kernel[..., :] = [0.2, 0.5, 0.3]
    model = cf.TabularModel(kernel=kernel, initial=np.full((2, 3), 1 / 3),
                            potential=potential, group_names=("a", "b"))
    note = potential_note(cf.as_system(model, id="neg"))
    line = shlex.shlex(re.search(r"--potential[= ](?:'[^']*'|\S+)", note).group(), posix=True,
                       punctuation_chars=True)  # as a shell reads it: ';' ends a command
    line.whitespace_split = True
    return list(line)


@pytest.mark.parametrize("potential,value", [
    ([-1.0, 0.0, 2.0], "-1,0,2"),
    ([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]], "0,1,2;0,2,4"),
    ([[-1.0, 1.0, 2.0], [0.0, 2.0, 4.0]], "-1,1,2;0,2,4"),
])
def test_the_potential_simulate_logs_names_is_a_shell_line_that_parses(potential, value):
    """Old code: the note said "audit it with --potential -1,0,2" (argparse reads "-1,0,2"
    as an option: "argument --potential: expected one argument") and, for a potential per
    group, "--potential 0,1,2;0,2,4" (a shell runs "0,2,4" as a second command). The
    flag it names now parses to the potential."""
    from causalfair.cli import build_parser

    words = _named_potential(np.array(potential))
    args = build_parser().parse_args(["decompose", "--logs", "log.csv", *words])
    assert args.potential == value


# ------------------------------------- a path that exists but is no regular file
def _doors(path):
    """Every reader of a user's input file, called on ``path`` (name -> a call)."""
    from causalfair.audit.spec import spec_file
    from causalfair.logs import read_logs
    from causalfair.policies.vecnormalize import read_obs_normalization
    from causalfair.report.export import read_audit
    from causalfair.systems.tabular_io import load_tabular

    return {"logs": lambda: read_logs(path.with_suffix(".csv")),
            "tabular": lambda: load_tabular(path.with_suffix(".npz")),
            "vecnormalize": lambda: read_obs_normalization(path.with_suffix(".pkl")),
            "spec": lambda: spec_file(str(path.with_suffix(".toml"))),
            "export": lambda: read_audit(path.with_suffix(".json"))}


@pytest.mark.parametrize("door", ["logs", "tabular", "vecnormalize", "spec", "export"])
def test_a_fifo_given_as_an_input_file_is_named_as_such_not_missing(tmp_path, door):
    """Old code: a FIFO (or a device) given as a decision log, tabular model, VecNormalize
    statistics, audit spec or audit.json was "no such file" though `ls` shows it; the
    checkpoint reader (0c72afb) says "is not a regular file (a device, a FIFO or a
    socket)". Every door now says what the checkpoint's says; a missing file is still
    "no such file"."""
    import os

    base = tmp_path / "in"
    target = _doors(base)[door]
    suffix = {"logs": ".csv", "tabular": ".npz", "vecnormalize": ".pkl", "spec": ".toml",
              "export": ".json"}[door]
    with pytest.raises(Exception, match="no such file"):
        target()
    os.mkfifo(base.with_suffix(suffix))
    with pytest.raises(Exception) as info:
        target()
    assert "is not a regular file (a device, a FIFO or a socket)" in str(info.value)
    assert "no such file" not in str(info.value)


@pytest.mark.parametrize("section,key,name", [
    ("policy", "checkpoint", "p.pt"), ("logs", "path", "log.csv"),
    ("system", "tabular", "model.npz"), ("policy", "vecnormalize", "vn.pkl")])
def test_a_fifo_named_in_a_spec_is_named_as_such_not_missing(tmp_path, section, key, name):
    """Old code: a spec's checkpoint / log / tabular model / statistics path that is a FIFO
    was "no such file 'p.pt' in DIR", though it is there; the readers say what it is."""
    import os

    from causalfair.audit.spec import load_spec
    from causalfair.errors import SpecError

    body = {"policy": f'[system]\nid = "lending-1"\n[policy]\n{key} = "{name}"\n',
            "logs": f'[logs]\n{key} = "{name}"\n',
            "system": f'[system]\n{key} = "{name}"\n'}[section]
    if key == "vecnormalize":
        body = '[system]\nid = "lending-1"\n[policy]\ncheckpoint = "m.zip"\n' \
               f'vecnormalize = "{name}"\n'
        (tmp_path / "m.zip").write_bytes(b"")
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\nhorizon = 3\n' + body + "[thresholds]\nabs_C = 0.05\n")
    with pytest.raises(SpecError, match="no such file"):
        load_spec(spec)
    os.mkfifo(tmp_path / name)
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    assert "is not a regular file (a device, a FIFO or a socket)" in str(info.value)
    assert "no such file" not in str(info.value)

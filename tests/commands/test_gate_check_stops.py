"""h8bound F4: a spec whose check passes its time limit stops the gate's other checks.
The gate audits nothing once a spec is invalid, yet it ran every other spec's check to
the end, up to each one's own limit: four specs, the first timing out after 3 s and the
others taking 20 s each to build, took 65 s for one error line."""

from __future__ import annotations

import json
import textwrap
import time

import pytest

from tests.conftest import run_cli

SIM = textwrap.dedent('''
    import time
    import numpy as np
    import causalfair as cf


    class Sim:
        n_groups, n_actions, feature_names, horizon = 2, 2, ("x",), 2

        def reset(self, n, group, rng):
            g = np.broadcast_to(np.asarray(group), (n,)).astype(np.int64)
            return {"g": g.copy(), "x": rng.normal(size=n)}

        def observe(self, s):
            return cf.Observation(group=s["g"], features=s["x"][:, None], t=None)

        def draw_noise(self, n, rng):
            return rng.normal(size=n)

        def step(self, s, d, noise):
            x = s["x"] + 0.1 * d + 0.1 * noise
            return cf.StepResult(state={"g": s["g"], "x": x}, reward=d * x,
                                 gain=x - s["x"], info={})


    def make(delay=0.0):
        time.sleep(float(delay))
        return Sim()


    def _pol(obs):
        return (obs.features[:, 0] > 0).astype(float)


    def pol():
        return _pol
''')

SPEC = """name = "{name}"
timeout = {timeout}
[system]
factory = "slow:make"
params = {{ delay = {delay} }}
[policy]
factory = "slow:pol"
[engine]
kind = "mc"
n = 100
[thresholds]
abs_C = 1.0
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_check_past_its_limit_stops_the_other_checks(tmp_path, jobs):
    (tmp_path / "slow.py").write_text(SIM)
    specs = []
    for i, (delay, timeout) in enumerate([(60, 2), (40, 120), (40, 120)]):
        path = tmp_path / f"s{i}.toml"
        path.write_text(SPEC.format(name=f"s{i}", timeout=timeout, delay=delay))
        specs.append(str(path))
    t0 = time.monotonic()
    proc = run_cli("gate", *specs, "--jobs", jobs, "--json", str(tmp_path / "g.json"),
                   cwd=tmp_path, expect=2, timeout=300)
    took = time.monotonic() - t0
    assert took < 30, (took, proc.stderr)  # the old code: 40 s or more (each other check)
    doc = json.loads((tmp_path / "g.json").read_text())
    assert [e["name"] for e in doc["specs"]] == ["s0"]
    err = doc["specs"][0]["error"]
    assert "TimeoutError: stopped after its time limit of 2 s" in err
    assert "the checks of 2 other spec(s) were stopped then" in err
    assert "Traceback" not in proc.stderr

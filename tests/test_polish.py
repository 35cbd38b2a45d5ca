"""Three report and door details: audit.json's ``inputs`` in the report and the Annex IV
export, a decision log's ``approval_rate`` shown as ``d1_rate``, and the Gymnasium door's
``gain = "info-change:KEY"`` for an env that reports a level."""

from __future__ import annotations

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import SystemError_
from causalfair.logs import simulate_logs
from causalfair.model import TabularModel
from causalfair.policies.core import TablePolicy
from causalfair.report.export import annex_iv
from causalfair.report.render import render_html, render_markdown


def _two_groups() -> TabularModel:
    k = np.zeros((2, 2, 2, 2))
    k[:, 0, 0] = [[0.8, 0.2], [0.9, 0.1]]
    k[:, 0, 1] = [[0.4, 0.6], [0.5, 0.5]]
    k[:, 1, 0], k[:, 1, 1] = [0.2, 0.8], [0.1, 0.9]
    reward = np.zeros((2, 2, 2))
    reward[:, 1, 0] = 1.0
    return TabularModel(kernel=k, initial=[[0.5, 0.5], [0.7, 0.3]],
                        potential=np.array([0.0, 1.0]), reward=reward, group_names=["A", "B"])


@pytest.fixture(scope="module")
def log_audit(tmp_path_factory):
    d = tmp_path_factory.mktemp("polish")
    df = simulate_logs(_two_groups(), TablePolicy([[0.2, 0.9], [0.5, 0.6]]), 200, 3, seed=1)
    df.to_csv(d / "log.csv", index=False)
    (d / "s.toml").write_text('name = "log"\n[logs]\npath = "log.csv"\nn_boot = 2\n',
                              encoding="utf-8")
    res = cf.audit(d / "s.toml")
    return res, res.to_dict()


# ------------------------------------------------------------------ 1. inputs in the report
def test_the_report_and_annex_iv_show_the_inputs_the_audit_read(log_audit):
    """audit.json's inputs (here: the log file and its SHA-256) were in audit.json only:
    report.md, report.html and annex-iv.md listed the checkpoint's hash alone."""
    res, doc = log_audit
    (entry,) = doc["inputs"]
    assert entry["role"] == "logs" and len(entry["sha256"]) == 64
    md = render_markdown(res, doc, {})
    html = render_html(res, doc, {})
    annex = annex_iv(doc)
    for text in (md, html, annex):
        assert entry["sha256"] in text
        assert "SHA-256 or version" in text
    assert md.index("### Other inputs the audit read") > md.index("## Provenance")
    # an installed package's module shows its version, not a hash
    pkg = {**doc, "inputs": [{"role": "system.factory", "module": "mysim.core",
                              "package": "mysim", "version": "1.2.3"}]}
    assert "| system.factory | mysim.core (mysim) | version 1.2.3 |" in annex_iv(pkg)
    # no inputs (a lending audit): no table, the text is what it was
    bare = {k: v for k, v in doc.items() if k != "inputs"}
    assert "SHA-256 or version" not in annex_iv(bare)
    assert "Other inputs" not in render_markdown(res, bare, {})


# ------------------------------------------------------ 2. a log's approval rate, named d1
def test_a_log_audit_shows_its_d1_rate_not_an_approval_rate(log_audit):
    """A log's decisions are d0/d1 (what d1 is, the log does not say): its "Other notions"
    said approval_rate[...] for any log. audit.json keeps the key (LL 144's export and
    lending's goldens read it)."""
    res, doc = log_audit
    assert set(doc["notions"]["approval_rate"]) == {"A", "B"}
    md = render_markdown(res, doc, {})
    assert "| d1_rate\\[A\\] |" in md and "approval_rate" not in md
    assert "d1_rate[B]" in render_html(res, doc, {})


# ------------------------------------------------------------- 3. gain = "info-change:KEY"
gym = pytest.importorskip("gymnasium")


class Level(gym.Env):
    """One individual whose qualification level is in the observation and in info."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
    action_space = gym.spaces.Discrete(2)
    no_reset_key = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.g = int((options or {}).get("group", 0))
        self.level = 1.0 + float(self.np_random.normal()) - 0.5 * self.g
        info = {"group": self.g} if self.no_reset_key else {"group": self.g, "level": self.level}
        return self._obs(), info

    def _obs(self):
        return np.array([self.level, self.g], dtype=np.float64)

    def step(self, action):
        self.level += 0.5 * int(action) + 0.25 * float(self.np_random.normal())
        return self._obs(), float(action), False, False, {"level": self.level}


class NoResetKey(Level):
    no_reset_key = True


def test_info_change_reads_a_level_as_its_change_per_step():
    """gain = "info-change:level" is refused by the old door (only info:KEY, which sums
    the level itself); its gain is the change obs:0 reads, to the bit."""
    pol = "uniform"
    kw = dict(groups=["a", "b"], horizon=3)
    change = cf.systems.from_gym(Level, gain="info-change:level", **kw)
    obs = cf.systems.from_gym(Level, gain="obs:0", **kw)
    level = cf.systems.from_gym(Level, gain="info:level", **kw)
    a, b = (cf.decompose(s, pol, n=200, seed=5) for s in (change, obs))
    assert (a.C, a.DPE, a.IPE, a.SPE) == (b.C, b.DPE, b.IPE, b.SPE)
    assert cf.decompose(level, pol, n=200, seed=5).C != a.C  # the level summed: another C
    with pytest.raises(SystemError_, match=r"info-change:level.*reset's info has no key "
                                           r"'level'"):
        cf.decompose(cf.systems.from_gym(NoResetKey, gain="info-change:level", check=False,
                                         **kw), pol, n=20, seed=5)
    for bad in ("info-change:", "info:"):  # a mode with no key (the kinds' own names)
        with pytest.raises(SystemError_, match=f"from_gym gain: bad value '{bad}'"):
            cf.systems.from_gym(Level, gain=bad, **kw)

"""Three report and door details: audit.json's ``inputs`` in the report and the Annex IV
export, a decision log's ``approval_rate`` shown as ``d1_rate``, and the Gymnasium door's
``gain = "info-change:KEY"`` for an env that reports a level."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import SystemError_
from causalfair.logs import simulate_logs
from causalfair.model import TabularModel
from causalfair.policies.core import TablePolicy
from causalfair.report.export import annex_iv
from causalfair.report.render import render_html, render_markdown
from tests.conftest import run_cmd


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


# --- a newcomer's leftovers: a misspelled factory, Lambda = 0's pairs, the other notions ---

def test_a_misspelled_factory_names_the_closest_callable(tmp_path):
    from causalfair._usercode import load_callable

    (tmp_path / "polish_base_factory.py").write_text(
        "def make(**kw):\n    return None\n\nclass K:\n    @staticmethod\n"
        "    def build():\n        return None\n\nLIMIT = 3\n", encoding="utf-8")
    with pytest.raises(SystemError_) as exc:
        load_callable("polish_base_factory:mak", search_path=tmp_path)
    assert str(exc.value) == ("factory: module 'polish_base_factory' has no attribute 'mak' "
                              "(from 'polish_base_factory:mak'); did you mean "
                              "'polish_base_factory:make'?")
    with pytest.raises(SystemError_, match=r"did you mean 'polish_base_factory:K\.build'\?$"):
        load_callable("polish_base_factory:K.buld", search_path=tmp_path)
    with pytest.raises(SystemError_) as exc:  # nothing close (and LIMIT is no callable)
        load_callable("polish_base_factory:LIMT", search_path=tmp_path)
    assert "did you mean" not in str(exc.value) and str(exc.value).endswith("LIMT').")


def test_a_lambda_of_zero_prints_no_rows_of_zero_contributions():
    never = cf.benefit_fairness(cf.systems.make("lending-1"), "never")
    assert never.Lambda == 0.0
    text = never.summary(5)
    worst = text.split("Worst pairs:", 1)[1]
    assert worst.strip().startswith("not shown: no pair contributes to Lambda (Lambda = 0")
    assert "\n" not in worst.strip() and "contribution" not in text
    assert "no pair contributes" in never._repr_html_() and "<table" not in never._repr_html_()
    # the data stay: worst_pairs() lists the n pairs, each contributing 0 (audit.json)
    df = never.worst_pairs(5)
    assert len(df) == 5 and (df["contribution"] == 0).all()
    some = cf.benefit_fairness(cf.systems.make("lending-1"), "threshold:0.5")
    assert some.Lambda > 1e-3 and "no pair contributes" not in some.summary(3)
    assert len(some.summary(3).split("Worst pairs:\n", 1)[1].splitlines()) == 1 + 3


def test_decompose_prints_one_line_for_a_lambda_of_zero():
    out = run_cmd([sys.executable, "-m", "causalfair", "decompose", "--system", "lending-1",
                   "--policy", "never"], expect=0).stdout
    assert "Worst pairs: not shown: no pair contributes to Lambda" in out
    assert "contribution" not in out


def test_audit_console_says_what_the_other_notions_measure():
    from types import SimpleNamespace

    from causalfair.commands.audit import notions_legend
    from causalfair.report.explain import GLOSSARY

    res = SimpleNamespace(spec=SimpleNamespace(metrics=["C", "w1_final", "dp_gap", "tpr_gap"]),
                          quantities={"C": 0, "w1_final": 0, "dp_gap": 0})
    lines = notions_legend(res).splitlines()
    assert lines[1].strip().startswith("other notions (0 is equal")
    assert [ln.split()[0] for ln in lines[2:]] == ["w1_final", "dp_gap"]  # shown ones only
    assert "1-Wasserstein" in lines[2] and lines[2].endswith(f"[{GLOSSARY['w1_final'][2]}]")
    assert lines[2].endswith("[levels]") and lines[3].endswith("[probability]")
    assert notions_legend(SimpleNamespace(spec=SimpleNamespace(metrics=["C"]),
                                          quantities={"C": 0})) == ""

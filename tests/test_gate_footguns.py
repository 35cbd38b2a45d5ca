"""The gate's foot-guns (issue 16): no thresholds, bad specs in CI, and --retrain exit
codes while the checkpoint under version control still fails."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace

from causalfair.audit.gate import GateEntry, GateResult
from causalfair.cli import main

OK = 'name = "{n}"\nhorizon = 5\n[system]\nid = "lending-1"\n[policy]\nbuiltin = "never"\n'


def test_a_spec_without_thresholds_is_an_error_but_an_empty_table_is_explicit(tmp_path, capsys):
    (tmp_path / "a.toml").write_text(OK.format(n="a"))
    assert main(["gate", str(tmp_path / "a.toml")]) == 2
    assert "[thresholds]: missing; a gate without thresholds passes everything" in \
        capsys.readouterr().err
    (tmp_path / "b.toml").write_text(OK.format(n="b") + "[thresholds]\n")
    assert main(["gate", str(tmp_path / "b.toml")]) == 0


def test_bad_specs_still_write_junit_with_error_cases(tmp_path, capsys):
    (tmp_path / "good.toml").write_text(OK.format(n="good") + "[thresholds]\nabs_C = 1.0\n")
    (tmp_path / "typo.toml").write_text(OK.format(n="typo") + "[thresholds]\nabs_CC = 1.0\n")
    (tmp_path / "pol.toml").write_text(OK.format(n="pol").replace("never", "threshold:x")
                                       + "[thresholds]\nabs_C = 1.0\n")
    junit = tmp_path / "gate.xml"
    code = main(["gate", str(tmp_path / "good.toml"), str(tmp_path / "typo.toml"),
                 str(tmp_path / "pol.toml"), "--junit", str(junit)])
    assert code == 2
    err = capsys.readouterr().err
    assert "2 of 3 specs are invalid" in err and "abs_CC: unknown key" in err
    root = ET.parse(junit).getroot()
    assert root.get("errors") == "2" and root.get("failures") == "0"
    messages = [e.get("message") for e in root.iter("error")]
    assert any("typo.toml" in m for m in messages) and any("pol.toml" in m for m in messages)


def _entry(before: str, after: str | None) -> GateEntry:
    r = lambda status: SimpleNamespace(overall=status, verdicts=[])  # noqa: E731
    return GateEntry(spec=SimpleNamespace(name="x"), before=r(before),
                     after=r(after) if after else None)


def test_retrain_exit_code_needs_accept_repaired():
    repaired = [_entry("FAIL", "PASS")]
    assert GateResult(repaired).exit_code == 1
    assert GateResult(repaired, accept_repaired=True).exit_code == 0
    assert GateResult([_entry("FAIL", "FAIL")], accept_repaired=True).exit_code == 1
    assert GateResult([_entry("PASS", None)]).exit_code == 0
    assert GateResult([_entry("INCONCLUSIVE", "PASS")], inconclusive="pass").exit_code == 0
    assert GateResult([_entry("INCONCLUSIVE", "PASS")]).exit_code == 1


def test_accept_repaired_needs_retrain(tmp_path, capsys):
    (tmp_path / "b.toml").write_text(OK.format(n="b") + "[thresholds]\n")
    assert main(["gate", str(tmp_path / "b.toml"), "--accept-repaired"]) == 2
    assert "--accept-repaired: only with --retrain." in capsys.readouterr().err


def test_shards_merge_to_the_unsharded_verdicts(tmp_path, capsys):
    specs = []
    for i, (builtin, thr) in enumerate([("never", 1.0), ("threshold:0.5", 0.001),
                                        ("always", 0.01), ("blind:0.5", 0.5)]):
        p = tmp_path / f"s{i}.toml"
        p.write_text(OK.format(n=f"s{i}").replace("never", builtin)
                     + f"[thresholds]\nabs_C = {thr}\n")
        specs.append(str(p))
    full = main(["gate", *specs, "--json", str(tmp_path / "full.json"),
                 "--junit", str(tmp_path / "full.xml")])
    codes = []
    for k in (1, 2, 3):
        codes.append(main(["gate", *specs, "--shard", f"{k}/3", "--json",
                           str(tmp_path / f"sh{k}.json"), "--junit", str(tmp_path / f"sh{k}.xml")]))
    merged = main(["gate-merge", *(str(tmp_path / f"sh{k}.json") for k in (1, 2, 3)),
                   "--junit-in", *(str(tmp_path / f"sh{k}.xml") for k in (1, 2, 3)),
                   "--json", str(tmp_path / "m.json"), "--junit", str(tmp_path / "m.xml")])
    assert merged == full == 1 and max(codes) == 1
    import json

    a = json.loads((tmp_path / "full.json").read_text())
    b = json.loads((tmp_path / "m.json").read_text())
    verdicts = lambda d: sorted((e["name"], e["overall"], json.dumps(e["verdicts"]))  # noqa: E731
                                for e in d["specs"])
    assert verdicts(a) == verdicts(b) and a["exit_code"] == b["exit_code"]
    ra, rb = ET.parse(tmp_path / "full.xml").getroot(), ET.parse(tmp_path / "m.xml").getroot()
    assert (ra.get("tests"), ra.get("failures")) == (rb.get("tests"), rb.get("failures"))
    assert sorted(s.get("name") for s in ra) == sorted(s.get("name") for s in rb)
    assert main(["gate", *specs, "--shard", "4/3"]) == 2


CRASH = '''
import numpy as np
import causalfair as cf
from clinic import make_clinic

class Broken:
    n_groups = 2
    def reset(self, n, group, rng):
        return np.zeros(n, dtype=int), np.broadcast_to(np.asarray(group), (n,)).copy()
    def observe(self, s):
        return cf.Observation(group=s[1], level=s[0])
    def draw_noise(self, n, rng):
        return rng.random(n)
    def step(self, s, d, noise):
        raise RuntimeError("the simulator broke")

def make():
    return Broken()
'''


def test_jobs_give_the_same_json_and_junit_and_a_crash_is_named(tmp_path, capsys):
    import shutil
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shutil.copy(root / "docs" / "examples" / "clinic.py", tmp_path / "clinic.py")
    specs = []
    # a slow Monte Carlo spec first, so with two workers it finishes after the others
    for i, (extra, thr) in enumerate([('[engine]\nkind = "mc"\nn = 60000\n', 0.01),
                                      ("", 0.001), ("", 1.0)]):
        p = tmp_path / f"s{i}.toml"
        p.write_text(OK.format(n=f"s{i}").replace("never", "threshold:0.5") + extra
                     + f"[thresholds]\nabs_C = {thr}\n")
        specs.append(str(p))
    outs = {}
    for jobs in ("1", "2"):
        code = main(["gate", *specs, "--jobs", jobs, "--json", str(tmp_path / f"g{jobs}.json"),
                     "--junit", str(tmp_path / f"g{jobs}.xml")])
        outs[jobs] = (code, (tmp_path / f"g{jobs}.json").read_bytes(),
                      __import__("re").sub(rb'time="[0-9.]+"', b"",
                                           (tmp_path / f"g{jobs}.xml").read_bytes()))
    assert outs["1"] == outs["2"]
    (tmp_path / "broken.py").write_text(CRASH)
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[system]\nfactory = "broken:make"\n[policy]\n'
                   'builtin = "always"\n[engine]\nkind = "mc"\nn = 100\n[thresholds]\nabs_C = 1\n')
    capsys.readouterr()
    for jobs in ("1", "2"):
        assert main(["gate", specs[2], str(bad), "--jobs", jobs,
                     "--junit", str(tmp_path / "b.xml")]) == 2
        err = capsys.readouterr().err
        assert "bad.toml: the audit failed: " in err and "the simulator broke" in err
        assert ET.parse(tmp_path / "b.xml").getroot().get("errors") == "1"
    sys.modules.pop("clinic", None)
    sys.modules.pop("broken", None)

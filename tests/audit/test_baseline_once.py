"""A ``[baseline]`` gate: the Monte Carlo pair is simulated once for the verdicts and the
attribution (the same numbers as compare_mc); the why: line in gate-merge's Markdown and
in docs/ci-gate.md; a bad ``--baseline`` names the flag; the schemas type ``attribution``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

import causalfair as cf
from causalfair._io import to_jsonable
from causalfair.audit import audit
from causalfair.audit.shards import check_gate_summary
from causalfair.cli import main
from causalfair.engines import montecarlo
from causalfair.errors import InputError
from tests.conftest import one_line_error, run_cli, schema_errors

ROOT = Path(__file__).resolve().parents[2]

SPEC = '''name = "{name}"
horizon = 6
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[engine]
kind = "{engine}"
{n}
[thresholds]
abs_C = 0.2
[baseline]
builtin = "threshold:0.3"
[baseline.thresholds]
C = 1.0
abs_C = 1.0
utility = 10.0
'''

#: The spec of docs/ci-gate.md, "Why C moved, and machine-readable outputs".
DOC_SPEC = '''name = "lending-1-vs-main"
[system]
id = "lending-1"
[policy]
builtin = "threshold:0.5"
[thresholds]
abs_C = 0.2
[baseline]
builtin = "threshold:0.3"
[baseline.thresholds]
abs_C = 0.02
'''


def _write(folder: Path, engine: str = "mc", name: str = "once") -> Path:
    p = folder / f"{name}.toml"
    p.write_text(SPEC.format(name=name, engine=engine,
                             n="n = 3000" if engine == "mc" else ""))  # exact: no n
    return p


def test_a_monte_carlo_baseline_gate_simulates_the_pair_once(tmp_path, monkeypatch):
    """Every batch of the baseline policy is simulated once (one paired run for the
    verdicts and the attribution, not a comparison run and then an attribution run), and
    the verdicts' numbers are compare_mc's bit for bit."""
    calls: dict[str, int] = {}
    real = montecarlo._simulate

    def counting(job, g, b, m, trace=None):
        calls[job.name] = calls.get(job.name, 0) + 1
        return real(job, g, b, m, trace)

    monkeypatch.setattr(montecarlo, "_simulate", counting)
    res = audit(_write(tmp_path))
    assert res.attribution is not None and res.attribution.engine == "mc"
    # n = 3000 is one batch per group; lending-1 has levels, so no pilot run for the cells
    assert calls.get("threshold:0.3") == 2, calls
    monkeypatch.setattr(montecarlo, "_simulate", real)
    paired = montecarlo.compare_mc(res.system, "threshold:0.5", "threshold:0.3", 6, n=3000,
                                   seed=res.spec.seed, pair=res.decomposition.pair)
    nums = res.extra["baseline"]["quantities"]
    for key in ("C", "abs_C", "utility"):
        base = key[4:] if key.startswith("abs_") else key
        p = paired[base]
        assert nums[key]["policy"] == p["policy"] and nums[key]["baseline"] == p["baseline"]
        want = (p["abs_diff"] if key.startswith("abs_") else -p["diff"] if base == "utility"
                else p["diff"])
        assert nums[key]["difference"] == want, key
    att = res.attribution
    assert att.change == pytest.approx(paired["C"]["diff"], abs=1e-12)
    assert att.total["C"][1] == pytest.approx(paired["C"]["se"], rel=1e-9)


def test_gate_merge_markdown_shows_the_why_line_as_the_doc_says(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("rel.toml").write_text(DOC_SPEC)
    assert main(["gate", "rel.toml", "--json", "gate.json"]) == 0
    text = capsys.readouterr().out
    why = [x.strip() for x in text.splitlines() if x.strip().startswith("why: ")]
    assert len(why) == 1, text
    assert main(["gate-merge", "gate.json", "--markdown"]) == 0
    md = capsys.readouterr().out
    row = f"| lending-1-vs-main | {why[0]} | | | |"
    assert row in md.splitlines(), md
    doc = (ROOT / "docs" / "ci-gate.md").read_text(encoding="utf-8")
    assert DOC_SPEC in doc and f"  {why[0]}\n" in doc and row in doc.splitlines()
    gate = json.loads(Path("gate.json").read_text())
    assert gate["specs"][0]["attribution"] == why[0][len("why: "):]
    assert schema_errors(Path("gate.json"), "gate") == []


def test_a_gate_summary_with_a_bad_attribution_is_refused():
    entry = {"name": "s", "overall": "PASS", "verdicts": [], "attribution": 3}
    doc = {"schema_version": "1.0", "exit_code": 0, "inconclusive": "fail",
           "accept_repaired": False, "specs": [entry]}
    with pytest.raises(InputError, match=r"gate\.json: specs\[0\]\.attribution: must be a string"):
        check_gate_summary(doc, "gate.json")
    schema = json.loads((ROOT / "docs" / "schema" / "gate.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    entry["attribution"] = "C moved +0.01 vs pi0: mostly DPE (+0.01), step t = 0 (+0.01)"
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors(doc))


def test_audit_json_attribution_is_typed_by_the_schema(tmp_path):
    res = audit(_write(tmp_path, engine="exact", name="ex"))
    doc = to_jsonable(res.to_dict())
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(doc, allow_nan=False))
    assert doc["attribution"]["line"] == res.attribution.line()
    assert schema_errors(path, "audit") == []
    schema = json.loads((ROOT / "docs" / "schema" / "audit.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema)
    bad = {**doc, "attribution": {**doc["attribution"], "total": {"C": 0.1}}}
    assert any("attribution" in "/".join(map(str, e.absolute_path)) for e in v.iter_errors(bad))
    assert list(v.iter_errors({**doc, "attribution": "why"}))


def test_a_bad_baseline_on_the_audit_command_names_the_flag(tmp_path, capsys):
    spec = str(ROOT / "audits" / "lending-1.toml")
    for bad in ("threshold:abc", str(tmp_path / "missing.pt")):
        assert main(["audit", spec, "--no-report", "--baseline", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and re.search(r"error: --baseline: ", err), err
    (tmp_path / "bad_base_factory.py").write_text(
        "def make(*args, **kwargs):\n    raise ValueError('no baseline today')\n")
    proc = run_cli("audit", spec, "--no-report", "--baseline", "bad_base_factory:make",
                   cwd=tmp_path)
    err = one_line_error(proc)
    assert "--baseline: " in err and "no baseline today" in err, proc.stderr
    with pytest.raises(cf.errors.PolicyError, match=r"^baseline: "):
        audit(spec, baseline="threshold:abc")

"""Files from someone else: every reader of causalfair's own files (audit.json for
`export`, gate summaries for `gate-merge`, checkpoints, a run folder's resume state) on
files of the same major version written before optional keys were added, of a newer
minor (extra keys), of a newer major, damaged, or of another kind; and an audit
reproduced from its audit.json (`causalfair audit --reproduce`)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from causalfair._io import AUDIT_SCHEMA_VERSION, check_document
from causalfair.audit.gate import GATE_SCHEMA_VERSION
from causalfair.audit.shards import check_gate_summary, markdown, merge_summaries
from causalfair.errors import CheckpointError, InputError
from causalfair.report.export import export_files, read_audit
from tests.conftest import one_line_error

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "reports" / "examples"
AUDIT = json.loads((EXAMPLES / "lending-1-ppo" / "audit.json").read_text(encoding="utf-8"))
GATE = json.loads((EXAMPLES / "gate.json").read_text(encoding="utf-8"))
CHECKPOINT = EXAMPLES / "checkpoints" / "lending-1-ppo.pt"


def put(path: Path, doc) -> Path:
    """``doc`` as JSON at ``path`` (hand-made documents get a suffix other than .json:
    the session's schema check reads only what causalfair wrote)."""
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def without_later_keys(doc: dict) -> dict:
    """``doc`` as a 1.0 writer made it before the optional keys CHANGELOG.md lists as
    added within 1.x: a verdict's ``pair``, ``attribution``, ``groups``/``pairs``,
    ``provenance.kernels``, ``[engine] pair``; a gate entry's ``retrain_error``,
    ``attribution``, ``report``, ``shard`` and ``causalfair_version``."""
    d = copy.deepcopy(doc)
    for k in ("attribution", "groups", "pairs", "extra", "causalfair_version", "shard"):
        d.pop(k, None)
    (d.get("provenance") or {}).pop("kernels", None)
    ((d.get("spec") or {}).get("parsed") or {}).get("engine", {}).pop("pair", None)
    for e in [d, *d.get("specs", [])]:
        for k in ("retrain_error", "attribution", "report", "repair_check"):
            e.pop(k, None)
        for block in (e, e.get("before") or {}, e.get("after") or {}):
            for v in block.get("verdicts", []):
                v.pop("pair", None)
    return d


def newer_minor(doc: dict) -> dict:
    d = copy.deepcopy(doc)
    d["schema_version"] = "1.9"
    d["added_in_1_9"] = {"anything": [1, 2]}
    for v in d.get("verdicts", []):
        v["added_in_1_9"] = "x"
    for e in d.get("specs", []):
        e["added_in_1_9"] = "x"
    return d


# ------------------------------------------------------------------ the one version check
@pytest.mark.parametrize("version, fix", [("2.0", "upgrade causalfair"),
                                          ("10.3", "upgrade causalfair"),
                                          ("0.9", "write it again"), (None, "write it again"),
                                          (1.0, "write it again"), ("1", "write it again")])
def test_another_major_version_is_one_line_naming_file_version_and_fix(version, fix):
    with pytest.raises(InputError) as exc:
        check_document({"schema_version": version, "decomposition": {}, "quantities": {}},
                       "f.json", "audit.json", AUDIT_SCHEMA_VERSION, "causalfair audit SPEC")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("f.json: schema_version: must be 1.x, got "), msg
    assert repr(version) in msg and "reads the audit.json format 1.x" in msg and fix in msg, msg


def test_same_major_any_minor_is_read():
    for v in ("1.0", "1.1", "1.123"):
        assert check_document({"schema_version": v}, "f", "gate summary", "1.0", "x") == v
    assert check_document({}, "f", "gate summary", "1.0", "x", absent="1.0") == "1.0"


# ----------------------------------------------------------------- audit.json: export
def test_export_reads_an_old_1_0_audit_json_and_ignores_a_newer_minors_keys(tmp_path):
    base = export_files(read_audit(put(tmp_path / "a.audit", AUDIT)), ("annex-iv", "ll144"))
    old = read_audit(put(tmp_path / "old.audit", without_later_keys(AUDIT)))
    got = export_files(old, ("annex-iv", "ll144"))
    assert got["ll144.csv"] == base["ll144.csv"] and got["ll144.md"] == base["ll144.md"]
    for line in base["annex-iv.md"].splitlines():  # the same document, less what was not
        if "abs_C" in line or "Lambda" in line:  # recorded (CPU kernels, pairs)
            assert line in got["annex-iv.md"], line
    new = read_audit(put(tmp_path / "new.audit", newer_minor(AUDIT)))
    assert export_files(new, ("annex-iv", "ll144")) == base  # the extra keys change nothing


def test_export_of_an_old_audit_json_without_selection_names_what_ll144_needs(tmp_path, cli_here):
    doc = {k: v for k, v in AUDIT.items() if k != "selection"}
    put(tmp_path / "old.audit", doc)
    err = one_line_error(cli_here("export", "ll144", "old.audit", "--out", "x", cwd=tmp_path))
    assert err.startswith("causalfair export: error: old.audit: selection: missing"), err
    proc = cli_here("export", "annex-iv", "old.audit", "--out", "x", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "x" / "annex-iv.md").is_file(), proc.stderr


BAD_FILES = {
    "newer-major.audit": ({"schema_version": "2.0", "name": "a", "results": {}},
                          "schema_version: must be 1.x, got '2.0'", "upgrade causalfair"),
    "empty.audit": ("", "not valid JSON", None),
    "truncated.audit": (json.dumps(AUDIT)[:700], "not valid JSON", None),
    "text.audit": ("hello", "not valid JSON", None),
    "list.audit": ([AUDIT], "is a JSON list, not an audit.json", None),
    "gate.audit": (GATE, "is a gate summary (written by `causalfair gate --json FILE`), "
                   "not an audit.json", None),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_export_refuses_another_major_or_kind_or_damage_in_one_line(name, tmp_path, cli_here):
    doc, says, fix = BAD_FILES[name]
    put(tmp_path / name, doc)
    err = one_line_error(cli_here("export", "annex-iv", name, "--out", "x", cwd=tmp_path))
    assert err.startswith(f"causalfair export: error: {name}: {says}"), err
    assert fix is None or fix in err, err
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------- gate summaries: gate-merge
def test_gate_merge_reads_an_old_summary_and_keeps_a_newer_minors_entry_keys(tmp_path):
    old = without_later_keys(GATE)
    assert "\"pair\":" not in json.dumps(old) and "causalfair_version" not in old
    check_gate_summary(old, "old")
    merged = merge_summaries([old], ["old"])
    assert merged["exit_code"] == 0 and merged["schema_version"] == GATE_SCHEMA_VERSION
    assert [e["overall"] for e in merged["specs"]] == [e["overall"] for e in GATE["specs"]]
    assert "| lending-1-ppo (repaired) | abs_C <= 0.05 |" in markdown(merged)
    new = newer_minor(GATE)
    check_gate_summary(new, "new")
    merged_new = merge_summaries([new], ["new"])
    assert merged_new["schema_version"] == GATE_SCHEMA_VERSION  # this causalfair's summary
    assert "added_in_1_9" not in merged_new  # unknown top-level keys dropped
    assert all(e["added_in_1_9"] == "x" for e in merged_new["specs"])  # entries kept whole
    assert markdown(merged_new) == markdown(merge_summaries([GATE], ["g"]))


GATE_BAD = {
    "newer-major.gate": ({"schema_version": "2.0", "results": []},
                         "schema_version: must be 1.x, got '2.0'", "upgrade causalfair"),
    "empty.gate": ("", "not valid JSON", None),
    "truncated.gate": (json.dumps(GATE)[:300], "not valid JSON", None),
    "list.gate": ([GATE], "is a JSON list, not a gate summary", None),
    "audit.gate": (AUDIT, "is an audit.json (written by `causalfair audit --out DIR`), not a "
                   "gate summary", None),
}


@pytest.mark.parametrize("name", sorted(GATE_BAD))
def test_gate_merge_refuses_another_major_or_kind_or_damage_in_one_line(name, tmp_path,
                                                                         cli_here):
    doc, says, fix = GATE_BAD[name]
    put(tmp_path / name, doc)
    err = one_line_error(cli_here("gate-merge", name, "--json", "m.out", cwd=tmp_path))
    assert err.startswith(f"causalfair gate-merge: error: {name}: {says}"), err
    assert fix is None or fix in err, err
    assert not (tmp_path / "m.out").exists()


def shard(k: int, n: int, *, version: str | None = "0.1.0", digest: str = "d" * 64,
          specs: int = 2) -> dict:
    entry = {"name": f"spec-{k}", "overall": "PASS",
             "verdicts": [{"key": "abs_C", "threshold": 0.1, "estimate": 0.0, "lower": 0.0,
                           "upper": 0.0, "status": "PASS"}]}
    doc = {"schema_version": "1.0", "causalfair_version": version, "exit_code": 0,
           "inconclusive": "fail", "accept_repaired": False, "specs": [entry],
           "shard": {"k": k, "n": n, "specs": specs, "specs_sha256": digest}}
    return doc if version is not None else {k_: v for k_, v in doc.items()
                                            if k_ != "causalfair_version"}


@pytest.mark.parametrize("docs, says", [
    ([shard(1, 2), shard(2, 2, version="0.2.0")], "different causalfair versions"),
    ([shard(1, 2), shard(2, 2, version=None)], "different causalfair versions"),
    ([shard(1, 2), shard(2, 3)], "come from different sharded gates"),
    ([shard(1, 2), shard(2, 2, digest="e" * 64)], "come from different sharded gates"),
    ([shard(1, 2), shard(2, 2, specs=3)], "come from different sharded gates"),
    ([shard(1, 2), shard(1, 2)], "shard 1/2 given twice"),
    ([shard(1, 2)], "shard 2/2 missing"),
    ([shard(1, 2), {k: v for k, v in shard(2, 2).items() if k != "shard"}],
     "not the output of `causalfair gate --shard K/N`"),
])
def test_gate_merge_never_merges_shards_of_other_runs_into_a_verdict(docs, says):
    for d in docs:
        check_gate_summary(d, "s")
    with pytest.raises(InputError, match=says):
        merge_summaries(docs, [f"s{i}.json" for i in range(len(docs))])
    # the shards of one run merge, in the gate's order
    merged = merge_summaries([shard(2, 2), shard(1, 2)], ["b", "a"])
    assert [e["name"] for e in merged["specs"]] == ["spec-1", "spec-2"]


# --------------------------------------------------------------------------- checkpoints
def _checkpoint_with(tmp_path: Path, **meta_changes) -> Path:
    import torch

    payload = torch.load(CHECKPOINT, map_location="cpu", weights_only=True)
    meta = json.loads(payload["meta_json"])
    for k, v in meta_changes.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    payload["meta_json"] = json.dumps(meta, sort_keys=True)
    path = tmp_path / "c.pt"
    torch.save(payload, path)
    return path


def test_a_checkpoint_of_a_newer_format_version_is_refused_naming_it(tmp_path):
    from causalfair.policies.checkpoint import load_checkpoint
    from causalfair.policies.checkpoint_format import CHECKPOINT_VERSION

    newer = _checkpoint_with(tmp_path, version=CHECKPOINT_VERSION + 1)
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(newer)
    msg = str(exc.value)
    assert "\n" not in msg and str(newer) in msg and f"version {CHECKPOINT_VERSION + 1}" in msg
    assert f"versions 1 to {CHECKPOINT_VERSION}" in msg and "upgrade causalfair" in msg, msg
    # version 1 (none written), and a key a later version may add (ignored): read
    older = _checkpoint_with(tmp_path, version=None, added_later={"x": 1})
    policy, meta = load_checkpoint(older)
    same, _ = load_checkpoint(CHECKPOINT)
    assert "version" not in meta and meta["added_later"] == {"x": 1}, meta
    assert [w.tolist() for w, _ in policy.layers] == [w.tolist() for w, _ in same.layers]


def test_resume_from_a_state_that_is_not_a_resume_state_is_one_line(tmp_path):
    from causalfair.train.checkpoint import STATE_NAME, read_state

    shutil.copy(CHECKPOINT, tmp_path / STATE_NAME)  # a checkpoint.pt, renamed
    with pytest.raises(CheckpointError, match=r"state\.pt: policy is missing or malformed; "
                                              r"it is not the resume state"):
        read_state(tmp_path)


# ------------------------------------------------------------- reproducing an audit.json
def test_an_audit_is_reproduced_bit_for_bit_from_its_audit_json(tmp_path, cli_here):
    """A shipped Monte Carlo spec (a factory module next to it, n = 40) audited with
    `causalfair audit --out`, then re-run from its audit.json alone: every number
    identical; a number edited in audit.json is found; from another folder the spec's
    folder is asked for."""
    specs = tmp_path / "specs"
    specs.mkdir()
    text = (ROOT / "audits" / "infectious-1.toml").read_text(encoding="utf-8")
    assert "\nn = 2000 " in text
    (specs / "inf.toml").write_text(text.replace("\nn = 2000 ", "\nn = 40 "), encoding="utf-8")
    shutil.copy(ROOT / "audits" / "infectious_policies.py", specs)
    assert cli_here("audit", "specs/inf.toml", "--out", "rep", cwd=tmp_path).returncode == 0
    proc = cli_here("audit", "--reproduce", "rep", cwd=tmp_path)
    assert proc.returncode == 0 and "every number identical" in proc.stdout, proc.stdout
    doc = json.loads((tmp_path / "rep" / "audit.json").read_text(encoding="utf-8"))
    assert doc["seeds"]["engine"] == 0 and doc["spec"]["resolved"]["n"] == 40
    doc["quantities"]["C"]["estimate"] += 1e-12
    put(tmp_path / "edited.audit", doc)
    proc = cli_here("audit", "--reproduce", "edited.audit", cwd=tmp_path)
    assert proc.returncode == 1 and "quantities.C.estimate: recorded" in proc.stdout, proc.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    err = one_line_error(cli_here("audit", "--reproduce", "../rep", cwd=elsewhere))
    assert "spec.file: 'specs/inf.toml' is not a file here" in err and "--base-dir" in err, err
    proc = cli_here("audit", "--reproduce", "../rep", "--base-dir", "../specs", cwd=elsewhere)
    assert proc.returncode == 0 and "every number identical" in proc.stdout, proc.stdout


def test_a_checkpoint_changed_after_the_audit_is_found_by_its_hash(tmp_path, cli_here):
    (tmp_path / "checkpoints").mkdir()
    shutil.copy(CHECKPOINT, tmp_path / "checkpoints")
    shutil.copy(EXAMPLES / "lending-1-ppo.toml", tmp_path / "spec.toml")
    doc = copy.deepcopy(AUDIT)
    doc["spec"]["file"] = "spec.toml"
    put(tmp_path / "a.audit", doc)
    proc = cli_here("audit", "--reproduce", "a.audit", cwd=tmp_path)
    assert proc.returncode == 0 and "every number identical" in proc.stdout, proc.stdout
    shutil.copy(EXAMPLES / "checkpoints" / "lending-1-ppo.retrained-exact-1.pt",
                tmp_path / "checkpoints" / "lending-1-ppo.pt")
    err = one_line_error(cli_here("audit", "--reproduce", "a.audit", cwd=tmp_path))
    sha = doc["policy"]["checkpoint_sha256"]
    assert "lending-1-ppo.pt: SHA-256 " in err and f"is not the {sha} that a.audit recorded" in err
    assert "the checkpoint changed after the audit" in err, err


def test_reproduce_goes_alone(tmp_path, cli_here):
    err = one_line_error(cli_here("audit", "--reproduce", "x", "--json", cwd=tmp_path))
    assert "--reproduce: cannot be combined with --json" in err, err
    err = one_line_error(cli_here("audit", cwd=tmp_path))
    assert "give an audit spec (SPEC), or --reproduce AUDIT_DIR" in err, err


def test_a_shipped_specs_audit_json_with_its_keys_sorted_is_reproduced(monkeypatch):
    """The golden copy of audits/lending-1.toml's audit.json (keys sorted, as `jq -S`
    writes: the spec's thresholds, hence its verdicts, in another order) is reproduced
    bit for bit from the repository root, where that audit ran."""
    from causalfair.audit.reproduce import reproduce

    monkeypatch.chdir(ROOT)
    golden = ROOT / "tests" / "golden" / "specs" / "audits__lending-1.json"
    doc = json.loads(golden.read_text(encoding="utf-8"))
    assert [v["key"] for v in doc["verdicts"]] != sorted(doc["spec"]["parsed"]["thresholds"])
    rep = reproduce(golden)
    assert rep.identical, rep.summary()


def test_a_baseline_given_on_the_audits_command_line_is_asked_for_again(tmp_path, cli_here):
    proc = cli_here("audit", "audits/lending-1.toml", "--no-report", "--json", "--baseline",
                    "threshold:0.7", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    audit_json = put(tmp_path / "a.audit", proc.stdout)
    err = one_line_error(cli_here("audit", "--reproduce", audit_json, cwd=ROOT))
    assert "extra.baseline: the audit compared with a baseline given on its command line " \
           "('threshold:0.7')" in err and "--baseline POLICY" in err, err
    proc = cli_here("audit", "--reproduce", audit_json, "--baseline", "threshold:0.7", cwd=ROOT)
    assert proc.returncode == 0 and "every number identical" in proc.stdout, proc.stdout
    proc = cli_here("audit", "--reproduce", audit_json, "--baseline", "threshold:0.6", cwd=ROOT)
    assert proc.returncode == 1 and "attribution.baseline: recorded 'threshold:0.7'" in proc.stdout


def test_an_audit_folder_or_json_given_as_a_spec_points_to_reproduce(tmp_path, cli_here):
    folder = tmp_path / "rep"
    folder.mkdir()
    put(folder / "audit.json", AUDIT)
    for given in ("rep", "rep/audit.json"):
        err = one_line_error(cli_here("audit", given, cwd=tmp_path))
        assert f"audit spec {given}: is " in err and "not a spec (TOML)" in err, err
        assert f"`causalfair audit --reproduce {given}`" in err, err

"""`causalfair systems --json`, `causalfair train --json` (one shape per trainer: ppo,
repair, population) and the `repair.json` of `train --algo exact` are versioned documents
(``schema_version`` first) that validate against docs/schema/systems.schema.json,
train.schema.json and repair.schema.json; a wrong type in any of them fails its schema."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from causalfair._io import REPAIR_SCHEMA_VERSION, SYSTEMS_SCHEMA_VERSION, TRAIN_SCHEMA_VERSION
from causalfair.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schema"


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(name))


def errors(name: str, doc: object) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}"
            for e in validator(name).iter_errors(doc)]


def cli_json(capsys, *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc in (0, 1), f"exit {rc}\n--- stderr ---\n{err}"
    return rc, json.loads(out)


DELETE = object()


def mutated(doc: dict, path: tuple, value: object) -> dict:
    """A deep copy of ``doc`` with the value at ``path`` replaced (``value`` DELETE: removed)."""
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def assert_mutations_fail(name: str, doc: dict, cases: list[tuple[tuple, object]]) -> None:
    assert errors(name, doc) == []
    for path, value in cases:
        assert errors(name, mutated(doc, path, value)), (name, path, value)


@pytest.mark.parametrize("name", ["systems", "train", "repair"])
def test_the_schemas_are_valid_draft_2020_12(name):
    s = schema(name)
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(s)
    assert s["properties"]["schema_version"]["pattern"] == "^1\\.[0-9]+$"


def test_systems_json_is_versioned_and_validates(capsys):
    _, doc = cli_json(capsys, "systems", "--json")
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == SYSTEMS_SCHEMA_VERSION
    assert {"lending-1", "replicator-1"} <= {r["id"] for r in doc["systems"]}
    assert_mutations_fail("systems", doc, [
        (("schema_version",), DELETE), (("schema_version",), "2.0"),
        (("systems",), {"lending-1": {}}), (("systems", 0, "id"), 1),
        (("systems", 0, "defaults"), []), (("systems", 0, "entry_point"), DELETE)])
    assert errors("systems", doc["systems"])  # the unversioned bare list of before

    _, one = cli_json(capsys, "systems", "attention-1", "--json")
    assert next(iter(one)) == "schema_version" and one["schema_version"] == SYSTEMS_SCHEMA_VERSION
    assert one["id"] == "attention-1" and one["decisions"]["allowed"] == [1, 2, 3, 4]
    assert_mutations_fail("systems", one, [
        (("schema_version",), DELETE), (("group_weights",), "0.2"),
        (("decisions", "baseline"), "0"), (("features",), "rate_seen"),
        (("horizon",), 0), (("engines",), "mc"), (("systems",), [])])


# the cheapest run of each shape (the lending trainer and the generic one for ppo): argv, trainer
TRAIN = {
    "ppo-lending": (["--setting", "lending-1", "--algo", "ppo-cb", "--iterations", "2",
                     "--individuals", "32", "--horizon", "3", "--no-progress"], "ppo"),
    "ppo-generic": (["--system", "attention-1", "--algo", "ppo-c", "--constraint", "abs_C<=5",
                     "--iterations", "1", "--horizon", "2", "--individuals", "8",
                     "--eval-every", "1", "--set", "audit_n=50", "--no-progress"], "ppo"),
    "repair": (["--setting", "lending-1", "--algo", "exact", "--constraint", "abs_C<=0.5",
                "--iterations", "1", "--horizon", "2"], "repair"),
    "population": (["--system", "replicator-1", "--param", "horizon=4", "--algo", "l-ucbfair",
                    "--iterations", "2", "--set", "phi_samples=200", "--set", "phi_epochs=1",
                    "--set", "d=4"], "population"),
}
MUTATIONS = {
    "ppo": [(("metrics", "C"), "0.1"), (("metrics", "utility"), DELETE), (("metrics",), [1.0]),
            (("wall_s",), DELETE), (("trainer",), "exact"), (("checkpoint",), None)],
    "repair": [(("passed",), "yes"), (("constraints",), "abs_C<=0.5"), (("attempts", 0, "C"), "x"),
               (("result", "feasible"), 1), (("ratios", "to_bound"), "1"), (("algo",), "ppo"),
               (("lp_bound",), DELETE)],
    "population": [(("metrics", "episodes"), 2.5), (("metrics", "V_r"), None),
                   (("algo",), "ppo"), (("metrics",), DELETE)],
}


@pytest.mark.parametrize("run", list(TRAIN))
def test_train_json_every_shape_is_versioned_and_validates(run, tmp_path, capsys):
    argv, trainer = TRAIN[run]
    out = tmp_path / "run"
    _, doc = cli_json(capsys, "train", *argv, "--out", str(out), "--json")
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == TRAIN_SCHEMA_VERSION
    assert doc["trainer"] == trainer and doc["algo"] == argv[argv.index("--algo") + 1]
    assert Path(doc["checkpoint"]).is_file()
    assert_mutations_fail("train", doc, [(("schema_version",), DELETE), (("trainer",), DELETE),
                                         (("schema_version",), "2.0"), *MUTATIONS[trainer]])
    if trainer == "ppo":  # the keys scripts read before the version are all still there
        assert {"checkpoint", "wall_s", "metrics"} <= set(doc)
    if run == "ppo-generic":
        m = doc["metrics"]
        assert isinstance(m["constraints_met"], bool) and len(m["C_ci"]) == 2
        assert_mutations_fail("train", doc, [(("metrics", "C_ci"), [0.1, 0.2, 0.3]),
                                             (("metrics", "constraints_met"), "true")])
    if trainer == "repair":
        rep = json.loads((out / "repair.json").read_text(encoding="utf-8"))
        assert next(iter(rep)) == "schema_version" and rep["schema_version"] == REPAIR_SCHEMA_VERSION
        assert_mutations_fail("repair", rep, [
            (("schema_version",), DELETE), (("passed",), 1), (("original", "utility"), "u"),
            (("attempts",), {}), (("best_found", "start"), 3), (("wall_s",), -1.0)])
        # train --json prints the same repair as repair.json, with its checkpoint
        assert {k: v for k, v in doc.items() if k in rep and k != "schema_version"} == \
            {k: v for k, v in rep.items() if k != "schema_version"}


def test_the_repair_shape_of_train_json_is_repair_json():
    """train.schema.json's repair shape and repair.schema.json describe the same keys
    (the same definitions, so the two copies cannot drift)."""
    train, rep = schema("train"), schema("repair")
    (then,) = [b["then"] for b in train["allOf"]
               if b["if"]["properties"]["trainer"] == {"const": "repair"}]
    assert set(then["required"]) == set(rep["required"]) - {"schema_version"}
    assert {k: v for k, v in then["properties"].items() if k != "algo"} == \
        {k: v for k, v in rep["properties"].items() if k != "schema_version"}
    for name in ("attempt", "metrics"):
        assert train["$defs"][name] == rep["$defs"][name], name


def test_the_versions_are_announced():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    readme = (SCHEMAS / "README.md").read_text(encoding="utf-8")
    for name in ("systems", "train", "repair"):
        assert f"{name}.schema.json" in text and f"`{name}.schema.json`" in readme, name


def test_a_non_finite_metric_prints_as_null_not_nan(tmp_path, capsys, monkeypatch):
    """`train --json` prints strict JSON: a non-finite metric (a Lambda nothing measured)
    is null, which the schema allows, not Python's NaN."""
    from types import SimpleNamespace

    import causalfair.commands.train as train_cmd

    def fake_train(config, **kw):
        return SimpleNamespace(checkpoint=tmp_path / "checkpoint.pt", wall_s=0.5, config=config,
                               metrics={"C": 0.1, "DPE": 0.1, "IPE": 0.0, "SPE": 0.0,
                                        "utility": 1.0, "Lambda": float("nan"),
                                        "C_ci": (0.0, float("inf"))})

    monkeypatch.setattr(train_cmd, "train", fake_train)
    capsys.readouterr()
    assert main(["train", "--setting", "lending-1", "--algo", "ppo", "--iterations", "1",
                 "--out", str(tmp_path / "run"), "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c} in\n{out}"))
    assert doc["metrics"]["Lambda"] is None and doc["metrics"]["C_ci"] == [0.0, None]
    assert errors("train", doc) == []

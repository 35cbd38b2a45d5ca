"""What earlier sessions noticed and left alone (fifth round): the help of `gate` and
`audit` says a spec is code, check_zip_sizes has no unused parameters, a hand-edited
sweep result.json is a run to train again or a clear error (never a traceback or a wrong
row), ..."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.errors import OutputError
from tests.tri_system import tri_source


def _module(tmp_path, monkeypatch, name, source):
    """``source`` as the module ``name`` in ``tmp_path``, the working directory, importable."""
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------- 1. a spec is code (--help)
@pytest.mark.parametrize("command", ["gate", "audit"])
def test_help_says_a_spec_that_names_a_factory_runs_it(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "A spec is code: one that names a factory ([system] factory, [system] gym, " \
           "[policy] factory) runs it (docs/limits.md, \"Security\")." in text
    # the words and the heading it points to are the docs'
    assert "**A spec is code**" in (ROOT / "docs" / "ci-gate.md").read_text()
    assert re.search(r"^## Security\b", (ROOT / "docs" / "limits.md").read_text(), re.M)


# ----------------------------------------------------------------- 2. check_zip_sizes
def test_check_zip_sizes_uses_every_parameter_and_refuses_a_zip_bomb(tmp_path, monkeypatch):
    import zipfile

    from causalfair._safe_read import check_zip_sizes
    from causalfair.errors import CheckpointError, ResourceLimitError

    # its parameters are the ones it reads (factor= and fix= were never passed nor needed)
    assert list(inspect.signature(check_zip_sizes).parameters) == ["src", "where", "error"]
    bomb = tmp_path / "state.pt"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data", b"\0" * (2 << 20))  # 2 MiB of zeros: a few KB on disk
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "1M")
    with pytest.raises(ResourceLimitError, match=r"resume: .*state\.pt: 2\.0 MiB uncompressed.*"
                                                 r"use a smaller file"):
        check_zip_sizes(bomb, f"resume: {bomb}", CheckpointError)
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "4M")
    check_zip_sizes(bomb, f"resume: {bomb}", CheckpointError)  # under the limit: no error


# ----------------------------------------------------------------- 3. a hand-edited result.json
def _cfg():
    from causalfair.train import TrainConfig

    return TrainConfig(algo="ppo", setting="lending-1", seed=0, iterations=1)


def _write(run: Path, cfg, **fields) -> None:
    from causalfair.train.sweep_io import config_doc

    doc = {"metrics": {"C": 0.5}, "wall_s": 1.0, "pair": ["s+", "s-"],
           "config": config_doc(cfg), "requested": config_doc(cfg)}
    (run / "result.json").write_text(json.dumps({**doc, **fields}))


@pytest.mark.parametrize("pair", [
    '[s+, s-]', '["s+"]', "[", '["s+", "s-", "x"]', 3, ["s+", "s-", "x"],
    {"a": 1}, [1, 2], ["s+", "s+"], ""])
def test_a_malformed_pair_in_result_json_is_a_run_to_train_again(tmp_path, pair):
    """Before: a `[`-string was split into its characters ('["[", "s", "+", ...]', a wrong
    runs.csv row), a number was a TypeError traceback, three names a three-name pair."""
    from causalfair.train.sweep_io import finished_run

    cfg = _cfg()
    _write(tmp_path, cfg, pair=pair)
    assert finished_run(tmp_path, cfg, ("s+", "s-")) is None


@pytest.mark.parametrize("metrics", [{"C": "0.5"}, {"C": True}, {"C": [1]}, [1, 2]])
def test_a_metric_that_is_no_number_is_a_run_to_train_again(tmp_path, metrics):
    from causalfair.train.sweep_io import finished_run

    cfg = _cfg()
    _write(tmp_path, cfg, metrics=metrics)
    assert finished_run(tmp_path, cfg, ("s+", "s-")) is None


def test_a_pair_as_json_text_is_read_as_the_two_names_and_a_foreign_pair_is_refused(tmp_path):
    from causalfair.train.sweep_io import finished_run

    cfg = _cfg()
    _write(tmp_path, cfg, pair='["s-", "s+"]')  # the JSON text runs.csv holds: the pair
    assert finished_run(tmp_path, cfg, ("s+", "s-"))["pair"] == '["s-", "s+"]'
    _write(tmp_path, cfg, pair=["x", "y"])
    with pytest.raises(OutputError, match=r'pair as \["x", "y"\], which names no two of its '
                                          r"system's groups \(s\+, s-\); use --force"):
        finished_run(tmp_path, cfg, ("s+", "s-"))


def test_a_resumed_sweep_retrains_a_run_whose_pair_was_hand_edited(tmp_path):
    from causalfair.train.sweep import sweep

    out = tmp_path / "sw"
    small = {"iterations": 1, "n_individuals": 16, "n_epochs": 1}
    sweep(["ppo"], [0], overrides=small, out=out)
    result = out / "runs" / "lending-1" / "ppo" / "seed-0" / "result.json"
    doc = json.loads(result.read_text())
    result.write_text(json.dumps({**doc, "pair": '[s+, s-]', "wall_s": 12345.0}))
    res = sweep(["ppo"], [0], overrides=small, out=out, existing="resume")
    runs = pd.read_csv(out / "runs.csv")
    assert runs["pair"].tolist() == ['["s+", "s-"]']  # before: '["[", "s", "+", ...]'
    assert runs["wall_s"].tolist() != [12345.0]  # trained again, not the edited result
    assert json.loads(result.read_text())["pair"] == ["s+", "s-"]
    assert res.runs["pair"].tolist() == ['["s+", "s-"]']


# ----------------------------------------------------------------- 4. decompose --reference
# three groups on two levels, T = 1 (tests/tri_system.py): V = (0.3, 0.24, 0.1)
TRI = tri_source(1)


@pytest.fixture
def tri(tmp_path, monkeypatch):
    return _module(tmp_path, monkeypatch, "leftovers5_tri", TRI)


def _json(capsys, *args) -> dict:
    assert main(["decompose", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_decompose_reference_on_a_system_is_the_reference_of_every_pair(tri, capsys):
    """Before: `--reference: only with --logs FILE`, exit 2, though cf.compare_groups and
    a spec's `reference =` take it on a system."""
    from leftovers5_tri import make, policy

    import causalfair as cf

    out = _json(capsys, "--system", "leftovers5_tri:make", "--policy",
                "leftovers5_tri:policy", "--reference", "C")
    pairs = out["pairs"]
    assert pairs["reference"] == "C"
    assert pairs["reference_pairs"] == ["A-C", "B-C"]  # every group against C, then A-B
    assert list(pairs["values"]) == ["A-C", "B-C", "A-B"]
    # by hand: V = (0.3, 0.24, 0.1)
    for p, c in (("A-C", 0.2), ("B-C", 0.14), ("A-B", 0.06)):
        assert pairs["values"][p]["C"]["estimate"] == pytest.approx(c, abs=1e-12)
    # the Python door gives the same pairs
    py = cf.compare_groups(make(), policy(), reference="C")
    assert py.reference == "C" and py.reference_pairs == pairs["reference_pairs"]
    for p in pairs["values"]:
        assert py.pairs[p]["C"][0] == pytest.approx(pairs["values"][p]["C"]["estimate"],
                                                    abs=1e-15)
    # without --reference: the first group (A) is the reference
    assert _json(capsys, "--system", "leftovers5_tri:make", "--policy",
                 "leftovers5_tri:policy")["pairs"]["reference_pairs"] == ["B-A", "C-A"]


def test_decompose_reference_with_two_groups_prints_the_table_as_the_logs_door(capsys):
    assert main(["decompose", "--setting", "lending-1", "--policy", "threshold:0.5",
                 "--reference", "s-"]) == 0
    text = capsys.readouterr().out
    assert "Every pair (X-Y: X minus Y; reference group s-;" in text
    assert re.search(r"^  s\+-s-\s+-0\.162747 ", text, re.M)  # the published lending-1 C
    # two groups without --reference keep their output (no table, no pairs section)
    out = _json(capsys, "--setting", "lending-1", "--policy", "threshold:0.5")
    assert "pairs" not in out
    assert out["C"] == pytest.approx(-0.162747, abs=1e-6)


def test_decompose_refuses_an_unknown_reference_before_it_runs(capsys, monkeypatch):
    import causalfair.engines.montecarlo as mc

    def no_run(*a, **k):
        raise AssertionError("the Monte Carlo run started before --reference was checked")

    monkeypatch.setattr(mc, "decompose_mc", no_run)
    assert main(["decompose", "--setting", "lending-1", "--policy", "threshold:0.5",
                 "--engine", "mc", "--n", "10", "--reference", "zz"]) == 2
    assert "--reference: bad value 'zz'; name one of the groups s+, s- (default: the first)." \
        in capsys.readouterr().err


def test_decompose_logs_names_a_bad_reference_as_its_flag(tmp_path, capsys):
    """Before: `reference: bad value ...` (the library's field, not the flag)."""
    log = tmp_path / "log.csv"
    assert main(["simulate-logs", "--policy", "random:0.5", "--n", "200", "--horizon", "3",
                 "--out", str(log)]) == 0
    capsys.readouterr()
    assert main(["decompose", "--logs", str(log), "--boot", "3", "--reference", "zz"]) == 2
    err = capsys.readouterr().err
    assert "--reference: bad value 'zz'; name one of the groups s+, s- (default: the first)." \
        in err, err


# ----------------------------------------------------------------- 5. a nearly departed group
# two groups, levels sick, well, left (departed, absorbing); group B: 0.2% present at the
# start, so a sample of 20 holds nobody of it present with probability 0.998^20 = 0.96
# (seed 0: nobody); before, Lambda came out 0 with the interval [0, 0], pairing no one of B
WARD = '''
import numpy as np
import causalfair as cf

def make():
    stay = [0.0, 0.0, 1.0]
    monitor = np.array([[0.5, 0.2, 0.3], [0.1, 0.8, 0.1], stay])
    admit = np.array([[0.2, 0.6, 0.2], [0.0, 0.9, 0.1], stay])
    kernel = np.stack([np.stack([monitor, admit])] * 2)
    model = cf.TabularModel(kernel=kernel, potential=np.array([0.0, 1.0, 0.0]),
                            initial=np.array([[0.3, 0.7, 0.0], [0.002, 0.0, 0.998]]),
                            group_names=["A", "B"], departed_levels=(2,))
    return cf.System(id="ward5", groups=("A", "B"), tabular=model, horizon=3)
'''
NOBODY = (r"n: bad value 20 for group 'B': all 20 of its sampled units are at the departed "
          r"levels \('3',\) at every step .* raise n \(n= in Python, --n on the command line, "
          r"\[engine\] n in a spec\)")


@pytest.fixture
def ward(tmp_path, monkeypatch):
    return _module(tmp_path, monkeypatch, "leftovers5_ward", WARD)


def test_a_sample_with_nobody_present_of_a_group_is_refused_in_python(ward):
    from leftovers5_ward import make

    import causalfair as cf
    from causalfair.errors import InputError

    for door in (cf.decompose, cf.benefit_fairness):
        with pytest.raises(InputError, match=NOBODY):
            door(make(), "uniform", engine="mc", n=20)
    # a sample that holds some of B: no refusal (the exact Lambda of a uniform policy: 0)
    assert cf.decompose(make(), "uniform", engine="mc", n=4000).Lambda == pytest.approx(0.0)


def test_a_sample_with_nobody_present_of_a_group_is_refused_on_the_command_line(ward, capsys):
    assert main(["decompose", "--system", "leftovers5_ward:make", "--policy", "uniform",
                 "--engine", "mc", "--n", "20"]) == 2
    err = capsys.readouterr().err
    assert re.search("--" + NOBODY, err), err
    assert len(err.strip().splitlines()) == 1, err


def test_a_sample_with_nobody_present_of_a_group_is_refused_in_a_spec(ward, capsys):
    (ward / "ward.toml").write_text('name = "ward"\n[system]\nfactory = "leftovers5_ward:make"\n'
                                    '[policy]\nbuiltin = "uniform"\n[engine]\nkind = "mc"\n'
                                    'n = 20\n')
    assert main(["audit", str(ward / "ward.toml"), "--out", str(ward / "out")]) == 2
    err = capsys.readouterr().err
    assert re.search(r"ward\.toml: the audit failed: " + NOBODY, err), err


# ----------------------------------------------------------------- 6. group names in CSV logs
NAMES = '''
import numpy as np
import causalfair as cf

def make(names=("a,b", 'say "hi"', "=1+1", "NA", "007")):
    base = cf.lending_setting("lending-1").tabular
    names = list(names)
    model = cf.TabularModel(kernel=np.stack([base.kernel[0]] * len(names)),
                            initial=np.stack([base.initial[i % 2] for i in range(len(names))]),
                            potential=np.asarray(base.potential)[0], group_names=names)
    return cf.System(id="names5", groups=tuple(names), tabular=model, horizon=3)
'''


@pytest.fixture
def names(tmp_path, monkeypatch):
    return _module(tmp_path, monkeypatch, "leftovers5_names", NAMES)


def test_group_names_round_trip_through_simulate_logs_and_decompose_logs(names, capsys):
    """A comma or a quote in a name is quoted by the CSV writer; `NA` was read back as a
    missing group and `007` as the number 7 (merged with a group `7`), `1e3` as 1000.0."""
    from leftovers5_names import make

    from causalfair.logs import audit_logs, simulate_logs

    assert main(["simulate-logs", "--system", "leftovers5_names:make", "--policy",
                 "random:0.5", "--n", "500", "--out", "log.csv"]) == 0
    capsys.readouterr()
    text = (names / "log.csv").read_text()
    assert '"a,b"' in text and '"say ""hi"""' in text and ",=1+1," in text  # data, no '
    out = _json(capsys, "--logs", "log.csv", "--boot", "3")
    # the same log in memory (no CSV), audited by the Python door: the same numbers
    mem = audit_logs(simulate_logs(make(), "random:0.5", n_individuals=500, horizon=3,
                                   seed=0), n_boot=3, seed=0)
    dec = mem.decomposition
    assert out["group_sizes"] == {g: int(n) for g, n in mem.group_sizes.items()}
    assert sorted(out["group_sizes"]) == sorted(make().groups)  # every name, as written
    assert out["pair"] == [dec.groups[i] for i in dec.pair] == ["a,b", "=1+1"]
    for q in ("C", "DPE", "IPE", "SPE"):  # the same numbers, bit for bit
        assert out[q] == getattr(dec, q), q


@pytest.mark.parametrize("cells, groups", [
    (["007", "7"], ["007", "7"]),          # before: one group 7 (and refused: 1 group)
    (["NA", "None"], ["NA", "None"]),      # before: missing values, refused
    (["1e3", "5"], ["1e3", "5"]),          # before: 1000.0 and 5.0
    (["2", "10"], ["2", "10"]),            # numbers as written: numeric order, as before
    (["0.5", "1.5"], ["0.5", "1.5"]),
    (["nan", "1"], ["1", "nan"]),          # text (not a missing group)
    (["inf", "2"], ["2", "inf"]),          # before: 2.0 and inf, numbers
])
def test_a_csv_logs_group_cells_are_the_labels_written(tmp_path, cells, groups):
    import gzip

    from causalfair.logs.schema import read_logs, validate_logs

    rows = ["id,t,group,level,decision,next_level,reward,outcome"]
    for i in range(8):
        rows.append(f"{i},0,{cells[i % 2]},{i % 3},{i % 2},{(i + 1) % 3},0.0,NA")
    text = "\n".join(rows) + "\n"
    (tmp_path / "log.csv").write_text(text)
    (tmp_path / "log.csv.gz").write_bytes(gzip.compress(text.encode()))
    for name in ("log.csv", "log.csv.gz"):
        df = read_logs(tmp_path / name)
        assert df["outcome"].isna().all()  # the other columns' "NA" is missing, as before
        assert list(validate_logs(df).groups) == groups


def test_an_empty_group_cell_is_still_a_missing_value(tmp_path):
    from causalfair.logs import LogError
    from causalfair.logs.schema import read_logs, validate_logs

    (tmp_path / "log.csv").write_text("id,t,group,level,decision,next_level,reward\n"
                                      "0,0,A,0,1,1,0\n1,0,,1,0,1,0\n")
    with pytest.raises(LogError, match=r"column 'group' has 1 missing value"):
        validate_logs(read_logs(tmp_path / "log.csv"))


# ----------------------------------------------------------------- 8. one list of names
def test_the_replicator_systems_of_the_help_are_the_registrys():
    from causalfair._names import REGISTRY, REPLICATOR_SYSTEMS
    from causalfair.systems.builtin import BUILTINS

    assert REPLICATOR_SYSTEMS == tuple(
        sid for sid, entry, _ in BUILTINS if entry.startswith("causalfair.systems.replicator:"))
    for algo in ("r-td3", "l-ucbfair"):
        assert REGISTRY[algo].systems == f"replicator dynamics ({', '.join(REPLICATOR_SYSTEMS)})"


def test_train_help_names_every_replicator_system(capsys):
    from causalfair._names import REPLICATOR_SYSTEMS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.count(f"replicator system ({', '.join(REPLICATOR_SYSTEMS)})") == 2, text
    assert f"--system {REPLICATOR_SYSTEMS[0]} --algo l-ucbfair" in text


def test_the_lending_env_id_is_registered_once_by_import_causalfair():
    """causalfair.systems.gym.lending registered its id a second time on import; the one
    registration is `import causalfair`'s (cf._GYM_ENVS)."""
    import causalfair as cf
    from causalfair.systems.gym import lending

    assert (lending.ENV_ID, "causalfair.systems.gym.lending:LendingEnv", {}) in cf._GYM_ENVS
    assert "register(" not in Path(lending.__file__).read_text()

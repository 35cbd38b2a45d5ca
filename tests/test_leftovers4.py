"""Leftovers of earlier sessions (session 17): a sweep's --param goes to the systems whose
factory takes it and runs.csv / table.md say which params each system ran with; one
helper turns a library refusal into a flag's refusal."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from causalfair.cli import main
from causalfair.errors import ConfigError
from causalfair.train.sweep import sweep, tabulate

#: the smallest runs: the workflow is checked, not the science
TINY = ["--iterations", "1", "--set", "n_individuals=16", "--set", "horizon=3",
        "--set", "hidden=[4]", "--set", "n_epochs=1", "--set", "eval_every=1",
        "--set", "audit_n=8"]


# ------------------------------------------------------------- 1. a sweep's --param
def test_a_param_goes_to_the_systems_that_take_it_and_the_runs_say_so(tmp_path, capsys):
    # was: `--param increase=f-ppo` went to lending-1 too (refused: its factory has no
    # `increase`), and `--system lending-1 --system attention-1` swept attention-1 only
    out = tmp_path / "sw"
    code = main(["sweep", "--algo", "ppo", "--seeds", "0", "--system", "lending-1",
                 "--system", "attention-1", "--param", "increase=f-ppo", *TINY,
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert ("--param increase=f-ppo went to attention-1 only (lending-1: not a parameter of "
            "its factory)") in err
    runs = pd.read_csv(out / "runs.csv", keep_default_na=False)
    assert runs["system"].tolist() == ["lending-1", "attention-1"]
    assert [json.loads(c) for c in runs["params"]] == [{}, {"increase": "f-ppo"}]
    table = pd.read_csv(out / "table.csv", keep_default_na=False)
    assert set(zip(table["system"], table["params"], strict=True)) == {
        ("lending-1", "{}"), ("attention-1", '{"increase": "f-ppo"}')}
    md = (out / "table.md").read_text()
    assert '| attention-1 (increase="f-ppo") | ppo |' in md and "| lending-1 | ppo |" in md
    docs = {sy: json.loads((out / "runs" / sy / "ppo" / "seed-0" / "result.json").read_text())
            for sy in ("lending-1", "attention-1")}
    assert docs["attention-1"]["requested"]["system_params"] == {"increase": "f-ppo"}
    assert docs["lending-1"]["requested"]["setting"] == "lending-1"  # its own, as before
    assert not docs["lending-1"]["requested"]["system_params"]

    # a run's identity holds its params: the same sweep resumes, keeping both runs ...
    again = sweep(["ppo"], [0], ["lending-1", "attention-1"], params={"increase": "f-ppo"},
                  overrides=_overrides(), out=out, existing="resume")
    assert again.reused == 2 and not again.failed
    # ... and a resumed sweep with other params never reuses runs trained with these
    from causalfair.errors import OutputError

    with pytest.raises(OutputError, match=r"attention-1.*system_params=\{'increase': 'f-ppo'\} "
                                          r"\(--param\), this sweep asks system_params=\{\}"):
        sweep(["ppo"], [0], ["lending-1", "attention-1"], overrides=_overrides(), out=out,
              existing="resume")


def _overrides() -> dict:
    out = {}
    for a, b in zip(TINY[::2], TINY[1::2], strict=True):
        if a == "--iterations":
            out["iterations"] = int(b)
        else:
            k, v = b.split("=")
            out[k] = json.loads(v)
    return out


def test_a_param_no_system_takes_is_refused_naming_the_flag_value_and_fix(tmp_path):
    with pytest.raises(ConfigError) as info:
        sweep(["ppo"], [0], ["lending-1", "attention-1"], params={"horizn": 3},
              out=tmp_path / "sw")
    msg = str(info.value)
    assert "--param horizn=3 is a parameter of no system of this sweep" in msg, msg
    assert "lending-1 takes levels, interest, group_weights" in msg
    assert "did you mean 'horizon'?" in msg and "add a system whose factory takes" in msg
    assert not (tmp_path / "sw").exists()  # refused before anything is written


def test_system_params_gives_each_system_what_its_factory_takes():
    from causalfair.train.sweep import system_params

    got = system_params(["lending-1", "attention-1", "replicator-1"],
                        {"horizon": 5, "levels": 4})
    assert got["lending-1"] == {"levels": 4}
    assert got["attention-1"] == {"horizon": 5}
    assert got["replicator-1"] == {"horizon": 5}
    assert system_params(["lending-1"], {}) == {"lending-1": {}}


def test_tabulate_keeps_runs_of_one_system_with_different_params_apart():
    runs = pd.DataFrame({"system": ["s"] * 4, "params": ['{}', '{}', '{"h": 5}', '{"h": 5}'],
                         "algo": ["a"] * 4, "seed": [0, 1, 0, 1], "C": [1.0, 3.0, 10.0, 30.0]})
    t = tabulate(runs)
    assert list(t.columns[:3]) == ["system", "params", "algo"]
    assert t["mean"].tolist() == [2.0, 20.0] and t["n"].tolist() == [2, 2]


# ------------------------------------------------------------- 2. one helper for flag errors
def test_one_helper_names_a_library_refusal_as_the_flag():
    from pathlib import Path

    import causalfair.commands as C
    from causalfair.commands._system import as_flag_error
    from causalfair.errors import InputError, UsageError

    with pytest.raises(UsageError) as info, as_flag_error():
        raise InputError("alpha: must be in (0, 0.5], got 1.5.")
    assert str(info.value) == "--alpha: must be in (0, 0.5], got 1.5."
    assert info.value.__suppress_context__  # one line, no chained traceback
    # only=: the refusals of those fields are the flags'; another field's stays as it is
    with pytest.raises(UsageError, match=r"^--pair: "), as_flag_error(f for f in ["pair"]):
        raise InputError("pair: names no two groups.")
    with pytest.raises(InputError, match=r"^eps: "), as_flag_error(["pair"]):
        raise InputError("eps: bad.")
    with pytest.raises(InputError, match=r"^pair: "), as_flag_error([]):
        raise InputError("pair: not given by the user, so not the flag's.")
    # every command uses it: no other copy of the conversion
    copies = [p.name for p in Path(C.__file__).parent.glob("*.py")
              if 'UsageError(f"--{exc}")' in p.read_text(encoding="utf-8")]
    assert copies == ["_system.py"], copies


@pytest.mark.parametrize("argv, message", [
    (["decompose", "--alpha", "1.5"], "causalfair decompose: error: --alpha: "),
    (["decompose", "--system", "attention-1", "--policy", "uniform", "--engine", "exact"],
     "causalfair decompose: error: --engine: bad value 'exact'; "),
    (["decompose", "--horizon", "0"], "causalfair decompose: error: --horizon: "),
    (["graph", "--levels", "2"], "causalfair graph: error: --levels: "),
])
def test_the_flags_refusals_read_as_before(argv, message, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err


# ------------------------------------------------------------- 3. the example screenshots
@pytest.mark.regen  # a regenerated artefact: Chromium's rendering is not pinned
def test_the_example_screenshots_show_the_current_pages(tmp_path):
    # were taken before the last report changes (the waterfall, the Details tables); now
    # `regenerate.sh screenshots` re-takes them from the pages, and they must match
    import shutil
    import subprocess
    from pathlib import Path

    from PIL import Image, ImageChops, ImageStat

    chromium = Path("/usr/bin/chromium")
    if not chromium.is_file():
        pytest.skip("no Chromium at /usr/bin/chromium")
    root = Path(__file__).resolve().parents[1]
    ex = tmp_path / "reports" / "examples"
    shutil.copytree(root / "reports" / "examples", ex,
                    ignore=shutil.ignore_patterns("checkpoints", "__pycache__"))
    proc = subprocess.run(["bash", str(ex / "regenerate.sh"), "screenshots"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in ("screenshot.png", "screenshot-gate.png"):
        shipped, fresh = (Image.open(d / name).convert("RGB") for d in (root / "reports" /
                                                                        "examples", ex))
        assert shipped.size == fresh.size == (1100, 8600), name
        diff = ImageStat.Stat(ImageChops.difference(shipped, fresh)).mean
        assert max(diff) < 1.0, (name, diff)  # (mean 0-255 difference per channel)


# ------------------------------------------------------------- 4. re-rendering the pages
@pytest.mark.regen  # figures' bytes depend on matplotlib's build (as the regen tier)
def test_regenerate_pages_renders_the_example_pages_again_byte_for_byte(tmp_path):
    # the pages were re-rendered last session by a script outside the repo; now
    # `regenerate.sh pages` does it (exact audits again, the run's record from audit.json,
    # nothing trained): every file comes back, byte for byte, where a page was damaged
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    src = root / "reports" / "examples"
    ex = tmp_path / "reports" / "examples"
    shutil.copytree(src, ex, ignore=shutil.ignore_patterns("__pycache__"))
    (ex / "gate" / "lending-2-ppo" / "report.md").write_text("damaged\n")
    (ex / "lending-1-ppo" / "card.md").unlink()
    proc = subprocess.run(["bash", str(ex / "regenerate.sh"), "pages"], capture_output=True,
                          text=True, timeout=600, env={**__import__("os").environ,
                                                       "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("rendered again") == 4, proc.stdout
    files = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file()
                   and "__pycache__" not in p.parts)
    assert len(files) > 60
    for rel in files:
        assert (ex / rel).read_bytes() == (src / rel).read_bytes(), rel

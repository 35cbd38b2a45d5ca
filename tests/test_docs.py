"""The Python examples in README.md and docs/*.md run as written (each file's ```python
blocks in order, in a fresh process, in a scratch folder holding a copy of audits/ and of
the example modules in docs/examples/); the ```bash blocks of docs/own-system.md and
docs/limits.md run too, line by line, each expected to exit 0 unless it ends with "# exit 0
pass, 1 fail"; each ``$ command`` of docs/limits.md's ```console blocks prints exactly the
lines under it."""

import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import describe, run_cmd
from tests.ray_head import answers, free_port, run_in_session, short_temp_dir

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SLOW = {"training.md", "contributing.md"}  # train short runs


def blocks(path: Path) -> str:
    return "\n".join(re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S))


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in DOCS if blocks(p)],
    ids=lambda p: p.name,
)
def test_doc_examples_run(path, tmp_path):
    shutil.copytree(ROOT / "audits", tmp_path / "audits")
    for example in (ROOT / "docs" / "examples").glob("*.py"):
        shutil.copy(example, tmp_path / example.name)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    run_cmd([sys.executable, "-c", blocks(path)], cwd=tmp_path, env=env, timeout=300, expect=0)


def test_own_system_commands_hide_no_failure():
    """A reader copies the shell lines of the docs as they are: none may hide a failure
    (``|| true``, ``2>/dev/null``), which the next step then meets as a stranger error
    (own-system.md's copy of clinic.py hid a missing file, and `from clinic import` failed)."""
    for path in DOCS:
        for block in re.findall(r"```(?:bash|console)\n(.*?)```", path.read_text(encoding="utf-8"),
                                re.S):
            for line in block.splitlines():
                assert not re.search(r"\|\|\s*true\b|2>\s*/dev/null", line), (path.name, line)


@pytest.mark.slow
def test_own_system_walkthrough_commands_run(tmp_path):
    """docs/own-system.md, followed literally: its shell blocks, in order, in an empty
    folder (its first line copies clinic.py there; this checkout is the install)."""
    text = (ROOT / "docs" / "own-system.md").read_text(encoding="utf-8")
    script = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    # the gate line may exit 1 (a failing verdict is a result, not an error)
    script = script.replace("# exit 0 pass, 1 fail, 2 bad input", "|| test $? -eq 1")
    run_cmd(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, timeout=600,
            expect=0)
    assert (tmp_path / "reports" / "clinic" / "report.html").is_file()
    assert (tmp_path / "gate.xml").is_file() and (tmp_path / "clinic-graph.svg").is_file()
    assert (tmp_path / "reports" / "clinic-ppo" / "report.html").is_file()
    import xml.etree.ElementTree as ET

    first = json.loads((tmp_path / "reports" / "clinic-ppo" / "audit.json").read_text())
    retrained = tmp_path / "runs" / "clinic-ppo" / "checkpoint.retrained-ppo-c-1.pt"
    assert retrained.is_file() == (first["overall"] != "PASS")  # retrained only if it failed
    # one test case per threshold, and one for the repair's honesty when it was repaired
    tests = "2" if retrained.is_file() else "1"
    assert ET.parse(tmp_path / "gate-ppo.xml").getroot().get("tests") == tests


def console_examples(text: str) -> list[tuple[str, list[str]]]:
    """(command, the lines printed under it) for each ``$ command`` line of the
    ```console blocks of ``text``."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *lines = chunk.rstrip("\n").split("\n")
            out.append((command, lines))
    return out


@pytest.mark.slow
def test_contributing_walkthrough_runs(tmp_path):
    """docs/contributing.md, followed literally: its Python blocks, then each line of its
    bash blocks, in one scratch folder (the ``python -m pytest`` and ``python tests/...``
    lines in this checkout; the test lines only collect, on this file); each line exits 0,
    or the N its ``# exit N: TEXT`` says, its error line holding TEXT."""
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAUSALFAIR_")}
    env.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg",
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    run_cmd([sys.executable, "-c", blocks(ROOT / "docs" / "contributing.md")], cwd=tmp_path,
            env=env, timeout=300, expect=0)
    lines = [ln for block in re.findall(r"```bash\n(.*?)```", text, re.S)
             for ln in block.splitlines() if ln.strip()]
    assert len(lines) >= 9, lines
    for line in lines:
        m = re.search(r"# exit (\d+)(?:: (.*))?$", line)
        expect, says = (int(m.group(1)), m.group(2)) if m else (0, None)
        cmd, cwd = line.split("#")[0].strip(), tmp_path
        if cmd.startswith(("python -m pytest", "python tests/")):
            cwd = ROOT
            if cmd.startswith("python -m pytest"):  # the tier's selection, collected only
                cmd = (cmd.replace("python", sys.executable, 1)
                       + " --collect-only -q -n 0 -p no:cacheprovider tests/test_contributor.py")
            else:
                cmd = cmd.replace("python", sys.executable, 1)
        proc = run_cmd(["bash", "-c", cmd], cwd=cwd, env=env, timeout=300)
        assert proc.returncode in ((expect, 5) if "--collect-only" in cmd else (expect,)), (
            line, describe(proc))
        if says:  # what the error line says
            assert says in proc.stderr, describe(proc)
    assert json.loads((tmp_path / "admissions.json").read_text())["C"] is not None
    assert "overall" in json.loads((tmp_path / "admissions-npz.json").read_text())


def test_limits_examples_run(tmp_path):
    """docs/limits.md, followed literally, in a folder holding a copy of audits/: each
    ``$ command`` of its console blocks is an input error that prints exactly the line
    under it on stderr, nothing on stdout, and exits 2 (the exit-code contract); its bash
    blocks exit 0, or 1 where they say so."""
    shutil.copytree(ROOT / "audits", tmp_path / "audits")
    text = (ROOT / "docs" / "limits.md").read_text(encoding="utf-8")
    examples = console_examples(text)
    assert len(examples) >= 7, examples
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAUSALFAIR_")}
    env.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg",
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    for command, lines in examples:
        assert len(lines) == 1 and ": error: " in lines[0], (command, lines)
        proc = run_cmd(["bash", "-c", command], cwd=tmp_path, env=env, timeout=120, expect=2)
        assert proc.stderr.splitlines() == lines and proc.stdout == "", describe(proc)
    script = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S))
    assert "--timeout 600" in script, script
    script = script.replace("# exit 0 pass, 1 fail", "|| test $? -eq 1")
    run_cmd(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, timeout=300,
            expect=0)
    assert json.loads((tmp_path / "gate.json").read_text())["specs"][0]["name"] == "lending-1"


@pytest.mark.ray
@pytest.mark.mlflow
@pytest.mark.skipif(not (importlib.util.find_spec("ray") and importlib.util.find_spec("mlflow")),
                    reason="needs the ray and mlflow extras")
def test_scale_commands_run(tmp_path, ray_session_head):
    """docs/scale.md, followed literally: its shell blocks in order (a Ray cluster started
    and stopped, a sweep, shards merged), in a folder holding a copy of audits/, as a user
    on a fresh machine: HOME is an empty folder (no Ray token, no MLflow settings), the
    cluster gets a free port in place of the doc's 6399 (another cluster may hold it) and
    a Ray temp dir of its own (RAY_TMPDIR; /tmp/ray is the user's). The example stops its
    cluster alone: nothing it started is left running, and the session's Ray head (a
    cluster it did not start) still runs."""
    shutil.copytree(ROOT / "audits", tmp_path / "audits")
    text = (ROOT / "docs" / "scale.md").read_text(encoding="utf-8")
    script = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S))
    script = script.replace("# exit 0 pass, 1 fail", "|| test $? -eq 1")
    assert script.count("6399") == 3, script  # the port the test replaces
    assert "ray stop" not in script and "kill $ray_head" in script, script
    port = free_port()
    assert not answers(port), f"127.0.0.1:{port} is taken"
    script = script.replace("6399", str(port))
    bindir = str(Path(sys.executable).parent)  # `ray` and `causalfair` of this Python
    (tmp_path / "home").mkdir()
    ray_tmp = short_temp_dir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HOME": str(tmp_path / "home"),
           "RAY_TMPDIR": ray_tmp, "PATH": bindir + os.pathsep + os.environ["PATH"]}
    for var in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    try:
        proc, left = run_in_session(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                                    env=env, timeout=600)
        used_ray_tmp = os.path.isdir(os.path.join(ray_tmp, "ray"))
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    log = tmp_path / "ray-head.log"
    head_log = log.read_text(errors="replace") if log.exists() else "(none)"
    assert proc.returncode == 0, describe(proc, 0) + "\n--- ray-head.log ---\n" + head_log
    # `kill $ray_head` stopped the example's cluster: nothing of it had to be killed
    assert left == [], f"left running: {left}\n" + describe(proc) + "\n" + head_log
    assert used_ray_tmp and ray_session_head.alive(), ray_session_head.output()
    a = json.loads((tmp_path / "gate.json").read_text())
    b = json.loads((tmp_path / "gate-ray.json").read_text())
    # gate.json is the shards' merge, gate-ray.json the Ray run: both in the gate's order
    assert {e["name"]: e["verdicts"] for e in a["specs"]} == {
        e["name"]: e["verdicts"] for e in b["specs"]}
    assert "| lending-1 | ppo-c | 3 |" in (tmp_path / "runs" / "sweep" / "table.md").read_text()
    assert (tmp_path / "runs" / "ray-sweep" / "runs.csv").is_file()
    assert "### causalfair gate:" in proc.stdout
    assert (tmp_path / "mlruns").is_dir() and (tmp_path / "gate-mlflow.json").is_file()

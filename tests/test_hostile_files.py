"""Hostile and malformed files: sizes are read from what a file declares (zip headers,
.npy headers, JSON length and depth) and refused before anything is inflated or
allocated; malformed files are one-line errors (docs/limits.md, "Memory and sizes")."""

from __future__ import annotations

import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CheckpointError, ModelError, ResourceLimitError
from causalfair.logs import LogError, read_logs
from causalfair.policies.checkpoint import load_checkpoint
from causalfair.systems import load_tabular, save_tabular
from tests.conftest import describe, run_cli, run_cmd


def _npy_bytes(arr: np.ndarray, shape: tuple[int, ...] | None = None) -> bytes:
    """``arr`` as .npy bytes, its header optionally declaring another ``shape``."""
    buf = io.BytesIO()
    header = np.lib.format.header_data_from_array_1_0(arr)
    if shape is not None:
        header["shape"] = shape
    np.lib.format.write_array_header_1_0(buf, header)
    buf.write(arr.tobytes())
    return buf.getvalue()


def _no_array_reads(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("an array was read before the refusal")

    monkeypatch.setattr(np.lib.format, "read_array", refuse)


def _model():
    return cf.lending_setting("lending-1").tabular


# --------------------------------------------------------------------- tabular .npz
def test_tabular_npz_bomb_refused_before_inflating(tmp_path, monkeypatch):
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, kernel=np.zeros((1, 2, 1024, 1024)), initial=np.ones((1, 1024)),
                        potential=np.zeros(1024))
    assert path.stat().st_size < 200_000  # 16 MiB of zeros, compressed
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "16M")
    _no_array_reads(monkeypatch)
    with pytest.raises(ResourceLimitError) as exc:
        load_tabular(path)
    msg = str(exc.value)
    assert "bomb.npz" in msg and "member kernel.npy" in msg and "16.0 MiB" in msg
    assert "CAUSALFAIR_MAX_MEMORY" in msg and "\n" not in msg


def test_npz_header_declaring_8_tb_is_refused(tmp_path):
    tiny = np.zeros(4)
    for name, loader, key in (("m.npz", load_tabular, "kernel"),
                              ("c.npz", load_checkpoint, "0.weight")):
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr(f"{key}.npy", _npy_bytes(tiny, shape=(1 << 40,)))
        assert path.stat().st_size < 1024
        with pytest.raises(ResourceLimitError, match=r"member .*\.npy declares shape "
                                                     r"\(1099511627776,\) of float64 \(8\.0 TiB\)"):
            loader(path)


def test_npz_header_larger_than_its_data_is_refused(tmp_path):
    path = tmp_path / "short.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("kernel.npy", _npy_bytes(np.zeros(4), shape=(1000,)))
    with pytest.raises(ModelError, match="declares shape .* holds only 32 bytes"):
        load_tabular(path)


# --------------------------------------------------------------------------- JSON
def test_deep_json_tabular_model_is_one_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ModelError, match="nested more than 100 deep"):
        load_tabular(path)


def test_deep_json_in_npz_metadata_is_one_error(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000
    tab = tmp_path / "m.npz"
    save_tabular(tab, _model())
    arrays = dict(np.load(tab))
    np.savez(tab, **{**arrays, "meta": np.array(deep)})
    with pytest.raises(ModelError, match="field meta: JSON nested more than 100"):
        load_tabular(tab)
    ck = tmp_path / "c.npz"
    np.savez(ck, meta_json=np.array(deep), **{"0.weight": np.zeros((1, 9), np.float32)})
    with pytest.raises(CheckpointError, match="meta_json: JSON nested more than 100"):
        load_checkpoint(ck)


def test_json_tabular_model_bounded_by_size_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    save_tabular(path, _model())
    text = path.read_text()
    path.write_text(text[:-1] + ', "name": "' + "x" * 2_000_000 + '"}')
    assert load_tabular(path).name == "x" * 2_000_000  # fits the default limit
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "16M")
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read before refusal"))
    with pytest.raises(ResourceLimitError, match=r"big.json: 1\.9 MiB of JSON .*over the limit "
                                                 r"of 16\.0 MiB.*CAUSALFAIR_MAX_MEMORY"):
        load_tabular(path)


def test_json_scan_counts_brackets_outside_strings_only():
    from causalfair._safe_read import json_shape

    doc = json.dumps({"a[": ['x\\"]]', [[1]], {"b": "{{{"}], "c\\": "\\\\"})
    assert json_shape(doc.encode()) == (4, 5)  # {a: [.., [[1]], {..}]}


# ---------------------------------------------------------------- stable-baselines3
@pytest.fixture(scope="module")
def sb3_zip(tmp_path_factory):
    """A tiny PPO on a 3-feature, 3-action environment, saved; and the model."""
    pytest.importorskip("stable_baselines3")
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO

    class Env(gym.Env):
        observation_space = gym.spaces.Box(-5.0, 5.0, (3,), np.float32)
        action_space = gym.spaces.Discrete(3)

        def reset(self, seed=None, options=None):
            return np.zeros(3, np.float32), {}

        def step(self, action):
            return np.zeros(3, np.float32), 0.0, True, False, {}

    torch.manual_seed(0)
    model = PPO("MlpPolicy", Env(), n_steps=16, batch_size=16, device="cpu", seed=0,
                policy_kwargs={"net_arch": [8, 8]})
    path = tmp_path_factory.mktemp("sb3") / "ppo3.zip"
    model.save(path)
    return path, model


def _rewrite(src: Path, dst: Path, *, state=None, data=None, extra=None) -> Path:
    """A copy of the SB3 zip ``src`` with ``policy.pth`` / ``data`` replaced."""
    import torch

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            body = zin.read(info.filename)
            if info.filename == "policy.pth" and state is not None:
                buf = io.BytesIO()
                torch.save(state(torch.load(io.BytesIO(body), weights_only=True)), buf)
                body = buf.getvalue()
            if info.filename == "data" and data is not None:
                body = data(json.loads(body))
                body = body if isinstance(body, bytes) else json.dumps(body).encode()
            zout.writestr(info.filename, body)
        for name, body in (extra or {}).items():
            zout.writestr(name, body)
    return dst


def _edit(fn):
    def apply(d):
        fn(d)
        return d
    return apply


def test_in_memory_sb3_discrete3_equals_its_zip(sb3_zip):
    from causalfair.policies import adapters
    from causalfair.policies.adapters import SB3Policy

    path, model = sb3_zip
    assert cf.as_policy is adapters.as_policy
    mem = SB3Policy(model, obs_fn=lambda o: o.features)
    zipped, meta = load_checkpoint(path)
    assert meta["metadata"]["n_actions"] == 3
    feats = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
    obs = cf.Observation(group=np.zeros(50, int), features=feats)
    got = mem.action_probs(obs)
    assert got.shape == (50, 3)
    np.testing.assert_array_equal(got, zipped.action_probs(obs))
    import torch

    with torch.no_grad():
        ref = model.policy.get_distribution(torch.from_numpy(feats)).distribution.probs.numpy()
    assert np.abs(got - ref).max() < 1e-6
    assert isinstance(cf.as_policy(model), SB3Policy)


@pytest.mark.parametrize("case, pattern", [
    ("missing bias", r"has no mlp_extractor\.policy_net\.0\.bias"),
    ("non-integer index", r"unexpected key 'mlp_extractor\.policy_net\.x\.weight'"),
    ("shape is a string", r"observation_space shape: bad value 'abc'"),
    ("integer weight", r"action_net\.weight is int; expected a floating-point tensor"),
    ("integer tensor", r"action_net\.weight is a torch\.int64 tensor"),
    ("width mismatch", r"ppo3-width mismatch\.zip: policy\.pth action_net takes 5 inputs, but "
                       r"mlp_extractor\.policy_net\.2 gives 8"),
])
def test_malformed_sb3_zip_is_one_line(sb3_zip, tmp_path, case, pattern):
    import torch

    path, _ = sb3_zip
    edits = {
        "missing bias": dict(state=_edit(lambda s: s.pop("mlp_extractor.policy_net.0.bias"))),
        "non-integer index": dict(state=lambda s: {k.replace("policy_net.0.", "policy_net.x."): v
                                                   for k, v in s.items()}),
        "shape is a string": dict(data=_edit(lambda d: d["observation_space"].update(_shape="abc"))),
        "integer weight": dict(state=_edit(lambda s: s.update({"action_net.weight": 5}))),
        "integer tensor": dict(state=_edit(lambda s: s.update(
            {"action_net.weight": torch.zeros((3, 8), dtype=torch.int64)}))),
        "width mismatch": dict(state=_edit(lambda s: s.update(
            {"action_net.weight": torch.zeros((3, 5))}))),
    }
    bad = _rewrite(path, tmp_path / f"ppo3-{case}.zip", **edits[case])
    with pytest.raises(CheckpointError, match=pattern) as exc:
        load_checkpoint(bad)
    assert "\n" not in str(exc.value)


def test_sb3_data_member_bomb_refused_before_inflating(sb3_zip, tmp_path, monkeypatch):
    path, _ = sb3_zip
    bomb = _rewrite(path, tmp_path / "bomb.zip", data=lambda d: b" " * (4 << 20) + json.dumps(d).encode())
    assert bomb.stat().st_size < 100_000
    load_checkpoint(bomb)  # 4 MiB of JSON fits the default limit
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "16M")
    with pytest.raises(ResourceLimitError, match=r"bomb.zip: member data: 4\.0 MiB of JSON .*"
                                                 r"CAUSALFAIR_MAX_MEMORY"):
        load_checkpoint(bomb)


def test_sb3_policy_member_declaring_too_much_is_refused(sb3_zip, tmp_path, monkeypatch):
    path, _ = sb3_zip
    big = _rewrite(path, tmp_path / "big.zip",
                   state=_edit(lambda s: s.update(pad=__import__("torch").zeros(3 << 20))))
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "16M")
    with pytest.raises(ResourceLimitError, match=r"member policy\.pth: 12\.0 MiB of tensors"):
        load_checkpoint(big)


def test_malformed_sb3_zip_on_the_command_line_is_exit_2(sb3_zip, tmp_path):
    path, _ = sb3_zip
    bad = _rewrite(path, tmp_path / "bad.zip",
                   state=_edit(lambda s: s.pop("mlp_extractor.policy_net.0.bias")))
    proc = run_cli("decompose", "--setting", "lending-1", "--checkpoint", bad, timeout=120,
                   expect=2)
    assert proc.stderr.strip().count("\n") == 0 and "bad.zip" in proc.stderr, describe(proc)


# -------------------------------------------------------------------------- logs
def test_empty_log_and_bad_parquet_are_log_errors(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(LogError, match="empty.csv is empty"):
        read_logs(empty)
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n")
    with pytest.raises(LogError, match="not a readable CSV file"):
        read_logs(blank)
    pytest.importorskip("pyarrow")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(LogError, match="bad.parquet is not a readable Parquet file "
                                       r"\(ArrowInvalid: .*magic bytes"):
        read_logs(bad)


def test_gzip_log_bomb_stops_inflating_at_the_limit(tmp_path, monkeypatch):
    import gzip

    path = tmp_path / "big.csv.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"id,t,group,level,decision\n" + b"1,0,0,0,0\n" * 3_000_000)
    monkeypatch.setenv("CAUSALFAIR_MAX_MEMORY", "20M")
    with pytest.raises(ResourceLimitError, match=r"big.csv.gz \(inflates past .*over the limit "
                                                 r"of 20\.0 MiB"):
        read_logs(path)


# ------------------------------------------------------------------- peak memory
# The child's own peak is VmHWM in /proc/self/status (the high-water mark of its address
# space). getrusage(RUSAGE_SELF).ru_maxrss is not: Linux keeps the largest RSS across
# execve, so a child started by a large pytest process reports the parent's peak (769 MB
# in a full slow-tier run for a refusal that itself peaks near 40 MB).
_PEAK = ("import re\n"
         "print('peak_kb', re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read())[1])")


def _load_tabular_peak_kb(path: Path) -> tuple[int, str]:
    """(the peak memory in kB of a fresh process that runs ``load_tabular(path)``,
    its output: the error's type and message, if any)."""
    code = ("import causalfair.systems as s\n"
            f"try:\n    s.load_tabular({str(path)!r})\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n" + _PEAK)
    proc = run_cmd([sys.executable, "-c", code], timeout=300, expect=0)
    assert "peak_kb" in proc.stdout, describe(proc)
    return int(proc.stdout.rsplit("peak_kb", 1)[1]), proc.stdout + proc.stderr


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_peak_memory_is_the_childs_own_not_its_parents(tmp_path):
    """The measurement the bomb test relies on: a child of a process holding 400 MB
    reports its own peak (ru_maxrss reported the parent's)."""
    ballast = np.ones(400 << 17)  # 400 MiB, touched
    path = tmp_path / "m.npz"
    save_tabular(path, _model())
    peak_kb, out = _load_tabular_peak_kb(path)
    assert ballast[-1] == 1.0
    assert peak_kb < 200_000, out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_two_gb_npz_bomb_refused_with_low_peak_memory(tmp_path):
    """A 2 GiB tabular kernel of zeros (about 9 MB compressed) is refused with the
    process's peak memory well under 300 MB (it peaked at 4.2 GB when fully inflated), and
    the refusal adds under 50 MB to loading a small valid model in the same way."""
    path = tmp_path / "bomb.npz"
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
    header["shape"] = (1, 2, 8192, 16384)
    chunk = bytes(64 << 20)
    # deflate level 1: twice as fast as the default level on 2 GiB of zeros; the refusal
    # reads the declared size, not the ratio
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("kernel.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            for _ in range((2 << 30) // len(chunk)):
                fh.write(chunk)
    small = tmp_path / "small.npz"
    save_tabular(small, _model())
    base_kb, base_out = _load_tabular_peak_kb(small)
    assert "Error" not in base_out, base_out
    peak_kb, out = _load_tabular_peak_kb(path)
    assert "ResourceLimitError" in out, out
    assert peak_kb < 300_000, out
    assert peak_kb - base_kb < 50_000, f"baseline {base_kb} kB\n{out}"

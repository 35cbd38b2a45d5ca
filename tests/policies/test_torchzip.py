"""The torch-free reader of torch's zip format (causalfair.policies.torchzip): the same arrays
as torch.load(weights_only=True), bit for bit; foreign globals refused without running;
torch's other constructs left to torch; no torch import on the audit path of a .pt."""

from __future__ import annotations

import io
import json
import pickle
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import causalfair as cf
from causalfair.errors import CheckpointError, ResourceLimitError
from causalfair.policies.checkpoint import FeatureEncoding, mlp, save_checkpoint
from causalfair.policies.torchzip import (
    TorchZipError,
    TorchZipUnsupported,
    load_weights,
    read_torch_zip,
)
from tests.conftest import run_cmd

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "causalfair" / "examples" / "checkpoints").glob("*.pt")) + sorted(
    (ROOT / "reports" / "examples" / "checkpoints").glob("*.pt"))
CAP = 1 << 30
ARCH = {"type": "mlp", "input_dim": 9, "hidden": [16, 8], "output_dim": 1, "activation": "tanh"}


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _same(mine, ref, where="") -> int:
    """Assert ``mine`` (the reader's) equals ``ref`` (torch.load's) bit for bit; count tensors."""
    if isinstance(ref, torch.Tensor):
        t = ref.detach()
        t = t.float() if t.dtype == torch.bfloat16 else t
        want = t.numpy().copy(order="C")
        assert isinstance(mine, np.ndarray), where
        assert (mine.dtype, mine.shape) == (want.dtype, want.shape), where
        assert mine.tobytes() == want.tobytes(), where
        return 1
    if isinstance(ref, dict):
        assert list(mine) == list(ref), where
        return sum(_same(mine[k], ref[k], f"{where}/{k}") for k in ref)
    if isinstance(ref, (list, tuple)):
        assert len(mine) == len(ref), where
        return sum(_same(a, b, where) for a, b in zip(mine, ref, strict=True))
    assert type(mine) is type(ref) and mine == ref, where
    return 0


def _rezip(raw: bytes, edit) -> bytes:
    """``raw`` (a torch zip) with each member passed through ``edit(name, body)`` -> (name, body)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            zout.writestr(*edit(info.filename, zin.read(info.filename)))
    return out.getvalue()


def _objects():
    torch.manual_seed(0)
    base = torch.arange(60, dtype=torch.float64).reshape(6, 10) / 7
    shared = torch.randn(6)
    net = mlp(9, (16, 8), 1)
    return {
        "state_dict": net.state_dict(),  # an OrderedDict with _metadata
        "float64 state_dict": net.double().state_dict(),
        "views": {"offset+stride": base[1:5:2, 2:9:3], "transposed": base.t(), "empty": base[:0],
                  "scalar": torch.tensor(3.5), "stride 0": base[None].expand(2, 6, 10)},
        "shared storage": {"a": shared, "b": shared[1:], "c": shared.view(2, 3)},
        "dtypes": {str(d): (torch.randn(4, 4) * 100).to(d) for d in (
            torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
            torch.uint8, torch.bool)},
        "parameter and builtins": {"p": torch.nn.Parameter(torch.randn(3, 2)),
                                   "misc": [1, 2.5, "x", None, True, (1, 2), {"k": -3}]},
    }


@pytest.mark.parametrize("name", list(_objects()))
def test_reader_equals_torch_load_bit_for_bit(name):
    raw = _saved(_objects()[name])
    ref = torch.load(io.BytesIO(raw), weights_only=True)
    assert _same(read_torch_zip(io.BytesIO(raw), cap=CAP, where=name), ref) > 0


def test_sets_and_bytes_read_as_saved():  # (older torch's weights-only load refuses them)
    obj = {"set": {3, "a"}, "bytes": b"\x00raw\xff", "nested": [(1.5, None)]}
    assert read_torch_zip(io.BytesIO(_saved(obj)), cap=CAP, where="x") == obj


def test_shipped_and_saved_checkpoints_read_as_torch_does(tmp_path):
    torch.manual_seed(1)
    enc = FeatureEncoding("onehot", 7, 2)
    for dtype in (torch.float32, torch.float64):
        save_checkpoint(tmp_path / f"{dtype}.pt", mlp(9, (16, 8), 1).to(dtype),
                        architecture=ARCH, encoding=enc)
    files = SHIPPED + sorted(tmp_path.glob("*.pt"))
    assert len(files) >= 4
    for f in files:
        ref = torch.load(f, weights_only=True)
        assert _same(read_torch_zip(str(f), cap=CAP, where=str(f)), ref) > 0, f
    # the policy evaluated from the float64 file is the old path's (.to(float32) then numpy)
    policy, _ = cf.load_checkpoint(tmp_path / "torch.float64.pt")
    state = torch.load(tmp_path / "torch.float64.pt", weights_only=True)["state_dict"]
    old = state["0.weight"].to(torch.float32).numpy().T  # NumpyMLPPolicy keeps W transposed
    assert policy.layers[0][0].tobytes() == np.ascontiguousarray(old).tobytes()


def test_big_endian_and_other_prefix_read_as_torch_does():
    obj = {"w": torch.randn(3, 4, dtype=torch.float64), "i": torch.arange(5)}
    raw = _saved(obj)
    def big(name, body):
        if name.endswith("/byteorder"):
            body = b"big"
        elif "/data/" in name:  # every storage here has 8-byte elements
            body = np.frombuffer(body, "<u8").astype(">u8").tobytes()
        return name.replace("archive/", "renamed/"), body

    swapped = _rezip(raw, big)
    ref = torch.load(io.BytesIO(swapped), weights_only=True)
    assert all(torch.equal(ref[k], obj[k]) for k in obj)  # torch reads it as the original
    assert _same(read_torch_zip(io.BytesIO(swapped), cap=CAP, where="x"), ref) == 2
    assert read_torch_zip(io.BytesIO(swapped), cap=CAP, where="x")["w"].dtype.isnative


def _evil_zip(payload: bytes) -> bytes:
    """A torch-shaped archive whose data.pkl is ``payload``."""
    return _rezip(_saved({"a": torch.zeros(1)}), lambda n, b: (
        n, payload if n.endswith("data.pkl") else b))


@pytest.mark.parametrize("call", ["os.system", "builtins.eval", "posix.system", "builtins.open"])
def test_foreign_globals_are_refused_without_running(tmp_path, call):
    marker = tmp_path / "pwned"
    module, name = call.split(".")
    arg = f"open({str(marker)!r}, 'w')" if name == "eval" else (
        str(marker) if name == "open" else f"touch {marker}")
    payload = (b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\n"
               + pickle.dumps((arg,) if name != "open" else (arg, "w"), protocol=2)[2:-1]
               + b"R.")
    raw = _evil_zip(payload)
    with pytest.raises(TorchZipError, match=rf"names {call}, which a weights-only load refuses"):
        read_torch_zip(io.BytesIO(raw), cap=CAP, where="x")
    path = tmp_path / "evil.pt"
    path.write_bytes(raw)
    with pytest.raises(CheckpointError, match=rf"cannot be loaded safely \(the pickle names {call}"):
        cf.load_checkpoint(path)
    assert not marker.exists()


def test_torch_constructs_outside_the_subset_fall_back_to_torch():
    obj = {"c": torch.randn(2, dtype=torch.complex64), "w": torch.randn(3)}
    raw = _saved(obj)
    with pytest.raises(TorchZipUnsupported, match="ComplexFloatStorage"):
        read_torch_zip(io.BytesIO(raw), cap=CAP, where="x")
    got = load_weights(io.BytesIO(raw), cap=CAP, where="x")
    assert all(got[k].tobytes() == obj[k].numpy().tobytes() for k in obj)


def test_malformed_archives_are_one_line_errors(tmp_path):
    raw = _saved({"a": torch.arange(8, dtype=torch.float32)})
    cases = {
        "truncated storage": (lambda n, b: (n, b[:8] if n.endswith("/data/0") else b),
                              "data/0 holds 8 bytes, the pickle declares 8 x 4"),
        "byteorder": (lambda n, b: (n, b"middle" if n.endswith("byteorder") else b),
                      "byteorder b'middle'"),
        "no storage": (lambda n, b: (n.replace("data/0", "data/9"), b), "no member archive/data/0"),
        "no pickle": (lambda n, b: (n.replace("data.pkl", "other.pkl"), b), "0 <prefix>/data.pkl"),
    }
    for case, (edit, msg) in cases.items():
        with pytest.raises(TorchZipError, match=msg.replace("(", r"\(")):
            read_torch_zip(io.BytesIO(_rezip(raw, edit)), cap=CAP, where=case)
    meta = json.dumps({"format": "causalfair-checkpoint"})
    bad = _rezip(_saved({"meta_json": meta, "state_dict": {"0.weight": torch.zeros(4)}}),
                 cases["truncated storage"][0])
    (tmp_path / "bad.pt").write_bytes(bad)
    with pytest.raises(CheckpointError, match=r"bad\.pt: cannot be loaded safely \(data/0 holds") as e:
        cf.load_checkpoint(tmp_path / "bad.pt")
    assert "\n" not in str(e.value)


def test_tensors_are_bounded_by_the_cap_before_copying():
    raw = _saved({"big": torch.zeros(1).expand(100_000)})  # one stored float, stride 0
    with pytest.raises(ResourceLimitError, match="x: its tensors hold more than 100000 bytes"):
        read_torch_zip(io.BytesIO(raw), cap=100_000, where="x")
    assert read_torch_zip(io.BytesIO(raw), cap=400_000, where="x")["big"].shape == (100_000,)


def _sb3_zip(path: Path) -> dict:
    """A stable-baselines3-shaped archive (policy.pth + data) of a 3-8-3 MlpPolicy."""
    torch.manual_seed(2)
    state = torch.nn.ModuleDict({"mlp_extractor": torch.nn.ModuleDict({"policy_net": (
        torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh()))}),
        "action_net": torch.nn.Linear(8, 3), "value_net": torch.nn.Linear(8, 1)}).state_dict()
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("policy.pth", _saved(state))
        zf.writestr("data", json.dumps({"observation_space": {"_shape": [3]}}))
    return state


def test_sb3_zip_reads_as_its_tensors(tmp_path):
    from causalfair.policies.checkpoint import sb3_network

    state = _sb3_zip(tmp_path / "m.zip")
    read, _ = cf.load_checkpoint(tmp_path / "m.zip")
    held, _ = sb3_network(state, [3], "tanh", where="memory", name="m")  # torch tensors
    assert len(read.layers) == len(held.layers) == 2
    for (W, b), (W2, b2) in zip(read.layers, held.layers, strict=True):
        assert W.tobytes() == W2.tobytes() and b.tobytes() == b2.tobytes()


def test_a_pt_audit_imports_no_torch(tmp_path):
    """Loading a .pt checkpoint and auditing it (exact and Monte Carlo), and loading a
    stable-baselines3 .zip, never import torch."""
    ck = ROOT / "causalfair" / "examples" / "checkpoints" / "lending-1-ppo.pt"
    _sb3_zip(tmp_path / "m.zip")
    code = (
        "import sys\n"
        "import causalfair as cf\n"
        "from causalfair.cli import main\n"
        f"policy, _ = cf.load_checkpoint({str(ck)!r})\n"
        "assert type(policy).__name__ == 'NumpyMLPPolicy', type(policy)\n"
        f"assert cf.load_checkpoint({str(tmp_path / 'm.zip')!r})[1]['metadata']['n_actions'] == 3\n"
        "for extra in (['--engine', 'exact'], ['--engine', 'mc', '--n', '500']):\n"
        f"    rc = main(['decompose', '--setting', 'lending-1', '--checkpoint', {str(ck)!r},\n"
        "               *extra, '--seed', '0', '--json'])\n"
        "    assert rc in (0, None), rc\n"
        "print('TORCH', 'torch' in sys.modules)\n")
    proc = run_cmd([sys.executable, "-c", code], cwd=tmp_path, expect=0, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "TORCH False", proc.stderr

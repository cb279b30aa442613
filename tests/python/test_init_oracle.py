"""`needle init` output read back with Python's json + NumPy (independent of the C reader).

Checks the file against the safetensors layout rules and against the names,
shapes and dtypes of tests/golden/tiny.safetensors, and the SPEC's reference
initialisation constants."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

BUILD = os.environ.get("NEEDLE_BUILD", "build")
NEEDLE = os.path.join(BUILD, "needle")
GOLDEN = "tests/golden/tiny.safetensors"


def read_st(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    arrays = {}
    for name, e in header.items():
        b, en = e["data_offsets"]
        assert e["dtype"] == "F32"
        arrays[name] = np.frombuffer(data[8 + n + b:8 + n + en], dtype="<f4").reshape(e["shape"])
    return n, data, header, meta, arrays


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("init") / "tiny.safetensors")
    r = subprocess.run([NEEDLE, "init", "--preset", "tiny", "--seed", "3", "--out", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "param" in r.stdout
    return out


def test_layout(tiny):
    n, data, header, meta, arrays = read_st(tiny)
    assert (8 + n) % 8 == 0
    raw = data[8:8 + n].decode("ascii")
    assert raw.rstrip(" ").endswith("}") and raw.strip(" ") == raw.rstrip(" ")
    spans = sorted(tuple(e["data_offsets"]) for e in header.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(data) - 8 - n
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert meta["format"] == "needle-checkpoint"
    cfg = json.loads(meta["config"])
    golden_cfg = json.load(open("tests/golden/tiny.json"))["config"]
    for k, v in cfg.items():
        assert golden_cfg[k] == v, k


def test_names_shapes_match_golden(tiny):
    _, _, header, _, _ = read_st(tiny)
    _, _, gheader, _, _ = read_st(GOLDEN)
    assert {k: (v["dtype"], v["shape"]) for k, v in header.items()} == \
           {k: (v["dtype"], v["shape"]) for k, v in gheader.items()}


def test_reference_init_values(tiny):
    _, _, _, _, a = read_st(tiny)
    L = 4
    P = "stack.layers.block."
    assert abs(a[P + "self_attn.q_proj.kernel"].std() - 0.02) < 5e-4
    assert abs(a[P + "self_attn.out_proj.kernel"].std() - 0.02 / np.sqrt(2 * L)) < 3e-4
    assert abs(a["engrams_0.value_proj.kernel"].std() - 0.02 / np.sqrt(2 * L)) < 3e-4
    for name in ["ZCRMSNorm_0.scale", "post_attn_norm.scale", "pre_hada_norm.scale", "attn_gate",
                 "self_attn.q_norm.scale", "self_attn.k_norm.scale"]:
        assert not a[P + name].any(), name
    assert (a[P + "hadamard_mlp.d1"] == 1).all() and (a[P + "hadamard_mlp.d2"] == 1).all()
    assert np.allclose(a[P + "hadamard_mlp.d3"], 0.02)
    assert (a["stack.mhc_b_res"] == 4 * np.eye(4, dtype=np.float32)[None]).all()
    assert not a["stack.mhc_b_pre"].any() and not a["stack.mhc_b_post"].any()
    for k in ["stack.mhc_a_pre", "stack.mhc_a_post", "stack.mhc_a_res"]:
        assert np.allclose(a[k], 0.01)
    taps = np.zeros((4, 128), np.float32)
    taps[0] = 1
    assert (a["engrams_1.taps"] == taps).all()
    assert a["contrastive_head.log_temp"].tolist() == [0.0]
    assert a["confidence_head.proj.bias"].tolist() == [0.0]


def test_deterministic(tiny, tmp_path):
    again = str(tmp_path / "again.safetensors")
    other = str(tmp_path / "other.safetensors")
    assert subprocess.run([NEEDLE, "init", "--preset", "tiny", "--seed", "3", "--out", again]).returncode == 0
    assert subprocess.run([NEEDLE, "init", "--preset", "tiny", "--seed", "4", "--out", other]).returncode == 0
    assert open(tiny, "rb").read() == open(again, "rb").read()
    assert open(tiny, "rb").read() != open(other, "rb").read()


def test_cli_errors(tmp_path):
    out = str(tmp_path / "x.safetensors")
    assert subprocess.run([NEEDLE, "init", "--preset", "tiny"], capture_output=True).returncode == 2
    r = subprocess.run([NEEDLE, "init", "--preset", "tiny", "--set", "num_layers=1", "--out", out],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "engram_layers" in r.stderr and not os.path.exists(out)
    r = subprocess.run([NEEDLE, "init", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--preset" in r.stdout

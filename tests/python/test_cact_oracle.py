"""Oracle test for `needle build` / `needle inspect`: an independent NumPy
reader of the .cact format (SPEC section 8) dequantises the CLI's output and
the reference exporter's golden files and compares them with each other and
with the float weights of tests/golden/tiny.safetensors."""
import json
import os
import struct
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")
NEEDLE = os.path.join(ROOT, os.environ.get("NEEDLE_BUILD", "build"), "needle")
MIXED = "default=4,embedding=3,attn.q_proj=2,attn.out_proj=1.58,engram0.tables=2"


def read_cact(path):
    b = open(path, "rb").read()
    head = struct.unpack_from("<29I", b, 0)
    cb = np.frombuffer(b, np.float32, 28, 120)
    recs = []
    for i in range(head[1]):
        dt, nd = struct.unpack_from("<BB", b, 232 + 44 * i)
        shape = struct.unpack_from("<4I", b, 232 + 44 * i + 4)[:nd]
        off, nb, group, bits = struct.unpack_from("<QQII", b, 232 + 44 * i + 20)
        recs.append(dict(dtype=dt, shape=shape, off=off, nbytes=nb, bits=bits, data=b[off:off + nb]))
    return b, head, cb, recs


def hadamard(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


H128 = hadamard(128)


def dequant(rec, cb):
    rows, cols = rec["shape"]
    pad = (cols + 127) // 128 * 128
    bits = rec["bits"]
    sb = 2 if bits == 5 else bits
    nb = rows * pad * sb // 8
    raw = np.unpackbits(np.frombuffer(rec["data"][:nb], np.uint8), bitorder="little").reshape(rows, pad, sb)
    codes = (raw * (1 << np.arange(sb))).sum(-1)
    if bits == 5:
        c = 1.2240064 / np.sqrt(128)
        table = np.array([0.0, c, 0.0, -c])
    else:
        table = cb[{2: 0, 3: 4, 4: 12}[bits]:][: 1 << bits].astype(np.float64)
    norms = np.frombuffer(rec["data"][nb:], np.float16).astype(np.float64).reshape(rows, pad // 128)
    v = table[codes].reshape(rows, pad // 128, 128) * norms[..., None]
    return (v @ H128).reshape(rows, pad)[:, :cols]


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b, 0)[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], np.float32).reshape(v["shape"])
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not os.path.exists(NEEDLE):
        pytest.skip("needle CLI not built")
    d = tmp_path_factory.mktemp("cact")
    out = {}
    for name, args in (("w4", ["--bits", "4"]), ("mixed", ["--bits-map", MIXED])):
        path = str(d / (name + ".cact"))
        r = subprocess.run([NEEDLE, "build", os.path.join(GOLDEN, "tiny.safetensors"), "--tokenizer",
                            os.path.join(GOLDEN, "tok8k.model"), *args, "--out", path],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "83 tensors" in r.stdout and "W4A8" in r.stdout
        out[name] = path
    return out


@pytest.mark.parametrize("name,golden", [("w4", "tiny_w4.cact"), ("mixed", "tiny_mixed.cact")])
def test_build_matches_reference(built, name, golden):
    ours, oh, ocb, orecs = read_cact(built[name])
    _, gh, gcb, grecs = read_cact(os.path.join(GOLDEN, golden))
    assert len(ours) == os.path.getsize(os.path.join(GOLDEN, golden))
    assert oh == gh and np.array_equal(ocb, gcb)
    diff_rows = total_rows = 0
    for o, g in zip(orecs, grecs):
        assert (o["dtype"], o["shape"], o["off"], o["nbytes"], o["bits"]) == \
               (g["dtype"], g["shape"], g["off"], g["nbytes"], g["bits"])
        if g["dtype"] != 3:
            assert o["data"] == g["data"]
            continue
        a, b = dequant(o, ocb), dequant(g, gcb)
        diff_rows += int((np.abs(a - b).max(axis=1) > 0).sum())
        total_rows += a.shape[0]
    assert diff_rows <= total_rows * 0.001, (diff_rows, total_rows)


def test_dequant_error_vs_float(built):
    w = read_safetensors(os.path.join(GOLDEN, "tiny.safetensors"))
    _, _, cb, recs = read_cact(built["mixed"])
    emb = dequant(recs[0], cb)  # 3 bits
    ref = w["embedding.embedding"]
    rel = np.sqrt(((emb - ref) ** 2).sum() / (ref ** 2).sum())
    assert 0.15 < rel < 0.2, rel
    out0 = dequant(recs[8], cb)  # layer 0 out_proj, ternary, stored [out, in]
    ref = w["stack.layers.block.self_attn.out_proj.kernel"][0].T
    rel = np.sqrt(((out0 - ref) ** 2).sum() / (ref ** 2).sum())
    assert 0.35 < rel < 0.5, rel


def test_inspect(built):
    r = subprocess.run([NEEDLE, "inspect", built["mixed"]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "83 tensors" in r.stdout and "window 512" in r.stdout
    assert "layers.3.attn.out_proj" in r.stdout and "1.58" in r.stdout
    r = subprocess.run([NEEDLE, "inspect", os.path.join(GOLDEN, "tiny.safetensors")], capture_output=True, text=True)
    assert r.returncode == 0 and "stack.mhc_phi_res" in r.stdout
    bad = built["mixed"] + ".trunc"
    open(bad, "wb").write(open(built["mixed"], "rb").read()[:5000])
    r = subprocess.run([NEEDLE, "inspect", bad], capture_output=True, text=True)
    assert r.returncode == 1 and "past the end" in r.stderr

"""The trainer's Needle 3 head backward (src/train/heads_train_v3.c, through
tools/heads3_grad_dump) against jax.grad of the reference's own head modules
(cactus-needle 3.2.8 ConfidenceHead and EmbeddingHead, float32, quant off;
tests/python/n3_heads_oracle.py run in the venv that has the package, as an
oracle only).  The scalar is sum(wy * head output) with random wy, over random
cells and random parameters (gain and row bias away from their init so every
path carries gradient).  Bars: the value within 1e-5 relative; each
parameter's gradient within 1e-4 relative L2 of the reference's.

Without the venv (/opt/venv-n3, NEEDLE3_VENV overrides) the test is SKIPPED."""
import os
import struct
import subprocess

import numpy as np
import pytest

from n3_reference import ENV, PY, ROOT, build_tool, reference_missing

DUMP = build_tool("heads3_grad_dump")


def _need_oracle():
    why = reference_missing("needle.model.architecture, jax, flax")
    if why:
        pytest.skip(f"SKIPPED: Needle 3 reference oracle not usable ({why})")
    if not os.path.exists(DUMP):
        pytest.skip("heads3_grad_dump not built (make test builds it)")


def _case(tmp_path, embedding):
    """Write one random case; return (ours: value then gradient, the parameter shapes)."""
    rng = np.random.default_rng(7 + embedding)
    T, R, k, q, d = 7, 4, 3, 2, 16
    out = 8 if embedding else 1
    f4 = lambda *s, std=1.0: (std * rng.normal(size=s)).astype(np.float32)
    p = {"cells": f4(1, T, R, d), "probes": f4(R, k, d, std=0.5), "gain": (1 + f4(R, k, std=0.3)),
         "query": f4(q, d, std=0.5), "row_bias": f4(q, R, k, std=0.5), "kernel": f4(q * d, out, std=0.3),
         "bias": np.zeros(out, np.float32) if embedding else f4(out), "wy": f4(out)}
    np.savez(tmp_path / f"in{embedding}.npz", embedding=np.int32(embedding), **p)
    # ours: nd_head3 layout (W is the kernel transposed; the embedding head's two scalars at their init)
    flat = np.concatenate([p["probes"].ravel(), p["gain"].ravel(), p["query"].ravel(), p["row_bias"].ravel(),
                           p["kernel"].T.ravel(), p["bias"], np.array([np.log(10.0), -10.0], np.float32)])
    with open(tmp_path / f"in{embedding}.bin", "wb") as f:
        f.write(struct.pack("<7i", T, R, k, q, d, out, embedding))
        f.write(p["cells"].astype("<f4").tobytes())
        f.write(flat.astype("<f4").tobytes())
        f.write(p["wy"].astype("<f4").tobytes())
    r = subprocess.run([DUMP, str(tmp_path / f"in{embedding}.bin"), str(tmp_path / f"out{embedding}.bin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sizes = [("probes", R * k * d), ("gain", R * k), ("query", q * d), ("row_bias", q * R * k),
             ("kernel", out * q * d), ("bias", out)]
    return np.fromfile(tmp_path / f"out{embedding}.bin", dtype="<f4"), sizes, out, q * d


def test_head_gradients_match_reference(tmp_path):
    _need_oracle()
    cases = {e: _case(tmp_path, e) for e in (0, 1)}
    args = []
    for e in cases:
        args += [str(tmp_path / f"in{e}.npz"), str(tmp_path / f"ref{e}.npz")]
    r = subprocess.run([PY, os.path.join(ROOT, "tests", "python", "n3_heads_oracle.py"), *args],
                       capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    for embedding, (ours, sizes, out, qd) in cases.items():
        what = "embedding" if embedding else "confidence"
        ref = dict(np.load(tmp_path / f"ref{embedding}.npz"))
        assert abs(ours[0] - ref["loss"]) <= 1e-5 * max(1.0, abs(float(ref["loss"]))), (what, ours[0], ref["loss"])
        g, at = ours[1:], 0
        for name, n in sizes:
            mine = g[at:at + n]
            at += n
            if name == "bias" and embedding:
                continue  # the reference's embedding head has no proj bias (the trainer keeps ours at zero)
            mine = mine.reshape(out, qd).T if name == "kernel" else mine.reshape(ref[name].shape)
            want = ref[name]
            assert np.linalg.norm(want) > 0, (what, name)
            err = np.linalg.norm(mine - want) / np.linalg.norm(want)
            assert err < 1e-4, f"{what} {name}: relative L2 error {err:.3g}"

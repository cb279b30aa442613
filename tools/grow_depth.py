#!/usr/bin/env python3
"""grow_depth.py - a deeper Needle 2 checkpoint that starts out computing almost what the shallower one did.

    python3 tools/grow_depth.py IN.safetensors OUT.safetensors --blocks N [--seed S]

Appends N x mhc_lanes new layers after the last one (4 -> 8 layers with --blocks 1 on the bundled
model) and writes a float32 checkpoint that `needle finetune --full` trains further: the old
layers keep their weights, the new ones start close to the identity, so training resumes
from the old model's loss with more layers to learn in (docs/default-model.md, "Round r20 and a model grown to 8 layers").

Why whole blocks of mhc_lanes layers at the end: layer l's home lane is l mod n (SPEC.md section 4,
the +4 / -4 offsets of the pre and post maps), so an old layer keeps its behaviour only if it keeps
its index mod n; appending keeps every old index, and the engram sites stay where they were.

Why the new layers start close to the identity, and how they open: a layer adds y = Block(b) - u to
the lanes and mixes the lanes through P = Sinkhorn(a_res (xh Phi_res) + B_res). With B_res = 10 I the
mix is the identity to ~1e-4. The block's attention output enters as sigmoid(attn_gate) *
(1 + s) * rmsunit(...), whose size does not depend on the attention's weights (the norm undoes their
scale), so its norm scale s starts at -0.9: one tenth of a fresh layer's output; the Hadamard MLP's
output is d3 * z with d3 = 0.02. Both are linear in their parameter, so AdamW (whose step is about lr
per parameter whatever the gradient's size) opens them steadily; an earlier try gated the layer
through q = 2 sigmoid(b_post) instead, and with b_post = -6 the sigmoid's saturation kept the new
layers shut (for 100 steps the per-step losses were the 4-layer model's to four digits). Everything else gets
the reference initialisation (kernels N(0, 0.02), out_proj N(0, 0.02 / sqrt(2 L)), other norm
scales and attn_gate 0, d1 = d2 = 1, a_* = 0.01, b_pre = b_post = 0). Measured on the bundled model:
the logits move by at most 0.18 (KL 1.4e-5, the same argmax).

The heads pool over [x0, lane mean after each layer]: their weights are kept, their inputs gain one
cell per new layer (close to the last old one's), so retrain them (`needle train-heads`) after training.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_to_half import read_safetensors, write_safetensors  # noqa: E402  (tools/ is not a package)

DTYPES = {"F16": np.float16, "F32": np.float32}


def read(path):
    header, body, meta = read_safetensors(path)
    meta = meta or {}
    tensors = {}
    for name, info in header.items():
        if info["dtype"] not in DTYPES:
            raise SystemExit("%s: tensor %s has dtype %s (F16 or F32 expected)" % (path, name, info["dtype"]))
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(body[start:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).astype(
            np.float32)
    return tensors, meta


def write(path, tensors, meta):
    header, chunks, off = {"__metadata__": meta}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        chunks.append(a.tobytes())
    write_safetensors(path, header, chunks)


def new_layers(name, shape, lanes, total_layers, rng):
    """The new layers' values of one stacked tensor (leading axis: the new layers)."""
    if name.endswith("kernel"):
        std = 0.02 / np.sqrt(2 * total_layers) if "out_proj" in name else 0.02
        return rng.normal(0.0, std, shape)
    if name.endswith("post_attn_norm.scale"):
        return np.full(shape, -0.9)
    if name.endswith(".scale") or name.endswith("attn_gate") or name in ("stack.mhc_b_pre", "stack.mhc_b_post"):
        return np.zeros(shape)
    if name.endswith("hadamard_mlp.d1") or name.endswith("hadamard_mlp.d2"):
        return np.ones(shape)
    if name.endswith("hadamard_mlp.d3"):
        return np.full(shape, 0.02)
    if name.startswith("stack.mhc_a_"):
        return np.full(shape, 0.01)
    if name == "stack.mhc_b_res":
        return np.broadcast_to(10.0 * np.eye(lanes), shape).copy()
    if name.startswith("stack.mhc_phi_"):
        return rng.normal(0.0, 0.02, shape)
    raise SystemExit("grow_depth.py: no rule for the stacked tensor %s" % name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--blocks", type=int, required=True, help="append this many x mhc_lanes layers")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.blocks < 1:
        ap.error("--blocks must be >= 1")
    tensors, meta = read(a.src)
    if "config" not in meta:
        raise SystemExit("%s: no config in the header's __metadata__ (not a needle checkpoint)" % a.src)
    cfg = json.loads(meta["config"])
    if meta.get("format") != "needle-checkpoint" or not any(k.startswith("stack.layers.block.") for k in tensors):
        raise SystemExit("%s: not a Needle 2 checkpoint in the stacked layout (the only one grown)" % a.src)
    old, lanes = cfg["num_layers"], cfg["mhc_lanes"]
    total = old + a.blocks * lanes
    rng = np.random.default_rng(a.seed)
    for name in sorted(tensors):
        if not (name.startswith("stack.layers.block.") or name.startswith("stack.mhc_")):
            continue
        t = tensors[name]
        if t.shape[0] != old:
            raise SystemExit("%s: %s has %d layers, the config says %d" % (a.src, name, t.shape[0], old))
        add = new_layers(name, (total - old,) + t.shape[1:], lanes, total, rng).astype(np.float32)
        tensors[name] = np.concatenate([t, add], axis=0)
    cfg["num_layers"] = total
    meta["config"] = json.dumps(cfg, separators=(",", ":"))
    write(a.dst, tensors, meta)
    print("grew %s: %d -> %d layers, wrote %s" % (a.src, old, total, a.dst))


if __name__ == "__main__":
    main()

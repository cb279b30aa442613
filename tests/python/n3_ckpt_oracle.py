"""Run inside the venv that has cactus-needle 3.2.8 (used only as an oracle) for
tests/python/test_ckpt_v3_oracle.py.  Subcommands:

  make TOKENIZER OUT_DIR
      a random Needle 3 model on a geometry in no golden file, written with the
      reference's own checkpoint writer (OUT/ckpt.safetensors), exported with the
      reference exporter as `needle build CKPT` and `--layers 2` would
      (OUT/ref.cact, OUT/ref_rung2.cact), and the reference's float32 logits and
      heads on the float checkpoint (OUT/ref.json); also the reference's float
      logits of tests/golden/needle3/n3_tiny.safetensors (OUT/tiny.json).
  init OURS.safetensors OUT.json
      the reference's load_checkpoint on our `needle init` file, and its own
      init on the same config: per leaf, shape, whether its init is
      deterministic (equal under two PRNG keys) and then equal to ours, and the
      standard deviations of the random ones.
  read CKPT.safetensors OUT.json FILE.cact...
      read_export on each file; for each, per CQ matrix the relative difference
      between its decoded weights and the reference quantiser's own
      cq_quantize of the checkpoint's matrix at the file's width."""
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from needle.model import architecture as arch
from needle.model import checkpoints as ckpt_io
from needle.model import export as exp
from needle.model import finetune
from needle.model import quantize
from needle.model import run as run_mod
from needle.model.tokenizer import SANTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = "<|im_start|>user\nplease turn the hallway lights off and lock the front door tonight<|im_end|>"


def everything(m, t):
    return m(t), m.forward_embedding(t), m.forward_confidence(t), m.forward_router(t)


def forward(params, config, ids):
    model = arch.SimpleAttentionNetwork(config)
    x = jnp.asarray([ids], jnp.int32)
    logits, emb, conf, router = model.apply({"params": params}, x, method=everything)
    return {"ids": ids, "logits": np.asarray(logits[0], np.float64).tolist(),
            "embedding": np.asarray(emb[0], np.float64).tolist(),
            "confidence_logit": float(np.asarray(conf).reshape(-1)[0]),
            "router_logits": np.asarray(router[0], np.float64).tolist()}


def make(tok_path, out):
    # 3 layers (local, global, local), v head 8, seed stride 3, out_vocab, window 6,
    # 2 conv taps, per-head probes/queries all different, d 64 (hada 64 = 8 x 8)
    cfg = arch.TransformerConfig(
        vocab_size=8192, d_model=64, num_heads=4, num_kv_heads=2, num_layers=3, qk_head_dim=16, v_head_dim=8,
        max_seq_len=96, embedding_dim=24, embedding_probes=3, embedding_queries=2, confidence_probes=2,
        confidence_queries=3, router_probes=4, router_queries=1, rope_theta=20000.0, dtype="float32", flash=False,
        remat=False, engram_orders=(2, 3), engram_heads=2, engram_slots=128, engram_seed_heads=3,
        engram_layers=(0,), global_layers=(1,), sliding_window=6, qkv_conv_taps=2, out_vocab=8050, mhc_lanes=4)
    tok = SANTokenizer(tok_path)
    ids = [2] + list(tok.encode(TEXT))
    model = arch.SimpleAttentionNetwork(cfg)
    params = model.init(jax.random.PRNGKey(5), jnp.asarray([ids], jnp.int32), method=everything)["params"]
    rng = np.random.default_rng(17)
    flat = traverse_util.flatten_dict(jax.device_get(params), sep="/")
    for k, v in flat.items():
        scale = 0.5 if k.endswith(("cond_u", "b2")) else 0.25 if k.endswith("d4") else 0.05
        flat[k] = (np.asarray(v, np.float32) + rng.normal(0, scale, np.shape(v))).astype(np.float32)
    params = traverse_util.unflatten_dict(flat, sep="/")
    path = os.path.join(out, "ckpt.safetensors")
    ckpt_io.write_checkpoint(path, {"format_version": 2, "params": params, "config": dict(cfg.__dict__),
                                    "step": 0, "run": {"generator": "n3_ckpt_oracle.py"}})
    # the export path of `needle build CKPT [--layers N]`, on the checkpoint as read back
    blob = exp._tokenizer_blob(tok)
    p, c = run_mod.load_checkpoint(path)
    for layers, name in ((None, "ref.cact"), (2, "ref_rung2.cact")):
        rp, rc = finetune.rung(p, c, layers)
        exp.write_export(rp, rc, os.path.join(out, name), bits=4, group=128, tokenizer=blob,
                         kv_window=arch.effective_kv_window(rc))
    json.dump(forward(jax.tree.map(jnp.asarray, p), c, ids), open(os.path.join(out, "ref.json"), "w"))
    tiny = json.load(open(os.path.join(ROOT, "tests", "golden", "needle3", "n3_tiny.json")))
    tp, tc = run_mod.load_checkpoint(os.path.join(ROOT, "tests", "golden", "needle3", "n3_tiny.safetensors"))
    tp = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), tp)
    json.dump(forward(tp, tc, tiny["ids"]), open(os.path.join(out, "tiny.json"), "w"))


def init(ours, out):
    params, config = run_mod.load_checkpoint(ours)  # refuses anything but a format-2 Needle 3 checkpoint
    model = arch.SimpleAttentionNetwork(config)
    x = jnp.asarray([[2, 17, 99, 4, 5]], jnp.int32)
    ref = [traverse_util.flatten_dict(jax.device_get(model.init(jax.random.PRNGKey(k), x, method=everything)["params"]),
                                      sep="/") for k in (0, 1)]
    mine = traverse_util.flatten_dict(params, sep="/")
    report = {"only_ours": sorted(set(mine) - set(ref[0])), "only_reference": sorted(set(ref[0]) - set(mine)),
              "leaves": {}}
    for k in sorted(set(mine) & set(ref[0])):
        a, r0, r1 = np.asarray(mine[k], np.float32), np.asarray(ref[0][k], np.float32), np.asarray(ref[1][k], np.float32)
        entry = {"shape_ours": list(a.shape), "shape_reference": list(r0.shape),
                 "deterministic": bool(np.array_equal(r0, r1))}
        if a.shape == r0.shape:
            if entry["deterministic"]:
                entry["equal"] = bool(np.array_equal(a, r0))
            else:
                entry["std_ours"], entry["std_reference"] = float(a.std()), float(r0.std())
                entry["mean_ours"] = float(a.mean())
        report["leaves"][k] = entry
    logits, *_ = model.apply({"params": jax.tree.map(jnp.asarray, params)}, x, method=everything)
    report["forward_finite"] = bool(np.isfinite(np.asarray(logits)).all())
    json.dump(report, open(out, "w"))


def read(ckpt, out, files):
    params, config = run_mod.load_checkpoint(ckpt)
    flat = traverse_util.flatten_dict(params, sep="/")
    # the CQ matrices of the export order, [out, in], for the first layer only (enough to see the width)
    blk = "stack/layers/block/self_attn/"
    wanted = {"q_proj": np.asarray(flat[blk + "q_proj/kernel"][0], np.float32).T,
              "embedding": np.asarray(flat["embedding/embedding"], np.float32)}
    report = {}
    for f in files:
        meta, ts = exp.read_export(f)
        entry = {"num_tensors": meta["num_tensors"], "num_layers": meta["num_layers"],
                 "tokenizer_last": isinstance(ts[-1], (bytes, bytearray))}
        # tensor 0 is the embedding, tensor 2 layer 0's q_proj (after norm_in)
        with open(f, "rb") as h:
            raw = h.read()
        off = 196 + 28 * 4
        bits = [exp.struct.unpack(exp._REC_FMT, raw[off + i * exp.REC_SIZE:off + (i + 1) * exp.REC_SIZE])[10]
                for i in (0, 2)]
        rel = {}
        for name, index, b in (("embedding", 0, bits[0]), ("q_proj", 2, bits[1])):
            w = wanted[name]
            q = np.asarray(quantize.cq_quantize(jnp.asarray(w), b, 128), np.float32)
            rel[name] = {"bits": int(b), "rel": float(np.linalg.norm(ts[index] - q) / np.linalg.norm(q)),
                         "rel_to_float": float(np.linalg.norm(ts[index] - w) / np.linalg.norm(w))}
        entry["cq"] = rel
        report[os.path.basename(f)] = entry
    json.dump(report, open(out, "w"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3])
    elif cmd == "init":
        init(sys.argv[2], sys.argv[3])
    elif cmd == "read":
        read(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        raise SystemExit(f"unknown subcommand {cmd}")

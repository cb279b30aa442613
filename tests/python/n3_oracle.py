"""Run inside the venv that has cactus-needle 3.2.8 (used only as an oracle):
make a random Needle 3 model on a geometry that is not in tests/golden/needle3,
export it with the reference exporter, decode the file with the reference
reader, rebuild the parameter tree from the decoded tensors (the .cact order of
SPEC-needle3 5.7) and run the reference's float32 model on exactly those
weights.  Writes OUT/model.cact and OUT/ref.json (ids, logits, heads).

BITS (default 4) is the CQ width of the model's matrices.  The reference's
exporter writes only 4-bit records (its packer refuses any other width,
checking its module constant WEIGHT_BITS); with that constant set to the width
of each call, the same packing code writes binary (1-bit) records, which the
reference's reader decodes (export.py documents the BINARY record: eight
indices per byte, codebook +-sqrt(2/pi)/sqrt(group)).  The heads stay at the
exporter's HEAD_BITS (4).

usage: python n3_oracle.py TOKENIZER.model OUT_DIR [BITS]"""
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from needle.model import architecture as arch
from needle.model import export as exp
from needle.model.tokenizer import SANTokenizer

TOK, OUT = sys.argv[1], sys.argv[2]
BITS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
# a geometry none of the golden files has: 3 layers (local, global, local),
# q/k head 16 but v head 8, 2 engram orders x 2 tables with seed stride 3,
# one engram site at a local layer, out_vocab, window 6, 2 conv taps
CFG = dict(vocab_size=8192, d_model=64, num_heads=4, num_kv_heads=2, num_layers=3, qk_head_dim=16, v_head_dim=8,
           max_seq_len=96, embedding_dim=24, embedding_probes=3, embedding_queries=2, confidence_probes=2,
           confidence_queries=3, router_probes=4, router_queries=1, rope_theta=20000.0, dtype="float32",
           flash=False, remat=False, engram_orders=(2, 3), engram_heads=2, engram_slots=128, engram_seed_heads=3,
           engram_layers=(0,), global_layers=(1,), sliding_window=6, qkv_conv_taps=2, out_vocab=8050, mhc_lanes=4)
cfg = arch.TransformerConfig(**CFG)
model = arch.SimpleAttentionNetwork(cfg)
tok = SANTokenizer(TOK)
text = "<|im_start|>user\nplease turn the hallway lights off and lock the front door tonight<|im_end|>"
ids = [2] + list(tok.encode(text))
x = jnp.asarray([ids], jnp.int32)


def everything(m, t):
    return m(t), m.forward_embedding(t), m.forward_confidence(t), m.forward_router(t)


params = model.init(jax.random.PRNGKey(7), x, method=everything)
rng = np.random.default_rng(11)
flat = traverse_util.flatten_dict(jax.device_get(params["params"]), sep="/")
for k, v in flat.items():
    scale = 0.5 if k.endswith(("cond_u", "b2")) else 0.25 if k.endswith("d4") else 0.05
    flat[k] = (np.asarray(v, np.float32) + rng.normal(0, scale, np.shape(v))).astype(np.float16).astype(np.float32)
params = traverse_util.unflatten_dict(flat, sep="/")  # the tree without flax's "params" level

path = os.path.join(OUT, "model.cact")
if BITS != exp.WEIGHT_BITS:
    pack = exp._cq_pack

    def pack_any_width(w, bits, group):  # the packer's width check follows each call (see the docstring)
        saved, exp.WEIGHT_BITS = exp.WEIGHT_BITS, bits
        try:
            return pack(w, bits, group)
        finally:
            exp.WEIGHT_BITS = saved

    exp._cq_pack = pack_any_width
exp.write_export(params, cfg, path, bits=BITS, group=128, tokenizer=exp._tokenizer_blob(tok),
                 kv_window=arch.effective_kv_window(cfg))
meta, ts = exp.read_export(path)

# the decoded tensors back into the parameter tree, in the .cact order
L, n, d = cfg.num_layers, cfg.mhc_lanes, cfg.d_model
it = iter(ts)
new = {}
P = ""
new[P + "embedding/embedding"] = next(it)
blk = P + "stack/layers/block/"
layer_names = [("ZCRMSNorm_0/scale", 0), ("self_attn/q_proj/kernel", 1), ("self_attn/k_proj/kernel", 1),
               ("self_attn/v_proj/kernel", 1), ("self_attn/q_taps", 0), ("self_attn/k_taps", 0),
               ("self_attn/v_taps", 0), ("self_attn/q_norm/scale", 0), ("self_attn/k_norm/scale", 0),
               ("self_attn/gate_proj/kernel", 1), ("self_attn/out_proj/kernel", 1), ("post_attn_norm/scale", 0),
               ("attn_gate", 2), ("pre_hada_norm/scale", 0)] + \
              [("hadamard_mlp/" + s, 0) for s in ("d1", "d2", "b2", "d3", "d4", "w1a", "w1b", "w2a", "w2b", "w3a",
                                                   "w3b", "cond_v", "cond_u")]
per = {name: [] for name, _ in layer_names}
for _ in range(L):
    for name, kind in layer_names:
        a = next(it)
        per[name].append(a.T if kind == 1 else a.reshape(()) if kind == 2 else a)
for name, _ in layer_names:
    new[blk + name] = np.stack(per[name])
for s in ("a_pre", "a_post", "a_res", "b_pre", "b_post", "b_res"):
    new[P + "stack/mhc_" + s] = next(it)
for s, m in (("phi_pre", n), ("phi_post", n), ("phi_res", n * n)):
    new[P + "stack/mhc_" + s] = next(it).reshape(L, m, n * d).transpose(0, 2, 1)
next(it), next(it)  # hada_p1, hada_p2: the model draws the same permutations itself
te = 2 * len(cfg.engram_orders)
for s in range(len(cfg.engram_layers)):
    new[P + f"engrams_{s}/embedding"] = next(it).reshape(te, cfg.engram_slots, -1)
    new[P + f"engrams_{s}/key_proj/kernel"] = next(it).T
    new[P + f"engrams_{s}/value_proj/kernel"] = next(it).T
    new[P + f"engrams_{s}/taps"] = next(it)
new[P + "stack/final_norm/scale"] = next(it)
manifest = [int(c) for c in next(it)]
for code in manifest:
    h = P + {1: "embedding_head", 2: "confidence_head", 3: "router_head"}[code] + "/"
    probes, gain, query, row_bias, proj, bias = (next(it) for _ in range(6))
    new[h + "probes"] = probes.reshape(L + 1, -1, d)
    new[h + "gain"], new[h + "query"], new[h + "row_bias"] = gain, query, row_bias
    new[h + "proj/kernel"] = proj.T
    if code != 1:
        new[h + "proj/bias"] = bias
    if code == 3:
        calibration = next(it)
assert isinstance(next(it), (bytes, bytearray)), "the tokenizer closes the file"
for k in flat:  # training-only leaves the exporter drops (embedding_head bias / log_temp)
    if k not in new:
        assert "embedding_head" in k, k
        new[k] = flat[k]
assert set(new) == set(flat) and all(np.shape(new[k]) == np.shape(flat[k]) for k in flat)
decoded = {"params": traverse_util.unflatten_dict({k: jnp.asarray(v, jnp.float32) for k, v in new.items()}, sep="/")}

logits, emb, conf, router = model.apply(decoded, x, method=everything)
logits = np.asarray(logits[0], np.float64)
# the deploy numerics (A8): int8 activations, q per head, k and v per head (kv_bits 8)
from needle.model import quantize as qz  # noqa: E402

qz.configure_deploy(act_bits=8, kv_bits=8)
logits_a8 = np.asarray(model.apply(decoded, x, quant=True)[0], np.float64)
json.dump({"ids": ids, "text": text, "config": {k: list(v) if isinstance(v, tuple) else v for k, v in CFG.items()},
           "logits": logits.tolist(), "logits_a8": logits_a8.tolist(), "embedding": np.asarray(emb[0], np.float64).tolist(),
           "confidence_logit": float(np.asarray(conf).reshape(-1)[0]),
           "router_logits": np.asarray(router[0], np.float64).tolist(),
           "router_calibration": [float(c) for c in calibration]},
          open(os.path.join(OUT, "ref.json"), "w"))

"""Run inside the venv that has cactus-needle 3.2.8 (used only as an oracle):
make a random Needle 3 model on a tiny geometry with every v3 feature on,
write it as a float32 .safetensors checkpoint in the reference's layout (the
parameter paths joined with "/"; without hada_p1/p2, the permutations the
reference model draws itself and our trainer fills in as the inference loader
does), and compute with jax.grad the
gradient of the mean next-token cross-entropy of the reference model with
respect to every parameter.  Writes OUT/model.safetensors and OUT/ref.npz
(ids, targets, loss, one array per parameter "g:NAME").

With a second argument (our tools/train_grad_dump), also the deploy-numerics
LoRA step the reference's v3 fine-tuning takes: our dump runs one QAT step
(rank 4, alpha 8, CQ 4 bits) on the checkpoint and writes its LoRA factors and
gradients to OUT/qat_dump.json; the reference's loss and jax.grad with respect
to those factors, under merge_lora + cq_ste_params(4) + model.apply(quant=True)
after configure_deploy(act_bits 8, kv_bits 8) (what its finetune does), go to
ref.npz as qat_loss and "qg:NAME:A|B".

usage: python n3_grad_oracle.py OUT_DIR [TRAIN_GRAD_DUMP]"""
import dataclasses
import json
import os
import struct
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from needle.model import architecture as arch

OUT = sys.argv[1]
# 3 layers (local, global, local; window 4), q/k head 16 vs v head 8, conv taps
# 3, d 96 -> Monarch 128 = 8 x 16, 2 orders x 2 tables with seed stride 3, two
# engram sites, out_vocab 200 of 256
CFG = dict(vocab_size=256, d_model=96, num_heads=4, num_kv_heads=2, num_layers=3, qk_head_dim=16, v_head_dim=8,
           max_seq_len=64, rope_theta=20000.0, dtype="float32", flash=False, remat=False, engram_orders=(2, 3),
           engram_heads=2, engram_slots=64, engram_seed_heads=3, engram_layers=(0, 2), global_layers=(1,),
           sliding_window=4, qkv_conv_taps=3, out_vocab=200, mhc_lanes=4)
cfg = arch.TransformerConfig(**CFG)
model = arch.SimpleAttentionNetwork(cfg)
B, T = 2, 14
rng = np.random.default_rng(3)
ids = rng.integers(1, cfg.vocab_size, size=(B, T))
# row position t in [2, T-1) predicts ids[t+1] (tools/train_grad_dump.c); targets past out_vocab do not count
targets = np.full((B, T), -1)
targets[:, 2:T - 1] = ids[:, 3:T]
keep = (targets >= 0) & (targets < cfg.out_vocab)

params = model.init(jax.random.PRNGKey(5), jnp.asarray(ids, jnp.int32))["params"]
flat = traverse_util.flatten_dict(jax.device_get(params), sep="/")
for k, v in flat.items():  # move every leaf off its special initial value
    scale = 0.5 if k.endswith(("cond_u", "b2", "mhc_b_res")) else 0.3 if k.endswith(("d4", "taps")) else 0.05
    flat[k] = (np.asarray(v, np.float32) + rng.normal(0, scale, np.shape(v))).astype(np.float32)
for k in ("stack/mhc_a_pre", "stack/mhc_a_post", "stack/mhc_a_res"):
    flat[k] = (0.5 + rng.normal(0, 0.2, np.shape(flat[k]))).astype(np.float32)


def loss_fn(p):
    logits = model.apply({"params": traverse_util.unflatten_dict(p, sep="/")}, jnp.asarray(ids, jnp.int32))
    lse = jax.nn.logsumexp(logits, axis=-1)
    tgt = jnp.take_along_axis(logits, jnp.asarray(np.where(keep, targets, 0))[..., None], axis=-1)[..., 0]
    return jnp.sum(jnp.where(keep, lse - tgt, 0.0)) / keep.sum()


p = {k: jnp.asarray(v) for k, v in flat.items()}
loss, grads = jax.jit(jax.value_and_grad(loss_fn))(p)

tensors = dict(flat)
config = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(cfg).items()}
header, blobs, off = {"__metadata__": {"config": json.dumps(config), "format_version": "2"}}, [], 0
for name in sorted(tensors):
    a = np.ascontiguousarray(tensors[name], np.float32)
    header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
    blobs.append(a.tobytes())
    off += a.nbytes
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(OUT, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
extra = {}
if len(sys.argv) > 2:
    from needle.model import finetune as ft
    from needle.model import quantize as qz
    r = subprocess.run([sys.argv[2], os.path.join(OUT, "model.safetensors"), "4", "8", "7", str(B),
                        ",".join(str(int(i)) for i in ids.reshape(-1)), "4"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(OUT, "qat_dump.json"), "w") as f:
        f.write(r.stdout)
    d = json.loads(r.stdout)
    L, rank = cfg.num_layers, d["rank"]
    lora = {tuple(name.split(".")): {"A": jnp.asarray(np.array(t["A"], np.float32).reshape(L, t["in"], rank)),
                                     "B": jnp.asarray(np.array(t["B"], np.float32).reshape(L, rank, t["out"]))}
            for name, t in d["lora"].items()}
    tree = traverse_util.unflatten_dict(p, sep="/")
    qz.configure_deploy(act_bits=8, kv_bits=8)

    def qat_loss_fn(lo):
        merged = qz.cq_ste_params(ft.merge_lora(tree, lo, d["scale"]), 4)
        logits = model.apply({"params": merged}, jnp.asarray(ids, jnp.int32), quant=True)
        lse = jax.nn.logsumexp(logits, axis=-1)
        tgt = jnp.take_along_axis(logits, jnp.asarray(np.where(keep, targets, 0))[..., None], axis=-1)[..., 0]
        return jnp.sum(jnp.where(keep, lse - tgt, 0.0)) / keep.sum()

    ql, qg = jax.jit(jax.value_and_grad(qat_loss_fn))(lora)
    extra["qat_loss"] = float(ql)
    for path, g in qg.items():
        for which in ("A", "B"):
            extra["qg:" + ".".join(path) + ":" + which] = np.asarray(g[which]).reshape(-1)
np.savez(os.path.join(OUT, "ref.npz"), ids=ids, targets=np.where(keep, targets, -1), loss=float(loss),
         **{"g:" + k: np.asarray(v) for k, v in grads.items()}, **extra)

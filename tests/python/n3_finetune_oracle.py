"""Run inside the venv that has cactus-needle 3.2.8 (used only as an oracle) for
tests/python/test_finetune_v3_oracle.py.  Subcommands:

  adapter BASE.safetensors OUT.safetensors SEED RANK ALPHA
      an adapter made by the reference itself: its lora_target_paths and
      init_lora on BASE (A ~ N(0,1)/r), B drawn N(0, 0.05) (its init is 0,
      which would make any merge the identity), written with its
      write_adapter (tensors lora/<path>/A|B, metadata scale, base, rank, seed).
  export BASE.safetensors ADAPTER.safetensors TOKENIZER OUT.cact LAYERS BITS
      what the reference's `needle build --lora ADAPTER [--layers N]` does with
      BASE as the checkpoint: load_checkpoint, read_adapter, merge_lora, drop
      the confidence head, rung, write_export (BITS, group 128, the
      tokenizer's blob, effective_kv_window).  LAYERS 0 = all.
  merged BASE.safetensors ADAPTER.safetensors OURS.safetensors OUT.json
      the reference's merge_lora of the adapter into BASE against OURS (our
      merge of the same adapter, written by tools/float_ckpt): per target
      kernel the largest difference, the largest weight and the largest
      change the adapter made.
  read FILE.cact OURS.safetensors OUT.json
      read_export on FILE (our merged .cact); per tensor of the embedding, every
      layer's block and final_norm, the largest difference between what the
      reference decodes and OURS (the same file decoded by our tools/float_ckpt,
      reference layout).
  check CKPT.safetensors OUT.json
      the reference's load_checkpoint on CKPT (our `needle finetune --full`
      output): its tree against the reference model's own init (names and
      shapes), and whether its float forward is finite."""
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
from needle.model import run as run_mod
from needle.model.tokenizer import SANTokenizer

BLK = "stack/layers/block/"


def make_adapter(base, out, seed, rank, alpha):
    params, _ = run_mod.load_checkpoint(base)
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)
    paths = finetune.lora_target_paths(params)
    lora = finetune.init_lora(params, paths, rank, jax.random.PRNGKey(seed))
    rng = np.random.default_rng(seed)
    lora = {p: {"A": np.asarray(v["A"]), "B": rng.normal(0, 0.05, np.shape(v["B"])).astype(np.float32)}
            for p, v in lora.items()}
    ckpt_io.write_adapter(out, {"lora": {"/".join(p): v for p, v in lora.items()}, "scale": float(alpha / rank),
                                "base": base, "rank": rank, "seed": seed})


def _merged(base, adapter_path):
    params, config = run_mod.load_checkpoint(base)
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)
    adapter = ckpt_io.read_adapter(adapter_path)
    lora = {tuple(k.split("/")): {"A": jnp.asarray(v["A"]), "B": jnp.asarray(v["B"])}
            for k, v in adapter["lora"].items()}
    return finetune.merge_lora(params, lora, adapter["scale"]), config, lora


def export(base, adapter_path, tok_path, out, layers, bits):
    params, config, _ = _merged(base, adapter_path)
    if arch.ConfidenceHead.key in params:
        params = {k: v for k, v in params.items() if k != arch.ConfidenceHead.key}
    params, config = finetune.rung(params, config, layers or None)
    blob = exp._tokenizer_blob(SANTokenizer(tok_path))
    exp.write_export(params, config, out, bits=bits, group=128, tokenizer=blob,
                     kv_window=arch.effective_kv_window(config))


def merged(base, adapter_path, ours_path, out):
    from safetensors.numpy import load_file
    params, _, lora = _merged(base, adapter_path)
    flat = traverse_util.flatten_dict(params, sep="/")
    before = traverse_util.flatten_dict(run_mod.load_checkpoint(base)[0], sep="/")
    ours = load_file(ours_path)
    report = {}
    for p in lora:
        k = "/".join(p)
        theirs, mine, orig = (np.asarray(x, np.float32) for x in (flat[k], ours[k], before[k]))
        report[k] = {"shape_ok": theirs.shape == mine.shape, "max_abs_diff": float(np.abs(theirs - mine).max()),
                     "max_abs": float(np.abs(theirs).max()), "max_delta": float(np.abs(theirs - orig).max())}
    json.dump(report, open(out, "w"))


def _layer_names(taps):
    names = [("ZCRMSNorm_0/scale", False), ("self_attn/q_proj/kernel", True), ("self_attn/k_proj/kernel", True),
             ("self_attn/v_proj/kernel", True)]
    if taps:
        names += [("self_attn/q_taps", False), ("self_attn/k_taps", False), ("self_attn/v_taps", False)]
    names += [("self_attn/q_norm/scale", False), ("self_attn/k_norm/scale", False),
              ("self_attn/gate_proj/kernel", True), ("self_attn/out_proj/kernel", True),
              ("post_attn_norm/scale", False), ("attn_gate", False), ("pre_hada_norm/scale", False)]
    names += [(f"hadamard_mlp/{k}", False) for k in ("d1", "d2", "b2", "d3", "d4", "w1a", "w1b", "w2a", "w2b", "w3a",
                                                       "w3b", "cond_v", "cond_u")]
    return names


def read(path, ours_path, out):
    meta, ts = exp.read_export(path)
    from safetensors.numpy import load_file
    ours = load_file(ours_path)
    L, taps = meta["num_layers"], meta["qkv_conv_taps"]
    pairs = [("embedding/embedding", ts[0], ours["embedding/embedding"])]
    at = 1
    for l in range(L):
        for name, kernel in _layer_names(taps):
            mine = ours[BLK + name][l]
            pairs.append((f"{BLK}{name}[{l}]", ts[at], mine.T if kernel else mine))
            at += 1
    at += 9 + 2 + 4 * len(meta["engram_layers"])
    pairs.append(("stack/final_norm/scale", ts[at], ours["stack/final_norm/scale"]))
    report = {"num_layers": L, "num_tensors": meta["num_tensors"], "tokenizer_last": isinstance(ts[-1], bytes),
              "tensors": {}}
    for name, theirs, mine in pairs:
        theirs, mine = np.asarray(theirs, np.float32), np.asarray(mine, np.float32)
        entry = {"shape_reference": list(theirs.shape), "shape_ours": list(np.reshape(mine, theirs.shape).shape)
                 if mine.size == theirs.size else list(mine.shape)}
        if mine.size == theirs.size:
            mine = mine.reshape(theirs.shape)
            entry["max_abs_diff"] = float(np.abs(theirs - mine).max())
            entry["max_abs"] = float(np.abs(theirs).max())
        report["tensors"][name] = entry
    json.dump(report, open(out, "w"))


def _everything(m, t):
    return m(t), m.forward_embedding(t), m.forward_confidence(t), m.forward_router(t)


def check(path, out):
    params, config = run_mod.load_checkpoint(path)  # refuses anything but a format-2 Needle 3 checkpoint
    model = arch.SimpleAttentionNetwork(config)
    x = jnp.asarray([[2, 17, 99, 4, 5]], jnp.int32)
    ref = traverse_util.flatten_dict(jax.device_get(model.init(jax.random.PRNGKey(0), x, method=_everything)["params"]),
                                     sep="/")
    mine = traverse_util.flatten_dict(params, sep="/")
    report = {"only_ours": sorted(set(mine) - set(ref)), "missing": sorted(set(ref) - set(mine)),
              "shape_mismatch": sorted(k for k in set(mine) & set(ref) if np.shape(mine[k]) != np.shape(ref[k])),
              "num_layers": config.num_layers}
    logits = model.apply({"params": jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)}, x)
    report["forward_finite"] = bool(np.isfinite(np.asarray(logits)).all())
    json.dump(report, open(out, "w"))


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "adapter":
        make_adapter(a[0], a[1], int(a[2]), int(a[3]), float(a[4]))
    elif cmd == "export":
        export(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]))
    elif cmd == "merged":
        merged(a[0], a[1], a[2], a[3])
    elif cmd == "read":
        read(a[0], a[1], a[2])
    elif cmd == "check":
        check(a[0], a[1])
    else:
        raise SystemExit(f"unknown subcommand {cmd}")

"""Runs under the cactus-needle 2.0.15 virtual environment (/opt/venv-n2015), called by
test_layout_oracle.py and test_qat_oracle.py: the reference package used as an oracle only.

  n2015_oracle.py render TOK.model ROWS.jsonl
      one line per row: {"ids": [...], "mask": [...]} from the reference's own
      render_example + its tokenizer class, ids = [BOS] + enc(prompt) + enc(target) + [EOS]
      and the mask of its _encode (loss on the target and EOS).
  n2015_oracle.py qat_grad CKPT.safetensors DUMP.json:MODE [DUMP.json:MODE ...]
      one line per DUMP: the loss and jax.grad of the reference's own fine-tuning loss under
      MODE (auto|2|4|none, as its --qat-bits: merge_lora, then cq_ste_params /
      cq_ste_mixed_params, then model.apply(quant=True) after configure_deploy(act_bits,
      kv_bits)) at the LoRA factors, ids and targets of DUMP (tools/train_grad_dump's output).
"""
import json
import os
import sys

os.environ.setdefault("NEEDLE_TELEMETRY", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def render(tok_path, rows_path):
    from needle.model import finetune, tokenizer as reftok
    tok = reftok.SANTokenizer(tok_path)
    with open(rows_path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            ex = json.loads(line)
            prompt, target = finetune.render_example(ex)
            p, t = tok.encode(prompt), tok.encode(target)
            n = 1 + len(p) + len(t) + 1
            ids, mask = finetune._encode(tok, ex, n)
            print(json.dumps({"ids": [int(i) for i in ids], "mask": [int(m) for m in mask],
                              "prompt": prompt, "target": target}, ensure_ascii=True))


def _load_safetensors(path):
    import struct
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        blob = f.read()
    meta = head.pop("__metadata__", {})
    tree = {}
    for name, t in head.items():
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {t['dtype']}, expected F32")
        a, b = t["data_offsets"]
        arr = np.frombuffer(blob[a:b], dtype="<f4").reshape(t["shape"]).astype(np.float32)
        node = tree
        parts = name.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = arr
    return tree, json.loads(meta["config"])


def qat_grad(ckpt, dump_path, mode, loaded=None):
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax.traverse_util import flatten_dict
    from needle.model.architecture import SimpleAttentionNetwork, TransformerConfig
    from needle.model.finetune import merge_lora
    from needle.model.quantize import configure_deploy, cq_ste_mixed_params, cq_ste_params, parse_bits_map

    params, cfg = loaded if loaded else _load_safetensors(ckpt)
    params.pop("contrastive_head", None)  # the heads take no part in the loss
    params.pop("confidence_head", None)
    params = jax.device_put(params)  # as the reference's fine-tuning does
    config = TransformerConfig(**cfg)
    config.dtype = "float32"  # as the reference's fine-tuning sets it
    config.flash = False
    config.remat = False
    with open(dump_path) as f:
        d = json.load(f)
    T = d["T"]
    ids = np.array(d["ids"], np.int32).reshape(-1, T)
    targets = np.array(d["targets"], np.int32).reshape(-1, T)
    L, r = config.num_layers, d["rank"]
    flat = flatten_dict(params)
    lora = {}
    for name, t in d["lora"].items():
        path = tuple(name.split("."))
        assert path in flat, path
        lora[path] = {"A": jnp.asarray(np.array(t["A"], np.float32).reshape(L, t["in"], r)),
                      "B": jnp.asarray(np.array(t["B"], np.float32).reshape(L, r, t["out"]))}
    scale = d["scale"]
    # the reference's own --qat-bits resolution (finetune.finetune_local)
    bits, bits_map = None, None
    if mode == "auto":
        if config.weight_bits:
            bits_map = parse_bits_map(config.weight_bits)
        else:
            bits = 4
    elif mode in ("2", "4"):
        bits = int(mode)
    qat = bits is not None or bits_map is not None
    if qat:
        configure_deploy(act_bits=config.act_bits, kv_bits=config.kv_bits)
    model = SimpleAttentionNetwork(config)
    tgt = jnp.asarray(np.maximum(targets, 0))
    keep = jnp.asarray((targets >= 0).astype(np.float32))

    def loss_fn(lo, quant):
        merged = merge_lora(params, lo, scale)
        if quant and bits_map is not None:
            merged = cq_ste_mixed_params(merged, bits_map[0], bits_map[1])
        elif quant and bits is not None:
            merged = cq_ste_params(merged, bits)
        logits = model.apply({"params": merged}, jnp.asarray(ids), quant=quant)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, tgt)
        return (ce * keep).sum() / jnp.maximum(keep.sum(), 1.0)

    val, grads = jax.jit(jax.value_and_grad(lambda lo: loss_fn(lo, qat)))(lora)
    out = {"mode": mode, "loss": float(val), "grads": {}}
    for path, g in grads.items():
        out["grads"][".".join(path)] = {"gA": np.asarray(g["A"]).reshape(-1).tolist(),
                                        "gB": np.asarray(g["B"]).reshape(-1).tolist()}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "render":
        render(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "qat_grad":
        tree, config_json = _load_safetensors(sys.argv[2])
        for spec in sys.argv[3:]:
            dump, mode = spec.rsplit(":", 1)
            params_copy = {k: v for k, v in tree.items()}
            qat_grad(sys.argv[2], dump, mode, (params_copy, config_json))
    else:
        sys.exit(__doc__)

#!/usr/bin/env python3
"""Speed of the reference JAX model next to `needle bench`, on the same geometry.

The reference (the `cactus-needle` 2.0.x package, Needle 2) is used as an
oracle only: its model class and its own cached decode function are imported
and timed, nothing of it is copied.  Run it in a virtual environment:

    python3 -m venv --system-site-packages .venv-ref
    .venv-ref/bin/pip install flax "cactus-needle==2.0.8"
    NEEDLE_TELEMETRY=0 HF_HUB_OFFLINE=1 .venv-ref/bin/python tools/bench_reference.py \
        --cact base4.cact --config base.safetensors [--threads 2] [--prompt-tokens 512] [--gen-tokens 64]

--config names the checkpoint `needle init` wrote (its config is read from the
safetensors metadata; the reference gets random weights of the same shapes:
speed does not depend on the values); --cact the file `needle build` made of
it.  Both engines run on the same CPUs (taskset), prefill is one forward over
the prompt, decode is the reference's cached single-token step, timed after a
warm-up call (compilation excluded).  Prints one JSON line with both and the
ratios (needle / reference).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time

os.environ.setdefault("NEEDLE_TELEMETRY", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def read_config(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    return json.loads(head["__metadata__"]["config"])


def cpus(threads):
    have = sorted(os.sched_getaffinity(0))
    return have[:threads]


def bench_needle(args):
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "needle")
    cmd = ["taskset", "-c", ",".join(map(str, cpus(args.threads))), exe, "bench", "--model", args.cact,
           "--threads", str(args.threads), "--prompt-tokens", str(args.prompt_tokens),
           "--gen-tokens", str(args.gen_tokens)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.replace("\n", " "))


def bench_reference(args, cfgd):
    os.sched_setaffinity(0, cpus(args.threads))
    import jax
    import jax.numpy as jnp
    from needle.model.architecture import SimpleAttentionNetwork, TransformerConfig, precompute_rope_freqs
    from needle.model.decode import decode_cfg, forward_cached, init_kv_cache

    cfg = TransformerConfig(**{**cfgd, "dtype": "float32", "flash": False, "remat": False})
    model = SimpleAttentionNetwork(cfg)
    P, G = args.prompt_tokens, args.gen_tokens
    key = jax.random.PRNGKey(0)
    tokens = jax.random.randint(key, (1, P), 14, cfg.vocab_size, dtype=jnp.int32)
    print("reference: init", file=sys.stderr, flush=True)
    params = model.init(key, tokens[:, :8])["params"]
    print("reference: compiling the prefill forward", file=sys.stderr, flush=True)

    apply = jax.jit(lambda p, t: model.apply({"params": p}, t, quant=True))
    apply(params, tokens).block_until_ready()  # compile
    t = time.perf_counter()
    apply(params, tokens).block_until_ready()
    prefill_s = time.perf_counter() - t

    max_len = P + G + 1
    head_dim = (cfg.attn_dim or cfg.d_model) // cfg.num_heads
    cos, sin = precompute_rope_freqs(head_dim, max_len, cfg.rope_theta)
    dcfg = decode_cfg(cfg)
    kc, vc = init_kv_cache(cfg, 1, max_len)
    hist = jnp.zeros((1, max_len), jnp.int32).at[0, :P].set(tokens[0])
    valid = jnp.ones((1, max_len), bool)
    logits, kc, vc = forward_cached(params, dcfg, tokens, kc, vc, jnp.asarray(0, jnp.int32), cos, sin, None, False,
                                    hist, valid, None)
    nxt = int(jnp.argmax(logits[0, -1]))
    step = lambda tok, kc, vc, pos, hist: forward_cached(params, dcfg, jnp.asarray([[tok]], jnp.int32), kc, vc,
                                                         jnp.asarray(pos, jnp.int32), cos, sin, None, False, hist,
                                                         valid, None)
    print("reference: compiling the decode step", file=sys.stderr, flush=True)
    lg, _, _ = step(nxt, kc, vc, P, hist)  # compile the single-token step
    lg.block_until_ready()
    t = time.perf_counter()
    for i in range(G):
        hist = hist.at[0, P + i].set(nxt)
        logits, kc, vc = step(nxt, kc, vc, P + i, hist)
        nxt = int(jnp.argmax(logits[0, -1]))
    decode_s = time.perf_counter() - t
    return {"prefill_tps": P / prefill_s, "decode_tps": G / decode_s, "jax": jax.__version__,
            "note": "prefill: jitted full forward with quant=True; decode: the reference's forward_cached (float KV)"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cact", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=64)
    args = ap.parse_args()
    cfgd = read_config(args.config)
    needle = bench_needle(args)
    ref = bench_reference(args, cfgd)
    print(json.dumps({
        "geometry": {k: cfgd.get(k) for k in ("d_model", "num_layers", "num_heads", "num_kv_heads", "vocab_size")},
        "threads": args.threads, "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens,
        "needle": {k: needle[k] for k in ("prefill_tps", "decode_tps", "first_token_ms", "peak_rss_mb", "acts", "kv_bits")},
        "reference": ref,
        "ratio_prefill": needle["prefill_tps"] / ref["prefill_tps"],
        "ratio_decode": needle["decode_tps"] / ref["decode_tps"],
    }))


if __name__ == "__main__":
    sys.exit(main())

"""bench_train_jax.py - the JAX side of the training benchmark (issue: "faster than JAX").

Times one LoRA training step (loss + gradients of the q, k, v, gate and out
LoRA factors + an AdamW update, all under one jax.jit) of the JAX
transcription of SPEC section 4 (tests/python/jax_needle.py) on a checkpoint
written by `needle init`, with the same batch shape and target layout as
build/tools/train_bench (every position but the last is a target).

    python3 tools/bench_train_jax.py CHECKPOINT.safetensors [B=16] [T=128] [STEPS=3]

Prints one JSON line: compile seconds, best step seconds, tokens/s.
A tool, not a test: JAX is never a dependency of the library."""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax_needle as jn  # noqa: E402

PRE = "stack.layers.block.self_attn."
TARGETS = ("q_proj", "k_proj", "v_proj", "gate_proj", "out_proj")


def main():
    path = sys.argv[1]
    B = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    T = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    p, meta = jn.load_safetensors(path)
    g = jn.Geometry(json.loads(meta["config"]))
    p = {k: jnp.asarray(v) for k, v in p.items()}
    rank, alpha = 16, 32.0
    rng = np.random.default_rng(1)
    factors = {}
    for t in TARGETS:
        w = p[PRE + t + ".kernel"]
        L, fin, fout = w.shape
        factors[PRE + t + ".kernel.lora_A"] = jnp.asarray(rng.normal(0, 1 / np.sqrt(fin), (L, fin, rank)), jnp.float32)
        factors[PRE + t + ".kernel.lora_B"] = jnp.zeros((L, rank, fout), jnp.float32)
    ids = rng.integers(14, g.V, size=(B, T))
    targets = np.concatenate([ids[:, 1:], -np.ones((B, 1), np.int64)], axis=1)
    targets = jnp.asarray(targets)

    def loss_fn(fs):
        lo = dict(fs)
        lo["scale"] = alpha / rank
        return jn.loss(p, ids, targets, g, lo)  # ids stay numpy: the engram hash is static

    def step(fs, m, v, t):
        val, gr = jax.value_and_grad(loss_fn)(fs)
        b1, b2, lr, wd = 0.9, 0.999, 1e-4, 0.01
        new_fs, new_m, new_v = {}, {}, {}
        for k in fs:
            new_m[k] = b1 * m[k] + (1 - b1) * gr[k]
            new_v[k] = b2 * v[k] + (1 - b2) * gr[k] * gr[k]
            mh = new_m[k] / (1 - b1 ** t)
            vh = new_v[k] / (1 - b2 ** t)
            new_fs[k] = fs[k] - lr * (mh / (jnp.sqrt(vh) + 1e-8) + wd * fs[k])
        return val, new_fs, new_m, new_v

    jstep = jax.jit(step)
    m = {k: jnp.zeros_like(a) for k, a in factors.items()}
    v = {k: jnp.zeros_like(a) for k, a in factors.items()}
    t0 = time.perf_counter()
    compiled = jstep.lower(factors, m, v, 1.0).compile()
    compile_s = time.perf_counter() - t0
    best = 1e30
    for s in range(steps):
        t0 = time.perf_counter()
        val, factors, m, v = compiled(factors, m, v, float(s + 1))
        val.block_until_ready()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        print("step %d: %.3f s loss %.4f" % (s + 1, dt, float(val)), file=sys.stderr)
    print(json.dumps({"impl": "jax", "jax": jax.__version__, "devices": str(jax.devices()), "B": B, "T": T,
                      "compile_s": round(compile_s, 1), "step_s": round(best, 3),
                      "tok_per_s": round(B * T / best, 1)}))


if __name__ == "__main__":
    main()

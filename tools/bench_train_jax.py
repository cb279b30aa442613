"""bench_train_jax.py - the JAX side of the training benchmark (issue: "faster than JAX").

Times one LoRA training step (loss + gradients of the q, k, v, gate and out
LoRA factors + an AdamW update, all under one jax.jit) of the JAX
transcription of SPEC section 4 (tests/python/jax_needle.py) on a checkpoint
written by `needle init`, with the same batch shape and target layout as
build/tools/train_bench (every position but the last is a target).

    python3 tools/bench_train_jax.py CHECKPOINT.safetensors [B=16] [T=128] [STEPS=3]

Needle 3: the reference's own model and fine-tuning step (cactus-needle 3.x,
run in its venv, e.g. /opt/venv-n3/bin/python with NEEDLE_TELEMETRY=0
HF_HUB_OFFLINE=1), at its default geometry (TransformerConfig(), float32,
no flash, no remat) with a random initialisation:

    python tools/bench_train_jax.py --needle3 [B=16] [T=128] [STEPS=3] [--qat]

One step is what its finetune jits: LoRA (rank 16, alpha 32) on q, k, v,
gate, out merged into the base, loss + gradients, optax clip_by_global_norm(1)
+ adamw with the warmup-cosine schedule; --qat adds its deploy numerics
(cq_ste_params 4 bits, quant=True after configure_deploy(8, 8)).  Compare with
build/tools/train_bench needle3 B T STEPS [0] [--qat] (same step, our trainer).

Prints one JSON line: compile seconds, the best step's wall seconds (and, with
--needle3, its process CPU seconds), tokens/s.  tools/bench_train_v3.sh runs
this and train_bench back to back and prints the ratio.
A tool, not a test: JAX is never a dependency of the library."""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

if "--needle3" not in sys.argv:  # the v2 transcription (not needed for the reference's v3 model)
    import jax_needle as jn  # noqa: E402

PRE = "stack.layers.block.self_attn."
TARGETS = ("q_proj", "k_proj", "v_proj", "gate_proj", "out_proj")


def main_needle3(argv):
    import optax
    from needle.model import architecture as arch
    from needle.model import finetune as ft
    from needle.model import quantize as qz
    qat = "--qat" in argv
    argv = [a for a in argv if a != "--qat"]
    B = int(argv[0]) if len(argv) > 0 else 16
    T = int(argv[1]) if len(argv) > 1 else 128
    steps = int(argv[2]) if len(argv) > 2 else 3
    cfg = arch.TransformerConfig(dtype="float32", flash=False, remat=False)
    model = arch.SimpleAttentionNetwork(cfg)
    rng = np.random.default_rng(1)
    ids = jnp.asarray(rng.integers(14, cfg.vocab_size, size=(B, T)), jnp.int32)
    mask = jnp.ones((B, T), jnp.float32)
    params = model.init(jax.random.PRNGKey(0), ids[:, :8])["params"]
    lora = ft.init_lora(params, ft.lora_target_paths(params), 16, jax.random.PRNGKey(1))
    scale = 32.0 / 16
    if qat:
        qz.configure_deploy(act_bits=8, kv_bits=8)
    schedule = optax.warmup_cosine_decay_schedule(init_value=0.0, peak_value=1e-4, warmup_steps=1, decay_steps=100)
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule))
    opt_state = optimizer.init(lora)

    def loss_fn(lo, ids, mask):
        merged = ft.merge_lora(params, lo, scale)
        if qat:
            merged = qz.cq_ste_params(merged, 4)
        logits = model.apply({"params": merged}, ids, quant=qat)
        logits, targets, m = logits[:, :-1], ids[:, 1:], mask[:, 1:]
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
        return (ce * m).sum() / jnp.maximum(m.sum(), 1.0)

    def step(lo, st, ids, mask):
        loss, grads = jax.value_and_grad(loss_fn)(lo, ids, mask)
        updates, st = optimizer.update(grads, st, lo)
        return optax.apply_updates(lo, updates), st, loss

    t0 = time.perf_counter()
    compiled = jax.jit(step).lower(lora, opt_state, ids, mask).compile()
    compile_s = time.perf_counter() - t0
    best, best_cpu = 1e30, 0.0
    for s in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        lora, opt_state, val = compiled(lora, opt_state, ids, mask)
        val.block_until_ready()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        if dt < best:
            best, best_cpu = dt, cpu
        print("step %d: %.3f s loss %.4f" % (s + 1, dt, float(val)), file=sys.stderr)
    print(json.dumps({"impl": "reference-jax", "model": "needle3", "qat": qat, "jax": jax.__version__,
                      "devices": str(jax.devices()), "B": B, "T": T, "compile_s": round(compile_s, 1),
                      "step_s": round(best, 3), "step_cpu_s": round(best_cpu, 3),
                      "tok_per_s": round(B * T / best, 1)}))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--needle3":
        return main_needle3(sys.argv[2:])
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

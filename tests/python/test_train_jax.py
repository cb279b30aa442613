"""The C training code's LoRA gradients on the golden tiny model vs jax.grad of
an independent JAX transcription of SPEC section 4 (tests/python/jax_needle.py).

The transcription is first validated against tests/golden/tiny.json logits_f32
(reference outputs), then used as the gradient oracle."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import jax_needle as jn  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(ROOT, "tests", "golden")
BUILD = os.environ.get("NEEDLE_BUILD", "build")
DUMP = os.path.join(ROOT, BUILD, "tools", "train_grad_dump")


@pytest.fixture(scope="module")
def model():
    p, meta = jn.load_safetensors(os.path.join(GOLDEN, "tiny.safetensors"))
    g = jn.Geometry(json.loads(meta["config"]))
    return {k: jnp.asarray(v) for k, v in p.items()}, g


def test_transcription_reproduces_golden_logits(model):
    p, g = model
    with open(os.path.join(GOLDEN, "tiny.json")) as f:
        cases = json.load(f)["cases"]
    for c in cases:
        lg = np.asarray(jn.logits(p, np.array([c["ids"]]), g))[0]
        ref = np.array(c["logits_f32"]["at_positions"])
        assert np.abs(lg[c["positions"]] - ref).max() < 1e-4
        assert (lg.argmax(-1) == np.array(c["logits_f32"]["argmax"])).all()


def test_lora_gradients_match_jax(model):
    if not os.path.exists(DUMP):
        pytest.skip("train_grad_dump not built (make test builds it)")
    p, g = model
    B, T = 2, 12
    rng = np.random.default_rng(5)
    ids = rng.integers(14, g.V, size=(B, T))
    ids[:, 0] = 2
    out = subprocess.run([DUMP, os.path.join(GOLDEN, "tiny.safetensors"), "4", "8", "3", str(B),
                          ",".join(str(int(i)) for i in ids.reshape(-1))],
                         capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    r = d["rank"]
    lora = {"scale": d["scale"]}
    for name, t in d["lora"].items():
        lora[name + ".lora_A"] = jnp.asarray(np.array(t["A"], np.float32).reshape(g.L, t["in"], r))
        lora[name + ".lora_B"] = jnp.asarray(np.array(t["B"], np.float32).reshape(g.L, r, t["out"]))
    targets = jnp.asarray(np.array(d["targets"]).reshape(B, T))
    keys = [k for k in lora if k != "scale"]

    def f(factors):
        lo = dict(factors)
        lo["scale"] = lora["scale"]
        return jn.loss(p, ids, targets, g, lo)  # ids stay numpy: the hash is static

    val, grads = jax.jit(jax.value_and_grad(f))({k: lora[k] for k in keys})
    assert abs(float(val) - d["loss"]) < 1e-4 * abs(float(val))
    worst = 0.0
    for name, t in d["lora"].items():
        for which, key in (("gA", ".lora_A"), ("gB", ".lora_B")):
            mine = np.array(t[which], np.float32)
            ref = np.asarray(grads[name + key]).reshape(-1)
            rel = np.linalg.norm(mine - ref) / max(np.linalg.norm(ref), 1e-12)
            worst = max(worst, rel)
            assert rel < 1e-3, (name, which, rel)
    print("worst relative gradient error", worst)

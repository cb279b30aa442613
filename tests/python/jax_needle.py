"""jax_needle.py - a JAX transcription of the Needle forward pass (SPEC section 4).

Written from SPEC.md alone, as an independent oracle for the C training code:
it must first reproduce tests/golden/tiny.json logits_f32 (which validates the
transcription), then jax.grad of its loss checks the C backward pass.

Params are a flat dict {checkpoint path: array}, kernels [in, out] as in the
checkpoint.  Batched: ids (B, T), causal attention with no window.
"""
import json
import math
import struct

import numpy as np
import jax
import jax.numpy as jnp

EPS = 1e-6


def load_safetensors(path):
    """Read a float32 safetensors file into ({name: np.ndarray}, metadata)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(blob[a:b], dtype="<f4").reshape(t["shape"]).copy()
    return out, meta


class Geometry:
    def __init__(self, cfg):
        self.V = cfg["vocab_size"]
        self.d = cfg["d_model"]
        self.A = cfg.get("attn_dim") or self.d
        self.H = cfg["num_heads"]
        self.KVH = cfg["num_kv_heads"]
        self.L = cfg["num_layers"]
        self.theta = float(cfg.get("rope_theta", 100000.0))
        self.orders = list(cfg.get("engram_orders", [2, 3]))
        he = cfg.get("engram_heads", 0) or max(1, self.d // (len(self.orders) * 128))
        self.he = he
        self.Te = len(self.orders) * he
        self.sub = self.d // (len(self.orders) * he)
        self.slots = cfg.get("engram_slots", 8192)
        self.sites = list(cfg.get("engram_layers", [2, 15]))
        self.n = cfg.get("mhc_lanes", 4)
        self.hd = self.A // self.H
        self.Nh = 1 << (self.d - 1).bit_length()


def zcrms(x, s):
    return (1.0 + s) * x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)


def rmsunit(x):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)


def hadamard_matrix(n):
    h = np.array([[1.0]], dtype=np.float32)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h / math.sqrt(n), dtype=jnp.float32)


def rope(x, theta):
    # x: (B, T, heads, hd); rotate-half, absolute positions from 0
    T, hd = x.shape[1], x.shape[-1]
    half = hd // 2
    freqs = theta ** (-2.0 * np.arange(half) / hd)
    ang = np.arange(T)[:, None] * freqs[None, :]
    c = jnp.asarray(np.cos(ang), jnp.float32)[None, :, None, :]
    s = jnp.asarray(np.sin(ang), jnp.float32)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def engram_indices(ids, g):
    """(B, T, Te) table rows and (B, T, Te) validity, as numpy (no gradient)."""
    ids = np.asarray(ids, dtype=np.uint64)
    B, T = ids.shape
    idx = np.zeros((B, T, g.Te), dtype=np.int64)
    ok = np.zeros((B, T, g.Te), dtype=np.float32)
    M = 0xFFFFFFFF
    for b in range(B):
        for t in range(T):
            for oi, o in enumerate(g.orders):
                for h in range(g.he):
                    k = oi * g.he + h
                    acc = (0x9E3779B9 * (k + 1)) & M
                    for j in range(o):
                        tok = int(ids[b, t - j]) if t - j >= 0 else 0
                        acc = ((acc ^ tok) * 0x01000193) & M
                    acc ^= acc >> 15
                    idx[b, t, k] = acc % g.slots
                    ok[b, t, k] = 1.0 if t >= o - 1 else 0.0
    return idx, ok


def lora_weight(p, lora, name, l):
    w = p[name][l]
    if lora is not None and name + ".lora_A" in lora:
        w = w + lora["scale"] * lora[name + ".lora_A"][l] @ lora[name + ".lora_B"][l]
    return w


def forward_hidden(p, ids, g, lora=None):
    """Final hidden states (B, T, d) after final_norm."""
    B, T = ids.shape
    d, n = g.d, g.n
    E = p["embedding.embedding"]
    x0 = E[ids] * math.sqrt(d)
    X = jnp.repeat(x0[:, :, None, :], n, axis=2)  # (B,T,n,d)
    Hn = hadamard_matrix(g.Nh)
    eidx, eok = engram_indices(np.asarray(ids), g)
    causal = np.tril(np.ones((T, T), dtype=bool))
    pre = "stack.layers.block."
    for l in range(g.L):
        home = l % n
        xh = rmsunit(X.reshape(B, T, n * d))
        o_pre = np.full(n, -4.0, np.float32); o_pre[home] = 4.0
        o_post = np.full(n, -4.0, np.float32); o_post[home] = 0.0
        pr = jax.nn.sigmoid(p["stack.mhc_a_pre"][l] * (xh @ p["stack.mhc_phi_pre"][l]) + p["stack.mhc_b_pre"][l] + o_pre)
        u = jnp.einsum("btn,btnd->btd", pr, X)
        b = u
        if l in g.sites:
            S = g.sites.index(l)
            tabs = p["engrams_%d.embedding" % S]  # (Te, slots, sub)
            e = tabs[jnp.arange(g.Te)[None, None, :], eidx] * eok[..., None]  # (B,T,Te,sub)
            e = e.reshape(B, T, g.Te * g.sub)
            kk = e @ p["engrams_%d.key_proj.kernel" % S]
            vv = e @ p["engrams_%d.value_proj.kernel" % S]
            taps = p["engrams_%d.taps" % S]
            D = max(g.orders)
            vc = jnp.zeros_like(vv)
            for j in range(4):
                sh = j * D
                if sh >= T:
                    break
                shifted = jnp.pad(vv, ((0, 0), (sh, 0), (0, 0)))[:, :T, :]
                vc = vc + taps[j] * shifted
            gate = jax.nn.sigmoid(jnp.sum(rmsunit(u) * rmsunit(kk), -1, keepdims=True) / math.sqrt(d))
            b = u + gate * vc
        # Block
        h = zcrms(b, p[pre + "ZCRMSNorm_0.scale"][l])
        q = h @ lora_weight(p, lora, pre + "self_attn.q_proj.kernel", l)
        k = h @ lora_weight(p, lora, pre + "self_attn.k_proj.kernel", l)
        v = h @ lora_weight(p, lora, pre + "self_attn.v_proj.kernel", l)
        gp = h @ lora_weight(p, lora, pre + "self_attn.gate_proj.kernel", l)
        q = zcrms(q.reshape(B, T, g.H, g.hd), p[pre + "self_attn.q_norm.scale"][l])
        k = zcrms(k.reshape(B, T, g.KVH, g.hd), p[pre + "self_attn.k_norm.scale"][l])
        v = v.reshape(B, T, g.KVH, g.hd)
        q = rope(q, g.theta)
        k = rope(k, g.theta)
        rep = g.H // g.KVH
        k = jnp.repeat(k, rep, axis=2)
        v = jnp.repeat(v, rep, axis=2)
        s = jnp.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(g.hd)
        s = jnp.where(causal[None, None], s, -1e30)
        a = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bhqk,bkhe->bqhe", a, v).reshape(B, T, g.A)
        o = o * jax.nn.sigmoid(gp)
        att = o @ lora_weight(p, lora, pre + "self_attn.out_proj.kernel", l)
        bb = b + jax.nn.sigmoid(p[pre + "attn_gate"][l]) * zcrms(att, p[pre + "post_attn_norm.scale"][l])
        hh = zcrms(bb, p[pre + "pre_hada_norm.scale"][l])
        z = jnp.pad(hh, ((0, 0), (0, 0), (0, g.Nh - d)))
        z = (p[pre + "hadamard_mlp.d1"][l] * z) @ Hn
        z = jax.nn.silu(p[pre + "hadamard_mlp.d2"][l] * z) @ Hn
        bb = bb + (p[pre + "hadamard_mlp.d3"][l] * z)[..., :d]
        y = bb - u
        qq = 2.0 * jax.nn.sigmoid(p["stack.mhc_a_post"][l] * (xh @ p["stack.mhc_phi_post"][l]) + p["stack.mhc_b_post"][l] + o_post)
        R = p["stack.mhc_a_res"][l] * (xh @ p["stack.mhc_phi_res"][l]).reshape(B, T, n, n) + p["stack.mhc_b_res"][l]
        M = R
        for _ in range(20):
            M = M - jax.scipy.special.logsumexp(M, axis=-1, keepdims=True)
            M = M - jax.scipy.special.logsumexp(M, axis=-2, keepdims=True)
        P = jnp.exp(M)
        X = jnp.einsum("btij,btjd->btid", P, X) + qq[..., None] * y[:, :, None, :]
    return zcrms(jnp.mean(X, axis=2), p["stack.final_norm.scale"])


def logits(p, ids, g, lora=None):
    return forward_hidden(p, ids, g, lora) @ p["embedding.embedding"].T


def loss(p, ids, targets, g, lora=None):
    """Mean cross-entropy over positions whose target >= 0."""
    lg = logits(p, ids, g, lora)
    lse = jax.scipy.special.logsumexp(lg, axis=-1)
    tg = jnp.where(targets >= 0, targets, 0)
    picked = jnp.take_along_axis(lg, tg[..., None], axis=-1)[..., 0]
    m = (targets >= 0).astype(jnp.float32)
    return jnp.sum((lse - picked) * m) / jnp.sum(m)

"""jax.grad of the reference's own Needle 3 head modules (cactus-needle 3.2.8,
an oracle only: ConfidenceHead / EmbeddingHead from needle.model.architecture,
float32, quant off) for test_heads3_grad_jax.py.

usage: n3_heads_oracle.py IN.npz OUT.npz [IN.npz OUT.npz ...] (one process: jax starts once)
IN: cells (1,T,R,d), probes (R,k,d), gain (R,k), query (q,d), row_bias (q,R,k),
kernel (q*d,out), bias (out,), wy (out,), embedding (0/1).
OUT: loss and the gradient of sum(wy * head output) for each parameter."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from needle.model import architecture as A


def one(in_path, out_path):
    inp = dict(np.load(in_path))
    cells = jnp.asarray(inp["cells"])
    T, R, d = cells.shape[1], cells.shape[2], cells.shape[3]
    k, q, out = inp["probes"].shape[1], inp["query"].shape[0], inp["kernel"].shape[1]
    emb = bool(inp["embedding"])
    cfg = A.TransformerConfig(d_model=d, num_layers=R - 1, dtype="float32", embedding_dim=out,
                              embedding_probes=k, embedding_queries=q, confidence_probes=k,
                              confidence_queries=q)
    head = A.EmbeddingHead(cfg) if emb else A.ConfidenceHead(cfg)
    keep = jnp.ones((1, T), jnp.float32)
    wy = jnp.asarray(inp["wy"])
    names = ["probes", "gain", "query", "row_bias", "kernel"] + ([] if emb else ["bias"])

    def loss(p):
        params = {"probes": p["probes"], "gain": p["gain"], "query": p["query"], "row_bias": p["row_bias"],
                  "proj": {"kernel": p["kernel"]}}
        if emb:
            params["log_temp"] = jnp.float32(np.log(10.0))
            params["bias"] = jnp.float32(-10.0)
            y = head.apply({"params": params}, cells, keep)[0]
        else:
            params["proj"]["bias"] = p["bias"]
            y = head.apply({"params": params}, cells, keep)
        return jnp.sum(wy * y[0])

    p = {n: jnp.asarray(inp[n]) for n in names}
    val, g = jax.value_and_grad(loss)(p)
    np.savez(out_path, loss=np.float32(val), **{n: np.asarray(g[n]) for n in names})


def main():
    args = sys.argv[1:]
    for i in range(0, len(args) - 1, 2):
        one(args[i], args[i + 1])


if __name__ == "__main__":
    main()

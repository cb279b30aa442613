#!/usr/bin/env python3
"""Write small Needle 3 .cact seeds for tests/fuzz/seeds/fuzz_cact (SPEC-needle3 5.7):
a valid micro model (2 layers, one local and one global, q/k/v taps, one engram
site, the router head), the same with binary (1-bit) CQ matrices, and a bare header.
Usage: python3 tools/make_v3_fuzz_seeds.py OUT_DIR"""
import os
import struct
import sys

import numpy as np

V, D, H, KV, L, QK, VD, SEQ, NH, LANES = 16, 32, 2, 1, 2, 8, 16, 32, 32, 2
SW, GMASK, TAPS, SLOTS, ORDERS, TE, SUB, SITES = 4, 0b10, 2, 8, [2], 1, 32, [1]
A, B, K, Q = 4, 8, 1, 1


def cq(rows, cols, bits, rng):
    pad = (cols + 127) // 128 * 128
    sb = 2 if bits == 5 else bits
    idx = rng.integers(0, 256, rows * pad * sb // 8, dtype=np.uint8).tobytes()
    norms = np.full(rows * pad // 128, 0.5, np.float16).tobytes()
    return (3, (rows, cols), idx + norms, 128, bits)


def fp16(*shape, value=None, rng=None):
    a = np.full(shape, value, np.float32) if value is not None else rng.normal(0, 0.3, shape).astype(np.float32)
    return (1, shape, a.astype(np.float16).tobytes(), 0, 0)


def tokenizer_blob():
    pieces = [("<pad>", 0), ("</s>", 0), ("<s>", 0), ("<unk>", 2)] + [(c, 1) for c in "abcdefghijkl"]
    out = struct.pack("<5I", len(pieces), 0, 1, 2, 3) + bytes([1, 0]) + struct.pack("<H", 0)
    for i, (text, kind) in enumerate(pieces):
        t = text.encode()
        out += struct.pack("<fBH", -float(i), kind if kind != 2 else 2, len(t)) + t
    return out


def model(bits, rng):
    t = [cq(V, D, bits, rng)]
    for _ in range(L):
        t += [fp16(D, rng=rng), cq(H * QK, D, bits, rng), cq(KV * QK, D, bits, rng), cq(KV * VD, D, bits, rng),
              fp16(TAPS, H * QK, rng=rng), fp16(TAPS, KV * QK, rng=rng), fp16(TAPS, KV * VD, rng=rng),
              fp16(QK, rng=rng), fp16(QK, rng=rng), cq(H * VD, D, bits, rng), cq(D, H * VD, bits, rng),
              fp16(D, rng=rng), fp16(1, rng=rng), fp16(D, rng=rng)]
        t += [fp16(NH, rng=rng) for _ in range(5)]
        t += [fp16(A, A, rng=rng), fp16(B, B, rng=rng)] * 3
        t += [fp16(D, 8, rng=rng), fp16(8, NH, rng=rng)]
    t += [fp16(L, rng=rng), fp16(L, rng=rng), fp16(L, rng=rng), fp16(L, LANES, rng=rng), fp16(L, LANES, rng=rng),
          fp16(L, LANES, LANES, rng=rng), cq(L * LANES, LANES * D, bits, rng), cq(L * LANES, LANES * D, bits, rng),
          cq(L * LANES * LANES, LANES * D, bits, rng)]
    for seed in (11, 13):
        t.append((2, (NH,), np.random.RandomState(seed).permutation(NH).astype(np.float32).tobytes(), 0, 0))
    for _ in SITES:
        t += [cq(TE * SLOTS, SUB, bits, rng), cq(D, TE * SUB, bits, rng), cq(D, TE * SUB, bits, rng), fp16(4, D, rng=rng)]
    t.append(fp16(D, rng=rng))
    t.append((1, (1,), np.array([3.0], np.float16).tobytes(), 0, 0))  # heads.manifest: the router
    t += [cq((L + 1) * K, D, bits, rng), fp16(L + 1, K, value=1.0), cq(Q, D, bits, rng), fp16(Q, L + 1, K, rng=rng),
          cq(3, Q * D, bits, rng), fp16(3, rng=rng), (1, (3,), np.array([0.9, 0.0, 0.6], np.float16).tobytes(), 0, 0)]
    t.append((4, (), tokenizer_blob(), 0, 0))
    return t


def header(n_tensors):
    v = [0x05E12A84, n_tensors, 28, SEQ, 8, V, 0, D, H, KV, L, QK, VD, SEQ, NH, LANES, SW, GMASK, 0, TAPS, SLOTS, SUB,
         TE, 4, max(ORDERS), 0, len(ORDERS)] + ORDERS + [0] * (4 - len(ORDERS)) + [len(SITES)] + SITES + [0] * (16 - len(SITES))
    return struct.pack("<48I", *v) + struct.pack("<f", 10000.0)


def write(path, tensors):
    cb = np.linspace(-0.1, 0.1, 28).astype(np.float32).tobytes()
    pos = 196 + len(cb) + 44 * len(tensors)
    pos = (pos + 63) // 64 * 64
    recs, blobs = b"", b""
    start = pos
    for dtype, shape, data, group, bits in tensors:
        dims = list(shape) + [0] * (4 - len(shape))
        recs += struct.pack("<BBH4IQQII", dtype, len(shape), 0, *dims, pos, len(data), group, bits)
        blobs += data + bytes((-(len(data)) % 64))
        pos += len(data) + (-(len(data)) % 64)
    head = header(len(tensors)) + cb + recs
    head += bytes(start - len(head))
    with open(path, "wb") as f:
        f.write(head + blobs)


if __name__ == "__main__":
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    write(os.path.join(out, "v3_micro_w2.cact"), model(2, rng))
    write(os.path.join(out, "v3_micro_binary.cact"), model(1, rng))
    with open(os.path.join(out, "v3_header_only.cact"), "wb") as f:
        f.write(header(90))

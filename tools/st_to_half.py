#!/usr/bin/env python3
"""st_to_half.py - rewrite a float32 .safetensors checkpoint with FP16 (or BF16) tensors.

    python3 tools/st_to_half.py IN.safetensors OUT.safetensors [--bf16]

Halves the size of a checkpoint for shipping (models/needle-default.safetensors). The header's
__metadata__ (the config) is kept; tensors already 16-bit are copied. needle reads F16/BF16
checkpoints everywhere it reads F32 ones (widened on load). Refuses values FP16 cannot hold.
"""
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    """(header without __metadata__, the data bytes its data_offsets index, __metadata__ or None)."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:], header.pop("__metadata__", None)


def write_safetensors(dst, header, chunks):
    """Write a .safetensors file atomically: header (tensor entries whose data_offsets index the
    concatenated chunks, plus any __metadata__) padded to 8 bytes, then the chunks."""
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
    os.replace(tmp, dst)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    bf16 = "--bf16" in sys.argv
    if len(args) != 2:
        sys.exit(__doc__)
    src, dst = args
    header, body, meta = read_safetensors(src)
    out_header, chunks, off = {}, [], 0
    for name in sorted(header, key=lambda k: header[k]["data_offsets"][0]):
        t = header[name]
        a, b = t["data_offsets"]
        data = body[a:b]
        dtype = t["dtype"]
        if dtype == "F32":
            x = np.frombuffer(data, dtype="<f4")
            if bf16:
                u = x.view("<u4")
                r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")  # round to nearest even
                data, dtype = r.tobytes(), "BF16"
            else:
                if np.any(np.abs(x) > 65504):
                    sys.exit("st_to_half: %s holds values beyond FP16's range: use --bf16" % name)
                data, dtype = x.astype("<f2").tobytes(), "F16"
        out_header[name] = {"dtype": dtype, "shape": t["shape"], "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    if meta is not None:
        out_header["__metadata__"] = meta
    write_safetensors(dst, out_header, chunks)
    print("%s: %d tensors, %.2f MB" % (dst, len(chunks), os.path.getsize(dst) / 1e6))


if __name__ == "__main__":
    main()

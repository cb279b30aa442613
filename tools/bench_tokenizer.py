#!/usr/bin/env python3
"""Encode speed of needle's C tokenizer against the sentencepiece library.

    python3 tools/bench_tokenizer.py [--build build] [--mb 4] [--repeats 5]

Builds a text file of --mb megabytes from the golden tokenizer cases (plus
their texts joined into long lines), checks that both tokenizers give the
same ids on every line, then times both (best of --repeats passes, one
encode call per line) and prints tokens/s for each.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "tests", "golden", "tok8k.model")
CASES = os.path.join(ROOT, "tests", "golden", "tokenizer_cases.json")


def corpus(megabytes):
    texts = [c["text"] for c in json.load(open(CASES, encoding="utf-8"))["cases"]]
    # one line per case (newlines inside a case become spaces), plus long lines
    base = [t.replace("\n", " ") for t in texts if t.strip()]
    long_line = " ".join(base)
    lines, size = [], 0
    while size < megabytes * 1e6:
        for t in base + [long_line[:20000]]:
            lines.append(t)
            size += len(t.encode("utf-8")) + 1
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("NEEDLE_BUILD", "build"))
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    exe = os.path.join(a.build, "tools", "bench_tokenizer")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: run `make BUILD={a.build} {exe}` first")
    lines = corpus(a.mb)
    sp = spm.SentencePieceProcessor(model_file=MODEL)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines))
        path = f.name
    try:
        best, tokens = 1e30, 0
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            out = sp.encode(lines)  # batch call: the library's fastest path
            best = min(best, time.perf_counter() - t0)
        tokens = sum(len(x) for x in out)
        best1 = 1e30
        for _ in range(max(1, a.repeats // 2)):
            t0 = time.perf_counter()
            for s in lines:
                sp.encode(s)
            best1 = min(best1, time.perf_counter() - t0)
        c = json.loads(subprocess.check_output([exe, MODEL, path, str(a.repeats)], text=True))
        if c["tokens"] != tokens:
            print(f"WARNING: token counts differ: needle {c['tokens']} sentencepiece {tokens}")
        nbytes = sum(len(s.encode("utf-8")) for s in lines)
        print(f"corpus: {len(lines)} lines, {nbytes/1e6:.1f} MB, {tokens} tokens")
        print(f"sentencepiece batch   : {tokens/best:12,.0f} tokens/s ({nbytes/best/1e6:.1f} MB/s)")
        print(f"sentencepiece per line: {tokens/best1:12,.0f} tokens/s")
        print(f"needle (C, per line)  : {c['tokens_per_s']:12,.0f} tokens/s ({c['mb_per_s']:.1f} MB/s)")
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()

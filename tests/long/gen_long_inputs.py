#!/usr/bin/env python3
"""gen_long_inputs.py - the oversized inputs of issue 20 (D2), written to DIR.

    python3 tests/long/gen_long_inputs.py DIR [--small]

Files (full size / --small, the CI-fast version):
  anyof_1000.json      one tool whose only parameter is a 1,000-branch anyOf (~37 KB) / 100 branches
  props_10000.json     one tool with 10,000 properties / 1,000
  long_name.json       one tool with a 100 KB name / 20 KB
  long_desc.json       one tool with a 10 MB description / 200 KB
  tools_4000.json      4,000 distinct small tools / 200
  query_1mb.txt        a 1 MB query / 100 KB
  system_100kb.txt     a 100 KB system text / 20 KB
Deterministic: the same arguments write the same bytes.
"""
import json
import os
import sys


def tool(name, desc, props, required=None):
    params = {"type": "object", "properties": props}
    if required:
        params["required"] = required
    return {"name": name, "description": desc, "parameters": params}


def write(path, text):
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def words(n_bytes, seed_word):
    """Plain English-ish text of about n_bytes (varied so the tokenizer cannot collapse it)."""
    vocab = ["turn", "the", "kitchen", "lights", "set", "timer", "for", "minutes", "play", "music",
             "weather", "tomorrow", "in", "paris", "send", "message", "to", "alice", "please", seed_word]
    out, i, size = [], 0, 0
    while size < n_bytes:
        w = vocab[(i * 7 + i // 20) % len(vocab)]
        out.append(w)
        size += len(w) + 1
        i += 1
    return " ".join(out)[:n_bytes]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: gen_long_inputs.py DIR [--small]")
    out = sys.argv[1]
    small = "--small" in sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    k = (lambda full, little: little if small else full)

    branches = [{"type": "string", "enum": ["option_%d" % i]} for i in range(k(1000, 100))]
    write(os.path.join(out, "anyof_1000.json"),
          json.dumps([tool("pick", "Pick one option", {"choice": {"anyOf": branches}}, ["choice"])]))

    props = {"field_%d" % i: {"type": "integer"} for i in range(k(10000, 1000))}
    write(os.path.join(out, "props_10000.json"), json.dumps([tool("fill_form", "Fill a form", props)]))

    write(os.path.join(out, "long_name.json"),
          json.dumps([tool("n" * k(100_000, 20_000), "A tool with a long name", {"x": {"type": "string"}})]))

    write(os.path.join(out, "long_desc.json"),
          json.dumps([tool("describe", words(k(10_000_000, 200_000), "describe"), {"x": {"type": "string"}})]))

    many = [tool("tool_%d" % i, "Do task number %d: %s" % (i, words(40 + i % 30, "task%d" % i)),
                 {"arg_%d" % (i % 7): {"type": "string"}, "count": {"type": "integer"}})
            for i in range(k(4000, 200))]
    write(os.path.join(out, "tools_4000.json"), json.dumps(many))

    write(os.path.join(out, "query_1mb.txt"), words(k(1_000_000, 100_000), "query"))
    write(os.path.join(out, "system_100kb.txt"), words(k(100_000, 20_000), "system"))


if __name__ == "__main__":
    main()

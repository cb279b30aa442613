#!/usr/bin/env python3
"""make_round_data.py - the training data of the bundled model's fine-tuning rounds r13 and r14
(docs/default-model.md): `needle generate-data` rows for the demo tools (models/tools.json)
and for random 3-5 tool subsets of tools/gen_data.py's 50-tool catalogue, mixed and shuffled.

    python3 tools/make_round_data.py --needle build/needle --out DIR [--demo-rows 12000]
                                     [--subset-rows 9000] [--seed 13] [--weights JSON] [--legacy-rows N]

Writes DIR/train.jsonl and DIR/val.jsonl (the generators' train and val splits; every set's
test split is kept apart in DIR/test_demo.jsonl and DIR/test_subsets.jsonl).  Deterministic for
a seed.  Never reads evals/ or examples/*/acceptance.jsonl.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def gen(needle, tools_path, rows, seed, out, weights=None):
    # `needle generate-data` runs tools/generate_data.py; it is called directly here for --weights.
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, os.path.join(here, "generate_data.py"), "--tools", tools_path, "--examples", str(rows),
           "--seed", str(seed), "--out", out] + (["--weights", weights] if weights else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return {s: [l for l in open(os.path.join(out, s + ".jsonl")) if l.strip()] for s in ("train", "val", "test")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--needle", default="build/needle")
    ap.add_argument("--out", required=True)
    ap.add_argument("--demo-rows", type=int, default=12000)
    ap.add_argument("--subset-rows", type=int, default=9000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--weights", default=None, help="category weights (JSON) passed to the generator")
    ap.add_argument("--legacy-rows", type=int, default=0,
                    help="also this many tools/gen_data.py rows (5 tools, half the demo set): the older "
                         "templates, which hold the README example")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    splits = {"train": [], "val": [], "test_demo": [], "test_subsets": []}
    with tempfile.TemporaryDirectory() as tmp:
        # the demo tools, in chunks of 2000 rows with their own seeds (more value and phrasing draws)
        chunks = max(1, a.demo_rows // 2000)
        for k in range(chunks):
            got = gen(a.needle, os.path.join(here, "..", "models", "tools.json"), a.demo_rows // chunks,
                      a.seed * 1000 + k, os.path.join(tmp, "demo%d" % k), a.weights)
            splits["train"] += got["train"]
            splits["val"] += got["val"]
            splits["test_demo"] += got["test"]
        # random subsets of the catalogue: other tool sets, other shapes
        cat = os.path.join(tmp, "all_tools.json")
        subprocess.run([sys.executable, os.path.join(here, "gen_data.py"), "--write-all-tools", cat], check=True,
                       stdout=subprocess.DEVNULL)
        tools = json.load(open(cat))
        n_sets = max(1, a.subset_rows // 250)
        for k in range(n_sets):
            pick = rng.sample(tools, rng.randint(3, 5))
            path = os.path.join(tmp, "set%d.json" % k)
            json.dump(pick, open(path, "w"))
            got = gen(a.needle, path, a.subset_rows // n_sets, a.seed * 1000 + 500 + k, os.path.join(tmp, "s%d" % k),
                      a.weights)
            splits["train"] += got["train"]
            splits["val"] += got["val"]
            splits["test_subsets"] += got["test"]
        if a.legacy_rows:
            subprocess.run([sys.executable, os.path.join(here, "gen_data.py"), "--out", os.path.join(tmp, "legacy"),
                            "--seed", str(a.seed * 1000 + 900), "--train", str(a.legacy_rows), "--val", "10",
                            "--test", "10", "--compact", "--max-tools", "5", "--demo-rate", "0.5",
                            "--max-chars", "1800", "--offtopic-rate", "0.2"], check=True, stdout=subprocess.DEVNULL)
            splits["train"] += [l for l in open(os.path.join(tmp, "legacy", "train.jsonl")) if l.strip()]
    for name, rows in splits.items():
        rng.shuffle(rows)
        with open(os.path.join(a.out, name + ".jsonl"), "w") as f:
            f.writelines(r if r.endswith("\n") else r + "\n" for r in rows)
        print("%s: %d rows" % (name, len(rows)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make_round_data.py - the training data of the bundled model's fine-tuning rounds r13-r22
(docs/default-model.md): `needle generate-data` rows for the demo tools (models/tools.json)
and for random subsets (3-5 tools by default) of tools/gen_data.py's 50-tool catalogue, mixed and
shuffled.

    python3 tools/make_round_data.py --needle build/needle --out DIR [--demo-rows 12000]
                                     [--subset-rows 9000] [--subset-tools 3-5] [--seed 13] [--weights JSON]
                                     [--follow-up-rate R] [--legacy-rows N] [--max-tokens N --spm T]

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


def gen(needle, tools_path, rows, seed, out, weights=None, follow_up=None):
    # `needle generate-data` runs tools/generate_data.py; it is called directly here for --weights.
    here = os.path.dirname(os.path.abspath(__file__))
    cmd = [sys.executable, os.path.join(here, "generate_data.py"), "--tools", tools_path, "--examples", str(rows),
           "--seed", str(seed), "--out", out] + (["--weights", weights] if weights else []) \
        + (["--follow-up-rate", str(follow_up)] if follow_up is not None else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return {s: [l for l in open(os.path.join(out, s + ".jsonl")) if l.strip()] for s in ("train", "val", "test")}


def token_counts(rows, spm):
    """Tokens of each row as the trainer renders it (SPEC.md section 7, BOS/EOS included)."""
    import sentencepiece  # a development dependency of the data tools only
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    from gen_data import render
    sp = sentencepiece.SentencePieceProcessor(model_file=spm)
    out = []
    for line in rows:
        r = json.loads(line)
        n = len(sp.encode("".join(render(r)))) + 3
        # later turns (tool results, answers, follow-ups) are rendered after the first: about their JSON
        n += sum(len(sp.encode(json.dumps(t, ensure_ascii=False))) for t in r.get("turns", []))
        out.append(n)
    return out


def group(line):
    r = json.loads(line)
    demo = {"set_lights", "set_thermostat", "set_alarm", "send_message", "get_weather"}
    return ({t["name"] for t in r["tools"]} == demo, bool(r.get("system"))), bool(r.get("answers"))


def fit_and_balance(rows, counts, max_tokens, rng):
    """Drop rows longer than max_tokens (the trainer would skip them), then drop no-call rows at random
    until, in every group (demo tools or not) x (system text or not), calls are as common as they were
    before the cut.  The cut falls on long rows, and a call's answer is longer than `[]`: without the
    second step the rows with a system text (a longer prompt) kept 50% calls against 57% without one,
    and the model learned to refuse under a `date:` fact (round r13/r14)."""
    before, after = {}, {}
    for r, n in zip(rows, counts):
        g, call = group(r)
        before.setdefault(g, [0, 0])[call] += 1
        if n <= max_tokens:
            after.setdefault(g, [[], []])[call].append(r)
    out = []
    for g, (nocall, calls) in after.items():
        share = before[g][1] / max(1, sum(before[g]))
        keep_nocall = len(nocall)
        if share > 0 and calls and len(calls) / (len(calls) + len(nocall)) < share:
            keep_nocall = int(len(calls) * (1 - share) / share)
        rng.shuffle(nocall)
        out += calls + nocall[:keep_nocall]
        print("group demo=%s system=%s: calls %d/%d before the cut, %d/%d after it, %d no-call rows dropped to "
              "rebalance" % (g[0], g[1], before[g][1], sum(before[g]), len(calls), len(calls) + len(nocall),
                             len(nocall) - keep_nocall))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--needle", default="build/needle")
    ap.add_argument("--out", required=True)
    ap.add_argument("--demo-rows", type=int, default=12000)
    ap.add_argument("--subset-rows", type=int, default=9000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--subset-tools", default="3-5",
                    help="how many catalogue tools each subset has, MIN-MAX (default 3-5; smaller sets leave room "
                         "for multi-turn rows with a follow-up request inside 512 tokens)")
    ap.add_argument("--weights", default=None, help="category weights (JSON) passed to the generator")
    ap.add_argument("--follow-up-rate", type=float, default=None,
                    help="passed to the generator: share of multi-turn rows with a new request after the result")
    ap.add_argument("--legacy-rows", type=int, default=0,
                    help="also this many tools/gen_data.py rows (5 tools, half the demo set): the older "
                         "templates, which hold the README example")
    ap.add_argument("--max-tokens", type=int, default=0,
                    help="drop training rows longer than this (the trainer's --max-len) and rebalance calls "
                         "against no-calls per group (needs --spm)")
    ap.add_argument("--spm", default=None, help="the tokenizer for --max-tokens (tests/golden/tok8k.model)")
    a = ap.parse_args()
    try:
        a.subset_min, a.subset_max = (int(v) for v in a.subset_tools.split("-"))
        assert 1 <= a.subset_min <= a.subset_max
    except (ValueError, AssertionError):
        ap.error("--subset-tools: expected MIN-MAX with 1 <= MIN <= MAX, e.g. 3-5")
    if a.max_tokens and not a.spm:
        ap.error("--max-tokens needs --spm")
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    splits = {"train": [], "val": [], "test_demo": [], "test_subsets": []}
    with tempfile.TemporaryDirectory() as tmp:
        # the demo tools, in chunks of 2000 rows with their own seeds (more value and phrasing draws)
        chunks = max(1, a.demo_rows // 2000) if a.demo_rows else 0
        for k in range(chunks):
            got = gen(a.needle, os.path.join(here, "..", "models", "tools.json"), a.demo_rows // chunks,
                      a.seed * 1000 + k, os.path.join(tmp, "demo%d" % k), a.weights, a.follow_up_rate)
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
            pick = rng.sample(tools, rng.randint(a.subset_min, a.subset_max))
            path = os.path.join(tmp, "set%d.json" % k)
            json.dump(pick, open(path, "w"))
            got = gen(a.needle, path, a.subset_rows // n_sets, a.seed * 1000 + 500 + k, os.path.join(tmp, "s%d" % k),
                      a.weights, a.follow_up_rate)
            splits["train"] += got["train"]
            splits["val"] += got["val"]
            splits["test_subsets"] += got["test"]
        if a.legacy_rows:
            subprocess.run([sys.executable, os.path.join(here, "gen_data.py"), "--out", os.path.join(tmp, "legacy"),
                            "--seed", str(a.seed * 1000 + 900), "--train", str(a.legacy_rows), "--val", "10",
                            "--test", "10", "--compact", "--max-tools", "5", "--demo-rate", "0.5",
                            "--max-chars", "1800", "--offtopic-rate", "0.2"], check=True, stdout=subprocess.DEVNULL)
            splits["train"] += [l for l in open(os.path.join(tmp, "legacy", "train.jsonl")) if l.strip()]
    if a.max_tokens:
        splits["train"] = fit_and_balance(splits["train"], token_counts(splits["train"], a.spm), a.max_tokens, rng)
    for name, rows in splits.items():
        rng.shuffle(rows)
        with open(os.path.join(a.out, name + ".jsonl"), "w") as f:
            f.writelines(r if r.endswith("\n") else r + "\n" for r in rows)
        print("%s: %d rows" % (name, len(rows)))


if __name__ == "__main__":
    main()

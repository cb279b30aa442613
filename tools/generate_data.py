#!/usr/bin/env python3
"""generate_data.py - fine-tuning data for any tool set (`needle generate-data`).

    python3 tools/generate_data.py --tools T.json --out DIR [--examples 1000] [--seed 0]
        [--system "You are ..."] [--endpoint URL --model NAME [--api-key-env VAR]]

Reads nothing but the tools file (each tool's name, description, parameter
names, types, descriptions, enums, minimum/maximum, formats, patterns and
required lists) and writes DIR/train.jsonl, val.jsonl, test.jsonl (80/10/10)
and DIR/stats.json. Rows are in the fine-tuning format {query, tools, answers,
system?} plus "category" (positive, parallel, missing, irrelevant, negation,
invalid, multi_turn) and, for multi-turn rows, "turns". Deterministic for a
--seed and the same faker/num2words/lemminflect versions (stats.json records them), without
--endpoint. Needs the Python packages faker, num2words and lemminflect (development dependencies of
this generator only).

--endpoint: an OpenAI-compatible chat endpoint (base URL or .../chat/completions)
rewrites --paraphrase-rate of the requests; a rewrite is kept only if every
value of the answers still appears verbatim. The key is read from the
environment variable named by --api-key-env (default NEEDLE_DATAGEN_API_KEY).
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    sys.stderr.write("generate-data: %s\n" % msg)
    sys.exit(1)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="generate-data", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", required=True, help="tools file (JSON array of {name, description, parameters})")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--examples", type=int, default=1000, help="rows in all, split 80/10/10 (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--system", default=None, help="system prompt put in every row (a date fact may follow it)")
    ap.add_argument("--endpoint", default=None, help="OpenAI-compatible chat endpoint for paraphrases")
    ap.add_argument("--model", default=None, help="model name for --endpoint")
    ap.add_argument("--api-key-env", default="NEEDLE_DATAGEN_API_KEY", help="environment variable holding the key")
    ap.add_argument("--paraphrase-rate", type=float, default=0.3)
    ap.add_argument("--max-tokens", type=int, default=512,
                    help="longest row, in tokens as `needle finetune` renders it (default 512: the bundled "
                         "model's context; rows that would be skipped are drawn again); 0: no limit")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "needle-default.cact"),
                    help="tokenizer (.cact or SentencePiece .model) for --max-tokens (default: the bundled model's)")
    ap.add_argument("--needle", default=None, help="needle executable for --max-tokens (default: $NEEDLE_EXE, "
                    "else build/needle)")
    ap.add_argument("--weights", default=None,
                    help="category weights as JSON, e.g. '{\"positive\":0.5,\"irrelevant\":0.2}' (others keep defaults)")
    ap.add_argument("--follow-up-rate", type=float, default=0.35,
                    help="share of multi-turn rows in which a new request follows the tool result (default 0.35)")
    a = ap.parse_args(argv)
    if not 0 <= a.follow_up_rate <= 1:
        ap.error("--follow-up-rate must be between 0 and 1")
    if a.examples < 3:
        ap.error("--examples must be at least 3")
    if a.endpoint and not a.model:
        ap.error("--endpoint needs --model")
    if a.max_tokens < 0:
        ap.error("--max-tokens must be 0 (no limit) or more")
    return a


def main(argv=None):
    a = parse_args(argv)
    try:
        import faker  # noqa: F401
        import num2words  # noqa: F401
        import lemminflect  # noqa: F401
    except ImportError as e:
        fail("needs the Python packages faker, num2words and lemminflect (%s): pip install faker num2words lemminflect"
             % e)
    from datagen.build import Generator, generate, write_jsonl, DEFAULT_WEIGHTS, CATEGORIES
    from datagen.schema import load_tools, ToolError

    try:
        declared, tools = load_tools(a.tools)
    except ToolError as e:
        fail(str(e))
    weights = dict(DEFAULT_WEIGHTS)
    if a.weights:
        try:
            w = json.loads(a.weights)
            assert isinstance(w, dict) and all(k in CATEGORIES and float(v) >= 0 for k, v in w.items())
        except (ValueError, AssertionError, TypeError):
            fail("--weights: expected a JSON object of category: weight (categories: %s)" % ", ".join(CATEGORIES))
        weights.update({k: float(v) for k, v in w.items()})
    gen = Generator(declared, tools, a.seed, system=a.system, weights=weights, follow_up_rate=a.follow_up_rate)
    log = lambda m: sys.stderr.write("generate-data: %s\n" % m)
    length, fits = None, None
    if a.max_tokens:
        from datagen.row_length import RowLength, find_needle
        needle = find_needle(a.needle)
        if needle is None or not os.path.exists(a.tokenizer):
            fail("--max-tokens %d: %s not found (build needle, pass --needle and --tokenizer, or --max-tokens 0)"
                 % (a.max_tokens, "a needle executable" if needle is None else a.tokenizer))
        length = RowLength(needle, a.tokenizer)
        fits = lambda row: length(row) <= a.max_tokens
    try:
        splits = generate(gen, a.examples, a.seed, log=log, fits=fits)
    except RuntimeError as e:
        fail(str(e))
    refused = length.refused if length else 0
    if gen.unfit["drafts"] - refused:
        log("%d drafted rows were longer than %d tokens and were drawn again%s" % (
            gen.unfit["drafts"] - refused, a.max_tokens, "; categories with no row that fits, given to positive rows: " +
            ", ".join("%s %d" % kv for kv in sorted(gen.unfit["rows"].items())) if gen.unfit["rows"] else ""))
    if refused:
        # a value kind this generator cannot fit to a schema: the rows are drawn again, but say so
        log("%d drafted rows had answers their tools' schemas refuse and were drawn again (first: %s)" % (
            refused, length.refused_examples[0]))
    para = None
    if a.endpoint:
        from datagen.paraphrase import Paraphraser
        para = Paraphraser(a.endpoint, a.model, os.environ.get(a.api_key_env), log=log)
        rng = random.Random("%s/paraphrase" % a.seed)
        for split in ("train", "val", "test"):
            for row in splits[split]:
                if rng.random() < a.paraphrase_rate:
                    before = dict(row)
                    para.rewrite(row)
                    if fits is not None and not fits(row):  # a longer paraphrase must still fit
                        if row.get("paraphrased"):
                            para.kept -= 1  # counted as kept by rewrite(); the original goes back
                            para.too_long += 1
                        row.clear()
                        row.update(before)
    try:
        os.makedirs(a.out, exist_ok=True)
        for split, rows in splits.items():
            write_jsonl(os.path.join(a.out, split + ".jsonl"), rows)
        import importlib.metadata as md
        stats = {"tools": a.tools, "seed": a.seed, "examples": a.examples, "weights": gen.weights,
                 "max_tokens": a.max_tokens, "redrawn_too_long": gen.unfit["drafts"] - refused,
                 "redrawn_schema_refused": refused,
                 "categories_that_do_not_fit": gen.unfit["rows"],
                 "versions": {p: md.version(p) for p in ("faker", "num2words", "lemminflect")},
                 "foreign_tools": len(gen.foreign), "other_domain_templates": len(gen.other_templates),
                 "splits": {s: {"rows": len(r), "categories": {c: sum(1 for x in r if x["category"] == c)
                                                                for c in CATEGORIES}} for s, r in splits.items()}}
        if para:
            stats["paraphrase"] = {"endpoint": para.url, "model": para.model, "asked": para.asked,
                                   "kept": para.kept, "failed": para.failed,
                                   "too_long": para.too_long}
        tmp = os.path.join(a.out, "stats.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=1)
        os.replace(tmp, os.path.join(a.out, "stats.json"))
    except OSError as e:
        fail("%s: cannot write (%s)" % (a.out, e.strerror))
    if length is not None:
        length.close()
    n = {s: len(r) for s, r in splits.items()}
    print("generate-data: %d tools -> %s: train %d, val %d, test %d rows" %
          (len(tools), a.out, n["train"], n["val"], n["test"]))
    return 0


def under_fixed_hash_seed():
    """Re-run this program under PYTHONHASHSEED=0 unless it already is. Faker builds some of its
    value lists through sets (its it_IT cities, for one), whose order follows Python's per-process
    string hash: the same --seed gave other rows in another process."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))


if __name__ == "__main__":
    under_fixed_hash_seed()
    sys.exit(main())

#!/usr/bin/env python3
"""dev_report.py - score a model row by row through `needle run`, with confidence AUROC.

    python3 tools/dev_report.py --model M.cact [--tools T.json] [--strict] DATA.jsonl [--json OUT] [--failures F.jsonl]

Each row (query, answers, category?, system?, tools?) is answered by its own `needle run` (greedy, as a
user would run it); prints exact-call, tool-name, argument F1, refusal (rows expecting []), false
refusal, schema-valid (success), per-category pass rates, and the AUROC of the envelope's confidence
for telling exact answers from wrong ones (rows with a confidence only). --strict runs with --strict.
"""
import argparse
import collections
import json
import subprocess
import sys
import tempfile


def same_numbers(v):
    """v with every integral float written as an integer: JSON (and needle eval, and JSON Schema)
    compare numbers by value, so an answer of 74 for an expected 74.0 is the same call."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [same_numbers(x) for x in v]
    if isinstance(v, dict):
        return {k: same_numbers(x) for k, x in v.items()}
    return v


def canon(v):
    return json.dumps(same_numbers(v), sort_keys=True, ensure_ascii=False)


def triples(calls):
    out = collections.Counter()
    for c in calls:
        for k, v in (c.get("arguments") or {}).items():
            out[(c["name"], k, canon(v))] += 1
    return out


def auroc(scores, labels):
    pos = [s for s, l in zip(scores, labels) if l]
    neg = [s for s, l in zip(scores, labels) if not l]
    if not pos or not neg:
        return None
    wins = 0.0
    for p in pos:
        for n in neg:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(pos) * len(neg))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--needle", default="build/needle")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tools", default=None)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--failures", default=None, help="write each failed row (query, expected, got) as JSONL")
    ap.add_argument("data")
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.data, encoding="utf-8") if l.strip()]
    n = exact = name_ok = valid = refusal_ok = off = on = false_ref = 0
    tp = pred_n = gold_n = 0
    conf, correct = [], []
    cats = collections.OrderedDict()
    failures = open(a.failures, "w", encoding="utf-8") if a.failures else None
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tf:
        tools_path = tf.name
    for r in rows:
        tools = a.tools
        if "tools" in r:
            with open(tools_path, "w") as f:
                json.dump(r["tools"], f)
            tools = tools_path
        cmd = [a.needle, "run", "--model", a.model] + (["--tools", tools] if tools else [])
        if r.get("system"):
            cmd += ["--system", r["system"]]
        if a.strict:
            cmd.append("--strict")
        cmd += ["--", r["query"]] if r["query"].startswith("-") else [r["query"]]
        p = subprocess.run(cmd, capture_output=True, text=True)
        try:
            env = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            sys.exit("dev_report: no envelope for %r: %s" % (r["query"], p.stderr[-300:]))
        gold = r.get("answers") or []
        got = env.get("function_calls") or []
        ok = env.get("success") and sorted(map(canon, got)) == sorted(map(canon, gold))
        n += 1
        exact += bool(ok)
        valid += bool(env.get("success"))
        name_ok += sorted(c["name"] for c in got) == sorted(c["name"] for c in gold)
        if gold:
            on += 1
            false_ref += not got
        else:
            off += 1
            refusal_ok += not got
        tg, tpred = triples(gold), triples(got)
        tp += sum((tg & tpred).values())
        pred_n += sum(tpred.values())
        gold_n += sum(tg.values())
        if env.get("confidence") is not None:
            conf.append(env["confidence"])
            correct.append(bool(ok))
        if failures and not ok:
            failures.write(json.dumps({"category": r.get("category"), "query": r["query"], "expected": gold,
                                       "got": got, "confidence": env.get("confidence")},
                                      ensure_ascii=False) + "\n")
        c = cats.setdefault(r.get("category", "all"), [0, 0])
        c[0] += 1
        c[1] += bool(ok)
    prec = tp / pred_n if pred_n else 0.0
    rec = tp / gold_n if gold_n else 0.0
    res = {
        "rows": n, "exact_call": exact / n, "tool_name": name_ok / n,
        "argument_f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0,
        "refusal": refusal_ok / off if off else None, "no_call_rows": off,
        "false_refusal": false_ref / on if on else None, "schema_valid": valid / n,
        "confidence_auroc": auroc(conf, correct), "strict": a.strict,
        "categories": {k: {"rows": v[0], "passed": v[1]} for k, v in cats.items()},
    }
    print("exact-call %.1f%%  tool name %.1f%%  arg F1 %.3f  refusal %s (of %d)  false refusal %s  "
          "schema-valid %.1f%%  confidence AUROC %s" % (
              100 * res["exact_call"], 100 * res["tool_name"], res["argument_f1"],
              "%.1f%%" % (100 * res["refusal"]) if off else "-", off,
              "%.1f%%" % (100 * res["false_refusal"]) if on else "-", 100 * res["schema_valid"],
              "%.3f" % res["confidence_auroc"] if res["confidence_auroc"] is not None else "-"))
    print("| category | rows | passed | pass rate |\n|---|---|---|---|")
    for k, v in cats.items():
        print("| %s | %d | %d | %.1f%% |" % (k, v[0], v[1], 100.0 * v[1] / v[0]))
    if failures:
        failures.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

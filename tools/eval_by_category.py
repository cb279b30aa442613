#!/usr/bin/env python3
"""eval_by_category.py - `needle eval` per behaviour category, as a table.

    python3 tools/eval_by_category.py --needle build/needle --model M.cact [--tools T.json] DATA.jsonl [--json OUT]
        [--copy-values on|off] [--strict]

Rows carry a "category" (positive, parallel, missing, irrelevant, negation,
invalid, multi_turn; rows without one count as "all"). Each category's rows go
through `needle eval` on their own; a row passes when its calls are exactly the
expected ones ([] for the no-call categories), which is needle eval's
exact_call_accuracy. Prints a Markdown table and the overall pass rate.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

NO_CALL = ("missing", "irrelevant", "negation", "invalid")


def run_eval(needle, model, tools, path, copy_values=None, strict=False):
    cmd = [needle, "eval", "--model", model] + (["--tools", tools] if tools else ["--tools-from-data"])
    cmd += (["--copy-values", copy_values] if copy_values else []) + (["--strict"] if strict else []) + [path]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("eval_by_category: %s failed: %s" % (" ".join(cmd), res.stderr.strip()[-400:]))
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--needle", default="build/needle")
    ap.add_argument("--model", required=True)
    ap.add_argument("--tools", default=None, help="tools for every row (default: each row's own \"tools\")")
    ap.add_argument("--json", default=None, help="also write the numbers here")
    ap.add_argument("--copy-values", choices=("on", "off"), default=None,
                    help="grounded decoding on or off (default: needle's default)")
    ap.add_argument("--strict", action="store_true",
                    help="answer as `needle run --strict` (calls on values the request does not say withheld)")
    ap.add_argument("data")
    a = ap.parse_args(argv)
    by = collections.OrderedDict()
    with open(a.data, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                by.setdefault(json.loads(line).get("category", "all"), []).append(line)
    out, total, passed = {}, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for cat, lines in by.items():
            p = os.path.join(tmp, cat + ".jsonl")
            with open(p, "w", encoding="utf-8") as f:
                f.writelines(lines)
            r = run_eval(a.needle, a.model, a.tools, p, a.copy_values, a.strict)
            ok = round(r["exact_call_accuracy"] * r["rows"])
            out[cat] = {"rows": r["rows"], "passed": ok, "pass_rate": r["exact_call_accuracy"],
                        "schema_valid_rate": r["schema_valid_rate"]}
            total += r["rows"]
            passed += ok
    print("| category | rows | passed | pass rate |")
    print("|---|---|---|---|")
    for cat, v in out.items():
        print("| %s | %d | %d | %.1f%% |" % (cat, v["rows"], v["passed"], 100.0 * v["pass_rate"]))
    print("| **all** | %d | %d | **%.1f%%** |" % (total, passed, 100.0 * passed / max(1, total)))
    nocall_fail = sum(v["rows"] - v["passed"] for c, v in out.items() if c in ("missing", "negation", "invalid"))
    print("no-call failures on missing/negation/invalid: %d" % nocall_fail)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"categories": out, "rows": total, "passed": passed, "pass_rate": passed / max(1, total),
                       "nocall_failures": nocall_fail}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

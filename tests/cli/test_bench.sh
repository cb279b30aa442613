#!/bin/sh
# test_bench.sh - `needle bench` on the golden tiny files: one JSON object with
# every field docs/speed.md describes, counts that match the request, the
# time splits summing to one, the peak-RSS bound equal to file + KV budget
# (SPEC section 5: 12,058,624 bytes) + 1 MiB, the window the file's budget
# gives, and a clear error for a missing model.  (Speed itself is measured,
# not tested: docs/speed.md.)  Run from the repository root:
#   sh tests/cli/test_bench.sh [BUILD]
. "$(dirname "$0")/harness.sh"

check() { # FILE PROMPT GEN THREADS ACTS: the JSON on stdin
    python3 -c '
import json, os, sys
path, prompt, gen, threads, acts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
b = json.loads(sys.stdin.read())
need = {"model", "file_mb", "load_ms", "first_token_ms", "prompt_tokens", "prefill_ms", "prefill_tps", "gen_tokens",
        "decode_ms", "decode_tps", "peak_rss_mb", "rss_bound_mb", "rss_before_load_mb", "session_mb", "window",
        "threads", "backend", "kv_bits", "acts", "weight_mb_per_token", "read_gb_s", "bandwidth_fraction",
        "prefill_split", "decode_split"}
missing = need - set(b)
assert not missing, missing
assert b["prompt_tokens"] == prompt and b["gen_tokens"] == gen and b["threads"] == threads and b["acts"] == acts, b
mb = os.path.getsize(path) / 1048576.0
assert abs(b["file_mb"] - mb) < 0.01, (b["file_mb"], mb)
assert abs(b["rss_bound_mb"] - (b["file_mb"] + 12058624 / 1048576.0 + 1.0)) < 0.011, b["rss_bound_mb"]
assert b["prefill_tps"] > 0 and b["decode_tps"] > 0 and b["peak_rss_mb"] > b["rss_before_load_mb"] > 0, b
assert 0 < b["weight_mb_per_token"] < b["file_mb"], b["weight_mb_per_token"]
for split in ("prefill_split", "decode_split"):
    s = b[split]
    assert set(s) == {"matmul", "attention", "other"} and all(0 <= v <= 1 for v in s.values()), s
    assert abs(sum(s.values()) - 1) < 0.01, s
' "$@"
}

# tiny_w4.cact: the golden tiny geometry at 4 bits (window from its budget: its max_seq_len)
run "$NEEDLE" bench --model "$G/tiny_w4.cact" --prompt-tokens 24 --gen-tokens 6 --threads 1
if [ $rc -eq 0 ] && printf '%s' "$out" | check "$G/tiny_w4.cact" 24 6 1 a8; then ok bench_a8_fields_and_bound
else bad bench_a8_fields_and_bound "rc=$rc"; fi

run "$NEEDLE" bench --model "$G/tiny_w4.cact" --prompt-tokens 16 --gen-tokens 4 --threads 2 --acts float
if [ $rc -eq 0 ] && printf '%s' "$out" | check "$G/tiny_w4.cact" 16 4 2 float; then ok bench_float_two_threads
else bad bench_float_two_threads "rc=$rc"; fi

run "$NEEDLE" bench --model "$ROOT/no/such/model.cact" --prompt-tokens 8 --gen-tokens 2
if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "no/such/model.cact"
then ok bench_missing_model_one_line_error; else bad bench_missing_model_one_line_error "rc=$rc"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

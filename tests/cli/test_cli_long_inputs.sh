#!/bin/sh
# test_cli_long_inputs.sh - oversized and NUL-carrying inputs (issue 20, D2 and D17):
# tools, system text and queries longer than the model's context get one clear
# line naming the part, its length in tokens, the excess and the limit; many
# tools are narrowed by retrieval; data rows with a NUL are skipped with FILE:LINE.
# The inputs come from tests/long/gen_long_inputs.py --small (the CI-fast sizes;
# `make long-inputs` times the full sizes).  Checks look at behaviour (exit
# status, message, envelope), never at wall time.  Run from the repository root:
#   sh tests/cli/test_cli_long_inputs.sh [BUILD]
BUILD=${1:-build}
ROOT=$(pwd)
NEEDLE="$ROOT/$BUILD/needle"
G="$ROOT/tests/golden"
M="$ROOT/models/needle-default.cact"
T=$(mktemp -d /tmp/needle-long-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0
ok() { echo "ok      $1"; passed=$((passed + 1)); }
bad() { echo "not ok  $1: $2"; printf '%s\n' "$out" | head -n 5 | sed 's/^/    | /'; failed=$((failed + 1)); }
run() { out=$(timeout 120 "$@" 2>&1); rc=$?; }
has() { printf '%s' "$out" | grep -q -F -- "$1"; }

# --- data rows with a NUL byte or a \u0000 escape: FILE:LINE, never a cut text ------------
printf '{"query":"turn on the lights","tools":[],"answers":[]}\n{"query":"hi","tools":[],"answers":[]}\000{"query":"hidden"}\n{"query":"a\\u0000b","tools":[],"answers":[]}\n' > "$T/nul.jsonl"
run "$NEEDLE" eval --model "$G/tiny_w4.cact" --tools-from-data "$T/nul.jsonl"
if has "nul.jsonl:2: skipped: unexpected 0x00 after the JSON value" && has 'nul.jsonl:3: skipped: "query" contains a NUL character' && has '"malformed":2'
then ok eval_row_with_nul_skipped_with_file_line
else bad eval_row_with_nul_skipped_with_file_line "rc=$rc"; fi

run "$NEEDLE" finetune "$T/nul.jsonl" --checkpoint "$G/tiny.safetensors" --tokenizer "$G/tok8k.model" --epochs 1 --out "$T/f.safetensors"
if has "nul.jsonl:2: skipped: unexpected 0x00 after the JSON value" && has 'nul.jsonl:3: skipped: "query" contains a NUL character' && has '1 rows used of 3'
then ok finetune_row_with_nul_skipped_with_file_line
else bad finetune_row_with_nul_skipped_with_file_line "rc=$rc"; fi

run "$NEEDLE" train-heads --model "$G/tiny.safetensors" --tokenizer "$G/tok8k.model" "$T/nul.jsonl" --epochs 1 --out "$T/h.safetensors"
if has "nul.jsonl:2: skipped: unexpected 0x00 after the JSON value" && has 'nul.jsonl:3: skipped: "query" contains a NUL character' && ! has 'skipped: /'
then ok train_heads_row_with_nul_skipped_with_file_line
else bad train_heads_row_with_nul_skipped_with_file_line "rc=$rc"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

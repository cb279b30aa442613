#!/bin/sh
# test_cli_hardening.sh - regression tests for the CLI's handling of hostile or
# careless input (issue 20): each check runs the built needle and looks at its
# exit status and message.  Run from the repository root:
#   sh tests/cli/test_cli_hardening.sh [BUILD]
# Prints "ok NAME" / "not ok NAME" per check and "N passed, N failed".
. "$(dirname "$0")/harness.sh"
T=$(mktemp -d /tmp/needle-cli-test.XXXXXX)
trap 'rm -rf "$T"' EXIT

# each check below reads $rc and $out (stdout+stderr) of the last `run` (tests/cli/harness.sh)

# --- needle run: arguments ---------------------------------------------------------------
run "$NEEDLE" run --model "$G/tiny_w4.cact" turn off the lights
if [ $rc -eq 2 ] && has 'quote it as one' && has '"turn off the lights"'; then ok run_unquoted_query_gets_reason
else bad run_unquoted_query_gets_reason "rc=$rc"; fi

run "$NEEDLE" run --threads 4x hi
if [ $rc -eq 2 ] && has "--threads: '4x' is not an integer"; then ok run_bad_number_names_option
else bad run_bad_number_names_option "rc=$rc"; fi

run "$NEEDLE" run --window 99999999999 hi
if [ $rc -eq 2 ] && has '--window' && has 'out of range (allowed 1 ..'; then ok run_window_overflow_refused
else bad run_window_overflow_refused "rc=$rc"; fi

run "$NEEDLE" run --model "$G/tiny_w4.cact" --window 100000 hi
if [ $rc -eq 1 ] && has "window 100000 is larger than the model's max_seq_len 512"; then ok run_window_above_max_seq_len_refused
else bad run_window_above_max_seq_len_refused "rc=$rc"; fi

run "$NEEDLE" logits --model "$G/tiny_w4.cact" --ids 1,2,3 --window 100000
if [ $rc -eq 1 ] && has "larger than the model's max_seq_len 512"; then ok logits_window_above_max_seq_len_refused
else bad logits_window_above_max_seq_len_refused "rc=$rc"; fi

run "$NEEDLE" init --preset tiny --set kv_window=4096 --out "$T/wide.safetensors"
if [ $rc -ne 0 ] && has 'kv_window = 4096 is outside [0, 512]' && [ ! -f "$T/wide.safetensors" ]; then ok config_kv_window_above_max_seq_len_refused
else bad config_kv_window_above_max_seq_len_refused "rc=$rc"; fi

run "$NEEDLE" run --temperature nan hi
if [ $rc -eq 2 ] && has '--temperature'; then ok run_temperature_nan_refused
else bad run_temperature_nan_refused "rc=$rc"; fi

# --- input files: kinds, FIFOs, devices, limits ------------------------------------------
mkfifo "$T/fifo"
run "$NEEDLE" run --model "$T/fifo" hi
if [ $rc -ne 124 ] && [ $rc -ne 0 ] && has 'FIFO'; then ok run_fifo_model_refused_without_blocking
else bad run_fifo_model_refused_without_blocking "rc=$rc"; fi

run "$NEEDLE" eval --model "$G/tiny_w4.cact" "$T/fifo"
if [ $rc -eq 1 ] && has 'FIFO'; then ok eval_fifo_data_refused_without_blocking
else bad eval_fifo_data_refused_without_blocking "rc=$rc"; fi

run "$NEEDLE" finetune "$T/fifo" --checkpoint "$G/tiny.safetensors" --tokenizer "$G/tok8k.model" --out "$T/f.safetensors"
if [ $rc -eq 1 ] && has 'FIFO'; then ok finetune_fifo_data_refused_without_blocking
else bad finetune_fifo_data_refused_without_blocking "rc=$rc"; fi

run "$NEEDLE" run --model "$G/tiny_w4.cact" --tools /dev/zero hi
if [ $rc -eq 1 ] && has '/dev/zero: is a character device'; then ok run_device_tools_refused
else bad run_device_tools_refused "rc=$rc"; fi

run "$NEEDLE" run --model "$G/tiny_w4.cact" --tools "$T" hi
if [ $rc -eq 1 ] && has 'is a directory'; then ok run_directory_tools_refused
else bad run_directory_tools_refused "rc=$rc"; fi

printf '[]\000[{"name":"hidden"}]' > "$T/nul.json"
run "$NEEDLE" run --model "$G/tiny_w4.cact" --tools "$T/nul.json" hi
if [ $rc -eq 1 ] && has 'NUL byte at byte 2'; then ok run_tools_with_nul_refused
else bad run_tools_with_nul_refused "rc=$rc"; fi

echo '[{"name":"f"}]' > "$T/tools.json"
run "$NEEDLE" run --model "$T/tools.json" hi
if [ $rc -eq 1 ] && has 'is a JSON text file, not a model'; then ok run_json_as_model_says_what_it_is
else bad run_json_as_model_says_what_it_is "rc=$rc"; fi

run "$NEEDLE" run --model "$G/tiny_w4.cact" --tokenizer "$T/tools.json" hi
if [ $rc -eq 1 ] && has "$T/tools.json: is a JSON text file, not a SentencePiece tokenizer"; then ok run_tokenizer_error_names_file
else bad run_tokenizer_error_names_file "rc=$rc"; fi

# a tokenizer with a duplicated piece: build must refuse it as run would, naming the file
python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read())
p, found = 0, []
while p < len(b) and b[p] == 0x0a and len(found) < 2:  # the repeated "pieces" field
    p += 1; n = 0; sh = 0
    while True:
        c = b[p]; p += 1; n |= (c & 0x7f) << sh; sh += 7
        if not c & 0x80: break
    if b[p] == 0x0a and b[p + 1] == 2: found.append(p + 2)  # a two-byte piece text
    p += n
b[found[1]:found[1] + 2] = b[found[0]:found[0] + 2]
open(sys.argv[2], "wb").write(bytes(b))
' "$G/tok8k.model" "$T/dup.model"
run "$NEEDLE" build "$G/tiny.safetensors" --tokenizer "$T/dup.model" --out "$T/dup.cact"
if [ $rc -eq 1 ] && has "$T/dup.model: tokenizer: piece" && has 'duplicates piece' && [ ! -f "$T/dup.cact" ]; then
    ok build_refuses_tokenizer_run_would_refuse
else bad build_refuses_tokenizer_run_would_refuse "rc=$rc"; fi

run "$NEEDLE" inspect "$T/tools.json"
if [ $rc -eq 1 ] && has 'is a JSON text file'; then ok inspect_json_says_what_it_is
else bad inspect_json_says_what_it_is "rc=$rc"; fi

cat > "$T/many.json" <<'J'
[{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","minItems":1e9}},"required":["a"]}}]
J
run "$NEEDLE" run --model "$G/tiny_w4.cact" --tools "$T/many.json" hi
if [ $rc -eq 1 ] && has 'minItems: 1000000000 is more than'; then ok run_min_items_1e9_refused
else bad run_min_items_1e9_refused "rc=$rc"; fi

cat > "$T/big.json" <<'J'
[{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer","minimum":1e19}},"required":["a"]}}]
J
run "$NEEDLE" run --model "$G/tiny_w4.cact" --tools "$T/big.json" hi
if [ $rc -eq 1 ] && has 'no integer of at most 18 digits'; then ok run_integer_digit_limit_named
else bad run_integer_digit_limit_named "rc=$rc"; fi

# a long $ref chain ending in an unsupported keyword: the reason survives (the path's middle is elided)
python3 -c '
import json, sys
defs = {"step_with_a_rather_long_name_%d" % i: {"$ref": "#/$defs/step_with_a_rather_long_name_%d" % (i + 1)}
        for i in range(30)}
defs["step_with_a_rather_long_name_30"] = {"type": "object", "properties": {"deep": {"not": {}}}}
json.dump([{"name": "f", "parameters": {"type": "object", "$defs": defs,
                                        "properties": {"c": {"$ref": "#/$defs/step_with_a_rather_long_name_0"}}}}],
          open(sys.argv[1], "w"))
' "$T/refchain.json"
run "$NEEDLE" run --model "$G/tiny_w4.cact" --tools "$T/refchain.json" hi
if [ $rc -eq 1 ] && has 'properties.deep: unsupported keyword "not"'; then ok run_long_ref_chain_keeps_reason
else bad run_long_ref_chain_keeps_reason "rc=$rc"; fi

# an endless stdin line is cut off at 16 MiB with an error envelope; the next line is still answered
out=$( (head -c 20000000 /dev/zero | tr '\000' 'a'; printf '\nlights on\n') | timeout 120 "$NEEDLE" run --model "$G/tiny_w4.cact" \
      --tools "$T/tools.json" --max-new-tokens 8 2>&1); rc=$?
if [ $rc -eq 1 ] && has 'a line longer than the 16 MiB allowed' && [ "$(printf '%s\n' "$out" | grep -c '^{"type"')" -eq 2 ]; then
    ok run_stdin_line_bounded
else bad run_stdin_line_bounded "rc=$rc"; fi

# --- NEEDLE_MODEL, empty request, success:false ----------------------------------------
run env NEEDLE_MODEL="$T/from-env.cact" "$NEEDLE" run hi
if [ $rc -eq 1 ] && has "$T/from-env.cact"; then ok run_honours_needle_model
else bad run_honours_needle_model "rc=$rc"; fi

run "$NEEDLE" run --model "$G/tiny_w4.cact" "   "
if [ $rc -eq 1 ] && has 'the request is empty' && ! has '"function_calls":[{'; then ok run_empty_query_gets_no_call
else bad run_empty_query_gets_no_call "rc=$rc"; fi

if [ -f models/needle-default.cact ]; then
    run "$NEEDLE" run --max-new-tokens 1 "turn off the kitchen lights"
    if [ $rc -eq 1 ] && has '"success":false'; then ok run_success_false_exits_1
    else bad run_success_false_exits_1 "rc=$rc"; fi
    run "$NEEDLE" run "turn off the kitchen lights"
    if [ $rc -eq 0 ] && has '"success":true'; then ok run_success_true_exits_0
    else bad run_success_true_exits_0 "rc=$rc"; fi
    # needle eval answers a row with the tools it carries (a renamed set_lights models/tools.json lacks)
    python3 -c '
import json, sys
tools = json.load(open("models/tools.json"))
t = dict([x for x in tools if x["name"] == "set_lights"][0], name="control_lights")
print(json.dumps({"query": "turn off the kitchen lights", "tools": [t],
                  "answers": [{"name": "control_lights", "arguments": {"room": "kitchen", "on": False}}]}))
' > "$T/eval.jsonl"
    run "$NEEDLE" eval "$T/eval.jsonl"
    if [ $rc -eq 0 ] && has '"tool_name_accuracy":1.0000'; then ok eval_uses_row_tools_by_default
    else bad eval_uses_row_tools_by_default "rc=$rc"; fi
else
    echo "  (models/needle-default.cact absent: the success:false exit checks are not run and not counted)"
fi

# --- needle logits keeps only the asked rows: 3000 ids x 8192 vocab would be 98 MB of floats.
# Peak RSS of 3000 ids minus that of 300 ids (a difference, so most sanitizer shadow memory cancels
# out): before the fix 84 MB, after it a few MB (33 MB under ThreadSanitizer); the bound is 50 MB.
peak() {
    python3 -c '
import resource, subprocess, sys
ids = ",".join(str(100 + i % 500) for i in range(int(sys.argv[3])))
p = subprocess.run([sys.argv[1], "logits", "--model", sys.argv[2], "--ids", ids, "--window", "64"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024 if p.returncode == 0 else -1)
' "$NEEDLE" "$G/tiny_w4.cact" "$1"
}
small=$(peak 300)
large=$(peak 3000)
out="peak RSS ${small} MB for 300 ids, ${large} MB for 3000 ids"
if [ "$small" -gt 0 ] && [ "$large" -gt 0 ] && [ $((large - small)) -lt 50 ]; then ok logits_memory_bounded_by_asked_positions
else bad logits_memory_bounded_by_asked_positions "$out"; fi

# --- finetune: numbers and data rows -------------------------------------------------------
D="$T/data.jsonl"
TOOLS='[{"name":"set_lights","parameters":{"type":"object","properties":{"room":{"type":"string","enum":["kitchen","hall"]},"on":{"type":"boolean"}},"required":["room"]}}]'
{
    printf '{"query":"kitchen lights","tools":%s,"answers":[{"name":"set_lights","arguments":{"room":"kitchen"}}]}\n' "$TOOLS"
    printf '{"query":"open the door","tools":%s,"answers":[{"name":"open_door","arguments":{}}]}\n' "$TOOLS"
    printf '{"query":"attic lights","tools":%s,"answers":[{"name":"set_lights","arguments":{"room":"attic"}}]}\n' "$TOOLS"
    printf '{"query":"%s","tools":%s,"answers":[{"name":"set_lights","arguments":{"room":"hall"}}]}\n' \
        "$(i=0; while [ $i -lt 700 ]; do printf 'word%d ' $i; i=$((i + 1)); done)" "$TOOLS"
    printf '{"query":"hall lights","tools":%s,"answers":[{"name":"set_lights","arguments":{"room":"hall"}}]}\n' "$TOOLS"
    # keys in another order than the schema's are still a valid instance: kept
    printf '{"query":"hall lights on","tools":%s,"answers":[{"arguments":{"on":true,"room":"hall"},"name":"set_lights"}]}\n' "$TOOLS"
} > "$D"
FT="$NEEDLE finetune $D --checkpoint $G/tiny.safetensors --tokenizer $G/tok8k.model --out $T/a.safetensors"

run $FT --epochs 99999999999
if [ $rc -eq 2 ] && has "--epochs: '99999999999' is out of range (allowed 1 .. 1000000)"; then ok finetune_huge_epochs_refused
else bad finetune_huge_epochs_refused "rc=$rc"; fi

run $FT --lr nan
if [ $rc -eq 2 ] && has "--lr: 'nan'"; then ok finetune_lr_nan_refused
else bad finetune_lr_nan_refused "rc=$rc"; fi

run $FT --val-split nan
if [ $rc -eq 2 ] && has "--val-split: 'nan'"; then ok finetune_val_split_nan_refused
else bad finetune_val_split_nan_refused "rc=$rc"; fi

run $FT --batch-size 2x
if [ $rc -eq 2 ] && has "--batch-size: '2x' is not an integer"; then ok finetune_trailing_junk_refused
else bad finetune_trailing_junk_refused "rc=$rc"; fi

run $FT --epochs 1 --val-split 0 --batch-size 2 --lora-rank 2
if [ $rc -eq 0 ] && has "data.jsonl:2: skipped:" && has '"open_door", which "tools" does not declare' \
   && has "data.jsonl:3: skipped:" && has "do not match the tools' schemas" \
   && has "data.jsonl:4: skipped:" && has "tokens after tokenisation, more than the 512 allowed" \
   && has "3 rows used of 6"; then ok finetune_invalid_and_overlong_rows_skipped_with_place
else bad finetune_invalid_and_overlong_rows_skipped_with_place "rc=$rc"; fi

run $FT --epochs 1 --val-split 0 --stop-after 1 --checkpoint "$G/tiny_w4.cact"
if [ $rc -eq 0 ] && has 'warning:' && has 'dequantised'; then ok finetune_cact_checkpoint_dequantised_with_a_warning
else bad finetune_cact_checkpoint_dequantised_with_a_warning "rc=$rc"; fi

# the default tokenizer is found from any working directory
run sh -c "cd '$T' && '$NEEDLE' finetune '$D' --checkpoint '$G/tiny.safetensors' --out '$T/b.safetensors' --epochs 1 --val-split 0"
if [ $rc -eq 0 ] && [ -f "$T/b.safetensors" ]; then ok finetune_default_tokenizer_from_any_directory
else bad finetune_default_tokenizer_from_any_directory "rc=$rc"; fi

# a LoRA training state refuses a different base checkpoint
"$NEEDLE" init --preset tiny --seed 7 --out "$T/other.safetensors" >/dev/null 2>&1
run $FT --epochs 2 --val-split 0 --batch-size 1 --save-every 1 --stop-after 1 --state-file "$T/run.state"
rc1=$rc
run "$NEEDLE" finetune "$D" --checkpoint "$T/other.safetensors" --tokenizer "$G/tok8k.model" --out "$T/c.safetensors" \
    --resume "$T/run.state"
if [ $rc1 -eq 0 ] && [ $rc -eq 1 ] && has 'a different base'; then ok finetune_resume_refuses_other_base
else bad finetune_resume_refuses_other_base "rc=$rc (state run rc=$rc1)"; fi
run "$NEEDLE" finetune "$D" --checkpoint "$G/tiny.safetensors" --tokenizer "$G/tok8k.model" --out "$T/c.safetensors" \
    --resume "$T/run.state"
if [ $rc -eq 0 ]; then ok finetune_resume_accepts_same_base
else bad finetune_resume_accepts_same_base "rc=$rc"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

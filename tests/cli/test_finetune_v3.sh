#!/bin/sh
# test_finetune_v3.sh - the Needle 3 fine-tuning workflow end to end through the CLI, on
# tests/golden/needle3/n3_tiny.safetensors (a random-weight v3 model in the reference's
# checkpoint layout) and a small JSONL holding both row formats (local {query, tools,
# answers} and the platform chat {messages, tools} with OpenAI tool_calls):
#   1. `needle finetune --full` lowers the training and the validation loss and writes a
#      checkpoint in the reference layout (`/`-joined names, no hada_p1/p2) that `needle build`
#      turns into a .cact;
#   2. a LoRA fine-tune (rank 16, alpha 32) of that checkpoint lowers the training and the
#      validation loss and writes an adapter in the reference's layout (lora/<path>/A|B);
#   3. `needle build --lora` merges it (dropping the confidence head, as the reference does)
#      into a .cact that `needle run --tools` loads and answers with a schema-valid envelope;
#      also at --bits 2 --layers 3 from an adapter trained for 2 bits (a valid envelope);
#   4. the adapter is refused on another base (base checksum).
# The loss is compared between the first and the last validation (every 2 steps) and
# between the first and the last logged training steps.  About 20 s of CPU.
# Run from the repository root: sh tests/cli/test_finetune_v3.sh [BUILD]
RUN_TIMEOUT=300
. "$(dirname "$0")/harness.sh"
BASE="$G/needle3/n3_tiny.safetensors"
TMP=$(mktemp -d /tmp/needle-ft-v3.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

TOOLS='[{"name":"set_lights","description":"Turn lights on or off","parameters":{"type":"object","properties":{"room":{"type":"string"},"on":{"type":"boolean"}},"required":["room","on"]}},{"name":"lock_door","description":"Lock a door","parameters":{"type":"object","properties":{"door":{"type":"string"}},"required":["door"]}}]'
OA='[{"type":"function","function":{"name":"set_lights","description":"Turn lights on or off","parameters":{"type":"object","properties":{"room":{"type":"string"},"on":{"type":"boolean"}},"required":["room","on"]}}},{"type":"function","function":{"name":"lock_door","description":"Lock a door","parameters":{"type":"object","properties":{"door":{"type":"string"}},"required":["door"]}}}]'
printf '%s' "$TOOLS" > "$TMP/tools.json"
i=0
for room in kitchen bedroom hallway garage office porch attic den; do
    for on in true false; do
        word=on; [ $on = false ] && word=off
        if [ $((i % 3)) -eq 2 ]; then
            printf '{"messages":[{"role":"user","content":"turn %s the %s lights"},{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"set_lights","arguments":"{\\"room\\": \\"%s\\", \\"on\\": %s}"}}]}],"tools":%s}\n' \
                "$word" "$room" $i "$room" $on "$OA"
        else
            printf '{"query":"turn %s the %s lights","tools":%s,"answers":[{"name":"set_lights","arguments":{"room":"%s","on":%s}}]}\n' \
                "$word" "$room" "$TOOLS" "$room" $on
        fi
        i=$((i + 1))
    done
done > "$TMP/train.jsonl"
for door in front back side garage; do
    printf '{"messages":[{"role":"user","content":"lock the %s door"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"lock_door","arguments":{"door":"%s"}}}]}],"tools":%s}\n' \
        "$door" "$door" "$OA"
    printf '{"query":"please lock the %s door","tools":%s,"answers":[{"name":"lock_door","arguments":{"door":"%s"}}]}\n' \
        "$door" "$TOOLS" "$door"
done >> "$TMP/train.jsonl"
printf '{"query":"turn on the study lights","tools":%s,"answers":[{"name":"set_lights","arguments":{"room":"study","on":true}}]}\n' "$TOOLS" > "$TMP/val.jsonl"
printf '{"messages":[{"role":"user","content":"lock the cellar door"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"lock_door","arguments":"{\\"door\\":\\"cellar\\"}"}}]}],"tools":%s}\n' "$OA" >> "$TMP/val.jsonl"

# "first last" of the validation losses and of the logged training losses of a finetune log
val_losses() { printf '%s\n' "$out" | sed -n 's/.*val loss \([0-9.]*\).*/\1/p' | sed -n '1p;$p' | tr '\n' ' '; }
step_losses() { printf '%s\n' "$out" | sed -n 's/.*; loss \([0-9.]*\) -> \([0-9.]*\);.*/\1 \2/p'; }
lower() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { exit !(b < a - m) }'; }

FT="--val $TMP/val.jsonl --batch-size 4 --bucket batch --eval-every 2 --patience 0 --keep-last --threads 1"
# shellcheck disable=SC2086
run "$NEEDLE" finetune "$TMP/train.jsonl" --checkpoint "$BASE" --full --epochs 3 --lr 3e-3 $FT --out "$TMP/full.safetensors"
set -- $(val_losses) $(step_losses)
echo "    full: val loss $1 -> $2, train loss $3 -> $4"
if [ $rc -eq 0 ] && has "24 train rows, 2 validation rows" && [ $# -eq 4 ] && lower "$1" "$2" 0.2 && lower "$3" "$4" 0.5
then ok full_finetune_lowers_losses; else bad full_finetune_lowers_losses "rc=$rc"; fi

run "$NEEDLE" inspect "$TMP/full.safetensors"
if [ $rc -eq 0 ] && has "stack/layers/block/self_attn/q_proj/kernel" && has "stack/layers/block/hadamard_mlp/w1a" &&
    has "embedding/embedding" && ! has "hada_p1" && ! has ".kernel" && has "router_head/proj/kernel"
then ok full_checkpoint_reference_layout; else bad full_checkpoint_reference_layout "rc=$rc"; fi

run "$NEEDLE" build "$TMP/full.safetensors" --tokenizer "$G/tok8k.model" --out "$TMP/full.cact"
if [ $rc -eq 0 ] && has "177 tensors"; then ok full_checkpoint_builds; else bad full_checkpoint_builds "rc=$rc"; fi

# shellcheck disable=SC2086
run "$NEEDLE" finetune "$TMP/train.jsonl" --checkpoint "$TMP/full.safetensors" --epochs 3 --lr 5e-3 $FT \
    --out "$TMP/adapter.safetensors"
set -- $(val_losses) $(step_losses)
echo "    LoRA: val loss $1 -> $2, train loss $3 -> $4"
if [ $rc -eq 0 ] && has "LoRA" && [ $# -eq 4 ] && lower "$1" "$2" 0.05 && lower "$3" "$4" 0.1
then ok lora_finetune_lowers_losses; else bad lora_finetune_lowers_losses "rc=$rc"; fi

run "$NEEDLE" inspect "$TMP/adapter.safetensors"
if [ $rc -eq 0 ] && has "lora/stack/layers/block/self_attn/q_proj/kernel/A" &&
    has "lora/stack/layers/block/self_attn/out_proj/kernel/B" && [ "$(printf '%s\n' "$out" | grep -c ' lora/')" -eq 10 ]
then ok adapter_reference_layout; else bad adapter_reference_layout "rc=$rc"; fi

run "$NEEDLE" build "$TMP/full.safetensors" --tokenizer "$G/tok8k.model" --lora "$TMP/adapter.safetensors" \
    --out "$TMP/tuned.cact"
b=$rc
dropped=0; has "dropped   the confidence head" && dropped=1
# the envelope of SPEC 6; with $1 = success, a successful answer whose calls name declared tools
envelope() { printf '%s' "$out" | head -n 1 | python3 -c '
import json, sys
e = json.loads(sys.stdin.readline())
need = {"type", "success", "error", "error_code", "function_calls", "reasoning", "confidence", "prefill_tps", "decode_tps", "peak_ram_mb"}
ok = need <= set(e) and isinstance(e["function_calls"], list)
if sys.argv[1:] == ["success"]:
    ok = ok and e["success"] is True and all(c.get("name") in ("set_lights", "lock_door") and
                                              isinstance(c.get("arguments"), dict) for c in e["function_calls"])
sys.exit(0 if ok else 1)' "$@"; }
run "$NEEDLE" run --model "$TMP/tuned.cact" --tools "$TMP/tools.json" --max-new-tokens 48 "turn on the kitchen lights"
if [ $b -eq 0 ] && [ $dropped -eq 1 ] && [ $rc -eq 0 ] && envelope success
then ok build_lora_loads_and_answers; else bad build_lora_loads_and_answers "build=$b dropped=$dropped run=$rc"; fi
echo "    answer: $(printf '%s' "$out" | head -n 1 | cut -c 1-200)"

# an adapter trained for 2 bits deploys at 2 bits, here as ladder rung 3 of 5
# shellcheck disable=SC2086
run "$NEEDLE" finetune "$TMP/train.jsonl" --checkpoint "$TMP/full.safetensors" --epochs 1 --qat-bits 2 $FT \
    --out "$TMP/adapter2.safetensors"
t=$rc
run "$NEEDLE" build "$TMP/full.safetensors" --tokenizer "$G/tok8k.model" --lora "$TMP/adapter2.safetensors" --layers 3 \
    --out "$TMP/tuned_w2_l3.cact"
b=$rc
w2=0; has "W2A8" && has "3 of 5 layers" && w2=1
# (a 2-bit rung of a model this small need not finish a call: the envelope must be valid either way)
run "$NEEDLE" run --model "$TMP/tuned_w2_l3.cact" --tools "$TMP/tools.json" --max-new-tokens 32 "lock the front door"
if [ $t -eq 0 ] && [ $b -eq 0 ] && [ $w2 -eq 1 ] && [ $rc -le 1 ] && envelope
then ok build_lora_bits2_rung; else bad build_lora_bits2_rung "train=$t build=$b w2=$w2 run=$rc"; fi

run "$NEEDLE" build "$BASE" --tokenizer "$G/tok8k.model" --lora "$TMP/adapter.safetensors" --out "$TMP/wrong.cact"
if [ $rc -ne 0 ] && has "different base" && ! [ -e "$TMP/wrong.cact" ]; then ok adapter_refused_on_other_base
else bad adapter_refused_on_other_base "rc=$rc"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/bin/sh
# test_needle3_cli.sh - the Needle 3 CLI paths on tests/golden/needle3: `needle
# embed` (the v3 embedding head of [BOS] + enc(text), equal to the reference's
# embedding of the golden's ids), `needle logits --heads` (both generations),
# `--layers 3` (rung 3 of the unsliced file equals the rung file), `needle
# inspect` (generation and the v3 header fields), `needle run` (a schema-valid
# envelope).  Run from the repository root: sh tests/cli/test_needle3_cli.sh [BUILD]
. "$(dirname "$0")/harness.sh"
N3="$G/needle3"

text=$(python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["text"])' "$N3/n3_tiny.json")
run "$NEEDLE" embed --model "$N3/n3_tiny.cact" --acts float "$text"
if [ $rc -eq 0 ] && printf '%s' "$out" | python3 -c '
import json, sys
got = json.load(sys.stdin); ref = json.load(open(sys.argv[1]))["heads"]["embedding"]
sys.exit(0 if len(got) == len(ref) and max(abs(a - b) for a, b in zip(got, ref)) <= 1e-4 else 1)' "$N3/n3_tiny.json"
then ok embed_v3_matches_reference_head; else bad embed_v3_matches_reference_head "rc=$rc"; fi

run "$NEEDLE" embed --model "$G/tiny_w4.cact" "turn on the lights"
if [ $rc -eq 0 ] && printf '%s' "$out" | python3 -c '
import json, math, sys
v = json.load(sys.stdin); sys.exit(0 if len(v) > 0 and abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-4 else 1)'
then ok embed_v2_contrastive_unit_vector; else bad embed_v2_contrastive_unit_vector "rc=$rc"; fi

ids=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["ids"])))' "$N3/n3_tiny.json")
run "$NEEDLE" logits --model "$N3/n3_tiny.cact" --ids "$ids" --heads --layers 3
a=$out
run "$NEEDLE" logits --model "$N3/n3_tiny_rung3.cact" --ids "$ids" --heads
if [ $rc -eq 0 ] && [ "$a" = "$out" ] && has '"router_logits":[' && has '"confidence_logit":'; then ok layers3_equals_rung_file
else bad layers3_equals_rung_file "rc=$rc"; fi

run "$NEEDLE" logits --model "$G/tiny_w4.cact" --ids 2,17,99 --heads
if [ $rc -eq 0 ] && has '"generation":2' && has '"embedding":[' && has '"router_logits":null'; then ok logits_heads_v2
else bad logits_heads_v2 "rc=$rc"; fi

run "$NEEDLE" logits --model "$G/tiny_w4.cact" --ids 2,17 --layers 2
if [ $rc -ne 0 ] && has 'Needle 3'; then ok layers_refused_on_v2; else bad layers_refused_on_v2 "rc=$rc"; fi

run "$NEEDLE" inspect "$N3/n3_small.cact"
if [ $rc -eq 0 ] && has 'generation Needle 3' && has 'out_vocab 8000' && has 'v_head_dim 24' && has 'sliding_window 16' &&
    has 'global layers 2 5' && has 'seed_heads 3' && has 'qkv_conv_taps 3'; then ok inspect_v3_header
else bad inspect_v3_header "rc=$rc"; fi

# n3_tiny's context is 256 positions: one small tool fits (the demo's five do not; they are refused)
tools=$(mktemp /tmp/needle-n3-tools.XXXXXX)
printf '%s' '[{"name":"set_lights","description":"Turn lights on or off","parameters":{"type":"object","properties":{"room":{"type":"string"},"on":{"type":"boolean"}},"required":["room","on"]}}]' > "$tools"
run "$NEEDLE" run --model "$N3/n3_tiny.cact" --tools "$tools" --max-new-tokens 16 "turn on the kitchen lights"
rm -f "$tools"
if printf '%s' "$out" | head -n 1 | python3 -c '
import json, sys
e = json.loads(sys.stdin.readline())
need = {"type", "success", "error", "error_code", "function_calls", "reasoning", "confidence", "prefill_tps", "decode_tps", "peak_ram_mb"}
sys.exit(0 if need <= set(e) and isinstance(e["function_calls"], list) else 1)'
then ok run_v3_envelope_schema; else bad run_v3_envelope_schema "rc=$rc"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

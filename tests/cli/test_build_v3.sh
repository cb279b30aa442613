#!/bin/sh
# test_build_v3.sh - `needle build` on a Needle 3 float checkpoint against the
# reference exporter's own files (tests/golden/needle3: n3_tiny.cact and
# n3_tiny_rung3.cact were written by cactus-needle 3.2.8 from
# n3_tiny.safetensors).  BUILD/tools/cact_diff holds ours to them: every byte
# outside the CQ blobs identical, CQ bytes >= 99.9% identical, no group norm
# more than one FP16 ulp away.  Also: --bits 2 and --bits-map (head matrices
# stay 4-bit unless named, as the reference exports them), --layers refused
# outside 2..L and on Needle 2, and cact_diff itself failing a different file.
# Run from the repository root: sh tests/cli/test_build_v3.sh [BUILD]
RUN_TIMEOUT=300
. "$(dirname "$0")/harness.sh"
DIFF="$ROOT/$BUILD/tools/cact_diff"
N3="$G/needle3"
TMP=$(mktemp -d /tmp/needle-build-v3.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" --out "$TMP/full.cact"
if [ $rc -eq 0 ]; then
    run "$DIFF" "$TMP/full.cact" "$N3/n3_tiny.cact" 99.9
    echo "    full:   $out"
    if [ $rc -eq 0 ]; then ok build_matches_reference_export; else bad build_matches_reference_export "rc=$rc"; fi
else bad build_matches_reference_export "build rc=$rc"; fi

run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" --layers 3 --out "$TMP/rung3.cact"
if [ $rc -eq 0 ] && has "3 of 5 layers"; then
    run "$DIFF" "$TMP/rung3.cact" "$N3/n3_tiny_rung3.cact" 99.9
    echo "    rung 3: $out"
    if [ $rc -eq 0 ]; then ok layers3_matches_reference_rung; else bad layers3_matches_reference_rung "rc=$rc"; fi
else bad layers3_matches_reference_rung "build rc=$rc"; fi

# the comparison is not vacuous: the full file is not the rung
run "$DIFF" "$TMP/full.cact" "$N3/n3_tiny_rung3.cact" 99.9
if [ $rc -eq 1 ]; then ok cact_diff_fails_other_file; else bad cact_diff_fails_other_file "rc=$rc"; fi

# --layers 5 of 5 is the model itself
run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" --layers 5 --out "$TMP/l5.cact"
if [ $rc -eq 0 ] && cmp -s "$TMP/l5.cact" "$TMP/full.cact"; then ok layers_all_is_the_model; else bad layers_all_is_the_model "rc=$rc"; fi

run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" --layers 1 --out "$TMP/l1.cact"
r1=$rc
run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" --layers 6 --out "$TMP/l6.cact"
if [ $r1 -ne 0 ] && [ $rc -ne 0 ] && has "more than the model's layers" && ! [ -e "$TMP/l1.cact" ] && ! [ -e "$TMP/l6.cact" ]
then ok layers_out_of_range_refused; else bad layers_out_of_range_refused "rc=$r1/$rc"; fi

run "$NEEDLE" build "$G/tiny.safetensors" --tokenizer "$G/tok8k.model" --layers 2 --out "$TMP/v2.cact"
if [ $rc -ne 0 ] && has "Needle 3" && ! [ -e "$TMP/v2.cact" ]; then ok layers_refused_on_v2; else bad layers_refused_on_v2 "rc=$rc"; fi

# 2-bit: every model matrix at 2 bits, the head matrices at 4 (the reference's HEAD_BITS); it runs
run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" --bits 2 --out "$TMP/w2.cact"
b=$rc
run "$NEEDLE" inspect "$TMP/w2.cact"
n2=$(printf '%s\n' "$out" | grep -E '^ +[0-9]+  .* CQ ' | grep -v -E '(embedding|confidence|router)\.(probes|query|proj)' | awk '$5 != 2' | wc -l)
nh=$(printf '%s\n' "$out" | grep -E '(embedding|confidence|router)\.(probes|query|proj) ' | awk '$5 == 4' | wc -l)
run "$NEEDLE" logits --model "$TMP/w2.cact" --ids 2,17,99,4
if [ $b -eq 0 ] && [ "$n2" -eq 0 ] && [ "$nh" -eq 9 ] && [ $rc -eq 0 ] && has '"logits"'; then ok bits2_model_and_4bit_heads
else bad bits2_model_and_4bit_heads "build=$b non2=$n2 heads4=$nh logits=$rc"; fi

run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" \
    --bits-map default=4,embedding=2,attn.v_proj=3,heads.router=3 --out "$TMP/map.cact"
b=$rc
run "$NEEDLE" inspect "$TMP/map.cact"
if [ $b -eq 0 ] && printf '%s\n' "$out" | grep -q -E '^ +0  embedding +CQ .* 2 ' &&
    [ "$(printf '%s\n' "$out" | grep -E 'attn\.v_proj ' | awk '$5 == 3' | wc -l)" -eq 5 ] &&
    [ "$(printf '%s\n' "$out" | grep -E 'router\.(probes|query|proj) ' | awk '$5 == 3' | wc -l)" -eq 3 ] &&
    [ "$(printf '%s\n' "$out" | grep -E 'embedding\.(probes|query|proj) ' | awk '$5 == 4' | wc -l)" -eq 3 ]
then ok bits_map_v3; else bad bits_map_v3 "rc=$b"; fi

run "$NEEDLE" build "$N3/n3_tiny.safetensors" --tokenizer "$G/tok8k.model" --bits-map default=4,heads.foo=2 --out "$TMP/bad.cact"
if [ $rc -ne 0 ] && has "unknown key 'heads.foo'"; then ok bits_map_unknown_head_key; else bad bits_map_unknown_head_key "rc=$rc"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

#!/bin/sh
# train_round_r26.sh - round r26 (docs/default-model.md), from r23 to the bundled model: one epoch of
# full fine-tuning on 11,367 fresh rows generated like r23's but with fewer negated and invalid rows
# (the agent's checks withhold those calls; the model's refusals were costing positive requests), then
# both heads retrained (models/needle-default.cact = $WORK/r26.cact, models/needle-default.safetensors =
# $WORK/r26_fp16.safetensors). Runs tools/train_round_r23.sh first unless $WORK/r23_fp16.safetensors exists.
#
#   sh tools/train_round_r26.sh [NEEDLE_BINARY] [WORK_DIR] [THREADS]
#
# About 25 minutes on 2 threads (14 minutes of fine-tuning, 3 of data, 6 of heads). The shipped model
# started from the shipped r23 FP16 checkpoint, as this script does.
set -eu
NEEDLE=${1:-build/needle}
WORK=${2:-data/default-model}
THREADS=${3:-2}
TOK=tests/golden/tok8k.model
[ -f "$WORK/r23_fp16.safetensors" ] || sh tools/train_round_r23.sh "$NEEDLE" "$WORK" "$THREADS"
. tools/round_steps.sh
D="$WORK/r26data"

# r23's two generations with new seeds; negation and invalid at 0.03 (r23: 0.07), their share given to
# positive and parallel rows
python3 tools/make_round_data.py --needle "$NEEDLE" --out "$D/big" --seed 26 --demo-rows 7000 \
    --subset-rows 5000 --max-tokens 640 --spm $TOK --follow-up-rate 0.7 \
    --weights '{"positive":0.47,"parallel":0.16,"multi_turn":0.14,"missing":0.08,"irrelevant":0.09,"negation":0.03,"invalid":0.03}'
python3 tools/make_round_data.py --needle "$NEEDLE" --out "$D/small" --seed 126 --demo-rows 0 \
    --subset-rows 2500 --subset-tools 1-3 --max-tokens 512 --spm $TOK --follow-up-rate 0.9 \
    --weights '{"positive":0.36,"parallel":0.12,"multi_turn":0.35,"missing":0.06,"irrelevant":0.07,"negation":0.02,"invalid":0.02}'
mix "$D" 26

round r26 "$D/train_mix.jsonl" "$D/val_pick.jsonl" "$WORK/r23_fp16.safetensors" 2e-4 26
# heads: contrastive (20 epochs), then confidence on the validation rows the run did not watch
heads r26_heads "$WORK/r26.safetensors" "$D/calib.jsonl"
python3 tools/st_to_half.py "$WORK/r26_heads.safetensors" "$WORK/r26_fp16.safetensors"
"$NEEDLE" build "$WORK/r26_heads.safetensors" --tokenizer $TOK --bits 4 --out "$WORK/r26.cact"

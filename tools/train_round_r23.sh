#!/bin/sh
# train_round_r23.sh - round r23 (docs/default-model.md), from r22d to the bundled model: one epoch of
# full fine-tuning on 11,579 fresh rows of the r22 recipe's generation, then both heads retrained
# (models/needle-default.cact = $WORK/r23.cact, models/needle-default.safetensors = $WORK/r23_fp16.safetensors).
# Runs tools/train_round_r22.sh first unless $WORK/r22d_fp16.safetensors exists.
#
#   sh tools/train_round_r23.sh [NEEDLE_BINARY] [WORK_DIR] [THREADS]
#
# About 30 minutes on 2 threads (18 minutes of fine-tuning, 2 of data, 8 of heads). The shipped model
# started from the shipped r22d FP16 checkpoint, as this script does.
set -eu
NEEDLE=${1:-build/needle}
WORK=${2:-data/default-model}
THREADS=${3:-2}
TOK=tests/golden/tok8k.model
[ -f "$WORK/r22d_fp16.safetensors" ] || sh tools/train_round_r22.sh "$NEEDLE" "$WORK" "$THREADS"
. tools/round_steps.sh
D="$WORK/r23data"

# demo tools and 3-5 tool subsets (multi-turn .14, follow-up rate 0.7), plus 1-3 tool subsets with many
# follow-up requests (the recipe of r22, more positive and parallel rows, no legacy rows)
python3 tools/make_round_data.py --needle "$NEEDLE" --out "$D/big" --seed 23 --demo-rows 7000 \
    --subset-rows 5000 --max-tokens 640 --spm $TOK --follow-up-rate 0.7 \
    --weights '{"positive":0.40,"parallel":0.14,"multi_turn":0.14,"missing":0.09,"irrelevant":0.09,"negation":0.07,"invalid":0.07}'
python3 tools/make_round_data.py --needle "$NEEDLE" --out "$D/small" --seed 123 --demo-rows 0 \
    --subset-rows 2500 --subset-tools 1-3 --max-tokens 512 --spm $TOK --follow-up-rate 0.9 \
    --weights '{"positive":0.30,"parallel":0.10,"multi_turn":0.35,"missing":0.07,"irrelevant":0.07,"negation":0.06,"invalid":0.05}'
# all training rows shuffled; the round watches 130 validation rows, the confidence head learns from the rest
mix "$D" 23

round r23 "$D/train_mix.jsonl" "$D/val_pick.jsonl" "$WORK/r22d_fp16.safetensors" 2e-4 23
# heads: contrastive (20 epochs), then confidence on the 1,319 validation rows no run watched
heads r23_heads "$WORK/r23.safetensors" "$D/calib.jsonl"
python3 tools/st_to_half.py "$WORK/r23_heads.safetensors" "$WORK/r23_fp16.safetensors"
"$NEEDLE" build "$WORK/r23_heads.safetensors" --tokenizer $TOK --bits 4 --out "$WORK/r23.cact"

#!/usr/bin/env bash
# examples/run.sh SET - generate data for examples/SET/tools.json, fine-tune the bundled model on it,
# build a .cact, and score it (before and after) on the generated test split and on the hand-written
# acceptance suite examples/SET/acceptance.jsonl.
#
#   examples/run.sh home|media|records|wearable|car
#
# Environment (all optional):
#   EXAMPLES=1500    generated rows (80/10/10 train/val/test)      SEED=1
#   WEIGHTS=JSON     category weights for needle generate-data --weights, e.g. '{"positive":0.45}'
#   DATA=DIR         use DIR/{train,val,test}.jsonl as they are instead of generating
#   BASE=...         float checkpoint to start from (default models/needle-default.safetensors)
#   EPOCHS=auto LR=auto BATCH=16 FULL=1 (FULL=0: LoRA)            THREADS=(all cores)
#   QAT=4            --qat-bits: train under the 4-bit build's numerics (none: in float; LoRA: auto)
#   FINETUNE_ARGS=   more needle finetune options, split at spaces (e.g. "--decision-weight 5")
#   OUT_DIR=build/examples/SET                                    NEEDLE=build/needle
# (OUT_DIR, not OUT: tools that run scripts on other machines often set OUT for their own use)
# Needs python3 with faker, num2words and lemminflect (pip install faker num2words lemminflect) for the generator.
set -euo pipefail
cd "$(dirname "$0")/.."
SET=${1:?usage: examples/run.sh home|media|records|wearable|car}
TOOLS=examples/$SET/tools.json
SUITE=examples/$SET/acceptance.jsonl
[ -f "$TOOLS" ] || { echo "examples/run.sh: $TOOLS not found" >&2; exit 2; }
NEEDLE=${NEEDLE:-build/needle}
OUT=${OUT_DIR:-build/examples/$SET}
EXAMPLES=${EXAMPLES:-1500}
SEED=${SEED:-1}
EPOCHS=${EPOCHS:-auto}
LR=${LR:-auto}
BATCH=${BATCH:-16}
FULL=${FULL:-1}
TOK=tests/golden/tok8k.model
BUNDLED=models/needle-default.cact
BASE=${BASE:-models/needle-default.safetensors}
THREADS_FLAG=${THREADS:+--threads $THREADS}

[ -x "$NEEDLE" ] || make -j"$(nproc)" "$NEEDLE"
mkdir -p "$OUT"

if [ -n "${DATA:-}" ]; then
    echo "== 1. data from $DATA"
    mkdir -p "$OUT/data"
    for f in train val test; do cp "$DATA/$f.jsonl" "$OUT/data/$f.jsonl"; done
else
    echo "== 1. generate $EXAMPLES rows for $TOOLS"
    "$NEEDLE" generate-data --tools "$TOOLS" --examples "$EXAMPLES" --seed "$SEED" --out "$OUT/data" \
        ${WEIGHTS:+--weights "$WEIGHTS"}
fi

score() {  # score MODEL LABEL
    echo "-- $2: generated test split ($OUT/data/test.jsonl)"
    python3 tools/eval_by_category.py --needle "$NEEDLE" --model "$1" "$OUT/data/test.jsonl" --json "$OUT/$2.test.json"
    echo "-- $2: hand-written acceptance suite ($SUITE)"
    python3 tools/eval_by_category.py --needle "$NEEDLE" --model "$1" --tools "$TOOLS" "$SUITE" --json "$OUT/$2.acceptance.json"
    echo "-- $2: the same suite answered as \`needle run --strict\` (calls on values the request does not say, or on a negated request, withheld)"
    python3 tools/eval_by_category.py --needle "$NEEDLE" --model "$1" --tools "$TOOLS" "$SUITE" --strict \
        --json "$OUT/$2.acceptance-strict.json"
}

echo "== 2. the bundled model before fine-tuning"
score "$BUNDLED" before

echo "== 3. fine-tune from $BASE"
if [ ! -f "$BASE" ]; then
    echo "examples/run.sh: $BASE not found: fine-tuning needs the float checkpoint of the bundled model," >&2
    echo "  which this checkout does not ship yet (issue 18). Set BASE=CKPT.safetensors to start elsewhere." >&2
    exit 1
fi
if [ "$FULL" = 1 ]; then MODE="--full --qat-bits ${QAT:-4}"; else MODE="--qat-bits ${QAT:-auto}"; fi
start=$(date +%s)
# shellcheck disable=SC2086
# val.jsonl for validation (early stopping, best weights kept); step 5 scores the test split
"$NEEDLE" finetune "$OUT/data/train.jsonl" --val "$OUT/data/val.jsonl" --checkpoint "$BASE" --tokenizer "$TOK" \
    --out "$OUT/finetuned.safetensors" $MODE --epochs "$EPOCHS" --lr "$LR" --batch-size "$BATCH" --bucket batch \
    --max-len 1024 --seed "$SEED" --log-every 20 $THREADS_FLAG ${FINETUNE_ARGS:-}
echo "fine-tuning took $(( $(date +%s) - start )) s"

echo "== 4. build $OUT/$SET.cact"
if [ "$FULL" = 1 ]; then
    "$NEEDLE" build "$OUT/finetuned.safetensors" --tokenizer "$TOK" --bits 4 --out "$OUT/$SET.cact"
else  # a LoRA adapter: merged into its base, at the numerics it was trained under (--qat-bits)
    "$NEEDLE" build "$BASE" --lora "$OUT/finetuned.safetensors" --tokenizer "$TOK" --out "$OUT/$SET.cact"
fi

echo "== 5. the fine-tuned model"
score "$OUT/$SET.cact" after
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for split in ("test", "acceptance", "acceptance-strict"):
    b = json.load(open("%s/before.%s.json" % (out, split)))
    a = json.load(open("%s/after.%s.json" % (out, split)))
    print("%-17s pass rate %.1f%% -> %.1f%%, no-call failures (missing/negation/invalid) %d -> %d" %
          (split, 100 * b["pass_rate"], 100 * a["pass_rate"], b["nocall_failures"], a["nocall_failures"]))
PY

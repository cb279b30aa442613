#!/bin/sh
# train_round_r16.sh - round r16 (docs/default-model.md): r15 + its confidence head, fine-tuned on r14
# generation rows that no round used, mostly demo-tool calls, then the confidence head again.
# r16 is the bundled model (models/needle-default.cact = $WORK/r16.cact, models/needle-default.safetensors
# = $WORK/r16_fp16.safetensors); the contrastive head is p12's (retrained on r16 it ranked the right tool
# in the top five less often: 0.965 vs 0.992 over the 40-tool catalogue).
# Runs tools/train_round_r15.sh first unless $WORK/r15_heads.safetensors exists.
#
#   sh tools/train_round_r16.sh [NEEDLE_BINARY] [WORK_DIR] [THREADS]
#
# Writes $WORK/r16_heads.safetensors, $WORK/r16_fp16.safetensors and $WORK/r16.cact.
set -eu
NEEDLE=${1:-build/needle}
WORK=${2:-data/default-model}
THREADS=${3:-1}
TOK=tests/golden/tok8k.model
[ -f "$WORK/r15_heads.safetensors" ] || sh tools/train_round_r15.sh "$NEEDLE" "$WORK" "$THREADS"
python3 - "$WORK/r14data" <<'PY'
import json, random, sys
d = sys.argv[1]
demo = {"set_lights", "set_thermostat", "set_alarm", "send_message", "get_weather"}
used = set(open(d + "/r14.jsonl").readlines()) | set(open(d + "/r15.jsonl").readlines())
rest = [l for l in open(d + "/train.jsonl") if l not in used]
want = {"positive": 2000, "parallel": 600, "multi_turn": 300, "missing": 150, "negation": 150,
        "invalid": 150, "irrelevant": 150}
rng = random.Random(16)
rng.shuffle(rest)
pick, subset = [], []
for l in rest:
    r = json.loads(l)
    if "category" not in r:
        continue
    if {t["name"] for t in r["tools"]} == demo:
        if want.get(r["category"], 0) > 0:
            want[r["category"]] -= 1
            pick.append(l)
    elif r.get("answers") and len(subset) < 400:
        subset.append(l)
pick += subset
rng.shuffle(pick)
open(d + "/r16.jsonl", "w").writelines(pick)
print("r16 rows:", len(pick), "short of:", {k: v for k, v in want.items() if v})
PY
"$NEEDLE" finetune --full --tokenizer $TOK --batch-size 16 --epochs 1 --log-every 20 --threads "$THREADS" \
    "$WORK/r14data/r16.jsonl" --val "$WORK/r14data/r14_val.jsonl" --checkpoint "$WORK/r15_heads.safetensors" \
    --out "$WORK/r16.safetensors" --max-len 512 --bucket batch --lr 3e-4 --seed 16 --eval-every 1000 \
    --patience 0 --keep-last
"$NEEDLE" train-heads --model "$WORK/r16.safetensors" --tokenizer $TOK "$WORK/r14data/calib.jsonl" \
    --out "$WORK/r16_heads.safetensors" --only confidence --epochs 20 --lr 2e-3 --max-cell-mb 6000
python3 tools/st_to_half.py "$WORK/r16_heads.safetensors" "$WORK/r16_fp16.safetensors"
"$NEEDLE" build "$WORK/r16_heads.safetensors" --tokenizer $TOK --bits 4 --out "$WORK/r16.cact"

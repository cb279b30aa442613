#!/bin/sh
# train_round_r15.sh - rounds r13, r14 and r15 on top of the bundled p12 model (docs/default-model.md):
# r15 itself was not shipped (it failed two model-quality tests of `make test`: see the docs); the
# bundled model is r16, which tools/train_round_r16.sh trains from it.  Needs WORK from
# tools/train_default_model.sh (its $WORK/heads/with_heads.safetensors is p12).
#
#   sh tools/train_round_r15.sh [NEEDLE_BINARY] [WORK_DIR] [THREADS]
#
# Writes $WORK/r15_heads.safetensors, $WORK/r15_fp16.safetensors and $WORK/r15.cact; one core nice'd
# took about 70 + 39 + 9 minutes of wall time for the three runs on a loaded machine, plus 7 for the head.
set -eu
NEEDLE=${1:-build/needle}
WORK=${2:-data/default-model}
THREADS=${3:-1}
TOK=tests/golden/tok8k.model
H="$WORK/heads"
FT="$NEEDLE finetune --full --tokenizer $TOK --batch-size 16 --epochs 1 --log-every 20 --threads $THREADS"

# p12 at 4 bits: r13 started from this file (dequantised), as it did.
"$NEEDLE" build "$H/with_heads.safetensors" --tokenizer $TOK --bits 4 --out "$WORK/p12.cact"

# Rounds r13 and r14 (docs/default-model.md): the p12 model fine-tuned on `needle generate-data` rows
#    (tools/make_round_data.py: the demo tools and random 3-5 tool subsets of the catalogue, every
#    behaviour category), one core, nice'd.  r13 started from the dequantised 4-bit p12 file (the float
#    p12 checkpoint was not kept) and its rows came from the generator as of commit ebe3472 (date-only
#    system facts, no messaging verbs), so running this today gives other r13 rows.
python3 tools/make_round_data.py --out "$WORK/r13data" --seed 13
head -n 6200 "$WORK/r13data/train.jsonl" > "$WORK/r13.jsonl"
$FT "$WORK/r13.jsonl" --checkpoint "$WORK/p12.cact" --out "$WORK/r13.safetensors" \
    --max-len 512 --bucket batch --lr 5e-4 --val-split 0.03 --seed 13
# r14: calls are 58% of the rows (r13: 45%), system facts of every kind on every category, messaging verbs;
# 3900 demo-tool rows, 1000 subset rows, 600 gen_data rows (these hold the README example).
python3 tools/make_round_data.py --out "$WORK/r14data" --seed 14 --demo-rows 14000 --subset-rows 10000 \
    --legacy-rows 2500 --weights '{"positive":0.38,"parallel":0.12,"multi_turn":0.08,"missing":0.11,"irrelevant":0.13,"negation":0.09,"invalid":0.09}'
python3 - "$WORK/r14data" <<'PY'
import json, random, sys
d = sys.argv[1]
demo = {"set_lights", "set_thermostat", "set_alarm", "send_message", "get_weather"}
rows = open(d + "/train.jsonl").readlines()
D = [l for l in rows if "category" in json.loads(l) and {t["name"] for t in json.loads(l)["tools"]} == demo]
S = [l for l in rows if "category" in json.loads(l) and l not in set(D)]
L = [l for l in rows if "category" not in json.loads(l)]
pick = D[:3900] + S[:1000] + L[:600] + [l for l in L[600:] if '"turn off the kitchen lights"' in l]
rng = random.Random(14)
rng.shuffle(pick)
open(d + "/r14.jsonl", "w").writelines(pick)
val = open(d + "/val.jsonl").readlines()
rng.shuffle(val)
open(d + "/r14_val.jsonl", "w").writelines(val[:80])
rest = [l for l in val[80:]]
D = [l for l in rest if {t["name"] for t in json.loads(l)["tools"]} == demo]
S = [l for l in rest if l not in set(D)]
r2 = random.Random(7)
r2.shuffle(D)
r2.shuffle(S)
calib = D[:700] + S[:300]
r2.shuffle(calib)
open(d + "/calib.jsonl", "w").writelines(calib)
PY
$FT "$WORK/r14data/r14.jsonl" --val "$WORK/r14data/r14_val.jsonl" --checkpoint "$WORK/r13.safetensors" \
    --out "$WORK/r14.safetensors" --max-len 512 --bucket batch --lr 4e-4 --seed 14 --eval-every 1000 \
    --patience 0 --keep-last
# r15: from r14, fresh rows of the same generation, call-heavy (1050 demo-tool call rows, 350 demo-tool
# no-call rows, 200 subset rows), because r14 refused plain demo-tool requests under a date fact.
python3 - "$WORK/r14data" <<'PY'
import json, random, sys
d = sys.argv[1]
demo = {"set_lights", "set_thermostat", "set_alarm", "send_message", "get_weather"}
used = set(open(d + "/r14.jsonl").readlines())
rest = [l for l in open(d + "/train.jsonl") if l not in used]
R = [json.loads(l) for l in rest]
calls = [l for l, r in zip(rest, R) if r.get("answers") and "category" in r and {t["name"] for t in r["tools"]} == demo]
nocall = [l for l, r in zip(rest, R) if not r.get("answers") and "category" in r and {t["name"] for t in r["tools"]} == demo]
sub = [l for l, r in zip(rest, R) if "category" in r and {t["name"] for t in r["tools"]} != demo]
rng = random.Random(15)
for x in (calls, nocall, sub):
    rng.shuffle(x)
pick = calls[:1050] + nocall[:350] + sub[:200]
rng.shuffle(pick)
open(d + "/r15.jsonl", "w").writelines(pick)
PY
$FT "$WORK/r14data/r15.jsonl" --val "$WORK/r14data/r14_val.jsonl" --checkpoint "$WORK/r14.safetensors" \
    --out "$WORK/r15.safetensors" --max-len 512 --bucket batch --lr 3e-4 --seed 15 --eval-every 1000 \
    --patience 0 --keep-last
# the confidence head again (its labels depend on the body), on val rows the body never trained on
"$NEEDLE" train-heads --model "$WORK/r15.safetensors" --tokenizer $TOK "$WORK/r14data/calib.jsonl" \
    --out "$WORK/r15_heads.safetensors" --only confidence --epochs 20 --lr 2e-3 --max-cell-mb 6000
python3 tools/st_to_half.py "$WORK/r15_heads.safetensors" "$WORK/r15_fp16.safetensors"
"$NEEDLE" build "$WORK/r15_heads.safetensors" --tokenizer $TOK --bits 4 --out "$WORK/r15.cact"

# round_steps.sh - the steps every fine-tuning round of the bundled model shares (sourced by
# tools/train_round_r22.sh and tools/train_round_r23.sh, which set NEEDLE, WORK, THREADS and TOK).

# one epoch of full fine-tuning: NAME DATA VAL FROM LR SEED [EVAL_EVERY, default 200]
round() {
    "$NEEDLE" finetune --full --tokenizer $TOK --batch-size 16 --epochs 1 --log-every 20 --threads "$THREADS" \
        "$2" --val "$3" --checkpoint "$4" --out "$WORK/$1.safetensors" --max-len 512 --bucket batch --lr "$5" \
        --seed "$6" --eval-every "${7:-200}" --patience 0 --keep-last --qat-bits none
}
# the validation rows a round watches (the first 120) and the rest, for the confidence head
split_val() {
    head -n 120 "$1/val.jsonl" > "$1/val_pick.jsonl"
    tail -n +121 "$1/val.jsonl" > "$1/calib.jsonl"
}
# contrastive head (docs/heads.md, 20 epochs), then the confidence head on CALIB: NAME FROM CALIB
heads() {
    H="$WORK/heads"
    mkdir -p "$H"
    [ -f "$H/retrieval/train.jsonl" ] ||
        python3 tools/gen_data.py --out "$H/retrieval" --seed 4243 --train 10000 --val 10 --test 10 --max-tools 5
    "$NEEDLE" train-heads --model "$2" --tokenizer $TOK "$H/retrieval/train.jsonl" \
        --out "$WORK/$1_contrastive.safetensors" --only contrastive --batch 128 --epochs 20 --lr 1e-2 --holdout 0.05
    "$NEEDLE" train-heads --model "$WORK/$1_contrastive.safetensors" --tokenizer $TOK "$3" \
        --out "$WORK/$1.safetensors" --only confidence --epochs 20 --lr 2e-3 --max-cell-mb 6000
}
# mix DIR SEED: DIR/big and DIR/small (make_round_data.py outputs) into DIR/train_mix.jsonl (both training
# splits, shuffled with SEED), DIR/val_pick.jsonl (the first 90 + 40 validation rows: the run's early
# stopping) and DIR/calib.jsonl (the other validation rows: the confidence head)
mix() {
    python3 - "$1" "$2" <<'PY'
import random, sys
d, seed = sys.argv[1], int(sys.argv[2])
rows = open(d + "/big/train.jsonl").readlines() + open(d + "/small/train.jsonl").readlines()
random.Random(seed).shuffle(rows)
open(d + "/train_mix.jsonl", "w").writelines(rows)
vb, vs = open(d + "/big/val.jsonl").readlines(), open(d + "/small/val.jsonl").readlines()
open(d + "/val_pick.jsonl", "w").writelines(vb[:90] + vs[:40])
open(d + "/calib.jsonl", "w").writelines(vb[90:] + vs[40:])
PY
}

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

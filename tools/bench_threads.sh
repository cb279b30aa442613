#!/bin/sh
# bench_threads.sh - the 2-thread / 1-thread speed ratio of `needle bench`,
# decode and prefill, with CPU-pinned runs (issue 15: ">= 1.7x on a quiet
# machine").  Runs are interleaved (1, 2, 1, 2, ...) so a change in the
# machine's load hits both alike; the best run of each wins (noise only ever
# slows a run down).  Only meaningful on a quiet machine: it prints the load
# average and each process's CPU use so a shared machine shows itself.
#
# usage: tools/bench_threads.sh MODEL.cact [REPEATS (5)] [PROMPT (512)] [GEN (64)] [CPUS (0,1)]
#   NEEDLE=path/to/needle overrides build/needle.
set -eu
model=${1:?usage: tools/bench_threads.sh MODEL.cact [REPEATS] [PROMPT] [GEN] [CPUS]}
reps=${2:-5}
prompt=${3:-512}
gen=${4:-64}
cpus=${5:-0,1}
needle=${NEEDLE:-build/needle}
one=${cpus%%,*}
command -v taskset >/dev/null || { echo "bench_threads.sh: taskset not found (util-linux)" >&2; exit 1; }
[ -f "$model" ] || { echo "bench_threads.sh: $model: no such file" >&2; exit 1; }

field() { printf '%s\n' "$1" | grep -o "\"$2\":[0-9.]*" | head -n 1 | cut -d: -f2; }
best() { awk 'BEGIN{b=0} {if ($1+0 > b) b=$1+0} END{print b}'; }
least() { awk 'BEGIN{b=-1} {if (b < 0 || $1+0 < b) b=$1+0} END{print b}'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ "$i" -lt "$reps" ]; do
    for t in 1 2; do
        if [ "$t" = 1 ]; then pin=$one; else pin=$cpus; fi
        out=$(taskset -c "$pin" "$needle" bench --model "$model" --prompt-tokens "$prompt" --gen-tokens "$gen" --threads "$t")
        field "$out" decode_tps >>"$tmp/decode$t"
        field "$out" prefill_tps >>"$tmp/prefill$t"
        awk -v a="$(field "$out" load_ms)" -v b="$(field "$out" first_token_ms)" 'BEGIN{print a + b}' >>"$tmp/first$t"
        printf 'run %d threads %d (cpus %s): prefill %s tok/s (cpu %s ms), decode %s tok/s (cpu %s ms), load + first token %s + %s ms\n' \
            "$i" "$t" "$pin" "$(field "$out" prefill_tps)" "$(field "$out" prefill_cpu_ms)" "$(field "$out" decode_tps)" \
            "$(field "$out" decode_cpu_ms)" "$(field "$out" load_ms)" "$(field "$out" first_token_ms)"
    done
    i=$((i + 1))
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
for k in prefill decode; do
    b1=$(best <"$tmp/${k}1")
    b2=$(best <"$tmp/${k}2")
    awk -v k="$k" -v a="$b1" -v b="$b2" 'BEGIN{printf "%-8s best 1 thread %8.1f tok/s, 2 threads %8.1f tok/s, ratio %.2fx\n", k, a, b, (a > 0 ? b / a : 0)}'
done
f1=$(least <"$tmp/first1")
f2=$(least <"$tmp/first2")
echo "load + first token (32-token prompt): best 1 thread $f1 ms, 2 threads $f2 ms"

#!/bin/sh
# bench_train_v3.sh - one Needle 3 LoRA training step at the reference's
# default geometry (d 768, 20 layers, vocab 16384; batch 16 x 128): the
# reference's own JAX step (tools/bench_train_jax.py --needle3, run in its
# venv) and ours (build/tools/train_bench needle3), back to back in one run
# on the same CPU, with the same thread count and the same `nice`.
#
#   tools/bench_train_v3.sh [B=16] [T=128] [STEPS=3]
#
# Prints both JSON lines, the load average before and after, and the ratio
# JAX step / our step (> 1: ours is faster), by wall time and by process CPU
# time (the second is the steadier one on a shared machine).
# Needs `make build/tools/train_bench` and the venv with cactus-needle 3.x
# (NEEDLE3_VENV, default /opt/venv-n3).
set -eu
B=${1:-16} T=${2:-128} STEPS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${NEEDLE3_VENV:-/opt/venv-n3}
BUILD=${NEEDLE_BUILD:-build}
THREADS=$(nproc)
[ -x "$ROOT/$BUILD/tools/train_bench" ] || { echo "bench_train_v3.sh: run make $BUILD/tools/train_bench first" >&2; exit 1; }
[ -x "$VENV/bin/python" ] || { echo "bench_train_v3.sh: no reference venv at $VENV" >&2; exit 1; }
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $THREADS threads; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
jax=$(cd "$ROOT" && NEEDLE_TELEMETRY=0 HF_HUB_OFFLINE=1 nice "$VENV/bin/python" tools/bench_train_jax.py --needle3 "$B" "$T" "$STEPS" | tail -1)
ours=$(nice "$ROOT/$BUILD/tools/train_bench" needle3 "$B" "$T" "$STEPS" "$THREADS" | tail -1)
echo "$jax"
echo "$ours"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$jax" "$ours" <<'PY'
import json, sys
j, o = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("ours / JAX: %.2fx faster by wall time (%.3f s vs %.3f s), %.2fx by CPU time (%.3f s vs %.3f s)"
      % (j["step_s"] / o["step_s"], o["step_s"], j["step_s"],
         j["step_cpu_s"] / o["step_cpu_s"], o["step_cpu_s"], j["step_cpu_s"]))
PY

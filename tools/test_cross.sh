#!/bin/sh
# test_cross.sh BUILD RUNNER... - the C test binaries of a cross build (make test-arm64), each
# run through RUNNER (e.g. qemu-aarch64) from the repository root, NEEDLE_TEST_JOBS (default: the
# number of CPUs) at a time; prints each test's result, wall and CPU seconds and ends with "N passed,
# N failed".  Every tests/test_*.c binary runs (the whole suite, as make test runs it natively): a
# new test needs no line here.  The slowest ones under emulation (SLOW_FIRST, longest first, by
# the CPU seconds this script prints) start first, so two jobs finish together instead of one long
# test running alone at the end.
# ARM64_QUICK=1 (make test-arm64-quick, a quicker check while developing) leaves out QUICK_SKIP and
# says so: its summary line is not the suite's result.  CI runs the whole suite (make test-arm64).
#
# Keeping the suite cheap (CI gives the whole AArch64 step about 15 minutes on 2 cores): qemu-aarch64
# runs a test 30-100 times slower than the native AVX-512 build, so a test that takes 5 CPU-seconds
# natively can take several CPU-minutes here.  A training test's cost is steps x padded tokens
# (x rows decoded, for heads): pick the smallest rows, max_len, batch and step count at which the
# property checked still means something (bit-exact resume, the best step, loss going down), share
# one trained fixture between checks, and chain runs instead of repeating them from scratch.  Use
# the same sizes natively and here.  After adding a slow test, run make test-arm64 and put it in
# SLOW_FIRST at its place by CPU seconds.
BUILD=$1
shift
SLOW_FIRST="test_train_resume test_train_v3 test_finetune_workflow test_api test_tool_index test_retrieval test_agent test_heads_train test_gemm test_parity"
QUICK_SKIP="test_train_resume test_train test_api_train test_heads_train test_train_grad test_finetune_workflow test_retrieval test_tool_index"
jobs=${NEEDLE_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
logs=$(mktemp -d /tmp/needle-cross.XXXXXX)
trap 'rm -rf "$logs"' EXIT
skipped=""
list=""
for name in $SLOW_FIRST; do [ -x "$BUILD/tests/$name" ] && list="$list $BUILD/tests/$name"; done
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    case " $SLOW_FIRST " in *" $name "*) continue ;; esac
    list="$list $t"
done
if [ -n "$ARM64_QUICK" ]; then
    kept=""
    for t in $list; do
        name=$(basename "$t")
        case " $QUICK_SKIP " in
        *" $name "*) skipped="$skipped $name" ;;
        *) kept="$kept $t" ;;
        esac
    done
    list=$kept
fi
suite_start=$(date +%s)
# one test per job: its output, then "rc=N seconds=N" on the last line
export logs
printf '%s\n' $list | xargs -P "$jobs" -I{} sh -c '
    start=$(date +%s); out=$("$@" {} 2>&1); rc=$?
    log="$logs/$(basename {}).log"
    times > "$log.times" # not in a pipe: a subshell would count its own (no) children
    cpu=$(tail -n 1 "$log.times" | awk "{ n = split(\$1 \" \" \$2, f, /[ ms]+/); t = 0;
        for (i = 1; i + 1 <= n; i += 2) t += f[i] * 60 + f[i + 1]; printf \"%d\", t + 0.5 }")
    printf "%s\nrc=%d seconds=%d cpu=%s\n" "$out" $rc $(($(date +%s) - start)) "$cpu" > "$log"' sh "$@"
passed=0
failed=0
for t in $list; do
    name=$(basename "$t")
    log="$logs/$name.log"
    tail_line=$(tail -n 1 "$log" 2>/dev/null)
    rc=$(echo "$tail_line" | sed -n 's/^rc=\([0-9]*\) .*/\1/p')
    secs=$(echo "$tail_line" | sed -n 's/.*seconds=\([0-9]*\).*/\1/p')
    cpu=$(echo "$tail_line" | sed -n 's/.*cpu=\([0-9]*\).*/\1/p')
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" 2>/dev/null | tail -n 1)
    grep -E '^(not ok|  FAIL)' "$log" 2>/dev/null | head -n 20
    echo "== $name: ${line:-no summary (exit ${rc:-?})} (${secs:-?} s, ${cpu:-?} CPU-s)"
    if [ -z "$line" ]; then failed=$((failed + 1)); continue; fi
    f=$(echo "$line" | cut -d' ' -f3)
    passed=$((passed + $(echo "$line" | cut -d' ' -f1)))
    failed=$((failed + f))
    if [ "${rc:-1}" -ne 0 ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); fi
done
echo "suite wall time: $(($(date +%s) - suite_start)) s with $jobs jobs"
[ -n "$skipped" ] && echo "ARM64_QUICK: NOT RUN (a partial suite, not the suite's result):$skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

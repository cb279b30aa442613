#!/bin/sh
# test_isa.sh BUILD - the C test suite (golden logits included) once per kernel path
# this binary carries and this CPU runs, each forced with NEEDLE_ISA (make test-isa).
# The Python oracle tests run once, in `make test`, on the automatic path.  TEST_ISA_SKIP_AUTO=1
# leaves out the path chosen automatically (CI: `make test` has just run the suite on it).
# Ends with "N passed, N failed" over all paths; exits non-zero if any failed.
BUILD=${1:-build}
paths=$("$BUILD/needle" info | python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["kernel_paths"] if p["runs_here"]))')
if [ -z "$paths" ]; then echo "test_isa: no kernel path listed by $BUILD/needle info"; echo "0 passed, 1 failed"; exit 1; fi
if [ -n "$TEST_ISA_SKIP_AUTO" ]; then
    auto=$(env -u NEEDLE_ISA "$BUILD/needle" info | python3 -c 'import json,sys; print(json.load(sys.stdin)["kernel_path"])')
    echo "=== kernel path $auto: run by make test (TEST_ISA_SKIP_AUTO), not repeated here"
    paths=$(for p in $paths; do [ "$p" = "$auto" ] || echo "$p"; done)
fi
passed=0
failed=0
for p in $paths; do
    echo "=== kernel path $p (NEEDLE_ISA=$p)"
    start=$(date +%s)
    out=$(NEEDLE_ISA=$p NEEDLE_SKIP_PYTHON=1 sh tools/run_tests.sh "$BUILD" 2>&1)
    line=$(printf '%s\n' "$out" | tail -n 1)
    printf '%s\n' "$out" | grep -E '^(not ok|  FAIL|  CRASH)' | head -n 40
    echo "    $p: $line ($(($(date +%s) - start)) s)"
    p_n=$(echo "$line" | grep -oE '^[0-9]+ passed' | cut -d' ' -f1)
    f_n=$(echo "$line" | grep -oE '[0-9]+ failed' | cut -d' ' -f1)
    if [ -z "$p_n" ]; then failed=$((failed + 1)); continue; fi
    passed=$((passed + p_n))
    failed=$((failed + f_n))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

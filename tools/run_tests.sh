#!/bin/sh
# Run every test binary in BUILD/tests (NEEDLE_TEST_JOBS at a time) and every
# tests/cli/test_*.sh script (from the repository root) and the Python
# oracle tests when their packages are installed; print one closing line
# "N passed, N failed" and exit non-zero if anything failed or crashed.
BUILD=${1:-build}
passed=0
failed=0
# Count one test's output (its printed lines, then the exit status): its last
# "N passed, N failed" line adds to the totals; no such line, or a non-zero exit
# after reporting no failure, counts as a failure.
count() { # count NAME RC OUTPUT
    printf '%s\n' "$3" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
    line=$(printf '%s\n' "$3" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "  CRASH or no summary from $1 (exit $2)"
        failed=$((failed + 1))
        return
    fi
    p=$(echo "$line" | cut -d' ' -f1)
    f=$(echo "$line" | cut -d' ' -f3)
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "  $1 exited $2 after reporting no failure"
        failed=$((failed + 1))
    fi
}
# The C test binaries, NEEDLE_TEST_JOBS at a time (default: the number of CPUs;
# each test's files carry its own name, so tests never share one), longest
# first so that the jobs end together; each one's output is printed whole, in
# name order.  Then the CLI scripts (tests/cli/test_*.sh, given the build
# directory), one at a time.
jobs=${NEEDLE_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
SLOW_FIRST="test_heads_train test_finetune_workflow test_agent test_train_resume test_context_budget test_api test_train_v3"
logs=$(mktemp -d "${TMPDIR:-/tmp}/needle-tests.XXXXXX")
trap 'rm -rf "$logs"' EXIT
list=""
for name in $SLOW_FIRST; do [ -x "$BUILD/tests/$name" ] && list="$list $BUILD/tests/$name"; done
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    case " $SLOW_FIRST " in *" $(basename "$t") "*) continue ;; esac
    list="$list $t"
done
export logs
[ -n "$list" ] && printf '%s\n' $list | xargs -P "$jobs" -I{} sh -c \
    'out=$({} 2>&1); rc=$?; printf "%s\n" "$out" > "$logs/$(basename {}).out"; echo $rc > "$logs/$(basename {}).rc"'
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    echo "== $name"
    count "$name" "$(cat "$logs/$name.rc" 2>/dev/null || echo 1)" "$(cat "$logs/$name.out" 2>/dev/null)"
done
for t in tests/cli/test_*.sh; do
    [ -f "$t" ] || continue
    echo "== $(basename "$t")"
    out=$(sh "$t" "$BUILD" 2>&1)
    count "$(basename "$t")" $? "$out"
done
# the layer rule (README "Layout"): includes point down; the check's own self-test first
echo "== layers"
if sh tools/check_layers.sh --self-test && sh tools/check_layers.sh .; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
if [ -d tests/python ] && [ -z "$NEEDLE_SKIP_PYTHON" ]; then
    if python3 -c 'import pytest, numpy' 2>/dev/null; then
        echo "== python oracle tests"
        out=$(NEEDLE_BUILD="$BUILD" python3 -m pytest -q -rs tests/python 2>&1)
        rc=$?
        printf '%s\n' "$out" | tail -n 15
        p=$(printf '%s\n' "$out" | grep -oE '[0-9]+ passed' | tail -n 1 | cut -d' ' -f1)
        f=$(printf '%s\n' "$out" | grep -oE '[0-9]+ failed' | tail -n 1 | cut -d' ' -f1)
        e=$(printf '%s\n' "$out" | grep -oE '[0-9]+ error' | tail -n 1 | cut -d' ' -f1)
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0} + ${e:-0}))
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ] && [ -z "$f$e" ]; then failed=$((failed + 1)); fi
    else
        echo "== python oracle tests: pytest/numpy not installed, not run (not counted)"
    fi
fi
# The Python package: `pip install .` into a fresh virtual environment under
# BUILD (offline: --no-index; the build backend needs nothing from PyPI), then
# its pytest suite.  The venv sees the system's site-packages only for pytest,
# numpy and pydantic; the package itself comes from the fresh install.
if [ -d python/tests ] && [ -z "$NEEDLE_SKIP_PYTHON" ]; then
    venv="$BUILD/python-venv"
    rm -rf "$venv"
    if ! python3 -m venv --system-site-packages "$venv" >/dev/null 2>&1 || ! [ -x "$venv/bin/python" ]; then
        echo "== python package: cannot create a virtual environment (install python3-venv), not run (not counted)"
    elif ! "$venv/bin/python" -c 'import pytest' 2>/dev/null; then
        echo "== python package: pytest not installed, not run (not counted)"
    else
        echo "== python package (pip install . into $venv, pytest python/tests)"
        if "$venv/bin/python" -m pip install -q --no-index . > "$BUILD/python-install.log" 2>&1; then
            out=$("$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests 2>&1)
            rc=$?
            printf '%s\n' "$out" | grep -E -v '^[.sFEx]+ *(\[ *[0-9]+%\])?$' | tail -n 40
            p=$(printf '%s\n' "$out" | grep -oE '[0-9]+ passed' | tail -n 1 | cut -d' ' -f1)
            f=$(printf '%s\n' "$out" | grep -oE '[0-9]+ failed' | tail -n 1 | cut -d' ' -f1)
            e=$(printf '%s\n' "$out" | grep -oE '[0-9]+ error' | tail -n 1 | cut -d' ' -f1)
            passed=$((passed + ${p:-0}))
            failed=$((failed + ${f:-0} + ${e:-0}))
            if [ "$rc" -ne 0 ] && [ -z "$f$e" ]; then failed=$((failed + 1)); fi
        else
            tail -n 20 "$BUILD/python-install.log"
            echo "  pip install . FAILED (log: $BUILD/python-install.log)"
            failed=$((failed + 1))
        fi
    fi
fi
# `needle serve` against a live server on a free loopback port: the openai client,
# headless Chromium on the playground, limits, and a bounded load test (tests/server/).
if [ -z "$NEEDLE_SKIP_PYTHON" ]; then
    if ! "$BUILD/needle" serve --help >/dev/null 2>&1; then
        echo "== server tests: $BUILD/needle was built without libmicrohttpd (apt-get install libmicrohttpd-dev), not run (not counted)"
    elif ! python3 -c 'import pytest' 2>/dev/null; then
        echo "== server tests: pytest not installed, not run (not counted)"
    else
        files="tests/server/test_limits.py tests/server/test_load.py tests/server/test_strict.py"
        if python3 -c 'import openai' 2>/dev/null; then files="$files tests/server/test_openai_client.py"
        else echo "== server tests: the openai package is not installed (pip install openai): client tests not run (not counted)"; fi
        if python3 -c 'import selenium' 2>/dev/null && [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
            files="$files tests/server/test_playground.py"
        else echo "== server tests: selenium, chromium or chromium-driver missing: playground test not run (not counted)"; fi
        echo "== server tests (needle serve)"
        rm -f "$BUILD/server_load.json"
        out=$(NEEDLE_BUILD="$BUILD" python3 -m pytest -q -p no:cacheprovider $files 2>&1)
        rc=$?
        printf '%s\n' "$out" | tail -n 15
        [ -f "$BUILD/server_load.json" ] && echo "  load test: $(cat "$BUILD/server_load.json")"
        p=$(printf '%s\n' "$out" | grep -oE '[0-9]+ passed' | tail -n 1 | cut -d' ' -f1)
        f=$(printf '%s\n' "$out" | grep -oE '[0-9]+ failed' | tail -n 1 | cut -d' ' -f1)
        e=$(printf '%s\n' "$out" | grep -oE '[0-9]+ error' | tail -n 1 | cut -d' ' -f1)
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0} + ${e:-0}))
        if [ "$rc" -ne 0 ] && [ -z "$f$e" ]; then failed=$((failed + 1)); fi
    fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

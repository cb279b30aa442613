#!/bin/sh
# time_long_inputs.sh - the oversized inputs of issue 20 (D2) at full size, each
# run once through `needle run` with the bundled model under /usr/bin/time -v:
# prints the outcome (the error line or the call), wall seconds and peak RSS.
#   sh tests/long/time_long_inputs.sh [BUILD]      (make long-inputs)
# Timing is reported, not asserted: tests/cli/test_cli_long_inputs.sh checks
# the behaviour on the small versions in `make test`.
BUILD=${1:-build}
NEEDLE="$(pwd)/$BUILD/needle"
T=$(mktemp -d /tmp/needle-long-inputs.XXXXXX)
trap 'rm -rf "$T"' EXIT
python3 tests/long/gen_long_inputs.py "$T" || exit 1
[ -x /usr/bin/time ] || { echo "time_long_inputs: /usr/bin/time is needed (apt-get install time)"; exit 1; }

measure() { # LABEL, then the command; stdin from $STDIN when set
    label=$1
    shift
    if [ -n "$STDIN" ]; then /usr/bin/time -v -o "$T/time" "$@" < "$STDIN" > "$T/out" 2>&1
    else /usr/bin/time -v -o "$T/time" "$@" > "$T/out" 2>&1; fi
    rc=$?
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$T/time")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$T/time")
    printf '%-26s exit %d  wall %-8s peak RSS %6d KB  %s\n' "$label" "$rc" "$wall" "$rss" \
        "$(head -c 200 "$T/out" | head -n 1)"
}

echo "inputs: $(cd "$T" && ls -l | awk 'NR > 1 {printf "%s %d B; ", $9, $5}')"
STDIN= measure "tools 37 KB anyOf x1000" "$NEEDLE" run --tools "$T/anyof_1000.json" "pick option 5"
STDIN= measure "tools 10,000 properties" "$NEEDLE" run --tools "$T/props_10000.json" "fill the form"
STDIN= measure "tool name 100 KB" "$NEEDLE" run --tools "$T/long_name.json" "call it"
STDIN= measure "description 10 MB" "$NEEDLE" run --tools "$T/long_desc.json" "describe it"
STDIN= measure "--system 100 KB" "$NEEDLE" run --system "$(cat "$T/system_100kb.txt")" "turn off the lights"
STDIN="$T/query_1mb.txt" measure "query 1 MB (stdin)" "$NEEDLE" run
STDIN= measure "4,000 tools" "$NEEDLE" run --tools "$T/tools_4000.json" "do task number 17"
STDIN= measure "4,000 tools, 1 thread" "$NEEDLE" run --threads 1 --tools "$T/tools_4000.json" "do task number 17"
STDIN= measure "4,000 tools, index warm" "$NEEDLE" run --tool-index "$T/index.bin" --tools "$T/tools_4000.json" "do task 17"
STDIN= measure "  (second run, from index)" "$NEEDLE" run --tool-index "$T/index.bin" --tools "$T/tools_4000.json" "do task 17"

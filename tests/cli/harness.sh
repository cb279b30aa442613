# harness.sh - what every tests/cli/test_*.sh shares, sourced from the repository root:
#   RUN_TIMEOUT=300 (optional; seconds per command, default 120)
#   . "$(dirname "$0")/harness.sh"
# Sets BUILD (the script's first argument, default build), ROOT, NEEDLE, G (the goldens) and the
# counters; ok NAME / bad NAME WHY record a result (bad shows the last lines of $out); run CMD...
# keeps a command's output in $out and its exit status in $rc; has TEXT greps $out; the script ends
# with: echo "$passed passed, $failed failed".
BUILD=${1:-build}
ROOT=$(pwd)
NEEDLE="$ROOT/$BUILD/needle"
G="$ROOT/tests/golden"
passed=0
failed=0
ok() { echo "ok      $1"; passed=$((passed + 1)); }
bad() { echo "not ok  $1: $2"; printf '%s\n' "$out" | tail -n 8 | cut -c 1-300 | sed 's/^/    | /'; failed=$((failed + 1)); }
run() { out=$(timeout "${RUN_TIMEOUT:-120}" "$@" 2>&1); rc=$?; }
has() { printf '%s' "$out" | grep -q -F -- "$1"; }

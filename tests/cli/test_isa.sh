#!/bin/sh
# test_isa.sh - `needle info` names the kernel path and why; NEEDLE_ISA forces a
# path and a path that cannot run is refused with its reason (issue 21).
#   sh tests/cli/test_isa.sh [BUILD]
. "$(dirname "$0")/harness.sh"
run() { out=$(env "$@" 2>&1); rc=$?; }  # this one passes an environment: run -u VAR or VAR=x CMD

run -u NEEDLE_ISA "$NEEDLE" info
if [ $rc -eq 0 ] && has '"kernel_path":"' && has '"kernel_path_reason":"automatic'; then ok info_names_path_and_reason
else bad info_names_path_and_reason "rc=$rc"; fi

# every path `needle info` says runs here can be forced, and info then says so
paths=$(printf '%s' "$out" | python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["kernel_paths"] if p["runs_here"]))' 2>/dev/null)
if [ -n "$paths" ]; then ok info_lists_paths; else bad info_lists_paths "no runnable path listed"; fi
for p in $paths; do
    run NEEDLE_ISA=$p "$NEEDLE" info
    if [ $rc -eq 0 ] && has "\"kernel_path\":\"$p\"" && has "forced by NEEDLE_ISA=$p"; then ok "force_$p"
    else bad "force_$p" "rc=$rc"; fi
done

run NEEDLE_ISA=avx9000 "$NEEDLE" run "turn off the kitchen lights"
if [ $rc -ne 0 ] && has 'NEEDLE_ISA=avx9000: unknown instruction set'; then ok unknown_isa_refused
else bad unknown_isa_refused "rc=$rc"; fi

# a path this build lacks (neon on x86-64, avx2 elsewhere) is refused, never replaced
case $(uname -m) in x86_64) other=neon ;; *) other=avx2 ;; esac
run NEEDLE_ISA=$other "$NEEDLE" run "turn off the kitchen lights"
if [ $rc -ne 0 ] && has "NEEDLE_ISA=$other: this build has no $other kernels"; then ok missing_path_refused
else bad missing_path_refused "rc=$rc"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

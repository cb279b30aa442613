#!/bin/sh
# check_layers.sh [ROOT] - every #include under ROOT/src points down the layers.
#
# The layers, lowest first (README "Layout", docs/architecture.md):
#   core < quant < backend < io < text < grammar < model < agent < eval, train < server < cli
# A file may include its own folder and any lower layer, never a higher one
# (eval and train share a rank and do not include each other).  Besides:
#   - no file outside src/backend/ includes backend/<impl>/ (cpu/, cuda/, ...):
#     the rest of the library reaches a backend only through backend/backend.h;
#   - no backend includes another one's folder (backend/cpu/ never names cuda/).
# Prints each offending include as "file:line: includes X (layer a -> layer b)"
# and exits 1 when there is one; else one line "layers: N includes checked, ok".
# `check_layers.sh --self-test` proves the check can fail (run by make test).
set -u

rank() {
    case "$1" in
    core) echo 1 ;; quant) echo 2 ;; backend) echo 3 ;; io) echo 4 ;; text) echo 5 ;;
    grammar) echo 6 ;; model) echo 7 ;; agent) echo 8 ;; eval | train) echo 9 ;; server) echo 10 ;; cli) echo 11 ;;
    *) echo 0 ;;
    esac
}

check() {
    root=$1
    bad=0
    n=0
    tmp=$(mktemp)
    # file<TAB>line<TAB>included path, for every quoted include of a source file
    (cd "$root" && find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort |
        xargs grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' /dev/null) |
        sed -E 's/^([^:]+):([0-9]+):.*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1	\2	\3/' >"$tmp"
    while IFS='	' read -r file line inc; do
        from=$(echo "$file" | cut -d/ -f2)
        to=$(echo "$inc" | cut -d/ -f1)
        case "$inc" in */*) ;; *) continue ;; esac # same folder ("cuda_kernels.h") or include/
        n=$((n + 1))
        rf=$(rank "$from")
        rt=$(rank "$to")
        if [ "$rf" = 0 ]; then
            echo "$file:$line: folder src/$from/ has no layer (add it to tools/check_layers.sh and the README)"
            bad=1
            continue
        fi
        if [ "$rt" = 0 ]; then continue; fi # not a src/ folder (e.g. a system header with a slash)
        if [ "$from" != "$to" ] && [ "$rt" -ge "$rf" ]; then
            echo "$file:$line: includes $inc (layer $from -> $to: not downward)"
            bad=1
        fi
        case "$inc" in
        backend/*/*)
            impl=$(echo "$inc" | cut -d/ -f2)
            case "$file" in
            src/backend/"$impl"/*) ;;
            src/backend/*/*) echo "$file:$line: includes $inc (one backend includes another)"; bad=1 ;;
            *) echo "$file:$line: includes $inc (only src/backend/ may include a backend's folder)"; bad=1 ;;
            esac
            ;;
        esac
    done <"$tmp"
    rm -f "$tmp"
    if [ "$bad" = 0 ]; then echo "layers: $n includes checked, ok"; fi
    return "$bad"
}

self_test() {
    d=$(mktemp -d)
    mkdir -p "$d/src/core" "$d/src/model" "$d/src/backend/cpu" "$d/src/backend/cuda"
    printf '#include "core/a.h"\n' >"$d/src/model/m.c"
    printf '#include "backend/cpu/k.h"\n' >"$d/src/backend/cpu/k.c"
    ok=1
    check "$d" >/dev/null || { echo "self-test: a clean tree was refused"; ok=0; }
    printf '#include "model/m.h"\n' >"$d/src/core/up.c"
    check "$d" >/dev/null && { echo "self-test: core -> model was accepted"; ok=0; }
    rm "$d/src/core/up.c"
    printf '#include "backend/cpu/k.h"\n' >"$d/src/model/f.c"
    check "$d" >/dev/null && { echo "self-test: model -> backend/cpu was accepted"; ok=0; }
    rm "$d/src/model/f.c"
    printf '#include "backend/cpu/k.h"\n' >"$d/src/backend/cuda/c.c"
    check "$d" >/dev/null && { echo "self-test: cuda -> cpu was accepted"; ok=0; }
    rm -rf "$d"
    [ "$ok" = 1 ] && echo "layers self-test: ok"
    [ "$ok" = 1 ]
}

if [ "${1:-}" = "--self-test" ]; then
    self_test
else
    check "${1:-.}"
fi

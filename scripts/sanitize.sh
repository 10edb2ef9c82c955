#!/usr/bin/env bash
# Run every kernel family (scripts/sanitize_driver.py) under compute-sanitizer's memcheck, racecheck,
# initcheck and synccheck on the GPU machine (SANITIZE_TOOLS="racecheck" for a subset), then the GPU
# fuzz tests under memcheck and initcheck (SANITIZE_FUZZ_EXAMPLES per test and format, default 20; 0:
# skip); print a summary last. Exit non-zero on any error. The runs go concurrently, each its own
# process on the one GPU (SANITIZE_PARALLEL=0: one after another).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$CS" ] || { echo "compute-sanitizer not found"; exit 2; }
python3 -c "import fp4kit; fp4kit.warmup()"          # compile outside the sanitizer
names=""
pids=""

# sanitize NAME TOOL CMD...: CMD under compute-sanitizer's TOOL, log in $out/sanitize_NAME.log, its
# rc, summary line (and pytest's, where CMD is pytest) in $out/sanitize_NAME.result; in the
# background unless SANITIZE_PARALLEL=0
sanitize() {
    local name=$1 tool=$2
    shift 2
    names="$names $name"
    if [ "${SANITIZE_PARALLEL:-1}" = 0 ]; then
        sanitize_one "$name" "$tool" "$@"
    else
        sanitize_one "$name" "$tool" "$@" &
        pids="$pids $!"
    fi
}

sanitize_one() {
    local name=$1 tool=$2 rc summary tests extra=()
    shift 2
    local log="$out/sanitize_$name.log"
    [ "$tool" = memcheck ] && extra=(--leak-check no)
    "$CS" --tool "$tool" "${extra[@]}" --error-exitcode 99 --target-processes all "$@" >"$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    tests=$(grep -E "[0-9]+ (passed|failed)" "$log" | tail -1)
    echo "$rc rc=$rc ${summary:-no summary line}${tests:+ ($tests)}" >"$out/sanitize_$name.result"
}

rm -f "$out"/sanitize_*.result
tools=${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
for tool in $tools; do
    sanitize "$tool" "$tool" python3 scripts/sanitize_driver.py
done
# the randomised kernel-vs-reference properties (tests/gpu/test_fuzz.py: odd shapes, misaligned and
# strided inputs, every planner path, grouped dims on the host and the device, graphs) under memcheck
# and initcheck too: output equality cannot see a write past an output, these tools do
if [ "${SANITIZE_FUZZ_EXAMPLES:-20}" != 0 ]; then
    for tool in memcheck initcheck; do
        case " $tools " in *" $tool "*) ;; *) continue ;; esac
        FP4KIT_FUZZ_EXAMPLES=${SANITIZE_FUZZ_EXAMPLES:-20} sanitize "fuzz_$tool" "$tool" \
            python3 -m pytest tests/gpu/test_fuzz.py -q -p no:cacheprovider
    done
fi
# shellcheck disable=SC2086
[ -n "$pids" ] && wait $pids
rc_all=0
for name in $names; do
    res="$out/sanitize_$name.result"
    if [ ! -f "$res" ]; then
        echo "$name: no result (the run did not finish)"; rc_all=1; continue
    fi
    read -r rc _ <"$res"
    if [ "$rc" != 0 ]; then rc_all=1; echo "=== $name failed, the end of $out/sanitize_$name.log:"; tail -30 "$out/sanitize_$name.log"; fi
done
echo
echo "compute-sanitizer summary ($(nvidia-smi -L | head -1)):"
for name in $names; do
    res="$out/sanitize_$name.result"
    if [ -f "$res" ]; then echo "  $name: $(cut -d' ' -f2- "$res")"; else echo "  $name: no result"; fi
done
rm -f "$out"/sanitize_*.result
exit $rc_all

#!/usr/bin/env bash
# Run every kernel family (scripts/sanitize_driver.py) under compute-sanitizer's memcheck, racecheck,
# initcheck and synccheck on the GPU machine (SANITIZE_TOOLS="racecheck" for a subset), then the GPU
# fuzz tests under memcheck and initcheck (SANITIZE_FUZZ_EXAMPLES per test and format, default 20; 0:
# skip); print a summary last. Exit non-zero on any error.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$CS" ] || { echo "compute-sanitizer not found"; exit 2; }
python3 -c "import fp4kit; fp4kit.warmup()"          # compile outside the sanitizer
declare -A result
rc_all=0
names=""

# sanitize NAME TOOL CMD...: CMD under compute-sanitizer's TOOL, log in $out/sanitize_NAME.log, its
# summary line (and pytest's, where CMD is pytest) in result[NAME]
sanitize() {
    local name=$1 tool=$2 rc summary tests extra=()
    shift 2
    local log="$out/sanitize_$name.log"
    [ "$tool" = memcheck ] && extra=(--leak-check no)
    "$CS" --tool "$tool" "${extra[@]}" --error-exitcode 99 --target-processes all "$@" >"$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    tests=$(grep -E "[0-9]+ (passed|failed)" "$log" | tail -1)
    result[$name]="rc=$rc ${summary:-no summary line}${tests:+ ($tests)}"
    names="$names $name"
    [ $rc -ne 0 ] && rc_all=1
    [ $rc -ne 0 ] && tail -30 "$log"
}

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
echo
echo "compute-sanitizer summary ($(nvidia-smi -L | head -1)):"
for name in $names; do echo "  $name: ${result[$name]}"; done
exit $rc_all

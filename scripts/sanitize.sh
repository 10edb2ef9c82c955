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
tools=${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
for tool in $tools; do
    log="$out/sanitize_$tool.log"
    extra=""
    [ "$tool" = memcheck ] && extra="--leak-check no"
    "$CS" --tool "$tool" $extra --error-exitcode 99 --target-processes all python3 scripts/sanitize_driver.py >"$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    result[$tool]="rc=$rc ${summary:-no summary line}"
    [ $rc -ne 0 ] && rc_all=1
    [ $rc -ne 0 ] && tail -30 "$log"
done
# the randomised kernel-vs-reference properties (tests/gpu/test_fuzz.py: odd shapes, misaligned and
# strided inputs, every planner path, grouped dims on the host and the device, graphs) under memcheck
# and initcheck too: output equality cannot see a write past an output, these tools do
fuzz_tools=""
if [ "${SANITIZE_FUZZ_EXAMPLES:-20}" != 0 ]; then
    for tool in memcheck initcheck; do
        case " $tools " in *" $tool "*) ;; *) continue ;; esac
        log="$out/sanitize_fuzz_$tool.log"
        extra=""
        [ "$tool" = memcheck ] && extra="--leak-check no"
        FP4KIT_FUZZ_EXAMPLES=${SANITIZE_FUZZ_EXAMPLES:-20} "$CS" --tool "$tool" $extra --error-exitcode 99 \
            --target-processes all python3 -m pytest tests/gpu/test_fuzz.py -q -p no:cacheprovider >"$log" 2>&1
        rc=$?
        summary=$(grep -E "ERROR SUMMARY" "$log" | tail -1)
        tests=$(grep -E "[0-9]+ (passed|failed)" "$log" | tail -1)
        result[fuzz_$tool]="rc=$rc ${summary:-no summary line} (${tests:-no pytest summary})"
        fuzz_tools="$fuzz_tools fuzz_$tool"
        [ $rc -ne 0 ] && rc_all=1
        [ $rc -ne 0 ] && tail -30 "$log"
    done
fi
echo
echo "compute-sanitizer summary ($(nvidia-smi -L | head -1)):"
for tool in $tools $fuzz_tools; do echo "  $tool: ${result[$tool]}"; done
exit $rc_all

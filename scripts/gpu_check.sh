#!/usr/bin/env bash
# The GPU machine's check: run from the repo root of a checkout on a machine with an NVIDIA GPU and
# the image's Python (CuPy, pytest, numpy, ml_dtypes there; nothing is installed, no network).
#   bash scripts/gpu_check.sh            # logs go to $OUT when it is set, else a temporary folder
# Steps: nvidia-smi -L; the GPU tests (pytest -m gpu); python3 -m fp4kit check --quick --require-gpu;
# with FP4KIT_SANITIZE=1, scripts/sanitize.sh (compute-sanitizer memcheck, racecheck, initcheck,
# synccheck; then tests/gpu/test_fuzz.py under memcheck and initcheck); scripts/kernel_coverage.py (which kernels of cuda_src/ those steps launched, through
# FP4KIT_KERNEL_LOG; fails when one never ran that is not on its allowed list); scripts/host_overhead.py with $HOST_ARGS (default --grouped, "none" skips it);
# scripts/bench.py with $BENCH_ARGS (default --quick; "" runs the full benchmark, "none" skips it),
# its rows compared with docs/bench-h100.md (scripts/bench_compare.py).
# FP4KIT_FUZZ_SEED=N: every hypothesis test (the GPU tests' and the sanitizer's fuzz) draws new
# cases from seed N instead of its derandomised ones (tests/conftest.py); FP4KIT_FUZZ_EXAMPLES sets
# the GPU tests' fuzz budget (default 40 per test and format). GPU_TEST_WORKERS: see the GPU tests' step.
# A summary (pass/fail per step) is printed last; the exit status is non-zero when any step failed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
logdir="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}"
t_start=$SECONDS

names=()
results=()

# run_step NAME LOGFILE CMD...: runs CMD, tees its output to $logdir/LOGFILE.
run_step() {
    local name=$1 log=$2 rc t0=$SECONDS
    shift 2
    echo
    echo "=== $name: $*"
    "$@" 2>&1 | tee "$logdir/$log"
    rc=${PIPESTATUS[0]}
    local verdict="ok"
    if [ "$rc" -ne 0 ]; then verdict="FAIL (exit $rc)"; fi
    if [ "$rc" -eq 5 ] && [ "$name" = "gpu tests" ]; then verdict="FAIL (exit 5: no GPU test was collected)"; fi
    names+=("$name")
    results+=("$verdict, $((SECONDS - t0))s")
    return 0
}

run_step "nvidia-smi" nvidia_smi.log nvidia-smi -L
kernel_log="$logdir/kernels_launched.log"
rm -f "$kernel_log"
export FP4KIT_KERNEL_LOG="$kernel_log"
# GPU_TEST_WORKERS=N runs the GPU tests in N pytest-xdist processes sharing the GPU (the kernel log
# and the disk cache take several processes; the tests of an xdist_group, the 16-24 GiB ones, share
# a worker); "auto" (the default) is 4 when pytest-xdist is importable, else 1 (one process).
workers=${GPU_TEST_WORKERS:-auto}
if [ "$workers" = auto ]; then
    if python3 -c "import xdist" 2>/dev/null; then workers=4; else workers=1; fi
fi
xdist=()
if [ "$workers" != 1 ]; then xdist=(-n "$workers" --dist loadgroup); fi
run_step "gpu tests" gpu_tests.log python3 -m pytest tests -q -m gpu -p no:cacheprovider ${xdist[@]+"${xdist[@]}"}
run_step "fp4kit check --quick" check_quick.log python3 -m fp4kit check --quick --require-gpu
if [ "${FP4KIT_SANITIZE:-0}" = "1" ]; then
    run_step "compute-sanitizer" sanitize.log bash scripts/sanitize.sh
fi
unset FP4KIT_KERNEL_LOG   # the coverage is the tests' and the check's, not the benchmarks'
run_step "kernel coverage" kernel_coverage.log python3 scripts/kernel_coverage.py --log "$kernel_log" --fail
# host time of the grouped ops (scripts/host_overhead.py; HOST_ARGS="none" skips it, "" runs the
# single-tensor table too)
if [ "${HOST_ARGS-}" = "none" ]; then
    names+=("host time")
    results+=("skipped (HOST_ARGS=none)")
else
    # shellcheck disable=SC2086
    run_step "host time ${HOST_ARGS---grouped}" host_time.log python3 scripts/host_overhead.py ${HOST_ARGS---grouped}
fi
if [ "${BENCH_ARGS-}" = "none" ]; then
    names+=("bench")
    results+=("skipped (BENCH_ARGS=none)")
elif [ -f scripts/bench.py ]; then
    rm -f "$logdir/bench.log"   # no stale summary line from an earlier run in the same folder
    # its rows against the table of record (scripts/bench_compare.py; report in bench_compare.md)
    compare=()
    if [ -f docs/bench-h100.md ]; then compare=(--compare docs/bench-h100.md); fi
    # shellcheck disable=SC2086
    run_step "bench ${BENCH_ARGS---quick}" bench.log python3 scripts/bench.py ${BENCH_ARGS---quick} ${compare[@]+"${compare[@]}"}
else
    names+=("bench --quick")
    results+=("skipped (scripts/bench.py not present)")
fi

# pytest's own closing line, so the summary says how many GPU tests ran.
pytest_line=$(grep -E '[0-9]+ (passed|failed|errors?|skipped|deselected)|no tests ran' "$logdir/gpu_tests.log" | tail -n 1)

echo
echo "=== gpu_check summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || echo 'no GPU'); $((SECONDS - t_start))s)"
status=0
for i in "${!names[@]}"; do
    printf '  %-22s %s\n' "${names[$i]}" "${results[$i]}"
    case "${results[$i]}" in FAIL*) status=1 ;; esac
done
if [ -n "$pytest_line" ]; then echo "  gpu tests said: $pytest_line"; fi
if [ -n "${FP4KIT_FUZZ_SEED-}" ]; then echo "  hypothesis seed: FP4KIT_FUZZ_SEED=$FP4KIT_FUZZ_SEED (tests/conftest.py)"; fi
if [ "${BENCH_ARGS-}" != "none" ] && [ -f "$logdir/bench.log" ]; then
    grep -E '^bench vs ' "$logdir/bench.log" | tail -n 1 | sed 's/^/  /'
fi
if [ "$status" -eq 0 ]; then echo "gpu_check: all steps passed"; else echo "gpu_check: FAILED"; fi
exit "$status"

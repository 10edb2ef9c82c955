#!/bin/bash
# Device-side perf loop: tests, check, probe timings, bench (quick), optional ncu of named variants.
# Usage: scripts/perf_run.sh [tests] [bench] [ncu:"name1,name2"]
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for a in "$@"; do
  case $a in
    tests) python3 -m pytest tests/gpu -q -x -p no:cacheprovider 2>&1 | tail -5 | tee $OUT/tests.txt
           python3 -m fp4kit check --quick 2>&1 | tail -4 | tee $OUT/check.txt ;;
    probe) python3 scripts/perf_probe.py 2>&1 | tee $OUT/probe.txt ;;
    bench) python3 scripts/bench.py --quick --no-startup > $OUT/bench_full.txt 2>&1; grep -v "^$" $OUT/bench_full.txt | grep "^|" | cut -c1-150 ;;
    ncu:*) IFS=',' read -ra names <<< "${a#ncu:}"
           for n in "${names[@]}"; do
             ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio -k regex:'quantize|amax' --launch-skip 1 --launch-count 1 python3 scripts/perf_probe.py --once "$n" > "$OUT/ncu_${n// /_}.txt" 2>&1
             echo "== ncu $n"; grep -E "^  [a-z_0-9]+|dram__|lts__|smsp__|l1tex__|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Issue Slots Busy|No Eligible|Registers Per|Theoretical Occ|Shared Memory Configuration|Bank Conf|L1/TEX Hit|Executed Ipc A" "$OUT/ncu_${n// /_}.txt" | head -40
           done ;;
  esac
done

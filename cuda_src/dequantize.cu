// fp4kit: dequantization of one operand (rows, cols) from compact or swizzled scales
// (SPEC sections 3 and 4). Work unit: 16 consecutive elements of a row (common/dequantize_op.cuh); only real scale
// positions are read.
#include "common/dequantize_op.cuh"

using namespace fp4kit;

// Kernel names: dequantize_f<format_id>_o<output dtype id>; grid-stride, 256 threads, the resident
// CTAs per SM asked of ptxas per output dtype (DqTune).
#define FP4KIT_DEQUANTIZE_KERNEL(F, O)                                                               \
    extern "C" __global__ void __launch_bounds__(DQ_THREADS, DqTune<O>::min_ctas)                   \
    dequantize_f##F##_o##O(const u8* data, const u8* scales, const float* amax, i64 rows, i64 cols, \
                           int swizzled, int row_scaled, void* out) {                               \
        FP4KIT_GRID_DEP();                                                                          \
        dequantize_op<F, O>(data, scales, amax, rows, cols, swizzled, row_scaled, out);             \
    }

#define FP4KIT_DEQUANTIZE_ALL(F) \
    FP4KIT_DEQUANTIZE_KERNEL(F, 0) \
    FP4KIT_DEQUANTIZE_KERNEL(F, 1) \
    FP4KIT_DEQUANTIZE_KERNEL(F, 2)

FP4KIT_DEQUANTIZE_ALL(0)
FP4KIT_DEQUANTIZE_ALL(1)
FP4KIT_DEQUANTIZE_ALL(2)
FP4KIT_DEQUANTIZE_ALL(3)
FP4KIT_DEQUANTIZE_ALL(4)
FP4KIT_DEQUANTIZE_ALL(5)

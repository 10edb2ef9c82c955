// Compile parts. fp4kit compiles quantize.cu and grouped.cu once per part (NVRTC option
// -DFP4KIT_PART=<p>, fp4kit._loader.PARTS), each part holding the kernels of one format (part F for
// the kernels named ..._f<F>_...) or the kernels of no format (FP4KIT_PART_COMMON): a cold start
// compiles the parts in parallel, and a first call compiles only the part it needs. Without
// FP4KIT_PART (a whole-file build) every kernel is in.
#pragma once

#define FP4KIT_PART_COMMON 9
#ifdef FP4KIT_PART
#define FP4KIT_IN_PART(p) (FP4KIT_PART == (p))
#else
#define FP4KIT_IN_PART(p) 1
#endif

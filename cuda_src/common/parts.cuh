// Compile parts. fp4kit compiles quantize.cu and grouped.cu once per part (NVRTC option
// -DFP4KIT_PART=<p>, fp4kit._loader.PARTS and part_of): part F holds the kernels of format F (named
// ..._f<F>_...), except that the full kernels of the FP4 formats' recipes (stochastic rounding;
// NVFP4's tile_2d / row_scaled / rht: names ending in _d<D>, _d<D>_rowsx, _sr, _rowssr, _rht, _ext, _rs or _t2d) are
// in part FP4KIT_PART_RECIPES(F); FP4KIT_PART_COMMON holds the kernels of no format. A cold start
// compiles the parts in parallel, and a first call compiles only the parts it needs. Without
// FP4KIT_PART (a whole-file build) every kernel is in.
#pragma once

#define FP4KIT_PART_RECIPES(F) (10 + (F))
#define FP4KIT_PART_COMMON 9
#ifdef FP4KIT_PART
#define FP4KIT_IN_PART(p) (FP4KIT_PART == (p))
#else
#define FP4KIT_IN_PART(p) 1
#endif

"""Launch plans of quantize and compute_amax: which buffers, which kernels, in which order.

A plan holds the *decisions* of one op for one key: the buffers to create (shape, dtype, initial
contents), the kernels to launch (module, name, grid, block, arguments in the kernel's parameter
order) and which buffers are the results. Building one is pure Python and knows no array library;
plans are memoised per key (device, shape, input dtype, the options except the seed, the size of a
caller's amax, the input pointer's alignment class), so a repeated call pays one dict lookup.

Two executors run plans, step by step in plan order on the caller's stream:
``fp4kit._cuda.run_plan`` (CuPy arrays and RawKernel launches: the general path) and
``fp4kit._torch_exec.run`` / ``run_cupy`` (PyTorch tensors or CuPy arrays and cuLaunchKernel with
raw pointers, with programmatic dependent launch: the fast paths
of PyTorch CUDA tensors and CuPy arrays). Grids that depend on the
GPU take its SM count, which the caller of the memoised functions supplies (queried once per
device).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from .formats import FORMATS
from .tensor import swizzled_shape

__all__ = ["Buffer", "Launch", "ZeroFill", "Arg", "OperandSlots", "Plan", "build_quantize_plan", "build_amax_plan",
           "quantize_plan", "amax_plan", "align_class", "grid_stride_blocks", "quantize_flags", "needs_ext",
           "clear_plans", "EMPTY", "ZEROS", "COPY", "VIEW", "FILL", "HOST"]

DTYPE_IDS = {"float32": 0, "bfloat16": 1, "float16": 2}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}

# Mirrors cuda_src/common/enums.cuh (QuantizeFlag).
QFLAG_ROWWISE = 1 << 0
QFLAG_COLUMNWISE = 1 << 1
QFLAG_SWIZZLED = 1 << 2
QFLAG_RULE_FLOOR = 1 << 3
QFLAG_STOCHASTIC = 1 << 4
QFLAG_TILE_2D = 1 << 5
QFLAG_ROW_SCALED = 1 << 6
QFLAG_RHT = 1 << 7
QFLAG_VEC_IN = 1 << 8
QFLAG_COL_SCALES_SWZ = 1 << 9
QFLAG_ROW_SCALES_SWZ = 1 << 10
QFLAG_ENC_TABS = 1 << 11

DIMS_ARG_MAX = 480  # int64 values of the dims struct parameter (cuda_src/grouped.cu DIMS_ARG_MAX)

QT_M = 64           # quantize tile (cuda_src/quantize.cu)
QT_K = 64
THREADS = 256

# Buffer.init values
EMPTY = "empty"     # uninitialised (0xA5 in every byte when output poisoning is on)
ZEROS = "zeros"     # zero-filled
COPY = "copy"       # a copy of buffer `src`
VIEW = "view"       # elements [start, start + shape[0]) of the 1-D buffer `src` (no new memory)
FILL = "fill"       # every element `value` (an int)
HOST = "host"       # the host values `value` (a tuple of ints), copied to the device


class Buffer(NamedTuple):
    """Step: create buffer number `slot`: `shape`, `dtype` ("uint8", "float32", "int32", "int64" or
    "float64"), contents `init`."""

    slot: int
    shape: tuple
    dtype: str
    init: str
    src: int = -1       # COPY / VIEW: the source buffer
    start: int = 0      # VIEW: first element
    value: object = 0   # FILL: the value; HOST: the tuple of values (C order)


class Arg(NamedTuple):
    """One kernel argument. `kind`: "x" (the input's pointer), "buf" (pointer to buffer `value`,
    plus `offset` bytes), "null" (a pointer the kernel does not use: 0), "seed" (the call's seed as
    u64), "amax" (pointer to the caller's amax, C-contiguous float32; only in plans built with an
    amax_size), "fd" / "ld" (pointers to the caller's int64 first / last dims of a grouped op),
    "dims" (a struct of DIMS_ARG_MAX int64 passed by value, the call's host values from index
    `value` on: the last parameter of grouped.cu group_meta_dims / group_dims_store; the fast-path
    executors of fp4kit._torch_exec only), or the C type of a scalar holding `value`: "i64" (long long), "i32"
    (int), "u32" (unsigned int), "u64" (unsigned long long). Pointers are 8 bytes."""

    kind: str
    value: int = 0
    offset: int = 0     # "buf": bytes past the buffer's start


class Launch(NamedTuple):
    """Step: launch extern "C" `kernel` of cuda_src/<module>.cu, grid (grid, grid_y, grid_z), block (block, 1, 1)."""

    module: str
    kernel: str
    grid: int
    block: int
    args: tuple         # of Arg, in the kernel's parameter order
    grid_y: int = 1
    grid_z: int = 1


class ZeroFill(NamedTuple):
    """Step: set every byte of buffer `slot` to zero (swizzled scales of an empty input)."""

    slot: int


class OperandSlots(NamedTuple):
    """Buffers of one quantized operand (amax None for MX formats)."""

    data: int
    scales: int
    amax: int | None


class Plan:
    """Steps (Buffer / Launch / ZeroFill, run in order), the result buffers and the buffer count.

    `outputs`: quantize -> (rowwise, columnwise), each an OperandSlots or None; compute_amax -> a
    tuple of buffer numbers; grouped quantize -> a dict of buffer numbers (or None) by name.
    `exec_cache` is for executors: per-plan state they derive once (resolved kernel handles, packed
    arguments); the planner never reads it. `arena`: the fast-path executors may carve the plan's
    small one-dimensional EMPTY / ZEROS buffers from one allocation (fp4kit._torch_exec: one
    allocator call instead of one per buffer; the results are views of it).
    """

    __slots__ = ("steps", "outputs", "n_buffers", "exec_cache", "arena")

    def __init__(self, steps, outputs, n_buffers: int, arena: bool = False):
        self.steps = tuple(steps)
        self.outputs = outputs
        self.n_buffers = n_buffers
        self.exec_cache: dict = {}
        self.arena = arena

    def output_slots(self) -> set:
        """The buffer numbers the outputs name."""
        found: set = set()

        def walk(o):
            if o is None:
                return
            if isinstance(o, int):
                found.add(o)
            elif isinstance(o, dict):
                for v in o.values():
                    walk(v)
            else:
                for v in o:
                    walk(v)
        walk(self.outputs)
        return found

    def launches(self) -> list[Launch]:
        return [s for s in self.steps if type(s) is Launch]

    def __repr__(self) -> str:
        lines = [f"Plan({self.n_buffers} buffers, outputs={self.outputs})"]
        lines += [f"  {s}" for s in self.steps]
        return "\n".join(lines)


_X = Arg("x")
_NULL = Arg("null")
_SEED = Arg("seed")
_AMAX = Arg("amax")


def _buf(slot: int) -> Arg:
    return Arg("buf", slot)


def _ptr(slot: int | None) -> Arg:
    return _NULL if slot is None else Arg("buf", slot)


def _i64(v: int) -> Arg:
    return Arg("i64", int(v))


def _i32(v: int) -> Arg:
    return Arg("i32", int(v))


def _u32(v: int) -> Arg:
    return Arg("u32", int(v))


def _u64(v: int) -> Arg:
    return Arg("u64", int(v))


def _at(slot: int, offset: int) -> Arg:
    """Pointer to buffer `slot` plus `offset` bytes."""
    return Arg("buf", slot, int(offset))


class _Builder:
    def __init__(self) -> None:
        self.steps: list = []
        self.n = 0

    def buffer(self, shape, dtype: str, init: str, src: int = -1, start: int = 0, value=0) -> int:
        slot = self.n
        self.n += 1
        self.steps.append(Buffer(slot, tuple(int(s) for s in shape), dtype, init, src, start, value))
        return slot

    def launch(self, module: str, kernel: str, grid, args: tuple, block: int = THREADS) -> None:
        """grid: the CTA count, or (x, y, z)."""
        gx, gy, gz = (grid, 1, 1) if isinstance(grid, int) else grid
        self.steps.append(Launch(module, kernel, int(gx), int(block), tuple(args), int(gy), int(gz)))

    def zero_fill(self, slot: int) -> None:
        self.steps.append(ZeroFill(slot))

    def plan(self, outputs, arena: bool = False) -> Plan:
        return Plan(self.steps, outputs, self.n, arena)


def grid_stride_blocks(n_items: int, per_sm: int, sm_count: int) -> int:
    """CTAs of a grid-stride kernel: one per 256 items, at most `per_sm` per SM."""
    return max(1, min(-(-n_items // THREADS), sm_count * per_sm))


def align_class(ptr: int) -> int:
    """The input pointer's alignment as the plans use it: 16 (16-byte vector loads: QFLAG_VEC_IN,
    amax vec_ok), 4 (the 4-byte loads of amax_plain_rht_bf16) or 1."""
    return 16 if ptr % 16 == 0 else (4 if ptr % 4 == 0 else 1)


def quantize_flags(opts) -> int:
    """The QuantizeFlag bits (cuda_src/common/enums.cuh) of one call's options, QFLAG_VEC_IN aside
    (that one depends on the input's alignment). Shared by the single-tensor and grouped launchers."""
    flags = (QFLAG_ROWWISE if opts.want_rowwise else 0) | (QFLAG_COLUMNWISE if opts.want_columnwise else 0)
    if opts.scale_layout == "swizzled":
        flags |= QFLAG_SWIZZLED
    if opts.scale_rule == "floor":
        flags |= QFLAG_RULE_FLOOR
    if opts.rounding == "stochastic":
        flags |= QFLAG_STOCHASTIC
    if FORMATS[opts.format].is_nvfp4:
        flags |= (QFLAG_TILE_2D if opts.tile_2d else 0) | (QFLAG_ROW_SCALED if opts.row_scaled else 0)
        flags |= QFLAG_RHT if opts.rht else 0
    return flags


# Formats whose compact scales the quantize kernels write in the swizzled layout to a staging buffer
# that unswizzle_scales then copies into the compact output (one more launch, and 2 x 1/32 of the
# codes' bytes moved again). A 64 x 64 tile holds 2 MX blocks of each of its 64 rows / columns, so
# compact stores put 2 bytes into a 32-byte sector that 16 tiles complete (for columnwise scales,
# tiles far apart in launch order); in the swizzled layout 4 tiles close in launch order complete
# each 512-byte block (docs/performance.md). FP6 since its encode went through the FP8 cvt (H100,
# 8192^2 bfloat16, compact scales: 'both' 131.7 -> 117.4 us, columnwise 91.5 -> 85.1 us of kernels);
# NVFP4 only with long rows (STAGED_NVFP4_MIN_K). MXFP4 stages for "both" with the plain recipe
# (docs/performance.md items 63, 78; H100, 8192^2 from bfloat16, the packed-pair encode: 97.9 -> 87.8
# + 4.6 us, 16384 x 8192: 194.7 -> 173.5 + 7.6 us; from float32 / float16 (float16 before its
# packed-pair encode, item 81), kernel time with the unswizzle, same run: 8192^2 144.0 -> 133.5 / 98.2 -> 97.9 us, 16384^2 596.7 -> 519.6 / 414.2 ->
# 380.1, 8192 x 16384 297.2 -> 261.4 / 200.9 -> 192.2, 32768 x 4096 float32 282.5 -> 259.4) and for
# the columnwise operand alone in large tensors (col_plain_mk, STAGED_MXFP4_COL_MIN_*; item 78).
# NVFP4 stages "both" with the plain recipe from rows of at least STAGED_NVFP4_MIN_K elements: a
# columnwise scale sector (8 tile rows of 4 bytes) is complete only after K / 8 tiles, i.e. K KB of
# input, have gone through L2 (H100, supplied amax, kernel time, same run: 16384^2 469.8 -> 455.3 us,
# 8192 x 16384 240.5 -> 233.5, 4096 x 32768 253.5 -> 238.6; but 8192^2 120.6 -> 121.2, 16384 x 8192
# 227.3 -> 231.4, 32768 x 4096 223.6 -> 231.8; stochastic rounding at 8192^2 309 -> 321).
STAGED_NVFP4_MIN_K = 16384
# MXFP4's columnwise operand alone (the 64 x 64 tile kernel, plain recipe) stages when M >=
# STAGED_MXFP4_COL_MIN_M and M K > STAGED_MXFP4_COL_MIN_ELEMENTS (H100, bfloat16, kernel time with the
# unswizzle, same run: 16384^2 286.7 -> 263.8 us, 65536 x 7168 483.7 -> 456.1, 32768 x 4096 140.6 ->
# 130.9, 8192 x 16384 140.3 -> 133.1, 16384 x 8192 141.6 -> 132.4, 12288 x 8192 104.1 -> 100.2,
# 8192 x 12288 101.0 -> 99.5, float32 16384^2 465.6 -> 438.5; but 8192^2 64.8 -> 67.4, 16384 x 4096
# 66.0 -> 66.7 and 4096 x 32768 129.6 -> 134.9, which keep direct compact stores).
STAGED_MXFP4_COL_MIN_M = 8192
STAGED_MXFP4_COL_MIN_ELEMENTS = 1 << 26
STAGED_SCALE_FORMATS = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2"}
STAGED_BOTH_FORMATS = {"mxfp4_e2m1"}


# The planner's size bounds (STAGE_BOTH_MIN_ELEMENTS, QUAD_MIN_ELEMENTS, QUADM_MIN_ELEMENTS): with
# SIZE_RULES off every bound is 0, so that tests reach each kernel path with small shapes.
SIZE_RULES = True


def min_elements(table: dict, fmt: str) -> int:
    return table.get(fmt, 0) if SIZE_RULES else 0


# "Both" operands from 16-bit input stage their compact MX scales only from these M * K up: below them
# the kernel's direct compact stores (2-byte pieces of sectors that stay in L2) beat the staging
# buffer's extra unswizzle launch (H100, bench device time, bfloat16, direct / staged, item 87):
# MXFP8 1024 x 4096 10.2 / 13.2 us, 2048 x 7168 26.7 / 29.5, 4096^2 31.9 / 33.2, 4096 x 7168 54.8 /
# 54.0, 8192^2 128.0 / 108.3; MXFP6 alike (11.0 / 14.1 .. 128.2 / 113.9); MXFP4 1024 x 4096 9.3 /
# 12.7, 4096^2 25.0 / 25.8, 4096 x 7168 42.7 / 43.9, 8192^2 98.8 / 91.8.
STAGE_BOTH_MIN_ELEMENTS = {"mxfp8_e4m3": 3 << 23, "mxfp8_e5m2": 3 << 23, "mxfp6_e2m3": 3 << 23,
                           "mxfp6_e3m2": 3 << 23, "mxfp4_e2m1": 1 << 25}


def stage_scales(fmt: str, rows: int, blocks: int, both_plain_k: int = 0, col_plain_mk: tuple[int, int] = (0, 0),
                 both16_elements: int = 0) -> bool:
    """Whether an operand's compact scales (rows, blocks) go through a swizzled staging buffer:
    formats in STAGED_SCALE_FORMATS; with both_plain_k, the K of a plain quantize of both operands
    (0: not one), formats in STAGED_BOTH_FORMATS, and NVFP4 when it is at least STAGED_NVFP4_MIN_K;
    with col_plain_mk, the (M, K) of a plain quantize of the columnwise operand alone by the tile
    kernel, MXFP4 in large tensors (STAGED_MXFP4_COL_MIN_M, STAGED_MXFP4_COL_MIN_ELEMENTS); and only
    shapes whose swizzled layout has no padding (rows % 128 == 0, blocks % 4 == 0), where the kernel
    writes every staged byte. both16_elements: M * K of "both" operands from 16-bit input, which stage
    from STAGE_BOTH_MIN_ELEMENTS up (with SIZE_RULES)."""
    if both16_elements and both16_elements < min_elements(STAGE_BOTH_MIN_ELEMENTS, fmt):
        return False
    cm, ck = col_plain_mk
    staged = (fmt in STAGED_SCALE_FORMATS or (both_plain_k > 0 and fmt in STAGED_BOTH_FORMATS)
              or (fmt == "nvfp4" and both_plain_k >= STAGED_NVFP4_MIN_K)
              or (fmt == "mxfp4_e2m1" and cm >= STAGED_MXFP4_COL_MIN_M and cm * ck > STAGED_MXFP4_COL_MIN_ELEMENTS))
    return staged and rows % 128 == 0 and blocks % 4 == 0


# Compact scale rows off the tile kernels' store width (NVFP4: 4 bytes per 64-element run, MXFP4: 2)
# leave as single bytes, each a partial sector (H100, 8200 x 8192 'both': NVFP4 compact 164.4 us
# against 125.8 swizzled). For "both" from 16-bit input with the plain recipe such operands go
# through a zero-filled staging buffer of the padded swizzled shape instead (the kernel writes the
# real positions, the fill the padding that unswizzle_scales reads).
STAGED_RAGGED_FORMATS = {"nvfp4": 4, "mxfp4_e2m1": 2}


def stage_ragged_scales(fmt: str, blocks: int, both16: bool) -> bool:
    w = STAGED_RAGGED_FORMATS.get(fmt)
    return both16 and w is not None and blocks % w != 0


# The 128 x 128 tile kernels (quantize.cu quantize_f<F>_d<D>_quad): plain MXFP8 / MXFP4 "both" from
# 16-bit input with both dimensions multiples of 128 (then every operand's scales are swizzled or
# staged). Measured slower for MXFP8 columnwise alone and for MXFP6 (see quantize.cu); MXFP4 gains
# at large sizes (docs/performance.md item 83).
QUAD_TILES = True

# quantize_f<F>_d<D>_quadm: the same squares for any M (K % 128 == 0), the last square row partial;
# its scale blocks leave whole with the padding as zeros (swizzled, or compact through a staging
# buffer of the padded swizzled shape), and columnwise code rows off a 16-byte boundary (M % 16 != 0)
# leave through the whole-square writer of grouped.cu group_quantize4 (ColStage::write_square)
# instead of the 64 x 64 kernel's 64-byte runs. MXFP4: 8200 x 8192 kernel time 109.3 -> 100.8 us
# (item 83); MXFP6: 157.2 -> 139.7 (item 85).
QUADM_TILES = True

# The squares only from these M * K up (H100, kernel time, bfloat16 "both" compact, 64 x 64 kernel /
# squares, docs/performance.md item 85). Below them the 64 x 64 kernel (8 CTAs of 256 threads per SM
# against 2 of 1024) is as fast or faster: M % 128 == 0, MXFP4 4096^2 22.9 / 25.4 us, 4096 x 8192
# 45.5 / 46.9, 8192^2 88.1 / 87.7; MXFP8 1024 x 4096 9.7 / 10.0, 4096 x 8192 56.0 / 54.6. M % 128 !=
# 0: MXFP8 1032 x 4096 10.4 / 15.2, 2056 x 8192 34.0 / 38.6, 4104 x 8192 71.3 / 71.3, 8200 x 8192
# 157.2 / 134.1; MXFP6 2056 x 8192 35.9 / 41.8, 4104 x 8192 72.0 / 74.3, 8200 x 8192 160.2 / 140.1,
# 8256 x 8192 126.7 / 114.1; MXFP4 2056 x 8192 27.0 / 28.9, 4104 x 8192 55.4 / 54.6.
QUAD_MIN_ELEMENTS = {"mxfp8_e4m3": 1 << 25, "mxfp8_e5m2": 1 << 25, "mxfp4_e2m1": 1 << 26}
QUADM_MIN_ELEMENTS = {"mxfp8_e4m3": 1 << 25, "mxfp8_e5m2": 1 << 25, "mxfp4_e2m1": 1 << 25,
                      "mxfp6_e2m3": 1 << 26, "mxfp6_e3m2": 1 << 26}


def quad_tiles(fmt: str, input_dtype: str, M: int, K: int, both: bool) -> bool:
    return (QUAD_TILES and both and fmt in QUAD_MIN_ELEMENTS and input_dtype in ("bfloat16", "float16")
            and M % 128 == 0 and K % 128 == 0 and M * K >= min_elements(QUAD_MIN_ELEMENTS, fmt))


def quadm_tiles(fmt: str, input_dtype: str, M: int, K: int, both: bool) -> bool:
    return (QUADM_TILES and both and fmt in QUADM_MIN_ELEMENTS and input_dtype in ("bfloat16", "float16")
            and M % 128 != 0 and K % 128 == 0 and M * K >= min_elements(QUADM_MIN_ELEMENTS, fmt))


# The columnwise-only kernels (cuda_src/quantize_cols.cu) for the plain recipe from 16-bit input with
# M a multiple of 16: a thread reads 16 rows of 2 (NW 1: 4-byte aligned input, K even) or 4 (NW 2:
# 16-byte aligned, K % 4 == 0) adjacent columns, without the tile kernel's shared-memory transpose; a
# CTA writes 32 compact scale bytes of each of its columns or one whole 128 x 4 swizzled block (so no
# staging, unswizzle or padding launch). Where it measured faster (H100, 8192^2): NVFP4 (84 -> 70 /
# 68 us) and compact MXFP8 / MXFP6 with NW 2 (83.3 -> 79.8 us); the tile kernel elsewhere
# (docs/performance.md item 60).
COLS_KERNEL = True
COLS_MX_FORMATS = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2"}


def cols_kernel(fmt: str, input_dtype: str, M: int, K: int, align: int, columnwise_only: bool,
                layout: str) -> str | None:
    """The quantize_cols kernel's suffix ("_c", "_s", "_s2", "_c2") for this call, or None."""
    if not (COLS_KERNEL and columnwise_only and input_dtype in ("bfloat16", "float16") and M % 16 == 0):
        return None
    nw2 = align >= 16 and K % 4 == 0
    if FORMATS[fmt].is_nvfp4:
        if nw2:
            return "_c" if layout == "compact" else "_s2"
        return ("_c" if layout == "compact" else "_s") if align >= 4 and K % 2 == 0 else None
    return "_c2" if fmt in COLS_MX_FORMATS and layout == "compact" and nw2 else None


# (tile columns, tile rows, threads) of each quantize_cols kernel; NVFP4 ones have blocks of 16
COLS_TILES = {"_c": (64, 512, 512), "_s": (128, 64, 256), "_s2": (128, 64, 128), "_c2": (64, 1024, 512)}


def cols_launch(suffix: str, M: int, K: int) -> tuple[int, int]:
    """(CTAs, threads) of quantize_cols_f<F>_d<D><suffix>."""
    cw, cr, threads = COLS_TILES[suffix]
    return -(-K // cw) * -(-M // cr), threads


# The rows kernel's widest CTA row: 2^ROWS_MAX_LW segments of 16 elements (6: 1024 columns).
ROWS_MAX_LW = 6

# The one-launch small NVFP4 quantize (quantize.cu quantize_f5_d<D>_rowsam): plain rowwise with the
# computed global amax, M * K in [1, SMALL_FUSED_MAX], instead of a memset, the amax launch and the
# rows launch; clusters of RA_CTAS CTAs that each compute the amax, at most RA_MAX_CLUSTERS of them
# (one CTA per rows-kernel block up to that).
SMALL_FUSED_MAX = 1 << 19
RA_CTAS = 8
RA_MAX_CLUSTERS = 16


def small_fused_grid(nblocks: int) -> int:
    """CTAs of the _rowsam kernel for `nblocks` rows-kernel blocks: whole clusters, one CTA per
    block up to RA_MAX_CLUSTERS clusters."""
    return RA_CTAS * max(1, min(RA_MAX_CLUSTERS, -(-nblocks // RA_CTAS)))


# NVFP4 multiplier tables (NV_TAB + 1 floats per operand, cuda_src/common/quantize_tile.cuh): computed
# by one small launch (nvfp4_enc_tables) when the tile kernel has at least ENC_TABS_MIN_TILES tiles,
# instead of by every CTA (806 of the 6642 warp instructions of a CTA, NVFP4 'both', H100 ncu). The
# launch costs ~1.7 us of device time and a gap; the fills cost ~0.6 us per 1000 tiles (H100).
ENC_TAB = 129
ENC_TABS_MIN_TILES = 8192


def div_magic(d: int) -> tuple[int, int]:
    """(m, p) with floor(n / d) == (n * m) >> p for every 0 <= n < 2^31 and m < 2^32 (the kernels'
    div_magic, cuda_src/common/types.cuh): p = 31 + ceil(log2 d), m = ceil(2^p / d). With m d =
    2^p + e, 0 <= e < d <= 2^(p - 31), the error n e / 2^p stays below 1 / d's rounding gap."""
    if not 1 <= d < 1 << 31:
        raise ValueError(f"div_magic: divisor {d} out of range")
    p = 31 + (d - 1).bit_length()
    return -(-(1 << p) // d), p


def block_grid(M: int, K: int, rows: int, cols: int) -> tuple[int, int, int]:
    """(x, y, z) grid over the rows x cols blocks of an (M, K) matrix (quantize_tile.cuh grid_tile /
    grid_rows): x the blocks along K, y * z >= the blocks along M with y <= 65535 (grid y's limit);
    block row z * y + y."""
    tm, tk = -(-M // rows), -(-K // cols)
    gz = -(-tm // 65535)
    return tk, -(-tm // gz), gz


def tile_grid(M: int, K: int) -> tuple[int, int, int]:
    """(x, y, z) grid of the single-tensor 64 x 64 tile kernels (quantize_tile.cuh grid_tile)."""
    return block_grid(M, K, QT_M, QT_K)


def enc_tables(opts, tiles: int) -> bool:
    """Whether the NVFP4 tile kernel of a call with validated options `opts` and `tiles` 64 x 64
    tiles takes precomputed multiplier tables (QFLAG_ENC_TABS)."""
    return FORMATS[opts.format].is_nvfp4 and not opts.row_scaled and tiles >= ENC_TABS_MIN_TILES


def small_fused(opts, M: int, K: int, amax_given: bool) -> bool:
    """True when quantize runs the one-launch small NVFP4 kernel (see SMALL_FUSED_MAX)."""
    return (FORMATS[opts.format].is_nvfp4 and opts.want_rowwise and not opts.want_columnwise and not amax_given
            and not needs_ext(opts) and 0 < M * K <= SMALL_FUSED_MAX)


def rows_stack(ext: bool, input_dtype: str) -> int:
    """R, the row groups of a rows-kernel block: 4 for 16-bit input with the plain recipes, else 2
    (quantize.cu _rows / _rowsx, grouped.cu group_quantize_rowsk / group_quantize_rowsd)."""
    return 2 if ext or input_dtype == "float32" else 4


# NVFP4 rowwise from 16-bit input with swizzled scales: the plain rows kernel that stores each
# quad's codes as a whole swizzled chunk (quantize.cu _rowsz); False: the plain _rows kernel.
ROWS_NVFP4_SWIZZLED_KERNEL = True


def rows_swizzled_kernel(opts, input_dtype: str, layout: str) -> bool:
    """True when the plain rows kernel of a call is quantize.cu's _rowsz (see ROWS_NVFP4_SWIZZLED_KERNEL)."""
    return (ROWS_NVFP4_SWIZZLED_KERNEL and FORMATS[opts.format].is_nvfp4 and layout == "swizzled"
            and input_dtype in ("bfloat16", "float16"))


def rows_blocks(M: int, K: int, R: int, lw: int) -> int:
    """Blocks of the rows kernel over an (M, K) matrix: R x 256 / 2^lw rows x 16 x 2^lw columns each."""
    return -(-M // (R * (THREADS >> lw))) * -(-K // (16 << lw))


# The single-tensor rows kernels' grid: (column blocks, gy, gz) over the block rows (rows_grid), but
# for the kernels (suffixes) of ROWS_1D_KERNELS: one CTA per block in a 1-D grid (quantize.cu's
# FP4KIT_ROWS_BLOCK: _rowsz measured 1 % faster on it, docs/performance.md item 151). A/B only:
# ROWS_GRID_3D = False with the kernels built with FP4KIT_ROWS_GRID1 (every one 1-D), ROWS_1D_KERNELS
# = () with FP4KIT_ROWSZ_GRID3.
ROWS_GRID_3D = True
ROWS_1D_KERNELS = ("_rowsz",)


def rows_grid(M: int, K: int, R: int, lw: int, suffix: str = "_rows") -> tuple[int, int, int]:
    """(x, y, z) grid of the single-tensor rows kernel quantize_f<F>_d<D><suffix> (quantize_tile.cuh
    grid_rows): block_grid over its blocks of R x 256 / 2^lw rows x 16 x 2^lw columns; the kernels
    of ROWS_1D_KERNELS: (blocks, 1, 1)."""
    if not ROWS_GRID_3D or suffix in ROWS_1D_KERNELS:
        return rows_blocks(M, K, R, lw), 1, 1
    return block_grid(M, K, R * (THREADS >> lw), 16 << lw)


# unswizzle_scales converts two matrices per launch; the second one's arguments when there is one.
UNSWIZZLE_NO_JOB = (Arg("null"), Arg("i64", 0), Arg("i64", 0), Arg("i64", 0), Arg("null"))


def swizzle_tiles(rows: int, cols: int) -> int:
    """CTAs of swizzle_scales / unswizzle_scales: one per 128 x 64 tile of the compact (rows, cols)
    scale matrix (cols: the swizzled width), at most 2^24 (the kernels stride beyond)."""
    return max(1, min(-(-rows // 128) * -(-cols // 64), 1 << 24))


def rows_lw(K: int, M: int | None = None) -> int:
    """lw of the rows kernel (a CTA row of 2^lw 16-element segments): the widest that K fills, 2 to
    ROWS_MAX_LW (K = 64: 2, K = 1000: 5, K >= 1024: 6). With M < 256 rows, at most the lw whose
    256 / 2^lw rows per row group hold all M rows (M = 16: 4), so that each thread has one segment
    and the work spreads over more CTAs: a small call's time is the kernel's latency."""
    lw = max(2, min(ROWS_MAX_LW, (K // 16).bit_length() - 1))
    if M is not None and 0 < M < 256:
        lw = min(lw, max(2, (256 // M).bit_length() - 1))
    return lw


def rht_only(opts, input_dtype: str) -> bool:
    """True for the fused RHT cast with no other extended option (NVFP4 from bfloat16, no
    tile_2d / row_scaled / stochastic rounding): quantize.cu's quantize_f5_d1_rht, which compiles
    the other variants out (48 registers instead of 70)."""
    return (FORMATS[opts.format].is_nvfp4 and opts.rht and input_dtype == "bfloat16" and not opts.tile_2d
            and not opts.row_scaled and opts.rounding != "stochastic")


def sr_only(opts) -> bool:
    """True for stochastic rounding with no other extended option (no NVFP4 tile_2d / row_scaled /
    rht): quantize.cu's quantize_f<F>_d<D>_sr / _rowssr, which compile the other variants out."""
    return opts.rounding == "stochastic" and not (FORMATS[opts.format].is_nvfp4 and
                                                  (opts.tile_2d or opts.row_scaled or opts.rht))


def ext_one_suffix(opts, input_dtype: str, full: str = "") -> str:
    """The suffix of the tile kernel for extended options (needs_ext): _rht (rht_only), _sr
    (sr_only), NVFP4's row_scaled alone _rs or tile_2d alone _t2d (quantize.cu / grouped.cu compile
    the other options out of those), else `full` (the kernel of every option: quantize_f5_d<D>, or
    grouped.cu's group_quantize1_f5_d<D>_ext)."""
    if rht_only(opts, input_dtype):
        return "_rht"
    if sr_only(opts):
        return "_sr"
    if opts.rounding != "stochastic" and not opts.rht and opts.row_scaled != opts.tile_2d:
        return "_rs" if opts.row_scaled else "_t2d"
    return full


def needs_ext(opts) -> bool:
    """True when the options need the full kernels (stochastic rounding, NVFP4 tile_2d / row_scaled /
    rht); the plain ones (_plain, _rows) compile those paths out and use fewer registers."""
    return opts.rounding == "stochastic" or (FORMATS[opts.format].is_nvfp4 and
                                             (opts.tile_2d or opts.row_scaled or opts.rht))


# ---------------------------------------------------------------------------------------------
# compute_amax

# common/amax.cuh amax_rows_cols_vec: rows per step (8 warps x ARC_U rows) and CTAs per SM sought
ARC_STEP = 32
ARC_CTAS_PER_SM = 8


def amax_rows_cols_grid(M: int, K: int, V: int, sm: int) -> tuple[int, int, int]:
    """(x, y, 1) grid of amax_rows_cols_vec over an (M, K) matrix (M: the rows, or an upper bound on
    them): x the spans of 32 V columns, y chunks of ARC_STEP-row steps, about ARC_CTAS_PER_SM CTAs
    per SM in all (the kernel splits its steps over gridDim.y; y <= 65535)."""
    spans = max(1, -(-K // (32 * V)))
    steps = max(1, -(-M // ARC_STEP))
    return spans, max(1, min(steps, -(-sm * ARC_CTAS_PER_SM // spans), 65535)), 1


def _amax_steps(b: _Builder, M: int, K: int, input_dtype: str, mode: str, rht_sign_mask: int, align: int,
                sm: int) -> tuple:
    """Append the NVFP4 amax steps of `mode` (see fp4kit._cuda.compute_amax); returns the result
    buffers: (out,) or, for "global+rht", (global, rht) (two (1,) views of one (2,) buffer)."""
    dt = DTYPE_IDS[input_dtype]
    if mode == "global":
        out = b.buffer((1,), "float32", ZEROS)
        n = M * K
        if n:
            V = 16 // ITEMSIZE[input_dtype]
            b.launch("amax", f"amax_global_d{dt}", grid_stride_blocks(-(-n // V), 8, sm),
                     (_X, _i64(n), _i32(align >= 16), _buf(out)))
        return (out,)
    if mode in ("rows", "cols", "rows+cols"):
        rows: int | None
        cols: int | None
        outs: tuple[int, ...]
        if mode == "rows+cols":   # one buffer: the rows' amaxes, the columns' from the next 16 bytes
            ca = -(-M // 4) * 4
            buf = b.buffer((ca + K,), "float32", ZEROS)
            rows = b.buffer((M,), "float32", VIEW, src=buf, start=0)
            cols = b.buffer((K,), "float32", VIEW, src=buf, start=ca)
            outs = (rows, cols)
        else:
            out = b.buffer((M,) if mode == "rows" else (K,), "float32", ZEROS)
            rows, cols = (out, None) if mode == "rows" else (None, out)
            outs = (out,)
        if M * K:
            b.launch("amax", f"amax_rows_cols_d{dt}", amax_rows_cols_grid(M, K, 16 // ITEMSIZE[input_dtype], sm),
                     (_X, _i64(M), _i64(K), _ptr(rows), _ptr(cols)))
        return outs
    if mode in ("rht", "global+rht"):
        if input_dtype != "bfloat16":
            raise ValueError(f"rht: expected bfloat16 input, got {input_dtype}")
        both = mode == "global+rht"
        # both: the plain amax at 0 and the RHT one 16 bytes on (results at 16-byte addresses, which
        # JAX needs: fp4kit._interop.jax_aligned)
        out = b.buffer((5,) if both else (1,), "float32", ZEROS)
        if both:
            plain = b.buffer((1,), "float32", VIEW, src=out, start=0)
            rht = b.buffer((1,), "float32", VIEW, src=out, start=4)
        else:
            plain, rht = None, out
        n = (M // 16) * K
        if n and K % 2 == 0 and align >= 4:
            # one pass: thread per 16 rows x 2 columns (4-byte loads); plain amax on the way
            b.launch("amax", "amax_plain_rht_bf16", grid_stride_blocks(n // 2, 4, sm),
                     (_X, _i64(M), _i64(K), _u32(rht_sign_mask), _ptr(plain), _buf(rht)))
        else:
            if n:
                b.launch("amax", "amax_rht_bf16", grid_stride_blocks(n, 8, sm),
                         (_X, _i64(M), _i64(K), _u32(rht_sign_mask), _buf(rht)))
            if both and M * K:
                # the plain amax in a second pass (the global launch above, into the zeroed view)
                b.launch("amax", "amax_global_d1", grid_stride_blocks(-(-(M * K) // 8), 8, sm),
                         (_X, _i64(M * K), _i32(align >= 16), _buf(plain)))  # type: ignore[arg-type]  # both: a slot
        return (plain, rht) if both else (out,)
    raise ValueError(f"mode: expected 'global', 'rows', 'cols', 'rht' or 'global+rht', got {mode!r}")


def build_amax_plan(M: int, K: int, input_dtype: str, mode: str, rht_sign_mask: int, align: int, sm: int) -> Plan:
    """The plan of compute_amax(x (M, K), input_dtype, mode, rht_sign_mask); outputs: buffer numbers."""
    b = _Builder()
    outs = _amax_steps(b, int(M), int(K), input_dtype, mode, int(rht_sign_mask), align, sm)
    return b.plan(outs)


def _amax_out(b: _Builder, src: Arg, n: int, mask: int, rs: int | None, cs: int | None, sm: int,
              tab_row: Arg = _NULL, tab_col: Arg = _NULL, tabs: int | None = None) -> None:
    """Append quantize.cu's nvfp4_amax_out launch, if it has work: buffers rs / cs (or None) get
    src[i] AND mask for i < n; with the buffer `tabs` the multiplier tables of tab_row[0] / tab_col[0]."""
    if n or tabs is not None:
        b.launch("quantize", "nvfp4_amax_out", grid_stride_blocks(n, 8, sm),
                 (src, _i64(n), _u32(mask), _ptr(rs), _ptr(cs), tab_row, tab_col, _ptr(tabs)))


# ---------------------------------------------------------------------------------------------
# quantize

def build_quantize_plan(M: int, K: int, input_dtype: str, opts, amax_size: int | None, align: int,
                        sm: int) -> Plan:
    """The plan of quantizing a C-contiguous (M, K) input with validated options `opts`.

    amax_size: None, or the number of elements of the caller's amax (NVFP4). align: align_class of
    the input pointer. sm: SMs of the device. Outputs: (rowwise, columnwise) OperandSlots or None.
    The seed is not part of the plan: the quantize kernels take it as a "seed" argument.
    """
    M, K = int(M), int(K)
    fmt = FORMATS[opts.format]
    layout = opts.scale_layout
    b = _Builder()

    ops: dict[str, list] = {}   # name -> [data, scales, amax, rows, nb, scales shape]
    cols: int | str | None      # a loop variable here, cols_kernel's suffix below
    for name, want, rows, cols in (("rowwise", opts.want_rowwise, M, K), ("columnwise", opts.want_columnwise, K, M)):
        if want:
            data = b.buffer((rows, fmt.packed_len(cols)), "uint8", EMPTY)
            nb = fmt.num_blocks(cols)
            sshape = swizzled_shape(rows, nb) if layout == "swizzled" else (rows, nb)
            ops[name] = [data, b.buffer(sshape, "uint8", EMPTY), None, rows, nb, sshape]

    # NVFP4 amax: rowwise uses the caller's or the computed plain amax; columnwise the same except
    # that rht / row_scaled give it its own, always computed.
    fused = small_fused(opts, M, K, amax_size is not None)
    # the stored amaxes that are copies (a caller's amax, with -0 as +0; the columnwise copy of the
    # computed plain amax): written by one nvfp4_amax_out launch ahead of the main kernel, which also
    # fills the multiplier tables when the tile kernel takes them (see store_amaxes below).
    # [source Arg, elements, AND mask, rowwise slot or None, columnwise slot or None]
    store = None
    if fmt.is_nvfp4:
        given = amax_size is not None

        def computed(mode):
            return _amax_steps(b, M, K, input_dtype, mode, opts.rht_sign_mask, align, sm)

        plain = None
        rht_amax = None
        rc = None   # row_scaled "both" with computed amaxes: both operands' in one pass
        if opts.row_scaled and "rowwise" in ops and "columnwise" in ops and not given:
            rc = computed("rows+cols")
        if fused:
            plain = ops["rowwise"][2] = b.buffer((1,), "float32", EMPTY)      # written by _rowsam
        elif "rowwise" in ops and "columnwise" in ops and opts.rht and not given and not opts.row_scaled:
            plain, rht_amax = computed("global+rht")                       # one pass
            ops["rowwise"][2] = plain
        elif "rowwise" in ops:
            if given:
                ops["rowwise"][2] = b.buffer((amax_size,), "float32", EMPTY)
                store = [_AMAX, amax_size, 0x7FFFFFFF, ops["rowwise"][2], None]
            elif opts.row_scaled:
                ops["rowwise"][2] = rc[0] if rc else computed("rows")[0]
            else:
                plain, = computed("global")
                ops["rowwise"][2] = plain
        if "columnwise" in ops:
            if opts.row_scaled:
                a = rc[1] if rc else computed("cols")[0]
            elif rht_amax is not None:
                a = rht_amax
            elif opts.rht:
                a, = computed("rht")
            elif given:
                a = b.buffer((amax_size,), "float32", EMPTY)
                store = store or [_AMAX, amax_size, 0x7FFFFFFF, None, None]
                store[4] = a
            elif plain is not None and M * K:
                a = b.buffer((1,), "float32", EMPTY)
                store = [_buf(plain), 1, 0xFFFFFFFF, None, a]
            elif plain is not None:     # an empty input: the plain amax is the zeroed buffer's 0
                a = b.buffer((1,), "float32", ZEROS)
            else:
                a, = computed("global")
            ops["columnwise"][2] = a

    def store_amaxes(ra=None, ca=None, tabs=None):
        """The nvfp4_amax_out launch: the pending stored amaxes, and with `tabs` the multiplier tables
        of the amaxes in slots ra / ca (a slot this launch writes is read from its source)."""
        nonlocal store
        src, n, mask, rs, cs = store or (_NULL, 0, 0xFFFFFFFF, None, None)

        def tab_src(slot):
            return _NULL if slot is None else src if slot in (rs, cs) else _buf(slot)

        _amax_out(b, src, n, mask, rs, cs, sm, tab_src(ra), tab_src(ca), tabs)
        store = None

    r, c = ops.get("rowwise"), ops.get("columnwise")
    if M and K:
        flags = quantize_flags(opts)          # "rowwise"/"columnwise" in ops <=> opts.want_*
        if align >= 16 and (K * ITEMSIZE[input_dtype]) % 16 == 0:
            flags |= QFLAG_VEC_IN
        ext = needs_ext(opts)
        name = f"quantize_f{fmt.format_id}_d{DTYPE_IDS[input_dtype]}"
        rows_kernel = c is None and not (fmt.is_nvfp4 and opts.tile_2d)
        cols = None if ext else cols_kernel(opts.format, input_dtype, M, K, align, r is None, layout)
        # the tile kernel with precomputed NVFP4 multiplier tables: they come with the stored amaxes
        tile_tabs = not rows_kernel and cols is None and enc_tables(opts, -(-M // QT_M) * -(-K // QT_K))
        if store is not None and not tile_tabs:
            store_amaxes()
        # the tile kernel's compact scales through a swizzled staging buffer (see stage_scales):
        # operand -> staging slot (the rows kernel writes whole sectors of compact scales itself)
        staged: dict[str, int] = {}
        # M % 128 != 0: the squares of quantize_f<F>_d<D>_quadm (they write whole swizzled blocks)
        quadm = (not ext and not rows_kernel and cols is None
                 and quadm_tiles(opts.format, input_dtype, M, K, r is not None and c is not None))
        if layout == "compact" and not rows_kernel and cols is None:
            both16 = r is not None and c is not None and input_dtype in ("bfloat16", "float16") and not ext
            both_k = K if r is not None and c is not None and not ext else 0
            col_mk = (M, K) if r is None and not ext else (0, 0)
            for key, bit in (("rowwise", QFLAG_ROW_SCALES_SWZ), ("columnwise", QFLAG_COL_SCALES_SWZ)):
                op = ops.get(key)
                if op is None:
                    continue
                # the kernel writes every staged byte (no padding, or _quadm's whole blocks), or only
                # the real positions (ragged rows: the padding that unswizzle reads is zero-filled)
                init = (EMPTY if quadm or stage_scales(opts.format, op[3], op[4], both_k, col_mk, M * K if both16 else 0)
                        else ZEROS if stage_ragged_scales(opts.format, op[4], both16) else None)
                if init is not None:
                    staged[key] = b.buffer(swizzled_shape(op[3], op[4]), "uint8", init)
                    flags |= bit
        rs = staged.get("rowwise", r[1] if r else None)
        cs = staged.get("columnwise", c[1] if c else None)
        if cols is not None:
            # columnwise alone: compact scales as whole sectors, swizzled ones as whole blocks
            grid, threads = cols_launch(cols, M, K)
            b.launch("quantize_cols", f"quantize_cols_f{fmt.format_id}_d{DTYPE_IDS[input_dtype]}{cols}", grid,
                     (_X, _i64(M), _i64(K), _buf(c[0]), _buf(c[1]), _ptr(c[2]), _i32(flags)), threads)  # type: ignore[index]  # c is set: cols is columnwise alone
        elif rows_kernel:
            # rowwise alone: CTAs of R x (256 / 2^lw) rows x 16 * 2^lw columns, loads issued up front
            # (quantize_rows_at in cuda_src/common/quantize_tile.cuh)
            lw = rows_lw(K, M)
            nblocks = rows_blocks(M, K, rows_stack(ext, input_dtype), lw)
            if fused:       # the same blocks, after every cluster of the grid has computed the amax
                b.launch("quantize", name + "_rowsam", small_fused_grid(nblocks),
                         (_X, _i64(M), _i64(K), _buf(r[0]), _buf(rs), _buf(r[2]), _i32(flags), _SEED, _i32(lw),  # type: ignore[index, arg-type]  # r is set: rows kernel
                          _i64(nblocks)))
            else:
                suffix = ("_rowssr" if sr_only(opts) else "_rowsx" if ext
                          else "_rowsz" if rows_swizzled_kernel(opts, input_dtype, layout) else "_rows")
                b.launch("quantize", name + suffix, rows_grid(M, K, rows_stack(ext, input_dtype), lw, suffix),
                         (_X, _i64(M), _i64(K), _buf(r[0]), _buf(rs), _ptr(r[2]), _i32(flags), _SEED, _i32(lw)))  # type: ignore[index, arg-type]  # r is set
        else:
            tiles = -(-M // QT_M) * -(-K // QT_K)
            rd, ra = (r[0], r[2]) if r else (None, None)
            cd, ca = (c[0], c[2]) if c else (None, None)
            if tile_tabs:
                # the NVFP4 multiplier tables once for the op instead of once per tile (quantize.cu
                # nvfp4_amax_out, with the stored amaxes); the tile kernel then takes the tables where
                # it took the amaxes
                tabs = b.buffer((2 * ENC_TAB,), "float32", EMPTY)
                store_amaxes(ra, ca, tabs)
                ra = None if ra is None else b.buffer((ENC_TAB,), "float32", VIEW, src=tabs, start=0)
                ca = None if ca is None else b.buffer((ENC_TAB,), "float32", VIEW, src=tabs, start=ENC_TAB)
                flags |= QFLAG_ENC_TABS
            suffix = ext_one_suffix(opts, input_dtype) if ext else "_plain"
            block = THREADS
            if (suffix == "_plain" and quad_tiles(opts.format, input_dtype, M, K, r is not None and c is not None)
                    and all(layout == "swizzled" or key in staged for key in ops)):
                # one CTA of 4 x 256 threads per 128 x 128 square; its scale blocks leave whole
                # (quantize.cu _quad)
                suffix, tiles, block = "_quad", (M // 128) * (K // 128), 4 * THREADS
            elif quadm:
                suffix, tiles, block = "_quadm", -(-M // 128) * (K // 128), 4 * THREADS
            b.launch("quantize", name + suffix, tiles if suffix in ("_quad", "_quadm") else tile_grid(M, K),
                     (_X, _i64(M), _i64(K), _ptr(rd), _ptr(rs), _ptr(cd), _ptr(cs), _ptr(ra), _ptr(ca),
                      _i32(flags), _SEED, _u32(opts.rht_sign_mask)), block)
        if staged:   # one launch for both operands, one CTA per 128 x 64 compact tile (swizzle.cu)
            # (stage, rows, blocks, the staged swizzled width, destination)
            jobs = [(_buf(stage), _i64(ops[key][3]), _i64(ops[key][4]), _i64(swizzled_shape(*ops[key][3:5])[1]),
                     _buf(ops[key][1])) for key, stage in staged.items()]
            if len(jobs) == 1:
                jobs.append(UNSWIZZLE_NO_JOB)
            b.launch("swizzle", "unswizzle_scales",
                     min(sum(swizzle_tiles(*swizzled_shape(*ops[key][3:5])) for key in staged), 1 << 24),
                     jobs[0] + jobs[1])
        if layout == "swizzled" and cols is None and not quadm:   # cols / _quadm write the padding too
            for data, scales, _, rows, nb, (rp, cpd) in ops.values():
                if rp * cpd == 0 or (rp == rows and cpd == nb):
                    continue
                # one thread per 16-byte chunk (swizzle.cu)
                b.launch("swizzle", "swizzle_zero_padding", grid_stride_blocks(rp * cpd // 16, 16, sm),
                         (_buf(scales), _i64(rows), _i64(nb), _i64(rp), _i64(cpd)))
    elif layout == "swizzled":
        for data, scales, _, rows, nb, (rp, cpd) in ops.values():
            if rp * cpd:
                b.zero_fill(scales)

    if store is not None:         # an empty input: the stored amaxes only
        store_amaxes()

    def slots(op):
        return None if op is None else OperandSlots(op[0], op[1], op[2])

    return b.plan((slots(r), slots(c)))


# ---------------------------------------------------------------------------------------------
# memoised plans

_MAX_PLANS = 4096
_QUANTIZE_PLANS: dict = {}
_AMAX_PLANS: dict = {}


def quantize_plan(device: int, sm_count, M: int, K: int, input_dtype: str, opts, amax_size: int | None,
                  x_ptr: int) -> Plan:
    """The memoised build_quantize_plan for `device` (sm_count(device) is asked only on a miss).

    The key holds every option but the seed (a per-call kernel argument), so a seed that changes
    from call to call reuses one plan.
    """
    key = (device, M, K, input_dtype, opts.format, opts.axis, opts.scale_layout, opts.scale_rule, opts.tile_2d,
           opts.row_scaled, opts.rht, opts.rht_sign_mask, opts.rounding, amax_size, align_class(x_ptr))
    plan = _QUANTIZE_PLANS.get(key)
    if plan is None:
        plan = build_quantize_plan(M, K, input_dtype, opts, amax_size, key[-1], sm_count(device))
        if len(_QUANTIZE_PLANS) >= _MAX_PLANS:      # many shapes: start over
            _QUANTIZE_PLANS.clear()
        _QUANTIZE_PLANS[key] = plan
    return plan


def amax_plan(device: int, sm_count, M: int, K: int, input_dtype: str, mode: str, rht_sign_mask: int,
              x_ptr: int) -> Plan:
    """The memoised build_amax_plan for `device` (invalid modes raise ValueError, never memoised)."""
    key = (device, M, K, input_dtype, mode, rht_sign_mask, align_class(x_ptr))
    plan = _AMAX_PLANS.get(key)
    if plan is None:
        plan = build_amax_plan(M, K, input_dtype, mode, rht_sign_mask, key[-1], sm_count(device))
        if len(_AMAX_PLANS) >= _MAX_PLANS:
            _AMAX_PLANS.clear()
        _AMAX_PLANS[key] = plan
    return plan


# The fast paths' memo (fp4kit._device_api._quantize_fast): one call's signature -> its
# validated options, plan and result layout. It lives here so that clear_plans forgets it too.
FAST_CALLS: dict = {}
# The grouped launcher's plans (fp4kit._cuda_grouped.group_quantize_plan) and the grouped fast
# path's memo of validated calls (fp4kit._grouped_device.group_quantize).
GROUP_PLANS: dict = {}
GROUP_FAST_CALLS: dict = {}
# host dims of the grouped fast path's calls, validated, with their layouts: the most recent
# GROUP_HOST_LAYOUTS_MAX (a small bounded dict: a memo that grew by one key per call doubled the
# planning time per call; dims that change every call are validated every call instead)
GROUP_HOST_LAYOUTS: OrderedDict = OrderedDict()
GROUP_HOST_LAYOUTS_MAX = 64


def clear_plans() -> None:
    """Forget every memoised plan, and the fast paths' memos of them (tests)."""
    _QUANTIZE_PLANS.clear()
    _AMAX_PLANS.clear()
    FAST_CALLS.clear()
    GROUP_PLANS.clear()
    GROUP_FAST_CALLS.clear()
    GROUP_HOST_LAYOUTS.clear()

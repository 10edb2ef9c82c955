"""Grouped kernels (cuda_src/grouped.cu): the launch plan of a grouped quantize (metadata,
statistics, quantize, unswizzle of staged scales: build_group_quantize_plan, memoised by
group_quantize_plan) and the grouped dequantize launch.

Nothing synchronises with the host: device dims reach the kernels as pointers, host dims as one
host-to-device copy inside the plan (the general path) or as kernel parameters of the metadata
launch (the fast path), and the grids are sized from the SM count and the caller's
bounds (`_quantize_grid`), never from the dims' values. `group_quantize` runs a plan with CuPy on
the current CuPy stream (the general path); fp4kit._grouped_device's fast path runs the same plans
with fp4kit._torch_exec.
"""
from __future__ import annotations

import numpy as np

from . import _plan
from ._cuda import (_DQ_MIN_CTAS, _DTYPE_IDS, _MAX_GRID, _NULL, _THREADS, _empty, _fn, _resident_per_sm,
                    _sm_count_of)
from ._cuda import run_plan as _run_plan
from ._plan import (ENC_TAB, Arg, div_magic, QFLAG_ENC_TABS, QFLAG_SWIZZLED, STAGED_BOTH_FORMATS, STAGED_SCALE_FORMATS,
                    ext_one_suffix, min_elements, needs_ext, quantize_flags, rows_blocks, rows_lw, rows_stack)
from .formats import FORMATS

__all__ = ["group_quantize", "group_dequantize"]

_NMETA = 10
_META_SROW, _META_SCOL, _META_SQ = 2, 3, 9   # grouped.cu MetaArray
_META_THREADS = 256   # grouped.cu META_THREADS
_CTAS_PER_SM = 8          # persistent grid: SMs x this many 256-thread CTAs (tile loop inside)
_QT = 64
_NULL_ARG = _plan._NULL


def _cp():
    import cupy
    return cupy


def _persistent_grid(upper_bound_items: int, resident, sm: int) -> int:
    """`sm` SMs x _CTAS_PER_SM CTAs, or with `resident` only as many as are resident at once
    (resident(cap): the kernel's resident CTAs per SM, at most cap = _CTAS_PER_SM): a larger
    persistent grid would run its last CTAs as a second, partial wave."""
    per_sm = resident(_CTAS_PER_SM) if resident is not None else _CTAS_PER_SM
    return max(1, min(int(upper_bound_items), sm * per_sm))


def rows_unit(f, ext: bool, input_dtype: str) -> int:
    """Tiles per CTA iteration of group_quantize_rows (grouped.cu FP4KIT_ROWS_U; sizes the grid only)."""
    if ext or input_dtype == "float32" or f.elem.bits == 6:
        return 2
    return 4


def _tiles_bound(n_el: int, G: int) -> int:
    """Upper bound on the 64 x 64 tiles of all members: each adds at most one partial tile per
    row or column band."""
    return n_el // (_QT * _QT) + 4 * G + (n_el // _QT) + 1


def _tile_bands_bound(rows_total: int, G: int) -> int:
    """With one K: upper bound on the 64-row tile bands of all members, sum ceil(M_i / 64) <=
    rows_total // 64 + G (the MX tile grid is this times the tiles per band)."""
    return rows_total // _QT + G


def _quantize_grid(f, ext, input_dtype, rows_only, one_k, G, n_el, Kshared, rows_total, resident, sm: int) -> int:
    """CTAs of the grouped quantize launch, from bounds known on the host (never the dims' values).

    With one K (kinds same / varying_first) the work is bounded by the caller's row count: the rows
    kernel gets one CTA per block of R x 256 / 2^lw rows x 16 x 2^lw columns (lw = rows_lw(K), as
    the single-tensor rows kernel), and the tile kernel for MX formats one
    per 64 x 64 tile (at most one partial row band per member). The hardware block scheduler then
    hands them out in order, which measured faster than a persistent grid on the H200 (G = 8,
    65536 x 7168 bfloat16: MXFP8 rowwise 441 -> 387 us, "both" with even sizes 1608 -> 1179 us),
    since the CTAs in flight stay within a narrow band of the matrix. Plain NVFP4 takes the same
    grid and the loop-free kernel (one_tile_per_cta; H100, "both", G = 8: 2058 -> 1575 us with even
    member sizes, 1552 -> 1524 us with sizes % 128). Otherwise the kernels are persistent: the tile
    kernel runs one wave of resident CTAs, the run kernel SMs x 8 CTAs (it hid the per-member table
    refills better: 563 us vs 600 us for one wave). resident(cap): the tile kernel's resident CTAs
    per SM (at most cap); sm: the device's SM count. `ext`: the persistent recipe kernels; the caller
    passes False for the one-tile stochastic-rounding kernel (group_quantize1_..._sr), whose grid is
    the plain one-tile kernels'."""
    if one_k:
        tiles_k = -(-Kshared // _QT)
        if rows_only:
            blocks = rows_blocks(rows_total, Kshared, rows_stack(ext, input_dtype), rows_lw(Kshared))
            return max(1, min(blocks, _MAX_GRID))
        if not (f.is_nvfp4 and ext):
            return max(1, min(_tile_bands_bound(rows_total, G) * tiles_k, _MAX_GRID))
    tiles_bound = _tiles_bound(n_el, G)
    if rows_only:
        return _persistent_grid(-(-tiles_bound // rows_unit(f, ext, input_dtype)), None, sm)
    return _persistent_grid(tiles_bound, resident, sm)


# grouped.cu STATS_TABS_MAX_G: group_stats builds the NVFP4 multiplier tables for at most this many
# members (its per-CTA counts are in shared memory)
STATS_TABS_MAX_G = 512


# The MX one-tile kernel of these formats reads its bands' descriptors from 16-bit input, as the packed
# formats' does from any (grouped.cu FP4KIT_GQ1_DESC, which this mirrors: the host lays out `band`)
MX_DESC_FORMATS = frozenset({"mxfp6_e2m3", "mxfp6_e3m2"})


# A/B probe: MXFP6 "both" from 16-bit input takes the _both / _boths one-tile kernels
_MX_BOTH = True


def _band_descriptors(f, input_dtype: str) -> bool:
    """Whether the one-tile kernel (group_quantize1) reads the bands' descriptors (grouped.cu
    group_quantize_one) rather than the member lookups."""
    return f.packed or (f.name in MX_DESC_FORMATS and input_dtype != "float32")


# False (A/B only): NVFP4's extended recipes other than stochastic rounding alone (tile_2d, row_scaled,
# rht) keep the persistent full kernel group_quantize_f5_d<D> with one K instead of the one-tile
# group_quantize1_f5_d<D>_ext
ONE_TILE_EXT = True


# False (A/B only): NVFP4 tile_2d in the one-tile kernels builds its members' multiplier tables in
# every CTA instead of copying those that group_stats / group_meta build once per member
ONE_TILE_TABLES = True


def one_tile_per_cta(f, ext, rows_only, one_k, G, Kshared, rows_total, sr: bool = False) -> bool:
    """Whether the tile kernel's grid (_quantize_grid) has one CTA for every tile, so that
    group_quantize1 (one tile per CTA, no loop; MX and plain NVFP4, MXFP4 / NVFP4 with stochastic
    rounding alone, `sr`: group_quantize1_f<F>_d<D>_sr, and NVFP4's other extended recipes:
    group_quantize1_f5_d<D>_ext) can run instead of group_quantize."""
    return (not rows_only and one_k and bool(Kshared)
            and (not ext or (sr and f.packed) or (ONE_TILE_EXT and f.is_nvfp4))
            and _tile_bands_bound(rows_total, G) * -(-Kshared // _QT) <= _MAX_GRID)


# Grouped MX "both" with compact scales stages them (the one-tile kernel's staging, or MXFP8's squares,
# then group_unswizzle_scales: three launches) only from these x.size (rows_total * K, the bound known
# on the host) up; below, the one-tile kernel's direct compact stores (two launches). H100, bench device
# time, G = 8 skewed members (sizes % 128), bfloat16, staged / direct (item 88): 1024 x 7168 MXFP8
# 33.1 / 21.1 us, MXFP6 33.3 / 21.9, MXFP4 31.2 / 19.7; 4096 x 7168 69.1 / 63.0, 71.6 / 63.2, 61.5 /
# 50.7; 8192 x 7168 108.3 / 119.9, 114.4 / 119.5, 96.9 / 94.4; 16384 x 4096 117.6 / 135.9, 124.6 /
# 135.5, 105.3 / 105.5.
GROUP_STAGE_MIN_ELEMENTS = {"mxfp8_e4m3": 5 << 23, "mxfp8_e5m2": 5 << 23, "mxfp6_e2m3": 5 << 23,
                            "mxfp6_e3m2": 5 << 23, "mxfp4_e2m1": 1 << 26}


def _staged_size(fmt: str, rows_total, Kshared) -> bool:
    """Whether an op of rows_total x Kshared elements (the host's bound) is large enough to stage its
    compact scales (GROUP_STAGE_MIN_ELEMENTS; None: no bound known, no rule)."""
    return rows_total is None or rows_total * Kshared >= min_elements(GROUP_STAGE_MIN_ELEMENTS, fmt)


def stage_one_tile(f, opts, input_dtype, Kshared, rows_total=None) -> bool:
    """Whether the one-tile kernel (group_quantize1) writes an MX "both" op's compact scales swizzled
    into staging buffers, which swizzle.cu group_unswizzle_scales then copies into the compact
    matrices (one more launch, as the single-tensor tile kernel: _plan.stage_scales' formats; one K,
    K % 128 == 0). Direct compact stores leave 2 bytes of a 32-byte sector per tile, completed by
    tiles far apart in launch order (H100, G = 8, 65536 x 7168 bfloat16, member sizes % 128, kernel
    time: MXFP6 916.3 us compact against 755 us swizzled, MXFP4 688.1 against 618.8). MXFP4 from
    every input (G = 8: float32 1008.9 -> 920.8 us; float16 696.2 -> 640.8 with its packed-pair
    encode, docs/performance.md item 81, where with the fp32 encode it had measured 714.8 -> 763.8)."""
    return (opts.scale_layout == "compact" and f.is_mx and f.block == 32 and bool(Kshared) and Kshared % 128 == 0
            and opts.want_rowwise and opts.want_columnwise
            and (opts.format in STAGED_SCALE_FORMATS or opts.format in STAGED_BOTH_FORMATS)
            and _staged_size(opts.format, rows_total, Kshared))


# grouped.cu group_quantize4 (128 x 128 squares, 1024 threads): plain MXFP8 "both" from 16-bit input
# with one K, K % 128 == 0, swizzled scales. False: group_quantize1 (64 x 64 tiles) instead.
QUAD = True
_QUAD_FORMATS = (0, 1)   # format ids: mxfp8_e4m3, mxfp8_e5m2


def _square_bands_bound(rows_total: int, G: int) -> int:
    """With one K: upper bound on the 128-row bands of all members, sum ceil(M_i / 128)."""
    return rows_total // 128 + G


def quad_squares(f, ext, opts, input_dtype, rows_only, one_k, G, Kshared, rows_total) -> bool:
    """Whether group_quantize4 takes the op (its grid: one CTA per possible square). Compact scales
    go through swizzled staging buffers and swizzle.cu group_unswizzle_scales (one more launch: as
    the single-tensor 128 x 128 kernel does; the 64 x 64 tile kernel with compact scales measured
    25 % slower than one launch of that kernel per member, H100, G = 8, 927.3 against 739.9 us)."""
    return (QUAD and not ext and not rows_only and one_k and f.format_id in _QUAD_FORMATS
            and input_dtype in ("bfloat16", "float16") and opts.want_rowwise and opts.want_columnwise
            and bool(Kshared) and Kshared % 128 == 0
            and _square_bands_bound(rows_total, G) * (Kshared // 128) <= _MAX_GRID
            and (opts.scale_layout == "swizzled" or _staged_size(f.name, rows_total, Kshared)))


# A/B probe: False sends every plain one-K rowwise call to group_quantize_rowsk (the grid-strided
# kernel whose blocks span the whole (sum M_i, K) matrix) instead of group_quantize_rowsd
ROWS_DIRECT = True


# False (A/B only): row-scaled NVFP4 with one K computes its per-row / per-column amaxes in group_stats's
# 64 x 64 tile loop instead of group_amax_rows_cols (16 bytes of a row per thread)
AMAX_ROWS_COLS = True


# False (A/B only): NVFP4 rht with one K computes its members' amaxes in group_stats's 64 x 64 tile
# loop instead of group_amax_plain_rht_bf16 (one pass, thread per 16 rows x 2 columns); the latter
# takes at most GAMAX_MAX members (grouped.cu, per-member maxima in shared memory)
AMAX_PLAIN_RHT = True
GAMAX_MAX = 512


# False (A/B only): NVFP4's extended rowwise recipe (row_scaled, with stochastic rounding or not) keeps
# group_quantize_rowsk where rows_direct would give it group_quantize_rowsd_f5_d<D>
ROWS_DIRECT_EXT = True


def rows_direct(ext: bool, input_dtype: str, rows_only: bool, one_k: bool, G: int, Kshared, rows_total,
                sr: bool = False) -> bool:
    """Whether a grouped rowwise call takes grouped.cu group_quantize_rowsd: one K and rows-kernel
    blocks of at most 64 rows (rows_stack x 256 / 2^rows_lw(K): K >= 256 from 16-bit input with the
    plain recipes, else K >= 128), so that every member is tiled as the single-tensor rows kernel
    tiles it alone, 64 / BR block rows per 64-row band of the tile list (group_meta's band
    descriptors); the grid (one CTA per possible block) must fit the launch limit. NVFP4 row_scaled
    (rowwise: no tile_2d, no rht) takes its full kernel (ROWS_DIRECT_EXT), but stochastic rounding
    alone (`sr`) keeps group_quantize_rowsk: the rowsd kernels measured 1-10 % slower for it
    (docs/performance.md item 154)."""
    if not (ROWS_DIRECT and rows_only and one_k and Kshared and (not ext or (ROWS_DIRECT_EXT and not sr))):
        return False
    _, br, _ = _rows_direct_blocks(Kshared, input_dtype, ext)
    return br <= _QT and _rows_direct_grid(Kshared, rows_total, G, input_dtype, ext) <= _MAX_GRID


def _rows_direct_blocks(Kshared: int, input_dtype: str, ext: bool = False) -> tuple[int, int, int]:
    """(lw, BR, tiles_k) of group_quantize_rowsd's blocks: the single-tensor rows kernel's (BR rows of
    16 x 2^lw columns; tiles_k blocks across K)."""
    lw = rows_lw(Kshared)
    return lw, rows_stack(ext, input_dtype) * (_THREADS >> lw), -(-Kshared // (16 << lw))


def _rows_direct_grid(Kshared: int, rows_total: int, G: int, input_dtype: str, ext: bool = False) -> int:
    """CTAs of group_quantize_rowsd: every block row of every possible 64-row band, times the blocks
    across K (the bands past the members' last one exit at once)."""
    _, br, tiles_k = _rows_direct_blocks(Kshared, input_dtype, ext)
    return _tile_bands_bound(rows_total, G) * (_QT // br) * tiles_k


def _band_desc_offset(n_rows: int, n_tiles: int) -> int:
    """Where group_meta's band descriptors start in its band buffer (grouped.cu band_desc_offset)."""
    return (n_rows + n_tiles + 1) & ~1


def _meta(b, G, fd, ld, f, opts, n_el, caps, rows_total, Kshared=None, descriptors=False, squares=False, tables=False,
          tab_amax=_NULL_ARG, tabs=None, staged=False, fill_last=False, dims_arg=False,
          src_dims=(_NULL_ARG, _NULL_ARG)):
    """Append the group_meta launch (and its buffers) to the plan builder `b`. fd / ld: Args of the
    int64 dims; with `dims_arg` the launch is group_meta_dims, which takes the call's host values as
    its last parameter (an Arg "dims": first then last dims) and stores them at fd / ld. Returns
    (meta, err, band, n_band_rows, n_band_tiles, meta_k, sq_desc): buffer slots meta, err and band
    (None without one K) and the Args meta_k and sq_desc (None without squares).
    With one K (Kshared > 0 and the caller's row count known) `band` memoises the member lookups of
    the quantize kernels (grouped.cu group_meta), with `descriptors` also holds the tile bands'
    descriptors (from _band_desc_offset, 8 int64 each: grouped.cu BandDesc); with `squares` it
    holds only a descriptor of every 128-row band of group_quantize4's squares (4 int64 each:
    grouped.cu SQ_DESC; n_band_rows = n_band_tiles = 0, so group_meta writes no member lookups that
    kernel would not read). `tables` (with `descriptors`): the descriptors' amax offsets address
    per-member multiplier tables; with `tabs` (a float32 G x ENC_TAB buffer) CTAs 1 .. ceil(G / 2)
    of the launch also write the tables of the supplied amaxes `tab_amax` (an Arg, float32 G).
    `staged` (with `squares`, one K % 128, block 32): the one-tile kernel's staged compact scales
    (grouped.cu group_meta bit 512): the member lookups and the square bands' descriptors (after
    the tile bands' ones), and a second copy of the arrays for the tile kernel, meta_k (else meta_k
    is meta). `fill_last` (one K, Kshared): `ld` is uninitialised and group_meta writes Kshared into
    it (grouped.cu group_meta bit 1024). `src_dims` (group_meta only): Args of the caller's device
    dims, which the launch copies into fd / ld (a null Arg: fd / ld hold the dims already)."""
    W = G + 1
    staged = bool(staged and squares and Kshared and Kshared % 128 == 0 and f.block == 32 and rows_total is not None)
    meta = b.buffer((_NMETA * W * (2 if staged else 1),), "int64", _plan.EMPTY)
    meta_k = _plan._at(meta, 8 * _NMETA * W) if staged else _plan._buf(meta)
    err = b.buffer((1,), "int32", _plan.EMPTY)   # group_meta always writes it
    band, n_rows, n_tiles, n_sq = None, 0, 0, 0
    one_k = bool(Kshared and rows_total is not None)
    descriptors = bool(descriptors and one_k)
    squares = bool(squares and one_k and (staged or not descriptors))
    n = 0
    if one_k and (staged or not squares):   # member lookups (group_quantize4 reads none)
        n_rows = -(-rows_total // _QT)            # one entry per 64 rows of the input
        n_tiles = _tile_bands_bound(rows_total, G) + 1   # the 64-row bands of the tile list
        n = _band_desc_offset(n_rows, n_tiles) + 8 * n_tiles if descriptors else n_rows + n_tiles
    sq_at = _band_desc_offset(n_rows, n_tiles) + (8 * n_tiles if descriptors else 0)   # grouped.cu group_meta sqd
    if squares:
        n_sq = _square_bands_bound(rows_total, G)
        n = sq_at + 4 * n_sq
    if one_k:
        band = b.buffer((n,), "int64", _plan.EMPTY)
    bits = (int(f.packed) | int(opts.scale_layout == "swizzled") << 1 | int(opts.row_scaled) << 2 | int(opts.rht) << 3
            | int(opts.want_rowwise) << 4 | int(opts.want_columnwise) << 5 | int(descriptors) << 6 | int(squares) << 7
            | int(tables and descriptors) << 8 | int(staged) << 9 | int(bool(fill_last)) << 10)
    i64, ptr = _plan._i64, _plan._ptr
    b.launch("grouped", "group_meta_dims" if dims_arg else "group_meta", 1 + (-(-G // 2) if tabs is not None else 0), (
        i64(G), fd, ld, _plan._i32(f.block), _plan._i32(bits), i64(n_el), i64(-1 if rows_total is None else rows_total),
        i64(caps["srow"]), i64(caps["scol"]), i64(caps["arow"]), i64(caps["acol"]), _plan._buf(meta), _plan._buf(err),
        i64(Kshared or 0), ptr(band), i64(n_rows), i64(n_tiles), i64(n_sq), tab_amax if tabs is not None else _NULL_ARG,
        ptr(tabs)) + ((Arg("dims", 0),) if dims_arg else tuple(src_dims)), block=_META_THREADS)
    return meta, err, band, n_rows, n_tiles, meta_k, _plan._at(band, 8 * sq_at) if squares else None


def build_group_quantize_plan(input_dtype, opts, G, n_el, caps, amax_size, dbias, Kshared, rows_total, dims,
                              sm, resident) -> _plan.Plan:
    """The plan of a grouped quantize (validated options `opts`, seed aside: a "seed" argument).

    input_dtype: x's dtype (x: the flat input, an "x" argument); G members; n_el: element bound;
    caps: scale / amax buffer bounds (keys srow, scol, arow, acol); amax_size: None or the element
    count of the caller's device amax (an "amax" argument: NVFP4, one per member); dbias: per-member
    column sums (float64 buffer "dbias"); Kshared / rows_total: the one K and the caller's row count
    (kinds same / varying_first), else None. dims, where the int64 dims come from:
    ("host", first, last) the host tuples (one H2D copy, first then last); ("param", G) the call's
    host values (first then last dims, 2 G int64; with one K the G first dims only, the metadata
    launch writing K as every last dim) as kernel parameters (a "dims" argument of the metadata
    launch, group_meta_dims, which stores them; past DIMS_ARG_MAX values, group_dims_store launches
    of DIMS_ARG_MAX values each: the fast-path executors only; with caps that bound any dims, the
    plan serves every host dims of G members); ("dev", fill_first,
    fill_last) the caller's device arrays ("fd" / "ld" arguments), which group_meta copies into
    the plan's fd / ld, but for first dims all equal to the int fill_first (not None: a FILL
    buffer) and, with fill_last, last dims written by group_meta (all Kshared). sm: SMs of the
    device; resident(module, kernel, cap): that kernel's resident 256-thread CTAs per SM, at most cap.

    Outputs: a dict of buffer numbers (None where absent): meta, err, fd, ld (the dims every launch
    after the metadata launch reads, and the result keeps), row_data, row_scales, row_amax,
    col_data, col_scales, col_amax, dbias (float64)."""
    f = FORMATS[opts.format]
    P = _plan
    b = P._Builder()
    ext = needs_ext(opts)
    # rowwise only (no 2D tiles): with one K (kinds same / varying_first) blocks of the whole
    # (sum M_i, K) matrix (grouped.cu group_quantize_rows_k), else runs of U tiles per CTA iteration
    # (group_quantize_rows)
    rows_only = not opts.want_columnwise and not (f.is_nvfp4 and opts.tile_2d)
    one_k = Kshared is not None and rows_total is not None
    # the grid covers every tile: the loop-free tile kernel (with the bands' descriptors for the
    # packed formats, MXFP4 and NVFP4, and MXFP6 from 16-bit input: grouped.cu group_quantize_one)
    one = one_tile_per_cta(f, ext, rows_only, one_k, G, Kshared, rows_total, P.sr_only(opts))
    # plain rowwise with one K: each member tiled as the single-tensor rows kernel tiles it
    direct = rows_direct(ext, input_dtype, rows_only, one_k, G, Kshared, rows_total, P.sr_only(opts))
    # MXFP8 "both", one K % 128: 128 x 128 squares (group_quantize4; compact scales staged)
    quad = quad_squares(f, ext, opts, input_dtype, rows_only, one_k, G, Kshared, rows_total)
    # compact scales of the one-tile kernel through swizzled staging buffers (stage_one_tile)
    staged1 = one and not ext and not quad and stage_one_tile(f, opts, input_dtype, Kshared, rows_total)
    # plain NVFP4 with computed amaxes in the one-tile kernel: the statistics pass also builds every
    # member's multiplier table once its amax is final (grouped.cu stats_tables), and the tile
    # kernel copies it (QFLAG_ENC_TABS) instead of building it in every CTA
    # (`one`: the plain recipe, or stochastic rounding alone in the _sr one-tile kernel, whose tables
    # are the same; a CTA that built its own spent ~12 % of the kernel's instructions on them); with
    # supplied amaxes the metadata launch builds them (extra CTAs), for any number of members
    # (with tile_2d too, whose blocks take the member's plain amax as well; not with row_scaled, which
    # has no table, nor rht, whose columnwise amax is not the plain one)
    tables = one and f.is_nvfp4 and (not ext or (ONE_TILE_TABLES and not opts.row_scaled and not opts.rht))
    tabs_on = bool(tables and amax_size is None and not dbias and G <= STATS_TABS_MAX_G)
    tabs_sup = bool(tables and amax_size is not None and G > 0)
    out: dict[str, int | None] = dict.fromkeys(("meta", "err", "fd", "ld", "row_data", "row_scales", "row_amax", "col_data", "col_scales",
                         "col_amax", "dbias"))
    n_vals = G if one_k else 2 * G     # host values of a ("param", G) plan
    src_fd = src_ld = _NULL_ARG        # device dims: the caller's arrays, copied by the metadata launch
    if dims[0] in ("host", "param"):
        # one int64 buffer: the first dims, then the last dims from the next 16 bytes (G rounded up
        # to even: results at addresses JAX accepts, fp4kit._interop.jax_aligned); the padding
        # element is never read
        gl = G + (G & 1)
        if dims[0] == "host":       # one host-to-device copy of both
            hd = b.buffer((gl + G,), "int64", P.HOST, value=tuple(dims[1]) + (0,) * (gl - G) + tuple(dims[2]))
        else:       # the call's dims as kernel parameters: of group_meta_dims, or past DIMS_ARG_MAX
            # values of store launches; with one K the first dims only (group_meta writes K as
            # every last dim), so up to DIMS_ARG_MAX members take no store launch. The values are
            # first then last dims, gapless: a store of values from index c lands at c (c < G) or
            # c + gl - G, and a store never spans the two
            hd = b.buffer((gl + G,), "int64", P.EMPTY)
            if n_vals > P.DIMS_ARG_MAX:
                for lo, hi in ((0, G), (G, n_vals)):
                    for c in range(lo, hi, P.DIMS_ARG_MAX):
                        b.launch("grouped", "group_dims_store", 1, (
                            P._at(hd, 8 * (c if c < G else c + gl - G)), P._i64(min(P.DIMS_ARG_MAX, hi - c)),
                            Arg("dims", c)))
        out["fd"] = b.buffer((G,), "int64", P.VIEW, src=hd, start=0)
        out["ld"] = b.buffer((G,), "int64", P.VIEW, src=hd, start=gl)
        fd, ld, fill_last = P._buf(hd), P._at(hd, 8 * gl), dims[0] == "param" and one_k
    else:
        # device dims: the metadata launch copies the caller's arrays ("fd" / "ld" arguments) into the
        # plan's, which the later launches and the result read: a result stays whole when the caller
        # reuses its dims buffer (group_dequantize and the member views read the dims again)
        _, fill_first, fill_last = dims
        if fill_first is not None:
            fd_buf = b.buffer((G,), "int64", P.FILL, value=int(fill_first))
        else:
            fd_buf = b.buffer((G,), "int64", P.EMPTY)
            src_fd = Arg("fd")
        ld_buf = b.buffer((G,), "int64", P.EMPTY)   # fill_last: (G,) of K, written by the metadata launch
        if not fill_last:
            src_ld = Arg("ld")
        out["fd"], out["ld"] = fd_buf, ld_buf
        fd, ld = P._buf(fd_buf), P._buf(ld_buf)
    # the members' tables (G x ENC_TAB floats): written by group_meta (supplied amaxes) or by
    # group_stats (computed ones), read by the tile kernel
    tabs = b.buffer((G * ENC_TAB,), "float32", P.EMPTY) if tabs_on or tabs_sup else None
    meta, err, band, n_band_rows, n_band_tiles, meta_k, sq_desc = _meta(
        b, G, fd, ld, f, opts, n_el, caps, rows_total, Kshared,
        descriptors=(one and _band_descriptors(f, input_dtype)) or direct,
        squares=quad or staged1,
        tables=tabs_on or tabs_sup, tab_amax=Arg("amax") if tabs_sup else _NULL_ARG, tabs=tabs if tabs_sup else None,
        staged=staged1, fill_last=fill_last,
        dims_arg=dims[0] == "param" and n_vals <= P.DIMS_ARG_MAX, src_dims=(src_fd, src_ld))
    out["meta"], out["err"] = meta, err
    nbytes = f.packed_len(n_el) if f.packed else n_el
    # the quantize kernel writes every byte of every member's scales, the swizzled padding too
    # (grouped.cu group_zero_padding), so no buffer is cleared first (a memset of the whole
    # swizzled buffer cost ~10 us at 65536 x 7168 on the H100)
    if opts.want_rowwise:
        out["row_data"] = b.buffer((nbytes,), "uint8", P.EMPTY)
        out["row_scales"] = b.buffer((caps["srow"],), "uint8", P.EMPTY)
    if opts.want_columnwise:
        out["col_data"] = b.buffer((nbytes,), "uint8", P.EMPTY)
        out["col_scales"] = b.buffer((caps["scol"],), "uint8", P.EMPTY)
    dt = _DTYPE_IDS[input_dtype]
    if not quad:   # group_quantize4 takes its own grid below
        kname = "group_quantize_rowsk" if rows_only and one_k else "group_quantize_rows" if rows_only else "group_quantize"
        qname = f"{kname}_f{f.format_id}_d{dt}" + ("" if ext else "_plain")
        if kname == "group_quantize" and ext and P.sr_only(opts):
            qname += "_sr"   # stochastic rounding alone: the other variants compiled out
        # (`one` with an extended option, stochastic rounding, takes the one-tile grid too)
        grid = _quantize_grid(f, ext and not one, input_dtype, rows_only, one_k, G, n_el, Kshared, rows_total,
                              lambda cap, q=qname: resident("grouped", q, cap), sm)
        band_arg = P._at(band, 8 * n_band_rows) if band is not None else _NULL_ARG   # member of every tile band
        if one:
            # MXFP4 / NVFP4 "both": the variant that knows its four buffers are non-null
            both = ((f.packed or (_MX_BOTH and _band_descriptors(f, input_dtype)))
                    and opts.want_rowwise and opts.want_columnwise)
            qname = f"group_quantize1_f{f.format_id}_d{dt}_{'both' if both else 'plain'}"
            if ext:   # stochastic rounding alone, or NVFP4's recipe kernels (one_tile_per_cta)
                qname = f"group_quantize1_f{f.format_id}_d{dt}{ext_one_suffix(opts, input_dtype, '_ext')}"
            elif both and (opts.scale_layout == "swizzled" or staged1) and opts.scale_rule != "floor":
                qname += "s"   # swizzled (or staged) scales and the rceil rule as compile-time facts
            if _band_descriptors(f, input_dtype):
                band_arg = P._at(band, 8 * _band_desc_offset(n_band_rows, n_band_tiles))
    # statistics pass: NVFP4 amaxes (unless supplied) and dbias, one read of the input
    mode = 0
    a_row = a_col = row_t = col_t = None
    done = _NULL_ARG
    if tabs_on:
        # one cleared buffer: rowwise amaxes, columnwise amaxes from the next 16 bytes (results at
        # 16-byte addresses, which JAX needs: fp4kit._interop.jax_aligned), then G uint64 counters
        # (8-byte aligned)
        na, nc = caps["arow"] if opts.want_rowwise else 0, caps["acol"] if opts.want_columnwise else 0
        ca = -(-na // 4) * 4
        c0 = (ca + nc + 1) & ~1
        zbuf = b.buffer((c0 + 2 * G,), "float32", P.ZEROS)
        if opts.want_rowwise:
            a_row = row_t = b.buffer((na,), "float32", P.VIEW, src=zbuf, start=0)
            mode |= 1
        if opts.want_columnwise:
            a_col = col_t = b.buffer((nc,), "float32", P.VIEW, src=zbuf, start=ca)
            mode |= 1 | 16
        done = P._at(zbuf, 4 * c0)
    elif f.is_nvfp4:
        if amax_size is not None:    # the stored copies of the caller's amaxes, from one launch
            cols = opts.want_columnwise and not opts.row_scaled and not opts.rht
            a_row = b.buffer((amax_size,), "float32", P.EMPTY) if opts.want_rowwise else None
            a_col = b.buffer((amax_size,), "float32", P.EMPTY) if cols else None
            P._amax_out(b, Arg("amax"), amax_size if opts.want_rowwise or cols else 0, 0x7FFFFFFF, a_row, a_col, sm)
        if opts.want_rowwise and amax_size is None:
            a_row = row_t = b.buffer((caps["arow"],), "float32", P.ZEROS)
            mode |= 2 if opts.row_scaled else 1
        if opts.want_columnwise:
            if opts.row_scaled:                      # per column of x, always computed
                a_col = col_t = b.buffer((caps["acol"],), "float32", P.ZEROS)
                mode |= 2
            elif opts.rht:                           # over the transformed operand, always computed
                a_col = col_t = b.buffer((caps["acol"],), "float32", P.ZEROS)
                mode |= 4
            elif amax_size is None:
                a_col = col_t = b.buffer((caps["acol"],), "float32", P.ZEROS)
                mode |= 1 | 16
    if dbias:
        out["dbias"] = b.buffer((G, Kshared), "float64", P.ZEROS)
        mode |= 8
    if (mode & 4 and not mode & ~5 and one_k and AMAX_PLAIN_RHT and input_dtype == "bfloat16" and Kshared
            and Kshared % 2 == 0 and G <= GAMAX_MAX):
        # NVFP4 rht with one K: every member's post-RHT (and with mode 1 plain) amax in one pass of
        # 16-row x 2-column steps (grouped.cu group_amax_plain_rht_bf16, 4 CTAs per SM)
        b.launch("grouped", "group_amax_plain_rht_bf16", P.grid_stride_blocks(rows_total // 16 * (Kshared // 2), 4, sm),
                 (Arg("x"), P._i64(G), P._buf(meta), P._i64(Kshared), P._u32(opts.rht_sign_mask),
                  P._ptr(row_t if mode & 1 else None), P._ptr(col_t)))
    elif mode == 2 and one_k and AMAX_ROWS_COLS:
        # row-scaled NVFP4 alone with one K: the per-row / per-column amaxes over the (sum M_i, K)
        # matrix, 16 bytes of a row per thread (grouped.cu group_amax_rows_cols)
        b.launch("grouped", f"group_amax_rows_cols_d{dt}",
                 P.amax_rows_cols_grid(rows_total, Kshared, 16 // P.ITEMSIZE[input_dtype], sm),
                 (Arg("x"), P._i64(G), P._buf(meta), P._i64(Kshared), P._ptr(row_t), P._ptr(col_t)))
    elif mode:
        sname = f"group_stats_d{dt}"
        # one wave of resident CTAs (4 per SM at 64 registers; 8 per SM ran as two waves: H100, G = 8
        # NVFP4 "both", group_stats 335.7 -> 329.0 us, G = 64 unchanged)
        b.launch("grouped", sname, _persistent_grid(_tiles_bound(n_el, G), lambda cap: resident("grouped", sname, cap), sm), (
            Arg("x"), P._i64(G), P._buf(meta), fd, ld, P._i32(mode), P._u32(opts.rht_sign_mask), P._ptr(row_t),
            P._ptr(col_t), P._ptr(out["dbias"]), P._i64(Kshared or 0), P._ptr(tabs) if tabs_on else _NULL_ARG, done))
    flags = quantize_flags(opts)
    a_row_k, a_col_k = P._ptr(a_row), P._ptr(a_col)   # what the tile kernel reads: the amaxes, or the tables
    if tabs is not None:
        flags |= QFLAG_ENC_TABS
        a_row_k = P._buf(tabs) if opts.want_rowwise else _NULL_ARG
        a_col_k = P._buf(tabs) if opts.want_columnwise else _NULL_ARG
    n_sq = _square_bands_bound(rows_total, G) if quad or staged1 else 0
    staged = (quad and opts.scale_layout != "swizzled") or staged1
    if staged:   # member g's swizzled matrices at 4 K sq[g] (common/layout.cuh staged_scales_offset)
        st = b.buffer((2 * 4 * Kshared * n_sq,), "uint8", P.EMPTY)   # one allocation, rowwise then columnwise
        st_row, st_col = P._buf(st), P._at(st, 4 * Kshared * n_sq)
    ptr = P._ptr
    if quad:
        if not staged:
            st_row, st_col = P._buf(out["row_scales"]), P._buf(out["col_scales"])  # type: ignore[arg-type]  # quad: both operands
        b.launch("grouped", f"group_quantize4_f{f.format_id}_d{dt}", max(1, n_sq * (Kshared // 128)), (
            Arg("x"), P._i64(G), P._buf(meta), P._buf(out["row_data"]), st_row, P._buf(out["col_data"]), st_col,  # type: ignore[arg-type]  # quad: both operands
            P._i32(flags), sq_desc, P._i64(Kshared)), block=4 * _THREADS)
    elif direct:
        z = "z" if not ext and _plan.rows_swizzled_kernel(opts, input_dtype, opts.scale_layout) else ""
        suffix = "" if ext else "_plain"   # NVFP4's extended recipes: the full kernel (R = 2)
        lw, _, tiles_k = _rows_direct_blocks(Kshared, input_dtype, ext)
        b.launch("grouped", f"group_quantize_rowsd{z}_f{f.format_id}_d{dt}{suffix}",
                 _rows_direct_grid(Kshared, rows_total, G, input_dtype, ext), (
                     Arg("x"), P._i64(G), P._buf(meta), P._at(band, 8 * _band_desc_offset(n_band_rows, n_band_tiles)),  # type: ignore[arg-type]  # direct: one K
                     P._i64(Kshared), P._buf(out["row_data"]), P._buf(out["row_scales"]), ptr(a_row),  # type: ignore[arg-type]  # rows_only: rowwise
                     P._i32(flags), Arg("seed"), P._i32(lw))
                 # the block row b // tiles_k as (b m) >> p (grouped.cu div_magic)
                 + tuple(P._u32(v) for v in div_magic(tiles_k)))
    elif rows_only and one_k:
        b.launch("grouped", qname, grid, (
            Arg("x"), P._i64(G), P._buf(meta), ptr(band), P._i64(Kshared), P._buf(out["row_data"]),  # type: ignore[arg-type]  # rows_only: rowwise
            P._buf(out["row_scales"]), ptr(a_row), P._i32(flags), Arg("seed"), P._i32(rows_lw(Kshared))))  # type: ignore[arg-type]  # rows_only: rowwise
    elif rows_only:
        b.launch("grouped", qname, grid, (
            Arg("x"), P._i64(G), P._buf(meta), fd, ld, P._buf(out["row_data"]), P._buf(out["row_scales"]),  # type: ignore[arg-type]  # rows_only: rowwise
            ptr(a_row), P._i32(flags), Arg("seed")))
    else:
        # staged: the one-tile kernel writes swizzled scales (and their padding) into the staging
        # buffers, at the offsets of group_meta's second copy of the arrays (meta_k)
        b.launch("grouped", qname, grid, (
            Arg("x"), P._i64(G), meta_k, fd, ld, ptr(out["row_data"]), st_row if staged else ptr(out["row_scales"]),
            ptr(out["col_data"]), st_col if staged else ptr(out["col_scales"]), a_row_k, a_col_k,
            # group_quantize1 takes the caller's row count where the seed was (plain recipes; its _sr
            # kernels the seed)
            P._i32(flags | (QFLAG_SWIZZLED if staged else 0)), P._u64(rows_total) if one and not ext else Arg("seed"),
            P._u32(opts.rht_sign_mask), band_arg, P._i64(Kshared or 0))
            # group_quantize1: the band of CTA b is b // ceil(K / 64), as (b m) >> p
            + (tuple(P._u32(v) for v in div_magic(-(-Kshared // _QT))) if one else ()))
    if staged:   # the members' compact matrices from the staged ones (slots of every square band)
        W = G + 1
        # U rowwise and 2 U columnwise slots per square band, one CTA each (swizzle.cu)
        U = -(-Kshared // 2048)
        b.launch("swizzle", "group_unswizzle_scales", max(1, min(3 * U * n_sq, _MAX_GRID)), (
            P._i64(n_sq), P._i64(Kshared), sq_desc, P._at(meta, 8 * _META_SQ * W), P._at(meta, 8 * _META_SROW * W),
            P._at(meta, 8 * _META_SCOL * W), st_row, st_col, P._buf(out["row_scales"]), P._buf(out["col_scales"])))  # type: ignore[arg-type]  # staged: both operands
    if f.is_nvfp4:
        if opts.want_rowwise:
            out["row_amax"] = a_row
        if opts.want_columnwise:
            out["col_amax"] = a_col
    # the fast path's executors carve the 1-D EMPTY / ZEROS buffers from one allocation (host time)
    return b.plan(out, arena=True)


def group_quantize_plan(device: int, input_dtype, opts, G, n_el, caps, amax_size, dbias, Kshared, rows_total,
                        dims) -> _plan.Plan:
    """The memoised build_group_quantize_plan for `device` (the current one): the key holds every
    input of the plan but the seed. Plans of ("host", ...) dims (the general path) are built, not
    memoised: their values are part of the key, so dims that change every call would fill the
    memo (the dict's growth alone doubled a call's planning time, 34 -> 62-68 us per call over 3000
    distinct dims, CPU). The fast path's ("param", G) plans hold no dims values and are memoised."""
    if dims[0] == "host":       # ("param", G) plans hold no dims values: memoised
        return build_group_quantize_plan(input_dtype, opts, G, n_el, caps, amax_size, dbias, Kshared, rows_total, dims,
                                         _sm_count_of(device), _resident)
    key = (device, input_dtype, opts.format, opts.axis, opts.scale_layout, opts.scale_rule, opts.tile_2d,
           opts.row_scaled, opts.rht, opts.rht_sign_mask, opts.rounding, G, n_el, caps["srow"], caps["scol"],
           caps["arow"], caps["acol"], amax_size, bool(dbias), Kshared, rows_total, dims)
    plans = _plan.GROUP_PLANS
    plan = plans.get(key)
    if plan is None:
        plan = build_group_quantize_plan(input_dtype, opts, G, n_el, caps, amax_size, dbias, Kshared, rows_total, dims,
                                         _sm_count_of(device), _resident)
        if len(plans) >= _plan._MAX_PLANS:
            plans.clear()
        plans[key] = plan
    return plan


def _resident(module: str, kernel: str, cap: int) -> int:
    """Resident 256-thread CTAs per SM of `kernel` on the current device, at most `cap`."""
    return min(_resident_per_sm(_fn(module, kernel), cap), cap)


def group_quantize(x, input_dtype, opts, fd, ld, G, n_el, caps, amax, dbias=False, Kshared=None, rows_total=None,
                   dims=None):
    """x: flat CuPy input; fd/ld: int64 device dims (G,) or None where `dims` makes them (see
    build_group_quantize_plan; default ("dev", None, False): the caller's fd and ld); n_el: element
    bound; caps: buffer bounds. Returns (plan outputs as CuPy arrays by name, the plan)."""
    cp = _cp()
    plan = group_quantize_plan(cp.cuda.runtime.getDevice(), input_dtype, opts, G, n_el, caps,
                               None if amax is None else int(amax.size), dbias, Kshared, rows_total,
                               dims or ("dev", None, False))
    bufs = _run_plan(plan, x, amax, opts.seed, fd=fd, ld=ld)
    out = {k: None if v is None else bufs[v] for k, v in plan.outputs.items()}   # fd / ld: the plan's copies
    if out["dbias"] is not None:
        out["dbias"] = out["dbias"].astype(cp.float32)
    return out


# segments of 16 per thread per step of group_dequantize (cuda_src/common/dequantize_op.cuh DqGroupTune)
_GROUP_DQ_SEGS = {"float32": 2, "bfloat16": 2, "float16": 2}


def shared_cols(kind: str, operand: str) -> bool:
    """Whether every member of a group of `kind` has the same columns in `operand` (the rowwise
    operand of one K, the columnwise operand of one M): group_dequantize to a 16-bit dtype then
    launches group_dequantize_cols_*, which takes segments by global row as the single-tensor kernel
    does (dequantize_kernel)."""
    return kind in ("same", "varying_first") if operand == "rowwise" else kind in ("same", "varying_last")


def dequantize_kernel(fmt_name: str, out_dtype: str, n_el: int, sm: int, cols: bool = False) -> tuple[str, int]:
    """(grouped.cu kernel name, CTAs of _THREADS) of a grouped dequantize of n_el elements
    (group_dequantize; both paths of the API use it): group_dequantize_cols_* when `cols` (the
    members share their columns: shared_cols) and the output is 16-bit, else group_dequantize_*
    (H200, 65536 x 7168, forty-eighth session: the _cols kernels 3-7 % faster to bfloat16, to
    float32 within -2.6 / +0.7 %, so float32 keeps the general kernel; forty-ninth session: with MX
    scales laid out as one operand's, compact or members at multiples of 128 rows, they run without
    member state, which each CTA checks on the device). Each CTA takes _THREADS * _GROUP_DQ_SEGS
    segments (16 elements of a row, fewer at a row's end) per step of its grid-stride loop. A
    persistent grid, as many CTAs per SM as the kernel is compiled to keep resident (_DQ_MIN_CTAS),
    fewer only when even n_el segments (one element each: the bound for any shapes, the dims being
    on the device) would need fewer; CTAs past the real segments exit at once."""
    per_cta = _THREADS * _GROUP_DQ_SEGS[out_dtype]
    grid = _persistent_grid(-(-n_el // per_cta), lambda cap: _DQ_MIN_CTAS[out_dtype], sm)
    pre = "group_dequantize_cols" if cols and out_dtype != "float32" else "group_dequantize"
    return f"{pre}_f{FORMATS[fmt_name].format_id}_o{_DTYPE_IDS[out_dtype]}", grid


def group_dequantize(data, scales, amax, meta, fd, ld, G, fmt_name, opts, operand, out_dtype, n_el, kind):
    """Every member's operand -> one flat CuPy buffer (member i at element offset offsets[i])."""
    np_dt = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}[out_dtype]
    out = _empty((n_el,), np_dt)
    kernel, grid = dequantize_kernel(fmt_name, out_dtype, n_el, _sm_count_of(_cp().cuda.runtime.getDevice()),
                                     shared_cols(kind, operand))
    _fn("grouped", kernel)((grid,), (_THREADS,), (
        data, scales, amax if amax is not None else _NULL, np.int64(G), meta, fd, ld,
        np.int32(operand == "columnwise"), np.int32(opts.scale_layout == "swizzled"), np.int32(opts.row_scaled), out))
    return out

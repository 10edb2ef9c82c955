"""CUDA kernels against the NumPy reference, byte for byte (SPEC sections 2-6).

Runs the launchers of fp4kit._cuda directly (below the public API) with output poisoning on, so
an unwritten byte cannot pass. Skipped without CuPy or a GPU.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fp4kit import FORMATS, _plan
from fp4kit._validate import quantize_options
from fp4kit.reference import api as ref_api
from fp4kit.reference.layouts import swizzle as ref_swizzle

from gpu_helpers import assert_bytes_equal, assert_float_bits_equal

pytestmark = pytest.mark.gpu

NP_DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
FMTS = list(FORMATS)
MX_FMTS = [f for f in FMTS if FORMATS[f].is_mx]
SHAPES = [(0, 64), (64, 0), (1, 16), (1, 32), (3, 48), (127, 96), (128, 128), (993, 512), (5, 33), (2, 70),
          (130, 62), (132, 48), (136, 64)]   # columnwise rows 2-, 4- and 8-byte aligned


# ---------------------------------------------------------------------------------------------
# inputs

def make_input(shape, dtype, kind="normal", seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if len(shape) else 1
    if kind == "normal":
        # vary the magnitude per 16 elements so that scales differ block to block
        base = rng.standard_normal(n).astype(np.float64)
        mag = 10.0 ** rng.uniform(-4, 4, size=(n + 15) // 16).repeat(16)[:n]
        v = base * mag
    elif kind == "special":
        v = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, size=n)
        specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e-45, 3e38, -3e38,
                             65504.0, 6e-8, 448.0, 480.0, 464.0, 57344.0, 6.0, 5.0, 0.25, -7.5])
        idx = rng.choice(n, size=max(1, n // 5), replace=False) if n else np.zeros(0, int)
        v[idx] = rng.choice(specials, size=idx.size)
        # a few all-zero and all-NaN blocks
        if n >= 64:
            v[:16] = 0.0
            v[32:48] = np.nan
            v[36:40] = -np.nan   # NaN with the sign bit set (must encode as the positive NaN code)
    elif kind == "subnormal":
        v = rng.standard_normal(n) * 1e-40
    else:
        raise ValueError(kind)
    with np.errstate(over="ignore", invalid="ignore"):
        return v.reshape(shape).astype(NP_DTYPES[dtype])


def axes_for(fmt, M, K):
    f = FORMATS[fmt]
    if not f.packed:
        return "both"
    if K % 2 == 0 and M % 2 == 0:
        return "both"
    if K % 2 == 0:
        return "rowwise"
    if M % 2 == 0:
        return "columnwise"
    return None


def to_device(cp, x):
    dn = ref_api.dtype_name(x.dtype)
    M = int(np.prod(x.shape[:-1])) if x.ndim > 1 else 1
    x2 = np.ascontiguousarray(x.reshape(M, x.shape[-1]))
    if dn == "bfloat16":
        x2 = x2.view(np.uint16)
    return cp.asarray(x2), dn


def gpu_quantize(cp, x, fmt, amax=None, **kw):
    from fp4kit import _cuda

    xg, dn = to_device(cp, x)
    opts = quantize_options(x.shape, dn, fmt, amax_shape=None if amax is None else amax.shape,
                            amax_dtype=None if amax is None else "float32", **kw)
    ag = None if amax is None else cp.asarray(amax)
    row, col = _cuda.quantize(xg, opts, ag, input_dtype=dn)
    cp.cuda.get_current_stream().synchronize()
    host = lambda d: None if d is None else {k: (None if v is None else cp.asnumpy(v)) for k, v in d.items()}
    return host(row), host(col)


def check_against_reference(cp, x, fmt, amax=None, **kw):
    q = ref_api.quantize(x, fmt, amax=amax, **kw)
    row, col = gpu_quantize(cp, x, fmt, amax=amax, **kw)
    for name, got in (("rowwise", row), ("columnwise", col)):
        want = getattr(q, name)
        assert (got is None) == (want is None), name
        if want is None:
            continue
        tag = f"{fmt} {name} {x.dtype} {x.shape} {kw}"
        assert_bytes_equal(got["data"], want.data, f"{tag}: data")
        assert_bytes_equal(got["scales"], want.scales, f"{tag}: scales")
        if want.amax is None:
            assert got["amax"] is None
        else:
            assert_bytes_equal(got["amax"].view(np.uint32), np.asarray(want.amax, np.float32).view(np.uint32),
                               f"{tag}: amax")
    return q, row, col


# ---------------------------------------------------------------------------------------------
# quantize

@pytest.mark.parametrize("layout", ["compact", "swizzled"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_shapes(gpu, fmt, dtype, layout):
    for i, shape in enumerate(SHAPES):
        axis = axes_for(fmt, *shape)
        if axis is None:
            continue
        x = make_input(shape, dtype, "normal", seed=i)
        check_against_reference(gpu, x, fmt, axis=axis, scale_layout=layout)


def check_square_kernel(gpu, fmt, dtype, shapes, suffix, seed):
    """The 128 x 128 square kernels (_quad / _quadm): each shape is planned with the kernel `suffix`
    and quantizes to the reference's bytes in both scale layouts; then a view one element into its
    buffer (no 16-byte loads) of the last shape's size. The planner takes the squares from
    _plan.QUAD_MIN_ELEMENTS / QUADM_MIN_ELEMENTS elements up; the tests turn that bound off
    (size_rules_off), since small shapes reach every edge case quickly."""
    from fp4kit import _cuda

    assert not _plan.SIZE_RULES, "run with the size_rules_off fixture"
    for i, (shape, kind) in enumerate(shapes):
        opts = quantize_options(shape, dtype, fmt, axis="both")
        kernels = [s.kernel for s in _plan.build_quantize_plan(*shape, dtype, opts, None, 16, 132).launches()]
        assert kernels[0].endswith(suffix), (shape, kernels)
        x = make_input(shape, dtype, kind, seed=seed + i)
        for layout in ("compact", "swizzled"):
            check_against_reference(gpu, x, fmt, axis="both", scale_layout=layout)
    M, K = shapes[-1][0]
    xs = make_input((M, K), dtype, "special", seed=seed + 20)
    buf, dn = to_device(gpu, make_input((M * K + 1,), dtype, "normal", seed=seed + 21))
    buf = buf.reshape(-1)
    buf[1:] = to_device(gpu, xs)[0].reshape(-1)
    for layout in ("compact", "swizzled"):
        opts = quantize_options(xs.shape, dn, fmt, axis="both", scale_layout=layout)
        row, col = _cuda.quantize(buf[1:].reshape(M, K), opts, None, input_dtype=dn)
        want = ref_api.quantize(xs, fmt, axis="both", scale_layout=layout)
        for got, ref, name in ((row, want.rowwise, "rowwise"), (col, want.columnwise, "columnwise")):
            assert_bytes_equal(gpu.asnumpy(got["data"]), ref.data, f"{dtype} misaligned {layout} {name}: data")
            assert_bytes_equal(gpu.asnumpy(got["scales"]), ref.scales, f"{dtype} misaligned {layout} {name}: scales")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt", sorted(_plan.QUAD_MIN_ELEMENTS))
def test_quantize_quad_kernel(gpu, size_rules_off, fmt, dtype):
    """MXFP8 "both" from 16-bit input with M and K multiples of 128 runs quantize_f<F>_d<D>_quad (4
    groups of 256 threads per 128 x 128 square, the scale blocks written whole from shared memory):
    bytes equal the reference for both scale layouts, normal and special values, one square and
    many (rectangular in both directions), and a misaligned input (element-wise loads)."""
    check_square_kernel(gpu, fmt, dtype, [((128, 128), "normal"), ((256, 384), "special"), ((384, 1280), "normal"),
                                          ((1280, 256), "special"), ((128, 4096), "normal"), ((256, 256), "special")],
                        "_quad", 600)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt", sorted(_plan.QUADM_MIN_ELEMENTS))
def test_quantize_quadm_kernel(gpu, size_rules_off, fmt, dtype):
    """MXFP8 / MXFP6 / MXFP4 "both" from 16-bit input with K % 128 == 0 and M not a multiple of 128 runs
    quantize_f<F>_d<D>_quadm (128 x 128 squares, the last square row partial): bytes equal the
    reference for both scale layouts (swizzled padding written as zeros by the kernel; compact through
    a staging buffer of the padded swizzled shape), with columnwise code rows at every even and odd
    byte offset (M % 16 != 0, the whole-square writer) and 16-byte aligned ones (M % 16 == 0), rows
    of fewer than 16 bytes (M < 16), one square and many, special values, and a misaligned input."""
    shapes = [((1, 128), "normal"), ((7, 256), "special"), ((16, 128), "normal"), ((130, 384), "special"),
              ((200, 128), "normal"), ((258, 1280), "normal"), ((8200, 256), "special"), ((1000, 512), "normal"),
              ((383, 256), "special"), ((8256, 128), "normal"), ((136, 256), "special")]
    if fmt == "mxfp4_e2m1":   # columnwise codes pack pairs of rows: even M, rows off 8 / 16 bytes
        shapes = [((2, 128), "normal"), ((6, 256), "special"), ((16, 128), "normal"), ((130, 384), "special"),
                  ((200, 128), "normal"), ((258, 1280), "normal"), ((8200, 256), "special"), ((1000, 512), "normal"),
                  ((382, 256), "special"), ((8256, 128), "normal"), ((138, 256), "special")]
    check_square_kernel(gpu, fmt, dtype, shapes, "_quadm", 700)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2"])
def test_quantize_cols_kernel(gpu, fmt, dtype):
    """The columnwise operand alone from 16-bit input with M % 16 == 0 runs quantize_cols_f<F>_d<D>_*
    (thread per 16 rows of 2 or 4 columns, no shared-memory transpose; compact scales 32 bytes per
    column and CTA, swizzled ones whole 512-byte blocks with their padding) where _plan.cols_kernel
    says: NVFP4 in both layouts (4- and 8-byte loads), compact MXFP8 / MXFP6 (8-byte loads). Bytes
    equal the reference over shapes with partial CTAs in both directions (M not a multiple of the
    tile's 1024 / 512 / 64 rows, K not of 64 / 128, a partial last MX block), compact scale rows off
    a 16-byte boundary, special values, NVFP4 with a computed and given amaxes (zero, tiny, huge), the
    MX floor rule, and inputs 16-, 4- and 2-byte aligned (the last two fall back as planned)."""
    from fp4kit import _cuda, _plan

    nv = FORMATS[fmt].is_nvfp4
    d = 1 if dtype == "bfloat16" else 2
    shapes = [(16, 4), (48, 132), (512, 64), (2048, 192), (528, 256), (1040, 68), (4096, 128), (96, 4100),
              (3088, 132), (1056, 130)]
    layouts = ("compact", "swizzled") if nv else ("compact",)
    seen = set()
    for i, shape in enumerate(shapes):
        for layout in layouts:
            opts = quantize_options(shape, dtype, fmt, axis="columnwise", scale_layout=layout)
            kernels = [s.kernel for s in _plan.build_quantize_plan(*shape, dtype, opts, None, 16, 132).launches()]
            suffix = _plan.cols_kernel(fmt, dtype, *shape, 16, True, layout)
            if suffix is None:   # MX with K % 4 != 0: the tile kernel
                assert not nv and shape[1] % 4 and not kernels[-1].startswith("quantize_cols"), kernels
            else:
                assert kernels[-1] == f"quantize_cols_f{FORMATS[fmt].format_id}_d{d}{suffix}", kernels
                assert len(kernels) == (2 if nv else 1), kernels   # no unswizzle / padding launch
                seen.add(suffix)
            x = make_input(shape, dtype, "special" if i % 2 else "normal", seed=700 + i)
            check_against_reference(gpu, x, fmt, axis="columnwise", scale_layout=layout)
            if nv:
                for a in ((3.5e3 if i % 2 else 0.75), 0.0, 1e-30, 3e38):
                    check_against_reference(gpu, x, fmt, amax=np.array([a], np.float32), axis="columnwise",
                                            scale_layout=layout)
            else:
                check_against_reference(gpu, x, fmt, axis="columnwise", scale_layout=layout, scale_rule="floor")
    assert seen == ({"_c", "_s", "_s2"} if nv else {"_c2"}), seen
    # input views 8, 2 and 1 elements in: 16-, 4- and 2-byte aligned
    xs = make_input((1040, 192), dtype, "special", seed=720)
    for off in (8, 2, 1):
        buf, dn = to_device(gpu, make_input((1040 * 192 + off,), dtype, "normal", seed=721))
        buf = buf.reshape(-1)
        buf[off:] = to_device(gpu, xs)[0].reshape(-1)
        view = buf[off:].reshape(1040, 192)
        for layout in layouts:
            opts = quantize_options(xs.shape, dn, fmt, axis="columnwise", scale_layout=layout)
            align = _plan.align_class(view.data.ptr)
            plan = _plan.build_quantize_plan(1040, 192, dn, opts, None, align, 132)
            suffix = _plan.cols_kernel(fmt, dn, 1040, 192, align, True, layout)
            assert (suffix is not None) == (off == 8 or (nv and off == 2)), (off, suffix)
            assert plan.launches()[-1].kernel.startswith("quantize_cols") == (suffix is not None), plan
            _, col = _cuda.quantize(view, opts, None, input_dtype=dn)
            want = ref_api.quantize(xs, fmt, axis="columnwise", scale_layout=layout).columnwise
            for k in ("data", "scales") + (("amax",) if nv else ()):
                got = gpu.asnumpy(col[k])
                ref = np.asarray(getattr(want, k))
                assert_bytes_equal(got.view(np.uint8), ref.view(np.uint8), f"{dtype} offset {off} {layout}: {k}")


@pytest.mark.parametrize("layout", ["compact", "swizzled"])
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"])
def test_quantize_tile_scale_runs(gpu, fmt, layout):
    """The tile kernels' scale bytes of one tile row / column (2 MX, 4 NVFP4) leave in one store
    when whole and aligned (quantize_tile_rc's STASH): shapes where the last run of a row or a
    column is partial (K or M not a multiple of 64) and where compact scale rows of an odd or
    non-multiple-of-4 length put the runs off their 2- or 4-byte boundary, for both operands."""
    packed = FORMATS[fmt].packed
    for i, (M, K) in enumerate([(67, 96), (96, 67), (200, 80), (80, 200), (129, 160), (64, 64), (193, 48)]):
        if packed and M % 2:         # FP4's columnwise operand packs along M: 68, 130, 194 rows instead
            M += 1
        x = make_input((M, K), "bfloat16", "special" if i % 2 else "normal", seed=70 + i)
        allowed = axes_for(fmt, M, K)
        for axis in ("columnwise", "both"):
            if allowed == "both" or allowed == axis:
                check_against_reference(gpu, x, fmt, axis=axis, scale_layout=layout)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2"])
def test_quantize_compact_scales_through_staging(gpu, size_rules_off, fmt, dtype):
    """Compact MXFP8 / MXFP6 scales written swizzled to a staging buffer, then unswizzled
    (fp4kit._plan.stage_scales), by the rows kernel and the tile kernel: shapes where both, one or
    none of the operands take that path (partial last blocks, several 128-row bands)."""
    from fp4kit import _plan

    cases = (((128, 128), (True, True)), ((993, 512), (False, True)), ((1000, 384), (False, True)),
             ((256, 1024), (True, True)), ((384, 4096), (True, True)), ((961, 512), (False, False)),
             ((256, 100), (True, False)), ((128, 96), (False, False)))
    for i, ((M, K), staged) in enumerate(cases):
        nb = FORMATS[fmt].num_blocks
        assert (_plan.stage_scales(fmt, M, nb(K)), _plan.stage_scales(fmt, K, nb(M))) == staged, (M, K)
        x = make_input((M, K), dtype, "special" if i % 2 else "normal", seed=40 + i)
        for axis in ("rowwise", "columnwise", "both"):
            check_against_reference(gpu, x, fmt, axis=axis, scale_layout="compact")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_quantize_mxfp4_both_compact_scales_through_staging(gpu, size_rules_off, dtype):
    """MXFP4 "both" with the plain recipe and compact scales: staged swizzled and unswizzled
    (fp4kit._plan.stage_scales with both_plain_k) where the shape allows, for both, one or none of
    the operands (zero-filled for ragged compact rows from 16-bit input); the plan shows the
    unswizzle launch exactly when one stages."""
    from fp4kit import _plan

    fmt = "mxfp4_e2m1"
    nb = FORMATS[fmt].num_blocks
    # (shape, staged without padding, staged zero-filled: compact rows of an odd number of bytes)
    cases = (((128, 128), (True, True), (False, False)), ((994, 512), (False, True), (False, False)),
             ((1000, 384), (False, True), (False, False)), ((256, 1024), (True, True), (False, False)),
             ((384, 4096), (True, True), (False, False)), ((962, 512), (False, False), (False, True)),
             ((256, 100), (True, False), (False, False)), ((128, 96), (False, False), (True, False)))
    for i, ((M, K), staged, ragged) in enumerate(cases):
        ragged = ragged if dtype != "float32" else (False, False)
        assert (_plan.stage_scales(fmt, M, nb(K), K), _plan.stage_scales(fmt, K, nb(M), K)) == staged, (M, K)
        both16 = dtype != "float32"
        assert (_plan.stage_ragged_scales(fmt, nb(K), both16), _plan.stage_ragged_scales(fmt, nb(M), both16)) == ragged
        opts = quantize_options((M, K), dtype, fmt, axis="both", scale_layout="compact")
        plan = _plan.build_quantize_plan(M, K, dtype, opts, None, 16, 132)
        assert ("unswizzle_scales" in [s.kernel for s in plan.launches()]) == any(staged + ragged), (M, K)
        x = make_input((M, K), dtype, "special" if i % 2 else "normal", seed=140 + i)
        check_against_reference(gpu, x, fmt, axis="both", scale_layout="compact")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_quantize_nvfp4_both_ragged_compact_scales_staged(gpu, dtype):
    """NVFP4 "both" from 16-bit input with compact scale rows of a length that is not a multiple of 4
    bytes (fp4kit._plan.stage_ragged_scales): those operands' scales go through a zero-filled staging
    buffer of the padded swizzled shape and unswizzle_scales; bytes equal the reference for one, the
    other and both operands ragged, with computed and supplied amaxes (zero, huge) and special values."""
    from fp4kit import _plan

    nb = FORMATS["nvfp4"].num_blocks
    cases = (((130, 256), (False, True)), ((256, 200), (True, False)), ((1000, 520), (True, True)),
             ((8200, 128), (False, True)), ((128, 128), (False, False)))
    for i, ((M, K), ragged) in enumerate(cases):
        assert (_plan.stage_ragged_scales("nvfp4", nb(K), True),
                _plan.stage_ragged_scales("nvfp4", nb(M), True)) == ragged, (M, K)
        opts = quantize_options((M, K), dtype, "nvfp4", axis="both", scale_layout="compact")
        plan = _plan.build_quantize_plan(M, K, dtype, opts, None, 16, 132)
        zero_staged = [s for s in plan.steps if type(s) is _plan.Buffer and s.init == _plan.ZEROS and s.dtype == "uint8"]
        assert len(zero_staged) == sum(ragged), (M, K, zero_staged)
        x = make_input((M, K), dtype, "special" if i % 2 else "normal", seed=160 + i)
        check_against_reference(gpu, x, "nvfp4", axis="both", scale_layout="compact")
        for a in (0.0, 3e38):
            check_against_reference(gpu, x, "nvfp4", amax=np.float32([a]), axis="both", scale_layout="compact")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_quantize_nvfp4_both_long_rows_compact_scales_staged(gpu, dtype):
    """NVFP4 "both" with the plain recipe and K >= _plan.STAGED_NVFP4_MIN_K: compact scales through
    a swizzled staging buffer and unswizzle_scales where the shape has no padding (and the ragged
    staging or direct stores elsewhere); bytes equal the reference with computed and supplied amaxes
    and special values."""
    from fp4kit import _plan

    k = _plan.STAGED_NVFP4_MIN_K
    # (130, k): its columnwise scale rows of 9 bytes are staged zero-filled from 16-bit input only
    for i, (M, K, want) in enumerate(((128, k, True), (256, k + 128, True), (130, k, dtype != "float32"),
                                      (128, k - 64, False))):
        opts = quantize_options((M, K), dtype, "nvfp4", axis="both", scale_layout="compact")
        plan = _plan.build_quantize_plan(M, K, dtype, opts, None, 16, 132)
        assert ("unswizzle_scales" in [s.kernel for s in plan.launches()]) == want, (M, K)
        x = make_input((M, K), dtype, "special" if i % 2 else "normal", seed=180 + i)
        check_against_reference(gpu, x, "nvfp4", axis="both", scale_layout="compact")
        check_against_reference(gpu, x, "nvfp4", amax=np.float32([7.5]), axis="both", scale_layout="compact")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_quantize_mxfp4_columnwise_large_compact_scales_staged(gpu, monkeypatch, dtype):
    """MXFP4's columnwise operand alone with the plain recipe in large tensors (fp4kit._plan
    STAGED_MXFP4_COL_MIN_M / _MIN_ELEMENTS): compact scales through a swizzled staging buffer and
    unswizzle_scales where the shape has no padding, direct stores elsewhere. One shape at the real
    thresholds, then the same kernels at small shapes with the thresholds lowered; bytes equal the
    reference, special values too."""
    from fp4kit import _plan

    def staged(M, K):
        opts = quantize_options((M, K), dtype, "mxfp4_e2m1", axis="columnwise", scale_layout="compact")
        return "unswizzle_scales" in [s.kernel for s in _plan.build_quantize_plan(M, K, dtype, opts, None, 16, 132).launches()]

    M, K = _plan.STAGED_MXFP4_COL_MIN_M, _plan.STAGED_MXFP4_COL_MIN_ELEMENTS // _plan.STAGED_MXFP4_COL_MIN_M + 128
    assert staged(M, K)
    x = make_input((M, K), dtype, "normal", seed=189)
    check_against_reference(gpu, x, "mxfp4_e2m1", axis="columnwise", scale_layout="compact")
    monkeypatch.setattr(_plan, "STAGED_MXFP4_COL_MIN_M", 128)
    monkeypatch.setattr(_plan, "STAGED_MXFP4_COL_MIN_ELEMENTS", 128 * 256)
    _plan.clear_plans()
    try:
        for i, (M, K, want) in enumerate(((128, 384, True), (384, 1024, True), (256, 256 + 128, True), (96, 1024, False),
                                          (130, 1024, False), (128, 256, False), (256, 320, False))):
            assert staged(M, K) == want, (M, K)
            x = make_input((M, K), dtype, "special" if i % 2 else "normal", seed=190 + i)
            check_against_reference(gpu, x, "mxfp4_e2m1", axis="columnwise", scale_layout="compact")
    finally:
        monkeypatch.undo()
        _plan.clear_plans()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("fmt", ["mxfp4_e2m1", "nvfp4"])
def test_fp4_columnwise_runs_off_8_bytes(gpu, fmt, dtype):
    """FP4 columnwise code rows of M / 2 bytes that start at every offset modulo 8 (M / 2 odd, or 2
    or 4 modulo 8; the tile kernel's per-lane 8-byte runs then leave as aligned 4 / 2 / 1-byte
    pieces), full and partial tile rows: bytes equal the reference in both scale layouts, with
    special values, for "both" and the columnwise operand alone (tests/gpu/test_grouped.py runs the
    grouped kernels' members of even sizes through the same stores)."""
    for i, (M, K) in enumerate([(1030, 256), (260, 192), (136, 128), (202, 64), (66, 96)]):
        x = make_input((M, K), dtype, "special" if i % 2 else "normal", seed=900 + i)
        for layout in ("compact", "swizzled"):
            for axis in ("both", "columnwise"):
                check_against_reference(gpu, x, fmt, axis=axis, scale_layout=layout)


ROWWISE_SHAPES = [(1, 16), (3, 48), (5, 34), (64, 256), (65, 264), (130, 62), (127, 1000), (200, 4096), (7, 770),
                  (37, 1500), (260, 1500), (257, 2112), (3, 1100), (1, 4096)]
# (fp4kit._plan.rows_lw: lw = 6 for the last four, with a partial last CTA column for K = 1500, 2112, 1100)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_rowwise_kernel(gpu, fmt, dtype):
    """The rowwise-only kernel (quantize_*_rows) against the reference: ragged K (partial vectors
    and blocks), rows not a multiple of the CTA's, special values, both scale layouts and rules,
    and a misaligned input (element-wise loads)."""
    from fp4kit import _cuda

    rules = ("rceil", "floor") if FORMATS[fmt].is_mx else ("rceil",)
    for i, (M, K) in enumerate(ROWWISE_SHAPES):
        if FORMATS[fmt].packed and K % 2:
            continue
        x = make_input((M, K), dtype, "special" if i % 2 else "normal", seed=300 + i)
        for j, rule in enumerate(rules):
            check_against_reference(gpu, x, fmt, axis="rowwise", scale_rule=rule,
                                    scale_layout="swizzled" if (i + j) % 2 else "compact")
    # misaligned: a view starting one element into a buffer (no 16-byte vector loads)
    x = make_input((33, 257), dtype, "special", seed=399)[:, 1:]
    xs = np.ascontiguousarray(x)
    buf, dn = to_device(gpu, make_input((33 * 256 + 1,), dtype, "normal", seed=398))
    buf = buf.reshape(-1)
    buf[1:] = to_device(gpu, xs)[0].reshape(-1)
    xg = buf[1:].reshape(33, 256)
    opts = quantize_options(xs.shape, dn, fmt, axis="rowwise")
    row, _ = _cuda.quantize(xg, opts, None, input_dtype=dn)
    want = ref_api.quantize(xs, fmt, axis="rowwise").rowwise
    assert_bytes_equal(gpu.asnumpy(row["data"]), want.data, f"{fmt} {dtype} misaligned: data")
    assert_bytes_equal(gpu.asnumpy(row["scales"]), want.scales, f"{fmt} {dtype} misaligned: scales")


# The 16-bit rows kernels store scale codes as words (MX: through shared memory; NVFP4 with swizzled
# scales: _rowsz, quad shuffles); with swizzled scales a block inside a complete 128-row band
# (lw >= 3) takes rows 32 apart (quantize_rows_direct, STG). Shapes:
# lw = 3, 4, 5, 6 in whole bands, a partial last band (300, 129), a partial last CTA column (K = 3000,
# 1500, 1040), lw = 2 over several bands (K = 64, 96), and a grid of many bands at lw = 6.
ROWS_BAND_SHAPES = [(128, 128), (256, 256), (384, 512), (256, 1024), (300, 2048), (128, 3000), (129, 1500),
                    (256, 64), (512, 96), (640, 7168), (2048, 1040)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_rowwise_kernel_bands(gpu, fmt, dtype):
    """The 16-bit rows kernel (quantize_*_rows) in whole and partial 128-row bands, both scale
    layouts, against the reference (outputs poisoned first)."""
    for i, (M, K) in enumerate(ROWS_BAND_SHAPES):
        x = make_input((M, K), dtype, "special" if i % 3 == 2 else "normal", seed=700 + i)
        for layout in ("swizzled", "compact"):
            check_against_reference(gpu, x, fmt, axis="rowwise", scale_layout=layout)
            if FORMATS[fmt].is_nvfp4:   # a supplied amax: the rows kernel at every size (computed: the
                # fused small kernel up to fp4kit._plan.SMALL_FUSED_MAX elements)
                amax = np.float32([np.abs(x.astype(np.float32)).max() if i % 3 != 2 else 7.5])
                check_against_reference(gpu, x, fmt, amax=amax, axis="rowwise", scale_layout=layout)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_special_values(gpu, fmt, dtype):
    for i, shape in enumerate([(128, 128), (66, 94), (2, 32), (256, 48)]):
        x = make_input(shape, dtype, "special", seed=100 + i)
        for axis in ("rowwise", "columnwise", "both"):
            check_against_reference(gpu, x, fmt, axis=axis, scale_layout="swizzled" if i % 2 else "compact")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("fmt", FMTS)
def test_quantize_subnormal_inputs(gpu, fmt, dtype):
    x = make_input((64, 96), dtype, "subnormal", seed=7)
    if dtype == "float16":
        rng = np.random.default_rng(1)     # magnitudes 0..1023 (zero and the subnormals), either sign
        mag = rng.integers(0, 1024, size=(64, 96), dtype=np.uint16)
        x = (mag | (rng.integers(0, 2, size=(64, 96), dtype=np.uint16) << 15)).view(np.float16)
    check_against_reference(gpu, x, fmt, axis="both")


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_quantize_every_16bit_pattern(gpu, fmt, dtype):
    """All 65536 bf16 / fp16 bit patterns (NaN, inf, subnormals, -0 included), 32 per row."""
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    rng = np.random.default_rng(3)
    x = bits.view(NP_DTYPES[dtype]).reshape(2048, 32)
    check_against_reference(gpu, x, fmt, axis="both")
    x = rng.permutation(bits).view(NP_DTYPES[dtype]).reshape(1024, 64)
    check_against_reference(gpu, x, fmt, axis="both", scale_layout="swizzled")


@pytest.mark.parametrize("fmt", MX_FMTS)
def test_quantize_floor_rule(gpu, fmt):
    for i, shape in enumerate([(128, 128), (66, 94), (1, 32)]):
        for kind in ("normal", "special"):
            x = make_input(shape, "bfloat16", kind, seed=i)
            check_against_reference(gpu, x, fmt, axis=axes_for(fmt, *shape), scale_rule="floor",
                                    scale_layout="swizzled")


def test_quantize_power_of_two_boundaries(gpu):
    """Block amaxes sitting on and around every power-of-two boundary of each element max."""
    for fmt in MX_FMTS:
        emax = FORMATS[fmt].element_max
        rows = []
        for e in range(-130, 128):
            for m in (np.float32(emax), np.nextafter(np.float32(emax), np.float32(0)), np.nextafter(np.float32(emax), np.float32(np.inf))):
                with np.errstate(over="ignore", under="ignore"):
                    a = np.float32(np.ldexp(np.float64(m), e))
                row = np.full(32, a / 3, np.float32)
                row[0] = a
                rows.append(row)
        x = np.stack(rows).astype(np.float32)
        for rule in ("rceil", "floor"):
            check_against_reference(gpu, x, fmt, axis="both" if x.shape[0] % 2 == 0 else "rowwise", scale_rule=rule)


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"])
def test_quantize_large(gpu, fmt):
    x = make_input((4096, 7168), "bfloat16", "normal", seed=11)
    check_against_reference(gpu, x, fmt, axis="both", scale_layout="swizzled")


def test_quantize_3d_input(gpu):
    x = make_input((4, 6, 64), "bfloat16", "normal", seed=5)
    check_against_reference(gpu, x, "nvfp4", axis="both")
    check_against_reference(gpu, x, "mxfp8_e5m2", axis="both", scale_layout="swizzled")


def test_quantize_empty(gpu):
    from fp4kit import _cuda

    cp = gpu
    for shape in [(0, 64), (64, 0), (0, 0)]:
        for fmt in FMTS:
            for layout in ("compact", "swizzled"):
                x = cp.zeros(shape, dtype=cp.float32)
                opts = quantize_options(shape, "float32", fmt, axis="both", scale_layout=layout)
                row, col = _cuda.quantize(x, opts, None, input_dtype="float32")
                q = ref_api.quantize(np.zeros(shape, np.float32), fmt, axis="both", scale_layout=layout)
                for got, want in ((row, q.rowwise), (col, q.columnwise)):
                    assert got["data"].shape == want.data.shape
                    assert got["scales"].shape == want.scales.shape
                    if want.amax is not None:
                        assert np.array_equal(cp.asnumpy(got["amax"]), want.amax)


# ---------------------------------------------------------------------------------------------
# NVFP4 variants

def test_nvfp4_given_amax(gpu):
    for i, shape in enumerate([(128, 128), (66, 94), (2, 16)]):
        x = make_input(shape, "bfloat16", "normal", seed=20 + i)
        true = np.nanmax(np.abs(x.astype(np.float32)))
        for a in (true, true / 7, true * 3, 0.0, 1e-38, 3e38, np.inf):
            amax = np.array([a], np.float32)
            check_against_reference(gpu, x, "nvfp4", amax=amax, axis="both", scale_layout="swizzled")


UNCHECKED_AMAXES = np.array([np.nan, -np.nan, np.inf, -np.inf, -1.0, -1e-42, -0.0, 0.5], np.float32)


def _bypass_host_amax_check(monkeypatch):
    """The reference's host amax check off (a NaN amax there is a ValueError), for computing what
    the kernels give a device amax, which is never read by the host."""
    from fp4kit.reference import api as ref_mod, grouped as ref_grouped

    skip = lambda v, members=None: np.array(v, np.float32)   # noqa: E731
    monkeypatch.setattr(ref_mod, "check_amax_values", skip)
    monkeypatch.setattr(ref_grouped, "check_amax_values", skip)


def test_nvfp4_unchecked_device_amax(gpu, monkeypatch):
    """A host amax is checked (NaN or negative: ValueError); a device amax is not (reading it would
    synchronise), and the kernels use its absolute value (the sign bit cleared, as the stored copy)
    through SPEC section 4's formulas (NaN -> S_enc = FLT_MAX, inf -> S_enc = 1). Every path of the
    public calls (one amax, one per row, one per member) equals the reference given |amax|. A
    negative amax per member once made group_meta's multiplier tables index past their end (an
    illegal address)."""
    import fp4kit

    x = make_input((66, 94), "float32", "normal", seed=31)
    with pytest.raises(ValueError, match=r"amax\[0\]: expected a non-negative value"):
        fp4kit.quantize(x, "nvfp4", amax=np.array([-1.0], np.float32))
    _bypass_host_amax_check(monkeypatch)

    def same(got, want, tag):
        for name in ("rowwise", "columnwise"):
            w, g = getattr(want, name), getattr(got, name)
            assert (w is None) == (g is None), name
            if w is None:
                continue
            assert_bytes_equal(gpu.asnumpy(g.data), w.data, f"{tag} {name}: data")
            assert_bytes_equal(gpu.asnumpy(g.scales), w.scales, f"{tag} {name}: scales")
            assert_bytes_equal(gpu.asnumpy(g.amax).view(np.uint32), np.asarray(w.amax).view(np.uint32),
                               f"{tag} {name}: amax")

    xd = gpu.asarray(x)
    for a in UNCHECKED_AMAXES:
        amax = np.array([a], np.float32)
        for axis in ("rowwise", "columnwise", "both"):
            for layout in ("compact", "swizzled"):
                with np.errstate(all="ignore"):
                    want = ref_api.quantize(x, "nvfp4", axis=axis, scale_layout=layout, amax=np.abs(amax))
                got = fp4kit.quantize(xd, "nvfp4", axis=axis, scale_layout=layout, amax=gpu.asarray(amax))
                same(got, want, f"amax {amax[0]!r} {axis} {layout}")
    # one amax per row (row_scaled), the special values among ordinary ones
    rows = np.resize(UNCHECKED_AMAXES, 66)
    for axis in ("rowwise", "both"):
        with np.errstate(all="ignore"):
            want = ref_api.quantize(x, "nvfp4", axis=axis, row_scaled=True, amax=np.abs(rows))
        same(fp4kit.quantize(xd, "nvfp4", axis=axis, row_scaled=True, amax=gpu.asarray(rows)), want,
             f"row_scaled {axis}")
    # one amax per member (group_quantize with one K, host and device dims)
    first = [10, 0, 8, 12, 6, 14, 2, 14]
    for axis in ("rowwise", "both", "columnwise"):
        for layout in ("compact", "swizzled"):
            with np.errstate(all="ignore"):
                want = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, amax=np.abs(UNCHECKED_AMAXES),
                                                       axis=axis, scale_layout=layout)
            for dims in (first, gpu.asarray(np.array(first, np.int64))):
                got = fp4kit.group_quantize(xd, "nvfp4", first_dims=dims, amax=gpu.asarray(UNCHECKED_AMAXES),
                                            axis=axis, scale_layout=layout)
                got.check()
                for g in range(len(first)):
                    same(got[g], want[g], f"group member {g} {axis} {layout} device dims {dims is not first}")


def test_decoding_ignores_the_sign_of_a_device_amax(gpu):
    """A device NVFP4 amax is never read by the host, so a negative one (a hand-built or changed
    operand) is not refused as the reference refuses a host one: dequantize, group_dequantize and
    qmatmul decode with its absolute value, as quantize takes a device amax (before the
    forty-fifth session every decoded sign flipped)."""
    import fp4kit

    x = make_input((64, 96), "float32", "normal", seed=37)
    w = make_input((32, 96), "float32", "normal", seed=38)
    for row_scaled in (False, True):
        q = fp4kit.quantize(gpu.asarray(x), "nvfp4", axis="both", row_scaled=row_scaled)
        b = fp4kit.quantize(gpu.asarray(w), "nvfp4", row_scaled=row_scaled)
        want = {o: gpu.asnumpy(fp4kit.dequantize(q, operand=o)) for o in ("rowwise", "columnwise")}
        want_bf16 = gpu.asnumpy(fp4kit.dequantize(q, "bfloat16"))
        want_mm = gpu.asnumpy(fp4kit.qmatmul(q, b))
        for op in (q.rowwise, q.columnwise, b.rowwise):
            op.amax[...] = -op.amax
        assert float(gpu.asnumpy(q.rowwise.amax).max()) < 0
        tag = f"negated device amax, row_scaled={row_scaled}"
        for o, wnt in want.items():
            assert_float_bits_equal(gpu.asnumpy(fp4kit.dequantize(q, operand=o)), wnt, f"{tag}: {o}")
        assert_float_bits_equal(gpu.asnumpy(fp4kit.dequantize(q, "bfloat16")), want_bf16, f"{tag}: bfloat16")
        np.testing.assert_array_equal(gpu.asnumpy(fp4kit.qmatmul(q, b)), want_mm, err_msg=f"{tag}: qmatmul")
    for dims in ([16, 0, 48], gpu.asarray(np.array([16, 0, 48], np.int64))):
        g = fp4kit.group_quantize(gpu.asarray(x), "nvfp4", first_dims=dims, axis="both")
        want = {o: gpu.asnumpy(fp4kit.group_dequantize(g, operand=o).data) for o in ("rowwise", "columnwise")}
        for amax in (g.rowwise_amax, g.columnwise_amax):
            amax[...] = -amax
        for o, wnt in want.items():
            assert_float_bits_equal(gpu.asnumpy(fp4kit.group_dequantize(g, operand=o).data), wnt,
                                    f"negated device amax, group {o}")


def test_nvfp4_precomputed_tables(gpu, monkeypatch):
    """The NVFP4 tile kernels with multiplier tables computed by the one nvfp4_amax_out launch
    (QFLAG_ENC_TABS; by default from fp4kit._plan.ENC_TABS_MIN_TILES tiles on, lowered to 1 here):
    every tile-kernel variant that takes one amax per operand, computed and given amaxes (zero,
    tiny, huge, inf), into a poisoned table buffer; the plan shows the tables exactly when the
    option allows them (not with row_scaled)."""
    from fp4kit import _plan

    def tables(shape, dtype, **kw):
        opts = quantize_options(shape, dtype, "nvfp4", **kw)
        steps = _plan.build_quantize_plan(*shape, dtype, opts, None, 16, 132).launches()
        return any(s.kernel == "nvfp4_amax_out" and s.args[-1].kind == "buf" for s in steps)

    # the default threshold: 8192^2 'both' takes the tables, 64 x 4096 (64 tiles) fills them per CTA
    assert tables((8192, 8192), "bfloat16", axis="both")
    assert not tables((64, 4096), "bfloat16", axis="both")
    monkeypatch.setattr(_plan, "ENC_TABS_MIN_TILES", 1)
    _plan.clear_plans()
    try:
        assert tables((64, 64), "bfloat16", axis="both")
        assert not tables((64, 64), "bfloat16", axis="both", row_scaled=True)
        for i, (shape, dtype) in enumerate([((128, 128), "bfloat16"), ((130, 62), "float32"), ((66, 94), "float16"),
                                            ((256, 192), "bfloat16")]):
            x = make_input(shape, dtype, "special" if i % 2 else "normal", seed=540 + i)
            for axis in ("both", "columnwise"):
                for layout in ("compact", "swizzled"):
                    check_against_reference(gpu, x, "nvfp4", axis=axis, scale_layout=layout)
            check_against_reference(gpu, x, "nvfp4", axis="rowwise", tile_2d=True)
            check_against_reference(gpu, x, "nvfp4", axis="both", tile_2d=True, scale_layout="swizzled")
            check_against_reference(gpu, x, "nvfp4", axis="both", rounding="stochastic", seed=11 + i)
            true = np.nanmax(np.abs(x.astype(np.float32)))
            for a in (true, true / 7, 0.0, 1e-38, 3e38, np.inf):
                check_against_reference(gpu, x, "nvfp4", amax=np.array([a], np.float32), axis="both")
        x = make_input((128, 128), "bfloat16", "normal", seed=549)
        for mask in (0xD7E8, 0):
            check_against_reference(gpu, x, "nvfp4", axis="both", rht=True, rht_sign_mask=mask)
        check_against_reference(gpu, x, "nvfp4", axis="both", rht=True, amax=np.array([3.0], np.float32),
                                scale_layout="swizzled")
    finally:
        _plan.clear_plans()


@pytest.mark.parametrize("tabs", [False, True], ids=["per_cta_tables", "precomputed_tables"])
def test_nvfp4_stored_amaxes(gpu, monkeypatch, tabs):
    """The amaxes a quantize call stores (a caller's, and the columnwise copy of the computed plain
    amax) come from the nvfp4_amax_out launch, which also fills the multiplier tables when the tile
    kernel takes them: into poisoned buffers, a caller's -0 stored as +0 (quantized as +0), one amax
    per row over several CTAs of that launch, strided device amaxes, an empty input (the launch
    alone), the rows, cols and tile kernels, on CuPy (the PyTorch fast path: test_torch_fast.py)."""
    from fp4kit import _cuda

    if tabs:
        monkeypatch.setattr(_plan, "ENC_TABS_MIN_TILES", 1)
    _plan.clear_plans()

    def run(x, amax_dev, want_amax, **kw):
        """GPU quantize with the device amax `amax_dev` against the reference with `want_amax`."""
        want = ref_api.quantize(x, "nvfp4", amax=want_amax, **kw)
        xg, dn = to_device(gpu, x)
        opts = quantize_options(x.shape, dn, "nvfp4", amax_shape=amax_dev.shape, amax_dtype="float32", **kw)
        row, col = _cuda.quantize(xg, opts, amax_dev, input_dtype=dn)
        for name, got in (("rowwise", row), ("columnwise", col)):
            w = getattr(want, name)
            assert (got is None) == (w is None), name
            if w is None:
                continue
            tag = f"{name} {x.shape} {kw}"
            assert_bytes_equal(gpu.asnumpy(got["data"]), w.data, f"{tag}: data")
            assert_bytes_equal(gpu.asnumpy(got["scales"]), w.scales, f"{tag}: scales")
            assert_bytes_equal(gpu.asnumpy(got["amax"]).view(np.uint32),
                               np.asarray(w.amax, np.float32).reshape(-1).view(np.uint32), f"{tag}: amax")

    try:
        for i, shape in enumerate([(128, 128), (66, 94), (130, 64), (0, 64), (64, 0)]):
            x = make_input(shape, "bfloat16", "normal" if i % 2 else "special", seed=700 + i)
            true = np.float32(np.nanmax(np.abs(x.astype(np.float32)))) if x.size else np.float32(1.5)
            for a, stored in ((-0.0, 0.0), (true * 3, true * 3)):
                want_amax = np.array([stored], np.float32)
                for axis in ("rowwise", "columnwise", "both"):
                    for layout in ("compact", "swizzled"):
                        run(x, gpu.asarray(np.array([a], np.float32)), want_amax, axis=axis, scale_layout=layout)
                # a strided device amax: element 0 of every second float
                run(x, gpu.asarray(np.array([a, 7.0], np.float32))[::2], want_amax, axis="both")
        # one amax per row: 600 rows spread over three CTAs of 256 threads, -0 rows among them, strided
        x = make_input((600, 64), "bfloat16", "normal", seed=710)
        rows = np.abs(x.astype(np.float32)).max(axis=1) * 1.25
        dev = rows.copy()
        dev[[0, 255, 256, 599]] = -0.0
        rows[[0, 255, 256, 599]] = 0.0
        wide = np.stack([dev, np.full_like(dev, 9.0)], axis=1)
        for axis in ("rowwise", "both"):
            run(x, gpu.asarray(dev), rows, axis=axis, row_scaled=True)
            run(x, gpu.asarray(wide)[:, 0], rows, axis=axis, row_scaled=True, scale_layout="swizzled")
    finally:
        _plan.clear_plans()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_nvfp4_small_one_launch(gpu, dtype):
    """Plain rowwise NVFP4 with a computed amax up to fp4kit._plan.SMALL_FUSED_MAX elements runs
    one launch (quantize_f5_d<D>_rowsam: a cluster computes the amax into an uninitialised, poisoned
    buffer, then quantizes): bytes and amax equal the reference at the size boundary (on both sides),
    for ragged shapes, with the largest magnitude in the element-wise tail, all-NaN and all-zero
    inputs, both scale layouts, and a misaligned input."""
    from fp4kit import _cuda, _plan

    n = _plan.SMALL_FUSED_MAX
    cases = [((1, 16), "normal"), ((1, 4096), "special"), ((16, 4096), "normal"), ((3, 1100), "special"),
             ((127, 1000), "normal"), ((n // 1024, 1024), "special"), ((n // 4096 + 1, 4096), "normal"),
             ((257, 2112), "special")]
    for i, (shape, kind) in enumerate(cases):
        x = make_input(shape, dtype, kind, seed=500 + i)
        opts = quantize_options(shape, dtype, "nvfp4")
        fused = _plan.small_fused(opts, *shape, False)
        assert fused == (shape[0] * shape[1] <= n), shape
        for layout in ("compact", "swizzled"):
            check_against_reference(gpu, x, "nvfp4", axis="rowwise", scale_layout=layout)
    # the largest |x| in the last (element-wise) elements of an odd-length tensor, then in the first
    for where in (-1, 0):
        x = make_input((5, 34), dtype, "normal", seed=520)
        x.reshape(-1)[where] = NP_DTYPES[dtype](-30000.0) if dtype != "float16" else np.float16(-60000.0)
        check_against_reference(gpu, x, "nvfp4", axis="rowwise")
    # all NaN (amax 0 by SPEC's NaN-ignoring max), all zero, a single NaN among zeros
    for v in (np.nan, 0.0):
        check_against_reference(gpu, np.full((16, 64), v, NP_DTYPES[dtype]), "nvfp4", axis="rowwise")
    x = np.zeros((16, 64), NP_DTYPES[dtype])
    x[3, 5] = np.nan
    check_against_reference(gpu, x, "nvfp4", axis="rowwise")
    # misaligned input (a view one element in): element-wise amax and rows loads
    xs = np.ascontiguousarray(make_input((33, 257), dtype, "special", seed=521)[:, 1:])
    buf, dn = to_device(gpu, make_input((33 * 256 + 1,), dtype, "normal", seed=522))
    buf = buf.reshape(-1)
    buf[1:] = to_device(gpu, xs)[0].reshape(-1)
    opts = quantize_options(xs.shape, dn, "nvfp4", axis="rowwise")
    row, _ = _cuda.quantize(buf[1:].reshape(33, 256), opts, None, input_dtype=dn)
    want = ref_api.quantize(xs, "nvfp4", axis="rowwise").rowwise
    assert_bytes_equal(gpu.asnumpy(row["data"]), want.data, f"{dtype} misaligned: data")
    assert_bytes_equal(gpu.asnumpy(row["scales"]), want.scales, f"{dtype} misaligned: scales")
    assert_bytes_equal(gpu.asnumpy(row["amax"]).view(np.uint32), np.asarray(want.amax, np.float32).view(np.uint32),
                       f"{dtype} misaligned: amax")


def test_nvfp4_tile_2d(gpu):
    for i, shape in enumerate([(128, 128), (126, 96), (32, 48), (2, 16), (66, 94)]):
        for dtype in ("bfloat16", "float32"):
            x = make_input(shape, dtype, "normal" if i % 2 else "special", seed=30 + i)
            for axis in ("rowwise", "columnwise", "both"):
                check_against_reference(gpu, x, "nvfp4", axis=axis, tile_2d=True)


def test_nvfp4_row_scaled(gpu):
    for i, shape in enumerate([(128, 128), (66, 94), (2, 16), (130, 62)]):
        x = make_input(shape, "bfloat16", "normal" if i % 2 else "special", seed=40 + i)
        for axis in ("rowwise", "columnwise", "both"):
            check_against_reference(gpu, x, "nvfp4", axis=axis, row_scaled=True)
        M = shape[0]
        amax = np.abs(np.random.default_rng(i).standard_normal(M)).astype(np.float32) * 5
        amax[0] = 0.0
        check_against_reference(gpu, x, "nvfp4", axis="both", row_scaled=True, amax=amax, scale_layout="swizzled")


def test_nvfp4_rht(gpu):
    for i, shape in enumerate([(128, 128), (48, 80), (16, 16), (160, 64)]):
        x = make_input(shape, "bfloat16", "normal" if i % 2 else "special", seed=50 + i)
        for mask in (0xD7E8, 0, 0xFFFF):
            check_against_reference(gpu, x, "nvfp4", axis="both", rht=True, rht_sign_mask=mask)
        check_against_reference(gpu, x, "nvfp4", axis="columnwise", rht=True, tile_2d=True)
        check_against_reference(gpu, x, "nvfp4", axis="both", rht=True, amax=np.array([3.0], np.float32),
                                scale_layout="swizzled")


def test_nvfp4_rht_amax_pass_nonfinite_groups(gpu):
    """The one-pass plain + RHT amax (amax_plain_rht_bf16, NVFP4 "both" with rht and a computed amax;
    a thread per group of 16 rows x 2 columns, several groups per thread here, grid-stride): NaN / -NaN
    in some groups drop out of both amaxes (a NaN input makes every w_j of its column's group NaN)
    while the other column of such a group still counts, also when it holds the tensor's largest
    values; the largest value in a finite group; an infinity (both amaxes infinite)."""
    rng = np.random.default_rng(91)
    M, K = 2048, 8192   # 2^20 groups of 2 columns: several per thread of the amax launch
    base = rng.standard_normal((M, K)).astype(np.float32)
    for case in ("nan_pair_holds_max", "finite_group_holds_max", "inf"):
        x = base.copy()
        rows = rng.integers(0, M // 16, size=40) * 16
        cols = rng.integers(0, K // 2, size=40) * 2
        for r, c in zip(rows, cols):
            x[r + rng.integers(0, 16), c] = np.nan if r % 32 else -np.nan
        if case == "nan_pair_holds_max":
            x[rows[3] + 5, cols[3] + 1] = 300.0
            x[rows[7] + 9, cols[7] + 1] = -280.0
        elif case == "finite_group_holds_max":
            x[17, 4097] = 250.0
        else:
            x[rows[5] + 2, cols[5] + 1] = np.inf
        xb = x.astype(ml_dtypes.bfloat16)
        q, _, _ = check_against_reference(gpu, xb, "nvfp4", axis="both", rht=True)
        finite = case != "inf"
        assert np.isfinite(q.rowwise.amax).all() == finite and np.isfinite(q.columnwise.amax).all() == finite, case


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4_e2m1"])
def test_stochastic_rounding(gpu, fmt):
    for i, shape in enumerate([(126, 96), (64, 64), (1, 32), (130, 62)]):
        x = make_input(shape, "bfloat16", "normal" if i % 2 else "special", seed=60 + i)
        for seed in (0, 1, 2**40 + 123, 2**64 - 1):
            check_against_reference(gpu, x, fmt, axis=axes_for(fmt, *shape), rounding="stochastic", seed=seed)
    # every input dtype, the rows kernel (rowwise alone) and the tile kernel, a counter offset that is
    # not a multiple of 4 (K = 198, M = 66), and a larger tensor: about 10^6 draws against products
    # that cover every E2M1 range (NaN, inf, subnormals, exact grid points)
    for j, (dtype, shape) in enumerate([("float32", (66, 198)), ("float16", (128, 256)), ("bfloat16", (512, 1024))]):
        x = make_input(shape, dtype, "special" if j % 2 == 0 else "normal", seed=70 + j)
        for axis in ("rowwise", "columnwise", "both"):
            check_against_reference(gpu, x, fmt, axis=axis, rounding="stochastic", seed=3 + j,
                                    scale_layout="swizzled" if j == 1 else "compact")
    if fmt == "nvfp4":
        x = make_input((64, 64), "bfloat16", "normal", seed=9)
        check_against_reference(gpu, x, fmt, axis="both", rounding="stochastic", seed=5, rht=True)
        check_against_reference(gpu, x, fmt, axis="both", rounding="stochastic", seed=5, tile_2d=True)


# ---------------------------------------------------------------------------------------------
# dequantize

@pytest.mark.parametrize("layout", ["compact", "swizzled"])
@pytest.mark.parametrize("fmt", FMTS)
def test_dequantize(gpu, fmt, layout):
    from fp4kit import _cuda

    cp = gpu
    for i, shape in enumerate([(128, 128), (66, 94), (2, 16), (993, 512), (1, 32)]):
        axis = axes_for(fmt, *shape)
        x = make_input(shape, "float32", "special" if i % 2 else "normal", seed=70 + i)
        kw = {}
        if fmt == "nvfp4" and i == 2:
            kw["row_scaled"] = True
        q = ref_api.quantize(x, fmt, axis=axis, scale_layout=layout, **kw)
        for name in ("rowwise", "columnwise"):
            op = getattr(q, name)
            if op is None:
                continue
            scales = op.scales.copy()
            if layout == "swizzled":   # garbage in the padding must not matter
                pad = np.ones(scales.shape, bool)
                pad.reshape(-1)[ref_swizzle(np.zeros(op.scale_shape, np.uint8) + 1).reshape(-1) == 1] = False
                scales[pad] = 0xFF
            for out in ("float32", "bfloat16", "float16"):
                want = ref_api.dequantize_operand(op, out)
                got = _cuda.dequantize(cp.asarray(op.data), cp.asarray(scales),
                                       None if op.amax is None else cp.asarray(op.amax), fmt, op.rows, op.cols,
                                       layout, out)
                got = cp.asnumpy(got)
                if out == "bfloat16":
                    got = got.view(ml_dtypes.bfloat16)
                assert_float_bits_equal(got, want, f"dequantize {fmt} {name} {shape} {layout} -> {out}")


def test_dequantize_every_code(gpu):
    """Every element code with a spread of scale codes (E8M0 0..255, E4M3 scales)."""
    from fp4kit import _cuda

    cp = gpu
    rng = np.random.default_rng(0)
    for fmt in FMTS:
        f = FORMATS[fmt]
        ncodes = 1 << f.elem.bits
        rows, cols = 256, 64
        codes = rng.integers(0, ncodes, size=(rows, cols)).astype(np.uint8)
        codes[0, :] = np.arange(cols) % ncodes
        data = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8) if f.packed else codes
        nb = f.num_blocks(cols)
        scales = rng.integers(0, 256, size=(rows, nb)).astype(np.uint8)
        scales[:, 0] = np.arange(rows) % 256
        amax = np.array([rng.uniform(0, 1000)], np.float32) if f.is_nvfp4 else None
        from fp4kit.tensor import Operand
        op = Operand(data=data, scales=scales, scale_layout="compact", amax=amax, rows=rows, cols=cols, format=fmt)
        for out in ("float32", "bfloat16", "float16"):
            with np.errstate(all="ignore"):
                want = ref_api.dequantize_operand(op, out)
            got = cp.asnumpy(_cuda.dequantize(cp.asarray(data), cp.asarray(scales),
                                              None if amax is None else cp.asarray(amax), fmt, rows, cols,
                                              "compact", out))
            if out == "bfloat16":
                got = got.view(ml_dtypes.bfloat16)
            assert_float_bits_equal(got, want, f"dequantize every code {fmt} -> {out}")


@pytest.mark.parametrize("fmt", MX_FMTS)
def test_dequantize_every_code_under_every_scale(gpu, fmt):
    """Every element code in every position of a 16-element segment under every E8M0 scale code
    0..255 (255: NaN), to each output dtype: the fast paths (the FP6 -> 16-bit placement of
    dequantize_op.cuh dq_fp6x2 among them, float16 only for multipliers 2^-24 .. 2^15) and the
    element path against the reference."""
    from fp4kit import _cuda
    from fp4kit.tensor import Operand

    cp = gpu
    f = FORMATS[fmt]
    ncodes = 1 << f.elem.bits
    cols = max(ncodes, 32)
    shift = np.arange(16)                                  # row block k: codes rotated by k columns
    codes = (np.arange(cols)[None, None, :] + shift[:, None, None]) % ncodes
    codes = np.broadcast_to(codes, (16, 256, cols)).reshape(-1, cols).astype(np.uint8)
    rows = codes.shape[0]
    data = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8) if f.packed else codes
    scales = np.repeat((np.arange(rows) % 256).astype(np.uint8)[:, None], f.num_blocks(cols), axis=1)
    op = Operand(data=data, scales=scales, scale_layout="compact", amax=None, rows=rows, cols=cols, format=fmt)
    for out in ("float32", "bfloat16", "float16"):   # the gpu fixture poisons every output
        with np.errstate(all="ignore"):
            want = ref_api.dequantize_operand(op, out)
        got = cp.asnumpy(_cuda.dequantize(cp.asarray(data), cp.asarray(scales), None, fmt, rows, cols,
                                          "compact", out))
        if out == "bfloat16":
            got = got.view(ml_dtypes.bfloat16)
        assert_float_bits_equal(got, want, f"dequantize every code x scale {fmt} -> {out}")


@pytest.mark.parametrize("fmt", FMTS)
def test_dequantize_special_scales_and_views(gpu, fmt):
    """The kernel's fast path (finite multiplier, no NaN/inf code, full aligned segment) against its
    element path: NVFP4 amax 0 / subnormal-producing / huge / inf / NaN, global and per row; E8M0
    scales 0, 1, 254, 255 next to ordinary ones; codes and outputs off their vector alignment."""
    from fp4kit import _cuda
    from fp4kit.tensor import Operand

    cp = gpu
    f = FORMATS[fmt]
    rng = np.random.default_rng(11)
    rows, cols = 64, 96
    ncodes = 1 << f.elem.bits
    codes = rng.integers(0, ncodes, size=(rows, cols)).astype(np.uint8)
    data = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8) if f.packed else codes
    nb = f.num_blocks(cols)
    if f.is_nvfp4:
        scales = rng.integers(0, 0x7F, size=(rows, nb)).astype(np.uint8)
        scales[::7, 1] = 0x7F   # NaN scale code
        specials = [0.0, 1e-42, 1e-30, 3.0e38, np.inf, np.nan, 448.0 * 6]
        amaxes = [np.array([a], np.float32) for a in specials]
        amaxes.append(np.array([specials[i % len(specials)] for i in range(rows)], np.float32))
    else:
        scales = rng.integers(100, 150, size=(rows, nb)).astype(np.uint8)
        scales[0::5, 0] = 0
        scales[1::5, 0] = 1
        scales[2::5, 1] = 254
        scales[3::5, -1] = 255
        amaxes = [None]
    # views whose data pointer is 1 or 8 bytes past an aligned allocation
    for amax in amaxes:
        op = Operand(data=data, scales=scales, scale_layout="compact", amax=amax, rows=rows, cols=cols, format=fmt)
        for out in ("float32", "bfloat16", "float16"):
            with np.errstate(all="ignore"):
                want = ref_api.dequantize_operand(op, out)
            for off in (0, 1, 8):
                buf = cp.zeros(data.size + off, cp.uint8)
                dview = buf[off:].reshape(data.shape)
                dview[...] = cp.asarray(data)
                got = cp.asnumpy(_cuda.dequantize(dview, cp.asarray(scales), None if amax is None else cp.asarray(amax),
                                                  fmt, rows, cols, "compact", out))
                if out == "bfloat16":
                    got = got.view(ml_dtypes.bfloat16)
                assert_float_bits_equal(got, want, f"dequantize {fmt} -> {out} amax={amax if amax is None else amax[:3]} off={off}")


def test_dequantize_empty(gpu):
    from fp4kit import _cuda

    cp = gpu
    out = _cuda.dequantize(cp.zeros((0, 8), cp.uint8), cp.zeros((0, 1), cp.uint8), None, "mxfp8_e4m3", 0, 8,
                           "compact", "float32")
    assert out.shape == (0, 8)


# ---------------------------------------------------------------------------------------------
# swizzle

def test_swizzle_roundtrip(gpu):
    from fp4kit import _cuda

    cp = gpu
    rng = np.random.default_rng(1)
    # swizzle_scales runs 128 x 64 tiles with 16-byte row loads: shapes with 16-byte rows (vector
    # path), several tiles along both axes, partial tiles and rows of any length (byte path; unswizzle:
    # rows of a multiple of 4 bytes off 16 bytes leave as 4-byte stores)
    for shape in [(0, 5), (5, 0), (1, 1), (3, 5), (128, 4), (129, 7), (300, 13), (1000, 130), (640, 512),
                  (257, 96), (130, 64), (384, 200), (640, 20), (257, 100), (130, 68), (7168, 260)]:
        c = rng.integers(0, 256, size=shape).astype(np.uint8)
        want = ref_api.swizzle_scales(c)
        got = cp.asnumpy(_cuda.swizzle_scales(cp.asarray(c)))
        assert_bytes_equal(got, want, f"swizzle {shape}")
        garbage = want.copy()
        pad = ref_swizzle(np.ones(shape, np.uint8)) == 0
        garbage[pad] = 0xEE
        back = cp.asnumpy(_cuda.unswizzle_scales(cp.asarray(garbage), shape))
        assert_bytes_equal(back, c, f"unswizzle {shape}")
        # views at odd byte offsets (compact and swizzled): the kernels fall back to byte access
        for off in (1, 3, 4):
            buf = cp.zeros(c.size + off + 16, cp.uint8)
            view = buf[off:off + c.size].reshape(shape)
            view[...] = cp.asarray(c)
            got = cp.asnumpy(_cuda.swizzle_scales(view))
            assert_bytes_equal(got, want, f"swizzle {shape} at offset {off}")
            sbuf = cp.zeros(garbage.size + off + 16, cp.uint8)
            sview = sbuf[off:off + garbage.size].reshape(garbage.shape)
            sview[...] = cp.asarray(garbage)
            back = cp.asnumpy(_cuda.unswizzle_scales(sview, shape))
            assert_bytes_equal(back, c, f"unswizzle {shape} at offset {off}")


def test_quantize_swizzled_equals_swizzle_of_compact(gpu):
    for fmt in FMTS:
        x = make_input((130, 70), "bfloat16", "normal", seed=3)
        row_c, col_c = gpu_quantize(gpu, x, fmt, axis="both")
        row_s, col_s = gpu_quantize(gpu, x, fmt, axis="both", scale_layout="swizzled")
        assert_bytes_equal(row_s["scales"], ref_swizzle(row_c["scales"]), f"{fmt} rowwise")
        assert_bytes_equal(col_s["scales"], ref_swizzle(col_c["scales"]), f"{fmt} columnwise")


# ---------------------------------------------------------------------------------------------
# codecs, exhaustively over fp32

@pytest.mark.parametrize("elem", range(5))
def test_encode_fast_equals_reference_form_every_fp32(gpu, elem):
    """The integer-form encode<E> equals the design.md algorithm for all 2^32 fp32 inputs.
    On Blackwell family targets encode<E2M1> and encode4<E2M3/E3M2> are the native cvt forms."""
    from fp4kit._loader import get_function

    cp = gpu
    out = cp.zeros(2, dtype=cp.uint64)
    get_function("selftest", f"encode_exhaustive_e{elem}")((132 * 32,), (256,),
                                                            (np.uint64(0), np.uint64(1 << 32), out))
    n, first = (int(v) for v in cp.asnumpy(out))
    assert n == 0, f"element type {elem}: {n} fp32 inputs differ, first 0x{first - 1:08X}"


@pytest.mark.parametrize("kernel", ["e2m1_bf16x2_exhaustive", "e2m1_f16x2_exhaustive"])
def test_e2m1_packed_pairs_equal_reference_every_16bit_and_scale(gpu, kernel):
    """MXFP4 from bfloat16 / float16 on packed pairs (codecs.cuh e2m1_pack8_bf16 / e2m1_pack8_f16 with
    h2_scales: the bf16x2 / f16x2 multiplies, add, fma and min the Hopper tile kernels run; float16's
    multiplier split in two beyond its range) equals encode_reference(fp32_RN(x * s_inv)) for every
    16-bit pattern x under every scale code 0..254 (2^-127 included), each x in each position of the
    packed word; the packed block amax equals fmaxf over |x|."""
    from fp4kit._loader import get_function

    cp = gpu
    if int(cp.cuda.Device().compute_capability) >= 100:
        pytest.skip("Blackwell: the tile kernels encode E2M1 with the native cvt, not the packed form")
    out = cp.zeros(2, dtype=cp.uint64)
    get_function("selftest", kernel)(((8192 * 255 + 255) // 256,), (256,), (out,))
    n, first = (int(v) for v in cp.asnumpy(out))
    assert n == 0, f"{n} packed words differ, first E={(first - 1) >> 24} x0=0x{((first - 1) & 0xFFFFF8):04X}"


@pytest.mark.parametrize("rule", ["rceil", "floor"])
def test_quantize_mxfp4_float16_packed_pairs_block_edges(gpu, rule):
    """MXFP4 from float16 through the tile kernel's packed pairs (codecs.cuh e2m1_pack8_f16): blocks
    whose multiplier lies beyond float16's range (amax below ~2^-12: (x 2^15) (s_inv 2^-15)), at its
    edge, all-zero blocks, blocks of float16 subnormals only, blocks with inf / NaN of either sign,
    and ordinary ones; rowwise, columnwise and both, both scale layouts, against the reference."""
    rng = np.random.default_rng(77)
    M, K = 288, 320
    x = np.zeros((M, K), np.float64)
    for pr in range(M // 32):   # 32 x 32 patches of one kind: rowwise and columnwise blocks alike
        for pc in range(K // 32):
            kind = (pr * 5 + pc * 3) % 9
            blk = rng.standard_normal((32, 32))
            if kind == 0:
                blk *= 2.0 ** rng.uniform(-24, -12)          # tiny blocks: the split multiplier
            elif kind == 1:
                blk = blk / np.abs(blk).max() * 6 * 2.0 ** -15 * rng.choice([0.99, 1.0, 1.01])   # at 2^15
            elif kind == 2:
                blk[:] = 0.0 if pr % 2 else -0.0
            elif kind == 3:
                blk = np.sign(blk) * 2.0 ** -24 * rng.integers(0, 1024, (32, 32))   # subnormals only
            elif kind == 4:
                blk *= 100.0
                for i in range(32):
                    blk[i, (7 * i) % 32] = [np.inf, -np.inf, np.nan, -np.nan][(i + pc) % 4]
            elif kind == 5:
                blk *= 60000.0 / np.abs(blk).max()          # near float16's max
            else:
                blk *= 10.0 ** rng.uniform(-4, 4)
            x[32 * pr:32 * pr + 32, 32 * pc:32 * pc + 32] = blk
    with np.errstate(over="ignore"):
        x16 = x.astype(np.float16)
    for axis in ("rowwise", "columnwise", "both"):
        for layout in ("compact", "swizzled"):
            check_against_reference(gpu, x16, "mxfp4_e2m1", axis=axis, scale_layout=layout, scale_rule=rule)


def test_e8m0_rceil_code_equals_reference_form_every_nonnegative_fp32(gpu):
    """e8m0_rceil_code (cvt.rp.satfinite.ue8m0x2 on Blackwell family targets, integer code elsewhere)
    equals SPEC's clamp(ceil(log2 v) + 127, 0, 254) form for every v the rceil rule can see
    (v = amax * R >= +0 or NaN: the 2^31 fp32 patterns below 0x80000000)."""
    from fp4kit._loader import get_function

    cp = gpu
    out = cp.zeros(2, dtype=cp.uint64)
    get_function("selftest", "e8m0_rceil_exhaustive")((132 * 32,), (256,),
                                                      (np.uint64(0), np.uint64(1 << 31), out))
    n, first = (int(v) for v in cp.asnumpy(out))
    assert n == 0, f"e8m0 rceil: {n} fp32 inputs differ, first 0x{first - 1:08X}"

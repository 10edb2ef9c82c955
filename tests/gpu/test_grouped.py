"""Grouped (MoE) kernels against the reference (which equals per-member quantization), device-side
dims, CUDA-graph capture, dbias, and bad device dims flagged without out-of-bounds writes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import fp4kit
from fp4kit import _plan
from fp4kit._plan import DTYPE_IDS

pytestmark = pytest.mark.gpu

FORMATS = list(fp4kit.FORMATS)


@pytest.fixture
def cp(gpu):
    """CuPy, with output poisoning on (conftest's gpu fixture)."""
    return gpu


def _x(n_or_shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n_or_shape) * np.exp2(rng.integers(-4, 5, n_or_shape))).astype(np.float32)
    return x.astype(dtype)


def _check(got, exp):
    rep = fp4kit.compare(got, exp)
    assert rep.ok, str(rep)


def _dims(G, seed, even=False, mult16=False, with_empty=True):
    rng = np.random.default_rng(seed)
    d = rng.integers(0, 300, G)
    if even:
        d = d // 2 * 2
    if mult16:
        d = d // 16 * 16
    if with_empty and G >= 5:        # empty members at the front, in the middle and at the end
        d[0] = 0
        d[G // 2] = 0
        d[-1] = 0
    elif with_empty and G >= 3:      # G = 3, 4: the middle one only, so that some member has rows
        d[G // 2] = 0
    assert G < 3 or sum(d) > 0, "a group of only empty members checks no element"
    return [int(v) for v in d]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("G", [1, 3, 64, 257])
def test_varying_first_matches_reference(cp, fmt, G):
    f = fp4kit.FORMATS[fmt]
    K = 96
    first = _dims(G, G, even=f.packed)
    x = _x((sum(first), K), seed=G)
    for kw in (dict(axis="both", scale_layout="compact"), dict(axis="both", scale_layout="swizzled")):
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, **kw)
        got = fp4kit.group_quantize(cp.asarray(x), fmt, first_dims=first, **kw)
        _check(got, exp)
        ref_dq = fp4kit.reference.group_dequantize(exp)
        got_dq = fp4kit.group_dequantize(got)
        np.testing.assert_array_equal(cp.asnumpy(got_dq.data).view(np.uint32), ref_dq.data.view(np.uint32))


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"])
def test_large_members_several_tiles_per_cta(cp, fmt):
    """Members large enough that every CTA of the persistent grid quantizes several tiles, with
    FP8/FP6 columnwise rows off a 16-byte boundary (staged through shared memory, ColStage). Odd and
    even sizes, empty members, both layouts; each member's bytes equal a single-tensor quantize of
    that member (itself checked against the reference by test_kernels)."""
    f = fp4kit.FORMATS[fmt]
    K = 1536
    first = [0, 2046, 3002, 0, 1538, 130, 4096, 62] if f.packed else [0, 2047, 3001, 0, 1539, 130, 4096, 61]
    x = cp.asarray(_x((sum(first), K), seed=3))
    offs = np.cumsum([0] + first)
    for layout in ("compact", "swizzled"):
        got = fp4kit.group_quantize(x, fmt, first_dims=first, axis="both", scale_layout=layout)
        members = list(got)
        assert len(members) == len(first)
        for g, m in enumerate(members):
            if first[g] == 0:
                continue
            want = fp4kit.quantize(x[offs[g]:offs[g + 1]], fmt, axis="both", scale_layout=layout)
            rep = fp4kit.compare(m, want)
            assert rep.ok, f"member {g} ({first[g]} x {K}), {layout}: {rep}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_and_varying_last_and_both(cp, fmt):
    f = fp4kit.FORMATS[fmt]
    G = 5
    x = _x((G * 64, 160), seed=1)
    exp = fp4kit.reference.group_quantize(x, fmt, num_groups=G, axis="both")
    _check(fp4kit.group_quantize(cp.asarray(x), fmt, num_groups=G, axis="both"), exp)
    last = _dims(G, 2, even=True)
    M = 34
    xl = _x(M * sum(last), seed=3)
    exp = fp4kit.reference.group_quantize(xl, fmt, first_dims=M, last_dims=last, axis="both", scale_layout="swizzled")
    _check(fp4kit.group_quantize(cp.asarray(xl), fmt, first_dims=M, last_dims=last, axis="both",
                                 scale_layout="swizzled"), exp)
    first = _dims(G, 4, even=f.packed)
    last = _dims(G, 5, even=f.packed)
    xb = _x(sum(m * k for m, k in zip(first, last)), seed=6, dtype=np.float16)
    exp = fp4kit.reference.group_quantize(xb, fmt, first_dims=first, last_dims=last, axis="both")
    got = fp4kit.group_quantize(cp.asarray(xb), fmt, first_dims=first, last_dims=last, axis="both")
    _check(got, exp)
    ref_dq = fp4kit.reference.group_dequantize(exp, operand="columnwise", dtype="float16")
    got_dq = fp4kit.group_dequantize(got, operand="columnwise", dtype="float16")
    np.testing.assert_array_equal(cp.asnumpy(got_dq.data).view(np.uint16), ref_dq.data.view(np.uint16))


@pytest.mark.parametrize("variant", [dict(), dict(tile_2d=True), dict(row_scaled=True), dict(rht=True),
                                     dict(rounding="stochastic", seed=99), dict(amax="given"),
                                     dict(rounding="stochastic", seed=99, amax="given")])
def test_nvfp4_variants_grouped(cp, variant):
    import ml_dtypes
    first = _dims(6, 7, mult16=True)
    x = _x((sum(first), 128), seed=8).astype(ml_dtypes.bfloat16)
    kw = dict(variant)
    ref_kw = dict(variant)
    if kw.get("amax") == "given":
        a = np.abs(np.random.default_rng(1).standard_normal(len(first))).astype(np.float32) * 8
        a[1] = 0.0
        dev = a.copy()
        dev[1] = -0.0         # a device amax of -0 is stored (and quantizes) as +0 (nvfp4_amax_out)
        kw["amax"], ref_kw["amax"] = cp.asarray(dev), a
    import torch
    xt = torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16)
    exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, axis="both", scale_layout="swizzled", **ref_kw)
    got = fp4kit.group_quantize(xt, "nvfp4", first_dims=first, axis="both", scale_layout="swizzled", **kw)
    _check(got, exp)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_nvfp4_recipe_kernels_every_dtype(cp, dtype):
    """NVFP4's recipe tile kernels from every input dtype, single tensor and grouped with one K
    (device dims, members % 16 with empty ones): one option alone takes its own kernel (quantize.cu
    quantize_f5_d<D>_rs / _t2d, quantize_f5_d1_rht; grouped.cu group_quantize1_f5_d<D>_rs / _t2d,
    group_quantize1_f5_d1_rht), two options the full ones (quantize_f5_d<D>,
    group_quantize1_f5_d<D>_ext); compact and swizzled scales; bytes equal the reference's."""
    import ml_dtypes
    npdt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    first = _dims(7, 17, mult16=True)
    x = _x((sum(first), 160), seed=18, dtype=npdt)
    xd = _dev(cp, x)
    variants = [dict(row_scaled=True), dict(tile_2d=True), dict(row_scaled=True, rounding="stochastic", seed=3),
                dict(tile_2d=True, rounding="stochastic", seed=4)]
    if dtype == "bfloat16":
        variants += [dict(rht=True), dict(rht=True, tile_2d=True), dict(rht=True, rounding="stochastic", seed=5)]
    for i, kw in enumerate(variants):
        layout = "swizzled" if i % 2 else "compact"
        exp = fp4kit.reference.quantize(x, "nvfp4", axis="both", scale_layout=layout, **kw)
        _check(fp4kit.quantize(xd, "nvfp4", axis="both", scale_layout=layout, **kw), exp)
        exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, axis="both", scale_layout=layout, **kw)
        got = fp4kit.group_quantize(xd, "nvfp4", first_dims=_dev_dims(cp, first, xd), axis="both",
                                    scale_layout=layout, **kw)
        got.check()
        for a, b in zip(got, exp):
            _check(a, b)


def test_device_dims_equal_host_dims(cp):
    fmt = "nvfp4"
    first = [0, 130, 64, 0, 2, 256, 0]
    x = _x((sum(first) + 40, 64), seed=9)        # buffer larger than the members (upper bound)
    exp = fp4kit.reference.group_quantize(x[:sum(first)], fmt, first_dims=first, axis="both", scale_layout="swizzled")
    got = fp4kit.group_quantize(cp.asarray(x), fmt, first_dims=cp.asarray(np.array(first, np.int64)),
                                axis="both", scale_layout="swizzled")
    got.check()
    assert len(got) == len(first)
    # last_dims: written by the metadata launch into an uninitialised (poisoned) buffer
    assert cp.asnumpy(got.last_dims).tolist() == [64] * len(first)
    for i in range(len(first)):
        _check(got[i], exp[i])
    # K = 0: every last dim 0
    z = fp4kit.group_quantize(cp.zeros((300, 0), cp.float32), "mxfp8_e4m3", first_dims=cp.asarray(np.array([100, 200])))
    assert cp.asnumpy(z.last_dims).tolist() == [0, 0]
    # group_dequantize's result indexes its members by the device dims too (read once, on demand)
    back, want = fp4kit.group_dequantize(got), fp4kit.reference.group_dequantize(exp)
    assert back.offsets is None and back.host_dims() == (tuple(first), (64,) * len(first))
    for i in range(len(first)):
        assert np.array_equal(cp.asnumpy(back[i]).view(np.uint32), want[i].view(np.uint32)), f"member {i}"
    assert "130x64" in repr(got) and "<table" in got._repr_html_()


def test_graph_capture_then_change_dims_on_device(cp):
    fmt = "mxfp8_e4m3"
    K = 64
    x = _x((512, K), seed=10)
    xd = cp.asarray(x)
    dims = cp.asarray(np.array([100, 0, 200, 12], np.int64))
    fp4kit.group_quantize(xd, fmt, first_dims=dims, axis="both")       # warm-up: compile, pool blocks
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        g = fp4kit.group_quantize(xd, fmt, first_dims=dims, axis="both")
        graph = stream.end_capture()
    for new in ([100, 0, 200, 12], [0, 300, 1, 211], [512, 0, 0, 0]):
        dims.set(np.array(new, np.int64), stream=stream)
        graph.launch(stream)
        stream.synchronize()
        exp = fp4kit.reference.group_quantize(x[:sum(new)], fmt, first_dims=new, axis="both")
        for i in range(len(new)):
            _check(g[i], exp[i])


def test_dbias(cp):
    first = [64, 0, 130, 1]
    x = _x((sum(first), 96), seed=11)
    exp = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=first, dbias=True)
    got = fp4kit.group_quantize(cp.asarray(x), "mxfp8_e4m3", first_dims=first, dbias=True)
    rep = fp4kit.compare(got, exp)
    assert rep.ok, str(rep)
    gb = cp.asnumpy(got.dbias)
    tol = 1e-6 * np.stack([np.abs(x[s:s + m]).sum(0) for s, m in zip(np.cumsum([0] + first[:-1]), first)]) + 1e-30
    assert np.all(np.abs(gb.astype(np.float64) - exp.dbias) <= tol)


_BAD_DIMS = [([100, -1, 50], "negative"), ([400, 200, 0], "more elements"), ([3, 4, 5], "odd length")]


@pytest.mark.parametrize("fmt,layout,bad,why",
                         [(f, lay, b, w) for f, lay in (("mxfp4_e2m1", "compact"), ("mxfp4_e2m1", "swizzled"),
                                                        ("nvfp4", "swizzled")) for b, w in _BAD_DIMS]
                         + [("mxfp8_e4m3", "compact", b, w) for b, w in _BAD_DIMS[:2]])
def test_bad_device_dims_flagged_nothing_written(cp, bad, why, fmt, layout):
    """One K with device dims: the one-tile kernel of MXFP8 / MXFP6 takes the band -> member
    lookups, that of MXFP4 / NVFP4 the band descriptors, whose every entry group_meta empties on
    an error; swizzled scale buffers are not cleared before the launch, so they must stay poisoned
    too (no padding written). (Odd lengths are an error for the packed FP4 formats only.)"""
    x = _x((512, 32), seed=12)
    g = fp4kit.group_quantize(cp.asarray(x), fmt, first_dims=cp.asarray(np.array(bad, np.int64)),
                              axis="both", max_elements=512 * 32, scale_layout=layout)
    with pytest.raises(ValueError, match=why):
        g.check()
    # nothing written: the poisoned code and scale buffers are untouched
    for buf in (g.rowwise_data, g.columnwise_data, g.rowwise_scales, g.columnwise_scales):
        assert np.all(cp.asnumpy(buf) == 0xA5)


def test_host_dims_errors_before_launch(cp):
    x = cp.asarray(_x((100, 32)))
    with pytest.raises(ValueError, match="sum"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[50, 40])
    with pytest.raises(ValueError, match="non-negative"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[150, -50])
    with pytest.raises(TypeError, match="int64"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=cp.asarray(np.array([50, 50], np.int32)))
    with pytest.raises(ValueError, match="max_elements"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=cp.asarray(np.array([50, 50], np.int64)),
                              max_elements=10**9)


def _dev(cp, x):
    """x on the GPU: a torch bfloat16 tensor for bfloat16 (CuPy has none), else CuPy."""
    if str(x.dtype) == "bfloat16":
        import torch
        return torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16)
    return cp.asarray(x)


def _dev_dims(cp, dims, like):
    if type(like).__module__.startswith("torch"):
        import torch
        return torch.tensor(dims, dtype=torch.int64, device="cuda")
    return cp.asarray(np.array(dims, np.int64))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_rowwise_only_grouped(cp, fmt, dtype):
    """axis="rowwise" takes group_quantize_rowsd / rowsk for kinds with one K (members tiled one by
    one where blocks hold at most 64 rows, here K = 200 from float32; else blocks of the whole matrix,
    test_rowwise_one_k_blocks_straddle_members) and group_quantize_rows (runs of tiles per CTA
    iteration, member changes inside an iteration) for the others: every kind, G = 1, 3, 64, 257
    with empty members at front, middle and end, host and device dims, both scale layouts, against
    the reference."""
    import ml_dtypes
    f = fp4kit.FORMATS[fmt]
    npdt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    for i, G in enumerate((1, 3, 64, 257)):
        K = (96, 200, 64, 34)[i]
        first = _dims(G, 40 + G)
        x = _x((sum(first), K), seed=G, dtype=npdt)
        layout = "swizzled" if i % 2 else "compact"
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="rowwise", scale_layout=layout)
        xd = _dev(cp, x)
        _check(fp4kit.group_quantize(xd, fmt, first_dims=first, axis="rowwise", scale_layout=layout), exp)
        got = fp4kit.group_quantize(xd, fmt, first_dims=_dev_dims(cp, first, xd), axis="rowwise", scale_layout=layout)
        got.check()
        for a, b in zip(got, exp):
            _check(a, b)
    # varying_last / varying_both (1-D buffers)
    last = _dims(5, 11, even=True)
    xl = _x(34 * sum(last), seed=12, dtype=npdt)
    exp = fp4kit.reference.group_quantize(xl, fmt, first_dims=34, last_dims=last, axis="rowwise")
    _check(fp4kit.group_quantize(_dev(cp, xl), fmt, first_dims=34, last_dims=last, axis="rowwise"), exp)
    first = _dims(5, 13)
    last = _dims(5, 14, even=f.packed)
    xb = _x(sum(m * k for m, k in zip(first, last)), seed=15, dtype=npdt)
    exp = fp4kit.reference.group_quantize(xb, fmt, first_dims=first, last_dims=last, axis="rowwise")
    _check(fp4kit.group_quantize(_dev(cp, xb), fmt, first_dims=first, last_dims=last, axis="rowwise"), exp)


@pytest.mark.parametrize("variant", [dict(), dict(row_scaled=True), dict(rounding="stochastic", seed=5),
                                     dict(amax="given"), dict(tile_2d=True)])
def test_nvfp4_rowwise_only_grouped_variants(cp, variant):
    import ml_dtypes
    first = _dims(9, 21, mult16=True)
    first[3] = 1000                              # a member spanning many tiles (runs of 4)
    x = _x((sum(first), 320), seed=22).astype(ml_dtypes.bfloat16)
    kw, ref_kw = dict(variant), dict(variant)
    if kw.get("amax") == "given":
        a = np.abs(np.random.default_rng(2).standard_normal(len(first))).astype(np.float32) * 8
        kw["amax"], ref_kw["amax"] = cp.asarray(a), a
    import torch
    xt = torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16)
    exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, axis="rowwise", scale_layout="swizzled", **ref_kw)
    got = fp4kit.group_quantize(xt, "nvfp4", first_dims=torch.tensor(first, device="cuda"), axis="rowwise",
                                scale_layout="swizzled", **kw)
    got.check()
    for a, b in zip(got, exp):
        _check(a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_rowwise_one_k_blocks_straddle_members(cp, fmt, dtype):
    """axis="rowwise" with one K (kinds same / varying_first): K = 320 takes group_quantize_rowsd
    with the plain recipes (blocks of 64 or 32 rows of one member) and with the extended ones (its
    _sr / full kernels, blocks of 16 rows). Here blocks straddle member boundaries, hold
    several members (and empty ones), or lie inside one member; the input has slack rows past the
    members (device dims); both layouts; NVFP4 / MXFP4 recipes that change per row or per member."""
    import ml_dtypes
    f = fp4kit.FORMATS[fmt]
    npdt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    first = [0, 300, 1, 0, 255, 3, 700, 0, 129, 64, 0] if not f.packed else [0, 300, 2, 0, 256, 2, 700, 0, 130, 64, 0]
    K = 320
    x = _x((sum(first) + 37, K), seed=31, dtype=npdt)   # 37 slack rows, never read as a member's
    variants = [dict(scale_layout="compact"), dict(scale_layout="swizzled")]
    if f.is_nvfp4:
        variants += [dict(scale_layout="swizzled", row_scaled=True), dict(rounding="stochastic", seed=11),
                     dict(amax="given")]
    elif f.elem.bits == 4:
        variants += [dict(scale_layout="swizzled", rounding="stochastic", seed=11)]
    xd = _dev(cp, x)
    for v in variants:
        kw, ref_kw = dict(v), dict(v)
        if v.get("amax") == "given":
            a = np.abs(np.random.default_rng(4).standard_normal(len(first))).astype(np.float32) * 8
            kw["amax"], ref_kw["amax"] = cp.asarray(a), a
        exp = fp4kit.reference.group_quantize(x[:sum(first)], fmt, first_dims=first, axis="rowwise", **ref_kw)
        got = fp4kit.group_quantize(xd[:sum(first)], fmt, first_dims=first, axis="rowwise", **kw)
        _check(got, exp)
        got = fp4kit.group_quantize(xd, fmt, first_dims=_dev_dims(cp, first, xd), axis="rowwise", **kw)
        got.check()
        for g, (a_, b_) in enumerate(zip(got, exp)):
            rep = fp4kit.compare(a_, b_)
            assert rep.ok, f"{v}, member {g} ({first[g]} x {K}): {rep}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_rowwise_one_k_whole_bands(cp, fmt, dtype):
    """The one-K rows kernels from 16-bit input over members that start on and off multiples of 128
    rows and hold whole and partial 128-row bands (the swizzled layout's tiles): K = 1040 (lw = 6, a
    partial last column block) and 512 (lw = 5) take group_quantize_rowsd[z], whose blocks inside a
    member's complete bands take rows 32 apart (quantize_rows_direct), 128 (lw = 3) and 96 (lw = 2)
    group_quantize_rowsk (docs/performance.md item 146 tried that remap there); both layouts, host
    and device dims; NVFP4 with supplied and computed amaxes."""
    import ml_dtypes
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    first = [256, 128, 200, 56, 384, 0, 130, 126]   # starts 0, 256, 384, 584, 640, 1024, 1024, 1154
    for i, K in enumerate((1040, 512, 128, 96)):
        x = _x((sum(first) + 5, K), seed=60 + i, dtype=npdt)   # 5 slack rows (device dims)
        xd = _dev(cp, x)
        for j, layout in enumerate(("swizzled", "compact")):
            kw, ref_kw = {"scale_layout": layout}, {"scale_layout": layout}
            if fp4kit.FORMATS[fmt].is_nvfp4 and (i + j) % 2 == 0:
                a = np.abs(np.random.default_rng(i).standard_normal(len(first))).astype(np.float32) * 8
                kw["amax"], ref_kw["amax"] = cp.asarray(a), a
            exp = fp4kit.reference.group_quantize(x[:sum(first)], fmt, first_dims=first, axis="rowwise", **ref_kw)
            _check(fp4kit.group_quantize(xd[:sum(first)], fmt, first_dims=first, axis="rowwise", **kw), exp)
            got = fp4kit.group_quantize(xd, fmt, first_dims=_dev_dims(cp, first, xd), axis="rowwise", **kw)
            got.check()
            for g, (a_, b_) in enumerate(zip(got, exp)):
                rep = fp4kit.compare(a_, b_)
                assert rep.ok, f"K = {K}, {layout}, member {g} ({first[g]} rows): {rep}"


def _with_switch(module, name, call):
    """call() with the boolean module.name off (the planner's switch; plans are memoised, so they are
    cleared on both sides of the switch)."""
    setattr(module, name, False)
    _plan.clear_plans()
    try:
        return call()
    finally:
        setattr(module, name, True)
        _plan.clear_plans()


def _rowwise_bytes_equal(cp, got, old, tag):
    """Two grouped results hold the same rowwise codes, scales and amaxes, byte for byte."""
    for name in ("rowwise_data", "rowwise_scales", "rowwise_amax"):
        a_, b_ = getattr(got, name), getattr(old, name)
        if a_ is None:
            assert b_ is None, (tag, name)
            continue
        assert np.array_equal(cp.asnumpy(cp.asarray(a_)).view(np.uint8),
                              cp.asnumpy(cp.asarray(b_)).view(np.uint8)), (tag, name)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_rowwise_one_k_direct_kernel_members(cp, fmt, dtype):
    """group_quantize_rowsd[z] (plain one-K rowwise, blocks of at most 64 rows: each member tiled as
    the single-tensor rows kernel tiles it): 40 members of 0-300 rows (sizes % 2 for the packed
    formats; members of 1 row, of exactly one block row, empty ones at both ends), K = 1040 and
    2048 (a partial and no partial column block), 64 slack rows (device dims: CTAs of the bands
    past the last member exit), both layouts, NVFP4 with computed and supplied amaxes: the bytes of
    the reference, and of group_quantize_rowsk (ROWS_DIRECT off) for the same call."""
    import ml_dtypes
    from fp4kit import _cuda_grouped as cg
    f = fp4kit.FORMATS[fmt]
    npdt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    first = _dims(40, 77, even=f.packed)
    first[3], first[7], first[11] = (2 if f.packed else 1), 16, 64
    for i, K in enumerate((1040, 2048)):
        x = _x((sum(first) + 64, K), seed=80 + i, dtype=npdt)
        xd = _dev(cp, x)
        for j, layout in enumerate(("swizzled", "compact")):
            kw, ref_kw = {"scale_layout": layout}, {"scale_layout": layout}
            if f.is_nvfp4 and (i + j) % 2:
                a = np.abs(np.random.default_rng(i).standard_normal(len(first))).astype(np.float32) * 8
                kw["amax"], ref_kw["amax"] = cp.asarray(a), a
            exp = fp4kit.reference.group_quantize(x[:sum(first)], fmt, first_dims=first, axis="rowwise", **ref_kw)
            dims = _dev_dims(cp, first, xd)
            got = fp4kit.group_quantize(xd, fmt, first_dims=dims, axis="rowwise", **kw)
            got.check()
            for g, (a_, b_) in enumerate(zip(got, exp)):
                rep = fp4kit.compare(a_, b_)
                assert rep.ok, f"K = {K}, {layout}, member {g} ({first[g]} rows): {rep}"
            _rowwise_bytes_equal(cp, got, _with_switch(cg, "ROWS_DIRECT", lambda: fp4kit.group_quantize(
                xd, fmt, first_dims=dims, axis="rowwise", **kw)), (K, layout))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_rowwise_one_k_direct_extended_kernels(cp, dtype, launched):
    """group_quantize_rowsd_f5_d<D> (NVFP4 row_scaled, alone and with stochastic rounding): 24 members of even sizes 0-300 (members of 2 rows, empty ones at both ends),
    K = 1040 (blocks of 8 rows, a partial column block) and K = 160 (lw = 3: blocks of 64 rows), 64
    slack rows (device dims), both layouts, two seeds: the reference's bytes (per-row amaxes, its
    Philox stream), and group_quantize_rowsk's for the same call (ROWS_DIRECT_EXT off). Stochastic
    rounding alone (MXFP4, NVFP4 with supplied amaxes) and K = 96 (blocks of 128 rows) keep
    group_quantize_rowsk."""
    import ml_dtypes
    from fp4kit import _cuda_grouped as cg
    d = DTYPE_IDS[dtype]
    npdt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    first = _dims(24, 78, even=True)
    first[0], first[3], first[-1], first[9] = 0, 2, 0, 64
    variants = [("mxfp4_e2m1", dict(rounding="stochastic", seed=7)),
                ("nvfp4", dict(rounding="stochastic", seed=3, amax="given")),
                ("nvfp4", dict(row_scaled=True)),
                ("nvfp4", dict(row_scaled=True, rounding="stochastic", seed=2 ** 64 - 5))]
    for i, K in enumerate((1040, 160, 96)):
        x = _x((sum(first) + 64, K), seed=60 + i, dtype=npdt)
        xd = _dev(cp, x)
        dims = _dev_dims(cp, first, xd)
        for j, (fmt, v) in enumerate(variants):
            layout = ("swizzled", "compact")[(i + j) % 2]
            kw, ref_kw = dict(v, scale_layout=layout), dict(v, scale_layout=layout)
            if v.get("amax") == "given":
                a = np.abs(np.random.default_rng(j).standard_normal(len(first))).astype(np.float32) * 8
                kw["amax"], ref_kw["amax"] = cp.asarray(a), a
            exp = fp4kit.reference.group_quantize(x[:sum(first)], fmt, first_dims=first, axis="rowwise", **ref_kw)
            del launched[:]
            got = fp4kit.group_quantize(xd, fmt, first_dims=dims, axis="rowwise", **kw)
            got.check()
            fid = fp4kit.FORMATS[fmt].format_id
            direct = K != 96 and bool(v.get("row_scaled"))
            want = f"group_quantize_{'rowsd' if direct else 'rowsk'}_f{fid}_d{d}"
            assert launched[-1] == want, (K, fmt, v, launched)
            for g, (a_, b_) in enumerate(zip(got, exp)):
                rep = fp4kit.compare(a_, b_)
                assert rep.ok, f"K = {K}, {fmt} {v}, {layout}, member {g} ({first[g]} rows): {rep}"
            if not direct:
                continue
            old = _with_switch(cg, "ROWS_DIRECT_EXT", lambda: fp4kit.group_quantize(
                xd, fmt, first_dims=dims, axis="rowwise", **kw))
            assert launched[-1] == f"group_quantize_rowsk_f{fid}_d{d}", launched
            _rowwise_bytes_equal(cp, got, old, (K, fmt, v))


def _serial_meta_flags(first, K, max_elements, rows_total, packed_both):
    """The error flags of group_meta as a serial scan defines them (grouped.cu): negative dims or a
    running element count past max_elements end the scan; odd packed axes before that point are
    flagged too; the row check only runs when nothing else was flagged."""
    e, off, rows = 0, 0, 0
    for M in first:
        if M < 0 or K < 0:
            return e | 1
        if M and K > (max_elements - off) // M:
            return e | 2
        if packed_both and (K & 1 or M & 1):
            e |= 8
        off += M * K
        rows += M
    if not e and rows > rows_total:
        e |= 64
    return e


@pytest.mark.parametrize("case", ["negative_late", "elements_late", "odd_then_negative", "odd_only", "ok_many"])
def test_device_dims_error_flags_many_members(cp, case):
    """group_meta checks members in chunks of 256 and warps of 32: the first failure decides the
    flags wherever it falls (here past the first chunk and mid-warp), and the odd-axis flags of the
    members before it are kept. Flags compared with a serial model; nothing is written on error."""
    G, K = 600, 32
    first = [2] * G
    if case == "negative_late":
        first[300 + 5] = -4
        first[400] = -1
    elif case == "elements_late":
        first[517] = 10**6
    elif case == "odd_then_negative":
        first[40], first[299] = 3, -2
    elif case == "odd_only":
        first[555] = 3              # flagged, and the scan goes on to the end
    rows_total = 2 * G + 4
    x = _x((rows_total, K), seed=13)
    max_el = rows_total * K
    want = _serial_meta_flags(first, K, max_el, rows_total, True)
    g = fp4kit.group_quantize(cp.asarray(x), "mxfp4_e2m1", first_dims=cp.asarray(np.array(first, np.int64)),
                              axis="both", max_elements=max_el)
    got = int(cp.asnumpy(g.extra["error_flag"]).reshape(-1)[0])
    assert got == want, (got, want)
    if want:
        with pytest.raises(ValueError):
            g.check()
        assert np.all(cp.asnumpy(g.rowwise_data) == 0xA5)
        assert np.all(cp.asnumpy(g.columnwise_data) == 0xA5)
    else:
        g.check()
        exp = fp4kit.reference.group_quantize(x[:sum(first)], "mxfp4_e2m1", first_dims=first, axis="both")
        for a_, b_ in zip(g, exp):
            _check(a_, b_)


def _plan_spy(monkeypatch, record):
    """Calls record(launch step) for every launch of every plan run (the general path's run_plan in
    fp4kit._cuda_grouped, and the fast path's executors), before it runs."""
    from fp4kit import _cuda_grouped, _torch_exec

    def wrap(real):
        def run(plan, *a, **k):
            for step in plan.launches():
                record(step)
            return real(plan, *a, **k)
        return run

    monkeypatch.setattr(_cuda_grouped, "_run_plan", wrap(_cuda_grouped._run_plan))
    monkeypatch.setattr(_torch_exec, "run", wrap(_torch_exec.run))
    monkeypatch.setattr(_torch_exec, "run_cupy", wrap(_torch_exec.run_cupy))


@pytest.fixture
def launched(monkeypatch):
    """Names of the kernels launched by the plans run (a spy on the plan executors)."""
    names = []
    _plan_spy(monkeypatch, lambda step: names.append(step.kernel))
    return names


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2"])
def test_quad_squares_grouped(cp, fmt, dtype, launched, size_rules_off):
    """MXFP8 "both" from 16-bit input with one K % 128 takes group_quantize4 (128 x 128 squares, 4
    tiles per CTA, whole swizzled scale blocks with their padding; members off a 16-byte boundary
    staged in the group's tile), compact scales through swizzled staging buffers and
    group_unswizzle_scales: G = 1, 3, 64, 257, empty members at front, middle and end, odd sizes and
    sizes around 64 / 128, host and device dims, both scale layouts, against the reference on
    poisoned buffers (no padding pass follows, so every padding byte must come from the kernel)."""
    import ml_dtypes
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    cases = [(1, 384, [1000]), (3, 128, [0, 129, 0]), (64, 256, _dims(64, 70)), (257, 128, _dims(257, 71)),
             (13, 128, [0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 200, 256, 0]),
             (4, 256, [96, 32, 160, 1])]      # multiples of 16 (no staging) and their partial squares
    for (G, K, first), layout in itertools.product(cases, ("swizzled", "compact")):
        x = _x((sum(first), K), seed=G + K, dtype=npdt)
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="both", scale_layout=layout)
        xd = _dev(cp, x)
        del launched[:]
        _check(fp4kit.group_quantize(xd, fmt, first_dims=first, axis="both", scale_layout=layout), exp)
        assert any(n.startswith("group_quantize4_") for n in launched), launched
        assert ("group_unswizzle_scales" in launched) == (layout == "compact"), launched
        _device_dims_match(cp, xd, fmt, first, exp, dict(axis="both", scale_layout=layout))
    # kind "same" (one K, device-side count of rows per member)
    x = _x((5 * 192, 256), seed=3, dtype=npdt)
    exp = fp4kit.reference.group_quantize(x, fmt, num_groups=5, axis="both", scale_layout="swizzled")
    _check(fp4kit.group_quantize(_dev(cp, x), fmt, num_groups=5, axis="both", scale_layout="swizzled"), exp)


def _device_dims_match(cp, xd, fmt, first, exp, kw):
    """The op again with the dims on the device: every member equals the reference `exp`, and so
    does the columnwise operand's dequantization."""
    got = fp4kit.group_quantize(xd, fmt, first_dims=_dev_dims(cp, first, xd), **kw)
    got.check()
    for a, b in zip(got, exp):
        _check(a, b)
    ref_dq = fp4kit.reference.group_dequantize(exp, operand="columnwise")
    got_dq = fp4kit.group_dequantize(got, operand="columnwise")
    np.testing.assert_array_equal(cp.asnumpy(got_dq.data).view(np.uint32), ref_dq.data.view(np.uint32))


def _replay_then_bad_dims(cp, x, xd, fmt, kw, capture=True):
    """x (640 rows) and its device copy xd: capture a grouped quantize with CuPy device dims, change
    the dims on the device between replays (members move, shrink to zero, take every row) and
    compare each replay with the reference; then bad device dims: flagged by g.check(), nothing
    written (every output byte keeps the poison)."""
    K = x.shape[1]
    if capture:
        dims = cp.asarray(np.array([100, 0, 200, 12], np.int64))
        fp4kit.group_quantize(xd, fmt, first_dims=dims, **kw)       # warm-up: compile, pool blocks
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            g = fp4kit.group_quantize(xd, fmt, first_dims=dims, **kw)
            graph = stream.end_capture()
        o = 2 if fp4kit.FORMATS[fmt].packed else 1   # odd sizes where the format allows them
        for new in ([100, 0, 200, 12], [0, 300, o, 211 - o + 1], [640, 0, 0, 0], [128, 128, 256, 128]):
            dims.set(np.array(new, np.int64), stream=stream)
            graph.launch(stream)
            stream.synchronize()
            exp = fp4kit.reference.group_quantize(x[:sum(new)], fmt, first_dims=new, **kw)
            for i in range(len(new)):
                _check(g[i], exp[i])
    for bad, why in (([100, -1, 50], "negative"), ([400, 300, 0], "more elements")):
        g = fp4kit.group_quantize(xd, fmt, first_dims=_dev_dims(cp, bad, xd), max_elements=640 * K, **kw)
        with pytest.raises(ValueError, match=why):
            g.check()
        for buf in (g.rowwise_data, g.columnwise_data, g.rowwise_scales, g.columnwise_scales):
            assert np.all(cp.asnumpy(cp.asarray(buf)) == 0xA5)


@pytest.mark.parametrize("layout", ["swizzled", "compact"])
def test_quad_squares_graph_capture_and_bad_dims(cp, launched, size_rules_off, layout):
    """group_quantize4 (compact scales: and group_unswizzle_scales) under CUDA-graph capture with
    device dims changed between replays (squares move between members, members shrink to zero), and
    bad device dims: flagged, nothing written."""
    fmt, K = "mxfp8_e4m3", 256
    x = _x((640, K), seed=30, dtype=np.float16)
    _replay_then_bad_dims(cp, x, cp.asarray(x), fmt, dict(axis="both", scale_layout=layout))
    assert any(n.startswith("group_quantize4_") for n in launched), launched
    assert ("group_unswizzle_scales" in launched) == (layout == "compact"), launched


@pytest.mark.parametrize("fmt,dtype", [("mxfp6_e2m3", "bfloat16"), ("mxfp6_e3m2", "float16"),
                                       ("mxfp6_e2m3", "float32"), ("mxfp4_e2m1", "bfloat16"),
                                       ("mxfp4_e2m1", "float16"), ("mxfp4_e2m1", "float32"),
                                       ("mxfp8_e4m3", "float32")])
def test_one_tile_staged_compact_scales(cp, fmt, dtype, launched, size_rules_off):
    """MX "both" with compact scales and one K % 128 in the one-tile kernel (group_quantize1): the
    scales go swizzled into staging buffers (group_meta's second copy of the offsets, the padding
    zeroed by the tile kernel) and group_unswizzle_scales writes the compact matrices. G = 1, 3, 64,
    257, empty members at front, middle and end, odd sizes and sizes around 32 / 64 / 128, host and
    device dims, kind "same", against the reference on poisoned buffers; with K % 128 != 0 the
    kernel's direct compact stores instead (_cuda_grouped.stage_one_tile)."""
    import ml_dtypes
    f = fp4kit.FORMATS[fmt]
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[dtype]
    odd = [0, 1, 15, 16, 31, 33, 63, 64, 65, 127, 128, 129, 200, 256, 0]
    cases = [(1, 384, [1000]), (3, 128, [0, 130 if f.packed else 129, 0]), (64, 256, _dims(64, 72, even=f.packed)),
             (257, 128, _dims(257, 73, even=f.packed)), (15, 128, [d + (d & 1) if f.packed else d for d in odd])]
    for G, K, first in cases:
        x = _x((sum(first), K), seed=G + K + 1, dtype=npdt)
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="both")
        xd = _dev(cp, x)
        del launched[:]
        _check(fp4kit.group_quantize(xd, fmt, first_dims=first, axis="both"), exp)
        assert any(n.startswith("group_quantize1_") for n in launched), launched
        assert "group_unswizzle_scales" in launched, launched
        _device_dims_match(cp, xd, fmt, first, exp, dict(axis="both"))
    x = _x((5 * 192, 256), seed=4, dtype=npdt)   # kind "same"
    exp = fp4kit.reference.group_quantize(x, fmt, num_groups=5, axis="both")
    del launched[:]
    _check(fp4kit.group_quantize(_dev(cp, x), fmt, num_groups=5, axis="both"), exp)
    assert "group_unswizzle_scales" in launched, launched
    # not staged: K % 128 != 0
    first = [0, 130, 64, 0]
    x = _x((sum(first), 192), seed=5, dtype=npdt)
    exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="both")
    del launched[:]
    _check(fp4kit.group_quantize(_dev(cp, x), fmt, first_dims=first, axis="both"), exp)
    assert "group_unswizzle_scales" not in launched, launched


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("fmt", ["mxfp6_e2m3", "mxfp6_e3m2"])
def test_one_tile_mxfp6_descriptors_and_both_kernels(cp, fmt, dtype, launched, size_rules_off):
    """MXFP6 with one K in the one-tile kernel: from 16-bit input it reads the bands' descriptors,
    and "both" takes group_quantize1_f<F>_d<D>_boths (swizzled scales, or compact ones staged, with
    the rceil rule) or _both (compact direct stores, the floor rule); columnwise alone and float32
    input keep _plain (float32: the member lookups). G = 1, 3, 64 with empty members at front,
    middle and end and sizes off 64, host and device dims, against the reference on poisoned
    buffers; then bad device dims: flagged, and no code or scale byte written."""
    import ml_dtypes
    f = fp4kit.FORMATS[fmt]
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[dtype]
    d = {"float32": 0, "bfloat16": 1, "float16": 2}[dtype]
    sixteen = dtype != "float32"
    cases = [(1, 128, [300], dict(axis="both", scale_layout="swizzled"), "boths"),
             (3, 256, [70, 0, 129], dict(axis="both"), "boths"),                           # compact, staged
             (64, 96, _dims(64, 5), dict(axis="both"), "both"),                            # compact, K % 128
             (5, 128, [0, 65, 0, 200, 0], dict(axis="both", scale_layout="swizzled", scale_rule="floor"), "both"),
             (3, 160, [33, 0, 64], dict(axis="columnwise", scale_layout="swizzled"), "plain")]
    for G, K, first, kw, kind in cases:
        x = _x((sum(first), K), seed=G + K, dtype=npdt)
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, **kw)
        xd = _dev(cp, x)
        del launched[:]
        _check(fp4kit.group_quantize(xd, fmt, first_dims=first, **kw), exp)
        want = f"group_quantize1_f{f.format_id}_d{d}_{kind if sixteen else 'plain'}"
        assert want in launched, (want, launched)
        del launched[:]
        _device_dims_match(cp, xd, fmt, first, exp, kw)
        assert want in launched, (want, launched)
    x = _x((512, 64), seed=12, dtype=npdt)
    xd = _dev(cp, x)
    for bad, why in _BAD_DIMS[:2]:   # (odd lengths are an error for the packed formats only)
        g = fp4kit.group_quantize(xd, fmt, first_dims=_dev_dims(cp, bad, xd), axis="both", max_elements=512 * 64,
                                  scale_layout="swizzled")
        with pytest.raises(ValueError, match=why):
            g.check()
        for buf in (g.rowwise_data, g.columnwise_data, g.rowwise_scales, g.columnwise_scales):
            assert np.all(cp.asnumpy(cp.asarray(buf)) == 0xA5)


@pytest.mark.parametrize("fmt,dtype", [("mxfp6_e3m2", "float16"), ("mxfp8_e4m3", "float32"),
                                       ("mxfp4_e2m1", "bfloat16")])
def test_one_tile_staged_graph_capture_and_bad_dims(cp, launched, size_rules_off, fmt, dtype):
    """The staged one-tile path under CUDA-graph capture with device dims changed between replays
    (CuPy inputs), and bad device dims: flagged, nothing written (staging and unswizzle included)."""
    import ml_dtypes
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[dtype]
    x = _x((640, 256), seed=31, dtype=npdt)
    _replay_then_bad_dims(cp, x, _dev(cp, x), fmt, dict(axis="both"), capture=dtype != "bfloat16")
    assert "group_unswizzle_scales" in launched and any(n.startswith("group_quantize1_") for n in launched)


@pytest.fixture
def launch_args(monkeypatch):
    """(name, args) of every kernel launched by the plans run, args as fp4kit._plan.Arg (a buffer:
    kind "buf" and its slot, equal for the same buffer of one plan)."""
    calls = []
    _plan_spy(monkeypatch, lambda step: calls.append((step.kernel, step.args)))
    return calls


def stats_tabs(calls):
    """The tables buffer passed to the (last) group_stats launch (its second-to-last argument)."""
    stats = [a for n, a in calls if n.startswith("group_stats")]
    assert stats and stats[-1][-2].kind == "buf" and stats[-1][-1].kind == "buf"
    return stats[-1][-2]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_nvfp4_grouped_tables_from_stats(cp, dtype, launch_args):
    """Plain NVFP4 with computed amaxes and one K: the statistics pass builds each member's multiplier
    table once that member's amax is final (the CTA whose element count completes it) and the
    one-tile kernel copies it (QFLAG_ENC_TABS, poisoned table buffer). Members much smaller than a
    statistics chunk (several per chunk), members spread over many CTAs, empty members at front,
    middle and end, G = 1, 3, 64, 257, a member of zeros (amax 0), members holding inf / NaN / huge
    values; 'both' and columnwise, both layouts, host and device dims, and a CUDA graph replayed with
    new device dims (the counters are cleared inside the graph)."""
    import gc

    import ml_dtypes
    from fp4kit._plan import QFLAG_ENC_TABS
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[dtype]
    K = 128
    cases = [(1, [300]), (3, [0, 5000, 0]), (64, _dims(64, 80, even=True)), (257, _dims(257, 81, even=True)),
             (6, [2, 0, 2, 4000, 4, 18]), (5, [40, 64, 0, 70, 10])]    # even: FP4 columnwise packs M
    for ci, (G, first) in enumerate(cases):
        x = _x((sum(first), K), seed=90 + ci).astype(np.float32)
        offs = np.cumsum([0] + first)
        nz = [g for g in range(G) if first[g]]
        if len(nz) >= 3:
            x[offs[nz[0]]:offs[nz[0] + 1]] = 0.0                   # amax 0
            x[offs[nz[1]] + first[nz[1]] // 2, 5] = np.inf         # amax inf
            x[offs[nz[2]], 3] = np.nan                             # NaN ignored by the amax
            x[offs[nz[-1]], 7] = 60000.0 if dtype == "float16" else 3e38
        x = x.astype(npdt)
        xd = _dev(cp, x)
        for axis in ("both", "columnwise"):
            for layout in ("compact", "swizzled"):
                kw = dict(axis=axis, scale_layout=layout)
                exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, **kw)
                del launch_args[:]
                _check(fp4kit.group_quantize(xd, "nvfp4", first_dims=first, **kw), exp)
                q = [a for n, a in launch_args if n.startswith("group_quantize1_f5")]
                assert q and q[0][11].value & QFLAG_ENC_TABS, [n for n, _ in launch_args]
                assert q[0][9] == stats_tabs(launch_args) or axis == "columnwise"
                assert q[0][10] == stats_tabs(launch_args)
                got = fp4kit.group_quantize(xd, "nvfp4", first_dims=_dev_dims(cp, first, xd), **kw)
                got.check()
                for g in range(G):
                    _check(got[g], exp[g])
    # more members than group_stats takes tables for: the tile kernel builds them per CTA
    from fp4kit._cuda_grouped import STATS_TABS_MAX_G
    first = _dims(STATS_TABS_MAX_G + 1, 82, even=True)
    x = _x((sum(first), 64), seed=98).astype(npdt)
    exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, axis="both")
    del launch_args[:]
    _check(fp4kit.group_quantize(_dev(cp, x), "nvfp4", first_dims=first, axis="both"), exp)
    q = [a for n, a in launch_args if n.startswith("group_quantize1_f5")]
    assert q and not q[0][11].value & QFLAG_ENC_TABS
    # CUDA graph: capture with device dims, change them on the device, replay (the amaxes and the
    # counters are cleared inside the graph). bfloat16 comes as a torch tensor, so fp4kit queues on
    # torch's current stream: captured with torch.cuda.graph; CuPy arrays with a CuPy stream.
    x = _x((6000, K), seed=99).astype(npdt)
    xd = _dev(cp, x)
    kw = dict(axis="both", scale_layout="swizzled")
    sizes = ([100, 0, 2000, 12], [0, 3000, 2, 2998], [6000, 0, 0, 0], [18, 18, 18, 18])
    del launch_args[:]
    if dtype == "bfloat16":
        import torch
        dims = torch.tensor(sizes[0], dtype=torch.int64, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):                       # warm-up on the capture stream (compile, pools)
            for _ in range(2):
                fp4kit.group_quantize(xd, "nvfp4", first_dims=dims, **kw)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        del launch_args[:]                                  # the spy's records hold the warm-up's buffers
        gc.collect()                                        # ... back to the pool (for the capture)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):          # CuPy's pool keeps free blocks per stream
            g = fp4kit.group_quantize(xd, "nvfp4", first_dims=dims, **kw)

        def replay(new):
            dims.copy_(torch.tensor(new, dtype=torch.int64))
            graph.replay()
            torch.cuda.synchronize()
    else:
        dims = cp.asarray(np.array(sizes[0], np.int64))
        fp4kit.group_quantize(xd, "nvfp4", first_dims=dims, **kw)
        del launch_args[:]
        gc.collect()
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            g = fp4kit.group_quantize(xd, "nvfp4", first_dims=dims, **kw)
            cgraph = stream.end_capture()

        def replay(new):
            dims.set(np.array(new, np.int64), stream=stream)
            cgraph.launch(stream)
            stream.synchronize()
    for new in sizes:
        replay(new)
        exp = fp4kit.reference.group_quantize(x[:sum(new)], "nvfp4", first_dims=new, **kw)
        for i in range(len(new)):
            _check(g[i], exp[i])


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_nvfp4_stochastic_rounding_grouped_tables(cp, dtype, launch_args):
    """Grouped NVFP4 with stochastic rounding alone and one K: the one-tile _sr kernel copies the
    members' multiplier tables (QFLAG_ENC_TABS) built by the statistics pass (computed amaxes:
    members of zeros, inf, NaN and huge values, empty members) or by the metadata launch (supplied
    amaxes, one of them 0), and past STATS_TABS_MAX_G members with computed amaxes builds them in
    every CTA; both layouts, two seeds, bytes against the reference's Philox stream."""
    import ml_dtypes
    from fp4kit._cuda_grouped import STATS_TABS_MAX_G
    from fp4kit._plan import QFLAG_ENC_TABS
    npdt = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}[dtype]
    first = [0, 300, 2, 0, 4000, 18, 70, 0]
    x = _x((sum(first), 64), seed=120).astype(np.float32)
    offs = np.cumsum([0] + first)
    x[offs[1]:offs[2]] = 0.0               # amax 0
    x[offs[4] + 7, 5] = np.inf            # amax inf
    x[offs[5], 3] = np.nan                # NaN ignored by the amax
    x[offs[6], 7] = 3e38
    x = x.astype(npdt)
    xd = _dev(cp, x)
    amax = np.abs(np.random.default_rng(2).standard_normal(len(first))).astype(np.float32) * 8
    amax[4] = 0.0
    for seed in (11, 2 ** 64 - 5):
        for layout in ("compact", "swizzled"):
            for sup in (False, True):
                kw = dict(axis="both", scale_layout=layout, rounding="stochastic", seed=seed)
                exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, amax=amax if sup else None, **kw)
                del launch_args[:]
                got = fp4kit.group_quantize(xd, "nvfp4", first_dims=first, amax=cp.asarray(amax) if sup else None,
                                            **kw)
                _check(got, exp)
                q = [a for n, a in launch_args if n.startswith("group_quantize1_f5") and n.endswith("_sr")]
                assert q and q[0][11].value & QFLAG_ENC_TABS, [n for n, _ in launch_args]
                if not sup:
                    assert q[0][9] == stats_tabs(launch_args) and q[0][10] == stats_tabs(launch_args)
    # more members than group_stats takes tables for: the _sr kernel builds them per CTA
    first = _dims(STATS_TABS_MAX_G + 1, 121, even=True)
    x = _x((sum(first), 64), seed=122).astype(npdt)
    kw = dict(axis="both", rounding="stochastic", seed=3)
    exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, **kw)
    del launch_args[:]
    _check(fp4kit.group_quantize(_dev(cp, x), "nvfp4", first_dims=first, **kw), exp)
    q = [a for n, a in launch_args if n.startswith("group_quantize1_f5") and n.endswith("_sr")]
    assert q and not q[0][11].value & QFLAG_ENC_TABS

def test_nvfp4_grouped_tables_supplied_amax(cp, launch_args):
    """Plain NVFP4 with supplied amaxes and one K: the metadata launch's extra CTAs (two members
    each) build every member's multiplier table from its amax and the one-tile kernel copies it
    (QFLAG_ENC_TABS, poisoned table buffer): amaxes of zero, tiny, huge, inf and the true value,
    G = 1, 5, 257 with empty members, 'both' and columnwise, both layouts, host and device dims."""
    import ml_dtypes
    from fp4kit._plan import QFLAG_ENC_TABS
    K = 96
    rng = np.random.default_rng(120)
    cases = [[300], [0, 130, 64, 0, 258], _dims(257, 121, even=True)]
    for ci, first in enumerate(cases):
        G = len(first)
        x = _x((sum(first), K), seed=120 + ci).astype(ml_dtypes.bfloat16)
        offs = np.cumsum([0] + first)
        true = np.array([np.abs(x[offs[g]:offs[g + 1]].astype(np.float32)).max() if first[g] else 0.0
                         for g in range(G)], np.float32)
        special = np.array([1.0, 0.0, 1e-38, 3e38, np.inf], np.float32)
        amax = (true * np.exp2(rng.integers(-3, 4, G))).astype(np.float32)
        amax[:min(G, 5)] = np.where(np.arange(min(G, 5)) == 0, true[0], special[:min(G, 5)])
        xd = _dev(cp, x)
        for axis in ("both", "columnwise"):
            for layout in ("compact", "swizzled"):
                kw = dict(axis=axis, scale_layout=layout)
                exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, amax=amax, **kw)
                del launch_args[:]
                dev_amax = amax.copy()
                dev_amax[amax == 0] = -0.0        # stored as +0, as the reference's (nvfp4_amax_out)
                _check(fp4kit.group_quantize(xd, "nvfp4", first_dims=first, amax=cp.asarray(dev_amax), **kw), exp)
                q = [a for n, a in launch_args if n.startswith("group_quantize1_f5")]
                meta = [a for n, a in launch_args if n == "group_meta"]
                assert q and q[0][11].value & QFLAG_ENC_TABS, [n for n, _ in launch_args]
                assert not any(n.startswith("group_stats") for n, _ in launch_args)
                assert q[0][10] == meta[0][19] and q[0][10].kind == "buf"   # group_meta's tabs (then the dims sources)
                got = fp4kit.group_quantize(xd, "nvfp4", first_dims=_dev_dims(cp, first, xd), amax=cp.asarray(amax), **kw)
                got.check()
                for g in range(G):
                    _check(got[g], exp[g])


@pytest.mark.parametrize("n", [0, 1, 255])
@pytest.mark.parametrize("host_amax", [False, True])
def test_row_scaled_amax_shorter_than_device_dims_rows(cp, n, host_amax):
    """Row-scaled NVFP4 with device dims: the host cannot know sum M_i, so an amax of fewer entries
    than the members' rows is flagged by the metadata launch (error flag 32, nothing written)
    instead of read past its end (an empty amax was a null pointer: an illegal address); an amax
    of at least sum M_i entries quantizes as the reference."""
    xh = _x((256, 64), seed=140)
    x = cp.asarray(xh)
    fd = cp.asarray(np.array([128, 128], np.int64))
    rows = np.abs(xh).max(axis=1).astype(np.float32)
    short = rows[:n]
    g = fp4kit.group_quantize(x, "nvfp4", first_dims=fd, row_scaled=True, axis="both",
                              amax=short if host_amax else cp.asarray(short))
    with pytest.raises(ValueError, match=r"row amaxes exceed the amax buffer bound"):
        g.check()
    for a in (rows, np.concatenate([rows, np.ones(3, np.float32)])):   # exact, or longer
        got = fp4kit.group_quantize(x, "nvfp4", first_dims=fd, row_scaled=True, axis="both",
                                    amax=a if host_amax else cp.asarray(a))
        got.check()
        exp = fp4kit.reference.group_quantize(xh, "nvfp4", first_dims=[128, 128], row_scaled=True, axis="both",
                                              amax=rows)
        for i in range(2):
            _check(got[i], exp[i])


def test_row_scaled_device_dims_members_without_columns(cp):
    """Row-scaled NVFP4 with device dims and members of rows but no columns. varying_first with
    K = 0: one (zero) amax per row, bounded by x.shape[0] (the element bound, 0, bounded nothing, so
    the metadata launch flagged valid dims); the bytes and amaxes equal the reference's. A 1-D input
    (varying_both): rows without columns beyond max_elements cannot be bounded on the host and are
    flagged, naming the way out (host dims), which quantize as the reference."""
    for first in ([2], [0, 4, 2], [6, 0]):
        xh = np.zeros((sum(first) + 3, 0), np.float32)
        for axis in ("rowwise", "both"):
            got = fp4kit.group_quantize(cp.asarray(xh), "nvfp4", first_dims=cp.asarray(np.array(first, np.int64)),
                                        row_scaled=True, axis=axis)
            got.check()
            exp = fp4kit.reference.group_quantize(xh[:sum(first)], "nvfp4", first_dims=first, row_scaled=True, axis=axis)
            for i in range(len(first)):
                _check(got[i], exp[i])
                assert cp.asnumpy(got[i].rowwise.amax).tolist() == [0.0] * first[i]
    x1 = _x(32, seed=143)
    first, last = [40, 1, 0], [0, 32, 0]           # 41 rows, 32 elements
    g = fp4kit.group_quantize(cp.asarray(x1), "nvfp4", row_scaled=True, first_dims=cp.asarray(np.array(first, np.int64)),
                              last_dims=cp.asarray(np.array(last, np.int64)), max_elements=32)
    with pytest.raises(ValueError, match=r"row amaxes exceed the amax buffer bound .* need host dims"):
        g.check()
    exp = fp4kit.reference.group_quantize(x1, "nvfp4", row_scaled=True, first_dims=first, last_dims=last)
    _check(fp4kit.group_quantize(cp.asarray(x1), "nvfp4", row_scaled=True, first_dims=first, last_dims=last), exp)


def _row_scaled_input(M, K, npdt, seed):
    """x (M, K) of npdt with NaN, +-inf, -0 and subnormals at the edges of the amax kernel's 32-row
    steps and 32 V-column spans (V = 16 bytes of elements) and of the last rows / columns."""
    import ml_dtypes
    x = _x((M, K), seed=seed)
    V = 16 // np.dtype(npdt).itemsize
    sub = float(ml_dtypes.finfo(npdt).smallest_subnormal)
    for r, c, v in ((0, 0, np.nan), (31, 32 * V - 1, np.inf), (32, 32 * V, -np.inf), (M - 1, K - 1, np.nan),
                    (M // 2, K // 2, -0.0), (M - 33, 32 * V + 1, sub), (M - 2, K - 1, -np.inf)):
        x[min(r, M - 1), min(c, K - 1)] = v
    x[M // 3, :] = np.nan                  # a row of NaN only: amax 0
    x[:, min(K - 2, 3 * V)] = -sub         # a column of one subnormal
    return x.astype(npdt)


def _torch_at(x, offset):
    """x on the GPU as a torch tensor starting `offset` elements into a larger allocation (offset 1:
    rows off 16 bytes, the amax kernel's element-wise loads)."""
    import torch
    n = x.size
    flat = x.reshape(-1).view(np.int32 if x.dtype.itemsize == 4 else np.int16)
    tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[str(x.dtype)]
    base = torch.zeros(n + 8, dtype=torch.int32 if x.dtype.itemsize == 4 else torch.int16, device="cuda")
    base[offset:offset + n] = torch.from_numpy(flat.copy()).cuda()
    return base.view(tdt)[offset:offset + n].view(x.shape)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_row_scaled_amax_pass(cp, dtype):
    """The per-row / per-column amax pass of row-scaled NVFP4 (common/amax.cuh amax_rows_cols_vec:
    single tensors' amax_rows_cols_d<D>, one launch for both operands, and grouped.cu
    group_amax_rows_cols_d<D> for one K). Single tensor: 11266 rows (more 32-row steps than CTA
    rows of the grid, so CTAs take two) x K columns past two 32 V-column spans with a partial third;
    grouped: 40 members of 0-1198 even rows (empty ones at both ends and in the middle, boundaries
    inside steps, member changes inside a CTA's chunk), device and host dims. Inputs 16-byte aligned
    and one element off (with K % V != 0 for 16-bit input: element-wise loads), NaN / inf / -0 /
    subnormals at step and span edges; "both" and rowwise: bytes and amaxes equal the reference's."""
    import ml_dtypes
    npdt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]
    V = 16 // np.dtype(npdt).itemsize
    for offset, K in ((0, 75 * V), (1, 75 * V + (2 if V == 8 else 0))):
        x = _row_scaled_input(11266, K, npdt, seed=60 + offset)
        xd = _torch_at(x, offset)
        assert (xd.data_ptr() % 16 == 0) == (offset == 0)
        for axis in ("both", "rowwise"):
            exp = fp4kit.reference.quantize(x, "nvfp4", axis=axis, row_scaled=True)
            got = fp4kit.quantize(xd, "nvfp4", axis=axis, row_scaled=True)
            _check(got, exp)
            assert np.array_equal(got.rowwise.amax.cpu().numpy().view(np.uint32), exp.rowwise.amax.view(np.uint32))
            if axis == "both":
                assert np.array_equal(got.columnwise.amax.cpu().numpy().view(np.uint32),
                                      exp.columnwise.amax.view(np.uint32))
    rng = np.random.default_rng(61)
    first = [int(v) for v in rng.integers(0, 600, 40) * 2]
    first[0] = first[20] = first[-1] = 0
    first[5], first[6] = 2, 34     # boundaries 2 and 36 rows into a step
    for offset, K in ((0, 3 * 32 * V), (1, 3 * 32 * V - (4 if V == 8 else 0))):
        x = _row_scaled_input(sum(first), K, npdt, seed=62 + offset)
        xd = _torch_at(x, offset)
        for axis in ("both", "rowwise"):
            exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, axis=axis, row_scaled=True)
            for dims in (_dev_dims(cp, first, xd), first):
                got = fp4kit.group_quantize(xd, "nvfp4", first_dims=dims, axis=axis, row_scaled=True)
                got.check()
                for a, b in zip(got, exp):
                    _check(a, b)
                    for op in ("rowwise", "columnwise"):
                        if getattr(b, op) is not None:
                            ga = getattr(a, op).amax
                            ga = ga.cpu().numpy() if hasattr(ga, "cpu") else cp.asnumpy(ga)
                            assert np.array_equal(ga.view(np.uint32), getattr(b, op).amax.view(np.uint32))


def test_rht_amax_pass(cp):
    """NVFP4 rht with one K: grouped.cu group_amax_plain_rht_bf16 (every member's plain and post-RHT
    amax in one pass, per-member maxima in shared memory): 24 members of 0-1600 rows % 16 (empty
    ones at both ends and in the middle, members far smaller than a thread's stride and one spanning
    many), K = 7168 and 96, x 4-byte aligned and 2 bytes off (two 2-byte loads per word), NaN and inf
    in two members, the default and a custom sign mask, "both" and columnwise alone, device and
    host dims: bytes and amaxes equal the reference's."""
    import ml_dtypes
    rng = np.random.default_rng(70)
    first = [int(v) for v in rng.integers(0, 100, 24) * 16]
    first[0] = first[11] = first[-1] = 0
    first[3], first[4] = 16, 1600
    for K, offset, mask in ((7168, 0, None), (96, 1, 0x5A5A), (96, 0, 0)):
        x = _x((sum(first), K), seed=K + offset)
        x[sum(first[:3]) + 3, 5] = np.nan       # member 3 (16 rows)
        x[sum(first[:4]) + 1, K - 1] = np.inf   # member 4 (1600 rows)
        x = x.astype(ml_dtypes.bfloat16)
        xd = _torch_at(x, offset)
        kw = {} if mask is None else dict(rht_sign_mask=mask)
        for axis in ("both", "columnwise"):
            exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, axis=axis, rht=True, **kw)
            for dims in (_dev_dims(cp, first, xd), first):
                got = fp4kit.group_quantize(xd, "nvfp4", first_dims=dims, axis=axis, rht=True, **kw)
                got.check()
                for a, b in zip(got, exp):
                    _check(a, b)
                    for op in ("rowwise", "columnwise"):
                        if getattr(b, op) is not None:
                            ga = getattr(a, op).amax.cpu().numpy()
                            assert np.array_equal(ga.view(np.uint32), getattr(b, op).amax.view(np.uint32)), (K, op)


def test_row_scaled_amax_varying_last_exact_length(cp):
    """varying_last with device last dims and one M: sum M_i = G x M is known on the host, so the
    row-scaled amax length is checked there, before any launch."""
    x = cp.asarray(_x(4 * 64, seed=141))
    ld = cp.asarray(np.array([32, 32, 0, 0], np.int64))
    with pytest.raises(ValueError, match=r"amax: expected shape \(sum M_i,\) one per row = \(16,\), got \(15,\)"):
        fp4kit.group_quantize(x, "nvfp4", first_dims=4, last_dims=ld, row_scaled=True,
                              amax=cp.ones(15, cp.float32), max_elements=256)


def test_varying_both_members_of_huge_m_and_no_columns(cp):
    """Device dims with members (2**62, 0): no elements, so within every bound; their rows no
    longer saturate the rows prefix that the padding pass reads, so a later member's swizzled
    padding is written (it was left unwritten: poisoned bytes) and its bytes equal the reference."""
    xh = _x(32, seed=142)
    for fmt in ("mxfp8_e4m3", "nvfp4"):
        g = fp4kit.group_quantize(cp.asarray(xh), fmt, scale_layout="swizzled", axis="rowwise",
                                  first_dims=cp.asarray(np.array([2**62, 2**62, 1], np.int64)),
                                  last_dims=cp.asarray(np.array([0, 0, 32], np.int64)), max_elements=32)
        g.check()
        want = fp4kit.reference.quantize(xh.reshape(1, 32), fmt, scale_layout="swizzled")
        _check(g[2], want)


@pytest.mark.parametrize("lib", ["cupy", "torch"])
@pytest.mark.parametrize("kind", ["varying_first", "varying_last", "varying_both"])
def test_result_keeps_its_dims_when_the_caller_reuses_the_dims_buffer(cp, lib, kind):
    """A result of device dims reads them again later (member views, group_dequantize): it keeps
    the metadata launch's copy, so the caller may refill its dims buffer (the next batch's token
    counts) while earlier results are still in use. Reading the caller's array instead gave wrong
    member views, and group_dequantize took the new dims with the old offsets (writing past a member)."""
    import ml_dtypes
    if kind == "varying_first":
        x, kw = _x((112, 96), seed=150), dict(first_dims=[32, 0, 64, 16])
    else:
        last = [64, 32, 96, 0]
        first = 16 if kind == "varying_last" else [16, 32, 16, 8]
        x = _x(3072 if kind == "varying_last" else 3584, seed=151)
        kw = dict(first_dims=first, last_dims=last)
    xb = x.astype(ml_dtypes.bfloat16)
    ref = fp4kit.reference.group_quantize(xb, "mxfp8_e4m3", axis="both", **kw)
    want = fp4kit.reference.group_dequantize(ref)
    if lib == "torch":
        import torch
        xd = torch.from_numpy(xb.view(np.int16)).cuda().view(torch.bfloat16)
        dev = lambda v: torch.tensor(v, dtype=torch.int64, device="cuda")   # noqa: E731
    else:
        xd = cp.asarray(xb.astype(np.float32))
        dev = lambda v: cp.asarray(np.array(v, np.int64))   # noqa: E731
    dkw = {k: (v if isinstance(v, int) else dev(v)) for k, v in kw.items()}
    g = fp4kit.group_quantize(xd, "mxfp8_e4m3", axis="both", max_elements=x.size, **dkw)
    g.check()
    for k, v in dkw.items():        # the caller refills its buffers with the next batch's sizes
        if not isinstance(v, int):
            new = np.array(kw[k][::-1], np.int64) if kind != "varying_first" else np.array([64, 16, 32, 0], np.int64)
            if lib == "torch":
                v.copy_(torch.from_numpy(new).cuda())
            else:
                v[...] = cp.asarray(new)
    for i in range(4):
        _check(g[i], ref[i])
    y = fp4kit.group_dequantize(g)
    for i in range(4):
        got = y[i].cpu().numpy() if lib == "torch" else cp.asnumpy(y[i])
        np.testing.assert_array_equal(got.view(np.uint32), np.asarray(want[i]).view(np.uint32))


# ---------------------------------------------------------------------------------------------
# Every grouped kernel variant the planner can pick, launched at least once (the first run of
# scripts/kernel_coverage.py found these never launched by the tests above): each test asserts the
# kernels it is for were the ones that ran.

def _npdt(dtype):
    import ml_dtypes
    return {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dtype]


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_plain_tile_kernels_every_format_and_dtype(cp, fmt, dtype, launched):
    """The plain tile kernels for every format and input dtype: the columnwise operand alone with one
    K (group_quantize1_*_plain, one tile per CTA) and "both" with varying K (group_quantize_*_plain,
    the persistent kernel), empty members at front, middle and end, odd sizes, both scale layouts."""
    f = fp4kit.FORMATS[fmt]
    npdt, d = _npdt(dtype), DTYPE_IDS[dtype]
    first = _dims(5, 80, even=f.packed)
    x = _x((sum(first), 96), seed=81, dtype=npdt)
    for layout in ("compact", "swizzled"):
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="columnwise", scale_layout=layout)
        _check(fp4kit.group_quantize(_dev(cp, x), fmt, first_dims=first, axis="columnwise", scale_layout=layout), exp)
    assert f"group_quantize1_f{f.format_id}_d{d}_plain" in launched, launched
    first, last = _dims(5, 82, even=f.packed), _dims(5, 83, even=True)
    xb = _x(sum(m * k for m, k in zip(first, last)), seed=84, dtype=npdt)
    for layout in ("compact", "swizzled"):
        exp = fp4kit.reference.group_quantize(xb, fmt, first_dims=first, last_dims=last, axis="both",
                                              scale_layout=layout)
        _check(fp4kit.group_quantize(_dev(cp, xb), fmt, first_dims=first, last_dims=last, axis="both",
                                     scale_layout=layout), exp)
    assert f"group_quantize_f{f.format_id}_d{d}_plain" in launched, launched


def _sr_inputs(dtype, G, seed, last_mult16=False):
    """The stochastic-rounding tests' inputs (seeds seed .. seed + 4): G members of even sizes x 64,
    and 4 members of varying K (K even, or a multiple of 16)."""
    npdt = _npdt(dtype)
    first = _dims(G, seed, even=True)
    x = _x((sum(first), 64), seed=seed + 1, dtype=npdt)
    fl, ll = _dims(4, seed + 2, even=True), _dims(4, seed + 3, even=not last_mult16, mult16=last_mult16)
    xb = _x(sum(m * k for m, k in zip(fl, ll)), seed=seed + 4, dtype=npdt)
    return first, x, fl, ll, xb


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_mxfp4_stochastic_rounding_grouped_every_kernel(cp, dtype, launched):
    """Grouped MXFP4 with stochastic rounding through each of its kernels: the tile kernel
    (group_quantize1_f4_d<D>_sr with one K, group_quantize_f4_d<D>_sr with varying K; columnwise and
    "both") and the rows kernels
    (group_quantize_rowsk / group_quantize_rows; rowwise, one K and varying K), two seeds, against
    the reference's Philox stream; different seeds give different codes."""
    d = DTYPE_IDS[dtype]
    first, x, fl, ll, xb = _sr_inputs(dtype, 6, 90)
    codes = {}
    for seed in (3, 2 ** 63 + 11):
        for axis in ("rowwise", "columnwise", "both"):
            kw = dict(axis=axis, rounding="stochastic", seed=seed)
            exp = fp4kit.reference.group_quantize(x, "mxfp4_e2m1", first_dims=first, **kw)
            got = fp4kit.group_quantize(_dev(cp, x), "mxfp4_e2m1", first_dims=first, **kw)
            _check(got, exp)
            exp = fp4kit.reference.group_quantize(xb, "mxfp4_e2m1", first_dims=fl, last_dims=ll, scale_layout="swizzled", **kw)
            _check(fp4kit.group_quantize(_dev(cp, xb), "mxfp4_e2m1", first_dims=fl, last_dims=ll,
                                         scale_layout="swizzled", **kw), exp)
            if axis == "rowwise":
                codes[seed] = np.concatenate([np.asarray(m.rowwise.data).ravel() for m in exp])
    assert not np.array_equal(codes[3], codes[2 ** 63 + 11])
    for k in (f"group_quantize1_f4_d{d}_sr", f"group_quantize_f4_d{d}_sr", f"group_quantize_rows_f4_d{d}",
              f"group_quantize_rowsk_f4_d{d}"):
        assert k in launched, (k, launched)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_nvfp4_stochastic_rounding_grouped_tile_kernel(cp, dtype, launched):
    """Grouped NVFP4 with stochastic rounding alone through its tile kernels (group_quantize1_f5_d<D>_sr
    with one K, group_quantize_f5_d<D>_sr with varying K; columnwise and "both", compact and swizzled
    scales), two seeds, against the reference's Philox stream; different seeds give different codes."""
    d = DTYPE_IDS[dtype]
    first, x, fl, ll, xb = _sr_inputs(dtype, 5, 98, last_mult16=True)
    codes = {}
    for seed in (5, 2 ** 64 - 3):
        for axis, layout in (("columnwise", "compact"), ("both", "swizzled")):
            kw = dict(axis=axis, rounding="stochastic", seed=seed, scale_layout=layout)
            exp = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, **kw)
            _check(fp4kit.group_quantize(_dev(cp, x), "nvfp4", first_dims=first, **kw), exp)
            exp2 = fp4kit.reference.group_quantize(xb, "nvfp4", first_dims=fl, last_dims=ll, **kw)
            _check(fp4kit.group_quantize(_dev(cp, xb), "nvfp4", first_dims=fl, last_dims=ll, **kw), exp2)
            if axis == "both":
                codes[seed] = np.concatenate([np.asarray(m.columnwise.data).ravel() for m in exp])
    assert not np.array_equal(codes[5], codes[2 ** 64 - 3])
    assert f"group_quantize1_f5_d{d}_sr" in launched and f"group_quantize_f5_d{d}_sr" in launched, launched


@pytest.mark.parametrize("variant", [dict(row_scaled=True), dict(rounding="stochastic", seed=17)])
def test_nvfp4_rowwise_varying_k_full_rows_kernel_from_float32(cp, variant, launched):
    """NVFP4 rowwise with varying K and an extended option from float32 input: group_quantize_rows_f5_d0."""
    fl, ll = _dims(5, 95), _dims(5, 96, mult16=True)
    xb = _x(sum(m * k for m, k in zip(fl, ll)), seed=97)
    exp = fp4kit.reference.group_quantize(xb, "nvfp4", first_dims=fl, last_dims=ll, axis="rowwise", **variant)
    _check(fp4kit.group_quantize(cp.asarray(xb), "nvfp4", first_dims=fl, last_dims=ll, axis="rowwise", **variant), exp)
    assert "group_quantize_rows_f5_d0" in launched, launched


@pytest.mark.parametrize("fmt", FORMATS)
def test_group_dequantize_every_output_dtype(cp, fmt):
    """group_dequantize of every format to float32, bfloat16 and float16, both operands, against the
    reference's bits (output poisoned first)."""
    f = fp4kit.FORMATS[fmt]
    first = _dims(5, 98, even=f.packed)
    x = _x((sum(first), 64), seed=99)
    exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="both")
    got = fp4kit.group_quantize(cp.asarray(x), fmt, first_dims=first, axis="both")
    _check(got, exp)
    for operand in ("rowwise", "columnwise"):
        for out_dtype in ("float32", "bfloat16", "float16"):
            ref = fp4kit.reference.group_dequantize(exp, operand=operand, dtype=out_dtype)
            dq = fp4kit.group_dequantize(got, operand=operand, dtype=out_dtype)
            np.testing.assert_array_equal(_bits(cp.asnumpy(dq.data)), _bits(ref.data), err_msg=f"{operand} {out_dtype}")


@pytest.fixture
def dq_kernels(monkeypatch):
    """Names of the group_dequantize kernels chosen (both paths of the API ask dequantize_kernel)."""
    from fp4kit import _cuda_grouped
    names, real = [], _cuda_grouped.dequantize_kernel

    def spy(*a, **k):
        r = real(*a, **k)
        names.append(r[0])
        return r
    monkeypatch.setattr(_cuda_grouped, "dequantize_kernel", spy)
    return names


@pytest.mark.parametrize("K", [64, 40])
@pytest.mark.parametrize("fmt", FORMATS)
def test_group_dequantize_shared_columns_kernel(cp, fmt, K, dq_kernels):
    """The operand whose members share their columns (rowwise of one K, columnwise of one M) takes
    group_dequantize_cols_* for 16-bit output (segments by global row), K % 16 == 0 or not, host
    and device dims, both scale layouts; the other operand and float32 output the general kernel.
    Bits against the reference (output poisoned first)."""
    f = fp4kit.FORMATS[fmt]
    fid = f.format_id
    first = _dims(6, 101 + K, even=True)
    x = _x((sum(first), K), seed=K)
    for layout in ("swizzled", "compact"):
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="both", scale_layout=layout)
        for dims in (first, cp.asarray(np.array(first, np.int64))):
            got = fp4kit.group_quantize(cp.asarray(x), fmt, first_dims=dims, axis="both", scale_layout=layout)
            for operand, kernel in (("rowwise", "group_dequantize_cols"), ("columnwise", "group_dequantize")):
                for out_dtype in ("float32", "bfloat16", "float16"):
                    dq_kernels.clear()
                    ref = fp4kit.reference.group_dequantize(exp, operand=operand, dtype=out_dtype)
                    dq = fp4kit.group_dequantize(got, operand=operand, dtype=out_dtype)
                    np.testing.assert_array_equal(_bits(cp.asnumpy(dq.data)), _bits(ref.data),
                                                  err_msg=f"{layout} {operand} {out_dtype}")
                    k = "group_dequantize" if out_dtype == "float32" else kernel   # _cols: 16-bit out
                    assert dq_kernels == [f"{k}_f{fid}_o{DTYPE_IDS[out_dtype]}"], dq_kernels
    # one M, varying K (a 1-D buffer): the columnwise operand's members share M columns
    M, last = 48, _dims(5, 102 + K, even=True)
    xl = _x(M * sum(last), seed=K + 1)
    exp = fp4kit.reference.group_quantize(xl, fmt, first_dims=M, last_dims=last, axis="both")
    got = fp4kit.group_quantize(cp.asarray(xl), fmt, first_dims=M, last_dims=cp.asarray(np.array(last, np.int64)),
                                axis="both")
    for operand, kernel in (("columnwise", "group_dequantize_cols"), ("rowwise", "group_dequantize")):
        dq_kernels.clear()
        ref = fp4kit.reference.group_dequantize(exp, operand=operand, dtype="bfloat16")
        dq = fp4kit.group_dequantize(got, operand=operand, dtype="bfloat16")
        np.testing.assert_array_equal(_bits(cp.asnumpy(dq.data)), _bits(ref.data), err_msg=operand)
        assert dq_kernels == [f"{kernel}_f{fid}_o{DTYPE_IDS['bfloat16']}"], dq_kernels


@pytest.mark.parametrize("K", [64, 40])
@pytest.mark.parametrize("fmt", FORMATS)
def test_group_dequantize_shared_columns_scale_rows(cp, fmt, K, dq_kernels):
    """group_dequantize_cols_* of MX formats reads the scales by global row when every member with
    rows starts at a multiple of 128 rows (swizzled; compact always), else by the member's own row:
    members [128, 0, 256, 0, 384, 77] (global; the last member need not be a multiple) and
    [128, 77, 256] (the third member starts at row 205: per member), one K and one M, host and
    device dims, both layouts, bits against the reference (output poisoned first)."""
    fid = fp4kit.FORMATS[fmt].format_id
    for first in ([128, 0, 256, 0, 384, 77], [128, 77, 256]):
        x = _x((sum(first), K), seed=len(first) + K)
        for layout in ("swizzled", "compact"):
            exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="rowwise", scale_layout=layout)
            ref = fp4kit.reference.group_dequantize(exp, dtype="bfloat16")
            for dims in (first, cp.asarray(np.array(first, np.int64))):
                dq_kernels.clear()
                got = fp4kit.group_quantize(cp.asarray(x), fmt, first_dims=dims, axis="rowwise", scale_layout=layout)
                dq = fp4kit.group_dequantize(got, dtype="bfloat16")
                np.testing.assert_array_equal(_bits(cp.asnumpy(dq.data)), _bits(ref.data),
                                              err_msg=f"{first} {layout} {type(dims)}")
                assert dq_kernels == [f"group_dequantize_cols_f{fid}_o{DTYPE_IDS['bfloat16']}"], dq_kernels
    # one M (the columnwise operand's columns; M % 16 == 0 or not), members of K_i rows there
    M = K + 8
    for last in ([128, 0, 256, 40], [64, 128]):
        xl = _x(M * sum(last), seed=sum(last) + K)
        for layout in ("swizzled", "compact"):
            exp = fp4kit.reference.group_quantize(xl, fmt, first_dims=M, last_dims=last, axis="columnwise",
                                                  scale_layout=layout)
            ref = fp4kit.reference.group_dequantize(exp, operand="columnwise", dtype="float16")
            got = fp4kit.group_quantize(cp.asarray(xl), fmt, first_dims=M, last_dims=cp.asarray(np.array(last, np.int64)),
                                        axis="columnwise", scale_layout=layout)
            dq = fp4kit.group_dequantize(got, operand="columnwise", dtype="float16")
            np.testing.assert_array_equal(_bits(cp.asnumpy(dq.data)), _bits(ref.data), err_msg=f"{last} {layout}")


@pytest.mark.parametrize("out_dtype", ["float16", "bfloat16"])
def test_group_dequantize_shared_columns_kind_changed_by_hand(cp, out_dtype, dq_kernels):
    """A device-dims group whose kind was changed by hand to one of shared columns, although its
    members' columns differ: the shared-columns kernel sees it (every CTA compares the columns) and
    writes NaN everywhere, never numbers from the wrong places and nothing out of bounds."""
    import dataclasses
    first, last = [16, 32, 0, 48], [64, 32, 16, 96]
    xl = _x(sum(m * k for m, k in zip(first, last)), seed=5)
    g = fp4kit.group_quantize(cp.asarray(xl), "mxfp8_e4m3", first_dims=cp.asarray(np.array(first, np.int64)),
                              last_dims=cp.asarray(np.array(last, np.int64)), axis="rowwise")
    assert g.kind == "varying_both"
    bad = dataclasses.replace(g, kind="varying_first")
    dq = fp4kit.group_dequantize(bad, dtype=out_dtype)
    assert dq_kernels[-1].startswith("group_dequantize_cols_"), dq_kernels
    bits = _bits(cp.asnumpy(dq.data))
    assert bits.size == sum(m * k for m, k in zip(first, last))
    assert (bits == (0x7E00 if out_dtype == "float16" else 0x7FC0)).all()

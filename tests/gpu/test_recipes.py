"""NVFP4 recipes on the GPU: the fused RHT path equals the unfused one (transform, then quantize),
rht_transform equals the reference, and qmatmul's GPU path agrees with the float64 reference."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fp4kit

pytestmark = pytest.mark.gpu


@pytest.fixture
def torch(gpu):
    """PyTorch, with output poisoning on (conftest's gpu fixture)."""
    import torch as t
    return t


def _bf16(torch, x):
    return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).cuda().view(torch.bfloat16)


def _np(t):
    return fp4kit.comparator.to_numpy(t)


@pytest.mark.parametrize("shape", [(16, 2), (128, 96), (1024, 4096), (48, 130)])
@pytest.mark.parametrize("mask", [0xD7E8, 0, 0xFFFF])
def test_rht_transform_matches_reference(torch, shape, mask):
    rng = np.random.default_rng(shape[0] + mask)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))).astype(ml_dtypes.bfloat16)
    x.reshape(-1)[:3] = [np.inf, -np.inf, np.nan]
    got = _np(fp4kit.rht_transform(_bf16(torch, x), sign_mask=mask))
    exp = fp4kit.reference.rht_transform(x, sign_mask=mask)
    assert got.shape == exp.shape
    assert np.array_equal(got.view(np.uint16), exp.view(np.uint16))


def _rht_edge_columns():
    """(16, n) float32 columns (bfloat16 values), each one 16-point transform group: exponent spans
    from 11 to 60 with the largest sums and the finest ulps (where a float32 butterfly would round,
    SPEC's float64 one does not), subnormals, sums beyond the float32 range, zeros of both signs,
    infinities and NaN."""
    big, small = 1.9921875, 1.0078125          # bfloat16 significands 1.1111111b and 1.0000001b
    cols = []
    for span in (11, 12, 13, 14, 20, 40, 60):
        for e in (-110, -3, 0, 50, 100):
            c = np.full(16, big * 2.0**e)           # the largest sums ...
            c[7] = small * 2.0**(e - span)          # ... with the finest ulp (float32: exact to span 12)
            cols.append(c)
            alt = c * np.where(np.arange(16) % 3 == 0, -1.0, 1.0)
            cols.append(alt)
            one = np.zeros(16)                      # two values only: the sum of big + small rounds
            one[[2, 9]] = big * 2.0**e, small * 2.0**(e - span)   # in float32 from span 16 on
            cols.append(one)
    sub = 2.0**-133                                 # the smallest bfloat16 subnormal
    for hi in (sub * 127, 2.0**-126 * big, 2.0**-115 * big, 2.0**-114 * big, 2.0**-113 * big, 2.0**-100):
        c = np.full(16, sub * 3)
        c[0], c[5] = hi, -sub
        cols.append(c)
    for e in (119, 120, 121, 122, 123, 126, 127):   # fields 246 .. 254: float32 overflow of the sums
        cols.append(np.full(16, big * 2.0**e))
        c = np.full(16, big * 2.0**e)
        c[1::2] *= -1
        cols.append(c)
        c = np.zeros(16)
        c[:4] = big * 2.0**e                        # 4 x max: finite only after the 0.25 in float64
        cols.append(c)
    z = np.zeros(16)
    cols += [z, -z, np.where(np.arange(16) % 2, 0.0, -0.0)]
    for special in (np.inf, -np.inf, np.nan):
        c = np.linspace(-3, 3, 16)
        c[4] = special
        cols.append(c)
    m = np.stack(cols, axis=1)
    return m.astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.mark.parametrize("mask", [0, 0xD7E8, 0xFFFF])
@pytest.mark.parametrize("offset", [0, 1])   # 1: a view 2 bytes off (the one-column amax kernel)
def test_rht_edge_groups(torch, mask, offset):
    """Every RHT kernel (rht_transform, the amax passes, the fused quantize tile kernel and the
    grouped statistics pass) gives the reference's bytes on groups where a float32 butterfly would
    round, overflow or meet non-finite values."""
    m = _rht_edge_columns()
    rng = np.random.default_rng(mask + offset)
    x = np.concatenate([m, m[rng.permutation(16)]], axis=0).astype(ml_dtypes.bfloat16)   # 32 rows
    got = _np(fp4kit.rht_transform(_bf16(torch, x), sign_mask=mask))
    exp = fp4kit.reference.rht_transform(x, sign_mask=mask)
    assert np.array_equal(got.view(np.uint16), exp.view(np.uint16))
    # quantize: the finite groups (one inf / NaN would set the amax of all), K even
    xf32 = x.astype(np.float32)
    keep = np.flatnonzero(np.isfinite(xf32).all(axis=0) & (np.abs(xf32) < 2.0**100).all(axis=0))
    xf = np.ascontiguousarray(x[:, keep[:len(keep) // 2 * 2]])
    wide = np.concatenate([xf[:, :offset], xf], axis=1)
    xfd = _bf16(torch, wide)[:, offset:]
    for axis in ("both", "columnwise"):
        q = fp4kit.quantize(xfd, "nvfp4", axis=axis, rht=True, rht_sign_mask=mask)
        ref = fp4kit.reference.quantize(xf, "nvfp4", axis=axis, rht=True, rht_sign_mask=mask)
        rep = fp4kit.compare(q, ref)
        assert rep.ok, str(rep)
    two = np.concatenate([xf, xf[::-1]], axis=0)
    g = fp4kit.group_quantize(_bf16(torch, two), "nvfp4", num_groups=2, axis="both", rht=True, rht_sign_mask=mask)
    gref = fp4kit.reference.group_quantize(two, "nvfp4", num_groups=2, axis="both", rht=True, rht_sign_mask=mask)
    for i in range(2):
        rep = fp4kit.compare(g[i], gref[i])
        assert rep.ok, str(rep)


@pytest.mark.parametrize("layout", ["compact", "swizzled"])
@pytest.mark.parametrize("tile_2d", [False, True])
def test_fused_rht_equals_unfused(torch, layout, tile_2d):
    x = np.random.default_rng(1).standard_normal((256, 160)).astype(ml_dtypes.bfloat16)
    xd = _bf16(torch, x)
    fused = fp4kit.quantize(xd, "nvfp4", axis="both", rht=True, scale_layout=layout, tile_2d=tile_2d)
    u = fp4kit.rht_transform(xd)
    unfused = fp4kit.quantize(u, "nvfp4", axis="rowwise", scale_layout=layout, tile_2d=tile_2d)
    rep = fp4kit.compare(unfused.rowwise, fused.columnwise)
    assert rep.ok, str(rep)
    ref = fp4kit.reference.quantize(x, "nvfp4", axis="both", rht=True, scale_layout=layout, tile_2d=tile_2d)
    assert fp4kit.compare(fused, ref).ok


@pytest.mark.parametrize("fmt,row_scaled", [(f, False) for f in fp4kit.FORMATS] + [("nvfp4", True)])
def test_qmatmul_gpu_matches_reference(torch, fmt, row_scaled):
    """Every format, and row-scaled NVFP4 (row_scaled is an NVFP4 option: for the MX formats it is
    rejected before any launch: tests/reference/test_errors.py row_scaled_on_mx)."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((96, 256)).astype(np.float32)
    b = rng.standard_normal((40, 256)).astype(np.float32)
    qa = fp4kit.quantize(torch.from_numpy(a).cuda(), fmt, row_scaled=row_scaled)
    qb = fp4kit.quantize(torch.from_numpy(b).cuda(), fmt, scale_layout="swizzled", row_scaled=row_scaled)
    got = _np(fp4kit.qmatmul(qa, qb))
    exp = fp4kit.reference.qmatmul(fp4kit.reference.quantize(a, fmt, row_scaled=row_scaled),
                                   fp4kit.reference.quantize(b, fmt, scale_layout="swizzled", row_scaled=row_scaled))
    assert got.dtype == np.float32 and got.shape == (96, 40)
    # float64 accumulation in another order: equal within a float32 ulp
    np.testing.assert_allclose(got, exp, rtol=2**-23, atol=1e-12 * float(np.abs(exp).max()))

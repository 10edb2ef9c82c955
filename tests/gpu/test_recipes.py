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


@pytest.mark.parametrize("fmt", list(fp4kit.FORMATS))
@pytest.mark.parametrize("row_scaled", [False, True])
def test_qmatmul_gpu_matches_reference(torch, fmt, row_scaled):
    if row_scaled and fmt != "nvfp4":
        pytest.skip("row_scaled is an NVFP4 option")
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

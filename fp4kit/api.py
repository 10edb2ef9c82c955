"""Public ops: validate -> pick the backend (NumPy -> reference, device array -> CUDA) -> run."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import reference as _ref
from ._grouped_views import GroupedArray
from ._types import Axis, Dims, FormatLike, OperandName, OutDType, Rounding, ScaleLayout, ScaleRule
from .tensor import GroupedQuantizedTensor, QuantizedTensor

__all__ = ["quantize", "dequantize", "swizzle_scales", "unswizzle_scales", "group_quantize", "group_dequantize",
           "qmatmul", "rht_transform"]


def _is_host(x) -> bool:
    return isinstance(x, np.ndarray)


def _is_device(x) -> bool:
    if isinstance(x, np.ndarray):
        return False
    if type(x).__module__.startswith("torch"):      # a torch CPU tensor also has __dlpack__
        return True                                 # (the device API rejects it with a clear message)
    return hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__")


def _bad_input(x, name="x"):
    return TypeError(f"{name}: expected a NumPy array (reference on the CPU) or a CUDA device array "
                     f"(CuPy, PyTorch, JAX, DLPack or __cuda_array_interface__), got {type(x).__name__}"
                     f"{_ref.api.scalar_hint(x)}")


_device_api = None


def _device(x=None, name="x"):
    """The CUDA backend (fp4kit._device_api), loaded on first use. Before it loads, a host array of
    a device library (a CPU torch tensor, a JAX CPU array) `x` gets its TypeError, and a missing
    CuPy a BackendUnavailableError saying how to install it."""
    global _device_api
    mod = _device_api
    if mod is None:
        from . import _interop
        if x is not None and not _interop.is_device_array(x):
            raise _interop.not_a_device_array(x, name)
        _interop.require_cupy()
        from . import _device_api as mod
        _device_api = mod
    return mod


def quantize(x: Any, fmt: FormatLike, axis: Axis = "rowwise", scale_layout: ScaleLayout = "compact",
             scale_rule: ScaleRule = "rceil", amax: Any = None, tile_2d: bool = False, row_scaled: bool = False,
             rht: bool = False, rht_sign_mask: int = 0xD7E8, rounding: Rounding = "nearest",
             seed: int = 0) -> QuantizedTensor:
    """Quantize `x` to a block-scaled format.

    Args:
        x: array with ndim >= 1 (float32, bfloat16 or float16), flattened to (M, K) with
            M = prod(shape[:-1]). NumPy arrays run the reference; device arrays run the CUDA kernels
            and results come back in the caller's library on its current stream.
        fmt: one of ``fp4kit.FORMATS`` (mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4_e2m1, nvfp4).
        axis: "rowwise" (blocks along K, codes (M, K)), "columnwise" (rowwise operand of x^T,
            codes (K, M)) or "both".
        scale_layout: "compact" (rows, ceil(cols/block)) or "swizzled" (cuBLASLt 128x4 layout).
        scale_rule: "rceil" (default) or "floor" (OCP MX); MX formats only.
        amax: NVFP4 only: float32 array (1,) — or (M,) with row_scaled — used instead of computing it.
            A host (NumPy) amax must be >= 0 and not NaN (else ValueError); a device amax is not
            read by the host (that would synchronise): the kernels use its absolute value, and a
            NaN follows SPEC section 4 (S_enc = FLT_MAX).
        tile_2d, row_scaled, rht, rht_sign_mask: NVFP4 recipes (SPEC section 4).
        rounding: "nearest" or "stochastic" (FP4 formats) with a 64-bit `seed`.

    Non-finite inputs follow SPEC sections 2-4: amaxes ignore NaN, so a NaN changes its own code
    only (FP4 / FP6 have no NaN code: NaN becomes +max); an inf makes its block's amax inf, so in an
    MX format the other elements of that block decode to zero, and in NVFP4 (whose global amax is
    then inf) every element of the tensor decodes to a non-finite value (pass ``amax=`` or clean the
    input first).

    Returns:
        QuantizedTensor with ``.rowwise`` / ``.columnwise`` Operands (``data``, ``scales``, ``amax``).

    Example:
        >>> import numpy as np, fp4kit
        >>> q = fp4kit.quantize(np.ones((4, 32), np.float32), "mxfp8_e4m3")
        >>> q.rowwise.data.shape, q.rowwise.scales.shape
        ((4, 32), (4, 1))
    """
    if _is_device(x):                   # positional: no keyword dict on the device path's ~20 us
        return _device(x).quantize(x, fmt, axis, scale_layout, scale_rule, amax, tile_2d, row_scaled, rht,
                                  rht_sign_mask, rounding, seed)
    if _is_host(x):
        return _ref.quantize(x, fmt, axis=axis, scale_layout=scale_layout, scale_rule=scale_rule, amax=amax,
                             tile_2d=tile_2d, row_scaled=row_scaled, rht=rht, rht_sign_mask=rht_sign_mask,
                             rounding=rounding, seed=seed)
    raise _bad_input(x)


def dequantize(q: QuantizedTensor, dtype: OutDType = "float32", operand: OperandName = "rowwise") -> Any:
    """Decode one operand of `q` to float32 / bfloat16 / float16.

    Args:
        q: a QuantizedTensor (NumPy arrays run the reference, device arrays the CUDA kernels).
        dtype: "float32", "bfloat16" or "float16" (the last conversion rounds to nearest even, so
            values past float16's 65504, e.g. 65504 quantized to MXFP8 E4M3 as 65536, become inf).
        operand: "rowwise" or "columnwise" (must be present in `q`).

    Returns an array in the library of `q`'s arrays: the input's shape for the rowwise operand,
    (K, M) for the columnwise one.

    Example:
        >>> import numpy as np, fp4kit
        >>> q = fp4kit.quantize(np.full((2, 16), 3.0, np.float32), "nvfp4")
        >>> fp4kit.dequantize(q)[0, :3]
        array([3., 3., 3.], dtype=float32)
    """
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"q: expected a QuantizedTensor, got {type(q).__name__}")
    # the operand asked for decides where it runs (else the one present: its error says what is missing)
    which = operand if operand in ("rowwise", "columnwise") and getattr(q, operand) is not None else \
        ("rowwise" if q.rowwise is not None else "columnwise")
    op = getattr(q, which)
    if _is_host(op.data):  # one operand at least (QuantizedTensor.__post_init__)
        return _ref.dequantize(q, dtype=dtype, operand=operand)
    return _device(op.data, f"q.{which}.data").dequantize(q, dtype=dtype, operand=operand)  # type: ignore[union-attr]


def swizzle_scales(compact: Any) -> Any:
    """(R, C) uint8 compact scales -> (roundup(R,128), roundup(C,4)) in the cuBLASLt 128x4 layout.

    Args:
        compact: uint8 (R, C) scale matrix (NumPy or device array); padding bytes come out 0.

    Example:
        >>> import numpy as np, fp4kit
        >>> fp4kit.swizzle_scales(np.ones((3, 5), np.uint8)).shape
        (128, 8)
    """
    if _is_host(compact):
        return _ref.swizzle_scales(compact)
    if _is_device(compact):
        return _device(compact, "compact").swizzle_scales(compact)
    raise _bad_input(compact, "compact")


def unswizzle_scales(swizzled: Any, shape: tuple[int, int]) -> Any:
    """Swizzled scales -> the (R, C) compact matrix; `shape` = (R, C). Padding bytes are ignored.

    Args:
        swizzled: uint8 (roundup(R,128), roundup(C,4)) array (NumPy or device array).
        shape: (R, C), the compact shape.

    Example:
        >>> import numpy as np, fp4kit
        >>> c = np.arange(15, dtype=np.uint8).reshape(3, 5)
        >>> bool((fp4kit.unswizzle_scales(fp4kit.swizzle_scales(c), (3, 5)) == c).all())
        True
    """
    if _is_host(swizzled):
        return _ref.unswizzle_scales(swizzled, shape)
    if _is_device(swizzled):
        return _device(swizzled, "swizzled").unswizzle_scales(swizzled, shape)
    raise _bad_input(swizzled, "swizzled")


def group_quantize(x: Any, fmt: FormatLike, num_groups: int | None = None, first_dims: Dims = None,
                   last_dims: Dims = None, **options: Any) -> GroupedQuantizedTensor:
    """Quantize G member tensors stored back to back (SPEC section 7).

    Args:
        x: the members' elements back to back (float32, bfloat16 or float16; NumPy runs the
            reference, a device array the CUDA kernels), shaped by the kind below.
        fmt: one of ``fp4kit.FORMATS``.
        num_groups, first_dims, last_dims: the kind. ``same`` — x (G*M, K), num_groups=G;
            ``varying_first`` — x (sum M_i, K), first_dims; ``varying_last`` — x 1-D,
            first_dims=M (or [M]*G), last_dims; ``varying_both`` — x 1-D, both. Dims are host
            sequences of ints, or device int64 arrays (then give ``max_elements``). Device dims
            are read by the kernels, never by the host (change them on the device and replay a
            captured graph). For PyTorch CUDA tensors and CuPy arrays on the current device (a
            strided view is copied contiguous first), host dims travel as kernel parameters: no
            copy, values that change every call reuse one plan, and a CUDA graph captured with
            host dims replays those dims.
        options: quantize's (axis, scale_layout, scale_rule, amax — float32 (G,), or (sum M_i,)
            row-scaled, checked as quantize's — ...) plus ``dbias=True`` (kinds same /
            varying_first: float32 (G, K) column sums) and ``max_elements``, the output bound that
            device-array dims need on the GPU (at most x.size; with host dims, checked against the
            members').

    Returns:
        GroupedQuantizedTensor: ``len(g)`` members, ``g[i]`` member i as a QuantizedTensor of views.

    Example:
        >>> import numpy as np, fp4kit
        >>> g = fp4kit.group_quantize(np.ones((96, 64), np.float32), "mxfp8_e4m3", first_dims=[32, 0, 64])
        >>> len(g), g[2].rowwise.data.shape
        (3, (64, 64))
    """
    if _is_host(x):
        return _ref.group_quantize(x, fmt, num_groups=num_groups, first_dims=first_dims, last_dims=last_dims, **options)
    if _is_device(x):
        return _device(x).group_quantize(x, fmt, num_groups=num_groups, first_dims=first_dims,
                                        last_dims=last_dims, **options)
    raise _bad_input(x)


def group_dequantize(g: GroupedQuantizedTensor, dtype: OutDType = "float32",
                     operand: OperandName = "rowwise") -> GroupedArray:
    """Dequantize every member of a grouped result; returns a GroupedArray (flat buffer + metadata).

    Args:
        g: a GroupedQuantizedTensor from ``group_quantize`` (NumPy arrays run the reference, device
            arrays the CUDA kernels).
        dtype: "float32", "bfloat16" or "float16".
        operand: "rowwise" or "columnwise" (must be present in `g`).

    Returns a GroupedArray in the library of `g`'s arrays: ``y[i]`` is member i, (M_i, K_i) for the
    rowwise operand and (K_i, M_i) for the columnwise one; ``y.data`` is the flat buffer. With
    device dims nothing is checked on the host: if `g`'s dims were flagged (``g.check()`` raises),
    no kernel writes ``y.data``, and ``y[i]`` raises as ``g.check()`` does. A GPU group whose
    ``kind`` was changed by hand (``dataclasses.replace``) to one whose members share their columns
    in `operand`, although its device dims differ, gives NaN everywhere for bfloat16 / float16
    output (the kernel for shared columns compares them first), never values from the wrong place.

    Example:
        >>> import numpy as np, fp4kit
        >>> g = fp4kit.group_quantize(np.ones((64, 32), np.float32), "nvfp4", num_groups=2)
        >>> fp4kit.group_dequantize(g)[1].shape
        (32, 32)
    """
    if not isinstance(g, GroupedQuantizedTensor):
        raise TypeError(f"g: expected a GroupedQuantizedTensor, got {type(g).__name__}")
    buf = g.rowwise_data if g.rowwise_data is not None else g.columnwise_data
    if _is_host(buf):
        return _ref.group_dequantize(g, dtype=dtype, operand=operand)
    name = "g.rowwise_data" if g.rowwise_data is not None else "g.columnwise_data"
    return _device(buf, name).group_dequantize(g, dtype=dtype, operand=operand)


def qmatmul(a: QuantizedTensor, b: QuantizedTensor, a_operand: OperandName = "rowwise",
            b_operand: OperandName = "rowwise") -> Any:
    """What a block-scaled GEMM gives for two quantized operands: float32 (M, N) = A_hat @ B_hat^T.

    Each element is decode(code) x decode(block scale), exactly, in float64; the products are
    accumulated in float64 along K; NVFP4 then applies both operands' global decode scales
    alpha = fp32(amax * fp32(1/2688)) (per row of a and per row of b, i.e. per output column,
    when row-scaled); the float64 result is rounded once to float32.

    Args:
        a: QuantizedTensor whose `a_operand` is (M, K), blocked along K (an input x (..., K)
            quantized rowwise; M = prod of its leading dims).
        b: QuantizedTensor whose `b_operand` is (N, K), blocked along K: a weight W (N, K)
            quantized rowwise, or the columnwise operand of a (K, N) tensor.
        a_operand, b_operand: "rowwise" (default) or "columnwise"; the operand must be present.

    Both operands are NVFP4, or both MX (the MX element types may differ, e.g. MXFP8 x MXFP4, as
    block-scaled tensor cores allow); their K must match, in one basis (a columnwise operand
    quantized with rht=True pairs only with another of the same rht_sign_mask); both live on the host (NumPy: the
    reference runs) or on one GPU (float64 GEMM in another summation order: equal to the reference
    within float64 rounding). Anything else is a TypeError / ValueError before any work.

    Example:
        >>> import numpy as np, fp4kit
        >>> x = np.ones((2, 32), np.float32); w = np.full((3, 32), 0.5, np.float32)
        >>> fp4kit.qmatmul(fp4kit.quantize(x, "mxfp8_e4m3"), fp4kit.quantize(w, "mxfp8_e4m3"))
        array([[16., 16., 16.],
               [16., 16., 16.]], dtype=float32)
    """
    from ._validate import check_qmatmul
    oa, _ = check_qmatmul(a, b, a_operand, b_operand)
    if _is_host(oa.data):
        return _ref.qmatmul(a, b, a_operand=a_operand, b_operand=b_operand)
    return _device(oa.data, f"a.{a_operand}.data").qmatmul(a, b, a_operand=a_operand, b_operand=b_operand)


def rht_transform(x: Any, sign_mask: int = 0xD7E8) -> Any:
    """The 16-point random Hadamard transform of NVFP4's columnwise operand, on its own.

    Args:
        x: bfloat16 array (..., K) flattened to (M, K), M a multiple of 16.
        sign_mask: 16-bit mask of the signs (bit k set: s_k = -1); 0 disables them.

    Returns:
        bfloat16 (K, M): u = the transform of x^T along its rows (groups of 16 rows of x), the exact
        input that ``quantize(x, "nvfp4", rht=True)`` quantizes for its columnwise operand, so
        ``quantize(rht_transform(x), "nvfp4")`` (rowwise) gives the same bytes (the unfused path).

    Example:
        >>> import numpy as np, ml_dtypes, fp4kit
        >>> x = np.ones((16, 2), ml_dtypes.bfloat16)
        >>> fp4kit.rht_transform(x, sign_mask=0)[0, :3].astype(np.float32)
        array([4., 0., 0.], dtype=float32)
    """
    if _is_host(x):
        return _ref.rht_transform(x, sign_mask=sign_mask)
    if _is_device(x):
        return _device(x).rht_transform(x, sign_mask=sign_mask)
    raise _bad_input(x)

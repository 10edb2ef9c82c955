"""Grouped (MoE) quantize / dequantize reference (SPEC.md section 7).

Contract
--------
Member i is the (M_i, K_i) matrix at element offset ``offsets[i] = sum_{j<i} M_j K_j`` of the
input buffer. Its codes sit at the same element offset of the code buffer (byte offset / 2 for
FP4); its columnwise codes are its own (K_i, M_i) transpose. Each member's scale matrix (compact
or swizzled, section 6) is laid out on its own and the matrices are concatenated with no gaps.
NVFP4 keeps one amax per member (or per row of the member when row-scaled), computed per member
unless the caller supplies them. The result equals quantizing every member on its own.
``dbias`` (kinds same / varying_first) is each member's column sums in float32 (G, K).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._types import Dims, FormatLike, OperandName, OutDType
from .._validate import (check_amax_values, check_choice, check_dtype, check_max_elements, group_dims,
                         group_member_checks, group_options)
from ..tensor import GroupedQuantizedTensor
from .._grouped_views import GroupedArray, grouped_layout
from .api import _np_input, dequantize_operand, dtype_name, quantize

__all__ = ["group_quantize", "group_dequantize"]


def group_quantize(x: np.ndarray, fmt: FormatLike, num_groups: int | None = None, first_dims: Dims = None,
                   last_dims: Dims = None, amax: np.ndarray | None = None, dbias: bool = False,
                   max_elements: int | None = None, **options: Any) -> GroupedQuantizedTensor:
    """Reference grouped quantize; ``options`` are those of ``quantize`` (axis, scale_layout, ...).

    ``max_elements`` is the GPU's output bound for device-side dims; it is accepted here with the
    same checks (an integer, at most x.size, at least the members' elements)."""
    x, dn = _np_input(x)
    opts, dbias = group_options(dn, fmt, options, dbias)
    f = opts.fmt
    kind, first, last = group_dims(x.shape, num_groups, first_dims, last_dims)
    G = len(first)
    group_member_checks(f, opts, kind, first, last, x.shape, first_dims)
    if max_elements is not None:
        check_max_elements(max_elements, x.size, sum(m * k for m, k in zip(first, last)))
    if dbias and kind not in ("same", "varying_first"):
        raise ValueError(f"dbias: only kinds 'same' and 'varying_first' have per-member column sums, got kind {kind!r}")
    lay = grouped_layout(f, opts, first, last)
    flat = x.reshape(-1)
    amaxes = _split_amax(amax, f, opts, first, G)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("rd", "rs", "ra", "cd", "cs", "ca")}
    bias = np.zeros((G, last[0] if G else 0), np.float32) if dbias else None
    for i, (m, k) in enumerate(zip(first, last)):
        xi = flat[lay.offsets[i]:lay.offsets[i + 1]].reshape(m, k)
        q = quantize(xi, f.name, amax=amaxes[i], **options)
        if q.rowwise is not None:
            parts["rd"].append(q.rowwise.data.reshape(-1)); parts["rs"].append(q.rowwise.scales.reshape(-1))
            if q.rowwise.amax is not None: parts["ra"].append(q.rowwise.amax)
        if q.columnwise is not None:
            parts["cd"].append(q.columnwise.data.reshape(-1)); parts["cs"].append(q.columnwise.scales.reshape(-1))
            if q.columnwise.amax is not None: parts["ca"].append(q.columnwise.amax)
        if dbias:
            bias[i] = xi.astype(np.float64).sum(axis=0).astype(np.float32)  # type: ignore[index]  # not None: dbias
    cat = lambda k, dt: (np.concatenate(parts[k]) if parts[k] else np.zeros(0, dt))  # noqa: E731
    row, col = opts.want_rowwise, opts.want_columnwise
    return GroupedQuantizedTensor(
        format=f.name, kind=kind, first_dims=first, last_dims=last, offsets=lay.offsets, options=opts,
        rowwise_data=cat("rd", np.uint8) if row else None, rowwise_scales=cat("rs", np.uint8) if row else None,
        rowwise_amax=cat("ra", np.float32) if row and f.is_nvfp4 else None,
        columnwise_data=cat("cd", np.uint8) if col else None, columnwise_scales=cat("cs", np.uint8) if col else None,
        columnwise_amax=cat("ca", np.float32) if col and f.is_nvfp4 else None,
        scale_offsets_rowwise=lay.scale_offsets_rowwise if row else (),
        scale_offsets_columnwise=lay.scale_offsets_columnwise if col else (),
        dbias=bias, input_dtype=dn)


def _split_amax(amax, f, opts, first, G):
    if amax is None:
        return [None] * G
    if not f.is_nvfp4:
        raise ValueError(f"amax: only NVFP4 takes a global amax; format {f.name!r} has none")
    if not isinstance(amax, np.ndarray):
        raise TypeError(f"amax: expected a float32 NumPy array of shape (G,) or (sum M_i,), got {type(amax).__name__}")
    if dtype_name(amax.dtype) != "float32":
        raise TypeError(f"amax: expected a float32 array, got dtype {amax.dtype}")
    want = sum(first) if opts.row_scaled else G
    if amax.shape != (want,):
        what = "(sum M_i,) one per row" if opts.row_scaled else "(G,) one per member"
        raise ValueError(f"amax: expected shape {what} = ({want},), got {amax.shape}")
    amax = check_amax_values(amax, np.repeat(np.arange(G), first) if opts.row_scaled else np.arange(G))
    if opts.row_scaled:
        cuts = np.cumsum((0,) + tuple(first))
        return [amax[cuts[i]:cuts[i + 1]] for i in range(G)]
    return [amax[i:i + 1] for i in range(G)]


def group_dequantize(g: GroupedQuantizedTensor, dtype: OutDType = "float32",
                     operand: OperandName = "rowwise") -> GroupedArray:
    """Dequantize every member; returns the flat buffer (members at ``g.offsets``) with g's metadata."""
    if not isinstance(g, GroupedQuantizedTensor):
        raise TypeError(f"g: expected a GroupedQuantizedTensor, got {type(g).__name__}")
    dtype = check_dtype("dtype", dtype)
    check_choice("operand", operand, ("rowwise", "columnwise"))
    outs = [dequantize_operand(member.operand(operand), dtype).reshape(-1) for member in g]
    from .numerics import _DTYPES
    data = np.concatenate(outs) if outs else np.zeros(0, _DTYPES[dtype])
    return GroupedArray(data=data, kind=g.kind, first_dims=g.first_dims, last_dims=g.last_dims,
                        offsets=g.offsets, operand=operand)

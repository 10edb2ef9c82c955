"""Every argument check of the public ops, shared by the reference and the CUDA backend.

Checks run once per call, before any launch, and raise TypeError (wrong kind of thing) or
ValueError (right kind, wrong value) naming the argument, what was expected and what was given.
"""
from __future__ import annotations

import collections.abc
import functools
import numbers
import operator

import numpy as np

from .formats import AXES, DTYPES, ROUNDINGS, SCALE_LAYOUTS, SCALE_RULES, get_format
from .tensor import QuantizeOptions

__all__ = ["quantize_options", "check_choice", "check_bool", "check_int", "check_dtype", "flat_2d", "check_amax_shape",
           "check_amax_values", "native_order"]


def check_choice(name: str, value, choices) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected one of {list(choices)}, got {type(value).__name__} {value!r}")
    if value not in choices:
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):   # NumPy booleans too (np.bool_ is numpy.bool in NumPy 2)
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_int(name: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an integer in [{lo}, {hi}], got {type(value).__name__} {value!r}")
    v = operator.index(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name}: expected an integer in [{lo}, {hi}], got {v}")
    return v


def check_dtype(name: str, dtype) -> str:
    """An output dtype as its name in DTYPES. A name ("float16"), a NumPy dtype (np.dtype("float16"),
    byte order aside) and a type (np.float16, ml_dtypes.bfloat16) are the same thing; anything that
    is no dtype at all is a TypeError, a dtype outside DTYPES a ValueError."""
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return dtype
        try:
            got = np.dtype(dtype).name
        except Exception:              # not a dtype string at all: report it as given
            got = dtype
    else:
        if dtype is None or isinstance(dtype, (bool, numbers.Number)):
            raise TypeError(f"{name}: expected one of {list(DTYPES)} (a name, NumPy dtype or type), "
                            f"got {type(dtype).__name__} {dtype!r}")
        try:
            got = np.dtype(dtype).name
        except (TypeError, ValueError):
            raise TypeError(f"{name}: expected one of {list(DTYPES)} (a name, NumPy dtype or type), "
                            f"got {type(dtype).__name__} {dtype!r}") from None
    if got not in DTYPES:
        raise ValueError(f"{name}: expected one of {list(DTYPES)}, got {got!r}")
    return got


def native_order(a: np.ndarray) -> np.ndarray:
    """NumPy array `a` in the machine's byte order (a copy only when it is not, e.g. '>f4')."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def flat_2d(shape) -> tuple[int, int]:
    """SPEC section 5: any ndim >= 1 flattened to (M, K) with M = prod(shape[:-1])."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0:
        raise ValueError("x: expected an array with ndim >= 1, got a 0-d array (a scalar)")
    m = 1
    for s in shape[:-1]:
        m *= s
    return m, shape[-1]


def check_amax_shape(amax_shape, amax_dtype: str, fmt, row_scaled: bool, M: int) -> None:
    if not fmt.is_nvfp4:
        raise ValueError(f"amax: only NVFP4 takes a global amax; format {fmt.name!r} has none (pass amax=None)")
    if amax_dtype != "float32":
        raise TypeError(f"amax: expected a float32 array, got dtype {amax_dtype}")
    want = (M,) if row_scaled else (1,)
    if tuple(amax_shape) != want:
        what = f"({M},) (one amax per row, row_scaled=True)" if row_scaled else "(1,)"
        raise ValueError(f"amax: expected shape {what}, got {tuple(amax_shape)}")


def check_amax_values(amax: np.ndarray, members=None) -> np.ndarray:
    """The values of a host float32 amax (shape and dtype already checked): no NaN, none negative;
    the first bad entry is named, with its member when `members` (one member index per entry) is
    given. Returns a C-contiguous native float32 copy with -0 as +0: an amax is max |x| (SPEC
    sections 4 and 7), so a -0 would only flip the sign of zeros in the dequantized values."""
    a = np.array(amax, dtype=np.float32, order="C").reshape(-1)
    bad = np.flatnonzero(~(a >= 0))
    if bad.size:
        i = int(bad[0])
        whose = f" (member {int(members[i])})" if members is not None else ""
        raise ValueError(f"amax[{i}]{whose}: expected a non-negative value, got {a[i]}")
    a[a == 0] = 0
    return a.reshape(np.shape(amax))


def quantize_options(shape, dtype: str, fmt, **kw) -> QuantizeOptions:
    """Validate one quantize call; `dtype` is the input's dtype name, `amax_*` describe `amax=`.

    Results are memoised per argument tuple (a small call pays ~1 us instead of ~5 us);
    unhashable arguments fall through to the checks, which then name them.
    """
    try:
        # names, values, then the values' types: True == 1 must not let tile_2d=1 skip its
        # TypeError. Flat and unsorted (~0.6 us instead of ~1.8 us sorted pairs): the length fixes
        # where each part starts, and the same options in another keyword order only miss the cache.
        values = kw.values()
        key = (*kw, *values, *map(type, values))
        return _quantize_options_cached(tuple(shape), dtype, (type(fmt), fmt), key)
    except TypeError as e:
        if "unhashable" not in str(e):
            raise
        return _quantize_options(shape, dtype, fmt, **kw)


@functools.lru_cache(maxsize=4096)
def _quantize_options_cached(shape, dtype, fmt_key, kw_key):
    n = len(kw_key) // 3
    return _quantize_options(shape, dtype, fmt_key[1], **dict(zip(kw_key[:n], kw_key[n:2 * n])))


def check_combination(f, axis, scale_rule, tile_2d, row_scaled, rht, rounding) -> None:
    """The options SPEC section 4 forbids together (valid values each, whatever the input)."""
    if not f.is_nvfp4:
        for name, on in (("tile_2d", tile_2d), ("row_scaled", row_scaled), ("rht", rht)):
            if on:
                raise ValueError(f"{name}: is an NVFP4 option; format {f.name!r} does not take it")
    elif scale_rule != "rceil":
        raise ValueError(f"scale_rule: NVFP4 scales are E4M3 and have no rule choice; expected 'rceil', got {scale_rule!r}")
    if rounding == "stochastic" and not f.packed:
        raise ValueError(f"rounding: 'stochastic' is for FP4 formats (nvfp4, mxfp4_e2m1), got format {f.name!r}")
    if row_scaled and (tile_2d or rht):
        other = "tile_2d" if tile_2d else "rht"
        raise ValueError(f"row_scaled: cannot be combined with {other}=True (SPEC section 4)")
    if rht and axis == "rowwise":
        raise ValueError("rht: the Hadamard transform applies to the columnwise operand; "
                         "use axis='columnwise' or 'both', got axis='rowwise'")


def check_options_values(o: QuantizeOptions) -> None:
    """QuantizeOptions built by hand (or replaced): every field a valid value, the combination one
    SPEC allows; the format and booleans / integers normalised (a Format object to its name)."""
    f = get_format(o.format, "format")
    check_choice("axis", o.axis, AXES)
    check_choice("scale_layout", o.scale_layout, SCALE_LAYOUTS)
    check_choice("scale_rule", o.scale_rule, SCALE_RULES)
    check_choice("rounding", o.rounding, ROUNDINGS)
    norm = {"format": f.name, "tile_2d": check_bool("tile_2d", o.tile_2d),
            "row_scaled": check_bool("row_scaled", o.row_scaled), "rht": check_bool("rht", o.rht),
            "rht_sign_mask": check_int("rht_sign_mask", o.rht_sign_mask, 0, 0xFFFF),
            "seed": check_int("seed", o.seed, 0, 2**64 - 1)}
    check_combination(f, o.axis, o.scale_rule, norm["tile_2d"], norm["row_scaled"], norm["rht"], o.rounding)
    for k, v in norm.items():
        if type(getattr(o, k)) is not type(v) or getattr(o, k) != v:
            object.__setattr__(o, k, v)


def _quantize_options(shape, dtype: str, fmt, axis="rowwise", scale_layout="compact", scale_rule="rceil",
                     tile_2d=False, row_scaled=False, rht=False, rht_sign_mask=0xD7E8,
                     rounding="nearest", seed=0, amax_shape=None, amax_dtype=None) -> QuantizeOptions:
    f = get_format(fmt)
    if dtype not in DTYPES:
        raise TypeError(f"x: expected dtype float32, bfloat16 or float16, got {dtype}")
    M, K = flat_2d(shape)
    check_choice("axis", axis, AXES)
    check_choice("scale_layout", scale_layout, SCALE_LAYOUTS)
    check_choice("scale_rule", scale_rule, SCALE_RULES)
    check_choice("rounding", rounding, ROUNDINGS)
    tile_2d = check_bool("tile_2d", tile_2d)
    row_scaled = check_bool("row_scaled", row_scaled)
    rht = check_bool("rht", rht)
    rht_sign_mask = check_int("rht_sign_mask", rht_sign_mask, 0, 0xFFFF)
    seed = check_int("seed", seed, 0, 2**64 - 1)
    check_combination(f, axis, scale_rule, tile_2d, row_scaled, rht, rounding)
    rowwise = axis in ("rowwise", "both")
    colwise = axis in ("columnwise", "both")
    if rht:
        if dtype != "bfloat16":
            raise TypeError(f"x: rht=True needs bfloat16 input, got dtype {dtype}")
        if M % 16:
            raise ValueError(f"x: rht=True needs M (rows of the flattened input) a multiple of 16, got shape "
                             f"{tuple(shape)} (M={M})")
    if f.packed:
        if rowwise and K % 2:
            raise ValueError(f"x: {f.name} packs two codes per byte along K, so K must be even, got shape {tuple(shape)} (K={K})")
        if colwise and M % 2:
            raise ValueError(f"x: {f.name} columnwise packs two codes per byte along M, so M must be even, got shape {tuple(shape)} (M={M})")
    if amax_shape is not None:
        check_amax_shape(amax_shape, amax_dtype, f, row_scaled, M)
    return QuantizeOptions(format=f.name, axis=axis, scale_layout=scale_layout, scale_rule=scale_rule,
                           tile_2d=tile_2d, row_scaled=row_scaled, rht=rht, rht_sign_mask=rht_sign_mask,
                           rounding=rounding, seed=seed)


# A member's M or K on the host: far past any real tensor, and below the ~2^61 where NumPy's
# reshape of an empty (M, 0) member fails with an error that names nothing
DIM_MAX = 2**48


def _dims_list(name: str, dims) -> list[int] | int:
    if isinstance(dims, bool):
        raise TypeError(f"{name}: expected a sequence of non-negative integers, got bool")
    if isinstance(dims, numbers.Integral):
        v = operator.index(dims)
        if v < 0:
            raise ValueError(f"{name}: expected non-negative sizes, got {v}")
        if v > DIM_MAX:
            raise ValueError(f"{name}: expected a size of at most 2**48, got {v}")
        return v
    if isinstance(dims, (str, bytes)):    # iterable, but its items are characters, not sizes
        raise TypeError(f"{name}: expected a sequence of integers, got {type(dims).__name__} {dims!r}")
    if isinstance(dims, (collections.abc.Set, collections.abc.Mapping)):   # no order (a set drops repeats)
        raise TypeError(f"{name}: expected a sequence of integers in member order, got {type(dims).__name__}")
    try:
        seq = [d for d in dims]
    except TypeError:
        raise TypeError(f"{name}: expected a sequence of integers, got {type(dims).__name__}") from None
    out = []
    for k, d in enumerate(seq):
        if isinstance(d, (bool, np.bool_)) or str(getattr(d, "dtype", "")) in ("bool", "torch.bool"):
            raise TypeError(f"{name}[{k}]: expected an integer, got {type(d).__name__} {d!r}")
        try:            # ints, NumPy integers, and the 0-d integer items of a CPU torch / JAX array
            d = operator.index(d)
        except TypeError:
            raise TypeError(f"{name}[{k}]: expected an integer, got {type(d).__name__} {d!r}") from None
        if d < 0:
            raise ValueError(f"{name}[{k}]: expected a non-negative size, got {d}")
        if d > DIM_MAX:
            raise ValueError(f"{name}[{k}]: expected a size of at most 2**48, got {d}")
        out.append(d)
    if not out:
        raise ValueError(f"{name}: expected at least one member (G >= 1), got an empty sequence")
    return out


def group_dims(shape, num_groups=None, first_dims=None, last_dims=None):
    """Host-side group dims -> (kind, first_dims tuple, last_dims tuple); SPEC section 7."""
    shape = tuple(int(s) for s in shape)
    if num_groups is not None:
        if first_dims is not None or last_dims is not None:
            raise ValueError("num_groups: give either num_groups (kind 'same') or first_dims/last_dims, not both")
        g = check_int("num_groups", num_groups, 1, 2**31 - 1)
        if len(shape) != 2:
            raise ValueError(f"x: kind 'same' expects a 2-D (G*M, K) array, got shape {shape}")
        if shape[0] % g:
            raise ValueError(f"x: kind 'same' needs rows divisible by num_groups={g}, got {shape[0]} rows")
        return "same", (shape[0] // g,) * g, (shape[1],) * g
    if first_dims is None and last_dims is None:
        raise ValueError("group dims: give num_groups, first_dims, or first_dims and last_dims")
    if last_dims is None:
        fd = _dims_list("first_dims", first_dims)
        if isinstance(fd, int):
            raise TypeError("first_dims: expected a sequence of member row counts for kind 'varying_first', got an int")
        if len(shape) != 2:
            raise ValueError(f"x: kind 'varying_first' expects a 2-D (sum M_i, K) array, got shape {shape}")
        if sum(fd) != shape[0]:
            raise ValueError(f"first_dims: sum(first_dims)={sum(fd)} does not match x.shape[0]={shape[0]}")
        return "varying_first", tuple(fd), (shape[1],) * len(fd)
    ld = _dims_list("last_dims", last_dims)
    if isinstance(ld, int):
        raise TypeError("last_dims: expected a sequence of member column counts, got an int")
    if first_dims is None:
        raise ValueError("first_dims: kinds 'varying_last'/'varying_both' need first_dims (a sequence, or one int M)")
    fd = _dims_list("first_dims", first_dims)
    if isinstance(fd, int):
        fd = [fd] * len(ld)
    if len(fd) != len(ld):
        raise ValueError(f"first_dims/last_dims: expected the same number of members, got {len(fd)} and {len(ld)}")
    if len(shape) != 1:
        raise ValueError(f"x: kinds 'varying_last'/'varying_both' expect a 1-D buffer, got shape {shape}")
    total = sum(m * k for m, k in zip(fd, ld))
    if total != shape[0]:
        raise ValueError(f"first_dims/last_dims: members hold sum(M_i*K_i)={total} elements but x has {shape[0]}")
    kind = "varying_last" if len(set(fd)) == 1 else "varying_both"
    return kind, tuple(fd), tuple(ld)


def group_member_checks(fmt, opts, kind: str, first, last, shape, first_dims=None):
    """Per-member constraints (FP4 packing, RHT rows), named by what the caller passed: x's shape
    (and num_groups) for dims taken from it, else first_dims / first_dims[i] / last_dims[i]."""
    shape = tuple(int(s) for s in shape)

    def member_m(i: int, m: int) -> tuple[str, str]:
        """(argument, value) that gave member i its M."""
        if kind == "same":
            return "x", f"shape {shape} with num_groups={len(first)} (M={m} per member)"
        return ("first_dims" if isinstance(first_dims, numbers.Integral) else f"first_dims[{i}]"), str(m)

    for i, (m, k) in enumerate(zip(first, last)):
        if fmt.packed:
            if opts.want_rowwise and k % 2:
                if kind in ("same", "varying_first"):
                    raise ValueError(f"x: {fmt.name} packs two codes per byte along K, so K must be even, "
                                     f"got shape {shape} (K={k})")
                raise ValueError(f"last_dims[{i}]: {fmt.name} packs two codes per byte along K, so K_i must be even, got {k}")
            if opts.want_columnwise and m % 2:
                who, got = member_m(i, m)
                raise ValueError(f"{who}: {fmt.name} columnwise packs two codes per byte along M, so every "
                                 f"member's M must be even, got {got}")
        if opts.rht and m % 16:
            who, got = member_m(i, m)
            raise ValueError(f"{who}: rht=True needs every member's M a multiple of 16, got {got}")


def group_options(dtype: str, fmt, options: dict, dbias):
    """group_quantize's options, checked alike on every backend: quantize's keyword options and
    `dbias` a boolean. Returns (QuantizeOptions, dbias)."""
    check_option_names(options)
    dbias = check_bool("dbias", dbias)
    return quantize_options((0, 0), dtype, fmt, **options), dbias   # shapes are checked per member


def check_max_elements(max_elements, size: int, total: int | None = None) -> int:
    """group_quantize's `max_elements` (the output bound): an integer no larger than x's `size`
    and, when the dims are on the host, no smaller than the members' `total` elements (device
    dims over the bound are flagged by the metadata kernel instead)."""
    n = check_int("max_elements", max_elements, 0, 2**62)
    if n > size:
        raise ValueError(f"max_elements: the bound {n} exceeds the input's {size} elements")
    if total is not None and total > n:
        raise ValueError(f"max_elements: the members hold more elements than the buffer bound: "
                         f"sum(M_i*K_i)={total} > max_elements={n}")
    return n


def check_qmatmul(a, b, a_operand, b_operand):
    """Both quantized, one scale family, operands present, same K along the block axis.

    Block-scaled GEMMs take MX operands together (E8M0 scales per 32 elements; the element types
    may differ, e.g. MXFP8 x MXFP4) or NVFP4 with NVFP4 (E4M3 scales per 16 plus the global
    amax); an NVFP4 operand with an MX one is no GEMM the hardware defines."""
    from .tensor import GroupedQuantizedTensor, QuantizedTensor
    for name, q in (("a", a), ("b", b)):
        if not isinstance(q, QuantizedTensor):
            hint = f" (one member of a group: {name}[i])" if isinstance(q, GroupedQuantizedTensor) else ""
            raise TypeError(f"{name}: expected a QuantizedTensor{hint}, got {type(q).__name__}")
    check_choice("a_operand", a_operand, ("rowwise", "columnwise"))
    check_choice("b_operand", b_operand, ("rowwise", "columnwise"))
    fa, fb = get_format(a.format), get_format(b.format)
    if fa.is_nvfp4 != fb.is_nvfp4:
        raise ValueError(f"b: block-scaled GEMMs pair NVFP4 only with NVFP4 and MX formats only with MX "
                         f"formats; expected {'nvfp4' if fa.is_nvfp4 else 'an MX format'} like a's "
                         f"{fa.name!r} ({fa.scale.upper()} scales per {fa.block}), got {fb.name!r} "
                         f"({fb.scale.upper()} scales per {fb.block})")
    for name, q, which in (("a", a, a_operand), ("b", b, b_operand)):
        if getattr(q, which) is None:
            raise ValueError(f"{name}_operand: {name} was quantized with axis={q.options.axis!r} and has no "
                             f"{which} operand; expected {name}_operand={q.options.axis!r} or a tensor "
                             f"quantized with axis='{which}' or 'both'")
    # a columnwise operand quantized with rht=True holds H_16 applied along its K (its own sign mask):
    # the product only means something when both K axes are in the same basis
    ra, rb = (_rht_basis(q, which) for q, which in ((a, a_operand), (b, b_operand)))
    if ra != rb:
        raise ValueError(f"b_operand: both operands' K axes must be in one basis; expected b's {b_operand} "
                         f"operand {_basis_name(ra)} like a's {a_operand} operand, got {_basis_name(rb)} "
                         f"(quantize both with rht=True and one rht_sign_mask and take their columnwise "
                         f"operands, or use operands without the transform)")
    oa, ob = a.operand(a_operand), b.operand(b_operand)
    if oa.cols != ob.cols:
        hint = ""
        if ob.rows == oa.cols:
            hint = (" (its rows run along K: b's operand must be (N, K), e.g. a weight W (N, K) "
                    "quantized rowwise, or a (K, N) tensor's columnwise operand)")
        raise ValueError(f"b: the operands must share the block axis K; expected b's {b_operand} operand "
                         f"with {oa.cols} columns like a's {a_operand} operand ({oa.rows}x{oa.cols}), got "
                         f"{ob.rows}x{ob.cols}{hint}")
    wa, wb = _placement(oa.data, f"a.{a_operand}"), _placement(ob.data, f"b.{b_operand}")
    if wa != wb:
        raise ValueError(f"b: the two operands must live in the same place (NumPy on the host, or device "
                         f"arrays on one GPU); a's is {_placement_name(wa)}, b's is {_placement_name(wb)}")
    return oa, ob


def _rht_basis(q, which: str):
    """The sign mask of the random Hadamard transform along the K axis of q's `which` operand (NVFP4
    rht=True applies it to the columnwise operand only), or None when that operand has none."""
    opts = q.options
    return int(opts.rht_sign_mask) if which == "columnwise" and getattr(opts, "rht", False) else None


def _basis_name(mask) -> str:
    return "without the Hadamard transform" if mask is None else f"Hadamard-transformed with rht_sign_mask={mask:#06x}"


def _placement(data, name: str):
    """Where an operand's codes live: None for host memory (NumPy), else the CUDA device index."""
    if isinstance(data, np.ndarray):
        return None
    from . import _interop
    if not _interop.is_device_array(data):     # a CPU torch / JAX array: its way out, not "install CuPy"
        raise _interop.not_a_device_array(data, f"{name}.data", "a NumPy array or a CUDA device array")
    return _interop.as_cupy(data, f"{name}.data").device


def _placement_name(where) -> str:
    return "in host memory (NumPy)" if where is None else f"on device {where}"


QUANTIZE_OPTION_NAMES = ("axis", "scale_layout", "scale_rule", "tile_2d", "row_scaled", "rht", "rht_sign_mask",
                         "rounding", "seed")


# group_quantize's own keywords besides the dims (named parameters, so never in **options)
GROUP_KEYWORDS = ("amax", "dbias", "max_elements")


def check_option_names(options: dict) -> None:
    """Keyword options of group_quantize must be quantize's; name the stray one and list every
    keyword group_quantize takes (its own amax / dbias / max_elements included)."""
    for k in options:
        if k not in QUANTIZE_OPTION_NAMES:
            raise TypeError(f"{k}: not an option of group_quantize; expected one of "
                            f"{list(QUANTIZE_OPTION_NAMES) + list(GROUP_KEYWORDS)}")


def check_rht_transform(dtype: str, M: int, sign_mask) -> int:
    if dtype != "bfloat16":
        raise TypeError(f"x: the random Hadamard transform takes bfloat16 input, got dtype {dtype}")
    if M % 16:
        raise ValueError(f"x: the transform runs over groups of 16 rows, so M must be a multiple of 16, got M={M}")
    return check_int("sign_mask", sign_mask, 0, 0xFFFF)

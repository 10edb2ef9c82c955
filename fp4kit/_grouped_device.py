"""Grouped (MoE) quantize / dequantize on the GPU (SPEC.md section 7).

One small metadata kernel turns the member dims (host lists, uploaded once on the general path and
passed as its kernel parameters on the fast path, or int64 device arrays that never visit the
host) into offsets, per-member tile and segment prefixes, scale and amax
offsets, and checks them; then ONE statically scheduled quantize launch covers every member, each
CTA finding its tiles' members on the device (a binary search over the tile prefix, or, with one K,
a lookup in the band table the metadata kernel wrote). Grids come from host-side bounds only
(``_cuda_grouped._quantize_grid``: one CTA per block or tile where the caller's row count bounds the
work, else a persistent grid sized from the SM count). NVFP4 with computed amax adds one
persistent amax launch.

Device-side dims: nothing is synchronised; the outputs are sized from the caller's bound
(``max_elements``, and bounds derived from it for the scale buffers). Bad device dims (negative,
over the bound, odd FP4 packed axis, RHT rows not a multiple of 16) make the metadata kernel set
``g.error_flag`` and zero the work lists, so nothing is written out of bounds; ``g.check()``
(or reading members with ``g[i]``) synchronises and raises ValueError naming the problem.
"""
from __future__ import annotations

import numpy as np

from . import _interop, _plan, _torch_exec
from ._grouped_views import GroupedArray, _grouped_array, grouped_layout
from ._validate import (DIM_MAX, check_amax_values, check_dtype, check_int, check_max_elements, group_dims,
                        group_member_checks, group_options, native_order)
from .formats import FORMATS
from .tensor import GroupedQuantizedTensor, _options_with_seed

_new = object.__new__

__all__ = ["group_quantize", "group_dequantize", "ERRORS", "decode_error"]

# error bits written by group_meta (cuda_src/grouped.cu)
ERRORS = {
    1: "a member dim is negative",
    2: "the members hold more elements than the buffer bound (x.size / max_elements)",
    4: "the members' scales exceed the scale buffer bound",
    8: "an FP4 member has an odd length along a packed axis",
    16: "rht=True needs every member's M_i to be a multiple of 16",
    32: "the members' row amaxes exceed the amax buffer bound (row_scaled: sum M_i rows and sum K_i columns, "
        "at most the supplied amax's length and, with device dims of a 1-D input, max_elements: members with "
        "rows but no columns, or columns but no rows, beyond it need host dims)",
    64: "for kind 'varying_first' / 'same' the members' rows exceed x.shape[0]",
}


def decode_error(code: int) -> str:
    return "; ".join(msg for bit, msg in ERRORS.items() if code & bit) or "no error"


def _cp():
    import cupy
    return cupy


def _dims_device(name, dims, dev):
    """A device int64 dims array (validated: 1-D int64 on `dev`)."""
    da = _interop.as_cupy(dims, name)
    if da.dtype != "int64":
        raise TypeError(f"{name}: expected an int64 device array, got dtype {da.dtype}")
    if len(da.shape) != 1 or da.shape[0] < 1:
        raise ValueError(f"{name}: expected a 1-D array with G >= 1 entries, got shape {da.shape}")
    if da.device != dev:
        raise ValueError(f"{name}: expected an array on device {dev} (where x is), got device {da.device}")
    return da.array


def _is_dev(d):
    return d is not None and not isinstance(d, (int, np.integer, list, tuple, np.ndarray)) and _interop.is_device_array(d)


def _bounds(kind, f, opts, G, N, Mshared, Kshared, rows=None):
    """Upper bounds (bytes) of the scale buffers and (floats) of the amax buffers for device dims.

    rows: x.shape[0] for the kinds with one K, which bounds sum M_i where the elements cannot
    (K = 0: members of rows without elements, whose row-scaled amaxes are still one per row). For
    the 1-D kinds the element bound N bounds sum M_i over members with K_i > 0 only (and sum K_i
    over those with M_i > 0): rows or columns of empty members beyond it are flagged (GERR_AMAX)."""
    b = f.block
    cap = {}
    if kind in ("same", "varying_first"):
        K = Kshared
        Mtot = N // K if K else (rows or 0)
        nb = f.num_blocks(K)
        cap["srow"] = (Mtot * nb) if opts.scale_layout == "compact" else (Mtot + 127 * G) * (-(-nb // 4) * 4)
        cap["scol"] = (K * (Mtot // b + 2 * G)) if opts.scale_layout == "compact" else \
            (-(-K // 128) * 128) * (Mtot // b + 5 * G)
        cap["arow"] = Mtot if opts.row_scaled else G
        cap["acol"] = K * G if opts.row_scaled else G
    else:
        rows_bound = N if Mshared is None else Mshared * G       # sum M_i (members with K_i = 0 hold no scales)
        cols_bound = N                                           # sum K_i
        if Mshared:
            cols_bound = N // Mshared
        if opts.scale_layout == "compact":
            cap["srow"] = N // b + rows_bound
            cap["scol"] = N // b + cols_bound
        else:
            # sum_i roundup(M_i, 128) * roundup(ceil(K_i / b), 4) <= N/b + 4 sum M_i + 127 sum K_i / b + 508 G
            cap["srow"] = N // b + 4 * rows_bound + 127 * (cols_bound // b + 1) + 512 * G
            cap["scol"] = N // b + 4 * cols_bound + 127 * (rows_bound // b + 1) + 512 * G
        cap["arow"] = rows_bound if opts.row_scaled else G
        cap["acol"] = cols_bound if opts.row_scaled else G
    return cap


_SEED_MAX = 2**64 - 1


def group_quantize(x, fmt, num_groups=None, first_dims=None, last_dims=None, amax=None, dbias=False,
                   max_elements=None, **options) -> GroupedQuantizedTensor:
    """The GPU group_quantize. A call whose x is a PyTorch CUDA tensor or a CuPy array that the
    single-tensor fast path would take (fp4kit._device_api._torch_fast_device / _cupy_fast_device),
    with dims that are None, ints, lists / tuples of ints or C-contiguous arrays of x's library on
    x's device, and amax None or such an array, takes the grouped fast path: its signature (see
    _fast_signature) is memoised with the validated options, the launch plan
    (fp4kit._cuda_grouped.group_quantize_plan) and the result's constant fields once every check
    has passed, and a repeated call runs the plan with fp4kit._torch_exec (buffers from the
    caller's library, raw launches on its current stream) and builds its result without the
    checks. The seed is not in the signature (a kernel argument); an int seed in [0, 2**64 - 1]
    reuses the entry, any other goes through the checks. Host dims lists enter the signature by
    their length only: their plan serves any values (buffers sized from the bounds of device dims,
    or for a 1-D input from the call's sizes rounded up; the values passed as kernel parameters of
    the metadata launch, group_meta_dims; results trimmed to the call's sizes), and each call's
    values are checked on the host before any launch (_host_info; the last
    _plan.GROUP_HOST_LAYOUTS_MAX distinct dims are remembered with their layouts).
    Anything else takes the general path (CuPy arrays, over PyTorch's allocator for a PyTorch
    caller; results handed back as PyTorch views of that memory or through DLPack). Both
    issue the same kernels on the same bytes; host dims reach the general path's plan by a copy.
    A strided PyTorch or CuPy view that is otherwise eligible is copied contiguous by its library
    first (on its current stream)."""
    m = type(x).__module__
    if m.startswith(("torch", "cupy")):
        x = _contiguous_if_eligible(x, amax, m.startswith("torch"))
    fast = _fast_signature(x, fmt, num_groups, first_dims, last_dims, amax, dbias, max_elements, options)
    if fast is not None and fast[2] is not None:
        entry = _plan.GROUP_FAST_CALLS.get(fast[2])
        if entry is not None:
            seed = options.get("seed", 0)
            if type(seed) is int and 0 <= seed <= _SEED_MAX:
                if entry[7] is None:
                    return _run_fast(entry, x, fast[0], fast[1], fast[3], first_dims, last_dims, amax, seed)
                # host dims: this call's values checked (ValueError before any launch)
                info = _host_info(entry, fast[2], fast[4], x, num_groups, first_dims, last_dims, amax)
                if info is not None:
                    return _run_fast(entry, x, fast[0], fast[1], fast[3], first_dims, last_dims, amax, seed, info)
    return _group_quantize_checked(x, fmt, num_groups, first_dims, last_dims, amax, dbias, max_elements, options,
                                   fast)


def _contiguous_if_eligible(x, amax, torch_lib: bool):
    """x, or its contiguous copy (made by its library on its current stream) when x is a strided
    PyTorch tensor or CuPy array that the fast path takes once contiguous. Sparse tensors and
    other objects of those modules without the contiguity query are left to the checks."""
    from . import _device_api as api
    try:
        strided = not (x.is_contiguous() if torch_lib else x.flags.c_contiguous)
    except Exception:
        return x
    if not strided:
        return x
    copy = api._strided_fast(x, amax)
    return x if copy is None else copy[0]


def _host_layout(f, opts, kind: str, first: tuple, last: tuple, lay=None) -> tuple:
    """(kind, the result's host fields (first, last, offsets, rowwise and columnwise scale
    offsets), the dims as the plan's host values, the exact sizes of the outputs that a plan of
    bounds sizes larger, the plan to run (None: the memo entry's)) of validated host dims."""
    if lay is None:
        lay = grouped_layout(f, opts, first, last)
    host = (first, last, lay.offsets, lay.scale_offsets_rowwise if opts.want_rowwise else (),
            lay.scale_offsets_columnwise if opts.want_columnwise else ())
    exact = {"row_scales": lay.scale_offsets_rowwise[-1], "col_scales": lay.scale_offsets_columnwise[-1],
             "row_amax": lay.amax_offsets_rowwise[-1], "col_amax": lay.amax_offsets_columnwise[-1]}
    return kind, host, first + last, exact, None


def _remember_layout(ckey, info) -> None:
    """Remember `info` as the most recent of _plan.GROUP_HOST_LAYOUTS (threads may evict at once)."""
    layouts = _plan.GROUP_HOST_LAYOUTS
    layouts[ckey] = info
    while len(layouts) > _plan.GROUP_HOST_LAYOUTS_MAX:
        try:
            layouts.popitem(last=False)
        except KeyError:                # emptied by another thread meanwhile
            break


def _host_info(entry, key, hkey, x, num_groups, first_dims, last_dims, amax):
    """_host_layout of a memo hit's host dims, checked as the general path checks them (the same
    errors, before any launch), remembered among the last few; None where the call needs the
    general path's checks (a row-scaled amax whose length is not this call's row count)."""
    ckey = (key, hkey)
    layouts = _plan.GROUP_HOST_LAYOUTS
    info = layouts.get(ckey)
    if info is not None:
        try:
            layouts.move_to_end(ckey)
        except KeyError:                # evicted by another thread since the lookup: still valid
            pass
        return info
    opts = entry[0]
    f = FORMATS[entry[2]]
    shape = tuple(x.shape)
    kind, first, last = group_dims(shape, num_groups, first_dims, last_dims)
    group_member_checks(f, opts, kind, first, last, shape, first_dims)
    info = _host_layout(f, opts, kind, first, last)
    if amax is not None and opts.row_scaled and int(amax.shape[0]) != info[3]["row_amax"]:
        return None
    how, what = entry[7]
    if how == "bound":
        if not _within(info, what):
            return None
    else:
        info = _bucketed(info, what)
    _remember_layout(ckey, info)
    return info


def _within(info, caps: dict) -> bool:
    """Whether the exact sizes of _host_layout `info` fit a plan of buffer bounds `caps` (the bounds
    of device dims hold valid dims with one K, and with one int M but for degenerate ones: M = 0
    with row-scaled NVFP4, whose per-column amaxes the bound of 0 elements leaves out)."""
    exact = info[3]
    return (exact["row_scales"] <= caps["srow"] and exact["col_scales"] <= caps["scol"]
            and exact["row_amax"] <= caps["arow"] and exact["col_amax"] <= caps["acol"])


def _bucket(v: int) -> int:
    """The smallest m * 2**e (m in 4..8) at least v (v itself below 8): at most 25 % above v, a
    handful of values per octave."""
    if v < 8:
        return v
    e = v.bit_length() - 3
    return -(-v >> e) << e


def _bucketed(info, build) -> tuple:
    """`info` with its plan: caps of each output _bucket of its exact size, planned (memoised in
    _plan.GROUP_PLANS) from `build` = (device, input dtype, options, G, element count, amax size,
    dbias, one K, row count). For 1-D inputs with dims lists, whose device-dims bounds would be
    several bytes per input element (any member may have few columns and many rows)."""
    from . import _cuda_grouped
    dev, input_dtype, opts, G, n_el, amax_size, dbias, Kshared, rows_total = build
    exact = info[3]
    caps = {"srow": _bucket(exact["row_scales"]), "scol": _bucket(exact["col_scales"]),
            "arow": _bucket(exact["row_amax"]), "acol": _bucket(exact["col_amax"])}
    plan = _cuda_grouped.group_quantize_plan(dev, input_dtype, opts, G, n_el, caps, amax_size, dbias, Kshared,
                                             rows_total, ("param", G))
    return info[:4] + (plan,)


def _dims_signature(d, lib: str, nd, dev: int):
    """The memo key's part for one dims argument, or False where the fast path does not take it."""
    t = type(d)
    if d is None:
        return None
    if t is int:
        return ("i", d)
    if t is list or t is tuple:
        for v in d:
            if type(v) is not int:
                return False
        return ("l", tuple(d))
    if t is not nd:
        return False
    if lib == "torch":
        if not d.is_cuda or not d.is_contiguous() or d.get_device() != dev:
            return False
    elif not d.flags.c_contiguous or d.device.id != dev:
        return False
    return ("a", tuple(d.shape), d.dtype)


def _fast_signature(x, fmt, num_groups, first_dims, last_dims, amax, dbias, max_elements, options):
    """(library, device, memo key, x's pointer, host dims key) when the call can take the grouped
    fast path (the memo key None where its arguments do not hash; the host dims key: the dims'
    values, None for device dims), else None."""
    from . import _device_api as api
    dev = api._torch_fast_device(x, amax)
    if dev is not None:
        lib, nd, x_ptr = "torch", api._torch_mod.Tensor, x.data_ptr()
    else:
        dev = api._cupy_fast_device(x, amax)
        if dev is None:
            return None
        lib, nd, x_ptr = "cupy", api._cupy_ndarray, x.data.ptr
    fsig = _dims_signature(first_dims, lib, nd, dev)
    lsig = _dims_signature(last_dims, lib, nd, dev)
    if fsig is False or lsig is False:
        return None
    # host dims (no device array): the key holds a list's length, the values go to the layout memo
    host = (fsig is None or fsig[0] != "a") and (lsig is None or lsig[0] != "a")
    hkey = (fsig, lsig) if host else None
    try:
        key = (lib, dev, tuple(x.shape), x.dtype, fmt, type(fmt), num_groups, type(num_groups),
               ("L", len(fsig[1])) if fsig is not None and fsig[0] == "l" else fsig,
               ("L", len(lsig[1])) if lsig is not None and lsig[0] == "l" else lsig,
               None if amax is None else (tuple(amax.shape), amax.dtype), dbias, type(dbias), max_elements,
               type(max_elements), tuple(sorted((k, v, type(v)) for k, v in options.items() if k != "seed")))
        hash(key)
    except TypeError:                   # an unhashable argument: the checks will name it
        key = None
    return lib, dev, key, x_ptr, hkey


def _run_fast(entry, x, lib: str, dev: int, x_ptr: int, first_dims, last_dims, amax, seed: int, info=None):
    """Run a memo entry's plan with the caller's library (fp4kit._torch_exec) and build the result
    without the constructors' checks (the entry's first call passed them on the same layout).
    info: _host_layout of the call's host dims (entries of host dims), else None."""
    opts, plan, fname, kind, G, dev_dims, input_dtype, host = entry
    if seed != opts.seed:
        opts = _options_with_seed(opts, seed)
    host_vals = ()
    if info is not None:
        host_vals = info[2]
        if info[4] is not None:
            plan = info[4]
    o = plan.outputs
    # device dims: the caller's arrays, which the metadata launch copies into the plan's (an int
    # first_dims of varying_last and the K of one-K kinds are the plan's own: no array)
    fd_dev = dev_dims and first_dims is not None and not isinstance(first_dims, (int, np.integer))
    ld_dev = dev_dims and last_dims is not None
    if lib == "torch":
        fd_ptr = first_dims.data_ptr() if fd_dev else 0
        ld_ptr = last_dims.data_ptr() if ld_dev else 0
        bufs = _torch_exec.run(plan, x, amax, seed, dev, x_ptr, fd_ptr, ld_ptr, host_vals)
    else:
        fd_ptr = first_dims.data.ptr if fd_dev else 0
        ld_ptr = last_dims.data.ptr if ld_dev else 0
        bufs = _torch_exec.run_cupy(plan, x, amax, seed, x_ptr, fd_ptr, ld_ptr, host_vals)
    fd = first_dims if o["fd"] is None else bufs[o["fd"]]
    ld = last_dims if o["ld"] is None else bufs[o["ld"]]
    s = o["dbias"]
    dbias = None if s is None else (bufs[s].float() if lib == "torch" else bufs[s].astype(np.float32))
    if info is None:
        array = lambda name: None if o[name] is None else bufs[o[name]]  # noqa: E731
    else:                                   # buffers of bound sizes: the call's exact sizes
        exact = info[3]

        def array(name):
            if o[name] is None:
                return None
            a, n = bufs[o[name]], exact.get(name)
            return a if n is None or a.shape[0] == n else a[:n]
    return _result(entry, opts, array, (fd, ld), (bufs[o["meta"]], bufs[o["err"]], fd, ld), lib, dbias, info)


def _result(entry, opts, array, dims, extra_arrays, lib: str, dbias, info=None) -> GroupedQuantizedTensor:
    """The GroupedQuantizedTensor of one run of an entry's plan, built without the constructor
    (a frozen dataclass whose fields the checks of the call's first run have vouched for).
    array(name): the result's array of plan output `name`; dims: the device (first, last) dims of
    the result (host dims come from `info`, _host_layout of the call's, or else the entry);
    extra_arrays: (meta, error flags, fd, ld) as the launches saw them."""
    fname, kind, G, dev_dims, input_dtype, host = entry[2:]
    if info is not None:
        kind, host = info[0], info[1]
    if host is None:
        first_t, last_t, offsets, so_row, so_col = dims[0], dims[1], None, (), ()
    else:
        first_t, last_t, offsets, so_row, so_col = host
    meta, err, fd, ld = extra_arrays
    g = _new(GroupedQuantizedTensor)
    g.__dict__.update(
        format=fname, kind=kind, first_dims=first_t, last_dims=last_t, offsets=offsets, options=opts,
        rowwise_data=array("row_data"), rowwise_scales=array("row_scales"), rowwise_amax=array("row_amax"),
        columnwise_data=array("col_data"), columnwise_scales=array("col_scales"), columnwise_amax=array("col_amax"),
        scale_offsets_rowwise=so_row, scale_offsets_columnwise=so_col, dbias=dbias, input_dtype=input_dtype,
        extra={"meta": meta, "error_flag": err, "fd": fd, "ld": ld, "G": G, "device_dims": dev_dims, "library": lib})
    return g


def _group_quantize_checked(x, fmt, num_groups, first_dims, last_dims, amax, dbias, max_elements, options,
                            fast) -> GroupedQuantizedTensor:
    """group_quantize with every check. fast: None (the general path: CuPy buffers, results handed
    to the caller's library), or (library, device, memo key or None, x's pointer) from
    _fast_signature: once the checks pass, the plan runs as on the fast path and the call's
    signature is memoised under the key."""
    from ._device_api import device_input, _device_ctx
    from . import _cuda_grouped as _cuda
    cp = _cp()
    da = device_input(x)
    opts, dbias = group_options(da.dtype, fmt, options, dbias)
    f = opts.fmt
    dev_dims = _is_dev(first_dims) or _is_dev(last_dims)
    fill_last = False       # device dims of varying_first: the metadata launch writes last_dims (all K)
    N = int(np.prod(da.shape)) if da.shape else 0
    if not dev_dims:
        kind, first, last = group_dims(da.shape, num_groups, first_dims, last_dims)
        group_member_checks(f, opts, kind, first, last, da.shape, first_dims)
        G = len(first)
        Mshared = first[0] if kind in ("same", "varying_last") and G else None
        Kshared = last[0] if kind in ("same", "varying_first") and G else None
        lay = grouped_layout(f, opts, first, last)
        caps = {"srow": lay.scale_offsets_rowwise[-1], "scol": lay.scale_offsets_columnwise[-1],
                "arow": lay.amax_offsets_rowwise[-1], "acol": lay.amax_offsets_columnwise[-1]}
        n_el = lay.offsets[-1]
        if max_elements is not None:
            check_max_elements(max_elements, N, n_el)
        host_first, host_last = first, last
    else:
        if num_groups is not None:
            raise ValueError("num_groups: device-side dims go with first_dims/last_dims, not num_groups")
        n_el = check_max_elements(N if max_elements is None else max_elements, N)
        with _device_ctx(da.device):
            if last_dims is None:     # varying_first: x (sum M_i, K)
                if len(da.shape) != 2:
                    raise ValueError(f"x: kind 'varying_first' expects a 2-D (sum M_i, K) array, got shape {da.shape}")
                kind = "varying_first"
                fd = _dims_device("first_dims", first_dims, da.device)
                G = int(fd.shape[0])
                Kshared, Mshared = da.shape[1], None
                ld, fill_last = None, True      # (G,) of K: written by the metadata launch (plan buffer)
            else:
                if len(da.shape) != 1:
                    raise ValueError(f"x: kinds 'varying_last'/'varying_both' expect a 1-D buffer, got shape {da.shape}")
                ld = _dims_device("last_dims", last_dims, da.device)
                G = int(ld.shape[0])
                Kshared = None
                if isinstance(first_dims, (int, np.integer)) and not isinstance(first_dims, bool):
                    Mshared = check_int("first_dims", first_dims, 0, DIM_MAX)
                    fd = None                   # (G,) of Mshared: a FILL buffer of the plan
                    kind = "varying_last"
                else:
                    fd = _dims_device("first_dims", first_dims, da.device)
                    if int(fd.shape[0]) != G:
                        raise ValueError(f"first_dims/last_dims: expected the same number of members, got {fd.shape[0]} and {G}")
                    Mshared = None
                    kind = "varying_both"
        caps = _bounds(kind, f, opts, G, n_el, Mshared, Kshared, da.shape[0] if kind == "varying_first" else None)
        host_first = host_last = None
    if dbias and kind not in ("same", "varying_first"):
        raise ValueError(f"dbias: only kinds 'same' and 'varying_first' have per-member column sums, got kind {kind!r}")
    # amax= (NVFP4 only): (G,) per member, or (sum M_i,) with row_scaled
    amax_cp = None
    if amax is not None:
        if not f.is_nvfp4:
            raise ValueError(f"amax: only NVFP4 takes a global amax; format {f.name!r} has none")
        host_amax = isinstance(amax, np.ndarray)
        if host_amax:
            amax = native_order(amax)
            if amax.dtype != np.float32:
                raise TypeError(f"amax: expected a float32 array, got dtype {amax.dtype}")
            shape = amax.shape
        else:
            a = _interop.as_cupy(amax, "amax")
            if a.dtype != "float32":
                raise TypeError(f"amax: expected a float32 array, got dtype {a.dtype}")
            if a.device != da.device:
                raise ValueError(f"amax: expected an array on device {da.device} (where x is), got device {a.device}")
            shape = a.shape
        want = caps["arow"]
        # host dims: the exact count; device dims: one per member, or with row_scaled one per row of
        # a sum the host does not know (exact for varying_last: G x the one M)
        exact = not dev_dims or (opts.row_scaled and kind == "varying_last")
        if len(shape) != 1 or (exact and shape[0] != want) or (dev_dims and shape[0] < (G if not opts.row_scaled else 0)):
            what = "(sum M_i,) one per row" if opts.row_scaled else "(G,) one per member"
            raise ValueError(f"amax: expected shape {what} = ({want},), got {tuple(shape)}")
        if dev_dims and opts.row_scaled and shape[0] < want:
            # the kernels read amax[row] for every row of every member: group_meta flags rows past
            # the caller's array (error flag 32, nothing written) instead of reading past its end
            caps = dict(caps, arow=int(shape[0]))
        if host_amax:      # every member's values before any launch; -0 as +0 (as the reference)
            members = np.repeat(np.arange(G), host_first) if opts.row_scaled and not dev_dims else \
                (None if opts.row_scaled else np.arange(shape[0]))
            checked = check_amax_values(amax, members)
            _interop.refuse_host_copy_in_capture(x, "amax", "a NumPy amax")
            # on the stream the kernels run on, with the caller's library's memory (as _amax_input)
            with _device_ctx(da.device, da.library), _interop.current_stream(x):
                amax_cp = cp.asarray(checked)
        else:              # device values: unchecked (no synchronisation); -0 as +0 where the launcher
            amax_cp = a.array  # copies them into the result (the plan's nvfp4_amax_out launch)
    rows_total = da.shape[0] if kind in ("same", "varying_first") else None
    host = hl = None
    if not dev_dims:
        hl = _host_layout(f, opts, kind, tuple(host_first), tuple(host_last), lay)
        host = hl[1]
        dims: tuple = ("host", host[0], host[1])     # ("host" | "dev", ...) or ("param", G) below
    else:
        dims = ("dev", Mshared if kind == "varying_last" else None, fill_last)
    if fast is not None:
        lib, dev, key, x_ptr, hkey = fast
        amax_size = None if amax_cp is None else int(amax_cp.size)
        info = plan = None
        if not dev_dims:
            # host dims: a plan for many dims of G members, the values passed as kernel parameters,
            # the results trimmed to this call's sizes. Buffers: with one K or one M, the bounds of
            # device dims (one plan for every dims); with dims lists for a 1-D input, whose device
            # bounds grow with the input (any member may have many rows and few columns), each
            # exact size rounded up (_bucket: a plan per combination of rounded sizes)
            info = hl
            if Kshared is None and type(first_dims) is not int:
                spec = ("bucket", (dev, da.dtype, opts, G, n_el, amax_size, dbias, Kshared, rows_total))
                info = _bucketed(info, spec[1])
                plan = info[4]
            else:
                bound = _bounds("varying_first" if Kshared is not None else "varying_last", f, opts, G, n_el,
                                first_dims if type(first_dims) is int else None, Kshared, rows_total)
                spec = ("bound", bound)
                if _within(info, bound):
                    caps, dims = bound, ("param", G)
                else:
                    lib = None              # sizes beyond the bounds (_within): the general path, exact buffers
            if lib is not None and key is not None:
                _remember_layout((key, hkey), info)
        if lib is not None:
            if plan is None:
                plan = _cuda.group_quantize_plan(dev, da.dtype, opts, G, n_el, caps, amax_size, dbias, Kshared,
                                                 rows_total, dims)
            entry = (opts, plan, f.name, kind, G, dev_dims, da.dtype, None if dev_dims else spec)
            g = _run_fast(entry, x, lib, dev, x_ptr, first_dims, last_dims, amax, opts.seed, info)
            if key is not None:
                memo = _plan.GROUP_FAST_CALLS
                if len(memo) >= _plan._MAX_PLANS:
                    memo.clear()
                memo[key] = entry
            return g
    if not dev_dims:    # the general path uploads host dims (the fast path passes them as kernel parameters)
        _interop.refuse_host_copy_in_capture(
            x, "first_dims", "host dims of an input off the fast path (not a PyTorch tensor or CuPy array, "
            "contiguous or strided, on its library's current device)")
    # conversions back to the caller's library stay inside the stream context (graph-capture safe)
    with _device_ctx(da.device, da.library), _interop.current_stream(x):
        res = _cuda.group_quantize(da.array.reshape(-1), da.dtype, opts, fd if dev_dims else None,
                                   ld if dev_dims and not fill_last else None, G, n_el, caps, amax_cp,
                                   dbias=dbias, Kshared=Kshared, rows_total=rows_total, dims=dims)
        lib = da.library
        conv = lambda a: None if a is None else _interop.to_library(a, lib)  # noqa: E731
        return _result((opts, None, f.name, kind, G, dev_dims, da.dtype, host), opts, lambda name: conv(res[name]),
                       (conv(res["fd"]), conv(res["ld"])), (res["meta"], res["err"], res["fd"], res["ld"]), lib,
                       conv(res["dbias"]))


def group_dequantize(g: GroupedQuantizedTensor, dtype="float32", operand="rowwise") -> GroupedArray:
    from ._device_api import _device_ctx
    from . import _cuda_grouped as _cuda
    from ._validate import check_choice
    dtype = check_dtype("dtype", dtype)
    check_choice("operand", operand, ("rowwise", "columnwise"))
    pre = "rowwise" if operand == "rowwise" else "columnwise"
    data = getattr(g, f"{pre}_data")
    if data is None:
        raise ValueError(f"operand: this group was quantized with axis={g.options.axis!r} and has no {operand} operand")
    meta = g.extra.get("meta")
    if meta is None:
        if not _interop.is_device_array(data):    # a CPU torch / JAX group, after a GPU call loaded this module
            raise _interop.not_a_device_array(data, f"g.{pre}_data")
        raise ValueError("g: expected a grouped result from the GPU (it carries device metadata)")
    out = _group_dequantize_fast(g, dtype, operand, data, getattr(g, f"{pre}_scales"), getattr(g, f"{pre}_amax"), meta)
    if out is not None:
        return out
    d = _interop.as_cupy(data, f"g.{pre}_data")
    s = _interop.as_cupy(getattr(g, f"{pre}_scales"), "g.scales").array
    a = getattr(g, f"{pre}_amax")
    a = _interop.as_cupy(a, "g.amax").array if a is not None else None
    # the device metadata: CuPy arrays (general path) or the fast path's arrays of the caller's library
    meta, fd, ld = (_interop.as_cupy(v, "g.extra").array for v in (meta, g.extra["fd"], g.extra["ld"]))
    with _device_ctx(d.device, d.library), _interop.current_stream(data):
        n_el = int(d.array.size) * (2 if FORMATS[g.format].packed else 1)
        out = _cuda.group_dequantize(d.array, s, a, meta, fd, ld, g.extra["G"], g.format,
                                     g.options, operand, dtype, n_el, g.kind)
        lib = g.extra.get("library", d.library)
        return _grouped_array(data=_interop.to_library(out, lib, dtype=dtype), kind=g.kind, first_dims=g.first_dims,
                              last_dims=g.last_dims, offsets=g.offsets, operand=operand,
                              group=g if g.offsets is None else None)


def _group_dequantize_fast(g, dtype: str, operand: str, data, scales, amax, meta):
    """group_dequantize's fast path, or None: the operand's data, scales and amax and the group's
    device metadata (meta, first and last dims) are all C-contiguous PyTorch CUDA tensors, or all
    CuPy arrays, on the device current for that library and CuPy (results of the grouped fast
    path). The output comes from that library's allocator and the kernel the general path runs
    (fp4kit._cuda_grouped.dequantize_kernel) is launched directly on its current stream: the
    general path's bytes, without DLPack or CuPy wrappers. Anything else returns None."""
    from . import _device_api as api
    from ._cuda_grouped import dequantize_kernel, shared_cols
    fd, ld = g.extra.get("fd"), g.extra.get("ld")
    arrays = (data, scales, meta, fd, ld) if amax is None else (data, scales, meta, fd, ld, amax)
    fast = api._fast_arrays(arrays, ("uint8", "uint8", "int64", "int64", "int64", "float32"))
    if fast is None:
        return None
    lib, dev = fast
    ptr = (lambda a: a.data_ptr()) if lib == "torch" else (lambda a: a.data.ptr)  # noqa: E731
    n = data.numel() if lib == "torch" else data.size
    f = FORMATS[g.format]
    n_el = int(n) * (2 if f.packed else 1)
    out, out_ptr, stream = api._fast_output(lib, dev, (n_el,), dtype, data)
    if n_el:
        kernel, grid = dequantize_kernel(g.format, dtype, n_el, api._sm_count_of(dev), shared_cols(g.kind, operand))
        opts = g.options
        _torch_exec.raw_launch(dev, "grouped", kernel, grid, (
            ptr(data), ptr(scales), 0 if amax is None else ptr(amax), int(g.extra["G"]), ptr(meta), ptr(fd), ptr(ld),
            int(operand == "columnwise"), int(opts.scale_layout == "swizzled"), int(opts.row_scaled), out_ptr), stream)
    if lib == "cupy" and dtype == "bfloat16":
        out = _interop.to_library(out, "cupy", dtype="bfloat16")
    return _grouped_array(data=out, kind=g.kind, first_dims=g.first_dims, last_dims=g.last_dims, offsets=g.offsets,
                          operand=operand, group=g if g.offsets is None else None)

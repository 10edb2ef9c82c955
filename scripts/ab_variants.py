#!/usr/bin/env python3
"""A/B timings of preprocessor variants of one cuda_src module, in one process on one GPU.

Each variant is a list of `#define`s put in front of cuda_src/<module>.cu; every variant's compile
parts are built first (NVRTC, in parallel threads, into fp4kit's cubin cache), then each case is
timed under every variant in turn (median of CUDA-event-timed runs, scripts/bench.py time_fn), with
the variants' outputs compared byte for byte with the first variant's (those calls with output
poisoning on, so that bytes an op leaves unwritten, such as a device-dims group's spare capacity,
compare as 0xA5 instead of as whatever the allocator's block held). A probe for kernel work: the
macros a variant sets must have defaults in the source that keep the shipped behaviour.

A variant's entry `py:MODULE.ATTR=EXPR` is a host-side change instead: while the variant runs,
attribute ATTR of the imported module MODULE is EXPR, evaluated among that module's names with
`orig` bound to the attribute's own value (a grid or a tuning table; fp4kit's cached plans are
dropped at each switch, so the next call asks again).

Usage: PYTHONPATH=. python3 scripts/ab_variants.py --module grouped --cases group_dequantize \\
           --variant "base=FP4KIT_X 0" --variant "new=FP4KIT_X 1;FP4KIT_Y 3" [--rounds 2]
       --variant "grid=py:fp4kit._cuda_grouped._DQ_MIN_CTAS={**orig, 'bfloat16': 3}"
       --variant "one=py:fp4kit._cuda_grouped._persistent_grid=lambda n, r, sm: orig(n, r, sm) // 2"
"""
import argparse
import importlib
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from fp4kit import _cuda, _loader, _plan, _torch_exec  # noqa: E402

_ORIG_READ = _loader._read_sources


_PATCHED = []   # (module object, attribute, original value) of the active variant's py: entries


def _variant_sources(module, defines):
    src = _ORIG_READ()
    src[f"{module}.cu"] = "".join(f"#define {d}\n" for d in defines if not d.startswith("py:")) + src[f"{module}.cu"]
    return src


def _py_entry(entry):
    """(MODULE, ATTR, EXPR) of a `py:MODULE.ATTR=EXPR` entry; ValueError if it is not one."""
    target, eq, expr = entry[len("py:"):].partition("=")
    modname, _, attr = target.strip().rpartition(".")
    if not eq or not modname.strip(".") or not attr:
        raise ValueError(f"{entry!r}: expected py:MODULE.ATTR=EXPR")
    return modname, attr, expr


def _patch(entry):
    """Apply one `py:MODULE.ATTR=EXPR` entry (recorded in _PATCHED for _restore)."""
    modname, attr, expr = _py_entry(entry)
    mod = importlib.import_module(modname)
    orig = getattr(mod, attr)
    # orig among the globals, not the locals: a lambda's body (a wrapped grid function) sees it too
    value = eval(expr, {**vars(mod), "orig": orig})   # noqa: S307 - the user's own command line
    _PATCHED.append((mod, attr, orig))
    setattr(mod, attr, value)


def _activate(module, defines):
    """Make fp4kit load `module` from the variant's sources and apply its py: entries (every cached
    handle of the module and every plan dropped)."""
    _unpatch()
    _loader._read_sources = lambda root=None: _variant_sources(module, defines) if root is None else _ORIG_READ(root)
    for d in defines:
        if d.startswith("py:"):
            _patch(d)
    _drop_cached(module)


def _unpatch():
    while _PATCHED:
        mod, attr, orig = _PATCHED.pop()
        setattr(mod, attr, orig)


def _restore(module):
    """fp4kit's own sources and attributes again, and no handle compiled from a variant left cached."""
    _unpatch()
    _loader._read_sources = _ORIG_READ
    _drop_cached(module)


def _drop_cached(module):
    for cache in (_loader._modules, _loader._functions, _torch_exec._RAW_FUNCS):
        for k in [k for k in cache if module in k]:
            del cache[k]
    for plans in (_plan._QUANTIZE_PLANS, _plan._AMAX_PLANS, _plan.FAST_CALLS, _plan.GROUP_PLANS,
                  _plan.GROUP_FAST_CALLS):   # their executors hold kernel handles
        plans.clear()


def parse_variants(specs):
    """["NAME=DEF;DEF", ...] -> {NAME: [DEF, ...]} in order (the first is the reference); a variant
    may have no defines (the shipped source); a DEF `py:MODULE.ATTR=EXPR` is a host-side change
    (no ';' inside EXPR)."""
    out = {}
    for spec in specs:
        name, eq, defs = spec.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ValueError(f"--variant {spec!r}: expected NAME=DEFINE;DEFINE...")
        if name in out:
            raise ValueError(f"--variant {name!r} given twice")
        out[name] = [d.strip() for d in defs.split(";") if d.strip()]
        for d in out[name]:
            if d.startswith("py:"):
                try:
                    _py_entry(d)
                except ValueError as e:
                    raise ValueError(f"--variant {spec!r}: {e}") from None
    return out


def _prebuild(module, variants, arch, parts):
    """Every variant's compile parts into fp4kit's cubin cache, in parallel threads."""
    jobs = [(defs, p) for defs in variants.values() for p in parts]
    with ThreadPoolExecutor(max_workers=max(1, min(_loader.compile_workers(), len(jobs)))) as ex:
        list(ex.map(lambda j: _loader.build_cubin(module, arch, part=j[1], sources=_variant_sources(module, j[0])), jobs))


def cases_group_dequantize(torch, fp4kit, quick):
    """(name, fn returning the output, bytes moved, part) for group_dequantize at 65536 x 7168 (G = 8,
    sizes % 128; G = 64, sizes % 2), and each one's per-member loop (name ending in 'loop')."""
    from bench import _bytes_out, _moe_dims
    total, K = 65536, 7168
    x = torch.randn(total, K, device="cuda").to(torch.bfloat16)
    fmts = ("mxfp8_e4m3", "nvfp4") if quick else ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4")
    for G, mult in ((8, 128), (64, 2)):
        dims, dims_dev, starts, _ = _moe_dims(G, total, mult)
        for fmt in fmts:
            g = fp4kit.group_quantize(x, fmt, first_dims=dims_dev, axis="rowwise", scale_layout="swizzled")
            per = [fp4kit.quantize(x[s:s + m], fmt, axis="rowwise", scale_layout="swizzled")
                   for s, m in zip(starts, dims) if m]
            part = _loader.part_of("grouped", f"group_dequantize_f{fp4kit.FORMATS[fmt].format_id}_o0")
            for dt in ("bfloat16", "float32"):
                nb = _bytes_out(fmt, total, K, "rowwise") + total * K * (2 if dt == "bfloat16" else 4)
                yield (f"G={G} {fmt} -> {dt}", lambda g=g, dt=dt: fp4kit.group_dequantize(g, dtype=dt), nb, part)
                yield (f"G={G} {fmt} -> {dt} loop", lambda per=per, dt=dt: [fp4kit.dequantize(q, dtype=dt) for q in per],
                       nb, None)


def cases_dequantize(torch, fp4kit, quick):
    """dequantize of one rowwise operand (8192^2 and 16384^2; --quick: 8192^2) to bfloat16 and
    float16: MXFP6 E2M3 / E3M2, MXFP4, and MXFP8 E4M3 (which FP4KIT_DQ_FP6_DIRECT and _FP4_DIRECT
    leave alone: a control); NVFP4 to bfloat16, and MXFP8 E4M3 and NVFP4 to float32."""
    from bench import _bytes_out
    shapes = ((8192, 8192),) if quick else ((8192, 8192), (16384, 16384))
    for M, K in shapes:
        x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        for fmt in ("mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxfp8_e4m3", "nvfp4"):
            q = fp4kit.quantize(x, fmt, axis="rowwise", scale_layout="swizzled")
            part = _loader.part_of("dequantize", f"dequantize_f{fp4kit.FORMATS[fmt].format_id}_o1")
            dts = (("bfloat16", "float32") if fmt == "nvfp4" else ("bfloat16", "float16", "float32")
                   if fmt == "mxfp8_e4m3" else ("bfloat16", "float16"))
            for dt in dts:
                nb = _bytes_out(fmt, M, K, "rowwise") + M * K * (4 if dt == "float32" else 2)
                yield (f"{M}x{K} {fmt} -> {dt}", lambda q=q, dt=dt: fp4kit.dequantize(q, dtype=dt), nb, part)
        del x


def cases_rows(torch, fp4kit, quick):
    """quantize of one rowwise operand (8192^2 and 16384^2; --quick: 8192^2): NVFP4 with a supplied
    amax from bfloat16 (swizzled and compact scales), float16 and float32, MXFP4 / MXFP8 from
    bfloat16 (both layouts), MXFP8 from float32; the rows kernels of quantize.cu (_rows, _rowsz).
    Not --quick, at 8192^2 also stochastic rounding (MXFP4, _rowssr) and NVFP4 row-scaled (_rowsx)."""
    from bench import _bytes_out
    shapes = ((8192, 8192),) if quick else ((8192, 8192), (16384, 16384))
    for M, K in shapes:
        for dt in ("bfloat16", "float16", "float32"):
            x = torch.randn(M, K, device="cuda").to(getattr(torch, dt))
            amax = x.abs().amax().float().reshape(1)
            specs = ((("nvfp4", "swizzled", {}), ("nvfp4", "compact", {}), ("mxfp4_e2m1", "swizzled", {}),
                      ("mxfp4_e2m1", "compact", {}), ("mxfp8_e4m3", "swizzled", {}), ("mxfp8_e4m3", "compact", {}))
                     if dt == "bfloat16" else (("nvfp4", "swizzled", {}),) if dt == "float16"
                     else (("nvfp4", "swizzled", {}), ("mxfp8_e4m3", "compact", {})))
            if dt == "bfloat16" and not quick and M == 8192:
                specs += (("mxfp4_e2m1", "swizzled", {"rounding": "stochastic"}),
                          ("nvfp4", "swizzled", {"row_scaled": True}))
            for fmt, layout, opt in specs:
                kw = {"amax": amax} if fmt == "nvfp4" and not opt else {}
                kw.update(opt)
                nb = M * K * x.element_size() + _bytes_out(fmt, M, K, "rowwise")
                suffix = "_rowssr" if "rounding" in opt else "_rowsx" if opt else "_rows"
                part = _loader.part_of("quantize", f"quantize_f{fp4kit.FORMATS[fmt].format_id}_d{_cuda._DTYPE_IDS[dt]}{suffix}")
                tag = "".join(f" {k}={v}" for k, v in opt.items())
                yield (f"{M}x{K} {fmt} {dt} {layout}{tag}", lambda x=x, fmt=fmt, layout=layout, kw=kw: _tensors(
                    fp4kit.quantize(x, fmt, axis="rowwise", scale_layout=layout, **kw)), nb, part)
            del x


def cases_recipes(torch, fp4kit, quick):
    """NVFP4 quantize with an extended recipe of 8192^2 and 16384^2 bfloat16 (--quick: 8192^2) and
    8192^2 float32, swizzled scales: row-scaled rowwise and "both" (amaxes computed per row, and per
    column for "both": amax.cu's amax_rows_cols, then the rows or tile kernel) and tile_2d "both"
    (the global amax, then the tile kernel). For --module amax or quantize."""
    from bench import _bytes_out
    shapes = [(8192, 8192, "bfloat16"), (8192, 8192, "float32")] + ([] if quick else [(16384, 16384, "bfloat16")])
    for M, K, dt in shapes:
        x = torch.randn(M, K, device="cuda").to(getattr(torch, dt))
        for axis, opt in (("rowwise", "row_scaled"), ("both", "row_scaled"), ("both", "tile_2d")):
            nb = M * K * x.element_size() + _bytes_out("nvfp4", M, K, axis)
            yield (f"{M}x{K} {dt} {axis} {opt}", lambda x=x, axis=axis, opt=opt: _tensors(
                fp4kit.quantize(x, "nvfp4", axis=axis, scale_layout="swizzled", **{opt: True})), nb, None)
        del x


def _group_rows_inputs(torch, quick):
    """(x, total, K) and per (G, sizes multiple): G, mult, host dims, device dims, member starts, one
    amax tensor per member and all of them on the device: 65536 x 7168 bfloat16, G = 8 with sizes %
    128 and G = 64 with sizes % 2 (--quick: G = 8); the group_rows cases' inputs."""
    from bench import _moe_dims
    total, K = 65536, 7168
    x = torch.randn(total, K, device="cuda").to(torch.bfloat16)
    groups = []
    for G, mult in ((8, 128),) if quick else ((8, 128), (64, 2)):
        dims, dims_dev, starts, _ = _moe_dims(G, total, mult)
        amaxes = [x[s:s + m].abs().amax().float().reshape(1) if m else torch.zeros(1, device="cuda")
                  for s, m in zip(starts, dims)]
        groups.append((G, mult, dims, dims_dev, starts, amaxes, torch.cat(amaxes)))
    return x, total, K, groups


def cases_group_rows(torch, fp4kit, quick):
    """group_quantize rowwise at 65536 x 7168 from bfloat16, device dims, swizzled scales: NVFP4 with
    supplied amaxes (one per member), MXFP4 and MXFP8, G = 8 with sizes % 128 and G = 64 with
    sizes % 2 (--quick: G = 8), and each one's per-member loop; at G = 8 also compact scales."""
    from bench import _bytes_out
    x, total, K, groups = _group_rows_inputs(torch, quick)
    for G, mult, dims, dims_dev, starts, amaxes, am_dev in groups:
        for fmt in ("nvfp4", "mxfp4_e2m1", "mxfp8_e4m3"):
            kw = {"amax": am_dev} if fmt == "nvfp4" else {}
            nb = total * K * 2 + _bytes_out(fmt, total, K, "rowwise")
            part = _loader.part_of("grouped", f"group_quantize_rowsk_f{fp4kit.FORMATS[fmt].format_id}_d1_plain")
            name = f"G={G} %{mult} {fmt} rowwise"
            yield (name, lambda d=dims_dev, fmt=fmt, kw=kw: _tensors(
                fp4kit.group_quantize(x, fmt, first_dims=d, axis="rowwise", scale_layout="swizzled", **kw)), nb, part)
            yield (f"{name} loop", lambda dims=dims, starts=starts, fmt=fmt, amaxes=amaxes: [
                _tensors(fp4kit.quantize(x[s:s + m], fmt, axis="rowwise", scale_layout="swizzled",
                                         **({"amax": amaxes[i]} if fmt == "nvfp4" else {})))
                for i, (s, m) in enumerate(zip(starts, dims)) if m], nb, None)
            if G == 8:   # compact scales (no loop)
                yield (f"{name} compact", lambda d=dims_dev, fmt=fmt, kw=kw: _tensors(
                    fp4kit.group_quantize(x, fmt, first_dims=d, axis="rowwise", scale_layout="compact", **kw)), nb, part)


def cases_group_rows_ext(torch, fp4kit, quick):
    """group_quantize rowwise at 65536 x 7168 from bfloat16 with the extended recipes, device dims,
    swizzled scales: MXFP4 and NVFP4 (supplied amaxes) with stochastic rounding, NVFP4 row-scaled
    (amaxes computed per row), G = 8 with sizes % 128 and G = 64 with sizes % 2 (--quick: G = 8), and
    each one's per-member loop (the seed of every member's call the group's: the same Philox stream)."""
    from bench import _bytes_out
    x, total, K, groups = _group_rows_inputs(torch, quick)
    for G, mult, dims, dims_dev, starts, amaxes, am_dev in groups:
        for fmt, opt in (("mxfp4_e2m1", dict(rounding="stochastic", seed=5)),
                         ("nvfp4", dict(rounding="stochastic", seed=5)), ("nvfp4", dict(row_scaled=True))):
            kw = dict(opt, amax=am_dev) if fmt == "nvfp4" and "rounding" in opt else dict(opt)
            nb = total * K * 2 + _bytes_out(fmt, total, K, "rowwise")
            part = _loader.part_of("grouped", f"group_quantize_rowsk_f{fp4kit.FORMATS[fmt].format_id}_d1")
            name = f"G={G} %{mult} {fmt} rowwise {'row_scaled' if 'row_scaled' in opt else 'stochastic'}"
            yield (name, lambda d=dims_dev, fmt=fmt, kw=kw: _tensors(
                fp4kit.group_quantize(x, fmt, first_dims=d, axis="rowwise", scale_layout="swizzled", **kw)), nb, part)
            yield (f"{name} loop", lambda dims=dims, starts=starts, fmt=fmt, amaxes=amaxes, opt=opt: [
                _tensors(fp4kit.quantize(x[s:s + m], fmt, axis="rowwise", scale_layout="swizzled", **opt,
                                         **({"amax": amaxes[i]} if fmt == "nvfp4" and "rounding" in opt else {})))
                for i, (s, m) in enumerate(zip(starts, dims)) if m], nb, None)


def cases_group_both_ext(torch, fp4kit, quick):
    """group_quantize "both" at 65536 x 7168 from bfloat16 with NVFP4's extended recipes, which take
    the persistent full tile kernel group_quantize_f5_d1: row_scaled, tile_2d and rht, device dims,
    swizzled scales, amaxes computed, G = 8 with sizes % 128 and (not --quick) G = 64 with sizes % 2
    (row_scaled only), and each one's per-member loop."""
    from bench import _bytes_out
    x, total, K, groups = _group_rows_inputs(torch, quick)
    part = _loader.part_of("grouped", "group_quantize_f5_d1")
    nb = total * K * 2 + _bytes_out("nvfp4", total, K, "both")
    for G, mult, dims, dims_dev, starts, _, _ in groups:
        for opt in (dict(row_scaled=True), dict(tile_2d=True), dict(rht=True))[:1 if G == 64 else 3]:
            name = f"G={G} %{mult} nvfp4 both {next(iter(opt))}"
            yield (name, lambda d=dims_dev, opt=opt: _tensors(
                fp4kit.group_quantize(x, "nvfp4", first_dims=d, axis="both", scale_layout="swizzled", **opt)), nb, part)
            yield (f"{name} loop", lambda dims=dims, starts=starts, opt=opt: [
                _tensors(fp4kit.quantize(x[s:s + m], "nvfp4", axis="both", scale_layout="swizzled", **opt))
                for s, m in zip(starts, dims) if m], nb, None)


def cases_group_both(torch, fp4kit, quick):
    """group_quantize "both" at 65536 x 7168, device dims, through the one-tile kernel of the unpacked
    MX formats (MXFP6 at G = 8 and 64 with sizes % 128 and G = 8 with sizes % 2, swizzled and compact
    scales, from bfloat16 and at G = 8 from float32; MXFP8 with sizes % 2), and each one's per-member
    loop. --quick: MXFP6 E2M3 at G = 8 only."""
    from bench import _bytes_out, _moe_dims
    total, K = 65536, 7168
    xs = {}
    rows = [(8, 128, "mxfp6_e2m3", "bfloat16"), (8, 2, "mxfp6_e2m3", "bfloat16"), (8, 128, "mxfp6_e2m3", "float32"),
            (64, 128, "mxfp6_e2m3", "bfloat16"), (8, 128, "mxfp6_e3m2", "bfloat16"), (8, 2, "mxfp8_e4m3", "bfloat16")]
    for G, mult, fmt, dt in rows[:3] if quick else rows:
        if dt not in xs:
            xs[dt] = torch.randn(total, K, device="cuda").to(getattr(torch, dt))
        x = xs[dt]
        dims, dims_dev, starts, _ = _moe_dims(G, total, mult)
        part = _loader.part_of("grouped", f"group_quantize1_f{fp4kit.FORMATS[fmt].format_id}_d{_cuda._DTYPE_IDS[dt]}_plain")
        nb = total * K * x.element_size() + _bytes_out(fmt, total, K, "both")
        for layout in ("swizzled", "compact"):
            name = f"G={G} %{mult} {fmt} {dt} {layout}"
            yield (name, lambda x=x, d=dims_dev, fmt=fmt, layout=layout: _tensors(
                fp4kit.group_quantize(x, fmt, first_dims=d, axis="both", scale_layout=layout)), nb, part)
            yield (f"{name} loop", lambda x=x, dims=dims, starts=starts, fmt=fmt, layout=layout: [
                _tensors(fp4kit.quantize(x[s:s + m], fmt, axis="both", scale_layout=layout))
                for s, m in zip(starts, dims) if m], nb, None)


def _tensors(r):
    """The arrays of a quantize / group_quantize result, for the byte comparison."""
    if hasattr(r, "rowwise_data"):
        names = ("rowwise_data", "rowwise_scales", "rowwise_amax", "columnwise_data", "columnwise_scales",
                 "columnwise_amax")
        return [getattr(r, n) for n in names if getattr(r, n) is not None]
    return [t for op in (r.rowwise, r.columnwise) if op is not None
            for t in (op.data, op.scales, op.amax) if t is not None]


def cases_multi_launch(torch, fp4kit, quick):
    """The ops whose plans launch two or more kernels (host-side variants such as
    py:fp4kit._torch_exec.PDL): NVFP4 quantize with a computed or supplied amax, MXFP8 / MXFP6 "both"
    with compact scales (4096^2 and 8192^2), and group_quantize at 65536 x 7168, G = 8 (device dims,
    sizes % 128). No per-member loops (a name's 'loop' entry is absent); the part is '' (no prebuild)."""
    from bench import _bytes_out, _moe_dims
    shapes = ((4096, 4096),) if quick else ((4096, 4096), (8192, 8192))
    for M, K in shapes:
        x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        amax = x.abs().amax().float().reshape(1)
        for fmt, axis, layout, sup in (("nvfp4", "rowwise", "swizzled", False), ("nvfp4", "rowwise", "swizzled", True),
                                       ("nvfp4", "both", "swizzled", False), ("nvfp4", "both", "compact", True),
                                       ("mxfp8_e4m3", "both", "compact", False), ("mxfp6_e3m2", "both", "compact", False)):
            nb = M * K * 2 + _bytes_out(fmt, M, K, axis)
            kw = {"amax": amax} if sup else {}
            yield (f"{M}x{K} {fmt} {axis} {layout}{' amax' if sup else ''}",
                   lambda x=x, fmt=fmt, axis=axis, layout=layout, kw=kw: _tensors(
                       fp4kit.quantize(x, fmt, axis=axis, scale_layout=layout, **kw)), nb, "")
    total, K = 65536, 7168
    x = torch.randn(total, K, device="cuda").to(torch.bfloat16)
    dims, dims_dev, _, _ = _moe_dims(8, total, 128)
    for fmt, axis in (("mxfp8_e4m3", "rowwise"), ("mxfp4_e2m1", "both"), ("nvfp4", "both")):
        nb = total * K * 2 + _bytes_out(fmt, total, K, axis)
        yield (f"G=8 {fmt} {axis}", lambda fmt=fmt, axis=axis: _tensors(
            fp4kit.group_quantize(x, fmt, first_dims=dims_dev, axis=axis, scale_layout="swizzled")), nb, "")


def cases_sequence(torch, fp4kit, quick):
    """Sequences of fp4kit calls back to back (host-side variants such as
    py:fp4kit._torch_exec.PDL_ALL): 64 quantize calls on 1024 x 7168 slices of one bfloat16 tensor
    (the scale of the G = 64 per-member loops; MXFP8, and NVFP4 with its computed amax's memset),
    then 8 quantize and dequantize calls on 2048 x 7168 slices (one-kernel plans, NVFP4's computed
    amax, the raw dequantize launch). No per-member loops; the part is '' (no prebuild)."""
    from bench import _bytes_out
    K = 7168
    full = (("mxfp8_e4m3", "rowwise"), ("mxfp4_e2m1", "rowwise"), ("nvfp4", "rowwise"), ("mxfp8_e4m3", "both"))
    for n, M, specs in ((64, 1024, (("mxfp8_e4m3", "rowwise"), ("nvfp4", "rowwise"))),
                        (8, 2048, full[::2] if quick else full)):
        x = torch.randn(n * M, K, device="cuda").to(torch.bfloat16)
        xs = [x[i * M:(i + 1) * M] for i in range(n)]
        for fmt, axis in specs:
            nb = n * (M * K * 2 + _bytes_out(fmt, M, K, axis))
            yield (f"{n}x quantize {fmt} {axis} {M}x{K}", lambda xs=xs, fmt=fmt, axis=axis: [_tensors(
                fp4kit.quantize(t, fmt, axis=axis, scale_layout="swizzled")) for t in xs], nb, "")
            if axis == "rowwise" and n == 8:
                qs = [fp4kit.quantize(t, fmt, axis=axis, scale_layout="swizzled") for t in xs]
                yield (f"{n}x dequantize {fmt} -> bfloat16 {M}x{K}",
                       lambda qs=qs: [fp4kit.dequantize(q, dtype="bfloat16") for q in qs], nb, "")


CASES = {"dequantize": cases_dequantize, "rows": cases_rows, "recipes": cases_recipes, "group_rows": cases_group_rows, "group_rows_ext": cases_group_rows_ext, "group_both": cases_group_both, "group_both_ext": cases_group_both_ext, "group_dequantize": cases_group_dequantize, "multi_launch": cases_multi_launch, "sequence": cases_sequence}


def _bytes_of(out):
    import torch
    if isinstance(out, (list, tuple)):
        return np.concatenate([_bytes_of(t).reshape(-1) for t in out]) if out else np.zeros(0, np.uint8)
    t = out.data if hasattr(out, "data") and not isinstance(out, torch.Tensor) else out
    t = torch.as_tensor(t) if not isinstance(t, torch.Tensor) else t
    return t.contiguous().view(torch.uint8).cpu().numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", required=True)
    ap.add_argument("--cases", required=True, choices=sorted(CASES))
    ap.add_argument("--variant", action="append", required=True, metavar="NAME=DEF;DEF")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2, help="passes over the variants (medians of the rounds)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--once", default="", metavar="CASE",
                    help="run CASE (its loop too: 'CASE loop') once under the first variant between "
                         "cudaProfilerStart / Stop, after a warm-up call (for ncu --profile-from-start off)")
    args = ap.parse_args()
    import torch

    import fp4kit
    from bench import copy_us, time_fn
    try:
        variants = parse_variants(args.variant)
    except ValueError as e:
        ap.error(str(e))
    arch = _loader.device_arch(0)
    cases = list(CASES[args.cases](torch, fp4kit, args.quick))
    parts = sorted({c[3] for c in cases if c[3]})
    _prebuild(args.module, variants, arch, parts)
    if args.once:
        if args.once not in [c[0] for c in cases]:
            ap.error(f"--once {args.once!r}: not a case of {args.cases} ({', '.join(c[0] for c in cases)})")
        _activate(args.module, next(iter(variants.values())))
        for name, fn, nb, part in cases:
            if name == args.once:
                fn()
                torch.cuda.synchronize()
                torch.cuda.profiler.start()
                fn()
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
        _restore(args.module)
        return
    poison = _cuda.poison_enabled()
    res = {}
    ref = {}
    mismatches = []
    for rnd in range(args.rounds):
        for vname, defs in variants.items():
            _activate(args.module, defs)
            for name, fn, nb, part in cases:
                if name.endswith(" loop") and vname != next(iter(variants)):
                    continue   # a loop of single-tensor launches: the same under every variant
                check = not name.endswith(" loop") and rnd == 0
                if check:       # poisoned outputs: bytes a kernel leaves unwritten compare equal, not as garbage
                    _cuda.set_poison(True)
                out = fn()
                torch.cuda.synchronize()
                _cuda.set_poison(poison)
                if check:
                    b = _bytes_of(out)
                    if vname == next(iter(variants)):
                        ref[name] = b
                    elif not np.array_equal(b, ref[name]):
                        print(f"MISMATCH {vname} {name}", flush=True)
                        mismatches.append((vname, name))
                res.setdefault((name, vname), []).append(float(time_fn(fn, reps=args.reps)))
    copies = {}
    print(f"\n{torch.cuda.get_device_name(0)}; us (median of {args.rounds} rounds), % of a device copy of the same bytes; "
          "loop: the case's launches per member")
    names = list(variants)
    print(f"{'case':<34}" + "".join(f"{n:>16}" for n in names) + f"{'loop':>16}")
    for name, fn, nb, part in cases:
        if name.endswith(" loop"):
            continue
        if nb not in copies:
            copies[nb] = float(copy_us(nb, args.reps))
        cells = []
        for n in names:
            us = statistics.median(res[(name, n)])
            cells.append(f"{us:8.1f} {100 * copies[nb] / us:5.1f}%")
        loop = res.get((name + " loop", names[0]))
        if loop:
            lu = statistics.median(loop)
            cells.append(f"{lu:8.1f} {100 * copies[nb] / lu:5.1f}%")
        else:
            cells.append("-")
        print(f"{name:<34}" + "".join(f"{c:>16}" for c in cells), flush=True)
    _restore(args.module)
    if mismatches:
        sys.exit(f"{len(mismatches)} outputs differ from variant {names[0]!r}'s")


if __name__ == "__main__":
    main()

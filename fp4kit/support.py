"""What is supported, read from the code: format x op x variant x backend (CPU reference, GPU generations).

Nothing here is a hand-kept list of answers:

* formats come from ``fp4kit.FORMATS``; whether a format takes a variant is decided by running the
  option validation (``fp4kit._validate.quantize_options``) on a small valid input;
* the CPU column asks ``fp4kit.reference`` for the op;
* the GPU columns look at the source tree without importing CuPy: the op's device function in
  ``fp4kit/_device_api.py``, the Python modules it needs, the CUDA source file and the
  ``QFLAG_*`` bit of the variant, which some CUDA source other than ``enums.cuh`` must read; the sm_100a codec note looks for the
  native ``cvt`` instructions (``e2m1x2``, ``e2m3x2``/``e3m2x2``, ``ue8m0x2``) in ``cuda_src/``.

``scripts/update_readme_matrix.py`` writes ``render_markdown()`` into the README between the
support-matrix markers, and ``tests/test_support_matrix.py`` fails when that copy is stale.
"""
from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from .formats import DTYPES, FORMATS

__all__ = ["SupportRow", "support_matrix", "render_markdown", "BACKENDS"]

BACKENDS = ("CPU reference", "sm_90 (Hopper)", "sm_100a (Blackwell)")

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class _Case:
    op: str
    variant: str
    options: dict           # quantize options that select the variant (validated per format)
    dtype: str = "float32"
    kernel: str | None = None       # cuda_src/<kernel> needed on the GPU
    flag: str | None = None         # QFLAG_* bit that the kernel source must read
    modules: tuple = ()             # fp4kit submodules the device path needs


_CASES = (
    _Case("quantize", "rowwise / columnwise / both", {"axis": "both"}, kernel="quantize.cu", flag="QFLAG_COLUMNWISE"),
    _Case("quantize", "swizzled scales", {"scale_layout": "swizzled"}, kernel="quantize.cu", flag="QFLAG_SWIZZLED"),
    _Case("quantize", "scale_rule=floor", {"scale_rule": "floor"}, kernel="quantize.cu", flag="QFLAG_RULE_FLOOR"),
    _Case("quantize", "tile_2d", {"tile_2d": True, "axis": "both"}, kernel="quantize.cu", flag="QFLAG_TILE_2D"),
    _Case("quantize", "row_scaled", {"row_scaled": True, "axis": "both"}, kernel="quantize.cu", flag="QFLAG_ROW_SCALED"),
    _Case("quantize", "rht (bfloat16 input)", {"rht": True, "axis": "columnwise"}, dtype="bfloat16",
          kernel="quantize.cu", flag="QFLAG_RHT"),
    _Case("quantize", "stochastic rounding", {"rounding": "stochastic"}, kernel="quantize.cu", flag="QFLAG_STOCHASTIC"),
    _Case("dequantize", "to float32 / bfloat16 / float16", {}, kernel="dequantize.cu"),
    _Case("swizzle_scales", "compact <-> swizzled", {}, kernel="swizzle.cu"),
    _Case("group_quantize", "same / varying_first / varying_last / varying_both", {"axis": "both"},
          modules=("_grouped_device",)),
    _Case("group_dequantize", "every member", {}, modules=("_grouped_device",)),
    _Case("qmatmul", "two quantized operands", {}),
)


@dataclass(frozen=True)
class SupportRow:
    """One line of the matrix: an op and variant, which formats take it, which backends run it."""

    op: str
    variant: str
    formats: tuple      # ((format name, allowed), ...) in FORMATS order
    backends: tuple     # ((backend name, available), ...) in BACKENDS order

    def allowed(self, fmt: str) -> bool:
        return dict(self.formats)[fmt]

    def available(self, backend: str) -> bool:
        return dict(self.backends)[backend]


def _cuda_src() -> Path | None:
    for p in (_HERE / "cuda_src", _HERE.parent / "cuda_src"):
        if p.is_dir():
            return p
    return None


def _cuda_text() -> str:
    """Every CUDA source except the enum header (where each flag is only defined, not read)."""
    src = _cuda_src()
    if src is None:
        return ""
    return "\n".join(p.read_text(errors="replace") for p in sorted(src.rglob("*"))
                     if p.suffix in (".cu", ".cuh") and p.name != "enums.cuh")


def _device_functions() -> set[str]:
    p = _HERE / "_device_api.py"
    if not p.is_file():
        return set()
    tree = ast.parse(p.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def _module_exists(name: str) -> bool:
    return importlib.util.find_spec(f"fp4kit.{name}") is not None


def _format_allows(case: _Case, fmt: str) -> bool:
    if case.op not in ("quantize", "group_quantize"):
        return True
    from ._validate import quantize_options
    try:
        quantize_options((32, 32), case.dtype, fmt, **case.options)
    except (TypeError, ValueError):
        return False
    return True


def _gpu_available(case: _Case, device_fns: set[str], cuda: str) -> bool:
    if case.op not in device_fns or not _module_exists("_cuda"):
        return False
    if not all(_module_exists(m) for m in case.modules):
        return False
    src = _cuda_src()
    if case.kernel is not None and (src is None or not (src / case.kernel).is_file()):
        return False
    if case.flag is not None and case.flag not in cuda:
        return False
    return True


def support_matrix() -> list[SupportRow]:
    """The support matrix as rows, generated from the code (see the module docstring).

    Returns:
        list of SupportRow: ``op``, ``variant``, ``formats`` ((name, allowed) for every format of
        ``fp4kit.FORMATS``) and ``backends`` ((name, available) for ``BACKENDS``).

    Example:
        >>> from fp4kit.support import support_matrix
        >>> rows = support_matrix()
        >>> [r.allowed("nvfp4") for r in rows if r.variant == "tile_2d"]
        [True]
    """
    from . import reference
    device_fns = _device_functions()
    cuda = _cuda_text()
    rows = []
    for case in _CASES:
        fmts = tuple((f, _format_allows(case, f)) for f in FORMATS)
        cpu = hasattr(reference, case.op)
        gpu = _gpu_available(case, device_fns, cuda)
        rows.append(SupportRow(case.op, case.variant, fmts, ((BACKENDS[0], cpu), (BACKENDS[1], gpu), (BACKENDS[2], gpu))))
    return rows


def _notes(cuda: str) -> list[str]:
    found = [n for n, on in (("E2M1 (`cvt.rn.satfinite.e2m1x2.f32`)", "cvt.rn.satfinite.e2m1x2" in cuda),
                             ("E2M3 / E3M2 (`cvt.rn.satfinite.{e2m3,e3m2}x2.f32`)",
                              "cvt.rn.satfinite.e2m3x2" in cuda and "cvt.rn.satfinite.e3m2x2" in cuda),
                             ("E8M0 rceil scales (`cvt.rp.satfinite.ue8m0x2.f32`)",
                              "cvt.rp.satfinite.ue8m0x2" in cuda)) if on]
    if found:
        native = ", ".join(found[:-1]) + " and " + found[-1] if len(found) > 1 else found[0]
        sm100 = (f"sm_100a uses the native conversions for {native}, designed to give the software "
                 "conversions' bytes; that path is compile-checked in CI but has not yet run on a Blackwell GPU "
                 "(the exhaustive codec tests in `tests/gpu` check it on the first one)")
    else:
        sm100 = "sm_100a runs the same software conversions as sm_90 (no native FP4/E8M0 `cvt` in `cuda_src/` yet)"
    return [
        f"Input dtypes: {', '.join(DTYPES)} (NumPy bfloat16 is `ml_dtypes.bfloat16`); `rht` needs bfloat16.",
        "sm_90 has no native FP4 / FP6 / E8M0 conversion instructions: it converts in software (FP6 through its FP8 conversions, docs/design.md); " + sm100 + ".",
        "Every GPU result checked so far (on Hopper) is byte-identical to the CPU reference "
        "(`python -m fp4kit check`).",
    ]


def render_markdown() -> str:
    """The matrix as a Markdown table plus notes (what the README shows between its markers).

    Example:
        >>> from fp4kit.support import render_markdown
        >>> render_markdown().splitlines()[0].startswith("| op | variant |")
        True
    """
    rows = support_matrix()
    fmts = list(FORMATS)
    head = ["op", "variant", *[f"`{f}`" for f in fmts], *BACKENDS]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        cells = [f"`{r.op}`", r.variant]
        cells += ["✓" if ok else "—" for _, ok in r.formats]
        cells += ["✓" if ok else "—" for _, ok in r.backends]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {n}" for n in _notes(_cuda_text())]
    lines.append("")
    lines.append("Generated from the code by `python scripts/update_readme_matrix.py` (format ✓: the option "
                 "validation accepts it; GPU ✓: the device function, its kernel and the variant's kernel flag exist).")
    return "\n".join(lines)

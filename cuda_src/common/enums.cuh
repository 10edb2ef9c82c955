// fp4kit: integer codes shared with fp4kit/formats.py and docs/design.md ("Contracts").
// Keep the numbers in step with the Python side; tests/gpu/test_enums_sync.py checks them.
#pragma once

namespace fp4kit {

// Format.format_id
enum FormatId : int {
    FORMAT_MXFP8_E4M3 = 0,
    FORMAT_MXFP8_E5M2 = 1,
    FORMAT_MXFP6_E2M3 = 2,
    FORMAT_MXFP6_E3M2 = 3,
    FORMAT_MXFP4_E2M1 = 4,
    FORMAT_NVFP4 = 5,
};

// SCALE_RULES
enum ScaleRule : int {
    SCALE_RULE_RCEIL = 0,
    SCALE_RULE_FLOOR = 1,
};

// SCALE_LAYOUTS
enum ScaleLayout : int {
    SCALE_LAYOUT_COMPACT = 0,
    SCALE_LAYOUT_SWIZZLED = 1,
};

// ROUNDINGS
enum Rounding : int {
    ROUNDING_NEAREST = 0,
    ROUNDING_STOCHASTIC = 1,
};

// DTYPES (bfloat16 travels as uint16 bits)
enum InputDtype : int {
    DTYPE_FLOAT32 = 0,
    DTYPE_BFLOAT16 = 1,
    DTYPE_FLOAT16 = 2,
};

// AXES
enum Axis : int {
    AXIS_ROWWISE = 0,
    AXIS_COLUMNWISE = 1,
    AXIS_BOTH = 2,
};

// Bits of the `flags` argument of the quantize kernels (launcher side: fp4kit/_cuda.py).
enum QuantizeFlag : int {
    QFLAG_ROWWISE = 1 << 0,
    QFLAG_COLUMNWISE = 1 << 1,
    QFLAG_SWIZZLED = 1 << 2,
    QFLAG_RULE_FLOOR = 1 << 3,
    QFLAG_STOCHASTIC = 1 << 4,
    QFLAG_TILE_2D = 1 << 5,
    QFLAG_ROW_SCALED = 1 << 6,
    QFLAG_RHT = 1 << 7,
    QFLAG_VEC_IN = 1 << 8,   // input rows are 16-byte aligned: vector loads allowed
    // Columnwise / rowwise scales in the swizzled layout even though QFLAG_SWIZZLED is off: the
    // launcher passes a staging buffer and unswizzles it into the compact output afterwards.
    QFLAG_COL_SCALES_SWZ = 1 << 9,
    QFLAG_ROW_SCALES_SWZ = 1 << 10,
    // NVFP4 tile kernels, one amax per operand: amax_row / amax_col point to the operands' multiplier
    // tables (NV_TAB + 1 floats each, written by quantize.cu nvfp4_enc_tables), not to their amaxes.
    QFLAG_ENC_TABS = 1 << 11,
};
// The extended options: only the full (EXT) quantize kernels honour them.
constexpr int QFLAG_EXT_ALL = QFLAG_STOCHASTIC | QFLAG_ROW_SCALED | QFLAG_TILE_2D | QFLAG_RHT;

}  // namespace fp4kit

"""scripts/bench.py's host-side helpers (no GPU): MoE member sizes, the expected row count, the
optional torchao baseline."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench(script):
    return script("bench")


@pytest.mark.parametrize("G,multiple", [(8, 2), (8, 128), (64, 2), (64, 128)])
def test_skewed_dims(bench, G, multiple):
    d = bench._skewed_dims(G, 65536, seed=G, multiple=multiple)
    assert len(d) == G and sum(d) == 65536
    assert all(v % multiple == 0 and v >= 0 for v in d)
    assert any(v == 0 for v in d)                       # some experts get no tokens
    assert max(d) > 3 * (65536 // G)                    # skewed, not uniform


def test_expected_rows_matches_the_loops(bench):
    # quick: one shape, three formats (one NVFP4: two variants), rowwise + both (both: 2 layouts)
    n = bench.expected_rows([(8192, 8192)], ("mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"), ("rowwise", "both"))
    quant = 3 + 3 + 6                                   # mxfp8, mxfp4: 1 + 2 rows; nvfp4: 2 x (1 + 2)
    # ragged: MXFP8, MXFP6, MXFP4 and NVFP4 (two variants)
    ragged = 2 + 2 + 2 + 4                              # 8200 x 8192 "both", two layouts; nvfp4 x 2
    # + dequantize, swizzle, recipes, grouped (4 size sets x MXFP8 / NVFP4 rowwise / both + NVFP4
    # "both" with supplied amaxes + "both" of MXFP8 compact, MXFP4 and MXFP6 in both layouts + MXFP4 /
    # NVFP4 "both" with stochastic rounding)
    assert n == quant + ragged + 3 * 2 + 1 + 3 + 4 * 12


def test_tail_lines_only_for_sections_that_ran(bench):
    """The lines printed after the op rows: no empty small-input table (an --only run without the
    "small" section printed its header and repeated the last op row)."""
    assert bench.tail_lines([], None) == []
    small = bench.tail_lines([(1, "torch bfloat16", "nvfp4", 17.25, 16.04, 19.5)], None)
    assert small == ["", "| M x 4096 | input | format | host us/call (median of rounds) | fastest - slowest round |",
                     "|---|---|---|---|---|", "| 1 | torch bfloat16 | nvfp4 | 17.2 | 16.0 - 19.5 |", "",
                     "(host times not pinned: --cpu N pins them)"]
    assert bench.tail_lines([(1, "torch bfloat16", "nvfp4", 17.25, 16.04, 19.5)], None, 3)[-1] == \
        "(host times pinned to CPU 3)"
    start = bench.tail_lines([], (2.2, 0.51, 166))
    assert len(start) == 2 and start[0] == "" and "166 cubins" in start[1] and "0.51 s" in start[1]
    assert not any("|" in line for line in start)


def test_torchao_baseline_is_optional(bench):
    call, label = bench.torchao_mxfp8()
    call4, label4 = bench.torchao_nvfp4()
    if importlib.util.find_spec("torchao") is None:
        assert call is None and "torchao not importable" in label
        assert call4 is None and "torchao NVFP4 not importable" in label4
        assert bench.torchao_rows([(8192, 8192), (16384, 16384)]) == 0
    else:
        assert callable(call) or "torchao not importable" in label
        assert callable(call4) or "torchao NVFP4 not importable" in label4


def test_torchao_nvfp4_baseline_calls_its_quantizer(bench, monkeypatch):
    """With a torchao that has nvfp4_quantize (a stand-in module here), the baseline passes the
    per-tensor scale of the amax and blocks of 16, and hands back uint8 views of its two outputs."""
    import sys
    import types
    seen = []

    class T:
        def __init__(self, what):
            self.what = what

        def view(self, dtype):
            return (self.what, dtype)

    def quant(x, block, scale):
        seen.append((x, block, scale))
        return T("scales"), T("codes")

    mod = types.ModuleType("torchao.prototype.mx_formats.nvfp4_tensor")
    mod.nvfp4_quantize = quant
    mod.per_tensor_amax_to_scale = lambda a: ("scale of", a)
    pkg = types.ModuleType("torchao.prototype.mx_formats")
    pkg.nvfp4_tensor = mod
    for name, m in (("torchao", types.ModuleType("torchao")), ("torchao.prototype", types.ModuleType("torchao.prototype")),
                    ("torchao.prototype.mx_formats", pkg), ("torchao.prototype.mx_formats.nvfp4_tensor", mod)):
        monkeypatch.setitem(sys.modules, name, m)
    monkeypatch.setattr(bench, "_torch", lambda: types.SimpleNamespace(uint8="u8"))
    call, label = bench.torchao_nvfp4()
    assert label == "torchao nvfp4_quantize"
    assert call("x", 4.0) == (("scales", "u8"), ("codes", "u8"))
    assert seen == [("x", 16, ("scale of", 4.0))]


@pytest.mark.parametrize("shapes", ["4096", "4096x0", "ax8", "4096x4096x2"])
def test_bad_shapes_are_a_usage_error(bench, shapes, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--shapes", shapes])
    assert e.value.code == 2
    assert "--shapes" in capsys.readouterr().err


def test_fastpath_cpu_cost_script_runs():
    """scripts/fastpath_cpu_cost.py stubs torch and the driver to time fp4kit's own Python on the
    fast path; it reaches into executor internals, so a quick run keeps it in step with them."""
    import subprocess
    script = ROOT / "scripts" / "fastpath_cpu_cost.py"
    r = subprocess.run([sys.executable, str(script), "--number", "5"], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = r.stdout.strip().splitlines()[1:]
    assert len(rows) >= 14 and all(float(row.split()[0]) > 0 for row in rows), r.stdout
    assert any("_device_api.quantize(x, 'nvfp4')" in row for row in rows)


def test_scripts_have_no_repeated_dict_keys():
    """A dict literal that names a key twice keeps only the last value (scripts/kernel_times.py's
    OPS once held two different "mxfp4-both-16k" ops, the first unreachable)."""
    import ast
    for path in sorted((ROOT / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict):
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                dup = {k for k in keys if keys.count(k) > 1}
                assert not dup, f"{path.name}:{node.lineno}: keys given twice: {sorted(dup)}"

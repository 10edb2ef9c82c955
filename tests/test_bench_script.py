"""scripts/bench.py's host-side helpers (no GPU): MoE member sizes, the expected row count, the
optional torchao baseline, the argument checks, the timing loop's spin cap, the table / CSV written
as rows come and when a run stops early, and (with torch installed: CI installs only the [test]
extra, so these skip there) the PyTorch baselines' bytes against fp4kit.reference and every section
of the benchmark run on the CPU through stand-ins for the GPU calls."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
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
    # quick: one shape, three formats (one NVFP4: two variants), rowwise + both (each in 2 layouts)
    n = bench.expected_rows([(8192, 8192)], ("mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"), ("rowwise", "both"))
    quant = 4 + 4 + 8                                   # mxfp8, mxfp4: 2 + 2 rows; nvfp4: 2 x (2 + 2)
    # ragged: MXFP8, MXFP6, MXFP4 and NVFP4 (two variants)
    ragged = 2 + 2 + 2 + 4                              # 8200 x 8192 "both", two layouts; nvfp4 x 2
    # + dequantize (to bfloat16, float16 and float32), swizzle, recipes, grouped (4 size sets x MXFP8 / NVFP4 rowwise / both +
    # MXFP4 rowwise + NVFP4 rowwise and "both" with supplied amaxes + "both" of MXFP8 compact, MXFP4 and MXFP6
    # in both layouts + MXFP4 / NVFP4 "both" with stochastic rounding) and grouped dequantize (2 size sets x 4
    # formats x 2 dtypes)
    assert n == quant + ragged + 3 * 3 + 1 + 3 + 4 * 14 + 2 * 4 * 2


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
    for startup in ((2.2, 0.51, 166), bench.Startup(2.2, 0.51, 166)):
        start = bench.tail_lines([], startup)
        assert len(start) == 2 and start[0] == "" and "166 cubins" in start[1] and "0.51 s" in start[1]
        assert not any("|" in line for line in start)
    failed = bench.tail_lines([], bench.Startup(16.6, None, 166, "warm start took over 600 s"))
    assert failed == ["", "start-up (cold and warm start in fresh processes) not measured: warm start took over "
                      "600 s (cold start 16.6 s, 166 cubins, before that)"]
    assert bench.tail_lines([], bench.Startup(None, None, None, "cold start exited with status 1: boom"))[1] == \
        "start-up (cold and warm start in fresh processes) not measured: cold start exited with status 1: boom"


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


# --------------------------------------------------------------------------------------------
# argument checks, partial results, start-up failures, the spin cap (no torch needed)

class _Stop(Exception):
    """Raised by a stand-in where bench.main would start GPU work: the arguments were accepted."""


@pytest.mark.parametrize("argv,ok", [
    (["--shapes", "4095x4096"], False),                                  # default formats hold FP4
    (["--shapes", "4096x4095", "--only", "dequantize"], False),          # rowwise dequantize: K even
    (["--shapes", "4096x4096,16x7"], False),
    (["--shapes", "4095x4096", "--only", "dequantize"], True),           # odd M: dequantize is rowwise
    (["--shapes", "4095x4095", "--formats", "mxfp8_e4m3,mxfp6_e2m3"], True),
    (["--shapes", "4095x4095", "--only", "swizzle,recipes"], True),
    (["--shapes", "4096x4096"], True),
])
def test_fp4_shapes_are_checked_up_front(bench, monkeypatch, capsys, argv, ok):
    """FP4 packs two codes per byte along the quantized axis: an odd M or K with an FP4 format is a
    usage error before anything runs (it used to raise ValueError partway through the run)."""
    def stop():
        raise _Stop
    monkeypatch.setattr(bench, "_torch", stop)
    if ok:
        with pytest.raises(_Stop):
            bench.main(argv)
        return
    with pytest.raises(SystemExit) as e:
        bench.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--shapes:" in err and "pack two codes per byte" in err and "nvfp4" in err


def _fake_cuda_torch(name="Test GPU"):
    import types
    return types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_name=lambda: name))


def _a_row(bench, us=10.0, variant=""):
    return bench._row("quantize", "mxfp8_e4m3", "rowwise", "compact", variant, "64x64", us, 12288, 8.0, eager=20.0,
                      base=30.0, label="torch.compile (bytes exact vs reference: yes)")


def test_partial_results_survive_an_exception(bench, monkeypatch, tmp_path):
    """The table and the CSV are rewritten after every row and once more when the run stops: an
    exception in a later section keeps the rows measured before it, and says where it stopped."""
    import csv
    import fp4kit
    md, cs = tmp_path / "b.md", tmp_path / "b.csv"
    seen = []

    def quantize_section(rows, *a):
        rows.append(_a_row(bench))
        bench._emit(rows)
        seen.append(md.read_text())                     # written already, before the run ends
        rows.append(_a_row(bench, us=12.0, variant="second"))
        bench._emit(rows)
        raise RuntimeError("device lost | really")

    monkeypatch.setattr(bench, "_torch", _fake_cuda_torch)
    monkeypatch.setattr(fp4kit, "warmup", lambda: None)
    monkeypatch.setattr(bench, "bench_quantize", quantize_section)
    with pytest.raises(RuntimeError, match="device lost"):
        bench.main(["--only", "quantize,startup", "--md", str(md), "--csv", str(cs)])
    assert "| quantize | mxfp8_e4m3 | rowwise | compact |  | 64x64 | 10.0 | 12288 |" in seen[0]
    text = md.read_text()
    assert text.startswith("# fp4kit benchmarks on Test GPU\n")
    assert "| 64x64 | 12.0 | 12288 |" in text and "| 3.00x |" in text
    assert text.rstrip().endswith("(run stopped early after 2 rows by RuntimeError: device lost / really; the rows "
                                  "above are what it measured)")
    with open(cs, newline="") as fh:
        got = list(csv.DictReader(fh))
    assert [r["device"] for r in got] == ["Test GPU"] * 2 and [r["us"] for r in got] == ["10.0", "12.0"]
    assert got[0]["bytes"] == "12288" and got[1]["variant"] == "second"
    assert bench._REPORT is None and bench._PROGRESS is None


def test_a_complete_run_writes_table_and_csv(bench, monkeypatch, tmp_path, capsys):
    import fp4kit
    md, cs = tmp_path / "b.md", tmp_path / "b.csv"

    def dq(rows, *a):
        rows.append(_a_row(bench))
        bench._emit(rows)
    monkeypatch.setattr(bench, "_torch", _fake_cuda_torch)
    monkeypatch.setattr(fp4kit, "warmup", lambda: None)
    monkeypatch.setattr(bench, "bench_dequantize", dq)
    monkeypatch.setattr(bench, "bench_startup", lambda: bench.Startup(None, None, None, "cold start took over 600 s"))
    bench.main(["--only", "dequantize,startup", "--md", str(md), "--csv", str(cs)])
    text = md.read_text()
    assert "run stopped early" not in text
    assert text.rstrip().endswith("start-up (cold and warm start in fresh processes) not measured: cold start took "
                                  "over 600 s")
    assert cs.read_text().splitlines()[0].startswith("device,op,format,axis,layout,variant,shape,us,bytes,")
    assert "bench summary on Test GPU: 1 rows, worst copy% 80" in capsys.readouterr().out


def test_startup_failures_are_reported_not_raised(bench, monkeypatch):
    import subprocess
    import types
    calls = []

    def timeout(cmd, **kw):
        calls.append(kw["timeout"])
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])
    monkeypatch.setattr(bench.subprocess, "run", timeout)
    r = bench.bench_startup(timeout=5)
    assert calls == [5] and r == bench.Startup(None, None, None, "cold start took over 5 s")
    outs = iter([types.SimpleNamespace(returncode=0, stdout="1.5 2.0\n", stderr=""),
                 types.SimpleNamespace(returncode=1, stdout="", stderr="Traceback\nRuntimeError: no GPU\n")])
    monkeypatch.setattr(bench.subprocess, "run", lambda cmd, **kw: next(outs))
    r = bench.bench_startup()
    assert r.cold == 1.5 and r.warm is None and r.error == "warm start exited with status 1: RuntimeError: no GPU"
    monkeypatch.setattr(bench.subprocess, "run", lambda cmd, **kw: types.SimpleNamespace(returncode=0, stdout="hi",
                                                                                         stderr=""))
    assert "printed 'hi', not two times" in bench.bench_startup().error


class _FakeEvent:
    def __init__(self, log, late):
        self.log, self.late = log, late

    def record(self):
        pass

    def query(self):
        return self.late()

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 0.001 * (1 + len(self.log))


def _fake_timing_torch(late):
    import types
    log = []

    def props(i):
        raise RuntimeError("no device")
    cuda = types.SimpleNamespace(synchronize=lambda: None, _sleep=log.append, get_device_properties=props,
                                 Event=lambda enable_timing: _FakeEvent(log, late))
    return types.SimpleNamespace(cuda=cuda), log


def test_time_fn_caps_its_spin(bench, monkeypatch):
    """Runs that come back late double the spin up to SPIN_CAP_S (it used to double without bound);
    past the cap a late run is kept and the result says so."""
    torch, spins = _fake_timing_torch(late=lambda: True)
    monkeypatch.setattr(bench, "_torch", lambda: torch)
    t = bench.time_fn(lambda: None, reps=10, warmup=1)
    cap = int(bench.SPIN_CAP_S * 2.0e9)
    assert max(spins) == cap and all(s <= cap for s in spins)
    assert t.capped and t.late == 10 and t.runs == 10 and isinstance(t, float)
    assert t.note() == "spin at its 50 ms cap, 10 of 10 runs late (host time included)"
    row = bench._row("quantize", "nvfp4", "rowwise", "compact", "", "8x8", t, 100, bench.Timing(2.0))
    assert row["timing"] == "op: " + t.note()
    assert "[timing: op: spin at its 50 ms cap" in bench._fmt_row(row)
    # one late run: the spin doubles once, the run is repeated, nothing to report
    flags = iter([True] + [False] * 100)
    torch, spins = _fake_timing_torch(late=lambda: next(flags))
    monkeypatch.setattr(bench, "_torch", lambda: torch)
    t = bench.time_fn(lambda: None, reps=5, warmup=1)
    assert spins[1] == 2 * spins[0] and len(spins) == 6 and not t.capped and t.late == 0 and t.note() == ""


def test_row_and_table_cells(bench):
    r = bench._row("quantize", "nvfp4", "both", "swizzled", "supplied amax", "8x8", 10.0, 2000, 5.0, eager=None,
                   base=40.0, exact=False, label="torch.compile (bytes exact vs reference: NO: a | b\nc)")
    assert r["speedup"] is None and r["baseline_us"] == 40.0 and r["copy_pct"] == 50.0 and r["gbs"] == 0.2
    line = bench._fmt_row(r)
    assert line == ("| quantize | nvfp4 | both | swizzled | supplied amax | 8x8 | 10.0 | 2000 | 0 | 50% | - | - | "
                    "torch.compile (bytes exact vs reference: NO: a / b c) |")
    assert bench._row("q", "f", "a", "l", "", "1x1", 10.0, 1, 1.0, base=25.0)["speedup"] == 2.5
    assert len(bench.HEADER.splitlines()[0].split("|")) == len(line.split("|"))


# --------------------------------------------------------------------------------------------
# the PyTorch baselines against fp4kit.reference (torch on the CPU; skipped without torch)

FORMATS = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4")


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="the baselines' CPU tests need torch (not in the [test] extra)")


def _bf16(torch, a):
    """A float32 NumPy array -> a bfloat16 torch tensor (the values must be bfloat16 values)."""
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16)


def _special_rows(torch, K, seed=0):
    """bfloat16 rows of random values at several scales with zeros, signed zeros, infinities, NaNs of
    both signs, huge and tiny (subnormal) values, an all-NaN block, an all-zero row and an inf row."""
    import ml_dtypes
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((12, K)) * np.array([1, 1e-3, 1e3, 3, 1e30, 1e-30, 1, 1, 1, 1, 1, 1])[:, None])
    bmax = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    tiny = float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal)
    sp = [0.0, -0.0, np.inf, -np.inf, np.nan, bmax, -bmax, tiny, -tiny, 1e-38, 7.0, -448.0, 57344.0, 6.0, -6.0]
    x[6, :len(sp)] = sp
    x[7, : K // 2] = np.nan
    x[8] = 0.0
    x[9, ::3] = np.inf
    x[10] = -0.0
    x[11, 1::2] = -x[11, 1::2] * 1e-40
    t = _bf16(torch, x.astype(np.float32))
    t.view(torch.int16)[6, 15] = -64                                   # 0xFFC0: a NaN with its sign bit set
    t.view(torch.int16)[11, 0] = -64
    return t


def _tie_rows(bench, torch, fmt, K=64):
    """float32 rows whose blocks start with a value that gives them the scale 1 (MX: the element max,
    E = 127; NVFP4 under amax 2688: 6, block scale 1.0 and S_enc 1) followed by every midpoint of the
    element grid (ties), one float32 ulp either side, and the grid values, both signs."""
    import fp4kit
    from fp4kit.reference.numerics import decode
    f = fp4kit.FORMATS[fmt]
    e = f.elem
    grid = np.unique(np.abs(decode(np.arange(1 << (e.bits - 1), dtype=np.uint8), e.name)))
    grid = grid[np.isfinite(grid)].astype(np.float32)
    mids = ((grid[:-1].astype(np.float64) + grid[1:]) / 2).astype(np.float32)
    vals = np.concatenate([grid, mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))])
    vals = np.concatenate([vals, -vals])
    per = f.block - 1
    rows = []
    for i in range(0, len(vals), per):
        chunk = vals[i:i + per]
        rows.append(np.concatenate([[e.max if f.is_mx else 6.0], chunk, np.zeros(per - len(chunk))]))
    blocks = np.asarray(rows, np.float32)
    n = -(-len(blocks) // (K // f.block)) * (K // f.block)
    blocks = np.concatenate([blocks, np.zeros((n - len(blocks), f.block), np.float32)])
    x = blocks.reshape(-1, K)
    if len(x) % 2:
        x = np.concatenate([x, x[:1]])
    return torch.from_numpy(x)


def _np(bench, t):
    return bench._host(t)


def _assert_quantize_matches(bench, torch, x, fmt, axis, layout, amax_given, amax):
    import fp4kit
    from fp4kit.reference.golden import byte_diff
    spec = bench.format_spec(fmt)
    outs = bench.quantize_torch(x, amax, spec, axis, layout, amax_given)
    kw = {"amax": _np(bench, amax)} if spec.nvfp4 and amax_given else {}
    ref = fp4kit.reference.quantize(_np(bench, x), fmt, axis=axis, scale_layout=layout, **kw)
    want = [a for op in (ref.rowwise, ref.columnwise) if op is not None for a in (op.data, op.scales)]
    assert len(outs) == len(want)
    for i, (got, w) in enumerate(zip(outs, want)):
        d = byte_diff(_np(bench, got), w, f"{fmt} {axis} {layout} output {i}")
        assert d is None, d
    # and the bench's own check (sampled rows) agrees
    assert bench.check_quantize(outs, x, amax if amax_given else None, fmt, axis, layout) is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantize_baselines_match_the_reference(bench, torch, fmt):
    """quantize_torch (eager) gives the reference's bytes for every axis and scale layout (NVFP4 with
    a supplied and a computed amax) on random, special and rounding-tie inputs, bfloat16 and float32,
    with a partial last block (K = 80: MX 32 + 32 + 16) and rows past a multiple of 128."""
    torch.manual_seed(0)
    inputs = [_special_rows(torch, 80), _special_rows(torch, 64, seed=1)[:10],
              (torch.randn(130, 96) * 4).to(torch.bfloat16), _tie_rows(bench, torch, fmt)]
    for x in inputs:
        for axis in ("rowwise", "columnwise", "both"):
            for layout in ("compact", "swizzled"):
                for given in ((True, False) if fmt == "nvfp4" else (True,)):
                    amax = torch.tensor([2688.0 if x.dtype == torch.float32 else 5.0])
                    _assert_quantize_matches(bench, torch, x, fmt, axis, layout, given, amax)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("layout", ["swizzled", "compact"])
def test_dequantize_baselines_match_the_reference(bench, torch, fmt, layout):
    """dequantize_torch gives the reference's bits for every code byte (FP8 NaN codes included) and
    every scale byte (E8M0 0, 254 and the NaN 255; E4M3 scales with their NaN and sign bit), NVFP4
    under amaxes from 0 to huge, into bfloat16, float32 and float16, canonical NaNs."""
    import fp4kit
    from fp4kit.reference.api import dequantize_operand
    from fp4kit.reference.golden import byte_diff
    f = fp4kit.FORMATS[fmt]
    spec = bench.format_spec(fmt)
    rng = np.random.default_rng(3)
    R, cols = 200, 72                                   # partial last block, rows past 128
    nb = f.num_blocks(cols)
    codes = rng.integers(0, 256, (R, f.packed_len(cols)), dtype=np.uint8)
    codes[0, : min(256, codes.shape[1])] = np.arange(min(256, codes.shape[1]), dtype=np.uint8)
    if f.elem.bits == 6:
        codes &= 0x3F
    scales = rng.integers(0, 256, (R, nb), dtype=np.uint8)
    scales[:3, 0] = (0, 254, 255)
    if f.is_mx:
        scales[3:] = rng.integers(100, 150, (R - 3, nb), dtype=np.uint8)    # mostly finite products
    for A in ((None,) if f.is_mx else (1.0, 0.0, 2688.0, 3.0e38)):
        amax = None if A is None else np.array([A], np.float32)
        sc = fp4kit.reference.swizzle_scales(scales) if layout == "swizzled" else scales
        op = fp4kit.Operand(data=codes, scales=scales, scale_layout="compact", amax=amax, rows=R, cols=cols, format=fmt)
        for dt in ("bfloat16", "float32", "float16"):
            y = bench.dequantize_torch(torch.from_numpy(codes), torch.from_numpy(sc),
                                       None if amax is None else torch.from_numpy(amax), spec, cols, dt, layout)
            d = byte_diff(_np(bench, y) if dt != "float16" else y.numpy(), dequantize_operand(op, dt), f"{fmt} {dt} {A}")
            assert d is None, d
            if dt != "float16":
                assert bench.check_dequantize(y, torch.from_numpy(codes), torch.from_numpy(sc),
                                              None if amax is None else torch.from_numpy(amax), fmt, cols, dt,
                                              layout) is None


@pytest.mark.parametrize("shape", [(1, 1), (130, 5), (256, 8), (128, 4), (3, 513)])
def test_swizzle_baseline_matches_the_reference(bench, torch, shape):
    import fp4kit
    s = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    got = bench._swizzle_torch(torch.from_numpy(s)).numpy()
    assert np.array_equal(got, fp4kit.reference.swizzle_scales(s))
    back = bench._unswizzle_torch(torch.from_numpy(got), *shape).numpy()
    assert np.array_equal(back, s)


def test_checks_find_a_wrong_byte(bench, torch):
    """The checks a baseline passes before it is timed catch one wrong code, scale, padding byte or
    output value, in a sampled row."""
    x = (torch.randn(300, 64) * 2).to(torch.bfloat16)
    for fmt, axis, layout in (("mxfp8_e4m3", "rowwise", "compact"), ("nvfp4", "both", "swizzled")):
        spec = bench.format_spec(fmt)
        outs = bench.quantize_torch(x, None, spec, axis, layout, False)
        assert bench.check_quantize(outs, x, None, fmt, axis, layout) is None
        for i in range(len(outs)):
            bad = [o.clone() for o in outs]
            r = bad[i].shape[0] - 1                      # the last row: sampled; a padding row when swizzled
            bad[i][r, 0] ^= 1
            d = bench.check_quantize(tuple(bad), x, None, fmt, axis, layout)
            assert d is not None and "1 of" in d and "differ" in d, (fmt, i, d)
    assert "outputs, expected" in bench.check_quantize(outs[:2], x, None, "nvfp4", "both", "swizzled")
    spec = bench.format_spec("nvfp4")
    c, s = bench.quantize_torch(x, None, spec, "rowwise", "swizzled", False)
    a = bench._amax_torch(x)
    y = bench.dequantize_torch(c, s, a, spec, 64, "bfloat16")
    assert bench.check_dequantize(y, c, s, a, "nvfp4", 64, "bfloat16", "swizzled") is None
    y.view(torch.int16)[150, 3] += 1
    d = bench.check_dequantize(y, c, s, a, "nvfp4", 64, "bfloat16", "swizzled")
    assert d.startswith("dequantize->bfloat16 (rows 0-299 sampled): 1 of ")
    assert bench.sample_rows(10) == list(range(10))
    assert bench.sample_rows(1000) == list(range(64)) + list(range(468, 532)) + list(range(936, 1000))


def _eager(bench, monkeypatch, spins=None):
    """Baselines run eagerly (no torch.compile) and time_fn calls fn once: for the CPU."""
    def fake_time(fn, reps=50, warmup=5, mode="device"):
        fn()
        return bench.Timing(40.0 if spins is None else spins.pop(0))
    monkeypatch.setattr(bench, "compile_baseline", lambda fn: fn)
    monkeypatch.setattr(bench, "time_fn", fake_time)


def test_a_baseline_that_differs_is_reported_and_gets_no_speed_up(bench, torch, monkeypatch):
    _eager(bench, monkeypatch)
    x = (torch.randn(64, 64)).to(torch.bfloat16)
    a = bench._amax_torch(x)
    spec = bench.format_spec("nvfp4")

    def wrong(x, amax):
        q, s = bench.quantize_torch(x, amax, spec, "rowwise", "compact", True)
        return q ^ 1, s
    b = bench.compiled_baseline(wrong, lambda: (x, a),
                                lambda o, x, a: bench.check_quantize(o, x, a, "nvfp4", "rowwise", "compact"), 5)
    assert b.us == 40.0 and not b.exact
    assert b.label.startswith("torch.compile (bytes exact vs reference: NO: rowwise codes (rows 0-63 sampled): "
                              "2048 of 2048 items differ: [0,0] got 0x")
    assert b.label.endswith("; 40.0 us, no speed-up given)")
    row = bench._row("quantize", "nvfp4", "rowwise", "compact", "supplied amax", "64x64", 10.0, 1000, 8.0,
                     **bench._base_fields(b))
    assert row["speedup"] is None and row["baseline_us"] == 40.0 and "| - | torch.compile (bytes exact vs reference: NO" \
        in bench._fmt_row(row)

    def broken(x, amax):
        raise RuntimeError("no kernel\nfor you")
    b = bench.compiled_baseline(broken, lambda: (x, a), lambda *o: None, 5)
    assert b == bench.Baseline(None, False, "torch.compile n/a (RuntimeError: no kernel)")
    b = bench.compiled_baseline(lambda x, amax: (x,), lambda: (x, a), lambda *o: 1 / 0, 5)
    assert not b.exact and "NO: the check raised ZeroDivisionError: division by zero" in b.label


def test_both_falls_back_to_one_compiled_function_per_operand(bench, torch, monkeypatch):
    """When "both" as one function does not compile, the baseline compiles one per operand and says so."""
    _eager(bench, monkeypatch)
    calls = []

    def compile_but_not_both(fn):
        calls.append(fn)
        if len(calls) == 1:
            raise RuntimeError("InductorError: loop split")
        return fn
    monkeypatch.setattr(bench, "compile_baseline", compile_but_not_both)
    x = (torch.randn(64, 96) * 3).to(torch.bfloat16)
    nxa = bench.with_amax(bench.rotating(lambda i: x * (1 + i), 1 << 30))
    b = bench.quantize_baseline("nvfp4", "both", "swizzled", True, nxa, 5)
    assert b.exact and len(calls) == 3
    assert b.label == ("torch.compile per operand (as one function: RuntimeError: InductorError: loop split) "
                       "(bytes exact vs reference: yes)")


def test_baselines_compile_on_the_cpu(bench, torch, monkeypatch):
    """torch.compile (Inductor's CPU backend here; Triton on the GPU) of the baselines gives the
    reference's bytes: MXFP8 "both" swizzled, NVFP4 columnwise with a computed amax, a dequantize."""
    monkeypatch.setattr(bench, "time_fn", lambda fn, reps=50, **kw: (fn(), bench.Timing(1.0))[1])
    x = _special_rows(torch, 128)[:8].repeat(16, 1)                  # 128 x 128
    x[1:] = (torch.randn(127, 128) * 3).to(torch.bfloat16)
    nxa = bench.with_amax(bench.rotating(lambda i: x, 1 << 30))
    for fmt, axis, layout, given in (("mxfp8_e4m3", "both", "swizzled", True), ("nvfp4", "columnwise", "compact", False)):
        b = bench.quantize_baseline(fmt, axis, layout, given, nxa, 3)
        assert b.exact and b.label == "torch.compile (bytes exact vs reference: yes)", b.label
    import fp4kit
    q = fp4kit.reference.quantize(bench._host(x), "nvfp4", scale_layout="swizzled").rowwise
    parts = (torch.from_numpy(q.data), torch.from_numpy(q.scales), torch.from_numpy(q.amax))
    b = bench.dequantize_baseline("nvfp4", "bfloat16", 128, lambda: parts, 3)
    assert b.exact, b.label


# --------------------------------------------------------------------------------------------
# every GPU section on the CPU: fp4kit's GPU calls replaced by the reference on torch CPU tensors

def _np_in(bench, t):
    return None if t is None else bench._host(t)


def _t_out(torch, a):
    import ml_dtypes
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


@pytest.fixture
def cpu_sections(bench, torch, monkeypatch):
    """bench's sections runnable on the CPU: inputs on "cpu", fp4kit.quantize / dequantize /
    swizzle_scales / group_quantize on the reference, timings fake, baselines eager."""
    import dataclasses

    import fp4kit
    ref = fp4kit.reference

    def to_torch(q):
        ops = {n: (None if op is None else dataclasses.replace(
            op, data=_t_out(torch, op.data), scales=_t_out(torch, op.scales),
            amax=None if op.amax is None else _t_out(torch, op.amax))) for n, op in
            (("rowwise", q.rowwise), ("columnwise", q.columnwise))}
        return dataclasses.replace(q, **ops)

    def to_numpy(q):
        ops = {n: (None if op is None else dataclasses.replace(
            op, data=bench._host(op.data), scales=bench._host(op.scales), amax=_np_in(bench, op.amax))) for n, op in
            (("rowwise", q.rowwise), ("columnwise", q.columnwise))}
        return dataclasses.replace(q, **ops)

    calls = []

    def quantize(x, fmt, amax=None, **kw):
        calls.append(("quantize", fmt, kw.get("axis", "rowwise")))
        return to_torch(ref.quantize(bench._host(x), fmt, amax=_np_in(bench, amax), **kw))

    def dequantize(q, dtype="float32"):
        calls.append(("dequantize", q.format, dtype))
        return _t_out(torch, ref.dequantize(to_numpy(q), dtype))

    def group_quantize(x, fmt, first_dims=None, amax=None, **kw):
        calls.append(("group_quantize", fmt, kw["axis"]))
        return ref.group_quantize(bench._host(x), fmt, first_dims=[int(d) for d in first_dims],
                                  amax=_np_in(bench, amax), **kw)
    monkeypatch.setattr(fp4kit, "quantize", quantize)
    monkeypatch.setattr(fp4kit, "dequantize", dequantize)
    monkeypatch.setattr(fp4kit, "swizzle_scales", lambda c: _t_out(torch, ref.swizzle_scales(bench._host(c))))
    monkeypatch.setattr(fp4kit, "group_quantize", group_quantize)
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    monkeypatch.setattr(bench, "_emit", lambda rows: None)
    _eager(bench, monkeypatch)
    return calls


def test_sections_run_on_the_cpu(bench, torch, cpu_sections):
    """bench_quantize, bench_dequantize, bench_swizzle, bench_recipes and bench_grouped run through
    (rotating inputs, copies, rows), and every quantize / dequantize / swizzle row's baseline is
    byte-exact with a speed-up."""
    rows = []
    fmts = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4")
    bench.bench_quantize(rows, [(64, 96)], fmts, ("rowwise", "columnwise", "both"), 5)
    assert len(rows) == bench._quantize_rows([(64, 96)], fmts, ("rowwise", "columnwise", "both")) == 30
    bench.bench_dequantize(rows, [(64, 96)], fmts, 5)
    bench.bench_swizzle(rows, [(64, 96), (300, 512)], 5)
    for r in rows:
        assert r["baseline_exact"].endswith("(bytes exact vs reference: yes)"), r
        assert r["speedup"] == 40.0 / 40.0 and r["timing"] == "" and r["bytes"] > 0
    assert [r["shape"] for r in rows[-2:]] == ["64x6", "300x32"] and rows[-1]["bytes"] == 2 * 300 * 32
    assert [r["op"] for r in rows[30:36]] == ["dequantize->bfloat16", "dequantize->float16", "dequantize->float32"] * 2
    assert {c[0] for c in cpu_sections} == {"quantize", "dequantize"}
    n = len(rows)
    bench.bench_recipes(rows, 5, shape=(64, 96))
    assert [r["op"] for r in rows[n:]] == ["quantize rht (fused swizzle)", "quantize stochastic", "quantize stochastic"]
    assert [r["bytes"] for r in rows[n + 1:]] == [64 * 96 * 2 + bench._bytes_out(f, 64, 96, "both")
                                                  for f in ("nvfp4", "mxfp4_e2m1")]
    n = len(rows)
    bench.bench_grouped(rows, 5, K=64, total=512, groups=(8,))
    assert len(rows) - n == 2 * 14 and all(r["baseline_exact"] == "vs per-member launches" for r in rows[n:])
    n = len(rows)
    bench.bench_group_dequantize(rows, 5, K=64, total=512)
    assert len(rows) - n == 2 * 4 * 2 and all(r["baseline_exact"] == "vs per-member launches" for r in rows[n:])
    assert [r["op"] for r in rows[n:n + 2]] == ["group_dequantize->bfloat16 G=8", "group_dequantize->float32 G=8"]
    # bytes: the quantized group (data, scales, one amax per NVFP4 member) + the output
    assert [r["bytes"] for r in rows[-2:]] == [bench._bytes_out("nvfp4", 512, 64, "rowwise") + 4 * 63 + 512 * 64 * s
                                              for s in (2, 4)]

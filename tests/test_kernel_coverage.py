"""The kernel-coverage tooling (scripts/kernel_coverage.py, fp4kit._loader's FP4KIT_KERNEL_LOG):
the cubin reader finds exactly the kernels of a program, the log records what get_function
fetched, and the report names every kernel that did not run. No GPU: NVRTC only (skipped where it
cannot be found)."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fp4kit import _loader, _nvrtc

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = r"""
__device__ __noinline__ float helper(float v) { return v * 2.0f; }
__device__ float inlined(float v) { return v + 1.0f; }
extern "C" __global__ void first_kernel(float* p) { p[threadIdx.x] = helper(p[threadIdx.x]); }
extern "C" __global__ void second_kernel(float* p, int n) { if (threadIdx.x < n) p[0] = inlined(p[1]); }
#define MAKE(N) extern "C" __global__ void __launch_bounds__(32) made_##N(float* p) { p[N] = inlined(1.0f); }
MAKE(3)
"""


def _nvrtc_or_skip():
    try:
        _nvrtc.version()
    except Exception as e:   # noqa: BLE001 - any failure to load NVRTC means: cannot compile here
        pytest.skip(f"NVRTC not available: {e}")


def _script():
    spec = importlib.util.spec_from_file_location("kernel_coverage", ROOT / "scripts" / "kernel_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("arch", ["sm_90", "sm_100a"])
def test_entry_points_are_the_kernels_only(arch):
    _nvrtc_or_skip()
    cubin = _loader._compile("probe", arch, {"probe.cu": PROGRAM}, _loader.options_for(arch))
    # the kernels only: not the __noinline__ device function (no parameter bank), macro-made ones too
    assert _loader.entry_points(cubin) == ["first_kernel", "made_3", "second_kernel"]
    assert {".text.first_kernel", ".text.made_3", ".text.second_kernel"} <= set(_loader.elf_sections(cubin))


def test_entry_points_of_a_shipped_module_match_its_source():
    """swizzle.cu's kernels are written out by name: the reader must find each, and nothing else."""
    _nvrtc_or_skip()
    src = (_loader.cuda_src_dir() / "swizzle.cu").read_text()
    named = sorted(set(re.findall(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(', src)))
    assert named, "swizzle.cu names no kernel: the pattern above is stale"
    cubin = _loader._compile("swizzle", "sm_90", _loader._read_sources(), _loader.options_for("sm_90"))
    assert _loader.entry_points(cubin) == named


def test_entry_points_refuse_what_is_not_a_cubin():
    with pytest.raises(ValueError, match="not a 64-bit ELF cubin"):
        _loader.entry_points(b"PK\x03\x04 not an elf")
    _nvrtc_or_skip()
    cubin = _loader._compile("probe", "sm_90", {"probe.cu": PROGRAM}, _loader.options_for("sm_90"))
    import struct
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    for cut in (40, 70, shoff // 2, shoff + 70):   # truncated: a ValueError, never a struct.error / IndexError
        with pytest.raises(ValueError, match="not a 64-bit ELF cubin"):
            _loader.entry_points(cubin[:cut])


def test_the_common_part_matches_parts_cuh_and_unknown_parts_are_refused():
    text = (_loader.cuda_src_dir() / "common" / "parts.cuh").read_text()
    assert re.search(r"#define FP4KIT_PART_COMMON (\d+)", text).group(1) == str(_loader._COMMON_PART)
    for module in _loader.PARTS:
        assert _loader._unknown_parts(module, (_loader.cuda_src_dir() / f"{module}.cu").read_text()) == []
    assert _loader._unknown_parts("grouped", "#if FP4KIT_IN_PART(7)\n#if FP4KIT_IN_PART(3)") == ["7"]
    assert _loader._unknown_parts("grouped", "#if FP4KIT_IN_PART( FP4KIT_PART_RECIPES(5) )\n"
                                             "#if FP4KIT_IN_PART(FP4KIT_PART_RECIPES(2))") == ["FP4KIT_PART_RECIPES(2)"]
    # a kernel under a part PARTS lacks would be in no cubin: compile_check refuses the file unbuilt
    with pytest.raises(RuntimeError, match="1 of 1 files failed: grouped.cu"):
        _loader.compile_check("sm_90", ["grouped"], verbose=False, sources={
            "grouped.cu": '#if FP4KIT_IN_PART(6)\nextern "C" __global__ void k_f6_x() {}\n#endif\n'})


def test_fetched_kernels_are_logged_at_exit(tmp_path):
    """A process with FP4KIT_KERNEL_LOG appends what it fetched; a second process appends, not
    overwrites. get_function's bookkeeping is driven directly (no GPU here)."""
    log = tmp_path / "k.log"
    code = ("import sys; from fp4kit import _loader\n"
            "for name in sys.argv[1:]: _loader._note_fetched('quantize', name)\n"
            "assert _loader.fetched_kernels() == sorted(('quantize', n) for n in set(sys.argv[1:]))\n")
    env = {**__import__("os").environ, "FP4KIT_KERNEL_LOG": str(log)}
    subprocess.run([sys.executable, "-c", code, "k_b", "k_a", "k_b"], check=True, env=env, cwd=ROOT)
    subprocess.run([sys.executable, "-c", code, "k_c"], check=True, env=env, cwd=ROOT)
    assert log.read_text().splitlines() == ["quantize k_a", "quantize k_b", "quantize k_c"]
    env.pop("FP4KIT_KERNEL_LOG")
    subprocess.run([sys.executable, "-c", code, "k_d"], check=True, env=env, cwd=ROOT)
    assert "k_d" not in log.read_text()


def test_report_names_every_kernel_that_did_not_run(capsys, monkeypatch):
    kc = _script()
    monkeypatch.setattr(kc, "ALLOWED_UNUSED", {"probe_k": "a probe"})
    kernels = {"quantize": ["q_a", "q_b", "probe_k"], "swizzle": ["s_a"]}
    seen = {("quantize", "q_a"), ("swizzle", "s_a"), ("swizzle", "gone")}
    missing, n_seen, n_all = kc.report(kernels, seen)
    out = capsys.readouterr().out
    assert (missing, n_seen, n_all) == (["quantize.q_b"], 2, 4)
    assert "not launched: quantize.q_b" in out
    assert "not launched: quantize.probe_k  (allowed: a probe)" in out
    assert "in the log but not in the cubins: swizzle.gone" in out


def test_script_fails_on_a_missing_log(tmp_path, capsys):
    kc = _script()
    assert kc.main(["--log", str(tmp_path / "none.log")]) == 1
    assert "no log" in capsys.readouterr().out


def test_part_of_follows_the_format_in_the_name():
    assert _loader.parts_of("swizzle") == (None,) and _loader.part_of("swizzle", "swizzle_scales") is None
    assert _loader.parts_of("grouped") == (0, 1, 2, 3, 4, 5, 9, 14, 15)
    assert _loader.part_of("quantize", "quantize_f5_d1_plain") == 5
    assert _loader.part_of("grouped", "group_quantize1_f4_d2_boths") == 4
    assert _loader.part_of("grouped", "group_dequantize_f0_o1") == 0
    assert _loader.part_of("grouped", "group_stats_d1") == 9 and _loader.part_of("quantize", "nvfp4_amax_out") == 9
    # the FP4 formats' full recipe kernels have parts of their own (10 + F); their plain kernels do not
    assert [_loader.part_of("quantize", k) for k in ("quantize_f5_d1", "quantize_f5_d1_rowsx", "quantize_f4_d0_sr",
                                                     "quantize_f5_d2_rowssr", "quantize_f5_d1_rht",
                                                     "quantize_f5_d1_plain", "quantize_f5_d0_rowsam",
                                                     "quantize_f4_d1_quad", "quantize_f5_d0_rs",
                                                     "quantize_f5_d2_t2d")] == [15, 15, 14, 15, 15, 5, 5, 4, 15, 15]
    assert [_loader.part_of("grouped", k) for k in ("group_quantize_rows_f4_d0", "group_quantize_f5_d2",
                                                    "group_quantize1_f5_d1_both", "group_quantize_f4_d1_plain",
                                                    "group_quantize4_f0_d1", "group_quantize_f4_d2_sr")] == [14, 15, 5, 4, 0, 14]


def _parted(misplace: bool) -> str:
    """A stand-in for grouped.cu with one kernel per compile part (a misplaced one when asked)."""
    blocks = [f'#if FP4KIT_IN_PART({p})\nextern "C" __global__ void k_f{p}_x(int* o) {{ o[0] = {p}; }}\n#endif\n'
              for p in range(6)]
    blocks.append('#if FP4KIT_IN_PART(FP4KIT_PART_COMMON)\nextern "C" __global__ void k_meta(int* o) { o[0] = 9; }\n'
                  + ('extern "C" __global__ void k_f3_y(int* o) { o[0] = 3; }\n' if misplace else "") + "#endif\n")
    blocks += [f'#if FP4KIT_IN_PART(FP4KIT_PART_RECIPES({f}))\nextern "C" __global__ void k_f{f}_d1_sr(int* o) {{ }}\n#endif\n'
               for f in (4, 5)]
    return '#include "common/parts.cuh"\n' + "".join(blocks)


def test_compile_check_builds_every_part_and_refuses_a_misplaced_kernel():
    """compile_check compiles each part with -DFP4KIT_PART=<p> and checks that a part holds only the
    kernels part_of places in it (else get_function would look for them in another part)."""
    _nvrtc_or_skip()
    sources = {**_loader._read_sources(), "grouped.cu": _parted(False)}
    res = _loader.compile_check("sm_90", ["grouped"], verbose=False, sources=sources)
    assert [(r["part"], r["kernels"]) for r in res] == ([(p, [f"k_f{p}_x"]) for p in range(6)] + [(9, ["k_meta"])]
                                                       + [(14, ["k_f4_d1_sr"]), (15, ["k_f5_d1_sr"])])
    sources["grouped.cu"] = _parted(True)
    with pytest.raises(RuntimeError, match="1 of 9 files failed"):
        _loader.compile_check("sm_90", ["grouped"], verbose=False, sources=sources)


def test_compile_check_in_threads_keeps_unit_order(capsys):
    """Units compiled in parallel threads come back (and print) in module and part order, as one
    thread gives them; a failed unit does not hide the others."""
    _nvrtc_or_skip()
    sources = {**_loader._read_sources(), "grouped.cu": _parted(False)}
    one = _loader.compile_check("sm_90", ["grouped"], verbose=False, sources=sources, workers=1)
    many = _loader.compile_check("sm_90", ["grouped"], verbose=True, sources=sources, workers=4)
    assert [(r["file"], r["part"], r["kernels"]) for r in many] == [(r["file"], r["part"], r["kernels"]) for r in one]
    printed = [ln.split()[1] for ln in capsys.readouterr().out.splitlines() if ln.startswith("grouped.cu")]
    assert printed == [f"[{r['part']}]" for r in one]
    sources["grouped.cu"] = _parted(True)   # the common part 9 fails; the parts after it are still compiled
    with pytest.raises(RuntimeError, match="1 of 9 files failed: grouped.cu"):
        _loader.compile_check("sm_90", ["grouped"], verbose=True, sources=sources, workers=4)
    out = capsys.readouterr().out
    assert "grouped.cu [9]     sm_90    FAILED" in out and "grouped.cu [15]" in out


def test_cubin_diff_reports_changed_added_and_removed_code(capsys):
    spec = importlib.util.spec_from_file_location("cubin_diff", ROOT / "scripts" / "cubin_diff.py")
    cd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cd)
    f = frozenset
    old = {"k_same": f({b"\x01" * 32}), "k_addr": f({b"\x00" * 48}), "k_gone": f({b"\x02" * 16}),
           "dev_fn": f({b"\x04" * 16})}
    new = {"k_same": f({b"\x01" * 32}), "k_addr": f({b"\x00" * 17 + b"\x09" + b"\x00" * 30}),
           "k_new": f({b"\x03" * 16}), "dev_fn": f({b"\x04" * 16, b"\x05" * 16})}   # one part's copy changed
    changed, same = cd.compare(old, new)
    out = capsys.readouterr().out
    assert (changed, same) == (["dev_fn", "k_addr"], ["k_same"])
    assert "changed: k_addr: 48 -> 48 bytes, 1 instructions differ" in out
    assert "changed: dev_fn: 1 -> 2 distinct copies across the parts" in out
    assert "added: k_new" in out and "removed: k_gone" in out


def test_elf_sections_of_a_compiled_program():
    _nvrtc_or_skip()
    cubin = _loader._compile("probe", "sm_90", {"probe.cu": PROGRAM}, _loader.options_for("sm_90"))
    sections = _loader.elf_sections(cubin)
    assert {".text.first_kernel", ".text.second_kernel", ".text.made_3"} <= set(sections)
    assert all(len(sections[f".text.{k}"]) % 16 == 0 and sections[f".text.{k}"] for k in ("first_kernel", "made_3"))


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _ZN6fp4kit9run4_writeEv
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'k_f4_d1_both' for 'sm_90'
ptxas info    : Function properties for k_f4_d1_both
ptxas         .     8 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 8704 bytes smem
ptxas info    : Compile time = 16.593 ms
"""


def test_ptxas_resources_reads_kernels_and_device_functions():
    assert _loader.ptxas_resources(PTXAS_LOG) == {
        "_ZN6fp4kit9run4_writeEv": {"stack": 16, "spill_stores": 8, "spill_loads": 4},
        "k_f4_d1_both": {"stack": 8, "spill_stores": 12, "spill_loads": 12, "registers": 32}}


def test_compile_check_resources_against_the_baseline():
    spec = importlib.util.spec_from_file_location("compile_check", ROOT / "scripts" / "compile_check.py")
    cc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cc)
    res = [{"file": "grouped.cu", "part": 4, "resources": _loader.ptxas_resources(PTXAS_LOG)},
           {"file": "swizzle.cu", "part": None, "resources": {"swizzle_scales": {"registers": 32, "stack": 0,
                                                                                  "spill_stores": 0, "spill_loads": 0}}}]
    now = cc.resources_of(res)
    assert now == {"grouped[4]:_ZN6fp4kit9run4_writeEv": [-1, 16, 8, 4], "grouped[4]:k_f4_d1_both": [32, 8, 12, 12],
                   "swizzle:swizzle_scales": [32, 0, 0, 0]}
    assert cc.compare_resources(now, dict(now)) == ([], [])
    base = {**now, "grouped[4]:k_f4_d1_both": [40, 8, 4, 12], "swizzle:gone_kernel": [30, 0, 0, 0]}
    del base["swizzle:swizzle_scales"]
    fails, notes = cc.compare_resources(now, base)
    assert fails == ["grouped[4]:k_f4_d1_both: stack / spill stores / spill loads 8/4/12 -> 8/12/12 bytes",
                     "swizzle:swizzle_scales: not in kernel_resources.json (registers 32, stack 0, spill 0/0)"]
    assert notes == ["grouped[4]:k_f4_d1_both: registers 40 -> 32", "swizzle:gone_kernel: gone"]
    # the checked-in baseline parses and covers both architectures CI compiles for
    import json
    base = json.loads((ROOT / "scripts" / "kernel_resources.json").read_text())
    assert set(base["archs"]) == {"sm_90", "sm_100a"} and json.loads(cc.dump_resources(base)) == base


def test_compile_check_nvrtc_major_arguments(monkeypatch, capsys):
    """--nvrtc-major N (.ci/run: 12, the cuda12 extra's NVRTC): a missing number or a resources update
    with it is a usage error, and an NVRTC of another major fails before compiling anything."""
    spec = importlib.util.spec_from_file_location("compile_check", ROOT / "scripts" / "compile_check.py")
    cc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cc)
    monkeypatch.setattr(_nvrtc, "_max_major", _nvrtc._max_major)
    assert cc.main(["compile_check.py", "--nvrtc-major"]) == 2
    assert "needs a CUDA major version" in capsys.readouterr().out
    assert cc.main(["compile_check.py", "--nvrtc-major", "12", "--update-resources"]) == 2
    assert cc.main(["compile_check.py", "--nvrtc-major", "12", "--bogus"]) == 2
    try:
        have = _nvrtc.version()[0]
    except Exception as e:                               # no NVRTC here: the refusals above still ran
        pytest.skip(f"no NVRTC: {e}")
    monkeypatch.setattr(cc, "compile_only", lambda archs: pytest.fail("compiled with the wrong NVRTC"))
    capsys.readouterr()
    assert cc.main(["compile_check.py", "--nvrtc-major", str(have + 50), "sm_90"]) == 1
    assert f"--nvrtc-major {have + 50}, but the NVRTC found is {have}." in capsys.readouterr().out

"""`python -m fp4kit check`: table, exit status, the no-GPU message and the hand-over to _gpucheck.

Most tests feed the CLI fake suites (modules put into sys.modules) so that they test the CLI alone;
the last runs the real command in a subprocess once the reference's golden cases exist.
"""
from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from fp4kit import cli


def _suite(monkeypatch, name: str, run_all) -> str:
    modname = f"fp4kit_test_suite_{name}"
    mod = types.ModuleType(modname)
    if run_all is not None:
        mod.run_all = run_all
    monkeypatch.setitem(sys.modules, modname, mod)
    return modname


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, "CuPy is not installed"))


def _use_suites(monkeypatch, *suites):
    monkeypatch.setattr(cli, "SUITES", tuple(suites))


def passing(formats=None):
    return [("mxfp8_e4m3", "quantize", "all_zero_block", True, ""),
            ("nvfp4", "quantize", "nvfp4_amax_zero", True, ""),
            ("-", "swizzle", "round_trip_3x5", True, "")]


def failing():
    yield ("mxfp4_e2m1", "quantize", "satfinite_7", False, "byte 3: got 0x07, expected 0x06")
    yield ("mxfp4_e2m1", "dequantize", "satfinite_7", True, "")


def test_all_pass_without_gpu(monkeypatch, capsys, no_gpu):
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "ok", passing)))
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "all_zero_block" in out and "nvfp4_amax_zero" in out
    assert "no GPU found (CuPy is not installed): kernel checks skipped (" in out
    for family in ("quantize", "dequantize", "swizzle_scales", "group_quantize"):
        assert family in out.split("kernel checks skipped")[1]
    assert "3 checks, 3 passed, 0 failed" in out
    assert "fp4kit check: OK" in out


def test_failure_gives_nonzero_exit_and_detail(monkeypatch, capsys, no_gpu):
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "ok", passing)),
                ("conformance", _suite(monkeypatch, "bad", failing)))
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "byte 3: got 0x07, expected 0x06" in out
    assert "5 checks, 4 passed, 1 failed" in out
    assert "fp4kit check: FAILED" in out


def test_brief_lists_only_failures(monkeypatch, capsys, no_gpu):
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "ok", passing)),
                ("conformance", _suite(monkeypatch, "bad", failing)))
    assert cli.main(["check", "--brief"]) == 1
    out = capsys.readouterr().out
    assert "satfinite_7" in out and "all_zero_block" not in out


def test_nothing_to_check_is_a_failure(monkeypatch, capsys, no_gpu):
    _use_suites(monkeypatch, ("golden", "fp4kit_test_suite_absent_module"))
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "not available" in out and "no reference check could run" in out


def test_broken_suite_is_a_failure_not_a_skip(monkeypatch, capsys, no_gpu):
    def boom():
        raise RuntimeError("reference exploded")
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "ok", passing)),
                ("conformance", _suite(monkeypatch, "boom", boom)),
                ("other", _suite(monkeypatch, "norun", None)))
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "reference exploded" in out and "has no run_all()" in out


def test_formats_filter_and_kwargs(monkeypatch, capsys, no_gpu):
    seen = {}

    def run_all(formats=None, quick=False):
        seen.update(formats=formats, quick=quick)
        return passing()
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "kw", run_all)))
    assert cli.main(["check", "--quick", "--formats", "nvfp4,mxfp8_e4m3"]) == 0
    assert seen == {"formats": ("nvfp4", "mxfp8_e4m3"), "quick": True}
    assert cli.main(["check", "--formats", "nvfp4"]) == 0
    out = capsys.readouterr().out.split("formats: nvfp4)")[1]
    assert "nvfp4_amax_zero" in out and "round_trip_3x5" in out and "all_zero_block" not in out


def test_unknown_format_is_rejected(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["check", "--formats", "fp3"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: python -m fp4kit check" in err and "argument --formats:" in err and "got fp3" in err


@pytest.mark.parametrize("value", ["", ",", " , "])
def test_empty_format_list_is_a_usage_error(monkeypatch, capsys, no_gpu, value):
    """--formats "" used to mean every format (and then blamed missing vectors); now argparse rejects it."""
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "never", lambda **k: pytest.fail("nothing may run"))))
    with pytest.raises(SystemExit) as e:
        cli.main(["check", "--formats", value])
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert "argument --formats: expected at least one name from" in captured.err and "got an empty list" in captured.err
    assert captured.out == ""


def test_require_gpu_with_cpu_only_is_a_usage_error(monkeypatch, capsys, no_gpu):
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "never", lambda **k: pytest.fail("nothing may run"))))
    for argv in (["check", "--require-gpu", "--cpu-only"], ["check", "--cpu-only", "--quick", "--require-gpu"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2
        assert "not allowed with argument" in capsys.readouterr().err


def test_record_shapes():
    rec = types.SimpleNamespace(fmt="nvfp4", op="quantize", name="zero_block", passed=True)
    assert cli._as_result("g", rec) == cli.CheckResult("g", "nvfp4", "quantize", "zero_block", True, "")
    d = {"format": "mxfp8_e5m2", "op": "dequantize", "case": "c", "passed": False, "detail": "x"}
    assert cli._as_result("g", d) == cli.CheckResult("g", "mxfp8_e5m2", "dequantize", "c", False, "x")
    with pytest.raises(ValueError):
        cli._as_result("g", ("nvfp4", "quantize"))


@pytest.mark.parametrize("result,expect_rc,text", [(0, 0, "kernel checks passed"), (True, 0, "kernel checks passed"),
                                                   (3, 1, "kernel checks failed (status 3)"),
                                                   (False, 1, "kernel checks failed (status 1)")])
def test_gpu_present_hands_over_to_gpucheck(monkeypatch, capsys, result, expect_rc, text):
    calls = []

    def run(quick, full, formats=None):
        calls.append((quick, full, formats))
        return result
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "ok", passing)))
    monkeypatch.setattr(cli, "GPU_CHECK_MODULE", _suite(monkeypatch, "gpucheck", None))
    sys.modules[cli.GPU_CHECK_MODULE].run = run
    monkeypatch.setattr(cli, "detect_gpu", lambda: (cli.GpuInfo("NVIDIA H100 80GB HBM3", 90, 1), ""))
    assert cli.main(["check", "--full", "--formats", "nvfp4"]) == expect_rc
    assert calls == [(False, True, ("nvfp4",))]
    out = capsys.readouterr().out
    assert "GPU: NVIDIA H100 80GB HBM3 (sm_90" in out and text in out


def test_gpu_present_without_gpucheck(monkeypatch, capsys):
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "ok", passing)))
    monkeypatch.setattr(cli, "GPU_CHECK_MODULE", "fp4kit_test_suite_no_gpucheck")
    monkeypatch.setattr(cli, "detect_gpu", lambda: (cli.GpuInfo("NVIDIA H200", 90, 1), ""))
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "fp4kit_test_suite_no_gpucheck is missing from this build: kernel checks skipped" in out
    assert cli.main(["check", "--require-gpu"]) == 1


def test_require_gpu_and_cpu_only(monkeypatch, capsys, no_gpu):
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "ok", passing)))
    assert cli.main(["check", "--require-gpu"]) == 1
    monkeypatch.setattr(cli, "detect_gpu", lambda: pytest.fail("--cpu-only must not look for a GPU"))
    assert cli.main(["check", "--cpu-only"]) == 0
    assert "CPU only (--cpu-only): kernel checks skipped" in capsys.readouterr().out


def test_progress_line():
    stream = io.StringIO()
    p = cli.Progress(total=4, label="kernels", stream=stream, interval=0.0)
    p.start -= 10.0  # pretend 10 s have passed
    p.update(note="nvfp4 (128, 128)")
    line = stream.getvalue().strip().splitlines()[-1]
    assert line.startswith("kernels: 1/4 (25%), 10.0s elapsed, ~30.0s left") and "nvfp4 (128, 128)" in line
    quiet = io.StringIO()
    with cli.Progress(stream=quiet) as q:  # not a terminal: nothing for the first 10 s
        q.update()
    assert quiet.getvalue() == ""


def test_no_subcommand_prints_help(capsys):
    assert cli.main([]) == 2
    assert "check" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("fp4kit.reference.golden") is None,
                    reason="fp4kit.reference.golden does not exist yet")
def test_real_check_command(tmp_path):
    """The README's main job, as a person runs it (quick mode; no GPU on CI)."""
    spec = importlib.util.find_spec("fp4kit")
    parent = str(Path(list(spec.submodule_search_locations)[0]).resolve().parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [parent, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "fp4kit", "check", "--quick"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"fp4kit check failed:\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    assert "0 failed" in r.stdout and "fp4kit check: OK" in r.stdout


class _ClosedPipe(io.StringIO):
    """stdout whose reader went away (`python -m fp4kit check | head -1`)."""

    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        return 99


def test_closed_stdout_exits_1_without_traceback(monkeypatch, capsys, no_gpu):
    _use_suites(monkeypatch, ("golden", _suite(monkeypatch, "g", passing)))
    redirected = []
    monkeypatch.setattr(cli.os, "open", lambda path, flags: 42)
    monkeypatch.setattr(cli.os, "dup2", lambda fd, fd2: redirected.append((fd, fd2)))
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert cli.main(["check", "--cpu-only"]) == 1
    assert redirected == [(42, 99)]          # stdout now /dev/null: the final flush cannot fail


@pytest.mark.parametrize("argv,usage", [(["check", "--bogus"], "python -m fp4kit check"),
                                        (["info", "extra"], "python -m fp4kit info"),
                                        (["--bogus"], "python -m fp4kit [-h]")])
def test_stray_arguments_are_reported_with_the_commands_usage(capsys, argv, usage):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert f"usage: {usage}" in err and "error: unrecognized arguments:" in err
    assert f"{usage.split(' [')[0]}: error: unrecognized arguments: {argv[-1]}" in err


def test_version(capsys):
    import fp4kit
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"fp4kit {fp4kit.__version__}"


# ---------------------------------------------------------------------------------------------
# python -m fp4kit warmup / info: the kernel cache

@pytest.fixture
def fake_nvrtc(monkeypatch, tmp_path):
    """An empty kernel cache in tmp_path and a stand-in for NVRTC that records what it compiles."""
    from fp4kit import _loader
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(tmp_path))
    calls = []

    def compile_(module, arch, sources, options):
        calls.append((module, arch, next((o for o in options if o.startswith("-DFP4KIT_PART=")), None)))
        return b"\x7fELF" + f" {module} {arch} {options}".encode()   # what the cache takes for a cubin

    monkeypatch.setattr(_loader, "_compile", compile_)
    return calls


def test_warmup_for_named_archs_fills_the_cache_without_a_gpu(capsys, no_gpu, fake_nvrtc):
    from fp4kit import _loader
    units = _loader.compile_units()
    assert _loader.cached_units("sm_90") == (0, len(units))
    assert cli.main(["warmup", "--arch", "sm_90", "sm_100a"]) == 0
    out = capsys.readouterr().out
    assert f"warmup: {2 * len(units)} compile units for sm_90, sm_100a" in out and "grouped.cu [5]" in out
    expected = {(m, a, None if p is None else f"-DFP4KIT_PART={p}") for a in ("sm_90", "sm_100a") for m, p in units}
    assert sorted(fake_nvrtc) == sorted(expected)          # every unit once, with its part
    assert _loader.cached_units("sm_90") == _loader.cached_units("sm_100a") == (len(units), len(units))
    fake_nvrtc.clear()
    assert cli.main(["warmup", "--arch", "sm_90"]) == 0 and fake_nvrtc == []   # warm: nothing compiled
    assert f"warmup: {len(units)} compile units for sm_90 in" in capsys.readouterr().out
    assert cli.main(["info"]) == 0
    assert f"sm_90 {len(units)} of {len(units)}, sm_100a {len(units)} of {len(units)}" in capsys.readouterr().out


def test_warmup_compiles_an_architecture_named_twice_once(capsys, no_gpu, fake_nvrtc):
    from fp4kit import _loader
    units = _loader.compile_units()
    assert cli.main(["warmup", "--arch", "sm_90", "sm_90"]) == 0
    assert f"warmup: {len(units)} compile units for sm_90 in" in capsys.readouterr().out
    assert len(fake_nvrtc) == len(set(fake_nvrtc)) == len(units)
    fake_nvrtc.clear()
    assert len(_loader.precompile("sm_100a")) == len(units) == len(fake_nvrtc)   # one name, one arch
    assert cli.main(["info"]) == 0
    assert f"sm_90 {len(units)} of {len(units)}, sm_100a {len(units)} of {len(units)}" in capsys.readouterr().out


def test_info_makes_no_cache_directory(capsys, no_gpu, monkeypatch, tmp_path):
    """``info`` reports; it names the cache a compile would make and leaves the disk as it was."""
    from fp4kit import _loader, _nvrtc
    try:
        _nvrtc.version()
    except Exception:   # noqa: BLE001 - without NVRTC info prints no cache line
        pytest.skip("no NVRTC library: info stops before the cache line")
    want = tmp_path / "new" / "cache"
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(want))
    n = len(_loader.compile_units())
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"kernel cache: {want} (not made yet; compile units of this build: sm_90 0 of {n}, sm_100a 0 of {n}" in out
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("arch", ["sm_80", "compute_90", "sm90", "sm_90x"])
def test_warmup_refuses_an_architecture_before_compiling(capsys, no_gpu, fake_nvrtc, arch):
    assert cli.main(["warmup", "--arch", "sm_90", arch]) == 2
    assert f"got {arch!r}" in capsys.readouterr().err and fake_nvrtc == []


@pytest.mark.parametrize("arch,loaded", [("sm_100", "sm_100a"), ("sm_120", "sm_120a"), ("sm_90a", "sm_90")])
def test_warmup_refuses_an_architecture_no_gpu_loads(capsys, no_gpu, fake_nvrtc, arch, loaded):
    """A cache for sm_100 / sm_90a would never be read: a 10.0 GPU loads sm_100a, a 9.0 one sm_90."""
    assert cli.main(["warmup", "--arch", arch]) == 2
    err = capsys.readouterr().err
    assert f"never {arch!r}: use {loaded}" in err and fake_nvrtc == []


def test_warmup_without_a_gpu_or_arch_says_how(capsys, no_gpu, fake_nvrtc):
    assert cli.main(["warmup"]) == 1
    err = capsys.readouterr().err
    assert "no GPU (CuPy is not installed)" in err and "--arch sm_90" in err and fake_nvrtc == []


@pytest.mark.parametrize("on", [True, False])
def test_info_says_whether_dependent_launches_are_on(capsys, no_gpu, monkeypatch, on):
    from fp4kit import _torch_exec
    monkeypatch.setattr(_torch_exec, "PDL", on)
    assert cli.main(["info"]) == 0
    want = "on (FP4KIT_PDL=0 turns them off)" if on else "off (FP4KIT_PDL=0)"
    assert f"dependent launches (PDL, the fast paths' kernels): {want}" in capsys.readouterr().out

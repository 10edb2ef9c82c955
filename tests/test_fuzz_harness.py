"""The GPU fuzz (tests/gpu/test_fuzz.py) run on the CPU with NumPy standing in for the device
library: every fp4kit call then runs the reference, so each property must hold; what this checks
is the harness itself (its strategies draw valid cases, its refusal, dims, stream and dequantize
logic runs, nothing warns), in CI, where the GPU tests skip."""
from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import fp4kit  # noqa: E402
from fp4kit import _plan  # noqa: E402

GPU_DIR = Path(__file__).resolve().parent / "gpu"
FORMATS = list(fp4kit.FORMATS)
SET = settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def fz():
    sys.path.insert(0, str(GPU_DIR))
    try:
        spec = importlib.util.spec_from_file_location("_fuzz_on_cpu", GPU_DIR / "test_fuzz.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(GPU_DIR))

    def to_host(cp, a, lib, view):           # the views of _to_device, of NumPy buffers
        return mod._view(a, view, lambda h: h)

    class NoStream:
        def __init__(self, *a):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False
    mod._to_device, mod._Stream = to_host, NoStream
    saved = _plan.SIZE_RULES
    yield mod
    _plan.SIZE_RULES = saved
    _plan.clear_plans()


class _HostDims:
    """Hands the test the case drawn from `data`, with device dims turned into host dims (NumPy
    dims are host dims, and a larger buffer is only allowed with device dims)."""

    def __init__(self, data):
        self.data = data

    def draw(self, strategy, label=None):
        case = self.data.draw(strategy, label=label)
        if isinstance(case, dict) and case.get("device_dims"):
            case = dict(case, device_dims=False, spare=0)
        if isinstance(case, dict) and case.get("how") in ("device", "graph"):
            case = dict(case, how="host")
        return case


def _rules(mode):
    _plan.SIZE_RULES = mode is True


PROPERTIES = ["test_fuzz_quantize_and_dequantize_equal_reference", "test_fuzz_group_quantize_and_dequantize_equal_reference",
              "test_fuzz_changing_dims_reuse_plans_and_graphs", "test_fuzz_qmatmul_equals_reference"]


# every (property, format) the GPU fuzz runs (its qmatmul families leave out mxfp8_e5m2, which they
# reach as the b operand of the MX families)
@pytest.mark.parametrize("name,fmt", [(n, f) for n in PROPERTIES for f in FORMATS
                                      if not (n == "test_fuzz_qmatmul_equals_reference" and f == "mxfp8_e5m2")])
def test_fuzz_harness_holds_on_the_reference(fz, name, fmt):
    inner = getattr(fz, name).hypothesis.inner_test

    @SET
    @given(data=st.data())
    def run(data):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            if name == "test_fuzz_qmatmul_equals_reference":
                inner(np, fmt, _HostDims(data))
            else:
                inner(np, _rules, fmt, _HostDims(data))
    run()


def test_fuzz_swizzle_harness_holds_on_the_reference(fz):
    inner = fz.test_fuzz_swizzle_roundtrip_equals_reference.hypothesis.inner_test

    @SET
    @given(R=st.integers(0, 300), C=st.integers(0, 40), view=st.sampled_from(["contiguous", "offset", "transposed", "stepped"]),
           seed=st.integers(0, 99))
    def run(R, C, view, seed):
        inner(np, R, C, "cupy", view, seed)
    run()


def _root_conftest():
    """tests/conftest.py as a module of its own (a bare `import conftest` finds whichever conftest
    directory comes first on sys.path in a whole-suite run)."""
    spec = importlib.util.spec_from_file_location("_fp4kit_root_conftest", Path(__file__).resolve().parent / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _draws(seed=None):
    """The integers one fresh derandomised hypothesis test draws, seeded by conftest's hook or not."""
    conftest = _root_conftest()
    seen = []

    @settings(max_examples=5, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2**62))
    def probe(v):
        seen.append(v)

    if seed is not None:
        assert conftest.apply_fuzz_seed([probe, probe, None, len], seed) == 1
    probe()
    return seen


def test_fuzz_seed_replaces_the_derandomised_examples(monkeypatch):
    """FP4KIT_FUZZ_SEED (tests/conftest.py): a seeded run repeats itself, two seeds draw different
    examples, both differ from the derandomised default; unset or empty means no seed, and a value
    that is not an integer is a usage error naming the variable."""
    conftest = _root_conftest()
    default = _draws()
    assert default == _draws()
    a, b = _draws(12345), _draws(67890)
    assert a == _draws(12345)
    assert a != b and a != default and b != default
    for value, want in (("", None), (" 7 ", 7), ("0x10", 16)):
        monkeypatch.setenv(conftest.FUZZ_SEED_ENV, value)
        assert conftest.fuzz_seed() == want
    monkeypatch.setenv(conftest.FUZZ_SEED_ENV, "soon")
    with pytest.raises(pytest.UsageError, match="FP4KIT_FUZZ_SEED"):
        conftest.fuzz_seed()

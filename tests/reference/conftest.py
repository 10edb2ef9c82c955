"""Helpers of the CPU reference tests: exact byte comparison with a readable report.

`check_bytes(got, expected, what)` compares two arrays through unsigned-integer views (same dtype and
shape required) and fails with the number of differing items and the first few (index, got,
expected in hex). The comparison itself is ``fp4kit.reference.golden.byte_diff`` so that the golden
runner, the conformance vectors and the tests all report mismatches the same way.
"""
from __future__ import annotations

import numpy as np
import pytest

from fp4kit.reference.golden import byte_diff


def assert_bytes_equal(got, expected, what: str = "", context=None) -> None:
    d = byte_diff(np.asarray(got), np.asarray(expected), what, context=context)
    if d:
        pytest.fail(d, pytrace=False)


@pytest.fixture
def check_bytes():
    return assert_bytes_equal

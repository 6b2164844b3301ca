"""The vendor's sanitizer sample on npu_jax.asc: each injected bug gives exactly one finding, of the
check the vendor's msSanitizer names, at the line of the call the bug is in; the clean kernel none."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

import npu_jax

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "asc"))
import ms_sanitizer  # noqa: E402

WARN = npu_jax.Checks.parse("all", action="warn")


def _run(rng, mutation):
    x = rng.uniform(-1, 1, (8, ms_sanitizer.BLOCK_LENGTH)).astype(np.float32)
    y = rng.uniform(-1, 1, (8, ms_sanitizer.BLOCK_LENGTH)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs, report = ms_sanitizer.sanitizer_add[8](x, y, np.zeros_like(x), mutation, checks=WARN)
    return x, y, outs, report


def test_the_clean_kernel_adds_exactly_and_has_no_finding(rng):
    x, y, outs, report = _run(rng, "")
    assert report.findings() == []
    np.testing.assert_array_equal(outs[2], x + y)  # one fp32 add per element: exact


@pytest.mark.parametrize("mutation", ms_sanitizer.MUTATIONS)
def test_each_injected_bug_gives_one_finding_at_its_line(rng, mutation):
    _, _, _, report = _run(rng, mutation)
    found = report.findings()
    assert len(found) == 1, [f.message() for f in found]
    (f,) = found
    assert f.check == ms_sanitizer.EXPECTED_CHECK[mutation]
    assert f.where.startswith(f"examples/asc/ms_sanitizer.py:{ms_sanitizer.MUTATION_LINES[mutation]} ")


def test_checks_all_raises_with_the_line(rng):
    x = rng.uniform(-1, 1, (8, ms_sanitizer.BLOCK_LENGTH)).astype(np.float32)
    with pytest.raises(npu_jax.errors.SanitizerError, match=r"racecheck \[RAW\].*ms_sanitizer.py:\d+"):
        ms_sanitizer.sanitizer_add[8](x, x, np.zeros_like(x), "no_sync", checks="all")

"""The regression harness: golden baselines pass as they are and fail when the rounding changes."""

from __future__ import annotations

import dataclasses
import json

import pytest

from precision import Policy, baselines
from precision.baselines import CASES, assert_precision, measure


@pytest.mark.parametrize("name", sorted(CASES))
def test_registered_baselines_hold(assert_precision, name):
    assert_precision(measure(name), baseline=name)


def test_conv3x3_fp16_mixed_reads_in_one_line(assert_precision):
    assert_precision(measure("conv3x3_fp16_mixed"), baseline="conv3x3_fp16_mixed")


def test_harness_fails_when_the_kernels_rounding_changes():
    """Switch the policy under the same workload (fp32 accumulator -> fp16 running sum): the
    harness fails and its message shows the drift per metric."""
    switched = measure("conv3x3_fp16_mixed", policy=Policy(accumulate="fp16_mac"))
    with pytest.raises(AssertionError) as e:
        assert_precision(switched, baseline="conv3x3_fp16_mixed")
    msg = str(e.value)
    assert "DRIFT" in msg and "rel_l2" in msg and "baseline" in msg and "--update-baselines" in msg
    # the unchanged kernel passes against the same file
    assert_precision(measure("conv3x3_fp16_mixed"), baseline="conv3x3_fp16_mixed")


def test_drift_tolerances_and_update(tmp_path):
    m = measure("conv3x3_fp16_mixed")
    baselines.write("t", m, tmp_path)
    assert_precision(m, baseline="t", directory=tmp_path)
    nudged = dataclasses.replace(m, rel_l2=m.rel_l2 * 1.02)  # inside 5%
    assert_precision(nudged, baseline="t", directory=tmp_path)
    moved = dataclasses.replace(m, rel_l2=m.rel_l2 * 1.2, balance=m.balance + 0.2, n_nan=1)
    with pytest.raises(AssertionError) as e:
        assert_precision(moved, baseline="t", directory=tmp_path)
    assert all(k in str(e.value) for k in ("rel_l2", "balance", "n_nan", "+20.0%"))
    assert_precision(moved, baseline="t", directory=tmp_path, update=True)  # the deliberate update
    assert json.loads((tmp_path / "t.json").read_text())["metrics"]["n_nan"] == 1
    with pytest.raises(FileNotFoundError, match="update-baselines"):
        assert_precision(m, baseline="nope", directory=tmp_path)
    with pytest.raises(KeyError, match="registered"):
        measure("nope")

"""The behaviour fingerprint's figures, held in CI: ``benchmarks/fingerprint.py``'s 81 public-API cases
(conv2d in the four strategies on four presets, fused chains, GEMMs, precision policies) report the
cycles, per-core cycles, busy cycles per pipe, bytes per path, FLOPs and instruction counts recorded in
``benchmarks/fingerprint_base.json``. Since the built-in kernels' reports come from the timing Board this
takes about half a minute; a change that moves a figure must re-record the file and say why in its
docstring. The outputs' hashes are left to the script (``--check``): bits are held to independent
references by the tests of each kernel, and a hash may differ on another CPU."""

from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import fingerprint  # noqa: E402


@pytest.mark.slow
def test_every_fingerprint_figure_is_the_recorded_one(capsys):
    with open(os.path.join(ROOT, "benchmarks", "fingerprint_base.json")) as f:
        base = json.load(f)["cases"]
    now = fingerprint.run_cases(None)
    diffs = [d for d in fingerprint.compare(base, now) if ".output.sha256:" not in d]
    assert len(now) == len(base) == 81
    assert not diffs, "figures moved:\n  " + "\n  ".join(diffs[:40])

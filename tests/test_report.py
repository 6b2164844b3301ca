"""The Report: its derived figures, the Chrome trace it writes, and the timeline plot."""

from __future__ import annotations

import collections
import json
import secrets

import jax
import numpy as np
import pytest

import npu_jax
from npu_jax import MatmulTiling
from npu_jax.core.pipes import LANE_ORDER, LANES, PATHS

M, N, K = 64, 48, 96
TILING = MatmulTiling(m=32, n=32, k_l1=32, k_l0=16)  # 2 x 2 blocks over tiny's 2 cores, 3 K slices
# The vendor profiler's lane names, in the order data flows through a core.
LANES_IN_ORDER = ["MTE2", "MTE1", "CUBE", "FIXP", "VECTOR", "MTE3", "SCALAR"]


@pytest.fixture(scope="module", params=[False, True], ids=["eager", "jit"])
def gemm(request):
    """(a, b, c, report) of one traced GEMM on fresh random data, run eagerly or under jax.jit.

    Module-scoped so the tests below share two runs; the seed is printed for replay.
    """
    seed = secrets.randbits(63)
    print(f"gemm seed: {seed}")
    rng = np.random.default_rng(seed)
    hw = npu_jax.presets.tiny()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)

    def run(a, b):
        return npu_jax.matmul(a, b, hw=hw, tiling=TILING, trace=True)

    c, report = (jax.jit(run) if request.param else run)(a, b)
    return a, b, c, report


def test_chrome_trace(gemm, tmp_path):
    *_, report = gemm
    assert report.trace_dropped == 0
    path = report.to_chrome_trace(tmp_path / "t.json")
    events = json.loads(open(path).read())["traceEvents"]
    cyc_per_us = report.hw.clock_ghz * 1e3

    # lanes: per core (process), exactly the vendor's seven thread names, sorted in lane order
    lane_of, sort_of = {}, {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "thread_name":
            lane_of[(e["pid"], e["tid"])] = e["args"]["name"]
        if e["ph"] == "M" and e["name"] == "thread_sort_index":
            sort_of[(e["pid"], e["tid"])] = e["args"]["sort_index"]
    pids = {e["pid"] for e in events}
    assert pids == set(range(report.n_cores))
    for pid in pids:
        mine = sorted((sort_of[k], v) for k, v in lane_of.items() if k[0] == pid)
        assert [v for _, v in mine] == LANES_IN_ORDER

    # instruction slices (flag marks are zero-length slices of category "flag", see test_trace.py)
    spans = [e for e in events if e["ph"] == "X" and e["name"] not in ("SetFlag", "WaitFlag")]
    assert spans
    by_lane = collections.defaultdict(list)
    for e in spans:
        assert (e["pid"], e["tid"]) in lane_of, e
        assert e["dur"] > 0
        by_lane[(e["pid"], e["tid"])].append(e)

    # one pipe runs one instruction at a time: events on a lane never overlap
    tol = 1e-6
    for evs in by_lane.values():
        evs.sort(key=lambda e: e["ts"])
        for prev, cur in zip(evs, evs[1:]):
            assert cur["ts"] >= prev["ts"] + prev["dur"] - tol, (prev, cur)

    # busy time per lane, over all cores, is the report's pipe_busy
    dur_per_lane = collections.Counter()
    for (pid, tid), evs in by_lane.items():
        dur_per_lane[lane_of[(pid, tid)]] += sum(e["dur"] for e in evs)
    busy = report.pipe_busy
    assert list(busy) == LANES_IN_ORDER
    for lane in LANES_IN_ORDER:
        assert dur_per_lane[lane] == pytest.approx(busy[lane] / cyc_per_us, rel=1e-9, abs=1e-9), lane
    assert busy["CUBE"] > 0 and busy["MTE2"] > 0 and busy["FIXP"] > 0

    # bytes on each path: the slices' args add up to the report's bytes, and so do the counter tracks
    moved = collections.Counter()
    for e in spans:
        if "bytes" in e["args"]:
            moved[e["args"]["path"]] += e["args"]["bytes"]
    assert {p: b for p, b in report.bytes.items() if b and p in PATHS} == dict(moved)
    last = {}
    for e in events:
        if e["ph"] == "C" and e["name"].startswith("bytes "):
            last[(e["pid"], e["name"])] = e["args"]["bytes"]
    per_path = collections.Counter()
    for (_, name), total in last.items():
        per_path[name.removeprefix("bytes ")] += total
    assert per_path == moved
    # the GEMM names its tiles: every instruction after the first at_tile carries (block, k_l1)
    assert all(set(e["args"]["tile"]) == {"block", "k_l1"} for e in spans if "tile" in e["args"])
    assert sum("tile" in e["args"] for e in spans) >= len(spans) // 2

    # the last event ends at the report's total cycles
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(report.cycles / cyc_per_us, rel=1e-12)
    assert max(e["args"]["end_cycle"] for e in spans) == report.cycles


def test_plot_timeline_writes_png(gemm, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    *_, report = gemm
    path = tmp_path / "timeline.png"
    ax = report.plot_timeline(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # rows in lane order, top to bottom; consecutive instructions on a lane in alternating shades
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert lanes == [lane for lane in LANE_ORDER if lane in lanes] and "CUBE" in lanes
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # the first lane on top
    events = report.events(0)
    for lane, bars in zip(lanes, ax.collections):
        n = sum(e["lane"] == lane and e["end"] > e["start"] for e in events)
        shades = bars.get_facecolors()
        assert len(shades) == n, lane
        assert all((shades[i] != shades[i + 1]).any() for i in range(n - 1)), lane
    plt.close("all")


def test_report_figures(gemm):
    a, b, c, report = gemm
    hw = report.hw
    assert report.flops == 2 * M * N * K
    assert report.n_cores == 2
    chip = hw.peak_flops_per_cycle("fp16") * hw.num_cores
    assert report.pct_peak == pytest.approx(100.0 * report.flops / (report.cycles * chip))
    launched = hw.peak_flops_per_cycle("fp16") * report.n_cores
    assert report.pct_peak_launched == pytest.approx(100.0 * report.flops / (report.cycles * launched))
    assert 0 < report.pct_peak <= report.pct_peak_launched <= 100
    for name, r in report.ratios.items():
        assert 0.0 <= r <= 1.0, name
    assert report.bottleneck in report.pipe_busy and report.bottleneck in LANE_ORDER
    assert report.pipe_busy[report.bottleneck] == max(report.pipe_busy.values())
    s = report.summary()
    assert "mac_ratio" in s and f"{report.cycles:,}" in s
    # A is read once per block column (2 of them), B once per block row (2), 2 B per fp16 element
    assert report.bytes["GM->L1"] == (2 * M * K + 2 * K * N) * 2
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(c, np.float64), ref, rtol=2e-3, atol=2e-2)


def test_pipe_busy_speaks_lane_names(gemm):
    """Per-pipe figures are keyed by the profiler's lanes; a kernel-side pipe name gets a KeyError
    that names the lane to ask for."""
    *_, report = gemm
    busy = report.pipe_busy
    assert list(busy) == list(LANE_ORDER)
    assert set(report.ratios) == {
        "mac_ratio",
        "mte1_ratio",
        "mte2_ratio",
        "mte3_ratio",
        "fixpipe_ratio",
        "vec_ratio",
        "scalar_ratio",
    }
    for pipe, lane in LANES.items():
        if pipe != lane:
            with pytest.raises(KeyError, match=f"use '{lane}'"):
                busy[pipe]
    with pytest.raises(KeyError):
        busy["NOPE"]
    s = report.summary()
    assert "CUBE" in s and "FIXP" in s and " M " not in s

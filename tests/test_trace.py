"""Traces worth opening: flag operations recorded in the trace, and the Chrome trace's flow arrows,
lanes and counter tracks.

* On one core (no kernel, a few instructions and flags): the trace records every SetFlag and
  WaitFlag with the cycle it fired or released, and the report pairs each wait with the set it
  consumed -- including a set overwritten before its wait and a wait with nothing set.
* On the fused Conv+ReLU on the 910B (a small layer, 8 cores): the JSON's flow arrows are parsed
  back and each is checked against the SetFlag and WaitFlag slices on the right lanes of the right
  core, against a binary-semaphore replay of the flag operations in program order, and against the
  timing rule (the wait releases its lane at max(set time, the lane's own free time)).
"""

from __future__ import annotations

import collections
import json
import secrets

import numpy as np
import pytest
from conftest import make_core

import fusion
import npu_jax
from fusion.study import plot_side_by_side
from npu_jax.core import Plan
from npu_jax.core.isa.execute import charge
from npu_jax.core.pipes import LANE_ORDER, LANES
from npu_jax.hw import presets
from npu_jax.report import events as trace_events
from npu_jax.report.plot import lanes_used


def _is_flag(e) -> bool:
    """A SetFlag / WaitFlag slice (category ``flag``, or ``part/flag`` in a sequence's trace)."""
    return e["cat"].split("/")[-1] == "flag"


def _with_core_axis(trace: dict) -> dict:
    return {k: np.asarray(v)[None] for k, v in trace.items()}


def test_flag_operations_are_traced_and_paired():
    hw = presets.tiny()
    core = make_core(hw, Plan(hw), trace_capacity=32)
    core = charge(core, "MTE2", 100, "DataCopy")
    core = core.set_flag("MTE2_MTE1", 1)  # fires at 100
    core = charge(core, "MTE2", 50, "DataCopy")
    core = core.set_flag("MTE2_MTE1", 1)  # overwrites: fires at 150
    core = charge(core, "MTE1", 10, "LoadData2D")
    core = core.wait_flag("MTE2_MTE1", 1)  # MTE1 free at 10, released at 150
    core = charge(core, "MTE1", 5, "LoadData2D")  # 150..155
    core = core.set_flag("MTE1_M", 0, when=False)  # predicated off: not recorded
    core = core.set_flag("MTE1_M", 0)  # fires at 155
    core = charge(core, "M", 300, "Mmad")  # 0..300: M is behind already
    core = core.wait_flag("MTE1_M", 0)  # released at 300 (its own free time)
    core = core.wait_flag("M_FIX", 2)  # nothing set: no pair
    t = _with_core_axis(core.trace)

    sync = trace_events.sync_events(t)
    got = [(e["kind"], e["flag"], e["src"], e["dst"], e["id"], e["cycle"], e["after"]) for e in sync]
    assert got == [
        ("SetFlag", "MTE2_MTE1", "MTE2", "MTE1", 1, 100, 1),
        ("SetFlag", "MTE2_MTE1", "MTE2", "MTE1", 1, 150, 2),
        ("WaitFlag", "MTE2_MTE1", "MTE2", "MTE1", 1, 150, 3),
        ("SetFlag", "MTE1_M", "MTE1", "CUBE", 0, 155, 4),
        ("WaitFlag", "MTE1_M", "MTE1", "CUBE", 0, 300, 5),
        ("WaitFlag", "M_FIX", "CUBE", "FIXP", 2, 0, 5),  # FIXP was free: nothing held it
    ]
    flows = trace_events.pair_flows(sync)
    assert [(f["set"]["order"], f["wait"]["order"]) for f in flows] == [(1, 2), (3, 4)]
    instr = trace_events.instr_events(t)
    assert [(e["lane"], e["start"], e["end"]) for e in instr] == [
        ("MTE2", 0, 100),
        ("MTE2", 100, 150),
        ("MTE1", 0, 10),
        ("MTE1", 150, 155),
        ("CUBE", 0, 300),
    ]
    assert trace_events.dropped(t) == 0


def test_flag_trace_capacity_counts_what_it_drops():
    hw = presets.tiny()
    core = make_core(hw, Plan(hw), trace_capacity=2)
    for i in range(3):
        core = core.set_flag("V_MTE3", i).wait_flag("V_MTE3", i)
    t = _with_core_axis(core.trace)
    assert len(trace_events.sync_events(t)) == 2 and trace_events.dropped(t) == 4


@pytest.fixture(scope="module")
def fused_trace(tmp_path_factory):
    """The Chrome trace of a small fused Conv+ReLU on the 910B (fresh random data; seed printed)."""
    seed = secrets.randbits(63)
    print(f"fused conv+relu seed: {seed}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float16)  # the default Policy's operands
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float16)
    _, rep = fusion.conv_relu(x, w, padding=1, fused=True, hw=npu_jax.presets.ascend910b(), trace=True)
    path = rep.to_chrome_trace(tmp_path_factory.mktemp("trace") / "fused.json")
    return rep, json.loads(open(path).read())["traceEvents"], (x, w)


def test_fused_conv_relu_flows_pair_real_set_and_wait(fused_trace):
    rep, events, _ = fused_trace
    assert rep.trace_dropped == 0
    lane_of = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    marks = {}  # (pid, tid, ts, kind) -> flag slice
    for e in events:
        if e["ph"] == "X" and _is_flag(e):
            assert e["dur"] == 0 and e["name"] in ("SetFlag", "WaitFlag"), e
            marks.setdefault((e["pid"], e["tid"], e["ts"], e["name"]), []).append(e)
    ends = collections.defaultdict(dict)  # id -> {"s": event, "f": event}
    for e in events:
        if e["ph"] in ("s", "f"):
            assert e["ph"] not in ends[e["id"]], f"flow id {e['id']} has two {e['ph']!r} events"
            ends[e["id"]][e["ph"]] = e
    assert ends, "the fused Conv+ReLU trace has no flow arrows"

    # each flow: from a SetFlag on its source lane to a WaitFlag of the same flag and id on its
    # destination lane, of the same core, no later than the wait
    drawn = []
    for pair in ends.values():
        s, f = pair["s"], pair["f"]
        assert f.get("bp") == "e" and s["cat"] == f["cat"] == "conv/flag" and s["name"] == f["name"]
        assert s["pid"] == f["pid"] and s["ts"] <= f["ts"]
        flag, ident = s["name"].split("#")
        src, dst = flag.split("_")
        assert lane_of[(s["pid"], s["tid"])] == LANES[src] and lane_of[(f["pid"], f["tid"])] == LANES[dst]

        def same(m, flag=flag, ident=ident):
            return m["args"]["flag"] == flag and m["args"]["id"] == int(ident)

        sets = [m for m in marks.get((s["pid"], s["tid"], s["ts"], "SetFlag"), []) if same(m)]
        waits = [m for m in marks.get((f["pid"], f["tid"], f["ts"], "WaitFlag"), []) if same(m)]
        assert sets and waits, f"flow {s['name']} binds to no SetFlag / WaitFlag slice"
        drawn.append({(s["pid"], a["args"]["order"], b["args"]["order"]) for a in sets for b in waits})

    # a replay of the flag operations, per core in program order, as binary semaphores: every wait
    # that found its flag set has exactly one arrow, from the set it consumed, and nothing else does
    by_core = collections.defaultdict(list)
    for group in marks.values():
        for m in group:
            by_core[m["pid"]].append(m)
    expected = set()
    for pid, ops in by_core.items():
        pending = {}
        for m in sorted(ops, key=lambda m: m["args"]["order"]):
            key = (m["args"]["flag"], m["args"]["id"])
            if m["name"] == "SetFlag":
                pending[key] = m
            elif key in pending:
                expected.add((pid, pending.pop(key)["args"]["order"], m["args"]["order"]))
    assert len(drawn) == len(expected)
    left = set(expected)
    for candidates in sorted(drawn, key=len):
        hit = sorted(candidates & left)
        assert hit, f"a flow pairs no set/wait of the replay: {sorted(candidates)}"
        left.discard(hit[0])
    assert not left
    pairs = {
        (LANES[fl.split("_")[0]], LANES[fl.split("_")[1]])
        for fl in (p["s"]["name"].split("#")[0] for p in ends.values())
    }
    assert {("MTE2", "MTE1"), ("MTE1", "CUBE"), ("CUBE", "FIXP")} <= pairs, pairs


def test_fused_conv_relu_waits_release_at_the_right_time(fused_trace):
    """Each WaitFlag releases its lane at max(the flag's set time, the lane's own free time), and
    the lane's next instruction starts no earlier than the set it waited for."""
    rep, events, _ = fused_trace
    lane_of = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    for c in range(rep.n_cores):
        instr = [e for e in events if e["ph"] == "X" and not _is_flag(e) and e["pid"] == c]
        flags = sorted(
            (e for e in events if e["ph"] == "X" and _is_flag(e) and e["pid"] == c),
            key=lambda e: e["args"]["order"],
        )
        fired = {}  # (flag, id) -> set cycle, not yet consumed
        released = collections.defaultdict(int)  # lane -> latest release by a wait so far
        for m in flags:
            a, lane = m["args"], lane_of[(c, m["tid"])]
            key = (a["flag"], a["id"])
            if m["name"] == "SetFlag":
                fired[key] = a["cycle"]
                continue
            before = [
                e["args"]["end_cycle"]
                for e in instr
                if lane_of[(c, e["tid"])] == lane and e["args"]["seq"] < a["after"]
            ]
            free = max(before + [released[lane]])
            set_at = fired.pop(key, 0)
            assert a["cycle"] == max(free, set_at), (c, m)
            released[lane] = a["cycle"]
            nxt = [e for e in instr if lane_of[(c, e["tid"])] == lane and e["args"]["seq"] >= a["after"]]
            if nxt:
                assert min(e["args"]["start_cycle"] for e in nxt) >= set_at, (c, m)


def test_fused_conv_relu_trace_lanes_and_counters(fused_trace):
    rep, events, _ = fused_trace
    # one process per core, its lanes in lane order
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert sorted(names) == list(range(rep.n_cores))
    for pid in names:
        order = sorted(
            (e["args"]["sort_index"], e["tid"])
            for e in events
            if e.get("name") == "thread_sort_index" and e["pid"] == pid
        )
        lanes = {
            e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] == pid
        }
        assert [lanes[t] for _, t in order] == list(LANE_ORDER)
    # the counter tracks of flags set never go negative and end at zero (every set consumed)
    level = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "C" and e["name"].startswith("flags set "):
            level[(e["pid"], e["name"])].append(e["args"]["set"])
    assert level
    for track, values in level.items():
        assert min(values) >= 0 and values[-1] == 0, track
    # instructions carry the tile the conv kernel named
    tiles = [e["args"]["tile"] for e in events if e["ph"] == "X" and "tile" in e.get("args", {})]
    assert tiles and all({"item", "tile", "cout_block"} <= set(t) for t in tiles)


@pytest.mark.slow
def test_side_by_side_panels_share_axes(fused_trace, tmp_path):
    """The unfused and fused timelines: one cycle axis and the same lanes in the same rows."""
    import matplotlib

    matplotlib.use("Agg")
    rep, _, (x, w) = fused_trace
    hw = npu_jax.presets.ascend910b()
    _, unfused = fusion.conv_relu(x, w, padding=1, fused=False, hw=hw, trace=True, timing_only=True)
    fig = plot_side_by_side(unfused, rep, tmp_path / "side.png")
    a, b = fig.axes[:2]
    assert a.get_shared_x_axes().joined(a, b) and a.get_shared_y_axes().joined(a, b)
    assert a.get_xlim() == b.get_xlim() == (0, max(unfused.cycles, rep.cycles))
    assert a.get_ylim() == b.get_ylim()
    lanes = [t.get_text() for t in a.get_yticklabels()]
    assert lanes == lanes_used(unfused, rep) and {"FIXP", "VECTOR", "MTE3"} <= set(lanes)
    assert (tmp_path / "side.png").stat().st_size > 1000


def test_flag_written_with_lane_names_is_refused_with_the_pipe_names():
    hw = presets.tiny()
    core = make_core(hw, Plan(hw))
    with pytest.raises(
        ValueError, match=r"CUBE is pipe M, FIXP is pipe FIX: flags use the programming model"
    ):
        core.set_flag("CUBE_FIXP", 0)
    with pytest.raises(ValueError, match=r"VECTOR is pipe V"):
        core.pipe_barrier("VECTOR")

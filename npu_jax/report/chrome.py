"""Trace Event JSON (Perfetto, chrome://tracing) of a report's trace.

One process per core; in it one thread per lane, in :data:`~npu_jax.core.pipes.LANE_ORDER` (the
order data flows through the core; ``thread_sort_index`` pins it, so Perfetto shows the lanes in the
order of the PNG timeline). On the lanes:

* a slice per instruction (name = op), its args the cycles, its place in issue order (``seq``), the
  bytes it moved and on which path, the tile coordinates the kernel named (``core.at_tile``) and,
  in a sequence, the part;
* a zero-length ``SetFlag`` slice on the source lane when the flag fired and a ``WaitFlag`` slice on
  the destination lane when it released that lane, both with category ``flag`` (``part/flag`` in a
  sequence, as instructions' categories are ``part/lane``), and a flow arrow
  (``ph`` ``s`` -> ``f``) from each SetFlag to the WaitFlag that consumed it (same pid, tid, ts and
  category as the two slices, which is how trace viewers bind a flow to its slices); their args give
  the flag, its id, the cycle, their place in program order (``order``) and the instructions issued
  before them (``after``, comparable with the slices' ``seq``);
* counter tracks per core: ``bytes <path>``, the bytes moved on each data path so far (stepping at
  each instruction's end), and ``flags set <SRC_DST>``, the flags of each pair set and not yet waited
  for -- for a queue, how many of its buffer slots are full (forward flags) or free (backward).

Times are microseconds at the preset's clock; every event's args also give cycles.
"""

from __future__ import annotations

import collections
import json
import os

from npu_jax.core.pipes import LANE_ORDER

FLAG_CAT = "flag"


def _meta(pid: int, name: str, args: dict, tid: int = 0) -> dict:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _counters(pid: int, name: str, key: str, steps, us) -> list[dict]:
    """Counter events of a running total: ``steps`` are (cycle, order, delta)."""
    out, total = [], 0
    for cycle, _, delta in sorted(steps):
        total += delta
        out.append({"ph": "C", "name": name, "pid": pid, "ts": us(cycle), "args": {key: total}})
    return out


def core_events(rep, c: int, flow_base: int = 0) -> list[dict]:
    """The Trace Event dicts of core ``c`` of ``rep`` (a Report or SequenceReport); flow ids start
    after ``flow_base``."""
    cyc_per_us = rep.hw.clock_ghz * 1e3

    def us(cycle):
        return cycle / cyc_per_us

    tid = {lane: i for i, lane in enumerate(LANE_ORDER)}
    out = [
        _meta(c, "process_name", {"name": f"{rep.name} core {c}"}),
        _meta(c, "process_sort_index", {"sort_index": c}),
    ]
    for lane, t in tid.items():
        out.append(_meta(c, "thread_name", {"name": lane}, t))
        out.append(_meta(c, "thread_sort_index", {"sort_index": t}, t))
    moved = collections.defaultdict(list)
    for ev in rep.events(c):
        if ev["end"] <= ev["start"]:
            continue
        part = {"part": ev["part"]} if "part" in ev else {}
        args = {**part, "start_cycle": ev["start"], "end_cycle": ev["end"], "seq": ev["seq"]}
        if ev["path"]:
            args.update(bytes=ev["bytes"], path=ev["path"])
            moved[ev["path"]].append((ev["end"], ev["seq"], ev["bytes"]))
        if ev["tile"]:
            args["tile"] = ev["tile"]
        out.append(
            {
                "ph": "X",
                "name": ev["op"],
                "cat": "/".join([*part.values(), ev["lane"]]),
                "pid": c,
                "tid": tid[ev["lane"]],
                "ts": us(ev["start"]),
                "dur": us(ev["end"] - ev["start"]),
                "args": args,
            }
        )
    pending = collections.defaultdict(list)
    for ev in rep.sync_events(c):
        lane = ev["src"] if ev["kind"] == "SetFlag" else ev["dst"]
        part = {"part": ev["part"]} if "part" in ev else {}
        out.append(
            {
                "ph": "X",
                "name": ev["kind"],
                "cat": "/".join([*part.values(), FLAG_CAT]),
                "pid": c,
                "tid": tid[lane],
                "ts": us(ev["cycle"]),
                "dur": 0,
                "args": {
                    **part,
                    "flag": ev["flag"],
                    "id": ev["id"],
                    "cycle": ev["cycle"],
                    "after": ev["after"],
                    "order": ev["order"],
                },
            }
        )
    for k, f in enumerate(rep.flows(c), start=flow_base + 1):
        s, w = f["set"], f["wait"]
        cat = "/".join([*([s["part"]] if "part" in s else []), FLAG_CAT])
        common = {"name": f"{s['flag']}#{s['id']}", "cat": cat, "id": k, "pid": c}
        out.append({**common, "ph": "s", "tid": tid[s["src"]], "ts": us(s["cycle"])})
        out.append({**common, "ph": "f", "bp": "e", "tid": tid[w["dst"]], "ts": us(w["cycle"])})
        pending[s["flag"]] += [(s["cycle"], s["order"], 1), (w["cycle"], w["order"], -1)]
    for path, steps in moved.items():
        out += _counters(c, f"bytes {path}", "bytes", steps, us)
    for flag, steps in pending.items():
        out += _counters(c, f"flags set {flag}", "set", steps, us)
    return out


def write_chrome_trace(rep, path: str | os.PathLike, cores: list[int] | None = None) -> str:
    """Trace Event JSON of any report with ``hw``, ``name``, ``cycles``, ``n_cores``,
    ``events(core)``, ``sync_events(core)`` and ``flows(core)`` (a Report, or a SequenceReport whose
    events name their ``part``)."""
    out: list[dict] = []
    for c in cores if cores is not None else range(rep.n_cores):
        out += core_events(rep, c, flow_base=sum(e["ph"] == "s" for e in out))
    with open(path, "w") as f:
        json.dump(
            {
                "traceEvents": out,
                "displayTimeUnit": "ns",
                "otherData": {"hw": rep.hw.name, "kernel": rep.name, "cycles": rep.cycles},
            },
            f,
        )
    return os.fspath(path)


__all__ = ["FLAG_CAT", "core_events", "write_chrome_trace"]
